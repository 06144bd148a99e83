//! The store's public contract: the API of issue 4, persistence across reopen, databases many
//! times the cache, ordered scans both ways, and what readers see of in-flight commits.

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use tilldb::io::{SimConfig, SimDisk};
use tilldb::{Db, Direction, Durability, Options};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("value {i} round {round} ").into_bytes();
    v.resize(20 + (i as usize * 7) % 200, b'.');
    v
}

fn sim_db(disk: &SimDisk) -> Db {
    Db::open_with_storage(
        Arc::new(disk.clone()),
        Path::new("/db"),
        Options::for_tests(),
    )
    .expect("open")
}

#[test]
fn the_api_of_the_issue() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options {
        flush_method: Some(tilldb::FlushMethod::Fdatasync),
        ..Options::default()
    };
    let db = Db::open(dir.path().join("db"), options.clone()).expect("creates when missing");
    let mut txn = db.begin().expect("begin");
    txn.put(b"key", b"value").expect("put");
    assert_eq!(
        txn.get(b"key").expect("get"),
        Some(b"value".to_vec()),
        "sees its own writes"
    );
    assert_eq!(
        db.get(b"key").expect("get"),
        None,
        "others do not see it before commit"
    );
    txn.commit().expect("commit");
    assert_eq!(db.get(b"key").expect("get"), Some(b"value".to_vec()));
    let mut txn = db.begin().expect("begin");
    txn.delete(b"key").expect("delete");
    txn.put(b"other", b"x").expect("put");
    txn.commit_with(Durability::Buffered)
        .expect("commit buffered");
    assert_eq!(db.get(b"key").expect("get"), None);
    let mut txn = db.begin().expect("begin");
    txn.put(b"never", b"x").expect("put");
    txn.rollback();
    assert_eq!(db.get(b"never").expect("get"), None);
    db.close().expect("close");
    let db = Db::open(dir.path().join("db"), options).expect("reopen");
    assert_eq!(db.get(b"other").expect("get"), Some(b"x".to_vec()));
    assert_eq!(db.get(b"key").expect("get"), None);
    assert_eq!(db.get(b"never").expect("get"), None);
}

#[test]
fn a_database_many_times_the_cache_survives_reopen() {
    let disk = SimDisk::new(SimConfig::default());
    {
        let db = sim_db(&disk);
        for batch in 0..40u32 {
            let mut txn = db.begin().expect("begin");
            for i in batch * 100..batch * 100 + 100 {
                txn.put(&key(i), &value(i, 0)).expect("put");
            }
            txn.commit().expect("commit");
        }
        // A transaction may change at most as many pages as the cache holds (changed pages
        // stay in memory until the commit is logged), so delete in several commits.
        for chunk in (0..4000).step_by(3).collect::<Vec<u32>>().chunks(100) {
            let mut txn = db.begin().expect("begin");
            for &i in chunk {
                txn.delete(&key(i)).expect("delete");
            }
            txn.commit().expect("commit");
        }
        let pool = db.stats().pool;
        assert!(pool.evictions > 100, "the cache was never full: {pool:?}");
        db.check().expect("tree checks");
    }
    let db = sim_db(&disk);
    for i in 0..4000 {
        let want = (i % 3 != 0).then(|| value(i, 0));
        assert_eq!(db.get(&key(i)).expect("get"), want, "key {i}");
    }
    db.check().expect("tree checks after reopen");
}

#[test]
fn scans_both_ways_with_bounds() {
    let disk = SimDisk::new(SimConfig::default());
    let db = sim_db(&disk);
    let mut txn = db.begin().expect("begin");
    for i in 0..1000 {
        txn.put(&key(i), &value(i, 1)).expect("put");
    }
    txn.commit().expect("commit");
    let all = db
        .scan(Bound::Unbounded, Bound::Unbounded, Direction::Forward)
        .expect("scan");
    assert_eq!(all.len(), 1000);
    assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
    let (lo, hi) = (key(100), key(700));
    let fwd = db
        .scan(
            Bound::Included(&lo),
            Bound::Excluded(&hi),
            Direction::Forward,
        )
        .expect("scan");
    let bwd = db
        .scan(
            Bound::Included(&lo),
            Bound::Excluded(&hi),
            Direction::Backward,
        )
        .expect("scan");
    assert_eq!(fwd.len(), 600);
    assert_eq!(fwd.first().map(|e| e.0.clone()), Some(lo.clone()));
    assert_eq!(bwd.iter().rev().cloned().collect::<Vec<_>>(), fwd);
    // A transaction's scan merges its own writes.
    let mut txn = db.begin().expect("begin");
    txn.delete(&key(100)).expect("delete");
    txn.put(b"key00000100a", b"new").expect("put");
    let seen = txn
        .scan(
            Bound::Included(&lo),
            Bound::Excluded(&key(102)),
            Direction::Forward,
        )
        .expect("scan");
    let keys: Vec<&[u8]> = seen.iter().map(|(k, _)| k.as_slice()).collect();
    assert_eq!(keys, vec![&b"key00000100a"[..], &key(101)[..]]);
}

