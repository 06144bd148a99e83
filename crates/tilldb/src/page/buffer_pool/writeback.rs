//! Writing dirty pages back: the write-ahead rule (the log durable to a page's lsn before the
//! page is written), batches for the background writer and checkpoints, and the redo point a
//! page keeps when it changes again while its copy is written (`rec_lsn`).

use super::BufferPool;
use crate::error::Result;
use crate::page::{PageBuf, PageId};
use std::sync::atomic::Ordering;

impl BufferPool {
    /// The write-ahead rule, then the write.
    pub(super) fn write_back(&self, pages: &mut [PageBuf]) -> Result<()> {
        self.write_ahead(pages)?;
        self.backend.write_pages(pages)?;
        self.pages_written
            .fetch_add(pages.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// [`BufferPool::write_back`] unless read-only handles hold their snapshots: then
    /// `Ok(false)`, nothing written (an eviction parks the page instead).
    pub(super) fn write_back_unless_readers(&self, pages: &mut [PageBuf]) -> Result<bool> {
        self.write_ahead(pages)?;
        let written = self.backend.write_pages_unless_readers(pages)?;
        if written {
            self.pages_written
                .fetch_add(pages.len() as u64, Ordering::Relaxed);
        }
        Ok(written)
    }

    /// The write-ahead rule: the log durable up to every page's lsn.
    fn write_ahead(&self, pages: &[PageBuf]) -> Result<()> {
        let max_lsn = pages.iter().map(PageBuf::lsn).max().unwrap_or(0);
        let durable = if crate::mutants::active("page-before-log") {
            max_lsn
        } else {
            self.backend.log_durable_to(max_lsn)?
        };
        for page in pages {
            assert!(
                page.lsn() <= durable,
                "{} lsn {} written before the log is durable ({durable})",
                page.id(),
                page.lsn()
            );
        }
        Ok(())
    }

    /// Writes back up to `max` dirty, logged pages in one batch; returns how many. Pages
    /// changed again while being written stay dirty.
    pub fn flush_dirty(&self, max: usize) -> Result<usize> {
        self.flush_dirty_where(max, u64::MAX)
    }

    /// Writes back up to `max` dirty, logged pages whose redo point is before `before`
    /// (checkpoints: every change logged before their start). Returns how many.
    pub fn flush_dirty_before(&self, before: u64, max: usize) -> Result<usize> {
        self.flush_dirty_where(max, before)
    }

    fn flush_dirty_where(&self, max: usize, before: u64) -> Result<usize> {
        // Any change made to a page after its copy below is logged by a record appended after
        // the copy, so one starting at or after this: the redo point of a page changed again
        // while it is written back (see the loop after `write_back`). At a commit boundary,
        // not the log's end: that may lie between the records of a commit logged in several,
        // and a checkpoint that later took this page's redo point would start recovery
        // inside that commit ("a later part of a commit whose first part is not in the log
        // read": explore_random seed 1006, under Wine).
        let floor = if crate::mutants::active("redo-point-inside-a-commit") {
            self.backend.log_end()
        } else {
            self.backend.boundary_end()
        };
        // The frames copied, with each copy's id and lsn (what the write-back must find
        // unchanged to clean the frame), and the copies, which the write takes as they are:
        // one copy a page (there were two, 16 KiB each, on the path of the commits that
        // checkpoint).
        let mut batch: Vec<(usize, PageId, u64)> = Vec::new();
        let mut pages: Vec<PageBuf> = Vec::new();
        for (i, f) in self.frames.iter().enumerate() {
            if batch.len() >= max {
                break;
            }
            let banned = |f: &super::Frame| {
                f.unlogged.load(Ordering::Acquire)
                    || (f.held.load(Ordering::Acquire)
                        && !crate::mutants::active("held-pages-written"))
            };
            if !f.dirty.load(Ordering::Acquire) || banned(f) {
                continue;
            }
            let data = f.data.read();
            if data.dirty && !banned(f) && f.rec_lsn().is_some_and(|r| r < before) {
                let page = data.page.clone().expect("a dirty frame holds its page");
                batch.push((i, page.id(), page.lsn()));
                pages.push(page);
            }
        }
        if batch.is_empty() {
            return Ok(0);
        }
        keep_newest_copies(&mut batch, &mut pages);
        self.write_back(&mut pages)?;
        drop(pages);
        for &(i, id, lsn) in &batch {
            let f = &self.frames[i];
            let mut data = f.data.write();
            let same = data
                .page
                .as_ref()
                .is_some_and(|p| p.id() == id && p.lsn() == lsn)
                && !f.unlogged.load(Ordering::Acquire)
                && !f.held.load(Ordering::Acquire);
            if same {
                data.dirty = false;
                f.set_rec_lsn(None);
                self.mark_dirty(f, false);
            } else if data.dirty && data.page.as_ref().is_some_and(|p| p.id() == id) {
                // Changed again since the copy: the copy holds every change before `floor`,
                // so redo for this page need only start there. Keeping the old redo point
                // made checkpoints stall under hot pages (issue 21): a page always changed
                // again never moved the checkpoint's redo point. (Not dirty: another
                // write-back cleaned it meanwhile, and a commit changing it now stamps its
                // own redo point.)
                if !crate::mutants::active("stale-redo-point") {
                    f.set_rec_lsn(f.rec_lsn().map(|r| r.max(floor)));
                }
                self.changed_during_write_back
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(batch.len())
    }

    /// Makes the backend's record of the lsns written durable (checkpoints, before their
    /// header).
    pub fn save_ledger(&self) -> Result<()> {
        self.backend.save_ledger()
    }

    /// Writes back every dirty, logged page, parked ones too (a close, a create). Returns how
    /// many.
    pub fn flush_all(&self) -> Result<usize> {
        self.unpark()?;
        let mut total = 0;
        loop {
            let n = self.flush_dirty(256)?;
            total += n;
            if n == 0 {
                return Ok(total);
            }
            assert!(
                total <= self.frames.len() * 64,
                "flush_all does not converge"
            );
        }
    }

    /// The lowest redo point of any dirty page, in a frame or spilled: redo from here replays
    /// every change not yet in the data file. `None` when nothing is dirty.
    ///
    /// Under the spill file's lock, which a page moving between a frame and the spill file
    /// holds as its redo point moves: the scan finds it in one place or the other. (It read
    /// the frames, then the list: a page read back into a frame the scan had passed was in
    /// neither, and a checkpoint took a redo point past its oldest change;
    /// `the_redo_point_sees_a_page_moving_between_spill_file_and_frame`.) No latch: a frame's
    /// redo point is an atomic.
    #[must_use]
    pub fn min_rec_lsn(&self) -> Option<u64> {
        let spilled = self.spilled.lock();
        self.frames
            .iter()
            .filter_map(super::Frame::rec_lsn)
            .chain(spilled.min_rec_lsn())
            .min()
    }

    /// The distinct redo points of the dirty pages, in frames or spilled, lowest first: for
    /// tests of where commits and recovery put them (each must be where a commit began).
    #[must_use]
    pub fn redo_points(&self) -> std::collections::BTreeSet<u64> {
        let spilled = self.spilled.lock();
        self.frames
            .iter()
            .filter_map(super::Frame::rec_lsn)
            .chain(spilled.rec_lsns())
            .collect()
    }

    /// Number of dirty frames.
    #[must_use]
    pub fn dirty_count(&self) -> usize {
        usize::try_from(self.dirty_frames.load(Ordering::Acquire)).expect("at most the frames")
    }
}

/// Drops all but the newest copy of each page from a gathered batch (`batch[i]` describes
/// `pages[i]`). The gathering lets each frame's latch go before the next: a page it copied may
/// meanwhile be evicted (written back or spilled), loaded into a later frame, changed and
/// stamped, and be copied again there. The older copy is already on its way out (the eviction
/// wrote or spilled it) and its frame holds another page now; only the newer one is written.
fn keep_newest_copies(batch: &mut Vec<(usize, PageId, u64)>, pages: &mut Vec<PageBuf>) {
    debug_assert_eq!(batch.len(), pages.len());
    let mut order: Vec<usize> = (0..batch.len()).collect();
    order.sort_unstable_by_key(|&i| (batch[i].1, std::cmp::Reverse(batch[i].2)));
    if order.windows(2).all(|w| batch[w[0]].1 != batch[w[1]].1) {
        return;
    }
    let mut keep = vec![false; batch.len()];
    for (n, &i) in order.iter().enumerate() {
        keep[i] = n == 0 || batch[order[n - 1]].1 != batch[i].1;
    }
    let mut flags = keep.iter();
    batch.retain(|_| *flags.next().expect("a flag a copy"));
    let mut flags = keep.iter();
    pages.retain(|_| *flags.next().expect("a flag a copy"));
}
