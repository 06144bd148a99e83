//! A head office sends a till a new price list: every product in one transaction, all or
//! nothing (issue 36). The rows are 24-byte keys and 150-byte values, in random key order; a
//! transaction larger than one log record commits in parts (`Options::commit_part_bytes`), and
//! the pages beyond the cache are spilled until its last part. Prints the time to build the
//! transaction and to commit it, the parts, the spilled pages and the process's peak resident
//! memory (Linux: `VmHWM`).
//!
//! ```sh
//! cargo run --release --example price_list -p tilldb -- [ROWS] [DIR]   # default: 100000 rows,
//!                                                                      # a fresh directory
//! ```
//!
//! `tests/examples.rs` runs it with a few thousand rows.

use std::path::Path;
use std::time::{Duration, Instant};
use tilldb::{Db, Options};

/// What one import did.
#[derive(Debug)]
pub struct Import {
    /// Rows in the database after the import, counted by a scan.
    pub rows: u64,
    /// Building the transaction (the puts).
    pub build: Duration,
    /// Its commit.
    pub commit: Duration,
    /// Log records of commits logged in parts.
    pub parts: u64,
    /// Pages written to the spill file.
    pub spilled_pages: u64,
}

/// The 24-byte key of product `i`: spread over the key space like a random one.
#[must_use]
#[expect(
    clippy::big_endian_bytes,
    reason = "big-endian so that the keys' byte order is their numbers' order"
)]
pub fn key(i: u64) -> [u8; 24] {
    let mut key = [0u8; 24];
    key[..8].copy_from_slice(&i.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_be_bytes());
    key[8..16].copy_from_slice(&i.to_be_bytes());
    key
}

/// Imports `rows` products into the database in `dir` in one transaction, then counts them.
pub fn run(dir: &Path, rows: u64, options: Options) -> tilldb::Result<Import> {
    let db = Db::open(dir, options)?;
    let started = Instant::now();
    let mut txn = db.begin()?;
    let mut value = [0u8; 150];
    for i in 0..rows {
        value[..8].copy_from_slice(&i.to_le_bytes());
        txn.put_in("prices", &key(i), &value)?;
    }
    let build = started.elapsed();
    let started = Instant::now();
    txn.commit()?;
    let commit = started.elapsed();
    let stats = db.stats();
    // Counted lazily (one batch at a time), so the count adds nothing to the peak memory.
    let mut counted = 0u64;
    for entry in db.range_in(
        "prices",
        std::ops::Bound::Unbounded,
        std::ops::Bound::Unbounded,
        tilldb::Direction::Forward,
    )? {
        entry?;
        counted += 1;
    }
    Ok(Import {
        rows: counted,
        build,
        commit,
        parts: stats.commit_parts,
        spilled_pages: stats.pool.spills,
    })
}

/// The process's peak resident memory, in bytes (Linux; `None` elsewhere).
#[must_use]
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[allow(dead_code, reason = "tests/examples.rs includes this file as a module")]
fn main() -> tilldb::Result<()> {
    let mut args = std::env::args().skip(1);
    let rows: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let dir = args.next().map_or_else(
        || std::env::temp_dir().join(format!("tilldb-price-list-{}", std::process::id())),
        std::path::PathBuf::from,
    );
    let import = run(&dir, rows, Options::default())?;
    println!(
        "price list: {} rows in one transaction into {}: built in {:.2} s, committed in {:.2} s \
         ({:.0} rows/s), {} log records in parts, {} pages spilled, peak RSS {} MiB",
        import.rows,
        dir.display(),
        import.build.as_secs_f64(),
        import.commit.as_secs_f64(),
        f64::from(u32::try_from(import.rows).unwrap_or(u32::MAX))
            / (import.build + import.commit).as_secs_f64(),
        import.parts,
        import.spilled_pages,
        peak_rss_bytes().map_or_else(|| "unknown".to_owned(), |b| (b >> 20).to_string())
    );
    Ok(())
}
