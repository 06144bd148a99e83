//! Running `till bench peers`: the raw rate, then every (thread count, engine) row on a fresh
//! store, with the counters of `counters.rs` read around each row.

use super::counters::{self, Counters};
use super::engines::{self, BoxError, Settings, Store, Writer};
use super::report::{self, PeerRow, PeersRun};
use super::{Engine, PeersArgs};
use crate::latency::Histogram;
use crate::log_load::{Committer, timed_commits};
use crate::machine::Setting;
use crate::raw;
use crate::store_load::{XorShift, key};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Idle time after opening each store before the clock starts: tilldb prepares its spare log
/// segment then (see `SETTLE` in `commit.rs`), the LSM engines start their workers.
const SETTLE: Duration = Duration::from_millis(300);
/// Largest value accepted: larger values measure bandwidth, not the commit path.
const VALUE_BYTES_MAX: usize = 1 << 20;
/// Random keys are drawn below this, so collisions (an update instead of an insert) are rare.
const KEY_SPACE: u64 = 1_000_000_000_000;
/// Seed of thread 0's key stream (thread i uses SEED + i, for every engine alike).
const SEED: u64 = 0x5045_4552_5300_0000;
/// Page size passed when resolving the log block for the raw measurement (as tilldb's).
const PAGE_BYTES: u32 = 16384;

