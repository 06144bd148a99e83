//! SQLite (rusqlite, bundled) in two configurations: write-ahead log (`journal_mode=WAL`) and
//! rollback journal (`journal_mode=DELETE`), both with `synchronous=FULL`.
//!
//! The table is `kv(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID`, a B-tree keyed like the other
//! stores. Every thread has its own connection (a connection is not shared between threads)
//! and runs `BEGIN IMMEDIATE; INSERT OR REPLACE ...; COMMIT`. SQLite allows one writer at a
//! time: the others wait in its busy handler (`busy_timeout`), which sleeps 1, 2, 5, 10, ...
//! ms between attempts (the bundled build has `HAVE_USLEEP`). That is how a multi-threaded
//! application meets SQLite's write lock, and part of what is compared.

use super::{BoxError, Store, Writer};
use rusqlite::{Connection, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

pub const CONFIGURATION_WAL: &str = "journal_mode=WAL, synchronous=FULL: each commit appends \
     to the WAL and syncs it before COMMIT returns (the bundled build has no HAVE_FDATASYNC, \
     so the sync is fsync); automatic checkpoints (every 1000 pages) also sync the database \
     file. One connection per thread; BEGIN IMMEDIATE waits for the write lock in SQLite's \
     busy handler (busy_timeout 60 s).";

pub const CONFIGURATION_ROLLBACK: &str = "journal_mode=DELETE, synchronous=FULL: each commit \
     writes the old pages to a rollback journal and syncs it, writes the database and syncs \
     it, then deletes the journal (several fsyncs per commit). One connection per thread; \
     BEGIN IMMEDIATE waits for the write lock in SQLite's busy handler (busy_timeout 60 s).";

/// Longest a writer waits for SQLite's write lock before the row fails.
const BUSY_TIMEOUT: Duration = Duration::from_mins(1);
const INSERT: &str = "INSERT OR REPLACE INTO kv (k, v) VALUES (?1, ?2)";

/// Which journal SQLite keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Journal {
    Wal,
    Rollback,
}

impl Journal {
    /// The `journal_mode` pragma's value, as SQLite reports it back.
    fn mode(self) -> &'static str {
        match self {
            Journal::Wal => "wal",
            Journal::Rollback => "delete",
        }
    }
}

struct SqliteStore {
    path: PathBuf,
    /// Kept open for the whole row, so the WAL is not checkpointed away and reset each time
    /// the last writer connection closes. (A `Mutex` only because a `Store` is shared.)
    first: Mutex<Connection>,
}

struct SqliteWriter {
    conn: Connection,
}

pub fn open(dir: &Path, journal: Journal) -> Result<Box<dyn Store>, BoxError> {
    let path = dir.join("sqlite.db");
    let first = connect(&path)?;
    let mode: String =
        first.pragma_update_and_check(None, "journal_mode", journal.mode(), |row| row.get(0))?;
    if mode != journal.mode() {
        return Err(format!("sqlite: journal_mode is {mode}, not {}", journal.mode()).into());
    }
    first.execute_batch("CREATE TABLE kv (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID")?;
    Ok(Box::new(SqliteStore {
        path,
        first: Mutex::new(first),
    }))
}

/// A connection to the database at `path` with this benchmark's per-connection settings.
fn connect(path: &Path) -> Result<Connection, BoxError> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // FULL: COMMIT returns only after the journal (and, in rollback mode, the database) is
    // synced. It is a per-connection setting, so every connection sets it.
    conn.pragma_update(None, "synchronous", "FULL")?;
    let synchronous: i64 = conn.pragma_query_value(None, "synchronous", |row| row.get(0))?;
    assert_eq!(synchronous, 2, "synchronous=FULL did not take");
    Ok(conn)
}

impl Store for SqliteStore {
    fn writer(&self) -> Result<Box<dyn Writer + Send + '_>, BoxError> {
        Ok(Box::new(SqliteWriter {
            conn: connect(&self.path)?,
        }))
    }

    fn close(self: Box<Self>) -> Result<(), BoxError> {
        let first = self
            .first
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        first.close().map_err(|(_, e)| e)?;
        Ok(())
    }
}

impl Writer for SqliteWriter {
    fn insert_commit(&mut self, key: &[u8], value: &[u8]) -> Result<(), BoxError> {
        let txn = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        txn.prepare_cached(INSERT)?.execute((key, value))?;
        txn.commit()?;
        Ok(())
    }
}
