//! `till bench recovery --hot-seconds S,...`: log on disk and recovery time after kill -9 of
//! a hot-row load that ran S seconds (issue 21: checkpoints must keep both bounded however
//! long the load runs).
//!
//! ```text
//!  DIR/recovery-PID-N/               fresh for this run, removed at the end (also on error)
//!   per guard G in --torn-page-guard, per S in --hot-seconds, a fresh database:
//!     1. child process (this binary, hidden `--child hot`): default options with guard G,
//!        --hot-keys accounts of ACCOUNT_START each, --threads threads each committing
//!        transfers (read two accounts, move an amount, put both; Sync) for ever; every
//!        REPORT_EVERY it prints one line "commits log_bytes backpressure_waits"
//!     2. parent: after S seconds, SIGKILL the child (no close, no checkpoint: a kill -9);
//!        measure the log directory (files and bytes), time Db::open (its recovery report:
//!        log bytes and records replayed), then check every tree and that the accounts still
//!        sum to hot_keys x ACCOUNT_START (every transfer all or nothing); close
//! ```
//!
//! The bound the engine keeps (`Options::checkpoint_log_bytes`): the log to replay stays
//! below `BACKPRESSURE_CHECKPOINTS` (2) checkpoint distances plus the commits in flight, so
//! recovery time stays flat in the load's duration; on disk the directory also holds the
//! segment being written and the free segments kept for reuse.
//!
//! JSON (stable): `{ hot_keys, threads, checkpoint_log_bytes, segment_bytes, dir, fs_type,
//! machine, disk, results: [ { guard, seconds, commits, commits_per_sec, backpressure_waits,
//! log_dir_bytes, log_files, replay_bytes, records, open_seconds } ] }`.

use super::bars::{self, Bar, BarChart};
use super::machine::{DiskJson, MachineJson, Setting};
use super::scratch::ScratchDir;
use serde::Serialize;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tilldb::TornPageGuard;
use tilldb::{Db, Options};

use super::recovery::RecoveryArgs;

/// Every account's balance at the start.
const ACCOUNT_START: u64 = 1_000_000;
/// How often the child reports its counts.
const REPORT_EVERY: Duration = Duration::from_millis(250);
/// Longest load a row may ask for, in seconds (a day).
const HOT_SECONDS_MAX: u64 = 86_400;

/// One (guard, seconds) row.
#[derive(Debug)]
struct Row {
    guard: TornPageGuard,
    seconds: u64,
    /// The child's last report before the kill.
    commits: u64,
    backpressure_waits: u64,
    /// Seconds the load ran until that report.
    load_seconds: f64,
    log_dir_bytes: u64,
    log_files: usize,
    report: tilldb::RecoveryReport,
    open_seconds: f64,
}

impl Row {
    #[expect(clippy::cast_precision_loss, reason = "a rate")]
    fn commits_per_sec(&self) -> f64 {
        if self.load_seconds > 0.0 {
            self.commits as f64 / self.load_seconds
        } else {
            0.0
        }
    }
}

/// Commits through the tree (the write buffer off): the pages a crash leaves are the guard's.
fn options(guard: TornPageGuard) -> Options {
    Options {
        torn_page_guard: guard,
        write_buffer_bytes: 0,
        ..Options::default()
    }
}

fn account(i: u64) -> Vec<u8> {
    format!("account-{i:06}").into_bytes()
}

fn balance(value: &[u8]) -> Result<u64, String> {
    let bytes: [u8; 8] = value
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| format!("an account value of {} bytes, not 8 or more", value.len()))?;
    Ok(u64::from_le_bytes(bytes))
}

/// A balance, padded to a row of about 100 bytes like the other benchmarks' values.
fn encode(balance: u64) -> Vec<u8> {
    let mut value = balance.to_le_bytes().to_vec();
    value.resize(100, 0x5A);
    value
}

pub fn validate(args: &RecoveryArgs) -> Result<(), String> {
    if args
        .hot_seconds
        .iter()
        .any(|&s| s == 0 || s > HOT_SECONDS_MAX)
    {
        return Err(format!(
            "--hot-seconds needs durations from 1 to {HOT_SECONDS_MAX} s, not {:?}",
            args.hot_seconds
        ));
    }
    if !(2..=1_000_000).contains(&args.hot_keys) {
        return Err(format!(
            "--hot-keys must be from 2 to 1000000, not {}",
            args.hot_keys
        ));
    }
    if !(1..=super::THREADS_MAX).contains(&args.threads) {
        return Err(format!(
            "--threads must be from 1 to {}, not {}",
            super::THREADS_MAX,
            args.threads
        ));
    }
    if args.torn_page_guard.is_empty() {
        return Err("--torn-page-guard needs at least one guard".to_owned());
    }
    Ok(())
}

