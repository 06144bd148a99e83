//! `tilldb.open` and `tilldb.Db` (the state it shares with its transactions and iterators is
//! `shared.rs`).
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
use crate::errors::engine_error;
use crate::key::encryption_arg;
use crate::scan::Scan;
use crate::shared::Shared;
use crate::txn::Txn;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyType};
use std::ops::Bound as KeyBound;
use std::path::PathBuf;
use std::sync::Arc;
use tilldb::{Direction, FlushMethod, Options};

/// Opens (creating when missing) the database in directory `path`. With `read_only`, opens
/// an existing database read-only, at its latest durable commit, while another process may
/// have it open and commit (`refresh()` moves to the newest): nothing on disk changes. With
/// `key` (32 bytes) or `key_file` (a file holding them, as `till --key-file` reads it), opens
/// or creates an encrypted database (`key.rs`).
#[pyfunction]
#[pyo3(signature = (
    path, *, cache_bytes = None, page_bytes = None, flush_method = None, change_feed = false,
    read_only = false, key = None, key_file = None, write_buffer_bytes = None,
))]
#[expect(
    clippy::too_many_arguments,
    reason = "Python's keyword arguments of tilldb.open, one per option"
)]
pub fn open(
    py: Python<'_>,
    path: PathBuf,
    cache_bytes: Option<u64>,
    page_bytes: Option<u32>,
    flush_method: Option<&str>,
    change_feed: bool,
    read_only: bool,
    key: Option<&Bound<'_, PyAny>>,
    key_file: Option<PathBuf>,
    write_buffer_bytes: Option<u64>,
) -> PyResult<Db> {
    let encryption = encryption_arg(key, key_file)?;
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
        encryption,
        write_buffer_bytes: write_buffer_bytes.unwrap_or(defaults.write_buffer_bytes),
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
        shared: Arc::new(Shared::new(path, db)),
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
        self.shared.alone("refresh()", |db| {
            py.detach(|| db.refresh()).map_err(|e| engine_error(py, &e))
        })
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
