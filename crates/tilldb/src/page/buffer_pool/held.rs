//! Held pages: the pages of a commit logged in parts (`record.rs`), between its first part
//! and its last.
//!
//! ```text
//!   commit changes a page ──> unlogged ──(a part is appended: hold)──> held, dirty
//!        held ──(frame needed)──> spill file slot ──(page needed again)──> held frame
//!        held or spilled ──(last part appended: stamp, release_held)──> dirty, logged
//! ```
//!
//! A held page is never written to the data file (the write-back passes skip it, eviction
//! spills it), so a crash before the last part leaves the data file as if the commit never
//! began, which is what replay makes of an unfinished commit. Memory: the frames, plus 32
//! bytes per spilled page for where it is. [`BufferPool::release_held`] stamps every held
//! page with the last part's lsn and reads every held one spilled back, as ordinary dirty
//! pages (evicting some of them to the data file on the way, the log durable first as always).
//!
//! The spill file also takes *parked* pages: ordinary dirty pages that an eviction could not
//! write to the data file because read-only handles hold their snapshots (`db/readers.rs`),
//! so that a commit never waits for a reader. A parked page comes back dirty, with its redo
//! point, when it is needed, or when a checkpoint or a close (which hold the readers' lock)
//! calls [`BufferPool::unpark`] to write it back.
//!
//! ```text
//!   dirty, logged ──(frame needed, readers hold)──> spill slot, parked ──(needed, unpark)──> dirty frame
//! ```

use super::BufferPool;
use crate::error::Result;
use crate::page::{PageBuf, PageId};
use std::collections::HashMap;
use std::sync::atomic::Ordering;

/// One spilled page: where it is, and what it was when it left its frame.
#[derive(Debug, Clone, Copy)]
pub(super) struct SpilledPage {
    pub slot: u64,
    /// The page's redo point when it was spilled.
    pub rec_lsn: Option<u64>,
    /// Held (a commit's page before its last part), or parked (an ordinary dirty page).
    pub held: bool,
}

/// Where each spilled page is, and the slots free for reuse.
#[derive(Debug, Default)]
pub(super) struct Spilled {
    pages: HashMap<PageId, SpilledPage>,
    free: Vec<u64>,
    /// Slots ever used: the file's length in pages.
    slots: u64,
}

impl Spilled {
    fn take_slot(&mut self) -> u64 {
        self.free.pop().unwrap_or_else(|| {
            self.slots += 1;
            self.slots - 1
        })
    }

    pub(super) fn free_slot(&mut self, slot: u64) {
        debug_assert!(!self.free.contains(&slot), "slot {slot} freed twice");
        self.free.push(slot);
    }

    pub(super) fn insert(&mut self, id: PageId, page: SpilledPage) {
        assert!(
            page.slot < self.slots,
            "{id} spilled to slot {} never taken",
            page.slot
        );
        let earlier = self.pages.insert(id, page);
        assert!(earlier.is_none(), "{id} spilled twice");
    }

    /// Drops `id`'s spilled copy (it is made afresh); whether it was spilled, and its redo
    /// point then.
    pub(super) fn forget(&mut self, id: PageId) -> Forgotten {
        match self.pages.remove(&id) {
            Some(page) => {
                self.free_slot(page.slot);
                Forgotten::Spilled {
                    rec_lsn: page.rec_lsn,
                }
            }
            None => Forgotten::NotSpilled,
        }
    }

    /// Every slot taken is free again: no page is in the spill file and none is on its way
    /// in or out (a spill between its slot and its record, a read back between its read and
    /// its release: neither is counted free). Only then may the file go.
    fn all_free(&self) -> bool {
        self.pages.is_empty() && self.free.len() as u64 == self.slots
    }

    /// The slots start again from 0: the file was removed.
    fn reset(&mut self) {
        assert!(self.all_free(), "spill slots reset with a page in the file");
        self.free.clear();
        self.slots = 0;
    }

