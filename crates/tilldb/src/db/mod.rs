//! [`Db`]: an embedded transactional key-value store on the log, the buffer pool and the
//! B+tree. See ARCHITECTURE.md, "The store", for the decisions this follows.
//!
//! A database directory holds `tilldb.meta` (header slots), `data.tdb` (pages), `ledger.tdb`
//! (the newest lsn written per page, for lost-write detection), `doublewrite.tdb` (the
//! torn-page guard), `wal/` (the log) and `tilldb.lock` (the one-process lock, `claim.rs`).
//! Page 1 is the root of the
//! table catalog (name -> root page id, 8 bytes LE) and page 2 the root of the default table
//! (name `""`). A named table is created by the first commit that writes to it; readers find
//! it through the catalog at their snapshot, so it appears to them when that commit does. A
//! dropped table's entry moves to a graveyard key (0xFF + root) until its pages are reclaimed
//! (`drop.rs`).
//!
//! Write path: a transaction takes the writer lock at its first read, or at commit through
//! the commit queue if it only wrote (`commit/`, whose leader applies the queued commits
//! under one hold of the lock); a commit records the values readers must still see in the
//! overlay, applies the write set to the tree (pages become unlogged), appends one commit
//! record, stamps the pages with its lsn, releases the lock, then waits for the durability
//! level. With the write buffer on (`Options::write_buffer_bytes`), a small commit instead
//! appends one record of its writes and adds them to the buffer, which a later drain applies
//! to the tree (at its threshold, or on the checkpoint thread once the writer is idle:
//! `checkpoint/thread.rs`), and a commit of many keys above all others (an append) goes through the tree
//! without draining it (`commit/buffer.rs`). Readers read at the visible lsn (see
//! `txn::visibility`).
//!
//! # Full-page images
//!
//! With [`TornPageGuard::FullPageImages`](crate::page::TornPageGuard) a commit logs a page
//! whole instead of its changes, when the page's lsn is at or below the *image horizon* `h`:
//! the log end when the latest checkpoint began (or the checkpoint recovery started from, at
//! open). A page's lsn is the *end* of the record that last changed it, so a record that
//! began before `h` leaves an lsn of at most `h` (exactly `h` when no padding followed it),
//! and one that began at or after `h` leaves more. The image is of the page as the record
//! (the commit, or its part) leaves it, taken when the record is cut (`pages.rs`), so it
//! holds every change the record makes to the page; changes in the commit's later parts are
//! logged as ops.
//!
//! Why recovery can then rebuild every torn page: a checkpoint of this guard writes the header
//! only when it made every page changed before its start durable, so its redo point is
//! exactly its `h` (otherwise it leaves the previous header in force). A page can only be torn
//! by a write of changes made at or after the `h` of the header in force (older changes were
//! durable before that header was), and the first such change of every page found a page lsn
//! of at most `h`, so it was logged whole, at an lsn recovery replays. Redo rebuilds a page it
//! cannot read from a whole-page op (`open/replay.rs`, `redo_op`).
//!
//! # Rooms: who owns which state
//!
//! [`Inner`] is the state of one open database. Each part has one owner, the room (file or
//! folder) that changes it; other rooms read it through that room's methods, or take the lock
//! named in the type. Lock order, outermost first: `writer`, `tree_lock`, then any room's own
//! mutex; `checkpoints`' running guard before the writer lock.
//!
//! | state (`Inner` field) | owner | guarded by | others use it through |
//! |---|---|---|---|
//! | `dir`, `storage`, `options`, `data_path`, `recovery`, `_lock` | `open/` (recovery) | set at open, never changed | the fields, read only |
//! | `wal`, `pool` | `wal/`, `page/` (below `db/`) | their own locks | their public methods |
//! | `writer` (the allocator) | `locks.rs` | its mutex: the writer lock | `locks::Writer`, a guard |
//! | `tree_lock` | `locks.rs` | itself (shared: readers; exclusive: a commit changing pages) | `TreeHeld` / `TreeExclusive` guards |
//! | `commits` (the commit queue) | `commit/queue.rs` | its mutex | `commit::commit_queued` |
//! | `spill_to` | `write_set/spill.rs` | its atomics | `WriteSet::spilling` (`txn/mod.rs`) |
//! | `visible` (visible lsn, snapshots, overlay, write buffer) | `visible.rs` | its `reads` mutex, the buffer's own lock; three published atomics | `Visible`'s methods |
//! | `write_buffer_bytes` (where the write buffer drains; 0: off) | `commit/buffer.rs` | an atomic, set before commits use it | `Db::set_write_buffer_bytes` (tests) |
//! | `checkpoints` (header file and the key that wraps its data key, running checkpoint, its thread, whether that thread watches the write buffer, background writer, marks) | `checkpoint/` | its mutexes; marks only move forward | `Checkpoints`' methods (`rotate.rs` rotates the key) |
//! | `graveyard` (dropped tables not reclaimed) | `drop.rs` | its mutex, changed under the writer lock | `Db::reclaim_dropped`, `commit::bury` |
//! | `counters` | `stats.rs` | atomics | `Counters`' methods |
//! | `poisoned` | `poison.rs` | itself (set once, never cleared) | `Db::check_poison`, `Db::poison` |
//! | `handles` | `mod.rs` (`Clone`/`Drop` of `Db`) | an atomic | none |
//! | `feed` | `feed/writer.rs` | its own locks | `FeedWriter`'s methods |
//! | `gate` (readers in other processes) | `readers.rs` | its own locks | `ReaderGate`'s methods |
//! | `read_only` | `open/read_only.rs` | `&mut Db` (a refresh) | none |
//!
//! The other files hold behaviour, not state: `txn/` the transactions, `reads.rs` point
//! reads and scans, `range.rs` lazy ranges, `pages.rs` the transactions' views of the pages,
//! `counts.rs` table lengths, `space.rs` free-space accounting, `check.rs` the tree checks,
//! `invariants.rs` the in-memory invariants, `backup.rs`, `compact.rs`, `claim.rs` the
//! one-process lock, `writeback.rs` the background writer, `checkpoint/thread.rs` the
//! checkpoint thread.

