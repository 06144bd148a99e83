//! Transactions. [`Txn`]: read-write; its writes stay private until `commit`. It takes the
//! writer lock at its first read (so what it read stays as it read it until it commits) or,
//! if it only writes, commits through the commit queue (`commit.rs`): read-write
//! transactions are serializable, one applied at a time. [`ReadTxn`]: read-only, any number,
//! each reading one snapshot.
//!
//! Every call has a form for the default table (`put`, `get`, ...) and one naming a table
//! (`put_in("orders", ...)`); `""` names the default table.

mod edges;
mod range;

pub use range::TxnRange;

use super::commit::{self, Changes};
use super::locks::{TreeHeld, Writer};
use super::write_set::WriteSet;
use super::{Db, TABLE_NAME_BYTES_MAX};
use crate::Durability;
use crate::btree::{Direction, Tree};
use crate::error::{Error, Result};
use crate::page::PageId;
use std::collections::BTreeSet;
use std::fmt;
use std::ops::Bound;
use std::sync::Arc;

/// A read-write transaction. Reads see the latest state plus its own writes; the first read
/// takes the writer lock (another transaction's first read then waits until this one ends),
/// so nothing it read changes before it commits. Writes alone take no lock until commit.
/// Dropping it without `commit` rolls it back.
pub struct Txn<'db> {
    db: &'db Db,
    /// The writer lock, once a read took it.
    alloc: Option<Writer<'db>>,
    writes: WriteSet,
    /// Tables dropped (`Changes::dropped`).
    dropped: BTreeSet<String>,
    /// Where each table's first and last keys are known to lie (`range.rs`).
    edges: edges::Edges,
}

impl fmt::Debug for Txn<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Txn({} writes, {} drops)",
            self.writes.len_upper(),
            self.dropped.len()
        )
    }
}

impl<'db> Txn<'db> {
    pub(super) fn new(db: &'db Db) -> Self {
        Txn {
            db,
            alloc: None,
            writes: WriteSet::spilling(Arc::clone(&db.inner.spill_to)),
            dropped: BTreeSet::new(),
            edges: edges::Edges::default(),
        }
    }

    /// Takes the writer lock unless this transaction holds it: before its first read. Drains
    /// the write buffer then (`commit/buffer.rs`): while this transaction holds the lock no
    /// commit is buffered, so its reads find the tree current.
    fn latch(&mut self) -> Result<()> {
        if self.alloc.is_none() {
            // Most of a large buffer in chunks first, readers and commits between them; the
            // rest (what came meanwhile) whole under the lock this transaction keeps.
            if self.db.inner.visible.buffer_redo_floor().is_some() {
                commit::drain_in_chunks(self.db, commit::IDLE_CHUNK_BYTES)?;
            }
            let mut alloc = self.db.inner.writer.lock();
            // Under the lock: a commit that failed while this one waited poisoned the
            // database, and may have left its pages and overlay half changed.
            self.db.check_poison()?;
            let unwinding = commit::PoisonOnUnwind::new(self.db);
            let drained = commit::drain(self.db, &mut alloc).map_err(|e| self.db.poison(e));
            unwinding.disarm();
            drained?;
            self.alloc = Some(alloc);
        }
        Ok(())
    }

