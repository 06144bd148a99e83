//! `till bench commit`: one-insert transactions through the whole store (B+tree, buffer pool,
//! log) against thread count, next to the raw flushed-write rate of the same run.
//!
//! ```text
//!  DIR/commit-PID-N/          fresh for this run, removed at the end (also on error)
//!   1. raw:   one log block + flush, in a loop, on a preallocated file  -> raw flushes/s
//!   2. per thread count T, a fresh database in its own subdirectory:
//!        Db::open -> settle -> T threads insert+commit until stopped -> stats -> close -> remove
//! ```
//!
//! Each commit is `begin; put(random 15 B key, value); commit` at `--durability`. Both steps
//! run on the same storage, so `--sync-latency-us` (a SIMULATED flush latency, one flush at a
//! time, see `slow_storage.rs`) applies to both. The output is `till bench log`'s, with
//! `workload: "store-inserts"` (see `log_report.rs` and `log_json.rs`), so the two compare column
//! for column.

use super::log_json;
use super::log_report::Row;
use super::log_report::{self, LogRun, Workload};
use super::machine::Setting;
use super::raw;
use super::store_load::{self, ThreadState, key};
use clap::Args;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tilldb::TornPageGuard;
use tilldb::io::Storage;
use tilldb::{Db, Durability, FlushMethod, Options};

/// Idle time after opening each database before the clock starts, so the log's first spare
/// segment is prepared outside the row (see `SETTLE` in `log.rs`; the segments here are
/// 16 MiB, a quarter of the default).
const SETTLE: Duration = Duration::from_millis(300);
/// Log segment size of the benchmark databases: large enough that a row rarely switches
/// segments, small enough to preallocate quickly for every row.
const SEGMENT_BYTES: u64 = 16 << 20;
/// Largest value accepted: larger values measure overflow-page bandwidth, not the commit path.
const VALUE_BYTES_MAX: usize = 1 << 20;
/// Random keys are drawn below this, so collisions (an update instead of an insert) are rare.
const KEY_SPACE: u64 = 1_000_000_000_000;
/// Seed of thread 0's key stream.
const SEED: u64 = 0x434F_4D4D_4954_0000;

#[derive(Args, Debug)]
pub struct CommitArgs {
    /// Thread counts to run, one row (and one fresh database) each.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,2,4,8,16,32,64,128,256"
    )]
    threads: Vec<usize>,
    /// What each commit waits for: sync (flushed), buffered (written to the OS) or lazy.
    #[arg(long, default_value = "sync")]
    durability: Durability,
    /// How the log and data file are made durable.
    #[arg(long, default_value = "fdatasync")]
    flush_method: FlushMethod,
    /// Bytes per inserted value.
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
    /// Seconds of commits per thread count.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Add a SIMULATED latency of N us to every flush, one flush at a time as on a single
    /// disk (0: off). Every number printed then includes it.
    #[arg(long, value_name = "N", default_value_t = 0)]
    sync_latency_us: u64,
    /// Buffer pool size in MiB.
    #[arg(long, default_value_t = 64)]
    cache_mib: u64,
    /// Page size of the databases.
    #[arg(long, default_value_t = 16384)]
    page_bytes: u32,
    /// How pages are protected from torn writes: doublewrite, or none (unsafe unless the
    /// device writes pages atomically).
    #[arg(long, default_value = "doublewrite")]
    torn_page_guard: TornPageGuard,
    /// Directory for the scratch databases; each run uses and then removes a fresh
    /// subdirectory.
    #[arg(long, default_value = "tilldb-bench")]
    dir: PathBuf,
    /// Print JSON (stable for scripts) instead of tables.
    #[arg(long)]
    json: bool,
    /// Also draw commits/s against threads into this file (SVG, or PNG when it ends in .png).
    #[arg(long, value_name = "FILE.svg|png", value_parser = crate::png::parse_plot_path)]
    plot: Option<PathBuf>,
}

