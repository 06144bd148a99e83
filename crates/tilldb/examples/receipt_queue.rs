//! A till's receipts wait in a queue to be printed (or shipped): a table whose keys are
//! increasing numbers, taken from its head inside write transactions (`Txn::pop_first`).
//! Loads ROWS receipts, then takes POPS of them from the head, BATCH pops to a durable
//! transaction, and prints the time per pop over the first and the last tenth of the pops:
//! a pop costs a descent, the same whatever the queue's length and however many pops came
//! before it in its transaction (issue 52).
//!
//! ```sh
//! cargo run --release --example receipt_queue -p tilldb -- [ROWS] [POPS] [BATCH] [DIR]
//! #   default: 1000000 receipts, 100000 pops, 1 pop a transaction, a fresh directory
//! ```
//!
//! `tests/examples.rs` runs it with a few thousand receipts.

use std::path::Path;
use std::time::{Duration, Instant};
use tilldb::{Db, Durability, Options};

/// What one run measured.
#[derive(Debug)]
pub struct Queue {
    /// Receipts taken, each the head of the queue when taken.
    pub popped: u64,
    /// Time per pop (its transaction's commit included, shared by its batch) over the first
    /// and the last tenth of the pops.
    pub first_tenth: Duration,
    pub last_tenth: Duration,
    /// Receipts left, counted.
    pub left: u64,
}

/// The key of receipt `i`: big-endian, so that the queue's order is the receipts'.
#[must_use]
pub fn key(i: u64) -> [u8; 8] {
    let mut key = i.to_le_bytes();
    key.reverse();
    key
}

/// Loads `rows` receipts into `dir`, takes `pops` from the head, `batch` to a transaction
/// (`Sync`), and checks each is the next one.
pub fn run(
    dir: &Path,
    rows: u64,
    pops: u64,
    batch: u64,
    options: Options,
) -> tilldb::Result<Queue> {
    let db = Db::open(dir, options)?;
    let mut txn = db.begin()?;
    for i in 0..rows {
        txn.put_in(
            "receipts",
            &key(i),
            b"a receipt of about forty bytes, printed",
        )?;
    }
    txn.commit()?;
    let tenth = (pops / 10).max(1);
    let (mut first_tenth, mut last_tenth) = (Duration::ZERO, Duration::ZERO);
    let mut popped = 0;
    while popped < pops {
        let started = Instant::now();
        let mut txn = db.begin()?;
        let take = batch.min(pops - popped);
        for _ in 0..take {
            let (k, _) = txn.pop_first_in("receipts")?.ok_or_else(|| {
                tilldb::Error::InvalidArgument(format!("the queue ran dry after {popped} pops"))
            })?;
            assert_eq!(k, key(popped), "a pop took a receipt out of order");
            popped += 1;
        }
        txn.commit_with(Durability::Sync)?;
        let elapsed = started.elapsed();
        if popped <= tenth {
            first_tenth += elapsed;
        } else if popped > pops - tenth {
            last_tenth += elapsed;
        }
    }
    let per_pop = |total: Duration| total / u32::try_from(tenth).unwrap_or(u32::MAX);
    let left = db.len_in("receipts")?;
    db.close()?;
    Ok(Queue {
        popped,
        first_tenth: per_pop(first_tenth),
        last_tenth: per_pop(last_tenth),
        left,
    })
}

#[allow(
    dead_code,
    reason = "tests/examples.rs includes this file without its main"
)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let rows: u64 = args.next().map_or(Ok(1_000_000), |a| a.parse())?;
    let pops: u64 = args.next().map_or(Ok(100_000), |a| a.parse())?;
    let batch: u64 = args.next().map_or(Ok(1), |a| a.parse())?;
    let scratch;
    let dir = if let Some(d) = args.next() {
        std::path::PathBuf::from(d)
    } else {
        scratch = tempfile::tempdir_in(".")?;
        scratch.path().join("till")
    };
    let queue = run(&dir, rows, pops.min(rows), batch.max(1), Options::default())?;
    println!(
        "{} receipts, {} popped ({} a transaction), {} left: {:.1} us a pop over the first \
         tenth, {:.1} us over the last",
        rows,
        queue.popped,
        batch.max(1),
        queue.left,
        queue.first_tenth.as_secs_f64() * 1e6,
        queue.last_tenth.as_secs_f64() * 1e6
    );
    Ok(())
}
