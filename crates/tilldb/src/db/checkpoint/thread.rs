//! The checkpoint thread: a commit that finds a checkpoint due wakes it, and returns.
//!
//! The committing thread ran the checkpoint itself, after its commit and before it returned:
//! writing back every page dirtied since the last one, some 20,000 pages (300 MiB) after a
//! bulk load, so one commit in thousands took a second, and a single thread committing
//! `Buffered` spent a quarter of its time writing pages back (docs/benchmarks-journal.md, "No-flush
//! commits: the checkpoint on a thread of its own"). Here it runs beside the commits,
//! which go on meanwhile (a checkpoint takes the writer lock only for a moment:
//! `checkpoint.rs`). A checkpoint that falls behind still holds commits back: a commit more
//! than `BACKPRESSURE_CHECKPOINTS` checkpoints' worth of log past the last one waits for the
//! running one before it returns, as before.
//!
//! Without background threads (`Options::background_threads` off) there is no thread: the
//! commit runs the checkpoint itself, as the crash explorer's one-thread runs need.
//!
//! The thread holds the database weakly: it keeps no handle open. If the last handle goes
//! while it checkpoints, the close runs on it, and the close does not wait for it (it is
//! the thread closing).

use crate::db::{Db, Inner};
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

/// What the thread is asked to do.
#[derive(Debug, Default)]
struct Asked {
    checkpoint: bool,
    stop: bool,
}

#[derive(Debug, Default)]
struct Signal {
    asked: Mutex<Asked>,
    wake: Condvar,
    /// A checkpoint was asked for and has not started: commits that find one due meanwhile
    /// skip the lock.
    pending: AtomicBool,
}

/// The running checkpoint thread, or none; stopped and joined by [`Checkpointer::stop`].
#[derive(Debug, Default)]
pub(super) struct Checkpointer {
    signal: Arc<Signal>,
    handle: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// No thread: commits run checkpoints themselves.
    pub(super) fn idle() -> Checkpointer {
        Checkpointer::default()
    }

    /// Starts the thread for the database `inner`.
    pub(super) fn start(inner: Weak<Inner>) -> std::io::Result<Checkpointer> {
        let signal = Arc::new(Signal::default());
        let theirs = Arc::clone(&signal);
        let handle = std::thread::Builder::new()
            .name("tilldb-checkpoint".into())
            .spawn(move || run(&inner, &theirs))?;
        Ok(Checkpointer {
            signal,
            handle: Some(handle),
        })
    }

    /// Whether a thread runs checkpoints.
    pub(super) fn running(&self) -> bool {
        self.handle.is_some()
    }

    /// Asks the thread for a checkpoint (one already asked for and not started counts).
    pub(super) fn ask(&self) {
        if self.signal.pending.swap(true, Ordering::AcqRel) {
            return;
        }
        self.signal.asked.lock().checkpoint = true;
        self.signal.wake.notify_one();
    }

    /// Stops the thread, after the checkpoint it is running, and waits for it; unless this
    /// is that thread (the last handle went while it checkpointed), which stops once the
    /// close it is running returns.
    pub(super) fn stop(&mut self) {
        self.signal.asked.lock().stop = true;
        self.signal.wake.notify_one();
        if let Some(handle) = self.handle.take()
            && handle.thread().id() != std::thread::current().id()
        {
            let _ = handle.join();
        }
    }
}

/// Starts `db`'s checkpoint thread when its background threads are on.
pub(in crate::db) fn start_for(db: &Db) -> crate::Result<()> {
    if db.inner.options.background_threads {
        let thread =
            Checkpointer::start(Arc::downgrade(&db.inner)).map_err(|source| crate::Error::Io {
                op: crate::IoOp::Create,
                path: db.inner.dir.clone(),
                source,
            })?;
        db.inner.checkpoints.start_thread(thread);
    }
    Ok(())
}

fn run(inner: &Weak<Inner>, signal: &Signal) {
    loop {
        {
            let mut asked = signal.asked.lock();
            while !asked.checkpoint && !asked.stop {
                signal.wake.wait(&mut asked);
            }
            if asked.stop {
                return;
            }
            asked.checkpoint = false;
        }
        // Cleared before the checkpoint reads the log end: a commit past it asks again.
        signal.pending.store(false, Ordering::Release);
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let db = Db {
            inner,
            counted: false,
        };
        if !db.inner.poisoned.is_set()
            && let Err(e) = db.fuzzy_checkpoint(super::ReadersHeld::Defer)
        {
            // As a commit that ran it did: the database stops; the commits were durable.
            db.poison(e);
        }
    }
}
