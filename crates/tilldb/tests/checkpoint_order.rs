//! A checkpoint's order and its pressure on commits (issue 35, items 6 and 8): the allocator
//! state its header takes agrees with the log after a power cut, and commits wait for a
//! checkpoint that falls behind instead of growing the log.

#[path = "common/gate.rs"]
mod gate;

use gate::Gate;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
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
    // Until the committer stalls (the log stops growing for 300 ms) or ends.
    let mut last = 0;
    let mut still = 0;
    while !committer.is_finished() && still < 6 {
        std::thread::sleep(Duration::from_millis(50));
        let now = most_returned.load(Ordering::SeqCst);
        still = if now == last { still + 1 } else { 0 };
        last = now;
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
