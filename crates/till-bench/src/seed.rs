//! `till bench seed`: the classic test this project started from. One client, 500 times
//! "insert one row, commit", at each durability level and with each flush method, next to the
//! raw flushed-write rate of the same method measured in the same run.
//!
//! ```text
//!  DIR/seed-PID-N/                  fresh for this run, removed at the end (also on error)
//!   per flush method M (those the device refuses are reported as skipped):
//!     1. raw:  one log block + flush with M, in a loop, on a preallocated file -> raw flushes/s
//!     2. per durability D: a fresh database (method M, default options otherwise) ->
//!          settle -> 500 x (begin; put(key i, value); commit_with(D)), each timed -> close
//! ```
//!
//! The figure that matters: `Sync` commits/s over the raw flushes/s of the same method. A
//! commit costs one flushed log write, so the ratio shows what the store adds on top of the
//! disk (the target is >= 0.85). `Buffered` and `Lazy` are not bound by the flush rate.
//!
//! `till bench block-size` is the same test with a log block size axis (`--block-bytes`, also
//! accepted by `seed`): per method and block size, the raw rate at that block size and the
//! commits; a combination the device refuses is listed as skipped with the reason.
//!
//! `seed_report.rs` holds the rows and prints and plots them; `seed_json.rs` is the JSON
//! document.

use super::commit::bench_options;
use super::latency::Histogram;
use super::log_report::Row;
use super::machine::Setting;
use super::raw;
use super::scratch::ScratchDir;
use super::seed_json;
use super::seed_report::{MethodRaw, Report, SeedRow};
use super::store_load::key;
use clap::Args;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tilldb::TornPageGuard;
use tilldb::io::{IoGeometry, Storage};
use tilldb::{Db, Durability, FlushMethod};

/// Idle time after opening each database before the first commit, so the log's spare
/// segment is prepared outside the timed commits (see `SETTLE` in `commit.rs`).
const SETTLE: Duration = Duration::from_millis(300);
/// Most commits a run may ask for (each is timed and kept).
const COMMITS_MAX: u64 = 10_000_000;
/// Largest value accepted.
const VALUE_BYTES_MAX: usize = 1 << 20;
/// Cache of the seed databases (they stay tiny).
const CACHE_BYTES: u64 = 64 << 20;

#[derive(Args, Debug)]
pub struct SeedArgs {
    /// Insert-and-commit transactions per database.
    #[arg(long, default_value_t = 500)]
    commits: u64,
    /// Flush methods to run [default: every durable one].
    #[arg(long, value_delimiter = ',')]
    flush_methods: Vec<FlushMethod>,
    /// Durability levels to run.
    #[arg(long, value_delimiter = ',', default_value = "sync,buffered,lazy")]
    durabilities: Vec<Durability>,
    /// Bytes per inserted value (the row).
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
    /// Seconds of the raw flushed-write measurement per method.
    #[arg(long, default_value_t = 1.0)]
    raw_seconds: f64,
    /// Add a SIMULATED latency of N us to every flush, one flush at a time as on a single
    /// disk (0: off). Every number printed then includes it.
    #[arg(long, value_name = "N", default_value_t = 0)]
    sync_latency_us: u64,
    /// Log block sizes to run, each a power of two from 512 [default: the device's].
    #[arg(long, value_delimiter = ',')]
    block_bytes: Vec<u32>,
    /// Page size of the databases.
    #[arg(long, default_value_t = 16384)]
    page_bytes: u32,
    /// Directory for the scratch databases; each run uses and then removes a fresh
    /// subdirectory.
    #[arg(long, default_value = "tilldb-bench")]
    dir: PathBuf,
    /// Print JSON (stable for scripts) instead of tables.
    #[arg(long)]
    json: bool,
    /// Also draw commits/s per row, with each method's raw flush rate, into this file (SVG, or PNG
    /// when it ends in .png).
    #[arg(long, value_name = "FILE.svg|png", value_parser = crate::png::parse_plot_path)]
    plot: Option<PathBuf>,
}

