//! The B+tree's view of the buffer pool: [`TxnPages`] for a commit (applies, records and
//! allocates), [`ReadPages`] for readers; and [`PoolBackend`], the pool's backend: the data
//! files (`page::DataFiles`) wrapped with the log, the readers' lock and the fail-stop switch.
//!
//! A commit's pages may be *shadowed* ([`TxnPages::shadowed`], a drain's chunk: `commit/mod.rs`):
//! each page it changes is copied out of the pool at its first change and changed there, a
//! page it makes is made there, and readers go on reading the pool's pages, under the tree
//! lock held shared, while the commit works. [`TxnPages::install`] then moves the copies into
//! the pool, under the tree lock held exclusively: readers wait for that alone, not for the
//! descents, splits and allocations that made the copies.

use super::Poison;
use crate::btree::{PageOp, Pages};
use crate::error::{Error, Result};
use crate::page::{Backend, BufferPool, DataFiles, PageBuf, PageId, PageKind, PageRead};
use crate::record::Alloc;
use crate::wal::Wal;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::ops::Deref;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;

/// Pages as one commit sees them: every change goes to the pool (unlogged until stamped) and
/// into the commit's op list; allocation takes the free list first, then grows the file.
pub struct TxnPages<'a> {
    pool: &'a BufferPool,
    path: &'a Path,
    alloc: RefCell<Alloc>,
    ops: RefCell<Vec<PageOp>>,
    /// Every page an op changed (since the last part): the frames left unlogged.
    touched: RefCell<HashSet<PageId>>,
    /// Bytes the ops take encoded, at most (`PageOp::encoded_len_at_most`).
    ops_bytes: std::cell::Cell<usize>,
    /// Full-page images: a page whose lsn is at most this is logged whole at its first change
    /// in this commit (see "Full-page images" in `db/mod.rs`). `None`: other guards.
    image_below: Option<u64>,
    /// Pages this commit has logged whole (an image or a format) already.
    whole: RefCell<BTreeSet<PageId>>,
    /// Pages due a full-page image in this part: the image is taken when the part is cut, of
    /// the page as the part leaves it, and none of the part's ops of the page is logged (see
    /// `Pages::apply` below). In page order, so a commit's record is the same every run.
    imaged: RefCell<BTreeSet<PageId>>,
    /// While shadowed (see the module doc): the copies, `None` once installed or never.
    shadows: RefCell<Option<Shadows>>,
}

/// A shadowed commit's pages: each page it changed or made, as it left it, and which of them
/// it made past the file's end (the pool makes those afresh at the install, reading nothing).
#[derive(Default)]
struct Shadows {
    pages: BTreeMap<PageId, Rc<PageBuf>>,
    fresh: BTreeSet<PageId>,
}

/// A page a commit reads: the pool's, or its own copy while shadowed.
pub enum TxnRead<'a> {
    Pool(PageRead<'a>),
    Shadow(Rc<PageBuf>),
}

impl Deref for TxnRead<'_> {
    type Target = PageBuf;
    fn deref(&self) -> &PageBuf {
        match self {
            TxnRead::Pool(page) => page,
            TxnRead::Shadow(page) => page,
        }
    }
}

impl<'a> TxnPages<'a> {
    pub fn new(
        pool: &'a BufferPool,
        path: &'a Path,
        alloc: Alloc,
        image_below: Option<u64>,
    ) -> Self {
        TxnPages {
            pool,
            path,
            alloc: RefCell::new(alloc),
            ops: RefCell::default(),
            touched: RefCell::default(),
            ops_bytes: std::cell::Cell::new(0),
            image_below,
            whole: RefCell::default(),
            imaged: RefCell::default(),
            shadows: RefCell::default(),
        }
    }

    /// As [`TxnPages::new`], shadowed (see the module doc) until [`TxnPages::install`].
    pub fn shadowed(
        pool: &'a BufferPool,
        path: &'a Path,
        alloc: Alloc,
        image_below: Option<u64>,
    ) -> Self {
        let pages = Self::new(pool, path, alloc, image_below);
        *pages.shadows.borrow_mut() = Some(Shadows::default());
        pages
    }

