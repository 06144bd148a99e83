//! [`Db`]: an embedded transactional key-value store on the log, the buffer pool and the
//! B+tree. See ARCHITECTURE.md, "The store", for the decisions this follows.
//!
//! A database directory holds `tilldb.meta` (header slots), `data.tdb` (pages),
//! `doublewrite.tdb` (the torn-page guard) and `wal/` (the log). Page 1 is the root of the
//! table catalog (name -> root page id, 8 bytes LE) and page 2 the root of the default table
//! (name `""`). A named table is created by the first commit that writes to it; readers find
//! it through the catalog at their snapshot, so it appears to them when that commit does.
//!
//! Write path: `begin()` takes the writer lock; `commit` records the values readers must
//! still see in the overlay, applies the write set to the tree (pages become unlogged),
//! appends one commit record, stamps the pages with its lsn, releases the lock, then waits for
//! the durability level. Readers read at the visible lsn (see `txn::visibility`).

mod pages;
pub mod record;
mod txn;
mod writeback;

pub use txn::{ReadTxn, Txn};

use crate::btree::{Direction, PageOp, Pages, Tree};
use crate::error::{Error, Result};
use crate::header::{Header, HeaderFile};
use crate::io::{FileStorage, IoGeometry, Storage, choose_flush_method};
use crate::page::{
    BufferPool, DATA_FILE_NAME, DOUBLEWRITE_FILE_NAME, PageGuard, PageId, PageStore,
};
use crate::txn::{Overlay, Seen, TableId, Visibility};
use crate::wal::{Lsn, Wal};
use crate::{Durability, Options};
use pages::{DataFiles, ReadPages, TxnPages};
use parking_lot::{Mutex, RwLock};
use record::Alloc;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Root of the table catalog.
const CATALOG_ROOT: PageId = PageId(1);
/// Root of the default table.
const DEFAULT_ROOT: PageId = PageId(2);
/// The overlay's id for the catalog (tables are identified by their root page).
const CATALOG_TABLE: TableId = CATALOG_ROOT.0;
/// Longest table name.
const TABLE_NAME_BYTES_MAX: usize = 255;
/// Write-back passes a checkpoint makes over pages dirtied before its start; pages changed
/// again meanwhile keep their redo point, so more passes only move the checkpoint later.
const CHECKPOINT_PASSES: usize = 4;
/// Entries a scan reads from the tree per hold of the tree lock.
const SCAN_BATCH: usize = 256;

/// An open database. Cheap to share: clone it, or wrap it in an `Arc`.
#[derive(Clone)]
pub struct Db {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Db({})", self.inner.dir.display())
    }
}

struct Inner {
    dir: PathBuf,
    options: Options,
    wal: Arc<Wal>,
    pool: Arc<BufferPool>,
    data_path: PathBuf,
    /// The writer lock: one read-write transaction at a time. Holds the allocator state.
    writer: Mutex<Alloc>,
    /// Readers hold it shared while they read pages; a commit holds it exclusively while it
    /// changes them, so no reader sees a page half way through a split.
    tree_lock: RwLock<()>,
    reads: Mutex<Reads>,
    header: Mutex<HeaderFile>,
    /// Held by the running checkpoint: one at a time.
    checkpointing: Mutex<()>,
    /// Shared with the background writer, which sets it when a write-back fails.
    poisoned: Arc<AtomicBool>,
    writeback: Mutex<writeback::WriteBack>,
    checkpoint_end: AtomicU64,
}

struct Reads {
    visibility: Visibility,
    overlay: Overlay,
    /// Snapshots of open read transactions, with counts.
    snapshots: BTreeMap<u64, usize>,
}

impl Db {
    /// Opens the database in `dir`, creating it when missing, on the real file system.
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<Db> {
        Db::open_with_storage(Arc::new(FileStorage::new()), dir.as_ref(), options)
    }

