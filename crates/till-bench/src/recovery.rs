//! `till bench recovery`: how long recovery takes per MiB of log, after a crash.
//!
//! ```text
//!  DIR/recovery-PID-N/               fresh for this run, removed at the end (also on error)
//!   per size S in --log-mib, a fresh database in its own subdirectory:
//!     1. child process (this binary, hidden `--child log`): create the database with checkpoints
//!        off, commit transactions of random puts (Buffered) until S MiB of log are written,
//!        one last Sync commit with a marker key, then exit WITHOUT closing (no checkpoint):
//!        the database is left as a kill -9 leaves it
//!     2. parent: (--cold: drop the OS page cache), Db::open timed, with the database's own
//!        recovery report (log bytes and records replayed, page ops applied); the marker key
//!        must be there and every tree must check; close
//! ```
//!
//! JSON (stable): `{ value_bytes, puts_per_txn, cold, dir, fs_type, machine, disk
//! (`machine.rs`), results: [ { log_mib,
//! log_bytes, records, ops_applied, torn_pages_restored, open_seconds, seconds_per_mib,
//! mib_per_sec, commits_written } ] }`.

use super::bars::{self, Bar, BarChart};
use super::machine::{DiskJson, MachineJson, Setting};
use super::scratch::ScratchDir;
use super::store_load::{XorShift, key};
use clap::Args;
use comfy_table::{CellAlignment, Table, presets::UTF8_FULL_CONDENSED};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;
use tilldb::{Db, Durability, Options};

/// Largest log a run may ask for, in MiB.
const LOG_MIB_MAX: u64 = 16 << 10;
/// Random keys are drawn below this (so most puts insert, some update).
const KEY_SPACE: u64 = 10_000_000;
/// The key of the last commit, which must survive.
const MARKER: &[u8] = b"~recovery-marker";

#[derive(Args, Debug)]
pub struct RecoveryArgs {
    /// Log to replay per row, in MiB (written after the last checkpoint).
    #[arg(long, value_delimiter = ',', default_value = "8,32,128")]
    log_mib: Vec<u64>,
    /// Bytes per value.
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
    /// Puts per transaction.
    #[arg(long, default_value_t = 100)]
    puts_per_txn: u64,
    /// Drop the OS page cache before each recovery (needs root), so pages and log are read
    /// from the device, as after a power cut.
    #[arg(long)]
    pub(super) cold: bool,
    /// Directory for the scratch databases; each run uses and then removes a fresh
    /// subdirectory.
    #[arg(long, default_value = "tilldb-bench")]
    pub(super) dir: PathBuf,
    /// Print JSON (stable for scripts) instead of a table.
    #[arg(long)]
    pub(super) json: bool,
    /// Also draw the replay rate (MiB of log per second of open) per size into this file
    /// (SVG, or PNG when it ends in .png).
    #[arg(long, value_name = "FILE.svg|png", value_parser = crate::png::parse_plot_path)]
    pub(super) plot: Option<PathBuf>,
    /// Instead of --log-mib: run a hot-row load (Sync transfers between --hot-keys accounts
    /// from --threads threads, default options) for each of these many seconds, kill -9 it,
    /// and measure the log on disk and the time to recover (issue 21).
    #[arg(long, value_delimiter = ',', value_name = "SECONDS")]
    pub(super) hot_seconds: Vec<u64>,
    /// Accounts of the hot-row load.
    #[arg(long, default_value_t = 64)]
    pub(super) hot_keys: u64,
    /// Threads of the hot-row load.
    #[arg(long, default_value_t = 4)]
    pub(super) threads: usize,
    /// Torn-page guards of the hot-row load, one run each: auto, atomic, full-page-images,
    /// doublewrite, none.
    #[arg(long, value_delimiter = ',', default_value = "auto")]
    pub(super) torn_page_guard: Vec<tilldb::TornPageGuard>,
    /// Instead of --log-mib: per count N, a child commits one transaction of N rows (24-byte
    /// random keys, 150-byte values, Sync, default options: logged in parts) and is killed
    /// with SIGKILL once the commit returned, before its pages reach the data file; the time
    /// to recover it is measured (`recovery_large.rs`).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "ROWS",
        conflicts_with = "hot_seconds"
    )]
    pub(super) large_commit_rows: Vec<u64>,
    /// Rows committed into the table before the large commit, in a commit of their own, so
    /// that the large one puts row by row into a table that has rows (0: into an empty table,
    /// which a commit fills bottom up, leaf by leaf).
    #[arg(long, default_value_t = 1_000)]
    pub(super) large_commit_base_rows: u64,
    /// Internal: run as a child in --dir: `log` writes --log-mib (one size), `hot` runs the
    /// hot-row load under one --torn-page-guard until killed, `large` commits
    /// --large-commit-rows (one count) and waits to be killed.
    #[arg(long, hide = true, value_enum)]
    pub(super) child: Option<Child>,
}

