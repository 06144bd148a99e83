//! Errors returned by tilldb.
//!
//! Operating errors (I/O, disk full) are returned, never panicked on. Bytes on disk that violate
//! the format are a [`Error::Corruption`] naming the file and offset. A broken in-memory
//! invariant is a bug and panics through `assert!`.

use std::fmt;
use std::path::PathBuf;

/// The result type of every fallible tilldb call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong, with enough context to act on it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A system call failed. `path` names the file or directory, `op` what was being done.
    #[error("{op} {path}: {source}", path = path.display())]
    Io {
        /// The operation that failed.
        op: IoOp,
        /// The file or directory it was on (a rename's source).
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// Bytes on disk violate the format.
    #[error("corrupt {file} at offset {offset}: {what}", file = file.display())]
    Corruption {
        /// The file holding the bad bytes.
        file: PathBuf,
        /// Where in `file` they are, in bytes (a page's: its start). For a commit record that
        /// does not decode, `file` is the log directory and this is the record's lsn.
        offset: u64,
        /// What is wrong with them.
        what: &'static str,
    },
    /// An earlier write or flush failed, so durability of later work cannot be promised.
    /// Reopen the database to recover from the log.
    #[error("an earlier write or flush failed; reopen to recover")]
    Poisoned,
    /// [`Error::Poisoned`] as a database reports it: with the first failure that stopped it
    /// (say, `write /db/data.tdb: No space left on device`). Reopen to recover.
    #[error("the database stopped after an earlier failure ({cause}); reopen to recover")]
    PoisonedBy {
        /// The first failure, as its error displayed.
        cause: String,
    },
    /// The options cannot work, on their own or on this device. The text says what would.
    #[error("invalid options: {0}")]
    InvalidOptions(String),
    /// A call's argument cannot be acted on (say, dropping the default table). The text says
    /// why and what to do instead. Nothing was changed.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A record, key or value is larger than tilldb can store.
    #[error("{what} of {bytes} bytes is larger than the maximum of {max} bytes")]
    TooLarge {
        /// What is too large: "key", "value", "table name", "transaction", ...
        what: &'static str,
        /// Its size, in bytes.
        bytes: u64,
        /// The largest size allowed, in bytes.
        max: u64,
    },
    /// The log lacks records that recovery needs: those from `from_lsn` (the checkpoint's
    /// redo point, or the end of the segment before the gap) up to `to_lsn`, where `file`, the
    /// next segment present, begins. A log segment was removed or lost; redo from what is left
    /// would silently drop acknowledged commits.
    #[error(
        "corrupt {} at offset 0: log records from lsn {from_lsn} to lsn {to_lsn} are missing \
         (a log segment before this one was removed or lost; recovery needs them)",
        file.display()
    )]
    LogMissing {
        /// The segment present after the gap, where the log resumes.
        file: PathBuf,
        /// The first lsn missing.
        from_lsn: u64,
        /// The lsn where `file` begins: the first one present again.
        to_lsn: u64,
    },
    /// The database in `dir` is open elsewhere: in another process (`pid`, where the
    /// operating system tells it) or through another handle in this one. One process at a
    /// time may open a database; the lock is the operating system's, gone when its holder
    /// exits or dies.
    #[error("{} is already open {}; a database may be open in one place at a time",
        dir.display(), holder_text(*pid))]
    Locked {
        /// The database directory.
        dir: PathBuf,
        /// The process holding the lock, when the operating system tells it.
        pid: Option<u32>,
    },
    /// `dir` cannot hold a database: it is a file, or a directory with another program's
    /// files and no tilldb header. Nothing in it was changed.
    #[error("{} is not a tilldb database: {reason}", dir.display())]
    NotADatabase {
        /// The path given as the database directory.
        dir: PathBuf,
        /// Why it cannot hold a database.
        reason: String,
    },
    /// A write through a read-only handle ([`crate::Db::open_read_only`]): it reads a
    /// snapshot and changes nothing; open the database with `Db::open` to write.
    #[error("{} is open read-only here: {what} needs a read-write handle (Db::open)", dir.display())]
    ReadOnly {
        /// The database directory.
        dir: PathBuf,
        /// What was refused.
        what: &'static str,
    },
    /// Lost a write-write race; retry the transaction.
    #[error("transaction conflict; retry")]
    Conflict,
    /// The change feed consumer `name` of the database in `dir` fell further behind than
    /// `Options::feed_retention_bytes` allows and was dropped: the log it needed is being
    /// reused. Re-register it (and resynchronise whatever it feeds) to go on.
    #[error("change feed consumer {name:?} of {} was dropped: {reason}", dir.display())]
    FeedConsumerDropped {
        /// The database directory.
        dir: PathBuf,
        /// The consumer's name.
        name: String,
        /// Why it was dropped, as recorded when it was (how far behind it had fallen).
        reason: String,
    },
    /// The change feed of the database in `dir` cannot be read at `lsn`: the text says why
    /// (the feed was off when that commit was made, or the log no longer holds it).
    #[error("change feed of {} at lsn {lsn}: {reason}", dir.display())]
    FeedUnavailable {
        /// The database directory.
        dir: PathBuf,
        /// The position asked for.
        lsn: u64,
        /// Why the feed cannot be read there.
        reason: String,
    },
    /// The database in `dir` is encrypted and no key was given. Nothing was changed.
    #[error("{} is encrypted (with the key {key_id:?}): give its key to open it", dir.display())]
    KeyRequired {
        /// The database directory.
        dir: PathBuf,
        /// The public name of the key that encrypted it.
        key_id: String,
    },
    /// The key given does not open the database in `dir`: another key, or a key for another
    /// database. Nothing was changed.
    #[error("the key given does not open {} (it was encrypted with the key {key_id:?})", dir.display())]
    WrongKey {
        /// The database directory.
        dir: PathBuf,
        /// The public name of the key that encrypted it.
        key_id: String,
    },
    /// A key was given for the database in `dir`, which is not encrypted: opened as it is, it
    /// would keep its data in plain text. Nothing was changed.
    #[error("{} is not encrypted, but a key was given: open it without one", dir.display())]
    NotEncrypted {
        /// The database directory.
        dir: PathBuf,
    },
    /// The key provider could not give or use the key (a key store that refused, the OS's
    /// randomness missing). Nothing was changed.
    #[error("the key for {} is unavailable: {reason}", dir.display())]
    KeyUnavailable {
        /// The database directory.
        dir: PathBuf,
        /// What the provider said.
        reason: String,
    },
}

