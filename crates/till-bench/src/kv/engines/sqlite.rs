//! SQLite (rusqlite, bundled) with a write-ahead log (`journal_mode=WAL`), the table
//! `kv(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID` (a B-tree keyed like the other stores), as
//! `till bench peers`' `sqlite-wal`. `Sync` transactions run under `synchronous=FULL` (the
//! WAL is synced before COMMIT returns), no-flush ones under `synchronous=OFF` (nothing is
//! synced; the OS has the WAL). The page cache (`cache_size`) is `--cache-bytes` per
//! connection: the writer's, and each reading thread's own connection, which reads in one
//! deferred transaction. The length is `SELECT count(*)` (a scan: SQLite keeps no count);
//! compaction is `VACUUM`, in place, measured after the close checkpoints the WAL away.

use super::super::workload::{Key, value_of};
use super::{BoxError, Commit, Compacted, KvReader, KvStore};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

pub const CONFIGURATION: &str = "journal_mode=WAL, synchronous=FULL: each commit appends to \
     the WAL and syncs it before COMMIT returns (fsync: the bundled build has no \
     HAVE_FDATASYNC); automatic checkpoints. cache_size = --cache-bytes per connection (the \
     writer's and each reading thread's). Length: SELECT count(*) (a scan). Compaction: VACUUM.";
pub const NO_FLUSH: &str = "synchronous=OFF on the writer's connection for the row: COMMIT \
     writes the WAL to the OS and syncs nothing.";

/// Longest a connection waits for a lock before the operation fails.
const BUSY_TIMEOUT: Duration = Duration::from_mins(1);
const INSERT: &str = "INSERT OR REPLACE INTO kv (k, v) VALUES (?1, ?2)";
const DELETE: &str = "DELETE FROM kv WHERE k = ?1";
const GET: &str = "SELECT length(v) FROM kv WHERE k = ?1";
const RANGE: &str = "SELECT k, v FROM kv WHERE k >= ?1 ORDER BY k LIMIT ?2";
const POP_FIRST: &str =
    "DELETE FROM kv WHERE k = (SELECT k FROM kv ORDER BY k LIMIT 1) RETURNING k, v";
const POP_LAST: &str =
    "DELETE FROM kv WHERE k = (SELECT k FROM kv ORDER BY k DESC LIMIT 1) RETURNING k, v";
/// `workload::keep` in SQL: the 24-byte key's last byte is even (its last hex digit).
const RETAIN: &str =
    "DELETE FROM kv WHERE substr(hex(k), 48, 1) NOT IN ('0','2','4','6','8','A','C','E')";
/// `workload::take` in SQL: byte 22 a multiple of four (its low hex digit 0, 4, 8 or C).
const EXTRACT: &str = "DELETE FROM kv WHERE k >= ?1 AND k < ?2 \
     AND substr(hex(k), 46, 1) IN ('0','4','8','C') RETURNING k, v";

struct SqliteStore {
    path: PathBuf,
    cache_kib: i64,
    /// The writer's connection. (A `Mutex` only because a store is shared with the readers,
    /// which open their own.)
    writer: Mutex<Connection>,
    /// The `synchronous` level the writer's connection is at.
    commit: Commit,
}

struct SqliteReader {
    conn: Connection,
}

pub fn open(dir: &Path, cache_bytes: u64) -> Result<Box<dyn KvStore>, BoxError> {
    let path = dir.join("sqlite.db");
    let cache_kib = i64::try_from(cache_bytes / 1024)?;
    let writer = connect(&path, cache_kib)?;
    let mode: String =
        writer.pragma_update_and_check(None, "journal_mode", "wal", |row| row.get(0))?;
    if mode != "wal" {
        return Err(format!("sqlite: journal_mode is {mode}, not wal").into());
    }
    writer.execute_batch(
        "CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID",
    )?;
    Ok(Box::new(SqliteStore {
        path,
        cache_kib,
        writer: Mutex::new(writer),
        commit: Commit::Sync,
    }))
}

/// A connection with this benchmark's settings: FULL sync, the cache, the busy timeout.
fn connect(path: &Path, cache_kib: i64) -> Result<Connection, BoxError> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    let synchronous: i64 = conn.pragma_query_value(None, "synchronous", |row| row.get(0))?;
    assert_eq!(synchronous, 2, "synchronous=FULL did not take");
    // Negative: KiB, not pages.
    conn.pragma_update(None, "cache_size", -cache_kib)?;
    Ok(conn)
}

impl SqliteStore {
    /// The writer's connection, its `synchronous` set for `commit`.
    fn writer_at(&mut self, commit: Commit) -> Result<&mut Connection, BoxError> {
        let conn = self
            .writer
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if commit != self.commit {
            let level = match commit {
                Commit::Sync => "FULL",
                Commit::NoFlush => "OFF",
            };
            conn.pragma_update(None, "synchronous", level)?;
            self.commit = commit;
        }
        Ok(conn)
    }

