//! The background writer: keeps dirty pages few enough that misses rarely have to write one
//! back themselves (which through the doublewrite guard costs two flushes on the path of a
//! reader or a commit).
//!
//! It wakes every `INTERVAL`; when more than a quarter of the frames are dirty it writes
//! batches until an eighth are. A write-back failure poisons the database (fail-stop).

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

fn run(pool: &BufferPool, poisoned: &Poison, stop: &(Mutex<bool>, Condvar)) {
    let high = (pool.capacity() / 4).max(1);
    let low = pool.capacity() / 8;
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
