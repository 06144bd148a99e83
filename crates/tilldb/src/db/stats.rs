//! What a database did since it opened ([`Stats`]): the log's and the pool's counters, and
//! the database's own ([`Counters`], kept by the commit path and the checkpoints).

use super::Db;
use std::sync::atomic::{AtomicU64, Ordering};

/// What a database did since it opened ([`Db::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// The log: records appended, writes, flushes, bytes.
    pub log: crate::wal::WalStats,
    /// The buffer pool: hits, misses, evictions, pages written, dirty frames now.
    pub pool: crate::page::PoolStats,
    /// Commits whose return waited for a checkpoint that fell behind the load
    /// (backpressure: the log since the running checkpoint began passed twice
    /// `Options::checkpoint_log_bytes`). Zero while the disk keeps up.
    pub backpressure_waits: u64,
    /// Commits waiting now for such a checkpoint (each is counted in `backpressure_waits`
    /// once its wait ends).
    pub backpressure_waiting: u64,
    /// Commits applied for their thread by another committer leading the commit queue (the
    /// commits of transactions that only wrote, queued while the writer lock was taken).
    pub queued_commits: u64,
    /// Log records of commits too large for one record, logged in parts (`record.rs`),
    /// their last parts included.
    pub commit_parts: u64,
    /// Keys whose older values the database keeps in memory now, for snapshots older than
    /// the commits that changed them (`txn/overlay.rs`). A large commit that no snapshot is
    /// open to see keeps none (docs/durability.md, "Large transactions").
    pub overlay_keys: u64,
    /// Memory the write buffer's undrained commits hold now (an estimate: keys, values and
    /// their bookkeeping; `Options::write_buffer_bytes` is where it drains). Zero with the
    /// buffer off or drained.
    pub write_buffer_bytes: u64,
    /// Drains of the write buffer that the checkpoint thread ran because no commit came for
    /// a while (docs/write-buffer.md, "The idle drain, and drains every reader sees"), not counting drains at the
    /// threshold, before a commit through the tree, a transaction's first read or a
    /// checkpoint.
    pub idle_drains: u64,
    /// Chunks of drains in chunks (docs/write-buffer.md, "The drain in chunks"): each one
    /// commit of some of the buffered keys, with readers and commits between them.
    pub drain_chunks: u64,
    /// Of `drain_chunks`, those applied to copies of the pages they change and installed at
    /// once (docs/write-buffer.md, "Chunks that readers do not wait for"): readers waited for
    /// the install alone, not for the chunk's tree work. The others (a chunk that outgrew a
    /// part, or a quarter of the cache unlogged) went on in place.
    pub drain_chunks_shadowed: u64,
}

/// The database's own counters ([`Stats`]).
#[derive(Debug, Default)]
pub(super) struct Counters {
    /// Commits whose return waited for a checkpoint that fell behind (backpressure).
    backpressure_waits: AtomicU64,
    /// Commits waiting now for a checkpoint that fell behind.
    backpressure_waiting: AtomicU64,
    /// Commits a queue leader applied for another thread (`commit.rs`).
    queued_commits: AtomicU64,
    /// Records of commits logged in parts (`commit.rs`).
    parts_logged: AtomicU64,
    /// Drains the checkpoint thread ran with the writer idle (`commit/buffer.rs`).
    idle_drains: AtomicU64,
    /// Chunks of drains in chunks (`commit/buffer.rs`).
    drain_chunks: AtomicU64,
    /// Of them, those applied to copies of their pages to the end (`commit/mod.rs`).
    drain_chunks_shadowed: AtomicU64,
}

impl Counters {
    /// A committer begins to wait for a checkpoint that fell behind; the guard it returns
    /// ends the wait (counted in `backpressure_waits`) when dropped.
    pub(super) fn backpressure_wait(&self) -> BackpressureWait<'_> {
        self.backpressure_waiting.fetch_add(1, Ordering::SeqCst);
        BackpressureWait(self)
    }

    /// Counts a commit whose return waited for a checkpoint; returns how many did before.
    pub(super) fn backpressure_waited(&self) -> u64 {
        self.backpressure_waits.fetch_add(1, Ordering::Relaxed)
    }

    /// Counts a commit that a queue leader applied for another thread.
    pub(super) fn queued_commit(&self) {
        self.queued_commits.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a drain of the write buffer the checkpoint thread ran with the writer idle.
    pub(super) fn idle_drained(&self) {
        self.idle_drains.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a chunk of a drain in chunks applied to copies of its pages to the end.
    pub(super) fn chunk_shadowed(&self) {
        self.drain_chunks_shadowed.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a chunk of a drain in chunks.
    pub(super) fn chunk_drained(&self) {
        self.drain_chunks.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts `records` log records of one commit logged in parts.
    pub(super) fn parts_logged(&self, records: u32) {
        self.parts_logged
            .fetch_add(u64::from(records), Ordering::Relaxed);
    }
}

/// A committer waiting for a checkpoint that fell behind ([`Counters::backpressure_wait`]).
pub(super) struct BackpressureWait<'a>(&'a Counters);

impl Drop for BackpressureWait<'_> {
    fn drop(&mut self) {
        let before = self.0.backpressure_waiting.fetch_sub(1, Ordering::SeqCst);
        assert!(before > 0, "a backpressure wait ended that never began");
    }
}

impl Db {
    /// What the database did since it opened: the log's and the buffer pool's counters, and
    /// the commits that waited for a checkpoint.
    #[must_use]
    pub fn stats(&self) -> Stats {
        Stats {
            log: self.inner.wal.stats(),
            pool: self.inner.pool.stats(),
            backpressure_waits: self
                .inner
                .counters
                .backpressure_waits
                .load(Ordering::Relaxed),
            backpressure_waiting: self
                .inner
                .counters
                .backpressure_waiting
                .load(Ordering::SeqCst),
            queued_commits: self.inner.counters.queued_commits.load(Ordering::Relaxed),
            commit_parts: self.inner.counters.parts_logged.load(Ordering::Relaxed),
            overlay_keys: self.inner.visible.overlay_keys() as u64,
            write_buffer_bytes: self.inner.visible.buffer_undrained_bytes() as u64,
            idle_drains: self.inner.counters.idle_drains.load(Ordering::Relaxed),
            drain_chunks: self.inner.counters.drain_chunks.load(Ordering::Relaxed),
            drain_chunks_shadowed: self
                .inner
                .counters
                .drain_chunks_shadowed
                .load(Ordering::Relaxed),
        }
    }
}
