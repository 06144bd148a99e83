//! `tilldb.Txn`: a read-write transaction. Its writes stay private until `commit`; a context
//! manager commits (`"sync"`) when its block ends normally and rolls back when it raises.
//!
//! ```text
//!   Db.begin() ──> open ──commit(durability)──> ended   (whatever commit returns)
//!                    │ ───rollback()──────────> ended
//!                    └───garbage-collected────> ended   (rolled back)
//! ```
//!
//! Any call on an ended transaction raises `ClosedError`.

use crate::args::{bound_arg, bytes_arg, durability_arg, table_arg};
use crate::errors::{ended_txn, engine_error};
use crate::shared::Shared;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyType};
use std::ops::Bound as KeyBound;
use std::sync::Arc;
use tilldb::{Direction, Durability};

/// The engine's transaction, `None` once ended (`commit_with` takes it by value).
type MaybeTxn<'db> = Option<tilldb::Txn<'db>>;

self_cell::self_cell!(
    /// A clone of the database, owned, and the engine transaction that borrows it.
    struct OwnedTxn {
        owner: tilldb::Db,
        #[covariant]
        dependent: MaybeTxn,
    }
    impl {Debug}
);

/// A read-write transaction; one at a time per database (a second `begin` waits for it).
#[pyclass(module = "tilldb")]
#[derive(Debug)]
pub struct Txn {
    /// `None` once ended. Invariant: when `Some`, its engine transaction is `Some` too.
    inner: Option<OwnedTxn>,
    shared: Arc<Shared>,
    /// This transaction's id in `shared`'s count.
    id: u64,
}

/// Which end of a table `Txn::end_entry` reads, and whether it takes it.
#[derive(Debug, Clone, Copy)]
enum End {
    First,
    Last,
    PopFirst,
    PopLast,
}

/// A `(key, value)` pair as Python sees it.
type Entry<'py> = (Bound<'py, PyBytes>, Bound<'py, PyBytes>);

impl Txn {
    /// `first`, `last`, `pop_first` or `pop_last` of `table`.
    fn end_entry<'py>(
        &mut self,
        py: Python<'py>,
        table: Option<&str>,
        end: End,
    ) -> PyResult<Option<Entry<'py>>> {
        let table = table_arg(table);
        let owned = self.inner.as_mut().ok_or_else(ended_txn)?;
        // Detached: it reads, so it may wait for the writer lock.
        let entry = py
            .detach(|| {
                owned.with_dependent_mut(|_, txn| {
                    let txn = live(txn);
                    match end {
                        End::First => txn.first_in(table),
                        End::Last => txn.last_in(table),
                        End::PopFirst => txn.pop_first_in(table),
                        End::PopLast => txn.pop_last_in(table),
                    }
                })
            })
            .map_err(|e| engine_error(py, &e))?;
        Ok(entry.map(|(k, v)| (PyBytes::new(py, &k), PyBytes::new(py, &v))))
    }

    /// Removes the entries of a range for which `predicate(key, value)`'s truth is
    /// `remove_if`, calling `removed` with each; the first exception `predicate` raises
    /// stops the removals and is raised. Not detached: the predicate is Python.
    fn remove_where(
        &mut self,
        py: Python<'_>,
        (predicate, remove_if): (&Bound<'_, PyAny>, bool),
        (start, end): (Option<&Bound<'_, PyAny>>, Option<&Bound<'_, PyAny>>),
        table: Option<&str>,
        mut removed: impl FnMut(&[u8], &[u8]),
    ) -> PyResult<()> {
        let (start, end) = (bound_arg(start, "start")?, bound_arg(end, "end")?);
        let lower = start
            .as_deref()
            .map_or(KeyBound::Unbounded, KeyBound::Included);
        let upper = end
            .as_deref()
            .map_or(KeyBound::Unbounded, KeyBound::Excluded);
        let table = table_arg(table);
        let owned = self.inner.as_mut().ok_or_else(ended_txn)?;
        let mut raised = None;
        owned
            .with_dependent_mut(|_, txn| {
                live(txn).retain_in(table, lower, upper, |key, value| {
                    if raised.is_some() {
                        return true;
                    }
                    let verdict = predicate
                        .call1((PyBytes::new(py, key), PyBytes::new(py, value)))
                        .and_then(|r| r.is_truthy());
                    match verdict {
                        Ok(truth) if truth == remove_if => {
                            removed(key, value);
                            false
                        }
                        Ok(_) => true,
                        Err(e) => {
                            raised = Some(e);
                            true
                        }
                    }
                })
            })
            .map_err(|e| engine_error(py, &e))?;
        raised.map_or(Ok(()), Err)
    }

    /// Begins a transaction of the database `shared`, waiting (detached) for the writer lock.
    pub fn begin(py: Python<'_>, shared: &Arc<Shared>) -> PyResult<Txn> {
        let db = shared.db_for_begin()?;
        let owned = py
            .detach(|| OwnedTxn::try_new(db, |db| db.begin().map(Some)))
            .map_err(|e| engine_error(py, &e))?;
        let id = match shared.txn_begun() {
            Ok(id) => id,
            Err(e) => {
                // Closed while this waited: roll back.
                py.detach(|| drop(owned));
                return Err(e);
            }
        };
        Ok(Txn {
            inner: Some(owned),
            shared: Arc::clone(shared),
            id,
        })
    }

    /// Ends the transaction: commits at `durability`, or rolls back when `None`. It has ended
    /// whatever the result.
    fn end(&mut self, py: Python<'_>, durability: Option<Durability>) -> PyResult<()> {
        let mut owned = self.inner.take().ok_or_else(ended_txn)?;
        let result = py.detach(move || {
            let result = owned.with_dependent_mut(|_, txn| {
                let txn = txn
                    .take()
                    .expect("an open Txn holds its engine transaction");
                if let Some(durability) = durability {
                    txn.commit_with(durability)
                } else {
                    txn.rollback();
                    Ok(())
                }
            });
            // The database clone may be the last (the `Db` closed or dropped): its drop closes
            // files, so it too happens detached.
            drop(owned);
            result
        });
        self.shared.txn_ended(self.id);
        result.map_err(|e| engine_error(py, &e))
    }
}

