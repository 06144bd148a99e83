//! Fault rules: which call fails, and how (TESTPLAN F4, F5, F6).
//!
//! A [`Fault`] names a kind of call and the `nth` such call, counted from when it was injected
//! (and only over calls on matching paths, if it has a path filter). When that call comes it
//! fails with the fault's [`FaultKind`]; a persistent fault then fails every later matching
//! call too. The disk counts every call of every kind, for tests that walk `nth` over all of
//! them ("fail the k-th call of each I/O kind, for every k").

use crate::error::{Error, IoOp};
use std::fmt;
use std::path::Path;

/// The kinds of storage call the simulator counts and can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IoKind {
    /// `Storage::create`.
    Create,
    /// `Storage::open`.
    Open,
    /// `StorageFile::read_at`.
    Read,
    /// `StorageFile::write_at` and `write_atomic_at` (and so the writes of `allocate_zeroed`).
    Write,
    /// `StorageFile::set_len`.
    SetLen,
    /// `StorageFile::flush`.
    Flush,
    /// `Storage::rename`.
    Rename,
    /// `Storage::remove`.
    Remove,
    /// `Storage::flush_dir`.
    FlushDir,
    /// `Storage::create_dir_all`.
    CreateDir,
    /// `Storage::list_dir`.
    ListDir,
    /// `Storage::lock`.
    Lock,
}

impl IoKind {
    /// Every kind, in declaration order.
    pub const ALL: [IoKind; 12] = [
        IoKind::Create,
        IoKind::Open,
        IoKind::Read,
        IoKind::Write,
        IoKind::SetLen,
        IoKind::Flush,
        IoKind::Rename,
        IoKind::Remove,
        IoKind::FlushDir,
        IoKind::CreateDir,
        IoKind::ListDir,
        IoKind::Lock,
    ];

    /// The operation an error from a call of this kind names.
    #[must_use]
    pub fn op(self) -> IoOp {
        match self {
            IoKind::Create => IoOp::Create,
            IoKind::Open => IoOp::Open,
            IoKind::Read => IoOp::Read,
            IoKind::Write => IoOp::Write,
            IoKind::SetLen => IoOp::SetLen,
            IoKind::Flush => IoOp::Flush,
            IoKind::Rename => IoOp::Rename,
            IoKind::Remove => IoOp::Remove,
            IoKind::FlushDir => IoOp::FlushDir,
            IoKind::CreateDir => IoOp::CreateDir,
            IoKind::ListDir => IoOp::ListDir,
            IoKind::Lock => IoOp::Lock,
        }
    }

    fn index(self) -> usize {
        let index = self as usize;
        assert_eq!(IoKind::ALL[index], self, "ALL is in declaration order");
        index
    }
}

/// One fault rule. Build it with [`Fault::once`] or [`Fault::persistent`], optionally narrowed
/// with [`Fault::on_path`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// The kind of call that fails.
    pub kind: IoKind,
    /// Which call fails: 1 is the first call of `kind` after the fault is injected.
    pub nth: u64,
    /// What the failing call does.
    pub error: FaultKind,
    /// Keep failing every later call of `kind` too.
    pub persistent: bool,
    /// Count and fail only calls whose path (either path, for a rename) contains this text.
    pub path_contains: Option<String>,
}

impl Fault {
    /// Fails the `nth` call of `kind` (1-based), once.
    #[must_use]
    pub fn once(kind: IoKind, nth: u64, error: FaultKind) -> Self {
        Fault {
            kind,
            nth,
            error,
            persistent: false,
            path_contains: None,
        }
    }

    /// Fails the `nth` call of `kind` (1-based) and every later one.
    #[must_use]
    pub fn persistent(kind: IoKind, nth: u64, error: FaultKind) -> Self {
        Fault {
            persistent: true,
            ..Fault::once(kind, nth, error)
        }
    }

    /// Narrows the rule to calls on paths containing `text`.
    #[must_use]
    pub fn on_path(self, text: impl Into<String>) -> Self {
        Fault {
            path_contains: Some(text.into()),
            ..self
        }
    }

    fn matches(&self, kind: IoKind, paths: &[&Path]) -> bool {
        self.kind == kind
            && self.path_contains.as_deref().is_none_or(|text| {
                paths
                    .iter()
                    .any(|path| path.to_string_lossy().contains(text))
            })
    }
}

