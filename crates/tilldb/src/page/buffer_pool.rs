//! The buffer pool: a fixed set of frames caching pages of the data file.
//!
//! ```text
//!   read(id)                     write(id)             flush_dirty() (background writer, checkpoint)
//!     | hints[hash(id)] -> frame   | map: PageId -> frame   |  copy dirty, logged pages under
//!     | (no lock); latch shared,   | (rwlock; a hit pins    |  shared latch; log durable to
//!     | check the page is id's     |  under the shared lock)|  their lsn (WAL rule)
//!     v (else: as write does)      v                        v
//!   frame: pins, referenced, flags, RwLock<FrameData> ---> Backend::write_pages (torn-page guard)
//!        |  miss: clock picks an unpinned, logged victim it can latch at once; a dirty victim
//!        v  is written back first
//!   Backend::read_page
//! ```
//!
//! A read holds its frame by the latch alone, no pin: an eviction latches its victim
//! exclusively before it changes anything, and takes only a victim nobody holds (`try_write`),
//! so a latched page stays. The hint table is only a guess: a read checks, under the latch,
//! that the frame holds its page, and otherwise asks the map. A descent asks the hint table
//! for a child's frame only when the branch's own guess for that child is wrong
//! ([`BufferPool::locate`], looked up while the branch is still read): a guess, checked the
//! same way ([`BufferPool::read_guessed`]). So a hit of a read writes to no
//! line every reader shares but the frame's latch (the map lock and the pins were six atomic
//! writes a page, on lines every thread wrote: docs/benchmarks-journal.md, "Reads that pin nothing").
//!
//! Rules, each asserted where it is enforced:
//! - A page is written to the data file only after the log is durable up to its page lsn.
//! - A page changed by work whose log record has no lsn yet (*unlogged*) is never written back
//!   or evicted: its change could reach the disk before its log record. [`BufferPool::stamp`]
//!   gives it the record's lsn and lifts the ban.
//! - A page changed by a commit whose last part is not logged yet (*held*, see `held.rs`) is
//!   never written to the data file: evicted, it goes to the spill file, and comes back from
//!   there. [`BufferPool::release_held`] lifts the ban once the last part is logged.
//! - A pinned or latched frame is never evicted; every write guard unpins exactly once on
//!   drop (a read guard holds the latch only).
//! - A page has one frame at most.
//! - Lock order: a frame latch may be held while taking the map lock, never the reverse.

use super::{PageBuf, PageFormat, PageId, PageIdHash, PageKind};
use crate::error::Result;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

mod frames;
mod guards;
mod held;
mod writeback;

pub use guards::{PageRead, PageWrite};

/// What the pool needs from the rest of the engine.
pub trait Backend: Send + Sync {
    /// Makes the log durable up to at least `lsn`; returns the durable lsn.
    fn log_durable_to(&self, lsn: u64) -> Result<u64>;
    /// Reads a page from the data file; `None` when it was never written.
    fn read_page(&self, id: PageId) -> Result<Option<PageBuf>>;
    /// Writes pages in place, through the torn-page guard. A copy no newer than what was
    /// last written of its page is skipped, not written: a write-back's copy can be overtaken
    /// by an eviction that wrote the page since (`writeback.rs`). One copy a page a call.
    fn write_pages(&self, pages: &mut [PageBuf]) -> Result<()>;
    /// [`Backend::write_pages`] unless that would wait for read-only handles to let go of
    /// their snapshots: then writes nothing and returns `false` (an eviction parks the page
    /// in the spill file instead, `held.rs`). Default: writes.
    fn write_pages_unless_readers(&self, pages: &mut [PageBuf]) -> Result<bool> {
        self.write_pages(pages).map(|()| true)
    }
    /// Makes the record of the lsns written durable (the page ledger, `ledger.rs`).
    fn save_ledger(&self) -> Result<()>;
    /// The log's end now: every record appended later starts at or after it.
    fn log_end(&self) -> u64;
    /// The log's end at a commit boundary: [`Backend::log_end`], or, while a commit is logged
    /// in several records, where its first starts. What a redo point may be. Default:
    /// `log_end`.
    fn boundary_end(&self) -> u64 {
        self.log_end()
    }