mod backup;
mod check;
mod checkpoint;
mod claim;
mod commit;
mod compact;
mod counts;
mod drop;
mod invariants;
mod locks;
mod open;

pub(crate) use open::database_keys;
mod pages;
mod poison;
mod range;
mod readers;
mod reads;
mod rotate;
mod space;
mod stats;
mod txn;
mod visible;
mod write_set;
mod writeback;

pub use backup::BackupReport;
pub use claim::{LOCK_FILE_NAME, is_database_file_name};
pub use compact::CompactReport;
pub use open::RecoveryReport;
pub use range::Range;
pub use space::{LEAKED_LISTED_MAX, SpaceCheck};
pub use stats::Stats;
pub use txn::{ReadTxn, Txn, TxnRange};

pub(crate) use poison::Poison;
use stats::Counters;

use crate::Options;
use crate::btree::{Direction, Tree};
use crate::error::{Error, Result};
use crate::header::Header;
use crate::io::Storage;
use crate::page::{BufferPool, PageId};
use crate::record;
use crate::txn::{Seen, TableId};
use crate::wal::{Lsn, Wal};
use pages::ReadPages;
use parking_lot::Mutex;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Root of the table catalog.
const CATALOG_ROOT: PageId = PageId(1);
/// Root of the default table.
const DEFAULT_ROOT: PageId = PageId(2);
/// The overlay's id for the catalog (tables are identified by their root page).
const CATALOG_TABLE: TableId = CATALOG_ROOT.0;
/// Longest table name.
const TABLE_NAME_BYTES_MAX: usize = 255;
/// Log written since the running checkpoint began, in checkpoint distances, past which
/// committers wait for it (backpressure): with checkpoints due every `checkpoint_log_bytes`,
/// the log from the redo point stays below about this many distances plus one more while the
/// waiting checkpoint ends.
const BACKPRESSURE_CHECKPOINTS: u64 = 2;

