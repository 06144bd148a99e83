//! File locks: one process per database.
//!
//! A database directory holds `tilldb.lock`, a file whose only use is its lock (empty, but on
//! Windows, where locks are mandatory, it holds the holder's pid beside a locked byte). `Db`
//! takes it exclusively for its whole life; the read-only tools (`till stats`, `dump-log`) take
//! it shared while they read. The lock is the operating system's (`os/linux/lock.rs`:
//! `flock(2)`; `os/windows/lock.rs`: `LockFileEx`): it belongs to the open file, so a second
//! open in the same process conflicts exactly as another process does, and it dies with its
//! process, so a kill -9 never leaves a stale lock and there is no pid file to clean up.

use std::fmt;

/// How a lock is shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockMode {
    /// One holder, no other lock of either mode: a `Db`.
    Exclusive,
    /// Any number of shared holders, no exclusive one: readers that must not see a writer.
    Shared,
}

/// A held lock, released when dropped (or when its process dies).
pub trait HeldLock: Send + Sync + fmt::Debug {
    /// The mode the lock is held in, `None` when nothing is held (a shared lock in a read-only
    /// directory without a lock file, where no writer can be).
    fn mode(&self) -> Option<LockMode>;
}

/// A shared lock that holds nothing: see [`HeldLock::mode`].
#[derive(Debug)]
pub(crate) struct NoLock;

impl HeldLock for NoLock {
    fn mode(&self) -> Option<LockMode> {
        None
    }
}