/// `till bench block-size`: the seed test across log block sizes, `Sync` commits by default.
#[derive(Args, Debug)]
pub struct BlockSizeArgs {
    /// Log block sizes to run, each a power of two from 512.
    #[arg(long, value_delimiter = ',', default_value = "512,4096,16384")]
    block_bytes: Vec<u32>,
    /// Insert-and-commit transactions per database.
    #[arg(long, default_value_t = 500)]
    commits: u64,
    /// Flush methods to run [default: every durable one].
    #[arg(long, value_delimiter = ',')]
    flush_methods: Vec<FlushMethod>,
    /// Durability levels to run.
    #[arg(long, value_delimiter = ',', default_value = "sync")]
    durabilities: Vec<Durability>,
    /// Seconds of the raw flushed-write measurement per method and block size.
    #[arg(long, default_value_t = 1.0)]
    raw_seconds: f64,
    /// Add a SIMULATED latency of N us to every flush (0: off).
    #[arg(long, value_name = "N", default_value_t = 0)]
    sync_latency_us: u64,
    /// Directory for the scratch databases (a fresh subdirectory, removed after).
    #[arg(long, default_value = "tilldb-bench")]
    dir: PathBuf,
    /// Print JSON (stable for scripts) instead of tables.
    #[arg(long)]
    json: bool,
    /// Also draw commits/s per row, with each method's raw flush rate, into this file (SVG, or PNG
    /// when it ends in .png).
    #[arg(long, value_name = "FILE.svg|png", value_parser = crate::png::parse_plot_path)]
    plot: Option<PathBuf>,
}

/// Runs `bench block-size`: `bench seed` with a block-size axis (rows a device refuses, such
/// as 512-byte `O_DIRECT` writes on a 4K-native disk, are listed as skipped with the reason).
pub fn run_block_sizes(args: &BlockSizeArgs) -> Result<(), Box<dyn std::error::Error>> {
    run(&SeedArgs {
        commits: args.commits,
        flush_methods: args.flush_methods.clone(),
        durabilities: args.durabilities.clone(),
        value_bytes: 100,
        raw_seconds: args.raw_seconds,
        sync_latency_us: args.sync_latency_us,
        block_bytes: args.block_bytes.clone(),
        page_bytes: 16384,
        dir: args.dir.clone(),
        json: args.json,
        plot: args.plot.clone(),
    })
}

pub fn run(args: &SeedArgs) -> Result<(), Box<dyn std::error::Error>> {
    validate(args)?;
    let methods: Vec<FlushMethod> = if args.flush_methods.is_empty() {
        FlushMethod::available()
    } else {
        args.flush_methods.clone()
    };
    let storage = raw::storage(args.sync_latency_us);
    let scratch = ScratchDir::for_run(&args.dir, "seed")?;
    let facts = storage.device_facts(scratch.path())?;
    let blocks: Vec<Option<u32>> = if args.block_bytes.is_empty() {
        vec![None]
    } else {
        args.block_bytes.iter().copied().map(Some).collect()
    };
    let bar =
        super::progress_bar((methods.len() * blocks.len() * (1 + args.durabilities.len())) as u64);
    let mut method_raws = Vec::with_capacity(methods.len() * blocks.len());
    let mut rows = Vec::new();
    for (&method, &block) in methods
        .iter()
        .flat_map(|m| blocks.iter().map(move |b| (m, b)))
    {
        bar.set_message(format!("{method}: raw flushed writes"));
        let raw = match IoGeometry::resolve(&facts, method, block, args.page_bytes) {
            Err(e) => MethodRaw {
                method,
                block_bytes: block.unwrap_or(0),
                raw: Err(e.to_string()),
            },
            Ok(geometry) => {
                let block_bytes = geometry.log_block_bytes;
                let raw = raw::flushed_writes(
                    &*storage,
                    scratch.path(),
                    &facts,
                    method,
                    block_bytes,
                    Duration::from_secs_f64(args.raw_seconds),
                )?;
                MethodRaw {
                    method,
                    block_bytes,
                    raw,
                }
            }
        };
        bar.inc(1);
        let Ok(measured) = &raw.raw else {
            bar.inc(args.durabilities.len() as u64);
            method_raws.push(raw);
            continue;
        };
        for &durability in &args.durabilities {
            bar.set_message(format!(
                "{method}, {} B blocks: {durability} commits",
                raw.block_bytes
            ));
            let dir = scratch
                .path()
                .join(format!("{method}-{}-{durability}", raw.block_bytes));
            let row = run_one(&storage, &dir, args, method, block, durability)?;
            std::fs::remove_dir_all(&dir)
                .map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
            rows.push(SeedRow {
                method,
                block_bytes: raw.block_bytes,
                durability,
                raw_flushes_per_sec: measured.flushes_per_sec,
                row,
            });
            bar.inc(1);
        }
        method_raws.push(raw);
    }
    bar.finish_and_clear();
    let dir = scratch
        .path()
        .parent()
        .unwrap_or(scratch.path())
        .to_path_buf();
    drop(scratch);
    let report = Report {
        commits: args.commits,
        value_bytes: args.value_bytes,
        sync_latency_us: args.sync_latency_us,
        several_blocks: args.block_bytes.len() > 1,
        dir: &dir,
        setting: &Setting::with_facts(facts),
        raws: &method_raws,
        rows: &rows,
    };
    super::emit(
        args.json,
        args.plot.as_deref(),
        || report.plot(),
        || seed_json::json(&report),
        || report.print(),
    )
}

