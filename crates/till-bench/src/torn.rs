//! `till bench torn`: what each torn-page guard costs, on the same device in one run.
//!
//! ```text
//!  DIR/torn-PID-N/                  fresh for this run, removed at the end (also on error)
//!   1. per guard G: a database in DIR/.../G with guard G, K keys loaded (1000 puts per
//!      transaction), then a checkpoint; all stay open
//!   2. R rounds; in each, the guards in turn: T threads run one-put Sync transactions on
//!      random keys for S seconds (so every guard meets the machine's noise alike)
//!   3. per guard, over all its rounds: commits/s, pages written back/s, bytes written per
//!      commit to each kind of file (log, including the zeros that preallocate segments;
//!      doublewrite; pages) and their sum (counted by `counting_storage.rs` as tilldb hands
//!      them to the OS; /proc/self/io's write_bytes is no help: it counts whole large folios),
//!      and latency percentiles
//! ```
//!
//! The database is several times the cache (by default 550,000 keys of 100 B, about 66 MiB,
//! against 16 MiB), so every commit reads a page in and write-back runs all the time.
//!
//! JSON (stable): `{ keys, value_bytes, cache_bytes, page_bytes, threads, seconds, rounds,
//! flush_method, dir, fs_type, machine, disk (`machine.rs`), simulated_sync_latency_us (null when
//! off), raw_flushes_per_sec, raw_p50_us, raw_p99_us (one writer, the flush method at the
//! device's log block), results: [ { engine ("tilldb"), threads, durability ("sync"), guard,
//! commits, elapsed_seconds, commits_per_sec, flushes_per_sec, ratio_to_raw, ratio_to_none
//! (null without a none row), pages_written_per_sec, log_bytes_per_commit,
//! doublewrite_bytes_per_commit, page_bytes_per_commit, other_bytes_per_commit (the header,
//! the page ledger, the durable lsn published for read-only handles), device_bytes_per_commit
//! (their sum),
//! p50_us, p99_us, max_us } ] }`.

use super::bars::{self, Bar, BarChart};
use super::counting_storage::{WriteCounts, Written, counting};
use super::latency::{Histogram, per_sec, round1, round3};
use super::machine::{DiskJson, MachineJson, Setting};
use super::scratch::ScratchDir;
use super::store_load::{self, key};
use clap::Args;
use comfy_table::{CellAlignment, Table, presets::UTF8_FULL_CONDENSED};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tilldb::TornPageGuard;
use tilldb::io::Measurement;
use tilldb::{Db, Durability, FlushMethod, Options};

/// Puts per load transaction.
const LOAD_PUTS_PER_TXN: u64 = 1000;
/// Seed salt of the update phase.
const SEED_UPDATES: u64 = 0x544F_524E_0000_0000;

#[derive(Args, Debug)]
pub struct TornArgs {
    /// Guards to compare, in this order.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "none,doublewrite,full-page-images"
    )]
    guards: Vec<TornPageGuard>,
    /// Keys loaded into each database (100 B values: about 120 B of page per key).
    #[arg(long, default_value_t = 550_000)]
    keys: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
    /// Buffer pool size in MiB (the database should be several times this).
    #[arg(long, default_value_t = 16)]
    cache_mib: u64,
    /// Page size.
    #[arg(long, default_value_t = 16384)]
    page_bytes: u32,
    /// Threads running update transactions.
    #[arg(long, default_value_t = 8)]
    threads: usize,
    /// Seconds per guard per round.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Commits each guard's round does at least, all threads together: it runs past
    /// --seconds until it has. For a short run on a loaded machine.
    #[arg(long, value_name = "N", default_value_t = 0)]
    min_ops: u64,
    /// Rounds; each runs every guard once, in turn.
    #[arg(long, default_value_t = 2)]
    rounds: u32,
    /// Flush method of the databases.
    #[arg(long, default_value = "fdatasync")]
    flush_method: FlushMethod,
    /// Directory for the scratch databases; each run uses and then removes a fresh
    /// subdirectory.
    #[arg(long, default_value = "tilldb-bench")]
    dir: PathBuf,
    /// Print JSON (stable for scripts) instead of a table.
    #[arg(long)]
    json: bool,
    /// Also draw commits/s per guard into this file (SVG, or PNG when it ends in .png).
    #[arg(long, value_name = "FILE.svg|png", value_parser = crate::png::parse_plot_path)]
    plot: Option<PathBuf>,
    /// Add a SIMULATED latency of N us to every flush, one flush at a time as on a single
    /// disk (0: off; log, doublewrite and page flushes alike). Every number then includes it.
    #[arg(long, value_name = "N", default_value_t = 0)]
    sync_latency_us: u64,
}

