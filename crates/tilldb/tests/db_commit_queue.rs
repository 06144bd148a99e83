//! The commit queue (`db/commit.rs`): a transaction that only wrote takes the writer lock at
//! commit, behind a leader that applies every commit queued meanwhile under one hold of the
//! lock. What must hold: a transaction that read keeps the lock from its first read to its
//! end (nothing it read changes under it); queued commits wait for it, are all applied and
//! acknowledged exactly as their durability asks (a `Sync` one survives a power cut); a
//! leader that panics fails the commits it holds instead of leaving them asleep forever.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;
use tilldb::io::{CrashMode, Fault, FaultKind, IoKind, SimConfig, SimDisk};
use tilldb::{Db, Durability, Error, Options};

const WRITERS: usize = 8;

fn open(disk: &SimDisk) -> Db {
    Db::open_with_storage(
        Arc::new(disk.clone()),
        Path::new("/db"),
        Options::for_tests(),
    )
    .expect("open")
}

/// A database of 2,000 `filler-NNNNN` keys (several leaves), closed cleanly and opened
/// again: nothing of it is cached yet.
fn open_cold() -> (SimDisk, Db) {
    let disk = SimDisk::new(SimConfig::default());
    {
        let db = open(&disk);
        let mut txn = db.begin().expect("begin");
        for i in 0..2_000usize {
            txn.put(format!("filler-{i:05}").as_bytes(), &[b'f'; 100])
                .expect("put");
        }
        txn.commit().expect("commit");
        db.close().expect("close");
    }
    let db = open(&disk);
    (disk, db)
}

fn key(i: usize) -> Vec<u8> {
    format!("writer-{i:03}").into_bytes()
}

/// What a writer thread did: its commit's result, or the message of its panic.
type Outcome = std::result::Result<tilldb::Result<()>, String>;

/// Spawns `WRITERS` threads, each committing one blind write (`key(i)` = "v") at
/// `durability(i)`; returns a receiver of (i, outcome) and the count of those finished.
fn spawn_writers(
    db: &Db,
    durability: fn(usize) -> Durability,
) -> (mpsc::Receiver<(usize, Outcome)>, Arc<AtomicUsize>) {
    let (send, receive) = mpsc::channel();
    let finished = Arc::new(AtomicUsize::new(0));
    for i in 0..WRITERS {
        let db = db.clone();
        let send = send.clone();
        let finished = Arc::clone(&finished);
        std::thread::spawn(move || {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                db.begin().and_then(|mut txn| {
                    txn.put(&key(i), b"v")?;
                    txn.commit_with(durability(i))
                })
            }))
            .map_err(|panic| {
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default()
            });
            finished.fetch_add(1, Ordering::SeqCst);
            let _ = send.send((i, outcome));
        });
    }
    (receive, finished)
}

/// Every writer's outcome, or a panic naming how many are still asleep after `limit`.
fn results(receive: &mpsc::Receiver<(usize, Outcome)>, limit: Duration) -> Vec<(usize, Outcome)> {
    let deadline = std::time::Instant::now() + limit;
    let mut out = Vec::new();
    while out.len() < WRITERS {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let got = receive.recv_timeout(left).unwrap_or_else(|e| {
            panic!(
                "{} of {WRITERS} commits never returned (asleep in the commit queue?): {e}",
                WRITERS - out.len()
            )
        });
        out.push(got);
    }
    out
}

#[test]
fn blind_commits_queue_behind_a_transaction_that_read_and_all_survive_a_power_cut() {
    let disk = SimDisk::new(SimConfig::default());
    let db = open(&disk);
    let mut reader = db.begin().expect("begin");
    assert_eq!(reader.get(b"counter").expect("get"), None); // takes the writer lock
    let (receive, finished) = spawn_writers(&db, |_| Durability::Sync);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        finished.load(Ordering::SeqCst),
        0,
        "a commit went past a transaction holding the writer lock"
    );
    assert_eq!(db.get(&key(0)).expect("get"), None);
    reader.put(b"counter", b"1").expect("put");
    reader.commit().expect("commit");
    for (i, outcome) in results(&receive, Duration::from_secs(30)) {
        outcome
            .unwrap_or_else(|p| panic!("writer {i} panicked: {p}"))
            .unwrap_or_else(|e| panic!("writer {i}: {e}"));
    }
    let queued = db.stats().queued_commits;
    assert!(
        (1..WRITERS as u64).contains(&queued),
        "{queued} commits applied by a leader for another thread (one of {WRITERS} leads)"
    );

    // Every `Sync` commit was acknowledged durable: a power cut now loses none.
    std::mem::forget(db);
    disk.crash(CrashMode::PowerLoss {
        tear_bytes: 512,
        garbage: true,
    });
    let db = open(&disk);
    assert_eq!(db.get(b"counter").expect("get"), Some(b"1".to_vec()));
    for i in 0..WRITERS {
        assert_eq!(db.get(&key(i)).expect("get"), Some(b"v".to_vec()), "{i}");
    }
    db.check().expect("tree check");
}

