//! A point-of-sale till: every sale is one durable transaction that appends the sale and
//! updates the day's running total, so a power cut after "sale recorded" never loses it and
//! never leaves a sale without its total. Reopening the database (recovery runs if the till
//! was not closed) finds the total equal to the sum of the sales.
//!
//! ```sh
//! cargo run --example till_sales -p tilldb [DIR]   # default: a fresh directory under /tmp
//! ```
//!
//! `tests/examples.rs` runs it.

use std::ops::Bound;
use std::path::Path;
use tilldb::{Db, Direction, Options};

/// Records `sales` sales in the database in `dir`, closes it, reopens it and returns the
/// day's total in cents, checked against the sum of the sale rows.
pub fn run(dir: &Path, sales: u32) -> tilldb::Result<u64> {
    let db = Db::open(dir, Options::default())?;
    for n in 1..=sales {
        let cents = u64::from(n % 7 + 1) * 250;
        let mut txn = db.begin()?;
        let total = txn
            .get_in("totals", b"today")?
            .map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap_or([0; 8])));
        txn.put_in(
            "sales",
            format!("sale-{n:06}").as_bytes(),
            &cents.to_le_bytes(),
        )?;
        txn.put_in("totals", b"today", &(total + cents).to_le_bytes())?;
        txn.commit()?; // Sync: the sale is on the device when this returns
    }
    db.close()?;

    let db = Db::open(dir, Options::default())?;
    let snap = db.begin_read()?;
    let rows = snap.scan_in(
        "sales",
        Bound::Unbounded,
        Bound::Unbounded,
        Direction::Forward,
    )?;
    let summed: u64 = rows
        .iter()
        .map(|(_, v)| u64::from_le_bytes(v.as_slice().try_into().unwrap_or([0; 8])))
        .sum();
    let total = snap
        .get_in("totals", b"today")?
        .map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap_or([0; 8])));
    assert_eq!(total, summed, "the running total and the sales disagree");
    drop(snap);
    db.close()?;
    Ok(total)
}

#[allow(
    dead_code,
    reason = "tests/examples.rs includes this file and calls run()"
)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args_os().nth(1).map_or_else(
        || std::env::temp_dir().join(format!("tilldb-till-sales-{}", std::process::id())),
        std::path::PathBuf::from,
    );
    let total = run(&dir, 100)?;
    println!(
        "100 sales recorded in {}; the day's total is {}.{:02}",
        dir.display(),
        total / 100,
        total % 100
    );
    Ok(())
}
