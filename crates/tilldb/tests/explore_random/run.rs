//! One cycle of a seed: the committing threads run against the database while the disk is
//! armed with the cycle's faults, and the test freezes crash points: copies of the disk
//! taken while the threads run ([`SimDisk::fork`] of the live disk: a crash at that moment),
//! and the disk as the cycle leaves it (dead at its crash fault, or when the threads are done).
//!
//! ```text
//!   threads: begin ─ read seq ─ record Attempt ─ commit_with(d) ─► Ok: record the ack
//!                    (under the writer lock: the log's order)        Err: stop acknowledging
//!   main:    ... fork(live) ... fork(live) ... join ─ fork(dead or live) ─► Frozen points
//! ```
//!
//! Acknowledgements are recorded after `commit_with` returns `Ok`, and read before a fork:
//! every one read was durable (per its level) before the copy was taken. Attempts are
//! counted after the fork: no commit begun later can be in the copy.
//!
//! Oracle 5 (fail-stop) is checked here: once any call has returned an error, a commit begun
//! after that was seen must not return `Ok`; each thread tries twice more to make sure.

use super::config::{self, Commit, Config, Schedule};
use super::oracle::{Attempt, Frozen, Lane, SEQ_KEY, SEQ_TABLE};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;
use tilldb::io::{SimDisk, Storage};
use tilldb::{Db, Durability};

/// What the threads of one cycle share with each other and with the main thread.
#[derive(Debug)]
struct Shared {
    attempts: Mutex<Vec<Attempt>>,
    /// Per thread: its commits acknowledged at `Sync` (a count: the sequence's prefix).
    acked_sync: Vec<AtomicUsize>,
    /// Per thread: its commits acknowledged at `Sync` or `Buffered`.
    acked_written: Vec<AtomicUsize>,
    error_seen: AtomicBool,
    first_error: Mutex<Option<String>>,
    violations: Mutex<Vec<String>>,
    /// Known bugs that panicked inside the engine (their tests are `#[ignore]`d).
    known_bugs: Mutex<Vec<&'static str>>,
    acks: AtomicU64,
}

impl Shared {
    fn new(lanes: &[Lane]) -> Shared {
        Shared {
            attempts: Mutex::new(Vec::new()),
            acked_sync: lanes.iter().map(|l| AtomicUsize::new(l.base)).collect(),
            acked_written: lanes.iter().map(|l| AtomicUsize::new(l.base)).collect(),
            error_seen: AtomicBool::new(false),
            first_error: Mutex::new(None),
            violations: Mutex::new(Vec::new()),
            known_bugs: Mutex::new(Vec::new()),
            acks: AtomicU64::new(0),
        }
    }

    fn failed(&self, what: &str, error: &tilldb::Error) {
        assert!(
            !matches!(error, tilldb::Error::TooLarge { .. }),
            "the test's commits must fit the log: {what}: {error}"
        );
        self.error_seen.store(true, Ordering::SeqCst);
        self.first_error
            .lock()
            .expect("no panics under this lock")
            .get_or_insert_with(|| format!("{what}: {error}"));
    }

    fn attempts(&self) -> usize {
        self.attempts
            .lock()
            .expect("no panics under this lock")
            .len()
    }

    /// A crash point now: the acknowledgements first, then the copy, then the attempts.
    fn freeze(&self, disk: &SimDisk, seed: u64, label: String) -> Frozen {
        let load = |v: &Vec<AtomicUsize>| v.iter().map(|a| a.load(Ordering::SeqCst)).collect();
        let (low_power, low_kill) = (load(&self.acked_sync), load(&self.acked_written));
        let disk = disk.fork(seed);
        disk.clear_faults();
        Frozen {
            label,
            disk,
            low_power,
            low_kill,
            attempts: self.attempts(),
        }
    }
}

/// What a cycle produced besides its crash points.
#[derive(Debug, Default)]
pub struct Ran {
    pub attempts: Vec<Attempt>,
    pub acks: u64,
    /// The first error any call returned, if one did.
    pub first_error: Option<String>,
    /// The cycle's crash fault fired: the disk died under the threads.
    pub died: bool,
    /// Known bugs a thread hit (each ends the thread like a crash).
    pub known_bugs: Vec<&'static str>,
    /// Pages a commit changed while a write-back of theirs was under way (issue 21's hot
    /// pages, whose redo point then moves up to the copy).
    pub changed_during_write_back: u64,
}

