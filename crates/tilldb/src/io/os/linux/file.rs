//! Files on Linux: one open flag set and one flush per [`FlushMethod`] (`flush.rs`),
//! positional I/O with `pread`/`pwrite`, `RWF_ATOMIC` writes, `fsync` of a directory.

use super::super::unix;
use super::flush;
use crate::FlushMethod;
use crate::error::{Error, IoOp, Result};
use crate::io::file::Access;
use crate::io::{DIRECT_ALIGN_FALLBACK, StorageFile, assert_direct_aligned};
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, Mode, OFlags, StatxFlags};
use rustix::io::Errno;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Every method but `BarrierFsync` (macOS's `F_BARRIERFSYNC`) is available on Linux.
pub(crate) fn supports(method: FlushMethod) -> bool {
    method != FlushMethod::BarrierFsync
}

/// Opens `path` for `method` with `access`.
pub(crate) fn open(
    path: &Path,
    method: FlushMethod,
    access: Access,
    op: IoOp,
) -> Result<Box<dyn StorageFile>> {
    let flags = match access {
        Access::Read => OFlags::RDONLY,
        Access::ReadWrite => OFlags::RDWR,
        Access::CreateNew => OFlags::RDWR | OFlags::CREATE | OFlags::EXCL,
    };
    Ok(Box::new(open_os(path, method, flags, op)?))
}

/// `rename(2)`; its durability comes from the directory flush that follows.
pub(crate) fn rename(source: &Path, target: &Path) -> std::io::Result<()> {
    std::fs::rename(source, target)
}

/// `renameat2(RENAME_EXCHANGE)`: `a` and `b` (both existing) swap names in one step, so no
/// crash leaves either name missing; durable after flushing their directories.
pub(crate) fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        a,
        rustix::fs::CWD,
        b,
        rustix::fs::RenameFlags::EXCHANGE,
    )
    .map_err(std::io::Error::from)
}

/// `fsync` of the directory: creates, renames and removes in it become durable.
pub(crate) fn flush_dir(path: &Path) -> Result<()> {
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| Error::io(IoOp::FlushDir, path, e))?;
    rustix::fs::fsync(&fd).map_err(|e| Error::io(IoOp::FlushDir, path, e))
}

fn open_os(path: &Path, method: FlushMethod, extra: OFlags, op: IoOp) -> Result<OsFile> {
    // `extra` holds the access mode (`RDONLY` is 0) and any `CREATE`/`EXCL`.
    let flags = OFlags::CLOEXEC | flush::open_flags(method) | extra;
    let fd = match rustix::fs::open(path, flags, Mode::from_bits_truncate(0o644)) {
        Ok(fd) => fd,
        Err(Errno::INVAL) if method.is_direct() => {
            return Err(Error::InvalidOptions(format!(
                "{}: the file system refuses O_DIRECT, so flush method {method} cannot be \
                 used here; choose fdatasync or dsync",
                path.display()
            )));
        }
        Err(e) => return Err(Error::io(op, path, e)),
    };
    let direct_align = if method.is_direct() {
        Some(direct_align_of(&fd, path)?)
    } else {
        None
    };
    Ok(OsFile {
        fd,
        path: path.to_path_buf(),
        method,
        direct_align,
        metadata_dirty: AtomicBool::new(false),
    })
}

/// The direct-I/O alignment the kernel reports for an open file, or the fallback.
fn direct_align_of(fd: &OwnedFd, path: &Path) -> Result<u32> {
    let stx = rustix::fs::statx(fd, "", AtFlags::EMPTY_PATH, StatxFlags::DIOALIGN)
        .map_err(|e| Error::io(IoOp::Stat, path, e))?;
    let reported = stx.stx_mask & StatxFlags::DIOALIGN.bits() != 0;
    let align = if reported {
        stx.stx_dio_offset_align.max(stx.stx_dio_mem_align)
    } else {
        0
    };
    let align = if align == 0 {
        DIRECT_ALIGN_FALLBACK
    } else {
        align
    };
    assert!(
        align.is_power_of_two(),
        "kernel reported DIO alignment {align} for {}",
        path.display()
    );
    assert!(align as usize <= crate::io::AlignedBuf::ALIGN.max(65536));
    Ok(align)
}

/// One open OS file.
#[derive(Debug)]
struct OsFile {
    fd: OwnedFd,
    path: PathBuf,
    method: FlushMethod,
    direct_align: Option<u32>,
    /// Set by `set_len`, cleared by `flush`: write-through files then need an `fdatasync`.
    metadata_dirty: AtomicBool,
}

impl OsFile {
    fn check_aligned(&self, ptr: *const u8, len: usize, offset: u64) {
        if let Some(align) = self.direct_align {
            assert_direct_aligned(&self.path, ptr, len, offset, align);
        }
    }
}