/// One guard's totals over its rounds.
#[derive(Debug)]
struct GuardRow {
    guard: TornPageGuard,
    commits: u64,
    elapsed: Duration,
    /// Log flushes (a write-through method's write stages).
    flushes: u64,
    pages_written: u64,
    written: Written,
    latencies: Histogram,
}

impl GuardRow {
    fn commits_per_sec(&self) -> f64 {
        per_sec(self.commits, self.elapsed)
    }

    fn ratio_to_raw(&self, raw: &Measurement) -> f64 {
        if raw.flushes_per_sec > 0.0 {
            self.commits_per_sec() / raw.flushes_per_sec
        } else {
            0.0
        }
    }

    #[expect(clippy::cast_precision_loss, reason = "ratios")]
    fn per_commit(&self, bytes: u64) -> f64 {
        if self.commits == 0 {
            0.0
        } else {
            bytes as f64 / self.commits as f64
        }
    }
}

pub fn run(args: &TornArgs) -> Result<(), Box<dyn std::error::Error>> {
    validate(args)?;
    let scratch = ScratchDir::for_run(&args.dir, "torn")?;
    let setting = Setting::read(scratch.path())?;
    let cache_bytes = args.cache_mib << 20;
    let steps = 1 + args.guards.len() as u64 * (1 + u64::from(args.rounds));
    let bar = super::progress_bar(steps);
    bar.set_message("raw flushed writes");
    let raw = super::raw::raw_for_store(
        &*super::raw::storage(args.sync_latency_us),
        scratch.path(),
        args.flush_method,
        args.page_bytes,
        args.seconds,
    )?;
    bar.inc(1);
    let mut dbs: Vec<(Db, Arc<WriteCounts>)> = Vec::with_capacity(args.guards.len());
    for &guard in &args.guards {
        bar.set_message(format!("{guard}: load {} keys", args.keys));
        let dir = scratch.path().join(guard.name());
        let options = Options {
            page_bytes: Some(args.page_bytes),
            cache_bytes,
            flush_method: Some(args.flush_method),
            torn_page_guard: guard,
            // The guards' cost is in the pages each commit changes: commits through the
            // tree, not kept in the write buffer (docs/write-buffer.md).
            write_buffer_bytes: 0,
            ..Options::default()
        };
        let storage = counting(super::raw::storage(args.sync_latency_us));
        let counts = std::sync::Arc::clone(storage.hooks());
        let db = Db::open_with_storage(Arc::new(storage), &dir, options)
            .map_err(|e| format!("cannot create a database in {}: {e}", dir.display()))?;
        load(&db, args)?;
        db.checkpoint()?;
        dbs.push((db, counts));
        bar.inc(1);
    }
    let mut rows: Vec<GuardRow> = args
        .guards
        .iter()
        .map(|&guard| GuardRow {
            guard,
            commits: 0,
            elapsed: Duration::ZERO,
            flushes: 0,
            pages_written: 0,
            written: Written::default(),
            latencies: Histogram::new(),
        })
        .collect();
    let span = store_load::Span {
        time: Duration::from_secs_f64(args.seconds),
        min_ops: args.min_ops,
    };
    let keys = args.keys;
    for round in 0..args.rounds {
        for ((db, counts), row) in dbs.iter().zip(rows.iter_mut()) {
            bar.set_message(format!("round {}: {}", round + 1, row.guard));
            let before = counts.snapshot();
            let phase = store_load::run_threads(
                db,
                args.threads,
                span,
                SEED_UPDATES + (u64::from(round) << 8),
                args.value_bytes,
                |db, state| store_load::put_random(db, state, keys, Durability::Sync),
            )?;
            let written = counts.snapshot().since(before);
            row.commits += phase.workers.iter().map(|w| w.ops).sum::<u64>();
            row.elapsed += phase.elapsed;
            row.flushes += phase.counts.wal.device_flushes();
            row.pages_written += phase.counts.pool.pages_written;
            row.written = row.written.add(written);
            row.latencies.add(&phase.latencies());
            bar.inc(1);
        }
    }
    for (db, _) in dbs {
        db.close()?;
    }
    bar.finish_and_clear();
    let bench_dir = scratch
        .path()
        .parent()
        .unwrap_or(scratch.path())
        .to_path_buf();
    drop(scratch);
    super::emit(
        args.json,
        args.plot.as_deref(),
        || plot(args, &setting, &rows),
        || json_of(args, &bench_dir, &setting, &raw.0, &rows),
        || print_text(args, &bench_dir, &setting, &raw, &rows),
    )
}

