//! One-row commits alone, for profiling (`perf record`) and for comparing two builds run by
//! turns: loads ROWS rows (24-byte random keys, 150-byte values, one transaction), then makes
//! COMMITS one-row commits of new random keys at LEVEL (`buffered`, `sync` or `lazy`) from
//! one thread, as `till bench kv`'s no-flush and durable rows do (its 4 GiB cache too),
//! printing the rate and the log's and pool's counters over the commits. The database is
//! made in DIR and removed.
//!
//! Environment: `TILLDB_GUARD=doublewrite|full-page-images` (default: auto);
//! `TILLDB_CHECKPOINT_FIRST=1` checkpoints after the load; `TILLDB_BATCHES_FIRST=1` runs, after
//! the load, `till bench kv`'s rows before its no-flush row (1,000 durable one-row commits,
//! 100 durable transactions of 1,000 rows); `TILLDB_NO_BACKGROUND=1` turns the background
//! threads off; `TILLDB_ROWS_PER_COMMIT=N` puts N rows a commit (`till bench kv`'s durable
//! transactions of 1,000 rows: `sync 100` with N = 1000); `TILLDB_PAUSE_MS=N` waits N ms
//! before the measured commits, to attach `perf record -p` to them; `TILLDB_ENCRYPT=1` encrypts the database (docs/encryption.md: so far its log);
//! `TILLDB_WRITE_BUFFER_BYTES=N` turns the write buffer on (docs/write-buffer.md), and the
//! drain of what the commits left buffered is timed after them; `TILLDB_READS_AFTER=N` times
//! N random point reads of loaded keys right after the commits (with the buffer on, through
//! what they left buffered and beside the idle drain, as `till bench kv`'s reads come).
//!
//! ```sh
//! cargo run --release -p tilldb --example commit_profile -- [LEVEL] [COMMITS] [ROWS] [DIR]
//! # defaults: buffered, 200000 commits, 200000 rows, ./tilldb-commit-profile
//! ```
//!
//! `till bench kv` is the benchmark of record (every engine side by side).

