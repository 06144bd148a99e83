//! Table lengths (`Db::len_in`, `ReadTxn::len_in`, `Txn::len_in`; issue 37): a count kept
//! with each table, exact at every snapshot, across reopens, crashes and multi-part commits,
//! and upgraded from a database written before counts.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use tilldb::io::{CrashMode, SimConfig, SimDisk};
use tilldb::{Db, Direction, Options};

const DIR: &str = "/db";

fn open(disk: &SimDisk) -> Db {
    Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), Options::for_tests())
        .expect("open")
}

/// The number of entries a scan finds in `table`.
fn scanned(db: &Db, table: &str) -> u64 {
    db.scan_in(
        table,
        Bound::Unbounded,
        Bound::Unbounded,
        Direction::Forward,
    )
    .expect("scan")
    .len() as u64
}

/// Puts of new keys add rows; overwrites add none; deletes of present keys take one, of
/// absent ones none; a dropped table counts 0 and a table made again counts its new rows.
#[test]
fn len_counts_inserts_and_deletes_not_overwrites() {
    let disk = SimDisk::new(SimConfig::default());
    let db = open(&disk);
    assert_eq!(db.len().expect("len"), 0);
    assert!(db.is_empty().expect("is_empty"));
    assert_eq!(db.len_in("nowhere").expect("len"), 0);
    let mut txn = db.begin().expect("begin");
    for i in 0..100u32 {
        txn.put(&i.to_le_bytes(), b"v").expect("put");
        txn.put_in("t", &i.to_le_bytes(), b"w").expect("put");
    }
    assert_eq!(txn.len().expect("own writes"), 100);
    txn.commit().expect("commit");
    assert_eq!(db.len().expect("len"), 100);
    assert_eq!(db.len_in("t").expect("len"), 100);

    let mut txn = db.begin().expect("begin");
    for i in 50..150u32 {
        txn.put(&i.to_le_bytes(), b"again").expect("put"); // 50 overwrite, 50 new
    }
    for i in 0..10u32 {
        txn.delete(&i.to_le_bytes()).expect("delete"); // present
    }
    for i in 1000..1010u32 {
        txn.delete(&i.to_le_bytes()).expect("delete"); // absent
    }
    assert_eq!(txn.len().expect("own writes"), 140);
    assert_eq!(txn.len_in("t").expect("untouched"), 100);
    txn.commit().expect("commit");
    assert_eq!(db.len().expect("len"), 140);
    assert_eq!(scanned(&db, ""), 140);

    let mut txn = db.begin().expect("begin");
    txn.drop_table("t").expect("drop");
    assert_eq!(txn.len_in("t").expect("dropped"), 0);
    txn.put_in("t", b"one", b"1").expect("put");
    assert_eq!(txn.len_in("t").expect("made again"), 1);
    txn.commit().expect("commit");
    assert_eq!(db.len_in("t").expect("len"), 1);
    assert_eq!(
        db.table_entries().expect("entries"),
        vec![(String::new(), 140), ("t".to_owned(), 1)]
    );
    db.check().expect("check (counts agree with the trees)");
}

/// A reader keeps the count of its snapshot while later commits change it; a new reader sees
/// the new count.
#[test]
fn a_snapshot_keeps_its_count() {
    let disk = SimDisk::new(SimConfig::default());
    let db = open(&disk);
    let mut txn = db.begin().expect("begin");
    for i in 0..20u32 {
        txn.put_in("t", &i.to_le_bytes(), b"v").expect("put");
    }
    txn.commit().expect("commit");
    let old = db.begin_read().expect("read");
    let mut txn = db.begin().expect("begin");
    for i in 0..5u32 {
        txn.delete_in("t", &i.to_le_bytes()).expect("delete");
    }
    for i in 100..130u32 {
        txn.put_in("t", &i.to_le_bytes(), b"v").expect("put");
        txn.put(&i.to_le_bytes(), b"v").expect("put");
    }
    txn.commit().expect("commit");
    assert_eq!(old.len_in("t").expect("old snapshot"), 20);
    assert_eq!(old.len().expect("old snapshot"), 0);
    let new = db.begin_read().expect("read");
    assert_eq!(new.len_in("t").expect("new snapshot"), 45);
    assert_eq!(new.len().expect("new snapshot"), 30);
    drop(old);
    let mut txn = db.begin().expect("begin");
    txn.drop_table("t").expect("drop");
    txn.commit().expect("commit");
    assert_eq!(new.len_in("t").expect("dropped after the snapshot"), 45);
    assert_eq!(db.len_in("t").expect("dropped"), 0);
}

/// Random commits (puts, deletes, drops over three tables, some in parts), crashed at random
/// points of the simulated disk: after every recovery each table's count is the number of
/// its entries, and `check` agrees.
#[test]
fn counts_are_exact_after_every_crash() {
    let mut seed = 0x1e27_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let disk = SimDisk::new(SimConfig::default());
    let tables = ["", "a", "b"];
    for round in 0..30u64 {
        let db = open(&disk);
        for table in tables {
            assert_eq!(
                db.len_in(table).expect("len"),
                scanned(&db, table),
                "round {round}, table {table:?}"
            );
        }
        db.check().expect("check");
        for _ in 0..(next() % 6) {
            let mut txn = db.begin().expect("begin");
            let writes = if next() % 5 == 0 {
                600
            } else {
                1 + next() % 40
            };
            for _ in 0..writes {
                let table = tables[(next() % 3) as usize];
                let key = (next() % 500).to_le_bytes();
                if next() % 3 == 0 {
                    txn.delete_in(table, &key).expect("delete");
                } else {
                    txn.put_in(table, &key, &[7u8; 90]).expect("put");
                }
            }
            if next() % 17 == 0 {
                txn.drop_table(tables[1 + (next() % 2) as usize])
                    .expect("drop");
            }
            txn.commit().expect("commit");
        }
        let mode = common::crash_mode(next());
        drop(db);
        disk.crash(mode);
        if matches!(mode, CrashMode::ProcessKill) && next() % 2 == 0 {
            // Sometimes a clean reopen in between.
            open(&disk).close().expect("close");
        }
    }
}

/// A database written before counts (8-byte catalog entries, no entry for the default
/// table) opens: the open counts each table once, and the counts are exact from then on.
#[test]
fn a_database_written_before_counts_is_counted_at_open() {
    let disk = SimDisk::new(SimConfig::default());
    let db = open(&disk);
    let mut model: BTreeMap<&str, u64> = BTreeMap::new();
    let mut txn = db.begin().expect("begin");
    for (table, rows) in [("", 70u32), ("x", 3), ("y", 0)] {
        for i in 0..rows {
            txn.put_in(table, &i.to_le_bytes(), b"v").expect("put");
        }
        model.insert(table, u64::from(rows));
    }
    txn.commit().expect("commit");
    db.write_catalog_as_before_counts()
        .expect("rewrite the catalog");
    db.close().expect("close");
    let db = open(&disk);
    for (table, rows) in &model {
        assert_eq!(db.len_in(table).expect("len"), *rows, "table {table:?}");
    }
    db.check().expect("check");
    let mut txn = db.begin().expect("begin");
    txn.put_in("x", b"new", b"v").expect("put");
    txn.commit().expect("commit");
    assert_eq!(db.len_in("x").expect("len"), 4);
}
