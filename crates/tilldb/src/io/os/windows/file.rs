//! Files on Windows: the open flags and the flush of each [`FlushMethod`] (table in `mod.rs`),
//! positional I/O with `ReadFile`/`WriteFile` at an offset (std's `seek_read`/`seek_write`),
//! a durable rename (`MOVEFILE_WRITE_THROUGH`), and the directory flush NTFS allows.

use crate::FlushMethod;
use crate::error::{Error, IoOp, Result};
use crate::io::file::Access;
use crate::io::{DIRECT_ALIGN_FALLBACK, StorageFile, assert_direct_aligned};
use std::fs::{File, OpenOptions};
use std::os::windows::ffi::OsStrExt;
use std::os::windows::fs::{FileExt, OpenOptionsExt};
use std::os::windows::io::AsRawHandle;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use windows_sys::Win32::Storage::FileSystem::{
    FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_NO_BUFFERING, FILE_FLAG_WRITE_THROUGH, FILE_SHARE_DELETE,
    FILE_SHARE_READ, FILE_SHARE_WRITE, FILE_STORAGE_INFO, FileStorageInfo,
    GetFileInformationByHandleEx, MOVEFILE_REPLACE_EXISTING, MOVEFILE_WRITE_THROUGH, MoveFileExW,
};

/// `ERROR_INVALID_FUNCTION`: what a file system without directory flushes answers.
const ERROR_INVALID_FUNCTION: i32 = 1;
/// `ERROR_ACCESS_DENIED`.
const ERROR_ACCESS_DENIED: i32 = 5;

/// Every method but `BarrierFsync` (macOS only) is available on Windows (`fdatasync`
/// flushes as `fsync` does).
pub(crate) fn supports(method: FlushMethod) -> bool {
    method != FlushMethod::BarrierFsync
}

/// The `CreateFileW` flags of `method`.
fn open_flags(method: FlushMethod) -> u32 {
    match method {
        FlushMethod::Fsync
        | FlushMethod::Fdatasync
        | FlushMethod::NoSync
        | FlushMethod::BarrierFsync => 0,
        FlushMethod::Dsync => FILE_FLAG_WRITE_THROUGH,
        FlushMethod::Direct => FILE_FLAG_NO_BUFFERING,
        FlushMethod::DirectDsync => FILE_FLAG_WRITE_THROUGH | FILE_FLAG_NO_BUFFERING,
    }
}

/// Opens `path` for `method` with `access`. Files are shared for reading, writing and
/// deleting, so that a log segment can be renamed or removed while another handle is open, as
/// on Linux.
pub(crate) fn open(
    path: &Path,
    method: FlushMethod,
    access: Access,
    op: IoOp,
) -> Result<Box<dyn StorageFile>> {
    let mut options = OpenOptions::new();
    options
        .read(true)
        .write(access != Access::Read)
        .create_new(access == Access::CreateNew)
        .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
        .custom_flags(open_flags(method));
    let file = options.open(path).map_err(|source| Error::Io {
        op,
        path: path.to_path_buf(),
        source,
    })?;
    let direct_align = method.is_direct().then(|| direct_align_of(&file));
    Ok(Box::new(OsFile {
        file,
        path: path.to_path_buf(),
        method,
        direct_align,
        metadata_dirty: AtomicBool::new(false),
    }))
}

/// The alignment `FILE_FLAG_NO_BUFFERING` needs: the larger of the logical sector and the
/// physical sector for performance (`FileStorageInfo`), else the fallback.
fn direct_align_of(file: &File) -> u32 {
    // SAFETY: FILE_STORAGE_INFO is plain data; zero is a valid bit pattern.
    let mut info: FILE_STORAGE_INFO = unsafe { std::mem::zeroed() };
    // SAFETY: the handle is open for the call, and the buffer is the struct's size.
    let ok = unsafe {
        GetFileInformationByHandleEx(
            file.as_raw_handle(),
            FileStorageInfo,
            std::ptr::from_mut(&mut info).cast(),
            u32::try_from(std::mem::size_of::<FILE_STORAGE_INFO>()).expect("small"),
        )
    };
    let reported = if ok == 0 {
        0
    } else {
        info.LogicalBytesPerSector
            .max(info.PhysicalBytesPerSectorForPerformance)
    };
    if reported.is_power_of_two() && reported <= 65536 {
        reported.max(512)
    } else {
        DIRECT_ALIGN_FALLBACK
    }
}

fn wide(path: &Path) -> Vec<u16> {
    path.as_os_str().encode_wide().chain(Some(0)).collect()
}

/// Swapping two names in one step: not implemented on Windows yet (Linux has
/// `renameat2(RENAME_EXCHANGE)`), so it is `Unsupported`.
pub(crate) fn exchange(_a: &Path, _b: &Path) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "swapping two directories in one step is implemented on Linux only",
    ))
}

