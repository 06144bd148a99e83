//! Output of `till bench store`: what a run measured ([`StoreRun`]: the load, one
//! [`WriteRow`] per thread count, the [`ReadRow`]), the notes for its reader, the human report
//! and the SVG plot.
//!
//! The JSON document (`--json`) and its keys are in `store_json.rs`, which reads these types;
//! `store.rs` hands both to `emit` in `lib.rs`.

use super::latency::{micros, per_sec};
use super::machine::Setting;
use super::svg::{self, Chart};
use comfy_table::{CellAlignment, Table, presets::UTF8_FULL_CONDENSED};
use std::path::PathBuf;
use std::time::Duration;
use tilldb::internals::page::{PoolStats, TornPageGuard};
use tilldb::{Durability, FlushMethod};

/// Where the flush method in force came from.
#[derive(Debug, Clone, Copy)]
pub enum MethodSource {
    /// Probed and chosen by the database when this run created it.
    Chosen,
    /// `--flush-method`, when this run created the database.
    Flag,
    /// The existing database's header; holds what `--flush-method` asked for, if anything.
    Header(Option<FlushMethod>),
}

/// The load phase.
#[derive(Debug, Clone)]
pub struct Load {
    pub keys: u64,
    /// Keys put by this run: 0 when the database already held the last key.
    pub inserted: u64,
    pub puts_per_txn: u64,
    pub elapsed: Duration,
}

impl Load {
    pub fn inserts_per_sec(&self) -> Option<f64> {
        (self.inserted > 0).then(|| per_sec(self.inserted, self.elapsed))
    }
}

/// One thread count of the write phase.
#[derive(Debug, Clone)]
pub struct WriteRow {
    pub threads: usize,
    /// Transactions committed (and acknowledged) during the row.
    pub commits: u64,
    pub elapsed: Duration,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// Flushes of the log (write stages for write-through methods).
    pub flushes: u64,
    pub log_appends: u64,
    pub log_bytes: u64,
    pub pool: PoolStats,
}

impl WriteRow {
    pub fn commits_per_sec(&self) -> f64 {
        per_sec(self.commits, self.elapsed)
    }

    #[expect(
        clippy::cast_precision_loss,
        reason = "ratios reported with a few digits"
    )]
    pub fn commits_per_flush(&self) -> Option<f64> {
        (self.flushes > 0).then(|| self.commits as f64 / self.flushes as f64)
    }

    pub fn flushes_per_sec(&self) -> f64 {
        per_sec(self.flushes, self.elapsed)
    }

    #[expect(
        clippy::cast_precision_loss,
        reason = "ratios reported with a few digits"
    )]
    pub fn log_bytes_per_commit(&self) -> f64 {
        if self.commits == 0 {
            0.0
        } else {
            self.log_bytes as f64 / self.commits as f64
        }
    }
}

/// The read phase.
#[derive(Debug, Clone)]
pub struct ReadRow {
    pub threads: usize,
    pub gets: u64,
    /// Gets that found no value.
    pub missing: u64,
    pub elapsed: Duration,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub pool: PoolStats,
}

/// Everything one run measured, and how.
#[derive(Debug)]
pub struct StoreRun {
    /// The database directory, absolute.
    pub dir: PathBuf,
    /// The machine and the disk under the directory.
    pub setting: Setting,
    /// Whether this run created the database (or reopened and recovered one).
    pub created: bool,
    pub open: Duration,
    /// The database's page size.
    pub page_bytes: u32,
    /// `--page-bytes` (applies only to a new database).
    pub page_bytes_asked: u32,
    pub cache_bytes: u64,
    pub durability: Durability,
    pub flush_method: FlushMethod,
    /// The database's torn-page guard, and `--torn-page-guard`.
    pub torn_page_guard: TornPageGuard,
    pub torn_page_guard_asked: TornPageGuard,
    pub method_source: MethodSource,
    pub keys: u64,
    pub value_bytes: usize,
    pub seconds: f64,
    /// The SIMULATED flush latency, when on.
    pub sync_latency_us: Option<u64>,
    pub load: Load,
    pub rows: Vec<WriteRow>,
    pub reads: ReadRow,
    pub close: Duration,
    pub disk: super::disk_usage::DiskUsage,
    /// The raw flushed-write rate of the database's flush method at its log block, measured
    /// in the database's directory after the load, and that block.
    pub raw: tilldb::io::Measurement,
    pub raw_block_bytes: u32,
}

