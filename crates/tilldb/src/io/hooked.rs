//! [`HookedStorage`]: the one forwarding layer for storage wrappers.
//!
//! A wrapper that counts bytes, slows flushes down, or holds a flush at a gate in a test does
//! not forward the twenty methods of [`Storage`] and [`StorageFile`] itself: it implements
//! [`Hooks`] (one method called before each call, one after it succeeds, both seeing a
//! [`Call`]) and wraps any storage in a `HookedStorage`. Every method is forwarded here, by
//! name, so none falls back to a trait default: a wrapper that forgot `write_atomic_at` used to
//! answer `EOPNOTSUPP`, and one that forgot `allocate_zeroed` turned one preallocation into
//! many writes. A test below calls every method through a `HookedStorage` and checks that each
//! reached the inner storage as itself. (`SimDisk` keeps its own fault injection; hooks are for
//! wrappers around any storage, real files included.)

use super::{DeviceFacts, HeldLock, LockMode, Storage, StorageFile};
use crate::{FlushMethod, Result};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// A call through a [`HookedStorage`], as its hooks see it. File calls carry the file's path
/// and flush method; byte counts, not the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call<'a> {
    /// [`Storage::create`].
    Create {
        /// The file created.
        path: &'a Path,
        /// The flush method it is created with.
        method: FlushMethod,
    },
    /// [`Storage::open`].
    Open {
        /// The file opened.
        path: &'a Path,
        /// The flush method it is opened with.
        method: FlushMethod,
    },
    /// [`Storage::exists`].
    Exists {
        /// The file or directory asked about.
        path: &'a Path,
    },
    /// [`Storage::rename`].
    Rename {
        /// The name renamed.
        source: &'a Path,
        /// The new name, replaced when it exists.
        target: &'a Path,
    },
    /// [`Storage::remove`].
    Remove {
        /// The file removed.
        path: &'a Path,
    },
    /// [`Storage::create_dir_all`].
    CreateDirAll {
        /// The directory created with its parents.
        path: &'a Path,
    },
    /// [`Storage::list_dir`].
    ListDir {
        /// The directory listed.
        path: &'a Path,
    },
    /// [`Storage::flush_dir`].
    FlushDir {
        /// The directory flushed.
        path: &'a Path,
    },
    /// [`Storage::device_facts`].
    DeviceFacts {
        /// The directory whose device is asked about.
        dir: &'a Path,
    },
    /// [`Storage::lock`].
    Lock {
        /// The lock file.
        path: &'a Path,
        /// Shared or exclusive.
        mode: LockMode,
    },
    /// [`StorageFile::len`].
    Len {
        /// The file measured.
        path: &'a Path,
    },
    /// [`StorageFile::read_at`].
    Read {
        /// The file read.
        path: &'a Path,
        /// Where the read starts in the file, in bytes.
        offset: u64,
        /// How many bytes the buffer holds: the most the read returns.
        len: usize,
    },
    /// `write_at`, or `write_atomic_at` when `atomic`.
    Write {
        /// The file written.
        path: &'a Path,
        /// The file's flush method.
        method: FlushMethod,
        /// Where the write starts in the file, in bytes.
        offset: u64,
        /// How many bytes are written.
        len: usize,
        /// True for [`StorageFile::write_atomic_at`].
        atomic: bool,
    },
    /// [`StorageFile::set_len`].
    SetLen {
        /// The file truncated or extended.
        path: &'a Path,
        /// Its new length in bytes.
        len: u64,
    },
    /// [`StorageFile::allocate_zeroed`].
    AllocateZeroed {
        /// The file allocated.
        path: &'a Path,
        /// The file's flush method.
        method: FlushMethod,
        /// Where the zeros start in the file, in bytes.
        offset: u64,
        /// How many bytes of zeros are written.
        len: u64,
    },
    /// [`StorageFile::flush`].
    Flush {
        /// The file flushed.
        path: &'a Path,
        /// How it is flushed.
        method: FlushMethod,
    },
}

