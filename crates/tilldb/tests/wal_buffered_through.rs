//! `Buffered` under a write-through flush method (`dsync`, `direct-dsync`; issue 37), and
//! under `direct`: a buffered commit goes through the segment's second, buffered handle and
//! costs no device write; the next `Sync` commit or interval flush makes it durable with an `fdatasync`
//! before anything is written through, so a power cut never keeps a later record and loses
//! an earlier one.

use std::path::Path;
use std::sync::Arc;
use tilldb::internals::wal::{Wal, WalOptions};
use tilldb::io::{CrashMode, SimConfig, SimDisk, Storage};
use tilldb::{Durability, FlushMethod};

const DIR: &str = "/db/wal";

/// The methods whose segments have a buffered handle (`Segment::buffered`).
const BUFFERED_HANDLE_METHODS: [FlushMethod; 3] = [
    FlushMethod::Dsync,
    FlushMethod::DirectDsync,
    FlushMethod::Direct,
];

/// Reopens the log in `dir` on `storage` and reads every record's payload back.
fn reopen_and_read(storage: Arc<dyn Storage>, dir: &Path, options: WalOptions) -> Vec<Vec<u8>> {
    let (wal, recovery) = Wal::open(storage, dir, options).expect("reopen");
    let back = wal
        .read_from(recovery.start_lsn)
        .expect("read")
        .into_iter()
        .map(|r| r.payload)
        .collect();
    wal.close().expect("close");
    back
}

fn options(method: FlushMethod) -> WalOptions {
    WalOptions {
        flush_method: method,
        background_threads: false,
        ..WalOptions::for_tests()
    }
}

fn config(seed: u64) -> SimConfig {
    SimConfig {
        seed,
        ..SimConfig::default()
    }
}

/// Records of 300-1,800 bytes in 512-byte log blocks: four of them fill several blocks, so
/// a later write of the open block does not rewrite (and so make durable) the full ones.
fn payload(i: u8) -> Vec<u8> {
    vec![i; 300 + usize::from(i) * 150]
}

/// Buffered commits are written, not durable: no write went through to the device.
#[test]
fn buffered_commits_under_write_through_methods_are_written_not_durable() {
    for method in [FlushMethod::Dsync, FlushMethod::DirectDsync] {
        let disk: Arc<dyn Storage> = Arc::new(SimDisk::new(config(1)));
        let (wal, recovery) = Wal::open(disk, Path::new(DIR), options(method)).expect("open");
        let start = wal.durable_lsn();
        assert_eq!(start, recovery.end_lsn);
        let mut last = start;
        for i in 0..5 {
            last = wal
                .commit(&payload(i), Durability::Buffered)
                .expect("commit");
        }
        assert!(wal.written_lsn() >= last, "{method}: Buffered not written");
        assert_eq!(
            wal.durable_lsn(),
            start,
            "{method}: a Buffered commit was written through to the device"
        );
        assert_eq!(wal.stats().through_writes, 0, "{method}");
        let sync = wal.commit(&payload(9), Durability::Sync).expect("sync");
        assert!(wal.durable_lsn() >= sync, "{method}");
        assert_eq!(
            wal.stats().through_writes,
            0,
            "{method}: the first Sync write after buffered ones is buffered and flushed"
        );
        // The log durable again as far as written: the next Sync write goes through.
        let flushes = wal.stats().flushes;
        let again = wal.commit(&payload(10), Durability::Sync).expect("sync");
        assert!(wal.durable_lsn() >= again);
        assert_eq!(
            wal.stats().flushes,
            flushes,
            "{method}: a Sync write after a durable log needs no separate flush"
        );
        assert_eq!(wal.stats().through_writes, 1, "{method}");
        wal.close().expect("close");
    }
}

/// Buffered commits, then a Sync one, acknowledged; the power goes (each unflushed write
/// kept, dropped or torn, over many seeds): every record up to the Sync one is there. A
/// Sync write that went through while the buffered ones were unflushed could survive them:
/// a hole before it, and the acknowledged commit lost (mutant `buffered-then-through`).
#[test]
fn a_sync_commit_after_buffered_ones_survives_a_power_cut_with_them() {
    for method in BUFFERED_HANDLE_METHODS {
        for seed in 0..40 {
            let sim = Arc::new(SimDisk::new(config(seed)));
            let disk: Arc<dyn Storage> = sim.clone();
            let (wal, _) =
                Wal::open(Arc::clone(&disk), Path::new(DIR), options(method)).expect("open");
            for i in 0..4 {
                wal.commit(&payload(i), Durability::Buffered)
                    .expect("buffered");
            }
            wal.commit(&payload(4), Durability::Sync).expect("sync");
            std::mem::forget(wal);
            sim.crash(CrashMode::PowerLoss {
                tear_bytes: 512,
                garbage: true,
            });
            let back = reopen_and_read(disk, Path::new(DIR), options(method));
            let expected: Vec<Vec<u8>> = (0..5).map(payload).collect();
            assert_eq!(
                back, expected,
                "{method} seed {seed}: a Sync commit and the Buffered ones before it"
            );
        }
    }
}

/// A process kill keeps Buffered commits (they are in the kernel's page cache, written
/// through the buffered handle), under a write-through method as under `fdatasync`.
#[test]
fn buffered_commits_under_write_through_methods_survive_a_process_kill() {
    for method in BUFFERED_HANDLE_METHODS {
        let sim = Arc::new(SimDisk::new(config(3)));
        let disk: Arc<dyn Storage> = sim.clone();
        let (wal, _) = Wal::open(Arc::clone(&disk), Path::new(DIR), options(method)).expect("open");
        for i in 0..6 {
            wal.commit(&payload(i), Durability::Buffered)
                .expect("buffered");
        }
        std::mem::forget(wal);
        sim.crash(CrashMode::ProcessKill);
        let back = reopen_and_read(disk, Path::new(DIR), options(method));
        assert_eq!(back.len(), 6, "{method}");
    }
}

/// On real files: Buffered and Sync commits mixed under the write-through methods (the
/// buffered handle's page-cache writes and the log handle's direct writes of the same
/// blocks), closed and reopened, come back in order.
#[test]
fn buffered_and_sync_commits_mixed_on_real_files_come_back_in_order() {
    for method in BUFFERED_HANDLE_METHODS {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("wal");
        let options = WalOptions {
            flush_method: method,
            log_block_bytes: Some(4096),
            segment_bytes: 64 << 10,
            ..WalOptions::for_tests()
        };
        let storage: Arc<dyn Storage> = Arc::new(tilldb::io::FileStorage::new());
        let (wal, _) = match Wal::open(Arc::clone(&storage), &dir, options.clone()) {
            Ok(opened) => opened,
            Err(tilldb::Error::InvalidOptions(why)) if method.is_direct() => {
                println!("SKIPPED {method} on {}: {why}", tmp.path().display());
                continue;
            }
            Err(e) => panic!("{method}: open: {e}"),
        };
        let mut expected = Vec::new();
        for i in 0..300u32 {
            let p = vec![u8::try_from(i % 251).expect("small"); 50 + (i as usize * 97) % 3000];
            let durability = if i % 5 == 4 {
                Durability::Sync
            } else {
                Durability::Buffered
            };
            wal.commit(&p, durability).expect("commit");
            expected.push(p);
        }
        wal.close().expect("close");
        let back = reopen_and_read(storage, &dir, options);
        assert_eq!(back.len(), expected.len(), "{method}");
        assert!(back == expected, "{method}: records differ");
    }
}
