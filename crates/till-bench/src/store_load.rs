//! The load of `till bench store`: N threads running one operation (a one-put transaction, or
//! a point read) on one [`Db`] until told to stop, each timing its own operations, with the
//! store's counters taken around them.
//!
//! ```text
//!  main:    spawn N, gate closed -> stats -> open gate -> sleep -> stop -> join -> stats
//!  threads:          wait at gate -> loop { time op(state) } until stop and min_ops -> sort
//! ```
//!
//! A phase lasts its time *and* at least its [`Span::min_ops`] operations, all threads
//! together, and every thread does at least one: on a loaded machine a short phase still
//! measures something (a test that checks what a phase did asks for operations, not for time).
//!
//! Keys are chosen by a per-thread xorshift generator seeded from the phase and the thread
//! index, so two runs with the same flags touch the same keys in the same order per thread.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tilldb::Db;
use tilldb::PoolStats;
use tilldb::WalStats;

use super::latency::Histogram;

/// The key for number `n`: fixed width, so keys sort like their numbers.
pub fn key(n: u64) -> String {
    format!("key{n:012}")
}

/// xorshift64: a tiny, seedable generator; quality is ample for picking keys.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator for `seed`; distinct seeds give distinct streams (splitmix64 scrambles the
    /// seed, so neighbouring seeds do not start with similar states).
    pub fn new(seed: u64) -> XorShift {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        // xorshift's state must never be zero: zero maps to zero forever.
        XorShift(if z == 0 { 1 } else { z })
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        assert_ne!(x, 0, "xorshift reached its fixed point");
        self.0 = x;
        x
    }

    /// A number in `0..n`. The modulo bias is below n / 2^64: nothing for key spaces.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "empty range");
        self.next_u64() % n
    }
}

/// What a thread's operation works with: its generator, a value buffer, and what it saw.
#[derive(Debug)]
pub struct ThreadState {
    pub rng: XorShift,
    /// The value a writer puts (its first bytes change with every put).
    pub value: Vec<u8>,
    /// Reads that found no value (every key is loaded, so this should stay 0).
    pub missing: u64,
}

/// What one thread did.
#[derive(Debug)]
pub struct Worker {
    /// Every operation's latency.
    pub latencies: Histogram,
    pub ops: u64,
    pub missing: u64,
}

/// The store's counters over one phase.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counts {
    pub wal: WalStats,
    pub pool: PoolStats,
}

impl Counts {
    fn since(before: tilldb::Stats, after: tilldb::Stats) -> Counts {
        Counts {
            wal: after.log.since(before.log),
            pool: after.pool.since(before.pool),
        }
    }
}

/// One phase's raw results.
#[derive(Debug)]
pub struct Phase {
    pub workers: Vec<Worker>,
    /// From opening the gate until the last thread stopped.
    pub elapsed: Duration,
    pub counts: Counts,
    /// CPU time the process used over `elapsed` (`None` where unknown).
    pub cpu: Option<Duration>,
}

impl Phase {
    /// Every worker's latencies, merged.
    pub fn latencies(&self) -> Histogram {
        Histogram::merged(self.workers.iter().map(|w| &w.latencies))
    }
}

/// How long a phase runs: `time`, and past it until its threads did `min_ops` operations in
/// all (each thread at least one).
#[derive(Debug, Clone, Copy)]
pub struct Span {
    pub time: Duration,
    pub min_ops: u64,
}

impl From<Duration> for Span {
    fn from(time: Duration) -> Span {
        Span { time, min_ops: 0 }
    }
}

