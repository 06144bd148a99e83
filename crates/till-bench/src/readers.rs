//! `till bench readers`: what a read-only handle costs the writer. One fresh default database
//! (`Options::default()`, its flush method probed) with `--rows` rows; then, `--rounds` times,
//! the writer commits one-row `Sync` transactions from `--threads` threads for `--seconds`
//! alone, and again as long with a read-only handle (`Db::open_read_only`, in a thread of
//! this process: its locks are the operating system's, taken as another process's would be)
//! that refreshes every `--refresh-ms` and reads a key and the table's length at each
//! snapshot. Alone and with the reader alternate, so a drift of the shared disk hits both.
//!
//! JSON (`ReadersJson`): `{ rows, threads, seconds, refresh_ms, flush_method, rounds: [ {
//! alone_commits_per_s, with_reader_commits_per_s, ratio, refreshes, refresh_ms_mean } ],
//! ratio_median }`.

use super::scratch::ScratchDir;
use clap::Args;
use comfy_table::Table;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tilldb::{Db, Durability, Options};

#[derive(Args, Debug)]
pub struct ReadersArgs {
    /// Rows in the database before the rounds.
    #[arg(long, default_value_t = 10_000)]
    rows: u32,
    /// Committing threads of the writer.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Seconds of each half of a round.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Rounds (alone, then with the reader).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// How often the reader refreshes, ms.
    #[arg(long, default_value_t = 10)]
    refresh_ms: u64,
    /// The database's flush method [default: probed when it is created, as
    /// `Options::default()` does].
    #[arg(long)]
    flush_method: Option<tilldb::FlushMethod>,
    /// Where the database is made (a fresh subdirectory, removed at the end).
    #[arg(long, default_value = "tilldb-bench")]
    dir: PathBuf,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// The JSON document (`--json`).
#[derive(Debug, Serialize)]
struct ReadersJson {
    rows: u32,
    threads: usize,
    seconds: f64,
    refresh_ms: u64,
    flush_method: String,
    rounds: Vec<RoundJson>,
    /// The median of the rounds' ratios.
    ratio_median: f64,
}

/// One round.
#[derive(Debug, Serialize)]
struct RoundJson {
    alone_commits_per_s: f64,
    with_reader_commits_per_s: f64,
    /// With the reader over alone.
    ratio: f64,
    /// Refreshes the reader made.
    refreshes: u64,
    /// The mean time of one refresh (a new snapshot: a redo from the last checkpoint).
    refresh_ms_mean: f64,
}

fn key(i: u64) -> [u8; 16] {
    let mut k = *b"row-000000000000";
    let digits = format!("{:012}", i % 1_000_000_000_000);
    k[4..].copy_from_slice(digits.as_bytes());
    k
}

/// Commits one-row `Sync` transactions from `threads` threads for `seconds`; commits/s.
fn commit_for(db: &Db, threads: usize, seconds: f64, rows: u32) -> Result<f64, String> {
    let next = AtomicU64::new(0);
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(seconds);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| -> Result<u64, String> {
                    let mut done = 0;
                    while Instant::now() < deadline {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let mut txn = db.begin().map_err(|e| e.to_string())?;
                        txn.put(&key(i % u64::from(rows.max(1))), &i.to_le_bytes())
                            .map_err(|e| e.to_string())?;
                        txn.commit_with(Durability::Sync)
                            .map_err(|e| e.to_string())?;
                        done += 1;
                    }
                    Ok(done)
                })
            })
            .collect();
        let mut total = 0;
        for worker in workers {
            total += worker.join().map_err(|_| "a writer thread panicked")??;
        }
        #[expect(clippy::cast_precision_loss, reason = "a rate")]
        Ok(total as f64 / started.elapsed().as_secs_f64())
    })
}

