//! The one seam between the engine and the disk.
//!
//! Everything tilldb stores goes through [`Storage`] (the directory: create, open, rename,
//! remove, flush a directory) and [`StorageFile`] (one open file: read and write at offsets,
//! set its length, allocate it with zeros, flush it by its [`FlushMethod`]). Three
//! implementations exist:
//!
//! - [`FileStorage`]: real files through the OS (`file.rs`; what differs per operating system
//!   is in `os/linux/`, `os/macos/` and `os/windows/`, with `os/unix/` shared by the first
//!   two: one open and one flush per flush method).
//! - [`SimDisk`]: an in-memory, deterministic, fault-injecting disk for tests (`sim/`). It keeps
//!   flushed and unflushed data apart, so a simulated crash can lose exactly what a real one
//!   could.
//! - [`OverlayStorage`]: reads through to another storage and keeps every change in memory
//!   (`overlay.rs`): `till check` recovers and checks a database without changing a byte.
//!
//! A wrapper that adds to any storage (counts bytes, slows flushes, holds a flush at a gate)
//! implements [`Hooks`] and wraps it in a [`HookedStorage`] (`hooked.rs`), the one place that
//! forwards every method.
//!
//! ## Vocabulary
//!
//! - *write*: hand bytes to the OS (or the simulated cache). Not durable on its own.
//! - *flush*: make every write so far durable, as the file's [`FlushMethod`] does it.
//! - *flush a directory*: make creates, renames and removes in it durable.
//!
//! ## Direct I/O
//!
//! A file opened with a direct method (`O_DIRECT`) has [`StorageFile::direct_align`] set. Every
//! read and write on it must use a buffer whose address, length and file offset are multiples of
//! that alignment: use [`AlignedBuf`]. Breaking this is a bug in the caller and panics (see
//! [`assert_direct_aligned`]); it is never sent to the kernel to come back as `EINVAL` mid-run.
//! Sizes are checked against the device once, when the database is opened ([`IoGeometry`]).

mod aligned;
mod file;
mod geometry;
mod hooked;
mod lock;
mod measure;
pub(crate) mod os;
mod overlay;
mod probe;
mod sim;
mod util;

// The seam, public: what a `Storage` implementor needs, the real file system, and the
// simulated disk for an application's own crash tests.
pub use file::FileStorage;
pub use lock::{HeldLock, LockMode};
pub use probe::{DeviceFacts, WriteCache};
pub use sim::{CrashMode, CrashPoint, Fault, FaultKind, IoKind, SimConfig, SimDisk};

pub(crate) use lock::NoLock;

/// The io layer's helpers for the engine, public only with the `internals` feature (`till`,
/// the benchmarks and the tests use them): buffers, geometry, measurement, the hooked and
/// overlay storages, and file helpers.
macro_rules! internal_use {
    ($($path:path),* $(,)?) => {
        $(
            #[cfg(feature = "internals")]
            pub use $path;
            #[cfg(not(feature = "internals"))]
            #[allow(unused_imports)]
            pub(crate) use $path;
        )*
    };
}

internal_use!(
    aligned::AlignedBuf,
    aligned::AlignedVec,
    aligned::prefetch,
    aligned::prefetch_spread,
    geometry::IoGeometry,
    geometry::LOG_BLOCK_BYTES_MAX,
    geometry::LOG_BLOCK_BYTES_MIN,
    hooked::Call,
    hooked::HookedStorage,
    hooked::Hooks,
    measure::MEASURE_FILE_PREFIX,
    measure::MeasureFile,
    measure::MeasureSpec,
    measure::Measurement,
    measure::Recommendation,
    measure::choose_flush_method,
    measure::measure,
    measure::recommend,
    os::errno,
    os::WINE_NOTE,
    os::atomic_write_supported,
    os::native_method_name,
    overlay::OverlayStorage,
    probe::DIRECT_ALIGN_FALLBACK,
    util::assert_direct_aligned,
    util::exchange_dirs,
    util::parent_dir,
    util::platform_supports,
    util::round_up,
    util::write_file_durably,
);

use crate::{FlushMethod, Result};
use std::fmt;
use std::path::Path;

/// The directory side of storage: names, creation, and directory flushes.
///
/// Paths are used as given; callers pass absolute paths or paths under the database directory.
pub trait Storage: Send + Sync + fmt::Debug {
    /// Creates a new file, failing if it exists. The new name is durable only after
    /// [`Storage::flush_dir`] on its directory.
    fn create(&self, path: &Path, method: FlushMethod) -> Result<Box<dyn StorageFile>>;

    /// Opens an existing file for reading and writing.
    fn open(&self, path: &Path, method: FlushMethod) -> Result<Box<dyn StorageFile>>;

    /// True if `path` names an existing file or directory.
    fn exists(&self, path: &Path) -> Result<bool>;

    /// Renames `source` to `target`, replacing `target`. Durable after flushing the directory.
    fn rename(&self, source: &Path, target: &Path) -> Result<()>;

    /// Removes a file. Durable after flushing the directory.
    fn remove(&self, path: &Path) -> Result<()>;

    /// Creates a directory and its parents if missing.
    fn create_dir_all(&self, path: &Path) -> Result<()>;

    /// The names (not paths) of the entries of a directory, sorted.
    fn list_dir(&self, path: &Path) -> Result<Vec<String>>;

    /// Makes creates, renames and removes in directory `path` durable.
    fn flush_dir(&self, path: &Path) -> Result<()>;

    /// What the device under directory `dir` is and can do.
    fn device_facts(&self, dir: &Path) -> Result<DeviceFacts>;