    /// Whether changes still go to copies ([`TxnPages::shadowed`], not yet installed).
    pub fn is_shadowed(&self) -> bool {
        self.shadows.borrow().is_some()
    }

    /// Moves the copies of a shadowed commit into the pool, in page order, each unlogged from
    /// now on as a page changed in place is; later changes go to the pool. Nothing when not
    /// shadowed. Requires: the tree lock held exclusively (`_tree`), which makes the commit's
    /// changes appear to readers all at once.
    pub fn install(&self, _tree: &super::locks::TreeExclusive<'_>) -> Result<()> {
        let Some(shadows) = self.shadows.borrow_mut().take() else {
            return Ok(());
        };
        for (id, page) in shadows.pages {
            let mut page = Rc::try_unwrap(page).unwrap_or_else(|page| (*page).clone());
            let mut frame = if shadows.fresh.contains(&id) {
                // Made as `allocate` makes a page in place: the pool's lsn of it (0, or a
                // freed page's, still cached), as its ops never change a page's lsn.
                let frame = self.pool.create(id, page.kind())?;
                page.set_lsn(frame.lsn());
                frame
            } else {
                self.pool.write(id)?
            };
            assert_eq!(
                frame.lsn(),
                page.lsn(),
                "{id} changed in the pool while the commit held a copy"
            );
            *frame = page;
        }
        Ok(())
    }

    /// A shadowed commit's copy of page `id`, taken out of `shadows` to be changed (made from
    /// the pool's at its first change).
    fn shadow_of(&self, shadows: &mut Shadows, id: PageId) -> Result<Rc<PageBuf>> {
        match shadows.pages.remove(&id) {
            Some(page) => Ok(page),
            None => Ok(Rc::new(self.pool.read(id)?.clone())),
        }
    }

    /// The ops, the allocator state after them, and the pages they changed (in page order,
    /// each once).
    pub fn finish(self) -> Result<(Vec<PageOp>, Alloc, Vec<PageId>)> {
        self.take_images()?;
        Ok((self.ops.into_inner(), self.alloc.into_inner(), {
            let mut touched: Vec<PageId> = self.touched.into_inner().into_iter().collect();
            touched.sort_unstable();
            touched
        }))
    }

    /// Bytes the ops so far take encoded, at most (an image counts whole).
    pub fn ops_bytes(&self) -> usize {
        self.ops_bytes.get()
    }

    /// Pages changed since the last part: the frames they hold are unlogged.
    pub fn touched_len(&self) -> usize {
        self.touched.borrow().len()
    }

    /// One part of a commit logged in parts: the ops so far, the allocator state now, and the
    /// pages they changed; the next part starts empty. Pages logged whole stay so for the whole
    /// commit (replay applies all of it or none).
    pub fn take_part(&self) -> Result<(Vec<PageOp>, Alloc, Vec<PageId>)> {
        self.take_images()?;
        self.ops_bytes.set(0);
        let ops = std::mem::take(&mut *self.ops.borrow_mut());
        let mut touched: Vec<PageId> = std::mem::take(&mut *self.touched.borrow_mut())
            .into_iter()
            .collect();
        touched.sort_unstable();
        Ok((ops, *self.alloc.borrow(), touched))
    }

    /// Appends the part's full-page images to its ops: each page due one, whole, as the part
    /// leaves it (a node compacted first, so the image leaves out its dead bytes).
    fn take_images(&self) -> Result<()> {
        let imaged = std::mem::take(&mut *self.imaged.borrow_mut());
        if crate::mutants::active("part-images-dropped") {
            return Ok(());
        }
        // A part is cut, and a commit finished, only once its pages are in the pool.
        assert!(!self.is_shadowed(), "images taken of shadowed pages");
        let mut ops = self.ops.borrow_mut();
        for id in imaged {
            let mut page = self.pool.write(id)?;
            crate::btree::compact_for_image(&mut page);
            ops.push(PageOp::Image {
                page: id,
                kind: page.kind(),
                body: page.body().to_vec(),
            });
        }
        Ok(())
    }

