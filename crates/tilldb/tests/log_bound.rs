//! A till's life (issue 34): switched off every night without a clean shutdown, for years.
//! Whatever the number of crash/reopen cycles, the log directory stays within its stated
//! bound (`Options::checkpoint_log_bytes`'s doc) and an open after a crash costs in proportion
//! to the log it replays, never to the number of earlier crashes.
//!
//! The story: every open starts a fresh log segment (`wal/mod.rs`), and only a checkpoint
//! frees the segments before its redo point. A till that commits a little and is killed never
//! reached a checkpoint (they run by log volume or every 5 minutes), so each crash left one
//! more segment to keep and to read at the next open: 20 cycles of "open, commit for 1.5 s,
//! kill -9" left 19 segments (1.2 GB) and an open 7 x slower than the first. Now an open
//! that replayed log checkpoints before it returns.

use std::path::Path;
use std::sync::Arc;
use tilldb::io::{CrashMode, IoKind, SimConfig, SimDisk, Storage};
use tilldb::{Db, Durability, Options};

const DIR: &str = "/db";
const CYCLES: u64 = 100;
/// Commits per "day": a few dozen sales, far below a checkpoint's worth of log.
const COMMITS_PER_CYCLE: u64 = 24;

fn options() -> Options {
    Options {
        // Every log write, flush and segment preparation on the calling thread: the reads an
        // open makes are counted exactly.
        background_threads: false,
        ..Options::for_tests()
    }
}

fn key(cycle: u64, i: u64) -> Vec<u8> {
    format!("sale-{cycle:04}-{i:03}").into_bytes()
}

/// Files in the log directory and their total size.
fn log_dir(disk: &SimDisk) -> (usize, u64) {
    let wal = Path::new(DIR).join("wal");
    let names = disk.list_dir(&wal).expect("list wal/");
    let bytes = names
        .iter()
        .map(|n| {
            disk.live_contents(&wal.join(n))
                .map_or(0, |c| c.len() as u64)
        })
        .sum();
    (names.len(), bytes)
}

/// The bound `Options::checkpoint_log_bytes` documents for the log directory, in segments.
fn bound_segments(options: &Options) -> usize {
    usize::try_from(3 * options.checkpoint_log_bytes / options.wal.segment_bytes).expect("small")
        + 7
}

fn run_cycles(mode: CrashMode) {
    let disk = SimDisk::new(SimConfig::default());
    let options = options();
    let bound = bound_segments(&options);
    let mut open_reads = Vec::new();
    let mut acknowledged = 0u64;
    for cycle in 0..CYCLES {
        let reads_before = disk.call_count(IoKind::Read);
        let db = Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options.clone())
            .unwrap_or_else(|e| panic!("{mode:?}: open after {cycle} crashes: {e}"));
        open_reads.push(disk.call_count(IoKind::Read) - reads_before);
        let (segments, bytes) = log_dir(&disk);
        assert!(
            segments <= bound,
            "{mode:?}: after {cycle} crashes the log directory holds {segments} segments \
             ({bytes} B), over the bound of {bound}"
        );
        // Everything acknowledged in earlier days is there.
        for c in 0..cycle {
            for i in 0..COMMITS_PER_CYCLE {
                assert!(
                    db.get(&key(c, i)).expect("get").is_some(),
                    "{mode:?}: day {c}'s sale {i} lost after {cycle} crashes"
                );
            }
        }
        let replayed = db.recovery().log_bytes;
        assert!(
            replayed <= 2 * options.checkpoint_log_bytes,
            "{mode:?}: cycle {cycle} replayed {replayed} B of log"
        );
        for i in 0..COMMITS_PER_CYCLE {
            let mut txn = db.begin().expect("begin");
            txn.put(&key(cycle, i), &[7; 150]).expect("put");
            txn.commit_with(Durability::Sync).expect("commit");
            acknowledged += 1;
        }
        // The till is switched off: no close.
        std::mem::forget(db);
        disk.crash(mode);
    }
    // Opens cost what they replay: the last ten no more than the first ten (each replays one
    // day of sales), however many crashes came between.
    let first = open_reads[1..11].iter().max().copied().expect("ten opens");
    let last = open_reads[open_reads.len() - 10..]
        .iter()
        .max()
        .copied()
        .expect("ten opens");
    println!(
        "{mode:?}: {CYCLES} crashes, {acknowledged} commits; reads per open: first days at \
         most {first}, last days at most {last}; log directory {:?}",
        log_dir(&disk)
    );
    assert!(
        last <= first + first / 4,
        "{mode:?}: an open after {CYCLES} crashes made {last} reads, the first ones at most \
         {first}: open cost grows with the number of crashes ({open_reads:?})"
    );
}

