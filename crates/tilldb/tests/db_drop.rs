//! `Txn::drop_table`: the drop is atomic with its transaction, readers whose snapshot predates
//! it still see the table whole, its pages go back to the free list once none is left (and are
//! reused), and a crash at any write or flush of a drop and its reclaim leaves either the
//! table whole or no table, with every page accounted for.

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use tilldb::io::{CrashMode, Fault, FaultKind, IoKind, SimConfig, SimDisk};
use tilldb::{Db, Direction, Error, Options};

const DIR: &str = "/db";
const ROWS: u32 = 1200;

fn open(disk: &SimDisk) -> Db {
    Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), Options::for_tests())
        .expect("open")
}

fn key(i: u32) -> Vec<u8> {
    format!("order{i:06}").into_bytes()
}

/// A database with table "orders" (`ROWS` rows, one value in an overflow chain) and table
/// "keep" (10 rows) beside it.
fn populated(disk: &SimDisk) -> Db {
    let db = open(disk);
    for batch in 0..ROWS / 200 {
        let mut txn = db.begin().expect("begin");
        for i in batch * 200..(batch + 1) * 200 {
            txn.put_in("orders", &key(i), &[5u8; 40]).expect("put");
        }
        txn.commit().expect("commit");
    }
    let mut txn = db.begin().expect("begin");
    txn.put_in("orders", b"big", &vec![9u8; 30_000])
        .expect("put");
    for i in 0..10 {
        txn.put_in("keep", &key(i), b"kept").expect("put");
    }
    txn.commit().expect("commit");
    db
}

fn count(db: &Db, table: &str) -> usize {
    db.scan_in(
        table,
        Bound::Unbounded,
        Bound::Unbounded,
        Direction::Forward,
    )
    .expect("scan")
    .len()
}

#[test]
fn a_dropped_table_is_gone_and_its_pages_are_free_and_reused() {
    let disk = SimDisk::new(SimConfig::default());
    let db = populated(&disk);
    let before = db.check_space().expect("space");
    let orders_pages = before
        .tables
        .iter()
        .find(|(name, _)| name == "orders")
        .expect("orders")
        .1
        .pages();
    assert!(orders_pages > 20, "a table of many pages: {orders_pages}");

    let mut txn = db.begin().expect("begin");
    assert!(txn.drop_table("orders").expect("drop"), "it existed");
    assert_eq!(txn.get_in("orders", &key(3)).expect("get"), None);
    assert!(
        !txn.drop_table("orders").expect("drop again"),
        "gone in this txn"
    );
    txn.commit().expect("commit");

    assert_eq!(db.get_in("orders", &key(3)).expect("get"), None);
    assert_eq!(count(&db, "orders"), 0);
    assert_eq!(db.tables().expect("tables"), vec!["keep".to_string()]);
    let entries = db.table_entries().expect("entries");
    assert_eq!(entries, vec![(String::new(), 0), ("keep".to_string(), 10)]);
    let after = db.check_space().expect("space");
    assert!(after.is_clean(), "{after:?}");
    assert_eq!(after.dropped_pages, 0, "no reader: reclaimed at once");
    assert_eq!(after.page_count, before.page_count, "no page added");
    assert_eq!(
        after.free_pages,
        before.free_pages + orders_pages,
        "every page of the table is free"
    );

    // New rows take the freed pages before the file grows.
    let mut txn = db.begin().expect("begin");
    for i in 0..ROWS / 2 {
        txn.put_in("again", &key(i), &[1u8; 40]).expect("put");
    }
    txn.commit().expect("commit");
    let reused = db.check_space().expect("space");
    assert!(reused.is_clean(), "{reused:?}");
    assert_eq!(reused.page_count, before.page_count, "freed pages reused");
    assert!(reused.free_pages < after.free_pages);
    db.close().expect("close");

    let db = open(&disk);
    assert_eq!(db.tables().expect("tables"), vec!["again", "keep"]);
    assert_eq!(count(&db, "again"), (ROWS / 2) as usize);
    assert!(db.check_space().expect("space").is_clean());
}

