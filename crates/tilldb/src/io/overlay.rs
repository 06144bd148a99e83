//! [`OverlayStorage`]: a storage that reads through to another one and keeps every change in
//! memory, so that nothing reaches the storage beneath. `till check` opens a database on it:
//! recovery, the checks and the clean close all run, and every file of the database stays
//! byte for byte as it was (damaged or not, on read-only media or not).
//!
//! ```text
//!   read  ──► blocks changed here (4 KiB, in memory) ──► else the base file, below `base_len`
//!                                                     └─► else zeros, below `len`
//!   write ──► blocks in memory (a partial block is first read from below)
//!   create, rename, remove ──► a name map in memory over the base directory
//!   flush, flush_dir ──► nothing (there is nothing durable to make)
//! ```
//!
//! A file's `base_len` only ever shrinks (a `set_len` below it hides the base's tail for good),
//! so bytes past a truncation read as zeros after a later extension, as on a real file.
//! `allocate_zeroed` past `base_len` stores nothing: a new 64 MiB log segment costs no
//! memory until it is written. Locks go to the base storage, always shared: the overlay never
//! writes there, so it excludes writers and not other readers.

use super::{DeviceFacts, HeldLock, LockMode, Storage, StorageFile};
use crate::FlushMethod;
use crate::error::{Error, IoOp, Result};
use crate::io::errno;
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The unit of copy-on-write.
const BLOCK_BYTES: u64 = 4096;
const BLOCK_USIZE: usize = 4096;
const _: () = assert!(BLOCK_USIZE as u64 == BLOCK_BYTES);

/// Changes over a base storage, held in memory.
#[derive(Debug)]
pub struct OverlayStorage {
    base: Arc<dyn Storage>,
    names: Mutex<Names>,
}

/// The name map: a path's entry here overrides the base (`None`: removed here).
#[derive(Debug, Default)]
struct Names {
    files: BTreeMap<PathBuf, Option<Arc<Mutex<Layer>>>>,
    dirs: BTreeSet<PathBuf>,
}

/// One file: its base (if it came from one), its length, and the blocks changed here.
#[derive(Debug)]
struct Layer {
    base: Option<Box<dyn StorageFile>>,
    /// Bytes of the base file still visible; never grows.
    base_len: u64,
    len: u64,
    blocks: BTreeMap<u64, Box<[u8]>>,
}

impl Layer {
    fn empty() -> Layer {
        Layer {
            base: None,
            base_len: 0,
            len: 0,
            blocks: BTreeMap::new(),
        }
    }

    /// Reads block `index` as it is now (a copy), zeros past the data.
    fn block(&self, index: u64) -> Result<Box<[u8]>> {
        if let Some(b) = self.blocks.get(&index) {
            return Ok(b.clone());
        }
        let mut buf = vec![0u8; BLOCK_USIZE].into_boxed_slice();
        let start = index * BLOCK_BYTES;
        if let Some(base) = &self.base
            && start < self.base_len
        {
            let visible =
                usize::try_from((self.base_len - start).min(BLOCK_BYTES)).expect("at most a block");
            let n = base.read_at(&mut buf[..visible], start)?;
            assert!(n <= visible, "read_at returned more than asked");
        }
        Ok(buf)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        let end = (offset + buf.len() as u64).min(self.len);
        let mut at = offset;
        while at < end {
            let index = at / BLOCK_BYTES;
            let within = at - index * BLOCK_BYTES;
            let n = (BLOCK_BYTES - within).min(end - at);
            let block = self.block(index)?;
            let dst = usize::try_from(at - offset).expect("in the buffer");
            let n_us = usize::try_from(n).expect("at most a block");
            let src = usize::try_from(within).expect("in the block");
            buf[dst..dst + n_us].copy_from_slice(&block[src..src + n_us]);
            at += n;
        }
        Ok(usize::try_from(end.saturating_sub(offset)).expect("fits the buffer"))
    }

    fn write_at(&mut self, buf: &[u8], offset: u64) -> Result<()> {
        let end = offset + buf.len() as u64;
        let mut at = offset;
        while at < end {
            let index = at / BLOCK_BYTES;
            let within = at - index * BLOCK_BYTES;
            let n = (BLOCK_BYTES - within).min(end - at);
            let mut block = self.block(index)?;
            let src = usize::try_from(at - offset).expect("in the buffer");
            let n_us = usize::try_from(n).expect("at most a block");
            let dst = usize::try_from(within).expect("in the block");
            block[dst..dst + n_us].copy_from_slice(&buf[src..src + n_us]);
            self.blocks.insert(index, block);
            at += n;
        }
        self.len = self.len.max(end);
        Ok(())
    }

    fn set_len(&mut self, len: u64) {
        if len < self.len {
            // Blocks past the end go; the last partial block keeps only its head.
            let first_gone = len.div_ceil(BLOCK_BYTES);
            self.blocks.split_off(&first_gone);
            if !len.is_multiple_of(BLOCK_BYTES)
                && let Some(block) = self.blocks.get_mut(&(len / BLOCK_BYTES))
            {
                let keep = usize::try_from(len % BLOCK_BYTES).expect("in the block");
                block[keep..].fill(0);
            }
            self.base_len = self.base_len.min(len);
        }
        self.len = len;
    }