    /// Sets `key` to `value` in the default table.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_in("", key, value)
    }

    /// Sets `key` to `value` in `table`, creating the table at commit if it does not exist.
    pub fn put_in(&mut self, table: &str, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_sizes(table, key, Some(value))?;
        self.writes.put(table, key, Some(value))?;
        self.edges.put(table, key);
        Ok(())
    }

    /// Removes `key` from the default table (nothing happens if it is absent).
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.delete_in("", key)
    }

    /// Removes `key` from `table`.
    pub fn delete_in(&mut self, table: &str, key: &[u8]) -> Result<()> {
        self.check_sizes(table, key, None)?;
        self.writes.put(table, key, None)?;
        self.edges.delete(table, key);
        Ok(())
    }

    /// Removes every key of the default table between the bounds, as this transaction sees
    /// them (its own puts included); returns how many. See [`Txn::delete_range_in`].
    pub fn delete_range(&mut self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Result<u64> {
        self.delete_range_in("", lower, upper)
    }

    /// Removes every key of `table` between the bounds, as this transaction sees them (its
    /// own puts included), atomically with the rest of the transaction; returns how many.
    /// Each key is one delete of the commit (and of the change feed); a range of any size
    /// commits (in parts when it must). The range is read lazily and removed a batch of keys
    /// at a time (see [`Txn::retain_in`]).
    pub fn delete_range_in(
        &mut self,
        table: &str,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> Result<u64> {
        self.retain_in(table, lower, upper, |_, _| false)
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
        self.latch()?;
        let existed = {
            let shared = self.db.inner.tree_lock.read();
            self.visible_root_of(table, shared.held())?.is_some()
        };
        // Its writes go: a put among them made it exist for this transaction.
        let written = self.writes.remove_table(table)?;
        self.dropped.insert(table.to_owned());
        self.edges.forget(table);
        Ok(existed || written)
    }

    /// The value of `key` in the default table, this transaction's own writes included. A
    /// read of the tree takes the writer lock if this transaction does not hold it yet.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_in("", key)
    }

    /// The value of `key` in `table`, this transaction's own writes included (takes the
    /// writer lock as [`Txn::get`] does).
    pub fn get_in(&mut self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(v) = self.writes.get(table, key)? {
            return Ok(v.map(<[u8]>::to_vec));
        }
        self.latch()?;
        let shared = self.db.inner.tree_lock.read();
        match self.visible_root_of(table, shared.held())? {
            Some(root) => Tree::open(root).get(&self.db.read_pages(), key),
            None => Ok(None),
        }
    }

    /// The entries of the default table between the bounds, own writes included.
    pub fn scan(
        &mut self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.scan_in("", lower, upper, direction)
    }

    /// The entries of `table` between the bounds, own writes included, in `direction`,
    /// collected: [`Txn::range_in`] reads them lazily.
    pub fn scan_in(
        &mut self,
        table: &str,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.range_in(table, lower, upper, direction)?.collect()
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
        // No size check here: a transaction of any size commits, in parts when it must
        // (`commit::apply`); each key and value passed its own limit at `put`.
        let db = self.db;
        let changes = Changes {
            writes: std::mem::take(&mut self.writes).seal(),
            dropped: std::mem::take(&mut self.dropped),
            drain: commit::Drains::No,
        };
        let lsn = match self.alloc.take() {
            // It read: it holds the writer lock, and applies its own commit under it.
            Some(mut alloc) => {
                // Poisoned before the lock is released: a writer waiting for it checks the
                // poison under it, and must not build on pages this commit half changed. On
                // a panic too: the guard, made after the lock, drops before it.
                let unwinding = commit::PoisonOnUnwind::new(db);
                let applied =
                    commit::apply(db, &mut alloc, &changes, durability).map_err(|e| db.poison(e));
                unwinding.disarm();
                drop(alloc);
                applied?
            }
            // It only wrote: through the commit queue.
            None => commit::commit_queued(db, changes, durability)?,
        };
        drop(self);
        db.inner
            .wal
            .wait(lsn, durability)
            .map_err(|e| db.poison(e))?;
        // What the feed and read-only handles may read. Without background threads nothing
        // else publishes it. With them the publisher thread does every 2 ms, but a `Sync`
        // commit publishes before it returns too: a handle opened after it returned (another
        // process's `till get`) sees it. Once per flush: a commit of a flush already
        // published finds nothing to write.
        let background = db.inner.options.background_threads;
        let sync =
            durability == Durability::Sync && !crate::mutants::active("sync-commit-unpublished");
        if !background || sync {
            let mut published = Ok(());
            if let Some(feed) = &db.inner.feed {
                published = feed.publish(db.inner.wal.durable_lsn());
            }
            if let Some(gate) = &db.inner.gate {
                published = published.and_then(|()| gate.publish());
            }
            // With the publisher thread a failed write is retried there (readers see less
            // meanwhile); without it, it stops the database as a failed write does.
            if !background {
                published.map_err(|e| db.poison(e))?;
            }
        }
        db.visible_through(lsn.0);
        // Outside the writer lock: the next writer goes on while pages are written back (by
        // the checkpoint thread, which this wakes, or here without background threads).
        if let Err(e) = db.maybe_checkpoint(lsn) {
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
    fn visible_root_of(&self, table: &str, tree: TreeHeld<'_>) -> Result<Option<PageId>> {
        if self.dropped.contains(table) {
            return Ok(None);
        }
        commit::root_of(self.db, table, tree)
    }

    /// [`Txn::len_in`]: the latest committed count (this transaction holds the writer lock
    /// once it reads, so nothing commits meanwhile), plus each own write's change to it.
    pub(super) fn committed_len_and_own_delta(&mut self, table: &str) -> Result<u64> {
        self.latch()?;
        let shared = self.db.inner.tree_lock.read();
        let pages = self.db.read_pages();
        let root = self.visible_root_of(table, shared.held())?;
        let committed = match root {
            Some(_) => self.db.committed_len(&pages, table, shared.held())?,
            None => 0,
        };
        let mut deltas = super::counts::Deltas::new();
        let mut own = self.writes.table(table)?;
        while let Some(write) = own.next()? {
            let before = match root {
                Some(root) => super::counts::holds(&pages, root, write.key)?,
                None => false,
            };
            super::counts::count_write(&mut deltas, table, before, write.value.is_some());
        }
        let delta = deltas.get(table).copied().unwrap_or(0);
        // Below zero only when the count on disk is damaged (it counts fewer rows than the
        // tree holds): an error naming the catalog, never a panic.
        committed
            .checked_add_signed(delta)
            .ok_or_else(|| Error::Corruption {
                file: self.db.inner.data_path.clone(),
                offset: super::CATALOG_ROOT.offset(self.db.inner.pool.page_bytes()),
                what: "a table's row count is below the rows its tree holds",
            })
    }

    fn check_sizes(&self, table: &str, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        if table.len() > TABLE_NAME_BYTES_MAX {
            return Err(Error::TooLarge {
                what: "table name",
                bytes: table.len() as u64,
                max: TABLE_NAME_BYTES_MAX as u64,
            });
        }
        let limits = crate::btree::Limits::of(self.db.inner.pool.format());
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
            // A value's overflow pages are changed by one write, so the cache holds them all
            // (unlogged) until its part is logged: at most half the cache, the rest left for
            // the part before it and the tree.
            let frames = self.db.inner.pool.capacity() as u64;
            if !limits.is_inline(key.len(), v.len())
                && (v.len() as u64).div_ceil(limits.overflow_data_bytes as u64) > frames / 2
            {
                return Err(Error::TooLarge {
                    what: "value (its overflow pages, which the cache holds until they are \
                           logged: at most half of cache_bytes)",
                    bytes: v.len() as u64,
                    max: frames / 2 * limits.overflow_data_bytes as u64,
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

    /// Calls `f` with the value of `key` in the default table, in this snapshot, and returns
    /// what it returns (`None`, `f` not called, when the key is absent). The value is lent
    /// where it lies, in its page (an overflow value in one buffer), not copied into a `Vec`
    /// as [`ReadTxn::get`] does. `f` runs while the page is pinned and the tree is locked for
    /// reading: it should be short, and must not call into the database (a commit from it
    /// would wait for itself).
    pub fn get_with<R>(&self, key: &[u8], f: impl FnOnce(&[u8]) -> R) -> Result<Option<R>> {
        self.get_in_with("", key, f)
    }

    /// [`ReadTxn::get_with`] in `table`.
    pub fn get_in_with<R>(
        &self,
        table: &str,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>> {
        match self.db.table_root(table, self.snapshot)? {
            Some(root) => self.db.read_at_with(root, key, self.snapshot, f),
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

// Table lengths (`counts.rs` keeps them).
impl ReadTxn<'_> {
    /// The number of entries in the default table in this snapshot (a count, no scan).
    pub fn len(&self) -> Result<u64> {
        self.len_in("")
    }

    /// Whether the default table holds no entries in this snapshot.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// The number of entries in `table` in this snapshot (0 if it does not exist there).
    pub fn len_in(&self, table: &str) -> Result<u64> {
        self.db().len_at(table, self.snapshot())
    }
}

impl Txn<'_> {
    /// The number of entries in the default table, this transaction's own writes included.
    pub fn len(&mut self) -> Result<u64> {
        self.len_in("")
    }

    /// Whether the default table holds no entries, this transaction's own writes included.
    pub fn is_empty(&mut self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// The number of entries in `table`, this transaction's own writes included: the
    /// committed count, plus a look-up of each key this transaction wrote to the table (the
    /// cost grows with its own writes, not with the table). Takes the writer lock as
    /// [`Txn::get`] does.
    pub fn len_in(&mut self, table: &str) -> Result<u64> {
        self.committed_len_and_own_delta(table)
    }
}