impl StorageFile for OsFile {
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
        let stat = rustix::fs::fstat(&self.fd).map_err(|e| Error::io(IoOp::Stat, &self.path, e))?;
        Ok(u64::try_from(stat.st_size).expect("file sizes are non-negative"))
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.check_aligned(buf.as_ptr(), buf.len(), offset);
        unix::io::read_full(
            &self.fd,
            &self.path,
            buf,
            offset,
            self.direct_align.is_some(),
        )
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.check_aligned(buf.as_ptr(), buf.len(), offset);
        unix::io::write_full(&self.fd, &self.path, buf, offset)
    }

    /// Zeros written as everywhere, then, for a buffered file, written back and dropped from
    /// the page cache. Why: the kernel caches 1 MiB writes of zeros in large folios, and ext4
    /// (6.16 and later) walks every block of a folio on each write into it and again when
    /// writing it back, so each later 4 KiB log write into a preallocated segment paid for the
    /// whole folio: about 4 us of a 12 us commit at one thread, measured (docs/benchmarks-journal.md,
    /// "The page cache after preallocation"). Dropped, the range comes back as small folios
    /// made by the small writes themselves. Durable still only after the next flush: the
    /// write-back neither flushes the device's cache nor the file's metadata.
    fn allocate_zeroed(&self, offset: u64, len: u64) -> Result<()> {
        crate::io::allocate_by_writing_zeros(self, offset, len)?;
        if self.direct_align.is_none() && len >= CACHE_DROP_MIN_BYTES {
            self.write_back_and_drop(offset, len)?;
        }
        Ok(())
    }

    fn write_atomic_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        if self.direct_align.is_none() {
            // RWF_ATOMIC is for direct I/O only; a buffered write would not be atomic anyway.
            return Err(Error::io(IoOp::Write, &self.path, Errno::OPNOTSUPP));
        }
        self.check_aligned(buf.as_ptr(), buf.len(), offset);
        let flags = rustix::io::ReadWriteFlags::from_bits_retain(super::facts::RWF_ATOMIC);
        loop {
            match rustix::io::pwritev2(&self.fd, &[std::io::IoSlice::new(buf)], offset, flags) {
                Ok(n) => {
                    // All or nothing: a short atomic write would be a kernel bug.
                    assert_eq!(n, buf.len(), "short RWF_ATOMIC write");
                    return Ok(());
                }
                Err(Errno::INTR) => {}
                Err(e) => return Err(Error::io(IoOp::Write, &self.path, e)),
            }
        }
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.metadata_dirty.store(true, Ordering::Release);
        rustix::fs::ftruncate(&self.fd, len).map_err(|e| Error::io(IoOp::SetLen, &self.path, e))
    }

    fn flush(&self) -> Result<()> {
        let dirty = self.metadata_dirty.swap(false, Ordering::AcqRel);
        let result = flush::flush(&self.fd, self.method, dirty);
        if result.is_err() {
            // Never clear the flag on failure: the caller must not believe metadata is durable.
            self.metadata_dirty.store(true, Ordering::Release);
        }
        result.map_err(|e| Error::io(IoOp::Flush, &self.path, e))
    }
}

/// Allocations from this size up leave the page cache once written (`allocate_zeroed`):
/// smaller ones make small folios anyway.
const CACHE_DROP_MIN_BYTES: u64 = 256 << 10;