fn validate(args: &TornArgs) -> Result<(), String> {
    if args.guards.is_empty() {
        return Err("--guards needs at least one guard".into());
    }
    super::check_threads_and_seconds(&[args.threads], args.seconds)?;
    super::raw::check_sync_latency(args.sync_latency_us)?;
    if args.rounds == 0 || args.rounds > 100 {
        return Err(format!(
            "--rounds must be from 1 to 100, not {}",
            args.rounds
        ));
    }
    if args.keys == 0 || args.keys > 1_000_000_000 {
        return Err(format!("--keys must be from 1 to 10^9, not {}", args.keys));
    }
    if args.value_bytes > 1 << 20 {
        return Err(format!(
            "--value-bytes {} is more than the {} supported",
            args.value_bytes,
            1 << 20
        ));
    }
    let options = Options {
        page_bytes: Some(args.page_bytes),
        cache_bytes: args.cache_mib.saturating_mul(1 << 20),
        // As the rows': commits through the tree.
        write_buffer_bytes: 0,
        ..Options::default()
    };
    options.validate().map_err(|e| {
        format!(
            "{e} (--page-bytes {}, --cache-mib {})",
            args.page_bytes, args.cache_mib
        )
    })
}

fn load(db: &Db, args: &TornArgs) -> Result<(), Box<dyn std::error::Error>> {
    let value = vec![0x5A; args.value_bytes];
    let mut first = 0;
    while first < args.keys {
        let last = (first + LOAD_PUTS_PER_TXN).min(args.keys);
        let mut txn = db.begin()?;
        for n in first..last {
            txn.put(key(n).as_bytes(), &value)?;
        }
        txn.commit_with(Durability::Buffered)?;
        first = last;
    }
    db.begin()?.commit()?;
    Ok(())
}

fn ratio_to_none(rows: &[GuardRow], row: &GuardRow) -> Option<f64> {
    let none = rows.iter().find(|r| r.guard == TornPageGuard::None)?;
    (none.commits_per_sec() > 0.0).then(|| row.commits_per_sec() / none.commits_per_sec())
}

/// The JSON document (see the module doc).
#[derive(Debug, Serialize)]
struct TornJson {
    keys: u64,
    value_bytes: usize,
    cache_bytes: u64,
    page_bytes: u32,
    threads: usize,
    /// Seconds per guard per round.
    seconds: f64,
    /// Null when off.
    simulated_sync_latency_us: Option<u64>,
    rounds: u32,
    flush_method: &'static str,
    dir: PathBuf,
    fs_type: Option<String>,
    machine: MachineJson,
    disk: DiskJson,
    /// One writer, the flush method at the device's log block.
    raw_flushes_per_sec: f64,
    raw_p50_us: f64,
    raw_p99_us: f64,
    results: Vec<TornRowJson>,
}

