//! [`SimFile`]: one open handle on the simulated disk.
//!
//! A handle names a file (an inode), not a path: after a rename it still reaches the same
//! bytes, and after a remove it keeps working until the next crash, as on Linux. Every call
//! first goes through [`State::admit`] (count it, refuse it if the disk is dead or the handle
//! predates a crash, fire any fault), then acts on the file's images.

use super::fault::{FaultKind, fault_error, os_error};
use super::image::DataOp;
use super::{FILE_BYTES_MAX, FileId, IoKind, State};
use crate::FlushMethod;
use crate::error::{IoOp, Result};
use crate::io::{StorageFile, assert_direct_aligned};
use parking_lot::Mutex;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Writes cut by a [`FaultKind::Crash`] keep a prefix ending on this boundary of the file: the
/// page cache writes whole pages (TESTPLAN F1).
const CRASH_CUT_BYTES: u64 = 4096;

pub(super) struct SimFile {
    disk: Arc<Mutex<State>>,
    path: PathBuf,
    id: FileId,
    method: FlushMethod,
    direct_align: Option<u32>,
    /// The disk's epoch when the handle was opened; any other epoch means a crash since.
    epoch: u64,
}

impl fmt::Debug for SimFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimFile")
            .field("path", &self.path)
            .field("id", &self.id)
            .field("method", &self.method)
            .field("direct_align", &self.direct_align)
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
    }
}

impl SimFile {
    /// Requires: the caller holds the disk's lock (passed as `state`) and `id` exists.
    pub(super) fn new(
        disk: Arc<Mutex<State>>,
        state: &State,
        path: &Path,
        id: FileId,
        method: FlushMethod,
    ) -> Self {
        assert!(
            state.files.contains_key(&id),
            "handle on missing file {id:?}"
        );
        assert!(
            !method.is_direct() || state.config.direct_io,
            "caller refuses direct I/O"
        );
        let direct_align = method.is_direct().then_some(state.config.dio_align);
        SimFile {
            disk,
            path: path.to_path_buf(),
            id,
            method,
            direct_align,
            epoch: state.epoch,
        }
    }

    fn check_aligned(&self, ptr: *const u8, len: usize, offset: u64) {
        if let Some(align) = self.direct_align {
            assert_direct_aligned(&self.path, ptr, len, offset, align);
        }
    }

    /// `EFBIG` for a file position the simulator cannot hold.
    fn check_end(&self, op: IoOp, end: Option<u64>) -> Result<u64> {
        match end {
            Some(end) if end <= FILE_BYTES_MAX => Ok(end),
            _ => Err(os_error(op, &self.path, crate::io::errno::EFBIG)),
        }
    }

    /// The write a [`FaultKind::ShortWrite`] or [`FaultKind::Crash`] lets through: the bytes up
    /// to a random one of its [`cut_points`] (`may_finish`: the end is one of them), `atomic`
    /// when the device promised the write whole.
    fn cut_prefix<'b>(
        state: &mut State,
        buf: &'b [u8],
        offset: u64,
        unit: u64,
        may_finish: bool,
        atomic: bool,
    ) -> &'b [u8] {
        let points = cut_points(offset, buf.len() as u64, unit, atomic, may_finish);
        let pick = usize::try_from(state.rng.below(points.len() as u64)).expect("few points");
        let cut = points[pick];
        assert!(
            may_finish || buf.is_empty() || cut < offset + buf.len() as u64,
            "a short write is short"
        );
        &buf[..usize::try_from(cut - offset).expect("within buf")]
    }

    /// The write's fate under an injected fault.
    fn write_fault(
        &self,
        state: &mut State,
        fault: FaultKind,
        buf: &[u8],
        offset: u64,
        atomic: bool,
    ) -> crate::Error {
        let (unit, may_finish) = match fault {
            FaultKind::ShortWrite => (u64::from(state.config.logical_block_bytes), false),
            FaultKind::Crash => (CRASH_CUT_BYTES, true),
            FaultKind::Eio
            | FaultKind::Enospc
            | FaultKind::FlushLosesData
            | FaultKind::LostWrite
            | FaultKind::Panic => {
                return fault_error(fault, IoOp::Write, &self.path);
            }
        };
        let prefix = Self::cut_prefix(state, buf, offset, unit, may_finish, atomic);
        let fits = offset
            .checked_add(buf.len() as u64)
            .is_some_and(|end| end <= FILE_BYTES_MAX);
        if fits && !prefix.is_empty() {
            // In the page cache only: the call failed, so nothing was made durable.
            let op = DataOp::Write {
                offset,
                bytes: prefix.to_vec(),
            };
            state.file_mut(self.id).push(op);
        }
        fault_error(fault, IoOp::Write, &self.path)
    }

    /// A write; `atomic` when the device promised to do it whole (a crash cuts it at its start
    /// or its end only).
    fn write(&self, buf: &[u8], offset: u64, atomic: bool) -> Result<()> {
        self.check_aligned(buf.as_ptr(), buf.len(), offset);
        let mut state = self.disk.lock();
        let write = (self.id, offset, buf, atomic);
        if let Some(fault) = state.admit_write(&self.path, Some(self.epoch), write)? {
            if fault == FaultKind::LostWrite {
                return Ok(());
            }
            if fault == FaultKind::Panic {
                drop(state);
                panic!("simulated panic in a write of {}", self.path.display());
            }
            return Err(self.write_fault(&mut state, fault, buf, offset, atomic));
        }
        let end = self.check_end(IoOp::Write, offset.checked_add(buf.len() as u64))?;
        if buf.is_empty() {
            return Ok(());
        }
        let write_through = self.method.is_write_through() && !state.lying_flushes;
        let latency = state.config.flush_latency;
        let file = state.file_mut(self.id);
        file.push(DataOp::Write {
            offset,
            bytes: buf.to_vec(),
        });
        if write_through {
            // O_DSYNC: the write, and the size changes before it, are durable on return;
            // buffered writes elsewhere in the file are not.
            file.make_last_durable();
            assert!(file.durable.len() as u64 >= end);
        }
        assert!(file.live.len() as u64 >= end);
        drop(state);
        if self.method.is_write_through() {
            Self::sleep(latency);
        }
        Ok(())
    }

    /// Sleeps for the simulated flush latency, outside the lock.
    fn sleep(latency: Duration) {
        if !latency.is_zero() {
            std::thread::sleep(latency);
        }
    }
}

