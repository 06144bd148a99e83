//! Checkpoints: fuzzy ones by log volume and time, backpressure when one falls behind, and
//! the close-time checkpoint of the last handle's drop; the room's state is [`Checkpoints`].

mod thread;

pub(super) use thread::start_for;

use super::{
    BACKPRESSURE_CHECKPOINTS, CHECKPOINT_BATCH_PAGES, Db, Header, Inner, Lsn, Ordering, Result,
};
use crate::db::writeback::WriteBack;
use crate::header::HeaderFile;
use parking_lot::{Mutex, MutexGuard};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Instant;
use thread::Checkpointer;

/// The checkpoint room's state. Its fields are private to this file; the rest of `db/` asks
/// through the methods below.
pub(super) struct Checkpoints {
    /// The two header slots; a checkpoint writes the older one. Guarded by its mutex, taken
    /// after `running`.
    header: Mutex<HeaderFile>,
    /// An encrypted database's application key: the one that wraps the data key in the
    /// header now (set at open, changed by a rotation; a compaction wraps its copy's with
    /// it). Taken after `header` when both are.
    encryption: Mutex<Option<crate::crypt::Encryption>>,
    /// Held by the running checkpoint: one at a time. A backup holds it too, so the header it
    /// copies names a redo point whose log it still finds.
    running: Mutex<()>,
    /// The checkpoint thread, with background threads on (`checkpoint/thread.rs`).
    thread: Mutex<Checkpointer>,
    /// The background writer (`writeback.rs`), held so that the last handle stops it.
    writeback: Mutex<WriteBack>,
    /// The log end when the latest checkpoint began (or the one recovery started from):
    /// the next is due a distance after it. Only moves forward.
    end: AtomicU64,
    /// Full-page images: the log end when the latest checkpoint began (see `db/mod.rs`,
    /// "Full-page images"). Set under the writer lock; only moves forward.
    image_horizon: AtomicU64,
    /// Whether the checkpoint thread watches the write buffer, to drain it once the writer
    /// is idle (`checkpoint/thread.rs`): set by the commit that asks it to, cleared by the
    /// drain under the writer lock, so a commit buffered after that drain asks again.
    buffer_watched: AtomicBool,
    /// When the database was opened, and when the last checkpoint ended, in ms since then.
    opened: Instant,
    last_ms: AtomicU64,
}

