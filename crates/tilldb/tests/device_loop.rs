//! Real devices: 4K-sector loop devices with ext4 and XFS.
//!
//! The failure this guards against: a 4K-native disk answers a 512-byte `O_DIRECT` write with
//! `EINVAL`, and a database that assumed 512-byte blocks died at start. tilldb must detect the
//! alignment from the device, default to sizes that work, and refuse impossible options with a
//! clear error before any I/O. Needs root and loop devices; skips (loudly) without them.

// Linux only: real mounts, loop devices and O_DIRECT refusals (Windows has its own tests).
#![cfg(target_os = "linux")]

mod common;

use common::{LoopMount, skip, skip_missing};
use rustix::fs::{Mode, OFlags};
use tilldb::io::{
    AlignedBuf, DeviceFacts, FileStorage, IoGeometry, Storage, atomic_write_supported,
};
use tilldb::{Error, FlushMethod};

fn four_k_device_is_detected_and_512_byte_direct_blocks_refused(fs: &str) {
    let test = format!("four_k_loop_{fs}");
    let mnt = match LoopMount::new(fs, 4096) {
        Ok(m) => m,
        Err(why) => return skip_missing(&test, &why),
    };
    let facts = FileStorage::new().device_facts(&mnt.mount).expect("facts");
    assert_eq!(facts.fs_type.as_deref(), Some(fs));
    assert_eq!(facts.logical_block_bytes, Some(4096), "{facts:?}");
    assert_eq!(facts.dio_offset_align, Some(4096), "{facts:?}");
    assert_eq!(facts.direct_io, Some(true));
    assert!(
        facts
            .device
            .as_deref()
            .is_some_and(|d| d.starts_with("loop")),
        "{facts:?}"
    );

    // The danger is real: the kernel refuses a 512-byte direct write here.
    let raw_path = mnt.mount.join("raw");
    let fd = rustix::fs::open(
        &raw_path,
        OFlags::RDWR | OFlags::CREATE | OFlags::from_bits_retain(libc::O_DIRECT as u32),
        Mode::from_bits_truncate(0o600),
    )
    .expect("open O_DIRECT");
    let buf = AlignedBuf::zeroed(4096);
    assert_eq!(
        rustix::io::pwrite(&fd, &buf[..512], 0),
        Err(rustix::io::Errno::INVAL)
    );

    // tilldb refuses it up front, saying what the device needs.
    for method in [FlushMethod::Direct, FlushMethod::DirectDsync] {
        match IoGeometry::resolve(&facts, method, Some(512), 16384) {
            Err(Error::InvalidOptions(why)) => {
                assert!(why.contains("multiples of 4096"), "{why}");
            }
            other => panic!("512-byte direct blocks accepted on a 4K device: {other:?}"),
        }
    }
    // Buffered methods may use small blocks: the page cache does the read-modify-write.
    IoGeometry::resolve(&facts, FlushMethod::Fdatasync, Some(512), 16384).expect("buffered 512");

    // The defaults just work, end to end.
    for method in FlushMethod::DURABLE {
        let g = IoGeometry::resolve(&facts, method, None, 16384).expect("default geometry");
        assert_eq!(g.log_block_bytes, 4096);
        let path = mnt.mount.join(format!("log-{method}"));
        let file = FileStorage::new().create(&path, method).expect("create");
        if method.is_direct() {
            assert_eq!(file.direct_align(), Some(4096));
        }
        let mut block = AlignedBuf::zeroed(g.log_block_bytes as usize);
        block[..4].copy_from_slice(b"till");
        file.write_at(&block, 8192).expect("aligned write");
        file.flush().expect("flush");
        let mut back = AlignedBuf::zeroed(block.len());
        assert_eq!(file.read_at(&mut back, 8192).expect("read"), block.len());
        assert_eq!(&back[..], &block[..]);
    }
}

#[test]
fn four_k_loop_ext4() {
    four_k_device_is_detected_and_512_byte_direct_blocks_refused("ext4");
}

#[test]
fn four_k_loop_xfs() {
    four_k_device_is_detected_and_512_byte_direct_blocks_refused("xfs");
}

