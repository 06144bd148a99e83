//! Output of `till bench kv`: what a run measured ([`KvRun`]), the human report (machine and
//! disk header, one table with a column per engine and each row's ratio of tilldb to the
//! best engine, the failures, how each engine commits) and the JSON document of `kv.rs`.

use super::Engine;
use super::engines;
use super::workload::{KEY_BYTES, VALUE_BYTES, Workload};
use crate::latency::{per_sec, round1, round3};
use crate::machine::{DiskJson, MachineJson, Setting};
use comfy_table::{CellAlignment, Table, presets::UTF8_FULL_CONDENSED};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

/// How a row ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    /// A one-transaction row the engine refused, run again in smaller transactions.
    Chunked,
    Failed,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Chunked => "chunked",
            Status::Failed => "failed",
        }
    }
}

/// One engine's result of one row.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub workload: Workload,
    /// Rows, commits, reads or ranges the row ran (1 for length and sizes).
    pub operations: u64,
    /// Reading threads (point reads only).
    pub threads: Option<usize>,
    /// The row's time (the close's for the size before compaction, the compaction's after).
    pub seconds: f64,
    /// In the row's unit; `None` when it failed.
    pub value: Option<f64>,
    pub status: Status,
    /// Why it failed, or why it was chunked.
    pub error: Option<String>,
    /// Length: the count; range reads: the entries read.
    pub entries: Option<u64>,
    /// Sizes: the allocated bytes of each entry of the measured directory, by name.
    pub parts: Option<BTreeMap<String, u64>>,
}

impl Outcome {
    /// `operations` over `elapsed`, per second.
    pub fn rate(workload: Workload, operations: u64, elapsed: Duration) -> Outcome {
        Outcome::measured(workload, operations, elapsed, per_sec(operations, elapsed))
    }

    pub fn measured(workload: Workload, operations: u64, elapsed: Duration, value: f64) -> Outcome {
        Outcome {
            workload,
            operations,
            threads: None,
            seconds: elapsed.as_secs_f64(),
            value: Some(value),
            status: Status::Ok,
            error: None,
            entries: None,
            parts: None,
        }
    }

    pub fn failed(workload: Workload, error: String) -> Outcome {
        Outcome {
            workload,
            operations: 0,
            threads: None,
            seconds: 0.0,
            value: None,
            status: Status::Failed,
            error: Some(error),
            entries: None,
            parts: None,
        }
    }
}

/// One engine's pass through the rows.
#[derive(Debug)]
pub struct EngineRun {
    pub engine: Engine,
    /// What the store said about itself (tilldb: its flush method).
    pub notes: Option<String>,
    /// One per workload, in order.
    pub results: Vec<Outcome>,
}

/// Everything one run measured, and how.
#[derive(Debug)]
pub struct KvRun {
    /// The benchmark directory (the run's own subdirectory is gone by now).
    pub dir: PathBuf,
    pub setting: Setting,
    /// N.
    pub rows: u64,
    pub cache_bytes: u64,
    /// tilldb's write buffer (0: off).
    pub write_buffer_bytes: u64,
    pub threads: Vec<usize>,
    pub workloads: Vec<Workload>,
    pub engines: Vec<EngineRun>,
}

impl KvRun {
    fn outcome(&self, engine: Engine, workload: Workload) -> Option<&Outcome> {
        self.engines
            .iter()
            .find(|e| e.engine == engine)?
            .results
            .iter()
            .find(|o| o.workload == workload)
    }

    /// The row's best engine and value, over the `ok` results (a chunked figure ran another
    /// workload than the row's).
    /// Encrypted tilldb is not a candidate: it is measured against plain tilldb.
    pub fn best(&self, workload: Workload) -> Option<(Engine, f64)> {
        let candidates = self.engines.iter().filter_map(|e| {
            if e.engine == Engine::TilldbEncrypted {
                return None;
            }
            let o = e.results.iter().find(|o| o.workload == workload)?;
            (o.status == Status::Ok).then_some((e.engine, o.value?))
        });
        if workload.higher_is_better() {
            candidates.max_by(|a, b| a.1.total_cmp(&b.1))
        } else {
            candidates.min_by(|a, b| a.1.total_cmp(&b.1))
        }
    }

    /// Encrypted tilldb's speed over plain tilldb's in `workload` (a rate's ratio, or the
    /// inverse ratio of a time or a size): above 1 is faster; `None` without both.
    pub fn encrypted_over_plain(&self, workload: Workload) -> Option<f64> {
        let ok = |engine| {
            self.outcome(engine, workload)
                .filter(|o| o.status == Status::Ok)
                .and_then(|o| o.value)
        };
        let (encrypted, plain) = (ok(Engine::TilldbEncrypted)?, ok(Engine::Tilldb)?);
        let (top, bottom) = if workload.higher_is_better() {
            (encrypted, plain)
        } else {
            (plain, encrypted)
        };
        (bottom > 0.0).then(|| top / bottom)
    }

