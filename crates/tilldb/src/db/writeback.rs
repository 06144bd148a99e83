//! The background writer: keeps dirty pages few enough that misses rarely have to write one
//! back themselves (which through the doublewrite guard costs two flushes on the path of a
//! reader or a commit).
//!
//! It wakes every `INTERVAL`; when more than three quarters of the frames are dirty it writes
//! batches until five eighths are. A write-back failure poisons the database (fail-stop).
//!
//! Why so late: a page written back here is written again once the next change dirties it,
//! and a hot page is dirtied again at once, so writing early buys nothing but device bytes
//! and CPU. What the writer must keep is enough clean or free frames that a miss finds a
//! clean victim (the clock takes a dirty one only after two turns find none): a quarter of
//! the frames is plenty. Redo length does not depend on it (checkpoints bound the log), and
//! a checkpoint writes each dirty page once. Measured (docs/benchmarks-journal.md, "The background
//! writer"): with the writer starting at a quarter, 64 committing threads on a database
//! that fits the cache wrote every page back again and again (2,400-6,000 pages in 3 s,
//! 1,460 device bytes per commit); starting at three quarters it wrote none (950 bytes per
//! commit), and random updates on a database 4x the cache got faster too (no eviction
//! writes either way).

use super::Poison;
use crate::page::BufferPool;
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

const INTERVAL: Duration = Duration::from_millis(20);
/// Pages per write-back batch (one doublewrite batch).
const BATCH_PAGES: usize = 64;

/// The running writer; stopped and joined by [`WriteBack::stop`] (and on drop).
#[derive(Debug)]
pub struct WriteBack {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: Option<JoinHandle<()>>,
}

impl WriteBack {
    /// Starts the writer for `pool`; it poisons the database, with the error, if a write-back
    /// fails.
    pub fn start(pool: Arc<BufferPool>, poisoned: Arc<Poison>) -> std::io::Result<WriteBack> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let signal = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("tilldb-writeback".into())
            .spawn(move || run(&pool, &poisoned, &signal))?;
        Ok(WriteBack {
            stop,
            handle: Some(handle),
        })
    }

    /// No writer: misses and checkpoints write pages back themselves
    /// (`Options::background_threads` off).
    pub fn idle() -> WriteBack {
        WriteBack {
            stop: Arc::new((Mutex::new(true), Condvar::new())),
            handle: None,
        }
    }

    /// Stops the writer and waits for it.
    pub fn stop(&mut self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

impl Drop for WriteBack {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Dirty frames above which the writer starts, and down to which it writes: three quarters
/// and five eighths of `capacity`.
fn watermarks(capacity: usize) -> (usize, usize) {
    let high = (capacity * 3 / 4).max(1);
    let low = capacity * 5 / 8;
    debug_assert!(low < high, "the writer must stop below where it starts");
    (high, low)
}

fn run(pool: &BufferPool, poisoned: &Poison, stop: &(Mutex<bool>, Condvar)) {
    let (high, low) = watermarks(pool.capacity());
    loop {
        {
            let mut stopped = stop.0.lock();
            if *stopped {
                return;
            }
            let _ = stop.1.wait_for(&mut stopped, INTERVAL);
            if *stopped {
                return;
            }
        }
        if poisoned.is_set() {
            return;
        }
        if pool.dirty_count() <= high {
            continue;
        }
        // Bounded: at most one pass over the pool per wake-up.
        for _ in 0..=(pool.capacity() / BATCH_PAGES) {
            match pool.flush_dirty(BATCH_PAGES) {
                Ok(0) => break,
                Ok(_) if pool.dirty_count() <= low => break,
                Ok(_) => {}
                Err(e) => {
                    poisoned.set(&e);
                    return;
                }
            }
        }
    }
}