/// Runs cycle `cycle` on `db` (over `disk`), then closes it; returns the crash points, the
/// last of them the disk as the cycle left it.
pub fn cycle(
    config: &Config,
    cycle: u64,
    db: Db,
    disk: &SimDisk,
    lanes: &mut [Lane],
) -> (Vec<Frozen>, Ran) {
    let schedule = Schedule::of(config, cycle);
    for fault in schedule.error.iter().chain(&schedule.crash) {
        disk.inject(fault.clone());
    }
    let shared = Shared::new(lanes);
    let expected = config.commits_per_thread * config.threads as u64;
    let mut rng = config::Rng::new(config::mix(config.seed, 3, cycle));
    let mut targets: Vec<usize> = (0..schedule.snapshots)
        .map(|_| usize::try_from(rng.range(1, expected)).expect("small"))
        .collect();
    targets.sort_unstable();
    let mut frozen = Vec::new();
    std::thread::scope(|scope| {
        let handles: Vec<_> = lanes
            .iter_mut()
            .map(|lane| {
                let (db, shared) = (&db, &shared);
                scope.spawn(move || worker(config, cycle, db, lane, shared))
            })
            .collect();
        while !handles
            .iter()
            .all(std::thread::ScopedJoinHandle::is_finished)
        {
            if targets.first().is_some_and(|&t| shared.attempts() >= t) {
                targets.remove(0);
                let label = format!("cycle {cycle}, while running ({} begun)", shared.attempts());
                let seed = config::mix(config.seed, 4, (cycle << 8) | frozen.len() as u64);
                frozen.push(shared.freeze(disk, seed, label));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        for handle in handles {
            if let Err(panic) = handle.join() {
                eprintln!(
                    "  [seed {}] a committing thread panicked in cycle {cycle}; the first \
                     error returned before: {:?}; schedule {schedule:?}",
                    config.seed,
                    shared.first_error.lock().map_or(None, |e| e.clone())
                );
                std::panic::resume_unwind(panic);
            }
        }
    });
    let violations = shared.violations.lock().expect("threads joined");
    assert!(
        violations.is_empty(),
        "fail-stop broken (first error: {:?}): {violations:?}",
        shared.first_error.lock().expect("threads joined")
    );
    let died = disk.exists(std::path::Path::new("/db")).is_err();
    let label = format!(
        "cycle {cycle}, at the end ({}; schedule {schedule:?})",
        if died { "the disk died" } else { "disk alive" }
    );
    let seed = config::mix(config.seed, 5, cycle);
    frozen.push(shared.freeze(disk, seed, label));
    let changed_during_write_back = db.stats().pool.changed_during_write_back;
    // The engine's own shutdown runs on the old disk, after the copy: it changes no crash
    // point.
    drop(db);
    let ran = Ran {
        attempts: shared.attempts.lock().expect("threads joined").clone(),
        acks: shared.acks.load(Ordering::SeqCst),
        first_error: shared.first_error.lock().expect("threads joined").clone(),
        died,
        known_bugs: shared.known_bugs.lock().expect("threads joined").clone(),
        changed_during_write_back,
    };
    (frozen, ran)
}

/// One committing thread: its cycle's commits, until errors stop it.
fn worker(config: &Config, cycle: u64, db: &Db, lane: &mut Lane, shared: &Shared) {
    let thread = lane.thread;
    let mut tries_after_error = 0;
    for _ in 0..config.commits_per_thread {
        let after_error = shared.error_seen.load(Ordering::SeqCst);
        if after_error {
            tries_after_error += 1;
            if tries_after_error > 2 {
                break;
            }
        }
        let index = lane.history.len();
        let commit = config::commit(config, thread, cycle, index);
        if commit.checkpoint_before
            && let Err(e) = db.checkpoint()
        {
            shared.failed(&format!("thread {thread}: checkpoint"), &e);
            continue;
        }
        let durability = commit.durability;
        let begun = lane.history.len();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            attempt(db, lane, shared, commit)
        }));
        let result = match caught {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => {
                shared.failed(&format!("thread {thread}: begin"), &e);
                continue;
            }
            Err(panic) => {
                // A known bug panicked inside the engine: the process would be gone, so the
                // cycle ends here and the disk as it is now is a crash like any other.
                let bug = super::known_bug(panic_text(&*panic)).unwrap_or_else(|| {
                    std::panic::resume_unwind(panic);
                });
                if lane.history.len() > begun {
                    lane.outcomes.push(false);
                }
                shared.error_seen.store(true, Ordering::SeqCst);
                shared
                    .known_bugs
                    .lock()
                    .expect("no panics under this lock")
                    .push(bug);
                break;
            }
        };
        lane.outcomes.push(result.is_ok());
        // Beside the other threads' commits, after every step.
        db.check_invariants();
        match result {
            Ok(()) => {
                let count = index + 1;
                if durability == Durability::Sync {
                    shared.acked_sync[thread].fetch_max(count, Ordering::SeqCst);
                }
                if durability != Durability::Lazy {
                    shared.acked_written[thread].fetch_max(count, Ordering::SeqCst);
                }
                shared.acks.fetch_add(1, Ordering::SeqCst);
                if after_error {
                    shared
                        .violations
                        .lock()
                        .expect("no panics under this lock")
                        .push(format!(
                            "thread {thread}: commit {index} ({durability}) acknowledged, \
                             though it began after an error was returned"
                        ));
                }
            }
            Err(e) => shared.failed(&format!("thread {thread}: commit {index}"), &e),
        }
    }
}

/// The message of a panic's payload.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("")
}

/// Begins a transaction, reads and bumps the counter, records the attempt (still under the
/// writer lock, so attempts are recorded in log order), applies the commit's changes and
/// commits. The outer `Err`: the commit never began.
fn attempt(
    db: &Db,
    lane: &mut Lane,
    shared: &Shared,
    commit: Commit,
) -> tilldb::Result<tilldb::Result<()>> {
    let mut txn = db.begin()?;
    let seq: u64 = match txn.get_in(SEQ_TABLE, SEQ_KEY)? {
        None => 0,
        Some(v) => String::from_utf8_lossy(&v)
            .parse()
            .expect("the counter is a number"),
    };
    for (key, value) in &commit.ops {
        match value {
            Some(value) => txn.put_in(&lane.table, key, value),
            None => txn.delete_in(&lane.table, key),
        }
        .expect("keys and values within the limits");
    }
    txn.put_in(SEQ_TABLE, SEQ_KEY, (seq + 1).to_string().as_bytes())
        .expect("a small counter");
    shared
        .attempts
        .lock()
        .expect("no panics under this lock")
        .push(Attempt {
            thread: lane.thread,
            index: lane.history.len(),
            seq_before: seq,
        });
    let durability = commit.durability;
    lane.push(commit);
    Ok(txn.commit_with(durability))
}
