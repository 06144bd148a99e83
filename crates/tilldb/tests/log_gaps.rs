//! A log with records missing at its start or in its middle is loss, never a clean open with
//! fewer commits (issue 24).
//!
//! The story: 240 commits, a kill, the oldest log segment (the one holding the checkpoint's
//! redo point) deleted, then an open: it succeeded, `check()` passed, and 40 of the 240
//! acknowledged commits were there, without an error. Recovery checked that the log ends at or
//! after the checkpoint, not that it begins at or before it, so redo replayed nothing of what
//! was lost. Now the open refuses with `Error::LogMissing`, naming the first segment present
//! and the missing lsn range.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use tilldb::io::{CrashMode, SimConfig, SimDisk, Storage};
use tilldb::{Db, Error, Options};

const COMMITS: u32 = 240;
const DIR: &str = "/db";

fn options() -> Options {
    Options {
        background_threads: false,
        ..Options::for_tests()
    }
}

fn open(disk: &SimDisk) -> tilldb::Result<Db> {
    Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options())
}

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:05}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    vec![u8::try_from(i % 251).expect("small"); 8000]
}

/// 240 acknowledged commits of 8 KB each (more than one 1 MiB log segment, less than the
/// 2 MiB that starts a checkpoint), then a kill: the redo point is in the oldest segment.
fn crashed_database() -> SimDisk {
    let disk = SimDisk::new(SimConfig::default());
    let db = open(&disk).expect("create");
    for i in 0..COMMITS {
        let mut txn = db.begin().expect("begin");
        txn.put(&key(i), &value(i)).expect("put");
        txn.commit().expect("commit");
    }
    std::mem::forget(db);
    disk.crash(CrashMode::ProcessKill);
    disk
}

fn segments(disk: &SimDisk) -> Vec<PathBuf> {
    let wal = Path::new(DIR).join("wal");
    disk.list_dir(&wal)
        .expect("list wal")
        .into_iter()
        .filter(|n| Path::new(n).extension().is_some_and(|e| e == "wal"))
        .map(|n| wal.join(n))
        .collect()
}

/// Opens and reads every key: the open refuses, or every commit reads back exactly (an open
/// that succeeds and then fails or misses reads is the bug: it found the loss too late).
fn exact_or_refused(disk: &SimDisk, case: &str) -> Result<(), String> {
    let db = open(disk).map_err(|e| e.to_string())?;
    for i in 0..COMMITS {
        match db.get(&key(i)) {
            Ok(Some(v)) if v == value(i) => {}
            other => panic!(
                "{case}: opened without an error, but commit {i} reads {:?}",
                other.map(|v| v.map(|v| v.len()))
            ),
        }
    }
    db.check()
        .map_err(|e| format!("{case}: opened, then the check failed: {e}"))?;
    Ok(())
}

#[test]
fn a_log_starting_after_the_checkpoint_is_refused_naming_the_missing_range() {
    let disk = crashed_database();
    let segments = segments(&disk);
    assert!(segments.len() >= 2, "the log spans segments: {segments:?}");
    disk.remove(&segments[0])
        .expect("delete the oldest segment");
    disk.flush_dir(&Path::new(DIR).join("wal")).expect("flush");
    match open(&disk) {
        Err(e @ Error::LogMissing { .. }) => {
            let Error::LogMissing {
                file,
                from_lsn,
                to_lsn,
            } = &e
            else {
                unreachable!()
            };
            assert_eq!(file, &segments[1], "names the first segment still there");
            assert!(from_lsn < to_lsn, "{e}");
            let text = e.to_string();
            assert!(text.contains(&format!("{from_lsn}")), "{text}");
            assert!(text.contains(&format!("{to_lsn}")), "{text}");
            assert!(text.contains(&segments[1].display().to_string()), "{text}");
        }
        Err(e) => panic!("refused, but not as missing log: {e}"),
        Ok(db) => {
            let present = (0..COMMITS)
                .filter(|&i| db.get(&key(i)).ok().flatten().is_some())
                .count();
            panic!("opened with {present} of {COMMITS} acknowledged commits and no error");
        }
    }
}

/// Every segment removed in turn: each open holds every commit or fails; none opens short.
#[test]
fn every_log_segment_removed_in_turn_is_refused_or_not_needed() {
    let base = crashed_database();
    let all = segments(&base);
    let mut refused = 0;
    for (n, segment) in all.iter().enumerate() {
        let disk = base.fork(n as u64);
        disk.remove(segment).expect("remove");
        disk.flush_dir(&Path::new(DIR).join("wal")).expect("flush");
        let case = format!("{} removed", segment.display());
        match exact_or_refused(&disk, &case) {
            Ok(()) => println!("{case}: not needed, every commit read back"),
            Err(e) => {
                println!("{case}: refused: {e}");
                refused += 1;
            }
        }
    }
    assert!(
        refused >= 1,
        "the segments holding commits are needed: {all:?}"
    );
}

