//! The JSON document of `till bench seed` and `till bench block-size` (`--json`), built from
//! the [`Report`] of `seed_report.rs`.
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

use super::latency::round1;
use super::log_json::RowJson;
use super::machine::{DiskJson, MachineJson};
use super::seed_report::Report;
use serde::Serialize;
use std::path::PathBuf;

/// The JSON document of `bench seed` and `bench block-size` (see the module doc).
#[derive(Debug, Serialize)]
pub struct SeedJson {
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

/// The JSON document of `report` (see the module doc).
pub fn json(report: &Report) -> SeedJson {
    let methods = report
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
    let results = report
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
        commits: report.commits,
        value_bytes: report.value_bytes,
        dir: report.dir.to_owned(),
        fs_type: report.setting.facts.fs_type.clone(),
        machine: report.setting.machine_json(),
        disk: report.setting.disk_json(),
        simulated_sync_latency_us: (report.sync_latency_us > 0).then_some(report.sync_latency_us),
        methods,
        results,
    }
}