    /// The lowest redo point of a spilled page.
    pub(super) fn min_rec_lsn(&self) -> Option<u64> {
        self.rec_lsns().min()
    }

    /// The redo points of the spilled pages.
    pub(super) fn rec_lsns(&self) -> impl Iterator<Item = u64> + '_ {
        self.pages.values().filter_map(|p| p.rec_lsn)
    }

    /// The spilled pages that are held (`true`) or parked (`false`).
    fn ids(&self, held: bool) -> Vec<PageId> {
        self.pages
            .iter()
            .filter(|(_, p)| p.held == held)
            .map(|(&id, _)| id)
            .collect()
    }

    /// No slot is both free and a page's, nor two pages': at most the slots taken. A slot
    /// between its write and its record (a spill on its way), or between its removal and
    /// its release (a read back on its way), is in neither, so the count is exact only when
    /// no pin is out (`exact`: [`super::BufferPool::check_invariants`]).
    pub(super) fn check_slots(&self, exact: bool) {
        let accounted = self.free.len() + self.pages.len();
        let slots = usize::try_from(self.slots).expect("slots fit usize");
        if exact {
            assert_eq!(accounted, slots, "a spill slot leaked");
        } else {
            assert!(accounted <= slots, "a spill slot counted twice");
        }
    }
}

/// What [`Spilled::forget`] found.
pub(super) enum Forgotten {
    NotSpilled,
    /// A copy was spilled; the page's redo point when it was.
    Spilled {
        rec_lsn: Option<u64>,
    },
}

impl BufferPool {
    /// Gives the pages changed by one part of a commit (not its last) their place until the
    /// last part: held, so never written to the data file. They were unlogged; they stay
    /// dirty. Requires: the caller holds no guard on these pages.
    pub fn hold(&self, ids: &[PageId]) {
        for &id in ids {
            let frame = *self
                .map
                .read()
                .ids
                .get(&id)
                .unwrap_or_else(|| panic!("held {id} is not in the pool"));
            let f = &self.frames[frame];
            assert!(
                f.unlogged.load(Ordering::Acquire) && f.dirty.load(Ordering::Acquire),
                "held {id} was not changed"
            );
            let data = f.data.write();
            assert_eq!(
                data.page.as_ref().map(PageBuf::id),
                Some(id),
                "unlogged frame {frame} changed pages"
            );
            f.held.store(true, Ordering::Release);
            f.unlogged.store(false, Ordering::Release);
        }
    }

    /// The commit's last part is appended at `lsn` (its first began at `redo_from`): every
    /// held page, in a frame or spilled, becomes an ordinary dirty page with that lsn. Pages
    /// the last part changed were stamped already. Requires: no guard held on a held page.
    pub fn release_held(&self, lsn: u64, redo_from: u64) -> Result<()> {
        assert!(redo_from < lsn, "redo point {redo_from} not before {lsn}");
        for f in &self.frames {
            if f.held.load(Ordering::Acquire) {
                Self::release_frame(f, lsn, redo_from);
            }
        }
        let spilled_held = self.spilled.lock().ids(true);
        for id in spilled_held {
            // Read back held; released before the next one is read, so that no release
            // spills another (an eviction meanwhile may park a released one).
            let frame = self.pin(id, None)?;
            let f = &self.frames[frame];
            assert!(f.held.load(Ordering::Acquire), "{id} came back unheld");
            Self::release_frame(f, lsn, redo_from);
            self.unpin(frame);
        }
        let mut spilled = self.spilled.lock();
        assert!(spilled.ids(true).is_empty(), "a held page stayed spilled");
        spilled.check_slots(false);
        self.discard_spill_if_empty(&mut spilled);
        Ok(())
    }

    /// Removes the spill file when no page is left in it, so that no scratch file of a large
    /// commit outlives it (hundreds of megabytes after a million-row commit) until the next
    /// open. Under the list's lock: no slot is taken while the file goes.
    fn discard_spill_if_empty(&self, spilled: &mut Spilled) {
        if spilled.slots > 0 && spilled.all_free() && self.backend.spill_discard() {
            spilled.reset();
        }
    }

