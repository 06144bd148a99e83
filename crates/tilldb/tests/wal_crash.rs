//! Many threads commit concurrently on the simulated disk, which dies at a random write or
//! flush; then the machine crashes (process kill or power loss with torn sectors). After
//! recovery:
//! 1. every record acknowledged at `Sync` is present (and at `Buffered`, after a process kill);
//! 2. the log is an exact prefix of what was appended, in lsn order: no gap, no reordering,
//!    no half record;
//! 3. the log accepts and keeps new records.
//!
//! A failure names its seed; rerun one with `WAL_CRASH_SEED=n cargo test --test wal_crash`.

mod common;

use parking_lot::Mutex;
use std::path::Path;
use std::sync::Arc;
use tilldb::Durability;
use tilldb::internals::wal::{Lsn, Wal, WalOptions};
use tilldb::io::{CrashMode, Fault, FaultKind, IoKind, SimConfig, SimDisk};

const DIR: &str = "/db/wal";
const THREADS: u32 = 4;
const COMMITS_PER_THREAD: u32 = 40;

#[derive(Default)]
struct History {
    /// (end lsn, payload) of every record `append` accepted.
    appended: Vec<(Lsn, Vec<u8>)>,
    /// Payloads acknowledged, with the level they were acknowledged at.
    acknowledged: Vec<(Vec<u8>, Durability)>,
}

fn payload(thread: u32, i: u32, seed: u64) -> Vec<u8> {
    let mut p = thread.to_le_bytes().to_vec();
    p.extend_from_slice(&i.to_le_bytes());
    let extra = usize::try_from((seed + u64::from(thread * 31 + i * 7)) % 200).expect("small");
    p.resize(8 + extra, u8::try_from(i % 256).expect("small"));
    p
}

fn durability_for(seed: u64, thread: u32) -> Durability {
    match (seed + u64::from(thread)) % 4 {
        0 | 1 => Durability::Sync,
        2 => Durability::Buffered,
        _ => Durability::Lazy,
    }
}

fn run_seed(seed: u64) {
    let disk = SimDisk::new(SimConfig {
        seed,
        ..SimConfig::default()
    });
    let options = WalOptions::for_tests();
    let (wal, _) =
        Wal::open(Arc::new(disk.clone()), Path::new(DIR), options.clone()).expect("open");
    let kind = if seed.is_multiple_of(2) {
        IoKind::Write
    } else {
        IoKind::Flush
    };
    disk.inject(Fault::once(kind, 1 + seed % 60, FaultKind::Crash).on_path(".wal"));
    let wal = Arc::new(wal);
    let history = Arc::new(Mutex::new(History::default()));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (wal, history) = (Arc::clone(&wal), Arc::clone(&history));
            std::thread::spawn(move || {
                let durability = durability_for(seed, t);
                for i in 0..COMMITS_PER_THREAD {
                    let p = payload(t, i, seed);
                    // Record the append under the history lock so lsn order is known exactly.
                    let lsn = {
                        let mut h = history.lock();
                        let Ok(lsn) = wal.append(&p) else { return };
                        h.appended.push((lsn, p.clone()));
                        lsn
                    };
                    if wal.wait(lsn, durability).is_err() {
                        return;
                    }
                    history.lock().acknowledged.push((p, durability));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    drop(Arc::into_inner(wal).expect("workers are done"));
    let mode = common::crash_mode(seed);
    disk.clear_faults();
    disk.crash(mode);

    let (wal, recovery) = Wal::open(Arc::new(disk.clone()), Path::new(DIR), options.clone())
        .unwrap_or_else(|e| panic!("seed {seed} {mode:?}, fault on {kind:?}: reopen: {e}"));
    let recovered: Vec<Vec<u8>> = wal
        .read_from(recovery.start_lsn)
        .expect("read")
        .into_iter()
        .map(|r| r.payload)
        .collect();
    let history = history.lock();
    let mut appended = history.appended.clone();
    appended.sort_by_key(|(lsn, _)| *lsn);
    let prefix: Vec<Vec<u8>> = appended
        .iter()
        .take(recovered.len())
        .map(|(_, p)| p.clone())
        .collect();
    assert_eq!(
        recovered, prefix,
        "seed {seed} {mode:?}: not an exact prefix of the appended records"
    );
    for (p, durability) in &history.acknowledged {
        let must_survive = match durability {
            Durability::Sync => true,
            Durability::Buffered => mode == CrashMode::ProcessKill,
            Durability::Lazy => false,
        };
        if must_survive {
            assert!(
                recovered.contains(p),
                "seed {seed} {mode:?}: lost a {durability} commit"
            );
        }
    }
    // The log goes on.
    let marker = b"after the crash".to_vec();
    wal.commit(&marker, Durability::Sync)
        .expect("commit after recovery");
    wal.close().expect("close");
    let (wal, recovery) = Wal::open(Arc::new(disk), Path::new(DIR), options).expect("reopen again");
    let again = wal.read_from(recovery.start_lsn).expect("read");
    assert_eq!(again.len(), recovered.len() + 1, "seed {seed}");
    assert_eq!(
        again.last().map(|r| &r.payload),
        Some(&marker),
        "seed {seed}"
    );
}

#[test]
fn concurrent_commits_crashed_at_random_points_keep_every_acknowledged_record() {
    if let Ok(seed) = std::env::var("WAL_CRASH_SEED") {
        return run_seed(seed.parse().expect("WAL_CRASH_SEED is a number"));
    }
    for seed in 0..300 {
        run_seed(seed);
    }
}
