//! fjall, one keyspace, as `till bench peers` sets it up: every transaction is a
//! `WriteBatch`; `Sync` ones with `durability(Some(PersistMode::SyncData))` (the batch is
//! written to the journal and the journal fdatasynced before `commit` returns), no-flush ones
//! with `durability(Some(PersistMode::Buffer))`, fjall's default (the journal's buffer is
//! written to the OS, not synced). The block
//! cache is `cache_size(--cache-bytes)`. Each reading thread reads one snapshot. The length is
//! `Keyspace::len`, a scan (fjall keeps only an approximate count); compaction rotates the
//! memtable to disk and runs a major compaction, in place. Built without compression, as
//! tilldb has none.

use super::super::workload::{Key, value_of};
use super::{BoxError, Commit, Compacted, KvReader, KvStore};
use ::fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode, Readable, Snapshot};
use std::path::Path;

pub const CONFIGURATION: &str = "one keyspace; each transaction is a WriteBatch with \
     durability(Some(PersistMode::SyncData)): written to the journal and the journal \
     fdatasynced before commit returns. cache_size = --cache-bytes; no compression. Length: \
     Keyspace::len (a scan). Compaction: the memtable rotated to disk, then a major \
     compaction.";
pub const NO_FLUSH: &str = "durability(Some(PersistMode::Buffer)), fjall's default: the batch \
     is written to the journal and the journal's buffer to the OS, not synced.";

struct FjallStore {
    db: Database,
    keyspace: Keyspace,
}

struct FjallReader<'a> {
    keyspace: &'a Keyspace,
    snapshot: Snapshot,
}

pub fn open(dir: &Path, cache_bytes: u64) -> Result<Box<dyn KvStore>, BoxError> {
    let db = Database::builder(dir).cache_size(cache_bytes).open()?;
    let keyspace = db.keyspace("kv", KeyspaceCreateOptions::default)?;
    Ok(Box::new(FjallStore { db, keyspace }))
}

impl FjallStore {
    fn batch(&self, commit: Commit) -> ::fjall::OwnedWriteBatch {
        self.db.batch().durability(match commit {
            Commit::Sync => Some(PersistMode::SyncData),
            Commit::NoFlush => Some(PersistMode::Buffer),
        })
    }
}

impl KvStore for FjallStore {
    fn put_txn(&mut self, keys: &[Key], commit: Commit) -> Result<(), BoxError> {
        let mut batch = self.batch(commit);
        for key in keys {
            batch.insert(&self.keyspace, &key[..], &value_of(key)[..]);
        }
        batch.commit()?;
        Ok(())
    }

    fn remove_txn(&mut self, keys: &[Key], commit: Commit) -> Result<(), BoxError> {
        let mut batch = self.batch(commit);
        for key in keys {
            batch.remove(&self.keyspace, &key[..]);
        }
        batch.commit()?;
        Ok(())
    }

    fn pop_txn(&mut self, pops: usize) -> Result<usize, BoxError> {
        // A batch is not read back before it commits: the keys alternate pops would take
        // are the first half and the last half, read with iterators, removed in one batch.
        let mut batch = self.batch(Commit::Sync);
        let firsts = pops.div_ceil(2);
        let mut last_first = None;
        let mut taken = 0;
        for guard in self.keyspace.iter().take(firsts) {
            let (key, value) = guard.into_inner()?;
            assert!(!value.is_empty(), "an empty value");
            batch.remove(&self.keyspace, key.clone());
            last_first = Some(key);
            taken += 1;
        }
        for guard in self.keyspace.iter().rev().take(pops - firsts) {
            let (key, value) = guard.into_inner()?;
            // Not back into the firsts (a table of fewer entries than pops).
            if last_first.as_ref().is_some_and(|f| key <= *f) {
                break;
            }
            assert!(!value.is_empty(), "an empty value");
            batch.remove(&self.keyspace, key);
            taken += 1;
        }
        batch.commit()?;
        Ok(taken)
    }

    fn retain_txn(&mut self, keep: fn(&[u8]) -> bool) -> Result<u64, BoxError> {
        let mut batch = self.batch(Commit::Sync);
        let mut removed = 0;
        for guard in self.keyspace.iter() {
            let key = guard.key()?;
            if !keep(&key) {
                batch.remove(&self.keyspace, key);
                removed += 1;
            }
        }
        batch.commit()?;
        Ok(removed)
    }

    fn extract_txn(
        &mut self,
        from: &[u8],
        to: &[u8],
        take: fn(&[u8]) -> bool,
    ) -> Result<u64, BoxError> {
        let mut batch = self.batch(Commit::Sync);
        let mut taken = 0;
        for guard in self.keyspace.range(from..to) {
            let (key, value) = guard.into_inner()?;
            if take(&key) {
                assert!(!value.is_empty(), "an empty value");
                batch.remove(&self.keyspace, key);
                taken += 1;
            }
        }
        batch.commit()?;
        Ok(taken)
    }

    fn reader(&self) -> Result<Box<dyn KvReader + '_>, BoxError> {
        Ok(Box::new(FjallReader {
            keyspace: &self.keyspace,
            snapshot: self.db.snapshot(),
        }))
    }

    fn count_entries(&self) -> Result<u64, BoxError> {
        Ok(u64::try_from(self.keyspace.len()?)?)
    }

    fn compact(&mut self, _copy_dir: &Path) -> Result<Compacted, BoxError> {
        self.keyspace.rotate_memtable_and_wait()?;
        self.keyspace.major_compact()?;
        Ok(Compacted::InPlace)
    }

    fn close(self: Box<Self>) -> Result<(), BoxError> {
        self.db.persist(PersistMode::SyncAll)?;
        Ok(())
    }
}

impl KvReader for FjallReader<'_> {
    fn get(&mut self, key: &[u8]) -> Result<Option<usize>, BoxError> {
        Ok(self.snapshot.get(self.keyspace, key)?.map(|v| v.len()))
    }

    fn range(&mut self, from: &[u8], count: usize) -> Result<usize, BoxError> {
        let mut read = 0;
        for guard in self.snapshot.range(self.keyspace, from..).take(count) {
            let (key, value) = guard.into_inner()?;
            assert!(!key.is_empty() && !value.is_empty(), "an empty entry");
            read += 1;
        }
        Ok(read)
    }
}
