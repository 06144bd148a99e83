//! Transactions. [`Txn`]: read-write, one at a time (it holds the writer lock); its writes
//! stay private until `commit`. [`ReadTxn`]: read-only, any number, each reading one snapshot.
//!
//! Every call has a form for the default table (`put`, `get`, ...) and one naming a table
//! (`put_in("orders", ...)`); `""` names the default table.

use super::pages::TxnPages;
use super::record::{self, Alloc};
use super::{CATALOG_ROOT, CATALOG_TABLE, DEFAULT_ROOT, Db, TABLE_NAME_BYTES_MAX, catalog_root_of};
use crate::Durability;
use crate::btree::{Direction, Tree};
use crate::error::{Error, Result};
use crate::page::PageId;
use parking_lot::MutexGuard;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Bound;

/// A read-write transaction. Reads see the latest state plus its own writes. Dropping it
/// without `commit` rolls it back.
pub struct Txn<'db> {
    db: &'db Db,
    alloc: MutexGuard<'db, Alloc>,
    /// (table, key) -> new value (`None`: delete).
    writes: BTreeMap<(String, Vec<u8>), Option<Vec<u8>>>,
    /// Tables this transaction drops. Drops apply before the writes, so a table dropped and
    /// then written to is a new table holding only those writes.
    dropped: BTreeSet<String>,
}

impl fmt::Debug for Txn<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Txn({} writes, {} drops)",
            self.writes.len(),
            self.dropped.len()
        )
    }
}

impl<'db> Txn<'db> {
    pub(super) fn new(db: &'db Db, alloc: MutexGuard<'db, Alloc>) -> Self {
        Txn {
            db,
            alloc,
            writes: BTreeMap::new(),
            dropped: BTreeSet::new(),
        }
    }

