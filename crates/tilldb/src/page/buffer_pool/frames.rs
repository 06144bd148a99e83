//! Frames: pinning a page (a hit, or a miss that loads or creates it), choosing a victim
//! to evict (a dirty victim written back first, a held one spilled), and unpinning.

use super::{BufferPool, Frame, FrameData, Map, held, hint_of};
use crate::error::{Error, Result};
use crate::page::{PageBuf, PageId, PageKind};
use std::sync::atomic::Ordering;

impl BufferPool {
    /// Pins the frame holding `id`, loading (or creating, with `kind`) the page on a miss.
    pub(super) fn pin(&self, id: PageId, create: Option<PageKind>) -> Result<usize> {
        assert!(id.0 != 0, "page 0 is never used");
        loop {
            if let Some(frame) = self.pin_cached(id, create) {
                return Ok(frame);
            }
            let mut map = self.map.write();
            if map.ids.contains_key(&id) {
                // Loaded by another thread between the two locks.
                drop(map);
                continue;
            }
            let victim = self.choose_victim(&mut map)?;
            drop(map);
            if let Some(frame) = self.load_into(victim, id, create)? {
                self.misses.fetch_add(1, Ordering::Relaxed);
                return Ok(frame);
            }
            // Lost a race (the victim was pinned again, or `id` was loaded meanwhile): retry.
        }
    }

    /// A hit: pins the frame that holds `id` under the shared map lock, or `None`.
    fn pin_cached(&self, id: PageId, create: Option<PageKind>) -> Option<usize> {
        let map = self.map.read();
        let frame = *map.ids.get(&id)?;
        let f = &self.frames[frame];
        f.pins.fetch_add(1, Ordering::AcqRel);
        // Written only when clear: a hot page (the root) is pinned by every read of every
        // thread, and a store each time kept its line moving between the CPUs.
        if !f.referenced.load(Ordering::Relaxed) {
            f.referenced.store(true, Ordering::Relaxed);
        }
        drop(map);
        self.hits.add(1);
        if let Some(kind) = create {
            // Reusing a freed page that is still cached: start it afresh.
            let mut data = f.data.write();
            let page = data.page.as_mut().expect("a mapped frame holds its page");
            let lsn = page.lsn();
            *page = PageBuf::formatted(id, kind, self.format);
            page.set_lsn(lsn);
        }
        Some(frame)
    }

    /// Clock: the first unpinned, logged, clean frame whose referenced bit is clear, clearing
    /// bits on the way; a dirty one only when two turns found no clean one. Pins the victim.
    /// `map` is borrowed mutably: only the map lock's exclusive guard lends it, so no hit can
    /// pin a frame meanwhile.
    ///
    /// Why clean first: a dirty victim is written on the path of the miss, one page at a time,
    /// and through the doublewrite guard that is two flushes; the background writer writes
    /// dirty pages in batches (one doublewrite flush per batch) if they are left to it.
    /// Measured with random updates on a database 4x the cache (docs/benchmarks-journal.md).
    fn choose_victim(&self, map: &mut Map) -> Result<usize> {
        let n = self.frames.len();
        let mut dirty = None;
        // Two full turns: the first may only clear referenced bits.
        for _ in 0..=(2 * n) {
            let i = map.hand;
            map.hand = (map.hand + 1) % n;
            let f = &self.frames[i];
            // A latched frame is held by a read (reads do not pin) or being worked on.
            if f.pins.load(Ordering::Acquire) > 0
                || f.unlogged.load(Ordering::Acquire)
                || f.data.is_locked()
            {
                continue;
            }
            if f.referenced.swap(false, Ordering::Relaxed) {
                continue;
            }
            if f.dirty.load(Ordering::Acquire) {
                dirty.get_or_insert(i);
                continue;
            }
            f.pins.fetch_add(1, Ordering::AcqRel);
            return Ok(i);
        }
        // Pins are taken under the map lock, which this holds exclusively; a frame is marked unlogged
        // only by a thread that pinned it. So the dirty candidate is still unpinned (a read
        // may latch it meanwhile: `load_into` then gives it up).
        if let Some(i) = dirty {
            let f = &self.frames[i];
            assert_eq!(f.pins.load(Ordering::Acquire), 0, "dirty victim pinned");
            assert!(!f.unlogged.load(Ordering::Acquire), "dirty victim unlogged");
            f.pins.fetch_add(1, Ordering::AcqRel);
            return Ok(i);
        }
        let pinned = self
            .frames
            .iter()
            .filter(|f| f.pins.load(Ordering::Acquire) > 0)
            .count();
        let unlogged = self
            .frames
            .iter()
            .filter(|f| f.unlogged.load(Ordering::Acquire))
            .count();
        let latched = self.frames.iter().filter(|f| f.data.is_locked()).count();
        Err(Error::InvalidOptions(format!(
            "the buffer pool's {n} frames are all pinned ({pinned}), held by reads \
             ({latched}) or hold unlogged changes ({unlogged}); raise cache_bytes"
        )))
    }

    /// Page `id` as a miss loads it into `f` (latched): made afresh (`create`), read back from
    /// the spill file, or read from the data file. With it, when read back from the spill
    /// file, whether it is held (it comes back dirty, held or parked as it left; made afresh,
    /// its spilled copy is dropped). A page that was spilled moves its redo point to `f` as
    /// it leaves the spill file's list.
    fn load_page(
        &self,
        f: &Frame,
        id: PageId,
        create: Option<PageKind>,
    ) -> (Result<PageBuf>, Option<bool>) {
        match create {
            Some(kind) => {
                let mut spilled = self.spilled.lock();
                if let held::Forgotten::Spilled { rec_lsn } = spilled.forget(id) {
                    f.set_rec_lsn(rec_lsn);
                }
                drop(spilled);
                (Ok(PageBuf::formatted(id, kind, self.format)), None)
            }
            None => match self.spill_in(f, id) {
                Some(Ok((page, spilled))) => (Ok(page), Some(spilled.held)),
                Some(Err(e)) => (Err(e), None),
                None => (
                    self.backend.read_page(id).map(|p| {
                        p.unwrap_or_else(|| PageBuf::formatted(id, PageKind::Free, self.format))
                    }),
                    None,
                ),
            },
        }
    }