pub fn run(args: &PeersArgs) -> Result<(), Box<dyn std::error::Error>> {
    let engines = validate(args)?;
    let storage = raw::storage(0);
    let bar = crate::progress_bar((1 + engines.len() * args.threads.len()) as u64);
    // The raw measurement also counts the device flushes one raw flushed write costs; the
    // device is only known once the run directory exists, so read every device before.
    let diskstats_before = std::fs::read_to_string("/proc/diskstats").ok();
    let raw::RunStart {
        scratch,
        facts,
        block_bytes,
        raw,
    } = raw::start_run(
        &*storage,
        &args.dir,
        "peers",
        args.flush_method,
        None,
        PAGE_BYTES,
        args.seconds,
        &bar,
    )?;
    let device = facts.device.clone();
    let raw_device_flushes = diskstats_before.and_then(|before| {
        let before = Counters::from_diskstats(&before, device.as_deref()?);
        Counters::read(device.as_deref())
            .since(before)
            .device_flushes
    });
    let settings = Settings {
        flush_method: args.flush_method,
    };
    let mut rows = Vec::with_capacity(engines.len() * args.threads.len());
    for &threads in &args.threads {
        for &engine in &engines {
            let name = engines::name(engine);
            bar.set_message(format!("{name}, {threads} threads"));
            let dir = scratch.path().join(format!("{name}-t{threads}"));
            std::fs::create_dir(&dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            let row = run_row(engine, &dir, settings, args, threads, device.as_deref())
                .map_err(|e| format!("{name}, {threads} threads: {e}"))?;
            std::fs::remove_dir_all(&dir)
                .map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
            rows.push(row);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let run = PeersRun {
        dir: scratch
            .path()
            .parent()
            .unwrap_or(scratch.path())
            .to_path_buf(),
        setting: Setting::with_facts(facts),
        flush_method: args.flush_method,
        block_bytes,
        value_bytes: args.value_bytes,
        seconds: args.seconds,
        raw,
        raw_device_flushes,
        engines,
        rows,
    };
    drop(scratch);
    // The plot and the report both read the run; neither calls the other.
    crate::emit(
        args.json,
        args.plot.as_deref(),
        || super::plot::render(&run),
        || report::json(&run),
        || report::print_text(&run),
    )
}

/// Checks the flags before anything touches the disk; returns the engines to run.
fn validate(args: &PeersArgs) -> Result<Vec<Engine>, String> {
    crate::check_threads_and_seconds(&args.threads, args.seconds)?;
    if args.value_bytes > VALUE_BYTES_MAX {
        return Err(format!(
            "--value-bytes {} is more than the {VALUE_BYTES_MAX} supported",
            args.value_bytes
        ));
    }
    let mut engines = if args.engines.is_empty() {
        engines::default_engines()
    } else {
        args.engines.clone()
    };
    if let Some(&missing) = engines.iter().find(|&&e| !engines::is_built(e)) {
        assert_eq!(missing, Engine::Rocksdb, "only RocksDB is optional");
        return Err(engines::ROCKSDB_NOT_BUILT.into());
    }
    if args.encrypt && !engines.contains(&Engine::TilldbEncrypted) {
        let at = engines
            .iter()
            .position(|&e| e == Engine::Tilldb)
            .map_or(0, |i| i + 1);
        engines.insert(at, Engine::TilldbEncrypted);
    }
    let mut seen = Vec::with_capacity(engines.len());
    engines.retain(|e| {
        let first = !seen.contains(e);
        seen.push(*e);
        first
    });
    Ok(engines)
}

/// A fresh `engine` store in `dir`: one writer per thread, settle, `threads` threads insert
/// and commit for `--seconds`, close.
fn run_row(
    engine: Engine,
    dir: &Path,
    settings: Settings,
    args: &PeersArgs,
    threads: usize,
    device: Option<&str>,
) -> Result<PeerRow, BoxError> {
    let store = engines::open(engine, dir, settings)?;
    let outcome = time_commits(&*store, dir, args, threads, device);
    // Close even after a failed row, so the store's threads and files are released. Timed:
    // a close does what the row left undone in the engine's main structure (tilldb writes
    // back every dirty page in a checkpoint, SQLite checkpoints its WAL into the database),
    // and the steady-state figure counts it (issue 23).
    let close_started = std::time::Instant::now();
    let closed = store.close();
    let close = close_started.elapsed();
    let (committers, elapsed, counts, dir_growth_bytes) = outcome?;
    closed?;
    let commits: u64 = committers.iter().map(|c| c.commits).sum();
    let latencies = Histogram::merged(committers.iter().map(|c| &c.latencies));
    assert_eq!(latencies.count(), commits, "a commit not timed");
    Ok(PeerRow {
        engine,
        threads,
        commits,
        elapsed,
        p50_us: latencies.percentile_us(50.0),
        p99_us: latencies.percentile_us(99.0),
        max_us: latencies.percentile_us(100.0),
        counts,
        dir_growth_bytes,
        close,
    })
}

type Timed = (Vec<Committer>, Duration, Counters, i64);

/// The timed part of a row: writers made, settle, gate, commits, counters around them.
fn time_commits(
    store: &dyn Store,
    dir: &Path,
    args: &PeersArgs,
    threads: usize,
    device: Option<&str>,
) -> Result<Timed, BoxError> {
    let writers = (0..threads)
        .map(|_| store.writer().map(|w| Mutex::new(Some(w))))
        .collect::<Result<Vec<_>, BoxError>>()?;
    std::thread::sleep(SETTLE);
    let dir_before = counters::dir_allocated_bytes(dir);
    let run = crate::threads::run_gated(
        threads,
        "peer",
        Duration::from_secs_f64(args.seconds),
        || Counters::read(device),
        |i, stop| {
            let writer = writers[i]
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take()
                .expect("each thread takes its own writer once");
            commit_until(writer, i, args.value_bytes, stop)
        },
    )
    .map_err(|e| e.to_string())?;
    let dir_after = counters::dir_allocated_bytes(dir);
    let committers = run
        .results
        .into_iter()
        .collect::<Result<Vec<_>, BoxError>>()?;
    let growth = i64::try_from(dir_after).unwrap_or(i64::MAX)
        - i64::try_from(dir_before).unwrap_or(i64::MAX);
    Ok((committers, run.elapsed, run.after.since(run.before), growth))
}

/// One committing thread: insert random keys, one durable transaction each, until told to
/// stop, timing each.
fn commit_until(
    mut writer: Box<dyn Writer + Send + '_>,
    thread: usize,
    value_bytes: usize,
    stop: &AtomicBool,
) -> Result<Committer, BoxError> {
    let mut rng = XorShift::new(SEED.wrapping_add(thread as u64));
    let value = vec![0xA5; value_bytes];
    timed_commits(stop, || {
        let k = key(rng.below(KEY_SPACE));
        writer.insert_commit(k.as_bytes(), &value)
    })
}
