//! RocksDB (rust-rocksdb, built without compression), as `till bench peers` sets it up: every
//! transaction is one `WriteBatch`, written with `WriteOptions::set_sync(true)` for `Sync`
//! (the write-ahead log is fdatasynced before the write returns) and `set_sync(false)` for
//! no-flush (written to the log, to the OS, not synced). The block cache is an LRU cache of
//! `--cache-bytes`. Each reading thread reads one snapshot. The length is a full iteration
//! (RocksDB keeps only an estimate); compaction is `compact_range` over every key, in place.
//! Only with the `peers-rocksdb` feature: its C++ build is long.

use super::super::workload::{Key, value_of};
use super::{BoxError, Commit, Compacted, KvReader, KvStore};
use ::rocksdb::{
    BlockBasedOptions, Cache, DB, Direction, IteratorMode, Options, SnapshotWithThreadMode,
    WriteBatch, WriteOptions,
};
use std::path::Path;

struct RocksStore {
    db: DB,
    sync: WriteOptions,
    no_flush: WriteOptions,
}

struct RocksReader<'a> {
    snapshot: SnapshotWithThreadMode<'a, DB>,
}

pub fn open(dir: &Path, cache_bytes: u64) -> Result<Box<dyn KvStore>, BoxError> {
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(&Cache::new_lru_cache(usize::try_from(cache_bytes)?));
    let mut options = Options::default();
    options.create_if_missing(true);
    options.set_block_based_table_factory(&table);
    let db = DB::open(&options, dir)?;
    let mut sync = WriteOptions::default();
    sync.set_sync(true);
    let mut no_flush = WriteOptions::default();
    no_flush.set_sync(false);
    Ok(Box::new(RocksStore { db, sync, no_flush }))
}

impl RocksStore {
    fn write(&self, batch: WriteBatch, commit: Commit) -> Result<(), BoxError> {
        let options = match commit {
            Commit::Sync => &self.sync,
            Commit::NoFlush => &self.no_flush,
        };
        self.db.write_opt(batch, options)?;
        Ok(())
    }
}

impl KvStore for RocksStore {
    fn put_txn(&mut self, keys: &[Key], commit: Commit) -> Result<(), BoxError> {
        let mut batch = WriteBatch::default();
        for key in keys {
            batch.put(key, value_of(key));
        }
        self.write(batch, commit)
    }

    fn remove_txn(&mut self, keys: &[Key], commit: Commit) -> Result<(), BoxError> {
        let mut batch = WriteBatch::default();
        for key in keys {
            batch.delete(key);
        }
        self.write(batch, commit)
    }

    fn reader(&self) -> Result<Box<dyn KvReader + '_>, BoxError> {
        Ok(Box::new(RocksReader {
            snapshot: self.db.snapshot(),
        }))
    }

    fn count_entries(&self) -> Result<u64, BoxError> {
        let mut count = 0u64;
        for entry in self.db.iterator(IteratorMode::Start) {
            entry?;
            count += 1;
        }
        Ok(count)
    }

    fn compact(&mut self, _copy_dir: &Path) -> Result<Compacted, BoxError> {
        self.db.compact_range::<&[u8], &[u8]>(None, None);
        Ok(Compacted::InPlace)
    }

    fn close(self: Box<Self>) -> Result<(), BoxError> {
        self.db.flush_wal(true)?;
        drop(self.db);
        Ok(())
    }
}

impl KvReader for RocksReader<'_> {
    fn get(&mut self, key: &[u8]) -> Result<Option<usize>, BoxError> {
        Ok(self.snapshot.get_pinned(key)?.map(|v| v.len()))
    }

    fn range(&mut self, from: &[u8], count: usize) -> Result<usize, BoxError> {
        let mut read = 0;
        let mode = IteratorMode::From(from, Direction::Forward);
        for entry in self.snapshot.iterator(mode).take(count) {
            let (key, value) = entry?;
            assert!(!key.is_empty() && !value.is_empty(), "an empty entry");
            read += 1;
        }
        Ok(read)
    }
}
