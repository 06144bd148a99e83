//! The crash explorer: runs a workload once on the simulated disk, recording a crash point
//! before every state-changing call (`SimDisk::record_crash_points`), then crashes a copy of
//! the disk at each point in every way and checks what recovery makes of it.
//!
//! ```text
//!   workload ──► points 0..N (+ the point after the last call)
//!   each point ──► process kill, once per cut point of the write in flight (4 KiB prefixes)
//!              ──► power cuts: unflushed writes kept / dropped / torn per 4 KiB, and per
//!                  512 B with garbage sectors; unsynced names kept or lost (seeded)
//!   each crashed disk ──► open (recovery) ──► the oracle
//!   every k-th ──► recovery recorded, crashed at each of its points, recovered again
//! ```
//!
//! The oracle (shared/TESTPLAN.md, 1-4 and 8): the recovered state is the model after the
//! first n commits, with n at least the commits the crash may not take (acknowledged `Sync`
//! commits, and `Buffered` ones under a process kill; everything before a finished
//! checkpoint) and at most the commits begun; each table's length is the rows it holds; the
//! trees and the free-space accounting check; a recovery crashed and recovered again comes
//! back to the same n; the database takes a new commit. With the write buffer, on every 4th
//! state a read-only handle opened first (which rebuilds the buffer and its row counts from
//! the log, where the writer's open drains it) reads such a state too, lengths included. Under `TornPageGuard::None` a torn page may instead make recovery fail with an
//! error naming the file and offset (counted as caught), never a wrong state.
//!
//! A failure prints the scenario, point, cut, crash mode and seed; rerun exactly that with
//! `EXPLORE_REPLAY="<scenario> <point> <cut> <mode> <seed>"`.

pub mod workload;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use tilldb::TornPageGuard;
use tilldb::io::{CrashMode, CrashPoint, IoKind, SimConfig, SimDisk};
use tilldb::{Db, Direction, Durability, FlushMethod, Options};
use workload::{Model, Step, Workload, durability_of};

/// One workload under one configuration.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub workload: Workload,
    pub guard: TornPageGuard,
    pub durability: Durability,
    pub flush_method: FlushMethod,
    /// A 4K-native device (4096-byte sectors and direct-I/O alignment, 4 KiB log blocks)
    /// instead of 512-byte sectors with 512-byte log blocks.
    pub four_k: bool,
    /// An encrypted database (docs/encryption.md): sealed pages, log records and scratch.
    pub encrypted: bool,
    /// The write buffer on (docs/write-buffer.md), draining at `WRITE_BUFFER_BYTES`: the
    /// `Buffered` and `Lazy` commits are buffered, and drains run inside the workload.
    pub write_buffer: bool,
}

/// Where a scenario's write buffer drains: a few commits' worth, so that drains (and crashes
/// inside them) come often.
const WRITE_BUFFER_BYTES: u64 = 2048;

impl Scenario {
    pub fn name(&self) -> String {
        format!(
            "{}/{}/{:?}/{}{}{}{}",
            self.workload.name,
            self.guard,
            self.durability,
            self.flush_method,
            if self.four_k { "/4k" } else { "" },
            if self.encrypted { "/encrypted" } else { "" },
            if self.write_buffer { "/buffer" } else { "" }
        )
    }

    fn options(&self) -> Options {
        let defaults = Options::for_tests();
        Options {
            cache_bytes: 12 * 4096,
            durability: self.durability,
            flush_method: Some(self.flush_method),
            torn_page_guard: self.guard,
            // Checkpoints only where the workload asks, and none by time.
            checkpoint_log_bytes: 1 << 40,
            checkpoint_interval: std::time::Duration::from_secs(1 << 30),
            wal: tilldb::WalOptions {
                // At least 8 log blocks, the minimum.
                segment_bytes: if self.four_k {
                    self.workload.segment_bytes.max(64 << 10)
                } else {
                    self.workload.segment_bytes
                },
                log_block_bytes: if self.four_k {
                    None
                } else {
                    defaults.wal.log_block_bytes
                },
                // Every close trims the log (`wal/writer/trim.rs`), at every crash point.
                close_trim_bytes: 0,
                ..defaults.wal.clone()
            },
            background_threads: false,
            write_buffer_bytes: if self.write_buffer {
                WRITE_BUFFER_BYTES
            } else {
                0
            },
            encryption: self
                .encrypted
                .then(|| tilldb::internals::crypt::Encryption {
                    provider: Arc::new(tilldb::internals::crypt::StaticKey::new(&[0x6b; 32])),
                    cipher: tilldb::internals::crypt::Cipher::Aes256Gcm,
                }),
            ..defaults
        }
    }

