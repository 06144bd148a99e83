//! Reads alone, for profiling (`perf record`) and for comparing two builds run by turns:
//! loads ROWS rows (24-byte random keys, 150-byte values, one transaction), then in one
//! `ReadTxn` reads ROWS x 5 ranges of 10 entries (`Range::next_entry`), ROWS x 10 point
//! reads of random loaded keys (`get`) and as many lent (`get_with`), then as many lent point
//! reads spread over THREADS threads, each with its own `ReadTxn`, printing each rate. The
//! database is made in DIR and removed. `READ_PROFILE_PHASES=ranges,gets,lent,threads` (any of
//! them) runs only those, for a profile of one.
//!
//! ```sh
//! cargo run --release -p tilldb --example read_profile -- [ROWS] [DIR] [CACHE_MIB] [THREADS]
//! # defaults: 200000 rows, ./tilldb-read-profile, Options::default()'s cache, 32 threads
//! ```
//!
//! `TILLDB_ENCRYPT=1` encrypts the database; with a small `CACHE_MIB` most reads open a page.
//! `TILLDB_WRITE_BUFFER_BYTES=N` turns the write buffer on (docs/write-buffer.md) and
//! `READ_PROFILE_BUFFERED=K` makes K one-row `Buffered` commits of new keys after the load, so
//! that the reads merge a buffer of K keys; the background threads are then off, so that the
//! checkpoint thread's idle drain (docs/write-buffer.md) does not empty it before they read.
//!
//! `till bench kv` is the benchmark of record (every engine side by side); this is its read
//! rows without the rest, long enough for a profile (docs/benchmarks-journal.md, "Range reads copy
//! what they yield" and "Search hints").

use std::ops::Bound;
use std::path::PathBuf;
use std::time::Instant;
use tilldb::{Db, Direction, Options};

/// `Options::default()`, encrypted when `TILLDB_ENCRYPT=1` (docs/encryption.md): a read that
/// misses the cache then opens its page.
fn options() -> Options {
    Options {
        encryption: (std::env::var("TILLDB_ENCRYPT").as_deref() == Ok("1")).then(|| {
            tilldb::internals::crypt::Encryption {
                provider: std::sync::Arc::new(tilldb::internals::crypt::StaticKey::new(&[7; 32])),
                cipher: tilldb::internals::crypt::Cipher::Aes256Gcm,
            }
        }),
        // Reads through a buffer: no idle drain may empty it first.
        background_threads: std::env::var("READ_PROFILE_BUFFERED")
            .map_or(true, |k| k.trim() == "0"),
        ..Options::default()
    }
}

