//! The store crashed at every kind of point: the simulated disk dies at the k-th write or
//! flush (inside commits, write-back, doublewrite batches, checkpoints, log switches), then a
//! process kill or a power cut (unflushed writes dropped or torn per 512 B or 4 KiB sector)
//! follows. After recovery (TESTPLAN oracle 1, 2, 3, 8):
//! - the state equals the model after the first n commits, for some n at least the number of
//!   acknowledged `Sync` commits and at most the number attempted: nothing acknowledged is
//!   lost, nothing is half applied;
//! - the tree checks;
//! - the database accepts and keeps new commits, across a second crash and recovery.
//!
//! A failure names its seed; rerun one with `DB_CRASH_SEED=n cargo test --test db_crash`.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use tilldb::io::{CrashMode, Fault, FaultKind, IoKind, SimConfig, SimDisk};
use tilldb::{Db, Direction, Options};

type Model = BTreeMap<(String, Vec<u8>), Vec<u8>>;
/// One change of a commit: table, key, new value (`None`: delete).
type Op = (String, Vec<u8>, Option<Vec<u8>>);

/// The tables commits write to; `""` is the default table.
const TABLES: [&str; 3] = ["", "left", "right"];

/// Commit `c` of seed `seed`: a few puts and deletes over a small key space, so pages split,
/// merge and get reused.
fn commit_ops(seed: u64, commit: u64) -> Vec<Op> {
    let mut state =
        seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ commit.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let mut next = move || {
        state ^= state >> 31;
        state = state.wrapping_mul(0x94D0_49BB_1331_11EB);
        state ^= state >> 29;
        state
    };
    (0..=(next() % 12))
        .map(|_| {
            let table = TABLES[usize::try_from(next() % 3).expect("small")].to_owned();
            let key = format!("k{:04}", next() % 600).into_bytes();
            let roll = next();
            let value = (roll % 5 != 0).then(|| {
                let mut value = format!("c{commit}-").into_bytes();
                value.resize(8 + usize::try_from(roll % 300).expect("small"), b'v');
                value
            });
            (table, key, value)
        })
        .collect()
}

fn apply(model: &mut Model, ops: &[Op]) {
    for (t, k, v) in ops {
        match v {
            Some(v) => model.insert((t.clone(), k.clone()), v.clone()),
            None => model.remove(&(t.clone(), k.clone())),
        };
    }
}

fn options() -> Options {
    // A small cache so write-back and eviction happen; checkpoints every 256 KiB of log.
    Options {
        cache_bytes: 32 * 4096,
        checkpoint_log_bytes: 1 << 20,
        ..Options::for_tests()
    }
}

fn open(disk: &SimDisk, seed: u64, phase: &str) -> Db {
    Db::open_with_storage(Arc::new(disk.clone()), Path::new("/db"), options())
        .unwrap_or_else(|e| panic!("seed {seed}, {phase}: recovery failed: {e}"))
}

/// Runs commits until the disk dies (or `count` are done); returns how many were
/// acknowledged and how many were attempted.
fn run(db: &Db, seed: u64, first: u64, count: u64) -> (u64, u64) {
    let mut acknowledged = first;
    for c in first..first + count {
        let Ok(mut txn) = db.begin() else {
            return (acknowledged, c);
        };
        for (t, k, v) in commit_ops(seed, c) {
            match v {
                Some(v) => txn.put_in(&t, &k, &v).expect("put into the write set"),
                None => txn.delete_in(&t, &k).expect("delete from the write set"),
            }
        }
        if txn.commit().is_err() {
            return (acknowledged, c + 1);
        }
        acknowledged = c + 1;
    }
    (acknowledged, first + count)
}

fn state(db: &Db) -> Model {
    let mut model = Model::new();
    for table in TABLES {
        let entries = db.scan_in(
            table,
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
        );
        for (k, v) in entries.expect("scan") {
            model.insert((table.to_owned(), k), v);
        }
    }
    model
}

/// The recovered state must be the model after some n commits with low <= n <= high.
fn matching_prefix(seed: u64, recovered: &Model, low: u64, high: u64) -> u64 {
    let mut model = Model::new();
    for c in 0..low {
        apply(&mut model, &commit_ops(seed, c));
    }
    for n in low..=high {
        if &model == recovered {
            return n;
        }
        apply(&mut model, &commit_ops(seed, n));
    }
    panic!(
        "seed {seed}: recovered state is no prefix of commits {low}..={high} (lost an acknowledged commit, or half applied one)"
    );
}

