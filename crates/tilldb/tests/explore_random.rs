//! The random simulation tier (shared/TESTPLAN.md): random workloads from a seed, crashed
//! again and again on the simulated disk, every crash state checked against the oracle.
//!
//! Each seed draws (`explore_random/config.rs`): 1 to 8 committing threads, each writing its
//! own table; the page size (4, 8 or 16 KiB) and a cache small enough to evict; the torn-page
//! guard (`Doublewrite`, `FullPageImages`, `Atomic` on a device with atomic writes, or `None`,
//! the negative control that must never serve a wrong state); a mix of `Sync`, `Buffered`
//! and `Lazy` commits; the flush method, the device's sector size, the log segment size,
//! checkpoints by log volume and explicit ones; and, for a quarter of the seeds, an encrypted
//! database (sealed pages, log records and scratch files: docs/encryption.md). Then 3 or 4
//! cycles of:
//!
//! 1. run the threads with the engine's background threads on (with several committing
//!    threads always), the disk armed with the cycle's faults: sometimes an `EIO`, `ENOSPC`,
//!    short write or lost flush first (after an error nothing may be acknowledged), and a
//!    crash at the k-th write, flush, create, rename, set-length or directory flush;
//! 2. freeze crash points: copies of the disk taken while the threads run, and the disk as
//!    the cycle leaves it;
//! 3. fork every crash point several times and crash each fork its own way (process kill;
//!    power cut tearing per 4 KiB; per 512 B with garbage), some again inside their
//!    recovery; recover each and check the oracle (`explore_random/oracle.rs`);
//! 4. go on from one recovered fork: the next cycle must keep what it recovered.
//!
//! The seed fixes the configuration, the workload and the fault schedule, not the
//! threads' timing, so a rerun of a failing seed explores the same ground, not always the
//! same states. A failure prints the seed with its configuration and the crash it was
//! checking; rerun one seed with `EXPLORE_RANDOM_SEED=n`, change how many seeds run with
//! `EXPLORE_RANDOM_SEEDS=n`. Seeds that ever failed go into [`CORPUS`] and run first.
//!
//! The seeds are split over two tests (two run at a time), each running two seeds at a
//! time; each test prints its counts: seeds, crash points, crash states, torn pages caught
//! under `None`, pages rebuilt, acknowledgements, crash faults fired, errors. A default run
//! makes over 50,000 crash states in 70-85 s on two cores. A seed running over two
//! minutes is reported as hung and aborts the run. Engine panics of bugs already known
//! ([`KNOWN_BUGS`], each with an `#[ignore]`d test) are counted, not failed, unless
//! `EXPLORE_RANDOM_STRICT=1`.

#[path = "explore_random/config.rs"]
mod config;
#[path = "explore_random/oracle.rs"]
mod oracle;
#[path = "explore_random/run.rs"]
mod run;
#[path = "explore_random/seed.rs"]
mod seed;

use seed::Counts;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Seeds that run first on every run: a few to start with, then every seed that ever
/// failed, with what it found.
const CORPUS: [u64; 15] = [
    1, 2, 3, 4,
    // The overlay panic of a writer waiting in `begin()` while a commit fails (fixed):
    // 1011 (7 threads, a short write of the log), 1020 (a lost data-file flush).
    1011, 1020,
    // 4 also hit it (a crash at the 18th flush of 8 threads); 1007, with `None`, too.
    1007,
    // After the durable marks: an empty tail segment's successor from a later life (1028);
    // a garbage header of a failed preparation (2274); a short reused segment (1741); a debug
    // check on a dead disk (1382); an lsn subtraction racing a checkpoint (2132).
    1028, 2274, 1741, 1382, 2132,
    // After the page ledger: an eviction's failed write-back inside a read did not stop
    // another thread's commit (1524; `a_failed_write_back_poisons_the_database`).
    1524,
    // After parked pages: a checkpoint's exact count of spill slots while a commit's held
    // page was on its way to the spill file ("a spill slot leaked", 1925).
    1925,
    // A checkpoint's batch with two copies of one page, the first evicted, read back and
    // changed while the batch was gathered ("page 3 twice in one batch", 2413, in CI;
    // `a_page_evicted_and_changed_again_while_a_write_back_gathers_is_written_once`).
    2413,
];

