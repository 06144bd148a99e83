//! File locks on Windows: `LockFileEx` over the whole file, through std's `File::try_lock` and
//! `try_lock_shared` (see `io/lock.rs` for what a database lock is). The lock belongs to the
//! open handle, so a second open in this process conflicts as another process does, and
//! Windows releases it when its process ends. Who holds it cannot be read (Windows locks are
//! mandatory, so a pid written in the file could not be read while it is locked): `Locked`
//! names no pid here.

use crate::error::{Error, IoOp, Result};
use crate::io::{HeldLock, LockMode};
use std::fs::{File, OpenOptions, TryLockError};
use std::os::windows::fs::OpenOptionsExt;
use std::path::Path;
use windows_sys::Win32::Storage::FileSystem::{
    FILE_SHARE_DELETE, FILE_SHARE_READ, FILE_SHARE_WRITE,
};

/// A lock held through its open handle; closing the handle releases it.
#[derive(Debug)]
struct OsLock {
    _file: File,
    mode: LockMode,
}

impl HeldLock for OsLock {
    fn mode(&self) -> Option<LockMode> {
        Some(self.mode)
    }
}

/// Locks `path` (created empty when missing) in `mode`, at once: held elsewhere is `Locked`.
pub(crate) fn lock_file(path: &Path, mode: LockMode) -> Result<Box<dyn HeldLock>> {
    let open = |write: bool| {
        OpenOptions::new()
            .read(true)
            .write(write)
            .create(write)
            .truncate(false)
            .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
            .open(path)
    };
    let err = |source| Error::Io {
        op: IoOp::Lock,
        path: path.to_path_buf(),
        source,
    };
    let file = match open(true) {
        Ok(file) => file,
        // A reader without write access locks an existing file through a read-only handle.
        Err(e) if mode == LockMode::Shared && e.kind() == std::io::ErrorKind::PermissionDenied => {
            match open(false) {
                Ok(file) => file,
                // Missing and impossible to create: no writer can have locked it here.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Ok(Box::new(crate::io::NoLock));
                }
                Err(e) => return Err(err(e)),
            }
        }
        Err(e) => return Err(err(e)),
    };
    // A refusal is retried for a few milliseconds, as on Linux: a lock released a moment ago
    // (a handle closing) is not reported as held, and a real holder still holds after the
    // retries, so a refusal comes within 50 ms everywhere.
    for attempt in 1..=LOCK_ATTEMPTS {
        let taken = match mode {
            LockMode::Exclusive => file.try_lock(),
            LockMode::Shared => file.try_lock_shared(),
        };
        match taken {
            Ok(()) => return Ok(Box::new(OsLock { _file: file, mode })),
            Err(TryLockError::WouldBlock) if attempt < LOCK_ATTEMPTS => {
                std::thread::sleep(LOCK_RETRY);
            }
            Err(TryLockError::WouldBlock) => {
                return Err(Error::Locked {
                    dir: crate::io::parent_dir(path),
                    pid: None,
                });
            }
            Err(TryLockError::Error(e)) => return Err(err(e)),
        }
    }
    unreachable!("the last attempt returns")
}

/// Tries at taking a lock held elsewhere before it is reported `Locked`.
const LOCK_ATTEMPTS: u32 = 10;
/// Pause between them: 10 x 5 ms.
const LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(5);