/// Where a write of `len` bytes at `offset` can be cut, as file positions in order: its
/// start, then each multiple of `unit` inside it (none if `atomic`: the device writes it
/// whole), then, if `may_finish` and it is not empty, its end.
///
/// Worked example: `unit` 4096, 10,000 bytes at offset 1000: 1000, 4096, 8192, 11000.
pub(super) fn cut_points(
    offset: u64,
    len: u64,
    unit: u64,
    atomic: bool,
    may_finish: bool,
) -> Vec<u64> {
    let end = offset + len;
    let mut points = vec![offset];
    if !atomic {
        let mut boundary = (offset / unit + 1) * unit;
        while boundary < end {
            points.push(boundary);
            boundary += unit;
        }
    }
    if may_finish && len > 0 {
        points.push(end);
    }
    assert!(
        points.windows(2).all(|w| w[0] < w[1]),
        "cut points in order"
    );
    points
}

impl StorageFile for SimFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn flush_method(&self) -> FlushMethod {
        self.method
    }

    fn direct_align(&self) -> Option<u32> {
        self.direct_align
    }

    fn len(&self) -> Result<u64> {
        let state = self.disk.lock();
        state.check_alive(IoOp::Stat, &self.path, Some(self.epoch))?;
        Ok(state.file(self.id).live.len() as u64)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.check_aligned(buf.as_ptr(), buf.len(), offset);
        let mut state = self.disk.lock();
        if let Some(fault) = state.admit(IoKind::Read, &[&self.path], Some(self.epoch))? {
            if fault == FaultKind::Panic {
                drop(state);
                panic!("simulated panic in a read of {}", self.path.display());
            }
            return Err(fault_error(fault, IoOp::Read, &self.path));
        }
        let live = &state.file(self.id).live;
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(live.len());
        let n = buf.len().min(live.len() - start);
        buf[..n].copy_from_slice(&live[start..start + n]);
        // Fewer bytes only at end of file.
        assert!(n == buf.len() || start + n == live.len());
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.write(buf, offset, false)
    }

    /// The device's promise, checked: direct I/O, and a length and offset its atomic write
    /// unit covers (so the crash model never tears it; see `crash.rs`, `Tear::is_atomic`).
    fn write_atomic_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let covered = {
            let state = self.disk.lock();
            let len = buf.len() as u64;
            state.config.atomic_write_unit.is_some_and(|(min, max)| {
                len.is_power_of_two()
                    && u64::from(min) <= len
                    && len <= u64::from(max)
                    && offset.is_multiple_of(len)
            })
        };
        if self.direct_align.is_none() || !covered {
            return Err(crate::Error::os(
                IoOp::Write,
                &self.path,
                crate::io::errno::EOPNOTSUPP,
            ));
        }
        self.write(buf, offset, true)
    }

    fn set_len(&self, len: u64) -> Result<()> {
        let mut state = self.disk.lock();
        state.admit_plain(IoKind::SetLen, &[&self.path], Some(self.epoch))?;
        self.check_end(IoOp::SetLen, Some(len))?;
        let file = state.file_mut(self.id);
        file.push(DataOp::SetLen { len });
        assert_eq!(file.live.len() as u64, len);
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        let mut state = self.disk.lock();
        if let Some(fault) = state.admit(IoKind::Flush, &[&self.path], Some(self.epoch))? {
            if fault == FaultKind::FlushLosesData {
                state.file_mut(self.id).lose_unflushed();
            }
            return Err(fault_error(fault, IoOp::Flush, &self.path));
        }
        if self.method == FlushMethod::NoSync {
            return Ok(()); // Never durable, and no device round trip to wait for.
        }
        let latency = state.config.flush_latency;
        if !state.lying_flushes {
            let file = state.file_mut(self.id);
            file.make_durable();
            assert!(file.unflushed.is_empty());
        }
        drop(state);
        Self::sleep(latency);
        Ok(())
    }
}
