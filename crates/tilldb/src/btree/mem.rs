//! [`MemPages`]: pages in memory, for tests of the tree and of the layers above it.
//!
//! It behaves like the buffer pool as far as the tree can tell: every change goes through
//! [`Pages::apply`], which stamps the page with the next lsn and records the op in a log, and
//! allocations and frees are logged as `Format` ops. [`MemPages::redo`] replays such a log with
//! the recovery rule (apply iff page lsn < record lsn), so tests can check that the log alone
//! rebuilds every page byte for byte.
//!
//! Single-threaded (`RefCell`); share it between threads inside a `Mutex`. An apply while a
//! read guard is alive panics, which catches the tree holding a guard across a change.

use super::{Pages, corrupt};
use crate::Result;
use crate::btree::PageOp;
use crate::page::{PageBuf, PageFormat, PageId, PageKind};
use std::cell::{Cell, Ref, RefCell};
use std::collections::BTreeMap;
use std::fmt;

/// Pages in memory with a log of every op applied.
pub struct MemPages {
    page_bytes: u32,
    pages: RefCell<BTreeMap<PageId, PageBuf>>,
    /// Every op applied, with the lsn it was stamped with, ascending.
    log: RefCell<Vec<(u64, PageOp)>>,
    /// Freed pages, reused last-in first-out.
    free: RefCell<Vec<PageId>>,
    /// One past the highest page id ever allocated: the file's size in pages.
    next_id: Cell<u64>,
    /// The lsn of the last op applied.
    lsn: Cell<u64>,
}

impl MemPages {
    /// No pages yet (page 0 is never used).
    #[must_use]
    pub fn new(page_bytes: u32) -> MemPages {
        MemPages::from_pages(page_bytes, BTreeMap::new())
    }

    /// Pages as they were found (a crash image); the free list is every `Free` page, the lsn
    /// the highest page lsn.
    #[must_use]
    pub fn from_pages(page_bytes: u32, pages: BTreeMap<PageId, PageBuf>) -> MemPages {
        let mem = MemPages {
            page_bytes,
            pages: RefCell::new(pages),
            log: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            next_id: Cell::new(1),
            lsn: Cell::new(0),
        };
        mem.rebuild_free_list();
        mem
    }

    fn rebuild_free_list(&self) {
        let pages = self.pages.borrow();
        for (id, page) in pages.iter() {
            assert_eq!(page.id(), *id);
            assert_eq!(page.page_bytes(), self.page_bytes as usize);
        }
        *self.free.borrow_mut() = pages
            .values()
            .filter(|page| page.kind() == PageKind::Free)
            .map(PageBuf::id)
            .rev()
            .collect();
        self.next_id
            .set(pages.keys().next_back().map_or(1, |id| id.0 + 1));
        self.lsn
            .set(pages.values().map(PageBuf::lsn).max().unwrap_or(0));
    }

    /// A copy of every op applied so far, with its lsn.
    #[must_use]
    pub fn log(&self) -> Vec<(u64, PageOp)> {
        self.log.borrow().clone()
    }

    /// Takes the log, leaving it empty (lsns keep counting).
    pub fn take_log(&self) -> Vec<(u64, PageOp)> {
        std::mem::take(&mut *self.log.borrow_mut())
    }

    /// Copies of every page.
    #[must_use]
    pub fn snapshot(&self) -> BTreeMap<PageId, PageBuf> {
        self.pages.borrow().clone()
    }

    /// Redoes `log` with the recovery rule: an op is applied iff its page's lsn is below the
    /// op's lsn, and then stamps the page. A page the log formats but that does not exist yet
    /// is created (it was allocated after the image was taken). Returns how many ops applied.
    pub fn redo(&self, log: &[(u64, PageOp)]) -> usize {
        let mut applied = 0;
        {
            let mut pages = self.pages.borrow_mut();
            for (lsn, op) in log {
                let id = op.page();
                let page = pages.entry(id).or_insert_with(|| match op {
                    PageOp::Format { kind, .. } | PageOp::Image { kind, .. } => {
                        PageBuf::new(id, *kind, self.page_bytes)
                    }
                    _ => panic!("redo of {op:?} on a page that was never formatted"),
                });
                if page.lsn() < *lsn {
                    op.apply_to(page);
                    page.set_lsn(*lsn);
                    applied += 1;
                }
            }
        }
        self.rebuild_free_list();
        applied
    }