/// No reader returns data of a `Sync` commit that a crash could still take back: while the
/// commit's flush is in progress (a simulated 300 ms flush), readers see the old value.
#[test]
fn readers_do_not_see_a_sync_commit_before_it_is_durable() {
    let slow = SimDisk::new(SimConfig {
        flush_latency: std::time::Duration::from_millis(300),
        ..SimConfig::default()
    });
    let db = Db::open_with_storage(Arc::new(slow), Path::new("/slow"), Options::for_tests())
        .expect("open");
    let mut txn = db.begin().expect("begin");
    txn.put(b"k", b"old").expect("put");
    txn.commit().expect("commit");
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            let mut txn = db.begin().expect("begin");
            txn.put(b"k", b"new").expect("put");
            txn.commit().expect("commit");
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(
        db.get(b"k").expect("get"),
        Some(b"old".to_vec()),
        "saw a commit that is not durable"
    );
    let scan = db
        .scan(Bound::Unbounded, Bound::Unbounded, Direction::Forward)
        .expect("scan");
    assert_eq!(scan, vec![(b"k".to_vec(), b"old".to_vec())]);
    writer.join().expect("writer");
    assert_eq!(db.get(b"k").expect("get"), Some(b"new".to_vec()));
}

#[test]
fn read_transactions_keep_their_snapshot() {
    let disk = SimDisk::new(SimConfig::default());
    let db = sim_db(&disk);
    let mut txn = db.begin().expect("begin");
    txn.put(b"a", b"1").expect("put");
    txn.put(b"b", b"1").expect("put");
    txn.commit().expect("commit");
    let read = db.begin_read().expect("begin_read");
    let mut txn = db.begin().expect("begin");
    txn.put(b"a", b"2").expect("put");
    txn.delete(b"b").expect("delete");
    txn.put(b"c", b"2").expect("put");
    txn.commit().expect("commit");
    assert_eq!(read.get(b"a").expect("get"), Some(b"1".to_vec()));
    assert_eq!(read.get(b"b").expect("get"), Some(b"1".to_vec()));
    assert_eq!(read.get(b"c").expect("get"), None);
    let snap = read
        .scan(Bound::Unbounded, Bound::Unbounded, Direction::Forward)
        .expect("scan");
    assert_eq!(
        snap,
        vec![
            (b"a".to_vec(), b"1".to_vec()),
            (b"b".to_vec(), b"1".to_vec())
        ]
    );
    drop(read);
    assert_eq!(db.get(b"a").expect("get"), Some(b"2".to_vec()));
    assert_eq!(db.get(b"b").expect("get"), None);
}

#[test]
fn oversized_keys_are_refused_and_large_values_work() {
    let disk = SimDisk::new(SimConfig::default());
    let db = sim_db(&disk);
    let mut txn = db.begin().expect("begin");
    let err = txn.put(&vec![1u8; 5000], b"v").expect_err("too large");
    assert!(matches!(err, tilldb::Error::TooLarge { .. }), "{err}");
    let big = vec![7u8; 20_000];
    txn.put(b"big", &big).expect("put");
    txn.commit().expect("commit");
    assert_eq!(db.get(b"big").expect("get"), Some(big));
}