    /// Zeros over `offset..offset + len`: stored only where the base would show through.
    fn zero(&mut self, offset: u64, len: u64) -> Result<()> {
        let end = offset + len;
        let mut at = offset;
        while at < end {
            let index = at / BLOCK_BYTES;
            let block_start = index * BLOCK_BYTES;
            let n = (block_start + BLOCK_BYTES).min(end) - at;
            let whole = at == block_start && n == BLOCK_BYTES;
            if whole && block_start >= self.base_len {
                // Nothing below shows through: no block is zeros.
                self.blocks.remove(&index);
            } else {
                let zeros = vec![0u8; usize::try_from(n).expect("at most a block")];
                self.write_at(&zeros, at)?;
            }
            at += n;
        }
        self.len = self.len.max(end);
        Ok(())
    }
}

/// A file of the overlay.
#[derive(Debug)]
struct OverlayFile {
    path: PathBuf,
    method: FlushMethod,
    layer: Arc<Mutex<Layer>>,
}

impl StorageFile for OverlayFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn flush_method(&self) -> FlushMethod {
        self.method
    }

    fn direct_align(&self) -> Option<u32> {
        None
    }

    fn len(&self) -> Result<u64> {
        Ok(self.layer.lock().len)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.layer.lock().read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.layer.lock().write_at(buf, offset)
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.layer.lock().set_len(len);
        Ok(())
    }

    fn allocate_zeroed(&self, offset: u64, len: u64) -> Result<()> {
        self.layer.lock().zero(offset, len)
    }

    fn write_atomic_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.write_at(buf, offset)
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }
}

impl OverlayStorage {
    /// Changes over `base`, kept in memory. Pass a read-only base
    /// (`FileStorage::read_only()`) to make sure nothing is written beneath.
    #[must_use]
    pub fn new(base: Arc<dyn Storage>) -> Self {
        OverlayStorage {
            base,
            names: Mutex::new(Names::default()),
        }
    }

    /// The layer `path` names, opening the base file on first use; `None` when missing.
    /// Requires: the caller holds `names`.
    fn lookup(&self, names: &mut Names, path: &Path) -> Result<Option<Arc<Mutex<Layer>>>> {
        if let Some(entry) = names.files.get(path) {
            return Ok(entry.clone());
        }
        if !self.base.exists(path)? || self.base.list_dir(path).is_ok() {
            return Ok(None);
        }
        let file = self.base.open(path, FlushMethod::Fdatasync)?;
        let len = file.len()?;
        let layer = Arc::new(Mutex::new(Layer {
            base: Some(file),
            base_len: len,
            len,
            blocks: BTreeMap::new(),
        }));
        names
            .files
            .insert(path.to_path_buf(), Some(Arc::clone(&layer)));
        Ok(Some(layer))
    }

    fn missing(op: IoOp, path: &Path) -> Error {
        Error::os(op, path, errno::ENOENT)
    }
}

impl Storage for OverlayStorage {
    fn create(&self, path: &Path, method: FlushMethod) -> Result<Box<dyn StorageFile>> {
        let mut names = self.names.lock();
        if self.lookup(&mut names, path)?.is_some() {
            return Err(Error::os(IoOp::Create, path, errno::EEXIST));
        }
        let layer = Arc::new(Mutex::new(Layer::empty()));
        names
            .files
            .insert(path.to_path_buf(), Some(Arc::clone(&layer)));
        Ok(Box::new(OverlayFile {
            path: path.to_path_buf(),
            method,
            layer,
        }))
    }

    fn open(&self, path: &Path, method: FlushMethod) -> Result<Box<dyn StorageFile>> {
        let mut names = self.names.lock();
        let layer = self
            .lookup(&mut names, path)?
            .ok_or_else(|| Self::missing(IoOp::Open, path))?;
        Ok(Box::new(OverlayFile {
            path: path.to_path_buf(),
            method,
            layer,
        }))
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        let names = self.names.lock();
        match names.files.get(path) {
            Some(entry) => Ok(entry.is_some()),
            None => Ok(names.dirs.contains(path) || self.base.exists(path)?),
        }
    }

    fn rename(&self, source: &Path, target: &Path) -> Result<()> {
        let mut names = self.names.lock();
        let layer = self
            .lookup(&mut names, source)?
            .ok_or_else(|| Self::missing(IoOp::Rename, source))?;
        names.files.insert(source.to_path_buf(), None);
        names.files.insert(target.to_path_buf(), Some(layer));
        Ok(())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let mut names = self.names.lock();
        if self.lookup(&mut names, path)?.is_none() {
            return Err(Self::missing(IoOp::Remove, path));
        }
        names.files.insert(path.to_path_buf(), None);
        Ok(())
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        if !self.base.exists(path)? {
            let mut names = self.names.lock();
            let mut dir = Some(path);
            while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty()) {
                names.dirs.insert(d.to_path_buf());
                dir = d.parent();
            }
        }
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<String>> {
        let names = self.names.lock();
        let mut listed: BTreeSet<String> = match self.base.list_dir(path) {
            Ok(base) => base.into_iter().collect(),
            Err(_) if names.dirs.contains(path) => BTreeSet::new(),
            Err(e) => return Err(e),
        };
        for (p, entry) in &names.files {
            if p.parent() == Some(path)
                && let Some(name) = p.file_name()
            {
                let name = name.to_string_lossy().into_owned();
                if entry.is_some() {
                    listed.insert(name);
                } else {
                    listed.remove(&name);
                }
            }
        }
        for d in &names.dirs {
            if d.parent() == Some(path)
                && let Some(name) = d.file_name()
            {
                listed.insert(name.to_string_lossy().into_owned());
            }
        }
        Ok(listed.into_iter().collect())
    }

