//! I/O errors while the log is written: a failed write or flush poisons the log (every later
//! commit fails, naming the failure), is never retried, and nothing it did not acknowledge is
//! recovered as acknowledged.

use super::{DIR, disk, open, payload, recovered_ids};
use std::path::Path;
use tilldb::io::{CrashMode, Fault, FaultKind, IoKind, Storage};
use tilldb::{Durability, Error};

fn poisoned_after(fault: &Fault, durability: Durability) {
    let disk = disk();
    let (wal, _) = open(&disk);
    for i in 0..3 {
        wal.commit(&payload(i), Durability::Sync)
            .expect("healthy commit");
    }
    // The fault goes on the active segment (the oldest file: no switch happened yet), not on
    // any ".wal" file: the log's background thread prepares the spare segment and flushes it
    // at about this time, and that flush took a ".wal" fault in place of the commit's flush
    // in some runs, so the failing commit was rightly acknowledged and the test failed.
    let active = disk
        .list_dir(Path::new(DIR))
        .expect("ls")
        .first()
        .cloned()
        .expect("a segment");
    disk.inject(fault.clone().on_path(active));
    let failed = wal.commit(&payload(3), durability).and_then(|_| wal.sync());
    assert!(
        failed.is_err(),
        "{fault:?}: the failing commit was acknowledged"
    );
    for i in 4..6 {
        match wal.commit(&payload(i), durability) {
            Err(e) if e.is_poisoned() => {
                // It names the failure that stopped the log.
                assert!(matches!(e, Error::PoisonedBy { .. }), "{fault:?}: {e}");
            }
            other => panic!("{fault:?}: commit after a failed I/O returned {other:?}"),
        }
    }
    assert!(wal.sync().is_err_and(|e| e.is_poisoned()));
    drop(wal);
    disk.clear_faults();
    disk.crash(CrashMode::PowerLoss {
        tear_bytes: 512,
        garbage: false,
    });
    let (ids, _) = recovered_ids(&disk);
    assert!(
        ids.starts_with(&[0, 1, 2]),
        "{fault:?}: lost acknowledged commits: {ids:?}"
    );
    assert!(
        ids.len() <= 4,
        "{fault:?}: unacknowledged records after the failure: {ids:?}"
    );
}

#[test]
fn eio_on_write_poisons_the_log() {
    poisoned_after(
        &Fault::once(IoKind::Write, 1, FaultKind::Eio),
        Durability::Sync,
    );
    poisoned_after(
        &Fault::once(IoKind::Write, 1, FaultKind::Enospc),
        Durability::Buffered,
    );
    poisoned_after(
        &Fault::once(IoKind::Write, 1, FaultKind::ShortWrite),
        Durability::Sync,
    );
}

#[test]
fn eio_on_flush_poisons_the_log_and_is_never_retried() {
    poisoned_after(
        &Fault::once(IoKind::Flush, 1, FaultKind::Eio),
        Durability::Sync,
    );
    // Linux semantics: the failed fsync dropped the data, and a retry would say all is well.
    poisoned_after(
        &Fault::once(IoKind::Flush, 1, FaultKind::FlushLosesData),
        Durability::Sync,
    );
}

#[test]
fn a_background_flush_failure_poisons_lazy_commits() {
    let disk = disk();
    let (wal, _) = open(&disk);
    wal.commit(&payload(0), Durability::Sync).expect("healthy");
    disk.inject(Fault::persistent(IoKind::Flush, 1, FaultKind::Eio).on_path(".wal"));
    wal.commit(&payload(1), Durability::Lazy)
        .expect("lazy commits do not wait");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match wal.commit(&payload(2), Durability::Lazy) {
            Err(e) if e.is_poisoned() => break,
            Ok(_) => assert!(
                std::time::Instant::now() < deadline,
                "background flush failure never surfaced"
            ),
            Err(e) => panic!("{e}"),
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}