    /// The outcome's value over the row's best; `None` without both (or a best of zero).
    pub fn ratio_to_best(&self, outcome: &Outcome) -> Option<f64> {
        let (_, best) = self.best(outcome.workload)?;
        (best > 0.0).then(|| outcome.value.map(|v| v / best))?
    }
}

/// The JSON document (see `kv.rs`).
#[derive(Debug, Serialize)]
pub struct KvJson {
    /// "kv".
    workload: &'static str,
    dir: PathBuf,
    rows: u64,
    key_bytes: usize,
    value_bytes: usize,
    cache_bytes: u64,
    /// tilldb's write buffer (0: off).
    write_buffer_bytes: u64,
    threads: Vec<usize>,
    machine: MachineJson,
    disk: DiskJson,
    engines: Vec<EngineJson>,
    results: Vec<ResultJson>,
}

/// One engine of `engines`: how it commits, at both levels.
#[derive(Debug, Serialize)]
struct EngineJson {
    engine: &'static str,
    configuration: &'static str,
    no_flush: &'static str,
    notes: Option<String>,
}

/// One engine's result of one row.
#[derive(Debug, Serialize)]
struct ResultJson {
    engine: &'static str,
    workload: String,
    unit: &'static str,
    higher_is_better: bool,
    operations: u64,
    threads: Option<usize>,
    seconds: f64,
    value: Option<f64>,
    status: &'static str,
    error: Option<String>,
    entries: Option<u64>,
    parts: Option<BTreeMap<String, u64>>,
    best_engine: Option<&'static str>,
    ratio_to_best: Option<f64>,
}

/// The JSON document (see `kv.rs`).
pub fn json(run: &KvRun) -> KvJson {
    let mut results = Vec::new();
    for e in &run.engines {
        for o in &e.results {
            results.push(ResultJson {
                engine: engines::name(e.engine),
                workload: o.workload.name(),
                unit: o.workload.unit(),
                higher_is_better: o.workload.higher_is_better(),
                operations: o.operations,
                threads: o.threads,
                seconds: o.seconds,
                // Rates and sizes to 0.1; a length in ms as measured (LMDB's is microseconds).
                value: o.value.map(|v| {
                    if o.workload.unit() == "ms" {
                        v
                    } else {
                        round1(v)
                    }
                }),
                status: o.status.name(),
                error: o.error.clone(),
                entries: o.entries,
                parts: o.parts.clone(),
                best_engine: run.best(o.workload).map(|(b, _)| engines::name(b)),
                ratio_to_best: run.ratio_to_best(o).map(round3),
            });
        }
    }
    let engines = run
        .engines
        .iter()
        .map(|e| EngineJson {
            engine: engines::name(e.engine),
            configuration: engines::configuration(e.engine),
            no_flush: engines::no_flush(e.engine),
            notes: e.notes.clone(),
        })
        .collect();
    KvJson {
        workload: "kv",
        dir: run.dir.clone(),
        rows: run.rows,
        key_bytes: KEY_BYTES,
        value_bytes: VALUE_BYTES,
        cache_bytes: run.cache_bytes,
        write_buffer_bytes: run.write_buffer_bytes,
        threads: run.threads.clone(),
        machine: run.setting.machine_json(),
        disk: run.setting.disk_json(),
        engines,
        results,
    }
}

/// The human report.
pub fn print_text(run: &KvRun) {
    println!(
        "tilldb and its peers: the embedded-store workload ({KEY_BYTES} B random keys, \
         {VALUE_BYTES} B values)"
    );
    let [machine, disk] = run.setting.rows();
    let rows = [
        machine,
        ("dir", run.dir.display().to_string()),
        disk,
        (
            "load",
            format!(
                "N = {} rows; cache {} MiB per engine; one fresh store per engine, engines \
                 in turn{}",
                run.rows,
                run.cache_bytes >> 20,
                if run.write_buffer_bytes > 0 {
                    format!(
                        "; tilldb's write buffer {} MiB",
                        run.write_buffer_bytes >> 20
                    )
                } else {
                    String::new()
                }
            ),
        ),
    ];
    for (name, value) in rows {
        println!("  {name:<8} {value}");
    }
    println!();
    let (table, notes) = table(run);
    println!("{table}");
    println!(
        "Rates are per second (higher is better), the length in ms and sizes in MiB (lower is \
         better). best = the best engine's value among the ok ones (a chunked figure is not \
         the row's workload); tilldb / best = tilldb's value over it, so below 1 is behind \
         for a rate and above 1 is behind for ms and MiB."
    );
    if run
        .engines
        .iter()
        .any(|e| e.engine == Engine::TilldbEncrypted)
    {
        println!(
            "tilldb-encrypted is not a candidate for best; encrypted / tilldb = its speed \
             over plain tilldb's in one run (a rate's ratio, the inverse for ms and MiB), so \
             below 1 is what encryption costs."
        );
    }
    if !notes.is_empty() {
        println!();
        for note in &notes {
            println!("{note}");
        }
    }
    print_parts(run);
    println!(
        "\nHow each engine commits (sync: returns once durable; no-flush: the \
         no_flush_writes row) and its cache:"
    );
    for e in &run.engines {
        let name = engines::name(e.engine);
        println!("  {name:<8} sync: {}", engines::configuration(e.engine));
        println!("  {:<8} no-flush: {}", "", engines::no_flush(e.engine));
        if let Some(notes) = &e.notes {
            println!("  {:<8} this run: {notes}", "");
        }
    }
}