impl Checkpoints {
    /// A database whose header in force is `header_file`'s newest, recovered from
    /// `checkpoint` (its redo point), with `writeback` running or idle.
    pub(super) fn new(
        (header_file, encryption): (HeaderFile, Option<crate::crypt::Encryption>),
        writeback: WriteBack,
        checkpoint: Lsn,
    ) -> Self {
        assert_eq!(
            header_file.keys().is_some(),
            encryption.is_some(),
            "an encrypted database is opened with its key"
        );
        // The database's own cipher, whatever the opener asked for a new database.
        let encryption = encryption.map(|e| crate::crypt::Encryption {
            cipher: header_file.keys().map_or(e.cipher, |k| k.cipher()),
            ..e
        });
        Checkpoints {
            header: Mutex::new(header_file),
            encryption: Mutex::new(encryption),
            running: Mutex::new(()),
            thread: Mutex::new(Checkpointer::idle()),
            writeback: Mutex::new(writeback),
            end: AtomicU64::new(checkpoint.0),
            image_horizon: AtomicU64::new(checkpoint.0),
            buffer_watched: AtomicBool::new(false),
            opened: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    /// The newest header written (the one in force).
    pub(super) fn newest_header(&self) -> Header {
        self.header.lock().newest().1
    }

    /// Writes `header` as the newest: for tests that make a header an older build wrote.
    #[cfg(test)]
    pub(super) fn write_header(&self, header: &Header) -> crate::error::Result<()> {
        self.header.lock().write(header).map(|_| ())
    }

    /// Whether the header allows drain chunks (version 5): the log may then hold them.
    pub(super) fn drain_chunks_allowed(&self) -> bool {
        self.header.lock().newest().1.drain_chunks
    }

    /// Sets the header's write-buffer features (version 5, `header.rs`) unless they are set: a
    /// header write and its flush, before the first write-buffer record may be appended.
    /// Requires: no buffered record of a version 4 log left undrained (its commits carry no
    /// counts, which chunks need: `commit/buffer.rs`, `rebuild`).
    pub(super) fn allow_write_buffer(&self) -> crate::error::Result<()> {
        let mut header_file = self.header.lock();
        let (_, newest) = header_file.newest();
        if !newest.write_buffer || !newest.drain_chunks {
            header_file.write(&Header {
                write_buffer: true,
                drain_chunks: true,
                ..newest
            })?;
        }
        Ok(())
    }

    /// An encrypted database's keys (`None` for a plain one), as its header file holds them.
    pub(super) fn keys(&self) -> Option<std::sync::Arc<crate::crypt::DatabaseKeys>> {
        self.header.lock().keys().cloned()
    }

    /// The application's key that wraps the data key now (`None`: a plain database).
    pub(super) fn encryption(&self) -> Option<crate::crypt::Encryption> {
        self.encryption.lock().clone()
    }

    /// Wraps the data key with `encryption`'s key and writes the wrap into the header
    /// (`HeaderFile::rewrap`): from its first flush on, the database opens with that key
    /// only. `dir` names the database in errors. Nothing is written when the key cannot wrap.
    pub(super) fn rewrap(
        &self,
        dir: &std::path::Path,
        encryption: crate::crypt::Encryption,
    ) -> crate::Result<()> {
        let mut header = self.header.lock();
        let keys = header
            .keys()
            .cloned()
            .ok_or_else(|| crate::Error::NotEncrypted {
                dir: dir.to_path_buf(),
            })?;
        let unavailable = |reason: String| crate::Error::KeyUnavailable {
            dir: dir.to_path_buf(),
            reason,
        };
        let wrapped = keys
            .wrap_with(&*encryption.provider)
            .map_err(|e| unavailable(e.to_string()))?;
        let key_id = encryption.provider.key_id();
        let block = crate::crypt::KeyBlock::new(keys.cipher(), keys.db_id(), &key_id, &wrapped)
            .map_err(|what| {
                crate::Error::InvalidArgument(format!("the new key's id or wrap: {what}"))
            })?;
        let result = header.rewrap(&block);
        // The key in force is the one the newest slot names, even when the second write
        // failed: a compaction after it must wrap its copy with that one.
        if header.newest().1.encryption == Some(block) {
            *self.encryption.lock() = Some(crate::crypt::Encryption {
                cipher: keys.cipher(),
                ..encryption
            });
        }
        result
    }

    /// Keeps checkpoints from running while the guard is held (waits for a running one).
    pub(super) fn hold(&self) -> MutexGuard<'_, ()> {
        self.running.lock()
    }

    /// `Some` while no checkpoint runs, keeping one from starting until dropped.
    pub(super) fn quiet(&self) -> Option<MutexGuard<'_, ()>> {
        self.running.try_lock()
    }

    /// The log end when the latest checkpoint began.
    pub(super) fn began_at(&self) -> u64 {
        self.end.load(Ordering::Acquire)
    }

    /// The image horizon (see the field).
    pub(super) fn image_horizon(&self) -> u64 {
        self.image_horizon.load(Ordering::Acquire)
    }

    /// Installs the checkpoint thread (`checkpoint/thread.rs`), once, when the database opens.
    fn start_thread(&self, thread: Checkpointer) {
        let mut slot = self.thread.lock();
        assert!(!slot.running(), "a second checkpoint thread");
        *slot = thread;
    }

    /// Asks the checkpoint thread to watch the write buffer from `end` on, unless it does.
    /// Requires: something buffered.
    fn watch_buffer(&self, end: u64) {
        if !self.buffer_watched.swap(true, Ordering::AcqRel) {
            self.thread.lock().watch(end);
        }
    }

    /// The idle drain ran (`commit::drain_if_idle`): the next commit that buffers something
    /// asks the thread to watch again. Requires: the writer lock.
    pub(super) fn buffer_unwatched(&self) {
        self.buffer_watched.store(false, Ordering::Release);
    }

    /// Stops the checkpoint thread and waits for it (the last handle's drop).
    pub(super) fn stop_thread(&self) {
        self.thread.lock().stop();
    }

