//! Small io helpers the engine shares: alignment arithmetic and checks, directory names,
//! durable whole-file writes, and which flush methods this platform has.

use super::{Storage, os};
use crate::error::{Error, IoOp};
use crate::{FlushMethod, Result};
use std::path::{Path, PathBuf};

/// Whether this platform has flush method `method` (the others are refused at open).
#[must_use]
pub fn platform_supports(method: FlushMethod) -> bool {
    os::supports(method)
}

/// Rounds `n` up to a multiple of `align` (a power of two).
///
/// Worked example: `round_up(5000, 4096) == 8192`, `round_up(8192, 4096) == 8192`.
#[must_use]
pub fn round_up(n: u64, align: u32) -> u64 {
    assert!(
        align.is_power_of_two(),
        "alignment {align} is not a power of two"
    );
    let mask = u64::from(align) - 1;
    (n + mask) & !mask
}

/// Panics unless a direct-I/O buffer, its length and its file offset are all aligned.
///
/// Misaligned direct I/O is a bug in the caller: the kernel would answer `EINVAL`, at a moment
/// when nothing sensible can be done about it. Each condition is asserted on its own so a
/// failure names exactly one.
pub fn assert_direct_aligned(path: &Path, ptr: *const u8, len: usize, offset: u64, align: u32) {
    let a = align as usize;
    let path = path.display();
    assert!(
        align.is_power_of_two(),
        "alignment {align} of {path} is not a power of two"
    );
    assert!(
        (ptr as usize).is_multiple_of(a),
        "direct I/O buffer at {ptr:p} not {align}-aligned ({path})"
    );
    assert!(
        len.is_multiple_of(a),
        "direct I/O length {len} not a multiple of {align} ({path})"
    );
    assert!(
        offset.is_multiple_of(u64::from(align)),
        "direct I/O offset {offset} not {align}-aligned ({path})"
    );
}

/// The parent directory of `path`, for flushing after a create or rename.
#[must_use]
pub fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Swaps the names of two existing directories (or files) in one step, then flushes their
/// parent directories: after a crash each name holds one of the two, never neither. Linux
/// only so far (`renameat2(RENAME_EXCHANGE)`); elsewhere an `Io` error of kind
/// `Unsupported`. `till compact` uses it to put a compacted copy in a database's place.
pub fn exchange_dirs(a: &Path, b: &Path) -> Result<()> {
    os::exchange(a, b).map_err(|source| Error::Io {
        op: IoOp::Rename,
        path: a.to_path_buf(),
        source,
    })?;
    os::flush_dir(&parent_dir(a))?;
    if parent_dir(b) != parent_dir(a) {
        os::flush_dir(&parent_dir(b))?;
    }
    Ok(())
}

/// Replaces `path` with `bytes` so that a crash leaves the old file or the new one, never a
/// mix: written to `<path>.tmp`, flushed, renamed over `path`, the directory flushed.
pub fn write_file_durably(storage: &dyn Storage, path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    if storage.exists(&tmp)? {
        storage.remove(&tmp)?;
    }
    let file = storage.create(&tmp, FlushMethod::Fdatasync)?;
    file.write_at(bytes, 0)?;
    file.flush()?;
    drop(file);
    storage.rename(&tmp, path)?;
    storage.flush_dir(&parent_dir(path))
}
