//! Error codes as Linux and macOS spell them (`errno`), for errors tilldb makes itself: the
//! simulated disk's faults, a read-only storage's refusals.

pub const EIO: i32 = libc::EIO;
pub const ENOSPC: i32 = libc::ENOSPC;
pub const EEXIST: i32 = libc::EEXIST;
pub const ENOENT: i32 = libc::ENOENT;
pub const EISDIR: i32 = libc::EISDIR;
pub const ENOTDIR: i32 = libc::ENOTDIR;
pub const EFBIG: i32 = libc::EFBIG;
pub const EOPNOTSUPP: i32 = libc::EOPNOTSUPP;
#[cfg(test)]
pub const EPERM: i32 = libc::EPERM;
pub const EROFS: i32 = libc::EROFS;