    /// Stops the checkpoint thread and the background writer: nothing writes the files
    /// after this.
    fn stop_threads(&mut self) {
        self.thread.get_mut().stop();
        self.writeback.lock().stop();
    }
}

impl std::fmt::Debug for Checkpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpoints")
            .field("began_at", &self.began_at())
            .field("image_horizon", &self.image_horizon())
            .finish_non_exhaustive()
    }
}

impl Db {
    /// Writes every change so far to the data file and moves the log's start past them. A
    /// failure stops the database (fail-stop: every later call fails until reopen).
    ///
    /// While read-only handles hold their snapshots (`db/readers.rs`) this waits until they
    /// refresh or close; the checkpoints the database runs by itself are deferred instead.
    /// On a read-only handle it does nothing.
    pub fn checkpoint(&self) -> Result<()> {
        self.check_poison()?;
        if self.is_read_only() {
            return Ok(());
        }
        self.fuzzy_checkpoint(ReadersHeld::Wait)
            .map_err(|e| self.poison(e))
    }

    /// A checkpoint unless read-only handles hold their snapshots: then deferred (the log
    /// grows until they refresh or close).
    pub(super) fn checkpoint_unless_readers(&self) -> Result<()> {
        self.check_poison()?;
        if self.is_read_only() {
            return Ok(());
        }
        self.fuzzy_checkpoint(ReadersHeld::Defer)
            .map_err(|e| self.poison(e))
    }

    /// A fuzzy checkpoint. Commits go on while it writes pages back; they are held only while
    /// it reads a consistent point:
    ///
    /// 1. under the writer lock (no commit half applied, every changed page stamped): the log
    ///    end `end` and the allocator state;
    /// 2. write back every page whose first unwritten change was logged before `end` (the WAL
    ///    rule forces the log first);
    /// 3. redo must start at the oldest redo point still dirty, or at `end`: write that and
    ///    the allocator state to the other header slot, and release log segments before it.
    ///
    /// A page changed again during step 2 stays dirty, its redo point moved up to the log end
    /// at its copy (the copy holds every change before that; `flush_dirty_where`), so the
    /// passes converge under hot pages and redo starts at `end` (issue 21).
    pub(super) fn fuzzy_checkpoint(&self, readers_held: ReadersHeld) -> Result<()> {
        let inner = &self.inner;
        let _one_at_a_time = inner.checkpoints.running.lock();
        // The pages, the ledger, the header and the log's start change: not under a
        // read-only handle's snapshot (`readers.rs`). Held to the end, so the pages written
        // and the header that counts on them reach readers together.
        let gate = inner
            .gate
            .as_deref()
            .expect("a writer has the readers' gate");
        let _readers_out = match readers_held {
            _ if crate::mutants::active("writes-ignore-readers") => None,
            ReadersHeld::Wait => Some(gate.enter()?),
            ReadersHeld::Defer => {
                let Some(entered) = gate.try_enter()? else {
                    tracing::debug!(
                        target: "tilldb",
                        "checkpoint deferred: read-only handles hold their snapshots"
                    );
                    return Ok(());
                };
                Some(entered)
            }
        };
        let started = std::time::Instant::now();
        // Pages parked while readers held their snapshots come back to be written with the
        // rest (`page/buffer_pool/held.rs`).
        inner.pool.unpark()?;
        // Most of the buffer in chunks first, commits and readers between them; the rest
        // (what came meanwhile) whole under the writer lock below.
        if inner.visible.buffer_redo_floor().is_some() {
            crate::db::commit::drain_in_chunks(self, crate::db::commit::IDLE_CHUNK_BYTES)?;
        }
        let (end, alloc) = {
            let mut alloc = inner.writer.lock();
            // The buffered records before `end` into the tree first: the log before the redo
            // point this checkpoint writes may be recycled (`commit/buffer.rs`).
            crate::db::commit::drain(self, &mut alloc)?;
            let end = inner.wal.end_lsn();
            assert!(
                inner.visible.buffer_redo_floor().is_none(),
                "a checkpoint's redo point past a buffered record not drained"
            );
            // Every commit from here on images the pages older than this checkpoint.
            crate::db::advance_mark(&inner.checkpoints.image_horizon, end.0, "the image horizon");
            (end, *alloc)
        };
        // Every page dirtied before `end`, however many: a page changed again while it is
        // written back gets a redo point after `end` (`flush_dirty_where`), and no page
        // joins the set (every commit stamped from here on began at or after `end`), so
        // each pass that writes anything leaves at least one fewer, and the passes end
        // within one per frame (asserted). A page a running commit holds unlogged waits for
        // a later pass; under the commit queue's back-to-back commits a hot page is
        // unlogged most of the time, so several passes are the rule, not the exception.
        let mut passes = 0;
        while !crate::mutants::active("header-before-pages")
            && inner
                .pool
                .flush_dirty_before(end.0, CHECKPOINT_BATCH_PAGES)?
                > 0
        {
            passes += 1;
            assert!(
                passes <= inner.pool.capacity() + 1,
                "a checkpoint's write-back does not converge"
            );
        }
        let redo = if crate::mutants::active("header-before-pages") {
            end.0
        } else {
            inner.pool.min_rec_lsn().map_or(end.0, |r| r.min(end.0))
        };
        if redo < end.0 && self.image_below().is_some() {
            // Full-page images need a redo point exactly at the horizon (see `db/mod.rs`,
            // "Full-page images"): a page still dirty from before it was not imaged since.
            // Leave the previous header in force and try again after the next stretch of log.
            tracing::debug!(
                target: "tilldb",
                redo_lsn = redo,
                horizon_lsn = end.0,
                "checkpoint deferred: a page dirty from before the image horizon"
            );
            crate::db::advance_mark(&inner.checkpoints.end, end.0, "the checkpoint end");
            return Ok(());
        }
        // Before the header moves redo past the records that built the versions written:
        // from then on only the ledger tells a lost write of one (`page/ledger.rs`).
        if !crate::mutants::active("no-ledger-save") {
            inner.pool.save_ledger()?;
        }
        // The header takes the allocator state at `end`: the log must hold every record before
        // `end` first. Recovery replays from `redo` to the log's end and leaves the allocator
        // as the last record set it; with a record before `end` lost, that is behind the
        // header (pages counted that no surviving commit allocated, and the next header
        // write refuses a page count going backwards: explore_random seed 1398, under CI).
        // The write-back above flushed the log only as far as the pages it wrote needed
        // (`tests/checkpoint_log_sync.rs`).
        if !crate::mutants::active("header-before-log-sync") {
            inner.wal.sync()?;
        }
        // Readers must see the redo point as durable before they can find it in the header.
        gate.publish()?;
        self.write_header_and_release(end, redo, alloc)?;
        tracing::debug!(
            target: "tilldb",
            redo_lsn = redo,
            write_back_passes = passes,
            elapsed_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            "checkpoint"
        );
        inner.checkpoints.last_ms.store(
            millis(inner.checkpoints.opened.elapsed()),
            Ordering::Release,
        );
        Ok(())
    }

