//! The read rows of `till bench kv`, timed: random point reads from many threads and range
//! reads from one, each thread with its own reader (one read transaction) made before its
//! clock starts.

use super::engines::{BoxError, KvStore};
use super::workload::{Key, RANGE_KEYS, VALUE_BYTES};
use crate::store_load::XorShift;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Seed of the reads' key choice (point reads: plus the thread's number).
const SEED_READS: u64 = 0x4B56_5245_4144_0000;

/// What a read row did.
#[derive(Debug, Clone, Copy)]
pub struct Timed {
    /// Gets, or ranges.
    pub operations: u64,
    /// Keys found (point reads), or entries read (ranges).
    pub found: u64,
    pub elapsed: Duration,
}

/// N random gets of `keys` from `threads` threads, N/T each. The time runs from the first
/// thread's start to the last one's end: on two CPUs a thread (the main one too) may wait a
/// whole slice for a CPU after the gate opens, so no single thread's clock covers the row.
pub fn point_reads(store: &dyn KvStore, keys: &[Key], threads: usize) -> Result<Timed, String> {
    assert!(threads > 0, "no reading threads");
    let per_thread = (keys.len() / threads).max(1);
    let barrier = Barrier::new(threads);
    let results: Vec<Result<ThreadReads, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                let seed = SEED_READS + t as u64;
                s.spawn(move || read_thread(store, barrier, keys, per_thread, seed))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a reader panicked".to_owned()))
            })
            .collect()
    });
    let results = results.into_iter().collect::<Result<Vec<_>, String>>()?;
    let first = results.iter().map(|r| r.started).min();
    let last = results.iter().map(|r| r.ended).max();
    Ok(Timed {
        operations: (per_thread * threads) as u64,
        found: results.iter().map(|r| r.found).sum(),
        elapsed: first
            .zip(last)
            .map_or(Duration::ZERO, |(first, last)| last - first),
    })
}

/// N/10 ranges of [`RANGE_KEYS`] entries, each from a random one of `keys`, on this thread.
pub fn range_reads(store: &dyn KvStore, keys: &[Key]) -> Result<Timed, BoxError> {
    let ranges = (keys.len() / 10).max(1);
    let mut reader = store.reader()?;
    let mut rng = XorShift::new(SEED_READS.wrapping_sub(1));
    let started = Instant::now();
    let mut entries = 0u64;
    for _ in 0..ranges {
        entries += reader.range(pick(&mut rng, keys), RANGE_KEYS)? as u64;
    }
    Ok(Timed {
        operations: ranges as u64,
        found: entries,
        elapsed: started.elapsed(),
    })
}

/// What one reading thread did, and when.
struct ThreadReads {
    started: Instant,
    ended: Instant,
    found: u64,
}

/// One thread of the point reads: its reader, the gate, `reads` gets of random `keys`.
fn read_thread(
    store: &dyn KvStore,
    barrier: &Barrier,
    keys: &[Key],
    reads: usize,
    seed: u64,
) -> Result<ThreadReads, String> {
    // Every thread reaches the gate, whatever making its reader did, or the others wait
    // there for ever.
    let reader = catch_unwind(AssertUnwindSafe(|| store.reader()));
    barrier.wait();
    let mut reader = match reader {
        Ok(Ok(reader)) => reader,
        Ok(Err(e)) => return Err(format!("reader: {e}")),
        Err(_) => return Err("making a reader panicked".to_owned()),
    };
    let mut rng = XorShift::new(seed);
    let started = Instant::now();
    let mut found = 0u64;
    for _ in 0..reads {
        match reader
            .get(pick(&mut rng, keys))
            .map_err(|e| e.to_string())?
        {
            Some(VALUE_BYTES) => found += 1,
            Some(len) => return Err(format!("a value of {len} bytes, not {VALUE_BYTES}")),
            None => {}
        }
    }
    Ok(ThreadReads {
        started,
        ended: Instant::now(),
        found,
    })
}

/// A random one of `keys`.
fn pick<'k>(rng: &mut XorShift, keys: &'k [Key]) -> &'k Key {
    let index = rng.below(keys.len() as u64);
    &keys[usize::try_from(index).expect("an index below a slice's length fits usize")]
}
