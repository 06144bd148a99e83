//! `till bench scan`: what a scan of a large table holds in memory. One fresh database with a
//! small cache (`--cache-mib`, default 16) and a table of `--table-mib` (default 1024) of
//! 4 KiB values, closed and reopened; then the table scanned lazily (`Db::range`) and, with
//! `--vec`, with the `Vec` scan (`Db::scan`), each after the process's peak resident memory
//! was reset (Linux: `/proc/self/clear_refs`), reporting the peak during the scan.
//!
//! JSON (`ScanJson`): `{ table_mib, cache_mib, entries, load_seconds, rows: [ { scan,
//! entries, bytes, seconds, peak_resident_bytes (null where unknown) } ] }`.

use super::scratch::ScratchDir;
use clap::Args;
use comfy_table::Table;
use serde::Serialize;
use std::ops::Bound;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tilldb::{Db, Direction, Durability, Options};

const VALUE_BYTES: usize = 4096;
/// Values per loading commit, when the cache is large enough (see `load`).
const PUTS_PER_COMMIT: usize = 256;

#[derive(Args, Debug)]
pub struct ScanArgs {
    /// MiB of values in the scanned table.
    #[arg(long, default_value_t = 1024)]
    table_mib: u64,
    /// The database's cache, MiB.
    #[arg(long, default_value_t = 16)]
    cache_mib: u64,
    /// Also scan with the `Vec` scan, which holds the whole range (needs that much memory).
    #[arg(long)]
    vec: bool,
    /// Where the database is made (a fresh subdirectory, removed at the end).
    #[arg(long, default_value = "tilldb-bench")]
    dir: PathBuf,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug)]
struct Measured {
    how: &'static str,
    entries: u64,
    bytes: u64,
    elapsed: Duration,
    peak_resident: Option<u64>,
}

/// The JSON document (`--json`).
#[derive(Debug, Serialize)]
struct ScanJson {
    table_mib: u64,
    cache_mib: u64,
    /// Entries in the table (of 4 KiB values).
    entries: u64,
    /// Seconds to load the table (and close the database).
    load_seconds: f64,
    rows: Vec<ScanRowJson>,
}

/// One scan of `rows`.
#[derive(Debug, Serialize)]
struct ScanRowJson {
    /// How it scanned: `"lazy (Db::range)"` or `"vec (Db::scan)"`.
    scan: &'static str,
    /// Entries the scan read.
    entries: u64,
    /// Key and value bytes the scan read.
    bytes: u64,
    seconds: f64,
    /// The process's peak resident memory during the scan; null where it cannot be reset
    /// and read (not Linux).
    peak_resident_bytes: Option<u64>,
}

pub fn run(args: &ScanArgs) -> Result<(), Box<dyn std::error::Error>> {
    if args.table_mib == 0 || args.cache_mib == 0 {
        return Err("--table-mib and --cache-mib must be at least 1".into());
    }
    let scratch = ScratchDir::for_run(&args.dir, "scan")?;
    let dir = scratch.path().join("db");
    let options = Options {
        cache_bytes: args.cache_mib << 20,
        ..Options::default()
    };
    let entries = (args.table_mib << 20) / VALUE_BYTES as u64;
    let started = Instant::now();
    load(&dir, &options, entries)?;
    let load_seconds = started.elapsed().as_secs_f64();
    let db = Db::open(&dir, options)?;
    let mut rows = vec![measure("lazy (Db::range)", || {
        let mut count = (0u64, 0u64);
        for entry in db.range_in(
            "big",
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
        )? {
            let (k, v) = entry?;
            count.0 += 1;
            count.1 += (k.len() + v.len()) as u64;
        }
        Ok(count)
    })?];
    if args.vec {
        rows.push(measure("vec (Db::scan)", || {
            let all = db.scan_in(
                "big",
                Bound::Unbounded,
                Bound::Unbounded,
                Direction::Forward,
            )?;
            let bytes = all.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
            Ok((all.len() as u64, bytes))
        })?);
    }
    db.close()?;
    for r in &rows {
        if r.entries != entries {
            return Err(format!("{} read {} entries of {entries}", r.how, r.entries).into());
        }
    }
    if args.json {
        let out = ScanJson {
            table_mib: args.table_mib,
            cache_mib: args.cache_mib,
            entries,
            load_seconds,
            rows: rows
                .iter()
                .map(|r| ScanRowJson {
                    scan: r.how,
                    entries: r.entries,
                    bytes: r.bytes,
                    seconds: r.elapsed.as_secs_f64(),
                    peak_resident_bytes: r.peak_resident,
                })
                .collect(),
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "a table of {} MiB ({entries} entries of {VALUE_BYTES} B), cache {} MiB, loaded in {load_seconds:.1} s",
        args.table_mib, args.cache_mib
    );
    let mut table = Table::new();
    table.set_header([
        "scan",
        "entries",
        "MiB read",
        "seconds",
        "peak resident (process)",
    ]);
    for r in &rows {
        table.add_row([
            r.how.to_string(),
            r.entries.to_string(),
            (r.bytes >> 20).to_string(),
            format!("{:.2}", r.elapsed.as_secs_f64()),
            r.peak_resident.map_or_else(
                || "unknown (not Linux)".to_string(),
                |b| format!("{} MiB", b >> 20),
            ),
        ]);
    }
    println!("{table}");
    Ok(())
}

/// Makes the database with `entries` values of 4 KiB in table `big`, closed.
fn load(
    dir: &std::path::Path,
    options: &Options,
    entries: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let bar = super::progress_bar(entries);
    bar.set_message("loading");
    let db = Db::open(dir, options.clone())?;
    // A commit's pages stay in the cache until it is logged: a quarter of the cache's frames
    // per commit at most (each value takes an overflow page, plus its share of a leaf), so
    // that a small --cache-mib loads instead of failing with every frame pinned.
    let frames = options.cache_bytes / u64::from(options.page_bytes_or_default());
    let puts = usize::try_from(frames / 4)?.clamp(1, PUTS_PER_COMMIT);
    let mut value = vec![0u8; VALUE_BYTES];
    let mut n = 0u64;
    while n < entries {
        let mut txn = db.begin()?;
        for _ in 0..puts.min(usize::try_from(entries - n)?) {
            value[..8].copy_from_slice(&n.to_le_bytes());
            txn.put_in("big", format!("{n:012}").as_bytes(), &value)?;
            n += 1;
        }
        txn.commit_with(Durability::Buffered)?;
        bar.set_position(n);
    }
    db.close()?;
    bar.finish_and_clear();
    Ok(())
}

/// Runs `scan` after resetting the peak resident memory; the peak during it.
fn measure(
    how: &'static str,
    scan: impl FnOnce() -> tilldb::Result<(u64, u64)>,
) -> Result<Measured, Box<dyn std::error::Error>> {
    let reset = crate::platform::reset_peak_resident();
    let started = Instant::now();
    let (entries, bytes) = scan()?;
    let elapsed = started.elapsed();
    Ok(Measured {
        how,
        entries,
        bytes,
        elapsed,
        peak_resident: reset.then(crate::platform::peak_resident_bytes).flatten(),
    })
}
