//! Crash points: the disk as it was just before each state-changing call, for explorers that
//! crash a workload at every I/O step without running it again for each one.
//!
//! ```text
//!   record_crash_points(true)
//!   workload ── create ── write ── flush ── rename ── flush_dir ── write ──► end
//!               │         │        │        │         │            │
//!   points:     0         1        2        3         4            5      (take_crash_points)
//!               each: a copy of the whole disk before that call, and for a write its bytes
//! ```
//!
//! [`CrashPoint::disk`] turns a point into a disk that stopped there: a copy of the state,
//! plus, for a write, the prefix a process kill inside it would have left in the page cache
//! (cut point `cut`: 0 is nothing, then each 4096-byte boundary of the file inside the write,
//! then all of it; an atomic write has only nothing and all). The caller then crashes that
//! disk in any [`super::CrashMode`], as often as it likes, each from a fresh copy.
//!
//! Only calls that can change what a crash leaves are points: create, write, `set_len`, flush,
//! rename, remove, `flush_dir` and `create_dir`. A crash at a read, an open or a listing leaves the
//! same disk as a crash just before the next changing call.

use super::file::cut_points;
use super::image::DataOp;
use super::rng::SimRng;
use super::{FileId, HARNESS, IoKind, SimDisk, State};
use parking_lot::Mutex;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

/// Bytes between the cut points of a write (the page cache writes whole 4 KiB pages).
const CUT_BYTES: u64 = 4096;

/// A write about to happen at a crash point.
#[derive(Clone)]
pub(super) struct PendingWrite {
    pub(super) file: FileId,
    pub(super) offset: u64,
    pub(super) bytes: Vec<u8>,
    /// The device promised to write it whole (`write_atomic_at`).
    pub(super) atomic: bool,
}

/// The disk just before one state-changing call.
#[derive(Clone)]
pub struct CrashPoint {
    index: usize,
    /// `None` for the point after the last call ([`SimDisk::crash_point_now`]).
    kind: Option<IoKind>,
    path: PathBuf,
    state: State,
    write: Option<PendingWrite>,
}

impl fmt::Debug for CrashPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CrashPoint")
            .field("index", &self.index)
            .field("kind", &self.kind)
            .field("path", &self.path)
            .field("cuts", &self.cuts())
            .finish_non_exhaustive()
    }
}

impl CrashPoint {
    /// Its position among the recorded points: 0 is the first changing call.
    #[must_use]
    pub fn index(&self) -> usize {
        self.index
    }

    /// The kind of call that was about to happen; `None` for a point taken between calls.
    #[must_use]
    pub fn kind(&self) -> Option<IoKind> {
        self.kind
    }

    /// The path of that call (the source, for a rename).
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many ways a process kill can cut the call: a write's cut points (see the module
    /// doc), 1 for other calls.
    #[must_use]
    pub fn cuts(&self) -> u32 {
        self.write.as_ref().map_or(1, |w| {
            u32::try_from(w.cut_points().len()).expect("a write of under 16 TiB")
        })
    }

    /// A new disk that stopped at this point: the state before the call, plus, for a write,
    /// the prefix up to cut point `cut` (capped at the last) in the page cache. Its random
    /// choices come from `seed`. Not yet crashed: call [`SimDisk::crash`] on it.
    #[must_use]
    pub fn disk(&self, cut: u32, seed: u64) -> SimDisk {
        let mut state = self.state.clone();
        state.rng = SimRng::new(seed);
        if let Some(write) = &self.write {
            let kept = write.kept_bytes(cut);
            if kept > 0 {
                state
                    .files
                    .get_mut(&write.file)
                    .expect("file of a pending write")
                    .push(DataOp::Write {
                        offset: write.offset,
                        bytes: write.bytes[..kept].to_vec(),
                    });
            }
        }
        state.check_invariants();
        SimDisk {
            state: Arc::new(Mutex::new(state)),
            process: AtomicU64::new(HARNESS),
        }
    }
}

impl PendingWrite {
    fn cut_points(&self) -> Vec<u64> {
        cut_points(
            self.offset,
            self.bytes.len() as u64,
            CUT_BYTES,
            self.atomic,
            true,
        )
    }

