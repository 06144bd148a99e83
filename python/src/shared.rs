//! What a database shares with its transactions and iterators ([`Shared`]): the engine's
//! handle, and the counts that `close()` checks (see `db.rs`, "Handles and close"). Its one
//! mutex is held for a few instructions only, never across a detach or a call into Python.

use crate::errors::{InUseError, closed_db};
use pyo3::prelude::*;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::thread::ThreadId;

/// What a `Db` shares with its transactions and iterators.
#[derive(Debug)]
pub struct Shared {
    pub path: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// The engine's database; `None` once closed.
    db: Option<tilldb::Db>,
    /// Transactions begun and not yet ended: any number (the engine's writer lock is taken at
    /// a transaction's first read, or at commit).
    txns_open: usize,
    scans_open: usize,
    /// The last transaction begun (unless it ended) and the thread that began it: a second
    /// `begin` on that thread is refused, since two transactions of one thread that both
    /// read would wait for each other's writer lock forever.
    writer: Option<(u64, ThreadId)>,
    /// The id of the next transaction.
    next_txn: u64,
}

impl Shared {
    /// The state of a database just opened at `path`.
    pub fn new(path: PathBuf, db: tilldb::Db) -> Shared {
        Shared {
            path,
            state: Mutex::new(State {
                db: Some(db),
                txns_open: 0,
                scans_open: 0,
                writer: None,
                next_txn: 0,
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while the state was held leaves counts that are still whole numbers: go on.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A clone of the engine's database, or `ClosedError`.
    pub fn db(&self) -> PyResult<tilldb::Db> {
        self.state().db.clone().ok_or_else(closed_db)
    }

    /// The database for a new transaction on this thread, refused while this thread's own
    /// transaction is open.
    pub fn db_for_begin(&self) -> PyResult<tilldb::Db> {
        let state = self.state();
        if state
            .writer
            .is_some_and(|(_, thread)| thread == std::thread::current().id())
        {
            return Err(InUseError::new_err(
                "this thread's transaction of this database is still open; commit or roll it \
                 back first (a second begin() would wait for it forever)",
            ));
        }
        state.db.clone().ok_or_else(closed_db)
    }

    /// Counts a transaction that has begun and returns its id, unless the database was closed
    /// meanwhile (then the caller rolls it back).
    pub fn txn_begun(&self) -> PyResult<u64> {
        let mut state = self.state();
        if state.db.is_none() {
            return Err(closed_db());
        }
        let id = state.next_txn;
        state.next_txn += 1;
        state.txns_open += 1;
        state.writer = Some((id, std::thread::current().id()));
        Ok(id)
    }

    /// Counts transaction `id` as ended (after the engine has ended it).
    pub fn txn_ended(&self, id: u64) {
        let mut state = self.state();
        assert!(state.txns_open > 0, "transaction {id} ended twice");
        state.txns_open -= 1;
        if state.writer.is_some_and(|(writer, _)| writer == id) {
            state.writer = None;
        }
        assert!(
            state.txns_open > 0 || state.writer.is_none(),
            "no transaction is open, but one is recorded as the last begun"
        );
    }

    /// Counts an iterator that was made, unless the database was closed meanwhile.
    pub fn scan_begun(&self) -> PyResult<()> {
        let mut state = self.state();
        if state.db.is_none() {
            return Err(closed_db());
        }
        state.scans_open += 1;
        Ok(())
    }

    /// Counts an iterator that has ended.
    pub fn scan_ended(&self) {
        let mut state = self.state();
        assert!(state.scans_open > 0, "an iterator ended twice");
        state.scans_open -= 1;
    }

    /// Takes the database out for closing, unless handles are open (`InUseError`); `None` if it
    /// was closed already.
    pub fn take_for_close(&self) -> PyResult<Option<tilldb::Db>> {
        let mut state = self.state();
        if state.db.is_some() && (state.txns_open > 0 || state.scans_open > 0) {
            return Err(InUseError::new_err(format!(
                "close() refused: {} transaction(s) and {} iterator(s) of this database are \
                 still open; commit or roll back each transaction, and exhaust, close() or \
                 delete each iterator first",
                state.txns_open, state.scans_open
            )));
        }
        Ok(state.db.take())
    }

    pub fn is_closed(&self) -> bool {
        self.state().db.is_none()
    }

    /// Runs `f` on the engine's database while no transaction or iterator of it is open
    /// (`what` names the call refused otherwise, with `InUseError`), holding the state so none
    /// begins meanwhile.
    pub fn alone<R>(
        &self,
        what: &str,
        f: impl FnOnce(&mut tilldb::Db) -> PyResult<R>,
    ) -> PyResult<R> {
        let mut state = self.state();
        if state.txns_open > 0 || state.scans_open > 0 {
            return Err(InUseError::new_err(format!(
                "{what} refused: {} transaction(s) and {} iterator(s) of this database are \
                 still open",
                state.txns_open, state.scans_open
            )));
        }
        let db = state.db.as_mut().ok_or_else(closed_db)?;
        f(db)
    }
}
