//! The engines of `till bench kv` behind one interface: a store that writes a set of rows in
//! one transaction at a [`Commit`] level, removes, hands each reading thread a [`KvReader`]
//! with a read transaction of its own, counts its entries, compacts and closes.
//!
//! `till bench peers`' adapters (`peers/engines/`) insert one row per durable commit and
//! nothing else; this workload needs reads, scans, removals, both commit levels, an equal
//! cache and compaction, so each engine has a second, wider adapter here. The durable
//! settings are the same as there: a [`Commit::Sync`] transaction returns only once it is
//! on stable storage, with no flag that skips or defers a flush. One file per engine; each
//! says in its module doc (and in [`configuration`] and [`no_flush`], printed under the
//! report) how it commits at both levels and what its cache is.

mod fjall;
mod lmdb;
mod redb;
#[cfg(feature = "peers-rocksdb")]
mod rocksdb;
mod sqlite;
mod tilldb;

use super::Engine;
use super::workload::Key;
use ::tilldb::FlushMethod;
use std::path::Path;

/// The error of a row an engine's adapter does not run yet.
const NOT_MEASURED: &str = "not measured for this engine yet (no adapter for the row)";

/// An error from any engine.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How a write transaction commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// Returns once the transaction is on stable storage (tilldb `Durability::Sync`).
    Sync,
    /// Returns once the engine has it, with no flush to the device (tilldb
    /// `Durability::Buffered`).
    NoFlush,
}

/// Where a compaction left the compacted store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compacted {
    /// The store's own directory (SQLite's VACUUM, redb, fjall, RocksDB).
    InPlace,
    /// A copy in the directory passed to [`KvStore::compact`] (tilldb's `compact_to`,
    /// LMDB's compacting copy).
    Copy,
}

/// An open store. Writes take `&mut self`: one writer, and no reader meanwhile.
pub trait KvStore: Sync {
    /// Puts every key with its value (`workload::value_of`) in ONE transaction, committed
    /// at `commit`.
    fn put_txn(&mut self, keys: &[Key], commit: Commit) -> Result<(), BoxError>;

    /// Removes every key in ONE transaction, committed at `commit`.
    fn remove_txn(&mut self, keys: &[Key], commit: Commit) -> Result<(), BoxError>;

    /// A reader with a read transaction of its own, made on the thread that uses it.
    fn reader(&self) -> Result<Box<dyn KvReader + '_>, BoxError>;

    /// Takes `pops` entries in ONE durable transaction, alternately the first and the last
    /// (each read, value included, then removed); returns how many it took. The default
    /// (RocksDB's adapter) says the row is not measured for the engine.
    fn pop_txn(&mut self, _pops: usize) -> Result<usize, BoxError> {
        Err(NOT_MEASURED.into())
    }

    /// Removes, in ONE durable transaction, every entry whose key `keep` rejects; returns
    /// how many.
    fn retain_txn(&mut self, _keep: fn(&[u8]) -> bool) -> Result<u64, BoxError> {
        Err(NOT_MEASURED.into())
    }

    /// Removes, in ONE durable transaction, every entry from `from` to `to` (excluded) whose
    /// key `take` selects, reading each value; returns how many.
    fn extract_txn(
        &mut self,
        _from: &[u8],
        _to: &[u8],
        _take: fn(&[u8]) -> bool,
    ) -> Result<u64, BoxError> {
        Err(NOT_MEASURED.into())
    }

    /// Puts `keys` (ascending, each above every key in the store) in ONE durable
    /// transaction, by the engine's fastest path for keys in order (LMDB's `MDB_APPEND`);
    /// an engine without one puts them (the default).
    fn append_txn(&mut self, keys: &[Key]) -> Result<(), BoxError> {
        self.put_txn(keys, Commit::Sync)
    }

    /// The number of entries, exactly, by the engine's own means (a scan where it keeps no
    /// count).
    fn count_entries(&self) -> Result<u64, BoxError>;

    /// Compacts the store by the engine's own means, in place or into `copy_dir` (which does
    /// not exist yet; see [`Compacted`]).
    fn compact(&mut self, copy_dir: &Path) -> Result<Compacted, BoxError>;

    /// Called after a failed write: makes the store usable again if the engine asks for that
    /// (tilldb poisons itself after a failed commit and is reopened). The default does nothing.
    fn recover(&mut self) -> Result<(), BoxError> {
        Ok(())
    }

