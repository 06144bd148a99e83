//! A write transaction's lazy ranges (`Txn::range`, `first`/`last`, `pop_first`/`pop_last`,
//! `retain_in`, `extract_if_in`): against a map of what the transaction sees, for committed
//! rows, own puts and deletes over them, and a write set spilled to disk; and a queue taken
//! from its head, whose pops cost the same however many came before.

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::ops::Bound;
use tilldb::{Db, Direction, Options, Txn};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// A database with `rows` keys (every third one) in the default table and in "t", committed.
fn committed(options: Options, rows: u32) -> (tempfile::TempDir, Db, Model) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = Db::open(tmp.path(), options).expect("open");
    let mut model = Model::new();
    let mut txn = db.begin().expect("begin");
    for i in (0..rows * 3).step_by(3) {
        let value = format!("c{i}").into_bytes();
        txn.put(&key(i), &value).expect("put");
        txn.put_in("t", &key(i), b"other table").expect("put");
        model.insert(key(i), value);
    }
    txn.commit().expect("commit");
    (tmp, db, model)
}

fn expected(model: &Model, lower: &Bound<Vec<u8>>, upper: &Bound<Vec<u8>>, d: Direction) -> Model2 {
    // Filtered, not `BTreeMap::range`, which panics on bounds the wrong way round (a range
    // of the transaction is empty there).
    let bounds = (lower.clone(), upper.clone());
    let mut out: Vec<_> = model
        .iter()
        .filter(|(k, _)| std::ops::RangeBounds::contains(&bounds, *k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if d == Direction::Backward {
        out.reverse();
    }
    out
}

type Model2 = Vec<(Vec<u8>, Vec<u8>)>;

fn read(txn: &mut Txn<'_>, lower: &Bound<Vec<u8>>, upper: &Bound<Vec<u8>>, d: Direction) -> Model2 {
    txn.range(
        lower.as_ref().map(Vec::as_slice),
        upper.as_ref().map(Vec::as_slice),
        d,
    )
    .expect("range")
    .collect::<Result<_, _>>()
    .expect("the range reads")
}

#[derive(Debug, Clone)]
enum Op {
    Put(u32),
    Delete(u32),
    Range(Bound<u32>, Bound<u32>, bool),
    PopFirst,
    PopLast,
    First,
    Last,
    /// Removes the keys whose number is divisible by this, between two bounds.
    Retain(Bound<u32>, Bound<u32>, u32),
    Extract(Bound<u32>, Bound<u32>, u32),
}

fn bound() -> impl Strategy<Value = Bound<u32>> {
    prop_oneof![
        Just(Bound::Unbounded),
        (0..320u32).prop_map(Bound::Included),
        (0..320u32).prop_map(Bound::Excluded),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..320u32).prop_map(Op::Put),
        4 => (0..320u32).prop_map(Op::Delete),
        3 => (bound(), bound(), any::<bool>()).prop_map(|(l, u, b)| Op::Range(l, u, b)),
        3 => Just(Op::PopFirst),
        2 => Just(Op::PopLast),
        1 => Just(Op::First),
        1 => Just(Op::Last),
        1 => (bound(), bound(), 2..5u32).prop_map(|(l, u, m)| Op::Retain(l, u, m)),
        1 => (bound(), bound(), 2..5u32).prop_map(|(l, u, m)| Op::Extract(l, u, m)),
    ]
}

fn keys(b: Bound<u32>) -> Bound<Vec<u8>> {
    b.map(key)
}

fn number(k: &[u8]) -> u32 {
    std::str::from_utf8(&k[1..])
        .expect("utf-8")
        .parse()
        .expect("a number")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Every read of the transaction equals the map of what it sees: committed rows, its
    /// own puts and deletes, pops, retains and extracts; with a write set in memory and one
    /// spilled to runs on disk every few writes. "t" is never touched, and after the commit
    /// the database holds the map.
    #[test]
    fn a_write_transaction_reads_what_a_map_of_its_writes_over_the_table_holds(
        ops in prop::collection::vec(op(), 1..120),
        spill in any::<bool>(),
    ) {
        let mut options = Options::for_tests();
        // Spilled: values of 3 KB in a write set of 64 KiB (the least), a run on disk every
        // 20 puts or so.
        let pad = if spill { 3000 } else { 0 };
        if spill {
            options.write_set_bytes = 64 << 10;
        }
        let (_tmp, db, mut model) = committed(options, 100);
        let mut txn = db.begin().expect("begin");
        for (n, op) in ops.into_iter().enumerate() {
            match op {
                Op::Put(i) => {
                    let mut value = format!("p{n}").into_bytes();
                    value.resize(pad.max(value.len()), b'.');
                    txn.put(&key(i), &value).expect("put");
                    model.insert(key(i), value);
                }
                Op::Delete(i) => {
                    txn.delete(&key(i)).expect("delete");
                    model.remove(&key(i));
                }
                Op::Range(l, u, back) => {
                    let d = if back { Direction::Backward } else { Direction::Forward };
                    let (l, u) = (keys(l), keys(u));
                    prop_assert_eq!(read(&mut txn, &l, &u, d), expected(&model, &l, &u, d));
                }
                Op::PopFirst => {
                    let want = model.pop_first();
                    prop_assert_eq!(txn.pop_first().expect("pop"), want);
                }
                Op::PopLast => {
                    let want = model.pop_last();
                    prop_assert_eq!(txn.pop_last().expect("pop"), want);
                }
                Op::First => {
                    let want = model.first_key_value().map(|(k, v)| (k.clone(), v.clone()));
                    prop_assert_eq!(txn.first().expect("first"), want);
                }
                Op::Last => {
                    let want = model.last_key_value().map(|(k, v)| (k.clone(), v.clone()));
                    prop_assert_eq!(txn.last().expect("last"), want);
                }
                Op::Retain(l, u, m) => {
                    let (l, u) = (keys(l), keys(u));
                    let doomed: Vec<_> = expected(&model, &l, &u, Direction::Forward)
                        .into_iter()
                        .filter(|(k, _)| number(k).is_multiple_of(m))
                        .collect();
                    let removed = txn
                        .retain_in("", l.as_ref().map(Vec::as_slice), u.as_ref().map(Vec::as_slice), |k, _| !number(k).is_multiple_of(m))
                        .expect("retain");
                    prop_assert_eq!(removed, doomed.len() as u64);
                    for (k, _) in doomed {
                        model.remove(&k);
                    }
                }
                Op::Extract(l, u, m) => {
                    let (l, u) = (keys(l), keys(u));
                    let want: Vec<_> = expected(&model, &l, &u, Direction::Forward)
                        .into_iter()
                        .filter(|(k, _)| number(k).is_multiple_of(m))
                        .collect();
                    let got = txn
                        .extract_if_in("", l.as_ref().map(Vec::as_slice), u.as_ref().map(Vec::as_slice), |k, _| number(k).is_multiple_of(m))
                        .expect("extract");
                    for (k, _) in &want {
                        model.remove(k);
                    }
                    prop_assert_eq!(got, want);
                }
            }
        }
        let all = (Bound::Unbounded, Bound::Unbounded);
        prop_assert_eq!(read(&mut txn, &all.0, &all.1, Direction::Forward), expected(&model, &all.0, &all.1, Direction::Forward));
        txn.commit().expect("commit");
        let after: Model = db.scan(Bound::Unbounded, Bound::Unbounded, Direction::Forward)
            .expect("scan")
            .into_iter()
            .collect();
        prop_assert_eq!(after, model);
        prop_assert_eq!(db.len_in("t").expect("len"), 100);
    }
}

/// An operation at a table's ends, for the read-ahead test.
#[derive(Debug, Clone)]
enum EndOp {
    PopFirst,
    PopLast,
    First,
    Last,
    /// A put of the key this many steps above (below, if negative) the first key the model
    /// holds: among or just past the entries a pop read ahead.
    PutNearHead(i32, bool),
    /// A put near the last key, as above.
    PutNearTail(i32, bool),
    /// A delete of the model's n-th key from the head (or from the tail).
    DeleteNth(usize, bool),
    /// A value of 40 KB: a read ahead stops at its byte limit.
    PutLarge(u32),
    /// The table "q" dropped.
    DropQ,
}

fn end_op() -> impl Strategy<Value = EndOp> {
    prop_oneof![
        8 => Just(EndOp::PopFirst),
        6 => Just(EndOp::PopLast),
        2 => Just(EndOp::First),
        2 => Just(EndOp::Last),
        2 => (-3..70i32, any::<bool>()).prop_map(|(d, b)| EndOp::PutNearHead(d, b)),
        2 => (-3..70i32, any::<bool>()).prop_map(|(d, b)| EndOp::PutNearTail(d, b)),
        2 => (0..70usize, any::<bool>()).prop_map(|(n, b)| EndOp::DeleteNth(n, b)),
        1 => (0..320u32).prop_map(EndOp::PutLarge),
        1 => Just(EndOp::DropQ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Pops read entries ahead of an end (`txn/edges.rs`); whatever the transaction writes
    /// among them, before them or just past them, and a drop of another table, every pop,
    /// first and last still equals the map's, and the commit leaves the map.
    #[test]
    fn pops_that_read_ahead_see_every_write_made_among_the_entries_read(
        ops in prop::collection::vec(end_op(), 1..300),
    ) {
        let (_tmp, db, mut model) = committed(Options::for_tests(), 200);
        let mut txn = db.begin().expect("begin");
        txn.put_in("q", b"q", b"q").expect("put");
        let near = |model: &Model, from_head: bool, steps: i32| -> u32 {
            let edge = if from_head { model.keys().next() } else { model.keys().next_back() };
            let at = edge.map_or(300, |k| number(k));
            u32::try_from((i64::from(at) + i64::from(steps)).clamp(0, 999)).expect("in range")
        };
        for (n, op) in ops.into_iter().enumerate() {
            match op {
                EndOp::PopFirst => prop_assert_eq!(txn.pop_first().expect("pop"), model.pop_first()),
                EndOp::PopLast => prop_assert_eq!(txn.pop_last().expect("pop"), model.pop_last()),
                EndOp::First => {
                    let want = model.first_key_value().map(|(k, v)| (k.clone(), v.clone()));
                    prop_assert_eq!(txn.first().expect("first"), want);
                }
                EndOp::Last => {
                    let want = model.last_key_value().map(|(k, v)| (k.clone(), v.clone()));
                    prop_assert_eq!(txn.last().expect("last"), want);
                }
                EndOp::PutNearHead(steps, delete) | EndOp::PutNearTail(steps, delete) => {
                    let head = matches!(op, EndOp::PutNearHead(..));
                    let i = near(&model, head, if head { steps } else { -steps });
                    if delete {
                        txn.delete(&key(i)).expect("delete");
                        model.remove(&key(i));
                    } else {
                        let value = format!("n{n}").into_bytes();
                        txn.put(&key(i), &value).expect("put");
                        model.insert(key(i), value);
                    }
                }
                EndOp::DeleteNth(nth, from_head) => {
                    let found = if from_head { model.keys().nth(nth) } else { model.keys().nth_back(nth) };
                    if let Some(k) = found.cloned() {
                        txn.delete(&k).expect("delete");
                        model.remove(&k);
                    }
                }
                EndOp::PutLarge(i) => {
                    let value = vec![b'L'; 40_000];
                    txn.put(&key(i), &value).expect("put");
                    model.insert(key(i), value);
                }
                EndOp::DropQ => {
                    txn.drop_table("q").expect("drop");
                }
            }
        }
        txn.commit().expect("commit");
        let after: Model = db.scan(Bound::Unbounded, Bound::Unbounded, Direction::Forward)
            .expect("scan")
            .into_iter()
            .collect();
        prop_assert_eq!(after, model);
    }
}

/// A queue of 20,000 entries, its head taken 4,000 times in one transaction and then 200
/// times in transactions of their own: each pop pins as many pages as the first did (a
/// descent), not more with each key popped before it. Were a pop to read from the table's
/// start, the last pops of the transaction would pass over the 3,000 deleted keys before them.
#[test]
fn a_queue_popped_from_its_head_costs_a_descent_a_pop_however_many_came_before() {
    let (_tmp, db, mut model) = committed(Options::for_tests(), 20_000);
    let pins = || {
        let pool = db.stats().pool;
        pool.hits + pool.misses
    };
    let mut txn = db.begin().expect("begin");
    let mut per_thousand = Vec::new();
    for _ in 0..4 {
        let before = pins();
        for _ in 0..1000 {
            let popped = txn.pop_first().expect("pop");
            assert_eq!(popped, model.pop_first());
        }
        per_thousand.push(pins() - before);
    }
    txn.commit().expect("commit");
    let first = per_thousand[0];
    for (i, &n) in per_thousand.iter().enumerate() {
        assert!(
            n <= first + first / 4 + 50,
            "pins per 1,000 pops grew: {per_thousand:?} (thousand {i})"
        );
    }
    assert!(
        first <= 8 * 1000,
        "a pop pinned more than 8 pages: {first} pins for 1,000 pops"
    );
    let before = pins();
    for _ in 0..200 {
        let mut txn = db.begin().expect("begin");
        assert_eq!(txn.pop_first().expect("pop"), model.pop_first());
        assert_eq!(txn.pop_last().expect("pop"), model.pop_last());
        txn.commit().expect("commit");
    }
    let per_txn = (pins() - before) / 200;
    assert!(
        per_txn <= 64,
        "a transaction of two pops pinned {per_txn} pages"
    );
    assert_eq!(db.len().expect("len"), model.len() as u64);
}

/// The edges a pop learns are forgotten by a put beyond them: a key put before the head
/// after pops is the next first, and one put past the tail the next last.
#[test]
fn a_key_put_before_the_popped_head_is_the_next_first() {
    let (_tmp, db, _model) = committed(Options::for_tests(), 100);
    let mut txn = db.begin().expect("begin");
    for _ in 0..10 {
        txn.pop_first().expect("pop");
        txn.pop_last().expect("pop");
    }
    txn.put(b"a", b"before").expect("put");
    txn.put(b"z", b"after").expect("put");
    assert_eq!(
        txn.first().expect("first"),
        Some((b"a".to_vec(), b"before".to_vec()))
    );
    assert_eq!(
        txn.last().expect("last"),
        Some((b"z".to_vec(), b"after".to_vec()))
    );
    assert_eq!(
        txn.pop_first().expect("pop"),
        Some((b"a".to_vec(), b"before".to_vec()))
    );
    assert_eq!(txn.first().expect("first").map(|e| e.0), Some(key(30)));
    // A key put between the edges changes neither.
    txn.put(&key(31), b"inside").expect("put");
    assert_eq!(txn.first().expect("first").map(|e| e.0), Some(key(30)));
    // A range from before the head sees the put at the head's key again.
    txn.delete(&key(30)).expect("delete");
    txn.put(&key(30), b"again").expect("put");
    let all: Vec<_> = txn
        .range(
            Bound::Unbounded,
            Bound::Included(&key(31)),
            Direction::Forward,
        )
        .expect("range")
        .map(|e| e.expect("read").0)
        .collect();
    assert_eq!(all, vec![key(30), key(31)]);
    // The head known (key 30, seen), a range that excludes that very key does not see it.
    assert_eq!(txn.first().expect("first").map(|e| e.0), Some(key(30)));
    let past: Vec<_> = txn
        .range(
            Bound::Excluded(&key(30)),
            Bound::Included(&key(33)),
            Direction::Forward,
        )
        .expect("range")
        .map(|e| e.expect("read").0)
        .collect();
    assert_eq!(past, vec![key(31), key(33)]);
}

/// A write transaction's range reads the tree a leaf at a time, so nothing may commit between
/// its leaves: `range_in` takes the writer lock (as any read of a write transaction does),
/// and another transaction's commit waits for this one to end. Without it the commit went
/// through in the middle of the range, which then showed the commit's key and not the row it
/// deleted (mutant `txn-range-unlatched`).
#[test]
fn a_commit_changes_the_tree_between_the_leaves_of_a_write_transactions_range() {
    let (_tmp, db, model) = committed(Options::for_tests(), 3_000);
    let late = key(3 * 3_000 + 1);
    let gone = key(3 * 2_990);
    std::thread::scope(|s| {
        let mut txn = db.begin().expect("begin");
        let mut range = txn
            .range(Bound::Unbounded, Bound::Unbounded, Direction::Forward)
            .expect("range");
        let first = range.next().expect("a first row").expect("reads");
        assert_eq!(first.0, key(0));
        let other = s.spawn(|| {
            let mut txn = db.begin().expect("begin");
            txn.put(&late, b"committed during the range").expect("put");
            txn.delete(&gone).expect("delete");
            txn.commit()
        });
        // Either it waits for the writer lock, or (the bug) it got through.
        while !other.is_finished() && db.commits_waiting_for_the_writer() == 0 {
            std::thread::yield_now();
        }
        let rest: Vec<_> = range.collect::<Result<_, _>>().expect("the range reads");
        let want: Vec<_> = model.into_iter().skip(1).collect();
        assert!(
            rest == want,
            "the range saw another transaction's commit: {} rows where {} were committed \
             before it began, the late key {}, the deleted one {}",
            rest.len(),
            want.len(),
            if rest.iter().any(|(k, _)| *k == late) {
                "seen"
            } else {
                "not seen"
            },
            if rest.iter().any(|(k, _)| *k == gone) {
                "still there"
            } else {
                "gone"
            },
        );
        assert!(
            !other.is_finished(),
            "a commit went through while a write transaction read"
        );
        // Ends the transaction inside the scope: the scope joins the waiting commit.
        drop(txn);
        other
            .join()
            .expect("the other thread")
            .expect("its commit, once this one ended");
    });
    assert!(db.get(&late).expect("get").is_some());
    assert!(db.get(&gone).expect("get").is_none());
}
