//! tilldb with `Options::default()` and the cache set to `--cache-bytes`: `Sync` transactions
//! `commit_with(Durability::Sync)`, no-flush ones `commit_with(Durability::Buffered)`. Reads
//! run in a `ReadTxn` per thread. The length is `Db::len`, a count kept with the table
//! (`db/counts.rs`). Compaction is
//! `Db::compact_to` into a new directory, whose size is measured.
//!
//! A failed commit poisons the database until it is reopened (docs/durability.md), so
//! [`KvStore::recover`] drops it and opens it again (recovery), and the run goes on.

use super::super::workload::{Key, value_of};
use super::{BoxError, Commit, Compacted, KvReader, KvStore, Settings};
use ::tilldb::internals::crypt::{Cipher, Encryption, StaticKey};
use ::tilldb::internals::header::HeaderFile;
use ::tilldb::{Db, Direction, Durability, FlushMethod, Options, ReadTxn};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub const CONFIGURATION: &str = "Options::default() (16 KiB pages, log segments from 1 MiB \
     doubling to 64 MiB, torn-page guard auto, flush method probed at create unless \
     --flush-method) with cache_bytes = --cache-bytes; commit_with(Durability::Sync): \
     acknowledged once the log is flushed up to the commit. Length: Db::len, a count kept with \
     the table. Compaction: Db::compact_to into a new directory.";
pub const CONFIGURATION_ENCRYPTED: &str = "As tilldb, encrypted at rest: \
     Options::encryption under a fixed key (a StaticKey), with the cipher for this CPU \
     (AES-256-GCM where it has AES instructions), so every page, log record and scratch file \
     is sealed (docs/encryption.md).";
pub const NO_FLUSH: &str = "commit_with(Durability::Buffered): acknowledged once the commit \
     record is written to the OS; a background flush follows within the flush interval.";

struct TilldbStore {
    dir: PathBuf,
    options: Options,
    /// `None` only between a failed reopen and the end of the run.
    db: Option<Db>,
}

struct TilldbReader<'a> {
    txn: ReadTxn<'a>,
}

/// tilldb in `dir`, encrypted at rest when `encrypted`.
pub fn open(dir: &Path, settings: Settings, encrypted: bool) -> Result<Box<dyn KvStore>, BoxError> {
    let options = Options {
        encryption: encrypted.then(|| Encryption {
            provider: Arc::new(StaticKey::new(&[0x5b; 32])),
            cipher: Cipher::Aes256Gcm,
        }),
        cache_bytes: settings.cache_bytes,
        flush_method: settings.flush_method,
        torn_page_guard: settings
            .torn_page_guard
            .unwrap_or(Options::default().torn_page_guard),
        write_buffer_bytes: settings.write_buffer_bytes,
        ..Options::default()
    };
    options.validate()?;
    let db = Db::open(dir, options.clone())?;
    Ok(Box::new(TilldbStore {
        dir: dir.to_path_buf(),
        options,
        db: Some(db),
    }))
}

impl TilldbStore {
    fn db(&self) -> Result<&Db, BoxError> {
        self.db
            .as_ref()
            .ok_or_else(|| "tilldb: not open (a reopen after an error failed)".into())
    }

    fn write(
        &mut self,
        keys: &[Key],
        commit: Commit,
        op: fn(&mut ::tilldb::Txn<'_>, &Key) -> ::tilldb::Result<()>,
    ) -> Result<(), BoxError> {
        let durability = match commit {
            Commit::Sync => Durability::Sync,
            Commit::NoFlush => Durability::Buffered,
        };
        let mut txn = self.db()?.begin()?;
        for key in keys {
            op(&mut txn, key)?;
        }
        txn.commit_with(durability)?;
        Ok(())
    }
}

impl KvStore for TilldbStore {
    fn put_txn(&mut self, keys: &[Key], commit: Commit) -> Result<(), BoxError> {
        self.write(keys, commit, |txn, key| txn.put(key, &value_of(key)))
    }