    /// What the run should know about this store beyond its configuration (tilldb: the flush
    /// method it chose).
    fn notes(&self) -> Option<String> {
        None
    }

    /// Closes the store; what it keeps in memory is made durable.
    fn close(self: Box<Self>) -> Result<(), BoxError>;
}

/// One reading thread's handle: one read transaction for all its reads.
pub trait KvReader {
    /// The length of `key`'s value, or `None` if it has none.
    fn get(&mut self, key: &[u8]) -> Result<Option<usize>, BoxError>;

    /// Reads up to `count` entries from `from` onwards (keys and values); returns how many.
    fn range(&mut self, from: &[u8], count: usize) -> Result<usize, BoxError>;
}

/// What the engines share from the command line.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Each engine's cache (LMDB has none of its own).
    pub cache_bytes: u64,
    /// tilldb's flush method; `None` probes, as `Options::default()`.
    pub flush_method: Option<FlushMethod>,
    /// tilldb's torn-page guard; `None` is `Options::default()`'s (auto).
    pub torn_page_guard: Option<::tilldb::TornPageGuard>,
    /// tilldb's `Options::write_buffer_bytes` (0: off; `Options::default()`'s is 64 MiB).
    pub write_buffer_bytes: u64,
}

/// Opens the `engine` store in `dir`, creating it if the directory is empty.
pub fn open(engine: Engine, dir: &Path, settings: Settings) -> Result<Box<dyn KvStore>, BoxError> {
    match engine {
        Engine::Tilldb => tilldb::open(dir, settings, false),
        Engine::TilldbEncrypted => tilldb::open(dir, settings, true),
        Engine::Sqlite => sqlite::open(dir, settings.cache_bytes),
        Engine::Lmdb => lmdb::open(dir),
        Engine::Redb => redb::open(dir, settings.cache_bytes),
        Engine::Fjall => fjall::open(dir, settings.cache_bytes),
        #[cfg(feature = "peers-rocksdb")]
        Engine::Rocksdb => rocksdb::open(dir, settings.cache_bytes),
        #[cfg(not(feature = "peers-rocksdb"))]
        Engine::Rocksdb => Err(ROCKSDB_NOT_BUILT.into()),
    }
}

/// Why `--engines rocksdb` fails in a build without it (the same words as `till bench peers`).
pub use crate::peers::engines::ROCKSDB_NOT_BUILT;

/// The engines run when `--engines` is not given: all that this build has.
pub fn default_engines() -> Vec<Engine> {
    let mut engines = vec![
        Engine::Tilldb,
        Engine::Sqlite,
        Engine::Lmdb,
        Engine::Redb,
        Engine::Fjall,
    ];
    if cfg!(feature = "peers-rocksdb") {
        engines.push(Engine::Rocksdb);
    }
    engines
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
        Engine::Sqlite => "sqlite",
        Engine::Lmdb => "lmdb",
        Engine::Redb => "redb",
        Engine::Fjall => "fjall",
        Engine::Rocksdb => "rocksdb",
    }
}

/// How `engine` is configured, its `Sync` commits and its cache, in a sentence or two.
pub fn configuration(engine: Engine) -> &'static str {
    match engine {
        Engine::Tilldb => tilldb::CONFIGURATION,
        Engine::TilldbEncrypted => tilldb::CONFIGURATION_ENCRYPTED,
        Engine::Sqlite => sqlite::CONFIGURATION,
        Engine::Lmdb => lmdb::CONFIGURATION,
        Engine::Redb => redb::CONFIGURATION,
        Engine::Fjall => fjall::CONFIGURATION,
        Engine::Rocksdb => ROCKSDB_CONFIGURATION,
    }
}

/// How `engine` commits without a flush (the `no_flush_writes` row).
pub fn no_flush(engine: Engine) -> &'static str {
    match engine {
        Engine::Tilldb | Engine::TilldbEncrypted => tilldb::NO_FLUSH,
        Engine::Sqlite => sqlite::NO_FLUSH,
        Engine::Lmdb => lmdb::NO_FLUSH,
        Engine::Redb => redb::NO_FLUSH,
        Engine::Fjall => fjall::NO_FLUSH,
        Engine::Rocksdb => ROCKSDB_NO_FLUSH,
    }
}

