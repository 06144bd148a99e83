//! Redo points are commit boundaries.
//!
//! Recovery replays the log from the header's redo point, and a record it reads there must be
//! the first of its commit: a commit's later records without its first are refused ("a later
//! part of a commit whose first part is not in the log read"). A checkpoint's redo point is the
//! oldest redo point of a dirty page. A page changed again while its copy is written back gets
//! one moved up to where the copy was taken; taken from the log's end, that could lie between
//! the records of a commit logged in several (a large one, or one whose pages fill the cache),
//! and the next checkpoint that found the page still dirty wrote it to the header
//! (`explore_random` seed 1006 under Wine, with the checkpoint on a thread of its own).

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tilldb::internals::page::{Backend, BufferPool, PageBuf, PageFormat, PageId, PageKind};
use tilldb::internals::wal::{Lsn, Wal, WalOptions};
use tilldb::io::{CrashMode, SimConfig, SimDisk, Storage};
use tilldb::{Db, Durability, Options, Result};

/// A log that runs to `end`, inside a commit logged in several records that began at
/// `boundary`; a data file in memory.
struct MidCommitLog {
    end: AtomicU64,
    boundary: AtomicU64,
    pages: Mutex<HashMap<PageId, PageBuf>>,
    /// Run once at the next write of pages, before it writes: a change racing a write-back.
    during_write: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

/// The pool's view of a shared [`MidCommitLog`].
struct Shared(Arc<MidCommitLog>);

impl Backend for Shared {
    fn log_durable_to(&self, lsn: u64) -> Result<u64> {
        Ok(self.0.end.fetch_max(lsn, Ordering::AcqRel).max(lsn))
    }
    fn log_end(&self) -> u64 {
        self.0.end.load(Ordering::Acquire)
    }
    fn boundary_end(&self) -> u64 {
        self.0.boundary.load(Ordering::Acquire)
    }
    fn read_page(&self, id: PageId) -> Result<Option<PageBuf>> {
        Ok(self.0.pages.lock().get(&id).cloned())
    }
    fn write_pages(&self, pages: &mut [PageBuf]) -> Result<()> {
        let during = self.0.during_write.lock().take();
        if let Some(during) = during {
            during();
        }
        for page in pages.iter() {
            self.0.pages.lock().insert(page.id(), page.clone());
        }
        Ok(())
    }
    fn save_ledger(&self) -> Result<()> {
        Ok(())
    }
    fn spill_write(&self, _slot: u64, _page: &mut PageBuf) -> Result<()> {
        unreachable!("nothing is held")
    }
    fn spill_read(&self, _slot: u64, _id: PageId) -> Result<PageBuf> {
        unreachable!("nothing is held")
    }
}

fn change(pool: &BufferPool, id: u64, byte: u8, lsn: u64) {
    {
        let mut page = pool.write(PageId(id)).expect("write");
        page.reset(PageKind::Leaf);
        page.body_mut()[0] = byte;
    }
    pool.stamp(&[PageId(id)], lsn, lsn - 1);
}

#[test]
fn a_page_changed_during_its_write_back_gets_a_redo_point_at_a_commit_boundary() {
    let log = Arc::new(MidCommitLog {
        end: AtomicU64::new(0),
        boundary: AtomicU64::new(0),
        pages: Mutex::default(),
        during_write: Mutex::default(),
    });
    let pool = Arc::new(BufferPool::new(
        PageFormat::plain(4096),
        16 * 4096,
        Box::new(Shared(Arc::clone(&log))),
    ));
    change(&pool, 1, 1, 5);
    assert_eq!(pool.min_rec_lsn(), Some(4));
    // The log runs to 10; a commit in several records began at 6 and has not logged its last.
    log.end.store(10, Ordering::Release);
    log.boundary.store(6, Ordering::Release);
    let changer = Arc::clone(&pool);
    *log.during_write.lock() = Some(Box::new(move || change(&changer, 1, 2, 12)));
    assert_eq!(pool.flush_dirty(16).expect("flush"), 1);
    assert!(log.during_write.lock().is_none(), "the change ran");
    assert_eq!(
        pool.dirty_count(),
        1,
        "changed again while written: still dirty"
    );
    assert_eq!(
        pool.min_rec_lsn(),
        Some(6),
        "the redo point moves up to the commit boundary, not to the log's end inside a commit"
    );
}

#[test]
fn the_log_end_at_a_commit_boundary_stays_where_a_commit_in_parts_began_until_its_last() {
    let disk = SimDisk::new(SimConfig::default());
    let storage: Arc<dyn Storage> = Arc::new(disk);
    let dir = std::path::Path::new("/db");
    storage.create_dir_all(dir).expect("dir");
    let (wal, _) = Wal::open(Arc::clone(&storage), dir, WalOptions::default()).expect("open");
    wal.commit(&[1; 100], Durability::Sync).expect("a commit");
    let before = wal.end_lsn();
    assert_eq!(wal.boundary_end(), before, "no commit in parts: the end");
    wal.begin_parts();
    let first = wal.append(&[2; 300]).expect("first part");
    assert!(first > before);
    wal.append(&[3; 300]).expect("second part");
    assert_eq!(
        wal.boundary_end(),
        before,
        "inside the commit: where its first part began"
    );
    let last = wal.append(&[4; 300]).expect("last part");
    wal.end_parts();
    assert_eq!(wal.boundary_end(), last, "after its last part: the end");
    assert_eq!(wal.end_lsn(), Lsn(last.0));
}

/// Row `i`'s key: 24 bytes, spread over the key space.
fn row_key(i: u64) -> Vec<u8> {
    format!("{:016x}-{i:07}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).into_bytes()
}

/// One transaction putting rows `0..rows` with values of `byte`: with `Options::for_tests()`
/// (64 KiB parts), thousands of rows make a commit logged in many parts.
fn put_rows(db: &Db, rows: u64, byte: u8) {
    let mut txn = db.begin().expect("begin");
    for i in 0..rows {
        txn.put(&row_key(i), &[byte; 150]).expect("put");
    }
    txn.commit().expect("commit");
}

const DIR: &str = "/db";

fn sim_open(disk: &SimDisk, options: Options) -> Db {
    Db::open_with_storage(Arc::new(disk.clone()), std::path::Path::new(DIR), options).expect("open")
}

/// Recovery stamped each page a commit logged in parts changed with the lsn of the part that
/// changed it as its redo point, not the commit's first part's: after recovery a dirty
/// page's redo point could lie inside the commit, and a checkpoint that found that page still
/// dirty (a commit holding it through every pass) would write it to the header; the next
/// recovery then starts at a later part without its first and refuses the log. (The fix came
/// from a review, 5019ebc; no test held it: the checkpoint after recovery writes every page
/// back, so the redo points are seen only while it is deferred.) Here a read-only handle
/// holds its snapshot through the writer's open, so that checkpoint is deferred and the pages
/// redo dirtied keep the redo points it gave them: every one of them must be where the
/// commit began.
#[test]
fn recovery_puts_a_redo_point_inside_a_commit_it_replays_in_parts() {
    let disk = SimDisk::new(SimConfig::default());
    let options = Options {
        background_threads: false,
        ..Options::for_tests()
    };
    let db = sim_open(&disk, options.clone());
    db.checkpoint().expect("checkpoint");
    assert!(
        db.dirty_redo_points().is_empty(),
        "a checkpoint leaves nothing dirty"
    );
    put_rows(&db, 5_000, 1);
    assert!(db.stats().commit_parts > 3, "{:?}", db.stats());
    let live = db.dirty_redo_points();
    assert_eq!(
        live.len(),
        1,
        "a live commit's pages share its redo point: {live:?}"
    );
    std::mem::forget(db);
    disk.crash(CrashMode::ProcessKill);

    let storage: Arc<dyn Storage> = Arc::new(disk.clone());
    let reader =
        Db::open_read_only_with_storage(storage, std::path::Path::new(DIR), options.clone())
            .expect("read-only");
    let snapshot = reader.begin_read().expect("snapshot");
    let db = sim_open(&disk, options);
    let recovery = db.recovery();
    assert!(recovery.records > 3, "replayed in parts: {recovery:?}");
    let points = db.dirty_redo_points();
    assert!(
        !points.is_empty(),
        "the checkpoint after recovery ran (it wrote the pages back): no test"
    );
    assert_eq!(
        points, live,
        "every page the replayed commit left dirty has the redo point of its first part"
    );
    drop(snapshot);
    drop(reader);
    db.checkpoint().expect("checkpoint");
    std::mem::forget(db);
    disk.crash(CrashMode::ProcessKill);
    let db = sim_open(&disk, Options::for_tests());
    db.check().expect("check");
}

/// Releasing a commit logged in parts gave each page it held the commit's redo point even
/// when the page already had an older one: a page a small commit dirtied earlier lost the
/// redo point that covers that small commit (newest wins), and a checkpoint taking the
/// lowest redo point of the dirty pages would start redo after the small commit, whose
/// change to that page is on no disk. Every page keeps its oldest redo point.
#[test]
fn releasing_a_commit_in_parts_moves_an_older_redo_point_up_to_it() {
    let disk = SimDisk::new(SimConfig::default());
    let options = Options {
        background_threads: false,
        // Nothing evicted: the pages stay in their frames, held and then released.
        cache_bytes: 64 << 20,
        ..Options::for_tests()
    };
    let db = sim_open(&disk, options);
    put_rows(&db, 5_000, 1);
    db.checkpoint().expect("checkpoint");
    assert!(
        db.dirty_redo_points().is_empty(),
        "a checkpoint leaves nothing dirty"
    );
    // A small commit dirties the first leaf alone: it changes the value of the row whose
    // key sorts first (no row added, so no count changes either).
    let first = (0..5_000).map(row_key).min().expect("rows");
    let mut txn = db.begin().expect("begin");
    txn.put(&first, b"small").expect("put");
    txn.commit().expect("commit");
    let small = db.dirty_redo_points();
    assert_eq!(small.len(), 1, "{small:?}");
    // A commit in parts changes every leaf, the first one in its first part (held until its
    // last part).
    let parts = db.stats().commit_parts;
    put_rows(&db, 5_000, 2);
    assert!(db.stats().commit_parts > parts + 3, "{:?}", db.stats());
    let points = db.dirty_redo_points();
    assert!(
        points.is_superset(&small),
        "the first leaf lost the small commit's redo point {small:?}: now {points:?}"
    );
    assert_eq!(
        points.len(),
        2,
        "the small commit's and the large one's: {points:?}"
    );
}
