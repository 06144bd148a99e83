//! A checkpoint's order and its pressure on commits (issue 35, items 6 and 8): the allocator
//! state its header takes agrees with the log after a power cut, and commits wait for a
//! checkpoint that falls behind instead of growing the log.

#[path = "common/gate.rs"]
mod gate;

use gate::Gate;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tilldb::io::{Call, CrashMode, HookedStorage, Hooks, SimConfig, SimDisk};
use tilldb::{Db, Durability, Options, TornPageGuard};

const DIR: &str = "/db";

fn key(i: u32) -> Vec<u8> {
    format!("item-{i:05}").into_bytes()
}

/// `Lazy` commits that grow and then shrink the tree (pages allocated, then freed by merges),
/// a checkpoint, then a power cut right after it: every commit before the checkpoint is there,
/// and the allocator state the header took agrees with the pages after recovery (new pages,
/// a checkpoint and a reopen all check). A header ahead of the log would describe commits the
/// power cut took. (Skipping the checkpoint's own log flush does not fail this test: the
/// write-back's WAL rule forces the log through every commit that changed a page first.)
#[test]
fn lazy_commits_then_a_power_cut_after_the_checkpoint_keep_allocator_and_pages_in_agreement() {
    for guard in [TornPageGuard::FullPageImages, TornPageGuard::Doublewrite] {
        let disk = SimDisk::new(SimConfig::default());
        let options = Options {
            background_threads: false,
            torn_page_guard: guard,
            ..Options::for_tests()
        };
        let db = Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options.clone())
            .expect("create");
        for i in 0..600 {
            let mut txn = db.begin().expect("begin");
            txn.put(&key(i), &[3; 200]).expect("put");
            txn.commit_with(Durability::Lazy).expect("commit");
        }
        db.checkpoint().expect("first checkpoint");
        // Removals: leaves merge, pages go back to the free list, in Lazy commits only.
        for i in 0..550 {
            let mut txn = db.begin().expect("begin");
            txn.delete(&key(i)).expect("delete");
            txn.commit_with(Durability::Lazy).expect("commit");
        }
        db.checkpoint().expect("checkpoint");
        std::mem::forget(db);
        disk.crash(CrashMode::PowerLoss {
            tear_bytes: 512,
            garbage: true,
        });
        let db = Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options.clone())
            .unwrap_or_else(|e| panic!("{guard}: recovery after the checkpoint: {e}"));
        for i in 0..600 {
            assert_eq!(
                db.get(&key(i)).expect("get").is_some(),
                i >= 550,
                "{guard}: item {i} after the checkpoint and a power cut"
            );
        }
        db.check().unwrap_or_else(|e| panic!("{guard}: check: {e}"));
        // The allocator goes on from where the pages are: new pages, a checkpoint, a reopen.
        for i in 0..600 {
            let mut txn = db.begin().expect("begin");
            txn.put(&key(10_000 + i), &[4; 200]).expect("put");
            txn.commit().expect("commit");
        }
        db.checkpoint()
            .unwrap_or_else(|e| panic!("{guard}: checkpoint after recovery: {e}"));
        db.close().expect("close");
        let db =
            Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options).expect("reopen");
        db.check()
            .unwrap_or_else(|e| panic!("{guard}: check after reopen: {e}"));
        db.close().expect("close");
    }
}

/// Holds the header file's writes at a gate.
#[derive(Debug)]
struct HeaderGate(Arc<Gate>);

impl Hooks for HeaderGate {
    fn before(&self, call: &Call<'_>) -> tilldb::Result<()> {
        if matches!(call, Call::Write { .. })
            && call.path().file_name().is_some_and(|n| n == "tilldb.meta")
        {
            self.0.pass();
        }
        Ok(())
    }
}

