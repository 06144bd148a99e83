//! Output of `till bench peers`: the human report (machine and disk header, raw rate, one
//! table, how each engine is made durable, what the columns mean, the targets), the JSON
//! document described in `peers.rs`, and the plot (`plot.rs`).

use super::Engine;
use super::counters::{Counters, CpuTicks};
use super::engines;
use crate::latency::{micros, per_sec, round1, round3};
use crate::machine::{DiskJson, MachineJson, Setting};
use comfy_table::{CellAlignment, Table, presets::UTF8_FULL_CONDENSED};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;
use tilldb::FlushMethod;
use tilldb::io::Measurement;

/// tilldb's targets on the commit path (issue 19), checked against each run's rows.
/// One thread: commits/s against the raw flush rate.
const ONE_THREAD_TARGET: f64 = 0.95;
/// One thread: directory growth per commit, bytes, at most.
const GROWTH_TARGET: f64 = 1024.0;
/// Encrypted tilldb's durable one-row commits at 1 thread over plain tilldb's (issue 53).
const ENCRYPTED_TARGET: f64 = 0.97;
/// 64 threads: commits/s against RocksDB's (sync=true) in the same run.
const ROCKSDB_TARGET: f64 = 1.5;
/// 64 threads against tilldb's own 1-thread rate on this disk.
const SCALING_TARGET: f64 = 12.0;
/// 64 threads: CPU microseconds per commit, at most (half of the 32.5 measured when the
/// targets were set).
const CPU_TARGET_US: f64 = 16.0;

/// One engine at one thread count.
#[derive(Debug)]
pub struct PeerRow {
    pub engine: Engine,
    pub threads: usize,
    pub commits: u64,
    pub elapsed: Duration,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// The counters over the row (deltas).
    pub counts: Counters,
    /// Allocated bytes of the engine's directory after the row minus before.
    pub dir_growth_bytes: i64,
    /// How long the engine's close took after the row (page write-back, checkpoints).
    pub close: Duration,
}

impl PeerRow {
    pub fn commits_per_sec(&self) -> f64 {
        per_sec(self.commits, self.elapsed)
    }

    /// Commits per second with the close inside the window: the steady-state figure, which
    /// pays the page writes a row of a few seconds can defer (a log-structured engine's
    /// deferred work beyond its close is not counted; see docs/benchmarks-journal.md).
    pub fn commits_per_sec_with_close(&self) -> f64 {
        per_sec(self.commits, self.elapsed + self.close)
    }

    fn device_flushes_per_sec(&self) -> Option<f64> {
        Some(per_sec(self.counts.device_flushes?, self.elapsed))
    }

    /// Commits per device flush request; `None` when uncounted or none were sent.
    fn commits_per_device_flush(&self) -> Option<f64> {
        let flushes = self.counts.device_flushes.filter(|&f| f > 0)?;
        Some(ratio(self.commits, flushes))
    }

    fn per_commit(&self, bytes: Option<u64>) -> Option<f64> {
        let bytes = bytes?;
        (self.commits > 0).then(|| ratio(bytes, self.commits))
    }

    /// Microseconds of this process's CPU (user + system, every thread) per commit.
    fn cpu_us_per_commit(&self) -> Option<f64> {
        let ticks = self.counts.cpu?.this_process;
        (self.commits > 0)
            .then(|| ratio(ticks * 1_000_000 / crate::platform::USER_HZ, self.commits))
    }

    #[expect(clippy::cast_precision_loss, reason = "a ratio")]
    fn dir_growth_per_commit(&self) -> Option<f64> {
        (self.commits > 0).then(|| self.dir_growth_bytes as f64 / self.commits as f64)
    }
}

#[expect(
    clippy::cast_precision_loss,
    reason = "a ratio reported with a few digits"
)]
fn ratio(a: u64, b: u64) -> f64 {
    a as f64 / b as f64
}

/// Everything one run measured, and how.
#[derive(Debug)]
pub struct PeersRun {
    /// The benchmark directory (the run's own subdirectory is gone by now).
    pub dir: PathBuf,
    /// The machine and the disk under the directory.
    pub setting: Setting,
    /// tilldb's flush method, and the raw measurement's.
    pub flush_method: FlushMethod,
    pub block_bytes: u32,
    pub value_bytes: usize,
    pub seconds: f64,
    pub raw: Measurement,
    /// Device flush requests during the raw measurement; `None` when uncounted.
    pub raw_device_flushes: Option<u64>,
    pub engines: Vec<Engine>,
    pub rows: Vec<PeerRow>,
}