    /// The end of a checkpoint that began at `end` and made every page changed before
    /// `redo` durable: the header (redo point and the allocator state at `end`) goes to the
    /// older slot, then the log before the redo point is released (unless a feed consumer
    /// still needs it). Requires: the running checkpoint's guard held, the log durable to
    /// `end`, and the redo point published to readers.
    fn write_header_and_release(
        &self,
        end: Lsn,
        redo: u64,
        alloc: crate::record::Alloc,
    ) -> Result<()> {
        let inner = &self.inner;
        let mut header_file = inner.checkpoints.header.lock();
        let (_, newest) = header_file.newest();
        assert!(
            redo >= newest.checkpoint_lsn.0,
            "checkpoint going backwards: {redo}"
        );
        let header = Header {
            checkpoint_lsn: Lsn(redo),
            free_head: alloc.free_head,
            page_count: alloc.page_count,
            ..newest
        };
        // Segments below the redo point only: redo lies before `end` when a page dirtied
        // before it is still dirty (a commit held it unlogged through every pass).
        let release_to = if crate::mutants::active("release-to-checkpoint-end") {
            end
        } else {
            Lsn(redo)
        };
        let keep = match &inner.feed {
            Some(feed) => release_to.min(feed.keep_from(end, Lsn(redo), &inner.wal)?),
            None => release_to,
        };
        if crate::mutants::active("release-before-header") {
            inner.wal.release_before(keep)?;
        }
        header_file.write(&header)?;
        drop(header_file);
        // The header is durable: from here on, redo starts at `redo`, and the next checkpoint
        // is due a distance after `end`.
        crate::db::advance_mark(&inner.checkpoints.end, end.0, "the checkpoint end");
        // Only now, with the header that no longer needs them durable: the segments before
        // the new redo point may be reused (`tests/log_gaps.rs` crashes at every step here),
        // unless a feed consumer still needs them.
        inner.wal.release_before(keep)?;
        Ok(())
    }