impl Call<'_> {
    /// The file or directory the call is about (a rename's source).
    #[must_use]
    pub fn path(&self) -> &Path {
        match *self {
            Call::Create { path, .. }
            | Call::Open { path, .. }
            | Call::Exists { path }
            | Call::Remove { path }
            | Call::CreateDirAll { path }
            | Call::ListDir { path }
            | Call::FlushDir { path }
            | Call::Lock { path, .. }
            | Call::Len { path }
            | Call::Read { path, .. }
            | Call::Write { path, .. }
            | Call::SetLen { path, .. }
            | Call::AllocateZeroed { path, .. }
            | Call::Flush { path, .. } => path,
            Call::Rename { source, .. } => source,
            Call::DeviceFacts { dir } => dir,
        }
    }
}

/// What a wrapper adds to storage. Both methods default to nothing.
pub trait Hooks: Send + Sync + fmt::Debug {
    /// Runs before `call`; an error is returned instead of making the call. May block (a
    /// gate) or sleep (a slow device).
    fn before(&self, call: &Call<'_>) -> Result<()> {
        let _ = call;
        Ok(())
    }

    /// Runs after `call` succeeded (not after a failed one).
    fn after(&self, call: &Call<'_>) {
        let _ = call;
    }
}

/// `inner` with `hooks` run around every call, on the storage and on every file it opens.
#[derive(Debug)]
pub struct HookedStorage<H> {
    inner: Arc<dyn Storage>,
    hooks: Arc<H>,
}

impl<H: Hooks + 'static> HookedStorage<H> {
    /// `inner` with `hooks` run around every call to it and to the files it opens.
    pub fn new(inner: Arc<dyn Storage>, hooks: H) -> Self {
        HookedStorage {
            inner,
            hooks: Arc::new(hooks),
        }
    }

    /// The hooks (to read what they counted, open a gate, ...).
    #[must_use]
    pub fn hooks(&self) -> &Arc<H> {
        &self.hooks
    }

    fn run<T>(&self, call: &Call<'_>, f: impl FnOnce() -> Result<T>) -> Result<T> {
        around(&*self.hooks, call, f)
    }

    fn wrap(&self, inner: Box<dyn StorageFile>) -> Box<dyn StorageFile> {
        Box::new(HookedFile {
            inner,
            hooks: Arc::clone(&self.hooks),
        })
    }
}

fn around<H: Hooks + ?Sized, T>(
    hooks: &H,
    call: &Call<'_>,
    f: impl FnOnce() -> Result<T>,
) -> Result<T> {
    hooks.before(call)?;
    let value = f()?;
    hooks.after(call);
    Ok(value)
}

impl<H: Hooks + 'static> Storage for HookedStorage<H> {
    fn create(&self, path: &Path, method: FlushMethod) -> Result<Box<dyn StorageFile>> {
        let file = self.run(&Call::Create { path, method }, || {
            self.inner.create(path, method)
        })?;
        Ok(self.wrap(file))
    }

    fn open(&self, path: &Path, method: FlushMethod) -> Result<Box<dyn StorageFile>> {
        let file = self.run(&Call::Open { path, method }, || {
            self.inner.open(path, method)
        })?;
        Ok(self.wrap(file))
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        self.run(&Call::Exists { path }, || self.inner.exists(path))
    }

    fn rename(&self, source: &Path, target: &Path) -> Result<()> {
        self.run(&Call::Rename { source, target }, || {
            self.inner.rename(source, target)
        })
    }

    fn remove(&self, path: &Path) -> Result<()> {
        self.run(&Call::Remove { path }, || self.inner.remove(path))
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        self.run(&Call::CreateDirAll { path }, || {
            self.inner.create_dir_all(path)
        })
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<String>> {
        self.run(&Call::ListDir { path }, || self.inner.list_dir(path))
    }

    fn flush_dir(&self, path: &Path) -> Result<()> {
        self.run(&Call::FlushDir { path }, || self.inner.flush_dir(path))
    }

    fn device_facts(&self, dir: &Path) -> Result<DeviceFacts> {
        self.run(&Call::DeviceFacts { dir }, || self.inner.device_facts(dir))
    }

    fn fill_random(&self, buf: &mut [u8]) -> std::result::Result<(), String> {
        self.inner.fill_random(buf)
    }

    fn lock(&self, path: &Path, mode: LockMode) -> Result<Box<dyn HeldLock>> {
        self.run(&Call::Lock { path, mode }, || self.inner.lock(path, mode))
    }
}

