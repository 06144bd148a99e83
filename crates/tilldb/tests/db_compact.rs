//! `Db::compact_to`: a compacted copy holds every table as one snapshot saw it, in fewer
//! pages, and checks clean; commits go on meanwhile; a target or partial copy that exists,
//! and a database with the change feed on, are refused with nothing written.

use std::ops::Bound;
use std::path::Path;
use tilldb::{Db, Direction, Error, FlushMethod, Options};

fn options() -> Options {
    Options {
        flush_method: Some(FlushMethod::Fdatasync),
        page_bytes: Some(4096),
        ..Options::for_tests()
    }
}

fn all(db: &Db, table: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.scan_in(
        table,
        Bound::Unbounded,
        Bound::Unbounded,
        Direction::Forward,
    )
    .expect("scan")
}

/// 3,000 rows in two tables and a few large values, then two thirds deleted; and an empty
/// table (its rows all deleted).
fn populated(dir: &Path) -> Db {
    let db = Db::open(dir, options()).expect("open");
    for batch in 0..30u32 {
        let mut txn = db.begin().expect("begin");
        for i in batch * 100..(batch + 1) * 100 {
            let key = format!("k{i:05}").into_bytes();
            txn.put(&key, &[1; 50]).expect("put");
            txn.put_in("orders", &key, &[2; 30]).expect("put");
        }
        txn.commit().expect("commit");
    }
    let mut txn = db.begin().expect("begin");
    txn.put_in("blobs", b"a", &vec![9; 20_000]).expect("put");
    txn.put_in("blobs", b"b", &vec![8; 9_000]).expect("put");
    txn.put_in("empty", b"x", b"1").expect("put");
    txn.commit().expect("commit");
    for batch in 0..30u32 {
        let mut txn = db.begin().expect("begin");
        for i in (batch * 100..(batch + 1) * 100).filter(|i| i % 3 != 0) {
            let key = format!("k{i:05}").into_bytes();
            txn.delete(&key).expect("delete");
            txn.delete_in("orders", &key).expect("delete");
        }
        txn.commit().expect("commit");
    }
    let mut txn = db.begin().expect("begin");
    txn.delete_in("empty", b"x").expect("delete");
    txn.commit().expect("commit");
    db
}

#[test]
fn the_copy_holds_every_table_in_fewer_pages_and_checks_clean() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = populated(&tmp.path().join("db"));
    let target = tmp.path().join("compacted");
    let report = db.compact_to(&target).expect("compact");
    assert_eq!(
        report.tables, 4,
        "default, blobs, empty, orders: {report:?}"
    );
    assert_eq!(report.entries, 1000 + 1000 + 2, "{report:?}");
    assert!(
        report.target_pages * 2 < report.source_pages,
        "a third of the rows in under half the pages: {report:?}"
    );
    assert!(!Db::compact_partial_path(&target).exists());
    let copy = Db::open(&target, options()).expect("open the copy");
    for table in ["", "orders", "blobs"] {
        assert_eq!(all(&copy, table), all(&db, table), "table {table:?}");
    }
    assert_eq!(
        copy.tables().expect("tables"),
        vec!["blobs", "orders"],
        "a table without entries is not copied"
    );
    copy.check_tables().expect("trees");
    let space = copy.check_space().expect("space");
    assert!(space.is_clean(), "{space:?}");
    assert_eq!(
        space.free_pages, 0,
        "a fresh copy has no free pages: {space:?}"
    );
    copy.close().expect("close");
    db.close().expect("close");
}

#[test]
fn commits_during_compaction_go_on_and_the_copy_is_one_snapshot() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = populated(&tmp.path().join("db"));
    let before: Vec<(Vec<u8>, Vec<u8>)> = all(&db, "orders");
    let target = tmp.path().join("compacted");
    let stop = std::sync::atomic::AtomicBool::new(false);
    let running = std::sync::Barrier::new(2);
    let (report, commits) = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut n = 0u32;
            loop {
                let mut txn = db.begin().expect("begin");
                txn.put_in("orders", format!("new{n:06}").as_bytes(), b"v")
                    .expect("put");
                txn.commit().expect("commit");
                n += 1;
                if n == 1 {
                    running.wait();
                }
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    return n;
                }
            }
        });
        // The writer has committed once and goes on while the copy is made.
        running.wait();
        let report = db.compact_to(&target).expect("compact");
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (report, writer.join().expect("writer"))
    });
    assert!(commits >= 1);
    let copy = Db::open(&target, options()).expect("open the copy");
    let copied = all(&copy, "orders");
    // The copy is the table at one moment: the old rows, then a prefix of the new ones.
    assert_eq!(&copied[..before.len()], &before[..]);
    let new: Vec<&Vec<u8>> = copied[before.len()..].iter().map(|(k, _)| k).collect();
    let expected: Vec<Vec<u8>> = (0..u32::try_from(new.len()).expect("small"))
        .map(|n| format!("new{n:06}").into_bytes())
        .collect();
    assert_eq!(new, expected.iter().collect::<Vec<_>>());
    assert!(report.entries >= 2002);
    copy.close().expect("close");
    db.close().expect("close");
}

#[test]
fn an_existing_target_a_partial_copy_and_the_change_feed_are_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = populated(&tmp.path().join("db"));
    let taken = tmp.path().join("taken");
    std::fs::create_dir(&taken).expect("mkdir");
    let err = db.compact_to(&taken).expect_err("target exists");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    let target = tmp.path().join("compacted");
    std::fs::create_dir(Db::compact_partial_path(&target)).expect("mkdir");
    let err = db.compact_to(&target).expect_err("a partial copy exists");
    assert!(err.to_string().contains("tilldb-partial"), "{err}");
    assert!(!target.exists());
    db.close().expect("close");

    let fed = Db::open(
        tmp.path().join("fed"),
        Options {
            change_feed: true,
            ..options()
        },
    )
    .expect("open");
    let err = fed
        .compact_to(tmp.path().join("fed-compacted"))
        .expect_err("feed on");
    assert!(err.to_string().contains("change feed"), "{err}");
    assert!(!tmp.path().join("fed-compacted").exists());
    fed.close().expect("close");
}