    fn config(&self, seed: u64) -> SimConfig {
        let device = if self.four_k {
            SimConfig::four_k_native()
        } else {
            SimConfig::default()
        };
        SimConfig {
            seed,
            // The atomic guard needs a device with atomic writes of a page.
            atomic_write_unit: (self.guard == TornPageGuard::Atomic).then_some((4096, 65536)),
            ..device
        }
    }

    fn open(&self, disk: &SimDisk) -> tilldb::Result<Db> {
        Db::open_with_storage(Arc::new(disk.clone()), Path::new("/db"), self.options())
    }
}

/// What one recorded run did: the points, and where each commit began and returned.
pub struct Recording {
    pub points: Vec<CrashPoint>,
    /// Point index current when commit c began / returned, and its durability.
    begun: Vec<usize>,
    returned: Vec<(usize, Durability)>,
    /// Point index when each checkpoint returned, and the commits before it.
    checkpoints: Vec<(usize, usize)>,
}

/// Runs the scenario once, recording every crash point (from creating the database to
/// closing it, and the point after).
pub fn record(scenario: &Scenario) -> Recording {
    let disk = SimDisk::new(scenario.config(1));
    disk.record_crash_points(true);
    let db = scenario
        .open(&disk)
        .unwrap_or_else(|e| panic!("{}: create: {e}", scenario.name()));
    let (mut begun, mut returned, mut checkpoints) = (Vec::new(), Vec::new(), Vec::new());
    for step in &scenario.workload.steps {
        match step {
            Step::Commit(ops) => {
                let c = begun.len();
                begun.push(disk.crash_points_recorded());
                let mut txn = db.begin().expect("begin");
                for (t, k, v) in ops {
                    match v {
                        Some(v) => txn.put_in(t, k, v).expect("put"),
                        None => txn.delete_in(t, k).expect("delete"),
                    }
                }
                let durability = durability_of(scenario.durability, c);
                txn.commit_with(durability)
                    .unwrap_or_else(|e| panic!("{}: commit {c}: {e}", scenario.name()));
                returned.push((disk.crash_points_recorded(), durability));
                db.check_invariants();
            }
            Step::Checkpoint => {
                db.checkpoint()
                    .unwrap_or_else(|e| panic!("{}: checkpoint: {e}", scenario.name()));
                checkpoints.push((disk.crash_points_recorded(), begun.len()));
                db.check_invariants();
            }
        }
    }
    if scenario.workload.name == "multi-part-commit" {
        let parts = db.stats().commit_parts;
        assert!(parts >= 4, "{}: only {parts} commit parts", scenario.name());
    }
    if scenario.durability == Durability::Sync {
        db.close()
            .unwrap_or_else(|e| panic!("{}: close: {e}", scenario.name()));
    } else {
        // The last handle dropped without a close: no checkpoint first, so its header names
        // an older redo point while it trims the log (`wal/writer/trim.rs`'s order matters).
        drop(db);
    }
    let mut points = disk.take_crash_points();
    points.push(disk.crash_point_now());
    Recording {
        points,
        begun,
        returned,
        checkpoints,
    }
}