/// The kinds of writing child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Child {
    Log,
    Hot,
    Large,
}

/// One size's recovery.
#[derive(Debug)]
struct Row {
    log_mib: u64,
    commits_written: u64,
    report: tilldb::RecoveryReport,
    open_seconds: f64,
}

impl Row {
    #[expect(clippy::cast_precision_loss, reason = "a rate")]
    fn mib(&self) -> f64 {
        self.report.log_bytes as f64 / f64::from(1u32 << 20)
    }

    fn seconds_per_mib(&self) -> Option<f64> {
        (self.report.log_bytes > 0).then(|| self.open_seconds / self.mib())
    }
}

/// Whether `args` ask for the hot-row load (`recovery_hot.rs`) rather than the log sizes.
pub fn is_hot(args: &RecoveryArgs) -> bool {
    args.child == Some(Child::Hot) || !args.hot_seconds.is_empty()
}

/// Whether `args` ask for the large commit (`recovery_large.rs`).
pub fn is_large(args: &RecoveryArgs) -> bool {
    args.child == Some(Child::Large) || !args.large_commit_rows.is_empty()
}

/// The log-size rows; `lib.rs` sends the hot-row load (`is_hot`) to `recovery_hot.rs` and the
/// large commit (`is_large`) to `recovery_large.rs`.
pub fn run(args: &RecoveryArgs) -> Result<(), Box<dyn std::error::Error>> {
    assert!(!is_hot(args), "the hot-row load is recovery_hot's");
    assert!(!is_large(args), "the large commit is recovery_large's");
    if args.child == Some(Child::Log) {
        let &[mib] = args.log_mib.as_slice() else {
            return Err("--child writes one --log-mib size".into());
        };
        return child(&args.dir, mib, args);
    }
    validate(args)?;
    let scratch = ScratchDir::for_run(&args.dir, "recovery")?;
    let setting = Setting::read(scratch.path())?;
    let bar = super::progress_bar(args.log_mib.len() as u64 * 2);
    let exe = std::env::current_exe()?;
    let mut rows = Vec::with_capacity(args.log_mib.len());
    for &mib in &args.log_mib {
        let dir = scratch.path().join(format!("log-{mib}"));
        bar.set_message(format!("writing {mib} MiB of log"));
        let commits_written = write_in_child(&exe, &dir, mib, args)?;
        bar.inc(1);
        bar.set_message(format!("recovering {mib} MiB"));
        if args.cold {
            crate::platform::drop_caches()?;
        }
        let start = Instant::now();
        let db = Db::open(&dir, Options::default())
            .map_err(|e| format!("recovery of {} failed: {e}", dir.display()))?;
        let open_seconds = start.elapsed().as_secs_f64();
        let report = db.recovery().clone();
        if db.get(MARKER)?.is_none() {
            return Err(format!(
                "the last Sync commit (key {:?}) is missing after recovery in {}",
                String::from_utf8_lossy(MARKER),
                dir.display()
            )
            .into());
        }
        db.check_tables()?;
        db.close()?;
        std::fs::remove_dir_all(&dir)
            .map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
        rows.push(Row {
            log_mib: mib,
            commits_written,
            report,
            open_seconds,
        });
        bar.inc(1);
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
        || json_of(args, &bench_dir, &setting, &rows),
        || print_text(args, &bench_dir, &setting, &rows),
    )
}