impl PeersRun {
    /// Commits/s over tilldb's at the same thread count, when the run has that row.
    fn ratio_to_tilldb(&self, row: &PeerRow) -> Option<f64> {
        let tilldb = self
            .rows
            .iter()
            .find(|r| r.engine == Engine::Tilldb && r.threads == row.threads)?
            .commits_per_sec();
        (tilldb > 0.0).then(|| row.commits_per_sec() / tilldb)
    }

    fn ratio_to_raw(&self, row: &PeerRow) -> f64 {
        if self.raw.flushes_per_sec > 0.0 {
            row.commits_per_sec() / self.raw.flushes_per_sec
        } else {
            0.0
        }
    }

    /// Device flush requests per raw flushed write.
    fn raw_device_flushes_per_flush(&self) -> Option<f64> {
        let flushes = self.raw_device_flushes?;
        (self.raw.ops > 0).then(|| ratio(flushes, self.raw.ops))
    }
}

/// The JSON document (see `peers.rs`).
#[derive(Debug, Serialize)]
pub struct PeersJson {
    /// "peers-inserts".
    workload: &'static str,
    dir: PathBuf,
    value_bytes: usize,
    /// Requested seconds per row.
    seconds: f64,
    machine: MachineJson,
    disk: DiskJson,
    /// tilldb's flush method, and the raw measurement's.
    flush_method: &'static str,
    block_bytes: u32,
    raw_flushes_per_sec: f64,
    raw_p50_us: f64,
    raw_p99_us: f64,
    /// Device flush requests per raw flushed write; null when uncounted.
    raw_device_flushes_per_flush: Option<f64>,
    engines: Vec<EngineJson>,
    results: Vec<PeerRowJson>,
}

/// One engine of `engines`: how it is made durable.
#[derive(Debug, Serialize)]
struct EngineJson {
    engine: &'static str,
    configuration: &'static str,
}

/// One engine at one thread count, a row of `results`.
#[derive(Debug, Serialize)]
struct PeerRowJson {
    engine: &'static str,
    threads: usize,
    /// "sync" for all.
    durability: &'static str,
    commits: u64,
    elapsed_seconds: f64,
    commits_per_sec: f64,
    /// How long the engine's close took after the row.
    close_seconds: f64,
    /// Commits over the row and the close after it: the steady-state figure.
    commits_per_sec_with_close: f64,
    p50_us: f64,
    p99_us: f64,
    max_us: f64,
    /// Cache-flush requests the device completed per second (device-wide); null where the
    /// kernel does not report them.
    device_flushes_per_sec: Option<f64>,
    /// Null when uncounted or none were sent.
    commits_per_device_flush: Option<f64>,
    /// Bytes the device wrote per commit (device-wide); null when uncounted.
    device_write_bytes_per_commit: Option<f64>,
    /// Growth of the engine's directory (allocated blocks) per commit.
    dir_growth_bytes_per_commit: Option<f64>,
    /// Share of all CPUs that other processes used during the row (0-1); null when unknown.
    others_cpu_share: Option<f64>,
    /// This process's user + system time, every thread, per commit; null where unknown.
    cpu_us_per_commit: Option<f64>,
    /// Commits/s over tilldb's at the same thread count; null without that row.
    ratio_to_tilldb: Option<f64>,
    /// Commits/s over the raw flushed-write rate.
    ratio_to_raw: f64,
}