/// Item 8: a checkpoint that cannot finish (its header write held at a gate) makes commits
/// wait once the log since the last finished checkpoint passes twice `checkpoint_log_bytes`:
/// the committer stalls there, and goes on once the checkpoint ends. With the mutant
/// `no-backpressure-wait` (the wait skipped, the wait still counted) the committer ran on
/// and the log grew past the bound while the checkpoint was held.
#[test]
fn commits_wait_for_a_checkpoint_that_cannot_finish_once_the_log_passes_twice_its_distance() {
    let disk = SimDisk::new(SimConfig::default());
    let gate = Arc::new(Gate::default());
    let storage = Arc::new(HookedStorage::new(
        Arc::new(disk.clone()),
        HeaderGate(Arc::clone(&gate)),
    ));
    let options = Options {
        background_threads: false,
        torn_page_guard: TornPageGuard::Doublewrite,
        ..Options::for_tests()
    };
    let distance = options.checkpoint_log_bytes;
    let db = Arc::new(Db::open_with_storage(storage, Path::new(DIR), options).expect("create"));
    let start = db.stats().log.log_bytes;
    gate.arm(1);
    let checkpointer = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || db.checkpoint())
    };
    gate.wait_held();
    // One committer: each commit's record is about 350 bytes, so 4 x the distance is far
    // more than the log may grow while the checkpoint is held.
    let most_returned = Arc::new(AtomicU64::new(0));
    let commits = u32::try_from(4 * distance / 350).expect("small");
    let committer = {
        let (db, most) = (Arc::clone(&db), Arc::clone(&most_returned));
        std::thread::spawn(move || {
            for i in 0..commits {
                let mut txn = db.begin().expect("begin");
                txn.put(&key(i), &[5; 300]).expect("put");
                txn.commit().expect("commit");
                most.fetch_max(db.stats().log.log_bytes - start, Ordering::SeqCst);
            }
        })
    };
    // Until the committer waits for the checkpoint, or ends (a state, not a time: a
    // committer that lost its CPU for a while would look stalled).
    let deadline = std::time::Instant::now() + Duration::from_mins(1);
    while !committer.is_finished() && db.stats().backpressure_waiting == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the committer neither waited nor ended within a minute"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let grown = most_returned.load(Ordering::SeqCst);
    gate.release();
    checkpointer
        .join()
        .expect("checkpointer")
        .expect("checkpoint");
    committer.join().expect("committer");
    assert!(
        db.stats().backpressure_waits > 0,
        "no commit waited for the held checkpoint"
    );
    // Twice the distance, and the commit that crossed it (its own record is durable; only its
    // return waits).
    assert!(
        grown <= 2 * distance + 4096,
        "the log grew by {grown} B while the checkpoint was held, past twice the checkpoint \
         distance ({distance} B): commits did not wait"
    );
}

/// Holds, once armed, the first data-file write (a checkpoint's write-back) and the first
/// preparation of a log segment (a commit's append that needs a new segment), each at its own
/// gate.
#[derive(Debug)]
struct WriteBackAndSegmentGates {
    data: Arc<Gate>,
    segment: Arc<Gate>,
}

impl Hooks for WriteBackAndSegmentGates {
    fn before(&self, call: &Call<'_>) -> tilldb::Result<()> {
        let in_log = call.path().parent().is_some_and(|d| d.ends_with("wal"));
        match call {
            Call::Write { path, .. } if path.file_name().is_some_and(|n| n == "data.tdb") => {
                self.data.pass();
            }
            Call::Create { .. } | Call::Rename { .. } if in_log => self.segment.pass(),
            _ => {}
        }
        Ok(())
    }
}

