//! redb, as `till bench peers` sets it up: `Sync` transactions commit with
//! `Durability::Immediate` (the file is synced, `File::sync_data`, before `commit` returns),
//! no-flush ones with `Durability::None` (not persisted until a later `Immediate` commit).
//! The cache is `Builder::set_cache_size(--cache-bytes)`. Each reading thread has its own
//! read transaction. The length is the table's `len` (redb keeps the count in the tree);
//! compaction is `Database::compact`, in place, repeated until it reports nothing more.

use super::super::workload::{Key, value_of};
use super::{BoxError, Commit, Compacted, KvReader, KvStore};
use ::redb::{
    Builder, Database, Durability, ReadOnlyTable, ReadableDatabase, ReadableTableMetadata,
    TableDefinition, WriteTransaction,
};
use std::path::Path;

pub const CONFIGURATION: &str = "Durability::Immediate on every write transaction: commit \
     returns after the file is synced (File::sync_data, fdatasync). set_cache_size = \
     --cache-bytes. Length: the table's len (a count kept in the tree). Compaction: \
     Database::compact, in place, until it reports nothing more.";
pub const NO_FLUSH: &str = "Durability::None: commit returns without syncing; the data is \
     persisted by a later Immediate commit.";

const TABLE: TableDefinition<'static, &[u8], &[u8]> = TableDefinition::new("kv");
/// Most `Database::compact` passes: each moves pages down; a few reach the fixed point.
const COMPACT_PASSES_MAX: usize = 64;

struct RedbStore {
    db: Database,
}

struct RedbReader {
    table: ReadOnlyTable<&'static [u8], &'static [u8]>,
}

pub fn open(dir: &Path, cache_bytes: u64) -> Result<Box<dyn KvStore>, BoxError> {
    let db = Builder::new()
        .set_cache_size(usize::try_from(cache_bytes)?)
        .create(dir.join("redb.db"))?;
    // Create the table up front, so every timed transaction only writes.
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::Immediate)?;
    txn.open_table(TABLE)?;
    txn.commit()?;
    Ok(Box::new(RedbStore { db }))
}

impl RedbStore {
    fn begin(&self, commit: Commit) -> Result<WriteTransaction, BoxError> {
        let mut txn = self.db.begin_write()?;
        txn.set_durability(match commit {
            Commit::Sync => Durability::Immediate,
            Commit::NoFlush => Durability::None,
        })?;
        Ok(txn)
    }
}

impl KvStore for RedbStore {
    fn put_txn(&mut self, keys: &[Key], commit: Commit) -> Result<(), BoxError> {
        let txn = self.begin(commit)?;
        {
            let mut table = txn.open_table(TABLE)?;
            for key in keys {
                table.insert(&key[..], &value_of(key)[..])?;
            }
        }
        txn.commit()?;
        Ok(())
    }

    fn remove_txn(&mut self, keys: &[Key], commit: Commit) -> Result<(), BoxError> {
        let txn = self.begin(commit)?;
        {
            let mut table = txn.open_table(TABLE)?;
            for key in keys {
                table.remove(&key[..])?;
            }
        }
        txn.commit()?;
        Ok(())
    }

    fn pop_txn(&mut self, pops: usize) -> Result<usize, BoxError> {
        let txn = self.begin(Commit::Sync)?;
        let mut taken = 0;
        {
            let mut table = txn.open_table(TABLE)?;
            for i in 0..pops {
                let popped = if i % 2 == 0 {
                    table.pop_first()?
                } else {
                    table.pop_last()?
                };
                if let Some((key, value)) = popped {
                    assert!(!key.value().is_empty() && !value.value().is_empty());
                    taken += 1;
                }
            }
        }
        txn.commit()?;
        Ok(taken)
    }

    fn retain_txn(&mut self, keep: fn(&[u8]) -> bool) -> Result<u64, BoxError> {
        let txn = self.begin(Commit::Sync)?;
        let mut removed = 0;
        {
            let mut table = txn.open_table(TABLE)?;
            table.retain(|key, _| {
                let kept = keep(key);
                removed += u64::from(!kept);
                kept
            })?;
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
        let txn = self.begin(Commit::Sync)?;
        let mut taken = 0;
        {
            let mut table = txn.open_table(TABLE)?;
            for entry in table.extract_from_if(from..to, |key, _| take(key))? {
                let (key, value) = entry?;
                assert!(!key.value().is_empty() && !value.value().is_empty());
                taken += 1;
            }
        }
        txn.commit()?;
        Ok(taken)
    }

    fn reader(&self) -> Result<Box<dyn KvReader + '_>, BoxError> {
        Ok(Box::new(RedbReader {
            table: self.db.begin_read()?.open_table(TABLE)?,
        }))
    }

    fn count_entries(&self) -> Result<u64, BoxError> {
        Ok(self.db.begin_read()?.open_table(TABLE)?.len()?)
    }

    fn compact(&mut self, _copy_dir: &Path) -> Result<Compacted, BoxError> {
        for _ in 0..COMPACT_PASSES_MAX {
            if !self.db.compact()? {
                return Ok(Compacted::InPlace);
            }
        }
        Err(format!("redb: still compacting after {COMPACT_PASSES_MAX} passes").into())
    }

    fn close(self: Box<Self>) -> Result<(), BoxError> {
        drop(self.db);
        Ok(())
    }
}

impl KvReader for RedbReader {
    fn get(&mut self, key: &[u8]) -> Result<Option<usize>, BoxError> {
        Ok(self.table.get(key)?.map(|v| v.value().len()))
    }

    fn range(&mut self, from: &[u8], count: usize) -> Result<usize, BoxError> {
        let mut read = 0;
        for entry in self.table.range(from..)?.take(count) {
            let (key, value) = entry?;
            assert!(
                !key.value().is_empty() && !value.value().is_empty(),
                "an empty entry"
            );
            read += 1;
        }
        Ok(read)
    }
}