    /// Writes a held page to `slot` of the spill file (`page/spill.rs`).
    fn spill_write(&self, slot: u64, page: &mut PageBuf) -> Result<()>;
    /// Reads held page `id` back from `slot` of the spill file.
    fn spill_read(&self, slot: u64, id: PageId) -> Result<PageBuf>;
    /// No page is in the spill file: remove it. Returns whether it went (its slots then
    /// start again from 0). Default: nothing to remove.
    fn spill_discard(&self) -> bool {
        false
    }

    /// Runs `f` while no page is written or read and no ledger saved (a backup copying the
    /// data files at one moment). Default: just runs it.
    fn with_files_quiet(&self, f: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        f()
    }
}

/// The buffer pool's counters since the database opened, and how many frames are dirty now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolStats {
    /// Pins that found their page in a frame.
    pub hits: u64,
    /// Pins that had to read the page from the data file (or create it) into a frame.
    pub misses: u64,
    /// Pages dropped from their frame to make room for another.
    pub evictions: u64,
    /// Dirty pages written back to make room (the slow path; the background writer should
    /// keep this near zero).
    pub eviction_writes: u64,
    /// Pages written back to the data file, for any reason: eviction, the background writer,
    /// checkpoints.
    pub pages_written: u64,
    /// Pages changed again while a write-back of theirs was under way: they stay dirty, with
    /// their redo point moved up to the log end at the copy (the hot pages of issue 21).
    pub changed_during_write_back: u64,
    /// Held pages written to the spill file: the pages of a commit logged in parts that the
    /// cache could not keep until its last part (`held.rs`).
    pub spills: u64,
    /// Dirty pages an eviction parked in the spill file instead of writing them to the data
    /// file while read-only handles held their snapshots (`held.rs`): the commit did not wait.
    pub parks: u64,
    /// Frames dirty when the stats were taken (a gauge, not a counter).
    pub dirty: u64,
}

impl PoolStats {
    /// What was counted between `before` and `self` (`dirty` is `self`'s: a gauge).
    #[must_use]
    pub fn since(self, before: PoolStats) -> PoolStats {
        PoolStats {
            hits: self.hits - before.hits,
            misses: self.misses - before.misses,
            evictions: self.evictions - before.evictions,
            eviction_writes: self.eviction_writes - before.eviction_writes,
            pages_written: self.pages_written - before.pages_written,
            changed_during_write_back: self.changed_during_write_back
                - before.changed_during_write_back,
            spills: self.spills - before.spills,
            parks: self.parks - before.parks,
            dirty: self.dirty,
        }
    }
}

/// A hint table slot's value for `frame`.
fn hint_of(frame: usize) -> u32 {
    u32::try_from(frame + 1).expect("the frame count fits a hint (checked when made)")
}

#[derive(Debug, Default)]
struct FrameData {
    page: Option<PageBuf>,
    dirty: bool,
}

/// [`Frame::rec_lsn`] of a clean frame.
const NO_REDO_POINT: u64 = u64::MAX;

struct Frame {
    /// Guards currently handed out, plus one while the pool itself works on the frame.
    pins: AtomicU32,
    /// Set on every access; the clock clears it once before evicting.
    referenced: AtomicBool,
    /// Changed by work whose log record has no lsn yet (see the module rules).
    unlogged: AtomicBool,
    /// Changed by a commit whose last part is not logged yet (see the module rules); dirty.
    held: AtomicBool,
    /// Mirrors `FrameData::dirty`, readable without the latch.
    dirty: AtomicBool,
    /// The id the frame holds, 0 for none; readable without the latch.
    id: AtomicU64,
    /// Where redo must start to replay the first change since the page was last clean: the
    /// log position before that change's record ([`NO_REDO_POINT`] when clean). Changed under
    /// the latch, exclusive; readable without it (the redo point's scan, `writeback.rs`).
    rec_lsn: AtomicU64,
    data: RwLock<FrameData>,
}

