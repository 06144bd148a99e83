//! `till demo DIR`: a point-of-sale load on a database with the change feed on, for `till
//! ship` to carry to the head office (and for its tests to kill).
//!
//! Each transaction is one sale: `sales/<id>` = `amount=<cents>` (ids from 1, going on after
//! the last one, `totals/last`), the running total `totals/all` = `<cents>` read and
//! rewritten in the same transaction, and every tenth sale voids (deletes) the sale five
//! before it and takes its amount off the total. So a copy that missed, repeated or
//! reordered a transaction shows it: its total is not the sum of its sales.
//!
//! `--ack-file F` appends `<id>\n` after each sale's commit returned (at `Sync`: durable), so
//! a test that kills the process knows what was acknowledged (`acks.rs`: one write per line).

use clap::Args;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tilldb::{Db, Options};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// The database directory (created with the change feed on when missing).
    dir: PathBuf,
    /// Sales to make (default: until stopped).
    #[arg(long)]
    sales: Option<u64>,
    /// Sales per second at most (0: as fast as commits go).
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// Append each acknowledged sale's id to this file.
    #[arg(long)]
    ack_file: Option<PathBuf>,
}

/// The key of sale `id`.
pub fn sale_key(id: u64) -> Vec<u8> {
    format!("{id:012}").into_bytes()
}

/// The amount of sale `id`, in cents.
pub fn amount(id: u64) -> u64 {
    100 + (id * 7919) % 9900
}

/// Sale `id`, committed at `Sync` (see the module doc): the sale, the running total, the
/// last id, and every tenth sale voids the one five before it.
pub fn sell(db: &Db, id: u64) -> Result<(), Box<dyn std::error::Error>> {
    let mut txn = db.begin()?;
    let total: u64 = txn
        .get_in("totals", b"all")?
        .map(|v| String::from_utf8_lossy(&v).parse::<u64>())
        .transpose()?
        .unwrap_or(0);
    let mut total = total + amount(id);
    txn.put_in(
        "sales",
        &sale_key(id),
        format!("amount={}", amount(id)).as_bytes(),
    )?;
    if id.is_multiple_of(10) && id > 5 {
        let void = id - 5;
        if txn.get_in("sales", &sale_key(void))?.is_some() {
            txn.delete_in("sales", &sale_key(void))?;
            total -= amount(void);
        }
    }
    txn.put_in("totals", b"all", total.to_string().as_bytes())?;
    txn.put_in("totals", b"last", id.to_string().as_bytes())?;
    txn.commit()?;
    Ok(())
}

pub fn run(args: &DemoArgs) -> Result<(), Box<dyn std::error::Error>> {
    let db = Db::open(
        &args.dir,
        Options {
            change_feed: true,
            ..crate::key::options()?
        },
    )?;
    // The open's cost, for a till's owner and for tests that kill the demo (it must not grow
    // with the number of earlier crashes: `tests/till_life_cli.rs`).
    let recovery = db.recovery();
    println!(
        "till demo: opened {} in {} ms (replayed {} B of log, {} commit records)",
        args.dir.display(),
        recovery.elapsed.as_millis(),
        recovery.log_bytes,
        recovery.records
    );
    std::io::Write::flush(&mut std::io::stdout())?;
    let mut ack = args
        .ack_file
        .as_deref()
        .map(crate::acks::AckFile::open)
        .transpose()?;
    let last = db
        .get_in("totals", b"last")?
        .map(|v| String::from_utf8_lossy(&v).parse::<u64>())
        .transpose()?
        .unwrap_or(0);
    let started = Instant::now();
    let pace = (args.rate > 0.0).then(|| Duration::from_secs_f64(1.0 / args.rate));
    let mut made = 0u64;
    while args.sales.is_none_or(|n| made < n) {
        let id = last + made + 1;
        sell(&db, id)?;
        if let Some(acks) = &mut ack {
            acks.ack(id)?;
        }
        made += 1;
        if let Some(pace) = pace {
            let due = started + pace * u32::try_from(made).unwrap_or(u32::MAX);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
        }
    }
    println!(
        "till demo: {made} sales in {:.1} s into {}",
        started.elapsed().as_secs_f64(),
        args.dir.display()
    );
    db.close()?;
    Ok(())
}
