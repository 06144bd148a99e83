//! `till bench recovery --large-commit-rows N,...`: the time to open after a kill -9 that
//! caught one large commit (a price list of N rows, logged in parts) acknowledged but with
//! none of its pages in the data file yet: the worst case of a commit in parts, whose whole
//! log recovery replays.
//!
//! ```text
//!  DIR/recovery-PID-N/               fresh for this run, removed at the end (also on error)
//!   per N in --large-commit-rows, a fresh database:
//!     1. child process (this binary, hidden `--child large`): Options::default(), the write
//!        buffer off; a commit
//!        of --large-commit-base-rows B rows (default 1,000; Sync), then one transaction of N
//!        puts into table `prices` (24-byte random keys, 150-byte values), committed Sync:
//!        into a table with rows, it puts row by row (into an empty one, B = 0, a commit
//!        builds the leaves whole); then it prints "COMMITTED <seconds>" and sleeps
//!     2. parent: on reading that line, SIGKILL the child (the commit acknowledged, its pages
//!        still in the child's cache and spill file: no checkpoint has written them back);
//!        (--cold: drop the OS page cache), time Db::open, keep its recovery report (log
//!        bytes, records and parts replayed, page ops applied, the time to the end of redo);
//!        then scan `prices`: every row (B + N) must be there, each under its own key; close
//! ```
//!
//! JSON (stable): `{ key_bytes, value_bytes, base_rows, cold, dir, fs_type, machine, disk (`machine.rs`),
//! results: [ { rows, commit_seconds, log_bytes, records, parts_skipped, ops_applied,
//! pages_rebuilt, torn_pages_restored, redo_seconds, open_seconds, mib_per_sec, rows_found } ] }`.
//! `redo_seconds` is the database's own `RecoveryReport::elapsed` (from the start of the open to
//! the end of redo); `open_seconds` all of `Db::open`, the checkpoint after recovery included.

use super::bars::{self, Bar, BarChart};
use super::machine::{DiskJson, MachineJson, Setting};
use super::recovery::{Child, RecoveryArgs};
use super::scratch::ScratchDir;
use comfy_table::{CellAlignment, Table, presets::UTF8_FULL_CONDENSED};
use serde::Serialize;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tilldb::{Db, Direction, Durability, Options};

/// The table the rows go to.
const TABLE: &str = "prices";
/// Bytes per key: random, like the issue's price list.
const KEY_BYTES: usize = 24;
/// Bytes per value; the first 8 hold the row's number.
const VALUE_BYTES: usize = 150;
/// Most rows a commit may ask for.
const ROWS_MAX: u64 = 100_000_000;
/// What the child prints once the commit returned.
const COMMITTED: &str = "COMMITTED";
/// How long the parent waits for the commit (a slow disk, a large N).
const COMMIT_WAIT_MAX: Duration = Duration::from_hours(2);

/// One N's recovery.
#[derive(Debug)]
struct Row {
    rows: u64,
    commit_seconds: f64,
    report: tilldb::RecoveryReport,
    open_seconds: f64,
    rows_found: u64,
}

impl Row {
    #[expect(clippy::cast_precision_loss, reason = "a rate")]
    fn mib(&self) -> f64 {
        self.report.log_bytes as f64 / f64::from(1u32 << 20)
    }

    fn mib_per_sec(&self) -> Option<f64> {
        (self.report.log_bytes > 0 && self.open_seconds > 0.0)
            .then(|| self.mib() / self.open_seconds)
    }
}

/// splitmix64: a well-mixed word from a counter, so keys look random yet each row's key
/// follows from its number (the parent checks every row without keeping the keys).
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Row `i`'s 24 random-looking bytes.
fn key(i: u64) -> [u8; KEY_BYTES] {
    let mut key = [0u8; KEY_BYTES];
    for (w, chunk) in key.chunks_exact_mut(8).enumerate() {
        chunk.copy_from_slice(&mix(i * 3 + w as u64).to_le_bytes());
    }
    key
}

/// Row `i`'s value: its number, then filler.
fn value(i: u64) -> [u8; VALUE_BYTES] {
    let mut value = [0x5A; VALUE_BYTES];
    value[..8].copy_from_slice(&i.to_le_bytes());
    value
}

pub fn validate(args: &RecoveryArgs) -> Result<(), String> {
    if args
        .large_commit_rows
        .iter()
        .any(|&n| n == 0 || n > ROWS_MAX)
    {
        return Err(format!(
            "--large-commit-rows needs counts from 1 to {ROWS_MAX}, not {:?}",
            args.large_commit_rows
        ));
    }
    Ok(())
}

