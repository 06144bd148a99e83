//! What the commit queue may acknowledge and show (issue 35, "five mutants of our own"): a
//! queued `Sync` commit is visible to other readers only once its flush completes, and no
//! commit queued behind a failed one is applied or acknowledged.
//!
//! Each order is exact: a log flush is held at a gate, or the failure is injected at the one
//! read that fails; no test depends on timing.

#[path = "common/gate.rs"]
mod gate;

use gate::{FlushGate, Gate};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tilldb::io::{Fault, FaultKind, HookedStorage, IoKind, SimConfig, SimDisk};
use tilldb::{Db, Durability, Options};

const DIR: &str = "/db";

/// A database on a simulated disk whose log flushes pass a gate the test holds, with no
/// background threads (every flush is a committer's).
fn gated_db() -> (Db, Arc<Gate>) {
    gated_db_with(Options::for_tests())
}

/// [`gated_db`] with `options` (background threads off).
fn gated_db_with(options: Options) -> (Db, Arc<Gate>) {
    let disk = SimDisk::new(SimConfig::default());
    let gate = Arc::new(Gate::default());
    let storage = Arc::new(HookedStorage::new(
        Arc::new(disk),
        FlushGate(Arc::clone(&gate)),
    ));
    let options = Options {
        background_threads: false,
        ..options
    };
    let db = Db::open_with_storage(storage, Path::new(DIR), options).expect("open");
    (db, gate)
}

/// A transaction that only writes commits through the commit queue, leading it alone, with
/// the durability it was given recorded in its queue entry: that entry's durability decides
/// when readers see the commit. Its flush is held at a gate; while it is held, neither a
/// point read nor a snapshot sees the sale, and once it completes both do. With the mutant
/// `queued-sync-as-buffered` (the entry says `Buffered` for a `Sync` commit) a reader saw
/// the sale as soon as it was written: a reader could act on a sale a power cut then takes.
#[test]
fn a_queued_sync_commit_is_invisible_to_readers_while_its_flush_is_held() {
    let (db, gate) = gated_db();
    let mut txn = db.begin().expect("begin");
    txn.put(b"sale-0", b"flushed").expect("put");
    txn.commit_with(Durability::Sync).expect("commit");
    // A snapshot from before the sale, read while its flush is held: its reads take no new
    // snapshot (no prune recomputes what the overlay holds), so only the commit itself can
    // tell them the overlay now has the value they need (`Inner::overlay_empty`).
    let before = db.begin_read().expect("begin_read");
    assert_eq!(
        before.get(b"sale-1").expect("get"),
        None,
        "nothing sold yet"
    );
    gate.arm(1);
    let seller = {
        let db = db.clone();
        std::thread::spawn(move || {
            let mut txn = db.begin().expect("begin");
            txn.put(b"sale-1", b"held").expect("put");
            txn.commit_with(Durability::Sync).expect("commit");
        })
    };
    gate.wait_held();
    assert_eq!(
        before.get(b"sale-1").expect("get"),
        None,
        "an older snapshot saw a Sync commit while its flush was held"
    );
    drop(before);
    assert_eq!(
        db.get(b"sale-1").expect("get"),
        None,
        "a reader saw a Sync commit while its flush was held"
    );
    let snapshot = db.begin_read().expect("begin_read");
    assert_eq!(
        snapshot.get(b"sale-1").expect("get"),
        None,
        "a snapshot taken during the flush saw the Sync commit"
    );
    gate.release();
    seller.join().expect("seller");
    assert_eq!(
        snapshot.get(b"sale-1").expect("get"),
        None,
        "snapshot moved"
    );
    drop(snapshot);
    assert_eq!(
        db.get(b"sale-1").expect("get"),
        Some(b"held".to_vec()),
        "the sale, once flushed"
    );
    db.close().expect("close");
}

