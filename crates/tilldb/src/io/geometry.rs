//! I/O geometry: the log block and page sizes a database uses, checked against the device.
//!
//! This is where "4K-native disks refuse 512-byte `O_DIRECT` writes" is handled: once, when a
//! database is created or opened, never as an `EINVAL` in the middle of a run.
//!
//! Rules:
//! 1. Sizes are powers of two; log blocks 512 B - 64 KiB, pages 4 KiB - 64 KiB.
//! 2. With a direct flush method, both must be multiples of the device's direct-I/O alignment
//!    (`STATX_DIOALIGN`; 4096 when unreported). Otherwise the options are refused with an
//!    [`Error::InvalidOptions`] that says what the device needs.
//! 3. The default log block is the largest of 4096, the physical block size and the direct-I/O
//!    alignment: a block then never shares a physical sector with another write, and a 4K-native
//!    device just works.

use super::DeviceFacts;
use crate::FlushMethod;
use crate::error::{Error, Result};

/// Smallest log block.
pub const LOG_BLOCK_BYTES_MIN: u32 = 512;
/// Largest log block.
pub const LOG_BLOCK_BYTES_MAX: u32 = 64 * 1024;
const PAGE_BYTES_MIN: u32 = 4096;
const PAGE_BYTES_MAX: u32 = 64 * 1024;
const LOG_BLOCK_BYTES_DEFAULT_MIN: u32 = 4096;

/// Sizes a database does its I/O in, validated for one device and flush method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoGeometry {
    /// How the log and pages are flushed.
    pub flush_method: FlushMethod,
    /// The log's write unit.
    pub log_block_bytes: u32,
    /// The page size.
    pub page_bytes: u32,
    /// Required alignment of direct I/O, when the method is direct.
    pub direct_align: Option<u32>,
}

impl IoGeometry {
    /// Checks the requested sizes on this device, filling in the default log block size when
    /// none is given.
    pub fn resolve(
        facts: &DeviceFacts,
        flush_method: FlushMethod,
        log_block_bytes: Option<u32>,
        page_bytes: u32,
    ) -> Result<IoGeometry> {
        if flush_method.is_direct() && facts.direct_io == Some(false) {
            return Err(Error::InvalidOptions(format!(
                "flush method {flush_method} needs O_DIRECT, which the {} file system at {} \
                 refuses; choose fdatasync or dsync",
                facts.fs_type.as_deref().unwrap_or("unknown"),
                facts.path.display()
            )));
        }
        let log_block_bytes =
            log_block_bytes.unwrap_or_else(|| Self::default_log_block_bytes(facts));
        check_size(
            "log block",
            log_block_bytes,
            LOG_BLOCK_BYTES_MIN,
            LOG_BLOCK_BYTES_MAX,
        )?;
        check_size("page", page_bytes, PAGE_BYTES_MIN, PAGE_BYTES_MAX)?;
        let direct_align = flush_method.is_direct().then(|| facts.direct_align());
        if let Some(align) = direct_align {
            for (what, bytes) in [("log block", log_block_bytes), ("page", page_bytes)] {
                if !bytes.is_multiple_of(align) {
                    return Err(Error::InvalidOptions(format!(
                        "{what} size {bytes} cannot be written with flush method {flush_method} \
                         on {}: its direct I/O needs multiples of {align} bytes; use {what} size \
                         {} or a buffered flush method",
                        facts.path.display(),
                        align.max(bytes)
                    )));
                }
            }
        }
        let geometry = IoGeometry {
            flush_method,
            log_block_bytes,
            page_bytes,
            direct_align,
        };
        geometry.check_invariants();
        Ok(geometry)
    }

    /// The default log block size for a device (rule 3).
    #[must_use]
    pub fn default_log_block_bytes(facts: &DeviceFacts) -> u32 {
        let physical = facts.physical_block_bytes.unwrap_or(0);
        let dio = facts.dio_offset_align.unwrap_or(0);
        let bytes = LOG_BLOCK_BYTES_DEFAULT_MIN
            .max(physical)
            .max(dio)
            .min(LOG_BLOCK_BYTES_MAX);
        if bytes.is_power_of_two() {
            bytes
        } else {
            LOG_BLOCK_BYTES_DEFAULT_MIN
        }
    }

