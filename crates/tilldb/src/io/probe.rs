//! Device facts: what the device under a path is and can do, read without opening the device.
//! The struct is the same on every platform; how it is read is the platform's (`os/linux/
//! facts.rs`, `os/windows/facts.rs`).
//!
//! On Linux, sources in order of trust:
//! - `statx` on a file in the directory: direct-I/O alignment (`STATX_DIOALIGN`, Linux 6.1+),
//!   atomic write units (`STATX_WRITE_ATOMIC`, Linux 6.11+), the device number.
//! - `/sys/dev/block/MAJ:MIN/queue/*` (a partition's queue lives under its parent device):
//!   logical and physical block size, rotational, write cache mode, FUA.
//! - `statfs`: the file system type.
//!
//! Whatever cannot be read is `None` ("unknown"), never a guess. The root disk of many machines
//! cannot be opened for `BLKSSZGET`, which is why sysfs is used instead.

use std::path::PathBuf;

/// Direct-I/O alignment assumed when the system does not report one (`STATX_DIOALIGN` is
/// Linux 6.1+). 4096 works on every device seen; 512 would fail on 4K-native disks.
pub const DIRECT_ALIGN_FALLBACK: u32 = 4096;

/// The volatile-cache mode the kernel reports for a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteCache {
    /// A volatile cache: data is durable only after a cache flush (or a FUA write).
    WriteBack,
    /// No volatile cache, or one the device promises survives power loss.
    WriteThrough,
}

/// What the device under a path is and can do. `None` means unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceFacts {
    /// The directory or file the facts were read for.
    pub path: PathBuf,
    /// File system type (`ext4`, `xfs`, `tmpfs`, ...), or the hex magic when unrecognised.
    pub fs_type: Option<String>,
    /// Block device name (`vda`, `nvme0n1`, `loop3`); a partition reports its parent disk.
    pub device: Option<String>,
    /// The file system's device number (`major:minor`).
    pub dev_major_minor: Option<(u32, u32)>,
    /// Smallest unit the device addresses.
    pub logical_block_bytes: Option<u32>,
    /// Smallest unit the device writes without read-modify-write.
    pub physical_block_bytes: Option<u32>,
    /// Preferred I/O size of the file system (`stx_blksize`).
    pub fs_block_bytes: Option<u32>,
    /// `Some(false)` when the file system refuses `O_DIRECT`.
    pub direct_io: Option<bool>,
    /// Alignment of buffer addresses for direct I/O.
    pub dio_mem_align: Option<u32>,
    /// Alignment of file offsets and lengths for direct I/O.
    pub dio_offset_align: Option<u32>,
    /// Smallest atomic write (`RWF_ATOMIC`); `Some(0)` when the kernel says atomic writes are
    /// not supported for this file.
    pub atomic_write_unit_min_bytes: Option<u32>,
    /// Largest atomic write; `Some(0)` when not supported.
    pub atomic_write_unit_max_bytes: Option<u32>,
    /// Largest hardware atomic write the device queue advertises (sysfs).
    pub device_atomic_write_max_bytes: Option<u32>,
    /// True for a spinning disk (as the device reports it: virtual disks often say true).
    pub rotational: Option<bool>,
    /// Whether the device has a volatile write cache.
    pub write_cache: Option<WriteCache>,
    /// Whether the device supports Force Unit Access writes.
    pub fua: Option<bool>,
    /// Why facts are unknown, where the platform can say (a call refused, a virtual disk).
    pub notes: Vec<String>,
}

impl DeviceFacts {
    /// The alignment direct I/O needs here: the reported one, else the safe fallback.
    #[must_use]
    pub fn direct_align(&self) -> u32 {
        let reported = self
            .dio_offset_align
            .unwrap_or(0)
            .max(self.dio_mem_align.unwrap_or(0));
        if reported == 0 {
            DIRECT_ALIGN_FALLBACK
        } else {
            reported
        }
    }

    /// `Some(true)` when the kernel reports atomic writes whose unit range covers `bytes`.
    #[must_use]
    pub fn atomic_write_covers(&self, bytes: u32) -> Option<bool> {
        let (min, max) = (
            self.atomic_write_unit_min_bytes?,
            self.atomic_write_unit_max_bytes?,
        );
        Some(max > 0 && min <= bytes && bytes <= max && bytes.is_power_of_two())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_cover_rule() {
        let mut facts = DeviceFacts::default();
        assert_eq!(facts.atomic_write_covers(16384), None);
        facts.atomic_write_unit_min_bytes = Some(4096);
        facts.atomic_write_unit_max_bytes = Some(0);
        assert_eq!(facts.atomic_write_covers(16384), Some(false));
        facts.atomic_write_unit_max_bytes = Some(1 << 20);
        assert_eq!(facts.atomic_write_covers(16384), Some(true));
        assert_eq!(facts.atomic_write_covers(2048), Some(false));
        assert_eq!(facts.atomic_write_covers(2 << 20), Some(false));
    }
}
