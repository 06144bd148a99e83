//! `till ship DIR --to postgresql://...`: follows a database's change feed and applies each
//! committed transaction to PostgreSQL exactly once.
//!
//! ## Mapping (in PostgreSQL)
//!
//! ```text
//! tilldb_watermark (till_id text primary key, lsn bigint, shipped_at timestamptz)
//! tilldb_<table>   (till_id text, key bytea, value bytea, lsn bigint, primary key (till_id, key))
//! ```
//!
//! One table per tilldb table, named `tilldb_` + the table's name (`tilldb_default` for the
//! default table; names are quoted, and a name PostgreSQL cannot hold is refused). A put
//! upserts `(till_id, key)` with the value and the lsn of the transaction that wrote it; a
//! delete deletes the row.
//!
//! ## Exactly once
//!
//! Each PostgreSQL transaction holds whole tilldb transactions (up to `--batch` of them, in
//! commit order) and moves the till's watermark to the last one's lsn. It first locks the
//! watermark row (`SELECT ... FOR UPDATE`) and skips every tilldb transaction at or below it,
//! so a shipper killed at any moment, a PostgreSQL restarted at any moment, or two shippers
//! of one till at once never apply a transaction twice, and a restarted shipper resumes after
//! the watermark. The feed returns only commits the till made durable, so PostgreSQL never
//! holds a sale the till could lose. After each batch the shipper acknowledges the
//! watermark to its feed consumer (`--consumer`), so the till keeps its log until shipped
//! (up to `Options::feed_retention_bytes`).

use clap::Args;
use postgres::{Client, NoTls, Transaction};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tilldb::Lsn;
use tilldb::feed::{Feed, FeedTxn};

#[derive(Args, Debug)]
pub struct ShipArgs {
    /// The database directory of the till.
    dir: PathBuf,
    /// PostgreSQL connection URL, e.g. `postgresql://user@host:5432/headoffice`.
    #[arg(long)]
    to: String,
    /// This till's id in PostgreSQL (default: the machine's host name).
    #[arg(long)]
    till_id: Option<String>,
    /// The feed consumer this shipper acknowledges as (it holds the till's log until
    /// shipped).
    #[arg(long, default_value = "ship")]
    consumer: String,
    /// Most tilldb transactions per PostgreSQL transaction.
    #[arg(long, default_value_t = 256)]
    batch: usize,
    /// Ship what is there, then exit (default: follow until stopped).
    #[arg(long)]
    once: bool,
    /// Seconds between progress lines.
    #[arg(long, default_value_t = 5.0)]
    report_seconds: f64,
}

/// The PostgreSQL table of tilldb table `table`.
fn pg_table(table: &str) -> Result<String, String> {
    let name = if table.is_empty() {
        "tilldb_default".to_string()
    } else {
        format!("tilldb_{table}")
    };
    // PostgreSQL truncates identifiers past 63 bytes: two tables could become one.
    if name.len() > 63 || name.contains('\0') {
        return Err(format!(
            "tilldb table {table:?} cannot be a PostgreSQL table name (at most 56 bytes, no NUL)"
        ));
    }
    Ok(format!("\"{}\"", name.replace('"', "\"\"")))
}

/// What the shipper did, for progress lines and tests.
#[derive(Debug, Default, Clone, Copy)]
struct Shipped {
    transactions: u64,
    batches: u64,
    skipped: u64,
}

