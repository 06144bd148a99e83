//! Dropping tables: [`Txn::drop_table`] and the reclaim of a dropped table's pages.
//!
//! A drop is one catalog change, atomic with the rest of its transaction: the table's entry
//! (name -> root) moves to a *graveyard* entry of the catalog, whose key is [`GRAVEYARD_PREFIX`]
//! followed by the root page id (8 bytes LE) and whose value is the root, as a table entry's.
//! Table names are UTF-8, which never holds the byte 0xFF, so graveyard keys sort after every
//! name and never collide with one; every scan of names stops before them
//! ([`names_upper`]).
//!
//! The dropped tree is not touched by the drop: a reader whose snapshot predates it still finds
//! the table through the overlay's older catalog entry and reads the tree as it was. Its pages
//! are freed later, by *reclaim* ([`Db::reclaim_dropped`]), once no snapshot older than the
//! drop remains: commits of their own, each deleting at most [`RECLAIM_KEYS`] keys of the tree
//! (the B+tree's own deletes free its leaves, branches and overflow pages), the last one also
//! freeing the empty root and removing the graveyard entry. Each is an ordinary commit record,
//! so a crash anywhere leaves a consistent tree and its graveyard entry, and the next open
//! reclaims the rest (no reader exists before an open returns). `till check` accounts the
//! pages of a tree awaiting reclaim to it, never as leaked.
//!
//! ```text
//!   catalog before:  "orders" -> 7
//!   drop commit:     "orders" removed; 0xFF 07 00 00 00 00 00 00 00 -> 7   (tree 7 untouched)
//!   reclaim commits: up to RECLAIM_KEYS deletes of tree 7 each; the last frees page 7 and
//!                    removes the graveyard entry
//! ```

use super::locks::{TreeChanging, Writer};
use super::pages::TxnPages;
use super::{CATALOG_ROOT, DEFAULT_ROOT, Db, catalog_root_of};
use crate::btree::{Direction, Pages, Tree};
use crate::error::{Error, Result};
use crate::page::PageId;
use crate::record::Alloc;
use std::collections::BTreeMap;
use std::ops::Bound;

/// First byte of a graveyard key in the catalog (no UTF-8 name holds it).
pub(super) const GRAVEYARD_PREFIX: u8 = 0xFF;
/// Keys of a dropped tree one reclaim commit deletes (its pages must fit in the cache, which
/// holds a commit's changed pages until the record is appended).
const RECLAIM_KEYS: usize = 256;

/// The catalog key of a dropped tree awaiting reclaim.
pub(super) fn graveyard_key(root: PageId) -> Vec<u8> {
    let mut key = vec![GRAVEYARD_PREFIX];
    key.extend_from_slice(&root.0.to_le_bytes());
    key
}

/// The upper bound of a scan of the catalog's table names: before every graveyard key.
pub(super) fn names_upper() -> Bound<&'static [u8]> {
    Bound::Excluded(&[GRAVEYARD_PREFIX])
}

/// Dropped trees awaiting reclaim: root -> the end lsn of the drop's commit (0: dropped
/// before this open, so no snapshot of this process can see it).
pub(super) type Graveyard = BTreeMap<PageId, u64>;

/// The roots of every dropped tree the catalog holds, as `pages` show it.
pub(super) fn graveyard_roots<P: Pages>(pages: &P) -> Result<Vec<PageId>> {
    let lower = [GRAVEYARD_PREFIX];
    Tree::open(CATALOG_ROOT)
        .scan(
            pages,
            Bound::Included(&lower[..]),
            Bound::Unbounded,
            Direction::Forward,
        )
        .map(|entry| {
            let (key, value) = entry?;
            let root = catalog_root_of(&value, pages.path(), pages.page_bytes())?;
            // The catalog and the default table have fixed roots and are never dropped.
            if key != graveyard_key(root) || root.0 <= DEFAULT_ROOT.0 {
                return Err(Error::Corruption {
                    file: pages.path().to_path_buf(),
                    offset: CATALOG_ROOT.offset(pages.page_bytes()),
                    what: "a dropped table's catalog entry names another root than its key",
                });
            }
            Ok(root)
        })
        .collect()
}

/// Moves each table of `drops` (name, root) from its catalog entry to a graveyard entry.
/// `pages` are the committing transaction's.
pub(super) fn apply_drops(
    pages: &TxnPages<'_>,
    drops: &[(String, PageId)],
    _tree: TreeChanging<'_>,
) -> Result<()> {
    let catalog = Tree::open(CATALOG_ROOT);
    for (name, root) in drops {
        assert!(!name.is_empty(), "the default table is never dropped");
        let removed = catalog.delete(pages, name.as_bytes())?;
        assert!(removed, "dropped table {name:?} had no catalog entry");
        catalog.put(pages, &graveyard_key(*root), &root.0.to_le_bytes())?;
    }
    Ok(())
}

