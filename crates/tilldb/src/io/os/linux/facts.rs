//! Device facts on Linux: `statx`, sysfs and `statfs` (see `io/probe.rs` for the struct and
//! the sources' order of trust).

use crate::error::{Error, IoOp, Result};
use crate::io::{DeviceFacts, WriteCache};
use rustix::fd::AsFd;
use rustix::fs::{AtFlags, Mode, OFlags, StatxFlags};
use rustix::io::{Errno, ReadWriteFlags};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// `STATX_WRITE_ATOMIC` (Linux 6.11): ask for the atomic write unit fields. Not named by rustix
/// or libc yet; the value is from `include/uapi/linux/stat.h`.
pub(crate) const STATX_WRITE_ATOMIC: u32 = 0x0001_0000;
/// `RWF_ATOMIC` (Linux 6.11): the write must land whole or not at all.
pub(crate) const RWF_ATOMIC: u32 = 0x0000_0040;
const _: () = assert!(RWF_ATOMIC == libc::RWF_ATOMIC as u32);
const _: () = assert!(STATX_WRITE_ATOMIC & StatxFlags::DIOALIGN.bits() == 0);

impl DeviceFacts {
    /// Facts for the file system holding directory `dir`. Creates and removes a small scratch
    /// file in `dir`, because direct-I/O and atomic-write facts are per file.
    pub fn for_dir(dir: &Path) -> Result<DeviceFacts> {
        static SCRATCH_COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = SCRATCH_COUNTER.fetch_add(1, Ordering::Relaxed);
        let scratch = dir.join(format!(".tilldb-facts-{}-{n}", std::process::id()));
        let fd = match rustix::fs::open(
            &scratch,
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
            Mode::from_bits_truncate(0o600),
        ) {
            Ok(fd) => fd,
            // Read-only media (or no write permission): what the directory itself tells.
            Err(Errno::ROFS | Errno::ACCESS | Errno::PERM) => return Self::for_dir_read_only(dir),
            Err(e) => return Err(Error::io(IoOp::Create, &scratch, e)),
        };
        let facts = Self::for_open_file(&fd, &scratch);
        let direct = rustix::fs::open(
            &scratch,
            OFlags::RDWR | super::flush::O_DIRECT,
            Mode::empty(),
        );
        let removed = std::fs::remove_file(&scratch).map_err(|source| Error::Io {
            op: IoOp::Remove,
            path: scratch.clone(),
            source,
        });
        let mut facts = facts?;
        removed?;
        facts.path = dir.to_path_buf();
        facts.direct_io = match direct {
            Ok(_) => Some(facts.direct_io != Some(false)),
            Err(Errno::INVAL) => Some(false),
            Err(_) => facts.direct_io,
        };
        Ok(facts)
    }

    /// Facts for directory `dir` without writing in it (read-only media, read-only tools):
    /// statx of the directory itself, so direct-I/O support stays unknown (`None`).
    pub fn for_dir_read_only(dir: &Path) -> Result<DeviceFacts> {
        let mut facts = Self::for_file(dir)?;
        facts.direct_io = None;
        Ok(facts)
    }

    /// Facts for an existing file.
    pub fn for_file(path: &Path) -> Result<DeviceFacts> {
        let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| Error::io(IoOp::Open, path, e))?;
        Self::for_open_file(&fd, path)
    }

    fn for_open_file(fd: impl AsFd, path: &Path) -> Result<DeviceFacts> {
        let mask = StatxFlags::BASIC_STATS
            | StatxFlags::DIOALIGN
            | StatxFlags::from_bits_retain(STATX_WRITE_ATOMIC);
        let stx = rustix::fs::statx(&fd, "", AtFlags::EMPTY_PATH, mask)
            .map_err(|e| Error::io(IoOp::Stat, path, e))?;
        let mut facts = DeviceFacts {
            path: path.to_path_buf(),
            dev_major_minor: Some((stx.stx_dev_major, stx.stx_dev_minor)),
            fs_block_bytes: non_zero(stx.stx_blksize),
            ..DeviceFacts::default()
        };
        if stx.stx_mask & StatxFlags::DIOALIGN.bits() != 0 {
            // statx(2): a zero offset alignment means direct I/O is not supported.
            facts.direct_io = Some(stx.stx_dio_offset_align != 0);
            facts.dio_mem_align = non_zero(stx.stx_dio_mem_align);
            facts.dio_offset_align = non_zero(stx.stx_dio_offset_align);
        }
        if stx.stx_mask & STATX_WRITE_ATOMIC != 0 {
            facts.atomic_write_unit_min_bytes = Some(stx.stx_atomic_write_unit_min);
            facts.atomic_write_unit_max_bytes = Some(stx.stx_atomic_write_unit_max);
        }
        if let Ok(fs) = rustix::fs::fstatfs(&fd) {
            #[expect(
                clippy::cast_sign_loss,
                clippy::cast_possible_truncation,
                reason = "f_type is a 32-bit magic"
            )]
            let magic = fs.f_type as u32;
            facts.fs_type = Some(fs_type_name(magic));
        }
        facts.read_sysfs(stx.stx_dev_major, stx.stx_dev_minor);
        Ok(facts)
    }

    /// Fills in what `/sys/dev/block/MAJ:MIN` says about the device, if it exists.
    fn read_sysfs(&mut self, major: u32, minor: u32) {
        let Ok(mut node) = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")) else {
            return; // Not a block device: tmpfs, overlay, btrfs subvolume, network.
        };
        if node.join("partition").exists() {
            node.pop();
        }
        self.device = node.file_name().map(|n| n.to_string_lossy().into_owned());
        let queue = node.join("queue");
        let read = |name: &str| {
            std::fs::read_to_string(queue.join(name))
                .ok()
                .map(|s| s.trim().to_owned())
        };
        let number = |name: &str| read(name).and_then(|s| s.parse::<u32>().ok());
        self.logical_block_bytes = number("logical_block_size").filter(|&n| n > 0);
        self.physical_block_bytes = number("physical_block_size").filter(|&n| n > 0);
        self.device_atomic_write_max_bytes = number("atomic_write_unit_max_bytes");
        self.rotational = number("rotational").map(|n| n != 0);
        self.fua = number("fua").map(|n| n != 0);
        self.write_cache = match read("write_cache").as_deref() {
            Some("write back") => Some(WriteCache::WriteBack),
            Some("write through") => Some(WriteCache::WriteThrough),
            _ => None,
        };
    }
}

