#![warn(missing_docs)]
// The layers' items that only `tilldb::internals` (the `internals` feature: `till`, the tests)
// reaches are unused without it. Every check of the project builds with the feature on, where
// dead code and unused imports are still denied.
#![cfg_attr(
    not(any(test, feature = "internals")),
    allow(dead_code, unused_imports)
)]

//! tilldb: an embedded, crash-safe, transactional key-value store built around its commit path.
//!
//! A durable commit costs about one device flush, shared by every transaction waiting for it
//! (group commit); a kill, a power cut or a torn page write never loses an acknowledged
//! commit; a failing disk stops the database rather than acknowledge on top of an error.
//!
//! ```
//! use tilldb::{Db, Durability, Options};
//!
//! # fn main() -> tilldb::Result<()> {
//! # let dir = tempfile::tempdir().expect("a temporary directory");
//! # let path = dir.path().join("shop");
//! let db = Db::open(&path, Options::default())?;
//! let mut txn = db.begin()?;
//! txn.put(b"sale:0001", b"2 x coffee")?;
//! txn.commit()?; // durable when it returns (Durability::Sync, the default)
//!
//! let mut txn = db.begin()?;
//! txn.put(b"sale:0002", b"1 x tea")?;
//! txn.commit_with(Durability::Buffered)?; // survives a kill -9, not a power cut
//!
//! assert_eq!(db.get(b"sale:0001")?.as_deref(), Some(&b"2 x coffee"[..]));
//! db.close()?;
//! # Ok(())
//! # }
//! ```
//!
//! The API: [`Db`], [`Txn`], [`ReadTxn`], [`Options`] (with [`Durability`], [`FlushMethod`],
//! [`TornPageGuard`], [`WalOptions`]), [`Error`], the reports and counters ([`Stats`],
//! [`RecoveryReport`], [`Progress`] of the walks of a whole database), and the
//! [`io::Storage`] seam, with the simulated disk [`io::SimDisk`] for those who test their own
//! crash handling. docs/durability.md in the repository says exactly what each durability
//! level and guard promises.
//!
//! The `internals` feature adds `tilldb::internals` (the engine's layers), test helpers such as
//! `Options::for_tests` and `Db::check_invariants`, and the io helpers beyond the `Storage`
//! seam, for the `till` tool and tilldb's own tests; none of it is part of the API, and it
//! changes without notice.

#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
compile_error!(
    "tilldb supports Linux, Windows and macOS so far; a port adds one module under io/os/"
);

mod btree;
mod checksum;
mod crypt;
mod db;
mod error;
pub mod feed;
mod files;
mod header;
pub mod io;
#[doc(hidden)]
pub mod mutants;
mod options;
mod page;
mod progress;
mod record;
mod stripe;
mod txn;
mod wal;

/// The engine's layers, reachable for the `till` tool and tilldb's tests (with the `internals`
/// feature): NOT part of the API, and free to change in any release. An embedder uses the
/// crate root.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals {
    /// Encryption at rest: ciphers, the data key and its wrap, the keys of pages and log.
    pub mod crypt {
        pub use crate::crypt::*;

        /// The keys of the database in `dir` whose header is `header`, given the
        /// application's key `encryption`, checked as `Db::open` checks them: `None` for a
        /// plain database opened without one; `KeyRequired`, `WrongKey`, `NotEncrypted` or
        /// `KeyUnavailable` otherwise. For tools that read the files without opening the
        /// database (`till check`'s page scan, `till dump-log`).
        ///
        /// # Errors
        ///
        /// As `Db::open`'s key checks.
        pub fn database_keys(
            dir: &std::path::Path,
            header: &crate::header::Header,
            encryption: Option<&Encryption>,
        ) -> crate::Result<Option<std::sync::Arc<DatabaseKeys>>> {
            crate::db::database_keys(dir, header, encryption)
        }
    }
    /// Every name tilldb gives a file or directory in a database directory.
    pub mod files {
        pub use crate::files::*;
    }
    /// The B+tree over the buffer pool.
    pub mod btree {
        pub use crate::btree::*;
    }
    /// The database header file (`tilldb.meta`).
    pub mod header {
        pub use crate::header::*;
    }
    /// The commit record format: parts, and how records follow each other (`Runs`).
    pub mod record {
        pub use crate::record::*;
    }
    /// Pages, the buffer pool, the page store and the torn-page guards.
    pub mod page {
        pub use crate::page::*;
    }
    /// Transactions' write sets and snapshots.
    pub mod txn {
        pub use crate::txn::*;
    }
    /// The write-ahead log.
    pub mod wal {
        pub use crate::wal::*;
    }

    /// [`Db::check_space`](crate::Db::check_space) over any pages, for tools that read a
    /// data file without recovering it (`till stats`): `page_count` and `free_head` are the
    /// allocator state the pages were written with (a header's, when no log record follows
    /// its checkpoint).
    ///
    /// # Errors
    ///
    /// As [`Db::check_space`](crate::Db::check_space).
    pub fn check_space_of<P: crate::btree::Pages>(
        pages: &P,
        page_count: u64,
        free_head: crate::PageId,
    ) -> crate::Result<crate::SpaceCheck> {
        crate::Db::check_space_of(pages, page_count, free_head)
    }
}

/// The README's example, compiled and run as a doctest so that it stays true.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

pub use btree::{Direction, TreeStats};
pub use crypt::{
    Cipher, DataKey, Encryption, KeyError, KeyProvider, OsKeyScope, OsKeyStore, StaticKey,
};
pub use db::{
    BackupReport, CompactReport, Db, LEAKED_LISTED_MAX, LOCK_FILE_NAME, Range, ReadTxn,
    RecoveryReport, SpaceCheck, Stats, Txn, TxnRange, is_database_file_name,
};
pub use error::{Error, IoOp, Result};
pub use options::{Durability, FlushMethod, Options};
pub use page::{PageId, PoolStats, TornPageGuard};
pub use progress::Progress;
pub use wal::{Lsn, TailGuard, WalOptions, WalStats};