/// Runs `threads` threads, each calling `op` in a loop for `span`. Thread `i` starts
/// with `XorShift::new(seed + i)` and a `value_bytes` value. The first error stops every
/// thread and is returned.
pub fn run_threads<F>(
    db: &Db,
    threads: usize,
    span: impl Into<Span>,
    seed: u64,
    value_bytes: usize,
    op: F,
) -> Result<Phase, Box<dyn std::error::Error>>
where
    F: Fn(&Db, &mut ThreadState) -> tilldb::Result<()> + Sync,
{
    let span = span.into();
    // Operations the threads did after the stop, counted only then (a shared counter
    // touched by every operation would cost the reads their scaling).
    let done = AtomicU64::new(0);
    let run = super::threads::run_gated(
        threads,
        "store",
        span.time,
        || db.stats(),
        |i, stop| {
            let state = ThreadState {
                rng: XorShift::new(seed.wrapping_add(i as u64)),
                value: vec![0xA5; value_bytes],
                missing: 0,
            };
            run_until(db, state, &op, stop, (&done, span.min_ops))
        },
    )?;
    let workers = run.results.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok(Phase {
        workers,
        elapsed: run.elapsed,
        counts: Counts::since(run.before, run.after),
        cpu: run.cpu,
    })
}

/// One thread: run and time `op` until told to stop and the threads did `min_ops` in all
/// (`done` counts what they reported); at least once.
fn run_until<F>(
    db: &Db,
    mut state: ThreadState,
    op: &F,
    stop: &AtomicBool,
    (done, min_ops): (&AtomicU64, u64),
) -> tilldb::Result<Worker>
where
    F: Fn(&Db, &mut ThreadState) -> tilldb::Result<()>,
{
    let mut latencies = Histogram::new();
    let mut ops = 0u64;
    let mut reported = 0u64;
    loop {
        let t = Instant::now();
        if let Err(e) = op(db, &mut state) {
            stop.store(true, Ordering::Relaxed);
            // Whatever the others wait for, no more is coming from here.
            done.store(u64::MAX / 2, Ordering::Relaxed);
            return Err(e);
        }
        let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
        ops += 1;
        latencies.record(ns);
        if stop.load(Ordering::Relaxed) {
            let total = done.fetch_add(ops - reported, Ordering::Relaxed) + (ops - reported);
            reported = ops;
            if total >= min_ops {
                break;
            }
        }
    }
    assert_eq!(latencies.count(), ops, "an operation not timed");
    Ok(Worker {
        latencies,
        ops,
        missing: state.missing,
    })
}

/// A one-put transaction on a random key below `keys`, committed at `durability`. The
/// value's first bytes hold a per-thread counter, so every put changes the page.
pub fn put_random(
    db: &Db,
    state: &mut ThreadState,
    keys: u64,
    durability: tilldb::Durability,
) -> tilldb::Result<()> {
    let n = state.rng.below(keys);
    let stamp = state.rng.next_u64().to_le_bytes();
    let len = stamp.len().min(state.value.len());
    state.value[..len].copy_from_slice(&stamp[..len]);
    let mut txn = db.begin()?;
    txn.put(key(n).as_bytes(), &state.value)?;
    txn.commit_with(durability)
}

/// A point read of a random key below `keys`; counts the key as missing if it has no value.
pub fn get_random(db: &Db, state: &mut ThreadState, keys: u64) -> tilldb::Result<()> {
    let n = state.rng.below(keys);
    if db.get(key(n).as_bytes())?.is_none() {
        state.missing += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_have_a_fixed_width() {
        assert_eq!(key(0), "key000000000000");
        assert_eq!(key(99_999), "key000000099999");
        assert_eq!(key(999_999_999_999).len(), key(0).len());
    }

    #[test]
    fn xorshift_is_seeded_and_stays_in_range() {
        let (mut a, mut b, mut c) = (XorShift::new(0), XorShift::new(0), XorShift::new(1));
        let first: Vec<u64> = (0..100).map(|_| a.below(10)).collect();
        let again: Vec<u64> = (0..100).map(|_| b.below(10)).collect();
        let other: Vec<u64> = (0..100).map(|_| c.below(10)).collect();
        assert_eq!(first, again);
        assert_ne!(first, other);
        assert!(first.iter().all(|&n| n < 10));
        // Every value of a small range comes up.
        let mut seen = [false; 10];
        for &n in &first {
            seen[usize::try_from(n).expect("below 10")] = true;
        }
        assert!(seen.iter().all(|&s| s), "{first:?}");
    }
}
