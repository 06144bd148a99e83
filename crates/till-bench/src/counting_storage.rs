//! [`CountingStorage`]: real files, with the bytes written to them counted per kind of file
//! (log, data pages, doublewrite, other), so a benchmark can say where a commit's device
//! bytes go. Counts what tilldb hands the OS (`write_at`, and the zeros `allocate_zeroed`
//! writes to preallocate log segments), which is what reaches the device for files that are
//! flushed; the file system's own metadata writes are not included.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tilldb::io::{Call, HookedStorage, Hooks, Storage};

/// Bytes written per kind of file.
#[derive(Debug, Default)]
pub struct WriteCounts {
    pub log: AtomicU64,
    pub data: AtomicU64,
    pub doublewrite: AtomicU64,
    pub other: AtomicU64,
}

/// A snapshot of [`WriteCounts`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    pub log: u64,
    pub data: u64,
    pub doublewrite: u64,
    pub other: u64,
}

impl Written {
    pub fn total(self) -> u64 {
        self.log + self.data + self.doublewrite + self.other
    }

    pub fn since(self, before: Written) -> Written {
        Written {
            log: self.log - before.log,
            data: self.data - before.data,
            doublewrite: self.doublewrite - before.doublewrite,
            other: self.other - before.other,
        }
    }

    pub fn add(self, more: Written) -> Written {
        Written {
            log: self.log + more.log,
            data: self.data + more.data,
            doublewrite: self.doublewrite + more.doublewrite,
            other: self.other + more.other,
        }
    }
}

impl WriteCounts {
    pub fn snapshot(&self) -> Written {
        Written {
            log: self.log.load(Ordering::Relaxed),
            data: self.data.load(Ordering::Relaxed),
            doublewrite: self.doublewrite.load(Ordering::Relaxed),
            other: self.other.load(Ordering::Relaxed),
        }
    }

    /// The counter for `path`: log segments live in `wal/`, pages in `data.tdb`, the
    /// doublewrite area in `doublewrite.tdb`.
    fn of(&self, path: &Path) -> &AtomicU64 {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let in_wal = path
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|d| d == "wal");
        if in_wal {
            &self.log
        } else if name == tilldb::internals::page::DATA_FILE_NAME {
            &self.data
        } else if name == tilldb::internals::page::DOUBLEWRITE_FILE_NAME {
            &self.doublewrite
        } else {
            &self.other
        }
    }
}

/// Storage that counts the bytes written through it: any storage, with [`WriteCounts`] as
/// its hooks (`counting(inner).hooks()` reads them).
pub type CountingStorage = HookedStorage<WriteCounts>;

/// Wraps `inner` so that the bytes written through it are counted.
pub fn counting(inner: Arc<dyn Storage>) -> CountingStorage {
    HookedStorage::new(inner, WriteCounts::default())
}

/// Counts after each write succeeded. The file's path is fixed at open; a rename (log
/// segment recycling) keeps it in the same directory, so its kind does not change.
impl Hooks for WriteCounts {
    fn after(&self, call: &Call<'_>) {
        match *call {
            Call::Write { path, len, .. } => {
                self.of(path).fetch_add(len as u64, Ordering::Relaxed);
            }
            Call::AllocateZeroed { path, len, .. } => {
                self.of(path).fetch_add(len, Ordering::Relaxed);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tilldb::FlushMethod;
    use tilldb::io::FileStorage;

    #[test]
    fn counts_bytes_per_kind_of_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let storage = counting(Arc::new(FileStorage::new()));
        let wal = dir.path().join("wal");
        storage.create_dir_all(&wal).expect("mkdir");
        let m = FlushMethod::Fdatasync;
        let seg = storage.create(&wal.join("1.wal"), m).expect("create");
        seg.allocate_zeroed(0, 8192).expect("zero");
        seg.write_at(&[1; 512], 0).expect("write");
        let data = storage
            .create(&dir.path().join(tilldb::internals::page::DATA_FILE_NAME), m)
            .expect("create");
        data.write_at(&[2; 4096], 0).expect("write");
        let other = storage
            .create(&dir.path().join("notes"), m)
            .expect("create");
        other.write_at(&[3; 10], 0).expect("write");
        let w = storage.hooks().snapshot();
        assert_eq!(
            w,
            Written {
                log: 8192 + 512,
                data: 4096,
                doublewrite: 0,
                other: 10
            }
        );
        assert_eq!(w.total(), 8192 + 512 + 4096 + 10);
    }
}
