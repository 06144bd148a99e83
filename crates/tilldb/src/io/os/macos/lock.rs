//! File locks on macOS: `flock(2)`, as on Linux (see `io/lock.rs`); the holder's pid is not
//! read (macOS has no `/proc/locks`).

use crate::error::{Error, IoOp, Result};
use crate::io::{HeldLock, LockMode};
use rustix::fd::OwnedFd;
use rustix::fs::{FlockOperation, Mode, OFlags};
use rustix::io::Errno;
use std::path::Path;

/// A lock held through its open descriptor; closing it releases the lock.
#[derive(Debug)]
struct OsLock {
    _fd: OwnedFd,
    mode: LockMode,
}

impl HeldLock for OsLock {
    fn mode(&self) -> Option<LockMode> {
        Some(self.mode)
    }
}

/// Locks `path` (created empty when missing) in `mode`, at once: held elsewhere is `Locked`.
pub(crate) fn lock_file(path: &Path, mode: LockMode) -> Result<Box<dyn HeldLock>> {
    let open = |flags: OFlags| {
        rustix::fs::open(
            path,
            flags | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::from_bits_truncate(0o644),
        )
    };
    let fd = match open(OFlags::RDWR | OFlags::CREATE) {
        Ok(fd) => fd,
        Err(Errno::ROFS | Errno::ACCESS | Errno::PERM) if mode == LockMode::Shared => {
            match open(OFlags::RDONLY) {
                Ok(fd) => fd,
                Err(Errno::NOENT) => return Ok(Box::new(crate::io::NoLock)),
                Err(e) => return Err(Error::io(IoOp::Lock, path, e)),
            }
        }
        Err(e) => return Err(Error::io(IoOp::Lock, path, e)),
    };
    let operation = match mode {
        LockMode::Exclusive => FlockOperation::NonBlockingLockExclusive,
        LockMode::Shared => FlockOperation::NonBlockingLockShared,
    };
    for attempt in 1..=LOCK_ATTEMPTS {
        match rustix::fs::flock(&fd, operation) {
            Ok(()) => return Ok(Box::new(OsLock { _fd: fd, mode })),
            Err(Errno::WOULDBLOCK) if attempt < LOCK_ATTEMPTS => std::thread::sleep(LOCK_RETRY),
            Err(Errno::WOULDBLOCK) => {
                return Err(Error::Locked {
                    dir: crate::io::parent_dir(path),
                    pid: None,
                });
            }
            Err(e) => return Err(Error::io(IoOp::Lock, path, e)),
        }
    }
    unreachable!("the last attempt returns")
}

/// Tries at taking a lock held elsewhere before it is reported `Locked` (10 x 5 ms).
const LOCK_ATTEMPTS: u32 = 10;
const LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(5);
