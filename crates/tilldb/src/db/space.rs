//! Free-space accounting: every page of the data file belongs to exactly one tree (the
//! catalog or a table, overflow pages included) or is on the free list ([`Db::check_space`]).

use super::{CATALOG_ROOT, DEFAULT_ROOT, Db, catalog_root_of};
use crate::btree::{Direction, PageOp, Pages, Tree};
use crate::error::{Error, Result};
use crate::page::PageId;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;

impl Db {
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
    pub(crate) fn check_space_of<P: Pages>(
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
        for root in super::drop::graveyard_roots(pages)? {
            let owner = format!("the dropped table at page {root} (awaiting reclaim)");
            let stats = own_tree(pages, root, &owner, &mut owners, &mut space)?;
            space.dropped_pages += stats.pages();
        }
        // (name, root, the count its catalog entry keeps: `None` in an entry written before
        // counts, which the next open counts).
        let catalog_error = |what: &'static str| Error::Corruption {
            file: pages.path().to_path_buf(),
            offset: CATALOG_ROOT.offset(pages.page_bytes()),
            what,
        };
        let default_rows = match Tree::open(CATALOG_ROOT).get(pages, super::counts::key_of(""))? {
            Some(value) => super::counts::rows_of(&value).map_err(catalog_error)?,
            None => None,
        };
        let mut tables = vec![(String::new(), DEFAULT_ROOT, default_rows)];
        for entry in Tree::open(CATALOG_ROOT).scan(
            pages,
            super::counts::names_lower(),
            super::drop::names_upper(),
            Direction::Forward,
        ) {
            let (name, value) = entry?;
            let name = String::from_utf8_lossy(&name).into_owned();
            tables.push((
                name,
                catalog_root_of(&value, pages.path(), pages.page_bytes())?,
                super::counts::rows_of(&value).map_err(catalog_error)?,
            ));
        }
        for (name, root, rows) in tables {
            let owner = if name.is_empty() {
                "the default table".to_string()
            } else {
                format!("table {name:?}")
            };
            let stats = own_tree(pages, root, &owner, &mut owners, &mut space)?;
            if rows.is_some_and(|rows| rows != stats.keys) {
                return Err(catalog_error(
                    "a table's row count (its catalog entry) differs from the entries its \
                     tree holds",
                ));
            }
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
        // Counted, not listed, past the first few: a damaged header's page count can run
        // billions of pages past the data (a fuzzed header once asked for 2 GiB of ids here).
        // Every owner is below `page_count` (checked above) and `owners` holds each page once.
        let owned = owners.keys().filter(|id| id.0 != 0).count() as u64;
        space.leaked_pages = page_count.saturating_sub(1).saturating_sub(owned);
        space.leaked = (1..page_count)
            .map(PageId)
            .filter(|id| !owners.contains_key(id))
            .take(LEAKED_LISTED_MAX)
            .collect();
        debug_assert!(space.leaked.len() as u64 <= space.leaked_pages);
        Ok(space)
    }
}

/// How many leaked pages [`SpaceCheck::leaked`] lists at most; [`SpaceCheck::leaked_pages`]
/// counts them all.
pub const LEAKED_LISTED_MAX: usize = 10_000;

/// What [`Db::check_space`] found: every tree and where every page of the data file belongs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpaceCheck {
    /// Every table's tree, the default table as `""`, in catalog order.
    pub tables: Vec<(String, crate::btree::TreeStats)>,
    /// Pages of the catalog's tree.
    pub catalog_pages: u64,
    /// Pages of dropped tables whose reclaim has not finished (`Txn::drop_table`): freed by
    /// the database once no reader sees them, or at its next open.
    pub dropped_pages: u64,
    /// Pages the allocator has handed out, page 0 (never used) included.
    pub page_count: u64,
    /// Pages on the free list.
    pub free_pages: u64,
    /// Pages in no tree and not on the free list: lost to the allocator for good.
    pub leaked_pages: u64,
    /// The first of the leaked pages, in page order: all of them up to [`LEAKED_LISTED_MAX`].
    pub leaked: Vec<PageId>,
    /// Pages with two owners (two trees, a tree and the free list, the free list twice),
    /// with both owners' names: a write through one destroys the other's data.
    pub doubly_used: Vec<(PageId, String, String)>,
}

impl SpaceCheck {
    /// Pages in trees, the catalog's included.
    #[must_use]
    pub fn tree_pages(&self) -> u64 {
        self.catalog_pages
            + self.dropped_pages
            + self.tables.iter().map(|(_, t)| t.pages()).sum::<u64>()
    }

    /// True when every page is accounted for exactly once.
    #[must_use]
    pub fn is_clean(&self) -> bool {
        self.leaked_pages == 0 && self.doubly_used.is_empty()
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

    fn format(&self) -> crate::page::PageFormat {
        self.pages.format()
    }

    fn read(&self, id: PageId) -> Result<Self::Read<'_>> {
        self.read.borrow_mut().push(id);
        self.pages.read(id)
    }

    fn apply(&self, op: PageOp) -> Result<()> {
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