    /// Opens the database in `dir` on any storage (the simulated disk in tests).
    #[expect(
        clippy::needless_pass_by_value,
        reason = "callers hand the storage over; the log keeps its own clone"
    )]
    pub fn open_with_storage(
        storage: Arc<dyn Storage>,
        dir: &Path,
        options: Options,
    ) -> Result<Db> {
        options.validate()?;
        storage.create_dir_all(dir)?;
        let header_path = dir.join(crate::header::HEADER_FILE_NAME);
        let existing = if storage.exists(&header_path)? {
            let method = options
                .flush_method
                .unwrap_or(crate::FlushMethod::Fdatasync);
            HeaderFile::open(&*storage, dir, method)?
        } else {
            None
        };
        match existing {
            Some((file, header)) => open_existing(&storage, dir, options, file, header),
            None => create(&storage, dir, options),
        }
    }

    /// Starts a read-write transaction, waiting while another one is open.
    pub fn begin(&self) -> Result<Txn<'_>> {
        self.check_poison()?;
        Ok(Txn::new(self, self.inner.writer.lock()))
    }

    /// Starts a read-only transaction: every read sees the same acknowledged state.
    pub fn begin_read(&self) -> Result<ReadTxn<'_>> {
        self.check_poison()?;
        Ok(ReadTxn::new(self, self.snapshot_register()))
    }

    /// The latest acknowledged value of `key` in the default table.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_in("", key)
    }

    /// The latest acknowledged value of `key` in table `table` (`""` is the default table).
    pub fn get_in(&self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check_poison()?;
        let snapshot = self.visible_lsn();
        match self.table_root(table, snapshot)? {
            Some(root) => self.read_at(root, key, snapshot),
            None => Ok(None),
        }
    }

    /// The names of the named tables that exist, in order.
    pub fn tables(&self) -> Result<Vec<String>> {
        self.check_poison()?;
        let snapshot = self.snapshot_register();
        let result = self.scan_at(
            CATALOG_ROOT,
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
            snapshot,
        );
        self.snapshot_release(snapshot);
        Ok(result?
            .into_iter()
            .map(|(name, _)| String::from_utf8_lossy(&name).into_owned())
            .collect())
    }

    /// The root of `table` as a reader at `snapshot` sees the catalog; `None` if it does not
    /// exist for that reader.
    fn table_root(&self, table: &str, snapshot: u64) -> Result<Option<PageId>> {
        if table.is_empty() {
            return Ok(Some(DEFAULT_ROOT));
        }
        let Some(value) = self.read_at(CATALOG_ROOT, table.as_bytes(), snapshot)? else {
            return Ok(None);
        };
        catalog_root_of(&value, &self.inner.data_path).map(Some)
    }

    /// The acknowledged entries between `lower` and `upper`, in `direction`.
    pub fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.scan_in("", lower, upper, direction)
    }

    /// The acknowledged entries of `table` between `lower` and `upper`, in `direction`.
    pub fn scan_in(
        &self,
        table: &str,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.check_poison()?;
        let snapshot = self.snapshot_register();
        let result = match self.table_root(table, snapshot) {
            Ok(Some(root)) => self.scan_at(root, lower, upper, direction, snapshot),
            Ok(None) => Ok(Vec::new()),
            Err(e) => Err(e),
        };
        self.snapshot_release(snapshot);
        result
    }

    /// Writes every change so far to the data file and moves the log's start past them.
    pub fn checkpoint(&self) -> Result<()> {
        self.check_poison()?;
        self.fuzzy_checkpoint()
    }

    /// Checkpoints and closes the log. Dropping the last handle does the same, ignoring errors.
    pub fn close(self) -> Result<()> {
        self.checkpoint()
    }

    /// Statistics: the log's and the buffer pool's counters.
    #[must_use]
    pub fn stats(&self) -> (crate::wal::WalStats, crate::page::PoolStats) {
        (self.inner.wal.stats(), self.inner.pool.stats())
    }

    /// Checks the default table's tree (order, links, page kinds) and returns its statistics.
    /// Every table's tree and the catalog are checked; the default table's stats are returned.
    pub fn check(&self) -> Result<crate::btree::TreeStats> {
        let tables = self.check_tables()?;
        Ok(tables
            .into_iter()
            .find(|(name, _)| name.is_empty())
            .expect("the default table")
            .1)
    }

    /// Checks the catalog and every table's tree (key order, separators, leaf links, page
    /// kinds, overflow chains); returns each table's statistics, the default table as `""`.
    pub fn check_tables(&self) -> Result<Vec<(String, crate::btree::TreeStats)>> {
        let _shared = self.inner.tree_lock.read();
        let pages = self.read_pages();
        Tree::open(CATALOG_ROOT).check(&pages)?;
        let entries: Vec<(Vec<u8>, Vec<u8>)> = Tree::open(CATALOG_ROOT)
            .scan(
                &pages,
                Bound::Unbounded,
                Bound::Unbounded,
                Direction::Forward,
            )
            .collect::<Result<_>>()?;
        let mut stats = vec![(String::new(), Tree::open(DEFAULT_ROOT).check(&pages)?)];
        for (name, value) in entries {
            let root = catalog_root_of(&value, &self.inner.data_path)?;
            stats.push((
                String::from_utf8_lossy(&name).into_owned(),
                Tree::open(root).check(&pages)?,
            ));
        }
        Ok(stats)
    }

    /// Accounts for every page of the data file: each page in `1..page_count` must belong to
    /// exactly one tree (the catalog or a table, overflow pages included) or be on the free
    /// list. Checks every tree as [`Db::check_tables`] does. Holds the writer lock, so the
    /// allocator state and the trees agree; commits wait until it returns.
    pub fn check_space(&self) -> Result<SpaceCheck> {
        let alloc = self.inner.writer.lock();
        let _shared = self.inner.tree_lock.read();
        Db::check_space_of(&self.read_pages(), alloc.page_count, alloc.free_head)
    }

    /// [`Db::check_space`] over any pages, for tools that read a data file without recovering
    /// it (`till stats`): `page_count` and `free_head` are the allocator state the pages
    /// were written with (a header's, when no log record follows its checkpoint).
    ///
    /// A tree or free-list page that does not validate, and a free list reaching past
    /// `page_count` or into a page that is not free, are [`Error::Corruption`]. Pages owned
    /// twice or by no one are listed in the result, with the owners' names.
    pub fn check_space_of<P: Pages>(
        pages: &P,
        page_count: u64,
        free_head: PageId,
    ) -> Result<SpaceCheck> {
        let mut owners: HashMap<PageId, String> = HashMap::new();
        let mut space = SpaceCheck {
            page_count,
            ..SpaceCheck::default()
        };
        let catalog = own_tree(pages, CATALOG_ROOT, "the catalog", &mut owners, &mut space)?;
        space.catalog_pages = catalog.pages();
        let mut tables = vec![(String::new(), DEFAULT_ROOT)];
        for entry in Tree::open(CATALOG_ROOT).scan(
            pages,
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
        ) {
            let (name, value) = entry?;
            let name = String::from_utf8_lossy(&name).into_owned();
            tables.push((name, catalog_root_of(&value, pages.path())?));
        }
        for (name, root) in tables {
            let owner = if name.is_empty() {
                "the default table".to_string()
            } else {
                format!("table {name:?}")
            };
            let stats = own_tree(pages, root, &owner, &mut owners, &mut space)?;
            space.tables.push((name, stats));
        }
        // The free list: each free page's body starts with the next one's id (written by
        // `TxnPages::free`), 0 at the end. A cycle meets a page it owns already, so the walk
        // takes at most `page_count` steps.
        let mut next = free_head;
        while next.0 != 0 {
            if next.0 >= page_count {
                return Err(corrupt_page(
                    pages,
                    next,
                    "free list reaches past the allocated pages",
                ));
            }
            if let Some(first) = owners.get(&next) {
                space
                    .doubly_used
                    .push((next, first.clone(), "the free list".to_string()));
                break;
            }
            owners.insert(next, "the free list".to_string());
            let page = pages.read(next)?;
            if page.kind() != crate::page::PageKind::Free {
                return Err(corrupt_page(
                    pages,
                    next,
                    "free list reaches a page that is not free",
                ));
            }
            space.free_pages += 1;
            next = PageId(u64::from_le_bytes(
                page.body()[..8].try_into().expect("8 bytes"),
            ));
            assert!(space.free_pages < page_count, "free list walk is bounded");
        }
        if let Some(past) = owners.keys().filter(|id| id.0 >= page_count).min() {
            return Err(corrupt_page(
                pages,
                *past,
                "page in use past the allocated pages",
            ));
        }
        space.leaked = (1..page_count)
            .map(PageId)
            .filter(|id| !owners.contains_key(id))
            .collect();
        Ok(space)
    }

    /// Decodes the payload of a commit record (a `Data` record of the log; format in
    /// `db/record.rs`), for tools that show the log (`till dump-log`). `Err` says what is
    /// wrong with the bytes.
    pub fn decode_commit_record(
        payload: &[u8],
    ) -> std::result::Result<record::Commit, &'static str> {
        record::decode(payload)
    }

    fn check_poison(&self) -> Result<()> {
        if self.inner.poisoned.load(Ordering::Acquire) {
            Err(Error::Poisoned)
        } else {
            Ok(())
        }
    }

    fn poison(&self, error: Error) -> Error {
        self.inner.poisoned.store(true, Ordering::Release);
        error
    }

    fn read_pages(&self) -> ReadPages<'_> {
        ReadPages {
            pool: &self.inner.pool,
            path: &self.inner.data_path,
        }
    }

    /// Moves the visible lsn over commits acknowledged since, and prunes the overlay.
    fn visible_lsn(&self) -> u64 {
        // One read of both marks: two reads could see durable pass the written mark read first.
        let (written, durable) = self.inner.wal.written_and_durable();
        let (written, durable) = (written.0, durable.0);
        let mut reads = self.inner.reads.lock();
        let visible = reads.visibility.advance(written, durable);
        let horizon = reads
            .snapshots
            .keys()
            .next()
            .map_or(visible, |&s| s.min(visible));
        reads.overlay.prune(horizon);
        visible
    }

    fn snapshot_register(&self) -> u64 {
        let snapshot = self.visible_lsn();
        *self
            .inner
            .reads
            .lock()
            .snapshots
            .entry(snapshot)
            .or_default() += 1;
        snapshot
    }

    fn snapshot_release(&self, snapshot: u64) {
        let mut reads = self.inner.reads.lock();
        let count = reads
            .snapshots
            .get_mut(&snapshot)
            .expect("registered snapshot");
        *count -= 1;
        if *count == 0 {
            reads.snapshots.remove(&snapshot);
        }
    }

    /// `key` as a reader at `snapshot` sees it. The tree is read first and the overlay after:
    /// a commit records the overlay entry before it changes the page, so a change seen in the
    /// tree always has its entry by the time the overlay is asked.
    fn read_at(&self, root: PageId, key: &[u8], snapshot: u64) -> Result<Option<Vec<u8>>> {
        let tree_value = {
            let _shared = self.inner.tree_lock.read();
            Tree::open(root).get(&self.read_pages(), key)?
        };
        Ok(
            match self.inner.reads.lock().overlay.seen(root.0, key, snapshot) {
                Seen::Tree => tree_value,
                Seen::Value(v) => v,
            },
        )
    }

    fn scan_at(
        &self,
        root: PageId,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
        snapshot: u64,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let (mut lower, mut upper) = (lower.map(<[u8]>::to_vec), upper.map(<[u8]>::to_vec));
        let mut out = Vec::new();
        loop {
            // One batch from the tree, under the shared lock.
            let batch: Vec<(Vec<u8>, Vec<u8>)> = {
                let _shared = self.inner.tree_lock.read();
                let pages = self.read_pages();
                let cursor =
                    Tree::open(root).scan(&pages, as_ref(&lower), as_ref(&upper), direction);
                cursor.take(SCAN_BATCH).collect::<Result<_>>()?
            };
            let done = batch.len() < SCAN_BATCH;
            // The window this batch covers, then the overlay's view of it.
            let (window_lower, window_upper) = match (direction, batch.last(), done) {
                (_, _, true) | (_, None, _) => (lower.clone(), upper.clone()),
                (Direction::Forward, Some((k, _)), false) => {
                    (lower.clone(), Bound::Included(k.clone()))
                }
                (Direction::Backward, Some((k, _)), false) => {
                    (Bound::Included(k.clone()), upper.clone())
                }
            };
            let mut merged: BTreeMap<Vec<u8>, Vec<u8>> = batch.into_iter().collect();
            {
                let reads = self.inner.reads.lock();
                for key in
                    reads
                        .overlay
                        .keys_in(root.0, as_ref(&window_lower), as_ref(&window_upper))
                {
                    match reads.overlay.seen(root.0, key, snapshot) {
                        Seen::Tree => {}
                        Seen::Value(None) => {
                            merged.remove(key);
                        }
                        Seen::Value(Some(v)) => {
                            merged.insert(key.to_vec(), v);
                        }
                    }
                }
            }
            match direction {
                Direction::Forward => out.extend(merged),
                Direction::Backward => out.extend(merged.into_iter().rev()),
            }
            if done {
                return Ok(out);
            }
            match direction {
                Direction::Forward => lower = excluded_after(&window_upper),
                Direction::Backward => upper = excluded_after(&window_lower),
            }
        }
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
    /// A page changed again during step 2 stays dirty with its old redo point, which only
    /// moves the checkpoint earlier: never past a change that is on no disk.
    fn fuzzy_checkpoint(&self) -> Result<()> {
        let inner = &self.inner;
        let _one_at_a_time = inner.checkpointing.lock();
        let (end, alloc) = {
            let alloc = inner.writer.lock();
            (inner.wal.end_lsn(), *alloc)
        };
        for _ in 0..CHECKPOINT_PASSES {
            if inner.pool.flush_dirty_before(end.0, 256)? == 0 {
                break;
            }
        }
        let redo = inner.pool.min_rec_lsn().map_or(end.0, |r| r.min(end.0));
        let mut header_file = inner.header.lock();
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
        header_file.write(&header)?;
        drop(header_file);
        inner.wal.release_before(Lsn(redo));
        inner.checkpoint_end.store(end.0, Ordering::Release);
        Ok(())
    }

    /// Runs a checkpoint when enough log was written since the last one, unless one is
    /// running. Requires: the caller holds no writer lock.
    fn maybe_checkpoint(&self) -> Result<()> {
        let since = self.inner.wal.end_lsn().0 - self.inner.checkpoint_end.load(Ordering::Acquire);
        if since >= self.inner.options.checkpoint_log_bytes && !self.inner.checkpointing.is_locked()
        {
            self.fuzzy_checkpoint()?;
        }
        Ok(())
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Join the writer first: nothing may write these files once the handle is gone.
        self.writeback.lock().stop();
        if !self.poisoned.load(Ordering::Acquire) {
            // Best effort: a clean shutdown shortens the next recovery.
            let end = self.wal.end_lsn();
            if self.wal.sync().is_ok() && self.pool.flush_all().is_ok() {
                let alloc = *self.writer.lock();
                let mut header_file = self.header.lock();
                let (_, newest) = header_file.newest();
                let header = Header {
                    checkpoint_lsn: end,
                    free_head: alloc.free_head,
                    page_count: alloc.page_count,
                    ..newest
                };
                let _ = header_file.write(&header);
            }
        }
    }
}