/// The JSON document (see `peers.rs`).
pub fn json(run: &PeersRun) -> PeersJson {
    let results = run
        .rows
        .iter()
        .map(|r| PeerRowJson {
            engine: engines::name(r.engine),
            threads: r.threads,
            durability: "sync",
            commits: r.commits,
            elapsed_seconds: r.elapsed.as_secs_f64(),
            commits_per_sec: round1(r.commits_per_sec()),
            close_seconds: r.close.as_secs_f64(),
            commits_per_sec_with_close: round1(r.commits_per_sec_with_close()),
            p50_us: round1(r.p50_us),
            p99_us: round1(r.p99_us),
            max_us: round1(r.max_us),
            device_flushes_per_sec: r.device_flushes_per_sec().map(round1),
            commits_per_device_flush: r.commits_per_device_flush().map(round3),
            device_write_bytes_per_commit: r.per_commit(r.counts.device_write_bytes).map(round1),
            dir_growth_bytes_per_commit: r.dir_growth_per_commit().map(round1),
            others_cpu_share: r.counts.cpu.and_then(CpuTicks::others_share).map(round3),
            cpu_us_per_commit: r.cpu_us_per_commit().map(round1),
            ratio_to_tilldb: run.ratio_to_tilldb(r).map(round3),
            ratio_to_raw: round3(run.ratio_to_raw(r)),
        })
        .collect();
    let engines = run
        .engines
        .iter()
        .map(|&e| EngineJson {
            engine: engines::name(e),
            configuration: engines::configuration(e),
        })
        .collect();
    PeersJson {
        workload: "peers-inserts",
        dir: run.dir.clone(),
        value_bytes: run.value_bytes,
        seconds: run.seconds,
        machine: run.setting.machine_json(),
        disk: run.setting.disk_json(),
        flush_method: run.flush_method.name(),
        block_bytes: run.block_bytes,
        raw_flushes_per_sec: round1(run.raw.flushes_per_sec),
        raw_p50_us: round1(run.raw.p50_us),
        raw_p99_us: round1(run.raw.p99_us),
        raw_device_flushes_per_flush: run.raw_device_flushes_per_flush().map(round3),
        engines,
        results,
    }
}

/// The machine and disk the run measured, one fact per line.
fn print_header(run: &PeersRun) {
    let [machine, disk] = run.setting.rows();
    let rows = [
        machine,
        ("dir", run.dir.display().to_string()),
        disk,
        (
            "transaction",
            format!(
                "insert one random 15 B key with a {} B value, commit; durable on return",
                run.value_bytes
            ),
        ),
        (
            "time per row",
            format!(
                "{:.2} s, a fresh store per engine and thread count",
                run.seconds
            ),
        ),
    ];
    for (name, value) in rows {
        println!("  {name:<14} {value}");
    }
}

/// The human report.
pub fn print_text(run: &PeersRun) {
    println!("tilldb and its peers: one-insert durable transactions from many threads");
    print_header(run);
    let per_flush = run
        .raw_device_flushes_per_flush()
        .map_or_else(String::new, |x| {
            format!("; {x:.2} device flush requests per flushed write")
        });
    println!(
        "\n{}",
        crate::raw::raw_line(&run.raw, run.block_bytes, run.flush_method, &per_flush)
    );
    println!();
    println!("{}", table(run));
    println!(
        "with close/s = commits / (the row + the engine's close after it): the steady-state \
         figure, which pays the page write-back a short row defers (tilldb's checkpoint, \
         SQLite's WAL checkpoint).\n\
         x tilldb = commits/s / tilldb's at the same thread count; x raw = commits/s / raw \
         flushed writes/s.\n\
         flushes/s = cache-flush requests the device completed (/proc/diskstats, device-wide: \
         other processes' I/O counts too); n/a when the kernel does not report them.\n\
         device B/commit = bytes the device wrote (same source, the file system's journal \
         included); dir B/commit = growth of the engine's directory (allocated blocks, \
         preallocation included); others' CPU = share of all CPUs that other processes used \
         during the row (a busy neighbour makes a row noise, not a result)."
    );
    println!("\nHow each engine is made durable (commit returns only once it is flushed):");
    for &engine in &run.engines {
        println!(
            "  {:<16} {}",
            engines::name(engine),
            engines::configuration(engine)
        );
    }
    print_targets(run);
}

