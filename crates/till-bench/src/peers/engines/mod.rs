//! The engines of `till bench peers` behind one interface: open a fresh store in a directory,
//! hand each committing thread a [`Writer`], insert one key per durable transaction, close.
//!
//! One file per engine; each says in its module doc (and in [`configuration`], printed under
//! the report) how it is made as durable as tilldb's `Sync`: `insert_commit` returns only once
//! the transaction is on stable storage, with no flag that skips or defers a flush. Engines
//! that serialize writers (SQLite, LMDB, redb, fjall's journal) take their own lock: that
//! is part of what is compared.

mod fjall;
mod lmdb;
mod redb;
#[cfg(feature = "peers-rocksdb")]
mod rocksdb;
mod sqlite;
mod tilldb;

use super::Engine;
use ::tilldb::FlushMethod;
use std::path::Path;

/// An error from any engine, movable across the committing threads.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// An open store.
pub trait Store: Sync {
    /// A handle for one committing thread: its own connection for SQLite, a reference to
    /// the shared handle for the others. Made before the clock starts.
    fn writer(&self) -> Result<Box<dyn Writer + Send + '_>, BoxError>;

    /// Closes the store, flushing what it keeps in memory. Every writer is gone by then.
    fn close(self: Box<Self>) -> Result<(), BoxError>;
}

/// One committing thread's handle.
pub trait Writer {
    /// Inserts `key -> value` in a transaction of its own and returns once that transaction
    /// is durable.
    fn insert_commit(&mut self, key: &[u8], value: &[u8]) -> Result<(), BoxError>;
}

/// What the engines share from the command line.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// tilldb's flush method.
    pub flush_method: FlushMethod,
}

/// Opens a fresh `engine` store in the empty directory `dir`.
pub fn open(engine: Engine, dir: &Path, settings: Settings) -> Result<Box<dyn Store>, BoxError> {
    assert!(
        std::fs::read_dir(dir)?.next().is_none(),
        "{} is not empty",
        dir.display()
    );
    match engine {
        Engine::Tilldb => tilldb::open(dir, settings.flush_method, false),
        Engine::TilldbEncrypted => tilldb::open(dir, settings.flush_method, true),
        Engine::SqliteWal => sqlite::open(dir, sqlite::Journal::Wal),
        Engine::SqliteRollback => sqlite::open(dir, sqlite::Journal::Rollback),
        Engine::Lmdb => lmdb::open(dir),
        Engine::Redb => redb::open(dir),
        Engine::Fjall => fjall::open(dir),
        #[cfg(feature = "peers-rocksdb")]
        Engine::Rocksdb => rocksdb::open(dir),
        #[cfg(not(feature = "peers-rocksdb"))]
        Engine::Rocksdb => Err(ROCKSDB_NOT_BUILT.into()),
    }
}

/// Why `--engines rocksdb` fails in a build without it.
pub const ROCKSDB_NOT_BUILT: &str = "rocksdb: this till was built without RocksDB; rebuild \
     with `--features peers-rocksdb` (needs `apt-get install libclang-dev`)";

/// The engines run when `--engines` is not given: all that this build has.
pub fn default_engines() -> Vec<Engine> {
    let mut engines = vec![
        Engine::Tilldb,
        Engine::SqliteWal,
        Engine::SqliteRollback,
        Engine::Lmdb,
        Engine::Redb,
        Engine::Fjall,
    ];
    if cfg!(feature = "peers-rocksdb") {
        engines.push(Engine::Rocksdb);
    }
    engines
}

/// Whether `engine` is tilldb itself, plain or encrypted: not a peer.
pub fn is_tilldb(engine: Engine) -> bool {
    matches!(engine, Engine::Tilldb | Engine::TilldbEncrypted)
}

/// Whether this build can run `engine`.
pub fn is_built(engine: Engine) -> bool {
    engine != Engine::Rocksdb || cfg!(feature = "peers-rocksdb")
}

/// The engine's name on the command line, in tables and in JSON.
pub fn name(engine: Engine) -> &'static str {
    match engine {
        Engine::Tilldb => "tilldb",
        Engine::TilldbEncrypted => "tilldb-encrypted",
        Engine::SqliteWal => "sqlite-wal",
        Engine::SqliteRollback => "sqlite-rollback",
        Engine::Lmdb => "lmdb",
        Engine::Redb => "redb",
        Engine::Fjall => "fjall",
        Engine::Rocksdb => "rocksdb",
    }
}

/// How `engine` is configured for tilldb's `Sync` durability, in one sentence or two.
pub fn configuration(engine: Engine) -> &'static str {
    match engine {
        Engine::Tilldb => tilldb::CONFIGURATION,
        Engine::TilldbEncrypted => tilldb::CONFIGURATION_ENCRYPTED,
        Engine::SqliteWal => sqlite::CONFIGURATION_WAL,
        Engine::SqliteRollback => sqlite::CONFIGURATION_ROLLBACK,
        Engine::Lmdb => lmdb::CONFIGURATION,
        Engine::Redb => redb::CONFIGURATION,
        Engine::Fjall => fjall::CONFIGURATION,
        Engine::Rocksdb => ROCKSDB_CONFIGURATION,
    }
}

/// RocksDB's configuration, known also to builds without it (for `--help`-like output).
const ROCKSDB_CONFIGURATION: &str = "WriteOptions::set_sync(true): the write-ahead log is \
     fdatasynced (use_fsync false, the default) before put returns; concurrent writers join \
     the leader's write group, RocksDB's group commit. Defaults otherwise, no compression.";

#[cfg(test)]
mod tests {
    use super::*;

    /// Opens each built engine in a fresh directory, commits from two threads, closes.
    #[test]
    fn every_built_engine_commits_from_two_threads() {
        let base = tempfile::tempdir().expect("tempdir");
        for engine in default_engines() {
            let dir = base.path().join(name(engine));
            std::fs::create_dir(&dir).expect("mkdir");
            let settings = Settings {
                flush_method: FlushMethod::Fdatasync,
            };
            let store = open(engine, &dir, settings).expect("open");
            std::thread::scope(|s| {
                for t in 0..2u8 {
                    let mut writer = store.writer().expect("writer");
                    s.spawn(move || {
                        for i in 0..5u8 {
                            writer
                                .insert_commit(&[b'k', t, i], b"value")
                                .expect("insert_commit");
                        }
                    });
                }
            });
            store.close().expect("close");
        }
    }
}
