//! `tilldb.Scan`: the lazy iterator `Db.scan` returns, over the engine's `Range`, which reads
//! one snapshot (the database when the scan was made) a batch of 256 entries at a time. So a
//! scan of any size holds one batch, and commits made while it is read are not seen.
//!
//! It ends when exhausted, when an error is raised from it, at `close()`, or when garbage
//! collected: then it releases its snapshot and stops counting against `Db.close()`.

use crate::errors::engine_error;
use crate::shared::Shared;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::ops::Bound as KeyBound;
use std::sync::Arc;
use tilldb::{Direction, Range};

self_cell::self_cell!(
    /// A clone of the database, owned, and the engine iterator that borrows it.
    struct OwnedRange {
        owner: tilldb::Db,
        #[covariant]
        dependent: Range,
    }
    impl {Debug}
);

/// A lazy iterator of `(key, value)` pairs, as `bytes`.
#[pyclass(module = "tilldb")]
#[derive(Debug)]
pub struct Scan {
    /// `None` once ended.
    inner: Option<OwnedRange>,
    shared: Arc<Shared>,
}

impl Scan {
    /// An iterator over `table` between the bounds, at the state now.
    pub fn new(
        py: Python<'_>,
        shared: &Arc<Shared>,
        table: &str,
        (lower, upper): (KeyBound<&[u8]>, KeyBound<&[u8]>),
        direction: Direction,
    ) -> PyResult<Scan> {
        let db = shared.db()?;
        let owned = py
            .detach(|| OwnedRange::try_new(db, |db| db.range_in(table, lower, upper, direction)))
            .map_err(|e| engine_error(py, &e))?;
        if let Err(e) = shared.scan_begun() {
            // Closed meanwhile.
            py.detach(|| drop(owned));
            return Err(e);
        }
        Ok(Scan {
            inner: Some(owned),
            shared: Arc::clone(shared),
        })
    }

    /// Releases the snapshot; stops counting against `Db.close()`.
    fn end(&mut self, py: Python<'_>) {
        if let Some(owned) = self.inner.take() {
            py.detach(|| drop(owned));
            self.shared.scan_ended();
        }
    }
}

#[pymethods]
impl Scan {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// The next `(key, value)`; `StopIteration` at the end (and ever after).
    fn __next__<'py>(
        &mut self,
        py: Python<'py>,
    ) -> PyResult<Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
        let Some(owned) = self.inner.as_mut() else {
            return Ok(None);
        };
        // Most calls take an entry from the batch in memory; one in 256 reads the next batch.
        let next = py.detach(|| owned.with_dependent_mut(|_, range| range.next()));
        match next {
            Some(Ok((key, value))) => Ok(Some((PyBytes::new(py, &key), PyBytes::new(py, &value)))),
            None => {
                self.end(py);
                Ok(None)
            }
            Some(Err(e)) => {
                // The engine's iterator ends after an error; so does this one.
                self.end(py);
                Err(engine_error(py, &e))
            }
        }
    }

    /// Ends the iterator before it is exhausted, releasing its snapshot.
    fn close(&mut self, py: Python<'_>) {
        self.end(py);
    }

    fn __repr__(&self) -> String {
        let state = if self.inner.is_some() {
            "open"
        } else {
            "ended"
        };
        format!("<tilldb.Scan {state}>")
    }
}

impl Drop for Scan {
    fn drop(&mut self) {
        if let Some(owned) = self.inner.take() {
            drop(owned);
            self.shared.scan_ended();
        }
    }
}
