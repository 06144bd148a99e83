//! One seed from start to end: create the database, then cycles of run, crash, recover and
//! check, going on from one recovered copy each time (oracle 8: the recovered database takes
//! commits again, and the next crash must keep what this recovery served).
//!
//! Every crash point is forked several times and each fork crashed its own way: a process
//! kill, power cuts tearing per 4 KiB, power cuts tearing per 512 B with garbage sectors.
//! Some forks are crashed again inside their recovery (oracle 4) before the recovery that
//! is checked.

use super::config::{self, Config, Rng};
use super::oracle::{self, Cycle, Frozen, Holds, Lane};
use super::run;
use std::path::Path;
use std::sync::Arc;
use tilldb::io::{CrashMode, Fault, FaultKind, IoKind, SimDisk, Storage};
use tilldb::{Db, Options};

/// Counts of one or more seeds.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    pub seeds: u64,
    /// Seeds under `TornPageGuard::None`, the negative control.
    pub none_seeds: u64,
    pub cycles: u64,
    /// Crash points: copies of a disk at the moment of a crash.
    pub points: u64,
    /// Crash states: crashed copies recovered and checked.
    pub states: u64,
    /// Of those, crashed a second time inside their recovery.
    pub recovery_states: u64,
    /// States where recovery refused a torn page (only under `None`).
    pub caught: u64,
    pub pages_rebuilt: u64,
    pub acks: u64,
    /// Cycles whose disk died at their crash fault, and cycles where a call returned an
    /// error (after which nothing was acknowledged).
    pub died: u64,
    pub errors: u64,
    /// Seeds that ended early: no copy of a crash recovered (only under `None`).
    pub ended_early: u64,
    /// Cycles in which a thread hit a known bug (`KNOWN_BUGS`).
    pub known_bugs: u64,
    /// Cycles in which a commit changed a page while it was written back (the hot pages of
    /// issue 21): their crash points fall during or after such write-backs.
    pub hot_cycles: u64,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.seeds += o.seeds;
        self.none_seeds += o.none_seeds;
        self.cycles += o.cycles;
        self.points += o.points;
        self.states += o.states;
        self.recovery_states += o.recovery_states;
        self.caught += o.caught;
        self.pages_rebuilt += o.pages_rebuilt;
        self.acks += o.acks;
        self.died += o.died;
        self.errors += o.errors;
        self.ended_early += o.ended_early;
        self.known_bugs += o.known_bugs;
        self.hot_cycles += o.hot_cycles;
    }
}

/// Prints what was being checked if the check panics; nested guards print innermost first,
/// each line with the seed (two runners may fail at once).
pub struct Context(pub String);

thread_local! {
    /// The seed this thread runs, for [`Context`].
    static SEED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl Drop for Context {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("  [seed {}] while checking: {}", SEED.get(), self.0);
        }
    }
}

fn open(disk: &SimDisk, options: Options) -> tilldb::Result<Db> {
    Db::open_with_storage(Arc::new(disk.clone()), Path::new("/db"), options)
}

/// Runs one seed; panics (after printing what failed) if the oracle is violated.
pub fn run_seed(seed: u64) -> Counts {
    SEED.set(seed);
    let config = Config::from_seed(seed);
    let _context = Context(config.to_string());
    let mut counts = Counts {
        seeds: 1,
        none_seeds: u64::from(config.guard == tilldb::TornPageGuard::None),
        ..Counts::default()
    };
    let mut disk = SimDisk::new(config.sim());
    let mut db = open(&disk, config.options(config.background))
        .unwrap_or_else(|e| panic!("create failed: {e}"));
    let mut lanes: Vec<Lane> = (0..config.threads).map(Lane::new).collect();
    let mut seq_base = 0;
    for c in 0..config.cycles {
        let (frozen, ran) = run::cycle(&config, c, db, &disk, &mut lanes);
        counts.cycles += 1;
        counts.acks += ran.acks;
        counts.died += u64::from(ran.died);
        counts.errors += u64::from(ran.first_error.is_some());
        counts.known_bugs += u64::from(!ran.known_bugs.is_empty());
        counts.hot_cycles += u64::from(ran.changed_during_write_back > 0);
        let cycle = Cycle {
            lanes: &lanes,
            attempts: &ran.attempts,
            seq_base,
        };
        let mut next = None;
        for (i, point) in frozen.iter().enumerate() {
            let last = i + 1 == frozen.len();
            next = check_point(&config, c, i as u64, point, &cycle, last, &mut counts);
        }
        let Some((next_db, next_disk, holds)) = next else {
            // Under `None` every copy of the crash may be caught: nothing to go on from.
            counts.ended_early += 1;
            return counts;
        };
        for (lane, &n) in lanes.iter_mut().zip(&holds.counts) {
            lane.truncate(n);
        }
        seq_base = holds.seq;
        (db, disk) = (next_db, next_disk);
    }
    drop(db);
    counts
}