    fn remove_txn(&mut self, keys: &[Key], commit: Commit) -> Result<(), BoxError> {
        self.write(keys, commit, |txn, key| txn.delete(key))
    }

    fn pop_txn(&mut self, pops: usize) -> Result<usize, BoxError> {
        let mut txn = self.db()?.begin()?;
        let mut taken = 0;
        for i in 0..pops {
            let popped = if i % 2 == 0 {
                txn.pop_first()?
            } else {
                txn.pop_last()?
            };
            taken += usize::from(popped.is_some());
        }
        txn.commit_with(Durability::Sync)?;
        Ok(taken)
    }

    fn retain_txn(&mut self, keep: fn(&[u8]) -> bool) -> Result<u64, BoxError> {
        let mut txn = self.db()?.begin()?;
        let removed = txn.retain(|key, _| keep(key))?;
        txn.commit_with(Durability::Sync)?;
        Ok(removed)
    }

    fn extract_txn(
        &mut self,
        from: &[u8],
        to: &[u8],
        take: fn(&[u8]) -> bool,
    ) -> Result<u64, BoxError> {
        let mut txn = self.db()?.begin()?;
        let taken =
            txn.extract_if_in("", Bound::Included(from), Bound::Excluded(to), |key, _| {
                take(key)
            })?;
        txn.commit_with(Durability::Sync)?;
        Ok(taken.len() as u64)
    }

    fn reader(&self) -> Result<Box<dyn KvReader + '_>, BoxError> {
        Ok(Box::new(TilldbReader {
            txn: self.db()?.begin_read()?,
        }))
    }

    fn count_entries(&self) -> Result<u64, BoxError> {
        Ok(self.db()?.len()?)
    }

    fn compact(&mut self, copy_dir: &Path) -> Result<Compacted, BoxError> {
        self.db()?.compact_to(copy_dir)?;
        Ok(Compacted::Copy)
    }

    fn recover(&mut self) -> Result<(), BoxError> {
        // Dropping the handle closes what can be closed and ignores the poison; the open runs
        // recovery, as after a crash.
        drop(self.db.take());
        self.db = Some(Db::open(&self.dir, self.options.clone())?);
        Ok(())
    }

    fn notes(&self) -> Option<String> {
        let storage = crate::raw::storage(0);
        let (_, header) = HeaderFile::open(&*storage, &self.dir, FlushMethod::Fdatasync)
            .ok()
            .flatten()?;
        let how = if self.options.flush_method.is_some() {
            "--flush-method"
        } else {
            "probed at create"
        };
        Some(format!(
            "flush method {} ({how}), torn-page guard {}, page size {} B",
            header.flush_method, header.torn_page_guard, header.page_bytes
        ))
    }

    fn close(self: Box<Self>) -> Result<(), BoxError> {
        if let Some(db) = self.db {
            db.close()?;
        }
        Ok(())
    }
}

impl KvReader for TilldbReader<'_> {
    fn get(&mut self, key: &[u8]) -> Result<Option<usize>, BoxError> {
        // The lending form, as LMDB's and redb's gets are read: the value is looked at where
        // it lies, not copied into a `Vec`.
        Ok(self.txn.get_with(key, <[u8]>::len)?)
    }

    fn range(&mut self, from: &[u8], count: usize) -> Result<usize, BoxError> {
        let mut read = 0;
        // The borrowing form, as LMDB's and redb's ranges are read: each entry is looked at
        // in place, not copied into two `Vec`s.
        let mut entries =
            self.txn
                .range(Bound::Included(from), Bound::Unbounded, Direction::Forward)?;
        while read < count {
            let Some(entry) = entries.next_entry() else {
                break;
            };
            let (key, value) = entry?;
            assert!(!key.is_empty() && !value.is_empty(), "an empty entry");
            read += 1;
        }
        Ok(read)
    }
}