    /// Applies `ops`, every one of page `id`, under one write guard of the page, and records
    /// them for redo (see [`Pages::apply`]).
    fn apply_ops(&self, id: PageId, ops: impl Iterator<Item = PageOp>) -> Result<()> {
        let mut ops = ops.peekable();
        if ops.peek().is_none() {
            return Ok(());
        }
        let mut shadows = self.shadows.borrow_mut();
        if let Some(shadows) = shadows.as_mut() {
            let mut page = self.shadow_of(shadows, id)?;
            // The only holder unless a read guard of it is alive (which `Pages::apply`
            // forbids): then a copy, still right.
            self.apply_ops_to(id, Rc::make_mut(&mut page), ops);
            shadows.pages.insert(id, page);
            return Ok(());
        }
        drop(shadows);
        self.apply_ops_to(id, &mut *self.pool.write(id)?, ops);
        Ok(())
    }

    /// [`TxnPages::apply_ops`] on `page` (the pool's, or a shadowed commit's copy).
    fn apply_ops_to(&self, id: PageId, page: &mut PageBuf, mut ops: impl Iterator<Item = PageOp>) {
        let Some(first) = ops.next() else {
            return;
        };
        let apply = |page: &mut PageBuf, op: &PageOp| {
            assert_eq!(
                op.page(),
                id,
                "a run of ops of page {id} holds one of another"
            );
            op.apply_to(page);
        };
        if self.imaged.borrow().contains(&id) {
            // The page's image, taken when the part is cut, holds these changes.
            apply(page, &first);
            ops.for_each(|op| apply(page, &op));
            return;
        }
        // The page's lsn is the end of the record of its last logged change (this commit's
        // changes are stamped after the append), so it says whether the log holds the page
        // whole since the horizon: a record that began at or after the horizon ends past it.
        // A page whose last record ends exactly at the horizon was changed before the
        // checkpoint began, and needs its image (`<=`, not `<`).
        let strict = crate::mutants::active("image-horizon-strict");
        let image = !first.rewrites_whole_page()
            && !crate::mutants::active("no-full-page-images")
            && self
                .image_below
                .is_some_and(|below| page.lsn() < below || (page.lsn() == below && !strict))
            && !self.whole.borrow().contains(&id);
        self.touched.borrow_mut().insert(id);
        if image {
            // The page whole, as this part leaves it (`take_images`): redo rebuilds it from
            // that alone, torn or not, and none of the part's later changes of it is logged on
            // its own. Taken at the first change instead, the image was logged with every
            // later op of the page, and again by a merge's image of it (a retain's leaves: an
            // image, twenty deletes, then the merged image).
            apply(page, &first);
            ops.for_each(|op| apply(page, &op));
            self.imaged.borrow_mut().insert(id);
            self.whole.borrow_mut().insert(id);
            let bound = PageOp::image_len_at_most(self.pool.format().body_bytes());
            self.ops_bytes.set(self.ops_bytes.get() + bound);
            return;
        }
        let mut logged = self.ops.borrow_mut();
        for op in std::iter::once(first).chain(ops) {
            apply(page, &op);
            if self.image_below.is_some() && op.rewrites_whole_page() {
                self.whole.borrow_mut().insert(id);
            }
            self.ops_bytes
                .set(self.ops_bytes.get() + op.encoded_len_at_most());
            logged.push(op);
        }
    }

    fn never_allocated(&self, id: PageId) -> Error {
        Error::Corruption {
            file: self.path.to_path_buf(),
            offset: id.0.saturating_mul(u64::from(self.pool.page_bytes())),
            what: "reference to a page that was never allocated",
        }
    }
}