/// One guard of `results`, over all its rounds.
#[derive(Debug, Serialize)]
struct TornRowJson {
    /// "tilldb".
    engine: &'static str,
    threads: usize,
    /// "sync".
    durability: &'static str,
    guard: &'static str,
    commits: u64,
    elapsed_seconds: f64,
    commits_per_sec: f64,
    /// Log flushes (a write-through method's write stages) per second.
    flushes_per_sec: f64,
    /// `commits_per_sec` over the raw flushed-write rate.
    ratio_to_raw: f64,
    /// `commits_per_sec` over the `none` guard's; null without a `none` row.
    ratio_to_none: Option<f64>,
    /// Pages written back per second.
    pages_written_per_sec: f64,
    /// Bytes tilldb handed the OS per commit, per kind of file: the log (including the zeros
    /// that preallocate segments), the doublewrite file, the pages, and their sum.
    log_bytes_per_commit: f64,
    doublewrite_bytes_per_commit: f64,
    page_bytes_per_commit: f64,
    /// The header, the page ledger and the durable lsn published for read-only handles.
    other_bytes_per_commit: f64,
    device_bytes_per_commit: f64,
    p50_us: f64,
    p99_us: f64,
    max_us: f64,
}

fn json_of(
    args: &TornArgs,
    dir: &std::path::Path,
    setting: &Setting,
    raw: &Measurement,
    rows: &[GuardRow],
) -> TornJson {
    let results = rows
        .iter()
        .map(|r| TornRowJson {
            engine: "tilldb",
            threads: args.threads,
            durability: Durability::Sync.name(),
            guard: r.guard.name(),
            commits: r.commits,
            elapsed_seconds: r.elapsed.as_secs_f64(),
            commits_per_sec: round1(r.commits_per_sec()),
            flushes_per_sec: round1(per_sec(r.flushes, r.elapsed)),
            ratio_to_raw: round3(r.ratio_to_raw(raw)),
            ratio_to_none: ratio_to_none(rows, r).map(round3),
            pages_written_per_sec: round1(per_sec(r.pages_written, r.elapsed)),
            log_bytes_per_commit: round1(r.per_commit(r.written.log)),
            doublewrite_bytes_per_commit: round1(r.per_commit(r.written.doublewrite)),
            page_bytes_per_commit: round1(r.per_commit(r.written.data)),
            other_bytes_per_commit: round1(r.per_commit(r.written.other)),
            device_bytes_per_commit: round1(r.per_commit(r.written.total())),
            p50_us: round1(r.latencies.percentile_us(50.0)),
            p99_us: round1(r.latencies.percentile_us(99.0)),
            max_us: round1(r.latencies.percentile_us(100.0)),
        })
        .collect();
    TornJson {
        keys: args.keys,
        value_bytes: args.value_bytes,
        cache_bytes: args.cache_mib << 20,
        page_bytes: args.page_bytes,
        threads: args.threads,
        seconds: args.seconds,
        simulated_sync_latency_us: (args.sync_latency_us > 0).then_some(args.sync_latency_us),
        rounds: args.rounds,
        flush_method: args.flush_method.name(),
        dir: dir.to_owned(),
        fs_type: setting.facts.fs_type.clone(),
        machine: setting.machine_json(),
        disk: setting.disk_json(),
        raw_flushes_per_sec: round1(raw.flushes_per_sec),
        raw_p50_us: round1(raw.p50_us),
        raw_p99_us: round1(raw.p99_us),
        results,
    }
}

