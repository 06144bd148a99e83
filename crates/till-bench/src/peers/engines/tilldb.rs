//! tilldb itself: `commit_with(Durability::Sync)`, the options of `till bench commit` (16 KiB
//! pages, 64 MiB cache, 16 MiB log segments) with the default torn-page guard.

use super::{BoxError, Store, Writer};
use crate::commit::bench_options;
use ::tilldb::{Db, Durability, FlushMethod, Options};
use std::path::Path;

pub const CONFIGURATION: &str = "commit_with(Durability::Sync): acknowledged once the log is \
     flushed up to the commit (--flush-method, default fdatasync, on preallocated segments); \
     concurrent commits share flushes (group commit). Page size 16 KiB, 64 MiB cache, default \
     torn-page guard.";

pub const CONFIGURATION_ENCRYPTED: &str = "As tilldb, encrypted at rest: Options::encryption \
     under a fixed key (a StaticKey), with the cipher for this CPU (AES-256-GCM where it has \
     AES instructions), so every page, log record and scratch file is sealed \
     (docs/encryption.md).";

/// Page size of the benchmark database (as `till bench commit`).
const PAGE_BYTES: u32 = 16384;
/// Buffer pool of the benchmark database (as `till bench commit`).
const CACHE_BYTES: u64 = 64 << 20;

struct TilldbStore {
    db: Db,
}

struct TilldbWriter<'a> {
    db: &'a Db,
}

/// tilldb in `dir`, encrypted at rest when `encrypted`.
pub fn open(
    dir: &Path,
    flush_method: FlushMethod,
    encrypted: bool,
) -> Result<Box<dyn Store>, BoxError> {
    let options = Options {
        encryption: encrypted.then(|| ::tilldb::Encryption::with_key(&[0x5b; 32])),
        ..bench_options(
            PAGE_BYTES,
            CACHE_BYTES,
            Durability::Sync,
            flush_method,
            Options::default().torn_page_guard,
        )?
    };
    let db = Db::open(dir, options)?;
    Ok(Box::new(TilldbStore { db }))
}

impl Store for TilldbStore {
    fn writer(&self) -> Result<Box<dyn Writer + Send + '_>, BoxError> {
        Ok(Box::new(TilldbWriter { db: &self.db }))
    }

    fn close(self: Box<Self>) -> Result<(), BoxError> {
        self.db.close()?;
        Ok(())
    }
}

impl Writer for TilldbWriter<'_> {
    fn insert_commit(&mut self, key: &[u8], value: &[u8]) -> Result<(), BoxError> {
        let mut txn = self.db.begin()?;
        txn.put(key, value)?;
        txn.commit_with(Durability::Sync)?;
        Ok(())
    }
}