impl Pages for TxnPages<'_> {
    type Read<'b>
        = TxnRead<'b>
    where
        Self: 'b;

    fn format(&self) -> crate::page::PageFormat {
        self.pool.format()
    }

    fn read(&self, id: PageId) -> Result<TxnRead<'_>> {
        self.read_guessed(id, 0)
    }

    fn locate(&self, id: PageId, slot: &AtomicU32) -> u32 {
        self.pool.locate(id, slot)
    }

    fn make_search_hints(&self) -> bool {
        false
    }

    fn read_guessed(&self, id: PageId, guess: u32) -> Result<TxnRead<'_>> {
        if id.0 == 0 || id.0 >= self.alloc.borrow().page_count {
            return Err(self.never_allocated(id));
        }
        if let Some(page) = self
            .shadows
            .borrow()
            .as_ref()
            .and_then(|shadows| shadows.pages.get(&id))
        {
            return Ok(TxnRead::Shadow(Rc::clone(page)));
        }
        self.pool.read_guessed(id, guess).map(TxnRead::Pool)
    }

    fn apply(&self, op: PageOp) -> Result<()> {
        self.apply_ops(op.page(), std::iter::once(op))
    }

    fn apply_run(&self, ops: Vec<PageOp>) -> Result<()> {
        match ops.first() {
            Some(first) => self.apply_ops(first.page(), ops.into_iter()),
            None => Ok(()),
        }
    }

    fn allocate(&self, kind: PageKind) -> Result<PageId> {
        let head = self.alloc.borrow().free_head;
        let id = if head.0 == 0 {
            // A fresh page past every allocated one: its place in the file holds nothing of
            // value (zeros, or garbage from a cut extension), so it is made, not read.
            let id = {
                let mut alloc = self.alloc.borrow_mut();
                let id = PageId(alloc.page_count);
                alloc.page_count += 1;
                id
            };
            match self.shadows.borrow_mut().as_mut() {
                Some(shadows) => {
                    let page = PageBuf::formatted(id, kind, self.pool.format());
                    shadows.pages.insert(id, Rc::new(page));
                    shadows.fresh.insert(id);
                }
                None => drop(self.pool.create(id, kind)?),
            }
            id
        } else {
            let next = {
                let page = self.read(head)?;
                if page.kind() != PageKind::Free {
                    return Err(Error::Corruption {
                        file: self.path.to_path_buf(),
                        offset: head.offset(self.pool.page_bytes()),
                        what: "free list points at a page in use",
                    });
                }
                PageId(u64::from_le_bytes(
                    page.body()[..8].try_into().expect("8 bytes"),
                ))
            };
            self.alloc.borrow_mut().free_head = next;
            head
        };
        self.apply(PageOp::Format { page: id, kind })?;
        Ok(id)
    }

    fn free(&self, id: PageId) -> Result<()> {
        let head = self.alloc.borrow().free_head;
        let mut body = vec![0u8; self.pool.format().body_bytes()];
        body[..8].copy_from_slice(&head.0.to_le_bytes());
        self.apply(PageOp::Image {
            page: id,
            kind: PageKind::Free,
            body,
        })?;
        self.alloc.borrow_mut().free_head = id;
        Ok(())
    }

    fn path(&self) -> &Path {
        self.path
    }
}

/// Pages for readers: never changed through this view.
pub struct ReadPages<'a> {
    pub pool: &'a BufferPool,
    pub path: &'a Path,
}

impl Pages for ReadPages<'_> {
    type Read<'b>
        = PageRead<'b>
    where
        Self: 'b;

    fn format(&self) -> crate::page::PageFormat {
        self.pool.format()
    }

    fn read(&self, id: PageId) -> Result<PageRead<'_>> {
        self.read_guessed(id, 0)
    }

    fn locate(&self, id: PageId, slot: &AtomicU32) -> u32 {
        self.pool.locate(id, slot)
    }

    fn read_guessed(&self, id: PageId, guess: u32) -> Result<PageRead<'_>> {
        self.pool.read_guessed(id, guess)
    }

    fn apply(&self, op: PageOp) -> Result<()> {
        panic!("a reader tried to change {}", op.page());
    }

    fn allocate(&self, _kind: PageKind) -> Result<PageId> {
        panic!("a reader tried to allocate a page");
    }

    fn free(&self, id: PageId) -> Result<()> {
        panic!("a reader tried to free {id}");
    }

    fn path(&self) -> &Path {
        self.path
    }
}