/// A file of a [`HookedStorage`].
#[derive(Debug)]
struct HookedFile<H> {
    inner: Box<dyn StorageFile>,
    hooks: Arc<H>,
}

impl<H: Hooks> StorageFile for HookedFile<H> {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn flush_method(&self) -> FlushMethod {
        self.inner.flush_method()
    }

    fn direct_align(&self) -> Option<u32> {
        self.inner.direct_align()
    }

    fn len(&self) -> Result<u64> {
        let path = self.inner.path();
        around(&*self.hooks, &Call::Len { path }, || self.inner.len())
    }

    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        let (path, len) = (self.inner.path(), buf.len());
        around(&*self.hooks, &Call::Read { path, offset, len }, || {
            self.inner.read_at(buf, offset)
        })
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let call = Call::Write {
            path: self.inner.path(),
            method: self.inner.flush_method(),
            offset,
            len: buf.len(),
            atomic: false,
        };
        around(&*self.hooks, &call, || self.inner.write_at(buf, offset))
    }

    fn set_len(&self, len: u64) -> Result<()> {
        let path = self.inner.path();
        around(&*self.hooks, &Call::SetLen { path, len }, || {
            self.inner.set_len(len)
        })
    }

    fn allocate_zeroed(&self, offset: u64, len: u64) -> Result<()> {
        let call = Call::AllocateZeroed {
            path: self.inner.path(),
            method: self.inner.flush_method(),
            offset,
            len,
        };
        around(&*self.hooks, &call, || {
            self.inner.allocate_zeroed(offset, len)
        })
    }

    fn write_atomic_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let call = Call::Write {
            path: self.inner.path(),
            method: self.inner.flush_method(),
            offset,
            len: buf.len(),
            atomic: true,
        };
        around(&*self.hooks, &call, || {
            self.inner.write_atomic_at(buf, offset)
        })
    }

    fn flush(&self) -> Result<()> {
        let call = Call::Flush {
            path: self.inner.path(),
            method: self.inner.flush_method(),
        };
        around(&*self.hooks, &call, || self.inner.flush())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{IoKind, SimConfig, SimDisk};
    use std::sync::Mutex;

    /// Records every call's name, before and after.
    #[derive(Debug, Default)]
    struct Journal {
        calls: Mutex<Vec<String>>,
        refuse_removes: bool,
    }

    fn name(call: &Call<'_>) -> String {
        let debug = format!("{call:?}");
        debug
            .split([' ', '{'])
            .next()
            .unwrap_or_default()
            .to_owned()
    }

    impl Hooks for Journal {
        fn before(&self, call: &Call<'_>) -> Result<()> {
            self.calls
                .lock()
                .expect("no panic under the lock")
                .push(format!("before {}", name(call)));
            if self.refuse_removes && matches!(call, Call::Remove { .. }) {
                return Err(crate::Error::os(
                    crate::IoOp::Remove,
                    call.path(),
                    crate::io::errno::EPERM,
                ));
            }
            Ok(())
        }

        fn after(&self, call: &Call<'_>) {
            self.calls
                .lock()
                .expect("no panic under the lock")
                .push(format!("after {}", name(call)));
        }
    }

    fn atomic_disk() -> SimDisk {
        SimDisk::new(SimConfig {
            atomic_write_unit: Some((4096, 65536)),
            ..SimConfig::four_k_native()
        })
    }

    /// Every method of both traits, called through the wrapper: each reaches the inner disk
    /// as itself (atomic writes succeed, a preallocation is one call), each is seen by the
    /// hooks before and after.
    #[test]
    fn every_method_is_forwarded_as_itself_and_seen_by_the_hooks() {
        let disk = atomic_disk();
        let hooked = HookedStorage::new(Arc::new(disk.clone()), Journal::default());
        let dir = Path::new("/d");
        let (a, b) = (dir.join("a"), dir.join("b"));
        hooked.create_dir_all(dir).expect("through the hooks");
        let file = hooked
            .create(&a, FlushMethod::Direct)
            .expect("through the hooks");
        file.allocate_zeroed(0, 1 << 20).expect("through the hooks");
        let buf = crate::io::AlignedBuf::zeroed(4096);
        file.write_at(&buf, 0).expect("through the hooks");
        file.write_atomic_at(&buf, 4096).expect("through the hooks");
        file.set_len(1 << 20).expect("through the hooks");
        let mut back = crate::io::AlignedBuf::zeroed(4096);
        assert_eq!(file.read_at(&mut back, 0).expect("through the hooks"), 4096);
        assert_eq!(file.len().expect("through the hooks"), 1 << 20);
        assert!(!file.is_empty().expect("through the hooks"));
        file.flush().expect("through the hooks");
        assert_eq!(file.flush_method(), FlushMethod::Direct);
        assert_eq!(file.direct_align(), Some(4096));
        assert_eq!(file.path(), a.as_path());
        drop(file);
        drop(
            hooked
                .open(&a, FlushMethod::Fdatasync)
                .expect("through the hooks"),
        );
        assert!(hooked.exists(&a).expect("through the hooks"));
        hooked.rename(&a, &b).expect("through the hooks");
        assert_eq!(
            hooked.list_dir(dir).expect("through the hooks"),
            vec!["b".to_owned()]
        );
        hooked.flush_dir(dir).expect("through the hooks");
        hooked.device_facts(dir).expect("through the hooks");
        drop(
            hooked
                .lock(&dir.join("lock"), LockMode::Exclusive)
                .expect("through the hooks"),
        );
        hooked.remove(&b).expect("through the hooks");
        let calls = hooked
            .hooks()
            .calls
            .lock()
            .expect("no panic under the lock")
            .clone();
        let expected = [
            "CreateDirAll",
            "Create",
            "AllocateZeroed",
            "Write",
            "Write",
            "SetLen",
            "Read",
            "Len",
            "Len",
            "Flush",
            "Open",
            "Exists",
            "Rename",
            "ListDir",
            "FlushDir",
            "DeviceFacts",
            "Lock",
            "Remove",
        ];
        let pairs: Vec<String> = expected
            .iter()
            .flat_map(|c| [format!("before {c}"), format!("after {c}")])
            .collect();
        // Exactly these, in order: a method left to its trait default would show its
        // emulation (the zeros of a preallocation as writes) or fail (an atomic write).
        assert_eq!(calls, pairs);
        // The simulated disk counts its preallocation as one write: one each, no emulation.
        assert_eq!(disk.call_count(IoKind::Write), 3);
    }

    #[test]
    fn an_error_from_before_is_returned_and_the_call_is_not_made() {
        let disk = atomic_disk();
        let journal = Journal {
            refuse_removes: true,
            ..Journal::default()
        };
        let hooked = HookedStorage::new(Arc::new(disk.clone()), journal);
        let path = Path::new("/f");
        drop(
            hooked
                .create(path, FlushMethod::Fsync)
                .expect("through the hooks"),
        );
        let err = hooked.remove(path).expect_err("refused");
        assert!(err.to_string().contains("/f"), "{err}");
        assert!(
            disk.exists(path).expect("through the hooks"),
            "the refused remove was made"
        );
        let calls = hooked
            .hooks()
            .calls
            .lock()
            .expect("no panic under the lock")
            .clone();
        assert_eq!(calls.last().map(String::as_str), Some("before Remove"));
    }
}
