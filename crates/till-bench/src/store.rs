//! `till bench store`: the whole store (log, buffer pool, B+tree) under load, on a database
//! in a local directory that is kept between runs.
//!
//! ```text
//!  DIR (default ./tilldb-data; --fresh removes the database there first)
//!   1. open:   Db::open, timed: creates a database (probing the flush method) or recovers one
//!   2. load:   unless the last key has a value, put keys 0..K in transactions of 1000 puts
//!   3. writes: per thread count T: T threads run one-put transactions on random keys
//!   4. reads:  as many threads as the largest T run random point reads (`db.get`)
//!   5. close:  db.close(), timed (a checkpoint); the database stays in DIR
//! ```
//!
//! `store_load.rs` runs the threads, `store_report.rs` prints and plots the results,
//! `store_json.rs` is the JSON document.

use super::machine::Setting;
use super::store_json;
use super::store_load::{self, Counts, Phase, key};
use super::store_report::{self, Load, MethodSource, ReadRow, StoreRun, WriteRow};
use clap::Args;
use indicatif::ProgressBar;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tilldb::TornPageGuard;
use tilldb::internals::header::{self, HEADER_FILE_NAME, Header};
use tilldb::io::DeviceFacts;
use tilldb::{Db, Durability, FlushMethod, Options};

/// Keys are `key` plus 12 digits, so at most 10^12 of them.
const KEYS_MAX: u64 = 1_000_000_000_000;
/// Largest value accepted: larger values measure overflow-page bandwidth, not the commit path.
const VALUE_BYTES_MAX: usize = 1 << 20;
/// Puts per load transaction.
const LOAD_PUTS_PER_TXN: u64 = 1000;
/// Most value bytes per load transaction, so one commit record stays far below a log
/// segment (64 MiB) even with large values.
const LOAD_TXN_BYTES_MAX: u64 = 8 << 20;
/// Seed salt per phase, so reads do not replay the writers' key sequence.
const SEED_WRITES: u64 = 0x5752_4954_4500_0000;
const SEED_READS: u64 = 0x5245_4144_5300_0000;
/// Names a tilldb database directory may hold (`.tilldb-facts-*` scratch files too).

#[derive(Args, Debug)]
pub struct StoreArgs {
    /// Database directory. A database there is reopened (and its recovery timed); it is left
    /// in place afterwards.
    #[arg(long, default_value = "./tilldb-data")]
    dir: PathBuf,
    /// Remove the database in --dir first (only a tilldb database is ever removed).
    #[arg(long)]
    fresh: bool,
    /// Thread counts for the write phase, one row each; reads use the largest.
    #[arg(long, value_delimiter = ',', default_value = "1,8,64")]
    threads: Vec<usize>,
    /// Seconds per thread count, and for the reads.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Operations each phase does at least, all threads together: it runs past --seconds
    /// until it has (each thread does at least one). For a short run on a loaded machine.
    #[arg(long, value_name = "N", default_value_t = 0)]
    min_ops: u64,
    /// What each commit waits for: sync (flushed), buffered (written to the OS) or lazy.
    #[arg(long, default_value = "sync")]
    durability: Durability,
    /// Key space: keys `key000000000000` up to this many.
    #[arg(long, default_value_t = 100_000)]
    keys: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
    /// Buffer pool size in MiB.
    #[arg(long, default_value_t = 64)]
    cache_mib: u64,
    /// Page size of a new database (an existing one keeps its own).
    #[arg(long, default_value_t = 16384)]
    page_bytes: u32,
    /// Flush method of a new database [default: the database probes and chooses].
    #[arg(long)]
    flush_method: Option<FlushMethod>,
    /// Torn-page guard of a new database: auto (atomic where the device has it, else
    /// full-page images), atomic, full-page-images, doublewrite, or none (unsafe unless the
    /// device writes pages atomically; here to measure what the others cost).
    #[arg(long, default_value = "auto")]
    torn_page_guard: TornPageGuard,
    /// Print JSON (stable for scripts) instead of tables.
    #[arg(long)]
    json: bool,
    /// Also draw commits/s against threads into this file (SVG, or PNG when it ends in .png).
    #[arg(long, value_name = "FILE.svg|png", value_parser = crate::png::parse_plot_path)]
    plot: Option<PathBuf>,
    /// Add a SIMULATED latency of N us to every flush, one flush at a time as on a single
    /// disk (0: off). Every number printed then includes it.
    #[arg(long, value_name = "N", default_value_t = 0)]
    sync_latency_us: u64,
}