impl Recording {
    /// The least and most commits a crash at point `at` may leave, in `mode`.
    fn bounds(&self, at: usize, mode: CrashMode) -> (usize, usize) {
        let kill = mode == CrashMode::ProcessKill;
        let mut low = 0;
        for (c, &(returned, durability)) in self.returned.iter().enumerate() {
            let kept = match durability {
                Durability::Sync => true,
                Durability::Buffered => kill,
                Durability::Lazy => false,
            };
            if returned <= at && kept {
                low = c + 1;
            }
        }
        for &(returned, commits) in &self.checkpoints {
            if returned <= at {
                low = low.max(commits);
            }
        }
        let high = self.begun.iter().filter(|&&begun| begun <= at).count();
        (low, high)
    }
}

/// Counts of one exploration.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    pub points: u64,
    pub states: u64,
    pub recovery_states: u64,
    /// States where recovery (or the check) refused a torn page: only under `None`.
    pub caught: u64,
    pub pages_rebuilt: u64,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.points += o.points;
        self.states += o.states;
        self.recovery_states += o.recovery_states;
        self.caught += o.caught;
        self.pages_rebuilt += o.pages_rebuilt;
    }
}

/// Prints how to replay the state being checked if the check panics.
struct Replay(String);

impl Drop for Replay {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "explorer failure; replay with EXPLORE_REPLAY=\"{}\"",
                self.0
            );
        }
    }
}

/// The ways a crash at one point is tried, besides a process kill at each cut.
const POWER_CUTS: [CrashMode; 4] = [
    CrashMode::PowerLoss {
        tear_bytes: 4096,
        garbage: false,
    },
    CrashMode::PowerLoss {
        tear_bytes: 4096,
        garbage: false,
    },
    CrashMode::PowerLoss {
        tear_bytes: 512,
        garbage: true,
    },
    CrashMode::PowerLoss {
        tear_bytes: 512,
        garbage: true,
    },
];

fn mode_name(mode: CrashMode) -> String {
    match mode {
        CrashMode::ProcessKill => "kill".into(),
        CrashMode::PowerLoss {
            tear_bytes,
            garbage,
        } => format!("power{tear_bytes}{}", if garbage { "g" } else { "" }),
    }
}

fn parse_mode(text: &str) -> CrashMode {
    match text {
        "kill" => CrashMode::ProcessKill,
        "power4096" => POWER_CUTS[0],
        "power512g" => POWER_CUTS[2],
        other => {
            let garbage = other.ends_with('g');
            let bytes = other
                .trim_start_matches("power")
                .trim_end_matches('g')
                .parse()
                .expect("EXPLORE_REPLAY mode: kill or power<bytes>[g]");
            CrashMode::PowerLoss {
                tear_bytes: bytes,
                garbage,
            }
        }
    }
}

/// A seed for one crash of one point, different for every scenario, point and try.
fn seed_of(scenario: &Scenario, point: usize, try_: usize) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in scenario.name().bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    h ^ ((point as u64) << 8) ^ try_ as u64
}

/// Explores every point of `scenario`: a process kill at each cut, every power cut of
/// [`POWER_CUTS`], and every `recovery_every`-th point also crashed inside its recovery.
pub fn explore(scenario: &Scenario, recovery_every: usize) -> Counts {
    let recording = record(scenario);
    let mut counts = Counts {
        points: recording.points.len() as u64,
        ..Counts::default()
    };
    for point in &recording.points {
        let at = point.index();
        for cut in 0..point.cuts() {
            counts += check_state(scenario, &recording, point, cut, CrashMode::ProcessKill, 0);
        }
        for (try_, &mode) in POWER_CUTS.iter().enumerate() {
            let seed = seed_of(scenario, at, try_);
            let state = check_state(scenario, &recording, point, point.cuts() - 1, mode, seed);
            counts += state;
            if at % recovery_every == 0
                && try_ == (at / recovery_every) % POWER_CUTS.len()
                && state.caught == 0
            {
                counts += crash_recovery(scenario, &recording, point, mode, seed);
            }
        }
    }
    counts
}