    fn flush_dir(&self, _path: &Path) -> Result<()> {
        Ok(())
    }

    fn fill_random(&self, buf: &mut [u8]) -> std::result::Result<(), String> {
        self.base.fill_random(buf)
    }

    fn device_facts(&self, dir: &Path) -> Result<DeviceFacts> {
        // A directory made here only (a read-only handle's own log) is on the device of
        // the nearest one beneath it.
        let mut at = dir;
        while !self.base.exists(at)? {
            match at.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => at = parent,
                _ => break,
            }
        }
        self.base.device_facts(at)
    }

    fn lock(&self, path: &Path, _mode: LockMode) -> Result<Box<dyn HeldLock>> {
        // Nothing is written beneath: a shared lock keeps writers out and lets readers in.
        self.base.lock(path, LockMode::Shared)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::FileStorage;

    fn overlay_over(dir: &Path) -> OverlayStorage {
        assert!(dir.is_dir());
        OverlayStorage::new(Arc::new(FileStorage::read_only()))
    }

    #[test]
    fn writes_stay_in_memory_and_reads_merge_them_over_the_base() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("f");
        let original: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &original).expect("write");
        let overlay = overlay_over(tmp.path());
        let file = overlay.open(&path, FlushMethod::Fdatasync).expect("open");
        file.write_at(b"hello", 4094)
            .expect("write across a block edge");
        let mut back = vec![0u8; 10_000];
        assert_eq!(file.read_at(&mut back, 0).expect("read"), 10_000);
        let mut expected = original.clone();
        expected[4094..4099].copy_from_slice(b"hello");
        assert_eq!(back, expected);
        file.flush().expect("flush");
        assert_eq!(
            std::fs::read(&path).expect("read"),
            original,
            "the base changed"
        );
        // A truncation hides the base's tail for good; an extension reads zeros there.
        file.set_len(5000).expect("shrink");
        file.set_len(9000).expect("grow");
        let mut back = vec![0xFFu8; 9000];
        assert_eq!(file.read_at(&mut back, 0).expect("read"), 9000);
        assert_eq!(&back[..4094], &original[..4094]);
        assert!(back[5000..].iter().all(|&b| b == 0), "zeros past the cut");
        assert_eq!(std::fs::read(&path).expect("read"), original);
    }

    #[test]
    fn names_change_in_memory_only() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let a = tmp.path().join("a");
        std::fs::write(&a, b"base").expect("write");
        let overlay = overlay_over(tmp.path());
        let b = tmp.path().join("b");
        overlay.rename(&a, &b).expect("rename");
        assert!(!overlay.exists(&a).expect("exists"));
        let new = tmp.path().join("new");
        let file = overlay
            .create(&new, FlushMethod::Fdatasync)
            .expect("create");
        file.allocate_zeroed(0, 64 << 20).expect("a 64 MiB segment");
        assert_eq!(file.len().expect("len"), 64 << 20);
        assert!(
            overlay.create(&new, FlushMethod::Fdatasync).is_err(),
            "exists"
        );
        let sub = tmp.path().join("sub/dir");
        overlay.create_dir_all(&sub).expect("mkdir");
        assert_eq!(
            overlay.list_dir(tmp.path()).expect("list"),
            ["b", "new", "sub"]
        );
        overlay.remove(&b).expect("remove");
        assert_eq!(overlay.list_dir(tmp.path()).expect("list"), ["new", "sub"]);
        // Beneath, nothing happened.
        let mut real: Vec<String> = std::fs::read_dir(tmp.path())
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        real.sort();
        assert_eq!(real, ["a"]);
        assert_eq!(std::fs::read(&a).expect("read"), b"base");
    }

    #[test]
    fn zero_filling_a_new_file_stores_no_blocks() {
        let mut layer = Layer::empty();
        layer.zero(0, 64 << 20).expect("zero");
        assert!(layer.blocks.is_empty());
        assert_eq!(layer.len, 64 << 20);
        layer.write_at(&[1; 10], 4096 * 3 + 5).expect("write");
        assert_eq!(layer.blocks.len(), 1);
        let mut buf = [9u8; 20];
        assert_eq!(layer.read_at(&mut buf, 4096 * 3).expect("read"), 20);
        assert_eq!(&buf[..5], &[0; 5]);
        assert_eq!(&buf[5..15], &[1; 10]);
    }
}
