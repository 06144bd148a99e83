//! Error codes as Windows spells them (Win32 `ERROR_*`), for errors tilldb makes itself: the
//! simulated disk's faults, a read-only storage's refusals. Each keeps the POSIX name the
//! portable code uses.

/// `ERROR_IO_DEVICE`.
pub const EIO: i32 = 1117;
/// `ERROR_DISK_FULL`.
pub const ENOSPC: i32 = 112;
/// `ERROR_FILE_EXISTS`.
pub const EEXIST: i32 = 80;
/// `ERROR_FILE_NOT_FOUND`.
pub const ENOENT: i32 = 2;
/// `ERROR_DIRECTORY_NOT_SUPPORTED`: a directory where a file was expected.
pub const EISDIR: i32 = 336;
/// `ERROR_DIRECTORY`: "the directory name is invalid" (a file where a directory was expected).
pub const ENOTDIR: i32 = 267;
/// `ERROR_FILE_TOO_LARGE`.
pub const EFBIG: i32 = 223;
/// `ERROR_NOT_SUPPORTED`.
pub const EOPNOTSUPP: i32 = 50;
/// `ERROR_ACCESS_DENIED`.
#[cfg(test)]
pub const EPERM: i32 = 5;
/// `ERROR_WRITE_PROTECT`.
pub const EROFS: i32 = 19;