    /// Sets `key` to `value` in the default table.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_in("", key, value)
    }

    /// Sets `key` to `value` in `table`, creating the table at commit if it does not exist.
    pub fn put_in(&mut self, table: &str, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_sizes(table, key, Some(value))?;
        self.writes
            .insert((table.to_owned(), key.to_vec()), Some(value.to_vec()));
        Ok(())
    }

    /// Removes `key` from the default table (nothing happens if it is absent).
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.delete_in("", key)
    }

    /// Removes `key` from `table`.
    pub fn delete_in(&mut self, table: &str, key: &[u8]) -> Result<()> {
        self.check_sizes(table, key, None)?;
        self.writes.insert((table.to_owned(), key.to_vec()), None);
        Ok(())
    }

    /// Removes every key of the default table between the bounds, as this transaction sees
    /// them (its own puts included); returns how many. See [`Txn::delete_range_in`].
    pub fn delete_range(&mut self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Result<u64> {
        self.delete_range_in("", lower, upper)
    }

    /// Removes every key of `table` between the bounds, as this transaction sees them (its
    /// own puts included), atomically with the rest of the transaction; returns how many.
    /// Each key is one delete of the commit (and of the change feed), so a range too large
    /// for one commit fails at commit with [`Error::TooLarge`]: delete it in several
    /// transactions, a bounded range each.
    pub fn delete_range_in(
        &mut self,
        table: &str,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> Result<u64> {
        let doomed: Vec<Vec<u8>> = self
            .scan_in(table, lower, upper, Direction::Forward)?
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        for key in &doomed {
            self.delete_in(table, key)?;
        }
        Ok(doomed.len() as u64)
    }

    /// Drops `table` with every entry in it, atomically with the rest of the transaction;
    /// returns whether it existed as this transaction saw it. This transaction's earlier
    /// writes to it are dropped too; later ones make a new table. Readers whose snapshot began
    /// before the commit still see the table whole; its pages are given back to the free
    /// list once none is left (see `db/drop.rs`), in commits of their own.
    ///
    /// The default table (`""`) cannot be dropped (delete its keys with
    /// [`Txn::delete_range`]), and neither can a table while [`Options::change_feed`] is on
    /// (the feed has no way to say so yet: delete the table's keys with
    /// [`Txn::delete_range_in`], which the feed carries): both are
    /// [`Error::InvalidArgument`].
    ///
    /// [`Options::change_feed`]: crate::Options::change_feed
    pub fn drop_table(&mut self, table: &str) -> Result<bool> {
        if table.is_empty() {
            return Err(Error::InvalidArgument(
                "the default table cannot be dropped; delete its keys with delete_range".into(),
            ));
        }
        if self.db.inner.options.change_feed {
            return Err(Error::InvalidArgument(format!(
                "cannot drop table {table:?} while the change feed is on (the feed has no \
                 drop yet); delete its keys with delete_range_in"
            )));
        }
        self.check_sizes(table, b"", None)?;
        let existed = {
            let _shared = self.db.inner.tree_lock.read();
            self.visible_root_of(table)?.is_some()
        } || self
            .writes
            .iter()
            .any(|((t, _), v)| t == table && v.is_some());
        self.writes.retain(|(t, _), _| t != table);
        self.dropped.insert(table.to_owned());
        Ok(existed)
    }

    /// The value of `key` in the default table, this transaction's own writes included.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_in("", key)
    }

    /// The value of `key` in `table`, this transaction's own writes included.
    pub fn get_in(&self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(v) = self.writes.get(&(table.to_owned(), key.to_vec())) {
            return Ok(v.clone());
        }
        let _shared = self.db.inner.tree_lock.read();
        match self.visible_root_of(table)? {
            Some(root) => Tree::open(root).get(&self.db.read_pages(), key),
            None => Ok(None),
        }
    }

    /// The entries of the default table between the bounds, own writes included.
    pub fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.scan_in("", lower, upper, direction)
    }

    /// The entries of `table` between the bounds, own writes included, in `direction`.
    pub fn scan_in(
        &self,
        table: &str,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut merged: BTreeMap<Vec<u8>, Vec<u8>> = {
            let _shared = self.db.inner.tree_lock.read();
            match self.visible_root_of(table)? {
                Some(root) => {
                    let pages = self.db.read_pages();
                    Tree::open(root)
                        .scan(&pages, lower, upper, Direction::Forward)
                        .collect::<Result<_>>()?
                }
                None => BTreeMap::new(),
            }
        };
        for ((t, k), v) in &self.writes {
            if t != table || !std::ops::RangeBounds::contains(&(lower, upper), k.as_slice()) {
                continue;
            }
            match v {
                Some(v) => merged.insert(k.clone(), v.clone()),
                None => merged.remove(k),
            };
        }
        Ok(match direction {
            Direction::Forward => merged.into_iter().collect(),
            Direction::Backward => merged.into_iter().rev().collect(),
        })
    }

    /// Commits at the database's default durability.
    pub fn commit(self) -> Result<()> {
        let durability = self.db.inner.options.durability;
        self.commit_with(durability)
    }

    /// Commits, returning once the commit is as durable as `durability` asks. If this
    /// returns an error the commit may or may not survive a crash, and the database is
    /// poisoned until reopened (see docs/durability.md). A checkpoint this commit starts
    /// afterwards that fails does not fail the commit (it is durable by then); it poisons
    /// the database, so the next call reports it.
    pub fn commit_with(mut self, durability: Durability) -> Result<()> {
        if self.writes.is_empty() && self.dropped.is_empty() {
            return Ok(());
        }
        // A transaction too large as a whole fails alone, before any page changes: what
        // fails later (in `apply_and_log`) leaves pages half changed and must poison.
        self.check_fits()?;
        let db = self.db;
        let lsn = match self.apply_and_log(durability) {
            Ok(lsn) => lsn,
            Err(e) => return Err(db.poison(e)),
        };
        drop(self);
        db.inner
            .wal
            .wait(lsn, durability)
            .map_err(|e| db.poison(e))?;
        // Without background threads nothing else publishes what the feed may read.
        if let Some(feed) = &db.inner.feed
            && !db.inner.options.background_threads
        {
            feed.publish(db.inner.wal.durable_lsn())
                .map_err(|e| db.poison(e))?;
        }
        db.visible_lsn();
        // Outside the writer lock: the next writer goes on while pages are written back.
        if let Err(e) = db.maybe_checkpoint() {
            db.poison(e);
        }
        // Dropped tables no snapshot can see any more (this commit's own drops, or older
        // ones whose last reader has gone): their pages go back to the free list. Like a
        // checkpoint, a failure here poisons the database but not this durable commit.
        if !db.inner.graveyard.lock().is_empty() {
            let _ = db.reclaim_dropped();
        }
        Ok(())
    }

    /// Drops the writes.
    pub fn rollback(self) {}

    /// The root of `table` as this transaction sees it: `None` once it dropped it (its own
    /// later writes to the table are in `writes`, not in a tree).
    /// Requires: the tree lock, shared or exclusive.
    fn visible_root_of(&self, table: &str) -> Result<Option<PageId>> {
        if self.dropped.contains(table) {
            return Ok(None);
        }
        self.root_of(table)
    }

    /// The committed root of `table` (the writer sees the latest catalog).
    /// Requires: the tree lock, shared or exclusive.
    fn root_of(&self, table: &str) -> Result<Option<PageId>> {
        if table.is_empty() {
            return Ok(Some(DEFAULT_ROOT));
        }
        let value = Tree::open(CATALOG_ROOT).get(&self.db.read_pages(), table.as_bytes())?;
        value
            .map(|v| {
                catalog_root_of(
                    &v,
                    &self.db.inner.data_path,
                    self.db.inner.pool.page_bytes(),
                )
            })
            .transpose()
    }

    fn apply_and_log(&mut self, durability: Durability) -> Result<crate::wal::Lsn> {
        let db = self.db;
        let inner = &db.inner;
        // A log that failed in the background (the interval flusher) fails this commit before
        // it changes a page or the overlay.
        inner.wal.check_poison()?;
        let exclusive = inner.tree_lock.write();
        // Tables this commit drops that exist, with their roots.
        let mut drops: Vec<(String, PageId)> = Vec::new();
        for table in &self.dropped {
            if let Some(root) = self.root_of(table)? {
                drops.push((table.clone(), root));
            }
        }
        // Roots of the tables written to; `None` for tables this commit creates (a dropped
        // table written to is created anew).
        let mut roots: BTreeMap<String, Option<PageId>> = BTreeMap::new();
        for (table, _) in self.writes.keys() {
            if !roots.contains_key(table) {
                roots.insert(table.clone(), self.visible_root_of(table)?);
            }
        }
        // Readers may not see this commit until it is acknowledged: keep the values they
        // still need, before the pages change. The provisional lsn is above every current
        // snapshot and at most this commit's lsn. A table this commit creates is hidden by
        // its catalog entry; its keys need no entries.
        // The log end now, under the writer lock: this commit's record starts at or after it.
        let before = inner.wal.end_lsn().0;
        let provisional = before + 1;
        {
            let pages = db.read_pages();
            let mut befores = Vec::new();
            // A dropped table's catalog entry, for readers that still see it (and, if this
            // commit creates it anew, the one entry that hides the new table from them).
            for (table, root) in &drops {
                let entry = root.0.to_le_bytes().to_vec();
                befores.push((CATALOG_TABLE, table.as_bytes().to_vec(), Some(entry)));
            }
            for (table, root) in &roots {
                if root.is_none() && !drops.iter().any(|(t, _)| t == table) {
                    befores.push((CATALOG_TABLE, table.as_bytes().to_vec(), None));
                }
            }
            for (table, key) in self.writes.keys() {
                if let Some(root) = roots[table] {
                    befores.push((root.0, key.clone(), Tree::open(root).get(&pages, key)?));
                }
            }
            let mut reads = inner.reads.lock();
            for (table_id, key, before) in befores {
                reads.overlay.record(table_id, &key, provisional, before);
            }
        }
        let pages = TxnPages::new(&inner.pool, &inner.data_path, *self.alloc, db.image_below());
        super::drop::apply_drops(&pages, &drops)?;
        for (table, root) in &mut roots {
            if root.is_none() {
                let tree = Tree::create(&pages)?;
                Tree::open(CATALOG_ROOT).put(
                    &pages,
                    table.as_bytes(),
                    &tree.root().0.to_le_bytes(),
                )?;
                *root = Some(tree.root());
            }
        }
        for ((table, key), value) in &self.writes {
            let tree = Tree::open(roots[table].expect("every table has a root by now"));
            match value {
                Some(v) => {
                    tree.put(&pages, key, v)?;
                }
                None => {
                    tree.delete(&pages, key)?;
                }
            }
        }
        // The pages are whole again (no node half split) and the overlay hides this commit
        // from readers until it is acknowledged: readers may go on while the record is
        // appended, which can wait for a log segment to be prepared.
        drop(exclusive);
        let (ops, alloc, touched) = pages.finish();
        let changes = inner.options.change_feed.then(|| self.writes.iter());
        let lsn = inner.wal.append(&record::encode(alloc, &ops, changes))?;
        assert!(
            lsn.0 >= provisional,
            "commit lsn {lsn} below its provisional lsn {provisional}"
        );
        inner.pool.stamp(&touched, lsn.0, before);
        *self.alloc = alloc;
        inner.reads.lock().visibility.committed(lsn.0, durability);
        if !drops.is_empty() {
            let mut graveyard = inner.graveyard.lock();
            for (_, root) in drops {
                let earlier = graveyard.insert(root, lsn.0);
                assert!(earlier.is_none(), "tree {root} dropped twice");
            }
        }
        Ok(lsn)
    }

    /// Refuses, with `TooLarge`, a transaction that certainly cannot commit: its keys and
    /// values (every byte of which its one log record holds) beyond what a log record can
    /// hold, or its values' overflow pages (each held in the cache, unlogged, until the
    /// record is appended) beyond the cache's frames. Each value and key passed its own limit
    /// at `put`; this is their sum. Cheaper bounds only: a transaction under them can still
    /// fail in `apply_and_log` (page images and splits add to both), and that poisons.
    fn check_fits(&self) -> Result<()> {
        let inner = &self.db.inner;
        let limits = crate::btree::Limits::new(inner.pool.page_bytes());
        let mut logged = 0u64;
        let mut overflow_pages = 0u64;
        for ((table, key), value) in &self.writes {
            let value_bytes = value.as_ref().map_or(0, Vec::len);
            logged += (table.len() + key.len() + value_bytes) as u64;
            if inner.options.change_feed {
                // The changes section holds them again.
                logged += (1 + 2 + 4 + 4 + table.len() + key.len() + value_bytes) as u64;
            }
            if value.is_some() && !limits.is_inline(key.len(), value_bytes) {
                overflow_pages += value_bytes.div_ceil(limits.overflow_data_bytes) as u64;
            }
        }
        let log_max = inner.wal.max_payload_bytes() as u64;
        if logged > log_max {
            return Err(Error::TooLarge {
                what: "transaction (its keys and values, which one log record holds)",
                bytes: logged,
                max: log_max,
            });
        }
        let page_bytes = u64::from(inner.pool.page_bytes());
        let frames = inner.pool.capacity() as u64;
        if overflow_pages > frames {
            return Err(Error::TooLarge {
                what: "transaction (the pages of its values, which the cache holds until \
                       commit; raise cache_bytes)",
                bytes: overflow_pages * page_bytes,
                max: frames * page_bytes,
            });
        }
        Ok(())
    }

    fn check_sizes(&self, table: &str, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        if table.len() > TABLE_NAME_BYTES_MAX {
            return Err(Error::TooLarge {
                what: "table name",
                bytes: table.len() as u64,
                max: TABLE_NAME_BYTES_MAX as u64,
            });
        }
        let limits = crate::btree::Limits::new(self.db.inner.pool.page_bytes());
        if key.len() > limits.key_bytes_max {
            return Err(Error::TooLarge {
                what: "key",
                bytes: key.len() as u64,
                max: limits.key_bytes_max as u64,
            });
        }
        if let Some(v) = value {
            let max =
                crate::btree::VALUE_BYTES_MAX.min(self.db.inner.wal.max_payload_bytes() as u64 / 2);
            if v.len() as u64 > max {
                return Err(Error::TooLarge {
                    what: "value",
                    bytes: v.len() as u64,
                    max,
                });
            }
        }
        Ok(())
    }
}

