//! Output of `till bench log` and `till bench commit`: what a run measured ([`LogRun`], one
//! [`Row`] per thread count), the human report and the SVG plot. Both measure commits/s
//! against threads next to the raw flushed-write rate; they differ in what a commit is (a log
//! record alone, or a one-insert transaction on the whole store), which [`Workload`] says.
//!
//! The JSON document (`--json`) and its keys are in `log_json.rs`, which reads these types;
//! the runners (`log.rs`, `commit.rs`) hand both to `emit` in `lib.rs`.

use super::latency::{Histogram, micros, per_sec};
use super::machine::Setting;
use super::svg::{self, Chart};
use comfy_table::{CellAlignment, Table, presets::UTF8_FULL_CONDENSED};
use std::path::PathBuf;
use std::time::Duration;
use tilldb::TornPageGuard;
use tilldb::internals::wal::TailGuard;
use tilldb::io::Measurement;
use tilldb::{Durability, FlushMethod};

/// What one commit of a run is.
#[derive(Debug, Clone, Copy)]
pub enum Workload {
    /// `till bench log`: one record of `record_bytes` appended to the log alone.
    LogRecords,
    /// `till bench commit`: a transaction inserting one key with a `record_bytes` value into
    /// a fresh database, committed through the whole store.
    StoreInserts {
        page_bytes: u32,
        cache_bytes: u64,
        guard: TornPageGuard,
    },
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::LogRecords => "log-records",
            Workload::StoreInserts { .. } => "store-inserts",
        }
    }
}

/// Everything one run measured, and how.
#[derive(Debug)]
pub struct LogRun {
    pub workload: Workload,
    /// The benchmark directory (the run's own subdirectory is gone by now).
    pub dir: PathBuf,
    /// The machine and the disk under the directory.
    pub setting: Setting,
    pub flush_method: FlushMethod,
    pub durability: Durability,
    /// The log block actually used.
    pub block_bytes: u32,
    pub record_bytes: usize,
    pub segment_bytes: u64,
    /// Whether the log gathered released committers before each flush.
    pub adaptive_gather: bool,
    /// Whether each group's last block was padded (or rewritten by the next group).
    pub tail: TailGuard,
    /// Requested seconds per row.
    pub seconds: f64,
    /// The SIMULATED flush latency, when on.
    pub sync_latency_us: Option<u64>,
    /// One writer's flushed writes of one block, through the same storage as the log.
    pub raw: Measurement,
    pub rows: Vec<Row>,
}

impl LogRun {
    pub fn ratio_to_raw(&self, row: &Row) -> f64 {
        if self.raw.flushes_per_sec > 0.0 {
            row.commits_per_sec() / self.raw.flushes_per_sec
        } else {
            0.0
        }
    }

    /// Commits/s relative to the 1-thread row, when the run has one.
    pub fn ratio_to_one_thread(&self, row: &Row) -> Option<f64> {
        let one = self.rows.iter().find(|r| r.threads == 1)?.commits_per_sec();
        (one > 0.0).then(|| row.commits_per_sec() / one)
    }

    /// "none", or the loud form every simulated number carries.
    fn latency_text(&self) -> String {
        match self.sync_latency_us {
            None => "none".to_owned(),
            Some(us) => format!("SIMULATED {us} us per flush, one flush at a time"),
        }
    }
}