    /// Writes back the victim if dirty, then maps `id` to it and loads the page. Returns
    /// `None` (victim released) when another thread got in first.
    fn load_into(
        &self,
        victim: usize,
        id: PageId,
        create: Option<PageKind>,
    ) -> Result<Option<usize>> {
        let f = &self.frames[victim];
        // A read holds its frame by the latch alone (no pin), and may hold it while it loads
        // its next page: waiting here for a latch could wait for this very thread, or for a
        // thread waiting for one this thread holds. A victim someone holds is given up.
        let Some(mut data) = f.data.try_write() else {
            self.unpin(victim);
            return Ok(None);
        };
        // A held victim goes to the spill file, never to the data file, and so does a dirty
        // one while read-only handles hold their snapshots (parked: the miss does not wait
        // for them): (its id, where), recorded once the frame is surely this load's.
        let mut spill = None;
        if f.unlogged.load(Ordering::Acquire) {
            // Chosen clean, then (the map lock let go) hit by a writer that changed it and
            // has not stamped it yet: never written back nor evicted. Retry with another
            // victim. (Was an assertion, "evicting an unlogged page", which
            // `concurrent_readers_and_writers_on_a_small_pool` hit about once in a hundred
            // runs.)
            drop(data);
            self.unpin(victim);
            return Ok(None);
        }
        if data.dirty {
            match self.clear_dirty_victim(f, &mut data) {
                Ok(spilled) => spill = spilled,
                Err(e) => {
                    drop(data);
                    self.unpin(victim);
                    return Err(e);
                }
            }
        }
        let mut map = self.map.write();
        if f.pins.load(Ordering::Acquire) != 1 || map.ids.contains_key(&id) {
            drop(map);
            if let Some((_, spilled)) = spill {
                // The frame keeps its page, still dirty (and held, if it was): the copy is
                // not needed.
                self.spilled.lock().free_slot(spilled.slot);
            }
            drop(data);
            self.unpin(victim);
            return Ok(None);
        }
        if let Some((old, spilled)) = spill {
            // Under the map lock, as the map forgets `old`: a miss on it finds it spilled. Its
            // redo point moves under the spill file's lock, which the redo point's scan holds.
            let mut list = self.spilled.lock();
            list.insert(old, spilled);
            f.set_rec_lsn(None);
            drop(list);
            data.dirty = false;
            f.held.store(false, Ordering::Release);
            self.mark_dirty(f, false);
        }
        if let Some(old) = data.page.as_ref().map(PageBuf::id) {
            assert_eq!(
                map.ids.remove(&old),
                Some(victim),
                "map and frame disagree on {old}"
            );
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
        map.ids.insert(id, victim);
        f.id.store(id.0, Ordering::Release);
        self.hints[self.hint_slot(id)].store(hint_of(victim), Ordering::Release);
        drop(map);
        // Readers of `id` now find this frame and wait on its latch until the page is in.
        let (loaded, read_back) = self.load_page(f, id, create);
        match loaded {
            Ok(page) => {
                assert_eq!(page.id(), id);
                assert_eq!(page.format(), self.format, "{id} of another format");
                data.page = Some(page);
                if let Some(held) = read_back {
                    data.dirty = true;
                    self.mark_dirty(f, true);
                    f.held.store(held, Ordering::Release);
                }
                f.referenced.store(true, Ordering::Relaxed);
                Ok(Some(victim))
            }
            Err(e) => {
                let mut map = self.map.write();
                map.ids.remove(&id);
                f.id.store(0, Ordering::Release);
                data.page = None;
                drop(map);
                drop(data);
                self.unpin(victim);
                Err(e)
            }
        }
    }

    /// Frees a dirty victim's page for the miss: written back to the data file, or spilled
    /// (held, or parked while read-only handles hold their snapshots). A spilled copy is
    /// returned, to be recorded once the frame is surely the miss's.
    fn clear_dirty_victim(
        &self,
        f: &Frame,
        data: &mut FrameData,
    ) -> Result<Option<(PageId, held::SpilledPage)>> {
        let rec_lsn = f.rec_lsn();
        let page = data.page.as_mut().expect("a dirty frame holds its page");
        let held = f.held.load(Ordering::Acquire) && !crate::mutants::active("held-pages-written");
        let written = !held && self.write_back_unless_readers(std::slice::from_mut(page))?;
        if !written {
            let slot = self.spill_out(page, held)?;
            let spilled = held::SpilledPage {
                slot,
                rec_lsn,
                held,
            };
            return Ok(Some((page.id(), spilled)));
        }
        data.dirty = false;
        f.set_rec_lsn(None);
        f.held.store(false, Ordering::Release);
        self.mark_dirty(f, false);
        self.eviction_writes.fetch_add(1, Ordering::Relaxed);
        Ok(None)
    }

    pub(super) fn unpin(&self, frame: usize) {
        let before = self.frames[frame].pins.fetch_sub(1, Ordering::AcqRel);
        assert!(before > 0, "unpin of unpinned frame {frame}");
    }
}
