//! Many threads commit concurrently on the simulated disk, which dies at a random write or
//! flush; then the machine crashes (process kill or power loss with torn sectors). After
//! recovery:
//! 1. every record acknowledged at `Sync` is present (and at `Buffered`, after a process kill);
//! 2. the log is an exact prefix of what was appended, in lsn order: no gap, no reordering,
//!    no half record;
//! 3. the log accepts and keeps new records.
//!
//! A quarter of the seeds run again on a sealed log (an encrypted database's: records sealed
//! under each segment's key, docs/encryption.md piece 3).
//!
//! A failure names its seed; rerun one with `WAL_CRASH_SEED=n cargo test --test wal_crash`
//! (with `WAL_CRASH_SEALED=1` for a sealed one).

mod common;

use parking_lot::Mutex;
use std::path::Path;
use std::sync::Arc;
use tilldb::Durability;
use tilldb::internals::crypt::{Cipher, DataKey, DatabaseKeys};
use tilldb::internals::wal::{Lsn, Wal, WalOptions};
use tilldb::io::{CrashMode, Fault, FaultKind, IoKind, SimConfig, SimDisk, Storage};

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

/// The keys of a sealed log (a fixed data key), or none.
fn keys(sealed: bool) -> Option<Arc<DatabaseKeys>> {
    sealed.then(|| {
        let key = DataKey::from_bytes(zeroize::Zeroizing::new([0x6e; 32]));
        Arc::new(DatabaseKeys::new(Cipher::Aes256Gcm, [9; 16], key))
    })
}

/// Sealed indeed: every segment header on `disk` is version 3, with its salt.
fn assert_sealed(disk: &SimDisk, seed: u64) {
    let mut headers = 0;
    for name in disk.list_dir(Path::new(DIR)).expect("ls") {
        // The reopened log may be making a spare meanwhile: a name listed, no file yet.
        let Some(bytes) = disk.live_contents(&Path::new(DIR).join(&name)) else {
            continue;
        };
        if bytes.len() >= 64 && bytes[..8] == *b"TILLWAL1" {
            assert_eq!(
                bytes[8..12],
                3u32.to_le_bytes(),
                "seed {seed}: {name} not sealed"
            );
            headers += 1;
        }
    }
    assert!(headers > 0, "seed {seed}: no segment header found");
}

fn run_seed(seed: u64, sealed: bool) {
    let disk = SimDisk::new(SimConfig {
        seed,
        ..SimConfig::default()
    });
    let options = WalOptions::for_tests();
    let open = |disk: &SimDisk| {
        Wal::open_keyed(
            Arc::new(disk.clone()),
            Path::new(DIR),
            options.clone(),
            (None, keys(sealed)),
        )
    };
    let (wal, _) = open(&disk).expect("open");
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

    let (wal, recovery) = open(&disk).unwrap_or_else(|e| {
        panic!("seed {seed} (sealed: {sealed}) {mode:?}, fault on {kind:?}: reopen: {e}")
    });
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
        "seed {seed} (sealed: {sealed}) {mode:?}: not an exact prefix of the appended records"
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
                "seed {seed} (sealed: {sealed}) {mode:?}: lost a {durability} commit"
            );
        }
    }
    if sealed {
        assert_sealed(&disk, seed);
    }
    // The log goes on.
    let marker = b"after the crash".to_vec();
    wal.commit(&marker, Durability::Sync)
        .expect("commit after recovery");
    wal.close().expect("close");
    let (wal, recovery) = open(&disk).expect("reopen again");
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
        let sealed = std::env::var_os("WAL_CRASH_SEALED").is_some();
        return run_seed(seed.parse().expect("WAL_CRASH_SEED is a number"), sealed);
    }
    for seed in 0..300 {
        run_seed(seed, false);
    }
}

#[test]
fn sealed_concurrent_commits_crashed_at_random_points_keep_every_acknowledged_record() {
    if std::env::var("WAL_CRASH_SEED").is_ok() {
        return;
    }
    for seed in (0..300).step_by(4) {
        run_seed(seed, true);
    }
}
