//! Device facts on macOS: the file system's name (`fstatfs`); the rest is not read yet and
//! stays unknown, with a note saying so.

use crate::error::{Error, IoOp, Result};
use crate::io::DeviceFacts;
use rustix::fs::{Mode, OFlags};
use std::path::Path;

impl DeviceFacts {
    /// Facts for the file system holding directory `dir` (nothing is written there).
    pub fn for_dir(dir: &Path) -> Result<DeviceFacts> {
        Self::for_file(dir)
    }

    /// The same as [`DeviceFacts::for_dir`].
    pub fn for_dir_read_only(dir: &Path) -> Result<DeviceFacts> {
        Self::for_file(dir)
    }

    /// Facts for an existing file or directory.
    pub fn for_file(path: &Path) -> Result<DeviceFacts> {
        let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| Error::io(IoOp::Open, path, e))?;
        let mut facts = DeviceFacts {
            path: path.to_path_buf(),
            // F_NOCACHE needs no alignment; tilldb aligns direct I/O to the fallback anyway.
            direct_io: Some(true),
            atomic_write_unit_min_bytes: Some(0),
            atomic_write_unit_max_bytes: Some(0),
            ..DeviceFacts::default()
        };
        match rustix::fs::fstatfs(&fd) {
            Ok(fs) => {
                let name: Vec<u8> = fs
                    .f_fstypename
                    .iter()
                    .take_while(|&&c| c != 0)
                    .map(|&c| c.cast_unsigned())
                    .collect();
                facts.fs_type = Some(String::from_utf8_lossy(&name).into_owned());
            }
            Err(e) => facts
                .notes
                .push(format!("file system unknown: fstatfs failed ({e})")),
        }
        facts
            .notes
            .push("block sizes, write cache and FUA are not read on macOS yet".to_owned());
        Ok(facts)
    }
}

/// macOS offers no atomic multi-sector writes to applications: always `Ok(false)`.
pub fn atomic_write_supported(_dir: &Path, _bytes: u32) -> Result<bool> {
    Ok(false)
}