/// Bugs found by this tier and not fixed yet, each with its `#[ignore]`d test: the text of
/// the engine's panic, and the test's name. A thread that hits one ends as if the process
/// had crashed there, and the crash is checked like any other; the run counts the hits.
/// `EXPLORE_RANDOM_STRICT=1` fails on them instead. Remove an entry when its bug is fixed.
const KNOWN_BUGS: [(&str, &str); 0] = [];

/// The known bug a panic message names, unless `EXPLORE_RANDOM_STRICT` is set.
fn known_bug(text: &str) -> Option<&'static str> {
    if std::env::var_os("EXPLORE_RANDOM_STRICT").is_some() {
        return None;
    }
    KNOWN_BUGS
        .iter()
        .find(|(message, _)| text.contains(message))
        .map(|&(_, test)| test)
}

/// Keeps the panics of known bugs off the output (they are counted instead).
fn quiet_known_bugs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if known_bug(info.payload_as_str().unwrap_or("")).is_none() {
                default(info);
            }
        }));
    });
}

/// Seeds per default run, over both tests: about 37 crash states each, so over 50,000 crash
/// states (TESTPLAN's target for this tier) in 70-85 s on two busy cores.
const SEEDS_DEFAULT: u64 = 1450;

/// A seed taking longer than this is hung (a commit or a recovery that never returns): the
/// watchdog prints it and aborts the run.
const SEED_TIME_MAX: Duration = Duration::from_mins(2);

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, not {v:?}"))
    })
}

/// The seeds of test `part` of `parts`: its share of the corpus, then of `0..seeds`
/// (offset, so they do not repeat the corpus).
fn seeds_of(part: u64, parts: u64) -> Vec<u64> {
    if let Some(seed) = env_u64("EXPLORE_RANDOM_SEED") {
        return if part == 0 { vec![seed] } else { Vec::new() };
    }
    let seeds = env_u64("EXPLORE_RANDOM_SEEDS").unwrap_or(SEEDS_DEFAULT);
    let corpus = CORPUS.iter().copied().filter(|s| s % parts == part);
    let fresh = (1000..1000 + seeds).filter(|s| s % parts == part && !CORPUS.contains(s));
    corpus.chain(fresh).collect()
}

/// Fewest crash states one of the two parts must reach with the default seeds.
const STATES_PER_PART_MIN: u64 = 22_000;

/// Fewest cycles, per part with the default seeds, in which a commit changed a page while
/// it was written back (so crashes land in such checkpoints).
const HOT_CYCLES_PER_PART_MIN: u64 = 20;

/// Seed runners per test. A runner's own threads wait for flushes and poll, so two runners
/// per test (and two tests at a time) keep both cores busy.
const RUNNERS: usize = 2;

/// Per runner: the seed it runs and since when.
type Running = Arc<Mutex<Vec<Option<(u64, Instant)>>>>;

/// Aborts the test binary when a runner's seed runs longer than [`SEED_TIME_MAX`].
struct Watchdog {
    running: Running,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    fn start(runners: usize) -> Watchdog {
        let running: Running = Arc::new(Mutex::new(vec![None; runners]));
        let done = Arc::new(AtomicBool::new(false));
        let thread = {
            let (running, done) = (Arc::clone(&running), Arc::clone(&done));
            std::thread::spawn(move || {
                while !done.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(200));
                    let now = running.lock().map(|r| r.clone()).unwrap_or_default();
                    for (seed, started) in now.into_iter().flatten() {
                        if started.elapsed() > SEED_TIME_MAX {
                            eprintln!(
                                "explore_random: seed {seed} hung for {SEED_TIME_MAX:?} (a \
                                 commit or a recovery never returned); rerun with \
                                 EXPLORE_RANDOM_SEED={seed}"
                            );
                            std::process::abort();
                        }
                    }
                }
            })
        };
        Watchdog {
            running,
            done,
            thread: Some(thread),
        }
    }

    fn watch(&self, runner: usize, seed: Option<u64>) {
        let mut running = self.running.lock().expect("the watchdog never panics");
        running[runner] = seed.map(|s| (s, Instant::now()));
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// If the seed being run panics: prints how to rerun it, and stops the other runners.
struct Replay<'a> {
    seed: u64,
    failed: &'a AtomicBool,
}

impl Drop for Replay<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.failed.store(true, Ordering::SeqCst);
            eprintln!(
                "explore_random failure; rerun with EXPLORE_RANDOM_SEED={} cargo test -p tilldb \
                 --test explore_random -- --nocapture",
                self.seed
            );
        }
    }
}