    /// After an open that replayed log (the last run did not close cleanly): a checkpoint
    /// before the first commit, so the segments recovery read are released now. Every open
    /// starts a fresh segment (`wal/mod.rs`), and checkpoints run by log volume or time: a
    /// till that commits a little each day and is switched off without a close would
    /// otherwise keep, and read at every open, one segment more per crash (issue 34; 20 kill
    /// -9 cycles left 19 segments, 1.2 GB, and an open 7 x slower). Its cost is the write-back
    /// of the pages redo changed: in proportion to the log replayed, never to the number of
    /// earlier crashes (`tests/log_bound.rs`).
    pub(super) fn checkpoint_after_recovery(&self) -> Result<()> {
        if self.inner.recovery.log_bytes == 0 || crate::mutants::active("no-recovery-checkpoint") {
            return Ok(());
        }
        self.checkpoint_unless_readers()
    }

    /// The image horizon commits use: `Some` only under full-page images.
    pub(super) fn image_below(&self) -> Option<u64> {
        (self.inner.options.torn_page_guard == crate::page::TornPageGuard::FullPageImages)
            .then(|| self.inner.checkpoints.image_horizon.load(Ordering::Acquire))
    }

    /// Runs a checkpoint when enough log was written since the last one, or any log and
    /// `checkpoint_interval` went by, unless one is running: asks the checkpoint thread for
    /// it (`checkpoint/thread.rs`), or without one runs it here. `end` is the log end as the
    /// caller knows it (a committer: its own commit's end; reading the log's own end would
    /// take its lock on every commit). Asks the checkpoint thread to watch the write buffer
    /// when something is buffered and it does not (`checkpoint/thread.rs`: it drains the
    /// buffer once the writer is idle). Requires: the caller holds no writer lock.
    pub(super) fn maybe_checkpoint(&self, end: Lsn) -> Result<()> {
        let inner = &self.inner;
        if !inner.checkpoints.buffer_watched.load(Ordering::Acquire)
            && inner.write_buffer_bytes.load(Ordering::Relaxed) > 0
            && (inner.visible.buffer_live_bytes() > 0 || inner.visible.buffer_draining())
            && !crate::mutants::active("idle-buffer-unwatched")
        {
            inner.checkpoints.watch_buffer(end.0);
        }
        // Saturating: another thread's checkpoint may have ended past `end` (the random
        // tier met the overflow, seed 2132).
        let since = end
            .0
            .saturating_sub(inner.checkpoints.end.load(Ordering::Acquire));
        let due = since >= inner.options.checkpoint_log_bytes
            || (since > 0
                && millis(inner.checkpoints.opened.elapsed())
                    >= inner.checkpoints.last_ms.load(Ordering::Acquire)
                        + millis(inner.options.checkpoint_interval));
        if due && !inner.checkpoints.running.is_locked() {
            let thread = inner.checkpoints.thread.lock();
            if thread.running() {
                // The thread runs it; this commit returns (`checkpoint/thread.rs`).
                thread.ask();
            } else {
                drop(thread);
                self.fuzzy_checkpoint(ReadersHeld::Defer)?;
            }
        } else if since >= BACKPRESSURE_CHECKPOINTS * inner.options.checkpoint_log_bytes {
            // The running checkpoint is not keeping up with the load (the disk is too slow
            // for it): this committer waits for it before returning, so commits slow down
            // rather than the log, and the time to recover, growing without bound. Its own
            // commit is durable already; only its return waits.
            if !crate::mutants::active("no-backpressure-wait") {
                let waiting = inner.counters.backpressure_wait();
                drop(inner.checkpoints.running.lock());
                drop(waiting);
            }
            let waits = inner.counters.backpressure_waited();
            if waits == 0 {
                tracing::warn!(
                    target: "tilldb",
                    log_since_checkpoint_bytes = since,
                    "commits wait for a checkpoint that fell behind (backpressure): the disk \
                     is too slow for the load; Stats::backpressure_waits counts them"
                );
            }
        }
        Ok(())
    }
}