/// The human report: header, raw line, table.
pub fn print_text(run: &LogRun) {
    let simulated = run.sync_latency_us;
    let mut rows: Vec<(&str, String)> = vec![];
    match run.workload {
        Workload::LogRecords => {
            println!("Write-ahead log alone: commits from many threads");
            rows.push((
                "record",
                format!(
                    "{} B payload, {} B in the log",
                    run.record_bytes,
                    tilldb::internals::wal::record::record_len(run.record_bytes)
                ),
            ));
        }
        Workload::StoreInserts {
            page_bytes,
            cache_bytes,
            guard,
        } => {
            println!("Whole store: one-insert transactions from many threads, fresh database");
            rows.extend([
                (
                    "transaction",
                    format!("insert one 15 B key with a {} B value", run.record_bytes),
                ),
                ("page size", format!("{page_bytes} B")),
                ("cache", format!("{} MiB", cache_bytes >> 20)),
                ("torn-page guard", guard.name().to_owned()),
            ]);
        }
    }
    rows.extend(run.setting.rows());
    rows.extend([
        ("dir", run.dir.display().to_string()),
        ("flush method", run.flush_method.to_string()),
        ("log block", format!("{} B", run.block_bytes)),
        ("durability", run.durability.to_string()),
        (
            "adaptive gather",
            if run.adaptive_gather { "on" } else { "off" }.to_owned(),
        ),
        ("tail block", tail_name(run.tail).to_owned()),
        ("time per row", format!("{:.2} s", run.seconds)),
        ("flush latency", run.latency_text()),
    ]);
    for (name, value) in rows {
        println!("  {name:<18} {value}");
    }
    if let Some(us) = simulated {
        println!("\n!! Every number below includes a SIMULATED flush latency of {us} us.");
    }
    let extra = simulated.map_or_else(String::new, |us| format!("; SIMULATED +{us} us per flush"));
    println!(
        "\n{}",
        super::raw::raw_line(&run.raw, run.block_bytes, run.flush_method, &extra)
    );
    println!();
    println!("{}", table(run));
    let flushes = if run.flush_method.is_write_through() {
        "flush stages and writes made through to the device (each its own flush)"
    } else {
        "flush stages of the log"
    };
    println!(
        "flushes/s counts {flushes}; x raw = commits/s / raw flushed writes/s; \
         x 1 thread = commits/s / the 1-thread row's."
    );
    if let Some(us) = simulated {
        println!("!! All figures include a SIMULATED flush latency of {us} us per flush.");
    }
}