/// Issue 24, item 2: one checkpoint that frees five or more log segments, crashed (power
/// cut or kill) at every write, flush, rename, remove and directory flush it makes, and
/// separately failed with `EIO` at each; after a reopen every acknowledged commit is there.
/// Releasing the segments before the new header is durable (a defect only the random tier
/// caught, by chance) loses the log the old header still needs.
///
/// Since issue 34 that checkpoint is the one the open makes after replaying the log (an
/// explicit `checkpoint()` after it finds nothing to free: this test injected its faults
/// there, saw two calls and let the mutant `release-before-header` survive), so the faults
/// go to every call of the recovering open, its checkpoint included.
#[test]
fn a_checkpoint_freeing_many_segments_crashed_or_failed_at_every_step_loses_nothing() {
    use tilldb::io::{Fault, FaultKind, IoKind};
    // Many segments of log after the checkpoint: 6 MiB of commits with checkpoints only by
    // hand, then a kill.
    let big = Options {
        checkpoint_log_bytes: 64 << 20,
        ..options()
    };
    let open_big =
        |disk: &SimDisk| Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), big.clone());
    let base = SimDisk::new(SimConfig::default());
    let commits: u32 = 800;
    {
        let db = open_big(&base).expect("create");
        for i in 0..commits {
            let mut txn = db.begin().expect("begin");
            txn.put(&key(i), &value(i)).expect("put");
            txn.commit().expect("commit");
        }
        std::mem::forget(db);
        base.crash(CrashMode::ProcessKill);
    }
    let before = chain_len(&base);
    assert!(
        before >= 6,
        "the log recovery reads spans {before} segments"
    );
    let kinds = [
        IoKind::Write,
        IoKind::Flush,
        IoKind::Rename,
        IoKind::Remove,
        IoKind::FlushDir,
        IoKind::Create,
    ];
    // The calls of each kind the recovering open makes (its checkpoint's among them),
    // counted on a fork without faults.
    let counted = base.fork(1);
    let calls_before: Vec<u64> = kinds.iter().map(|&k| counted.call_count(k)).collect();
    let db = open_big(&counted).expect("recover");
    let calls: Vec<u64> = kinds
        .iter()
        .zip(&calls_before)
        .map(|(&k, b)| counted.call_count(k) - b)
        .collect();
    drop(db);
    let freed = before - chain_len(&counted);
    println!("a recovering open whose checkpoint frees segments: calls {kinds:?} = {calls:?}");
    assert!(freed >= 5, "the checkpoint freed {freed} segments");
    let removes = calls[3];
    assert!(
        removes >= 1 || calls[2] >= 1,
        "the checkpoint released no segment by a remove or a rename: {calls:?}"
    );
    let mut cases = 0;
    for (&kind, &count) in kinds.iter().zip(&calls) {
        for nth in 1..=count {
            for (fault, mode) in [
                (FaultKind::Crash, CrashMode::ProcessKill),
                (
                    FaultKind::Crash,
                    CrashMode::PowerLoss {
                        tear_bytes: 512,
                        garbage: true,
                    },
                ),
                (FaultKind::Eio, CrashMode::ProcessKill),
            ] {
                let case = format!("{fault:?} at {kind:?} {nth} of {count}, then {mode:?}");
                let disk = base.fork(cases);
                disk.inject(Fault::once(kind, nth, fault));
                let result = open_big(&disk);
                assert!(
                    result.is_err() || disk.faults_pending() == 0,
                    "{case}: the fault never fired"
                );
                if let Ok(db) = result {
                    std::mem::forget(db);
                }
                disk.clear_faults();
                disk.crash(mode);
                let db = open_big(&disk).unwrap_or_else(|e| panic!("{case}: reopen: {e}"));
                for i in 0..commits {
                    assert_eq!(
                        db.get(&key(i))
                            .unwrap_or_else(|e| panic!("{case}: get {i}: {e}")),
                        Some(value(i)),
                        "{case}: commit {i}"
                    );
                }
                db.check().unwrap_or_else(|e| panic!("{case}: check: {e}"));
                cases += 1;
            }
        }
    }
    println!("checkpoint crash cases: {cases}, each freeing {freed} segments when it completes");
}

fn chain_len(disk: &SimDisk) -> usize {
    common::redo_segments(disk, Path::new(DIR))
}

/// Issue 23: a failed directory flush is a failed flush. After removing surplus segments a
/// checkpoint ignored it, and commits went on being acknowledged on a directory in an
/// unknown state. The checkpoint fails and stops the database now (fail-stop), and reopening
/// recovers every acknowledged commit. (The preparer's side: `wal_recovery.rs`,
/// `a_background_preparation_whose_directory_flush_failed_stops_the_log`.)
#[test]
fn a_failed_directory_flush_after_removing_segments_stops_the_database() {
    use tilldb::io::{Fault, FaultKind, IoKind};
    let wal_text = Path::new(DIR).join("wal").to_string_lossy().into_owned();
    let big = Options {
        checkpoint_log_bytes: 64 << 20,
        ..options()
    };
    let disk = SimDisk::new(SimConfig::default());
    let open = || Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), big.clone());
    let db = open().expect("create");
    for i in 0..800 {
        let mut txn = db.begin().expect("begin");
        txn.put(&key(i), &value(i)).expect("put");
        txn.commit().expect("commit");
    }
    disk.inject(Fault::once(IoKind::FlushDir, 1, FaultKind::Eio).on_path(&wal_text));
    let removes = disk.call_count(IoKind::Remove);
    assert!(
        db.checkpoint().is_err(),
        "the checkpoint's directory flush failed"
    );
    assert!(
        disk.call_count(IoKind::Remove) > removes,
        "it removed segments first"
    );
    assert_eq!(disk.faults_pending(), 0);
    let after = db.begin().and_then(|mut txn| {
        txn.put(b"after", b"x")?;
        txn.commit()
    });
    assert!(
        after.is_err(),
        "a commit acknowledged after a failed directory flush"
    );
    std::mem::forget(db);
    disk.crash(CrashMode::PowerLoss {
        tear_bytes: 512,
        garbage: false,
    });
    let db = open().expect("reopen");
    for i in 0..800 {
        assert_eq!(db.get(&key(i)).expect("get"), Some(value(i)), "commit {i}");
    }
}
