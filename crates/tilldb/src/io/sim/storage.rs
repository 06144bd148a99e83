//! `impl Storage for SimDisk`: the directory calls, each counted, checked and fault-injected
//! through [`State::admit`] before it acts on the namespace.

use super::fault::os_error;
use super::file::SimFile;
use super::image::FileData;
use super::{FileId, IoKind, SimDisk};
use crate::FlushMethod;
use crate::error::{IoOp, Result};
use crate::io::{DeviceFacts, Storage, StorageFile, WriteCache};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

impl SimDisk {
    fn open_file(
        &self,
        path: &Path,
        method: FlushMethod,
        create: bool,
    ) -> Result<Box<dyn StorageFile>> {
        let (kind, op) = if create {
            (IoKind::Create, IoOp::Create)
        } else {
            (IoKind::Open, IoOp::Open)
        };
        let mut state = self.state.lock();
        state.admit_plain(kind, &[path], self.process_epoch())?;
        state.check_method(path, method)?;
        let id = if create {
            state
                .names
                .check_create(path)
                .map_err(|errno| os_error(op, path, errno))?;
            let id = FileId(state.next_file_id);
            state.next_file_id += 1;
            let previous = state.files.insert(id, FileData::default());
            assert!(previous.is_none(), "file id {id:?} handed out twice");
            state.names.create(path, id);
            id
        } else {
            state
                .names
                .lookup(path)
                .map_err(|errno| os_error(op, path, errno))?
        };
        Ok(Box::new(SimFile::new(
            Arc::clone(&self.state),
            &state,
            path,
            id,
            method,
        )))
    }
}

impl fmt::Debug for SimDisk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("SimDisk");
        // `try_lock`: Debug may be called while the lock is held, and must not deadlock.
        if let Some(state) = self.state.try_lock() {
            out.field("seed", &state.config.seed)
                .field("epoch", &state.epoch)
                .field("dead", &state.dead)
                .field("files", &state.names.live.keys().collect::<Vec<_>>());
        }
        out.finish_non_exhaustive()
    }
}

impl Storage for SimDisk {
    fn create(&self, path: &Path, method: FlushMethod) -> Result<Box<dyn StorageFile>> {
        self.open_file(path, method, true)
    }

    fn open(&self, path: &Path, method: FlushMethod) -> Result<Box<dyn StorageFile>> {
        self.open_file(path, method, false)
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        let state = self.state.lock();
        state.check_alive(IoOp::Stat, path, self.process_epoch())?;
        Ok(state.names.live.contains_key(path) || state.names.is_dir(path))
    }

    fn rename(&self, source: &Path, target: &Path) -> Result<()> {
        let mut state = self.state.lock();
        state.admit_plain(IoKind::Rename, &[source, target], self.process_epoch())?;
        state
            .names
            .rename(source, target)
            .map_err(|errno| os_error(IoOp::Rename, source, errno))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let mut state = self.state.lock();
        state.admit_plain(IoKind::Remove, &[path], self.process_epoch())?;
        state
            .names
            .remove(path)
            .map_err(|errno| os_error(IoOp::Remove, path, errno))
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        let mut state = self.state.lock();
        state.admit_plain(IoKind::CreateDir, &[path], self.process_epoch())?;
        state
            .names
            .create_dir_all(path)
            .map_err(|errno| os_error(IoOp::CreateDir, path, errno))
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<String>> {
        let mut state = self.state.lock();
        state.admit_plain(IoKind::ListDir, &[path], self.process_epoch())?;
        state
            .names
            .list_dir(path)
            .map_err(|errno| os_error(IoOp::ListDir, path, errno))
    }

    fn flush_dir(&self, path: &Path) -> Result<()> {
        let mut state = self.state.lock();
        state.admit_plain(IoKind::FlushDir, &[path], self.process_epoch())?;
        if !state.names.is_dir(path) {
            return Err(os_error(IoOp::FlushDir, path, crate::io::errno::ENOENT));
        }
        if !state.lying_flushes {
            state
                .names
                .flush_dir(path)
                .map_err(|errno| os_error(IoOp::FlushDir, path, errno))?;
        }
        let latency = state.config.flush_latency;
        drop(state);
        if !latency.is_zero() {
            std::thread::sleep(latency);
        }
        Ok(())
    }

    fn fill_random(&self, buf: &mut [u8]) -> std::result::Result<(), String> {
        // From the disk's seeded stream: the same seed and calls give the same keys, and a
        // fork (a new seed) draws other ones, as two machines would.
        self.state.lock().rng.fill(buf);
        Ok(())
    }

    fn device_facts(&self, dir: &Path) -> Result<DeviceFacts> {
        let state = self.state.lock();
        state.check_alive(IoOp::Stat, dir, self.process_epoch())?;
        if !state.names.is_dir(dir) {
            return Err(os_error(IoOp::Stat, dir, crate::io::errno::ENOENT));
        }
        let config = &state.config;
        let (atomic_min, atomic_max) = config.atomic_write_unit.unwrap_or((0, 0));
        let dio_align = config.direct_io.then_some(config.dio_align);
        Ok(DeviceFacts {
            path: dir.to_path_buf(),
            fs_type: Some("simdisk".to_owned()),
            device: None,
            dev_major_minor: None,
            logical_block_bytes: Some(config.logical_block_bytes),
            physical_block_bytes: Some(config.physical_block_bytes),
            fs_block_bytes: Some(config.physical_block_bytes),
            direct_io: Some(config.direct_io),
            dio_mem_align: dio_align,
            dio_offset_align: dio_align,
            atomic_write_unit_min_bytes: Some(atomic_min),
            atomic_write_unit_max_bytes: Some(atomic_max),
            device_atomic_write_max_bytes: Some(atomic_max),
            rotational: Some(false),
            write_cache: Some(WriteCache::WriteBack),
            fua: Some(false),
            notes: Vec::new(),
        })
    }

    fn lock(&self, path: &Path, mode: crate::io::LockMode) -> Result<Box<dyn crate::io::HeldLock>> {
        self.lock_path(path, mode)
    }
}
