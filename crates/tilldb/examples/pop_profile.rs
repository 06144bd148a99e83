//! A write transaction's pops and retain alone, for profiling (`perf record`) and for comparing
//! two builds run by turns: loads ROWS rows (24-byte random keys, 150-byte values, one
//! transaction, a 4 GiB cache as `till bench kv` gives every engine), then in one durable
//! transaction either POPS pops, first and last by turns (`pops`), a retain of half the
//! table (`retain`), or POPS puts of increasing keys above every key (`sorted`, `till bench
//! kv`'s sorted load), and prints the time of the reads (for `sorted`: the puts) and of the
//! commit apart.
//!
//! ```sh
//! cargo run --release -p tilldb --example pop_profile -- [pops|retain|sorted] [POPS] [ROWS] [DIR]
//! # defaults: pops, 10000 pops, 1000000 rows, ./tilldb-pop-profile
//! ```
//!
//! `TILLDB_REMOVE_HALF=1` first removes half the rows in one transaction and checkpoints, as
//! `till bench kv` leaves its table before these rows.
//!
//! `TILLDB_PAUSE_MS=N` waits N ms before the rows, to attach `perf record -p` to them alone.
//!
//! `till bench kv` is the benchmark of record (its pops and retain rows, every engine).

use std::path::PathBuf;
use std::time::Instant;
use tilldb::{Db, Options};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "pops".to_owned());
    if !["pops", "retain", "sorted"].contains(&mode.as_str()) {
        return Err(format!("mode {mode:?}: pops, retain or sorted").into());
    }
    let pops: u64 = args.next().map_or(Ok(10_000), |s| s.parse())?;
    let rows: u64 = args.next().map_or(Ok(1_000_000), |s| s.parse())?;
    let dir = PathBuf::from(
        args.next()
            .unwrap_or_else(|| "tilldb-pop-profile".to_owned()),
    );
    if dir.exists() {
        return Err(format!("{} exists: give a directory that does not", dir.display()).into());
    }
    let db = Db::open(
        &dir,
        Options {
            cache_bytes: 4 << 30,
            ..Options::default()
        },
    )?;
    let started = Instant::now();
    let mut state: u64 = 0x1234_5678;
    let mut txn = db.begin()?;
    for _ in 0..rows {
        let mut key = [0u8; 24];
        for chunk in key.chunks_mut(8) {
            // xorshift64: the same keys every run.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            chunk.copy_from_slice(&state.to_le_bytes());
        }
        txn.put(&key, &[7u8; 150])?;
    }
    txn.commit()?;
    println!("load: {rows} rows in {:.0} ms", ms(started));
    if std::env::var_os("TILLDB_REMOVE_HALF").is_some() {
        // As `till bench kv` leaves the table before its pops: half the rows removed in one
        // transaction, then a checkpoint.
        let started = Instant::now();
        let mut txn = db.begin()?;
        txn.retain(|key, _| key[1] & 1 == 0)?;
        txn.commit()?;
        db.checkpoint()?;
        println!("half removed and a checkpoint: {:.0} ms", ms(started));
    }
    if let Some(pause) = std::env::var_os("TILLDB_PAUSE_MS") {
        // Time to attach a profiler to the rows alone (`perf record -p`).
        let pause: u64 = pause.to_str().and_then(|s| s.parse().ok()).unwrap_or(0);
        println!("pausing {pause} ms (pid {})", std::process::id());
        std::thread::sleep(std::time::Duration::from_millis(pause));
    }
    let started = Instant::now();
    let mut txn = db.begin()?;
    let done = if mode == "pops" {
        let mut taken = 0u64;
        for i in 0..pops {
            let popped = if i % 2 == 0 {
                txn.pop_first()?
            } else {
                txn.pop_last()?
            };
            taken += u64::from(popped.is_some());
        }
        taken
    } else if mode == "sorted" {
        // Keys from 0xFF on, above every loaded key but one in 2^64 (as `till bench kv`'s),
        // in increasing order; values of bytes that differ key to key.
        for i in 0..pops {
            let mut key = [0xFFu8; 24];
            for (b, byte) in key[8..16].iter_mut().enumerate() {
                // Most significant byte first: increasing numbers, increasing keys.
                *byte = u8::try_from((i >> (56 - 8 * b)) & 0xFF).expect("a byte");
            }
            let value: Vec<u8> = (0..150u64)
                .map(|j| {
                    u8::try_from(i.wrapping_mul(31).wrapping_add(j * 7) % 251).expect("a byte")
                })
                .collect();
            txn.put(&key, &value)?;
        }
        pops
    } else {
        txn.retain(|key, _| key[0] & 1 == 0)?;
        rows
    };
    let reads = ms(started);
    let committing = Instant::now();
    txn.commit()?;
    let commit = ms(committing);
    let total = started.elapsed().as_secs_f64();
    #[expect(clippy::cast_precision_loss, reason = "a rate")]
    let rate = done as f64 / total;
    println!(
        "{mode}: {done} in {reads:.1} ms of reads and {commit:.1} ms of commit: {rate:.0}/s \
         (for retain: rows read)"
    );
    db.close()?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}