/// The pool's backend: the log (for the write-ahead rule) and the data file behind its
/// torn-page guard.
pub struct PoolBackend {
    pub wal: Arc<Wal>,
    /// The data file, its guard and the spill file (`page/data_files.rs`).
    pub files: DataFiles,
    /// The database's fail-stop switch: a failed write-back sets it, whichever call needed
    /// the frame (a read inside a transaction, a commit, the background writer), so no
    /// later commit is acknowledged (the random tier's seed 1524 met a read whose eviction
    /// failed while another thread's commit went on).
    pub poison: Arc<Poison>,
    /// The readers' lock, taken around every write to the data files (`db/readers.rs`);
    /// `None` for a read-only handle, which writes only to memory.
    pub gate: Option<Arc<super::readers::ReaderGate>>,
    /// A read-only handle's snapshot end (`read_only.rs`): the log as far as it read, which its
    /// own (empty) log does not know. Pages are never newer; replayed ones are "durable" to it.
    pub snapshot_end: Option<Arc<std::sync::atomic::AtomicU64>>,
}

impl Backend for PoolBackend {
    fn log_end(&self) -> u64 {
        match &self.snapshot_end {
            Some(end) => end.load(std::sync::atomic::Ordering::Acquire),
            None => self.wal.end_lsn().0,
        }
    }

    fn boundary_end(&self) -> u64 {
        match &self.snapshot_end {
            Some(end) => end.load(std::sync::atomic::Ordering::Acquire),
            None => self.wal.boundary_end().0,
        }
    }

    fn log_durable_to(&self, lsn: u64) -> Result<u64> {
        if let Some(end) = &self.snapshot_end {
            // Everything a read-only handle replayed is in the log it read.
            return Ok(end.load(std::sync::atomic::Ordering::Acquire));
        }
        if self.wal.durable_lsn().0 < lsn {
            self.wal.sync()?;
        }
        Ok(self.wal.durable_lsn().0)
    }

    fn read_page(&self, id: PageId) -> Result<Option<PageBuf>> {
        self.files.read(id, self.log_end())
    }

    fn write_pages(&self, pages: &mut [PageBuf]) -> Result<()> {
        // Readers' snapshots first: their pages must not change under them, and every page
        // written must be at or below the published durable lsn (`GateGuard::publish`).
        let _gate = self.enter_gate().inspect_err(|e| self.poison.set(e))?;
        self.files.write(pages).inspect_err(|e| self.poison.set(e))
    }

    fn write_pages_unless_readers(&self, pages: &mut [PageBuf]) -> Result<bool> {
        let gate = match &self.gate {
            Some(gate)
                if !crate::mutants::active("writes-ignore-readers")
                    && !crate::mutants::active("evictions-wait-for-readers") =>
            {
                gate
            }
            _ => return self.write_pages(pages).map(|()| true),
        };
        let Some(_gate) = gate.try_enter().inspect_err(|e| self.poison.set(e))? else {
            return Ok(false);
        };
        self.files
            .write(pages)
            .inspect_err(|e| self.poison.set(e))
            .map(|()| true)
    }

    fn save_ledger(&self) -> Result<()> {
        let _gate = self.enter_gate().inspect_err(|e| self.poison.set(e))?;
        self.files.save_ledger().inspect_err(|e| self.poison.set(e))
    }

    fn with_files_quiet(&self, f: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        self.files.quiet(f)
    }

    fn spill_write(&self, slot: u64, page: &mut PageBuf) -> Result<()> {
        self.files.spill().write(slot, page)
    }

    fn spill_read(&self, slot: u64, id: PageId) -> Result<PageBuf> {
        self.files.spill().read(slot, id)
    }

    fn spill_discard(&self) -> bool {
        self.files.spill().discard()
    }
}

