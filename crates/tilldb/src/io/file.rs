//! [`FileStorage`]: the real file system behind the [`Storage`] seam.
//!
//! What differs per operating system (how a file is opened for a flush method, positional
//! reads and writes, flushes, the directory flush, a durable rename, locks, device facts) is
//! in the platform module, `io/os/` (`linux/` or `windows/`); this file is the same
//! everywhere.

use super::{DeviceFacts, Storage, StorageFile, os};
use crate::FlushMethod;
use crate::error::{Error, IoOp, Result};
use std::path::Path;

/// How a file is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Reading only (read-only storage).
    Read,
    /// Reading and writing an existing file.
    ReadWrite,
    /// A new file, refused when one exists.
    CreateNew,
}

/// Files on the operating system's file systems.
#[derive(Debug, Default, Clone, Copy)]
pub struct FileStorage {
    /// Opens files read-only and refuses every call that would change the disk (with a
    /// read-only file system error naming the path): what the read-only tools (`till stats`,
    /// `dump-log`, `check`) use, so they work on read-only media and cannot change a byte.
    read_only: bool,
}

impl FileStorage {
    /// The real file system.
    #[must_use]
    pub fn new() -> Self {
        FileStorage { read_only: false }
    }

    /// The real file system, read-only: files open for reading only; create, rename, remove,
    /// directory creation and flushes fail as on a read-only file system. Only a shared
    /// [`Storage::lock`] is allowed (it may make the empty lock file on writable media).
    #[must_use]
    pub fn read_only() -> Self {
        FileStorage { read_only: true }
    }

    /// A read-only file system error naming `path` when this storage is read-only.
    fn writable(self, op: IoOp, path: &Path) -> Result<()> {
        if self.read_only {
            Err(Error::os(op, path, os::errno::EROFS))
        } else {
            Ok(())
        }
    }
}

/// Refuses a flush method this operating system does not have, naming the file.
fn supported(method: FlushMethod, path: &Path) -> Result<()> {
    if os::supports(method) {
        Ok(())
    } else {
        Err(Error::InvalidOptions(format!(
            "{}: flush method {method} is not available on {}; `till probe` lists the ones \
             that are",
            path.display(),
            std::env::consts::OS
        )))
    }
}

impl Storage for FileStorage {
    fn create(&self, path: &Path, method: FlushMethod) -> Result<Box<dyn StorageFile>> {
        self.writable(IoOp::Create, path)?;
        supported(method, path)?;
        os::open(path, method, Access::CreateNew, IoOp::Create)
    }

    fn open(&self, path: &Path, method: FlushMethod) -> Result<Box<dyn StorageFile>> {
        supported(method, path)?;
        let access = if self.read_only {
            Access::Read
        } else {
            Access::ReadWrite
        };
        os::open(path, method, access, IoOp::Open)
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
        os::rename(source, target).map_err(|e| Error::Io {
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
        // A file is "not a directory" on every platform (Linux says ENOTDIR; Windows says
        // ERROR_DIRECTORY, and Wine ERROR_INVALID_NAME): the code the callers look for.
        if path.is_file() {
            return Err(Error::os(IoOp::ListDir, path, super::errno::ENOTDIR));
        }
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
        os::flush_dir(path)
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
        os::lock_file(path, mode)
    }

    fn try_lock(
        &self,
        path: &Path,
        mode: super::LockMode,
    ) -> Result<Option<Box<dyn super::HeldLock>>> {
        if mode == super::LockMode::Exclusive {
            self.writable(IoOp::Lock, path)?;
        }
        os::try_lock_file(path, mode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::AlignedBuf;

    #[test]
    fn write_read_round_trip_for_every_method() {
        let dir = tempfile::tempdir().expect("tempdir");
        for method in FlushMethod::ALL.into_iter().filter(|m| os::supports(*m)) {
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
    fn a_method_this_platform_lacks_is_refused_at_open_naming_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let lacking: Vec<_> = FlushMethod::ALL
            .into_iter()
            .filter(|m| !os::supports(*m))
            .collect();
        // Linux and Windows lack the barrier, macOS the write-through methods.
        assert!(!lacking.is_empty());
        for method in lacking {
            let path = dir.path().join(method.name());
            let err = FileStorage::new()
                .create(&path, method)
                .expect_err("refused");
            let text = err.to_string();
            assert!(text.contains(&path.display().to_string()), "{text}");
            assert!(text.contains(method.name()), "{text}");
            assert!(!path.exists(), "a refused create made {}", path.display());
        }
    }

    #[test]
    fn create_refuses_existing_file_and_names_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        FileStorage::new()
            .create(&path, FlushMethod::Fsync)
            .expect("create");
        let err = FileStorage::new()
            .create(&path, FlushMethod::Fsync)
            .expect_err("exists");
        let text = err.to_string();
        assert!(text.starts_with("create "), "{text}");
        assert!(text.contains(&*path.to_string_lossy()), "{text}");
    }

    #[test]
    fn read_only_storage_refuses_changes_naming_the_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let err = FileStorage::read_only()
            .create(&path, FlushMethod::Fsync)
            .expect_err("read-only");
        assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");
        assert!(!path.exists());
    }
}