impl Frame {
    /// The frame's redo point (see [`Frame::rec_lsn`]).
    fn rec_lsn(&self) -> Option<u64> {
        match self.rec_lsn.load(Ordering::Acquire) {
            NO_REDO_POINT => None,
            lsn => Some(lsn),
        }
    }

    /// Requires: the frame's latch, exclusive (or the frame's page moving to or from the
    /// spill file, under its lock too: `held.rs`).
    fn set_rec_lsn(&self, rec_lsn: Option<u64>) {
        let lsn = rec_lsn.unwrap_or(NO_REDO_POINT);
        assert!(
            lsn != NO_REDO_POINT || rec_lsn.is_none(),
            "a redo point at u64::MAX"
        );
        self.rec_lsn.store(lsn, Ordering::Release);
    }
}

struct Map {
    ids: HashMap<PageId, usize, PageIdHash>,
    hand: usize,
}

/// A counter written from many threads: each adds to one of a few cache-line-sized cells,
/// one per thread, and a read sums them.
#[derive(Default)]
struct Striped {
    cells: [Cell; STRIPES],
}

const STRIPES: usize = 8;

#[derive(Default)]
#[repr(align(128))]
struct Cell(AtomicU64);

impl Striped {
    fn add(&self, n: u64) {
        let stripe = crate::stripe::thread_stripe(STRIPES);
        self.cells[stripe].0.fetch_add(n, Ordering::Relaxed);
    }

    fn sum(&self) -> u64 {
        self.cells
            .iter()
            .map(|cell| cell.0.load(Ordering::Relaxed))
            .sum()
    }
}

/// A fixed-size cache of pages.
pub struct BufferPool {
    page_bytes: u32,
    /// The pages' format: a new page is formatted in it.
    format: PageFormat,
    backend: Box<dyn Backend>,
    frames: Box<[Frame]>,
    /// Shared for a lookup (a hit pins under it), exclusive to change the map or choose a
    /// victim: a frame's pins rise only under this lock, so a victim chosen under the
    /// exclusive lock with no pins stays unpinned.
    map: RwLock<Map>,
    /// Where each page probably is, read with no lock: slot `hint_slot(id)` holds a frame
    /// index + 1 (0: none), set when a page is loaded into that frame. Another page hashed
    /// to the slot, or an eviction since, makes it wrong: a read checks it under the latch.
    hints: Box<[AtomicU32]>,
    /// Held pages written to the spill file. Lock order: after a frame latch and the map.
    spilled: Mutex<held::Spilled>,
    /// Striped: every reader of every thread counts its hits, and one shared counter was a
    /// cache line all of them wrote.
    hits: Striped,
    misses: AtomicU64,
    evictions: AtomicU64,
    eviction_writes: AtomicU64,
    pages_written: AtomicU64,
    changed_during_write_back: AtomicU64,
    spills: AtomicU64,
    parks: AtomicU64,
    /// Frames whose `dirty` flag is set: kept with every change of a flag, so that the
    /// background writer's check costs one load, not a pass over every frame (it read all of
    /// a 4 GiB cache's 262,144 flags every 20 ms: 21 % of the CPU in `till bench kv`).
    dirty_frames: AtomicU64,
}

impl fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "BufferPool({} frames of {} B)",
            self.frames.len(),
            self.page_bytes
        )
    }
}

impl BufferPool {
    /// Runs `f` while the data files are neither written nor read (see
    /// [`Backend::with_files_quiet`]): pages stay as they are on disk for its duration.
    pub fn with_writes_stopped(&self, f: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        self.backend.with_files_quiet(f)
    }

