//! The exceptions of the `tilldb` module: one base class, `tilldb.Error`, and a subclass for
//! each case a caller handles differently. The message is always the engine's own text (for a
//! corruption it names the file and offset; for a lock, the holder's pid).
//!
//! ```text
//! engine error                          exception               extra attributes
//! Error::Io                             IoError                 errno (int | None)
//! Error::Corruption, Error::LogMissing  CorruptionError         file (str), offset (int)
//! Error::Locked                         LockedError             pid (int | None)
//! Error::Poisoned, Error::PoisonedBy    PoisonedError
//! Error::Conflict                       ConflictError
//! Error::TooLarge                       TooLargeError
//! Error::InvalidOptions                 InvalidOptionsError
//! Error::InvalidArgument                InvalidArgumentError
//! Error::NotADatabase                   NotADatabaseError
//! Error::ReadOnly                       ReadOnlyError
//! Error::KeyRequired                    KeyRequiredError        key_id (str)
//! Error::WrongKey                       WrongKeyError           key_id (str)
//! Error::NotEncrypted                   NotEncryptedError
//! Error::KeyUnavailable                 KeyUnavailableError
//! anything else (the change feed, ...)  Error
//! (the binding) a closed Db, an ended Txn  ClosedError
//! (the binding) close() with handles open  InUseError
//! ```
//!
//! Arguments of the wrong type or value (a `str` key, an unknown durability) are Python's own
//! `TypeError` and `ValueError`, raised before tilldb is called.

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::{PyErr, Python, create_exception};

create_exception!(
    tilldb,
    Error,
    PyException,
    "Base class of every error tilldb raises; its message is the engine's."
);
create_exception!(
    tilldb,
    IoError,
    Error,
    "A system call failed; the message names the file and the operation (`errno` is set)."
);
create_exception!(
    tilldb,
    CorruptionError,
    Error,
    "Bytes on disk violate the format; the message names the file and offset (`file`, `offset`)."
);
create_exception!(
    tilldb,
    LockedError,
    Error,
    "The database is open elsewhere; the message names the holder (`pid`, None if unknown)."
);
create_exception!(
    tilldb,
    PoisonedError,
    Error,
    "The database stopped after an earlier write or flush failed; close it and open it again."
);
create_exception!(
    tilldb,
    ConflictError,
    Error,
    "The transaction lost a write-write race; retry it."
);
create_exception!(
    tilldb,
    TooLargeError,
    Error,
    "A key, value or transaction is larger than tilldb stores."
);
create_exception!(
    tilldb,
    InvalidOptionsError,
    Error,
    "The options cannot work on their own or with the existing database; the message says why."
);
create_exception!(
    tilldb,
    InvalidArgumentError,
    Error,
    "A call tilldb cannot act on (say, dropping the default table); the message says why."
);
create_exception!(
    tilldb,
    NotADatabaseError,
    Error,
    "The directory holds another program's files, or is a file; nothing in it was changed."
);
create_exception!(
    tilldb,
    ReadOnlyError,
    Error,
    "A write through a database opened with read_only=True; open it without to write."
);
create_exception!(
    tilldb,
    KeyRequiredError,
    Error,
    "The database is encrypted and no key was given (`key_id` names its key); nothing changed."
);
create_exception!(
    tilldb,
    WrongKeyError,
    Error,
    "The key given does not open the database (`key_id` names the one that does); nothing \
     changed."
);
create_exception!(
    tilldb,
    NotEncryptedError,
    Error,
    "A key was given for a database that is not encrypted; nothing changed."
);
create_exception!(
    tilldb,
    KeyUnavailableError,
    Error,
    "The key provider failed, or the system gave no random bytes; the message says why."
);
create_exception!(
    tilldb,
    ClosedError,
    Error,
    "The database was closed, or the transaction already committed or rolled back."
);
create_exception!(
    tilldb,
    InUseError,
    Error,
    "close() while transactions or iterators are open, or a second begin() on the thread \
     whose transaction is still open (it would wait for itself forever)."
);

/// The Python exception for an engine error, with the engine's message and, where the
/// engine gives them, the facts as attributes (see the table above).
pub fn engine_error(py: Python<'_>, error: &tilldb::Error) -> PyErr {
    use tilldb::Error as E;
    let message = error.to_string();
    let err = match error {
        E::Io { .. } => IoError::new_err(message),
        E::Corruption { .. } | E::LogMissing { .. } => CorruptionError::new_err(message),
        E::Locked { .. } => LockedError::new_err(message),
        e if e.is_poisoned() => PoisonedError::new_err(message),
        E::Conflict => ConflictError::new_err(message),
        E::TooLarge { .. } => TooLargeError::new_err(message),
        E::InvalidOptions(_) => InvalidOptionsError::new_err(message),
        E::InvalidArgument(_) => InvalidArgumentError::new_err(message),
        E::NotADatabase { .. } => NotADatabaseError::new_err(message),
        E::ReadOnly { .. } => ReadOnlyError::new_err(message),
        E::KeyRequired { .. } => KeyRequiredError::new_err(message),
        E::WrongKey { .. } => WrongKeyError::new_err(message),
        E::NotEncrypted { .. } => NotEncryptedError::new_err(message),
        E::KeyUnavailable { .. } => KeyUnavailableError::new_err(message),
        _ => Error::new_err(message),
    };
    let value = err.value(py);
    let set = match error {
        E::Io { .. } => value.setattr("errno", error.raw_os_error()),
        E::Corruption { file, offset, .. } => value
            .setattr("file", file.display().to_string())
            .and_then(|()| value.setattr("offset", *offset)),
        E::LogMissing { file, .. } => value
            .setattr("file", file.display().to_string())
            .and_then(|()| value.setattr("offset", 0)),
        E::Locked { pid, .. } => value.setattr("pid", *pid),
        E::KeyRequired { key_id, .. } | E::WrongKey { key_id, .. } => {
            value.setattr("key_id", key_id.as_str())
        }
        _ => Ok(()),
    };
    // An attribute that cannot be set leaves the exception as it is: its message has the
    // same facts.
    drop(set);
    err
}

/// The error for a call on a closed database.
pub fn closed_db() -> PyErr {
    ClosedError::new_err("the database is closed")
}

/// The error for a call on a transaction that has ended.
pub fn ended_txn() -> PyErr {
    ClosedError::new_err(
        "the transaction has ended (committed or rolled back); begin a new one with db.begin()",
    )
}