#[test]
fn queued_commits_of_every_durability_return_and_the_sync_ones_are_durable() {
    let disk = SimDisk::new(SimConfig::default());
    let db = open(&disk);
    let durability = |i: usize| match i % 3 {
        0 => Durability::Sync,
        1 => Durability::Buffered,
        _ => Durability::Lazy,
    };
    let mut reader = db.begin().expect("begin");
    reader.get(b"x").expect("get");
    let (receive, _) = spawn_writers(&db, durability);
    std::thread::sleep(Duration::from_millis(200));
    reader.rollback();
    for (i, outcome) in results(&receive, Duration::from_secs(30)) {
        outcome
            .unwrap_or_else(|p| panic!("writer {i} panicked: {p}"))
            .unwrap_or_else(|e| panic!("writer {i}: {e}"));
    }
    // Readers see every acknowledged commit: all have returned, so none waits for another.
    for i in 0..WRITERS {
        assert_eq!(db.get(&key(i)).expect("get"), Some(b"v".to_vec()), "{i}");
    }
    std::mem::forget(db);
    disk.crash(CrashMode::PowerLoss {
        tear_bytes: 512,
        garbage: false,
    });
    let db = open(&disk);
    for i in (0..WRITERS).filter(|&i| durability(i) == Durability::Sync) {
        assert_eq!(db.get(&key(i)).expect("get"), Some(b"v".to_vec()), "{i}");
    }
}

/// A panic in the thread that leads the queue (a failed assertion while it applies a
/// commit) must not leave the commits queued behind it asleep forever: they fail, and the
/// database is stopped, since the leader may have left pages half changed.
#[test]
fn a_panic_while_leading_the_queue_fails_the_queued_commits_instead_of_hanging_them() {
    let (disk, db) = open_cold();
    let mut reader = db.begin().expect("begin");
    reader.get(b"filler-00000").expect("get"); // takes the writer lock
    let (receive, _) = spawn_writers(&db, |_| Durability::Sync);
    std::thread::sleep(Duration::from_millis(300));
    // The leader's first page read from the data file panics: it is applying its own
    // commit (its key's leaf is not cached), with the others queued behind it.
    disk.inject(Fault::once(IoKind::Read, 1, FaultKind::Panic).on_path("data"));
    reader.rollback();
    let out = results(&receive, Duration::from_secs(30));
    let panicked: Vec<_> = out.iter().filter(|(_, o)| o.is_err()).collect();
    assert_eq!(panicked.len(), 1, "one leader panicked: {out:?}");
    let (_, Err(message)) = panicked[0] else {
        unreachable!()
    };
    assert!(message.contains("simulated panic in a read"), "{message}");
    for (i, outcome) in &out {
        if let Ok(result) = outcome {
            assert!(
                result.is_err(),
                "writer {i} was acknowledged after its leader panicked"
            );
        }
    }
    // Stopped: nothing more is acknowledged until the database is reopened.
    let after = db.begin().map(drop);
    assert!(
        matches!(after, Err(Error::PoisonedBy { ref cause }) if cause.contains("panicked")),
        "{after:?}"
    );
}