fn atomic_writes(fs: &str) -> Option<(DeviceFacts, bool)> {
    let mnt = match LoopMount::new(fs, 4096) {
        Ok(m) => m,
        Err(why) => {
            skip_missing(&format!("atomic_writes_{fs}"), &why);
            return None;
        }
    };
    let facts = DeviceFacts::for_dir(&mnt.mount).expect("facts");
    let works = atomic_write_supported(&mnt.mount, 16384).expect("try RWF_ATOMIC");
    Some((facts, works))
}

#[test]
fn rwf_atomic_is_detected_on_xfs() {
    let Some((facts, works)) = atomic_writes("xfs") else {
        return;
    };
    assert_eq!(facts.atomic_write_covers(16384), Some(true), "{facts:?}");
    assert!(works, "statx promised atomic writes but RWF_ATOMIC failed");
}

#[test]
fn rwf_atomic_is_absent_on_ext4() {
    let Some((facts, works)) = atomic_writes("ext4") else {
        return;
    };
    assert_ne!(facts.atomic_write_covers(16384), Some(true), "{facts:?}");
    assert!(!works, "ext4 accepted an RWF_ATOMIC write on a loop device");
}

#[test]
fn o_direct_refusal_becomes_invalid_options_not_einval() {
    // tmpfs before Linux 6.6 refused O_DIRECT; where it accepts it, there is nothing to see.
    let dir = std::path::Path::new("/dev/shm");
    if !dir.is_dir() {
        return skip("o_direct_refusal", "no /dev/shm");
    }
    let facts = DeviceFacts::for_dir(dir).expect("facts");
    if facts.direct_io != Some(false) {
        return skip("o_direct_refusal", "this kernel's tmpfs accepts O_DIRECT");
    }
    let err = FileStorage::new().create(&dir.join("tilldb-direct-test"), FlushMethod::Direct);
    assert!(matches!(err, Err(Error::InvalidOptions(_))), "{err:?}");
}

/// The atomic torn-page guard on real devices: on XFS (atomic writes of 16 KiB) a database
/// made with it commits, closes, recovers from a dropped handle and keeps every commit; on ext4
/// (no atomic writes) creating one is refused with an error that names the way out.
fn atomic_guard_database(fs: &str) -> Option<tilldb::Result<Vec<Option<Vec<u8>>>>> {
    let mnt = match LoopMount::new(fs, 4096) {
        Ok(m) => m,
        Err(why) => {
            skip_missing(&format!("atomic_guard_{fs}"), &why);
            return None;
        }
    };
    let dir = mnt.mount.join("db");
    let options = tilldb::Options {
        torn_page_guard: tilldb::TornPageGuard::Atomic,
        flush_method: Some(tilldb::FlushMethod::Fdatasync),
        cache_bytes: 16 * 16384,
        ..tilldb::Options::default()
    };
    let run = || -> tilldb::Result<Vec<Option<Vec<u8>>>> {
        let db = tilldb::Db::open(&dir, options.clone())?;
        for i in 0..300u32 {
            let mut txn = db.begin()?;
            txn.put(format!("key{i:05}").as_bytes(), &[7u8; 500])?;
            txn.commit()?;
        }
        db.checkpoint()?; // pages written with RWF_ATOMIC
        db.close()?;
        let db = tilldb::Db::open(&dir, options.clone())?;
        db.check()?;
        (0..300u32)
            .map(|i| db.get(format!("key{i:05}").as_bytes()))
            .collect()
    };
    Some(run())
}

#[test]
fn the_atomic_guard_works_on_xfs() {
    let Some(result) = atomic_guard_database("xfs") else {
        return;
    };
    let values = result.expect("an atomic-guard database on XFS");
    assert!(values.iter().all(|v| v.as_deref() == Some(&[7u8; 500][..])));
}

#[test]
fn the_atomic_guard_is_refused_on_ext4() {
    let Some(result) = atomic_guard_database("ext4") else {
        return;
    };
    let err = result.expect_err("ext4 has no atomic writes");
    let text = err.to_string();
    assert!(text.contains("atomic"), "{text}");
    assert!(
        text.contains("full-page-images"),
        "the way out is named: {text}"
    );
}