pub fn run(args: &RecoveryArgs) -> Result<(), Box<dyn std::error::Error>> {
    if args.child == Some(Child::Large) {
        let &[rows] = args.large_commit_rows.as_slice() else {
            return Err("--child large commits one --large-commit-rows count".into());
        };
        return child(&args.dir, args.large_commit_base_rows, rows);
    }
    validate(args)?;
    let scratch = ScratchDir::for_run(&args.dir, "recovery")?;
    let setting = Setting::read(scratch.path())?;
    let bar = super::progress_bar(args.large_commit_rows.len() as u64 * 2);
    let exe = std::env::current_exe()?;
    let mut rows = Vec::with_capacity(args.large_commit_rows.len());
    for &n in &args.large_commit_rows {
        let dir = scratch.path().join(format!("large-{n}"));
        bar.set_message(format!(
            "committing {n} rows in one transaction, then kill -9"
        ));
        let commit_seconds = commit_in_child(&exe, &dir, n, args.large_commit_base_rows)?;
        bar.inc(1);
        bar.set_message(format!("recovering the commit of {n} rows"));
        if args.cold {
            crate::platform::drop_caches()?;
        }
        let started = Instant::now();
        let db = Db::open(&dir, Options::default())
            .map_err(|e| format!("recovery of {} failed: {e}", dir.display()))?;
        let open_seconds = started.elapsed().as_secs_f64();
        let report = db.recovery().clone();
        let rows_found = check_rows(&db, args.large_commit_base_rows + n)
            .map_err(|e| format!("after recovery in {}: {e}", dir.display()))?;
        db.close()?;
        std::fs::remove_dir_all(&dir)
            .map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
        rows.push(Row {
            rows: n,
            commit_seconds,
            report,
            open_seconds,
            rows_found,
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
        || plot(&setting, &rows),
        || json_of(args, &bench_dir, &setting, &rows),
        || print_text(args, &bench_dir, &setting, &rows),
    )
}

/// Runs the committing child for `rows` and kills it (SIGKILL) as soon as it says the commit
/// returned; returns the commit's seconds as the child measured them.
fn commit_in_child(
    exe: &Path,
    dir: &Path,
    rows: u64,
    base_rows: u64,
) -> Result<f64, Box<dyn std::error::Error>> {
    let mut child = Command::new(exe)
        .args(["bench", "recovery", "--child", "large", "--dir"])
        .arg(dir)
        .arg("--large-commit-rows")
        .arg(rows.to_string())
        .arg("--large-commit-base-rows")
        .arg(base_rows.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.starts_with(COMMITTED) {
                let _ = tx.send(line);
            }
        }
    });
    let line = rx.recv_timeout(COMMIT_WAIT_MAX);
    // SIGKILL at once: no close, no checkpoint; the pages of the commit reach the data file
    // only through recovery.
    let _ = child.kill();
    let status = child.wait()?;
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    reader.join().map_err(|_| "the child's reader panicked")?;
    let Ok(line) = line else {
        return Err(format!(
            "the committing child never said its commit returned ({status}): {}",
            err.trim()
        )
        .into());
    };
    line.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("the committing child printed {line:?}").into())
}

/// The child: a commit of `base_rows` rows (none when 0), then one transaction of `rows`
/// puts, committed Sync; says so; waits to be killed. The write buffer off: the base's
/// commit goes through the tree, as the row has measured from the first.
fn child(dir: &Path, base_rows: u64, rows: u64) -> Result<(), Box<dyn std::error::Error>> {
    let options = Options {
        write_buffer_bytes: 0,
        ..Options::default()
    };
    let db = Db::open(dir, options)?;
    if base_rows > 0 {
        let mut txn = db.begin()?;
        for i in 0..base_rows {
            txn.put_in(TABLE, &key(i), &value(i))?;
        }
        txn.commit_with(Durability::Sync)?;
    }
    let started = Instant::now();
    let mut txn = db.begin()?;
    for i in base_rows..base_rows + rows {
        txn.put_in(TABLE, &key(i), &value(i))?;
    }
    txn.commit_with(Durability::Sync)?;
    let seconds = started.elapsed().as_secs_f64();
    let mut out = std::io::stdout().lock();
    writeln!(out, "{COMMITTED} {seconds}")?;
    out.flush()?;
    drop(out);
    // Killed here; the handle is never closed.
    loop {
        std::thread::sleep(Duration::from_mins(1));
    }
}

/// Scans the table: every row `0..rows` (the base's and the large commit's) once, each under its own key. Returns the rows found.
fn check_rows(db: &Db, rows: u64) -> Result<u64, String> {
    let mut seen = vec![false; usize::try_from(rows).map_err(|e| e.to_string())?];
    let mut found = 0u64;
    let entries = db
        .range_in(
            TABLE,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            Direction::Forward,
        )
        .map_err(|e| format!("scan of {TABLE}: {e}"))?;
    for entry in entries {
        let (k, v) = entry.map_err(|e| format!("scan of {TABLE}: {e}"))?;
        let number: [u8; 8] = v
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| format!("a value of {} bytes", v.len()))?;
        let i = u64::from_le_bytes(number);
        let slot = usize::try_from(i)
            .ok()
            .and_then(|i| seen.get_mut(i))
            .ok_or_else(|| format!("a row numbered {i}, past the {rows} committed"))?;
        if *slot || k != key(i) || v != value(i) {
            return Err(format!("row {i} twice, or not under its key and value"));
        }
        *slot = true;
        found += 1;
    }
    if found != rows {
        return Err(format!(
            "{found} rows of the {rows} acknowledged: a commit was not recovered whole"
        ));
    }
    Ok(found)
}