/// `MoveFileExW` with `MOVEFILE_WRITE_THROUGH`: it returns once the rename is on the disk.
pub(crate) fn rename(source: &Path, target: &Path) -> std::io::Result<()> {
    let (from, to) = (wide(source), wide(target));
    // SAFETY: both are NUL-terminated wide strings that live across the call.
    let ok = unsafe {
        MoveFileExW(
            from.as_ptr(),
            to.as_ptr(),
            MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH,
        )
    };
    if ok == 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `FlushFileBuffers` on the directory, where the file system allows it. NTFS journals its
/// directory changes and refuses the call on a directory handle without the rights it wants
/// (`ERROR_ACCESS_DENIED`) or as unsupported (`ERROR_INVALID_FUNCTION`); then creates are made
/// durable by the new file's own flush and renames by `MOVEFILE_WRITE_THROUGH`.
pub(crate) fn flush_dir(path: &Path) -> Result<()> {
    let err = |source| Error::Io {
        op: IoOp::FlushDir,
        path: path.to_path_buf(),
        source,
    };
    let dir = OpenOptions::new()
        .read(true)
        .write(true)
        .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS)
        .open(path);
    let result = dir.and_then(|d| d.sync_all());
    match result {
        Ok(()) => Ok(()),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(ERROR_ACCESS_DENIED | ERROR_INVALID_FUNCTION)
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(err(e)),
    }
}

/// One open Windows file.
#[derive(Debug)]
struct OsFile {
    file: File,
    path: PathBuf,
    method: FlushMethod,
    direct_align: Option<u32>,
    /// Set by `set_len`, cleared by `flush`: write-through files then need a flush too.
    metadata_dirty: AtomicBool,
}

impl OsFile {
    fn check_aligned(&self, ptr: *const u8, len: usize, offset: u64) {
        if let Some(align) = self.direct_align {
            assert_direct_aligned(&self.path, ptr, len, offset, align);
        }
    }

    fn error(&self, op: IoOp, source: std::io::Error) -> Error {
        Error::Io {
            op,
            path: self.path.clone(),
            source,
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
        self.file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| self.error(IoOp::Stat, e))
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.check_aligned(buf.as_ptr(), buf.len(), offset);
        let mut done = 0;
        while done < buf.len() {
            match self.file.seek_read(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                // Reading at or past the end of file.
                Err(e) if e.raw_os_error() == Some(38) => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.error(IoOp::Read, e)),
            }
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
            match self.file.seek_write(&buf[done..], offset + done as u64) {
                Ok(0) => {
                    return Err(Error::os(IoOp::Write, &self.path, super::errno::ENOSPC));
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.error(IoOp::Write, e)),
            }
        }
        assert_eq!(done, buf.len());
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.metadata_dirty.store(true, Ordering::Release);
        self.file
            .set_len(len)
            .map_err(|e| self.error(IoOp::SetLen, e))
    }

    fn flush(&self) -> Result<()> {
        let dirty = self.metadata_dirty.swap(false, Ordering::AcqRel);
        let needed = match self.method {
            FlushMethod::Fsync | FlushMethod::Fdatasync | FlushMethod::Direct => true,
            FlushMethod::Dsync | FlushMethod::DirectDsync => dirty,
            FlushMethod::NoSync => false,
            FlushMethod::BarrierFsync => unreachable!("refused at open on Windows (`supports`)"),
        };
        if !needed {
            return Ok(());
        }
        self.file.sync_all().map_err(|e| {
            // Never clear the flag on failure: the caller must not believe metadata durable.
            self.metadata_dirty.store(true, Ordering::Release);
            self.error(IoOp::Flush, e)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_method_opens_with_its_flags() {
        assert_eq!(open_flags(FlushMethod::Fsync), 0);
        assert_eq!(open_flags(FlushMethod::Dsync), FILE_FLAG_WRITE_THROUGH);
        assert_eq!(open_flags(FlushMethod::Direct), FILE_FLAG_NO_BUFFERING);
        assert_eq!(
            open_flags(FlushMethod::DirectDsync),
            FILE_FLAG_WRITE_THROUGH | FILE_FLAG_NO_BUFFERING
        );
    }

    #[test]
    fn a_rename_replaces_the_target_and_an_open_file_can_be_renamed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let file = open(&a, FlushMethod::Fsync, Access::CreateNew, IoOp::Create).expect("a");
        std::fs::write(&b, b"old").expect("b");
        rename(&a, &b).expect("rename over b while a is open");
        drop(file);
        assert!(!a.exists());
        assert_eq!(std::fs::read(&b).expect("b").len(), 0);
        flush_dir(dir.path()).expect("a directory flush");
    }
}
