//! `Db::check` and `Db::check_tables`: every tree of the database checked against its
//! catalog entry (order, links, page kinds, overflow chains, row counts). The variants
//! `_with_progress` of these and of `Db::check_space` report the pages read so far
//! (`progress.rs`), counted by a view of the pages that passes every read through
//! ([`Metered`]).

use super::{CATALOG_ROOT, Db, SpaceCheck, catalog_root_of, counts, drop};
use crate::btree::{Direction, PageOp, Pages, Tree};
use crate::error::{Error, Result};
use crate::page::{PageId, PageKind};
use crate::progress::{Meter, Progress};
use std::cell::RefCell;
use std::path::Path;
use std::sync::atomic::AtomicU32;

/// Pages read between two progress reports: 1 MiB of 4 KiB pages, a few milliseconds of a
/// check, so a bar moves smoothly and the reports cost nothing next to the reads.
const PAGES_PER_REPORT: u64 = 256;

impl Db {
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
    /// Trees of dropped tables not yet reclaimed are checked too, not returned.
    pub fn check_tables(&self) -> Result<Vec<(String, crate::btree::TreeStats)>> {
        self.check_tables_with_progress(&mut |_| {})
    }

    /// [`Db::check_tables`], reporting to `progress` the pages read so far (the rules of
    /// [`Progress`]). The total is the pages allocated at the last checkpoint, an estimate
    /// taken without the writer lock (which a transaction holds until it ends, and which this
    /// check never waited for); free pages are not read, so the count ends short of it until
    /// the last report.
    pub fn check_tables_with_progress(
        &self,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Vec<(String, crate::btree::TreeStats)>> {
        let estimate = self.inner.checkpoints.newest_header().page_count;
        let _shared = self.inner.tree_lock.read();
        let pages = Metered::new(self.read_pages(), estimate, progress);
        let stats = self.check_tables_of(&pages)?;
        pages.meter.borrow_mut().finish();
        Ok(stats)
    }

    /// [`Db::check_space`], reporting to `progress` the pages read so far (the rules of
    /// [`Progress`]) of the pages allocated, each page of a tree and of the free list read
    /// once.
    pub fn check_space_with_progress(
        &self,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<SpaceCheck> {
        // The locks as `check_space` takes them, in its order.
        let alloc = self.inner.writer.lock();
        let _shared = self.inner.tree_lock.read();
        let pages = Metered::new(self.read_pages(), alloc.page_count, progress);
        let space = Db::check_space_of(&pages, alloc.page_count, alloc.free_head)?;
        pages.meter.borrow_mut().finish();
        Ok(space)
    }

    /// The body of [`Db::check_tables`], over `pages`.
    ///
    /// Requires: the caller holds the tree lock shared.
    fn check_tables_of<P: Pages>(
        &self,
        pages: &P,
    ) -> Result<Vec<(String, crate::btree::TreeStats)>> {
        Tree::open(CATALOG_ROOT).check(pages)?;
        for root in drop::graveyard_roots(pages)? {
            Tree::open(root).check(pages)?;
        }
        let entries: Vec<(Vec<u8>, Vec<u8>)> = Tree::open(CATALOG_ROOT)
            .scan(
                pages,
                counts::names_lower(),
                drop::names_upper(),
                Direction::Forward,
            )
            .collect::<Result<_>>()?;
        let default = Tree::open(CATALOG_ROOT)
            .get(pages, counts::key_of(""))?
            .ok_or_else(|| Error::Corruption {
                file: self.inner.data_path.clone(),
                offset: CATALOG_ROOT.offset(self.inner.pool.page_bytes()),
                what: "the catalog has no entry for the default table",
            })?;
        let mut stats = Vec::new();
        for (name, value) in std::iter::once((Vec::new(), default)).chain(entries) {
            let root =
                catalog_root_of(&value, &self.inner.data_path, self.inner.pool.page_bytes())?;
            let tree = Tree::open(root).check(pages)?;
            // The count kept with the table is the number of its entries (`counts.rs`).
            let rows = counts::rows_of(&value).map_err(|what| Error::Corruption {
                file: self.inner.data_path.clone(),
                offset: CATALOG_ROOT.offset(self.inner.pool.page_bytes()),
                what,
            })?;
            if rows.is_some_and(|rows| rows != tree.keys) {
                return Err(Error::Corruption {
                    file: self.inner.data_path.clone(),
                    offset: root.offset(self.inner.pool.page_bytes()),
                    what: "a table's row count (its catalog entry) differs from the entries \
                           its tree holds",
                });
            }
            stats.push((String::from_utf8_lossy(&name).into_owned(), tree));
        }
        Ok(stats)
    }
}

/// A view of `pages` that counts every page read and reports the count to a [`Meter`]: the
/// progress of a check, which reads each page of a tree once.
struct Metered<'m, P> {
    pages: P,
    meter: RefCell<Meter<'m>>,
}

impl<'m, P: Pages> Metered<'m, P> {
    /// Pages `1..page_count` to read (page 0 is never a tree's).
    fn new(pages: P, page_count: u64, progress: &'m mut dyn FnMut(Progress)) -> Self {
        let total = page_count.saturating_sub(1);
        Metered {
            pages,
            meter: RefCell::new(Meter::new(progress, total, PAGES_PER_REPORT)),
        }
    }
}

impl<P: Pages> Pages for Metered<'_, P> {
    type Read<'b>
        = P::Read<'b>
    where
        Self: 'b;