/// The JSON document (see the module doc).
#[derive(Debug, Serialize)]
struct LargeJson {
    key_bytes: usize,
    value_bytes: usize,
    /// Rows committed before the large commit.
    base_rows: u64,
    /// Whether the OS page cache was dropped before each recovery.
    cold: bool,
    dir: PathBuf,
    fs_type: Option<String>,
    machine: MachineJson,
    disk: DiskJson,
    results: Vec<LargeRowJson>,
}

/// One N of `results`.
#[derive(Debug, Serialize)]
struct LargeRowJson {
    /// Rows of the commit.
    rows: u64,
    /// Seconds the child's commit took (its puts included).
    commit_seconds: f64,
    /// Log bytes redo read.
    log_bytes: u64,
    /// Commit records redo applied (each part counts).
    records: u64,
    /// Records of unfinished commits skipped.
    parts_skipped: u64,
    ops_applied: u64,
    pages_rebuilt: u64,
    torn_pages_restored: usize,
    /// From the start of the open to the end of redo.
    redo_seconds: f64,
    /// All of `Db::open`.
    open_seconds: f64,
    /// Log MiB per second of open; null when no log was replayed.
    mib_per_sec: Option<f64>,
    /// Rows the scan after recovery found: the base's and the commit's (all of them, or the
    /// run fails).
    rows_found: u64,
}

fn json_of(args: &RecoveryArgs, dir: &Path, setting: &Setting, rows: &[Row]) -> LargeJson {
    let results = rows
        .iter()
        .map(|r| LargeRowJson {
            rows: r.rows,
            commit_seconds: r.commit_seconds,
            log_bytes: r.report.log_bytes,
            records: r.report.records,
            parts_skipped: r.report.parts_skipped,
            ops_applied: r.report.ops_applied,
            pages_rebuilt: r.report.pages_rebuilt,
            torn_pages_restored: r.report.torn_pages_restored,
            redo_seconds: r.report.elapsed.as_secs_f64(),
            open_seconds: r.open_seconds,
            mib_per_sec: r.mib_per_sec(),
            rows_found: r.rows_found,
        })
        .collect();
    LargeJson {
        key_bytes: KEY_BYTES,
        value_bytes: VALUE_BYTES,
        base_rows: args.large_commit_base_rows,
        cold: args.cold,
        dir: dir.to_owned(),
        fs_type: setting.facts.fs_type.clone(),
        machine: setting.machine_json(),
        disk: setting.disk_json(),
        results,
    }
}

/// The SVG: seconds to open per N.
fn plot(setting: &Setting, rows: &[Row]) -> String {
    let bars: Vec<Bar> = rows
        .iter()
        .map(|r| Bar {
            label: format!("{} rows ({:.0} MiB of log)", r.rows, r.mib()),
            value: r.open_seconds,
            reference: None,
        })
        .collect();
    let subtitle = format!(
        "{} · one Sync commit of {KEY_BYTES} B keys and {VALUE_BYTES} B values, kill -9 \
         once it returned, default options",
        setting.short()
    );
    bars::render(&BarChart {
        title: "Recovery after kill -9 right after a large commit",
        subtitle: &subtitle,
        value_label: "seconds to open (recovery)",
        reference_label: "",
        bars: &bars,
    })
}

fn print_text(args: &RecoveryArgs, dir: &Path, setting: &Setting, rows: &[Row]) {
    println!("Recovery after kill -9 right after one large commit");
    let [machine, disk] = setting.rows();
    println!("  {:<14} {}", machine.0, machine.1);
    println!("  {:<14} {}", "dir", dir.display());
    println!("  {:<14} {}", disk.0, disk.1);
    println!(
        "  {:<14} a commit of {} rows, then one transaction of N random {KEY_BYTES} B keys \
         with {VALUE_BYTES} B values, committed Sync (default options: logged in parts), \
         SIGKILL once it returned",
        "workload", args.large_commit_base_rows
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
        "rows",
        "commit s",
        "log MiB",
        "records",
        "page ops applied",
        "redo s",
        "open s",
        "MiB/s",
    ]);
    for r in rows {
        table.add_row([
            r.rows.to_string(),
            format!("{:.2}", r.commit_seconds),
            format!("{:.1}", r.mib()),
            r.report.records.to_string(),
            r.report.ops_applied.to_string(),
            format!("{:.3}", r.report.elapsed.as_secs_f64()),
            format!("{:.3}", r.open_seconds),
            r.mib_per_sec()
                .map_or_else(|| "-".to_owned(), |m| format!("{m:.0}")),
        ]);
    }
    for i in 0..8 {
        if let Some(column) = table.column_mut(i) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    println!("{table}");
    println!(
        "redo s: from the start of Db::open to the end of redo; open s: all of it, the \
         checkpoint after recovery included. Every row was found after each recovery."
    );
}
