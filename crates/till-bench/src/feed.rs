//! `till bench feed`: what the change feed costs the commit path. Per thread count, three
//! fresh databases in turn, the same one-put `Sync` commits for the same time:
//!
//! ```text
//!  off       Options::change_feed off
//!  on        the feed on (commit records carry their writes), nobody reading
//!  consumer  the feed on and a named consumer reading every transaction as it becomes
//!            durable, acknowledging every 100 ms (what `till ship` does, without PostgreSQL)
//! ```
//!
//! Columns: commits/s, flushes per commit (the feed must not add one), log bytes per commit,
//! and for `consumer` the transactions it read and its lag at the end; then each row's
//! commits/s against `off` in the same run.
//!
//! JSON (`FeedJson`): `{ machine, disk, flush_method, value_bytes, seconds,
//! rows: [ { threads, feed ("off" | "on" | "consumer"), commits, commits_per_s,
//! flushes_per_commit, log_bytes_per_commit, consumer_read, consumer_lag_bytes, vs_off } ] }`.

use super::machine::{DiskJson, MachineJson, Setting};
use super::scratch::ScratchDir;
use super::store_load::{self, Phase};
use clap::Args;
use comfy_table::Table;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tilldb::feed::Feed;
use tilldb::{Db, Durability, FlushMethod, Options};

const KEYS: u64 = 1_000_000_000;
const SEED: u64 = 0x4645_4544_0000_0000;

#[derive(Args, Debug)]
pub struct FeedArgs {
    /// Thread counts, one group of rows each.
    #[arg(long, value_delimiter = ',', default_value = "1,64")]
    threads: Vec<usize>,
    /// Seconds per row.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// How the log is flushed.
    #[arg(long, default_value = "fdatasync")]
    flush_method: FlushMethod,
    /// Bytes per value.
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
    /// Where the databases are made (a fresh subdirectory, removed at the end).
    #[arg(long, default_value = "tilldb-bench")]
    dir: PathBuf,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// The three setups of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Setup {
    Off,
    On,
    Consumer,
}

impl Setup {
    fn name(self) -> &'static str {
        match self {
            Setup::Off => "off",
            Setup::On => "on",
            Setup::Consumer => "consumer",
        }
    }
}

#[derive(Debug)]
struct Row {
    threads: usize,
    setup: Setup,
    commits: u64,
    elapsed: Duration,
    flushes: u64,
    log_bytes: u64,
    read: u64,
    lag_bytes: u64,
}

impl Row {
    fn commits_per_s(&self) -> f64 {
        super::latency::per_sec(self.commits, self.elapsed)
    }

    /// `n` over the row's commits.
    #[expect(
        clippy::cast_precision_loss,
        reason = "a ratio reported with a few digits"
    )]
    fn per_commit(&self, n: u64) -> f64 {
        n as f64 / self.commits.max(1) as f64
    }
}

/// The JSON document (`--json`).
#[derive(Debug, Serialize)]
struct FeedJson {
    machine: MachineJson,
    disk: DiskJson,
    flush_method: &'static str,
    value_bytes: usize,
    /// Requested seconds per row.
    seconds: f64,
    rows: Vec<FeedRowJson>,
}

/// One row of `rows`: one setup at one thread count.
#[derive(Debug, Serialize)]
struct FeedRowJson {
    threads: usize,
    /// "off", "on" or "consumer".
    feed: &'static str,
    commits: u64,
    commits_per_s: f64,
    flushes_per_commit: f64,
    log_bytes_per_commit: f64,
    /// Transactions the consumer read (0 without one).
    consumer_read: u64,
    /// The published durable end of the feed at the end of the row minus the lsn of the
    /// last transaction the consumer read. Meaningful for `consumer` only: `on` reports the
    /// whole end (nobody read), `off` 0 (no feed).
    consumer_lag_bytes: u64,
    /// `commits_per_s` over the `off` row's at the same thread count.
    vs_off: f64,
}