fn run_part(part: u64, parts: u64) -> Counts {
    let started = Instant::now();
    quiet_known_bugs();
    let seeds = Mutex::new(seeds_of(part, parts).into_iter());
    let watchdog = Watchdog::start(RUNNERS);
    let failed = AtomicBool::new(false);
    let total = Mutex::new(Counts::default());
    std::thread::scope(|scope| {
        let runners: Vec<_> = (0..RUNNERS)
            .map(|runner| {
                let (seeds, watchdog, failed, total) = (&seeds, &watchdog, &failed, &total);
                scope.spawn(move || {
                    while !failed.load(Ordering::SeqCst) {
                        let Some(seed) = seeds.lock().expect("runners do not panic here").next()
                        else {
                            break;
                        };
                        watchdog.watch(runner, Some(seed));
                        let _replay = Replay { seed, failed };
                        let counts = seed::run_seed(seed);
                        *total.lock().expect("runners do not panic here") += counts;
                    }
                    watchdog.watch(runner, None);
                })
            })
            .collect();
        let mut first_panic = None;
        for runner in runners {
            if let Err(panic) = runner.join() {
                first_panic.get_or_insert(panic);
            }
        }
        if let Some(panic) = first_panic {
            std::panic::resume_unwind(panic);
        }
    });
    let total = total.into_inner().expect("runners joined");
    println!(
        "explore_random part {part}/{parts}: {} seeds ({} under None), {} cycles, {} crash \
         points, {} crash states ({} crashed again inside recovery); {} torn pages caught under \
         None ({} seeds ended early), {} pages rebuilt from full-page images, {} commits \
         acknowledged, {} cycles died at their crash fault, {} saw an error, {} changed a page \
         while it was written back; {:.1} s",
        total.seeds,
        total.none_seeds,
        total.cycles,
        total.points,
        total.states,
        total.recovery_states,
        total.caught,
        total.ended_early,
        total.pages_rebuilt,
        total.acks,
        total.died,
        total.errors,
        total.hot_cycles,
        started.elapsed().as_secs_f64()
    );
    if total.known_bugs > 0 {
        println!(
            "explore_random part {part}/{parts}: KNOWN BUGS hit in {} cycles (the engine \
             panicked; see the #[ignore]d tests {:?}); EXPLORE_RANDOM_STRICT=1 fails on them",
            total.known_bugs,
            KNOWN_BUGS.map(|(_, test)| test)
        );
    }
    if env_u64("EXPLORE_RANDOM_SEED").is_none() && env_u64("EXPLORE_RANDOM_SEEDS").is_none() {
        // The headline count, asserted: the two parts make the TESTPLAN's 50,000 (54,171 in
        // the last recorded run); each part must reach this floor, or the tier regressed.
        assert!(
            total.states >= STATES_PER_PART_MIN,
            "explore_random part {part}/{parts}: {} crash states, fewer than \
             {STATES_PER_PART_MIN}",
            total.states
        );
        // Issue 21: crashes must land in checkpoints whose pages are changed again while
        // written back (about one cycle in twenty is one; 20 is a floor far below that).
        assert!(
            total.hot_cycles >= HOT_CYCLES_PER_PART_MIN,
            "explore_random part {part}/{parts}: {} cycles changed a page during its \
             write-back, fewer than {HOT_CYCLES_PER_PART_MIN}",
            total.hot_cycles
        );
    }
    if total.none_seeds >= 40 {
        // The negative control: without a guard, crashes in write-back tear pages, and some
        // must be caught (dozens are per default run), or the crashes never reach a page write.
        assert!(
            total.caught > 0,
            "no torn page was caught in {} seeds without a guard",
            total.none_seeds
        );
    }
    total
}

#[test]
fn random_workloads_crashed_many_ways_keep_every_acknowledged_commit_part_0() {
    run_part(0, 2);
}

#[test]
fn random_workloads_crashed_many_ways_keep_every_acknowledged_commit_part_1() {
    run_part(1, 2);
}

