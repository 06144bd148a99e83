//! Linux: `open(2)` flags and `fsync`/`fdatasync` per flush method, `flock(2)`, `statx` and
//! sysfs for device facts, `RWF_ATOMIC` for atomic page writes.

pub mod errno;
mod facts;
mod file;
mod flush;
mod lock;

pub use facts::atomic_write_supported;

/// How a note about Wine begins (never on Linux).
pub const WINE_NOTE: &str = "running under Wine";
pub(crate) use file::{flush_dir, open, rename, supports};
pub(crate) use lock::lock_file;