    fn format(&self) -> crate::page::PageFormat {
        self.pages.format()
    }

    fn read(&self, id: PageId) -> Result<Self::Read<'_>> {
        self.meter.borrow_mut().advance(1);
        self.pages.read(id)
    }

    fn locate(&self, id: PageId, slot: &AtomicU32) -> u32 {
        self.pages.locate(id, slot)
    }

    fn make_search_hints(&self) -> bool {
        self.pages.make_search_hints()
    }

    fn read_guessed(&self, id: PageId, guess: u32) -> Result<Self::Read<'_>> {
        self.meter.borrow_mut().advance(1);
        self.pages.read_guessed(id, guess)
    }

    fn apply(&self, op: PageOp) -> Result<()> {
        panic!("a check tried to change {}", op.page());
    }

    fn allocate(&self, _kind: PageKind) -> Result<PageId> {
        panic!("a check tried to allocate a page");
    }

    fn free(&self, id: PageId) -> Result<()> {
        panic!("a check tried to free {id}");
    }

    fn path(&self) -> &Path {
        self.pages.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Options;
    use crate::io::{SimConfig, SimDisk};
    use crate::progress::assert_rules;
    use std::sync::Arc;

    /// A database of a few hundred 4 KiB pages in three tables, with free pages (a dropped
    /// table's, once reclaimed), on a simulated disk.
    fn database() -> Db {
        let options = Options {
            background_threads: false,
            ..Options::for_tests()
        };
        let disk = Arc::new(SimDisk::new(SimConfig::default()));
        let db = Db::open_with_storage(disk, Path::new("/db"), options).expect("create");
        for table in ["", "apples", "pears", "dropped"] {
            let mut txn = db.begin().expect("begin");
            for i in 0..3000u32 {
                txn.put_in(table, format!("key-{i:06}").as_bytes(), &[7; 200])
                    .expect("put");
            }
            txn.commit().expect("commit");
        }
        let mut txn = db.begin().expect("begin");
        assert!(txn.drop_table("dropped").expect("drop"));
        txn.commit().expect("commit");
        db
    }

    #[test]
    fn a_tree_check_reports_pages_read_up_to_the_total_and_returns_what_check_tables_does() {
        let db = database();
        let mut reports = Vec::new();
        let stats = db
            .check_tables_with_progress(&mut |p| reports.push(p))
            .expect("check");
        assert_rules(&reports);
        assert_eq!(stats, db.check_tables().expect("check"));
        // Reported along the way, not only at the start and the end: a report at least
        // every PAGES_PER_REPORT reads, and the check reads every page of every tree.
        let tree_pages: u64 = stats.iter().map(|(_, t)| t.pages()).sum();
        assert!(tree_pages > 2 * PAGES_PER_REPORT, "{tree_pages} pages");
        let before_last = reports[reports.len() - 2];
        assert!(
            before_last.done + PAGES_PER_REPORT > tree_pages,
            "{before_last:?} of {tree_pages} tree pages: {reports:?}"
        );
        db.close().expect("close");
    }

    #[test]
    fn a_space_check_reports_every_page_it_reads_of_the_pages_allocated() {
        let db = database();
        let mut reports = Vec::new();
        let space = db
            .check_space_with_progress(&mut |p| reports.push(p))
            .expect("check");
        assert_rules(&reports);
        assert_eq!(space, db.check_space().expect("check"));
        assert!(space.is_clean(), "{space:?}");
        assert!(
            space.free_pages > 0,
            "the dropped table's pages are free: {space:?}"
        );
        // The total is the pages allocated (page 0 aside) from the first report on; the
        // count reaches every tree page and free page read, within one report's step.
        assert_eq!(reports[0].total, space.page_count - 1, "{reports:?}");
        let read = space.tree_pages() + space.free_pages;
        let before_last = reports[reports.len() - 2];
        assert!(
            before_last.done + PAGES_PER_REPORT > read,
            "{before_last:?} of {read} pages read: {reports:?}"
        );
        assert!(
            reports.len() as u64 >= read / PAGES_PER_REPORT,
            "{reports:?}"
        );
        db.close().expect("close");
    }
}