#[test]
fn a_reader_older_than_the_drop_sees_the_table_until_it_ends_then_pages_are_reclaimed() {
    let disk = SimDisk::new(SimConfig::default());
    let db = populated(&disk);
    let free_before = db.check_space().expect("space").free_pages;
    let old = db.begin_read().expect("read");
    let mut lazy = db
        .range_in(
            "orders",
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
        )
        .expect("range");
    let first = lazy.next().expect("an entry").expect("read");
    assert_eq!(first.0, b"big".to_vec());

    let mut txn = db.begin().expect("begin");
    assert!(txn.drop_table("orders").expect("drop"));
    txn.commit().expect("commit");

    assert_eq!(db.get_in("orders", &key(7)).expect("get"), None);
    assert_eq!(
        old.get_in("orders", &key(7)).expect("old get").as_deref(),
        Some(&[5u8; 40][..])
    );
    let seen = old
        .scan_in(
            "orders",
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
        )
        .expect("old scan");
    assert_eq!(
        seen.len(),
        ROWS as usize + 1,
        "the old snapshot sees every row"
    );
    assert_eq!(
        lazy.by_ref().count(),
        ROWS as usize,
        "the old range goes on"
    );
    let held = db.check_space().expect("space");
    assert!(
        held.is_clean(),
        "pages of a dropped table are owned: {held:?}"
    );
    assert!(
        held.dropped_pages > 20,
        "not reclaimed under a reader: {held:?}"
    );

    // A commit after the last old reader ends reclaims the table.
    drop(lazy);
    drop(old);
    let mut txn = db.begin().expect("begin");
    txn.put(b"after", b"1").expect("put");
    txn.commit().expect("commit");
    let after = db.check_space().expect("space");
    assert!(after.is_clean(), "{after:?}");
    assert_eq!(after.dropped_pages, 0, "{after:?}");
    assert_eq!(after.free_pages, free_before + held.dropped_pages);
    db.close().expect("close");
}

#[test]
fn drop_then_put_makes_a_new_table_and_put_then_drop_leaves_none() {
    let disk = SimDisk::new(SimConfig::default());
    let db = populated(&disk);
    let mut txn = db.begin().expect("begin");
    txn.drop_table("orders").expect("drop");
    txn.put_in("orders", b"fresh", b"1").expect("put");
    assert_eq!(
        txn.get_in("orders", b"fresh").expect("get").as_deref(),
        Some(&b"1"[..])
    );
    assert_eq!(txn.get_in("orders", &key(1)).expect("get"), None);
    txn.commit().expect("commit");
    let rows = db
        .scan_in(
            "orders",
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
        )
        .expect("scan");
    assert_eq!(rows, vec![(b"fresh".to_vec(), b"1".to_vec())]);

    let mut txn = db.begin().expect("begin");
    txn.put_in("temp", b"a", b"1").expect("put");
    assert!(
        txn.drop_table("temp").expect("drop"),
        "its own writes made it"
    );
    txn.commit().expect("commit");
    assert_eq!(db.tables().expect("tables"), vec!["keep", "orders"]);

    let mut txn = db.begin().expect("begin");
    txn.drop_table("orders").expect("drop");
    txn.rollback();
    assert_eq!(
        count(&db, "orders"),
        1,
        "a rolled back drop changes nothing"
    );
    assert!(db.check_space().expect("space").is_clean());
    db.close().expect("close");
}

