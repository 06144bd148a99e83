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
//! JSON (stable; same row fields as `till bench log`, plus per-method raw rates):
//!
//! ```text
//! { workload: "seed", commits, value_bytes, dir, fs_type, machine, disk (`machine.rs`),
//!   simulated_sync_latency_us,
//!   methods: [ { flush_method, block_bytes, raw_flushes_per_sec, raw_p50_us, raw_p99_us,
//!                skipped (null, or why the device refused the method) } ],
//!   results: [ { engine ("tilldb"), threads (1), durability, flush_method, block_bytes,
//!                commits, elapsed_seconds, commits_per_sec, flushes, flushes_per_sec,
//!                commits_per_flush (null without flushes), p50_us, p99_us, max_us,
//!                log_bytes_per_commit, cpu_us_per_commit (null where unknown), ratio_to_raw,
//!                raw_flushes_per_sec } ] }
//! ```

use super::bars::{self, Bar, BarChart};
use super::commit::bench_options;
use super::latency::{Histogram, round1};
use super::log_report::{Row, RowJson};
use super::machine::{DiskJson, MachineJson, Setting};
use super::raw;
use super::scratch::ScratchDir;
use super::store_load::key;
use clap::Args;
use comfy_table::{CellAlignment, Table, presets::UTF8_FULL_CONDENSED};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tilldb::TornPageGuard;
use tilldb::io::{IoGeometry, Measurement, Storage};
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
/// The ratio of `Sync` commits/s to raw flushes/s this project aims for.
const SYNC_TARGET: f64 = 0.85;

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

/// One flush method's raw rate, or why the device refused it.
#[derive(Debug)]
struct MethodRaw {
    method: FlushMethod,
    block_bytes: u32,
    raw: Result<Measurement, String>,
}

/// One (method, block size, durability) database's 500 commits.
#[derive(Debug)]
struct SeedRow {
    method: FlushMethod,
    block_bytes: u32,
    durability: Durability,
    raw_flushes_per_sec: f64,
    row: Row,
}

impl SeedRow {
    fn ratio_to_raw(&self) -> f64 {
        if self.raw_flushes_per_sec > 0.0 {
            self.row.commits_per_sec() / self.raw_flushes_per_sec
        } else {
            0.0
        }
    }
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
        args,
        dir: &dir,
        setting: &Setting::with_facts(facts),
        raws: &method_raws,
        rows: &rows,
    };
    super::emit(
        args.json,
        args.plot.as_deref(),
        || report.plot(),
        || report.json(),
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
    Ok(Row::new(1, args.commits, elapsed, &wal, method, &latencies).with_cpu(cpu))
}

/// The JSON document of `bench seed` and `bench block-size` (see the module doc).
#[derive(Debug, Serialize)]
struct SeedJson {
    /// "seed".
    workload: &'static str,
    /// Commits per database.
    commits: u64,
    value_bytes: usize,
    dir: PathBuf,
    fs_type: Option<String>,
    machine: MachineJson,
    disk: DiskJson,
    /// Null when off.
    simulated_sync_latency_us: Option<u64>,
    methods: Vec<MethodJson>,
    results: Vec<SeedRowJson>,
}

/// One (flush method, block size) raw measurement of `methods`.
#[derive(Debug, Serialize)]
struct MethodJson {
    flush_method: &'static str,
    /// Null when the device refused the method before a block size was chosen (no
    /// `--block-bytes`).
    block_bytes: Option<u32>,
    /// The raw rate and latencies are null when skipped.
    raw_flushes_per_sec: Option<f64>,
    raw_p50_us: Option<f64>,
    raw_p99_us: Option<f64>,
    /// Null, or why the device refused the method.
    skipped: Option<String>,
}

/// One row of `results`: the row fields of `bench log`, plus the block size and the
/// method's raw rate.
#[derive(Debug, Serialize)]
struct SeedRowJson {
    #[serde(flatten)]
    row: RowJson,
    block_bytes: u32,
    raw_flushes_per_sec: f64,
}

/// What a run prints.
struct Report<'a> {
    args: &'a SeedArgs,
    dir: &'a Path,
    setting: &'a Setting,
    raws: &'a [MethodRaw],
    rows: &'a [SeedRow],
}

