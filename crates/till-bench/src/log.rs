//! `till bench log`: the write-ahead log alone under load, reproducibly.
//!
//! ```text
//!  DIR/log-PID-N/               fresh for this run, removed at the end (also on error)
//!   1. raw:   write one log block + flush, in a loop, on a preallocated file  -> raw flushes/s
//!   2. per thread count T, in its own subdirectory:
//!        Wal::open -> settle -> T threads commit until stopped -> stats -> close -> remove
//! ```
//!
//! Both steps go through the same storage, so `--sync-latency-us` (a SIMULATED flush latency,
//! see `slow_storage.rs`) applies to the raw rate and to the log alike. A row's commits/s
//! divided by the raw rate shows how well group commit shares flushes: above 1 means more
//! commits than the device could flush one by one.

use super::latency::Histogram;
use super::log_json;
use super::log_load::commit_from_threads;
use super::log_report::{self, LogRun, Row, Workload};
use super::machine::Setting;
use super::raw;
use clap::Args;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tilldb::internals::wal::{TailGuard, Wal, WalOptions};
use tilldb::io::Storage;
use tilldb::{Durability, FlushMethod};

/// Largest record payload accepted; larger records measure bandwidth, not the commit path.
const RECORD_BYTES_MAX: usize = 16 << 20;
/// Idle time after opening each log before the clock starts. The log's background thread
/// prepares its spare segment (a `--segment-bytes` preallocation plus a flush) one flush
/// interval after open; in a long-running log that happens once per segment, so it is kept
/// out of the first moments of every row rather than charged to them. 400 ms covers the
/// 100 ms interval plus writing and flushing 64 MiB at ~400 MB/s; a slower disk overlaps.
const SETTLE: Duration = Duration::from_millis(400);
/// Page size passed when checking the geometry (the log does not use pages; the Wal checks
/// with the same value).
const PAGE_BYTES: u32 = 16384;

#[derive(Args, Debug)]
pub struct LogArgs {
    /// Thread counts to run, one row each.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,2,4,8,16,32,64,128,256"
    )]
    threads: Vec<usize>,
    /// What each commit waits for: sync (flushed), buffered (written to the OS) or lazy.
    #[arg(long, default_value = "sync")]
    durability: Durability,
    /// How the log's writes are made durable.
    #[arg(long, default_value = "fdatasync")]
    flush_method: FlushMethod,
    /// Log block (write unit) in bytes [default: the device's, as `till probe` reports it].
    #[arg(long)]
    block_bytes: Option<u32>,
    /// Payload bytes per committed record.
    #[arg(long, default_value_t = 100)]
    record_bytes: usize,
    /// Seconds of commits per thread count.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Add a SIMULATED latency of N us to every flush, one flush at a time as on a single
    /// disk (0: off). Every number printed then includes it.
    #[arg(long, value_name = "N", default_value_t = 0)]
    sync_latency_us: u64,
    /// Directory for the scratch logs; each run uses and then removes a fresh subdirectory.
    #[arg(long, default_value = "tilldb-bench")]
    dir: PathBuf,
    /// Size of each log segment file (large, so runs rarely switch segments).
    #[arg(long, default_value_t = 64 << 20)]
    segment_bytes: u64,
    /// Turn off the log's adaptive gathering before a flush (to measure what it buys).
    #[arg(long)]
    no_gather: bool,
    /// How each group's partly filled last block is protected from the next group's
    /// rewrite of it: `slots` (a copy in a tail slot; the default), `pad` (a fresh block per
    /// group) or `none` (rewritten in place: safe only on devices that write sectors
    /// atomically; to measure what the protection costs).
    #[arg(long, default_value = "slots", value_parser = parse_tail)]
    tail: TailGuard,
    /// Print JSON (stable for scripts) instead of tables.
    #[arg(long)]
    json: bool,
    /// Also draw commits/s against threads into this file (SVG, or PNG when it ends in .png).
    #[arg(long, value_name = "FILE.svg|png", value_parser = crate::png::parse_plot_path)]
    plot: Option<PathBuf>,
}

/// Parses `--tail`.
fn parse_tail(s: &str) -> Result<TailGuard, String> {
    match s {
        "slots" => Ok(TailGuard::Slots),
        "pad" => Ok(TailGuard::Pad),
        "none" => Ok(TailGuard::None),
        _ => Err(format!("unknown tail guard {s:?}: slots, pad or none")),
    }
}

pub fn run(args: &LogArgs) -> Result<(), Box<dyn std::error::Error>> {
    validate(args)?;
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
        "log",
        args.flush_method,
        args.block_bytes,
        PAGE_BYTES,
        args.seconds,
        &bar,
    )?;
    let options = WalOptions {
        flush_method: args.flush_method,
        log_block_bytes: args.block_bytes,
        segment_bytes: args.segment_bytes,
        adaptive_gather: !args.no_gather,
        tail: args.tail,
        ..WalOptions::default()
    };
    let payload = vec![0xA5; args.record_bytes];
    let mut rows = Vec::with_capacity(args.threads.len());
    for (index, &threads) in args.threads.iter().enumerate() {
        bar.set_message(format!("{threads} threads"));
        let dir = scratch.path().join(format!("row-{index}-{threads}"));
        let row = run_row(&storage, &dir, &options, args, threads, &payload)?;
        std::fs::remove_dir_all(&dir)
            .map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
        rows.push(row);
        bar.inc(1);
    }
    bar.finish_and_clear();

    let run = LogRun {
        workload: Workload::LogRecords,
        dir: scratch
            .path()
            .parent()
            .unwrap_or(scratch.path())
            .to_path_buf(),
        setting: Setting::with_facts(facts),
        flush_method: args.flush_method,
        durability: args.durability,
        block_bytes,
        record_bytes: args.record_bytes,
        segment_bytes: args.segment_bytes,
        adaptive_gather: !args.no_gather,
        tail: args.tail,
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

fn validate(args: &LogArgs) -> Result<(), String> {
    super::check_threads_and_seconds(&args.threads, args.seconds)?;
    raw::check_sync_latency(args.sync_latency_us)?;
    if args.record_bytes > RECORD_BYTES_MAX {
        return Err(format!(
            "--record-bytes {} is more than the {RECORD_BYTES_MAX} supported",
            args.record_bytes
        ));
    }
    Ok(())
}

/// Opens a fresh log in `dir`, lets `threads` threads commit for `--seconds`, closes it.
fn run_row(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    options: &WalOptions,
    args: &LogArgs,
    threads: usize,
    payload: &[u8],
) -> Result<Row, Box<dyn std::error::Error>> {
    let (wal, recovery) = Wal::open(Arc::clone(storage), dir, options.clone())?;
    assert_eq!(recovery.records, 0, "a fresh directory held log records");
    std::thread::sleep(SETTLE);
    let duration = Duration::from_secs_f64(args.seconds);
    let (samples, elapsed, stats, cpu) =
        commit_from_threads(&wal, threads, args.durability, payload, duration);
    let close = wal.close();
    let committers = samples?;
    close?;
    let commits: u64 = committers.iter().map(|c| c.commits).sum();
    assert_eq!(
        stats.appends, commits,
        "appends that no thread counted, or the reverse"
    );
    let latencies = Histogram::merged(committers.iter().map(|c| &c.latencies));
    Ok(Row::new(threads, commits, elapsed, &stats, &latencies).with_cpu(cpu))
}
