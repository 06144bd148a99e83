//! Windows: `CreateFileW` flags and `FlushFileBuffers` per flush method, `MoveFileExW` with
//! `MOVEFILE_WRITE_THROUGH`, `LockFileEx` (on a byte past the holder's pid), and device facts
//! from `GetFileInformationByHandleEx` and `IOCTL_STORAGE_QUERY_PROPERTY`.
//!
//! | flush method | opened with | `flush()` |
//! |---|---|---|
//! | `fsync`, `fdatasync` | no flag: `WriteFile` lands in the OS cache | `FlushFileBuffers` (Windows has no data-only flush every version offers, so both are the same) |
//! | `dsync` | `FILE_FLAG_WRITE_THROUGH`: each write returns once on the device (with FUA or a cache flush, as the driver does it) | nothing, or `FlushFileBuffers` after a length change |
//! | `direct` | `FILE_FLAG_NO_BUFFERING`: sector-aligned buffers, no OS cache | `FlushFileBuffers` (the device cache still holds the data) |
//! | `direct-dsync` | both flags | as `dsync` |
//! | `nosync` | no flag | nothing (benchmarks only) |

pub mod errno;
mod facts;
mod file;
pub mod keystore;
mod lock;

pub use facts::{WINE_NOTE, atomic_write_supported};
pub(crate) use file::{exchange, flush_dir, open, rename, supports};
pub(crate) use lock::{lock_file, try_lock_file};

/// Windows' own name for `method` (also accepted by `FlushMethod::from_str`).
#[must_use]
pub fn native_method_name(method: crate::FlushMethod) -> Option<&'static str> {
    match method {
        crate::FlushMethod::Fsync | crate::FlushMethod::Fdatasync => Some("flush-file-buffers"),
        crate::FlushMethod::Dsync => Some("write-through"),
        crate::FlushMethod::Direct => Some("no-buffering"),
        crate::FlushMethod::DirectDsync => Some("write-through-no-buffering"),
        crate::FlushMethod::NoSync | crate::FlushMethod::BarrierFsync => None,
    }
}

#[cfg(test)]
mod tests {
    use crate::FlushMethod;

    #[test]
    fn every_windows_name_parses_back_to_its_method() {
        for method in FlushMethod::DURABLE {
            let name = super::native_method_name(method).expect("every durable method");
            let parsed: FlushMethod = name.parse().expect("accepted");
            // fdatasync is fsync here: its name parses to fsync.
            let same = if method == FlushMethod::Fdatasync {
                FlushMethod::Fsync
            } else {
                method
            };
            assert_eq!(parsed, same, "{name}");
        }
    }
}