/// Pages a checkpoint writes back per batch (it writes every page dirtied before its start,
/// batch after batch).
const CHECKPOINT_BATCH_PAGES: usize = 256;
/// Entries a scan reads from the tree per hold of the tree lock.
const SCAN_BATCH: usize = 256;

/// An open database. Cheap to share: clone it, or wrap it in an `Arc`.
pub struct Db {
    inner: Arc<Inner>,
    /// A handle the application holds (counted in `Inner::handles`), not the checkpoint
    /// thread's own reference (`checkpoint/thread.rs`).
    counted: bool,
}

impl Clone for Db {
    fn clone(&self) -> Self {
        self.inner.handles.fetch_add(1, Ordering::AcqRel);
        Db {
            inner: Arc::clone(&self.inner),
            counted: true,
        }
    }
}

impl Drop for Db {
    /// The last handle drains the write buffer, as `close` does before its checkpoint, so
    /// that the close writes the header and trims the log (best effort: a failed drain
    /// poisons the database, and the next open replays the buffered records), then stops
    /// the checkpoint thread and waits for it, so the database is closed (its lock released)
    /// when the drop returns, as without the thread. A drop while the thread panics drains
    /// nothing: the next open replays the buffered records.
    fn drop(&mut self) {
        if self.counted && self.inner.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            if !std::thread::panicking() && !self.is_read_only() && self.check_poison().is_ok() {
                let _ = commit::drain_in_chunks(self, commit::IDLE_CHUNK_BYTES);
            }
            self.inner.checkpoints.stop_thread();
        }
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Db({})", self.inner.dir.display())
    }
}

/// The state of one open database, by owner (see "Rooms" above). Fields drop in this order,
/// after `Drop for Inner` (`checkpoint.rs`) has stopped the threads and closed.
struct Inner {
    // Set at open (`open/`), never changed.
    dir: PathBuf,
    /// The storage every file of the database is on.
    storage: Arc<dyn Storage>,
    options: Options,
    data_path: PathBuf,
    /// What opening the database did.
    recovery: RecoveryReport,
    // The layers below `db/`.
    wal: Arc<Wal>,
    pool: Arc<BufferPool>,
    /// The writer lock: one read-write transaction at a time. Holds the allocator state
    /// (`locks.rs`: functions that need it take its guard, `locks::Writer`).
    writer: locks::WriterLock,
    /// Readers hold it shared while they read pages; a commit holds it exclusively while it
    /// changes them, so no reader sees a page half way through a split (`locks.rs`).
    tree_lock: locks::TreeLock,
    // The commit path.
    /// Commits of transactions that only wrote, waiting for the writer lock
    /// (`commit/queue.rs`).
    commits: Mutex<commit::CommitQueue>,
    /// The memory every commit's records are encoded into before their append
    /// (`commit/parts.rs`, `append_parts`), kept from one commit to the next (up to 16 MiB).
    /// Taken under the writer lock.
    record_scratch: Mutex<Vec<u8>>,
    /// Where transactions spill their write sets (`write_set/spill.rs`).
    spill_to: Arc<write_set::SpillTo>,
    /// Dropped tables whose pages are not reclaimed yet (`drop.rs`). Changed under the
    /// writer lock.
    graveyard: Mutex<drop::Graveyard>,
    /// What [`Stats`] reports beside the log's and the pool's counters.
    counters: Counters,
    // What readers see.
    /// The visible lsn, snapshots, the overlay, the write buffer (`visible.rs`).
    visible: visible::Visible,
    /// Bytes of buffered versions at which the write buffer drains; 0: no buffer, every
    /// commit applies to the tree (`commit/buffer.rs`). Set only by the crate's tests until
    /// replay rebuilds the buffer (docs/write-buffer.md).
    write_buffer_bytes: AtomicU64,
    /// The change feed's writing side, when the feed is (or was ever) on.
    feed: Option<Arc<crate::feed::writer::FeedWriter>>,
    /// The writer's side of the readers' lock and the published durable lsn
    /// (`readers.rs`); `None` for a read-only handle.
    gate: Option<Arc<readers::ReaderGate>>,
    /// What a read-only handle needs to refresh (`open/read_only.rs`); `None` for the writer.
    read_only: Option<open::ReadOnly>,
    // Checkpoints.
    /// The header file, the running checkpoint, its thread, the background writer and the
    /// marks they move (`checkpoint.rs`).
    checkpoints: checkpoint::Checkpoints,
    // The handle.
    /// The application's handles ([`Db`] and its clones) open on this database.
    handles: std::sync::atomic::AtomicUsize,
    /// Shared with the background writer, which sets it when a write-back fails.
    poisoned: Arc<Poison>,
    /// The database lock (`claim.rs`). Last, so it is released after every other field has
    /// closed its files: the log and the pool (whose last `Arc<Wal>` joins the log's threads).
    _lock: Box<dyn crate::io::HeldLock>,
}

