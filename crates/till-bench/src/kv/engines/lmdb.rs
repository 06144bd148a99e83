//! LMDB through heed, as `till bench peers` sets it up: LMDB's durable defaults (none of
//! `NO_SYNC`, `NO_META_SYNC`, `MAP_ASYNC`, `WRITE_MAP`), so a `Sync` commit writes its dirty
//! pages, fdatasyncs the data file, then writes the meta page through an `O_DSYNC`
//! descriptor. For no-flush commits the environment's `NO_SYNC` flag is set for the row and
//! cleared after it: a commit then writes its pages to the OS and flushes nothing (the next
//! synced commit flushes the whole file). LMDB has no cache of its own: reads go through the
//! memory map to the OS page cache. Each reading thread has its own read transaction. The
//! length is `mdb_stat`'s count (kept in the tree, O(1)); compaction is a compacting copy
//! (`mdb_env_copy2` with `MDB_CP_COMPACT`) into a new directory.
//!
//! heed's `open` and `set_flags` are `unsafe`: a departure from "unsafe lives only in `io`",
//! confined to the calls below, each with its reason.

use super::super::workload::{Key, value_of};
use super::{BoxError, Commit, Compacted, KvReader, KvStore};
use heed::types::Bytes;
use heed::{
    CommitOrAbort, CompactionOption, Database, Env, EnvFlags, EnvOpenOptions, FlagSetMode,
    PutFlags, RoTxn, WithTls,
};
use std::ops::Bound;
use std::path::Path;

pub const CONFIGURATION: &str = "heed's defaults, no NO_SYNC, NO_META_SYNC, MAP_ASYNC or \
     WRITE_MAP: each commit writes its dirty pages, fdatasyncs the data file, then writes the \
     meta page through an O_DSYNC descriptor (two flushes). No cache of its own (the OS page \
     cache, through the map). Length: the tree's count (mdb_stat, O(1)). Compaction: a \
     compacting copy (MDB_CP_COMPACT) into a new directory.";
pub const NO_FLUSH: &str = "the environment's NO_SYNC flag, set for the row: a commit writes \
     its pages to the OS and flushes nothing (the next synced commit flushes the file).";

/// Address space reserved for the map: far more than a run writes (the file grows as used).
const MAP_BYTES: usize = 64 << 30;

struct LmdbStore {
    env: Env,
    table: Database<'static, Bytes, Bytes>,
    /// Whether `NO_SYNC` is set on the environment.
    no_sync: bool,
}

struct LmdbReader<'a> {
    table: Database<'static, Bytes, Bytes>,
    txn: RoTxn<'a, WithTls>,
}

pub fn open(dir: &Path) -> Result<Box<dyn KvStore>, BoxError> {
    let mut options = EnvOpenOptions::new();
    options.map_size(MAP_BYTES);
    // SAFETY: `dir` is this engine's own directory of the run; nothing else in this process
    // or outside it opens or changes its files while the environment is open, and the
    // environment is opened once at a time (closed, and waited for, before a reopen).
    let env = unsafe { options.open(dir)? };
    let wtxn = env.write_txn()?;
    let table = env
        .create_databases_and_commit(wtxn, |opener, wtxn| -> Result<_, heed::Error> {
            let table = opener.create_database::<Bytes, Bytes>(wtxn, None)?;
            Ok(CommitOrAbort::<_, ()>::Commit(table))
        })?
        .unwrap_commit();
    Ok(Box::new(LmdbStore {
        env,
        table,
        no_sync: false,
    }))
}

impl LmdbStore {
    /// Sets or clears `NO_SYNC` for `commit`, then runs `op` on each key in one transaction.
    fn write(
        &mut self,
        keys: &[Key],
        commit: Commit,
        op: impl Fn(&Self, &mut heed::RwTxn<'_>, &Key) -> heed::Result<()>,
    ) -> Result<(), BoxError> {
        self.set_no_sync(commit == Commit::NoFlush)?;
        let mut txn = self.env.write_txn()?;
        for key in keys {
            op(self, &mut txn, key)?;
        }
        txn.commit()?;
        Ok(())
    }

    /// Sets or clears the environment's `NO_SYNC` flag.
    fn set_no_sync(&mut self, no_sync: bool) -> Result<(), BoxError> {
        if no_sync != self.no_sync {
            let mode = if no_sync {
                FlagSetMode::Enable
            } else {
                FlagSetMode::Disable
            };
            // SAFETY: `&mut self`: no other thread uses the environment (readers borrow the
            // store), so one thread sets flags at a time as LMDB requires; NO_SYNC gives up
            // durability, which is what this row asks for, and is cleared before a synced
            // commit.
            unsafe { self.env.set_flags(EnvFlags::NO_SYNC, mode)? };
            self.no_sync = no_sync;
        }
        Ok(())
    }
}

impl KvStore for LmdbStore {
    fn put_txn(&mut self, keys: &[Key], commit: Commit) -> Result<(), BoxError> {
        self.write(keys, commit, |store, txn, key| {
            store.table.put(txn, key, &value_of(key))
        })
    }