impl Error {
    /// True for [`Error::Poisoned`] and [`Error::PoisonedBy`]: the component (or database)
    /// stopped after an earlier failure and must be reopened.
    #[must_use]
    pub fn is_poisoned(&self) -> bool {
        matches!(self, Error::Poisoned | Error::PoisonedBy { .. })
    }

    /// [`Error::PoisonedBy`] naming `cause`, or [`Error::Poisoned`] when none was recorded.
    #[must_use]
    pub fn poisoned_by(cause: Option<&str>) -> Error {
        match cause {
            Some(cause) => Error::PoisonedBy {
                cause: cause.to_owned(),
            },
            None => Error::Poisoned,
        }
    }

    /// Builds an [`Error::Io`] from an OS error (a rustix `Errno` on Linux).
    pub(crate) fn io(op: IoOp, path: impl Into<PathBuf>, errno: impl Into<std::io::Error>) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source: errno.into(),
        }
    }

    /// Builds an [`Error::Io`] from a native error code (`crate::io::errno`).
    pub(crate) fn os(op: IoOp, path: impl Into<PathBuf>, code: i32) -> Self {
        Error::io(op, path, std::io::Error::from_raw_os_error(code))
    }

    /// The raw OS error number of an [`Error::Io`], if there is one.
    #[must_use]
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            Error::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }
}

/// Who holds a lock, in words: `Error::Locked`'s message.
fn holder_text(pid: Option<u32>) -> String {
    match pid {
        Some(pid) if pid == std::process::id() => format!("in this process (pid {pid})"),
        Some(pid) => format!("in process {pid}"),
        None => "in another process or handle (its pid is unknown)".to_owned(),
    }
}

/// The storage operation that failed, named in [`Error::Io`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IoOp {
    /// Creating a file.
    Create,
    /// Opening a file.
    Open,
    /// Reading from a file.
    Read,
    /// Writing to a file (zeros written to allocate it included).
    Write,
    /// Truncating or extending a file.
    SetLen,
    /// Allocating a file's space.
    Allocate,
    /// Flushing a file: making its writes durable.
    Flush,
    /// Renaming a file.
    Rename,
    /// Removing a file.
    Remove,
    /// Flushing a directory: making creates, renames and removes in it durable.
    FlushDir,
    /// Creating a directory.
    CreateDir,
    /// Listing a directory.
    ListDir,
    /// Asking for a file's or directory's metadata: whether it exists, its length, its device.
    Stat,
    /// Taking a file lock.
    Lock,
}

impl fmt::Display for IoOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IoOp::Create => "create",
            IoOp::Open => "open",
            IoOp::Read => "read",
            IoOp::Write => "write",
            IoOp::SetLen => "set length of",
            IoOp::Allocate => "allocate",
            IoOp::Flush => "flush",
            IoOp::Rename => "rename",
            IoOp::Remove => "remove",
            IoOp::FlushDir => "flush directory",
            IoOp::CreateDir => "create directory",
            IoOp::ListDir => "list directory",
            IoOp::Stat => "stat",
            IoOp::Lock => "lock",
        })
    }
}