/// RocksDB's configuration, known also to builds without it.
const ROCKSDB_CONFIGURATION: &str = "WriteOptions::set_sync(true): the write-ahead log is \
     fdatasynced before the write returns; each transaction is one WriteBatch. LRU block \
     cache of --cache-bytes; defaults otherwise, no compression. Length: a full iteration \
     (RocksDB keeps no exact count). Compaction: compact_range over every key.";
const ROCKSDB_NO_FLUSH: &str = "WriteOptions::set_sync(false): the batch is written to the \
     write-ahead log (to the OS), not synced.";

#[cfg(test)]
mod tests {
    use super::super::workload::{self, Keys};
    use super::*;

    /// Each built engine: writes at both levels, reads from two threads, ranges, removals,
    /// counts, compaction, close and reopen.
    #[test]
    fn every_built_engine_runs_each_operation() {
        let base = tempfile::tempdir().expect("tempdir");
        let keys = Keys::generate(100);
        let plain = Settings {
            cache_bytes: 16 << 20,
            flush_method: Some(FlushMethod::Fdatasync),
            torn_page_guard: None,
            write_buffer_bytes: 0,
        };
        // Each engine as it is, then tilldb with its write buffer on (`--write-buffer-bytes`).
        let buffered = Settings {
            write_buffer_bytes: 1 << 20,
            ..plain
        };
        let runs = default_engines()
            .into_iter()
            .map(|engine| (engine, plain))
            .chain([(Engine::Tilldb, buffered)]);
        for (i, (engine, settings)) in runs.enumerate() {
            let dir = base.path().join(format!("{}-{i}", name(engine)));
            std::fs::create_dir(&dir).expect("mkdir");
            let mut store = open(engine, &dir, settings).expect("open");
            store.put_txn(&keys.loaded, Commit::Sync).expect("put");
            store.put_txn(&keys.sorted, Commit::NoFlush).expect("put");
            std::thread::scope(|s| {
                for _ in 0..2 {
                    s.spawn(|| {
                        let mut reader = store.reader().expect("reader");
                        let len = reader.get(&keys.loaded[7]).expect("get");
                        assert_eq!(len, Some(workload::VALUE_BYTES), "{}", name(engine));
                        assert_eq!(reader.get(&keys.individual[0]).expect("get"), None);
                        assert_eq!(reader.range(&keys.sorted[0], 10).expect("range"), 10);
                    });
                }
            });
            store
                .remove_txn(keys.removed(), Commit::Sync)
                .expect("remove");
            assert_eq!(
                store.count_entries().expect("count"),
                50 + 20,
                "{}",
                name(engine)
            );
            store.close().expect("close");
            let mut store = open(engine, &dir, settings).expect("reopen");
            assert_eq!(
                store.count_entries().expect("count"),
                70,
                "{}",
                name(engine)
            );
            // The queue and predicate rows, against the keys each should leave.
            let mut model: std::collections::BTreeSet<Key> = keys.loaded[50..]
                .iter()
                .chain(&keys.sorted)
                .copied()
                .collect();
            assert_eq!(store.pop_txn(7).expect("pop"), 7, "{}", name(engine));
            for i in 0..7 {
                if i % 2 == 0 {
                    model.pop_first();
                } else {
                    model.pop_last();
                }
            }
            let rejected = model.iter().filter(|k| !workload::keep(&k[..])).count();
            let removed = store.retain_txn(workload::keep).expect("retain");
            assert_eq!(removed, rejected as u64, "{}", name(engine));
            model.retain(|k| workload::keep(k));
            let chosen: Vec<Key> = model
                .iter()
                .filter(|k| {
                    (workload::EXTRACT_FROM..workload::EXTRACT_TO).contains(&&k[..])
                        && workload::take(&k[..])
                })
                .copied()
                .collect();
            let taken = store
                .extract_txn(workload::EXTRACT_FROM, workload::EXTRACT_TO, workload::take)
                .expect("extract");
            assert_eq!(taken, chosen.len() as u64, "{}", name(engine));
            store.append_txn(&keys.appended).expect("append");
            let expected = model.len() - chosen.len() + keys.appended.len();
            assert_eq!(
                store.count_entries().expect("count"),
                expected as u64,
                "{}",
                name(engine)
            );
            let copy = base.path().join(format!("{}-{i}-compacted", name(engine)));
            store.compact(&copy).expect("compact");
            store.close().expect("close");
        }
    }
}
