//! `Storage::lock` on the simulated disk: a table of held locks, as the kernel keeps for
//! `flock`. A crash ends every process, so it empties the table; a guard from before a crash
//! releases nothing when dropped. A fork copies no locks (no process runs on the copy yet).
//! The holder's pid is never known here: the simulator has no processes.

use super::fault::os_error;
use super::image::FileData;
use super::{FileId, IoKind, SimDisk, State};
use crate::error::{Error, IoOp, Result};
use crate::io::{HeldLock, LockMode};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Most locks held at once on one disk; more is a runaway test that leaks them.
const LOCKS_MAX: usize = 1024;

/// Who holds the lock on one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Holders {
    Exclusive,
    Shared(usize),
}

/// The held locks, by path as given (paths are not normalised here, see `namespace.rs`).
#[derive(Debug, Clone, Default)]
pub(super) struct LockTable {
    held: BTreeMap<PathBuf, Holders>,
}

impl LockTable {
    /// Takes the lock, or says it is held in a conflicting mode.
    fn take(&mut self, path: &Path, mode: LockMode) -> bool {
        let entry = self.held.get(path).copied();
        let next = match (entry, mode) {
            (None, LockMode::Exclusive) => Holders::Exclusive,
            (None, LockMode::Shared) => Holders::Shared(1),
            (Some(Holders::Shared(n)), LockMode::Shared) => Holders::Shared(n + 1),
            (Some(_), _) => return false,
        };
        self.held.insert(path.to_path_buf(), next);
        assert!(
            self.held.len() <= LOCKS_MAX,
            "more than {LOCKS_MAX} locks held"
        );
        true
    }

    fn release(&mut self, path: &Path, mode: LockMode) {
        let entry = self.held.get(path).copied();
        match (entry, mode) {
            (Some(Holders::Exclusive), LockMode::Exclusive)
            | (Some(Holders::Shared(1)), LockMode::Shared) => {
                self.held.remove(path);
            }
            (Some(Holders::Shared(n)), LockMode::Shared) => {
                self.held.insert(path.to_path_buf(), Holders::Shared(n - 1));
            }
            _ => panic!(
                "released a {mode:?} lock on {} not held so: {entry:?}",
                path.display()
            ),
        }
    }

    /// Every process died: nothing is held.
    pub(super) fn clear(&mut self) {
        self.held.clear();
    }

    pub(super) fn check_invariants(&self) {
        assert!(self.held.len() <= LOCKS_MAX);
        for (path, holders) in &self.held {
            assert_ne!(
                *holders,
                Holders::Shared(0),
                "{} held by nobody",
                path.display()
            );
        }
    }
}

/// A lock held on the simulated disk.
struct SimLock {
    state: Arc<Mutex<State>>,
    path: PathBuf,
    mode: LockMode,
    /// The disk's epoch when taken: after a crash the lock is gone already.
    epoch: u64,
}

impl std::fmt::Debug for SimLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SimLock({:?} {})", self.mode, self.path.display())
    }
}

impl HeldLock for SimLock {
    fn mode(&self) -> Option<LockMode> {
        Some(self.mode)
    }
}

impl Drop for SimLock {
    fn drop(&mut self) {
        let mut state = self.state.lock();
        if state.epoch == self.epoch {
            state.locks.release(&self.path, self.mode);
        }
    }
}

impl SimDisk {
    /// `Storage::lock`: counted and faulted as [`IoKind::Lock`]; creates the file when missing
    /// (a name not durable until its directory is flushed, as a real create).
    pub(super) fn lock_path(&self, path: &Path, mode: LockMode) -> Result<Box<dyn HeldLock>> {
        let mut state = self.state.lock();
        state.admit_plain(IoKind::Lock, &[path], self.process_epoch())?;
        if state.names.lookup(path).is_err() {
            state
                .names
                .check_create(path)
                .map_err(|errno| os_error(IoOp::Lock, path, errno))?;
            let id = FileId(state.next_file_id);
            state.next_file_id += 1;
            let previous = state.files.insert(id, FileData::default());
            assert!(previous.is_none(), "file id {id:?} handed out twice");
            state.names.create(path, id);
        }
        if !state.locks.take(path, mode) {
            return Err(Error::Locked {
                dir: crate::io::parent_dir(path),
                pid: None,
            });
        }
        Ok(Box::new(SimLock {
            state: Arc::clone(&self.state),
            path: path.to_path_buf(),
            mode,
            epoch: state.epoch,
        }))
    }
}
