//! The JSON document of `till bench store` (`--json`), built from the [`StoreRun`] of
//! `store_report.rs`.
//!
//! JSON (stable for scripts; latencies in microseconds, rates per second, sizes in bytes):
//!
//! ```text
//! { dir, created, open_seconds, fs_type, device, machine, disk (`machine.rs`), page_bytes,
//!   cache_bytes, durability,
//!   flush_method, flush_method_source ("chosen" | "flag" | "header"), torn_page_guard,
//!   keys, value_bytes,
//!   seconds, simulated_sync_latency_us (null when off),
//!   raw_flushes_per_sec, raw_p50_us, raw_p99_us (one writer, the database's flush method
//!   and log block, in its directory, after the load),
//!   load: { keys, inserted, puts_per_txn, seconds, inserts_per_sec (null when none) },
//!   results: [ { engine ("tilldb"), threads, durability, flush_method, commits,
//!                elapsed_seconds, commits_per_sec, p50_us, p99_us, max_us, flushes,
//!                flushes_per_sec, ratio_to_raw (commits_per_sec / raw_flushes_per_sec),
//!                commits_per_flush (null without flushes), log_appends,
//!                log_bytes_per_commit, pool_hits, pool_misses, pool_evictions,
//!                pool_eviction_writes, pool_pages_written } ],
//!   reads: { threads, gets, missing, elapsed_seconds, gets_per_sec, p50_us, p99_us, max_us,
//!            pool_hits, pool_misses },
//!   close_seconds, size_on_disk_bytes, apparent_bytes, notes: [ text ] }
//! ```

use super::latency::{per_sec, round1, round2, round3};
use super::machine::{DiskJson, MachineJson};
use super::store_report::{MethodSource, StoreRun};
use serde::Serialize;
use std::path::PathBuf;

/// The JSON document (see the module doc).
#[derive(Debug, Serialize)]
pub struct StoreJson {
    /// The database directory, absolute.
    dir: PathBuf,
    /// Whether this run created the database (or reopened and recovered one).
    created: bool,
    open_seconds: f64,
    fs_type: Option<String>,
    device: Option<String>,
    machine: MachineJson,
    disk: DiskJson,
    page_bytes: u32,
    cache_bytes: u64,
    durability: &'static str,
    flush_method: &'static str,
    /// "chosen", "flag" or "header".
    flush_method_source: &'static str,
    torn_page_guard: &'static str,
    keys: u64,
    value_bytes: usize,
    /// Requested seconds per row.
    seconds: f64,
    /// Null when off.
    simulated_sync_latency_us: Option<u64>,
    /// One writer, the database's flush method and log block, in its directory, after the
    /// load.
    raw_flushes_per_sec: f64,
    raw_p50_us: f64,
    raw_p99_us: f64,
    load: LoadJson,
    results: Vec<WriteRowJson>,
    reads: ReadsJson,
    close_seconds: f64,
    size_on_disk_bytes: u64,
    apparent_bytes: u64,
    /// Flags that did not apply, surprises.
    notes: Vec<String>,
}

/// The load phase.
#[derive(Debug, Serialize)]
struct LoadJson {
    keys: u64,
    /// Keys put by this run: 0 when the database already held the last key.
    inserted: u64,
    puts_per_txn: u64,
    seconds: f64,
    /// Null when none were inserted.
    inserts_per_sec: Option<f64>,
}

/// One thread count of the write phase, a row of `results`.
#[derive(Debug, Serialize)]
struct WriteRowJson {
    /// "tilldb".
    engine: &'static str,
    threads: usize,
    durability: &'static str,
    flush_method: &'static str,
    commits: u64,
    elapsed_seconds: f64,
    commits_per_sec: f64,
    p50_us: f64,
    p99_us: f64,
    max_us: f64,
    /// Flushes of the log (write stages for write-through methods).
    flushes: u64,
    flushes_per_sec: f64,
    /// `commits_per_sec` over `raw_flushes_per_sec`.
    ratio_to_raw: f64,
    /// Null without flushes.
    commits_per_flush: Option<f64>,
    log_appends: u64,
    log_bytes_per_commit: f64,
    pool_hits: u64,
    pool_misses: u64,
    pool_evictions: u64,
    pool_eviction_writes: u64,
    pool_pages_written: u64,
}

