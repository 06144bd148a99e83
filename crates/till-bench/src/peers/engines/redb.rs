//! redb with `Durability::Immediate` (its default, set explicitly on every transaction):
//! `commit` returns after the database file is synced (`File::sync_data`, fdatasync). One
//! write transaction at a time: `begin_write` blocks while another is open.

use super::{BoxError, Store, Writer};
use ::redb::{Database, Durability, TableDefinition};
use std::path::Path;

pub const CONFIGURATION: &str = "Durability::Immediate on every write transaction (redb's \
     default): commit returns after the file is synced (File::sync_data, fdatasync). One \
     write transaction at a time (begin_write blocks).";

const TABLE: TableDefinition<'static, &[u8], &[u8]> = TableDefinition::new("kv");

struct RedbStore {
    db: Database,
}

struct RedbWriter<'a> {
    db: &'a Database,
}

pub fn open(dir: &Path) -> Result<Box<dyn Store>, BoxError> {
    let db = Database::create(dir.join("redb.db"))?;
    // Create the table up front, so every timed transaction is an insert alone.
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::Immediate)?;
    txn.open_table(TABLE)?;
    txn.commit()?;
    Ok(Box::new(RedbStore { db }))
}

impl Store for RedbStore {
    fn writer(&self) -> Result<Box<dyn Writer + Send + '_>, BoxError> {
        Ok(Box::new(RedbWriter { db: &self.db }))
    }

    fn close(self: Box<Self>) -> Result<(), BoxError> {
        drop(self.db);
        Ok(())
    }
}

impl Writer for RedbWriter<'_> {
    fn insert_commit(&mut self, key: &[u8], value: &[u8]) -> Result<(), BoxError> {
        let mut txn = self.db.begin_write()?;
        txn.set_durability(Durability::Immediate)?;
        txn.open_table(TABLE)?.insert(key, value)?;
        txn.commit()?;
        Ok(())
    }
}
