//! Table lengths, kept exactly: [`Db::len_in`], `ReadTxn::len_in`, `Txn::len_in` read a
//! count, not the tree (a length was a full scan once: 361 ms at 1,000,000 rows).
//!
//! # Format (catalog entries, store header version 2)
//!
//! The count lives beside the root in each table's catalog entry, so it changes in the same
//! commit as the rows, is logged, replayed and checkpointed as any catalog change, and a
//! reader at an older snapshot sees the count of its snapshot through the overlay (the commit
//! records the entry's before-value as it records a key's):
//!
//! ```text
//! key                          value
//! table name (UTF-8, 1.. B)    root page id u64 LE | rows u64 LE      (16 bytes)
//! "" (the empty key)           root of the default table (2) | rows   (16 bytes)
//! 0xFF + root u64 LE           root u64 LE  (a dropped table awaiting reclaim, `drop.rs`)
//! ```
//!
//! A table entry of 8 bytes (the root alone) was written by a build before counts, and a
//! catalog without the empty key's entry is one too: the first open by this build counts every
//! table once and writes the entries in one commit ([`Db::count_after_open`]); an open that a
//! crash interrupts before that commit is durable counts again. Table names are never empty,
//! so the empty key cannot collide with one; every scan of names starts after it
//! ([`names_lower`]).
//!
//! A commit learns each written key's old value from the leaf it changes (for the overlay,
//! `commit::write_in_parts`; a table it creates or finds empty held none); a put of a key
//! that was absent adds one row, a delete of one that was present takes one away, and the commit's last change is each touched table's entry,
//! with the new count. A count never goes below zero (asserted).

use super::locks::{TreeChanging, TreeHeld, Writer};
use super::pages::TxnPages;
use super::{CATALOG_ROOT, DEFAULT_ROOT, Db};
use crate::Durability;
use crate::btree::{Direction, Pages, Tree};
use crate::error::{Error, Result};
use crate::page::PageId;
use crate::record::{self, Write};
use crate::wal::Lsn;
use std::collections::BTreeMap;
use std::ops::Bound;

/// Bytes of a table's catalog entry with its count.
pub(super) const ENTRY_BYTES: usize = 16;
/// Bytes of an entry written before counts (the root alone).
pub(super) const ENTRY_BYTES_V1: usize = 8;

/// The catalog key of `table`'s entry (`""`, the default table, has the empty key).
pub(super) fn key_of(table: &str) -> &[u8] {
    table.as_bytes()
}

/// The lower bound of a scan of the catalog's table names: after the default table's entry.
pub(super) fn names_lower() -> Bound<&'static [u8]> {
    Bound::Excluded(&[])
}

/// A table's catalog entry.
pub(super) fn entry(root: PageId, rows: u64) -> [u8; ENTRY_BYTES] {
    let mut out = [0u8; ENTRY_BYTES];
    out[..8].copy_from_slice(&root.0.to_le_bytes());
    out[8..].copy_from_slice(&rows.to_le_bytes());
    out
}

/// The rows a catalog entry counts; `None` for an entry written before counts. `Err(what)`
/// for a value that is no entry (the caller names the file and offset).
pub(super) fn rows_of(value: &[u8]) -> std::result::Result<Option<u64>, &'static str> {
    match value.len() {
        ENTRY_BYTES => Ok(Some(u64::from_le_bytes(
            value[8..].try_into().expect("8 bytes"),
        ))),
        ENTRY_BYTES_V1 => Ok(None),
        _ => Err("table catalog entry is neither a root nor a root and a count"),
    }
}

/// A new database's first trees: the catalog (page 1), the default table (page 2), and the
/// default table's catalog entry with its count.
pub(super) fn create_first_trees(pages: &TxnPages<'_>) -> Result<()> {
    assert_eq!(Tree::create(pages)?.root(), CATALOG_ROOT);
    assert_eq!(Tree::create(pages)?.root(), DEFAULT_ROOT);
    Tree::open(CATALOG_ROOT).put(pages, key_of(""), &entry(DEFAULT_ROOT, 0))?;
    Ok(())
}

/// Rows each table gains (or loses) in one commit.
pub(super) type Deltas = BTreeMap<String, i64>;

/// Adds one write to `deltas`: `before` is whether the key held a value before the commit,
/// `after` whether it does after.
pub(super) fn count_write(deltas: &mut Deltas, table: &str, before: bool, after: bool) {
    let delta = i64::from(after) - i64::from(before);
    if delta != 0 {
        *deltas.entry(table.to_owned()).or_insert(0) += delta;
    }
}

