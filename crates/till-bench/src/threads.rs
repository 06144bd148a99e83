//! The harness every multi-threaded benchmark phase shares: start `threads` workers behind a
//! gate (so they begin together), let them run for a duration, stop them, and read the
//! counters (and this process's CPU time) right before the start and right after the last
//! worker stopped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{PoisonError, RwLock};
use std::time::{Duration, Instant};

/// What one gated run produced.
pub struct GatedRun<T, C> {
    /// Each worker's result, in thread order.
    pub results: Vec<T>,
    /// From the gate opening until the last worker stopped.
    pub elapsed: Duration,
    pub before: C,
    pub after: C,
    /// CPU time (user + system) the whole process used over `elapsed`, its background
    /// threads included; `None` where it cannot be read (`platform::process_cpu_time`).
    pub cpu: Option<Duration>,
}

/// Runs `worker(i, stop)` on `threads` threads named `{name}-{i}` for `duration`; `counters`
/// is read just before the gate opens and after every worker has stopped. A thread that cannot
/// be started stops the others and is an error.
pub fn run_gated<T, C, W, K>(
    threads: usize,
    name: &str,
    duration: Duration,
    counters: K,
    worker: W,
) -> Result<GatedRun<T, C>, Box<dyn std::error::Error>>
where
    T: Send,
    W: Fn(usize, &AtomicBool) -> T + Sync,
    K: Fn() -> C,
{
    assert!(threads > 0, "a run without threads");
    let stop = AtomicBool::new(false);
    // Held for writing until every thread is spawned; each thread starts once it can read.
    let gate = RwLock::new(());
    let closed = gate.write().unwrap_or_else(PoisonError::into_inner);
    let (results, elapsed, before, after, cpu, spawn_error) = std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(threads);
        let mut spawn_error = None;
        for i in 0..threads {
            let (gate, stop, worker) = (&gate, &stop, &worker);
            let body = move || {
                drop(gate.read().unwrap_or_else(PoisonError::into_inner));
                worker(i, stop)
            };
            match std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn_scoped(s, body)
            {
                Ok(h) => handles.push(h),
                Err(e) => {
                    spawn_error = Some(e);
                    stop.store(true, Ordering::Relaxed);
                    break;
                }
            }
        }
        let before = counters();
        let cpu_before = crate::platform::process_cpu_time();
        let start = Instant::now();
        drop(closed);
        if spawn_error.is_none() {
            std::thread::sleep(duration);
        }
        stop.store(true, Ordering::Relaxed);
        let results: Vec<T> = handles
            .into_iter()
            .map(|h| h.join().expect("a benchmark thread panicked"))
            .collect();
        let elapsed = start.elapsed();
        let cpu = cpu_before
            .zip(crate::platform::process_cpu_time())
            .map(|(b, a)| a.saturating_sub(b));
        (results, elapsed, before, counters(), cpu, spawn_error)
    });
    if let Some(e) = spawn_error {
        return Err(format!("cannot start {threads} threads: {e}").into());
    }
    assert_eq!(results.len(), threads, "a thread went missing");
    Ok(GatedRun {
        results,
        elapsed,
        before,
        after,
        cpu,
    })
}