    fn remove_txn(&mut self, keys: &[Key], commit: Commit) -> Result<(), BoxError> {
        self.write(keys, commit, |store, txn, key| {
            store.table.delete(txn, key).map(|_| ())
        })
    }

    fn pop_txn(&mut self, pops: usize) -> Result<usize, BoxError> {
        self.set_no_sync(false)?;
        let mut txn = self.env.write_txn()?;
        let mut taken = 0;
        for i in 0..pops {
            let end = if i % 2 == 0 {
                self.table.first(&txn)?
            } else {
                self.table.last(&txn)?
            };
            let Some((key, value)) = end else { continue };
            assert!(!value.is_empty(), "an empty value");
            let key = key.to_vec();
            self.table.delete(&mut txn, &key)?;
            taken += 1;
        }
        txn.commit()?;
        Ok(taken)
    }

    fn retain_txn(&mut self, keep: fn(&[u8]) -> bool) -> Result<u64, BoxError> {
        self.set_no_sync(false)?;
        let mut txn = self.env.write_txn()?;
        let mut removed = 0;
        {
            let mut entries = self.table.iter_mut(&mut txn)?;
            while let Some(entry) = entries.next() {
                let (key, _) = entry?;
                if !keep(key) {
                    // SAFETY: no reference into the database outlives this step: the key was
                    // looked at above and is not used after the delete.
                    unsafe { entries.del_current()? };
                    removed += 1;
                }
            }
        }
        txn.commit()?;
        Ok(removed)
    }

    fn extract_txn(
        &mut self,
        from: &[u8],
        to: &[u8],
        take: fn(&[u8]) -> bool,
    ) -> Result<u64, BoxError> {
        self.set_no_sync(false)?;
        let mut txn = self.env.write_txn()?;
        let mut taken = 0;
        {
            let bounds = (Bound::Included(from), Bound::Excluded(to));
            let mut entries = self.table.range_mut(&mut txn, &bounds)?;
            while let Some(entry) = entries.next() {
                let (key, value) = entry?;
                if take(key) {
                    assert!(!value.is_empty(), "an empty value");
                    // SAFETY: as in `retain_txn`: the entry is not used after the delete.
                    unsafe { entries.del_current()? };
                    taken += 1;
                }
            }
        }
        txn.commit()?;
        Ok(taken)
    }

    fn append_txn(&mut self, keys: &[Key]) -> Result<(), BoxError> {
        self.set_no_sync(false)?;
        let mut txn = self.env.write_txn()?;
        for key in keys {
            self.table
                .put_with_flags(&mut txn, PutFlags::APPEND, key, &value_of(key))?;
        }
        txn.commit()?;
        Ok(())
    }

    fn reader(&self) -> Result<Box<dyn KvReader + '_>, BoxError> {
        Ok(Box::new(LmdbReader {
            table: self.table,
            txn: self.env.read_txn()?,
        }))
    }

    fn count_entries(&self) -> Result<u64, BoxError> {
        let txn = self.env.read_txn()?;
        Ok(self.table.len(&txn)?)
    }

    fn compact(&mut self, copy_dir: &Path) -> Result<Compacted, BoxError> {
        std::fs::create_dir(copy_dir)?;
        drop(
            self.env
                .copy_to_path(copy_dir.join("data.mdb"), CompactionOption::Enabled)?,
        );
        Ok(Compacted::Copy)
    }

    fn close(self: Box<Self>) -> Result<(), BoxError> {
        let LmdbStore {
            env,
            table: _,
            no_sync,
        } = *self;
        if no_sync {
            env.force_sync()?;
        }
        env.prepare_for_closing().wait();
        Ok(())
    }
}

impl KvReader for LmdbReader<'_> {
    fn get(&mut self, key: &[u8]) -> Result<Option<usize>, BoxError> {
        Ok(self.table.get(&self.txn, key)?.map(<[u8]>::len))
    }

    fn range(&mut self, from: &[u8], count: usize) -> Result<usize, BoxError> {
        let bounds = (Bound::Included(from), Bound::Unbounded);
        let mut read = 0;
        for entry in self.table.range(&self.txn, &bounds)?.take(count) {
            let (key, value) = entry?;
            assert!(!key.is_empty() && !value.is_empty(), "an empty entry");
            read += 1;
        }
        Ok(read)
    }
}
