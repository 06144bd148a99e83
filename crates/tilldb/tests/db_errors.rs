//! Error loops (TESTPLAN F2-F4, issue 6): the k-th call of each kind of I/O fails, once or
//! from then on, with each error a call of that kind can have, while a store commits. After
//! every case:
//! - once a commit has failed on a failed write or flush, no later commit is acknowledged
//!   (fail-stop: after a failed fsync Linux may have dropped the data, and a retried flush
//!   would say all is well); for other kinds the commits stop at the first failure;
//! - with the faults cleared and the machine crashed (a kill, or a power cut that tears), the
//!   database opens and holds exactly the model after n commits, for some n between the
//!   acknowledged and the attempted count: nothing acknowledged lost, nothing half applied;
//! - its trees check.
//!
//! Every position: a fault-free run of the same commits counts the calls of each kind (with
//! background threads off, so the k-th call is the same call in every run), and each kind's
//! fault is tried at every k up to that count. A failure names its case;
//! `DB_ERRORS_POSITIONS=n` caps the positions per kind at n.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use tilldb::io::{CrashMode, Fault, FaultKind, IoKind, SimConfig, SimDisk};
use tilldb::{Db, Direction, Options};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Commits per case, after a warm-up of `WARM`.
const COMMITS: u64 = 40;
const WARM: u64 = 6;

fn options() -> Options {
    // Tiny cache, segments and checkpoint distance: every kind of I/O happens in a few
    // dozen commits (write-back, doublewrite batches, segment creation and recycling).
    let defaults = Options::for_tests();
    Options {
        cache_bytes: 8 * 4096,
        checkpoint_log_bytes: 16 << 10,
        wal: tilldb::WalOptions {
            segment_bytes: 8 << 10,
            ..defaults.wal.clone()
        },
        // Every call on the committing thread, in program order: the k-th call of a kind is
        // the same call in every run, so trying every k tries every call.
        background_threads: false,
        ..defaults
    }
}

/// Commit `c`: three puts over 200 keys (values 40-240 bytes), so pages split and fill.
const PUTS: common::Puts = common::Puts {
    keys: 200,
    key_step: 7,
    len_step: 17,
    len_span: 200,
};

fn open(disk: &SimDisk) -> tilldb::Result<Db> {
    Db::open_with_storage(Arc::new(disk.clone()), Path::new("/db"), options())
}

fn state(db: &Db) -> Model {
    db.scan(Bound::Unbounded, Bound::Unbounded, Direction::Forward)
        .expect("scan")
        .into_iter()
        .collect()
}

fn commit(db: &Db, c: u64) -> tilldb::Result<()> {
    let mut txn = db.begin()?;
    for (k, v) in PUTS.commit(c) {
        txn.put(&k, &v)?;
    }
    txn.commit()
}

/// Runs commits `first..first + count`, every one of them, and returns (acknowledged,
/// attempted): the commits before the first failure, and those up to it (a failed commit may
/// be in the log). Panics if a commit is acknowledged after one failed: fail-stop.
fn run(db: &Db, first: u64, count: u64, case: &str) -> (u64, u64) {
    let mut acknowledged = first;
    let mut failed_at = None;
    for c in first..first + count {
        match (commit(db, c).is_ok(), failed_at) {
            (true, None) => acknowledged = c + 1,
            (true, Some(f)) => {
                panic!("{case}: commit {c} acknowledged after commit {f} failed (fail-stop)")
            }
            (false, None) => failed_at = Some(c),
            (false, Some(_)) => {}
        }
    }
    (acknowledged, failed_at.map_or(first + count, |f| f + 1))
}