/// Replays one state named by `EXPLORE_REPLAY` ("<scenario> <point> <cut> <mode> <seed>").
pub fn replay(scenarios: &[Scenario], spec: &str) {
    let parts: Vec<&str> = spec.split_whitespace().collect();
    assert!(
        parts.len() == 5 || parts.len() == 7,
        "EXPLORE_REPLAY: <scenario> <point> <cut> <mode> <seed> [r<recovery point> <mode>]"
    );
    let scenario = scenarios
        .iter()
        .find(|s| s.name() == parts[0])
        .unwrap_or_else(|| panic!("no scenario {}", parts[0]));
    let recording = record(scenario);
    let point = &recording.points[parts[1].parse::<usize>().expect("point")];
    let cut = parts[2].parse().expect("cut");
    let mode = parse_mode(parts[3]);
    let seed = parts[4].parse().expect("seed");
    println!("replaying {spec}: {point:?}");
    if parts.len() == 5 {
        let counts = check_state(scenario, &recording, point, cut, mode, seed);
        println!("{counts:?}");
        return;
    }
    // A crash inside the recovery of that state.
    let j: usize = parts[5]
        .trim_start_matches('r')
        .parse()
        .expect("r<recovery point>");
    let again = parse_mode(parts[6]);
    let disk = point.disk(cut, seed);
    disk.crash(mode);
    let bounds = recording.bounds(point.index(), mode);
    disk.record_crash_points(true);
    let first = recover(scenario, &disk, bounds, point);
    let inner = disk.take_crash_points();
    for p in &inner {
        println!("  recovery point {p:?}");
    }
    println!("first recovery: {first:?}");
    let k = usize::from(again != CrashMode::ProcessKill);
    let rpoint = &inner[j];
    let cut = u32::try_from(j).expect("few points") % rpoint.cuts();
    let disk = rpoint.disk(cut, seed ^ ((j as u64) << 20) ^ k as u64);
    disk.crash(again);
    if let Ok(out) = std::env::var("EXPLORE_DUMP") {
        dump(&disk, Path::new(&out));
    }
    println!(
        "second recovery: {:?}",
        recover(scenario, &disk, bounds, point)
    );
}

/// Copies the simulated database's files into `out` (for `till dump-log`, `till check`).
fn dump(disk: &SimDisk, out: &Path) {
    use tilldb::io::Storage;
    for dir in ["/db", "/db/wal"] {
        let target = out.join(dir.trim_start_matches('/'));
        std::fs::create_dir_all(&target).expect("mkdir");
        for name in disk.list_dir(Path::new(dir)).expect("ls") {
            let path = Path::new(dir).join(&name);
            if let Some(bytes) = disk.live_contents(&path) {
                std::fs::write(target.join(&name), bytes).expect("write");
            }
        }
    }
    println!("dumped into {}", out.display());
}

/// Crashes a copy of `point` (cut at `cut`) in `mode`, recovers it and applies the oracle.
fn check_state(
    scenario: &Scenario,
    recording: &Recording,
    point: &CrashPoint,
    cut: u32,
    mode: CrashMode,
    seed: u64,
) -> Counts {
    let _replay = Replay(format!(
        "{} {} {cut} {} {seed}",
        scenario.name(),
        point.index(),
        mode_name(mode)
    ));
    let disk = point.disk(cut, seed);
    disk.crash(mode);
    let bounds = recording.bounds(point.index(), mode);
    let mut counts = Counts {
        states: 1,
        ..Counts::default()
    };
    // With the write buffer, on every 4th state (a quarter other than oracle 8's), a
    // read-only handle first: it rebuilds the buffer and its row counts from the log in
    // memory, where the writer's open drains the buffer at once.
    let read_only_here = point.index() % 4 == usize::try_from((seed + 2) % 4).expect("small");
    if scenario.write_buffer
        && read_only_here
        && let Err(e) = read_only_matches(scenario, &disk, bounds, point)
    {
        counts.caught = 1;
        caught(scenario, &format!("read-only recovery: {e}"));
    }
    match recover(scenario, &disk, bounds, point) {
        Ok((n, rebuilt)) => {
            counts.pages_rebuilt = rebuilt;
            // Oracle 8, on every 4th state (each is a commit, a flush and a close).
            if point.index() % 4 == usize::try_from(seed % 4).expect("small") {
                goes_on(scenario, &disk, n);
            }
        }
        Err(caught) => {
            assert_eq!(
                scenario.guard,
                TornPageGuard::None,
                "{}: point {point:?}: {caught}",
                scenario.name()
            );
            counts.caught = 1;
        }
    }
    counts
}

