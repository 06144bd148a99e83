//! Error codes as Linux and macOS spell them (`errno`), for errors tilldb makes itself: the
//! simulated disk's faults, a read-only storage's refusals.

/// An I/O error: the device failed a read, write or flush.
pub const EIO: i32 = libc::EIO;
/// No space left on the device.
pub const ENOSPC: i32 = libc::ENOSPC;
/// The file exists (a create of a name already taken).
pub const EEXIST: i32 = libc::EEXIST;
/// No such file or directory.
pub const ENOENT: i32 = libc::ENOENT;
/// A directory where a file was expected.
pub const EISDIR: i32 = libc::EISDIR;
/// A file where a directory was expected.
pub const ENOTDIR: i32 = libc::ENOTDIR;
/// A file offset or length past the largest the file system (or the simulated disk) holds.
pub const EFBIG: i32 = libc::EFBIG;
/// The operation is not supported (an atomic write the device or file cannot do).
pub const EOPNOTSUPP: i32 = libc::EOPNOTSUPP;
/// The operation is not permitted (used by tests only).
#[cfg(test)]
pub const EPERM: i32 = libc::EPERM;
/// The file system is read-only.
pub const EROFS: i32 = libc::EROFS;
