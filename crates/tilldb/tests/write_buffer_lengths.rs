//! A table's length read beside drains of the write buffer and other readers
//! (docs/write-buffer.md, "The drain in chunks"): a length adds the catalog's count at its
//! snapshot to the row sums the buffer holds for its table at that snapshot. Two races no
//! deterministic test reaches:
//!
//! - A drain (whole or a chunk) moves rows from the buffer's sums into the catalog; it must
//!   take them off the sums before its commit is visible, or a reader in between counts them
//!   twice (mutant `drain-marked-after-visible`).
//! - A reader's snapshot must be registered by the advance that takes it, before that
//!   advance prunes: registered after it, another reader's advance in between pruned the sums
//!   its snapshot needed, and the length missed every row the live generation held (found
//!   by this test: a length of 71 after 103 acknowledged commits; mutant
//!   `snapshot-registered-after-its-advance`).
//!
//! Readers on other threads read the length in a loop while the writer's commits drain in
//! chunks and whole, and each length must lie between the commits acknowledged before it
//! and those begun after it.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tilldb::io::{SimConfig, SimDisk};
use tilldb::{Db, Durability, Options};

/// Commits of one new key each, through a buffer that drains every few dozen of them, in
/// chunks (most commits apply one) and now and then whole (a transaction's first read);
/// two readers check each length they read against the counts around it.
#[test]
fn a_length_read_beside_drains_and_other_readers_counts_each_row_once() {
    let db = Db::open_with_storage(
        Arc::new(SimDisk::new(SimConfig::default())),
        Path::new("/db"),
        Options {
            background_threads: false,
            // Versions of some 200 bytes: a drain every 80 commits or so, in chunks of
            // about ten keys (an eighth of the buffer).
            write_buffer_bytes: 16 << 10,
            ..Options::for_tests()
        },
    )
    .expect("create");
    // Commits begun and commits acknowledged: every key is new, so the table's length is
    // the number of commits visible.
    let begun = AtomicU64::new(0);
    let acked = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    let commits = 6_000u64;
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                while !done.load(Ordering::Acquire) {
                    let floor = acked.load(Ordering::Acquire);
                    let len = db.len().expect("len");
                    let ceiling = begun.load(Ordering::Acquire);
                    assert!(
                        floor <= len && len <= ceiling,
                        "a length of {len} read after {floor} commits were acknowledged and \
                         before more than {ceiling} began: a drain's rows counted twice or \
                         not at all ({:?})",
                        db.stats()
                    );
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        for n in 0..commits {
            begun.fetch_add(1, Ordering::AcqRel);
            let mut txn = db.begin().expect("begin");
            txn.put(format!("key-{n:08}").as_bytes(), &[0x5a; 150])
                .expect("put");
            txn.commit_with(Durability::Lazy).expect("commit");
            acked.fetch_add(1, Ordering::AcqRel);
            if n % 500 == 499 {
                // A transaction's first read drains what is buffered, in chunks then whole.
                let mut txn = db.begin().expect("begin");
                txn.get(b"any").expect("a first read drains");
                txn.rollback();
            }
        }
        done.store(true, Ordering::Release);
    });
    let stats = db.stats();
    assert!(
        stats.drain_chunks >= 100,
        "the commits drained in chunks: {stats:?}"
    );
    assert!(
        reads.load(Ordering::Relaxed) >= 100,
        "the readers read lengths beside them"
    );
    assert_eq!(db.len().expect("len"), commits);
}