pub fn run(args: &StoreArgs) -> Result<(), Box<dyn std::error::Error>> {
    let options = validate(args)?;
    prepare_dir(&args.dir, args.fresh)?;
    let bar = super::progress_bar(args.threads.len() as u64 + 4);
    bar.set_message("open");
    let created = !args.dir.join(HEADER_FILE_NAME).exists();
    // A database kept from an earlier run has its own page size and guard (the report says
    // when they differ from the flags); asking for others would be refused.
    let options = if created {
        options
    } else {
        Options {
            page_bytes: None,
            torn_page_guard: TornPageGuard::Auto,
            ..options
        }
    };
    let start = Instant::now();
    let db = Db::open_with_storage(
        super::raw::storage(args.sync_latency_us),
        &args.dir,
        options.clone(),
    )
    .map_err(|e| format!("cannot open the database in {}: {e}", args.dir.display()))?;
    let open = start.elapsed();
    let dir = std::fs::canonicalize(&args.dir)?;
    let header = read_header(&dir)?;
    let facts = DeviceFacts::for_dir(&dir)?;

    let load = load(&db, args, &bar)?;
    bar.inc(1);
    bar.set_message("raw flushed writes");
    let (raw, raw_block_bytes) = super::raw::raw_for_store(
        &*super::raw::storage(args.sync_latency_us),
        &dir,
        header.flush_method,
        header.page_bytes,
        args.seconds,
    )?;
    bar.inc(1);
    let span = store_load::Span {
        time: Duration::from_secs_f64(args.seconds),
        min_ops: args.min_ops,
    };
    let mut rows = Vec::with_capacity(args.threads.len());
    for (index, &threads) in args.threads.iter().enumerate() {
        bar.set_message(format!("writes, {threads} threads"));
        let (keys, durability) = (args.keys, args.durability);
        let phase = store_load::run_threads(
            &db,
            threads,
            span,
            SEED_WRITES + ((index as u64) << 16),
            args.value_bytes,
            |db, state| store_load::put_random(db, state, keys, durability),
        )?;
        rows.push(write_row(threads, &phase));
        bar.inc(1);
    }
    let read_threads = args.threads.iter().copied().max().expect("validated");
    bar.set_message(format!("reads, {read_threads} threads"));
    let keys = args.keys;
    let phase = store_load::run_threads(&db, read_threads, span, SEED_READS, 0, |db, s| {
        store_load::get_random(db, s, keys)
    })?;
    let reads = read_row(read_threads, &phase);
    bar.inc(1);
    bar.set_message("close");
    let start = Instant::now();
    db.close()
        .map_err(|e| format!("closing the database failed: {e}"))?;
    let close = start.elapsed();
    bar.finish_and_clear();

    let run = StoreRun {
        disk: super::disk_usage::DiskUsage::of(&dir)?,
        dir,
        setting: Setting::with_facts(facts),
        created,
        open,
        page_bytes: header.page_bytes,
        page_bytes_asked: args.page_bytes,
        cache_bytes: options.cache_bytes,
        durability: args.durability,
        flush_method: header.flush_method,
        torn_page_guard: header.torn_page_guard,
        torn_page_guard_asked: args.torn_page_guard,
        method_source: match (created, args.flush_method) {
            (false, _) => MethodSource::Header(args.flush_method),
            (true, Some(_)) => MethodSource::Flag,
            (true, None) => MethodSource::Chosen,
        },
        keys: args.keys,
        value_bytes: args.value_bytes,
        seconds: args.seconds,
        sync_latency_us: (args.sync_latency_us > 0).then_some(args.sync_latency_us),
        load,
        rows,
        reads,
        raw,
        raw_block_bytes,
        close,
    };
    emit(&run, args)
}