/// Free pages are reused: overwriting and deleting and reinserting the same keys, round after
/// round, leaves the data file the size it reached after the first rounds.
#[test]
fn the_data_file_does_not_grow_under_steady_updates() {
    let disk = SimDisk::new(SimConfig::default());
    let db = sim_db(&disk);
    let data = Path::new("/db/data.tdb");
    let mut sizes = Vec::new();
    for round in 0..12u32 {
        for chunk in (0..1500u32).collect::<Vec<_>>().chunks(100) {
            let mut txn = db.begin().expect("begin");
            for &i in chunk {
                if (i + round) % 4 == 0 {
                    txn.delete(&key(i)).expect("delete");
                } else {
                    txn.put(&key(i), &value(i, round)).expect("put");
                }
            }
            txn.commit().expect("commit");
        }
        db.checkpoint().expect("checkpoint");
        sizes.push(disk.live_contents(data).expect("data file").len());
    }
    let settled = sizes[3];
    let last = *sizes.last().expect("sizes");
    assert!(
        last <= settled + settled / 10,
        "data file grew from {settled} to {last}: {sizes:?}"
    );
    db.check().expect("tree checks");
}

/// docs/durability.md, "What readers see": a `Lazy` commit is visible at once (its committer
/// never waits), but a `Lazy` commit behind a `Sync` commit whose flush is in progress waits
/// for that flush: readers see a prefix of commits, never a later one without an earlier one.
#[test]
fn lazy_commits_are_visible_at_once_unless_an_earlier_commit_is_pending() {
    let slow = SimDisk::new(SimConfig {
        flush_latency: std::time::Duration::from_millis(300),
        ..SimConfig::default()
    });
    let db = Db::open_with_storage(Arc::new(slow), Path::new("/slow"), Options::for_tests())
        .expect("open");
    let started = std::time::Instant::now();
    let mut txn = db.begin().expect("begin");
    txn.put(b"lazy", b"1").expect("put");
    txn.commit_with(Durability::Lazy).expect("lazy commit");
    assert!(
        started.elapsed() < std::time::Duration::from_millis(250),
        "a Lazy commit waited for a flush"
    );
    assert_eq!(
        db.get(b"lazy").expect("get"),
        Some(b"1".to_vec()),
        "a Lazy commit is visible at once"
    );

    let appends = db.stats().log.appends;
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            let mut txn = db.begin().expect("begin");
            txn.put(b"sync", b"2").expect("put");
            txn.commit().expect("sync commit");
        })
    };
    // Wait until the Sync commit's record is in the log (its flush takes 300 ms more).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while db.stats().log.appends == appends {
        assert!(
            std::time::Instant::now() < deadline,
            "the Sync commit never appended"
        );
        std::thread::yield_now();
    }
    let mut txn = db.begin().expect("begin after the Sync commit appended");
    txn.put(b"behind", b"3").expect("put");
    txn.commit_with(Durability::Lazy).expect("lazy commit");
    assert_eq!(
        db.get(b"behind").expect("get"),
        None,
        "visible before the Sync commit ahead of it"
    );
    assert_eq!(db.get(b"sync").expect("get"), None);
    writer.join().expect("writer");
    assert_eq!(db.get(b"sync").expect("get"), Some(b"2".to_vec()));
    assert_eq!(db.get(b"behind").expect("get"), Some(b"3".to_vec()));
}

/// `Db::recovery` says what opening did: created; nothing after a clean close; after a crash,
/// the log bytes and commit records redo read, and the page ops it applied.
#[test]
fn the_recovery_report_says_what_open_replayed() {
    let disk = SimDisk::new(SimConfig::default());
    let db = sim_db(&disk);
    assert!(db.recovery().created);
    assert_eq!(db.recovery().records, 0);
    db.close().expect("close");

    let db = sim_db(&disk);
    let report = db.recovery().clone();
    assert!(!report.created);
    assert_eq!(
        (report.records, report.log_bytes, report.ops_applied),
        (0, 0, 0),
        "a clean close leaves nothing to replay: {report:?}"
    );
    for i in 0..25u32 {
        let mut txn = db.begin().expect("begin");
        txn.put(&key(i), &value(i, 0)).expect("put");
        txn.commit().expect("commit");
    }
    // A crash: the handle is leaked (no checkpoint), the process's writes survive.
    std::mem::forget(db);
    disk.crash(tilldb::io::CrashMode::ProcessKill);

    let db = sim_db(&disk);
    let report = db.recovery().clone();
    assert!(!report.created);
    assert_eq!(report.records, 25, "{report:?}");
    // Each commit put one key on one leaf (and the log holds at least its records).
    assert!(report.ops_applied >= 25, "{report:?}");
    assert!(report.log_bytes >= 25 * 30, "{report:?}");
    assert!(report.elapsed > std::time::Duration::ZERO);
    for i in 0..25u32 {
        assert_eq!(db.get(&key(i)).expect("get"), Some(value(i, 0)));
    }
}