fn validate(args: &RecoveryArgs) -> Result<(), String> {
    if args.log_mib.is_empty() || args.log_mib.iter().any(|&m| m == 0 || m > LOG_MIB_MAX) {
        return Err(format!(
            "--log-mib needs sizes from 1 to {LOG_MIB_MAX}, not {:?}",
            args.log_mib
        ));
    }
    if args.value_bytes > 1 << 20 {
        return Err(format!(
            "--value-bytes {} is more than the {} supported",
            args.value_bytes,
            1 << 20
        ));
    }
    if !(1..=10_000).contains(&args.puts_per_txn) {
        return Err(format!(
            "--puts-per-txn must be from 1 to 10000, not {}",
            args.puts_per_txn
        ));
    }
    Ok(())
}

/// Runs the writing child for one size and returns the commits it made.
fn write_in_child(
    exe: &Path,
    dir: &Path,
    mib: u64,
    args: &RecoveryArgs,
) -> Result<u64, Box<dyn std::error::Error>> {
    let out = Command::new(exe)
        .args(["bench", "recovery", "--child", "log", "--dir"])
        .arg(dir)
        .arg("--log-mib")
        .arg(mib.to_string())
        .arg("--value-bytes")
        .arg(args.value_bytes.to_string())
        .arg("--puts-per-txn")
        .arg(args.puts_per_txn.to_string())
        .stdin(Stdio::null())
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "the writing child failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .parse()
        .map_err(|e| format!("the writing child printed {text:?}, not a count: {e}").into())
}

/// The options of the database the child writes: checkpoints only after far more log than
/// any row writes, so recovery replays all of it; commits through the tree (the write
/// buffer off), so that what it replays is page changes, as the rows have measured from the
/// first.
fn child_options() -> Options {
    Options {
        checkpoint_log_bytes: u64::MAX / 2,
        write_buffer_bytes: 0,
        ..Options::default()
    }
}

/// The child: write `mib` MiB of log, end with a Sync commit of the marker, and exit without
/// closing the database (as a kill -9 would), printing the number of commits.
fn child(dir: &Path, mib: u64, args: &RecoveryArgs) -> Result<(), Box<dyn std::error::Error>> {
    let db = Db::open(dir, child_options())?;
    let target = mib << 20;
    let value = vec![0x5A; args.value_bytes];
    let mut rng = XorShift::new(mib);
    let mut commits = 0u64;
    let start = db.stats().log.log_bytes;
    while db.stats().log.log_bytes - start < target {
        let mut txn = db.begin()?;
        for _ in 0..args.puts_per_txn {
            txn.put(key(rng.below(KEY_SPACE)).as_bytes(), &value)?;
        }
        txn.commit_with(Durability::Buffered)?;
        commits += 1;
    }
    let mut txn = db.begin()?;
    txn.put(MARKER, b"present")?;
    txn.commit_with(Durability::Sync)?;
    commits += 1;
    println!("{commits}");
    // No close, no drop: the log is durable up to the marker; the data file holds whatever the
    // background writer wrote. Exactly what a kill -9 right now would leave.
    std::process::exit(0);
}

/// The JSON document (see the module doc).
#[derive(Debug, Serialize)]
struct RecoveryJson {
    value_bytes: usize,
    puts_per_txn: u64,
    /// Whether the OS page cache was dropped before each recovery.
    cold: bool,
    dir: PathBuf,
    fs_type: Option<String>,
    machine: MachineJson,
    disk: DiskJson,
    results: Vec<RecoveryRowJson>,
}

