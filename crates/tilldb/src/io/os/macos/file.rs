//! Files on macOS: positional I/O with `pread`/`pwrite`, `F_NOCACHE` for the direct method,
//! `fcntl(F_FULLFSYNC)` for every durable flush and `fcntl(F_BARRIERFSYNC)` for the barrier
//! method (the table is in `mod.rs`), `F_FULLFSYNC` of a directory.

use super::super::unix;
use crate::FlushMethod;
use crate::error::{Error, IoOp, Result};
use crate::io::file::Access;
use crate::io::{DIRECT_ALIGN_FALLBACK, StorageFile, assert_direct_aligned};
use rustix::fd::OwnedFd;
use rustix::fs::{Mode, OFlags};
use std::path::{Path, PathBuf};

/// Write-through methods are refused: `O_DSYNC` on macOS does not flush the drive cache.
pub(crate) fn supports(method: FlushMethod) -> bool {
    !method.is_write_through()
}

/// `fcntl(F_FULLFSYNC)`: data and metadata on the device, its cache flushed.
fn full_fsync(fd: &impl rustix::fd::AsRawFd) -> std::io::Result<()> {
    fcntl_flush(fd, libc::F_FULLFSYNC)
}

/// `fcntl(command)` for one of the flush commands (`F_FULLFSYNC`, `F_BARRIERFSYNC`).
fn fcntl_flush(fd: &impl rustix::fd::AsRawFd, command: libc::c_int) -> std::io::Result<()> {
    // SAFETY: a plain fcntl on an open descriptor, no pointers.
    let rc = unsafe { libc::fcntl(fd.as_raw_fd(), command) };
    if rc == -1 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
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

/// Swapping two names in one step: not implemented on macOS yet (Linux has
/// `renameat2(RENAME_EXCHANGE)`), so it is `Unsupported`.
pub(crate) fn exchange(_a: &Path, _b: &Path) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "swapping two directories in one step is implemented on Linux only",
    ))
}

/// `rename(2)`; its durability comes from the directory flush that follows.
pub(crate) fn rename(source: &Path, target: &Path) -> std::io::Result<()> {
    std::fs::rename(source, target)
}

/// `F_FULLFSYNC` of the directory: creates, renames and removes in it become durable.
pub(crate) fn flush_dir(path: &Path) -> Result<()> {
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| Error::io(IoOp::FlushDir, path, e))?;
    full_fsync(&fd).map_err(|e| Error::io(IoOp::FlushDir, path, e))
}

fn open_os(path: &Path, method: FlushMethod, extra: OFlags, op: IoOp) -> Result<OsFile> {
    // `extra` holds the access mode (`RDONLY` is 0) and any `CREATE`/`EXCL`.
    let fd = rustix::fs::open(
        path,
        OFlags::CLOEXEC | extra,
        Mode::from_bits_truncate(0o644),
    )
    .map_err(|e| Error::io(op, path, e))?;
    if method.is_direct() {
        // SAFETY: a plain fcntl on the descriptor just opened, no pointers.
        let rc = unsafe { libc::fcntl(rustix::fd::AsRawFd::as_raw_fd(&fd), libc::F_NOCACHE, 1) };
        if rc == -1 {
            return Err(Error::io(op, path, std::io::Error::last_os_error()));
        }
    }
    Ok(OsFile {
        fd,
        path: path.to_path_buf(),
        method,
        // Aligned like O_DIRECT elsewhere, so the same buffers serve every platform.
        direct_align: method.is_direct().then_some(DIRECT_ALIGN_FALLBACK),
    })
}

/// One open OS file.
#[derive(Debug)]
struct OsFile {
    fd: OwnedFd,
    path: PathBuf,
    method: FlushMethod,
    direct_align: Option<u32>,
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

    fn set_len(&self, len: u64) -> Result<()> {
        rustix::fs::ftruncate(&self.fd, len).map_err(|e| Error::io(IoOp::SetLen, &self.path, e))
    }

    fn flush(&self) -> Result<()> {
        match self.method {
            FlushMethod::NoSync => Ok(()),
            // Ordered, not flushed from the drive cache (`FlushMethod::BarrierFsync`).
            FlushMethod::BarrierFsync => fcntl_flush(&self.fd, libc::F_BARRIERFSYNC)
                .map_err(|e| Error::io(IoOp::Flush, &self.path, e)),
            _ => full_fsync(&self.fd).map_err(|e| Error::io(IoOp::Flush, &self.path, e)),
        }
    }
}
