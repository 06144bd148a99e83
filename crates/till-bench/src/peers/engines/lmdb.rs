//! LMDB through heed, with LMDB's durable defaults: none of `NO_SYNC`, `NO_META_SYNC`,
//! `MAP_ASYNC` or `WRITE_MAP`. A commit writes the transaction's dirty pages, fdatasyncs
//! the data file, then writes the meta page through a descriptor opened with `O_DSYNC`:
//! two flushes per commit, after which it is durable. One write transaction at a time
//! (LMDB's writer mutex); the others block on it.
//!
//! heed's `open` is `unsafe` (a memory map whose file must not be changed behind LMDB's back):
//! a departure from "unsafe lives only in `io`", confined to the one call below.

use super::{BoxError, Store, Writer};
use heed::types::Bytes;
use heed::{CommitOrAbort, Database, Env, EnvOpenOptions};
use std::path::Path;

pub const CONFIGURATION: &str = "heed's defaults, no NO_SYNC, NO_META_SYNC, MAP_ASYNC or \
     WRITE_MAP: each commit writes its dirty pages, fdatasyncs the data file, then writes the \
     meta page through an O_DSYNC descriptor (two flushes). One write transaction at a time \
     (LMDB's writer mutex).";

/// Address space reserved for the map: far more than a run writes (the file grows as used).
const MAP_BYTES: usize = 16 << 30;

struct LmdbStore {
    env: Env,
    table: Database<'static, Bytes, Bytes>,
}

struct LmdbWriter<'a> {
    store: &'a LmdbStore,
}

pub fn open(dir: &Path) -> Result<Box<dyn Store>, BoxError> {
    let mut options = EnvOpenOptions::new();
    options.map_size(MAP_BYTES);
    // SAFETY: `dir` is this row's own fresh directory; nothing else in this process or
    // outside it opens or changes its files while the environment is open, and the
    // environment is opened once.
    let env = unsafe { options.open(dir)? };
    let wtxn = env.write_txn()?;
    let table = env
        .create_databases_and_commit(wtxn, |opener, wtxn| -> Result<_, heed::Error> {
            let table = opener.create_database::<Bytes, Bytes>(wtxn, None)?;
            Ok(CommitOrAbort::<_, ()>::Commit(table))
        })?
        .unwrap_commit();
    Ok(Box::new(LmdbStore { env, table }))
}

impl Store for LmdbStore {
    fn writer(&self) -> Result<Box<dyn Writer + Send + '_>, BoxError> {
        Ok(Box::new(LmdbWriter { store: self }))
    }

    fn close(self: Box<Self>) -> Result<(), BoxError> {
        let LmdbStore { env, table: _ } = *self;
        // Closing syncs nothing new: every commit already was.
        env.prepare_for_closing().wait();
        Ok(())
    }
}

impl Writer for LmdbWriter<'_> {
    fn insert_commit(&mut self, key: &[u8], value: &[u8]) -> Result<(), BoxError> {
        let mut txn = self.store.env.write_txn()?;
        self.store.table.put(&mut txn, key, value)?;
        txn.commit()?;
        Ok(())
    }
}
