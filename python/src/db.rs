//! `tilldb.open` and `tilldb.Db`, with the state a database shares with its transactions and
//! iterators.
//!
//! # Handles and close
//!
//! A `Txn` and a `Scan` each own a clone of the engine's `Db` (a cheap `Arc`) and borrow it
//! (`self_cell`, no `unsafe`), so each may outlive the Python `Db` object. `close()` counts
//! them, as the C ABI does: it refuses (`InUseError`) while any is open, rather than end a
//! transaction or iterator that another part of the program still holds. An iterator ends by
//! itself when exhausted; `Scan.close()` and `del` end it early.
//!
//! # The GIL
//!
//! Every call that may wait (for the writer lock, a flush, a disk read) runs detached from the
//! interpreter (`Python::detach`), so other Python threads go on meanwhile. The one mutex here,
//! `Shared::state`, is only held for a few instructions and never across a detach or a call
//! into Python, so a thread holding the GIL never waits for a thread that needs it.

use crate::args::{bound_arg, bytes_arg, table_arg};
use crate::errors::{InUseError, closed_db, engine_error};
use crate::scan::Scan;
use crate::txn::Txn;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyType};
use std::ops::Bound as KeyBound;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::ThreadId;
use tilldb::{Direction, FlushMethod, Options};

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
    fn take_for_close(&self) -> PyResult<Option<tilldb::Db>> {
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

    fn is_closed(&self) -> bool {
        self.state().db.is_none()
    }
}

/// Opens (creating when missing) the database in directory `path`. With `read_only`, opens
/// an existing database read-only, at its latest durable commit, while another process may
/// have it open and commit (`refresh()` moves to the newest): nothing on disk changes.
#[pyfunction]
#[pyo3(signature = (path, *, cache_bytes = None, page_bytes = None, flush_method = None, change_feed = false, read_only = false))]
pub fn open(
    py: Python<'_>,
    path: PathBuf,
    cache_bytes: Option<u64>,
    page_bytes: Option<u32>,
    flush_method: Option<&str>,
    change_feed: bool,
    read_only: bool,
) -> PyResult<Db> {
    let defaults = Options::default();
    let options = Options {
        cache_bytes: cache_bytes.unwrap_or(defaults.cache_bytes),
        page_bytes,
        flush_method: flush_method
            .map(|m| {
                m.parse::<FlushMethod>()
                    .map_err(|e| PyValueError::new_err(format!("flush_method: {e}")))
            })
            .transpose()?,
        change_feed,
        ..defaults
    };
    let db = py
        .detach(|| {
            if read_only {
                tilldb::Db::open_read_only(&path, options)
            } else {
                tilldb::Db::open(&path, options)
            }
        })
        .map_err(|e| engine_error(py, &e))?;
    Ok(Db {
        shared: Arc::new(Shared {
            path,
            state: Mutex::new(State {
                db: Some(db),
                txns_open: 0,
                scans_open: 0,
                writer: None,
                next_txn: 0,
            }),
        }),
    })
}

/// An open database. Also a context manager that closes it.
#[pyclass(module = "tilldb", frozen)]
#[derive(Debug)]
pub struct Db {
    shared: Arc<Shared>,
}

#[pymethods]
impl Db {
    /// Begins a read-write transaction, waiting while another thread's is open.
    fn begin(&self, py: Python<'_>) -> PyResult<Txn> {
        Txn::begin(py, &self.shared)
    }