#[test]
fn a_till_killed_every_night_keeps_its_log_directory_and_open_cost_flat() {
    run_cycles(CrashMode::ProcessKill);
}

#[test]
fn a_till_power_cut_every_night_keeps_its_log_directory_and_open_cost_flat() {
    run_cycles(CrashMode::PowerLoss {
        tear_bytes: 512,
        garbage: true,
    });
}

/// A writer whose checkpoints fell far behind (a large `checkpoint_log_bytes`, the default's
/// 256 MiB) while its cache kept writing pages back leaves pages newer than most records that
/// name them. Redo read each such page again for each record that named it, to learn its
/// lsn, and its cache evicted it again before the next: after 256 MiB of random puts, 409,421
/// page reads for 12,700 pages, 16-18 s of an open with direct I/O (`db/open/replay.rs`,
/// `PageLsns`). Now redo reads a page it found newer than a record only when a later record
/// needs it: here, at most once per page plus the pages it changes and evicts.
#[test]
fn redo_reads_a_page_again_for_every_record_that_names_it() {
    const ROWS: u64 = 4_000;
    const TXNS: u64 = 600;
    let disk = SimDisk::new(SimConfig::default());
    let options = Options {
        background_threads: false,
        // The smallest cache: random puts evict and write back all the time.
        cache_bytes: 8 * 4096,
        checkpoint_log_bytes: 1 << 40,
        ..Options::for_tests()
    };
    let open = || {
        Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options.clone())
            .expect("open")
    };
    let row = |i: u64| format!("row-{:08}", i.wrapping_mul(0x9E37_79B9) % ROWS).into_bytes();
    let db = open();
    let mut txn = db.begin().expect("begin");
    for i in 0..ROWS {
        txn.put(format!("row-{i:08}").as_bytes(), &[1; 100])
            .expect("put");
    }
    txn.commit().expect("load");
    let mut n = 0u64;
    for t in 0..TXNS {
        let mut txn = db.begin().expect("begin");
        for _ in 0..8 {
            n += 1;
            txn.put(&row(n), &t.to_le_bytes()).expect("put");
        }
        txn.commit().expect("commit");
    }
    let written = db.stats().pool.pages_written;
    std::mem::forget(db);
    disk.crash(CrashMode::ProcessKill);

    let db = open();
    let recovery = db.recovery().clone();
    let pool = db.stats().pool;
    // Taken after the pool's counters: the check reads every page.
    let pages = db.check_space().expect("space").page_count;
    println!(
        "{} records, {} ops applied, {written} pages written back before the kill; redo: {pool:?}, {pages} pages",
        recovery.records, recovery.ops_applied
    );
    assert!(
        recovery.records > TXNS,
        "the load's commits were replayed: {recovery:?}"
    );
    assert!(
        written > 2 * pages,
        "the writer wrote its pages back before the kill ({written} writes, {pages} pages)"
    );
    assert!(
        pool.misses <= pages + pool.eviction_writes + pool.pages_written,
        "redo read {} pages for a data file of {pages} pages, writing back {} (records {}, \
         ops {}): it read pages it had seen were newer again",
        pool.misses,
        pool.pages_written,
        recovery.records,
        recovery.ops_applied
    );
    // Nothing is lost for it.
    for n in 1..=TXNS * 8 {
        assert!(db.get(&row(n)).expect("get").is_some(), "put {n} lost");
    }
}