use std::path::PathBuf;
use std::time::Instant;
use tilldb::{Db, Durability, Options};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let level = match args.next().as_deref() {
        None | Some("buffered") => Durability::Buffered,
        Some("sync") => Durability::Sync,
        Some("lazy") => Durability::Lazy,
        Some(other) => return Err(format!("level {other:?}: buffered, sync or lazy").into()),
    };
    let commits: u64 = args.next().map_or(Ok(200_000), |s| s.parse())?;
    let rows: u64 = args.next().map_or(Ok(200_000), |s| s.parse())?;
    let dir = PathBuf::from(
        args.next()
            .unwrap_or_else(|| "tilldb-commit-profile".to_owned()),
    );
    if dir.exists() {
        return Err(format!("{} exists: give a directory that does not", dir.display()).into());
    }
    let mut key = keys();
    let value = [0x5a_u8; 150];
    let db = Db::open(&dir, options())?;
    let mut txn = db.begin()?;
    for _ in 0..rows {
        txn.put(&key(), &value)?;
    }
    txn.commit()?;
    if std::env::var("TILLDB_CHECKPOINT_FIRST").as_deref() == Ok("1") {
        db.checkpoint()?;
    }
    if std::env::var("TILLDB_BATCHES_FIRST").as_deref() == Ok("1") {
        batches_first(&db, &mut key, &value)?;
    }
    if let Some(pause) = std::env::var_os("TILLDB_PAUSE_MS") {
        // Time to attach a profiler to the measured commits alone (`perf record -p`).
        let pause: u64 = pause.to_str().and_then(|s| s.parse().ok()).unwrap_or(0);
        println!("pausing {pause} ms (pid {})", std::process::id());
        std::thread::sleep(std::time::Duration::from_millis(pause));
    }
    let stats_before = db.stats();
    let log_before = db.stats().log;
    let pool_before = db.stats().pool;
    let per_commit: u64 = std::env::var("TILLDB_ROWS_PER_COMMIT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let mut each_took = Vec::with_capacity(usize::try_from(commits)?);
    let started = Instant::now();
    for _ in 0..commits {
        let one = Instant::now();
        let mut txn = db.begin()?;
        for _ in 0..per_commit {
            txn.put(&key(), &value)?;
        }
        txn.commit_with(level)?;
        each_took.push(one.elapsed());
    }
    let elapsed = started.elapsed();
    let each = elapsed / u32::try_from(commits)?;
    println!(
        "{commits} {per_commit}-row {level:?} commits over {rows} rows: {:.2} s, {:.0} commits/s, {:.2} us each",
        elapsed.as_secs_f64(),
        1.0 / each.as_secs_f64(),
        each.as_secs_f64() * 1e6
    );
    print_commit_times(
        &mut each_took,
        db.stats().drain_chunks - stats_before.drain_chunks,
    );
    let log = db.stats().log.since(log_before);
    println!(
        "  backpressure waits: {}",
        db.stats().backpressure_waits - stats_before.backpressure_waits
    );
    after_commits(&db, rows, &mut key)?;
    let pool = db.stats().pool;
    println!(
        "  log: {} writes, {} device flushes, {} bytes written, {} log bytes a commit; pool: {} misses, {} written back (before: {}, {})",
        log.writes,
        log.device_flushes(),
        log.bytes_written / commits,
        log.log_bytes / commits,
        pool.misses,
        pool.pages_written,
        pool_before.misses,
        pool_before.pages_written
    );
    db.close()?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// The load's and the commits' keys: 24 bytes of a xorshift sequence, the same every run.
fn keys() -> impl FnMut() -> [u8; 24] {
    let mut seed = 0x9e37_79b9_u64;
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut key = [0u8; 24];
        key[..8].copy_from_slice(&seed.to_le_bytes());
        key[8..16].copy_from_slice(&seed.rotate_left(17).to_le_bytes());
        key
    }
}

/// After the measured commits: `TILLDB_READS_AFTER=N` point reads ([`reads_after`]), then the
/// drain of what is buffered ([`drain_after`]).
fn after_commits(
    db: &Db,
    rows: u64,
    key: &mut impl FnMut() -> [u8; 24],
) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(reads) = std::env::var("TILLDB_READS_AFTER")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        reads_after(db, rows, reads)?;
    }
    drain_after(db, key)
}

/// `reads` random point reads of the loaded keys in one `ReadTxn`, right after the measured
/// commits (as `till bench kv`'s point reads come after its commit rows: with the write
/// buffer on, the idle drain runs beside them), timed, with the drains and page writes they
/// ran beside.
fn reads_after(db: &Db, rows: u64, reads: u64) -> Result<(), Box<dyn std::error::Error>> {
    // The load's keys again: the same generator from the same seed.
    let mut key = keys();
    let loaded: Vec<[u8; 24]> = (0..rows).map(|_| key()).collect();
    let before = db.stats();
    let started = Instant::now();
    let txn = db.begin_read()?;
    let mut pick = 0x2545_f491_u64;
    let mut found = 0u64;
    for _ in 0..reads {
        pick ^= pick << 13;
        pick ^= pick >> 7;
        pick ^= pick << 17;
        let key = &loaded[usize::try_from(pick % rows)?];
        found += u64::from(txn.get_with(key, <[u8]>::len)?.is_some());
    }
    drop(txn);
    let took = started.elapsed().as_secs_f64();
    let after = db.stats();
    println!(
        "  {reads} point reads after: {took:.3} s, {:.0} a second ({found} found); beside them: {} idle drains, {} drain chunks ({} on copies), {} pages written back",
        f64::from(u32::try_from(reads)?) / took,
        after.idle_drains - before.idle_drains,
        after.drain_chunks - before.drain_chunks,
        after.drain_chunks_shadowed - before.drain_chunks_shadowed,
        after.pool.pages_written - before.pool.pages_written,
    );
    Ok(())
}