#[test]
fn dropping_the_default_table_or_with_the_change_feed_on_is_refused() {
    let disk = SimDisk::new(SimConfig::default());
    let db = populated(&disk);
    let mut txn = db.begin().expect("begin");
    let err = txn.drop_table("").expect_err("the default table");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("delete_range"), "{err}");
    drop(txn);
    db.close().expect("close");

    let db = Db::open_with_storage(
        Arc::new(disk.clone()),
        Path::new(DIR),
        Options {
            change_feed: true,
            ..Options::for_tests()
        },
    )
    .expect("open with the feed");
    let mut txn = db.begin().expect("begin");
    let err = txn.drop_table("orders").expect_err("feed on");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("change feed"), "{err}");
    drop(txn);
    assert_eq!(count(&db, "orders"), ROWS as usize + 1);
    db.close().expect("close");
}

/// A process killed while a reader held the drop back: the next open reclaims the table.
#[test]
fn a_drop_killed_before_its_reclaim_is_reclaimed_at_the_next_open() {
    let disk = SimDisk::new(SimConfig::default());
    let db = populated(&disk);
    let free_before = db.check_space().expect("space").free_pages;
    let old = db.begin_read().expect("read");
    let mut txn = db.begin().expect("begin");
    txn.drop_table("orders").expect("drop");
    txn.commit().expect("commit");
    let dropped = db.check_space().expect("space").dropped_pages;
    assert!(dropped > 20);
    std::mem::forget(old);
    std::mem::forget(db);
    disk.crash(CrashMode::ProcessKill);

    let db = open(&disk);
    let space = db.check_space().expect("space");
    assert!(space.is_clean(), "{space:?}");
    assert_eq!(space.dropped_pages, 0, "{space:?}");
    assert_eq!(space.free_pages, free_before + dropped);
    assert_eq!(db.tables().expect("tables"), vec!["keep"]);
    db.close().expect("close");
}

/// The disk dies at the k-th write or flush of a drop, its reclaim and the close after them,
/// for every k they reach, then a kill or a power cut; after reopening the table is whole (the drop was not durable) or
/// gone, "keep" is intact, every tree checks and every page is accounted for.
#[test]
fn a_crash_at_every_write_and_flush_of_a_drop_leaves_the_table_whole_or_gone() {
    let mut cases = 0;
    for kind in [IoKind::Write, IoKind::Flush] {
        for k in 1u64.. {
            let disk = SimDisk::new(SimConfig {
                seed: k * 7 + u64::from(kind == IoKind::Flush),
                ..SimConfig::default()
            });
            let db = populated(&disk);
            disk.inject(Fault::once(kind, k, FaultKind::Crash));
            let acknowledged = db
                .begin()
                .and_then(|mut txn| {
                    txn.drop_table("orders")?;
                    txn.commit()
                })
                .is_ok();
            // Closing writes the reclaim's commits and the freed pages back (a checkpoint),
            // so the crash points cover them too.
            let _ = db.close();
            let fired = disk.faults_pending() == 0;
            disk.clear_faults();
            let mode = if k % 2 == 0 {
                CrashMode::ProcessKill
            } else {
                CrashMode::PowerLoss {
                    tear_bytes: 512,
                    garbage: true,
                }
            };
            disk.crash(mode);
            let db = open(&disk);
            let rows = count(&db, "orders");
            assert!(
                rows == 0 || rows == ROWS as usize + 1,
                "{kind:?} #{k}: {rows} rows: half a drop"
            );
            if acknowledged {
                assert_eq!(rows, 0, "{kind:?} #{k}: an acknowledged drop came back");
            }
            assert_eq!(count(&db, "keep"), 10, "{kind:?} #{k}");
            db.check_tables().expect("trees check");
            let space = db.check_space().expect("space");
            assert!(space.is_clean(), "{kind:?} #{k}: {space:?}");
            assert_eq!(space.dropped_pages, 0, "{kind:?} #{k}: reclaimed at open");
            db.close().expect("close");
            cases += 1;
            if !fired {
                break;
            }
        }
    }
    println!("drop crash cases: {cases}");
    assert!(cases > 10, "the drop and its reclaim do I/O: {cases} cases");
}