fn run_seed(seed: u64) {
    let disk = SimDisk::new(SimConfig {
        seed,
        ..SimConfig::default()
    });
    let db = open(&disk, seed, "create");
    // Warm up, so the crash lands in a database with history, then arm the fault.
    let (warm, _) = run(&db, seed, 0, 20);
    assert_eq!(warm, 20, "seed {seed}: warm-up failed");
    let kind = if seed.is_multiple_of(2) {
        IoKind::Write
    } else {
        IoKind::Flush
    };
    disk.inject(Fault::once(kind, 1 + seed % 97, FaultKind::Crash));
    let (acknowledged, attempted) = run(&db, seed, 20, 60);
    drop(db);
    disk.clear_faults();
    // Garbage sectors included: the log pads every group to a block boundary, so no write
    // touches a block with acknowledged records (before padding, seed 29 lost commits here).
    let mode = common::crash_mode(seed);
    disk.crash(mode);
    let db = open(&disk, seed, "first crash");
    db.check()
        .unwrap_or_else(|e| panic!("seed {seed} {mode:?}: tree check failed: {e}"));
    let n = matching_prefix(seed, &state(&db), acknowledged, attempted);
    // The database goes on, and survives a second crash.
    let (again, _) = run(&db, seed, n, 5);
    assert_eq!(again, n + 5, "seed {seed}: commits after recovery failed");
    drop(db);
    disk.crash(CrashMode::PowerLoss {
        tear_bytes: 512,
        garbage: false,
    });
    let db = open(&disk, seed, "second crash");
    matching_prefix(seed, &state(&db), n + 5, n + 5);
}

#[test]
fn crashes_at_random_points_lose_no_acknowledged_commit_and_half_apply_none() {
    if let Ok(seed) = std::env::var("DB_CRASH_SEED") {
        return run_seed(seed.parse().expect("DB_CRASH_SEED is a number"));
    }
    let seeds: u64 = std::env::var("DB_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    for seed in 0..seeds {
        run_seed(seed);
    }
    println!("db_crash: {seeds} seeds, each crashed twice and recovered");
}

/// Found by the crash test (seed 30, only under CPU contention): a page is allocated in memory
/// at commit, but the data file is extended only when the page is first written back. A power
/// cut during that extension left garbage at the place of a page whose `Format` was already
/// durable in the log, and redo reported it as corruption instead of rebuilding the page from
/// the log. Here the garbage is put there by hand.
#[test]
fn garbage_at_a_page_the_log_creates_is_rebuilt_not_corruption() {
    let disk = SimDisk::new(SimConfig::default());
    let db = open(&disk, 0, "create");
    let mut txn = db.begin().expect("begin");
    for i in 0..300u32 {
        txn.put_in("", format!("key{i:05}").as_bytes(), &[7u8; 100])
            .expect("put");
    }
    txn.commit().expect("commit"); // splits: new pages, logged, not yet written back
    // Crash without a checkpoint: the handle is leaked, its threads fail after the crash.
    std::mem::forget(db);
    disk.crash(CrashMode::ProcessKill);
    let data = Path::new("/db/data.tdb");
    let storage: &dyn tilldb::io::Storage = &disk;
    let file = storage
        .open(data, tilldb::FlushMethod::Fdatasync)
        .expect("data file");
    let len = file.len().expect("len");
    let garbage = vec![0xC3u8; 8 * 4096];
    file.write_at(&garbage, len)
        .expect("garbage where new pages go");
    file.flush().expect("flush");
    drop(file);
    let db = open(&disk, 0, "after garbage");
    for i in 0..300u32 {
        assert_eq!(
            db.get(format!("key{i:05}").as_bytes()).expect("get"),
            Some(vec![7u8; 100])
        );
    }
    db.check().expect("tree checks");
    let mut txn = db.begin().expect("begin");
    for i in 300..600u32 {
        txn.put_in("", format!("key{i:05}").as_bytes(), &[8u8; 100])
            .expect("put");
    }
    txn.commit().expect("allocating past the garbage works");
}