impl StoreRun {
    /// A write row's commits/s over the raw flushed-write rate.
    pub fn ratio_to_raw(&self, row: &WriteRow) -> f64 {
        if self.raw.flushes_per_sec > 0.0 {
            row.commits_per_sec() / self.raw.flushes_per_sec
        } else {
            0.0
        }
    }
}

impl StoreRun {
    /// Things a reader of the numbers should know: flags that did not apply, surprises.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.page_bytes != self.page_bytes_asked {
            notes.push(format!(
                "the database has {} B pages; --page-bytes {} applies only to a new database \
                 (--fresh)",
                self.page_bytes, self.page_bytes_asked
            ));
        }
        if let MethodSource::Header(Some(asked)) = self.method_source
            && asked != self.flush_method
        {
            notes.push(format!(
                "the database flushes with {}; --flush-method {asked} applies only to a new \
                 database (--fresh)",
                self.flush_method
            ));
        }
        if self.torn_page_guard_asked != TornPageGuard::Auto
            && self.torn_page_guard != self.torn_page_guard_asked
        {
            notes.push(format!(
                "the database's torn-page guard is {}; --torn-page-guard {} applies only to a \
                 new database (--fresh)",
                self.torn_page_guard, self.torn_page_guard_asked
            ));
        }
        if self.torn_page_guard == TornPageGuard::None {
            notes.push(
                "torn-page guard none: a crash during page write-back can tear a page that \
                 nothing repairs (safe only if the device writes pages atomically)"
                    .into(),
            );
        }
        if !self.flush_method.is_durable() {
            notes.push("flush method nosync: NOTHING is durable, whatever the durability".into());
        }
        if self.durability != Durability::Sync {
            notes.push(format!(
                "durability {}: commits are acknowledged before they are flushed",
                self.durability
            ));
        }
        for r in &self.rows {
            if r.log_appends != r.commits {
                notes.push(format!(
                    "{} threads: the log counted {} appends for {} commits",
                    r.threads, r.log_appends, r.commits
                ));
            }
        }
        if self.reads.missing > 0 {
            notes.push(format!(
                "{} of {} reads found no value, although every key was loaded",
                self.reads.missing, self.reads.gets
            ));
        }
        notes
    }

    fn method_text(&self) -> String {
        let source = match self.method_source {
            MethodSource::Chosen => "probed and chosen by the database at create",
            MethodSource::Flag => "--flush-method",
            MethodSource::Header(_) => "from the database's header",
        };
        format!("{} ({source})", self.flush_method)
    }
}

/// The SVG: commits/s against threads.
pub fn plot(run: &StoreRun) -> String {
    #[expect(clippy::cast_precision_loss, reason = "thread counts are small")]
    let points: Vec<(f64, f64)> = run
        .rows
        .iter()
        .map(|r| (r.threads as f64, r.commits_per_sec()))
        .collect();
    let latency = run.sync_latency_us.map_or_else(String::new, |us| {
        format!(", SIMULATED flush latency {us} us")
    });
    let title = format!(
        "tilldb store: one-put transactions, durability {}, {}{latency}",
        run.durability, run.flush_method
    );
    let subtitle = format!(
        "{} · {} keys, {} B values · {} B pages, {} cache · guard {} · {:.2} s per row",
        run.setting.short(),
        run.keys,
        run.value_bytes,
        run.page_bytes,
        size(run.cache_bytes),
        run.torn_page_guard,
        run.seconds
    );
    svg::render(&Chart {
        title: &title,
        subtitle: &subtitle,
        x_label: "threads (log2 scale)",
        y_label: "commits/s",
        series_label: "commits/s",
        points: &points,
        reference: None,
    })
}