    /// A pool of `cache_bytes / page_bytes` frames (at least 8) of pages in `format`.
    #[must_use]
    pub fn new(format: PageFormat, cache_bytes: u64, backend: Box<dyn Backend>) -> Self {
        let page_bytes = format.page_bytes();
        let count = usize::try_from(cache_bytes / u64::from(page_bytes))
            .unwrap_or(usize::MAX)
            .max(8);
        let frames = (0..count)
            .map(|_| Frame {
                pins: AtomicU32::new(0),
                referenced: AtomicBool::new(false),
                unlogged: AtomicBool::new(false),
                held: AtomicBool::new(false),
                dirty: AtomicBool::new(false),
                id: AtomicU64::new(0),
                rec_lsn: AtomicU64::new(NO_REDO_POINT),
                data: RwLock::new(FrameData::default()),
            })
            .collect();
        // Twice the frames, a power of two: few pages share a slot.
        let hints = (0..(count.next_power_of_two() * 2))
            .map(|_| AtomicU32::new(0))
            .collect();
        assert!(
            u32::try_from(count).is_ok_and(|n| n < u32::MAX),
            "{count} frames do not fit the hint table's u32 slots"
        );
        BufferPool {
            page_bytes,
            format,
            backend,
            frames,
            hints,
            map: RwLock::new(Map {
                // Not sized to the frames: a map sized for a 4 GiB cache holding a few
                // thousand pages spreads them over megabytes, a cache miss per lookup. Grown
                // with the pages it holds, point reads ran 454-534k/s against 370-429k/s
                // (`examples/read_profile.rs`, 200,000 rows, 4 GiB cache, 3 runs by turns).
                ids: HashMap::with_hasher(PageIdHash::default()),
                hand: 0,
            }),
            spilled: Mutex::default(),
            hits: Striped::default(),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            eviction_writes: AtomicU64::new(0),
            pages_written: AtomicU64::new(0),
            changed_during_write_back: AtomicU64::new(0),
            spills: AtomicU64::new(0),
            parks: AtomicU64::new(0),
            dirty_frames: AtomicU64::new(0),
        }
    }

    /// Sets or clears `f`'s dirty flag, keeping the count of dirty frames. Requires: `f`'s
    /// latch, exclusive (so two threads never change one frame's flag at once).
    fn mark_dirty(&self, f: &Frame, dirty: bool) {
        if f.dirty.swap(dirty, Ordering::AcqRel) != dirty {
            if dirty {
                self.dirty_frames.fetch_add(1, Ordering::AcqRel);
            } else {
                let before = self.dirty_frames.fetch_sub(1, Ordering::AcqRel);
                assert!(before > 0, "more frames cleaned than dirtied");
            }
        }
    }

    /// The page size.
    #[must_use]
    pub fn page_bytes(&self) -> u32 {
        self.page_bytes
    }

    /// The pages' format: their size, and whether they are sealed.
    #[must_use]
    pub fn format(&self) -> PageFormat {
        self.format
    }