/// What a failing call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Returns `EIO`; nothing happens.
    Eio,
    /// Returns `ENOSPC`; nothing happens.
    Enospc,
    /// A write lands in part: a prefix cut at a logical-block boundary of the file (random,
    /// possibly empty, never the whole write) reaches the live image; the call returns
    /// `ENOSPC`. On other kinds of call, the same as [`FaultKind::Enospc`].
    ShortWrite,
    /// Linux fsync-failure semantics (TESTPLAN F4): the flush returns `EIO`, and the file's
    /// unflushed writes and size changes leave the unflushed set without becoming durable.
    /// Reads still show them until a crash; a retried flush returns `Ok`. On other kinds of
    /// call, the same as [`FaultKind::Eio`].
    FlushLosesData,
    /// The disk dies at this call. For a write, a random prefix cut at a 4096-byte boundary of
    /// the file (possibly empty, possibly all of it) reaches the live image. This call and every
    /// later one fail with `EIO` ("simulated crash") until [`super::SimDisk::crash`].
    Crash,
    /// A write the device acknowledges and never does (TESTPLAN F6): it returns `Ok` and
    /// nothing lands, not even in the page cache (as with direct I/O). On other kinds of
    /// call, the same as [`FaultKind::Eio`].
    LostWrite,
    /// A write or a read panics in the calling thread, nothing written or read: what a failed
    /// assertion on that thread does, to test that a panic stops the database rather than
    /// hang it. On other kinds of call, the same as [`FaultKind::Eio`].
    Panic,
}

/// Most fault rules a disk holds at once; more is a runaway test.
const RULES_MAX: usize = 1024;

/// The injected rules and the per-kind call counters.
#[derive(Debug, Default, Clone)]
pub(super) struct FaultTable {
    calls: [u64; IoKind::ALL.len()],
    rules: Vec<Rule>,
}

#[derive(Debug, Clone)]
struct Rule {
    fault: Fault,
    /// Matching calls seen since the rule was injected.
    seen: u64,
}

impl FaultTable {
    pub(super) fn count_call(&mut self, kind: IoKind) {
        self.calls[kind.index()] += 1;
    }

    pub(super) fn call_count(&self, kind: IoKind) -> u64 {
        self.calls[kind.index()]
    }

    pub(super) fn inject(&mut self, fault: Fault) {
        assert!(fault.nth >= 1, "Fault::nth is 1-based: {fault:?}");
        assert!(
            self.rules.len() < RULES_MAX,
            "more than {RULES_MAX} fault rules"
        );
        self.rules.push(Rule { fault, seen: 0 });
    }

    pub(super) fn clear(&mut self) {
        self.rules.clear();
    }

    pub(super) fn pending(&self) -> usize {
        self.rules.len()
    }

    /// Counts one call against every matching rule and returns the fault of the first
    /// (earliest injected) rule that fires. Spent one-shot rules are dropped.
    pub(super) fn next_fault(&mut self, kind: IoKind, paths: &[&Path]) -> Option<FaultKind> {
        let mut fired = None;
        for rule in &mut self.rules {
            if !rule.fault.matches(kind, paths) {
                continue;
            }
            rule.seen += 1;
            let due = rule.seen == rule.fault.nth
                || (rule.fault.persistent && rule.seen > rule.fault.nth);
            if due && fired.is_none() {
                fired = Some(rule.fault.error);
            }
        }
        self.rules
            .retain(|rule| rule.fault.persistent || rule.seen < rule.fault.nth);
        fired
    }

    pub(super) fn check_invariants(&self) {
        assert!(self.rules.len() <= RULES_MAX);
        for rule in &self.rules {
            assert!(rule.fault.nth >= 1);
            // A spent one-shot rule is dropped in `next_fault`.
            assert!(
                rule.fault.persistent || rule.seen < rule.fault.nth,
                "spent rule kept: {rule:?}"
            );
        }
    }
}

/// An injected error from the operating system, as `FileStorage` would return it.
pub(super) fn os_error(op: IoOp, path: &Path, errno: i32) -> Error {
    Error::Io {
        op,
        path: path.to_path_buf(),
        source: std::io::Error::from_raw_os_error(errno),
    }
}

