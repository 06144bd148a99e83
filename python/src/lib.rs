//! The Python package `tilldb` (pyo3; `pip install ./python` builds it with maturin).
//!
//! ```python
//! import tilldb
//! with tilldb.open("shop") as db:
//!     with db.begin() as txn:             # commits ("sync") at the end, rolls back on raise
//!         txn.put(b"sale:0001", b"2 x coffee")
//!     for key, value in db.scan(start=b"sale:"):
//!         print(key, value)
//! ```
//!
//! How the engine's borrowing types cross to Python (`Txn<'db>` and `Range<'db>` borrow the
//! `Db`): `db.rs`. The exceptions: `errors.rs`. Arguments: `args.rs`; the key of an
//! encrypted database: `key.rs`. The stub `tilldb.pyi` beside Cargo.toml is the Python-side
//! reference; python/README.md the user's.
//!
//! No panic crosses into Python as an abort: pyo3 turns a panic in any method into
//! `pyo3_runtime.PanicException`, and the profile keeps `panic = "unwind"`. A panic in tilldb
//! is a bug (a broken invariant), so it is not a `tilldb.Error`.

mod args;
mod db;
mod errors;
mod key;
mod scan;
mod shared;
mod txn;

use pyo3::prelude::*;

/// tilldb: an embedded, crash-safe, transactional key-value store.
///
/// `tilldb.open(path, ...)` returns a `Db`; `Db.begin()` a `Txn`; `Db.scan()` a lazy iterator.
/// Keys and values are bytes. Errors are `tilldb.Error` and its subclasses.
#[pymodule(name = "tilldb")]
mod tilldb_module {
    #[pymodule_export]
    use crate::db::{Db, open};
    #[pymodule_export]
    use crate::errors::{
        ClosedError, ConflictError, CorruptionError, Error, InUseError, InvalidArgumentError,
        InvalidOptionsError, IoError, KeyRequiredError, KeyUnavailableError, LockedError,
        NotADatabaseError, NotEncryptedError, PoisonedError, ReadOnlyError, TooLargeError,
        WrongKeyError,
    };
    #[pymodule_export]
    use crate::scan::Scan;
    #[pymodule_export]
    use crate::txn::Txn;

    use pyo3::prelude::*;

    #[pymodule_init]
    fn init(module: &Bound<'_, PyModule>) -> PyResult<()> {
        module.add("__version__", env!("CARGO_PKG_VERSION"))
    }
}