fn run_case(kind: IoKind, fault: FaultKind, persistent: bool, nth: u64) {
    let case = format!(
        "{kind:?} {fault:?} nth {nth}{}",
        if persistent { " persistent" } else { "" }
    );
    let disk = SimDisk::new(SimConfig {
        seed: nth,
        ..SimConfig::default()
    });
    let db = open(&disk).unwrap_or_else(|e| panic!("{case}: create: {e}"));
    let (warm, _) = run(&db, 0, WARM, &case);
    assert_eq!(warm, WARM, "{case}: warm-up failed");
    disk.inject(if persistent {
        Fault::persistent(kind, nth, fault)
    } else {
        Fault::once(kind, nth, fault)
    });
    let (acknowledged, attempted) =
        if matches!(kind, IoKind::Write | IoKind::Flush | IoKind::FlushDir) {
            run(&db, WARM, COMMITS, &case)
        } else {
            run_lenient(&db, WARM, COMMITS)
        };
    std::mem::forget(db); // a crash: no checkpoint, no close
    disk.clear_faults();
    let mode = if nth.is_multiple_of(2) {
        CrashMode::ProcessKill
    } else {
        CrashMode::PowerLoss {
            tear_bytes: 512,
            garbage: nth % 4 == 1,
        }
    };
    disk.crash(mode);
    let db = open(&disk).unwrap_or_else(|e| panic!("{case} {mode:?}: recovery failed: {e}"));
    db.check()
        .unwrap_or_else(|e| panic!("{case} {mode:?}: tree check failed: {e}"));
    let recovered = state(&db);
    let n = (acknowledged..=attempted)
        .find(|&n| PUTS.model_after(n) == recovered)
        .unwrap_or_else(|| {
            panic!(
                "{case} {mode:?}: the state is the model after no n in {acknowledged}..={attempted}"
            )
        });
    // And it goes on.
    let (again, _) = run(&db, n, 3, &case);
    assert_eq!(again, n + 3, "{case}: commits after recovery failed");
}

/// For faults that need not stop the database (a failed read, a failed directory call): the
/// commits run until the first failure, which the oracle then treats as attempted.
fn run_lenient(db: &Db, first: u64, count: u64) -> (u64, u64) {
    for c in first..first + count {
        if commit(db, c).is_err() {
            return (c, c + 1);
        }
    }
    (first + count, first + count)
}

/// Calls of each kind the commits after the warm-up make, without faults.
fn calls_per_kind() -> BTreeMap<IoKind, u64> {
    let disk = SimDisk::new(SimConfig::default());
    let db = open(&disk).expect("create");
    let (warm, _) = run(&db, 0, WARM, "count");
    assert_eq!(warm, WARM);
    let before: Vec<u64> = IoKind::ALL.iter().map(|&k| disk.call_count(k)).collect();
    let (done, _) = run(&db, WARM, COMMITS, "count");
    assert_eq!(done, WARM + COMMITS);
    std::mem::forget(db);
    IoKind::ALL
        .iter()
        .zip(before)
        .map(|(&k, b)| (k, disk.call_count(k) - b))
        .collect()
}

#[test]
fn every_io_error_at_every_position_stops_acknowledgements_and_loses_nothing() {
    let cap: u64 = std::env::var("DB_ERRORS_POSITIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(u64::MAX);
    let calls = calls_per_kind();
    println!("db_errors: calls per kind in {COMMITS} commits: {calls:?}");
    let mut cases = 0;
    for kind in IoKind::ALL {
        // Every call of the kind, and one past the last (the fault never fires).
        let positions = (calls[&kind] + 1).min(cap);
        let faults: &[FaultKind] = match kind {
            IoKind::Write => &[FaultKind::Eio, FaultKind::Enospc, FaultKind::ShortWrite],
            IoKind::Flush => &[FaultKind::Eio, FaultKind::FlushLosesData],
            _ => &[FaultKind::Eio, FaultKind::Enospc],
        };
        for &fault in faults {
            for persistent in [false, true] {
                for nth in 1..=positions {
                    run_case(kind, fault, persistent, nth);
                    cases += 1;
                }
            }
        }
    }
    println!("db_errors: {cases} cases, each crashed, recovered and checked");
}
