//! `till bench`: benchmarks of tilldb's layers, each reproducible from its flags alone.
//!
//! A crate of its own so that the field tool (`crates/till`: probe, check, stats, dump-log,
//! crashtest, diskcheck, ship) reads without the benchmark lab; `till` forwards its
//! `bench` subcommand here ([`BenchCommand`], [`run`]) and its features (`png`, `peers`,
//! `peers-rocksdb`) under the same names.
//!
//! - `till bench log` (`log.rs`): the write-ahead log alone, commits/s against threads,
//!   compared with the device's raw flushed-write rate.
//! - `till bench seed` (`seed.rs`): the classic test, one client, 500 x "insert one row,
//!   commit" per flush method and durability, against each method's raw flush rate; also
//!   `till bench block-size`. `seed_report.rs` holds its rows and prints and plots them,
//!   `seed_json.rs` is its JSON document.
//! - `till bench commit` (`commit.rs`): one-insert transactions on the whole store against
//!   threads, printed like `till bench log` (`log_report.rs` and `log_json.rs` serve both).
//! - `till bench recovery` (`recovery.rs`): recovery time against the log to replay, after a
//!   writer that exits without closing; with `--hot-seconds` (`recovery_hot.rs`), log on disk
//!   and recovery time after kill -9 of a hot-row load that ran that long; with
//!   `--large-commit-rows` (`recovery_large.rs`), recovery time after kill -9 right after one
//!   large commit.
//! - `till bench torn` (`torn.rs`): each torn-page guard's cost on the same device.
//! - `till bench peers` (`peers.rs`): the same one-insert transactions on tilldb and on the
//!   stores a user would pick instead, in one run; the peers only with the `peers` feature.
//! - `till bench store` (`store.rs`): the whole store on a database kept in a directory:
//!   open or recovery, load, one-put transactions against threads, point reads, close.
//! - `till bench kv` (`kv.rs`): the whole embedded-store workload (bulk load, durable and
//!   no-flush commits, sorted inserts, point reads against threads, range reads, removals,
//!   length, size before and after compaction) on tilldb and its peers, one table per run
//!   with each row's ratio to the best engine; the peers only with the `peers` feature.
//!
//! `log_load.rs` runs the committer threads, `log_report.rs` holds the run and its rows and
//! prints and plots them, `log_json.rs` is the JSON document; `store_load.rs`,
//! `store_report.rs` and `store_json.rs` do the same for the store. A `*_json.rs` file reads
//! its report's types and its report never imports it: the run file (`log.rs`, `commit.rs`,
//! `seed.rs`, `store.rs`) hands the plot, the JSON document and the text report to [`emit`].
//!
//! Shared pieces: `latency.rs` (a latency histogram per thread, merged: every operation counted in
//! bounded memory, percentiles at most 0.8 % high), `scratch.rs`
//! (a fresh run directory removed afterwards), `slow_storage.rs` (a SIMULATED flush latency,
//! serialized like one disk), `svg.rs` (hand-written line charts), `platform.rs` (CPU time,
//! peak memory, allocated bytes and the page cache, per operating system).

mod bars;
mod commit;
mod counting_storage;
pub mod disk_usage;
mod feed;
mod kv;
mod latency;
mod log;
mod log_json;
mod log_load;
mod log_report;
mod machine;
mod peers;
mod platform;
mod png;
mod raw;
mod readers;
mod recovery;
mod recovery_hot;
mod recovery_large;
mod scan;
mod scratch;
mod seed;
mod seed_json;
mod seed_report;
mod slow_storage;
mod store;
mod store_json;
mod store_load;
mod store_report;
mod svg;
mod threads;
mod torn;

