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
//! With the write buffer on (`Options::write_buffer_bytes`, `commit/buffer.rs`) the thread
//! also drains the buffer once the writer is idle: a commit that leaves something buffered
//! and finds the thread not watching asks it to watch ([`Checkpointer::watch`]); it looks
//! every [`IDLE_DRAIN_AFTER`], and once a look finds the log's end where the last one did
//! (no commit of any kind in between) it drains (`commit::drain_if_idle`). Readers then read
//! the tree alone again, at its speed, instead of merging a buffer no commit adds to; the
//! next commit through the tree finds nothing to drain. A commit that comes during the drain
//! waits for it, as one does for a drain at the threshold.
//!
//! The thread holds the database weakly: it keeps no handle open. If the last handle goes
//! while it checkpoints, the close runs on it, and the close does not wait for it (it is
//! the thread closing).

use crate::db::{Db, Inner};
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the log's end must stay where it is (no commit) before the thread drains the
/// write buffer. Long enough that a stream of commits a few ms apart fills the buffer and
/// drains it at its threshold, a few hundred at a time; short enough that readers after the
/// last commit of a burst soon read the tree alone.
pub(in crate::db) const IDLE_DRAIN_AFTER: Duration = Duration::from_millis(20);

/// What the thread is asked to do.
#[derive(Debug, Default)]
struct Asked {
    checkpoint: bool,
    /// Watch the write buffer, idle since the log's end was this (`Checkpointer::watch`).
    watch: Option<u64>,
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

    /// Asks the thread to watch the write buffer and drain it once no commit came for
    /// [`IDLE_DRAIN_AFTER`], counting from `end` (the log's end as the asking commit knows
    /// it). Nothing without a thread.
    pub(super) fn watch(&self, end: u64) {
        if self.running() {
            self.signal.asked.lock().watch = Some(end);
            self.signal.wake.notify_one();
        }
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

/// What the thread does next.
enum Work {
    Checkpoint,
    /// Look whether the writer is idle since the log's end was this, and drain if so.
    Look(u64),
}

fn run(inner: &Weak<Inner>, signal: &Signal) {
    // While the thread watches the write buffer: the log's end at the last look.
    let mut watching: Option<u64> = None;
    loop {
        let work = {
            let mut asked = signal.asked.lock();
            loop {
                if asked.stop {
                    return;
                }
                if asked.checkpoint {
                    asked.checkpoint = false;
                    break Work::Checkpoint;
                }
                if let Some(end) = asked.watch.take() {
                    watching = Some(end);
                }
                match watching {
                    None => signal.wake.wait(&mut asked),
                    Some(end) => {
                        if signal
                            .wake
                            .wait_for(&mut asked, IDLE_DRAIN_AFTER)
                            .timed_out()
                            && !asked.stop
                            && !asked.checkpoint
                            && asked.watch.is_none()
                        {
                            break Work::Look(end);
                        }
                    }
                }
            }
        };
        if matches!(work, Work::Checkpoint) {
            // Cleared before the checkpoint reads the log end: a commit past it asks again.
            signal.pending.store(false, Ordering::Release);
        }
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let db = Db {
            inner,
            counted: false,
        };
        if db.inner.poisoned.is_set() {
            watching = None;
            continue;
        }
        match work {
            Work::Checkpoint => {
                if let Err(e) = db.fuzzy_checkpoint(super::ReadersHeld::Defer) {
                    // As a commit that ran it did: the database stops; the commits were
                    // durable.
                    db.poison(e);
                }
            }
            // A failed drain poisoned the database where it failed.
            Work::Look(end) => {
                watching = match crate::db::commit::drain_if_idle(&db, end) {
                    Ok(Some(now)) => Some(now),
                    Ok(None) | Err(_) => None,
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::IDLE_DRAIN_AFTER;
    use crate::io::{SimConfig, SimDisk};
    use crate::{Db, Durability, Options};
    use std::path::Path;
    use std::sync::Arc;
    use std::time::Duration;

    /// A database with the buffer on, no background threads and no checkpoint due by time.
    fn open() -> Db {
        let db = Db::open_with_storage(
            Arc::new(SimDisk::new(SimConfig::default())),
            Path::new("/db"),
            Options {
                background_threads: false,
                checkpoint_interval: Duration::from_hours(1),
                ..Options::for_tests()
            },
        )
        .expect("open");
        db.set_write_buffer_bytes(1 << 30).expect("buffer on");
        db
    }

    fn commit(db: &Db, key: &[u8], value: &[u8]) {
        let mut txn = db.begin().expect("begin");
        txn.put(key, value).expect("put");
        txn.commit_with(Durability::Buffered).expect("commit");
    }

    /// The drain's own check: a log end that moved since the thread looked means a commit
    /// came, and nothing is drained; one that did not drains.
    #[test]
    fn the_idle_drain_waits_while_the_log_end_moves() {
        let db = open();
        commit(&db, b"k", b"v");
        let end = db.inner.wal.end_lsn().0;
        let moved = crate::db::commit::drain_if_idle(&db, end - 1).expect("look");
        assert_eq!(moved, Some(end), "a commit came since the look before");
        assert!(db.inner.visible.buffer_live_bytes() > 0, "nothing drained");
        let drained = crate::db::commit::drain_if_idle(&db, end).expect("look");
        assert_eq!(drained, None);
        assert_eq!(db.inner.visible.buffer_live_bytes(), 0, "drained");
        assert_eq!(db.get(b"k").expect("get").as_deref(), Some(&b"v"[..]));
    }

    /// Without background threads nothing drains an idle buffer: there is no thread, and
    /// the buffer waits for its threshold, a read, a checkpoint or the close.
    #[test]
    fn without_background_threads_an_idle_buffer_stays() {
        let db = open();
        commit(&db, b"k", b"v");
        std::thread::sleep(IDLE_DRAIN_AFTER * 3);
        assert!(db.inner.visible.buffer_live_bytes() > 0, "still buffered");
        assert_eq!(db.get(b"k").expect("get").as_deref(), Some(&b"v"[..]));
    }
}
