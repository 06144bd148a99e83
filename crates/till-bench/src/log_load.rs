//! The load of `till bench log`: N threads committing to one [`Wal`] until told to stop,
//! each timing its own commits, with the log's counters taken around them.
//!
//! ```text
//!  main:    spawn N, gate closed -> stats -> open gate -> sleep -> stop -> join -> stats
//!  threads:          wait at gate -> loop { time wal.commit(..) } until stop -> sort
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tilldb::Durability;
use tilldb::internals::wal::{Wal, WalStats};

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

pub type Samples = Result<Vec<Committer>, Box<dyn std::error::Error>>;

/// Runs `threads` committers for `duration`. Returns what each did, the time from start until
/// the last one stopped, and the log's counters over that time.
pub fn commit_from_threads(
    wal: &Wal,
    threads: usize,
    durability: Durability,
    payload: &[u8],
    duration: Duration,
) -> (Samples, Duration, WalStats, Option<Duration>) {
    let samples_max = (SAMPLES_PER_ROW_MAX / threads).max(1);
    let run = super::threads::run_gated(
        threads,
        "commit",
        duration,
        || wal.stats(),
        |_, stop| commit_until(wal, durability, payload, stop, samples_max),
    );
    match run {
        Ok(run) => {
            let counts = run.after.since(run.before);
            let results = run
                .results
                .into_iter()
                .collect::<Result<Vec<_>, _>>()
                .map_err(Into::into);
            (results, run.elapsed, counts, run.cpu)
        }
        Err(e) => (Err(e), Duration::ZERO, WalStats::default(), None),
    }
}

/// One committer: commit and time until told to stop.
fn commit_until(
    wal: &Wal,
    durability: Durability,
    payload: &[u8],
    stop: &AtomicBool,
    samples_max: usize,
) -> tilldb::Result<Committer> {
    timed_commits(stop, samples_max, || {
        wal.commit(payload, durability).map(drop)
    })
}

/// Runs `commit` until `stop` is set (or it fails, which sets `stop` for the other threads),
/// timing each. Keeps at most `samples_max` latencies (memory stays bounded however fast
/// `lazy` commits run) but counts every commit.
pub fn timed_commits<E>(
    stop: &AtomicBool,
    samples_max: usize,
    mut commit: impl FnMut() -> Result<(), E>,
) -> Result<Committer, E> {
    let mut latencies_ns = Vec::with_capacity(samples_max.min(1 << 16));
    let mut commits = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        if let Err(e) = commit() {
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