use clap::Subcommand;
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// The classic test: one client, 500 x "insert one row, commit", for each flush method
    /// and durability, next to each method's raw flush rate.
    Seed(seed::SeedArgs),
    /// Insert+commit transactions on the whole store against thread count, next to the raw
    /// flush rate (like `bench log`, through every layer).
    Commit(commit::CommitArgs),
    /// What each torn-page guard costs: random updates on a database larger than the cache,
    /// every guard on the same device in one run.
    Torn(torn::TornArgs),
    /// Recovery after a crash: time to open against MiB of log to replay.
    Recovery(recovery::RecoveryArgs),
    /// The seed test across log block sizes (512, 4096, 16384 B by default) with every flush
    /// method: what a smaller or larger write unit costs on this device.
    BlockSize(seed::BlockSizeArgs),
    /// What the change feed costs: commits/s and flushes per commit with the feed off, on,
    /// and on with a consumer reading, at 1 and 64 threads.
    Feed(feed::FeedArgs),
    /// What a scan of a large table holds in memory: peak resident memory during a lazy
    /// scan (and, with --vec, the `Vec` scan) of a 1 GiB table.
    Scan(scan::ScanArgs),
    /// What a read-only handle costs the writer: one-row Sync commits alone and with a
    /// reader refreshing every 10 ms, alternating, in one run.
    Readers(readers::ReadersArgs),
    /// The write-ahead log alone: commits/s, flushes and latency against thread count.
    Log(log::LogArgs),
    /// The whole store on a database kept in a directory: open or recovery, load, one-put
    /// transactions against thread count, point reads, close.
    Store(store::StoreArgs),
    /// tilldb next to its peers (sqlite, lmdb, redb, fjall, rocksdb): durable one-insert
    /// commits against thread count, in one run. Needs the `peers` feature.
    Peers(peers::PeersArgs),
    /// The whole embedded-store workload on tilldb and its peers (sqlite, lmdb, redb, fjall,
    /// rocksdb): bulk load, durable and no-flush commits, sorted inserts, point reads against
    /// threads, range reads, removals, length, size before and after compaction, each row
    /// with tilldb's ratio to the best engine. Needs the `peers` feature.
    Kv(kv::KvArgs),
}

pub fn run(command: &BenchCommand) -> Result<(), Box<dyn std::error::Error>> {
    match command {
        BenchCommand::Seed(args) => seed::run(args),
        BenchCommand::BlockSize(args) => seed::run_block_sizes(args),
        BenchCommand::Commit(args) => commit::run(args),
        BenchCommand::Log(args) => log::run(args),
        BenchCommand::Feed(args) => feed::run(args),
        BenchCommand::Scan(args) => scan::run(args),
        BenchCommand::Readers(args) => readers::run(args),
        BenchCommand::Recovery(args) if recovery::is_hot(args) => recovery_hot::run(args),
        BenchCommand::Recovery(args) if recovery::is_large(args) => recovery_large::run(args),
        BenchCommand::Recovery(args) => recovery::run(args),
        BenchCommand::Torn(args) => torn::run(args),
        BenchCommand::Store(args) => store::run(args),
        BenchCommand::Peers(args) => peers::run(args),
        BenchCommand::Kv(args) => kv::run(args),
    }
}

/// How every benchmark ends: writes the plot (when `--plot` asked for one), then prints the
/// JSON document (`--json`) or the text report and where the plot went.
pub fn emit<J: serde::Serialize>(
    as_json: bool,
    plot_path: Option<&std::path::Path>,
    plot: impl FnOnce() -> String,
    json: impl FnOnce() -> J,
    print_text: impl FnOnce(),
) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(path) = plot_path {
        png::write_plot(path, &plot())?;
    }
    if as_json {
        println!("{}", serde_json::to_string_pretty(&json())?);
    } else {
        print_text();
        if let Some(path) = plot_path {
            println!("\nPlot written to {}", path.display());
        }
    }
    Ok(())
}

/// The progress bar every benchmark draws (on stderr, cleared at the end): `len` steps.
fn progress_bar(len: u64) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} ({elapsed})")
            .expect("valid template"),
    );
    bar
}

/// Most threads a benchmark row may ask for.
const THREADS_MAX: usize = 4096;
/// Longest a row may run, in seconds (a day).
const SECONDS_MAX: f64 = 86_400.0;

/// The checks every benchmark makes of `--threads` and `--seconds`.
fn check_threads_and_seconds(threads: &[usize], seconds: f64) -> Result<(), String> {
    if threads.is_empty() {
        return Err("--threads needs at least one thread count".into());
    }
    if threads.contains(&0) {
        return Err("--threads: a thread count of 0 runs nothing; use 1 or more".into());
    }
    if let Some(t) = threads.iter().find(|&&t| t > THREADS_MAX) {
        return Err(format!(
            "--threads: {t} is more than the {THREADS_MAX} supported"
        ));
    }
    if !(seconds > 0.0 && seconds <= SECONDS_MAX) {
        return Err(format!(
            "--seconds must be a positive number of at most {SECONDS_MAX}, not {seconds}"
        ));
    }
    Ok(())
}