/// The read phase.
#[derive(Debug, Serialize)]
struct ReadsJson {
    threads: usize,
    gets: u64,
    /// Gets that found no value.
    missing: u64,
    elapsed_seconds: f64,
    gets_per_sec: f64,
    p50_us: f64,
    p99_us: f64,
    max_us: f64,
    pool_hits: u64,
    pool_misses: u64,
}

/// The JSON document of `run` (see the module doc).
pub fn json(run: &StoreRun) -> StoreJson {
    let results = run
        .rows
        .iter()
        .map(|r| WriteRowJson {
            engine: "tilldb",
            threads: r.threads,
            durability: run.durability.name(),
            flush_method: run.flush_method.name(),
            commits: r.commits,
            elapsed_seconds: r.elapsed.as_secs_f64(),
            commits_per_sec: round1(r.commits_per_sec()),
            p50_us: round1(r.p50_us),
            p99_us: round1(r.p99_us),
            max_us: round1(r.max_us),
            flushes: r.flushes,
            flushes_per_sec: round1(r.flushes_per_sec()),
            ratio_to_raw: round3(run.ratio_to_raw(r)),
            commits_per_flush: r.commits_per_flush().map(round2),
            log_appends: r.log_appends,
            log_bytes_per_commit: round1(r.log_bytes_per_commit()),
            pool_hits: r.pool.hits,
            pool_misses: r.pool.misses,
            pool_evictions: r.pool.evictions,
            pool_eviction_writes: r.pool.eviction_writes,
            pool_pages_written: r.pool.pages_written,
        })
        .collect();
    let reads = &run.reads;
    StoreJson {
        dir: run.dir.clone(),
        created: run.created,
        open_seconds: run.open.as_secs_f64(),
        fs_type: run.setting.facts.fs_type.clone(),
        device: run.setting.facts.device.clone(),
        machine: run.setting.machine_json(),
        disk: run.setting.disk_json(),
        page_bytes: run.page_bytes,
        cache_bytes: run.cache_bytes,
        durability: run.durability.name(),
        flush_method: run.flush_method.name(),
        flush_method_source: match run.method_source {
            MethodSource::Chosen => "chosen",
            MethodSource::Flag => "flag",
            MethodSource::Header(_) => "header",
        },
        torn_page_guard: run.torn_page_guard.name(),
        keys: run.keys,
        value_bytes: run.value_bytes,
        seconds: run.seconds,
        simulated_sync_latency_us: run.sync_latency_us,
        raw_flushes_per_sec: round1(run.raw.flushes_per_sec),
        raw_p50_us: round1(run.raw.p50_us),
        raw_p99_us: round1(run.raw.p99_us),
        load: LoadJson {
            keys: run.load.keys,
            inserted: run.load.inserted,
            puts_per_txn: run.load.puts_per_txn,
            seconds: run.load.elapsed.as_secs_f64(),
            inserts_per_sec: run.load.inserts_per_sec().map(round1),
        },
        results,
        reads: ReadsJson {
            threads: reads.threads,
            gets: reads.gets,
            missing: reads.missing,
            elapsed_seconds: reads.elapsed.as_secs_f64(),
            gets_per_sec: round1(per_sec(reads.gets, reads.elapsed)),
            p50_us: round1(reads.p50_us),
            p99_us: round1(reads.p99_us),
            max_us: round1(reads.max_us),
            pool_hits: reads.pool.hits,
            pool_misses: reads.pool.misses,
        },
        close_seconds: run.close.as_secs_f64(),
        size_on_disk_bytes: run.disk.allocated_bytes,
        apparent_bytes: run.disk.apparent_bytes,
        notes: run.notes(),
    }
}