/// Writes the plot (if asked for), then prints the JSON document (`store_json.rs`) or the
/// human report (`store_report.rs`).
fn emit(run: &StoreRun, args: &StoreArgs) -> Result<(), Box<dyn std::error::Error>> {
    super::emit(
        args.json,
        args.plot.as_deref(),
        || store_report::plot(run),
        || store_json::json(run),
        || store_report::print_text(run),
    )
}

/// Checks the flags and builds the options, before anything touches the disk.
fn validate(args: &StoreArgs) -> Result<Options, String> {
    super::check_threads_and_seconds(&args.threads, args.seconds)?;
    super::raw::check_sync_latency(args.sync_latency_us)?;
    if !(1..=KEYS_MAX).contains(&args.keys) {
        return Err(format!(
            "--keys must be from 1 to {KEYS_MAX}, not {}",
            args.keys
        ));
    }
    if args.value_bytes > VALUE_BYTES_MAX {
        return Err(format!(
            "--value-bytes {} is more than the {VALUE_BYTES_MAX} supported",
            args.value_bytes
        ));
    }
    let cache_bytes = args
        .cache_mib
        .checked_mul(1 << 20)
        .ok_or_else(|| format!("--cache-mib {} is too large", args.cache_mib))?;
    let options = Options {
        page_bytes: Some(args.page_bytes),
        cache_bytes,
        durability: args.durability,
        flush_method: args.flush_method,
        torn_page_guard: args.torn_page_guard,
        ..Options::default()
    };
    options.validate().map_err(|e| {
        format!(
            "{e} (--page-bytes {}, --cache-mib {})",
            args.page_bytes, args.cache_mib
        )
    })?;
    Ok(options)
}

/// Refuses a `--dir` that is a file or holds anything but a tilldb database (opening would
/// clear the remains of an interrupted create, and `--fresh` removes the directory), then
/// removes the database if `fresh`.
fn prepare_dir(dir: &Path, fresh: bool) -> Result<(), String> {
    let shown = dir.display();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(_) if dir.exists() && !dir.is_dir() => {
            return Err(format!("--dir {shown} is not a directory"));
        }
        Err(e) => return Err(format!("cannot read --dir {shown}: {e}")),
    };
    for entry in entries {
        let name = entry
            .map_err(|e| format!("cannot read --dir {shown}: {e}"))?
            .file_name();
        let name = name.to_string_lossy();
        if !is_database_name(&name) {
            return Err(format!(
                "--dir {shown} holds {name:?}, which is not part of a tilldb database; use a \
                 new or empty directory"
            ));
        }
    }
    if fresh {
        std::fs::remove_dir_all(dir).map_err(|e| format!("--fresh: cannot remove {shown}: {e}"))?;
    }
    Ok(())
}

fn is_database_name(name: &str) -> bool {
    tilldb::is_database_file_name(name)
}

/// The database's header as last written (page size and flush method in force), read with
/// plain reads: the open database keeps its own handle.
fn read_header(dir: &Path) -> Result<Header, String> {
    let path = dir.join(HEADER_FILE_NAME);
    let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let corrupt = |what: &str| format!("{}: {what}", path.display());
    if bytes.len() < header::SLOT_COUNT * header::SLOT_BYTES {
        return Err(corrupt("shorter than its two slots"));
    }
    let slot = |i: usize| {
        header::Header::decode(
            &bytes[i * header::SLOT_BYTES..(i + 1) * header::SLOT_BYTES],
            i,
        )
        .map_err(|(_, what)| corrupt(what))
    };
    match header::choose_slot([slot(0)?, slot(1)?]) {
        Ok(Some((_, header))) => Ok(header),
        Ok(None) => Err(corrupt("no header written")),
        Err((_, what)) => Err(corrupt(what)),
    }
}