fn table(run: &PeersRun) -> Table {
    let mut table = Table::new();
    table.load_style(UTF8_FULL_CONDENSED);
    table.set_header([
        "engine",
        "threads",
        "commits/s",
        "with close/s",
        "x tilldb",
        "x raw",
        "p50 us",
        "p99 us",
        "flushes/s",
        "commits/flush",
        "device B/commit",
        "dir B/commit",
        "others' CPU",
        "CPU us/commit",
    ]);
    let na = || "n/a".to_owned();
    for r in &run.rows {
        table.add_row([
            engines::name(r.engine).to_owned(),
            r.threads.to_string(),
            format!("{:.0}", r.commits_per_sec()),
            format!("{:.0}", r.commits_per_sec_with_close()),
            run.ratio_to_tilldb(r)
                .map_or_else(|| "-".to_owned(), |x| format!("{x:.2}")),
            format!("{:.2}", run.ratio_to_raw(r)),
            micros(r.p50_us),
            micros(r.p99_us),
            r.device_flushes_per_sec()
                .map_or_else(na, |x| format!("{x:.0}")),
            r.commits_per_device_flush()
                .map_or_else(na, |x| format!("{x:.2}")),
            r.per_commit(r.counts.device_write_bytes)
                .map_or_else(na, |x| format!("{x:.0}")),
            r.dir_growth_per_commit()
                .map_or_else(na, |x| format!("{x:.0}")),
            r.counts
                .cpu
                .and_then(CpuTicks::others_share)
                .map_or_else(na, |x| format!("{:.0} %", x * 100.0)),
            r.cpu_us_per_commit().map_or_else(na, |x| format!("{x:.1}")),
        ]);
    }
    for i in 1..14 {
        if let Some(column) = table.column_mut(i) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table
}

/// The verdicts on the commit path's targets (issue 19), from this run's rows; a target
/// whose rows the run lacks is not printed.
fn print_targets(run: &PeersRun) {
    let tilldb_at = |threads: usize| {
        run.rows
            .iter()
            .find(|r| r.engine == Engine::Tilldb && r.threads == threads)
    };
    let (one, many) = (tilldb_at(1), tilldb_at(64));
    if one.is_none() && many.is_none() {
        return;
    }
    println!("\nTargets (tilldb, issue 19):");
    let verdict = |met: bool| if met { "met" } else { "NOT met" };
    if let Some(one) = one {
        let x = run.ratio_to_raw(one);
        println!(
            "  1 thread >= {ONE_THREAD_TARGET} x raw: {x:.2} x, {}",
            verdict(x >= ONE_THREAD_TARGET)
        );
        let faster: Vec<String> = run
            .rows
            .iter()
            .filter(|r| r.threads == 1 && !engines::is_tilldb(r.engine))
            .filter(|r| r.commits_per_sec() > one.commits_per_sec())
            .map(|r| {
                let x = run.ratio_to_tilldb(r).unwrap_or(0.0);
                format!("{} ({x:.2} x)", engines::name(r.engine))
            })
            .collect();
        if faster.is_empty() {
            println!("  1 thread >= every peer: met");
        } else {
            println!(
                "  1 thread >= every peer: NOT met, faster: {}",
                faster.join(", ")
            );
        }
        if let Some(encrypted) = run
            .rows
            .iter()
            .find(|r| r.engine == Engine::TilldbEncrypted && r.threads == 1)
        {
            let x = run.ratio_to_tilldb(encrypted).unwrap_or(0.0);
            println!(
                "  1 thread encrypted >= {ENCRYPTED_TARGET} x tilldb (issue 53): {x:.2} x, {}",
                verdict(x >= ENCRYPTED_TARGET)
            );
        }
        if let Some(growth) = one.dir_growth_per_commit() {
            println!(
                "  1 thread directory growth <= {GROWTH_TARGET} B/commit: {growth:.0} B, {}",
                verdict(growth <= GROWTH_TARGET)
            );
        }
    }
    let Some(many) = many else { return };
    let rocksdb = run
        .rows
        .iter()
        .find(|r| r.engine == Engine::Rocksdb && r.threads == 64);
    if let Some(rocksdb) = rocksdb.filter(|r| r.commits_per_sec() > 0.0) {
        let x = many.commits_per_sec() / rocksdb.commits_per_sec();
        println!(
            "  64 threads >= {ROCKSDB_TARGET} x RocksDB: {x:.2} x, {}",
            verdict(x >= ROCKSDB_TARGET)
        );
    }
    if let Some(one) = one.filter(|r| r.commits_per_sec() > 0.0) {
        let x = many.commits_per_sec() / one.commits_per_sec();
        println!(
            "  64 threads >= {SCALING_TARGET} x 1 thread: {x:.2} x, {}",
            verdict(x >= SCALING_TARGET)
        );
    }
    if let Some(cpu) = many.cpu_us_per_commit() {
        println!(
            "  64 threads CPU <= {CPU_TARGET_US} us/commit: {cpu:.1} us, {}",
            verdict(cpu <= CPU_TARGET_US)
        );
    }
}
