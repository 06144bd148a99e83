//! The load of `till bench log`: N threads committing to one [`Wal`] until told to stop,
//! each timing its own commits, with the log's counters taken around them.
//!
//! ```text
//!  main:    spawn N, gate closed -> stats -> open gate -> sleep -> stop -> join -> stats
//!  threads:          wait at gate -> loop { time wal.commit(..) } until stop
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tilldb::Durability;
use tilldb::internals::wal::{Wal, WalStats};

use super::latency::Histogram;

/// What one committer thread did.
#[derive(Debug)]
pub struct Committer {
    /// Every commit's latency.
    pub latencies: Histogram,
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
    let run = super::threads::run_gated(
        threads,
        "commit",
        duration,
        || wal.stats(),
        |_, stop| commit_until(wal, durability, payload, stop),
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
) -> tilldb::Result<Committer> {
    timed_commits(stop, || wal.commit(payload, durability).map(drop))
}

/// Runs `commit` until `stop` is set (or it fails, which sets `stop` for the other threads),
/// timing each (in a histogram: memory stays bounded however fast `lazy` commits run).
pub fn timed_commits<E>(
    stop: &AtomicBool,
    mut commit: impl FnMut() -> Result<(), E>,
) -> Result<Committer, E> {
    let mut latencies = Histogram::new();
    let mut commits = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        if let Err(e) = commit() {
            stop.store(true, Ordering::Relaxed);
            return Err(e);
        }
        let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
        commits += 1;
        latencies.record(ns);
    }
    assert_eq!(latencies.count(), commits, "a commit not timed");
    Ok(Committer { latencies, commits })
}
