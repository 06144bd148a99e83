//! [`FileStorage`]: the real file system behind the [`Storage`] seam.

use super::{DeviceFacts, Storage, StorageFile, assert_direct_aligned, flush};
use crate::FlushMethod;
use crate::error::{Error, IoOp, Result};
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, Mode, OFlags, StatxFlags};
use rustix::io::Errno;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Direct-I/O alignment assumed when the kernel does not report one (`STATX_DIOALIGN` is
/// Linux 6.1+). 4096 works on every device seen; 512 would fail on 4K-native disks.
pub const DIRECT_ALIGN_FALLBACK: u32 = 4096;

/// Files on the operating system's file systems.
#[derive(Debug, Default, Clone, Copy)]
pub struct FileStorage {
    /// Opens files read-only and refuses every call that would change the disk (with
    /// `EROFS`, naming the path): what the read-only tools (`till stats`, `dump-log`) use, so
    /// they work on read-only media and cannot change a byte.
    read_only: bool,
}

impl FileStorage {
    /// The real file system.
    #[must_use]
    pub fn new() -> Self {
        FileStorage { read_only: false }
    }

    /// The real file system, read-only: files open `O_RDONLY`; create, rename, remove,
    /// directory creation and flushes fail with `EROFS`. Only a shared [`Storage::lock`] is
    /// allowed (it may make the empty lock file on writable media).
    #[must_use]
    pub fn read_only() -> Self {
        FileStorage { read_only: true }
    }

    /// `Err(EROFS)` naming `path` when this storage is read-only.
    fn writable(self, op: IoOp, path: &Path) -> Result<()> {
        if self.read_only {
            Err(Error::io(op, path, Errno::ROFS))
        } else {
            Ok(())
        }
    }

    fn open_with(
        self,
        path: &Path,
        method: FlushMethod,
        extra: OFlags,
        op: IoOp,
    ) -> Result<Box<dyn StorageFile>> {
        let access = if self.read_only {
            OFlags::RDONLY
        } else {
            OFlags::RDWR
        };
        Ok(Box::new(Self::open_os(path, method, access | extra, op)?))
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
    assert!(align as usize <= super::AlignedBuf::ALIGN.max(65536));
    Ok(align)
}

impl Storage for FileStorage {
    fn create(&self, path: &Path, method: FlushMethod) -> Result<Box<dyn StorageFile>> {
        self.writable(IoOp::Create, path)?;
        self.open_with(path, method, OFlags::CREATE | OFlags::EXCL, IoOp::Create)
    }

    fn open(&self, path: &Path, method: FlushMethod) -> Result<Box<dyn StorageFile>> {
        self.open_with(path, method, OFlags::empty(), IoOp::Open)
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        path.try_exists().map_err(|source| Error::Io {
            op: IoOp::Stat,
            path: path.into(),
            source,
        })
    }

    fn rename(&self, source: &Path, target: &Path) -> Result<()> {
        self.writable(IoOp::Rename, source)?;
        std::fs::rename(source, target).map_err(|e| Error::Io {
            op: IoOp::Rename,
            path: source.into(),
            source: e,
        })
    }

    fn remove(&self, path: &Path) -> Result<()> {
        self.writable(IoOp::Remove, path)?;
        std::fs::remove_file(path).map_err(|source| Error::Io {
            op: IoOp::Remove,
            path: path.into(),
            source,
        })
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        self.writable(IoOp::CreateDir, path)?;
        std::fs::create_dir_all(path).map_err(|source| Error::Io {
            op: IoOp::CreateDir,
            path: path.into(),
            source,
        })
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<String>> {
        let err = |source| Error::Io {
            op: IoOp::ListDir,
            path: path.into(),
            source,
        };
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path).map_err(err)? {
            names.push(
                entry
                    .map_err(err)?
                    .file_name()
                    .to_string_lossy()
                    .into_owned(),
            );
        }
        names.sort();
        Ok(names)
    }

    fn flush_dir(&self, path: &Path) -> Result<()> {
        self.writable(IoOp::FlushDir, path)?;
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::io(IoOp::FlushDir, path, e))?;
        rustix::fs::fsync(&fd).map_err(|e| Error::io(IoOp::FlushDir, path, e))
    }

    fn device_facts(&self, dir: &Path) -> Result<DeviceFacts> {
        if self.read_only {
            DeviceFacts::for_dir_read_only(dir)
        } else {
            DeviceFacts::for_dir(dir)
        }
    }

    fn lock(&self, path: &Path, mode: super::LockMode) -> Result<Box<dyn super::HeldLock>> {
        if mode == super::LockMode::Exclusive {
            self.writable(IoOp::Lock, path)?;
        }
        super::lock::lock_file(path, mode)
    }
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
        let mut done = 0;
        while done < buf.len() {
            match rustix::io::pread(&self.fd, &mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(Errno::INTR) => {}
                Err(e) => return Err(Error::io(IoOp::Read, &self.path, e)),
            }
            // A direct read that came back short is at end of file; asking again for the
            // unaligned rest would be refused.
            if self.direct_align.is_some() && done < buf.len() {
                break;
            }
        }
        assert!(done <= buf.len());
        Ok(done)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.check_aligned(buf.as_ptr(), buf.len(), offset);
        let mut done = 0;
        while done < buf.len() {
            match rustix::io::pwrite(&self.fd, &buf[done..], offset + done as u64) {
                Ok(0) => return Err(Error::io(IoOp::Write, &self.path, Errno::NOSPC)),
                Ok(n) => done += n,
                Err(Errno::INTR) => {}
                Err(e) => return Err(Error::io(IoOp::Write, &self.path, e)),
            }
        }
        assert_eq!(done, buf.len());
        Ok(())
    }

    fn write_atomic_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        if self.direct_align.is_none() {
            // RWF_ATOMIC is for direct I/O only; a buffered write would not be atomic anyway.
            return Err(Error::io(IoOp::Write, &self.path, Errno::OPNOTSUPP));
        }
        self.check_aligned(buf.as_ptr(), buf.len(), offset);
        let flags = rustix::io::ReadWriteFlags::from_bits_retain(super::probe::RWF_ATOMIC);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::AlignedBuf;

    /// The status flags the kernel holds for a file opened with `method` (`F_GETFL`).
    fn kernel_flags(method: FlushMethod) -> OFlags {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let file = FileStorage::open_os(&path, method, OFlags::RDWR | OFlags::CREATE, IoOp::Create)
            .expect("create");
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

    #[test]
    fn write_read_round_trip_for_every_method() {
        let dir = tempfile::tempdir().expect("tempdir");
        for method in FlushMethod::DURABLE
            .into_iter()
            .chain([FlushMethod::NoSync])
        {
            let path = dir.path().join(method.name());
            let file = FileStorage::new().create(&path, method).expect("create");
            let mut buf = AlignedBuf::zeroed(8192);
            buf[..5].copy_from_slice(b"hello");
            buf[4096..4101].copy_from_slice(b"world");
            file.write_at(&buf, 4096).expect("write");
            file.flush().expect("flush");
            assert_eq!(file.len().expect("len"), 12288);
            let mut back = AlignedBuf::zeroed(8192);
            assert_eq!(file.read_at(&mut back, 4096).expect("read"), 8192);
            assert_eq!(&back[..], &buf[..]);
        }
    }

    #[test]
    fn create_refuses_existing_file_and_names_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        FileStorage::new()
            .create(&path, FlushMethod::Fdatasync)
            .expect("create");
        let err = FileStorage::new()
            .create(&path, FlushMethod::Fdatasync)
            .expect_err("exists");
        let text = err.to_string();
        assert!(text.starts_with("create "), "{text}");
        assert!(text.contains(&*path.to_string_lossy()), "{text}");
    }
}
