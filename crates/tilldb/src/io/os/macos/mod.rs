//! macOS: `fsync(2)` leaves data in the drive's volatile cache, so every durable flush here is
//! `fcntl(F_FULLFSYNC)`; `F_NOCACHE` stands in for `O_DIRECT`; `flock(2)` for the database
//! lock. Checked with clippy for aarch64-apple-darwin in `scripts/test`; it cannot run here.
//!
//! | flush method | opened with | `flush()` |
//! |---|---|---|
//! | `fsync`, `fdatasync` | - | `F_FULLFSYNC` (macOS has no data-only full flush) |
//! | `direct` | `F_NOCACHE` | `F_FULLFSYNC` |
//! | `dsync`, `direct-dsync` | refused at open: `O_DSYNC` writes are not flushed from the drive cache on macOS, so they are not durable |
//! | `barrier-fsync` | - | `F_BARRIERFSYNC`: ordered, the drive cache not flushed, so a power cut can lose acknowledged commits (never their order) |
//! | `nosync` | - | nothing (benchmarks only) |

pub use super::unix::errno;
pub use super::unix::keystore;
mod facts;
mod file;

pub use facts::atomic_write_supported;
pub(crate) use file::{exchange, flush_dir, open, rename, supports};

/// `flock` (`os/unix/lock.rs`); the holder's pid is not read (macOS has no `/proc/locks`).
pub(crate) fn lock_file(
    path: &std::path::Path,
    mode: crate::io::LockMode,
) -> crate::Result<Box<dyn crate::io::HeldLock>> {
    use super::unix::lock;
    lock::lock_file(path, mode, None, lock::LOCK_ATTEMPTS)
}

/// One attempt at `path`'s lock: `None` when it is held elsewhere (`Storage::try_lock`).
pub(crate) fn try_lock_file(
    path: &std::path::Path,
    mode: crate::io::LockMode,
) -> crate::Result<Option<Box<dyn crate::io::HeldLock>>> {
    match super::unix::lock::lock_file(path, mode, None, 1) {
        Ok(held) => Ok(Some(held)),
        Err(crate::Error::Locked { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// How a note about Wine begins (never on macOS).
pub const WINE_NOTE: &str = "running under Wine";

/// This platform's own name for `method`, where it has one other than tilldb's.
#[must_use]
pub fn native_method_name(method: crate::FlushMethod) -> Option<&'static str> {
    match method {
        crate::FlushMethod::Fsync | crate::FlushMethod::Fdatasync => Some("F_FULLFSYNC"),
        crate::FlushMethod::Direct => Some("F_NOCACHE + F_FULLFSYNC"),
        crate::FlushMethod::BarrierFsync => Some("F_BARRIERFSYNC"),
        _ => None,
    }
}
