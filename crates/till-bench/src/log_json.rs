//! The JSON document of `till bench log` and `till bench commit` (`--json`), built from the
//! [`LogRun`] of `log_report.rs`; [`RowJson`], the row fields both share with `till bench seed`.
//!
//! JSON (stable for scripts; latencies in microseconds, rates per second; the types `LogJson`
//! and `RowJson` below):
//!
//! ```text
//! { workload ("log-records" | "store-inserts"), flush_method, durability, block_bytes,
//!   record_bytes (the value size for store inserts), segment_bytes, adaptive_gather,
//!   pad_groups (tail is not "rewritten"), tail ("slot copy" | "padded" | "rewritten"),
//!   seconds, fs_type, dir, machine, disk (`machine.rs`),
//!   page_bytes, cache_bytes, torn_page_guard (store inserts only, else null),
//!   simulated_sync_latency_us (null when off), raw_flushes_per_sec, raw_p50_us, raw_p99_us,
//!   results: [ { engine ("tilldb"), threads, durability, flush_method, commits,
//!                elapsed_seconds, commits_per_sec, flushes, flushes_per_sec, commits_per_flush
//!                (null without flushes),
//!                p50_us, p99_us, max_us, log_bytes_per_commit, cpu_us_per_commit (user +
//!                system time of the whole process per commit; null where unknown),
//!                ratio_to_raw, ratio_to_one_thread (null without a 1-thread row) } ] }
//! ```

use super::latency::{round1, round2, round3};
use super::log_report::{LogRun, Row, Workload, tail_name};
use super::machine::{DiskJson, MachineJson};
use serde::Serialize;
use std::path::PathBuf;
use tilldb::internals::wal::TailGuard;
use tilldb::{Durability, FlushMethod};

/// One row of `results`: the fields `bench log`, `bench commit` and `bench seed` share.
#[derive(Debug, Serialize)]
pub struct RowJson {
    /// "tilldb".
    engine: &'static str,
    threads: usize,
    durability: &'static str,
    flush_method: &'static str,
    commits: u64,
    elapsed_seconds: f64,
    commits_per_sec: f64,
    /// Flushes of the log; for write-through methods, its write stages.
    flushes: u64,
    flushes_per_sec: f64,
    /// Null without flushes.
    commits_per_flush: Option<f64>,
    p50_us: f64,
    p99_us: f64,
    max_us: f64,
    log_bytes_per_commit: f64,
    /// User + system time of the whole process per commit; null where unknown.
    cpu_us_per_commit: Option<f64>,
    /// `commits_per_sec` over the raw flushed-write rate.
    ratio_to_raw: f64,
}

impl RowJson {
    /// Row `r` of a run with `durability` and `method`, rounded for the report.
    pub fn new(r: &Row, durability: Durability, method: FlushMethod, ratio_to_raw: f64) -> Self {
        RowJson {
            engine: "tilldb",
            threads: r.threads,
            durability: durability.name(),
            flush_method: method.name(),
            commits: r.commits,
            elapsed_seconds: r.elapsed.as_secs_f64(),
            commits_per_sec: round1(r.commits_per_sec()),
            flushes: r.flushes,
            flushes_per_sec: round1(r.flushes_per_sec()),
            commits_per_flush: r.commits_per_flush().map(round2),
            p50_us: round1(r.p50_us),
            p99_us: round1(r.p99_us),
            max_us: round1(r.max_us),
            log_bytes_per_commit: round1(r.log_bytes_per_commit()),
            cpu_us_per_commit: r.cpu_us_per_commit().map(round1),
            ratio_to_raw: round3(ratio_to_raw),
        }
    }
}

/// One row of the `results` of `bench log` and `bench commit`.
#[derive(Debug, Serialize)]
struct LogRowJson {
    #[serde(flatten)]
    row: RowJson,
    /// Commits/s over the 1-thread row's; null without a 1-thread row.
    ratio_to_one_thread: Option<f64>,
}

/// The JSON document of `bench log` and `bench commit` (see the module doc).
#[derive(Debug, Serialize)]
pub struct LogJson {
    /// "log-records" or "store-inserts".
    workload: &'static str,
    /// Store inserts only, else null.
    page_bytes: Option<u32>,
    /// Store inserts only, else null.
    cache_bytes: Option<u64>,
    /// Store inserts only, else null.
    torn_page_guard: Option<&'static str>,
    dir: PathBuf,
    fs_type: Option<String>,
    machine: MachineJson,
    disk: DiskJson,
    flush_method: &'static str,
    durability: &'static str,
    block_bytes: u32,
    /// The value size for store inserts.
    record_bytes: usize,
    segment_bytes: u64,
    adaptive_gather: bool,
    /// Whether a group's last block is protected from the next group's rewrite (`tail` is
    /// not "rewritten").
    pad_groups: bool,
    /// "slot copy", "padded" or "rewritten".
    tail: &'static str,
    /// Requested seconds per row.
    seconds: f64,
    /// Null when off.
    simulated_sync_latency_us: Option<u64>,
    raw_flushes_per_sec: f64,
    raw_p50_us: f64,
    raw_p99_us: f64,
    results: Vec<LogRowJson>,
}

/// The JSON document (see the module doc).
pub fn json(run: &LogRun) -> LogJson {
    let results = run
        .rows
        .iter()
        .map(|r| LogRowJson {
            row: RowJson::new(r, run.durability, run.flush_method, run.ratio_to_raw(r)),
            ratio_to_one_thread: run.ratio_to_one_thread(r).map(round3),
        })
        .collect();
    let (page_bytes, cache_bytes, guard) = match run.workload {
        Workload::LogRecords => (None, None, None),
        Workload::StoreInserts {
            page_bytes,
            cache_bytes,
            guard,
        } => (Some(page_bytes), Some(cache_bytes), Some(guard.name())),
    };
    LogJson {
        workload: run.workload.name(),
        page_bytes,
        cache_bytes,
        torn_page_guard: guard,
        dir: run.dir.clone(),
        fs_type: run.setting.facts.fs_type.clone(),
        machine: run.setting.machine_json(),
        disk: run.setting.disk_json(),
        flush_method: run.flush_method.name(),
        durability: run.durability.name(),
        block_bytes: run.block_bytes,
        record_bytes: run.record_bytes,
        segment_bytes: run.segment_bytes,
        adaptive_gather: run.adaptive_gather,
        pad_groups: run.tail != TailGuard::None,
        tail: tail_name(run.tail),
        seconds: run.seconds,
        simulated_sync_latency_us: run.sync_latency_us,
        raw_flushes_per_sec: round1(run.raw.flushes_per_sec),
        raw_p50_us: round1(run.raw.p50_us),
        raw_p99_us: round1(run.raw.p99_us),
        results,
    }
}