    /// Number of frames.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.frames.len()
    }

    /// Counters since the pool was made.
    #[must_use]
    pub fn stats(&self) -> PoolStats {
        PoolStats {
            hits: self.hits.sum(),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            eviction_writes: self.eviction_writes.load(Ordering::Relaxed),
            pages_written: self.pages_written.load(Ordering::Relaxed),
            changed_during_write_back: self.changed_during_write_back.load(Ordering::Relaxed),
            spills: self.spills.load(Ordering::Relaxed),
            parks: self.parks.load(Ordering::Relaxed),
            dirty: self.dirty_count() as u64,
        }
    }

    /// Reads page `id`, loading it if needed. An unwritten page reads as an empty `Free` page
    /// with lsn 0 (recovery formats it).
    pub fn read(&self, id: PageId) -> Result<PageRead<'_>> {
        if let Some(read) = self.read_hinted(id) {
            return Ok(read);
        }
        // Through the map: pinned until latched, then held by the latch alone.
        let frame = self.pin(id, None)?;
        let guard = self.frames[frame].data.read();
        self.unpin(frame);
        assert_eq!(
            guard.page.as_ref().map(PageBuf::id),
            Some(id),
            "frame {frame} holds the wrong page"
        );
        self.hints[self.hint_slot(id)].store(hint_of(frame), Ordering::Release);
        Ok(PageRead { frame, guard })
    }

    /// Where page `id` probably is: the frame `slot` guesses (plus one), else the one the
    /// hint table does (then kept in `slot`), each checked to hold the page now, without its
    /// latch; 0 when neither does. For [`BufferPool::read_guessed`]: a branch keeps a slot
    /// per child, and finds the child's frame while the branch is still read, so a descent
    /// need not wait on the hint table between the two (`btree/walk.rs`).
    pub fn locate(&self, id: PageId, slot: &AtomicU32) -> u32 {
        let guess = slot.load(Ordering::Relaxed);
        if self.frame_holds(guess, id) {
            return guess;
        }
        let hint = self.hints[self.hint_slot(id)].load(Ordering::Acquire);
        if hint != guess && self.frame_holds(hint, id) {
            slot.store(hint, Ordering::Relaxed);
            return hint;
        }
        0
    }

    /// True when frame `hint - 1` holds page `id` now (a glance without the latch).
    fn frame_holds(&self, hint: u32, id: PageId) -> bool {
        hint.checked_sub(1)
            .and_then(|frame| self.frames.get(usize::try_from(frame).ok()?))
            .is_some_and(|f| f.id.load(Ordering::Acquire) == id.0)
    }

    /// [`BufferPool::read`], trying frame `guess - 1` first ([`BufferPool::locate`]; 0: no
    /// guess). A wrong guess costs a look, never a wrong page: it is checked under the latch.
    pub fn read_guessed(&self, id: PageId, guess: u32) -> Result<PageRead<'_>> {
        if let Some(frame) = guess.checked_sub(1)
            && let Ok(frame) = usize::try_from(frame)
            && frame < self.frames.len()
            && let Some(read) = self.read_in(id, frame)
        {
            return Ok(read);
        }
        self.read(id)
    }

    /// A hit found through the hint table, latched; `None` when the hint is wrong (the map
    /// knows). No pin: the latch keeps the page in its frame (see the module doc).
    fn read_hinted(&self, id: PageId) -> Option<PageRead<'_>> {
        let hint = self.hints[self.hint_slot(id)].load(Ordering::Acquire);
        let frame = usize::try_from(hint.checked_sub(1)?).expect("a frame index");
        self.read_in(id, frame)
    }

    /// Page `id` latched in `frame` if that frame holds it; `None` when it does not.
    fn read_in(&self, id: PageId, frame: usize) -> Option<PageRead<'_>> {
        let f = &self.frames[frame];
        let trusted = crate::mutants::active("hinted-read-trusted");
        // A cheap first check, without the latch: a frame holding another page is skipped.
        if f.id.load(Ordering::Acquire) != id.0 && !trusted {
            return None;
        }
        let guard = f.data.read();
        // The check that counts: under the latch, no eviction can change the frame.
        if guard.page.as_ref().map(PageBuf::id) != Some(id) && !trusted {
            return None;
        }
        if !f.referenced.load(Ordering::Relaxed) {
            f.referenced.store(true, Ordering::Relaxed);
        }
        self.hits.add(1);
        Some(PageRead { frame, guard })
    }

    /// The hint table's slot for `id`.
    fn hint_slot(&self, id: PageId) -> usize {
        // Fibonacci hashing, the top bits: the table's length is a power of two.
        let bits = self.hints.len().trailing_zeros();
        let hash = id.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits);
        usize::try_from(hash).expect("a slot index")
    }

    /// Opens page `id` for changing. The page is dirty and unlogged from now until
    /// [`BufferPool::stamp`] gives it the lsn of the log record describing the change.
    pub fn write(&self, id: PageId) -> Result<PageWrite<'_>> {
        let frame = self.pin(id, None)?;
        Ok(self.write_guard(frame, id))
    }

    /// A new page `id` of `kind` in the pool, without reading the file (its place there holds
    /// nothing of value: it is past the end, or on the free list).
    pub fn create(&self, id: PageId, kind: PageKind) -> Result<PageWrite<'_>> {
        let frame = self.pin(id, Some(kind))?;
        Ok(self.write_guard(frame, id))
    }

    fn write_guard(&self, frame: usize, id: PageId) -> PageWrite<'_> {
        let f = &self.frames[frame];
        let mut guard = f.data.write();
        assert_eq!(
            guard.page.as_ref().map(PageBuf::id),
            Some(id),
            "frame {frame} holds the wrong page"
        );
        f.unlogged.store(true, Ordering::Release);
        self.mark_dirty(f, true);
        guard.dirty = true;
        PageWrite {
            pool: self,
            frame,
            guard,
        }
    }

    /// Requires: the caller holds no guard on these pages.
    ///
    /// `redo_from` is a log position at or before the start of that record (a record
    /// boundary), from which redo would replay it.
    ///
    /// Gives the pages changed by one log record that record's lsn: stamps their page lsn and
    /// allows them to be written back once the log is durable to it.
    pub fn stamp(&self, ids: &[PageId], lsn: u64, redo_from: u64) {
        const AT_ONCE: usize = 8;
        assert!(
            redo_from < lsn,
            "redo point {redo_from} not before the record's end {lsn}"
        );
        // Look the frames up, then latch them without the map lock: a reader may hold a latch
        // while it pins its next page, which takes the map lock. Unlogged frames cannot be
        // evicted meanwhile, so the lookups stay true. A few at a time, on the stack: most
        // commits change one or two pages.
        for ids in ids.chunks(AT_ONCE) {
            let mut frames = [0usize; AT_ONCE];
            {
                let map = self.map.read();
                for (frame, id) in frames.iter_mut().zip(ids) {
                    *frame = *map
                        .ids
                        .get(id)
                        .unwrap_or_else(|| panic!("stamped {id} is not in the pool"));
                }
            }
            for (&id, &frame) in ids.iter().zip(&frames) {
                self.stamp_frame(id, frame, lsn, redo_from);
            }
        }
    }

    /// Stamps page `id`, changed and not yet logged, in `frame`: see [`BufferPool::stamp`].
    fn stamp_frame(&self, id: PageId, frame: usize, lsn: u64, redo_from: u64) {
        let f = &self.frames[frame];
        assert!(
            f.unlogged.load(Ordering::Acquire),
            "stamped {id} was not changed"
        );
        let mut data = f.data.write();
        let page = data
            .page
            .as_mut()
            .expect("an unlogged frame holds its page");
        assert_eq!(page.id(), id, "unlogged frame {frame} changed pages");
        page.set_lsn(lsn);
        if f.rec_lsn().is_none() {
            f.set_rec_lsn(Some(redo_from));
        }
        f.held.store(false, Ordering::Release);
        f.unlogged.store(false, Ordering::Release);
    }

    /// Checks that map and frames agree and that no guard is outstanding. For tests and
    /// debug builds at quiet points.
    pub fn check_invariants(&self) {
        let map = self.map.read();
        assert!(map.ids.len() <= self.frames.len());
        for (id, &i) in &map.ids {
            let f = &self.frames[i];
            assert_eq!(f.id.load(Ordering::Acquire), id.0, "frame {i} id vs map");
            let d = f.data.read();
            assert_eq!(d.page.as_ref().map(PageBuf::id), Some(*id));
            assert_eq!(
                d.dirty,
                f.dirty.load(Ordering::Acquire),
                "frame {i} dirty flag"
            );
            assert!(
                d.dirty || !f.held.load(Ordering::Acquire),
                "frame {i} held but clean"
            );
            assert!(
                d.dirty || f.rec_lsn().is_none(),
                "frame {i} clean with a redo point"
            );
        }
        for (i, f) in self.frames.iter().enumerate() {
            assert_eq!(f.pins.load(Ordering::Acquire), 0, "frame {i} still pinned");
        }
        // No pin out: no spill or read back on its way.
        self.spilled.lock().check_slots(true);
        let dirty = self
            .frames
            .iter()
            .filter(|f| f.dirty.load(Ordering::Acquire))
            .count();
        assert_eq!(
            self.dirty_count(),
            dirty,
            "the count of dirty frames drifted from their flags"
        );
    }
}

#[cfg(test)]
mod tests;
