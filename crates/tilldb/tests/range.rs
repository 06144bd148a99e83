//! Lazy range iterators (issue 20, item 1): the same entries as the `Vec` scans for every
//! bound, direction, prefix and table; one snapshot across batches while writers commit;
//! an iterator that outlives many commits still sees the state it was made in.

use std::collections::BTreeMap;
use std::ops::Bound;
use tilldb::{Db, Direction, Options};

/// A lower and an upper bound.
type KeyRange<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);

fn key(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// 2,000 keys in the default table (more than several batches of 256) and 300 in "t".
fn populated() -> (tempfile::TempDir, Db, BTreeMap<Vec<u8>, Vec<u8>>) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = Db::open(tmp.path(), Options::for_tests()).expect("open");
    let mut model = BTreeMap::new();
    for chunk in 0..20u32 {
        let mut txn = db.begin().expect("begin");
        for i in chunk * 100..(chunk + 1) * 100 {
            let value = format!("v{i}").into_bytes();
            txn.put(&key(i), &value).expect("put");
            model.insert(key(i), value);
            if i < 300 {
                txn.put_in("t", &key(i), b"t").expect("put");
            }
        }
        txn.commit().expect("commit");
    }
    (tmp, db, model)
}

/// The model's entries between the bounds, in `direction`'s order.
fn expected_in(
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    bounds: KeyRange<'_>,
    direction: Direction,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut expected: Vec<_> = model
        .range::<[u8], _>(bounds)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if direction == Direction::Backward {
        expected.reverse();
    }
    expected
}

fn collect(range: tilldb::Range<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
    range.collect::<Result<_, _>>().expect("the range reads")
}

#[test]
fn ranges_return_what_the_vec_scans_return_for_every_bound_and_direction() {
    let (_tmp, db, model) = populated();
    let bounds: Vec<KeyRange<'_>> = vec![
        (Bound::Unbounded, Bound::Unbounded),
        (Bound::Included(b"k00100"), Bound::Excluded(b"k01900")),
        (Bound::Excluded(b"k00100"), Bound::Included(b"k01900")),
        (Bound::Included(b"k00500"), Bound::Unbounded),
        (Bound::Unbounded, Bound::Excluded(b"k00257")),
        (Bound::Included(b"z"), Bound::Unbounded),
    ];
    for (lower, upper) in bounds {
        for direction in [Direction::Forward, Direction::Backward] {
            let lazy = collect(db.range(lower, upper, direction).expect("range"));
            let eager = db.scan(lower, upper, direction).expect("scan");
            assert_eq!(lazy, eager, "{lower:?}..{upper:?} {direction:?}");
            let mut range = db.range(lower, upper, direction).expect("range");
            let mut borrowed = Vec::new();
            while let Some(entry) = range.next_entry() {
                let (k, v) = entry.expect("the range reads");
                borrowed.push((k.to_vec(), v.to_vec()));
            }
            assert!(range.next().is_none(), "an ended range stays ended");
            assert_eq!(
                borrowed, lazy,
                "next_entry, {lower:?}..{upper:?} {direction:?}"
            );
            let expected = expected_in(&model, (lower, upper), direction);
            assert_eq!(
                lazy, expected,
                "{lower:?}..{upper:?} {direction:?} against the model"
            );
        }
    }
    let by_prefix = collect(db.prefix(b"k001", Direction::Forward).expect("prefix"));
    assert_eq!(by_prefix.len(), 100);
    assert!(by_prefix.iter().all(|(k, _)| k.starts_with(b"k001")));
    let backward = collect(db.prefix(b"k001", Direction::Backward).expect("prefix"));
    assert_eq!(backward.first().map(|(k, _)| k.clone()), Some(key(199)));
    assert_eq!(
        collect(db.prefix_in("t", b"k", Direction::Forward).expect("t")).len(),
        300
    );
    assert!(
        collect(
            db.range_in(
                "missing",
                Bound::Unbounded,
                Bound::Unbounded,
                Direction::Forward
            )
            .expect("no table")
        )
        .is_empty()
    );
    db.close().expect("close");
}