/// Found by review: a thread handed the lead (its wait slot woken once already, for the
/// hand-over) that panicked while applying its own commit was woken again by its own unwind,
/// the "woken twice" assertion fired inside that unwind, and the process aborted. Now its own
/// commit is not woken, the commits queued behind it fail, and the database stops.
#[test]
fn a_leader_handed_the_lead_that_panics_fails_the_queue_instead_of_aborting() {
    const MANY: usize = 300;
    // The first leader applies 256 commits, then hands the lead to writer 256.
    const HANDED: usize = 256;
    let (disk, db) = open_cold();
    let mut reader = db.begin().expect("begin");
    reader.get(b"filler-00000").expect("get"); // takes the writer lock, caches that leaf
    let queued = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for i in 0..MANY {
        let (db, arrived) = (db.clone(), Arc::clone(&queued));
        // Writers before the handed one hit the cached leaf; it and later ones a cold one.
        let key = if i < HANDED {
            "filler-00000".to_owned()
        } else {
            format!("filler-01990-{i:04}")
        };
        handles.push(std::thread::spawn(move || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut txn = db.begin()?;
                txn.put(key.as_bytes(), b"v")?;
                arrived.fetch_add(1, Ordering::SeqCst);
                txn.commit()
            }))
        }));
        // Queue in spawn order: each writer reaches commit before the next starts.
        while queued.load(Ordering::SeqCst) <= i {
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_millis(3));
    }
    std::thread::sleep(Duration::from_millis(300));
    // The handed leader's first page read from the data file panics.
    disk.inject(Fault::once(IoKind::Read, 1, FaultKind::Panic).on_path("data"));
    reader.rollback();
    let outcomes: Vec<_> = handles
        .into_iter()
        .map(|h| h.join().expect("a writer's panic is caught in it"))
        .collect();
    let panicked: Vec<usize> = (0..MANY).filter(|&i| outcomes[i].is_err()).collect();
    assert_eq!(
        panicked,
        vec![HANDED],
        "the handed leader, and only it, panicked"
    );
    for (i, outcome) in outcomes.iter().enumerate().skip(HANDED + 1) {
        assert!(
            matches!(outcome, Ok(Err(Error::PoisonedBy { .. }))),
            "writer {i}, queued behind the panicked leader: {outcome:?}"
        );
    }
    let after = db.begin().map(drop);
    assert!(
        matches!(after, Err(Error::PoisonedBy { ref cause }) if cause.contains("panicked")),
        "{after:?}"
    );
}

/// A leader applies at most 256 commits for others, then hands the lead to the first one
/// still queued: with 300 blind commits queued behind a transaction that read, at least two
/// threads lead, and every commit returns and is there.
#[test]
fn a_leader_hands_the_queue_on_after_its_share_and_every_commit_returns() {
    const MANY: usize = 300;
    let disk = SimDisk::new(SimConfig::default());
    let db = open(&disk);
    let mut reader = db.begin().expect("begin");
    reader.get(b"x").expect("get"); // takes the writer lock
    let ready = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..MANY)
        .map(|i| {
            let (db, ready) = (db.clone(), Arc::clone(&ready));
            std::thread::spawn(move || {
                let mut txn = db.begin()?;
                txn.put(format!("many-{i:04}").as_bytes(), b"v")?;
                ready.fetch_add(1, Ordering::SeqCst);
                txn.commit()
            })
        })
        .collect();
    let started = std::time::Instant::now();
    while ready.load(Ordering::SeqCst) < MANY {
        assert!(
            started.elapsed() < Duration::from_mins(1),
            "writers never got ready"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // From "ready" to queued is a few instructions; give the slowest a moment.
    std::thread::sleep(Duration::from_millis(300));
    reader.rollback();
    for (i, handle) in handles.into_iter().enumerate() {
        handle
            .join()
            .unwrap_or_else(|_| panic!("writer {i} panicked"))
            .unwrap_or_else(|e| panic!("writer {i}: {e}"));
    }
    let queued = db.stats().queued_commits;
    assert!(
        (200..MANY as u64 - 1).contains(&queued),
        "{queued} of {MANY} commits applied for others: one leader applied them all, or few \
         were queued"
    );
    for i in 0..MANY {
        assert_eq!(
            db.get(format!("many-{i:04}").as_bytes()).expect("get"),
            Some(b"v".to_vec()),
            "{i}"
        );
    }
}

/// Found by review (2026-11-29): a transaction that read holds the writer lock and applies its
/// own commit, not through the queue. A panic there (a bug) let the lock go without stopping
/// the database, so the next commit built on pages the panicked one had half changed (and a
/// commit of several records left the log's commit-boundary mark open, `Wal::begin_parts`).
/// Now its unwind stops the database before the lock goes, as a leader's does.
#[test]
fn a_transaction_that_read_and_panics_in_its_commit_stops_the_database() {
    let (disk, db) = open_cold();
    let mut txn = db.begin().expect("begin");
    txn.get(b"filler-00000").expect("get"); // takes the writer lock
    txn.put(b"filler-01990-x", b"v").expect("put");
    // The commit's first page read from the data file (a leaf not cached) panics.
    disk.inject(Fault::once(IoKind::Read, 1, FaultKind::Panic).on_path("data"));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| txn.commit()));
    assert!(outcome.is_err(), "the commit panicked: {outcome:?}");
    let after = db.begin().and_then(|mut t| {
        t.put(b"after", b"v")?;
        t.commit()
    });
    assert!(
        matches!(after, Err(Error::PoisonedBy { ref cause }) if cause.contains("panicked")),
        "{after:?}"
    );
}