impl OsFile {
    /// Writes `len` bytes at `offset` back to the device and waits for it
    /// (`sync_file_range`: no device cache flush, no metadata), then asks the kernel to drop
    /// them from the page cache (`POSIX_FADV_DONTNEED`, which drops only clean pages).
    fn write_back_and_drop(&self, offset: u64, len: u64) -> Result<()> {
        use rustix::fd::AsRawFd;
        let (Ok(start), Ok(count)) = (i64::try_from(offset), i64::try_from(len)) else {
            return Ok(()); // past what the kernel takes: left cached, which is only slower
        };
        let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
            | libc::SYNC_FILE_RANGE_WRITE
            | libc::SYNC_FILE_RANGE_WAIT_AFTER;
        // SAFETY: sync_file_range reads no memory of ours; the descriptor is open (owned by
        // `self.fd`) for the duration of the call.
        let rc = unsafe { libc::sync_file_range(self.fd.as_raw_fd(), start, count, flags) };
        if rc != 0 {
            // The zeros did not reach the device: the same failure the next flush would meet.
            return Err(Error::io(
                IoOp::Write,
                &self.path,
                Errno::from_io_error(&std::io::Error::last_os_error()).unwrap_or(Errno::IO),
            ));
        }
        // Advice only: a refusal leaves the range cached, correct and only slower.
        let _ = rustix::fs::fadvise(
            &self.fd,
            offset,
            std::num::NonZeroU64::new(len),
            rustix::fs::Advice::DontNeed,
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The status flags the kernel holds for a file opened with `method` (`F_GETFL`).
    fn kernel_flags(method: FlushMethod) -> OFlags {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let file =
            open_os(&path, method, OFlags::RDWR | OFlags::CREATE, IoOp::Create).expect("create");
        rustix::fs::fcntl_getfl(&file.fd).expect("F_GETFL")
    }

    /// The bit `O_SYNC` has beyond `O_DSYNC` (`__O_SYNC`): set means metadata is synced on every
    /// write, the trap behind rustix's `OFlags::DSYNC`.
    const SYNC_ONLY_BIT: OFlags = OFlags::from_bits_retain((libc::O_SYNC & !libc::O_DSYNC) as u32);

    #[test]
    fn open_flags_seen_by_kernel_per_method() {
        for method in FlushMethod::DURABLE
            .into_iter()
            .chain([FlushMethod::NoSync])
        {
            let flags = kernel_flags(method);
            assert_eq!(
                flags.contains(flush::O_DSYNC),
                method.is_write_through(),
                "{method}: {flags:?}"
            );
            assert_eq!(
                flags.contains(flush::O_DIRECT),
                method.is_direct(),
                "{method}: {flags:?}"
            );
            assert!(
                !flags.contains(SYNC_ONLY_BIT),
                "{method} opened with O_SYNC: {flags:?}"
            );
        }
    }

    #[test]
    fn rustix_dsync_is_o_sync_trap_still_holds() {
        // If this starts failing, rustix fixed its DSYNC and the raw-bit workaround can go.
        assert!(OFlags::DSYNC.contains(SYNC_ONLY_BIT));
    }

    /// Whether the page at `offset` of `file` is in the page cache: a read that may not wait
    /// for the device (`RWF_NOWAIT`) succeeds only then. `None` where the file system does
    /// not take such reads.
    fn cached(file: &OsFile, offset: u64) -> Option<bool> {
        let mut buf = [0u8; 4096];
        let read = rustix::io::preadv2(
            &file.fd,
            &mut [std::io::IoSliceMut::new(&mut buf)],
            offset,
            rustix::io::ReadWriteFlags::NOWAIT,
        );
        match read {
            Ok(n) => {
                assert_eq!(n, buf.len(), "a short read inside the file");
                Some(true)
            }
            Err(Errno::AGAIN) => Some(false),
            Err(Errno::OPNOTSUPP) => None,
            Err(e) => panic!("preadv2(RWF_NOWAIT) at {offset}: {e}"),
        }
    }

    #[test]
    fn a_large_preallocation_leaves_the_page_cache_and_reads_as_zeros() {
        // In the workspace's target directory: on the repository's file system, not a tmpfs
        // /tmp, which keeps every page in memory by design.
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tmp");
        std::fs::create_dir_all(&base).expect("target/tmp");
        let dir = tempfile::tempdir_in(&base).expect("tempdir");
        let path = dir.path().join("segment");
        let file = open_os(
            &path,
            FlushMethod::Fdatasync,
            OFlags::RDWR | OFlags::CREATE,
            IoOp::Create,
        )
        .expect("create");
        let small = CACHE_DROP_MIN_BYTES / 2;
        file.allocate_zeroed(0, small).expect("a small allocation");
        // Where the check cannot run it says so, and fails under CI (which runs on ext4).
        let cannot_run = |why: &str| {
            assert!(
                std::env::var_os("CI").is_none(),
                "cannot run under CI: {why}"
            );
            eprintln!("SKIPPED a_large_preallocation_leaves_the_page_cache: {why}");
        };
        let Some(small_cached) = cached(&file, 0) else {
            return cannot_run("this file system refuses RWF_NOWAIT reads");
        };
        if rustix::fs::fstatfs(&file.fd).expect("fstatfs").f_type == libc::TMPFS_MAGIC {
            return cannot_run("target/tmp is on a tmpfs, which keeps every page cached");
        }
        assert!(
            small_cached,
            "an allocation below {CACHE_DROP_MIN_BYTES} B stays cached"
        );
        let len = 4u64 << 20;
        file.allocate_zeroed(small, len).expect("allocate 4 MiB");
        for offset in [small, small + (1 << 20), small + len - 4096] {
            assert_eq!(
                cached(&file, offset),
                Some(false),
                "page at {offset} still cached after a {len} B preallocation"
            );
        }
        let mut back = vec![0xFFu8; usize::try_from(len).expect("4 MiB")];
        assert_eq!(file.read_at(&mut back, small).expect("read"), back.len());
        assert!(
            back.iter().all(|&b| b == 0),
            "the preallocated range reads as zeros"
        );
        assert_eq!(file.len().expect("len"), small + len);
    }
}
