//! fjall: one keyspace; every commit is a `WriteBatch` with
//! `durability(Some(PersistMode::SyncData))`, so `commit` writes the batch to the journal and
//! fdatasyncs the journal before it returns. fjall holds its journal lock across that sync,
//! so commits flush one at a time. Built without compression, as tilldb has none.

use super::{BoxError, Store, Writer};
use ::fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use std::path::Path;

pub const CONFIGURATION: &str = "one keyspace; each commit is a WriteBatch with \
     durability(Some(PersistMode::SyncData)): the batch is written to the journal and the \
     journal fdatasynced before commit returns, under fjall's journal lock (one flush at a \
     time). No compression.";

struct FjallStore {
    db: Database,
    keyspace: Keyspace,
}

struct FjallWriter<'a> {
    store: &'a FjallStore,
}

pub fn open(dir: &Path) -> Result<Box<dyn Store>, BoxError> {
    let db = Database::builder(dir).open()?;
    let keyspace = db.keyspace("kv", KeyspaceCreateOptions::default)?;
    Ok(Box::new(FjallStore { db, keyspace }))
}

impl Store for FjallStore {
    fn writer(&self) -> Result<Box<dyn Writer + Send + '_>, BoxError> {
        Ok(Box::new(FjallWriter { store: self }))
    }

    fn close(self: Box<Self>) -> Result<(), BoxError> {
        self.db.persist(PersistMode::SyncAll)?;
        Ok(())
    }
}

impl Writer for FjallWriter<'_> {
    fn insert_commit(&mut self, key: &[u8], value: &[u8]) -> Result<(), BoxError> {
        let mut batch = self
            .store
            .db
            .batch()
            .durability(Some(PersistMode::SyncData));
        batch.insert(&self.store.keyspace, key, value);
        batch.commit()?;
        Ok(())
    }
}
