//! File locks on Linux: `flock(2)` (`os/unix/lock.rs`); the holder's pid from `/proc/locks`.
//!
//! A database directory holds `tilldb.lock`, an empty file whose only use is its lock. `Db`
//! takes it exclusively for its whole life; the read-only tools (`till stats`, `dump-log`) take
//! it shared while they read. On Linux the lock is `flock(2)`:
//!
//! - it belongs to the open file description, so a second open in the same process conflicts
//!   exactly as another process does (POSIX `fcntl` locks would not: they are per process);
//! - it is on the inode, so a symlink, a relative path or a bind mount reach the same lock;
//! - the kernel drops it when the last descriptor closes, and a dead process closes all of
//!   them: a kill -9 never leaves a stale lock, and there is no pid file to clean up.
//!
//! Who holds a lock is read from `/proc/locks` (`FLOCK ADVISORY WRITE <pid> MAJ:MIN:INODE`),
//! matched by device and inode; where that is unavailable the holder is unknown.

use crate::error::Result;
use crate::io::{HeldLock, LockMode};
use rustix::fd::OwnedFd;
use std::path::Path;

/// Locks `path` in `mode` (`os/unix/lock.rs`), naming a holder from `/proc/locks`.
pub(crate) fn lock_file(path: &Path, mode: LockMode) -> Result<Box<dyn HeldLock>> {
    use super::super::unix::lock;
    lock::lock_file(path, mode, Some(holder_pid), lock::LOCK_ATTEMPTS)
}

/// One attempt at `path`'s lock: `None` when it is held elsewhere (`Storage::try_lock`).
pub(crate) fn try_lock_file(path: &Path, mode: LockMode) -> Result<Option<Box<dyn HeldLock>>> {
    match super::super::unix::lock::lock_file(path, mode, None, 1) {
        Ok(held) => Ok(Some(held)),
        Err(crate::Error::Locked { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The pid of a process holding a flock on the file `fd` is open on, from `/proc/locks`.
fn holder_pid(fd: &OwnedFd) -> Option<u32> {
    let stat = rustix::fs::fstat(fd).ok()?;
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    holder_in_proc_locks(
        &locks,
        rustix::fs::major(stat.st_dev),
        rustix::fs::minor(stat.st_dev),
        stat.st_ino,
    )
}

/// Finds a flock on inode `ino` of device `major:minor` in the text of `/proc/locks`.
///
/// Worked example: `1: FLOCK  ADVISORY  WRITE 2366 fe:00:5308717 0 EOF` is a flock held by
/// pid 2366 on inode 5308717 of device 0xfe:0x00 (major and minor in hex, inode in decimal).
/// Lines of another kind (POSIX, OFD: their pid may be -1) or another file are skipped.
fn holder_in_proc_locks(text: &str, major: u32, minor: u32, ino: u64) -> Option<u32> {
    text.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // "1:" FLOCK ADVISORY WRITE pid dev:ino ...; blocked waiters have "->" after the id.
        let fields = fields.strip_prefix(&[fields.first().copied()?])?;
        let fields = fields.strip_prefix(&["->"]).unwrap_or(fields);
        if fields.len() < 5 || fields[0] != "FLOCK" {
            return None;
        }
        let mut place = fields[4].split(':');
        let found_major = u32::from_str_radix(place.next()?, 16).ok()?;
        let found_minor = u32::from_str_radix(place.next()?, 16).ok()?;
        let found_ino: u64 = place.next()?.parse().ok()?;
        let matches = (found_major, found_minor, found_ino) == (major, minor, ino);
        matches.then(|| fields[3].parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    const SAMPLE: &str = "\
1: POSIX  ADVISORY  WRITE -1 fe:00:777 0 EOF
2: FLOCK  ADVISORY  WRITE 2366 fe:00:5308717 0 EOF
2: -> FLOCK  ADVISORY  WRITE 999 fe:00:5308717 0 EOF
3: FLOCK  ADVISORY  READ 41 103:01:12 0 EOF
";

    #[test]
    fn proc_locks_lines_name_the_holder_of_the_matching_inode() {
        assert_eq!(holder_in_proc_locks(SAMPLE, 0xfe, 0, 5_308_717), Some(2366));
        assert_eq!(holder_in_proc_locks(SAMPLE, 0x103, 1, 12), Some(41));
        // A POSIX lock's pid may be -1: never a holder here.
        assert_eq!(holder_in_proc_locks(SAMPLE, 0xfe, 0, 777), None);
        assert_eq!(holder_in_proc_locks(SAMPLE, 0xfe, 1, 5_308_717), None);
        assert_eq!(holder_in_proc_locks("garbage\n\n1:\n", 0xfe, 0, 1), None);
    }

    /// The holder of `a_holder_that_lets_go_before_it_is_named_...`'s lock, until the lookup.
    static LETTING_GO: std::sync::Mutex<Option<Box<dyn HeldLock>>> = std::sync::Mutex::new(None);

    /// A lookup that finds the holder gone: it drops the held lock, as an opening writer
    /// drops its shared lock before it takes the exclusive one, and so names nobody.
    fn holder_lets_go(_: &OwnedFd) -> Option<u32> {
        drop(LETTING_GO.lock().expect("letting-go lock").take());
        None
    }

    #[test]
    fn a_holder_that_lets_go_before_it_is_named_is_not_reported_as_an_unknown_holder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tilldb.lock");
        let held = lock_file(&path, LockMode::Shared).expect("the holder's lock");
        *LETTING_GO.lock().expect("letting-go lock") = Some(held);
        // Refused while held, then the lookup finds nobody: the lock is free, so it is taken.
        let unix = super::super::super::unix::lock::lock_file;
        let taken = unix(&path, LockMode::Exclusive, Some(holder_lets_go), 1)
            .expect("the lock its holder let go of is taken, not refused naming nobody");
        assert_eq!(taken.mode(), Some(LockMode::Exclusive));
        // A holder that stays and a platform that cannot name one: refused, naming nobody.
        let refused = unix(&path, LockMode::Shared, None, 3).map(|_| ());
        assert!(
            matches!(refused, Err(Error::Locked { pid: None, .. })),
            "{refused:?}"
        );
    }

    #[test]
    fn a_second_exclusive_lock_in_this_process_is_refused_with_our_pid() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tilldb.lock");
        let held = lock_file(&path, LockMode::Exclusive).expect("first lock");
        assert_eq!(held.mode(), Some(LockMode::Exclusive));
        for mode in [LockMode::Exclusive, LockMode::Shared] {
            match lock_file(&path, mode) {
                Err(Error::Locked { dir: d, pid }) => {
                    assert_eq!(d, dir.path());
                    assert_eq!(pid, Some(std::process::id()), "/proc/locks names us");
                }
                other => panic!("{mode:?} while held exclusively: {other:?}"),
            }
        }
        drop(held);
        let shared = lock_file(&path, LockMode::Shared).expect("shared after release");
        let again = lock_file(&path, LockMode::Shared).expect("shared locks coexist");
        assert!(matches!(
            lock_file(&path, LockMode::Exclusive),
            Err(Error::Locked { .. })
        ));
        drop((shared, again));
        drop(lock_file(&path, LockMode::Exclusive).expect("free again"));
    }
}