/// The ways each crash point is crashed, one per fork: a kill first (a kill keeps all the
/// same, so one is enough), then power cuts tearing per 4 KiB and per 512 B with garbage.
fn modes(forks: u64) -> Vec<CrashMode> {
    let power = [
        CrashMode::PowerLoss {
            tear_bytes: 4096,
            garbage: false,
        },
        CrashMode::PowerLoss {
            tear_bytes: 512,
            garbage: true,
        },
    ];
    let mut modes = vec![CrashMode::ProcessKill];
    modes.extend((1..forks).map(|i| power[usize::from(i % 2 == 0)]));
    modes
}

/// Crashes copies of `point` in every mode, recovers and checks each. With `go_on`, returns
/// one recovered copy (opened with the run's options) for the next cycle.
fn check_point(
    config: &Config,
    cycle_index: u64,
    index: u64,
    point: &Frozen,
    cycle: &Cycle<'_>,
    go_on: bool,
    counts: &mut Counts,
) -> Option<(Db, SimDisk, Holds)> {
    let _context = Context(point.label.clone());
    counts.points += 1;
    let modes = modes(config.forks);
    let mut rng = Rng::new(config::mix(config.seed, 6, (cycle_index << 8) | index));
    let chosen = go_on.then(|| rng.below(modes.len() as u64));
    let mut kept = None;
    let mut fallback = None;
    for (f, &mode) in modes.iter().enumerate() {
        let fork_seed = config::mix(
            config.seed,
            7,
            (cycle_index << 16) | (index << 8) | f as u64,
        );
        let _context = Context(format!("fork {f}: {mode:?}, fork seed {fork_seed}"));
        let disk = point.disk.fork(fork_seed);
        disk.crash(mode);
        if rng.chance(15) && crash_in_recovery(config, &disk, &mut rng) {
            counts.states += 1;
            counts.recovery_states += 1;
        }
        let continues = chosen == Some(f as u64);
        let background = continues || (config.background && rng.chance(25));
        counts.states += 1;
        let db = match open(&disk, config.options(background)) {
            Ok(db) => db,
            Err(e) => {
                oracle::caught(config, &format!("recovery: {e}"));
                counts.caught += 1;
                continue;
            }
        };
        db.check_invariants();
        let checked = oracle::check(config, &db, point, mode, cycle);
        counts.pages_rebuilt += db.recovery().pages_rebuilt;
        match checked {
            Err(_) => counts.caught += 1,
            Ok(holds) if continues => kept = Some((db, disk, holds)),
            Ok(holds) if go_on && fallback.is_none() => {
                drop(db);
                fallback = Some((disk, holds));
            }
            Ok(_) => {
                // Done with this copy: kill it first, so the engine's shutdown (a
                // checkpoint of everything redo dirtied) fails at once instead of writing.
                disk.crash(CrashMode::ProcessKill);
                drop(db);
            }
        }
    }
    kept.or_else(|| {
        // The chosen copy was caught (only under `None`): go on from another, reopened.
        let (disk, holds) = fallback?;
        let db = open(&disk, config.options(config.background)).expect("it opened before");
        Some((db, disk, holds))
    })
}

/// Crashes `disk` again inside its recovery (at the k-th write, flush, or directory call of
/// the recovery), then a second crash in a random mode. Returns whether the recovery died.
fn crash_in_recovery(config: &Config, disk: &SimDisk, rng: &mut Rng) -> bool {
    let kind = rng.pick(&[
        IoKind::Write,
        IoKind::Write,
        IoKind::Flush,
        IoKind::Flush,
        IoKind::SetLen,
        IoKind::Create,
        IoKind::Rename,
        IoKind::FlushDir,
    ]);
    disk.inject(Fault::once(kind, rng.range(1, 8), FaultKind::Crash));
    if let Ok(db) = open(disk, config.options(false)) {
        drop(db); // Recovery was done before the k-th call; the close may die instead.
    }
    let died = disk.exists(Path::new("/db")).is_err();
    disk.clear_faults();
    disk.crash(rng.pick(&[
        CrashMode::ProcessKill,
        CrashMode::PowerLoss {
            tear_bytes: 512,
            garbage: true,
        },
    ]));
    died
}