impl Db {
    /// What opening this database did: whether it was created, pages restored from the
    /// torn-page guard, and the log redo replayed, with the time it all took.
    #[must_use]
    pub fn recovery(&self) -> &RecoveryReport {
        &self.inner.recovery
    }

    /// Starts a read-write transaction. It does not wait: its first read waits while another
    /// transaction that read is open (and holds the writer lock from then until it ends), and
    /// one that only writes waits for nothing until it commits. Two transactions in one
    /// thread that both read wait for each other forever.
    pub fn begin(&self) -> Result<Txn<'_>> {
        self.check_poison()?;
        self.refuse_read_only()?;
        Ok(Txn::new(self))
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
            Some(root) => self.read_latest(root, key, snapshot),
            None => Ok(None),
        }
    }

    /// The names of the named tables that exist, in order.
    pub fn tables(&self) -> Result<Vec<String>> {
        self.check_poison()?;
        let snapshot = self.snapshot_register();
        let result = self.scan_at(
            CATALOG_ROOT,
            counts::names_lower(),
            drop::names_upper(),
            Direction::Forward,
            snapshot,
        );
        self.snapshot_release(snapshot);
        Ok(result?
            .into_iter()
            .map(|(name, _)| String::from_utf8_lossy(&name).into_owned())
            .collect())
    }

    /// Every table with its number of entries, the default table (`""`) first, then the
    /// named tables in order, all in one snapshot: each a count kept with the table
    /// (`counts.rs`), no scan.
    pub fn table_entries(&self) -> Result<Vec<(String, u64)>> {
        self.check_poison()?;
        let read = self.begin_read()?;
        let catalog = self.scan_at(
            CATALOG_ROOT,
            counts::names_lower(),
            drop::names_upper(),
            Direction::Forward,
            read.snapshot(),
        )?;
        let names = std::iter::once(String::new()).chain(
            catalog
                .into_iter()
                .map(|(name, _)| String::from_utf8_lossy(&name).into_owned()),
        );
        names
            .map(|name| {
                let rows = read.len_in(&name)?;
                Ok((name, rows))
            })
            .collect()
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
        catalog_root_of(&value, &self.inner.data_path, self.inner.pool.page_bytes()).map(Some)
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

    /// Checkpoints and closes the log. Dropping the last handle does the same, ignoring errors.
    /// While read-only handles hold their snapshots the checkpoint is left to the next open's
    /// recovery (the close waits for them a second at most): a close never waits for a reader.
    pub fn close(self) -> Result<()> {
        self.checkpoint_unless_readers()
    }

    /// Readers waiting for a commit to let go of the trees: it holds them while it changes
    /// pages, and a large commit no snapshot sees holds them until it is visible. For tests,
    /// which must know that a reader is asleep, not about to begin.
    #[doc(hidden)]
    #[must_use]
    #[cfg(any(test, feature = "internals"))]
    pub fn readers_waiting_for_a_commit(&self) -> usize {
        self.inner.tree_lock.waiting()
    }

    /// Threads waiting for the writer lock: a commit behind a write transaction that read
    /// (and so holds it). For tests, which must know a commit is asleep, not about to begin.
    #[doc(hidden)]
    #[must_use]
    #[cfg(any(test, feature = "internals"))]
    pub fn commits_waiting_for_the_writer(&self) -> usize {
        self.inner.writer.waiting()
    }

    /// Rounds the publisher thread (which publishes the durable lsn to read-only handles and
    /// the change feed) has finished; 0 without one. For tests, which must know it looked
    /// after some moment.
    #[doc(hidden)]
    #[must_use]
    #[cfg(any(test, feature = "internals"))]
    pub fn publisher_rounds(&self) -> u64 {
        self.inner.gate.as_ref().map_or(0, |g| g.publisher_rounds())
    }

    /// Decodes the payload of a commit record (a `Data` record of the log; format in
    /// `record.rs`), for tools that show the log (`till dump-log`). `Err` says what is
    /// wrong with the bytes.
    #[cfg(any(test, feature = "internals"))]
    pub fn decode_commit_record(
        payload: &[u8],
    ) -> std::result::Result<record::Commit, &'static str> {
        record::decode(payload)
    }

    fn check_poison(&self) -> Result<()> {
        self.inner.poisoned.check()
    }

    /// Stops the database (fail-stop): every later call returns [`Error::PoisonedBy`] naming
    /// `error`, or the first failure if there was one before.
    fn poison(&self, error: Error) -> Error {
        self.inner.poisoned.set(&error);
        error
    }

    fn read_pages(&self) -> ReadPages<'_> {
        ReadPages {
            pool: &self.inner.pool,
            path: &self.inner.data_path,
        }
    }
}

