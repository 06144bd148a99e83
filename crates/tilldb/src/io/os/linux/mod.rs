//! Linux: `open(2)` flags and `fsync`/`fdatasync` per flush method, `flock(2)`, `statx` and
//! sysfs for device facts, `RWF_ATOMIC` for atomic page writes.

pub use super::unix::errno;
pub use super::unix::keystore;
mod facts;
mod file;
mod flush;
mod lock;

pub use facts::atomic_write_supported;

/// How a note about Wine begins (never on Linux).
pub const WINE_NOTE: &str = "running under Wine";
pub(crate) use file::{exchange, flush_dir, open, rename, supports};
pub(crate) use lock::{lock_file, try_lock_file};

/// This platform's own name for `method`, where it has one other than tilldb's (none here).
#[must_use]
pub fn native_method_name(_method: crate::FlushMethod) -> Option<&'static str> {
    None
}