#[test]
fn a_range_reads_one_snapshot_across_batches_while_writers_commit() {
    // Backward first: its batches meet the overlay's changes from the other end.
    for direction in [Direction::Backward, Direction::Forward] {
        let (_tmp, db, model) = populated();
        let mut range = db
            .range(Bound::Unbounded, Bound::Unbounded, direction)
            .expect("range");
        // Read part of the first batch, then change everything around the iterator.
        let mut seen: Vec<(Vec<u8>, Vec<u8>)> =
            range.by_ref().take(10).map(|e| e.expect("read")).collect();
        for round in 0..5u32 {
            let mut txn = db.begin().expect("begin");
            for i in (round..2000).step_by(7) {
                if i % 3 == 0 {
                    txn.delete(&key(i)).expect("delete");
                } else {
                    txn.put(&key(i), b"changed").expect("put");
                }
            }
            txn.put(format!("k{:05}a", round * 400).as_bytes(), b"new")
                .expect("insert");
            txn.commit().expect("commit");
        }
        // The rest through the borrowing form, half of it.
        let mut rest = 0;
        while let Some(entry) = range.next_entry() {
            let (k, v) = entry.expect("read");
            seen.push((k.to_vec(), v.to_vec()));
            rest += 1;
            if rest == 700 {
                break;
            }
        }
        seen.extend(range.map(|e| e.expect("read")));
        let expected = expected_in(&model, (Bound::Unbounded, Bound::Unbounded), direction);
        assert_eq!(seen.len(), expected.len(), "{direction:?}");
        assert!(
            seen == expected,
            "{direction:?}: the range saw a commit made after it"
        );
        db.close().expect("close");
    }
    let (_tmp, db, _) = populated();
    // A read transaction's ranges share its snapshot.
    let reader = db.begin_read().expect("read txn");
    let before = collect(
        reader
            .range(Bound::Unbounded, Bound::Unbounded, Direction::Backward)
            .expect("range"),
    );
    let mut txn = db.begin().expect("begin");
    txn.put(b"k99999", b"late").expect("put");
    txn.commit().expect("commit");
    let after = collect(
        reader
            .range(Bound::Unbounded, Bound::Unbounded, Direction::Backward)
            .expect("range"),
    );
    assert_eq!(before, after);
    assert!(!after.iter().any(|(k, _)| k == b"k99999"));
    drop(reader);
    assert!(
        collect(db.prefix(b"k9", Direction::Forward).expect("prefix"))
            .iter()
            .any(|(k, _)| k == b"k99999")
    );
    db.close().expect("close");
}

#[test]
fn delete_range_removes_exactly_the_range_atomically_and_tables_count_their_entries() {
    let (_tmp, db, mut model) = populated();
    let reader = db.begin_read().expect("an older snapshot");
    // A transaction's own puts inside the range go too; those outside stay.
    let mut txn = db.begin().expect("begin");
    txn.put(b"k00150x", b"own, inside").expect("put");
    txn.put(b"k01950x", b"own, outside").expect("put");
    let deleted = txn
        .delete_range(Bound::Included(b"k00100"), Bound::Excluded(b"k00200"))
        .expect("delete range");
    assert_eq!(deleted, 101, "100 committed keys and one own put");
    txn.rollback();
    assert_eq!(
        db.get(&key(150)).expect("get"),
        Some(b"v150".to_vec()),
        "rolled back"
    );

    let mut txn = db.begin().expect("begin");
    txn.put(b"k01950x", b"own, outside").expect("put");
    let deleted = txn
        .delete_range(Bound::Included(b"k00100"), Bound::Excluded(b"k00200"))
        .expect("delete range");
    assert_eq!(deleted, 100);
    txn.commit().expect("commit");
    model.retain(|k, _| {
        !(k.as_slice() >= b"k00100".as_slice() && k.as_slice() < b"k00200".as_slice())
    });
    model.insert(b"k01950x".to_vec(), b"own, outside".to_vec());
    let now = collect(
        db.range(Bound::Unbounded, Bound::Unbounded, Direction::Forward)
            .expect("range"),
    );
    assert!(
        now == model.clone().into_iter().collect::<Vec<_>>(),
        "the range is gone, nothing else"
    );
    // The older snapshot still sees every key.
    assert_eq!(
        collect(reader.prefix(b"k001", Direction::Forward).expect("prefix")).len(),
        100
    );
    drop(reader);
    // An empty range deletes nothing; a table that does not exist neither.
    let mut txn = db.begin().expect("begin");
    assert_eq!(
        txn.delete_range(Bound::Included(b"z"), Bound::Unbounded)
            .expect("empty"),
        0
    );
    assert_eq!(
        txn.delete_range_in("missing", Bound::Unbounded, Bound::Unbounded)
            .expect("missing"),
        0
    );
    txn.rollback();
    assert_eq!(
        db.table_entries().expect("counts"),
        vec![(String::new(), model.len() as u64), ("t".to_string(), 300)]
    );
    db.close().expect("close");
}

