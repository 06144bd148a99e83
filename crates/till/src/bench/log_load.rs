//! The load of `till bench log`: N threads committing to one [`Wal`] until told to stop,
//! each timing its own commits, with the log's counters taken around them.
//!
//! ```text
//!  main:    spawn N, gate closed -> stats -> open gate -> sleep -> stop -> join -> stats
//!  threads:          wait at gate -> loop { time wal.commit(..) } until stop -> sort
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{PoisonError, RwLock};
use std::time::{Duration, Instant};
use tilldb::Durability;
use tilldb::wal::{Wal, WalStats};

/// Latency samples kept per row (8 bytes each, so at most 128 MiB), shared among its threads.
/// A thread that has its share keeps committing and counting, untimed.
const SAMPLES_PER_ROW_MAX: usize = 16 << 20;

/// What one committer thread did.
#[derive(Debug)]
pub struct Committer {
    /// Sorted commit latencies in ns: all of them, or the first `samples_max`.
    pub latencies_ns: Vec<u64>,
    pub commits: u64,
}

/// The log's counters over one row.
#[derive(Debug, Clone, Copy)]
pub struct Counts {
    pub appends: u64,
    pub writes: u64,
    pub flushes: u64,
    /// Bytes written to segment files, padding included.
    pub bytes_written: u64,
}

impl Counts {
    fn since(before: WalStats, after: WalStats) -> Counts {
        Counts {
            appends: after.appends - before.appends,
            writes: after.writes - before.writes,
            flushes: after.flushes - before.flushes,
            bytes_written: after.bytes_written - before.bytes_written,
        }
    }
}

pub type Samples = Result<Vec<Committer>, Box<dyn std::error::Error>>;

/// Runs `threads` committers for `duration`. Returns what each did, the time from start until
/// the last one stopped, and the log's counters over that time.
pub fn commit_from_threads(
    wal: &Wal,
    threads: usize,
    durability: Durability,
    payload: &[u8],
    duration: Duration,
) -> (Samples, Duration, Counts) {
    let stop = AtomicBool::new(false);
    // Held for writing until every thread is spawned; each thread starts once it can read.
    let gate = RwLock::new(());
    let samples_max = (SAMPLES_PER_ROW_MAX / threads).max(1);
    let closed = gate.write().unwrap_or_else(PoisonError::into_inner);
    let (results, elapsed, before, after) = std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(threads);
        let mut spawn_error = None;
        for i in 0..threads {
            let committer = || {
                drop(gate.read().unwrap_or_else(PoisonError::into_inner));
                commit_until(wal, durability, payload, &stop, samples_max)
            };
            match std::thread::Builder::new()
                .name(format!("commit-{i}"))
                .spawn_scoped(s, committer)
            {
                Ok(h) => handles.push(h),
                Err(e) => {
                    spawn_error = Some(e);
                    stop.store(true, Ordering::Relaxed);
                    break;
                }
            }
        }
        let before = wal.stats();
        let start = Instant::now();
        drop(closed);
        if spawn_error.is_none() {
            std::thread::sleep(duration);
        }
        stop.store(true, Ordering::Relaxed);
        let results: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().expect("a committer thread panicked"))
            .collect();
        let elapsed = start.elapsed();
        let after = wal.stats();
        let results = match spawn_error {
            Some(e) => Err(format!("cannot start {threads} threads: {e}").into()),
            None => results
                .into_iter()
                .collect::<Result<Vec<_>, _>>()
                .map_err(Into::into),
        };
        (results, elapsed, before, after)
    });
    (results, elapsed, Counts::since(before, after))
}

/// One committer: commit and time until told to stop. Keeps at most `samples_max` latencies
/// (memory stays bounded however fast `lazy` commits run) but counts every commit.
fn commit_until(
    wal: &Wal,
    durability: Durability,
    payload: &[u8],
    stop: &AtomicBool,
    samples_max: usize,
) -> tilldb::Result<Committer> {
    let mut latencies_ns = Vec::with_capacity(samples_max.min(1 << 16));
    let mut commits = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        if let Err(e) = wal.commit(payload, durability) {
            stop.store(true, Ordering::Relaxed);
            return Err(e);
        }
        let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
        commits += 1;
        if latencies_ns.len() < samples_max {
            latencies_ns.push(ns);
        }
    }
    assert!(latencies_ns.len() <= samples_max, "sample bound");
    latencies_ns.sort_unstable();
    Ok(Committer {
        latencies_ns,
        commits,
    })
}