    /// The latest acknowledged value of `key` in `table` (None: the default table), or None.
    #[pyo3(signature = (key, table = None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        table: Option<&str>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let key = bytes_arg(key, "key")?;
        let db = self.shared.db()?;
        let table = table_arg(table);
        let value = py
            .detach(|| db.get_in(table, &key))
            .map_err(|e| engine_error(py, &e))?;
        Ok(value.map(|v| PyBytes::new(py, &v)))
    }

    /// A lazy iterator of `(key, value)` over `table` from `start` (inclusive) to `end`
    /// (exclusive), backward when `reverse`; it reads one snapshot, the database as it is now,
    /// a batch at a time.
    #[pyo3(signature = (start = None, end = None, table = None, reverse = false))]
    fn scan(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        table: Option<&str>,
        reverse: bool,
    ) -> PyResult<Scan> {
        let start = bound_arg(start, "start")?;
        let end = bound_arg(end, "end")?;
        let lower = start
            .as_deref()
            .map_or(KeyBound::Unbounded, KeyBound::Included);
        let upper = end
            .as_deref()
            .map_or(KeyBound::Unbounded, KeyBound::Excluded);
        let direction = if reverse {
            Direction::Backward
        } else {
            Direction::Forward
        };
        Scan::new(
            py,
            &self.shared,
            table_arg(table),
            (lower, upper),
            direction,
        )
    }

    /// The number of entries in `table` (None: the default table; 0 for a table that does
    /// not exist), as readers see it now: a count kept with the table, no scan.
    #[pyo3(signature = (table = None))]
    fn len(&self, py: Python<'_>, table: Option<&str>) -> PyResult<u64> {
        let db = self.shared.db()?;
        let table = table_arg(table);
        py.detach(|| db.len_in(table))
            .map_err(|e| engine_error(py, &e))
    }

    /// `len(db)`: the number of entries in the default table.
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        let rows = self.len(py, None)?;
        usize::try_from(rows)
            .map_err(|_| pyo3::exceptions::PyOverflowError::new_err("too many entries"))
    }

    /// The names of the named tables, in order (the default table is not listed).
    fn tables(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let db = self.shared.db()?;
        py.detach(|| db.tables()).map_err(|e| engine_error(py, &e))
    }

    /// Writes a compacted copy of the database to `path`, a directory that must not exist:
    /// every table as one snapshot sees it, inserted afresh, so the copy's file holds no free
    /// pages. Commits may go on meanwhile. Returns the entries copied. Refused with
    /// `InvalidArgumentError` when `path` exists or the change feed is on.
    fn compact_to(&self, py: Python<'_>, path: PathBuf) -> PyResult<u64> {
        let db = self.shared.db()?;
        py.detach(move || db.compact_to(path))
            .map(|report| report.entries)
            .map_err(|e| engine_error(py, &e))
    }

    /// Checkpoints and closes the database (the next open replays nothing). Refused with
    /// `InUseError` while transactions or iterators of it are open; a no-op once closed.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        match self.shared.take_for_close()? {
            Some(db) => py.detach(|| db.close()).map_err(|e| engine_error(py, &e)),
            None => Ok(()),
        }
    }

    /// A database opened with `read_only=True`: moves its snapshot to the latest durable
    /// commit of the process writing it. Refused with `InUseError` while transactions or
    /// iterators of it are open; on a read-write database it does nothing.
    fn refresh(&self, py: Python<'_>) -> PyResult<()> {
        let mut state = self.shared.state();
        if state.txns_open > 0 || state.scans_open > 0 {
            return Err(InUseError::new_err(format!(
                "refresh() refused: {} transaction(s) and {} iterator(s) of this database are \
                 still open",
                state.txns_open, state.scans_open
            )));
        }
        let db = state.db.as_mut().ok_or_else(closed_db)?;
        py.detach(|| db.refresh()).map_err(|e| engine_error(py, &e))
    }

    /// True for a database opened with `read_only=True`.
    #[getter]
    fn read_only(&self) -> PyResult<bool> {
        Ok(self.shared.db()?.is_read_only())
    }

    /// True once `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// The directory the database is in, as given to `open`.
    #[getter]
    fn path(&self) -> PathBuf {
        self.shared.path.clone()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the database; an exception from the block goes on after it.
    #[pyo3(signature = (_exc_type, _exc, _traceback))]
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyType>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let state = if self.shared.is_closed() {
            "closed"
        } else {
            "open"
        };
        format!(
            "<tilldb.Db {:?} {state}>",
            self.shared.path.display().to_string()
        )
    }
}