/// What [`Db::check_space`] found: every tree and where every page of the data file belongs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpaceCheck {
    /// Every table's tree, the default table as `""`, in catalog order.
    pub tables: Vec<(String, crate::btree::TreeStats)>,
    /// Pages of the catalog's tree.
    pub catalog_pages: u64,
    /// Pages the allocator has handed out, page 0 (never used) included.
    pub page_count: u64,
    /// Pages on the free list.
    pub free_pages: u64,
    /// Pages in no tree and not on the free list: lost to the allocator for good.
    pub leaked: Vec<PageId>,
    /// Pages with two owners (two trees, a tree and the free list, the free list twice),
    /// with both owners' names: a write through one destroys the other's data.
    pub doubly_used: Vec<(PageId, String, String)>,
}

impl SpaceCheck {
    /// Pages in trees, the catalog's included.
    #[must_use]
    pub fn tree_pages(&self) -> u64 {
        self.catalog_pages + self.tables.iter().map(|(_, t)| t.pages()).sum::<u64>()
    }

    /// True when every page is accounted for exactly once.
    #[must_use]
    pub fn is_clean(&self) -> bool {
        self.leaked.is_empty() && self.doubly_used.is_empty()
    }
}

/// A view of `pages` that notes every page read: a tree check reads exactly its tree's pages.
struct Recording<'p, P> {
    pages: &'p P,
    read: RefCell<Vec<PageId>>,
}