    /// Fills `buf` with random bytes for keys, database ids and salts (docs/encryption.md):
    /// the operating system's generator, by default. The simulated disk draws them from its
    /// seeded stream instead, so a run is repeated exactly and forks of one disk differ.
    /// A generator that fails is [`crate::Error::KeyUnavailable`]'s reason.
    fn fill_random(&self, buf: &mut [u8]) -> std::result::Result<(), String> {
        crate::crypt::fill_random(buf).map_err(|e| e.to_string())
    }

    /// Locks the file `path` (created empty when missing) for as long as the returned guard
    /// lives, and at once: a lock held elsewhere is [`crate::Error::Locked`], never a wait. The
    /// lock is the operating system's and belongs to the open file, so it conflicts with
    /// other processes and with other opens in this process alike, whatever path reached the
    /// file, and it is gone when its process dies (a kill -9 leaves nothing to clean up).
    /// [`LockMode::Shared`] locks coexist with each other, never with an exclusive one; a
    /// shared lock on a file that is missing and cannot be created (a read-only directory)
    /// holds nothing, since no writer can have locked it there.
    fn lock(&self, path: &Path, mode: LockMode) -> Result<Box<dyn HeldLock>>;

    /// Like [`Storage::lock`], in one attempt and without an error for a lock held
    /// elsewhere: `Ok(None)`. For locks taken again and again where a refusal is an answer,
    /// not a failure (the readers' snapshot lock, `db/readers.rs`). Default: [`Storage::lock`]
    /// with `Locked` as `None`.
    fn try_lock(&self, path: &Path, mode: LockMode) -> Result<Option<Box<dyn HeldLock>>> {
        match self.lock(path, mode) {
            Ok(held) => Ok(Some(held)),
            Err(crate::Error::Locked { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// One open file.
pub trait StorageFile: Send + Sync + fmt::Debug {
    /// The path the file was opened with.
    fn path(&self) -> &Path;

    /// How this file's writes are made durable.
    fn flush_method(&self) -> FlushMethod;

    /// `Some(n)` when every buffer address, length and offset must be a multiple of `n`.
    fn direct_align(&self) -> Option<u32>;

    /// The file's current length in bytes.
    fn len(&self) -> Result<u64>;

    /// True when the file is empty.
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Reads into `buf` at `offset`; returns the bytes read, fewer only at end of file.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize>;

    /// Writes all of `buf` at `offset`. Durable only once [`StorageFile::flush`] returns, or
    /// on return for write-through methods.
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()>;

    /// Truncates or extends the file. Durable after the next [`StorageFile::flush`].
    fn set_len(&self, len: u64) -> Result<()>;

    /// Writes zeros over `len` bytes at `offset`, so the blocks are allocated and later
    /// overwrites plus `fdatasync` have no metadata to write. Durable after the next flush.
    fn allocate_zeroed(&self, offset: u64, len: u64) -> Result<()> {
        allocate_by_writing_zeros(self, offset, len)
    }

    /// Writes all of `buf` at `offset` as one atomic write (`pwritev2(RWF_ATOMIC)`): after a
    /// crash the place holds all of it or none of it, never a torn mix. Needs an `O_DIRECT`
    /// file, a power-of-two length inside the device's atomic write unit range and an offset
    /// aligned to the length; anything else fails with `EOPNOTSUPP` or `EINVAL`, writing
    /// nothing. Durable like [`StorageFile::write_at`].
    fn write_atomic_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let _ = (buf, offset);
        Err(crate::Error::os(
            crate::IoOp::Write,
            self.path(),
            errno::EOPNOTSUPP,
        ))
    }

    /// Makes every write so far durable, as [`StorageFile::flush_method`] does it.
    fn flush(&self) -> Result<()>;
}

/// The allocation every backend shares: zeros written in aligned chunks of up to 1 MiB.
pub(crate) fn allocate_by_writing_zeros<F: StorageFile + ?Sized>(
    file: &F,
    offset: u64,
    len: u64,
) -> Result<()> {
    const CHUNK_BYTES: u64 = 1 << 20;
    let align = file.direct_align().unwrap_or(4096);
    let chunk_bytes = CHUNK_BYTES.min(round_up(len, align).max(u64::from(align)));
    let chunk = AlignedBuf::zeroed(usize::try_from(chunk_bytes).expect("at most 1 MiB"));
    let mut done = 0;
    while done < len {
        let n = (len - done).min(chunk.len() as u64);
        file.write_at(
            &chunk[..usize::try_from(n).expect("chunk fits usize")],
            offset + done,
        )?;
        done += n;
    }
    assert_eq!(done, len);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn round_up_examples() {
        assert_eq!(round_up(0, 512), 0);
        assert_eq!(round_up(1, 512), 512);
        assert_eq!(round_up(5000, 4096), 8192);
        assert_eq!(round_up(8192, 4096), 8192);
    }

    #[test]
    #[should_panic(expected = "not a multiple of 4096")]
    fn misaligned_direct_length_panics() {
        let buf = AlignedBuf::zeroed(4096);
        assert_direct_aligned(Path::new("x"), buf.as_ptr(), 512, 0, 4096);
    }

    #[test]
    #[should_panic(expected = "offset 512 not 4096-aligned")]
    fn misaligned_direct_offset_panics() {
        let buf = AlignedBuf::zeroed(4096);
        assert_direct_aligned(Path::new("x"), buf.as_ptr(), 4096, 512, 4096);
    }

    #[test]
    fn parent_of_bare_name_is_dot() {
        assert_eq!(parent_dir(Path::new("log")), PathBuf::from("."));
        assert_eq!(parent_dir(Path::new("/a/b")), PathBuf::from("/a"));
    }
}