/// `ReadTxn::get_with` lends what `get` returns: every key of both tables, absent keys and
/// tables, an overflow value; and for a snapshot older than a commit (the overlay then holds
/// what it needs, so the value is not read in place) the value of its own time.
#[test]
fn get_with_lends_what_get_returns_in_every_snapshot() {
    let (_tmp, db, model) = populated();
    let big = vec![9u8; 40_000];
    let mut txn = db.begin().expect("begin");
    txn.put(b"big", &big).expect("put");
    txn.commit().expect("commit");
    let read = db.begin_read().expect("begin_read");
    for (k, v) in &model {
        assert_eq!(
            read.get_with(k, <[u8]>::to_vec).expect("get_with").as_ref(),
            Some(v)
        );
    }
    for i in 0..300 {
        assert_eq!(
            read.get_in_with("t", &key(i), <[u8]>::to_vec)
                .expect("get_in_with"),
            read.get_in("t", &key(i)).expect("get_in")
        );
    }
    let mut called = false;
    let absent = read
        .get_with(b"absent", |_| called = true)
        .expect("get_with");
    assert!(
        absent.is_none() && !called,
        "f was called for an absent key"
    );
    assert_eq!(
        read.get_in_with("no-such-table", &key(1), <[u8]>::to_vec)
            .expect("no table"),
        None
    );
    assert_eq!(
        read.get_with(b"big", <[u8]>::len).expect("overflow"),
        Some(big.len())
    );
    assert_eq!(
        read.get_with(b"big", |v| v == big.as_slice())
            .expect("overflow"),
        Some(true)
    );
    // A commit after the snapshot: it keeps its own values, a new snapshot sees the new ones.
    let mut txn = db.begin().expect("begin");
    txn.put(&key(7), b"changed").expect("put");
    txn.delete(&key(8)).expect("delete");
    txn.put(b"new", b"new").expect("put");
    txn.commit().expect("commit");
    for (k, want) in [
        (key(7), Some(model[&key(7)].clone())),
        (key(8), Some(model[&key(8)].clone())),
        (b"new".to_vec(), None),
    ] {
        assert_eq!(
            read.get_with(&k, <[u8]>::to_vec).expect("old snapshot"),
            want,
            "{:?} in the older snapshot",
            String::from_utf8_lossy(&k)
        );
    }
    let now = db.begin_read().expect("begin_read");
    assert_eq!(
        now.get_with(&key(7), <[u8]>::to_vec).expect("new"),
        Some(b"changed".to_vec())
    );
    assert_eq!(now.get_with(&key(8), <[u8]>::len).expect("new"), None);
    drop(read);
    assert_eq!(
        now.get_with(b"new", <[u8]>::to_vec).expect("new"),
        Some(b"new".to_vec())
    );
}

#[test]
fn a_range_reading_a_leaf_in_place_does_not_see_a_commit_that_rewrites_that_leaf() {
    // A range reads its first leaf in place, from a copy of the page that shares its bytes:
    // the commit below rewrites every entry of that leaf (and moves its cells by growing
    // them), and the page must copy its bytes before it changes, or the range reads the
    // commit's values, or cells that moved, mid-leaf.
    for direction in [Direction::Forward, Direction::Backward] {
        let (_tmp, db, model) = populated();
        let mut range = db
            .range(Bound::Unbounded, Bound::Unbounded, direction)
            .expect("range");
        let first = range.next().expect("an entry").expect("read");
        let mut txn = db.begin().expect("begin");
        for i in 0..2000 {
            txn.put(&key(i), &[b'x'; 40]).expect("put");
        }
        txn.commit().expect("commit");
        let mut seen = vec![first];
        seen.extend(range.map(|entry| entry.expect("read")));
        let expected = expected_in(&model, (Bound::Unbounded, Bound::Unbounded), direction);
        assert_eq!(seen.len(), expected.len(), "{direction:?}");
        for (got, want) in seen.iter().zip(&expected) {
            assert_eq!(
                got, want,
                "{direction:?}: the range saw the commit made after it"
            );
        }
        db.close().expect("close");
    }
}

#[test]
fn ranges_read_past_overflow_values_as_they_read_inline_ones() {
    // Leaves read in place stop at an overflow value; the cursor reads on past it. Every
    // bound and direction yields what the model holds, values of both kinds in any order.
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = Db::open(tmp.path(), Options::for_tests()).expect("open");
    let mut model = BTreeMap::new();
    let mut txn = db.begin().expect("begin");
    for i in 0..600u32 {
        let len = if i % 7 == 3 || (100..104).contains(&i) {
            6000
        } else {
            20
        };
        let value: Vec<u8> = (0..len).map(|b: u32| (b ^ i).to_le_bytes()[0]).collect();
        txn.put(&key(i), &value).expect("put");
        model.insert(key(i), value);
    }
    txn.commit().expect("commit");
    let bounds: Vec<KeyRange<'_>> = vec![
        (Bound::Unbounded, Bound::Unbounded),
        (Bound::Included(b"k00003"), Bound::Included(b"k00103")),
        (Bound::Excluded(b"k00003"), Bound::Excluded(b"k00103")),
        (Bound::Included(b"k00099"), Bound::Unbounded),
        (Bound::Unbounded, Bound::Included(b"k00104")),
    ];
    for (lower, upper) in bounds {
        for direction in [Direction::Forward, Direction::Backward] {
            let mut range = db.range(lower, upper, direction).expect("range");
            let mut got = Vec::new();
            while let Some(entry) = range.next_entry() {
                let (k, v) = entry.expect("the range reads");
                got.push((k.to_vec(), v.to_vec()));
            }
            let expected = expected_in(&model, (lower, upper), direction);
            assert_eq!(
                got.len(),
                expected.len(),
                "{lower:?}..{upper:?} {direction:?}"
            );
            assert!(got == expected, "{lower:?}..{upper:?} {direction:?}");
        }
    }
    db.close().expect("close");
}
