//! Transactions. [`Txn`]: read-write, one at a time (it holds the writer lock); its writes
//! stay private until `commit`. [`ReadTxn`]: read-only, any number, each reading one snapshot.

use super::pages::TxnPages;
use super::record::{self, Alloc};
use super::{DEFAULT_ROOT, DEFAULT_TABLE, Db};
use crate::Durability;
use crate::btree::{Direction, Tree};
use crate::error::Result;
use parking_lot::MutexGuard;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Bound;

/// A read-write transaction. Reads see the latest state plus its own writes. Dropping it
/// without `commit` rolls it back.
pub struct Txn<'db> {
    db: &'db Db,
    alloc: MutexGuard<'db, Alloc>,
    /// Key -> new value (`None`: delete).
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl fmt::Debug for Txn<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Txn({} writes)", self.writes.len())
    }
}

impl<'db> Txn<'db> {
    pub(super) fn new(db: &'db Db, alloc: MutexGuard<'db, Alloc>) -> Self {
        Txn {
            db,
            alloc,
            writes: BTreeMap::new(),
        }
    }

    /// Sets `key` to `value`.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_sizes(key, Some(value))?;
        self.writes.insert(key.to_vec(), Some(value.to_vec()));
        Ok(())
    }

    /// Removes `key` (nothing happens if it is absent).
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.check_sizes(key, None)?;
        self.writes.insert(key.to_vec(), None);
        Ok(())
    }

    /// The value of `key`, this transaction's own writes included.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(v) = self.writes.get(key) {
            return Ok(v.clone());
        }
        let _shared = self.db.inner.tree_lock.read();
        Tree::open(DEFAULT_ROOT).get(&self.db.read_pages(), key)
    }

    /// The entries between the bounds, this transaction's writes included, in `direction`.
    pub fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut merged: BTreeMap<Vec<u8>, Vec<u8>> = {
            let _shared = self.db.inner.tree_lock.read();
            let pages = self.db.read_pages();
            Tree::open(DEFAULT_ROOT)
                .scan(&pages, lower, upper, Direction::Forward)
                .collect::<Result<_>>()?
        };
        for (k, v) in self.writes.range::<[u8], _>((lower, upper)) {
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
    /// poisoned until reopened (see docs/durability.md).
    pub fn commit_with(mut self, durability: Durability) -> Result<()> {
        if self.writes.is_empty() {
            return Ok(());
        }
        let db = self.db;
        let lsn = match self.apply_and_log(durability) {
            Ok(lsn) => lsn,
            Err(e) => return Err(db.poison(e)),
        };
        let alloc = *self.alloc;
        let checkpoint = db.maybe_checkpoint(alloc);
        drop(self);
        db.inner.wal.wait(lsn, durability)?;
        db.visible_lsn();
        checkpoint
    }

    /// Drops the writes.
    pub fn rollback(self) {}

    fn apply_and_log(&mut self, durability: Durability) -> Result<crate::wal::Lsn> {
        let db = self.db;
        let inner = &db.inner;
        let tree = Tree::open(DEFAULT_ROOT);
        let _exclusive = inner.tree_lock.write();
        // Readers may not see this commit until it is acknowledged: keep the values they
        // still need, before the pages change. The provisional lsn is above every current
        // snapshot and at most this commit's lsn.
        let provisional = inner.wal.end_lsn().0 + 1;
        {
            let pages = db.read_pages();
            let befores: Vec<(&Vec<u8>, Option<Vec<u8>>)> = self
                .writes
                .keys()
                .map(|k| Ok((k, tree.get(&pages, k)?)))
                .collect::<Result<_>>()?;
            let mut reads = inner.reads.lock();
            for (key, before) in befores {
                reads
                    .overlay
                    .record(DEFAULT_TABLE, key, provisional, before);
            }
        }
        let pages = TxnPages::new(&inner.pool, &inner.data_path, *self.alloc);
        for (key, value) in &self.writes {
            match value {
                Some(v) => {
                    tree.put(&pages, key, v)?;
                }
                None => {
                    tree.delete(&pages, key)?;
                }
            }
        }
        let (ops, alloc, touched) = pages.finish();
        let lsn = inner.wal.append(&record::encode(alloc, &ops))?;
        assert!(
            lsn.0 >= provisional,
            "commit lsn {lsn} below its provisional lsn {provisional}"
        );
        inner.pool.stamp(&touched, lsn.0);
        *self.alloc = alloc;
        inner.reads.lock().visibility.committed(lsn.0, durability);
        Ok(lsn)
    }

    fn check_sizes(&self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        let limits = crate::btree::Limits::new(self.db.inner.pool.page_bytes());
        if key.len() > limits.key_bytes_max {
            return Err(crate::Error::TooLarge {
                what: "key",
                bytes: key.len() as u64,
                max: limits.key_bytes_max as u64,
            });
        }
        if let Some(v) = value {
            let max =
                crate::btree::VALUE_BYTES_MAX.min(self.db.inner.wal.max_payload_bytes() as u64 / 2);
            if v.len() as u64 > max {
                return Err(crate::Error::TooLarge {
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

    /// The value of `key` in this snapshot.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.db.read_at(key, self.snapshot)
    }

    /// The entries between the bounds in this snapshot, in `direction`.
    pub fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.db.scan_at(lower, upper, direction, self.snapshot)
    }
}

impl Drop for ReadTxn<'_> {
    fn drop(&mut self) {
        self.db.snapshot_release(self.snapshot);
    }
}