impl Report<'_> {
    /// The SVG: one bar per row (method, block size, durability), the method's raw rate
    /// marked on it.
    fn plot(&self) -> String {
        let blocks = self.args.block_bytes.len() > 1;
        let bars: Vec<Bar> = self
            .rows
            .iter()
            .map(|s| Bar {
                label: if blocks {
                    format!("{} / {} B / {}", s.method, s.block_bytes, s.durability)
                } else {
                    format!("{} / {}", s.method, s.durability)
                },
                value: s.row.commits_per_sec(),
                reference: (s.raw_flushes_per_sec > 0.0).then_some(s.raw_flushes_per_sec),
            })
            .collect();
        let latency = match self.args.sync_latency_us {
            0 => String::new(),
            us => format!(", SIMULATED flush latency {us} us"),
        };
        let title = format!(
            "{} x (insert one row, commit), one client{latency}",
            self.args.commits
        );
        let subtitle = format!(
            "{} · {} B values · fresh database per row",
            self.setting.short(),
            self.args.value_bytes
        );
        bars::render(&BarChart {
            title: &title,
            subtitle: &subtitle,
            value_label: "commits/s",
            reference_label: "raw flushed writes/s of the method",
            bars: &bars,
        })
    }

    fn json(&self) -> SeedJson {
        let methods = self
            .raws
            .iter()
            .map(|m| {
                let ok = m.raw.as_ref().ok();
                MethodJson {
                    flush_method: m.method.name(),
                    block_bytes: (m.block_bytes > 0).then_some(m.block_bytes),
                    raw_flushes_per_sec: ok.map(|r| round1(r.flushes_per_sec)),
                    raw_p50_us: ok.map(|r| round1(r.p50_us)),
                    raw_p99_us: ok.map(|r| round1(r.p99_us)),
                    skipped: m.raw.as_ref().err().cloned(),
                }
            })
            .collect();
        let results = self
            .rows
            .iter()
            .map(|s| SeedRowJson {
                row: RowJson::new(&s.row, s.durability, s.method, s.ratio_to_raw()),
                block_bytes: s.block_bytes,
                raw_flushes_per_sec: round1(s.raw_flushes_per_sec),
            })
            .collect();
        SeedJson {
            workload: "seed",
            commits: self.args.commits,
            value_bytes: self.args.value_bytes,
            dir: self.dir.to_owned(),
            fs_type: self.setting.facts.fs_type.clone(),
            machine: self.setting.machine_json(),
            disk: self.setting.disk_json(),
            simulated_sync_latency_us: (self.args.sync_latency_us > 0)
                .then_some(self.args.sync_latency_us),
            methods,
            results,
        }
    }

    fn print(&self) {
        let args = self.args;
        println!(
            "One client, {} x (insert one row, commit), per flush method and durability",
            args.commits
        );
        let [machine, disk] = self.setting.rows();
        println!("  {:<18} {}", machine.0, machine.1);
        println!("  {:<18} {}", "dir", self.dir.display());
        println!("  {:<18} {}", disk.0, disk.1);
        println!(
            "  {:<18} 15 B key, {} B value, fresh database each",
            "row", args.value_bytes
        );
        if args.sync_latency_us > 0 {
            println!(
                "\n!! Every number below includes a SIMULATED flush latency of {} us.",
                args.sync_latency_us
            );
        }
        println!();
        println!("{}", self.table());
        for m in self.raws {
            if let Err(why) = &m.raw {
                if m.block_bytes > 0 {
                    println!("{}, {} B blocks: skipped: {why}", m.method, m.block_bytes);
                } else {
                    println!("{}: skipped: {why}", m.method);
                }
            }
        }
        println!(
            "raw/s = one writer's flushed log-block writes with that method, measured in this \
             run; x raw = commits/s / raw/s (target for sync: >= {SYNC_TARGET})."
        );
        let sync: Vec<&SeedRow> = self
            .rows
            .iter()
            .filter(|r| r.durability == Durability::Sync)
            .collect();
        if let Some(worst) = sync
            .iter()
            .min_by(|a, b| a.ratio_to_raw().total_cmp(&b.ratio_to_raw()))
        {
            println!(
                "sync: lowest x raw {:.2} ({}, {} B blocks); {} of {} rows at or above {SYNC_TARGET}.",
                worst.ratio_to_raw(),
                worst.method,
                worst.block_bytes,
                sync.iter()
                    .filter(|r| r.ratio_to_raw() >= SYNC_TARGET)
                    .count(),
                sync.len()
            );
        }
    }

    fn table(&self) -> Table {
        let mut table = Table::new();
        table.load_style(UTF8_FULL_CONDENSED);
        table.set_header([
            "flush method",
            "block B",
            "durability",
            "seconds",
            "commits/s",
            "raw/s",
            "x raw",
            "flushes",
            "log B/commit",
            "p50 us",
            "p99 us",
            "max us",
        ]);
        for s in self.rows {
            let r = &s.row;
            table.add_row([
                s.method.to_string(),
                s.block_bytes.to_string(),
                s.durability.to_string(),
                format!("{:.3}", r.elapsed.as_secs_f64()),
                format!("{:.0}", r.commits_per_sec()),
                format!("{:.0}", s.raw_flushes_per_sec),
                format!("{:.2}", s.ratio_to_raw()),
                r.flushes.to_string(),
                format!("{:.0}", r.log_bytes_per_commit()),
                format!("{:.1}", r.p50_us),
                format!("{:.1}", r.p99_us),
                format!("{:.1}", r.max_us),
            ]);
        }
        for i in 3..12 {
            if let Some(column) = table.column_mut(i) {
                column.set_cell_alignment(CellAlignment::Right);
            }
        }
        table
    }
}
