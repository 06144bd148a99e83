//! File locks on Windows: `LockFileEx` (see `io/lock.rs` for what a database lock is). The
//! lock belongs to the open handle, so a second open in this process conflicts as another
//! process does, and Windows releases it when its process ends.
//!
//! Windows byte-range locks are mandatory: nobody else can read a locked range. So the lock
//! is not on the file's content but on one byte far past it, and the content is the holder's
//! pid, readable while the lock is held:
//!
//! ```text
//!   offset 0        "<pid>\n" (decimal), written by an exclusive holder once it holds the
//!                   lock; shared holders (readers) write nothing
//!   offset 2^40     the locked byte: exclusive for a Db, shared for the read-only tools
//! ```
//!
//! A refused lock names the pid only when an exclusive holder is what refused it: a refused
//! exclusive lock first tries the shared one, and if that succeeds the holders are readers
//! and the pid in the file is an earlier writer's, so none is named. A writer that took the
//! lock a moment ago may not have written its pid yet; the pid named is then its
//! predecessor's (the pid is for the message, never for a decision).

use crate::error::{Error, IoOp, Result};
use crate::io::{HeldLock, LockMode};
use std::fs::{File, OpenOptions};
use std::os::windows::fs::{FileExt, OpenOptionsExt};
use std::os::windows::io::AsRawHandle;
use std::path::Path;
use windows_sys::Win32::Foundation::{ERROR_IO_PENDING, ERROR_LOCK_VIOLATION, HANDLE};
use windows_sys::Win32::Storage::FileSystem::{
    FILE_SHARE_DELETE, FILE_SHARE_READ, FILE_SHARE_WRITE, LOCKFILE_EXCLUSIVE_LOCK,
    LOCKFILE_FAIL_IMMEDIATELY, LockFileEx, UnlockFileEx,
};
use windows_sys::Win32::System::IO::{OVERLAPPED, OVERLAPPED_0, OVERLAPPED_0_0};

/// The locked byte: past any content the file will ever have (a pid and a newline).
const LOCKED_BYTE: u64 = 1 << 40;
/// The most bytes of pid text read back.
const PID_TEXT_MAX: usize = 16;

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

/// The `OVERLAPPED` that names [`LOCKED_BYTE`] to `LockFileEx`/`UnlockFileEx`.
fn locked_byte() -> OVERLAPPED {
    OVERLAPPED {
        Anonymous: OVERLAPPED_0 {
            Anonymous: OVERLAPPED_0_0 {
                // The low and high halves of the offset.
                Offset: (LOCKED_BYTE & 0xFFFF_FFFF) as u32,
                OffsetHigh: (LOCKED_BYTE >> 32) as u32,
            },
        },
        ..OVERLAPPED::default()
    }
}

/// Locks [`LOCKED_BYTE`] of `file` in `mode` without waiting: `Ok(false)` when held elsewhere.
fn try_lock(file: &File, mode: LockMode) -> std::io::Result<bool> {
    let flags = LOCKFILE_FAIL_IMMEDIATELY
        | match mode {
            LockMode::Exclusive => LOCKFILE_EXCLUSIVE_LOCK,
            LockMode::Shared => 0,
        };
    let mut overlapped = locked_byte();
    // SAFETY: the handle is open for the call's duration; `overlapped` outlives it, and a
    // handle opened without FILE_FLAG_OVERLAPPED completes the call synchronously.
    let ok = unsafe {
        LockFileEx(
            file.as_raw_handle() as HANDLE,
            flags,
            0,
            1,
            0,
            &raw mut overlapped,
        )
    };
    if ok != 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error().and_then(|code| u32::try_from(code).ok()) {
        Some(ERROR_LOCK_VIOLATION | ERROR_IO_PENDING) => Ok(false),
        _ => Err(e),
    }
}

/// Releases a lock [`try_lock`] took on `file`.
fn unlock(file: &File) -> std::io::Result<()> {
    let mut overlapped = locked_byte();
    // SAFETY: as in `try_lock`.
    let ok = unsafe { UnlockFileEx(file.as_raw_handle() as HANDLE, 0, 1, 0, &raw mut overlapped) };
    if ok == 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The pid an exclusive holder wrote, if the file holds one.
fn read_pid(file: &File) -> Option<u32> {
    let mut buf = [0u8; PID_TEXT_MAX];
    let n = file.seek_read(&mut buf, 0).ok()?;
    let text = std::str::from_utf8(&buf[..n]).ok()?;
    text.strip_suffix('\n')?.parse().ok()
}

/// Who refused a lock in `mode`: the exclusive holder's pid, `None` for readers or unknown.
fn holder_pid(file: &File, refused: LockMode) -> Option<u32> {
    if refused == LockMode::Exclusive {
        // Readers or a writer? A shared lock is refused only by a writer.
        match try_lock(file, LockMode::Shared) {
            Ok(true) => {
                // Readers: the pid in the file is an earlier writer's. The probe's lock goes
                // with the handle if the unlock fails.
                let _ = unlock(file);
                return None;
            }
            Ok(false) => {}
            Err(_) => return None,
        }
    }
    read_pid(file)
}

/// Locks `path` (created empty when missing) in `mode`, at once: held elsewhere is `Locked`.
pub(crate) fn lock_file(path: &Path, mode: LockMode) -> Result<Box<dyn HeldLock>> {
    lock_file_attempts(path, mode, LOCK_ATTEMPTS)
}

/// One attempt at `path`'s lock: `None` when it is held elsewhere (`Storage::try_lock`).
pub(crate) fn try_lock_file(path: &Path, mode: LockMode) -> Result<Option<Box<dyn HeldLock>>> {
    match lock_file_attempts(path, mode, 1) {
        Ok(held) => Ok(Some(held)),
        Err(Error::Locked { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// [`lock_file`] with `attempts` tries before `Locked`.
fn lock_file_attempts(path: &Path, mode: LockMode, attempts: u32) -> Result<Box<dyn HeldLock>> {
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
    for attempt in 1..=attempts.max(1) {
        match try_lock(&file, mode).map_err(err)? {
            true => {
                if mode == LockMode::Exclusive {
                    // For the message of whoever is refused next; the pid is not a decision,
                    // so a failed write costs only that message.
                    let pid = format!("{}\n", std::process::id());
                    let _ = file
                        .set_len(0)
                        .and_then(|()| file.seek_write(pid.as_bytes(), 0));
                }
                return Ok(Box::new(OsLock { _file: file, mode }));
            }
            false if attempt < attempts => std::thread::sleep(LOCK_RETRY),
            false => {
                return Err(Error::Locked {
                    dir: crate::io::parent_dir(path),
                    pid: holder_pid(&file, mode),
                });
            }
        }
    }
    unreachable!("the last attempt returns")
}

/// Tries at taking a lock held elsewhere before it is reported `Locked`.
const LOCK_ATTEMPTS: u32 = 10;
/// Pause between them: 10 x 5 ms.
const LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(5);