/// Checkpoints run by time too: after `checkpoint_interval`, the next commit checkpoints, so a
/// crash then leaves nothing to replay; with the default interval the same commits are all
/// replayed. Without background threads, so the commit runs the checkpoint before it returns
/// and the crash comes after it (with them it wakes the checkpoint thread, whose run the crash
/// right after the commit may beat: `checkpoint_order.rs` tests the thread).
#[test]
fn a_checkpoint_runs_once_the_interval_has_passed() {
    for (interval, replayed) in [
        (std::time::Duration::from_millis(50), 0),
        (Options::for_tests().checkpoint_interval, 11),
    ] {
        let disk = SimDisk::new(SimConfig::default());
        let options = Options {
            checkpoint_interval: interval,
            background_threads: false,
            ..Options::for_tests()
        };
        let db = Db::open_with_storage(Arc::new(disk.clone()), Path::new("/db"), options.clone())
            .expect("open");
        for i in 0..10u32 {
            let mut txn = db.begin().expect("begin");
            txn.put(&key(i), &value(i, 0)).expect("put");
            txn.commit().expect("commit");
        }
        std::thread::sleep(std::time::Duration::from_millis(120));
        let mut txn = db.begin().expect("begin");
        txn.put(&key(10), &value(10, 0)).expect("put");
        txn.commit().expect("commit"); // checkpoints when the interval has passed
        std::mem::forget(db);
        disk.crash(tilldb::io::CrashMode::ProcessKill);
        let db = Db::open_with_storage(Arc::new(disk.clone()), Path::new("/db"), options)
            .expect("reopen");
        assert_eq!(
            db.recovery().records,
            replayed,
            "interval {interval:?}: {:?}",
            db.recovery()
        );
        for i in 0..11u32 {
            assert_eq!(db.get(&key(i)).expect("get"), Some(value(i, 0)));
        }
    }
}