/// With anything buffered, drains it and prints what the drain took: a write transaction's
/// first read drains the buffer (in chunks, then whole), as the idle drain or a checkpoint
/// would after the measured commits.
fn drain_after(
    db: &Db,
    key: &mut impl FnMut() -> [u8; 24],
) -> Result<(), Box<dyn std::error::Error>> {
    if db.stats().write_buffer_bytes == 0 {
        return Ok(());
    }
    let log_before = db.stats().log;
    let drained = Instant::now();
    let mut txn = db.begin()?;
    txn.get(&key())?;
    drop(txn);
    let log = db.stats().log.since(log_before);
    println!(
        "  drain after: {:.3} s, {} log bytes",
        drained.elapsed().as_secs_f64(),
        log.log_bytes
    );
    Ok(())
}

/// As `till bench kv` runs before its no-flush row: 1,000 durable one-row commits, then 100
/// durable transactions of 1,000 rows.
fn batches_first(
    db: &Db,
    key: &mut impl FnMut() -> [u8; 24],
    value: &[u8],
) -> Result<(), Box<dyn std::error::Error>> {
    // As `till bench kv` runs before its no-flush row: 1,000 durable one-row commits,
    // then 100 durable transactions of 1,000 rows.
    for _ in 0..1000 {
        let mut txn = db.begin()?;
        txn.put(&key(), value)?;
        txn.commit()?;
    }
    let started = Instant::now();
    for _ in 0..100 {
        let mut txn = db.begin()?;
        for _ in 0..1000 {
            txn.put(&key(), value)?;
        }
        txn.commit()?;
    }
    println!("  batches first: {:.2} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Prints the longest commit times (a drain at the threshold lands in one commit whole, or is
/// spread over many in chunks: docs/write-buffer.md) and the drain chunks run.
fn print_commit_times(each_took: &mut [std::time::Duration], chunks: u64) {
    each_took.sort_unstable();
    let at = |share: f64| {
        // The index of a quantile of a list of at most a few million: exact in f64.
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "an index below the list's length"
        )]
        let i = ((each_took.len() - 1) as f64 * share) as usize;
        each_took[i].as_secs_f64() * 1e3
    };
    println!(
        "  commit time, ms: p99 {:.3}, p99.9 {:.3}, max {:.3}; drain chunks: {chunks}",
        at(0.99),
        at(0.999),
        at(1.0),
    );
}

/// The options of the run: `till bench kv`'s cache (no page is read back) and the guard and
/// encryption the environment asks for.
fn options() -> Options {
    Options {
        cache_bytes: 4 << 30,
        background_threads: std::env::var_os("TILLDB_NO_BACKGROUND").is_none(),
        torn_page_guard: match std::env::var("TILLDB_GUARD").as_deref() {
            Ok("doublewrite") => tilldb::TornPageGuard::Doublewrite,
            Ok("full-page-images") => tilldb::TornPageGuard::FullPageImages,
            _ => tilldb::TornPageGuard::Auto,
        },
        // `TILLDB_WRITE_BUFFER_BYTES=N`: the write buffer on (docs/write-buffer.md).
        write_buffer_bytes: std::env::var("TILLDB_WRITE_BUFFER_BYTES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        // `TILLDB_ENCRYPT=1`: an encrypted database (its log sealed; docs/encryption.md).
        encryption: (std::env::var("TILLDB_ENCRYPT").as_deref() == Ok("1")).then(|| {
            tilldb::internals::crypt::Encryption {
                provider: std::sync::Arc::new(tilldb::internals::crypt::StaticKey::new(&[7; 32])),
                cipher: tilldb::internals::crypt::Cipher::Aes256Gcm,
            }
        }),
        ..Options::default()
    }
}
