//! tilldb: an embedded, crash-safe, transactional key-value store built around its commit path.
//!
//! This crate is growing layer by layer (see `ARCHITECTURE.md`). Today it holds the I/O layer:
//! the [`io::Storage`] seam with real files and a fault-injecting simulated disk, every
//! [`FlushMethod`], device facts, and flush measurement.

#[cfg(not(target_os = "linux"))]
compile_error!("tilldb supports Linux only so far; a port adds one io/flush_<os>.rs file");

pub mod btree;
mod checksum;
mod db;
mod error;
pub mod header;
pub mod io;
#[doc(hidden)]
pub mod mutants;
mod options;
pub mod page;
pub mod txn;
pub mod wal;

pub use btree::Direction;
pub use db::{Db, LOCK_FILE_NAME, ReadTxn, RecoveryReport, SpaceCheck, Txn, is_database_file_name};
pub use error::{Error, IoOp, Result};
pub use options::{Durability, FlushMethod, Options};