    /// Bytes that cut point `cut` keeps (capped at the last point: all of it).
    fn kept_bytes(&self, cut: u32) -> usize {
        let points = self.cut_points();
        let at = points[usize::try_from(cut)
            .unwrap_or(usize::MAX)
            .min(points.len() - 1)];
        usize::try_from(at - self.offset).expect("inside the write")
    }
}

impl State {
    /// Records a crash point before a changing call, if recording. Requires: the call was
    /// admitted (the disk is alive, the handle current).
    pub(super) fn record_point(
        &mut self,
        kind: IoKind,
        path: &Path,
        write: Option<(FileId, u64, &[u8], bool)>,
    ) {
        let Some(points) = self.recorded.take() else {
            return;
        };
        assert!(!self.dead, "a dead disk records no points");
        assert!(kind.changes_disk(), "{kind:?} changes nothing");
        let write = write.map(|(file, offset, bytes, atomic)| PendingWrite {
            file,
            offset,
            bytes: bytes.to_vec(),
            atomic,
        });
        let point = CrashPoint {
            index: self.recorded_taken + points.len(),
            kind: Some(kind),
            path: path.to_path_buf(),
            state: self.clone(),
            write,
        };
        self.recorded = Some(points);
        self.recorded
            .as_mut()
            .expect("put back just now")
            .push(point);
    }
}

impl IoKind {
    /// True for the kinds of call that can change what a crash leaves.
    #[must_use]
    pub fn changes_disk(self) -> bool {
        matches!(
            self,
            IoKind::Create
                | IoKind::Write
                | IoKind::SetLen
                | IoKind::Flush
                | IoKind::Rename
                | IoKind::Remove
                | IoKind::FlushDir
                | IoKind::CreateDir
        )
    }
}

impl SimDisk {
    /// Starts (or stops) recording a [`CrashPoint`] before every state-changing call. Stopping
    /// drops the points not yet taken.
    pub fn record_crash_points(&self, on: bool) {
        let mut state = self.state.lock();
        state.recorded = on.then(Vec::new);
        state.recorded_taken = 0;
    }

    /// How many points were recorded since recording started (taken ones included): the
    /// index the next changing call's point will have.
    #[must_use]
    pub fn crash_points_recorded(&self) -> usize {
        let state = self.state.lock();
        state.recorded.as_ref().map_or(0, Vec::len) + state.recorded_taken
    }

    /// The points recorded so far, oldest first; recording goes on.
    #[must_use]
    pub fn take_crash_points(&self) -> Vec<CrashPoint> {
        let mut state = self.state.lock();
        let points = state
            .recorded
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default();
        state.recorded_taken += points.len();
        points
    }

    /// A disk that stopped now, after every call so far: the point after the last one.
    #[must_use]
    pub fn crash_point_now(&self) -> CrashPoint {
        let mut state = self.state.lock();
        let index = state.recorded.as_ref().map_or(0, Vec::len) + state.recorded_taken;
        let recorded = state.recorded.take();
        let copy = state.clone();
        state.recorded = recorded;
        CrashPoint {
            index,
            kind: None,
            path: PathBuf::from("/"),
            state: copy,
            write: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The worked example of `cut_points`, and an atomic write's two points.
    #[test]
    fn cut_points_are_the_start_each_boundary_inside_and_the_end() {
        assert_eq!(
            cut_points(1000, 10_000, 4096, false, true),
            [1000, 4096, 8192, 11_000]
        );
        assert_eq!(cut_points(4096, 16384, 4096, true, true), [4096, 20480]);
        assert_eq!(cut_points(0, 8192, 4096, false, false), [0, 4096]);
        assert_eq!(cut_points(512, 0, 4096, false, true), [512]);
        let write = PendingWrite {
            file: FileId(0),
            offset: 1000,
            bytes: vec![0; 10_000],
            atomic: false,
        };
        let kept: Vec<usize> = (0..6).map(|cut| write.kept_bytes(cut)).collect();
        assert_eq!(kept, [0, 3096, 7192, 10_000, 10_000, 10_000]);
    }
}