/// Opens the crashed `disk` and checks the oracle; returns the commits recovered and the
/// pages rebuilt, or the error under `None` that caught a torn page.
fn recover(
    scenario: &Scenario,
    disk: &SimDisk,
    (low, high): (usize, usize),
    point: &CrashPoint,
) -> Result<(usize, u64), String> {
    let name = scenario.name();
    let db = match scenario.open(disk) {
        Ok(db) => db,
        Err(e) => return Err(caught(scenario, &format!("recovery: {e}"))),
    };
    db.check_invariants();
    let space = match db.check_space() {
        Ok(space) => space,
        Err(e) => return Err(caught(scenario, &format!("check: {e}"))),
    };
    assert!(
        space.is_clean(),
        "{name}: at {point:?}: space accounting: {space:?}"
    );
    let recovered = state(&db, &scenario.workload);
    let Some(n) = (low..=high).find(|&n| scenario.workload.model_after(n) == recovered) else {
        panic!(
            "{name}: at {point:?}: the recovered state is no prefix of commits {low}..={high} \
             (an acknowledged commit lost, or one half applied); it has {} rows",
            recovered.len()
        );
    };
    lengths_match(
        &db,
        &scenario.workload,
        &recovered,
        &format!("{name}: at {point:?}"),
    );
    Ok((n, db.recovery().pages_rebuilt))
}

/// A read-only handle opened on the crashed `disk` (no writer: its snapshot ends where the
/// writer's recovery will) reads a prefix state of commits `low..=high`, with its lengths;
/// or finds no database yet (a crash before its create finished).
fn read_only_matches(
    scenario: &Scenario,
    disk: &SimDisk,
    (low, high): (usize, usize),
    point: &CrashPoint,
) -> tilldb::Result<()> {
    let name = scenario.name();
    let db = match Db::open_read_only_with_storage(
        Arc::new(disk.clone()),
        Path::new("/db"),
        scenario.options(),
    ) {
        Ok(db) => db,
        // Crashed before its create finished: nothing to read yet (the writer creates it).
        Err(tilldb::Error::NotADatabase { .. }) => return Ok(()),
        Err(e) => return Err(e),
    };
    let seen = state(&db, &scenario.workload);
    assert!(
        (low..=high).any(|n| scenario.workload.model_after(n) == seen),
        "{name}: at {point:?}: a read-only handle's state is no prefix of commits \
         {low}..={high}; it has {} rows",
        seen.len()
    );
    lengths_match(
        &db,
        &scenario.workload,
        &seen,
        &format!("{name}: at {point:?}, read-only"),
    );
    Ok(())
}

/// Each table's length is the rows `model` holds of it (a count kept with the table, and
/// with the write buffer on the row sums rebuilt from the log).
fn lengths_match(db: &Db, workload: &Workload, model: &Model, at: &str) {
    for table in workload.tables() {
        let rows = model.keys().filter(|(t, _)| *t == table).count() as u64;
        let len = db
            .len_in(&table)
            .unwrap_or_else(|e| panic!("{at}: len of {table:?}: {e}"));
        assert_eq!(len, rows, "{at}: the length of {table:?}");
    }
}

/// An error is acceptable only under `None`, and must name the file and offset.
fn caught(scenario: &Scenario, error: &str) -> String {
    assert!(
        scenario.guard == TornPageGuard::None,
        "{}: {error}",
        scenario.name()
    );
    assert!(
        error.contains("offset") || error.contains("corrupt"),
        "{}: an error without a location: {error}",
        scenario.name()
    );
    error.to_owned()
}