/// A load into tables that are empty when it commits (the default table, never written, and
/// "orders", whose one row an earlier commit deleted) keeps no older value per key for
/// readers: it records one empty mark per table (`txn/overlay.rs`). While its flush is held,
/// a snapshot from before the delete still sees the deleted row (its own version is older
/// than the mark) and nothing of the load, by get, scan and length; a snapshot from after
/// the delete, and one taken during the flush, see both tables empty. With the mutant
/// `empty-mark-lost` (no mark, and no value per key either) the readers saw the load before
/// it was durable.
#[test]
fn a_load_into_empty_tables_is_invisible_to_readers_while_its_flush_is_held() {
    const ROWS: u32 = 600;
    let (db, gate) = gated_db();
    let mut txn = db.begin().expect("begin");
    txn.put_in("orders", b"o-1", b"first").expect("put");
    txn.commit_with(Durability::Sync).expect("commit");
    let with_row = db.begin_read().expect("begin_read");
    let mut txn = db.begin().expect("begin");
    txn.delete_in("orders", b"o-1").expect("delete");
    txn.commit_with(Durability::Sync).expect("commit");
    let emptied = db.begin_read().expect("begin_read");
    gate.arm(1);
    let loader = {
        let db = db.clone();
        std::thread::spawn(move || {
            let mut txn = db.begin().expect("begin");
            for i in 0..ROWS {
                let key = format!("o-{i}");
                txn.put(key.as_bytes(), b"loaded").expect("put");
                txn.put_in("orders", key.as_bytes(), b"loaded")
                    .expect("put");
            }
            txn.commit_with(Durability::Sync).expect("commit");
        })
    };
    gate.wait_held();
    let during = db.begin_read().expect("begin_read");
    let all = (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded);
    let scan = |r: &tilldb::ReadTxn<'_>, table: &str| {
        r.scan_in(table, all.0, all.1, tilldb::Direction::Forward)
            .expect("scan")
    };
    assert_eq!(
        with_row.get_in("orders", b"o-1").expect("get"),
        Some(b"first".to_vec()),
        "a snapshot from before the delete lost its row to the load's mark"
    );
    let scanned = scan(&with_row, "orders");
    assert_eq!(
        scanned.len(),
        1,
        "a snapshot from before the delete scanned the held load"
    );
    assert_eq!(scanned[0], (b"o-1".to_vec(), b"first".to_vec()));
    assert_eq!(with_row.len_in("orders").expect("len"), 1);
    for (name, reader) in [("emptied", &emptied), ("during", &during)] {
        for table in ["", "orders"] {
            assert_eq!(
                reader.get_in(table, b"o-7").expect("get"),
                None,
                "{name}: a get in {table:?} saw the held load"
            );
            assert_eq!(
                scan(reader, table).len(),
                0,
                "{name}: a scan of {table:?} saw the held load"
            );
            assert_eq!(reader.len_in(table).expect("len"), 0, "{name}: {table:?}");
        }
    }
    assert_eq!(
        db.get(b"o-7").expect("get"),
        None,
        "a read saw the held load"
    );
    gate.release();
    loader.join().expect("loader");
    assert_eq!(scan(&during, "").len(), 0, "a snapshot moved");
    assert_eq!(
        with_row.get_in("orders", b"o-1").expect("get"),
        Some(b"first".to_vec()),
        "a snapshot moved"
    );
    drop((with_row, emptied, during));
    let after = db.begin_read().expect("begin_read");
    for table in ["", "orders"] {
        assert_eq!(scan(&after, table).len(), ROWS as usize, "{table:?}");
        assert_eq!(after.len_in(table).expect("len"), u64::from(ROWS));
        assert_eq!(
            after.get_in(table, b"o-1").expect("get"),
            Some(b"loaded".to_vec())
        );
    }
    drop(after);
    db.close().expect("close");
}

