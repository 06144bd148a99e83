//! `flock(2)` database locks, the same on Linux and macOS (see `io/lock.rs` for what a
//! database lock is): the lock belongs to the open file description, so a second open in the
//! same process conflicts as another process does, and the kernel drops it with the last
//! descriptor, so a kill -9 leaves nothing behind. Who holds a lock is the platform's to find
//! (Linux: `/proc/locks`; macOS: unknown).

use crate::error::{Error, IoOp, Result};
use crate::io::{HeldLock, LockMode};
use rustix::fd::OwnedFd;
use rustix::fs::{FlockOperation, Mode, OFlags};
use rustix::io::Errno;
use std::path::Path;

/// An OS file lock: the open descriptor carries it; closing the descriptor releases it.
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

/// Takes `flock` on `path` at once, creating the file when missing (see `Storage::lock`).
/// Locks `path` (created empty when missing) in `mode`, at once: held elsewhere is `Locked`,
/// naming the holder that `holder_pid` finds (the platform's way; `None` where it has none).
pub(crate) fn lock_file(
    path: &Path,
    mode: LockMode,
    holder_pid: Option<fn(&OwnedFd) -> Option<u32>>,
    attempts: u32,
) -> Result<Box<dyn HeldLock>> {
    let open = |flags: OFlags| {
        rustix::fs::open(
            path,
            flags | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::from_bits_truncate(0o644),
        )
    };
    let fd = match open(OFlags::RDWR | OFlags::CREATE) {
        Ok(fd) => fd,
        // A reader without write access (read-only media, another user's directory) locks an
        // existing file through a read-only descriptor: flock needs no write access.
        Err(Errno::ROFS | Errno::ACCESS | Errno::PERM) if mode == LockMode::Shared => {
            match open(OFlags::RDONLY) {
                Ok(fd) => fd,
                // Missing and impossible to create: no writer can have locked it here.
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
    // A refusal is retried for a few milliseconds: a process that forks (to spawn a child)
    // while a database is open lends the child its descriptors, and with them the lock, until
    // the child's exec closes them (`O_CLOEXEC`). A database closed a moment ago can still be
    // locked that way; a real holder still holds after the retries. Found by a test that
    // reopened right after a close while other tests spawned `till`.
    //
    // A refusal whose holder cannot be found is tried again, a few times: the holder let go
    // between the refusal and the lookup (an opening writer holds the lock shared for a moment
    // before it takes it exclusively, `db/claim.rs`), so the lock may be free now, or held by
    // someone the next lookup names. Found by `db_lock`'s racing-open test, whose refused
    // process named no holder on a loaded machine.
    let mut unnamed = 0;
    let mut attempt = 0;
    loop {
        attempt += 1;
        match rustix::fs::flock(&fd, operation) {
            Ok(()) => return Ok(Box::new(OsLock { _fd: fd, mode })),
            Err(Errno::WOULDBLOCK) if attempt < attempts => {
                std::thread::sleep(LOCK_RETRY);
            }
            Err(Errno::WOULDBLOCK) => {
                let pid = holder_pid.and_then(|find| find(&fd));
                if pid.is_none() && holder_pid.is_some() && unnamed < UNNAMED_RETRIES {
                    unnamed += 1;
                    std::thread::sleep(LOCK_RETRY);
                    continue;
                }
                return Err(Error::Locked {
                    dir: crate::io::parent_dir(path),
                    pid,
                });
            }
            Err(e) => return Err(Error::io(IoOp::Lock, path, e)),
        }
    }
}

/// Tries at taking a lock held elsewhere before it is reported `Locked` (see `lock_file`);
/// `Storage::try_lock` makes one.
pub(crate) const LOCK_ATTEMPTS: u32 = 10;
/// Pause between them: 10 x 5 ms, so a refusal still comes within 50 ms.
const LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(5);
/// Tries more, after the last, while a refusal's holder cannot be found (see `lock_file`).
const UNNAMED_RETRIES: u32 = 4;