    /// Asserts the bookkeeping: every listed free page is a `Free` page and listed once, every
    /// `Free` page is listed, no page id is at or above the high-water mark, and no page lsn
    /// is above the last lsn handed out.
    pub fn check_invariants(&self) {
        let pages = self.pages.borrow();
        let free = self.free.borrow();
        let mut listed = std::collections::BTreeSet::new();
        for id in free.iter() {
            assert!(listed.insert(*id), "{id} is on the free list twice");
            assert_eq!(pages[id].kind(), PageKind::Free, "{id} is listed free");
        }
        let free_kind = pages
            .values()
            .filter(|p| p.kind() == PageKind::Free)
            .count();
        assert_eq!(
            free_kind,
            free.len(),
            "a free page is missing from the free list"
        );
        for (id, page) in pages.iter() {
            assert!(
                id.0 != 0 && id.0 < self.next_id.get(),
                "{id} past the high-water mark"
            );
            assert!(
                page.lsn() <= self.lsn.get(),
                "{id} has an lsn from the future"
            );
        }
    }

    /// Pages allocated and not free.
    #[must_use]
    pub fn live_pages(&self) -> usize {
        self.pages.borrow().len() - self.free.borrow().len()
    }

    /// Pages the file would hold: the highest page id ever allocated.
    #[must_use]
    pub fn file_pages(&self) -> u64 {
        self.next_id.get() - 1
    }
}

impl Pages for MemPages {
    type Read<'a> = Ref<'a, PageBuf>;

    fn format(&self) -> PageFormat {
        PageFormat::plain(self.page_bytes)
    }

    fn read(&self, id: PageId) -> Result<Ref<'_, PageBuf>> {
        if id.0 == 0 {
            return Err(corrupt(self, id, "reference to page 0"));
        }
        Ref::filter_map(self.pages.borrow(), |pages| pages.get(&id))
            .map_err(|_| corrupt(self, id, "reference to a page that was never allocated"))
    }

    fn apply(&self, op: PageOp) -> Result<()> {
        let mut pages = self
            .pages
            .try_borrow_mut()
            .expect("apply while a page guard is held");
        let page = pages
            .get_mut(&op.page())
            .unwrap_or_else(|| panic!("{op:?} on a page that was never allocated"));
        let lsn = self.lsn.get() + 1;
        op.apply_to(page);
        page.set_lsn(lsn);
        self.lsn.set(lsn);
        self.log.borrow_mut().push((lsn, op));
        Ok(())
    }

    fn allocate(&self, kind: PageKind) -> Result<PageId> {
        assert!(kind != PageKind::Free, "allocate a free page");
        let reused = self.free.borrow_mut().pop();
        let id = if let Some(id) = reused {
            assert_eq!(self.pages.borrow()[&id].kind(), PageKind::Free);
            id
        } else {
            let id = PageId(self.next_id.get());
            self.next_id.set(id.0 + 1);
            let page = PageBuf::new(id, kind, self.page_bytes);
            assert!(self.pages.borrow_mut().insert(id, page).is_none());
            id
        };
        self.apply(PageOp::Format { page: id, kind })?;
        Ok(id)
    }

    fn free(&self, id: PageId) -> Result<()> {
        let kind = self.read(id)?.kind();
        if kind == PageKind::Free {
            // Two references to one page: the data is corrupt (or the caller has a bug).
            return Err(corrupt(self, id, "page freed twice"));
        }
        self.apply(PageOp::Format {
            page: id,
            kind: PageKind::Free,
        })?;
        self.free.borrow_mut().push(id);
        Ok(())
    }
}