/// Writes each table's new count into its catalog entry, through the committing
/// transaction's `pages` (which see this commit's own catalog changes: a table it creates
/// has its entry, with count 0, by now).
pub(super) fn apply_deltas(
    pages: &TxnPages<'_>,
    deltas: &Deltas,
    _writer: &Writer<'_>,
    _tree: TreeChanging<'_>,
) -> Result<()> {
    let catalog = Tree::open(CATALOG_ROOT);
    for (table, &delta) in deltas {
        if delta == 0 {
            continue;
        }
        let damaged = |what: &'static str| Error::Corruption {
            file: pages.path().to_path_buf(),
            offset: CATALOG_ROOT.offset(pages.page_bytes()),
            what,
        };
        let value = catalog
            .get(pages, key_of(table))?
            .ok_or_else(|| damaged("a table written to has no catalog entry"))?;
        let rows = rows_of(&value)
            .map_err(damaged)?
            .ok_or_else(|| damaged("a table written to has a catalog entry without its count"))?;
        let root = u64::from_le_bytes(value[..8].try_into().expect("8 bytes"));
        let now = rows
            .checked_add_signed(delta)
            .ok_or_else(|| damaged("a table's row count would go below zero"))?;
        catalog.put(pages, key_of(table), &entry(PageId(root), now))?;
    }
    Ok(())
}

/// The rows `value` (a catalog entry read for a reader) counts, or corruption naming the
/// catalog's root page.
fn rows_in_entry(db: &Db, value: &[u8]) -> Result<u64> {
    let damaged = |what: &'static str| Error::Corruption {
        file: db.inner.data_path.clone(),
        offset: CATALOG_ROOT.offset(db.inner.pool.page_bytes()),
        what,
    };
    rows_of(value)
        .map_err(damaged)?
        .ok_or_else(|| damaged("a table's catalog entry has no count after the open counted"))
}

impl Db {
    /// The number of entries in the default table, as readers see it now: a count kept with
    /// the table (no scan).
    pub fn len(&self) -> Result<u64> {
        self.len_in("")
    }

    /// Whether the default table holds no entries.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// The number of entries in `table` (0 if it does not exist), as readers see it now: a
    /// count kept with the table (no scan), exact at every snapshot and after every crash.
    pub fn len_in(&self, table: &str) -> Result<u64> {
        self.begin_read()?.len_in(table)
    }

    /// The latest committed count of `table`, read from the tree through `pages` (the writer's
    /// view). `table` must exist.
    pub(super) fn committed_len<P: Pages>(
        &self,
        pages: &P,
        table: &str,
        _tree: TreeHeld<'_>,
    ) -> Result<u64> {
        let value = Tree::open(CATALOG_ROOT)
            .get(pages, key_of(table))?
            .ok_or_else(|| Error::Corruption {
                file: self.inner.data_path.clone(),
                offset: CATALOG_ROOT.offset(self.inner.pool.page_bytes()),
                what: "a table has no catalog entry",
            })?;
        rows_in_entry(self, &value)
    }

    /// The count of `table` at `snapshot`: its catalog entry's, and the rows buffered
    /// commits the reader sees added or removed (`txn/buffer.rs`).
    pub(super) fn len_at(&self, table: &str, snapshot: u64) -> Result<u64> {
        match self.read_at(CATALOG_ROOT, key_of(table), snapshot)? {
            Some(value) => {
                let rows = rows_in_entry(self, &value)?;
                let root = super::catalog_root_of(
                    &value,
                    &self.inner.data_path,
                    self.inner.pool.page_bytes(),
                )?;
                let buffered = self.inner.visible.buffered_rows(root.0, snapshot);
                Ok(rows
                    .checked_add_signed(buffered)
                    .expect("a table's buffered rows take away at most the rows its tree holds"))
            }
            None if table.is_empty() => Err(Error::Corruption {
                file: self.inner.data_path.clone(),
                offset: CATALOG_ROOT.offset(self.inner.pool.page_bytes()),
                what: "the catalog has no entry for the default table",
            }),
            None => Ok(0),
        }
    }