/// Puts keys `0..keys` unless the last one already has a value (a database loaded before).
fn load(db: &Db, args: &StoreArgs, bar: &ProgressBar) -> Result<Load, Box<dyn std::error::Error>> {
    let value_bytes = args.value_bytes as u64;
    let puts_per_txn = (LOAD_TXN_BYTES_MAX / (value_bytes + 16)).clamp(1, LOAD_PUTS_PER_TXN);
    let start = Instant::now();
    if db.get(key(args.keys - 1).as_bytes())?.is_some() {
        return Ok(Load {
            keys: args.keys,
            inserted: 0,
            puts_per_txn,
            elapsed: start.elapsed(),
        });
    }
    let mut value = vec![0x5A; args.value_bytes];
    let mut first = 0;
    while first < args.keys {
        let last = (first + puts_per_txn).min(args.keys);
        bar.set_message(format!("load, {}%", first * 100 / args.keys));
        let mut txn = db.begin()?;
        for n in first..last {
            let stamp = n.to_le_bytes();
            let len = stamp.len().min(value.len());
            value[..len].copy_from_slice(&stamp[..len]);
            txn.put(key(n).as_bytes(), &value)?;
        }
        txn.commit_with(args.durability)?;
        first = last;
    }
    assert_eq!(first, args.keys, "load overran the key space");
    Ok(Load {
        keys: args.keys,
        inserted: args.keys,
        puts_per_txn,
        elapsed: start.elapsed(),
    })
}

/// A write row from one phase. For write-through methods, whose writes are the flushes, the
/// flushes are the log's write stages.
fn write_row(threads: usize, phase: &Phase) -> WriteRow {
    let Counts { wal, pool } = phase.counts;
    let latencies = phase.latencies();
    WriteRow {
        threads,
        commits: phase.workers.iter().map(|w| w.ops).sum(),
        elapsed: phase.elapsed,
        p50_us: latencies.percentile_us(50.0),
        p99_us: latencies.percentile_us(99.0),
        max_us: latencies.percentile_us(100.0),
        flushes: wal.device_flushes(),
        log_appends: wal.appends,
        log_bytes: wal.log_bytes,
        pool,
    }
}

fn read_row(threads: usize, phase: &Phase) -> ReadRow {
    let latencies = phase.latencies();
    ReadRow {
        threads,
        gets: phase.workers.iter().map(|w| w.ops).sum(),
        missing: phase.workers.iter().map(|w| w.missing).sum(),
        elapsed: phase.elapsed,
        p50_us: latencies.percentile_us(50.0),
        p99_us: latencies.percentile_us(99.0),
        max_us: latencies.percentile_us(100.0),
        pool: phase.counts.pool,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepare_dir_refuses_files_and_foreign_directories() {
        let base = tempfile::tempdir().expect("tempdir");
        let file = base.path().join("f");
        std::fs::write(&file, b"x").expect("write");
        assert!(
            prepare_dir(&file, false)
                .expect_err("refused")
                .contains("not a directory")
        );
        assert!(
            prepare_dir(base.path(), true)
                .expect_err("refused")
                .contains("\"f\"")
        );
        assert!(file.exists(), "--fresh removed a foreign directory");
        assert_eq!(prepare_dir(&base.path().join("missing"), true), Ok(()));
    }

    #[test]
    fn fresh_removes_a_database_directory() {
        let base = tempfile::tempdir().expect("tempdir");
        let dir = base.path().join("db");
        std::fs::create_dir_all(dir.join("wal")).expect("mkdir");
        std::fs::write(dir.join(HEADER_FILE_NAME), b"").expect("write");
        assert_eq!(prepare_dir(&dir, false), Ok(()));
        assert!(dir.exists());
        assert_eq!(prepare_dir(&dir, true), Ok(()));
        assert!(!dir.exists());
    }
}