    /// Brings every parked page back into a frame, dirty with its redo point, for the
    /// write-back that follows (a checkpoint, a close: they hold the readers' lock, so the
    /// evictions this makes write to the data file instead of parking again). Returns how
    /// many came back.
    pub fn unpark(&self) -> Result<usize> {
        let parked = self.spilled.lock().ids(false);
        let mut back = 0;
        for id in parked {
            let still = self.spilled.lock().pages.get(&id).is_some_and(|p| !p.held);
            if still {
                let frame = self.pin(id, None)?;
                self.unpin(frame);
                back += 1;
            }
        }
        let mut spilled = self.spilled.lock();
        spilled.check_slots(false);
        self.discard_spill_if_empty(&mut spilled);
        Ok(back)
    }

    /// Stamps a held frame's page, unless an eviction spilled it meanwhile (the frame holds
    /// another page then; the spilled copy is released from the spill file).
    fn release_frame(f: &super::Frame, lsn: u64, redo_from: u64) {
        let mut data = f.data.write();
        if !f.held.load(Ordering::Acquire) {
            return;
        }
        assert!(
            !f.unlogged.load(Ordering::Acquire),
            "a held page changed again but not stamped by the last part"
        );
        assert!(data.dirty, "a held page is dirty");
        data.page
            .as_mut()
            .expect("a held frame holds its page")
            .set_lsn(lsn);
        // A page dirty since before the commit keeps its older redo point: it covers a change
        // of an earlier commit that is on no disk yet.
        if f.rec_lsn().is_none() || crate::mutants::active("release-held-newest-redo-point") {
            f.set_rec_lsn(Some(redo_from));
        }
        f.held.store(false, Ordering::Release);
    }

    /// Pages in the spill file now, held or parked.
    #[must_use]
    pub fn spilled_pages(&self) -> usize {
        self.spilled.lock().pages.len()
    }

    /// Writes held or parked `page` to a free slot of the spill file; returns the slot.
    pub(super) fn spill_out(&self, page: &mut PageBuf, held: bool) -> Result<u64> {
        let slot = self.spilled.lock().take_slot();
        match self.backend.spill_write(slot, page) {
            Ok(()) => {
                if held {
                    self.spills.fetch_add(1, Ordering::Relaxed);
                } else {
                    self.parks.fetch_add(1, Ordering::Relaxed);
                }
                Ok(slot)
            }
            Err(e) => {
                self.spilled.lock().free_slot(slot);
                Err(e)
            }
        }
    }

    /// Reads `id` back from the spill file into `f` (latched, mapped to `id`: no one else
    /// moves `id` meanwhile) if it is there: the page, and what it was. Its redo point moves
    /// to `f` as its entry leaves the list, under the list's lock: the redo point's scan
    /// (`writeback.rs`) finds it in one place or the other, never in neither.
    pub(super) fn spill_in(
        &self,
        f: &super::Frame,
        id: PageId,
    ) -> Option<Result<(PageBuf, SpilledPage)>> {
        let spilled = *self.spilled.lock().pages.get(&id)?;
        match self.backend.spill_read(spilled.slot, id) {
            Ok(page) => {
                let mut list = self.spilled.lock();
                let taken = list.pages.remove(&id);
                assert!(
                    taken.is_some_and(|t| t.slot == spilled.slot),
                    "{id} moved in the spill file while its frame was latched"
                );
                f.set_rec_lsn(spilled.rec_lsn);
                list.free_slot(spilled.slot);
                Some(Ok((page, spilled)))
            }
            Err(e) => Some(Err(e)),
        }
    }

    /// Pages parked in the spill file now.
    #[must_use]
    pub fn parked_pages(&self) -> usize {
        self.spilled.lock().ids(false).len()
    }
}