/// Reads every table of the workload into a model.
fn state(db: &Db, workload: &Workload) -> Model {
    let mut model = BTreeMap::new();
    for table in workload.tables() {
        let rows = db
            .scan_in(
                &table,
                Bound::Unbounded,
                Bound::Unbounded,
                Direction::Forward,
            )
            .unwrap_or_else(|e| panic!("scan {table:?}: {e}"));
        for (k, v) in rows {
            model.insert((table.clone(), k), v);
        }
    }
    model
}

/// Oracle 8: the recovered database takes a commit, which survives a power cut.
fn goes_on(scenario: &Scenario, disk: &SimDisk, n: usize) {
    let name = scenario.name();
    let db = scenario.open(disk).expect("opened once already");
    let mut txn = db.begin().expect("begin");
    txn.put_in("", b"after-crash", b"yes").expect("put");
    txn.commit_with(Durability::Sync)
        .unwrap_or_else(|e| panic!("{name}: a commit after recovery failed: {e}"));
    std::mem::forget(db);
    disk.crash(CrashMode::PowerLoss {
        tear_bytes: 512,
        garbage: true,
    });
    let db = scenario
        .open(disk)
        .unwrap_or_else(|e| panic!("{name}: recovery after the new commit failed: {e}"));
    let mut expected = scenario.workload.model_after(n);
    expected.insert((String::new(), b"after-crash".to_vec()), b"yes".to_vec());
    assert_eq!(
        state(&db, &scenario.workload),
        expected,
        "{name}: the commit after recovery, or an earlier one, was lost"
    );
}

/// Oracle 4: the recovery of `point` crashed at each of its own points and recovered again
/// comes back to the same state.
fn crash_recovery(
    scenario: &Scenario,
    recording: &Recording,
    point: &CrashPoint,
    mode: CrashMode,
    seed: u64,
) -> Counts {
    let disk = point.disk(point.cuts() - 1, seed);
    disk.crash(mode);
    let bounds = recording.bounds(point.index(), mode);
    disk.record_crash_points(true);
    let first = recover(scenario, &disk, bounds, point);
    let inner = disk.take_crash_points();
    disk.record_crash_points(false);
    let Ok((n, _)) = first else {
        return Counts::default();
    };
    let mut counts = Counts::default();
    for (j, rpoint) in inner.iter().enumerate() {
        for (k, again) in [
            CrashMode::ProcessKill,
            CrashMode::PowerLoss {
                tear_bytes: 512,
                garbage: true,
            },
        ]
        .into_iter()
        .enumerate()
        {
            let _replay = Replay(format!(
                "{} {} {} {} {seed} r{j} {}",
                scenario.name(),
                point.index(),
                point.cuts() - 1,
                mode_name(mode),
                mode_name(again),
            ));
            let seed2 = seed ^ ((j as u64) << 20) ^ k as u64;
            // Kills cut the write in flight at a different place at each point.
            let cut = u32::try_from(j).expect("few points") % rpoint.cuts();
            let disk = rpoint.disk(cut, seed2);
            disk.crash(again);
            counts.recovery_states += 1;
            counts.states += 1;
            match recover(scenario, &disk, (n, n), point) {
                Ok((n2, _)) => assert_eq!(n2, n, "{}: recovery is not idempotent", scenario.name()),
                Err(_) => counts.caught += 1, // only under `None`: `caught` checked that
            }
        }
    }
    counts
}

/// The kinds of call in `points`, counted, for the report.
pub fn kinds(points: &[CrashPoint]) -> BTreeMap<String, usize> {
    let mut kinds = BTreeMap::new();
    for point in points {
        let kind = point
            .kind()
            .map_or("end".to_owned(), |k: IoKind| format!("{k:?}"));
        *kinds.entry(kind).or_insert(0) += 1;
    }
    kinds
}