    /// Asserts the invariants every resolved geometry holds.
    pub fn check_invariants(&self) {
        assert!(self.log_block_bytes.is_power_of_two());
        assert!(self.page_bytes.is_power_of_two());
        assert_eq!(self.direct_align.is_some(), self.flush_method.is_direct());
        if let Some(align) = self.direct_align {
            assert!(
                self.log_block_bytes.is_multiple_of(align),
                "log block vs DIO alignment"
            );
            assert!(
                self.page_bytes.is_multiple_of(align),
                "page vs DIO alignment"
            );
        }
    }
}

fn check_size(what: &str, bytes: u32, min: u32, max: u32) -> Result<()> {
    if !bytes.is_power_of_two() || bytes < min || bytes > max {
        return Err(Error::InvalidOptions(format!(
            "{what} size {bytes} must be a power of two from {min} to {max} bytes"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(logical: u32, physical: u32, dio: Option<u32>) -> DeviceFacts {
        DeviceFacts {
            path: "/db".into(),
            logical_block_bytes: Some(logical),
            physical_block_bytes: Some(physical),
            dio_offset_align: dio,
            dio_mem_align: dio,
            direct_io: Some(true),
            ..DeviceFacts::default()
        }
    }

    #[test]
    fn four_k_native_device_refuses_512_byte_direct_blocks_with_the_reason() {
        let facts = device(4096, 4096, Some(4096));
        let err = IoGeometry::resolve(&facts, FlushMethod::Direct, Some(512), 16384)
            .expect_err("refused");
        let text = err.to_string();
        assert!(text.contains("multiples of 4096"), "{text}");
        assert!(text.contains("log block size 512"), "{text}");
    }

    #[test]
    fn buffered_methods_accept_small_blocks_anywhere() {
        let facts = device(4096, 4096, Some(4096));
        let g = IoGeometry::resolve(&facts, FlushMethod::Fdatasync, Some(512), 16384).expect("ok");
        assert_eq!(g.log_block_bytes, 512);
        assert_eq!(g.direct_align, None);
    }

    #[test]
    fn defaults_follow_the_device() {
        for (facts, want) in [
            (device(512, 512, Some(512)), 4096),
            (device(512, 4096, Some(512)), 4096),
            (device(4096, 4096, Some(4096)), 4096),
            (device(4096, 16384, Some(4096)), 16384),
            (DeviceFacts::default(), 4096),
        ] {
            assert_eq!(
                IoGeometry::default_log_block_bytes(&facts),
                want,
                "{facts:?}"
            );
            for method in FlushMethod::DURABLE {
                IoGeometry::resolve(&facts, method, None, 16384).expect("defaults always resolve");
            }
        }
    }

    #[test]
    fn unreported_alignment_assumes_4096() {
        let facts = device(512, 512, None);
        assert!(IoGeometry::resolve(&facts, FlushMethod::DirectDsync, Some(512), 16384).is_err());
        assert!(IoGeometry::resolve(&facts, FlushMethod::DirectDsync, Some(4096), 16384).is_ok());
    }

    #[test]
    fn no_direct_io_means_direct_methods_are_refused() {
        let mut facts = device(512, 512, None);
        facts.direct_io = Some(false);
        let err =
            IoGeometry::resolve(&facts, FlushMethod::Direct, None, 16384).expect_err("refused");
        assert!(err.to_string().contains("refuses"));
        assert!(IoGeometry::resolve(&facts, FlushMethod::Fdatasync, None, 16384).is_ok());
    }

    #[test]
    fn sizes_must_be_powers_of_two_in_range() {
        let facts = device(512, 512, Some(512));
        for (block, page) in [
            (3000, 16384),
            (256, 16384),
            (1 << 17, 16384),
            (4096, 2048),
            (4096, 12288),
        ] {
            assert!(
                IoGeometry::resolve(&facts, FlushMethod::Fdatasync, Some(block), page).is_err()
            );
        }
    }
}