    /// Counts every table whose catalog entry has no count (a database written before
    /// counts), and writes the entries with their counts in one commit. Called at open, when
    /// no reader exists yet; does nothing when every entry has its count.
    pub(super) fn count_after_open(&self) -> Result<()> {
        let started = std::time::Instant::now();
        let mut counted = 0usize;
        self.change_catalog(|pages| {
            let catalog = Tree::open(CATALOG_ROOT);
            let mut uncounted: Vec<(Vec<u8>, PageId)> = Vec::new();
            match catalog.get(pages, key_of(""))? {
                Some(value) if rows_of(&value) != Ok(None) => {}
                _ => uncounted.push((Vec::new(), DEFAULT_ROOT)),
            }
            for item in catalog.scan(
                pages,
                names_lower(),
                super::drop::names_upper(),
                Direction::Forward,
            ) {
                let (name, value) = item?;
                if rows_of(&value) == Ok(None) {
                    let root = super::catalog_root_of(&value, pages.path(), pages.page_bytes())?;
                    uncounted.push((name, root));
                }
            }
            for (name, root) in &uncounted {
                let mut rows = 0u64;
                for item in Tree::open(*root).scan(
                    pages,
                    Bound::Unbounded,
                    Bound::Unbounded,
                    Direction::Forward,
                ) {
                    item?;
                    rows += 1;
                }
                catalog.put(pages, name, &entry(*root, rows))?;
            }
            counted = uncounted.len();
            Ok(counted > 0)
        })?;
        if counted > 0 {
            tracing::info!(
                target: "tilldb",
                tables = counted,
                ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                "counted the rows of tables written before counts"
            );
        }
        Ok(())
    }

    /// Rewrites the catalog as a build before counts wrote it: each table's entry its root
    /// alone, no entry for the default table. For tests of the upgrade.
    #[doc(hidden)]
    #[cfg(any(test, feature = "internals"))]
    pub fn write_catalog_as_before_counts(&self) -> Result<()> {
        self.change_catalog(|pages| {
            let catalog = Tree::open(CATALOG_ROOT);
            let names: Vec<(Vec<u8>, Vec<u8>)> = catalog
                .scan(
                    pages,
                    names_lower(),
                    super::drop::names_upper(),
                    Direction::Forward,
                )
                .collect::<Result<_>>()?;
            for (name, value) in names {
                catalog.put(pages, &name, &value[..ENTRY_BYTES_V1])?;
            }
            catalog.delete(pages, key_of(""))?;
            Ok(true)
        })
    }

    /// One commit of catalog changes made by `change` (which returns whether it changed
    /// anything; nothing is logged when not), with no row changes: at open, or in tests, when
    /// no reader exists. A failure poisons the database, as a failed commit does. Not waited
    /// for: what a crash loses here, the next open does again.
    fn change_catalog(&self, change: impl FnOnce(&TxnPages<'_>) -> Result<bool>) -> Result<()> {
        let mut alloc = self.inner.writer.lock();
        self.check_poison()?;
        let inner = &self.inner;
        let result = (|| {
            let before = inner.wal.end_lsn().0;
            let exclusive = inner.tree_lock.write();
            let pages = TxnPages::new(&inner.pool, &inner.data_path, *alloc, self.image_below());
            if !change(&pages)? {
                return Ok(());
            }
            drop(exclusive);
            self.log_internal_commit(pages, &mut alloc, before)?;
            Ok(())
        })();
        result.map_err(|e| self.poison(e))
    }
}

impl Db {
    /// Logs the changes `pages` holds as one commit that changes no row (reclaim, counting):
    /// with the change feed on, an empty changes section. Stamps the pages and makes the
    /// commit visible, not waited for (`Lazy`): what a crash loses, the next open does again.
    /// `before` is the log's end before the changes were made.
    /// Requires: the tree lock no longer held (its guard dropped before the call).
    pub(super) fn log_internal_commit(
        &self,
        pages: TxnPages<'_>,
        alloc: &mut Writer<'_>,
        before: u64,
    ) -> Result<Lsn> {
        let inner = &self.inner;
        let (ops, next, touched) = pages.finish()?;
        let changes = inner.options.change_feed.then(Vec::<Write<'_>>::new);
        let lsn = inner
            .wal
            .append(&record::encode(record::Part::WHOLE, next, &ops, changes))?;
        inner.pool.stamp(&touched, lsn.0, before);
        **alloc = next;
        inner.visible.committed(lsn.0, Durability::Lazy);
        Ok(lsn)
    }
}

/// Whether `root`'s tree holds `key` (for a transaction's own writes).
pub(super) fn holds<P: Pages>(pages: &P, root: PageId, key: &[u8]) -> Result<bool> {
    Ok(Tree::open(root).get(pages, key)?.is_some())
}