/// The SVG: commits/s per guard.
fn plot(args: &TornArgs, setting: &Setting, rows: &[GuardRow]) -> String {
    let bars: Vec<Bar> = rows
        .iter()
        .map(|r| Bar {
            label: r.guard.name().to_owned(),
            value: r.commits_per_sec(),
            reference: None,
        })
        .collect();
    let subtitle = format!(
        "{} · {} keys of {} B, {} MiB cache, {} B pages · {} threads, {} x {:.1} s per guard",
        setting.short(),
        args.keys,
        args.value_bytes,
        args.cache_mib,
        args.page_bytes,
        args.threads,
        args.rounds,
        args.seconds
    );
    let title = match args.sync_latency_us {
        0 => "Torn-page guards: random one-put Sync updates, database larger than the cache"
            .to_owned(),
        us => format!("Torn-page guards: random one-put Sync updates, SIMULATED flush {us} us"),
    };
    bars::render(&BarChart {
        title: &title,
        subtitle: &subtitle,
        value_label: "commits/s",
        reference_label: "",
        bars: &bars,
    })
}

fn print_text(
    args: &TornArgs,
    dir: &std::path::Path,
    setting: &Setting,
    (raw, block_bytes): &(Measurement, u32),
    rows: &[GuardRow],
) {
    println!("Torn-page guards: random one-put Sync updates on a database larger than the cache");
    let [machine, disk] = setting.rows();
    println!("  {:<14} {}", machine.0, machine.1);
    println!("  {:<14} {}", "dir", dir.display());
    println!("  {:<14} {}", disk.0, disk.1);
    println!(
        "  {:<14} {} keys of {} B values, {} B pages, {} MiB cache, {}",
        "database", args.keys, args.value_bytes, args.page_bytes, args.cache_mib, args.flush_method
    );
    println!(
        "  {:<14} {} threads, {} rounds of {:.1} s per guard, guards in turn",
        "load", args.threads, args.rounds, args.seconds
    );
    if args.sync_latency_us > 0 {
        println!(
            "\n!! Every number below includes a SIMULATED flush latency of {} us.",
            args.sync_latency_us
        );
    }
    let extra = match args.sync_latency_us {
        0 => String::new(),
        us => format!("; SIMULATED +{us} us per flush"),
    };
    println!(
        "\n{}\n",
        super::raw::raw_line(raw, *block_bytes, args.flush_method, &extra)
    );
    let mut table = Table::new();
    table.load_style(UTF8_FULL_CONDENSED);
    table.set_header([
        "guard",
        "commits/s",
        "x none",
        "flushes/s",
        "x raw",
        "pages written/s",
        "log B/commit",
        "doublewrite B/commit",
        "page B/commit",
        "total B/commit",
        "p50 us",
        "p99 us",
    ]);
    for r in rows {
        table.add_row([
            r.guard.to_string(),
            format!("{:.0}", r.commits_per_sec()),
            ratio_to_none(rows, r).map_or_else(|| "-".to_owned(), |x| format!("{x:.2}")),
            format!("{:.0}", per_sec(r.flushes, r.elapsed)),
            format!("{:.2}", r.ratio_to_raw(raw)),
            format!("{:.0}", per_sec(r.pages_written, r.elapsed)),
            format!("{:.0}", r.per_commit(r.written.log)),
            format!("{:.0}", r.per_commit(r.written.doublewrite)),
            format!("{:.0}", r.per_commit(r.written.data)),
            format!("{:.0}", r.per_commit(r.written.total())),
            format!("{:.0}", r.latencies.percentile_us(50.0)),
            format!("{:.0}", r.latencies.percentile_us(99.0)),
        ]);
    }
    for i in 1..12 {
        if let Some(column) = table.column_mut(i) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    println!("{table}");
    println!(
        "B/commit: bytes written per commit to the log (with segment preallocation), the \
         doublewrite file and the data file; none is unsafe unless the device writes pages \
         atomically. flushes/s: log flushes; x raw = commits/s / raw flushed writes/s."
    );
}