/// Where each store's bytes are, for both size rows: MiB per entry of its directory.
fn print_parts(run: &KvRun) {
    println!("\nWhere the bytes are (allocated MiB per file or directory):");
    for e in &run.engines {
        for o in &e.results {
            let Some(parts) = &o.parts else { continue };
            let list: Vec<String> = parts
                .iter()
                .filter(|&(_, &bytes)| bytes > 0)
                .map(|(name, &bytes)| format!("{name} {}", show(o.workload, as_f64(bytes))))
                .collect();
            println!(
                "  {:<8} {}: {}",
                engines::name(e.engine),
                o.workload.label(run.rows),
                list.join(", ")
            );
        }
    }
}

#[expect(
    clippy::cast_precision_loss,
    reason = "a size shown with one decimal in MiB"
)]
fn as_f64(bytes: u64) -> f64 {
    bytes as f64
}

/// The table, and the notes its `[n]` marks point to.
fn table(run: &KvRun) -> (Table, Vec<String>) {
    let mut table = Table::new();
    table.load_style(UTF8_FULL_CONDENSED);
    let mut header = vec!["row".to_owned(), "unit".to_owned()];
    header.extend(
        run.engines
            .iter()
            .map(|e| engines::name(e.engine).to_owned()),
    );
    header.extend(["best".to_owned(), "tilldb / best".to_owned()]);
    let encrypted = run
        .engines
        .iter()
        .any(|e| e.engine == Engine::TilldbEncrypted);
    if encrypted {
        header.push("encrypted / tilldb".to_owned());
    }
    table.set_header(header);
    let mut notes = Vec::new();
    for &workload in &run.workloads {
        let mut cells = vec![workload.label(run.rows), unit_label(workload).to_owned()];
        for e in &run.engines {
            let Some(o) = run.outcome(e.engine, workload) else {
                cells.push("-".to_owned());
                continue;
            };
            let mut cell = o
                .value
                .map_or_else(|| "failed".to_owned(), |v| show(workload, v));
            if let Some(error) = &o.error {
                notes.push(format!(
                    "[{}] {}, {}: {}{error}",
                    notes.len() + 1,
                    engines::name(e.engine),
                    workload.name(),
                    if o.status == Status::Chunked {
                        "CHUNKED: "
                    } else {
                        ""
                    }
                ));
                if o.status == Status::Chunked {
                    cell.push_str(" chunked");
                }
                write!(cell, " [{}]", notes.len()).expect("writing to a String cannot fail");
            }
            cells.push(cell);
        }
        let best = run.best(workload);
        cells.push(best.map_or_else(
            || "-".to_owned(),
            |(engine, _)| engines::name(engine).to_owned(),
        ));
        let tilldb = run
            .outcome(Engine::Tilldb, workload)
            .and_then(|o| run.ratio_to_best(o));
        cells.push(tilldb.map_or_else(|| "-".to_owned(), |x| format!("{x:.2}")));
        if encrypted {
            let ratio = run.encrypted_over_plain(workload);
            cells.push(ratio.map_or_else(|| "-".to_owned(), |x| format!("{x:.2}")));
        }
        table.add_row(cells);
    }
    for i in 2..2 + run.engines.len() + 2 + usize::from(encrypted) {
        if let Some(column) = table.column_mut(i) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    (table, notes)
}

fn unit_label(workload: Workload) -> &'static str {
    match workload.unit() {
        "bytes" => "MiB",
        unit => unit,
    }
}

/// A value in the table: rates whole, ms with two decimals, sizes in MiB.
fn show(workload: Workload, value: f64) -> String {
    match workload.unit() {
        "ms" => format!("{value:.2}"),
        "bytes" => format!("{:.1}", value / f64::from(1u32 << 20)),
        _ => format!("{value:.0}"),
    }
}