/// One size of `results`: the database's recovery report and the time to open.
#[derive(Debug, Serialize)]
struct RecoveryRowJson {
    /// The size asked for.
    log_mib: u64,
    /// Log bytes redo read.
    log_bytes: u64,
    /// Commit records redo read.
    records: u64,
    ops_applied: u64,
    torn_pages_restored: usize,
    open_seconds: f64,
    /// Null when no log was replayed.
    seconds_per_mib: Option<f64>,
    /// Null when no log was replayed.
    mib_per_sec: Option<f64>,
    /// Commits the child wrote, the marker's included.
    commits_written: u64,
}

fn json_of(args: &RecoveryArgs, dir: &Path, setting: &Setting, rows: &[Row]) -> RecoveryJson {
    let results = rows
        .iter()
        .map(|r| RecoveryRowJson {
            log_mib: r.log_mib,
            log_bytes: r.report.log_bytes,
            records: r.report.records,
            ops_applied: r.report.ops_applied,
            torn_pages_restored: r.report.torn_pages_restored,
            open_seconds: r.open_seconds,
            seconds_per_mib: r.seconds_per_mib(),
            mib_per_sec: r.seconds_per_mib().map(|s| 1.0 / s),
            commits_written: r.commits_written,
        })
        .collect();
    RecoveryJson {
        value_bytes: args.value_bytes,
        puts_per_txn: args.puts_per_txn,
        cold: args.cold,
        dir: dir.to_owned(),
        fs_type: setting.facts.fs_type.clone(),
        machine: setting.machine_json(),
        disk: setting.disk_json(),
        results,
    }
}

/// The SVG: MiB of log replayed per second of open, per size.
fn plot(args: &RecoveryArgs, setting: &Setting, rows: &[Row]) -> String {
    let bars: Vec<Bar> = rows
        .iter()
        .map(|r| Bar {
            label: format!("{} MiB of log ({:.2} s)", r.log_mib, r.open_seconds),
            value: r.seconds_per_mib().map_or(0.0, |s| 1.0 / s),
            reference: None,
        })
        .collect();
    let subtitle = format!(
        "{} · transactions of {} puts of {} B · {} page cache",
        setting.short(),
        args.puts_per_txn,
        args.value_bytes,
        if args.cold { "cold" } else { "warm" }
    );
    bars::render(&BarChart {
        title: "Recovery after a crash: log replayed per second of open",
        subtitle: &subtitle,
        value_label: "MiB of log per second",
        reference_label: "",
        bars: &bars,
    })
}

fn print_text(args: &RecoveryArgs, dir: &Path, setting: &Setting, rows: &[Row]) {
    println!("Recovery after a crash: time to open against log to replay");
    let [machine, disk] = setting.rows();
    println!("  {:<14} {}", machine.0, machine.1);
    println!("  {:<14} {}", "dir", dir.display());
    println!("  {:<14} {}", disk.0, disk.1);
    println!(
        "  {:<14} transactions of {} random puts of {} B values (Buffered), then one Sync \
         commit; no checkpoint; the writer exits without closing",
        "workload", args.puts_per_txn, args.value_bytes
    );
    println!(
        "  {:<14} {}",
        "page cache",
        if args.cold {
            "dropped before each open (cold)"
        } else {
            "warm (what the writer left in the OS cache; --cold drops it)"
        }
    );
    println!();
    let mut table = Table::new();
    table.load_style(UTF8_FULL_CONDENSED);
    table.set_header([
        "log MiB",
        "records",
        "page ops applied",
        "open s",
        "s per MiB",
        "MiB/s",
    ]);
    for r in rows {
        let per = r.seconds_per_mib();
        table.add_row([
            format!("{:.1}", r.mib()),
            r.report.records.to_string(),
            r.report.ops_applied.to_string(),
            format!("{:.3}", r.open_seconds),
            per.map_or_else(|| "-".to_owned(), |s| format!("{s:.4}")),
            per.map_or_else(|| "-".to_owned(), |s| format!("{:.0}", 1.0 / s)),
        ]);
    }
    for i in 0..6 {
        if let Some(column) = table.column_mut(i) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    println!("{table}");
    println!(
        "open s is all of Db::open: torn-page restore, log scan, redo, and starting the threads."
    );
}