/// The human report: header, one line per phase, the write table, where the database is.
pub fn print_text(run: &StoreRun) {
    println!("tilldb store under load");
    let [machine, disk] = run.setting.rows();
    let rows: [(&str, String); 10] = [
        machine,
        ("dir", run.dir.display().to_string()),
        disk,
        ("page size", format!("{} B", run.page_bytes)),
        (
            "cache",
            format!(
                "{} ({} pages)",
                size(run.cache_bytes),
                run.cache_bytes / u64::from(run.page_bytes)
            ),
        ),
        ("durability", run.durability.to_string()),
        ("flush method", run.method_text()),
        ("torn-page guard", run.torn_page_guard.to_string()),
        (
            "keys",
            format!("{} keys, {} B values", run.keys, run.value_bytes),
        ),
        ("time per phase", format!("{:.2} s", run.seconds)),
    ];
    for (name, value) in rows {
        println!("  {name:<16} {value}");
    }
    if let Some(us) = run.sync_latency_us {
        println!("\n!! Every number below includes a SIMULATED flush latency of {us} us.");
    }
    println!();
    let (verb, detail) = match (run.created, run.method_source) {
        (true, MethodSource::Chosen) => {
            ("created a new database", " (flush-method probe included)")
        }
        (true, _) => ("created a new database", ""),
        (false, _) => ("reopened the database", " (recovery included)"),
    };
    println!("open    {verb} in {:.3} s{detail}", run.open.as_secs_f64());
    match run.load.inserts_per_sec() {
        Some(rate) => println!(
            "load    {} keys in {:.2} s: {rate:.0} inserts/s (transactions of {} puts, {})",
            run.load.inserted,
            run.load.elapsed.as_secs_f64(),
            run.load.puts_per_txn,
            run.durability
        ),
        None => println!(
            "load    skipped: the database already holds key {}",
            super::store_load::key(run.keys - 1)
        ),
    }
    let extra = run
        .sync_latency_us
        .map_or_else(String::new, |us| format!("; SIMULATED +{us} us per flush"));
    println!(
        "{}",
        super::raw::raw_line(&run.raw, run.raw_block_bytes, run.flush_method, &extra)
    );
    println!(
        "writes  one-put transactions on random keys; latency from begin to acknowledged commit"
    );
    println!("{}", table(run));
    println!(
        "flushes/s = log flushes; x raw = commits/s / raw flushed writes/s (one writer, same \
         method and block)."
    );
    let r = &run.reads;
    println!(
        "reads   {} threads, random db.get: {:.0} gets/s, p50 {} us, p99 {} us, max {} us, \
         pool {} hits / {} misses",
        r.threads,
        per_sec(r.gets, r.elapsed),
        micros(r.p50_us),
        micros(r.p99_us),
        micros(r.max_us),
        r.pool.hits,
        r.pool.misses,
    );
    println!(
        "close   {:.3} s (checkpoint: pages written back, log released)",
        run.close.as_secs_f64()
    );
    println!();
    let parts: Vec<String> = run
        .disk
        .parts
        .iter()
        .map(|(name, bytes)| format!("{name} {}", size(*bytes)))
        .collect();
    println!(
        "The database stays in {}: {} on disk ({}).",
        run.dir.display(),
        size(run.disk.allocated_bytes),
        parts.join(", ")
    );
    println!("Run again to reopen it (the open is timed); --fresh starts over.");
    for note in run.notes() {
        println!("note: {note}");
    }
}

fn table(run: &StoreRun) -> Table {
    let mut table = Table::new();
    table.load_style(UTF8_FULL_CONDENSED);
    let header = [
        "threads",
        "commits/s",
        "p50 us",
        "p99 us",
        "max us",
        "flushes/s",
        "commits/flush",
        "x raw",
        "log B/commit",
        "pool hits",
        "misses",
        "evictions",
        "evict writes",
    ];
    table.set_header(header);
    for r in &run.rows {
        table.add_row([
            r.threads.to_string(),
            format!("{:.0}", r.commits_per_sec()),
            micros(r.p50_us),
            micros(r.p99_us),
            micros(r.max_us),
            format!("{:.0}", r.flushes_per_sec()),
            r.commits_per_flush()
                .map_or_else(|| "-".to_owned(), |c| format!("{c:.1}")),
            format!("{:.2}", run.ratio_to_raw(r)),
            format!("{:.0}", r.log_bytes_per_commit()),
            r.pool.hits.to_string(),
            r.pool.misses.to_string(),
            r.pool.evictions.to_string(),
            r.pool.eviction_writes.to_string(),
        ]);
    }
    for i in 0..header.len() {
        if let Some(column) = table.column_mut(i) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table
}

/// Bytes in binary units, one decimal.
#[expect(clippy::cast_precision_loss, reason = "sizes shown with one decimal")]
fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_use_binary_units() {
        assert_eq!(size(512), "512 B");
        assert_eq!(size(8192), "8.0 KiB");
        assert_eq!(size(64 << 20), "64.0 MiB");
        assert_eq!(size(3 << 30), "3.0 GiB");
    }
}