impl<P: Pages> Pages for Recording<'_, P> {
    type Read<'b>
        = P::Read<'b>
    where
        Self: 'b;

    fn page_bytes(&self) -> u32 {
        self.pages.page_bytes()
    }

    fn read(&self, id: PageId) -> Result<Self::Read<'_>> {
        self.read.borrow_mut().push(id);
        self.pages.read(id)
    }

    fn apply(&self, op: &PageOp) -> Result<()> {
        panic!("a space check tried to change {}", op.page());
    }

    fn allocate(&self, _kind: crate::page::PageKind) -> Result<PageId> {
        panic!("a space check tried to allocate a page");
    }

    fn free(&self, id: PageId) -> Result<()> {
        panic!("a space check tried to free {id}");
    }

    fn path(&self) -> &Path {
        self.pages.path()
    }
}

/// Checks the tree at `root` and records `owner` for each of its pages; a page another owner
/// holds already goes to `space.doubly_used`.
fn own_tree<P: Pages>(
    pages: &P,
    root: PageId,
    owner: &str,
    owners: &mut HashMap<PageId, String>,
    space: &mut SpaceCheck,
) -> Result<crate::btree::TreeStats> {
    let recording = Recording {
        pages,
        read: RefCell::new(Vec::new()),
    };
    let stats = Tree::open(root).check(&recording)?;
    let mut read = recording.read.into_inner();
    read.sort_unstable();
    read.dedup();
    assert_eq!(
        read.len() as u64,
        stats.pages(),
        "a tree check reads each page of its tree once"
    );
    for id in read {
        if let Some(first) = owners.get(&id) {
            space
                .doubly_used
                .push((id, first.clone(), owner.to_string()));
        } else {
            owners.insert(id, owner.to_string());
        }
    }
    Ok(stats)
}

