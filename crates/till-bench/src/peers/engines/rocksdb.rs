//! RocksDB (rust-rocksdb, built without compression): every put uses
//! `WriteOptions::set_sync(true)`, so the write-ahead log is fdatasynced (`use_fsync` stays
//! false, the default) before the put returns. Writers run concurrently: RocksDB makes the
//! first waiting writer the leader of a write group that appends and syncs for all of them
//! (its group commit). Only with the `peers-rocksdb` feature: its C++ build is long.

use super::{BoxError, Store, Writer};
use ::rocksdb::{DB, Options, WriteOptions};
use std::path::Path;

struct RocksStore {
    db: DB,
    write: WriteOptions,
}

struct RocksWriter<'a> {
    store: &'a RocksStore,
}

pub fn open(dir: &Path) -> Result<Box<dyn Store>, BoxError> {
    let mut options = Options::default();
    options.create_if_missing(true);
    let db = DB::open(&options, dir)?;
    let mut write = WriteOptions::default();
    write.set_sync(true);
    Ok(Box::new(RocksStore { db, write }))
}

impl Store for RocksStore {
    fn writer(&self) -> Result<Box<dyn Writer + Send + '_>, BoxError> {
        Ok(Box::new(RocksWriter { store: self }))
    }

    fn close(self: Box<Self>) -> Result<(), BoxError> {
        drop(self.db);
        Ok(())
    }
}

impl Writer for RocksWriter<'_> {
    fn insert_commit(&mut self, key: &[u8], value: &[u8]) -> Result<(), BoxError> {
        self.store.db.put_opt(key, value, &self.store.write)?;
        Ok(())
    }
}