#[pymethods]
impl Txn {
    /// Sets `key` to `value` in `table` (None: the default table; created at commit).
    #[pyo3(signature = (key, value, table = None))]
    fn put(
        &mut self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        table: Option<&str>,
    ) -> PyResult<()> {
        let key = bytes_arg(key, "key")?;
        let value = bytes_arg(value, "value")?;
        let table = table_arg(table);
        let owned = self.inner.as_mut().ok_or_else(ended_txn)?;
        owned
            .with_dependent_mut(|_, txn| live(txn).put_in(table, &key, &value))
            .map_err(|e| engine_error(py, &e))
    }

    /// The value of `key` in `table`, this transaction's own writes included, or None.
    #[pyo3(signature = (key, table = None))]
    fn get<'py>(
        &mut self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        table: Option<&str>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let key = bytes_arg(key, "key")?;
        let table = table_arg(table);
        let owned = self.inner.as_mut().ok_or_else(ended_txn)?;
        let value = py
            .detach(|| owned.with_dependent_mut(|_, txn| live(txn).get_in(table, &key)))
            .map_err(|e| engine_error(py, &e))?;
        Ok(value.map(|v| PyBytes::new(py, &v)))
    }

    /// Removes `key` from `table` (nothing happens if it is absent).
    #[pyo3(signature = (key, table = None))]
    fn delete(
        &mut self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        table: Option<&str>,
    ) -> PyResult<()> {
        let key = bytes_arg(key, "key")?;
        let table = table_arg(table);
        let owned = self.inner.as_mut().ok_or_else(ended_txn)?;
        owned
            .with_dependent_mut(|_, txn| live(txn).delete_in(table, &key))
            .map_err(|e| engine_error(py, &e))
    }

    /// Drops `table` with every entry in it when the transaction commits; returns whether it
    /// existed as the transaction saw it. Readers that began before the commit still see the
    /// table whole. The default table cannot be dropped, nor a table while the change feed is
    /// on: `InvalidArgumentError`.
    fn drop_table(&mut self, py: Python<'_>, table: &str) -> PyResult<bool> {
        let owned = self.inner.as_mut().ok_or_else(ended_txn)?;
        // Detached: it reads, so it may wait for the writer lock.
        py.detach(|| owned.with_dependent_mut(|_, txn| live(txn).drop_table(table)))
            .map_err(|e| engine_error(py, &e))
    }

    /// The entries of `table` from `start` (inclusive) to `end` (exclusive), backward when
    /// `reverse`, this transaction's own writes included, as a list of `(key, value)`; at
    /// most `limit` of them (None: all). Read lazily: a scan of a few entries of a large
    /// table reads a few.
    #[pyo3(signature = (start = None, end = None, table = None, reverse = false, limit = None))]
    fn scan<'py>(
        &mut self,
        py: Python<'py>,
        start: Option<&Bound<'py, PyAny>>,
        end: Option<&Bound<'py, PyAny>>,
        table: Option<&str>,
        reverse: bool,
        limit: Option<usize>,
    ) -> PyResult<Vec<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
        let (start, end) = (bound_arg(start, "start")?, bound_arg(end, "end")?);
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
        let table = table_arg(table);
        let owned = self.inner.as_mut().ok_or_else(ended_txn)?;
        let entries = py
            .detach(|| {
                owned.with_dependent_mut(|_, txn| {
                    live(txn)
                        .range_in(table, lower, upper, direction)?
                        .take(limit.unwrap_or(usize::MAX))
                        .collect::<tilldb::Result<Vec<_>>>()
                })
            })
            .map_err(|e| engine_error(py, &e))?;
        Ok(entries
            .into_iter()
            .map(|(k, v)| (PyBytes::new(py, &k), PyBytes::new(py, &v)))
            .collect())
    }

    /// The entry of `table` with the smallest key, own writes included, or None.
    #[pyo3(signature = (table = None))]
    fn first<'py>(&mut self, py: Python<'py>, table: Option<&str>) -> PyResult<Option<Entry<'py>>> {
        self.end_entry(py, table, End::First)
    }

    /// The entry of `table` with the largest key, own writes included, or None.
    #[pyo3(signature = (table = None))]
    fn last<'py>(&mut self, py: Python<'py>, table: Option<&str>) -> PyResult<Option<Entry<'py>>> {
        self.end_entry(py, table, End::Last)
    }

    /// Removes the entry of `table` with the smallest key and returns it (None if empty):
    /// a queue's head, one descent a pop however many came before.
    #[pyo3(signature = (table = None))]
    fn pop_first<'py>(
        &mut self,
        py: Python<'py>,
        table: Option<&str>,
    ) -> PyResult<Option<Entry<'py>>> {
        self.end_entry(py, table, End::PopFirst)
    }

    /// Removes the entry of `table` with the largest key and returns it (None if empty).
    #[pyo3(signature = (table = None))]
    fn pop_last<'py>(
        &mut self,
        py: Python<'py>,
        table: Option<&str>,
    ) -> PyResult<Option<Entry<'py>>> {
        self.end_entry(py, table, End::PopLast)
    }

    /// Removes every entry of `table` from `start` to `end` (exclusive) for which
    /// `keep(key, value)` is false; returns how many. If `keep` raises, the exception goes
    /// on and what it rejected before stays removed in the transaction (roll it back).
    #[pyo3(signature = (keep, start = None, end = None, table = None))]
    fn retain(
        &mut self,
        py: Python<'_>,
        keep: &Bound<'_, PyAny>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        table: Option<&str>,
    ) -> PyResult<u64> {
        let mut removed = 0;
        self.remove_where(py, (keep, false), (start, end), table, |_, _| removed += 1)?;
        Ok(removed)
    }

    /// Removes every entry of `table` from `start` to `end` (exclusive) for which
    /// `take(key, value)` is true, and returns them as a list of `(key, value)`. If `take`
    /// raises, as `retain`.
    #[pyo3(signature = (take, start = None, end = None, table = None))]
    fn extract_if<'py>(
        &mut self,
        py: Python<'py>,
        take: &Bound<'py, PyAny>,
        start: Option<&Bound<'py, PyAny>>,
        end: Option<&Bound<'py, PyAny>>,
        table: Option<&str>,
    ) -> PyResult<Vec<Entry<'py>>> {
        let mut taken = Vec::new();
        self.remove_where(py, (take, true), (start, end), table, |key, value| {
            taken.push((PyBytes::new(py, key), PyBytes::new(py, value)));
        })?;
        Ok(taken)
    }

    /// Commits, returning once the commit is as durable as `durability` asks: `"sync"`
    /// (flushed to stable storage), `"buffered"` (written to the OS) or `"lazy"` (in tilldb's
    /// log buffer); see docs/durability.md. A bad name is a `ValueError` and leaves the
    /// transaction open; otherwise it has ended, whatever the result.
    #[pyo3(signature = (durability = "sync"))]
    fn commit(&mut self, py: Python<'_>, durability: &str) -> PyResult<()> {
        let durability = durability_arg(durability)?;
        self.end(py, Some(durability))
    }

    /// Drops the transaction's writes.
    fn rollback(&mut self, py: Python<'_>) -> PyResult<()> {
        self.end(py, None)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Commits (`"sync"`) when the block ended normally, rolls back when it raised (the
    /// exception goes on); nothing if the block already ended the transaction.
    #[pyo3(signature = (exc_type, _exc, _traceback))]
    fn __exit__(
        &mut self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyType>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if self.inner.is_some() {
            let durability = exc_type.is_none().then_some(Durability::Sync);
            self.end(py, durability)?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let state = if self.inner.is_some() {
            "open"
        } else {
            "ended"
        };
        format!("<tilldb.Txn {state}>")
    }
}

impl Drop for Txn {
    /// A transaction garbage-collected while open rolls back.
    fn drop(&mut self) {
        if let Some(owned) = self.inner.take() {
            drop(owned);
            self.shared.txn_ended(self.id);
        }
    }
}

/// The engine transaction of an open `Txn`.
fn live<'a, 'db>(txn: &'a mut MaybeTxn<'db>) -> &'a mut tilldb::Txn<'db> {
    txn.as_mut()
        .expect("an open Txn holds its engine transaction")
}