/// Writers whose blind commits queue behind a transaction that read, whose commit then fails
/// in the middle of applying (a page read fails: its pages may be half changed, and the
/// database is poisoned). Every queued commit must fail too: the leader checks the poison
/// before each commit it applies. With the mutant `queue-skips-poison-check` all eight were
/// applied over the failed commit's pages and acknowledged, after the database had stopped.
#[test]
fn commits_queued_behind_a_failed_commit_fail_instead_of_being_acknowledged() {
    const WRITERS: usize = 8;
    let disk = SimDisk::new(SimConfig::default());
    let options = Options::for_tests();
    {
        let db = Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options.clone())
            .expect("create");
        let mut txn = db.begin().expect("begin");
        for i in 0..2_000usize {
            txn.put(format!("filler-{i:05}").as_bytes(), &[b'f'; 100])
                .expect("put");
        }
        txn.commit().expect("commit");
        db.close().expect("close");
    }
    // Opened again: nothing cached but what the reader reads.
    let db = Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options).expect("open");
    let mut reader = db.begin().expect("begin");
    // Takes the writer lock, and caches the path to the writers' leaf.
    reader.get(b"filler-00000").expect("get");
    let arrived = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (0..WRITERS)
        .map(|i| {
            let (db, arrived) = (db.clone(), Arc::clone(&arrived));
            std::thread::spawn(move || {
                let mut txn = db.begin()?;
                txn.put(format!("filler-00000-{i}").as_bytes(), b"v")?;
                arrived.fetch_add(1, Ordering::SeqCst);
                txn.commit()
            })
        })
        .collect();
    // Every writer is past `begin` (which checks the poison): whenever it reaches the queue,
    // only the leader's check stands between it and an acknowledgement.
    while arrived.load(Ordering::SeqCst) < WRITERS {
        std::thread::yield_now();
    }
    // The reader's key is in a leaf not cached: its commit's first read fails.
    reader.put(b"filler-01990-r", b"v").expect("put");
    disk.inject(Fault::once(IoKind::Read, 1, FaultKind::Eio).on_path("data"));
    reader
        .commit()
        .expect_err("the reader's commit, whose page read failed");
    for (i, writer) in writers.into_iter().enumerate() {
        let outcome = writer.join().expect("writer");
        assert!(
            outcome.is_err(),
            "writer {i}, queued behind a commit that failed and poisoned the database, was \
             acknowledged"
        );
    }
    assert!(db.begin().is_err(), "the database did not stop");
}

/// A large commit (many times `commit_part_bytes`) that no snapshot is open to see keeps no
/// older value per key (`Stats::overlay_keys`): it holds the tree lock until it is visible,
/// and a snapshot begun meanwhile waits for it, then sees all of it. With a snapshot open,
/// the same commit keeps a value per key, and a snapshot begun during its held flush does not
/// wait and sees none of it. With the mutants `unseen-commit-unlocks-early` and
/// `snapshot-registered-unlocked` a snapshot began while the commit's flush was held.
#[test]
fn a_large_commit_no_snapshot_sees_keeps_no_older_values_and_new_snapshots_wait_for_it() {
    // 2,000 writes of 110 bytes: over three parts of `for_tests`' 64 KiB.
    unseen_commit_keeps_nothing(Options::for_tests());
}

/// The same for a commit of many small writes in one part (2,000 writes, at least
/// `UNSEEN_WRITES_MIN` in `db/commit/mod.rs`): a value kept per key cost a third of a commit
/// of 10,000 deletes (issue 52's pops), more than readers' wait for its flush.
#[test]
fn a_commit_of_many_writes_in_one_part_no_snapshot_sees_keeps_no_older_values() {
    unseen_commit_keeps_nothing(Options {
        commit_part_bytes: 8 << 20,
        ..Options::for_tests()
    });
}

