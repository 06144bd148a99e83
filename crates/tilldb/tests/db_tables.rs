//! Named tables: created by the first commit that writes to them, separate key spaces,
//! listed by `Db::tables`, durable across reopen, and invisible to snapshots older than the
//! commit that created them.

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use tilldb::io::{SimConfig, SimDisk};
use tilldb::{Db, Direction, Options};

fn open(disk: &SimDisk) -> Db {
    Db::open_with_storage(
        Arc::new(disk.clone()),
        Path::new("/db"),
        Options::for_tests(),
    )
    .expect("open")
}

#[test]
fn tables_are_separate_key_spaces_and_survive_reopen() {
    let disk = SimDisk::new(SimConfig::default());
    {
        let db = open(&disk);
        let mut txn = db.begin().expect("begin");
        txn.put(b"k", b"default").expect("put");
        txn.put_in("orders", b"k", b"order").expect("put");
        txn.put_in("items", b"k", b"item").expect("put");
        assert_eq!(
            txn.get_in("orders", b"k").expect("get"),
            Some(b"order".to_vec()),
            "own write"
        );
        txn.commit().expect("commit");
        let mut txn = db.begin().expect("begin");
        for i in 0..500u32 {
            txn.put_in("items", format!("i{i:04}").as_bytes(), &i.to_le_bytes())
                .expect("put");
        }
        txn.delete_in("orders", b"k").expect("delete");
        txn.commit().expect("commit");
        assert_eq!(
            db.tables().expect("tables"),
            vec!["items".to_owned(), "orders".to_owned()]
        );
    }
    let db = open(&disk);
    assert_eq!(db.get(b"k").expect("get"), Some(b"default".to_vec()));
    assert_eq!(db.get_in("orders", b"k").expect("get"), None);
    assert_eq!(
        db.get_in("items", b"k").expect("get"),
        Some(b"item".to_vec())
    );
    assert_eq!(
        db.get_in("nope", b"k").expect("get"),
        None,
        "a missing table reads as empty"
    );
    let items = db
        .scan_in(
            "items",
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Backward,
        )
        .expect("scan");
    assert_eq!(items.len(), 501);
    assert_eq!(items[0].0, b"k".to_vec());
    assert_eq!(items[1].0, b"i0499".to_vec());
    db.check().expect("every tree checks");
}

#[test]
fn a_snapshot_older_than_a_table_does_not_see_it() {
    let disk = SimDisk::new(SimConfig::default());
    let db = open(&disk);
    let before = db.begin_read().expect("read");
    let mut txn = db.begin().expect("begin");
    txn.put_in("late", b"k", b"v").expect("put");
    txn.commit().expect("commit");
    assert_eq!(before.get_in("late", b"k").expect("get"), None);
    assert!(
        before
            .scan_in(
                "late",
                Bound::Unbounded,
                Bound::Unbounded,
                Direction::Forward
            )
            .expect("scan")
            .is_empty()
    );
    drop(before);
    assert_eq!(db.get_in("late", b"k").expect("get"), Some(b"v".to_vec()));
}

#[test]
fn overlong_table_names_are_refused() {
    let disk = SimDisk::new(SimConfig::default());
    let db = open(&disk);
    let mut txn = db.begin().expect("begin");
    let err = txn
        .put_in(&"t".repeat(300), b"k", b"v")
        .expect_err("too long");
    assert!(
        matches!(
            err,
            tilldb::Error::TooLarge {
                what: "table name",
                ..
            }
        ),
        "{err}"
    );
}

fn key_of(n: u8) -> Vec<u8> {
    vec![b'k', n / 16, n % 16]
}

fn bound() -> impl proptest::strategy::Strategy<Value = Bound<Vec<u8>>> {
    use proptest::prelude::*;
    prop_oneof![
        Just(Bound::Unbounded),
        (0u8..64).prop_map(|n| Bound::Included(key_of(n))),
        (0u8..64).prop_map(|n| Bound::Excluded(key_of(n))),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// A transaction's scan is its own puts and deletes over what is committed, between any
    /// bounds, either way: the tree's range and the write set's, merged in one pass.
    #[test]
    fn a_transactions_scan_sees_its_own_writes_over_the_committed_ones(
        committed in proptest::collection::btree_map(0u8..64, proptest::prelude::any::<u8>(), 0..40),
        own in proptest::collection::vec((0u8..64, proptest::option::of(proptest::prelude::any::<u8>())), 0..40),
        lower in bound(),
        upper in bound(),
        backward in proptest::prelude::any::<bool>(),
    ) {
        let disk = SimDisk::new(SimConfig::default());
        let db = open(&disk);
        let mut txn = db.begin().expect("begin");
        for (k, v) in &committed {
            txn.put_in("t", &key_of(*k), &[*v]).expect("put");
        }
        txn.commit().expect("commit");
        let mut model: std::collections::BTreeMap<Vec<u8>, Vec<u8>> = committed
            .iter()
            .map(|(k, v)| (key_of(*k), vec![*v]))
            .collect();
        let mut txn = db.begin().expect("begin");
        for (k, v) in &own {
            if let Some(v) = v {
                txn.put_in("t", &key_of(*k), &[*v]).expect("put");
                model.insert(key_of(*k), vec![*v]);
            } else {
                txn.delete_in("t", &key_of(*k)).expect("delete");
                model.remove(&key_of(*k));
            }
        }
        let direction = if backward { Direction::Backward } else { Direction::Forward };
        let scanned = txn
            .scan_in("t", lower.as_ref().map(Vec::as_slice), upper.as_ref().map(Vec::as_slice), direction)
            .expect("scan");
        let mut want: Vec<(Vec<u8>, Vec<u8>)> = model
            .into_iter()
            .filter(|(k, _)| std::ops::RangeBounds::contains(&(lower.clone(), upper.clone()), k))
            .collect();
        if backward {
            want.reverse();
        }
        proptest::prop_assert_eq!(scanned, want);
    }
}