/// With `TILLDB_WRITE_BUFFER_BYTES` set, turns the write buffer on; then makes
/// `READ_PROFILE_BUFFERED` one-row `Buffered` commits of new random keys.
fn buffer_commits(
    db: &Db,
    next: &mut impl FnMut() -> u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let env_number = |name: &str| {
        std::env::var(name)
            .ok()
            .map(|s| s.parse::<u64>())
            .transpose()
    };
    if let Some(bytes) = env_number("TILLDB_WRITE_BUFFER_BYTES")? {
        db.set_write_buffer_bytes(bytes)?;
    }
    for _ in 0..env_number("READ_PROFILE_BUFFERED")?.unwrap_or(0) {
        let mut txn = db.begin()?;
        let mut key = [0u8; 24];
        for part in key.chunks_mut(8) {
            part.copy_from_slice(&next().to_le_bytes());
        }
        txn.put(&key, &[9u8; 150])?;
        txn.commit_with(tilldb::Durability::Buffered)?;
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let rows: usize = args.next().map_or(Ok(200_000), |s| s.parse())?;
    let dir = PathBuf::from(
        args.next()
            .unwrap_or_else(|| "tilldb-read-profile".to_owned()),
    );
    let cache_mib: Option<u64> = args.next().map(|s| s.parse()).transpose()?;
    let threads: usize = args.next().map_or(Ok(32), |s| s.parse())?;
    let phases = std::env::var("READ_PROFILE_PHASES").ok();
    let phase = |name: &str| {
        phases
            .as_ref()
            .is_none_or(|p| p.split(',').any(|p| p == name))
    };
    if dir.exists() {
        return Err(format!("{} exists: give a directory that does not", dir.display()).into());
    }
    let mut seed = 0x1234_5678_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let keys: Vec<[u8; 24]> = (0..rows)
        .map(|_| {
            let mut key = [0u8; 24];
            for part in key.chunks_mut(8) {
                part.copy_from_slice(&next().to_le_bytes());
            }
            key
        })
        .collect();
    let pick = |n: u64| &keys[usize::try_from(n % rows as u64).expect("an index")];
    let mut options = options();
    if let Some(mib) = cache_mib {
        options.cache_bytes = mib << 20;
    }
    let db = Db::open(&dir, options)?;
    let started = Instant::now();
    let mut txn = db.begin()?;
    for key in &keys {
        txn.put(key, &[7u8; 150])?;
    }
    txn.commit()?;
    println!("load: {:.0} rows/s", per_second(rows, started));
    buffer_commits(&db, &mut next)?;
    let read = db.begin_read()?;
    if phase("ranges") {
        let (ranges, started) = (rows * 5, Instant::now());
        let mut entries = 0u64;
        for _ in 0..ranges {
            let mut range = read.range(
                Bound::Included(pick(next())),
                Bound::Unbounded,
                Direction::Forward,
            )?;
            for _ in 0..10 {
                let Some(entry) = range.next_entry() else {
                    break;
                };
                let (key, value) = entry?;
                assert!(!key.is_empty() && !value.is_empty(), "an empty entry");
                entries += 1;
            }
        }
        println!(
            "ranges of 10: {:.0} ranges/s ({entries} entries)",
            per_second(ranges, started)
        );
    }
    if phase("gets") {
        let (gets, started) = (rows * 10, Instant::now());
        let mut found = 0u64;
        for _ in 0..gets {
            found += u64::from(read.get(pick(next()))?.is_some());
        }
        println!(
            "point reads: {:.0} reads/s ({found} found)",
            per_second(gets, started)
        );
    }
    if phase("lent") {
        let (gets, started) = (rows * 10, Instant::now());
        let mut found = 0u64;
        for _ in 0..gets {
            found += u64::from(read.get_with(pick(next()), <[u8]>::len)?.is_some());
        }
        println!(
            "point reads lent (get_with): {:.0} reads/s ({found} found)",
            per_second(gets, started)
        );
    }
    drop(read);
    if phase("threads") {
        threaded_reads(&db, &keys, threads)?;
    }
    db.close()?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// `keys.len() x 10` lent point reads of random `keys`, spread over `threads` threads, each
/// with its own `ReadTxn`.
fn threaded_reads(db: &Db, keys: &[[u8; 24]], threads: usize) -> Result<(), tilldb::Error> {
    let rows = keys.len();
    let (gets, started) = (rows * 10, Instant::now());
    let found: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || -> Result<u64, tilldb::Error> {
                    let read = db.begin_read()?;
                    let mut seed = 0x9E37_79B9_u64 + t as u64;
                    let mut found = 0;
                    for _ in 0..gets / threads {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        let key = &keys[usize::try_from(seed % rows as u64).expect("an index")];
                        found += u64::from(read.get_with(key, <[u8]>::len)?.is_some());
                    }
                    Ok(found)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a reader panicked"))
            .sum::<Result<u64, _>>()
    })?;
    println!(
        "point reads lent, {threads} threads: {:.0} reads/s ({found} found)",
        per_second(gets, started)
    );
    Ok(())
}

/// `n` operations since `started`, per second.
fn per_second(n: usize, started: Instant) -> f64 {
    f64::from(u32::try_from(n).unwrap_or(u32::MAX)) / started.elapsed().as_secs_f64()
}