/// Item 6: a checkpoint frees log segments only below its redo point, which lies before its
/// end when a page dirtied before the end is still dirty after the write-back. Page P (the
/// root of table `p`, logged in an early segment) is changed by a commit that is held in its
/// log append (it needs a new segment) while the checkpoint writes back: P stays dirty and
/// unlogged through every pass, so the redo point is P's, segments before the checkpoint's end
/// still hold what redo needs. More commits then recycle every free segment, and a crash
/// follows. With the mutant `release-to-checkpoint-end` (segments released up to the end,
/// not the redo point) the segment holding P's change was reused and the reopen failed.
#[test]
fn a_checkpoint_whose_redo_point_lags_its_end_keeps_the_segments_redo_needs() {
    let disk = SimDisk::new(SimConfig::default());
    let data = Arc::new(Gate::default());
    let segment = Arc::new(Gate::default());
    let storage = Arc::new(HookedStorage::new(
        Arc::new(disk.clone()),
        WriteBackAndSegmentGates {
            data: Arc::clone(&data),
            segment: Arc::clone(&segment),
        },
    ));
    let options = Options {
        background_threads: false,
        torn_page_guard: TornPageGuard::Doublewrite,
        cache_bytes: 16 << 20,
        // No checkpoint but the test's.
        checkpoint_log_bytes: 256 << 20,
        ..Options::for_tests()
    };
    let db =
        Arc::new(Db::open_with_storage(storage, Path::new(DIR), options.clone()).expect("create"));
    let put = |db: &Db, table: &str, k: &[u8], v: &[u8]| {
        let mut txn = db.begin().expect("begin");
        txn.put_in(table, k, v).expect("put");
        txn.commit().expect("commit");
    };
    // More dirty pages than one write-back batch (256), P's frame after them.
    for i in 0..8000 {
        put(&db, "bulk", &key(i), &[1; 200]);
    }
    put(&db, "p", b"p", b"before the checkpoint");
    let p_lsn = active_segment(&disk).2;
    // Large values (about half a segment each) until the active segment begins after P's
    // change and has no room for another: the checkpoint's end then lies a segment past P's,
    // and the held commit's append needs a new segment.
    let big = vec![9u8; 500 << 10];
    let before = db.stats().log.log_bytes;
    put(&db, "big", b"first", &big);
    let record = db.stats().log.log_bytes - before;
    for i in 0.. {
        let (base, capacity, end) = active_segment(&disk);
        if base > p_lsn && base + capacity - end < record + 4096 {
            break;
        }
        assert!(i < 8, "the log never reached a full segment past P's");
        put(&db, "big", format!("fill-{i}").as_bytes(), &big);
    }
    data.arm(1);
    let checkpointer = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || db.checkpoint())
    };
    data.wait_held();
    segment.arm(1);
    let holder = {
        let (db, big) = (Arc::clone(&db), big.clone());
        std::thread::spawn(move || {
            let mut txn = db.begin().expect("begin");
            txn.put_in("p", b"p", b"during the checkpoint")
                .expect("put");
            txn.put_in("big", b"second", &big).expect("put");
            txn.commit().expect("commit");
        })
    };
    segment.wait_held();
    data.release();
    checkpointer
        .join()
        .expect("checkpointer")
        .expect("checkpoint");
    let (_, header) = tilldb::internals::header::HeaderFile::open(
        &disk,
        Path::new(DIR),
        tilldb::FlushMethod::Fdatasync,
    )
    .expect("header")
    .expect("a header");
    // The redo point lags the end: P is still dirty from before it.
    assert!(
        header.checkpoint_lsn.0 <= p_lsn,
        "the redo point {:?} does not lag to P's change (before lsn {p_lsn}): no test",
        header.checkpoint_lsn
    );
    segment.release();
    holder.join().expect("the held commit");
    // Segment switches enough to reuse every free segment (two such values to a segment).
    for i in 0..12u32 {
        put(&db, "big", format!("more-{i}").as_bytes(), &big);
    }
    let db = Arc::try_unwrap(db).expect("threads joined");
    std::mem::forget(db);
    disk.crash(CrashMode::ProcessKill);
    let db = Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options)
        .unwrap_or_else(|e| panic!("reopen after the checkpoint whose redo point lagged: {e}"));
    assert_eq!(
        db.get_in("p", b"p").expect("get").as_deref(),
        Some(&b"during the checkpoint"[..])
    );
    for i in 0..8000 {
        assert!(
            db.get_in("bulk", &key(i)).expect("get").is_some(),
            "bulk {i}"
        );
    }
    db.check().expect("check");
}

/// The active (last) segment of the log on `disk`: its base lsn, capacity and end (what was
/// made durable in it).
fn active_segment(disk: &SimDisk) -> (u64, u64, u64) {
    let log = tilldb::internals::wal::inspect_log(disk, &Path::new(DIR).join("wal"), None, |_| {})
        .expect("inspect the log");
    let last = log
        .segments
        .iter()
        .rfind(|s| matches!(s.role, tilldb::internals::wal::SegmentRole::Chain { .. }))
        .expect("a chain");
    let header = last.header.expect("a chained segment has a header");
    let capacity = header.segment_bytes - 3 * u64::from(header.log_block_bytes);
    (header.base_lsn, capacity, log.recovery.end_lsn.0)
}