impl fmt::Debug for MemPages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemPages")
            .field("page_bytes", &self.page_bytes)
            .field("file_pages", &self.file_pages())
            .field("live_pages", &self.live_pages())
            .field("lsn", &self.lsn.get())
            .field("log_ops", &self.log.borrow().len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btree::LeafValue;

    #[test]
    fn allocate_free_reuse() {
        let pages = MemPages::new(4096);
        let a = pages.allocate(PageKind::Leaf).expect("allocate");
        let b = pages.allocate(PageKind::Overflow).expect("allocate");
        assert_eq!((a, b), (PageId(1), PageId(2)));
        pages.free(a).expect("free");
        assert_eq!(pages.live_pages(), 1);
        assert_eq!(pages.allocate(PageKind::Branch).expect("allocate"), a);
        assert_eq!(pages.read(a).expect("read").kind(), PageKind::Branch);
        assert_eq!(pages.file_pages(), 2);
        assert!(pages.read(PageId(3)).is_err());
        assert!(pages.read(PageId(0)).is_err());
    }

    #[test]
    fn redo_from_nothing_rebuilds_every_page() {
        let pages = MemPages::new(4096);
        let a = pages.allocate(PageKind::Leaf).expect("allocate");
        pages
            .apply(PageOp::LeafPut {
                page: a,
                key: b"k".to_vec(),
                value: LeafValue::Inline(b"v".to_vec()),
            })
            .expect("apply");
        let b = pages.allocate(PageKind::Leaf).expect("allocate");
        pages.free(b).expect("free");
        let copy = MemPages::new(4096);
        assert_eq!(copy.redo(&pages.log()), pages.log().len());
        assert_eq!(copy.snapshot().len(), 2);
        for (id, page) in pages.snapshot() {
            assert_eq!(copy.snapshot()[&id].bytes(), page.bytes());
        }
        // Redo is idempotent: every page lsn already covers the log.
        assert_eq!(copy.redo(&pages.log()), 0);
        assert_eq!(copy.live_pages(), 1);
    }

    /// A page changed in place keeps its checked mark and loses its search hints (they
    /// describe the version before); a reader's descent makes them again. It did not: every
    /// page a commit had changed was searched without hints (and a branch kept no guess of
    /// its children's frames) until it left the cache.
    #[test]
    fn a_page_changed_in_place_gets_its_search_hints_back_on_the_next_read() {
        use crate::btree::Tree;
        let pages = MemPages::new(4096);
        let tree = Tree::create(&pages).expect("create");
        for i in 0..400u32 {
            let key = format!("key{i:05}");
            tree.put(&pages, key.as_bytes(), &[1; 20]).expect("put");
        }
        let root = tree.root();
        let hints_of = |id: PageId| pages.read(id).expect("read").search_hints().is_some();
        assert_eq!(
            pages.read(root).expect("read").kind(),
            PageKind::Branch,
            "a tree of more than one leaf"
        );
        assert!(tree.get(&pages, b"key00200").expect("get").is_some());
        let leaf = crate::btree::walk::find_leaf(&pages, root, b"key00200").expect("descend");
        assert!(hints_of(root) && hints_of(leaf), "a read makes the hints");
        // A change in place (a put into the leaf, no split) drops the leaf's hints.
        tree.put(&pages, b"key00200", &[2; 20]).expect("put");
        assert!(pages.read(leaf).expect("read").node_checked());
        assert!(!hints_of(leaf), "the old version's hints were kept");
        assert_eq!(
            tree.get(&pages, b"key00200").expect("get").as_deref(),
            Some(&[2u8; 20][..])
        );
        assert!(
            hints_of(leaf),
            "the next read searched the leaf without hints"
        );
    }

    #[test]
    #[should_panic(expected = "guard is held")]
    fn apply_under_a_guard_panics() {
        let pages = MemPages::new(4096);
        let a = pages.allocate(PageKind::Leaf).expect("allocate");
        let _guard = pages.read(a).expect("read");
        let _ = pages.apply(PageOp::SetNext {
            page: a,
            next: PageId(1),
        });
    }
}