/// Found by this tier (seed 1011, and about one multi-threaded seed in twenty with an
/// error fault): when the log fails in the background (the interval flusher's write of a
/// `Lazy` commit), the log is poisoned but the database is not. The next commit passes
/// `begin()`, changes the pages, records its overlay entries at `log end + 1` and fails at
/// the log append. A writer that passed the poison check in `begin()` while that commit held
/// the writer lock then gets the lock, records the same key at the same provisional lsn (the
/// log end has not moved) and the overlay's assertion panics inside `commit_with`; with
/// other keys it would go on over pages the failed commit half changed. A commit after a
/// failure must return an error (TESTPLAN oracle 5 and 7: fail-stop, never a panic):
/// `begin()` checked the poison before it took the writer lock, and nothing checked it after.
/// Fixed: `begin()` checks again under the lock, and a commit checks the log first.
#[test]
fn a_writer_waiting_for_the_lock_when_a_commit_fails_returns_an_error_not_a_panic() {
    // The steps must fall between two runs of the background flusher (every second); the
    // rare attempt where it runs between steps 1 and 2 is started again, never passed.
    for attempt in 0..5 {
        if waiting_writer_scenario() {
            return;
        }
        println!("attempt {attempt}: the flusher ran before step 2; again");
    }
    panic!("the flusher ran between steps 1 and 2 in five attempts");
}

/// Runs the scenario; false when the flusher failed the log before step 2 could begin.
fn waiting_writer_scenario() -> bool {
    use std::path::Path;
    use std::sync::Arc;
    use std::time::Duration;
    use tilldb::io::{Fault, FaultKind, IoKind, SimConfig, SimDisk};
    use tilldb::{Db, Durability, Options};

    let disk = SimDisk::new(SimConfig::default());
    let options = Options {
        wal: tilldb::WalOptions {
            flush_interval: Duration::from_secs(1),
            ..Options::for_tests().wal
        },
        ..Options::for_tests()
    };
    let db =
        Db::open_with_storage(Arc::new(disk.clone()), Path::new("/db"), options).expect("create");
    let put = |txn: &mut tilldb::Txn<'_>, value: &[u8]| txn.put(b"key", value).expect("put");
    // 1. A `Lazy` commit whose background write will fail (the active segment's: the spare
    //    segment's preparation must not take the fault).
    disk.inject(Fault::once(IoKind::Write, 1, FaultKind::Eio).on_path("00000000000000000001.wal"));
    let mut txn = db.begin().expect("begin");
    put(&mut txn, b"first");
    txn.commit_with(Durability::Lazy)
        .expect("lazy: no I/O waited for");
    // 2. The next transaction begins and reads before the flusher runs, and a second writer
    //    passes the poison check in `begin()` and waits for the writer lock at its commit.
    let Ok(mut txn) = db.begin() else {
        return false;
    };
    // Its read takes the writer lock (a transaction that only writes would take it at
    // commit), so the second writer's commit waits for it.
    if txn.get(b"key").is_err() {
        return false;
    }
    put(&mut txn, b"second");
    let waiter = std::thread::scope(|scope| {
        let waiter = scope.spawn(|| {
            let mut txn = db.begin()?;
            put(&mut txn, b"third");
            txn.commit_with(Durability::Sync)
        });
        // 3. The flusher's write fails meanwhile: the log is poisoned.
        let started = std::time::Instant::now();
        while disk.faults_pending() > 0 {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the flusher never ran"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // 4. The commit holding the lock fails at the log, after recording its overlay
        //    entry.
        txn.commit_with(Durability::Sync)
            .expect_err("the log is poisoned");
        // 5. The waiter gets the lock: it must fail, not panic (it used to: "overlay lsns
        //    must increase per key").
        waiter.join()
    });
    let result = waiter.expect("the waiting writer returns an error instead of panicking");
    assert!(result.is_err(), "acknowledged after a failed commit");
    true
}

/// A quarter of the seeds run an encrypted database (docs/encryption.md), across every guard.
#[test]
fn a_quarter_of_the_seeds_run_encrypted_under_every_guard() {
    let configs: Vec<config::Config> = (1000..1000 + SEEDS_DEFAULT)
        .map(config::Config::from_seed)
        .collect();
    let encrypted = configs.iter().filter(|c| c.encrypted).count();
    let share = encrypted * 100 / configs.len();
    assert!(
        (20..=30).contains(&share),
        "{encrypted} of {} seeds",
        configs.len()
    );
    for guard in [
        tilldb::TornPageGuard::Doublewrite,
        tilldb::TornPageGuard::FullPageImages,
        tilldb::TornPageGuard::Atomic,
    ] {
        assert!(
            configs.iter().any(|c| c.encrypted && c.guard == guard),
            "no encrypted seed under {guard}"
        );
    }
}