fn non_zero(n: u32) -> Option<u32> {
    (n != 0).then_some(n)
}

/// Names a file system magic number from `statfs(2)`.
fn fs_type_name(magic: u32) -> String {
    match magic {
        0xEF53 => "ext4".into(),
        0x5846_5342 => "xfs".into(),
        0x9123_683E => "btrfs".into(),
        0x0102_1994 => "tmpfs".into(),
        0x794C_7630 => "overlay".into(),
        0x6573_5546 => "fuse".into(),
        0x6969 => "nfs".into(),
        0xF2F5_2010 => "f2fs".into(),
        0x2FC1_2FC1 => "zfs".into(),
        0x4D44 => "vfat".into(),
        other => format!("{other:#x}"),
    }
}

/// Tries one `RWF_ATOMIC` write of `bytes` on a scratch file in `dir` (`O_DIRECT`, as the
/// kernel requires). `Ok(false)` when the kernel refuses it (`EOPNOTSUPP`, `EINVAL`): statx
/// claims are checked by doing, not trusted.
pub fn atomic_write_supported(dir: &Path, bytes: u32) -> Result<bool> {
    let scratch = dir.join(format!(".tilldb-atomic-{}", std::process::id()));
    let flags =
        OFlags::RDWR | OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC | super::flush::O_DIRECT;
    let fd = match rustix::fs::open(&scratch, flags, Mode::from_bits_truncate(0o600)) {
        Ok(fd) => fd,
        Err(Errno::INVAL) => return Ok(false), // no O_DIRECT, so no RWF_ATOMIC either
        Err(e) => return Err(Error::io(IoOp::Create, &scratch, e)),
    };
    let buf = crate::io::AlignedBuf::zeroed(bytes as usize);
    let flags = ReadWriteFlags::from_bits_retain(RWF_ATOMIC);
    let result = rustix::io::pwritev2(&fd, &[std::io::IoSlice::new(&buf)], 0, flags);
    drop(fd);
    std::fs::remove_file(&scratch).map_err(|source| Error::Io {
        op: IoOp::Remove,
        path: scratch.clone(),
        source,
    })?;
    match result {
        Ok(n) => {
            assert_eq!(n, buf.len(), "an atomic write is all or nothing");
            Ok(true)
        }
        Err(Errno::OPNOTSUPP | Errno::INVAL) => Ok(false),
        Err(e) => Err(Error::io(IoOp::Write, &scratch, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_for_a_temp_dir_leave_no_files_behind() {
        let dir = tempfile::tempdir().expect("tempdir");
        let facts = DeviceFacts::for_dir(dir.path()).expect("facts");
        assert!(
            std::fs::read_dir(dir.path())
                .expect("read_dir")
                .next()
                .is_none()
        );
        assert!(facts.fs_type.is_some());
        assert_eq!(facts.path, dir.path());
        assert!(facts.direct_align().is_power_of_two());
    }

    #[test]
    fn unknown_magic_is_shown_in_hex() {
        assert_eq!(fs_type_name(0xEF53), "ext4");
        assert_eq!(fs_type_name(0x1234), "0x1234");
    }
}