pub fn run(args: &CommitArgs) -> Result<(), Box<dyn std::error::Error>> {
    let options = validate(args)?;
    let storage = raw::storage(args.sync_latency_us);
    let bar = super::progress_bar(args.threads.len() as u64 + 1);
    let raw::RunStart {
        scratch,
        facts,
        block_bytes,
        raw,
    } = raw::start_run(
        &*storage,
        &args.dir,
        "commit",
        args.flush_method,
        None,
        args.page_bytes,
        args.seconds,
        &bar,
    )?;
    let mut rows = Vec::with_capacity(args.threads.len());
    for (index, &threads) in args.threads.iter().enumerate() {
        bar.set_message(format!("{threads} threads"));
        let dir = scratch.path().join(format!("row-{index}-{threads}"));
        let row = run_row(&storage, &dir, &options, args, threads)?;
        std::fs::remove_dir_all(&dir)
            .map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
        rows.push(row);
        bar.inc(1);
    }
    bar.finish_and_clear();

    let run = LogRun {
        workload: Workload::StoreInserts {
            page_bytes: args.page_bytes,
            cache_bytes: options.cache_bytes,
            guard: args.torn_page_guard,
        },
        dir: scratch
            .path()
            .parent()
            .unwrap_or(scratch.path())
            .to_path_buf(),
        setting: Setting::with_facts(facts),
        flush_method: args.flush_method,
        durability: args.durability,
        block_bytes,
        record_bytes: args.value_bytes,
        segment_bytes: SEGMENT_BYTES,
        adaptive_gather: options.wal.adaptive_gather,
        tail: options.wal.tail,
        seconds: args.seconds,
        sync_latency_us: (args.sync_latency_us > 0).then_some(args.sync_latency_us),
        raw,
        rows,
    };
    drop(scratch);
    super::emit(
        args.json,
        args.plot.as_deref(),
        || log_report::plot(&run),
        || log_json::json(&run),
        || log_report::print_text(&run),
    )
}

/// Checks the flags and builds the databases' options, before anything touches the disk.
fn validate(args: &CommitArgs) -> Result<Options, String> {
    super::check_threads_and_seconds(&args.threads, args.seconds)?;
    raw::check_sync_latency(args.sync_latency_us)?;
    if args.value_bytes > VALUE_BYTES_MAX {
        return Err(format!(
            "--value-bytes {} is more than the {VALUE_BYTES_MAX} supported",
            args.value_bytes
        ));
    }
    let cache_bytes = args
        .cache_mib
        .checked_mul(1 << 20)
        .ok_or_else(|| format!("--cache-mib {} is too large", args.cache_mib))?;
    bench_options(
        args.page_bytes,
        cache_bytes,
        args.durability,
        args.flush_method,
        args.torn_page_guard,
    )
    .map_err(|e| {
        format!(
            "{e} (--page-bytes {}, --cache-mib {})",
            args.page_bytes, args.cache_mib
        )
    })
}

/// The options of a benchmark database: the defaults, but the given page size, cache,
/// durability, flush method and guard, and 16 MiB log segments.
pub fn bench_options(
    page_bytes: u32,
    cache_bytes: u64,
    durability: Durability,
    flush_method: FlushMethod,
    guard: TornPageGuard,
) -> tilldb::Result<Options> {
    let defaults = Options::default();
    let options = Options {
        page_bytes: Some(page_bytes),
        cache_bytes,
        durability,
        flush_method: Some(flush_method),
        torn_page_guard: guard,
        wal: tilldb::WalOptions {
            segment_bytes: SEGMENT_BYTES,
            ..defaults.wal.clone()
        },
        ..defaults
    };
    options.validate()?;
    Ok(options)
}

/// Opens a fresh database in `dir`, lets `threads` threads insert and commit for
/// `--seconds`, closes it.
fn run_row(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    options: &Options,
    args: &CommitArgs,
    threads: usize,
) -> Result<Row, Box<dyn std::error::Error>> {
    let db = Db::open_with_storage(Arc::clone(storage), dir, options.clone())
        .map_err(|e| format!("cannot create a database in {}: {e}", dir.display()))?;
    std::thread::sleep(SETTLE);
    let durability = args.durability;
    let phase = store_load::run_threads(
        &db,
        threads,
        Duration::from_secs_f64(args.seconds),
        SEED,
        args.value_bytes,
        move |db, state| insert_random(db, state, durability),
    );
    let close = db.close();
    let phase = phase?;
    close.map_err(|e| format!("closing the database in {} failed: {e}", dir.display()))?;
    let commits: u64 = phase.workers.iter().map(|w| w.ops).sum();
    let wal = phase.counts.wal;
    assert_eq!(
        wal.appends, commits,
        "log appends that no thread counted, or the reverse"
    );
    let latencies = phase.latencies();
    Ok(Row::new(threads, commits, phase.elapsed, &wal, &latencies).with_cpu(phase.cpu))
}

/// A transaction inserting one random key, committed at `durability`.
fn insert_random(db: &Db, state: &mut ThreadState, durability: Durability) -> tilldb::Result<()> {
    let n = state.rng.below(KEY_SPACE);
    let mut txn = db.begin()?;
    txn.put(key(n).as_bytes(), &state.value)?;
    txn.commit_with(durability)
}