pub fn run(args: &FeedArgs) -> Result<(), Box<dyn std::error::Error>> {
    super::check_threads_and_seconds(&args.threads, args.seconds)?;
    let scratch = ScratchDir::for_run(&args.dir, "feed")?;
    let setting = Setting::read(scratch.path())?;
    let bar = super::progress_bar(args.threads.len() as u64 * 3);
    let mut rows = Vec::new();
    for &threads in &args.threads {
        for setup in [Setup::Off, Setup::On, Setup::Consumer] {
            bar.set_message(format!("{threads} threads, feed {}", setup.name()));
            let dir = scratch.path().join(format!("{threads}-{}", setup.name()));
            rows.push(run_row(args, &dir, threads, setup)?);
            std::fs::remove_dir_all(&dir)
                .map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let ratio = |row: &Row| {
        rows.iter()
            .find(|r| r.threads == row.threads && r.setup == Setup::Off)
            .map_or(0.0, |off| row.commits_per_s() / off.commits_per_s())
    };
    if args.json {
        let out = FeedJson {
            machine: setting.machine_json(),
            disk: setting.disk_json(),
            flush_method: args.flush_method.name(),
            value_bytes: args.value_bytes,
            seconds: args.seconds,
            rows: rows
                .iter()
                .map(|r| FeedRowJson {
                    threads: r.threads,
                    feed: r.setup.name(),
                    commits: r.commits,
                    commits_per_s: r.commits_per_s(),
                    flushes_per_commit: r.per_commit(r.flushes),
                    log_bytes_per_commit: r.per_commit(r.log_bytes),
                    consumer_read: r.read,
                    consumer_lag_bytes: r.lag_bytes,
                    vs_off: ratio(r),
                })
                .collect(),
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!("{}", setting.machine_line());
    println!("{}", setting.disk_line());
    println!(
        "one-put Sync commits, {} B values, {} s per row, flush method {}",
        args.value_bytes, args.seconds, args.flush_method
    );
    let mut table = Table::new();
    table.set_header([
        "threads",
        "feed",
        "commits/s",
        "flushes/commit",
        "log B/commit",
        "read by consumer",
        "lag at end",
        "vs off",
    ]);
    for r in &rows {
        table.add_row([
            r.threads.to_string(),
            r.setup.name().to_string(),
            format!("{:.0}", r.commits_per_s()),
            format!("{:.3}", r.per_commit(r.flushes)),
            format!("{:.0}", r.per_commit(r.log_bytes)),
            if r.setup == Setup::Consumer {
                r.read.to_string()
            } else {
                "-".into()
            },
            if r.setup == Setup::Consumer {
                format!("{} B", r.lag_bytes)
            } else {
                "-".into()
            },
            format!("{:.2}", ratio(r)),
        ]);
    }
    println!("{table}");
    Ok(())
}

fn run_row(
    args: &FeedArgs,
    dir: &std::path::Path,
    threads: usize,
    setup: Setup,
) -> Result<Row, Box<dyn std::error::Error>> {
    let defaults = Options::default();
    let options = Options {
        flush_method: Some(args.flush_method),
        change_feed: setup != Setup::Off,
        wal: tilldb::WalOptions {
            segment_bytes: 16 << 20,
            ..defaults.wal.clone()
        },
        ..defaults
    };
    let db = Db::open(dir, options)?;
    std::thread::sleep(Duration::from_millis(300));
    let stop = AtomicBool::new(false);
    let read = AtomicU64::new(0);
    let last_lsn = AtomicU64::new(0);
    let phase: Phase = std::thread::scope(|scope| {
        let consumer = (setup == Setup::Consumer).then(|| {
            scope.spawn(|| -> tilldb::Result<()> {
                let mut feed = Feed::open_consumer(dir, "bench")?;
                let mut acked = std::time::Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    if let Some(txn) = feed.next(Duration::from_millis(20))? {
                        read.fetch_add(1, Ordering::Relaxed);
                        last_lsn.store(txn.lsn.0, Ordering::Relaxed);
                        if acked.elapsed() >= Duration::from_millis(100) {
                            feed.acknowledge(txn.lsn)?;
                            acked = std::time::Instant::now();
                        }
                    }
                }
                Ok(())
            })
        });
        let phase = store_load::run_threads(
            &db,
            threads,
            Duration::from_secs_f64(args.seconds),
            SEED,
            args.value_bytes,
            |db, state| store_load::put_random(db, state, KEYS, Durability::Sync),
        );
        stop.store(true, Ordering::Relaxed);
        if let Some(consumer) = consumer {
            consumer.join().expect("the consumer does not panic")?;
        }
        phase
    })?;
    let end = tilldb::feed::published_durable(dir)?.map_or(0, |lsn| lsn.0);
    db.close()?;
    let commits: u64 = phase.workers.iter().map(|w| w.ops).sum();
    Ok(Row {
        threads,
        setup,
        commits,
        elapsed: phase.elapsed,
        flushes: phase.counts.wal.flushes,
        log_bytes: phase.counts.wal.log_bytes,
        read: read.load(Ordering::Relaxed),
        lag_bytes: end.saturating_sub(last_lsn.load(Ordering::Relaxed)),
    })
}
