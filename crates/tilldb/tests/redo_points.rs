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
use tilldb::internals::page::{Backend, BufferPool, PageBuf, PageId, PageKind};
use tilldb::internals::wal::{Lsn, Wal, WalOptions};
use tilldb::io::{SimConfig, SimDisk, Storage};
use tilldb::{Durability, Result};

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
        4096,
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