/// The error for bad bytes found on (or a bad reference to) page `id`.
fn corrupt_page<P: Pages>(pages: &P, id: PageId, what: &'static str) -> Error {
    Error::Corruption {
        file: pages.path().to_path_buf(),
        // Not `PageId::offset`: a corrupt id may be huge.
        offset: id.0.saturating_mul(u64::from(pages.page_bytes())),
        what,
    }
}

/// The root page a catalog entry names.
fn catalog_root_of(value: &[u8], data_path: &Path) -> Result<PageId> {
    let bytes: [u8; 8] = value.try_into().map_err(|_| Error::Corruption {
        file: data_path.to_path_buf(),
        offset: CATALOG_ROOT.offset(4096),
        what: "table catalog entry is not a page id",
    })?;
    Ok(PageId(u64::from_le_bytes(bytes)))
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// The bound that continues a scan past a window's inclusive edge.
fn excluded_after(edge: &Bound<Vec<u8>>) -> Bound<Vec<u8>> {
    match edge {
        Bound::Included(k) => Bound::Excluded(k.clone()),
        other => other.clone(),
    }
}

/// Creates a new database: files, a probed flush method, the catalog and default table in a
/// first commit, then the header (last, so a database without a header was never used).
fn create(storage: &Arc<dyn Storage>, dir: &Path, options: Options) -> Result<Db> {
    remove_interrupted_create(&**storage, dir)?;
    let facts = storage.device_facts(dir)?;
    let method = if let Some(m) = options.flush_method {
        m
    } else {
        let block = IoGeometry::default_log_block_bytes(&facts);
        choose_flush_method(&**storage, dir, &facts, block, Duration::from_millis(60))?.0
    };
    IoGeometry::resolve(
        &facts,
        method,
        options.wal.log_block_bytes,
        options.page_bytes,
    )?;
    let store = PageStore::create(&**storage, dir, method, options.page_bytes)?;
    let guard = PageGuard::create(
        options.torn_page_guard,
        &**storage,
        dir,
        method,
        options.page_bytes,
    )?;
    let wal_options = crate::wal::WalOptions {
        flush_method: method,
        ..options.wal.clone()
    };
    let (wal, _) = Wal::open(Arc::clone(storage), &dir.join("wal"), wal_options)?;
    let wal = Arc::new(wal);
    let pool = BufferPool::new(
        options.page_bytes,
        options.cache_bytes,
        Box::new(DataFiles {
            wal: Arc::clone(&wal),
            files: Mutex::new(pages::Files::new(store, guard)),
        }),
    );
    let data_path = dir.join(DATA_FILE_NAME);
    let first = Alloc {
        page_count: 1,
        free_head: PageId(0),
    };
    let alloc = {
        let pages = TxnPages::new(&pool, &data_path, first);
        assert_eq!(Tree::create(&pages)?.root(), CATALOG_ROOT);
        assert_eq!(Tree::create(&pages)?.root(), DEFAULT_ROOT);
        let (ops, alloc, touched) = pages.finish();
        let before = wal.end_lsn();
        let lsn = wal.commit(&record::encode(alloc, &ops), Durability::Sync)?;
        pool.stamp(&touched, lsn.0, before.0);
        pool.flush_all()?;
        alloc
    };
    let header = Header {
        page_bytes: options.page_bytes,
        flush_method: method,
        torn_page_guard: options.torn_page_guard,
        generation: 0,
        checkpoint_lsn: wal.end_lsn(),
        catalog_root: CATALOG_ROOT,
        free_head: alloc.free_head,
        page_count: alloc.page_count,
    };
    let (header_file, header) = HeaderFile::create(&**storage, dir, method, &header)?;
    assemble(
        dir,
        options,
        wal,
        pool,
        header_file,
        alloc,
        header.checkpoint_lsn,
    )
}

/// A crash during `create` leaves files but no header: nothing in them was ever acknowledged.
fn remove_interrupted_create(storage: &dyn Storage, dir: &Path) -> Result<()> {
    for name in [
        DATA_FILE_NAME,
        DOUBLEWRITE_FILE_NAME,
        crate::header::HEADER_TEMP_FILE_NAME,
    ] {
        let path = dir.join(name);
        if storage.exists(&path)? {
            storage.remove(&path)?;
        }
    }
    let wal_dir = dir.join("wal");
    if storage.exists(&wal_dir)? {
        for name in storage.list_dir(&wal_dir)? {
            storage.remove(&wal_dir.join(name))?;
        }
    }
    storage.flush_dir(dir)
}

/// Opens an existing database: restore torn pages, recover the log, redo from the
/// checkpoint, open for business.
fn open_existing(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    options: Options,
    header_file: HeaderFile,
    header: Header,
) -> Result<Db> {
    let method = header.flush_method;
    let facts = storage.device_facts(dir)?;
    IoGeometry::resolve(
        &facts,
        method,
        options.wal.log_block_bytes,
        header.page_bytes,
    )?;
    let mut store = PageStore::open(&**storage, dir, method, header.page_bytes)?;
    let guard = PageGuard::open(
        header.torn_page_guard,
        &**storage,
        dir,
        method,
        header.page_bytes,
    )?;
    guard.restore_torn_pages(&mut store)?;
    let wal_options = crate::wal::WalOptions {
        flush_method: method,
        ..options.wal.clone()
    };
    let (wal, _recovery) = Wal::open_from(
        Arc::clone(storage),
        &dir.join("wal"),
        wal_options,
        Some(header.checkpoint_lsn),
    )?;
    let wal = Arc::new(wal);
    // Segments wholly before the checkpoint are not needed: free them for recycling now, or
    // every open would add a segment.
    wal.release_before(header.checkpoint_lsn);
    let options = Options {
        page_bytes: header.page_bytes,
        flush_method: Some(method),
        torn_page_guard: header.torn_page_guard,
        ..options
    };
    let pool = BufferPool::new(
        header.page_bytes,
        options.cache_bytes,
        Box::new(DataFiles {
            wal: Arc::clone(&wal),
            files: Mutex::new(pages::Files::new(store, guard)),
        }),
    );
    let mut alloc = Alloc {
        page_count: header.page_count,
        free_head: header.free_head,
    };
    for rec in wal.read_from(header.checkpoint_lsn)? {
        let commit = record::decode(&rec.payload).map_err(|what| Error::Corruption {
            file: dir.join("wal"),
            offset: rec.lsn.0,
            what,
        })?;
        let mut touched = Vec::new();
        for op in &commit.ops {
            redo_op(&pool, op, rec.end_lsn.0, &mut touched)?;
        }
        touched.sort_unstable();
        touched.dedup();
        pool.stamp(&touched, rec.end_lsn.0, rec.lsn.0);
        alloc = commit.alloc;
    }
    assemble(
        dir,
        options,
        wal,
        pool,
        header_file,
        alloc,
        header.checkpoint_lsn,
    )
}

/// Replays one page operation of the record ending at `lsn`, unless the page has it already.
///
/// An operation that rewrites the whole page (`Format`, `Image`) needs nothing of the page's
/// old bytes, so it rebuilds a page whose place holds garbage: a page allocated in memory is
/// first written (and the file extended for it) only at write-back, and a crash can cut that
/// extension after the allocation is durable in the log. Any other operation on an unreadable
/// page is corruption.
fn redo_op(pool: &BufferPool, op: &PageOp, lsn: u64, touched: &mut Vec<PageId>) -> Result<()> {
    let page_lsn = match pool.read(op.page()) {
        Ok(page) => page.lsn(),
        Err(Error::Corruption { .. }) if op.rewrites_whole_page() => {
            drop(pool.create(op.page(), crate::page::PageKind::Free)?);
            0
        }
        Err(e) => return Err(e),
    };
    if page_lsn < lsn {
        let mut page = pool.write(op.page())?;
        op.apply_to(&mut page);
        touched.push(op.page());
    }
    Ok(())
}

fn assemble(
    dir: &Path,
    options: Options,
    wal: Arc<Wal>,
    pool: BufferPool,
    header: HeaderFile,
    alloc: Alloc,
    checkpoint: Lsn,
) -> Result<Db> {
    let visible = wal.end_lsn().0;
    let pool = Arc::new(pool);
    let poisoned = Arc::new(AtomicBool::new(false));
    let writeback = writeback::WriteBack::start(Arc::clone(&pool), Arc::clone(&poisoned)).map_err(
        |source| Error::Io {
            op: crate::IoOp::Create,
            path: dir.to_path_buf(),
            source,
        },
    )?;
    Ok(Db {
        inner: Arc::new(Inner {
            dir: dir.to_path_buf(),
            data_path: dir.join(DATA_FILE_NAME),
            options,
            wal,
            pool,
            writer: Mutex::new(alloc),
            tree_lock: RwLock::new(()),
            reads: Mutex::new(Reads {
                visibility: Visibility::new(visible),
                overlay: Overlay::default(),
                snapshots: BTreeMap::new(),
            }),
            header: Mutex::new(header),
            checkpointing: Mutex::new(()),
            poisoned,
            writeback: Mutex::new(writeback),
            checkpoint_end: AtomicU64::new(checkpoint.0),
        }),
    })
}