/// Moves `mark` (an lsn that only moves forward: the visible lsn, a checkpoint's end, the
/// image horizon) to `to`, asserting it never goes back: a mark that went back would make a
/// reader see less, a checkpoint come early, or a page miss its image.
pub(super) fn advance_mark(mark: &AtomicU64, to: u64, what: &str) {
    let before = mark.swap(to, Ordering::AcqRel);
    assert!(before <= to, "{what} went back from {before} to {to}");
}

/// The root page a catalog entry names. A value that is no page id is corruption, reported
/// at the catalog's root page (`page_bytes` locates it in the data file).
fn catalog_root_of(value: &[u8], data_path: &Path, page_bytes: u32) -> Result<PageId> {
    // A root and a count (`counts.rs`), or a root alone (written before counts, and every
    // dropped table's graveyard entry).
    let root = match value.len() {
        counts::ENTRY_BYTES | counts::ENTRY_BYTES_V1 => &value[..8],
        _ => {
            return Err(Error::Corruption {
                file: data_path.to_path_buf(),
                offset: CATALOG_ROOT.offset(page_bytes),
                what: "table catalog entry is not a page id",
            });
        }
    };
    Ok(PageId(u64::from_le_bytes(
        root.try_into().expect("8 bytes"),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A catalog entry that is no page id was reported at offset 4096 whatever the page size:
    /// the wrong page of a database of 16 KiB pages (the default).
    #[test]
    fn a_bad_catalog_entry_is_reported_at_the_catalog_root_of_this_page_size() {
        let path = Path::new("/db/data.tdb");
        let err = catalog_root_of(b"short", path, 16384).expect_err("not a page id");
        match err {
            Error::Corruption { file, offset, .. } => {
                assert_eq!(file, path);
                assert_eq!(offset, 16384);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            catalog_root_of(&7u64.to_le_bytes(), path, 16384).expect("a page id"),
            PageId(7)
        );
    }

    /// A database whose header lacks the write-buffer feature (version 4, `header.rs`) refuses
    /// a write-buffer record found in its log at open, naming the log and the record's lsn.
    /// Replayed as a commit (it has no page operations), its writes would be lost without a
    /// word.
    #[test]
    fn a_buffered_record_in_the_log_is_refused_not_replayed_as_a_commit_of_nothing() {
        use crate::io::{SimConfig, SimDisk};
        let disk = Arc::new(SimDisk::new(SimConfig::default()));
        let dir = Path::new("/db");
        // A process's own view of the disk (a clone), so the threads of the database leaked
        // over the kill below cannot rename segments under the reopen.
        let db = Db::open_with_storage(Arc::new(SimDisk::clone(&disk)), dir, Options::for_tests())
            .expect("create");
        let alloc = *db.inner.writer.lock();
        let write = record::Write {
            table: "",
            key: b"k",
            value: Some(b"v"),
        };
        let start = db.inner.wal.end_lsn();
        let end = append_then_kill(
            db,
            &disk,
            &record::encode_buffered(alloc, [write], &[("", 1)]),
        );
        match Db::open_with_storage(disk, dir, Options::for_tests()) {
            Err(Error::Corruption { file, offset, what }) => {
                assert_eq!(file, dir.join("wal"));
                assert_eq!(offset, start.0, "the record's own lsn, not its end {end:?}");
                assert!(what.contains("header does not allow them"), "{what}");
            }
            other => panic!("opened: {other:?}"),
        }
    }

    /// A database of the build before the drain in chunks (header version 4, buffered records
    /// without their row counts) with a buffered commit in its log opens with it: replay
    /// counts its rows by looking its keys up, and it is drained whole (by the recovery's
    /// checkpoint here; by the buffer's turning on when read-only handles defer that
    /// checkpoint) before the header becomes version 5. A later reopen finds the same.
    #[test]
    fn a_version_4_log_with_a_buffered_commit_opens_with_it_and_upgrades_to_version_5() {
        use crate::io::{SimConfig, SimDisk};
        let disk = Arc::new(SimDisk::new(SimConfig::default()));
        let dir = Path::new("/db");
        let db = Db::open_with_storage(Arc::new(SimDisk::clone(&disk)), dir, Options::for_tests())
            .expect("create");
        let mut txn = db.begin().expect("begin");
        txn.put(b"a", b"tree").expect("put");
        txn.commit().expect("commit");
        let newest = db.inner.checkpoints.newest_header();
        db.inner
            .checkpoints
            .write_header(&crate::header::Header {
                write_buffer: true,
                drain_chunks: false,
                ..newest
            })
            .expect("a version 4 header");
        let alloc = *db.inner.writer.lock();
        let write = record::Write {
            table: "",
            key: b"k",
            value: Some(b"buffered"),
        };
        // As version 4 wrote it: no counts section.
        let payload = record::encode_as(
            record::Role::Buffered,
            record::Part::WHOLE,
            alloc,
            &[],
            Some([write]),
            record::NO_TAIL,
        );
        append_then_kill(db, &disk, &payload);
        let db = Db::open_with_storage(
            Arc::new(SimDisk::clone(&disk)),
            dir,
            Options {
                write_buffer_bytes: 1 << 20,
                ..Options::for_tests()
            },
        )
        .expect("open");
        assert_eq!(
            db.get(b"k").expect("get").as_deref(),
            Some(&b"buffered"[..])
        );
        assert_eq!(
            db.len().expect("len"),
            2,
            "the buffered commit's row counted once"
        );
        assert!(
            db.inner.checkpoints.newest_header().drain_chunks,
            "the header became version 5"
        );
        assert_eq!(db.stats().write_buffer_bytes, 0, "drained whole first");
        db.close().expect("close");
        let db = Db::open_with_storage(disk, dir, Options::for_tests()).expect("reopen");
        assert_eq!(
            db.get(b"k").expect("get").as_deref(),
            Some(&b"buffered"[..])
        );
        assert_eq!(db.len().expect("len"), 2);
        db.check().expect("the tree checks out");
    }

    /// Appends `payload` to `db`'s log as a durable record, then kills the process holding it
    /// (its threads leaked over the kill see a stale view: `db` was opened on a clone of
    /// `disk`). Returns the record's end.
    fn append_then_kill(db: Db, disk: &crate::io::SimDisk, payload: &[u8]) -> crate::wal::Lsn {
        let end = db
            .inner
            .wal
            .commit(payload, crate::Durability::Sync)
            .expect("appended");
        std::mem::forget(db);
        disk.crash(crate::io::CrashMode::ProcessKill);
        end
    }
}