impl PoolBackend {
    /// The readers' lock, waiting for read-only handles to let go (`None`: no gate).
    fn enter_gate(&self) -> Result<Option<super::readers::GateGuard<'_>>> {
        if crate::mutants::active("writes-ignore-readers") {
            return Ok(None);
        }
        self.gate
            .as_deref()
            .map(super::readers::ReaderGate::enter)
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FlushMethod;
    use crate::io::{SimConfig, SimDisk, Storage};
    use crate::page::TornPageGuard;
    use crate::page::{PageGuard, PageStore, SpillFile};
    use crate::wal::WalOptions;

    fn leaf(id: u64, lsn: u64, byte: u8) -> PageBuf {
        let mut page = PageBuf::new(PageId(id), PageKind::Leaf, 4096);
        page.set_lsn(lsn);
        page.body_mut()[100] = byte;
        page
    }

    /// The race this guards against: the background writer copied page 5 at lsn 100, a commit
    /// changed it (lsn 120) and a checkpoint wrote that and marked it clean; the old copy then
    /// landed last, and the change at 120 was on no disk while redo started past it.
    /// The data files of a database in `/db` on `disk`, with a log reaching lsn 200.
    fn data_files(disk: &SimDisk) -> PoolBackend {
        let storage: Arc<dyn Storage> = Arc::new(disk.clone());
        let dir = Path::new("/db");
        storage.create_dir_all(dir).expect("mkdir");
        let store = PageStore::create(&*storage, dir, FlushMethod::Fdatasync, 4096).expect("store");
        let guard = PageGuard::create(
            TornPageGuard::None,
            &*storage,
            dir,
            FlushMethod::Fdatasync,
            4096,
        )
        .expect("guard");
        let (wal, _) = Wal::open(
            Arc::clone(&storage),
            &dir.join("wal"),
            WalOptions::for_tests(),
        )
        .expect("wal");
        // The log reaches past the pages' lsns (a page never carries an lsn beyond it).
        wal.commit(&[0; 200], crate::Durability::Sync)
            .expect("commit");
        let spill = SpillFile::new(Arc::clone(&storage), dir, 4096).expect("spill");
        PoolBackend {
            wal: Arc::new(wal),
            files: DataFiles::new(store, guard, spill),
            poison: Arc::default(),
            gate: None,
            snapshot_end: None,
        }
    }

    #[test]
    fn a_stale_copy_written_after_a_newer_one_is_dropped() {
        let disk = SimDisk::new(SimConfig::default());
        let files = data_files(&disk);
        files.write_pages(&mut [leaf(5, 120, 2)]).expect("newer");
        files
            .write_pages(&mut [leaf(5, 100, 1), leaf(6, 100, 1)])
            .expect("stale and fresh");
        let page5 = files.read_page(PageId(5)).expect("read").expect("written");
        assert_eq!(
            (page5.lsn(), page5.body()[100]),
            (120, 2),
            "a stale copy overwrote page 5"
        );
        let page6 = files.read_page(PageId(6)).expect("read").expect("written");
        assert_eq!(
            page6.lsn(),
            100,
            "a fresh page in the same batch was dropped"
        );
    }

    /// The random tier's seed 1524: an eviction's write-back failed inside a read, and
    /// another thread's later commit was acknowledged. A failed write-back now poisons the
    /// database, whoever needed the frame.
    #[test]
    fn a_failed_write_back_poisons_the_database() {
        let disk = SimDisk::new(SimConfig::default());
        let files = data_files(&disk);
        files.write_pages(&mut [leaf(5, 100, 1)]).expect("healthy");
        assert!(!files.poison.is_set());
        disk.inject(
            crate::io::Fault::persistent(crate::io::IoKind::Flush, 1, crate::io::FaultKind::Eio)
                .on_path("data.tdb"),
        );
        assert!(files.write_pages(&mut [leaf(5, 120, 2)]).is_err());
        assert!(
            files.poison.is_set(),
            "a failed write-back left the database taking commits"
        );
    }
}