fn table(run: &LogRun) -> Table {
    let mut table = Table::new();
    table.load_style(UTF8_FULL_CONDENSED);
    table.set_header([
        "threads",
        "commits/s",
        "flushes/s",
        "commits/flush",
        "p50 us",
        "p99 us",
        "max us",
        "x raw",
        "x 1 thread",
        "log B/commit",
        "CPU us/commit",
    ]);
    for r in &run.rows {
        table.add_row([
            r.threads.to_string(),
            format!("{:.0}", r.commits_per_sec()),
            format!("{:.0}", r.flushes_per_sec()),
            r.commits_per_flush()
                .map_or_else(|| "-".to_owned(), |c| format!("{c:.1}")),
            micros(r.p50_us),
            micros(r.p99_us),
            micros(r.max_us),
            format!("{:.2}", run.ratio_to_raw(r)),
            run.ratio_to_one_thread(r)
                .map_or_else(|| "-".to_owned(), |x| format!("{x:.2}")),
            format!("{:.0}", r.log_bytes_per_commit()),
            r.cpu_us_per_commit()
                .map_or_else(|| "-".to_owned(), |x| format!("{x:.1}")),
        ]);
    }
    for i in 0..11 {
        if let Some(column) = table.column_mut(i) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table
}

/// The SVG: commits/s against threads, and the raw flushed-write rate as a dashed line.
pub fn plot(run: &LogRun) -> String {
    #[expect(clippy::cast_precision_loss, reason = "thread counts are at most 4096")]
    let points: Vec<(f64, f64)> = run
        .rows
        .iter()
        .map(|r| (r.threads as f64, r.commits_per_sec()))
        .collect();
    let latency = match run.sync_latency_us {
        None => "no simulated latency".to_owned(),
        Some(us) => format!("SIMULATED flush latency {us} us"),
    };
    let what = match run.workload {
        Workload::LogRecords => "log",
        Workload::StoreInserts { .. } => "insert+commit",
    };
    let title = format!(
        "tilldb {what} commits/s: {}, durability {}, {latency}",
        run.flush_method, run.durability
    );
    let unit = match run.workload {
        Workload::LogRecords => "records",
        Workload::StoreInserts { .. } => "values",
    };
    let subtitle = format!(
        "{} · {} B log blocks · {} B {unit} · {:.2} s per thread count",
        run.setting.short(),
        run.block_bytes,
        run.record_bytes,
        run.seconds
    );
    let reference = format!(
        "raw flushed writes, one writer: {:.0}/s",
        run.raw.flushes_per_sec
    );
    svg::render(&Chart {
        title: &title,
        subtitle: &subtitle,
        x_label: "threads (log2 scale)",
        y_label: "commits/s",
        series_label: "commits/s",
        points: &points,
        reference: Some((run.raw.flushes_per_sec, &reference)),
    })
}

/// One thread count's results.
#[derive(Debug, Clone)]
pub struct Row {
    pub threads: usize,
    /// Commits acknowledged during the row.
    pub commits: u64,
    pub elapsed: Duration,
    /// Flushes the log did. For write-through methods, whose writes are the flushes, its
    /// write stages.
    pub flushes: u64,
    /// Bytes the log grew by during the row (records and pads; a block written again counts
    /// once).
    pub log_bytes: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// CPU time of the whole process over the row (`None` where unknown).
    pub cpu: Option<Duration>,
}

impl Row {
    /// A row of `commits` over `elapsed`, from the log's counters over it (`wal`: deltas)
    /// and every commit's latency. Flushes are the device's: flush stages, and writes a
    /// write-through method made through to the device.
    pub fn new(
        threads: usize,
        commits: u64,
        elapsed: Duration,
        wal: &tilldb::WalStats,
        latencies: &Histogram,
    ) -> Row {
        Row {
            threads,
            commits,
            elapsed,
            flushes: wal.device_flushes(),
            log_bytes: wal.log_bytes,
            p50_us: latencies.percentile_us(50.0),
            p99_us: latencies.percentile_us(99.0),
            max_us: latencies.percentile_us(100.0),
            cpu: None,
        }
    }

    pub fn commits_per_sec(&self) -> f64 {
        per_sec(self.commits, self.elapsed)
    }

    /// The row with the process's CPU time over it.
    #[must_use]
    pub fn with_cpu(self, cpu: Option<Duration>) -> Row {
        Row { cpu, ..self }
    }

    /// Microseconds of CPU (user + system, every thread of the process) per commit; `None`
    /// where the CPU time is unknown or nothing committed.
    #[expect(clippy::cast_precision_loss, reason = "a ratio")]
    pub fn cpu_us_per_commit(&self) -> Option<f64> {
        let cpu = self.cpu?;
        (self.commits > 0).then(|| cpu.as_secs_f64() * 1e6 / self.commits as f64)
    }

    /// Log bytes written per commit.
    pub fn log_bytes_per_commit(&self) -> f64 {
        if self.commits == 0 {
            0.0
        } else {
            #[expect(clippy::cast_precision_loss, reason = "a ratio")]
            let ratio = self.log_bytes as f64 / self.commits as f64;
            ratio
        }
    }

    pub fn flushes_per_sec(&self) -> f64 {
        per_sec(self.flushes, self.elapsed)
    }

    /// `None` when the log did not flush during the row.
    #[expect(
        clippy::cast_precision_loss,
        reason = "a ratio reported with a few digits"
    )]
    pub fn commits_per_flush(&self) -> Option<f64> {
        (self.flushes > 0).then(|| self.commits as f64 / self.flushes as f64)
    }
}

/// How a report names a tail guard.
pub fn tail_name(tail: TailGuard) -> &'static str {
    match tail {
        TailGuard::Slots => "slot copy",
        TailGuard::Pad => "padded",
        TailGuard::None => "rewritten",
    }
}