    /// Runs `statement` with `params` in one immediate durable transaction, reading the
    /// rows it returns (a key and a value each); returns how many.
    fn delete_returning(
        &mut self,
        statement: &str,
        params: impl rusqlite::Params,
    ) -> Result<u64, BoxError> {
        let conn = self.writer_at(Commit::Sync)?;
        let txn = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut taken = 0;
        {
            let mut stmt = txn.prepare_cached(statement)?;
            let mut rows = stmt.query(params)?;
            while let Some(row) = rows.next()? {
                let value = row.get_ref(1)?.as_blob()?;
                assert!(!value.is_empty(), "an empty value");
                taken += 1;
            }
        }
        txn.commit()?;
        Ok(taken)
    }

    /// Puts or removes every key in one immediate transaction, at `commit`'s level.
    fn write(&mut self, keys: &[Key], commit: Commit, put: bool) -> Result<(), BoxError> {
        let conn = self.writer_at(commit)?;
        let txn = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        {
            let mut stmt = txn.prepare_cached(if put { INSERT } else { DELETE })?;
            for key in keys {
                if put {
                    stmt.execute((&key[..], &value_of(key)[..]))?;
                } else {
                    stmt.execute((&key[..],))?;
                }
            }
        }
        txn.commit()?;
        Ok(())
    }
}

impl KvStore for SqliteStore {
    fn put_txn(&mut self, keys: &[Key], commit: Commit) -> Result<(), BoxError> {
        self.write(keys, commit, true)
    }

    fn remove_txn(&mut self, keys: &[Key], commit: Commit) -> Result<(), BoxError> {
        self.write(keys, commit, false)
    }

    fn pop_txn(&mut self, pops: usize) -> Result<usize, BoxError> {
        let conn = self.writer_at(Commit::Sync)?;
        let txn = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut taken = 0;
        for i in 0..pops {
            let statement = if i % 2 == 0 { POP_FIRST } else { POP_LAST };
            let mut stmt = txn.prepare_cached(statement)?;
            let mut rows = stmt.query(())?;
            if let Some(row) = rows.next()? {
                assert!(!row.get_ref(1)?.as_blob()?.is_empty(), "an empty value");
                taken += 1;
            }
        }
        txn.commit()?;
        Ok(taken)
    }

    fn retain_txn(&mut self, keep: fn(&[u8]) -> bool) -> Result<u64, BoxError> {
        // The predicate in SQL (`RETAIN`); checked against `keep` on a key of each kind.
        assert!(
            keep(&[0; 24]) && !keep(&[1; 24]),
            "RETAIN's predicate is not keep's"
        );
        let conn = self.writer_at(Commit::Sync)?;
        let txn = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let removed = txn.execute(RETAIN, ())?;
        txn.commit()?;
        Ok(removed as u64)
    }

    fn extract_txn(
        &mut self,
        from: &[u8],
        to: &[u8],
        take: fn(&[u8]) -> bool,
    ) -> Result<u64, BoxError> {
        assert!(
            take(&[4; 24]) && !take(&[1; 24]),
            "EXTRACT's predicate is not take's"
        );
        self.delete_returning(EXTRACT, (from, to))
    }

    fn reader(&self) -> Result<Box<dyn KvReader + '_>, BoxError> {
        let conn = connect(&self.path, self.cache_kib)?;
        // One read transaction for all of this thread's reads: its snapshot starts at the
        // first SELECT.
        conn.execute_batch("BEGIN DEFERRED")?;
        Ok(Box::new(SqliteReader { conn }))
    }

    fn count_entries(&self) -> Result<u64, BoxError> {
        let conn = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let count: i64 = conn.query_row("SELECT count(*) FROM kv", (), |row| row.get(0))?;
        Ok(u64::try_from(count)?)
    }

    fn compact(&mut self, _copy_dir: &Path) -> Result<Compacted, BoxError> {
        let conn = self
            .writer
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        conn.execute_batch("VACUUM")?;
        Ok(Compacted::InPlace)
    }

    fn close(self: Box<Self>) -> Result<(), BoxError> {
        let conn = self
            .writer
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        // The last connection's close checkpoints the WAL into the database and removes it.
        conn.close().map_err(|(_, e)| e)?;
        Ok(())
    }
}

impl KvReader for SqliteReader {
    fn get(&mut self, key: &[u8]) -> Result<Option<usize>, BoxError> {
        let len: Option<i64> = self
            .conn
            .prepare_cached(GET)?
            .query_row((key,), |row| row.get(0))
            .optional()?;
        Ok(len.map(usize::try_from).transpose()?)
    }

    fn range(&mut self, from: &[u8], count: usize) -> Result<usize, BoxError> {
        let mut stmt = self.conn.prepare_cached(RANGE)?;
        let mut rows = stmt.query((from, i64::try_from(count)?))?;
        let mut read = 0;
        while let Some(row) = rows.next()? {
            let key = row.get_ref(0)?.as_blob()?;
            let value = row.get_ref(1)?.as_blob()?;
            assert!(!key.is_empty() && !value.is_empty(), "an empty entry");
            read += 1;
        }
        Ok(read)
    }
}