/// The background writer leaves dirty pages alone until three quarters of the cache is dirty:
/// a page written early is written again at its next change, so an early writer only spends
/// the device (it used to start at a quarter, and rewrote every page of a database that fits
/// the cache many times a second under load). Past three quarters it writes down to five
/// eighths, so misses keep finding clean frames.
#[test]
fn the_background_writer_waits_until_three_quarters_of_the_cache_is_dirty() {
    let disk = SimDisk::new(SimConfig::default());
    let options = Options {
        checkpoint_log_bytes: 1 << 30,
        ..Options::for_tests()
    };
    let frames = options.cache_bytes / u64::from(options.page_bytes_or_default());
    assert_eq!(frames, 64, "the test's arithmetic assumes 64 frames");
    let db =
        Db::open_with_storage(Arc::new(disk.clone()), Path::new("/db"), options).expect("open");
    let dirty_after_puts = |from: &mut u32, at_least: u64| {
        while db.stats().pool.dirty < at_least {
            let mut txn = db.begin().expect("begin");
            txn.put(&key(*from), &[b'v'; 1000]).expect("put");
            txn.commit().expect("commit");
            *from += 1;
            assert!(*from < 10_000, "puts never dirtied {at_least} frames");
        }
    };
    let mut next = 0;
    // Half the cache dirty: the old writer (a quarter) wrote here, the new one waits.
    dirty_after_puts(&mut next, frames / 2);
    let before = db.stats().pool;
    std::thread::sleep(std::time::Duration::from_millis(300)); // 15 of its intervals
    let after = db.stats().pool;
    assert_eq!(
        after.pages_written, before.pages_written,
        "the writer wrote pages with {} of {frames} frames dirty",
        before.dirty
    );
    assert_eq!(after.dirty, before.dirty);
    // Past three quarters it writes, down to five eighths.
    dirty_after_puts(&mut next, frames * 13 / 16);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while db.stats().pool.dirty > frames * 5 / 8 {
        assert!(
            std::time::Instant::now() < deadline,
            "the writer left {} of {frames} frames dirty for 10 s",
            db.stats().pool.dirty
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let stats = db.stats().pool;
    assert!(stats.pages_written > before.pages_written, "{stats:?}");
    assert_eq!(
        stats.eviction_writes, 0,
        "a miss wrote a dirty page: {stats:?}"
    );
}

/// The default guard, auto, becomes atomic page writes on a device that has them and
/// full-page images elsewhere; the header records the choice, so a reopen keeps it.
#[test]
fn the_default_guard_is_chosen_by_the_device() {
    use tilldb::TornPageGuard;
    for (atomic_write_unit, chosen) in [
        (None, TornPageGuard::FullPageImages),
        (Some((4096, 65536)), TornPageGuard::Atomic),
    ] {
        let disk = SimDisk::new(SimConfig {
            atomic_write_unit,
            ..SimConfig::default()
        });
        let options = Options {
            torn_page_guard: TornPageGuard::Auto,
            ..Options::for_tests()
        };
        assert_eq!(Options::default().torn_page_guard, TornPageGuard::Auto);
        let db = Db::open_with_storage(Arc::new(disk.clone()), Path::new("/db"), options.clone())
            .expect("open");
        let mut txn = db.begin().expect("begin");
        txn.put(b"k", b"v").expect("put");
        txn.commit().expect("commit");
        db.close().expect("close");
        let storage: &dyn tilldb::io::Storage = &disk;
        let (_, header) = tilldb::internals::header::HeaderFile::open(
            storage,
            Path::new("/db"),
            tilldb::FlushMethod::Fdatasync,
        )
        .expect("header")
        .expect("a header");
        assert_eq!(header.torn_page_guard, chosen, "{atomic_write_unit:?}");
        let db = Db::open_with_storage(Arc::new(disk.clone()), Path::new("/db"), options)
            .expect("reopen");
        assert_eq!(db.get(b"k").expect("get"), Some(b"v".to_vec()));
    }
}

/// Bytes of every file under `dir`, recursively.
fn bytes_under(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| {
            let e = e.expect("entry");
            let meta = e.metadata().expect("metadata");
            if meta.is_dir() {
                bytes_under(&e.path())
            } else {
                meta.len()
            }
        })
        .sum()
}

/// A new database with the default options takes at most 8 MiB on disk (issue 37): its log
/// starts with a 1 MiB segment and a 2 MiB spare, not two 64 MiB files; it grows with the
/// load (10,000 rows of 1 KiB: more than the first segments hold), a clean close trims it to
/// one small segment, and the database reopens whole.
#[test]
fn a_new_database_takes_at_most_8_mib_and_its_log_grows_with_the_load() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, Options::default()).expect("open");
    let mut txn = db.begin().expect("begin");
    txn.put(b"k", b"v").expect("put");
    txn.commit().expect("commit");
    let empty = bytes_under(&dir);
    assert!(
        empty <= 8 << 20,
        "a new database takes {empty} bytes, more than 8 MiB"
    );
    let value = vec![0x5au8; 1024];
    for chunk in 0..10u32 {
        let mut txn = db.begin().expect("begin");
        for i in chunk * 1000..chunk * 1000 + 1000 {
            txn.put(format!("row{i:06}").as_bytes(), &value)
                .expect("put");
        }
        txn.commit().expect("commit");
    }
    let wal_lengths = |dir: &std::path::Path| -> Vec<u64> {
        std::fs::read_dir(dir.join("wal"))
            .expect("wal dir")
            .map(|e| e.expect("entry").metadata().expect("metadata").len())
            .collect()
    };
    let open_lengths = wal_lengths(&dir);
    assert!(
        open_lengths.iter().any(|&l| l > 2 << 20),
        "the log grew its segments past the first ones: {open_lengths:?}"
    );
    // A clean close of a log past 8 MiB of files leaves one fresh 1 MiB segment
    // (wal/writer/trim.rs).
    drop(db);
    assert_eq!(wal_lengths(&dir), [1 << 20], "after the close");
    let db = Db::open(&dir, Options::default()).expect("reopen");
    assert_eq!(db.get(b"k").expect("get"), Some(b"v".to_vec()));
    for i in (0..10_000u32).step_by(997) {
        assert_eq!(
            db.get(format!("row{i:06}").as_bytes()).expect("get"),
            Some(value.clone()),
            "row {i}"
        );
    }
}