fn validate(args: &SeedArgs) -> Result<(), String> {
    raw::check_sync_latency(args.sync_latency_us)?;
    if !(1..=COMMITS_MAX).contains(&args.commits) {
        return Err(format!(
            "--commits must be from 1 to {COMMITS_MAX}, not {}",
            args.commits
        ));
    }
    if args.value_bytes > VALUE_BYTES_MAX {
        return Err(format!(
            "--value-bytes {} is more than the {VALUE_BYTES_MAX} supported",
            args.value_bytes
        ));
    }
    if args.durabilities.is_empty() {
        return Err("--durabilities needs at least one level".into());
    }
    for &block in &args.block_bytes {
        if !block.is_power_of_two()
            || !(tilldb::io::LOG_BLOCK_BYTES_MIN..=tilldb::io::LOG_BLOCK_BYTES_MAX).contains(&block)
        {
            return Err(format!(
                "--block-bytes {block}: a log block is a power of two from {} to {}",
                tilldb::io::LOG_BLOCK_BYTES_MIN,
                tilldb::io::LOG_BLOCK_BYTES_MAX
            ));
        }
    }
    if !(args.raw_seconds > 0.0 && args.raw_seconds <= 60.0) {
        return Err(format!(
            "--raw-seconds must be above 0 and at most 60, not {}",
            args.raw_seconds
        ));
    }
    bench_options(
        args.page_bytes,
        CACHE_BYTES,
        Durability::Sync,
        FlushMethod::Fdatasync,
        TornPageGuard::Doublewrite,
    )
    .map_err(|e| format!("{e} (--page-bytes {})", args.page_bytes))?;
    Ok(())
}

/// A fresh database in `dir` with `method`; `--commits` one-insert transactions at
/// `durability`, each timed; then close.
fn run_one(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    args: &SeedArgs,
    method: FlushMethod,
    block: Option<u32>,
    durability: Durability,
) -> Result<Row, Box<dyn std::error::Error>> {
    let mut options = bench_options(
        args.page_bytes,
        CACHE_BYTES,
        durability,
        method,
        TornPageGuard::Doublewrite,
    )?;
    options.wal.log_block_bytes = block;
    if block.is_some() {
        // The block-size rows measure the log's write unit with the records tree commits
        // log, as they have from the first (a buffered record carries its writes too).
        options.write_buffer_bytes = 0;
    }
    let db = Db::open_with_storage(Arc::clone(storage), dir, options)
        .map_err(|e| format!("cannot create a database in {}: {e}", dir.display()))?;
    std::thread::sleep(SETTLE);
    let value = vec![0xA5; args.value_bytes];
    let mut latencies = Histogram::new();
    let wal_before = db.stats().log;
    let cpu_before = crate::platform::process_cpu_time();
    let start = Instant::now();
    for i in 0..args.commits {
        let t = Instant::now();
        let mut txn = db.begin()?;
        txn.put(key(i).as_bytes(), &value)?;
        txn.commit_with(durability)?;
        latencies.record(u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX));
    }
    let elapsed = start.elapsed();
    let cpu = cpu_before
        .zip(crate::platform::process_cpu_time())
        .map(|(b, a)| a.saturating_sub(b));
    let wal_after = db.stats().log;
    // Every row is there, before and after close.
    assert_eq!(
        db.get(key(args.commits - 1).as_bytes())?.as_deref(),
        Some(value.as_slice()),
        "the last committed row is missing"
    );
    db.close()
        .map_err(|e| format!("closing the database in {} failed: {e}", dir.display()))?;
    let wal = wal_after.since(wal_before);
    assert_eq!(wal.appends, args.commits, "log appends != commits");
    Ok(Row::new(1, args.commits, elapsed, &wal, &latencies).with_cpu(cpu))
}