pub fn run(args: &ReadersArgs) -> Result<(), Box<dyn std::error::Error>> {
    if args.threads == 0 || args.rounds == 0 || args.seconds <= 0.0 {
        return Err("--threads, --rounds and --seconds must be above 0".into());
    }
    let scratch = ScratchDir::for_run(&args.dir, "readers")?;
    let dir = scratch.path().join("db");
    let db = Db::open(
        &dir,
        Options {
            flush_method: args.flush_method,
            ..Options::default()
        },
    )?;
    for chunk in 0..args.rows.div_ceil(1000) {
        let mut txn = db.begin()?;
        for i in chunk * 1000..((chunk + 1) * 1000).min(args.rows) {
            txn.put(&key(u64::from(i)), &u64::from(i).to_le_bytes())?;
        }
        txn.commit()?;
    }
    db.checkpoint()?;
    let flush_method = tilldb::internals::header::HeaderFile::open(
        &tilldb::io::FileStorage::read_only(),
        &dir,
        tilldb::FlushMethod::Fdatasync,
    )?
    .map_or_else(|| "?".to_owned(), |(_, h)| h.flush_method.to_string());
    let mut rounds = Vec::new();
    for round in 0..args.rounds {
        eprintln!("round {} of {}", round + 1, args.rounds);
        let alone = commit_for(&db, args.threads, args.seconds, args.rows)?;
        let stop = Arc::new(AtomicBool::new(false));
        let reader = spawn_reader(&dir, args, Arc::clone(&stop));
        let with_reader = commit_for(&db, args.threads, args.seconds, args.rows)?;
        stop.store(true, Ordering::Relaxed);
        let (refreshes, spent) = reader.join().map_err(|_| "the reader panicked")??;
        #[expect(clippy::cast_precision_loss, reason = "a mean")]
        let refresh_ms_mean = spent.as_secs_f64() * 1000.0 / refreshes.max(1) as f64;
        rounds.push(RoundJson {
            alone_commits_per_s: alone,
            with_reader_commits_per_s: with_reader,
            ratio: with_reader / alone,
            refreshes,
            refresh_ms_mean,
        });
    }
    db.close()?;
    let mut ratios: Vec<f64> = rounds.iter().map(|r| r.ratio).collect();
    ratios.sort_by(f64::total_cmp);
    let report = ReadersJson {
        rows: args.rows,
        threads: args.threads,
        seconds: args.seconds,
        refresh_ms: args.refresh_ms,
        flush_method,
        ratio_median: ratios[ratios.len() / 2],
        rounds,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(())
}

/// The reader: opens read-only, then every `--refresh-ms` refreshes and reads a key and the
/// length, until `stop`. Returns its refreshes and the time they took.
fn spawn_reader(
    dir: &std::path::Path,
    args: &ReadersArgs,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Result<(u64, Duration), String>> {
    let (dir, every) = (dir.to_path_buf(), Duration::from_millis(args.refresh_ms));
    let rows = u64::from(args.rows.max(1));
    std::thread::spawn(move || {
        let mut reader = Db::open_read_only(&dir, Options::default()).map_err(|e| e.to_string())?;
        let (mut refreshes, mut spent) = (0u64, Duration::ZERO);
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(every);
            let started = Instant::now();
            reader.refresh().map_err(|e| e.to_string())?;
            spent += started.elapsed();
            refreshes += 1;
            reader
                .get(&key(refreshes % rows))
                .map_err(|e| e.to_string())?;
            reader.len().map_err(|e| e.to_string())?;
        }
        Ok((refreshes, spent))
    })
}

fn print_report(report: &ReadersJson) {
    let mut table = Table::new();
    table.set_header([
        "round",
        "alone, commits/s",
        "with a reader, commits/s",
        "ratio",
        "refreshes",
        "refresh, ms (mean)",
    ]);
    for (i, r) in report.rounds.iter().enumerate() {
        table.add_row([
            (i + 1).to_string(),
            format!("{:.0}", r.alone_commits_per_s),
            format!("{:.0}", r.with_reader_commits_per_s),
            format!("{:.2}", r.ratio),
            r.refreshes.to_string(),
            format!("{:.1}", r.refresh_ms_mean),
        ]);
    }
    println!(
        "one-row Sync commits from {} thread(s), {} rows, flush method {}; a read-only handle \
         refreshing every {} ms",
        report.threads, report.rows, report.flush_method, report.refresh_ms
    );
    println!("{table}");
    println!(
        "median ratio (with a reader / alone): {:.2}",
        report.ratio_median
    );
}