pub fn run(args: &ShipArgs) -> Result<(), Box<dyn std::error::Error>> {
    if args.batch == 0 {
        return Err("--batch must be at least 1".into());
    }
    let till_id = args
        .till_id
        .clone()
        .unwrap_or_else(crate::platform::host_name);
    let mut totals = Shipped::default();
    let mut backoff = Duration::from_millis(100);
    loop {
        match ship(args, &till_id, &mut totals) {
            Ok(()) => return Ok(()),
            Err(Failure::Fatal(e)) => return Err(e.into()),
            Err(Failure::Retry(e)) => {
                eprintln!("till ship: {e}; retrying in {} ms", backoff.as_millis());
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// Why shipping stopped: for good, or until PostgreSQL answers again.
enum Failure {
    Fatal(String),
    Retry(String),
}

impl From<postgres::Error> for Failure {
    fn from(e: postgres::Error) -> Self {
        // A refused statement (a constraint, a permission) will be refused again: fatal.
        // Anything without a database error code is the connection: retry.
        match e.code() {
            Some(code) if !is_transient(code) => Failure::Fatal(format!("PostgreSQL: {e}")),
            _ => Failure::Retry(format!("PostgreSQL: {e}")),
        }
    }
}

/// Errors a later attempt may not meet: shutdown, connection and serialization trouble.
fn is_transient(code: &postgres::error::SqlState) -> bool {
    let code = code.code();
    code.starts_with("08") || code.starts_with("57") || code == "40001" || code == "40P01"
}

impl From<tilldb::Error> for Failure {
    fn from(e: tilldb::Error) -> Self {
        Failure::Fatal(e.to_string())
    }
}

/// Connects, resumes after the watermark and ships until caught up (`--once`) or failed.
fn ship(args: &ShipArgs, till_id: &str, totals: &mut Shipped) -> Result<(), Failure> {
    let mut client = Client::connect(&args.to, NoTls)?;
    client.batch_execute(
        "CREATE TABLE IF NOT EXISTS tilldb_watermark (
             till_id text PRIMARY KEY,
             lsn bigint NOT NULL,
             shipped_at timestamptz NOT NULL DEFAULT now())",
    )?;
    let watermark = watermark(&mut client, till_id)?;
    let mut feed = Feed::open_consumer(&args.dir, &args.consumer)?;
    // The consumer acknowledges only what PostgreSQL committed: it can never be ahead.
    if let Some(watermark) = watermark
        && feed.position() > watermark
    {
        return Err(Failure::Fatal(format!(
            "PostgreSQL's watermark for till {till_id} (lsn {}) is behind what this till's \
             feed consumer {:?} acknowledged (lsn {}): PostgreSQL lost shipped transactions \
             (restored from a backup?); re-register the consumer and resynchronise this till",
            watermark.0,
            args.consumer,
            feed.position().0
        )));
    }
    println!(
        "till ship: till {till_id} from {} to PostgreSQL, after lsn {}",
        args.dir.display(),
        watermark.map_or(0, |w| w.0)
    );
    let mut created: BTreeSet<String> = BTreeSet::new();
    let mut last_report = Instant::now();
    let report_every = Duration::from_secs_f64(args.report_seconds.max(0.1));
    loop {
        let mut batch: Vec<FeedTxn> = Vec::new();
        let wait = if args.once {
            Duration::from_millis(200)
        } else {
            Duration::from_millis(500)
        };
        while batch.len() < args.batch {
            let next = feed.next(if batch.is_empty() {
                wait
            } else {
                Duration::ZERO
            })?;
            match next {
                Some(txn) => batch.push(txn),
                None => break,
            }
        }
        if batch.is_empty() {
            if args.once {
                println!(
                    "till ship: caught up: {} transactions in {} PostgreSQL transactions \
                     ({} already there), watermark lsn {}",
                    totals.transactions,
                    totals.batches,
                    totals.skipped,
                    feed.position().0
                );
                return Ok(());
            }
            continue;
        }
        for txn in &batch {
            for change in &txn.changes {
                if !created.contains(&change.table) {
                    create_table(&mut client, &change.table)?;
                    created.insert(change.table.clone());
                }
            }
        }
        let last = batch.last().expect("not empty").lsn;
        let mut pg = client.transaction()?;
        let applied = apply(&mut pg, till_id, &batch)?;
        pg.commit()?;
        totals.transactions += applied;
        totals.skipped += batch.len() as u64 - applied;
        totals.batches += 1;
        feed.acknowledge(last)?;
        if last_report.elapsed() >= report_every {
            last_report = Instant::now();
            println!(
                "till ship: {} transactions shipped, watermark lsn {}, lag {} bytes of log",
                totals.transactions,
                last.0,
                durable_lag(&args.dir, last)
            );
        }
    }
}

/// How far the till's durable log is ahead of `shipped`, in bytes (0 when unknown).
fn durable_lag(dir: &std::path::Path, shipped: Lsn) -> u64 {
    tilldb::feed::published_durable(dir)
        .ok()
        .flatten()
        .map_or(0, |durable| durable.0.saturating_sub(shipped.0))
}

/// The till's watermark: the lsn after the last transaction PostgreSQL holds, if any.
fn watermark(client: &mut Client, till_id: &str) -> Result<Option<Lsn>, Failure> {
    let row = client.query_opt(
        "SELECT lsn FROM tilldb_watermark WHERE till_id = $1",
        &[&till_id],
    )?;
    Ok(row.map(|r| Lsn(lsn_of(r.get::<_, i64>(0)))))
}

fn lsn_of(value: i64) -> u64 {
    u64::try_from(value).expect("lsns below 2^62 are stored as non-negative bigints")
}

fn pg_lsn(lsn: Lsn) -> i64 {
    i64::try_from(lsn.0).expect("lsns stay below 2^62")
}

fn create_table(client: &mut Client, table: &str) -> Result<(), Failure> {
    let name = pg_table(table).map_err(Failure::Fatal)?;
    client.batch_execute(&format!(
        "CREATE TABLE IF NOT EXISTS {name} (
             till_id text NOT NULL,
             key bytea NOT NULL,
             value bytea NOT NULL,
             lsn bigint NOT NULL,
             PRIMARY KEY (till_id, key))"
    ))?;
    Ok(())
}

/// Applies the transactions of `batch` above the till's watermark and moves the watermark
/// to the last; returns how many were applied. The caller commits.
fn apply(pg: &mut Transaction<'_>, till_id: &str, batch: &[FeedTxn]) -> Result<u64, Failure> {
    let locked = pg.query_opt(
        "SELECT lsn FROM tilldb_watermark WHERE till_id = $1 FOR UPDATE",
        &[&till_id],
    )?;
    let watermark = Lsn(locked.map_or(0, |r| lsn_of(r.get::<_, i64>(0))));
    let mut applied = 0;
    for txn in batch.iter().filter(|t| t.lsn > watermark) {
        let lsn = pg_lsn(txn.lsn);
        for change in &txn.changes {
            let table = pg_table(&change.table).map_err(Failure::Fatal)?;
            match &change.value {
                Some(value) => pg.execute(
                    &format!(
                        "INSERT INTO {table} (till_id, key, value, lsn) VALUES ($1, $2, $3, $4)
                         ON CONFLICT (till_id, key)
                         DO UPDATE SET value = EXCLUDED.value, lsn = EXCLUDED.lsn"
                    ),
                    &[&till_id, &change.key, value, &lsn],
                )?,
                None => pg.execute(
                    &format!("DELETE FROM {table} WHERE till_id = $1 AND key = $2"),
                    &[&till_id, &change.key],
                )?,
            };
        }
        applied += 1;
    }
    let last = batch.last().expect("a batch is not empty").lsn;
    if last > watermark {
        pg.execute(
            "INSERT INTO tilldb_watermark (till_id, lsn) VALUES ($1, $2)
             ON CONFLICT (till_id) DO UPDATE SET lsn = EXCLUDED.lsn, shipped_at = now()",
            &[&till_id, &pg_lsn(last)],
        )?;
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_map_quoted_and_too_long_ones_are_refused() {
        assert_eq!(pg_table("").as_deref(), Ok("\"tilldb_default\""));
        assert_eq!(pg_table("sales").as_deref(), Ok("\"tilldb_sales\""));
        assert_eq!(pg_table("a\"b").as_deref(), Ok("\"tilldb_a\"\"b\""));
        assert!(pg_table(&"x".repeat(57)).is_err());
        assert!(pg_table(&"x".repeat(56)).is_ok());
    }
}