pub fn run(args: &RecoveryArgs) -> Result<(), Box<dyn std::error::Error>> {
    if args.child == Some(super::recovery::Child::Hot) {
        let &[guard] = args.torn_page_guard.as_slice() else {
            return Err("--child hot runs one --torn-page-guard".into());
        };
        return child(&args.dir, guard, args);
    }
    validate(args)?;
    let scratch = ScratchDir::for_run(&args.dir, "recovery")?;
    let setting = Setting::read(scratch.path())?;
    let rows_wanted = (args.torn_page_guard.len() * args.hot_seconds.len()) as u64;
    let bar = super::progress_bar(rows_wanted);
    let exe = std::env::current_exe()?;
    let mut rows = Vec::new();
    for &guard in &args.torn_page_guard {
        for &seconds in &args.hot_seconds {
            let dir = scratch.path().join(format!("hot-{guard}-{seconds}"));
            bar.set_message(format!("{guard}: {seconds} s of hot rows, then kill -9"));
            let row = one_row(&exe, &dir, guard, seconds, args)?;
            bar.inc(1);
            std::fs::remove_dir_all(&dir)
                .map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
            rows.push(row);
        }
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

/// Runs the load in a child for `seconds`, kills it, measures the log and times recovery.
fn one_row(
    exe: &Path,
    dir: &Path,
    guard: TornPageGuard,
    seconds: u64,
    args: &RecoveryArgs,
) -> Result<Row, Box<dyn std::error::Error>> {
    let mut child = Command::new(exe)
        .args(["bench", "recovery", "--child", "hot", "--dir"])
        .arg(dir)
        .arg("--torn-page-guard")
        .arg(guard.to_string())
        .arg("--hot-keys")
        .arg(args.hot_keys.to_string())
        .arg("--threads")
        .arg(args.threads.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let stdout = child.stdout.take().expect("piped");
    // The reader keeps the child's last report; the first line says the load began.
    let last = Arc::new(std::sync::Mutex::new(None::<(u64, u64, u64, f64)>));
    let (began_tx, began_rx) = std::sync::mpsc::channel();
    let reader = {
        let last = Arc::clone(&last);
        std::thread::spawn(move || {
            let mut began = None;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let at = *began.get_or_insert_with(|| {
                    let _ = began_tx.send(());
                    Instant::now()
                });
                let n: Vec<u64> = line
                    .split_whitespace()
                    .filter_map(|w| w.parse().ok())
                    .collect();
                if let &[commits, log_bytes, waits] = n.as_slice() {
                    *last.lock().expect("the reader does not panic") =
                        Some((commits, log_bytes, waits, at.elapsed().as_secs_f64()));
                }
            }
        })
    };
    // The load's clock starts once the child has its database open and reports.
    if began_rx.recv_timeout(Duration::from_mins(1)).is_err() {
        let _ = child.kill();
        let out = child.wait_with_output()?;
        return Err(format!(
            "the hot-row child did not start ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(seconds) {
        if let Some(status) = child.try_wait()? {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            return Err(format!("the hot-row child ended early ({status}): {}", err.trim()).into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // SIGKILL: no close, no checkpoint, no flush of anything not yet flushed.
    child.kill()?;
    child.wait()?;
    reader.join().map_err(|_| "the report reader panicked")?;
    let (commits, _, backpressure_waits, load_seconds) =
        (*last.lock().expect("the reader ended")).ok_or("the hot-row child reported nothing")?;
    let (log_dir_bytes, log_files) = log_dir_size(&dir.join("wal"))?;
    let started = Instant::now();
    let db = Db::open(dir, options(TornPageGuard::Auto))
        .map_err(|e| format!("recovery of {} failed: {e}", dir.display()))?;
    let open_seconds = started.elapsed().as_secs_f64();
    let report = db.recovery().clone();
    db.check_tables()?;
    let total = accounts_total(&db, args.hot_keys)?;
    if total != args.hot_keys * ACCOUNT_START {
        return Err(format!(
            "after recovery in {} the accounts sum to {total}, not {}: a transfer was torn",
            dir.display(),
            args.hot_keys * ACCOUNT_START
        )
        .into());
    }
    db.close()?;
    Ok(Row {
        guard,
        seconds,
        commits,
        backpressure_waits,
        load_seconds,
        log_dir_bytes,
        log_files,
        report,
        open_seconds,
    })
}

/// Bytes and files in the log directory.
fn log_dir_size(wal: &Path) -> Result<(u64, usize), String> {
    let entries =
        std::fs::read_dir(wal).map_err(|e| format!("cannot list {}: {e}", wal.display()))?;
    let (mut bytes, mut files) = (0, 0);
    for entry in entries {
        let meta = entry
            .and_then(|e| e.metadata())
            .map_err(|e| format!("cannot read an entry of {}: {e}", wal.display()))?;
        if meta.is_file() {
            bytes += meta.len();
            files += 1;
        }
    }
    Ok((bytes, files))
}

fn accounts_total(db: &Db, keys: u64) -> Result<u64, String> {
    let mut total = 0u64;
    for i in 0..keys {
        let value = db
            .get(&account(i))
            .map_err(|e| format!("read of account {i}: {e}"))?
            .ok_or_else(|| format!("account {i} is missing after recovery"))?;
        total += balance(&value)?;
    }
    Ok(total)
}

/// The child: create the accounts, then transfer between them from every thread until
/// killed, reporting counts on stdout.
fn child(
    dir: &Path,
    guard: TornPageGuard,
    args: &RecoveryArgs,
) -> Result<(), Box<dyn std::error::Error>> {
    let db = Db::open(dir, options(guard))?;
    let mut txn = db.begin()?;
    for i in 0..args.hot_keys {
        txn.put(&account(i), &encode(ACCOUNT_START))?;
    }
    txn.commit()?;
    let commits = Arc::new(AtomicU64::new(0));
    for t in 0..args.threads {
        let (db, commits, keys) = (db.clone(), Arc::clone(&commits), args.hot_keys);
        std::thread::spawn(move || {
            let mut rng = super::store_load::XorShift::new(t as u64 + 1);
            loop {
                if let Err(e) = transfer(&db, &mut rng, keys) {
                    eprintln!("transfer failed: {e}");
                    std::process::exit(1);
                }
                commits.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    let mut out = std::io::stdout().lock();
    loop {
        let log_bytes = db.stats().log.log_bytes;
        writeln!(
            out,
            "{} {log_bytes} {}",
            commits.load(Ordering::Relaxed),
            db.stats().backpressure_waits
        )?;
        out.flush()?;
        std::thread::sleep(REPORT_EVERY);
    }
}

/// One transfer: move a small amount between two different accounts, all or nothing.
fn transfer(db: &Db, rng: &mut super::store_load::XorShift, keys: u64) -> tilldb::Result<()> {
    let from = rng.below(keys);
    let to = (from + 1 + rng.below(keys - 1)) % keys;
    let mut txn = db.begin()?;
    let read = |txn: &mut tilldb::Txn, i: u64| -> tilldb::Result<u64> {
        let value = txn.get(&account(i))?.expect("accounts are never deleted");
        Ok(u64::from_le_bytes(value[..8].try_into().expect("8 bytes")))
    };
    let (a, b) = (read(&mut txn, from)?, read(&mut txn, to)?);
    let amount = rng.below(100).min(a);
    txn.put(&account(from), &encode(a - amount))?;
    txn.put(&account(to), &encode(b + amount))?;
    txn.commit()
}

/// The JSON document (see the module doc).
#[derive(Debug, Serialize)]
struct HotJson {
    hot_keys: u64,
    threads: usize,
    /// The default `Options::checkpoint_log_bytes` every row ran with.
    checkpoint_log_bytes: u64,
    /// The default log segment size.
    segment_bytes: u64,
    dir: PathBuf,
    fs_type: Option<String>,
    machine: MachineJson,
    disk: DiskJson,
    results: Vec<HotRowJson>,
}

/// One (guard, seconds) row of `results`.
#[derive(Debug, Serialize)]
struct HotRowJson {
    guard: &'static str,
    /// The load's duration asked for.
    seconds: u64,
    /// Commits in the child's last report before the kill.
    commits: u64,
    commits_per_sec: f64,
    backpressure_waits: u64,
    /// Summed file lengths in the log directory (`wal/`) after the kill.
    log_dir_bytes: u64,
    /// Files in it.
    log_files: usize,
    /// Log bytes recovery replayed.
    replay_bytes: u64,
    /// Commit records recovery read.
    records: u64,
    /// Seconds `Db::open` took (the recovery).
    open_seconds: f64,
}

fn json_of(args: &RecoveryArgs, dir: &Path, setting: &Setting, rows: &[Row]) -> HotJson {
    let defaults = Options::default();
    let results = rows
        .iter()
        .map(|r| HotRowJson {
            guard: r.guard.name(),
            seconds: r.seconds,
            commits: r.commits,
            commits_per_sec: r.commits_per_sec(),
            backpressure_waits: r.backpressure_waits,
            log_dir_bytes: r.log_dir_bytes,
            log_files: r.log_files,
            replay_bytes: r.report.log_bytes,
            records: r.report.records,
            open_seconds: r.open_seconds,
        })
        .collect();
    HotJson {
        hot_keys: args.hot_keys,
        threads: args.threads,
        checkpoint_log_bytes: defaults.checkpoint_log_bytes,
        segment_bytes: defaults.wal.segment_bytes,
        dir: dir.to_owned(),
        fs_type: setting.facts.fs_type.clone(),
        machine: setting.machine_json(),
        disk: setting.disk_json(),
        results,
    }
}

/// The SVG: seconds to recover per row.
fn plot(args: &RecoveryArgs, setting: &Setting, rows: &[Row]) -> String {
    let bars: Vec<Bar> = rows
        .iter()
        .map(|r| Bar {
            label: format!(
                "{} after {} s ({} MiB replayed)",
                r.guard,
                r.seconds,
                r.report.log_bytes >> 20
            ),
            value: r.open_seconds,
            reference: None,
        })
        .collect();
    let subtitle = format!(
        "{} · {} hot accounts, {} threads of Sync transfers, default options",
        setting.short(),
        args.hot_keys,
        args.threads
    );
    bars::render(&BarChart {
        title: "Recovery after kill -9 of a hot-row load: flat in the load's duration",
        subtitle: &subtitle,
        value_label: "seconds to open (recovery)",
        reference_label: "",
        bars: &bars,
    })
}

#[expect(clippy::cast_precision_loss, reason = "MiB for display")]
fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1u32 << 20)
}

fn print_text(args: &RecoveryArgs, dir: &Path, setting: &Setting, rows: &[Row]) {
    let defaults = Options::default();
    println!("Recovery after kill -9 of a hot-row load, against how long the load ran");
    let [machine, disk] = setting.rows();
    println!("  {:<14} {}", machine.0, machine.1);
    println!("  {:<14} {}", "dir", dir.display());
    println!("  {:<14} {}", disk.0, disk.1);
    println!(
        "  {:<14} {} accounts, {} threads of Sync transfers (read two, put two), default \
         options: a checkpoint every {} MiB of log, {} MiB segments",
        "workload",
        args.hot_keys,
        args.threads,
        defaults.checkpoint_log_bytes >> 20,
        defaults.wal.segment_bytes >> 20
    );
    println!(
        "  {:<14} log to replay <= 2 x {} MiB plus the commits in flight (backpressure)",
        "bound",
        defaults.checkpoint_log_bytes >> 20
    );
    println!();
    let mut table = comfy_table::Table::new();
    table.load_style(comfy_table::presets::UTF8_FULL_CONDENSED);
    table.set_header([
        "guard",
        "load s",
        "commits/s",
        "waits",
        "log dir MiB",
        "files",
        "replayed MiB",
        "records",
        "open s",
    ]);
    for r in rows {
        table.add_row([
            r.guard.to_string(),
            r.seconds.to_string(),
            format!("{:.0}", r.commits_per_sec()),
            r.backpressure_waits.to_string(),
            format!("{:.0}", mib(r.log_dir_bytes)),
            r.log_files.to_string(),
            format!("{:.1}", mib(r.report.log_bytes)),
            r.report.records.to_string(),
            format!("{:.3}", r.open_seconds),
        ]);
    }
    for i in 1..9 {
        if let Some(column) = table.column_mut(i) {
            column.set_cell_alignment(comfy_table::CellAlignment::Right);
        }
    }
    println!("{table}");
    println!(
        "waits: commits that waited for a checkpoint behind (backpressure). The accounts' sum \
         was checked after every recovery (no transfer torn)."
    );
}