/// The error a call gets for `fault`, when the fault needs no call-specific handling.
pub(super) fn fault_error(fault: FaultKind, op: IoOp, path: &Path) -> Error {
    match fault {
        FaultKind::Eio | FaultKind::FlushLosesData | FaultKind::LostWrite | FaultKind::Panic => {
            os_error(op, path, crate::io::errno::EIO)
        }
        FaultKind::Enospc | FaultKind::ShortWrite => os_error(op, path, crate::io::errno::ENOSPC),
        FaultKind::Crash => sim_error(op, path, SimFailure::Dead),
    }
}

/// Why the simulator refuses a call outright.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SimFailure {
    /// A [`FaultKind::Crash`] fired and [`super::SimDisk::crash`] has not been called yet.
    Dead,
    /// The handle was opened before the last [`super::SimDisk::crash`].
    StaleHandle,
}

/// An `EIO` that says why: the source chain ends in the OS error `EIO`, but the message names
/// the simulated crash, so a test failure points at the simulator rather than a real disk.
#[derive(Debug)]
struct SimIoError {
    failure: SimFailure,
    eio: std::io::Error,
}

impl fmt::Display for SimIoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.failure {
            SimFailure::Dead => {
                "simulated crash: the disk died at an injected Crash fault; call SimDisk::crash()"
            }
            SimFailure::StaleHandle => {
                "simulated crash: this handle was opened before SimDisk::crash(); reopen the file"
            }
        })?;
        write!(f, " ({})", self.eio)
    }
}

impl std::error::Error for SimIoError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.eio)
    }
}

pub(super) fn sim_error(op: IoOp, path: &Path, failure: SimFailure) -> Error {
    let eio = std::io::Error::from_raw_os_error(crate::io::errno::EIO);
    Error::Io {
        op,
        path: path.to_path_buf(),
        source: std::io::Error::new(eio.kind(), SimIoError { failure, eio }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_fires_at_nth_only_and_persistent_keeps_firing() {
        let mut table = FaultTable::default();
        table.inject(Fault::once(IoKind::Write, 2, FaultKind::Eio));
        table.inject(Fault::persistent(IoKind::Flush, 3, FaultKind::Enospc));
        let p = Path::new("/d/f");
        let writes: Vec<_> = (0..4)
            .map(|_| table.next_fault(IoKind::Write, &[p]))
            .collect();
        assert_eq!(writes, [None, Some(FaultKind::Eio), None, None]);
        let flushes: Vec<_> = (0..5)
            .map(|_| table.next_fault(IoKind::Flush, &[p]))
            .collect();
        let e = Some(FaultKind::Enospc);
        assert_eq!(flushes, [None, None, e, e, e]);
        table.check_invariants();
        table.clear();
        assert_eq!(table.next_fault(IoKind::Flush, &[p]), None);
    }

    #[test]
    fn path_filter_counts_only_matching_calls() {
        let mut table = FaultTable::default();
        table.inject(Fault::once(IoKind::Rename, 1, FaultKind::Eio).on_path("wal"));
        let (a, b) = (Path::new("/d/page"), Path::new("/d/wal-1"));
        assert_eq!(table.next_fault(IoKind::Rename, &[a, a]), None);
        assert_eq!(
            table.next_fault(IoKind::Rename, &[a, b]),
            Some(FaultKind::Eio)
        );
    }

    #[test]
    fn sim_errors_name_the_crash_and_keep_eio_in_the_chain() {
        let err = sim_error(IoOp::Read, Path::new("/d/f"), SimFailure::Dead);
        let text = err.to_string();
        assert!(text.contains("simulated crash"), "{text}");
        let Error::Io { source, .. } = &err else {
            panic!("not Io: {err:?}")
        };
        let inner = std::error::Error::source(source.get_ref().expect("custom error"));
        let eio = inner
            .and_then(|e| e.downcast_ref::<std::io::Error>())
            .expect("EIO source");
        assert_eq!(eio.raw_os_error(), Some(crate::io::errno::EIO));
        let enospc = fault_error(FaultKind::ShortWrite, IoOp::Write, Path::new("x"));
        assert_eq!(enospc.raw_os_error(), Some(crate::io::errno::ENOSPC));
    }
}
