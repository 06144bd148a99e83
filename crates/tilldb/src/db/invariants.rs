//! `Db::check_invariants`: the database's in-memory invariants, checked by the explorers after
//! every step.

use super::Db;

impl Db {
    /// Checks the database's in-memory invariants and panics, saying which, when one is
    /// broken: commits become visible in lsn order and never past the log; read snapshots
    /// are at or below the visible lsn; the overlay of hidden versions is in lsn order per
    /// key and agrees with its index; the image horizon and the last checkpoint lie within
    /// the log; and, while no checkpoint runs, the header's redo point is at or below where
    /// the last checkpoint began and every dirty page's redo point is at or above it (redo
    /// from the header reaches every change that is on no disk), and the header counts no
    /// more pages than the allocator (it never describes commits the log lost). Safe beside running
    /// commits; O(overlay + buffer pool), for tests: the crash explorers call it after every
    /// step.
    #[cfg(any(test, feature = "internals"))]
    pub fn check_invariants(&self) {
        let inner = &self.inner;
        // Each mark is read before the log end it is compared with: the end only grows.
        let (visible, snapshot_max) = inner.visible.check_invariants(|| inner.wal.end_lsn().0);
        assert!(
            snapshot_max.is_none_or(|s| s <= visible),
            "a snapshot {snapshot_max:?} past the visible lsn {visible}"
        );
        let horizon = inner.checkpoints.image_horizon();
        let end = inner.wal.end_lsn().0;
        assert!(
            visible <= end,
            "visible lsn {visible} past the log end {end}"
        );
        assert!(
            horizon <= end,
            "image horizon {horizon} past the log end {end}"
        );
        // A failure mid-checkpoint (the header written, its log not yet released) leaves the
        // marks as they were when it stopped the database; nothing is acknowledged after it.
        if let Some(_no_checkpoint) = inner.checkpoints.quiet()
            && !inner.poisoned.is_set()
        {
            let started = inner.checkpoints.began_at();
            let redo = inner.checkpoints.newest_header().checkpoint_lsn.0;
            assert!(
                redo <= started && started <= inner.wal.end_lsn().0,
                "checkpoint marks out of order: redo {redo}, began {started}"
            );
            // Recovery and checkpoints never leave the allocator behind the header (a header
            // describing commits the log lost).
            if let Some(alloc) = inner.writer.try_lock() {
                let header = inner.checkpoints.newest_header();
                assert!(
                    header.page_count <= alloc.page_count,
                    "the header counts {} pages, the allocator {}",
                    header.page_count,
                    alloc.page_count
                );
            }
            if let Some(oldest) = inner.pool.min_rec_lsn() {
                assert!(
                    oldest >= redo,
                    "a dirty page's redo point {oldest} before the header's {redo}: redo \
                     would miss its changes"
                );
            }
        }
    }

    /// The distinct redo points of the dirty pages now (in frames or spilled), lowest first.
    /// Each must be where a commit began: recovery replays from the header's redo point, and
    /// a checkpoint takes the lowest of these. For tests.
    #[cfg(any(test, feature = "internals"))]
    #[must_use]
    pub fn dirty_redo_points(&self) -> std::collections::BTreeSet<u64> {
        self.inner.pool.redo_points()
    }
}