/// The checkpoint thread (issue 37): a commit that finds a checkpoint due asks the thread for
/// it and returns. With that checkpoint's header write held at a gate, commits past the due
/// point go on and return. The committing thread ran the checkpoint itself before (a second
/// now and then after a bulk load, a quarter of a no-flush commit's time): here it would stall
/// at the gate, and the watchdog fails the test.
#[test]
fn a_commit_that_finds_a_checkpoint_due_returns_while_the_checkpoint_thread_runs_it() {
    let disk = SimDisk::new(SimConfig::default());
    let gate = Arc::new(Gate::default());
    let storage = Arc::new(HookedStorage::new(
        Arc::new(disk.clone()),
        HeaderGate(Arc::clone(&gate)),
    ));
    let options = Options {
        torn_page_guard: TornPageGuard::Doublewrite,
        ..Options::for_tests()
    };
    assert!(
        options.background_threads,
        "the thread runs with background threads"
    );
    let distance = options.checkpoint_log_bytes;
    let db = Arc::new(Db::open_with_storage(storage, Path::new(DIR), options).expect("create"));
    let start = db.stats().log.log_bytes;
    gate.arm(1);
    // Past the due point, to one and a half distances: short of where commits wait for a
    // checkpoint that falls behind (twice the distance).
    let committer = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            let mut i = 0;
            while db.stats().log.log_bytes - start < distance * 3 / 2 {
                let mut txn = db.begin().expect("begin");
                txn.put(&key(i), &[5; 300]).expect("put");
                txn.commit().expect("commit");
                i += 1;
            }
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !committer.is_finished() {
        assert!(
            std::time::Instant::now() < deadline,
            "the commits stopped at the checkpoint's held header write: a commit ran the \
             checkpoint it found due"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    committer.join().expect("committer");
    // The thread's checkpoint is (or gets) to its header write, held; then it ends.
    gate.wait_held();
    gate.release();
    assert_eq!(db.stats().backpressure_waits, 0, "no commit waited");
    Arc::try_unwrap(db)
        .expect("one handle")
        .close()
        .expect("close");
}

/// The checkpoint thread (issue 37) holds the database only while it checkpoints, and the
/// last handle's drop waits for it: a database dropped while its thread checkpoints (held at
/// its header write) is closed, its lock released, when the drop returns, as it was without
/// the thread. Were the close left to the thread, the drop would return at once and an open
/// right after would find the database locked by this very process.
#[test]
fn the_last_handle_dropped_while_the_checkpoint_thread_runs_waits_for_it_then_reopens() {
    let disk = SimDisk::new(SimConfig::default());
    let gate = Arc::new(Gate::default());
    let storage: Arc<dyn tilldb::io::Storage> = Arc::new(HookedStorage::new(
        Arc::new(disk.clone()),
        HeaderGate(Arc::clone(&gate)),
    ));
    let options = Options {
        torn_page_guard: TornPageGuard::Doublewrite,
        ..Options::for_tests()
    };
    let distance = options.checkpoint_log_bytes;
    let db = Db::open_with_storage(Arc::clone(&storage), Path::new(DIR), options.clone())
        .expect("create");
    let start = db.stats().log.log_bytes;
    gate.arm(1);
    let mut i = 0;
    while db.stats().log.log_bytes - start < distance + 4096 {
        let mut txn = db.begin().expect("begin");
        txn.put(&key(i), &[5; 300]).expect("put");
        txn.commit().expect("commit");
        i += 1;
    }
    // The thread's checkpoint holds the database, at its header write.
    gate.wait_held();
    let dropped = Arc::new(AtomicBool::new(false));
    let last_drop = {
        let dropped = Arc::clone(&dropped);
        std::thread::spawn(move || {
            drop(db);
            dropped.store(true, Ordering::SeqCst);
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !dropped.load(Ordering::SeqCst),
        "the last handle's drop returned while its checkpoint thread still held the database"
    );
    gate.release();
    last_drop.join().expect("the drop");
    let db = Db::open_with_storage(storage, Path::new(DIR), options)
        .expect("the database reopens once its last handle's drop returned");
    assert!(db.get(&key(0)).expect("get").is_some());
    db.check().expect("a checked tree");
    db.close().expect("close");
}