/// A read-only transaction: every read sees the same acknowledged state.
pub struct ReadTxn<'db> {
    db: &'db Db,
    snapshot: u64,
}

impl fmt::Debug for ReadTxn<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ReadTxn(at {})", self.snapshot)
    }
}

impl<'db> ReadTxn<'db> {
    pub(super) fn new(db: &'db Db, snapshot: u64) -> Self {
        ReadTxn { db, snapshot }
    }

    pub(super) fn db(&self) -> &'db Db {
        self.db
    }

    pub(super) fn snapshot(&self) -> u64 {
        self.snapshot
    }

    /// The value of `key` in the default table, in this snapshot.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_in("", key)
    }

    /// The value of `key` in `table`, in this snapshot.
    pub fn get_in(&self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.db.table_root(table, self.snapshot)? {
            Some(root) => self.db.read_at(root, key, self.snapshot),
            None => Ok(None),
        }
    }

    /// The entries of the default table between the bounds, in this snapshot.
    pub fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.scan_in("", lower, upper, direction)
    }

    /// The entries of `table` between the bounds, in this snapshot, in `direction`.
    pub fn scan_in(
        &self,
        table: &str,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        match self.db.table_root(table, self.snapshot)? {
            Some(root) => self
                .db
                .scan_at(root, lower, upper, direction, self.snapshot),
            None => Ok(Vec::new()),
        }
    }
}

impl Drop for ReadTxn<'_> {
    fn drop(&mut self) {
        self.db.snapshot_release(self.snapshot);
    }
}