/// [`graveyard_roots`], if any, once every page is seen to belong to exactly one tree or the
/// free list ([`Db::check_space_of`]): a dropped root that damage made part of a live tree
/// (or its root) would have live pages freed. Pages owned twice are `Corruption` here, and
/// nothing is reclaimed; `till check` names them. Read only when drops are pending.
fn reclaimable_roots<P: Pages>(pages: &P, alloc: Alloc) -> Result<Vec<PageId>> {
    let roots = graveyard_roots(pages)?;
    if roots.is_empty() {
        return Ok(roots);
    }
    let space = Db::check_space_of(pages, alloc.page_count, alloc.free_head)?;
    if let Some((page, _, _)) = space.doubly_used.first() {
        return Err(Error::Corruption {
            file: pages.path().to_path_buf(),
            offset: page.offset(pages.page_bytes()),
            what: "a page belongs to two trees or to a tree and the free list",
        });
    }
    Ok(roots)
}

impl Db {
    /// At open: every dropped table the catalog holds is reclaimable (no reader exists yet).
    /// A catalog that cannot be read, a damaged page in any tree (the dropped ones included)
    /// or pages whose owners contradict each other do not fail the open, which otherwise
    /// reads no page: the call that needs the damaged page reports it, naming the file and
    /// offset, and nothing is reclaimed until an open finds every page in order.
    pub(super) fn reclaim_after_open(&self) -> Result<()> {
        let found = {
            let alloc = self.inner.writer.lock();
            let _shared = self.inner.tree_lock.read();
            reclaimable_roots(&self.read_pages(), *alloc)
        };
        let roots = match found {
            Ok(roots) => roots,
            Err(e @ Error::Corruption { .. }) => {
                tracing::warn!(
                    target: "tilldb",
                    error = %e,
                    "dropped tables not reclaimed: the catalog cannot be read, or pages are owned twice"
                );
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        if roots.is_empty() {
            return Ok(());
        }
        tracing::info!(target: "tilldb", tables = roots.len(), "reclaiming dropped tables");
        self.inner
            .graveyard
            .lock()
            .extend(roots.into_iter().map(|root| (root, 0)));
        self.reclaim_dropped()
    }

    /// Frees the pages of every dropped table that no reader can see any more (see the module
    /// doc), a bounded commit at a time, releasing the writer lock between them. Called after
    /// a commit that may have made a drop reclaimable, and at open.
    pub(super) fn reclaim_dropped(&self) -> Result<()> {
        loop {
            let horizon = self.horizon();
            let ready = self
                .inner
                .graveyard
                .lock()
                .iter()
                .find(|&(_, &dropped)| dropped <= horizon)
                .map(|(&root, _)| root);
            let Some(root) = ready else {
                return Ok(());
            };
            let mut alloc = self.inner.writer.lock();
            self.check_poison()?;
            // Another thread may have finished it while this one waited for the lock.
            if !self.inner.graveyard.lock().contains_key(&root) {
                continue;
            }
            if self.reclaim_step(&mut alloc, root)? {
                self.inner.graveyard.lock().remove(&root);
                tracing::debug!(target: "tilldb", root = root.0, "dropped table reclaimed");
            }
        }
    }

    /// One reclaim commit of the dropped tree at `root`: deletes its first `RECLAIM_KEYS`
    /// keys; when that empties it, frees the root and removes its graveyard entry. Returns
    /// true when the tree is gone. A failure poisons the database (pages may be half
    /// changed), as a failed commit does.
    /// Requires: no snapshot older than the drop.
    fn reclaim_step(&self, alloc: &mut Writer<'_>, root: PageId) -> Result<bool> {
        let inner = &self.inner;
        inner.wal.check_poison()?;
        let result = (|| {
            let before = inner.wal.end_lsn().0;
            let exclusive = inner.tree_lock.write();
            let pages = TxnPages::new(&inner.pool, &inner.data_path, **alloc, self.image_below());
            let tree = Tree::open(root);
            let keys: Vec<Vec<u8>> = tree
                .scan(
                    &pages,
                    Bound::Unbounded,
                    Bound::Unbounded,
                    Direction::Forward,
                )
                .take(RECLAIM_KEYS)
                .map(|entry| entry.map(|(key, _)| key))
                .collect::<Result<_>>()?;
            // What the tree and the catalog hold comes from the disk: where they disagree
            // with themselves the pages are damaged, an error naming the file, never a panic.
            let damaged = |what: &'static str| Error::Corruption {
                file: inner.data_path.clone(),
                offset: root.offset(inner.pool.page_bytes()),
                what,
            };
            for key in &keys {
                if !tree.delete(&pages, key)? {
                    return Err(damaged(
                        "a dropped table's tree lost a key it had just listed",
                    ));
                }
            }
            let gone = keys.len() < RECLAIM_KEYS;
            if gone {
                if tree.check(&pages)?.pages() != 1 {
                    return Err(damaged(
                        "a dropped table's empty tree is more than its root",
                    ));
                }
                pages.free(root)?;
                if !Tree::open(CATALOG_ROOT).delete(&pages, &graveyard_key(root))? {
                    return Err(damaged("a dropped table's catalog entry went missing"));
                }
            }
            drop(exclusive);
            // No reader sees the dropped tree, so the commit changes nothing a change feed
            // shows. Not waited for: a reclaim lost in a crash is done again at the next open.
            self.log_internal_commit(pages, alloc, before)?;
            Ok(gone)
        })();
        result.map_err(|e| self.poison(e))
    }
}