impl Drop for Inner {
    /// The database lock (`Inner::_lock`, the last field) is released only after this body
    /// and every other field's drop (the log's last flush among them): no other opener may
    /// read the files while the close still writes them (`tests/db_lock.rs`).
    fn drop(&mut self) {
        if crate::mutants::active("unlock-before-close") {
            #[expect(
                clippy::used_underscore_binding,
                reason = "the lock is only held, never read; the mutant lets it go early"
            )]
            let early = &mut self._lock;
            *early = Box::new(crate::io::NoLock);
        }
        // Join the writers first: nothing may write these files once the handle is gone.
        self.checkpoints.stop_threads();
        let Some(gate) = self.gate.as_deref() else {
            // A read-only handle: everything it wrote is in memory, gone with it.
            return;
        };
        // The publisher (of the feed's durable lsn too) stops; the close publishes last.
        gate.stop_publisher();
        // The close writes pages and the header: only if read-only handles let go within a
        // moment; else it leaves them to the next open's recovery (the log is durable).
        let mut readers_out = None;
        for _ in 0..CLOSE_WAITS_FOR_READERS_MS {
            match gate.try_enter() {
                Ok(Some(entered)) => {
                    readers_out = Some(entered);
                    break;
                }
                Ok(None) => std::thread::sleep(std::time::Duration::from_millis(1)),
                // The storage refuses (a crashed simulated disk, a file system gone): the
                // close writes nothing more, as after any failed write.
                Err(_) => break,
            }
        }
        if readers_out.is_none() {
            let _ = self.wal.sync();
            let _ = gate.publish();
        }
        // Not past buffered records the tree lacks (the write buffer, not drained when no
        // `close` checkpointed first): the header's redo point would pass the only copy of
        // their writes. The next open replays them.
        let buffered = self.visible.buffer_redo_floor().is_some()
            && !crate::mutants::active("close-passes-the-buffer");
        if !self.poisoned.is_set() && readers_out.is_some() && !buffered {
            // Best effort: a clean shutdown shortens the next recovery.
            let end = self.wal.end_lsn();
            // The ledger before the header, as in a checkpoint (`page/ledger.rs`). Without a
            // change feed (which keeps log for its consumers), a log of more than
            // `WalOptions::close_trim_bytes` of files then begins a fresh small segment at its end, and once the header names
            // it the rest goes (`wal/writer/trim.rs`): a closed database keeps 1 MiB of log.
            let trim = self.feed.is_none() && self.wal.trim_at_close();
            if self.wal.sync().is_ok()
                && self.pool.flush_all().is_ok()
                && self.pool.save_ledger().is_ok()
                && (!trim
                    || self
                        .wal
                        .start_fresh_segment()
                        .is_ok_and(|fresh| fresh == end))
            {
                let alloc = *self.writer.lock();
                let mut header_file = self.checkpoints.header.lock();
                if crate::mutants::active("trim-before-header") && trim {
                    let _ = self.wal.trim_after_close(end);
                }
                let (_, newest) = header_file.newest();
                let header = Header {
                    checkpoint_lsn: end,
                    free_head: alloc.free_head,
                    page_count: alloc.page_count,
                    ..newest
                };
                let written = gate.publish().is_ok() && header_file.write(&header).is_ok();
                if let Some(feed) = &self.feed {
                    let _ = feed.publish(self.wal.durable_lsn());
                }
                if trim && written {
                    let _ = self.wal.trim_after_close(end);
                }
            }
        }
    }
}

/// What a checkpoint does while read-only handles hold their snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ReadersHeld {
    /// Waits for them to refresh or close (a checkpoint asked for).
    Wait,
    /// Leaves the checkpoint for later (one the database runs by itself).
    Defer,
}

/// How long a close waits for read-only handles to let go before it leaves its write-back to
/// the next open's recovery, in 1 ms tries.
const CLOSE_WAITS_FOR_READERS_MS: u32 = 1000;

/// Whole milliseconds of `d`, saturating (u64 ms is 584 million years).
pub(super) fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