/// Below `UNSEEN_WRITES_MIN` writes and a part, a commit keeps the older values even with no
/// snapshot open, and readers do not wait for its flush.
#[test]
fn a_small_commit_no_snapshot_sees_keeps_older_values_and_readers_do_not_wait_for_its_flush() {
    let (db, gate) = gated_db_with(Options {
        cache_bytes: 16 << 20,
        commit_part_bytes: 8 << 20,
        ..Options::for_tests()
    });
    let mut txn = db.begin().expect("begin");
    for i in 0..100u32 {
        txn.put(format!("k{i:03}").as_bytes(), b"one").expect("put");
    }
    txn.commit().expect("load");
    gate.arm(1);
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            let mut txn = db.begin().expect("begin");
            for i in 0..100u32 {
                txn.put(format!("k{i:03}").as_bytes(), b"two").expect("put");
            }
            txn.commit_with(Durability::Sync).expect("commit");
        })
    };
    gate.wait_held();
    assert!(
        db.stats().overlay_keys >= 100,
        "a small commit kept no older values"
    );
    // Begins during the held flush without waiting, and sees none of the commit.
    let during = db.begin_read().expect("begin_read");
    assert_eq!(during.get(b"k007").expect("get"), Some(b"one".to_vec()));
    gate.release();
    writer.join().expect("writer");
    drop(during);
    assert_eq!(db.get(b"k007").expect("get"), Some(b"two".to_vec()));
    db.close().expect("close");
}

fn unseen_commit_keeps_nothing(options: Options) {
    const ROWS: u32 = 2_000;
    fn key(i: u32) -> Vec<u8> {
        format!("row-{i:05}").into_bytes()
    }
    fn update(db: &Db, round: u8) {
        let mut txn = db.begin().expect("begin");
        for i in 0..ROWS {
            txn.put(&key(i), &[round; 100]).expect("put");
        }
        txn.commit_with(Durability::Sync).expect("commit");
    }
    // A cache that holds the table: no eviction flushes the log (the write-ahead rule) while
    // a commit is applied, so the flush held is the commit's own.
    let (db, gate) = gated_db_with(Options {
        cache_bytes: 16 << 20,
        ..options
    });
    update(&db, 1);
    let overlay_before = db.stats().overlay_keys;
    // No snapshot open: the update keeps no older values.
    gate.arm(1);
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || update(&db, 2))
    };
    gate.wait_held();
    let kept = db.stats().overlay_keys;
    assert!(
        kept < overlay_before + 10,
        "{kept} keys kept (before: {overlay_before}) for snapshots nobody holds"
    );
    let began = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (db, began) = (db.clone(), Arc::clone(&began));
        std::thread::spawn(move || {
            let snapshot = db.begin_read().expect("begin_read");
            began.store(true, std::sync::atomic::Ordering::SeqCst);
            (0..ROWS)
                .map(|i| snapshot.get(&key(i)).expect("get").expect("a row")[0])
                .collect::<Vec<u8>>()
        })
    };
    // The reader either begins (wrongly) or falls asleep behind the commit: wait for one
    // of the two, not for a time, which a late-starting thread could outlast (then it
    // begins after the commit is visible, and a wrong lock goes unseen).
    let deadline = std::time::Instant::now() + std::time::Duration::from_mins(1);
    while !began.load(std::sync::atomic::Ordering::SeqCst) && db.readers_waiting_for_a_commit() == 0
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the reader neither began nor waited within a minute"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(
        !began.load(std::sync::atomic::Ordering::SeqCst),
        "a snapshot began while the commit that kept no older values was not yet visible"
    );
    gate.release();
    writer.join().expect("writer");
    let seen = reader.join().expect("reader");
    assert!(
        seen.iter().all(|&v| v == 2),
        "the waiting snapshot saw part of the update"
    );
    // A snapshot open: the update keeps an older value per key; a snapshot begun during its
    // held flush does not wait, and sees none of it.
    let open = db.begin_read().expect("begin_read");
    gate.arm(1);
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || update(&db, 3))
    };
    gate.wait_held();
    assert!(
        db.stats().overlay_keys >= u64::from(ROWS),
        "no older values kept"
    );
    let during = db.begin_read().expect("begin_read");
    for i in (0..ROWS).step_by(97) {
        assert_eq!(open.get(&key(i)).expect("get"), Some(vec![2; 100]));
        assert_eq!(during.get(&key(i)).expect("get"), Some(vec![2; 100]));
    }
    gate.release();
    writer.join().expect("writer");
    assert_eq!(open.get(&key(7)).expect("get"), Some(vec![2; 100]));
    drop((open, during));
    assert_eq!(db.get(&key(7)).expect("get"), Some(vec![3; 100]));
    db.close().expect("close");
}
