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
//!
//! ## Never silent
//!
//! Before writing anything, to the till or to PostgreSQL, it compares the consumer's
//! position with PostgreSQL's watermark and refuses when they disagree (`positions.rs`: a
//! head office that never got what the consumer acknowledged would otherwise be told
//! "caught up"). Every failure ends the process with an exit status that says which kind it
//! is (`exit.rs`, and the table in `docs/feed.md`), and every PostgreSQL error prints the
//! server's message and SQLSTATE. PostgreSQL being away is retried with backoff: forever
//! while following, `--retries` times (default 4) with `--once`.

mod exit;
mod pg;
mod positions;
#[cfg(all(test, unix))]
mod proof;
mod resync;
mod till;
#[cfg(all(test, unix))]
mod year;

use clap::Args;
use exit::{Exit, Failure};
use positions::{Names, Positions};
use postgres::{Config, NoTls};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;
use std::time::{Duration, Instant};
use till::Till;
use tilldb::Lsn;
use tilldb::feed::{Feed, FeedTxn};

/// Transient failures in a row `--once` retries before it gives up (exit status 5): with the
/// backoff from 100 ms, about 1.5 s of trying.
const ONCE_RETRIES_DEFAULT: u32 = 4;
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

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
    /// Transient failures (PostgreSQL unreachable or restarting) retried in a row before
    /// giving up with exit status 5. Default: 4 with `--once`, no limit otherwise.
    #[arg(long)]
    retries: Option<u32>,
    /// First ship the till's whole current state from one snapshot (every table's live
    /// rows, and deletes of the keys PostgreSQL holds for this till that the till no longer
    /// has), with the watermark at the snapshot's lsn, then follow the feed from there. For
    /// what a refusal (exit status 3) names; the database must not be open elsewhere.
    #[arg(long)]
    resync: bool,
    /// Seconds between progress lines.
    #[arg(long, default_value_t = 5.0)]
    report_seconds: f64,
    /// How long `--once` waits for one more transaction before it says caught up (a till
    /// being written publishes its durable end every few milliseconds). Not a flag: the
    /// year-long test, whose till is closed while it ships, waits for nothing.
    #[arg(skip = Duration::from_millis(200))]
    once_wait: Duration,
}

/// What the shipper did, for progress lines and tests.
#[derive(Debug, Default, Clone, Copy)]
struct Shipped {
    transactions: u64,
    batches: u64,
    skipped: u64,
}

/// Runs `till ship`; the exit status says how it ended (`exit.rs`).
pub fn main(args: &ShipArgs) -> ExitCode {
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("till ship: {}", failure.message);
            ExitCode::from(failure.exit.code())
        }
    }
}

fn run(args: &ShipArgs) -> Result<(), Failure> {
    if args.batch == 0 {
        return Err(Failure::new(Exit::Usage, "--batch must be at least 1"));
    }
    // A URL that does not parse never will: no retry. The message leaves the URL out, as it
    // may hold a password.
    let config = Config::from_str(&args.to).map_err(|e| {
        Failure::new(
            Exit::Usage,
            format!(
                "--to is not a PostgreSQL connection URL ({}); expected \
                 postgresql://user@host:5432/database",
                exit::describe(&e)
            ),
        )
    })?;
    let till_id = args
        .till_id
        .clone()
        .unwrap_or_else(crate::platform::host_name);
    let retries_max = args.retries.or(args.once.then_some(ONCE_RETRIES_DEFAULT));
    let mut totals = Shipped::default();
    // An encrypted till's feed is read with its key (--key-file, TILLDB_KEY_FILE, TILLDB_KEY).
    let encryption =
        crate::key::encryption().map_err(|e| Failure::new(Exit::Usage, e.to_string()))?;
    let till = Till::on_files(&args.dir).with_key(encryption);
    if args.resync {
        with_retries(retries_max, &mut totals, |_| {
            resync::resync(&till, args, &config, &till_id)
        })?;
    }
    with_retries(retries_max, &mut totals, |totals| {
        ship(&till, args, &config, &till_id, totals)
    })
}

/// Runs `attempt` until it succeeds, fails for good, or failed transiently `retries_max`
/// times in a row (`None`: until stopped), with backoff between attempts. An attempt that
/// shipped a batch before failing starts the count again.
fn with_retries(
    retries_max: Option<u32>,
    totals: &mut Shipped,
    mut attempt: impl FnMut(&mut Shipped) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let mut backoff = BACKOFF_FIRST;
    let mut retries = 0u32;
    loop {
        let batches_before = totals.batches;
        let failure = match attempt(totals) {
            Ok(()) => return Ok(()),
            Err(failure) if !failure.is_transient() => return Err(failure),
            Err(failure) => failure,
        };
        if totals.batches > batches_before {
            retries = 0;
            backoff = BACKOFF_FIRST;
        }
        if let Some(max) = retries_max
            && retries >= max
        {
            return Err(Failure::new(
                failure.exit,
                format!("{}; gave up after {retries} retries", failure.message),
            ));
        }
        retries += 1;
        eprintln!(
            "till ship: {}; retrying in {} ms",
            failure.message,
            backoff.as_millis()
        );
        std::thread::sleep(backoff);
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// Where the till stands: its feed's start, and the shipper's consumer (read-only: a
/// refusal must not register it). The caller adds the watermark and the durable end.
fn till_positions(till: &Till, consumer: &str) -> Result<Positions, Failure> {
    let start = till.start()?;
    let state = till.consumers()?.into_iter().find(|c| c.name == consumer);
    Ok(Positions {
        start,
        consumer: state.as_ref().map(|c| c.position),
        dropped: state.and_then(|c| c.dropped),
        durable: None,
        watermark: None,
    })
}

/// The durable lsn the till's writer published; `None` when it cannot be read. The writer
/// rewrites those 16 bytes in place, so a read may catch half a write (its checksum fails)
/// and is tried again, as the feed's own reader does; the check it serves is skipped, not
/// failed, when the file stays unreadable.
fn published_durable(till: &Till) -> Option<Lsn> {
    for _ in 0..4 {
        match till.published_durable() {
            Ok(durable) => return durable,
            Err(_) => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    None
}

/// Connects, checks the positions, resumes after the watermark and ships until caught up
/// (`--once`) or failed.
fn ship(
    till: &Till,
    args: &ShipArgs,
    config: &Config,
    till_id: &str,
    totals: &mut Shipped,
) -> Result<(), Failure> {
    // The consumer, then the watermark, then the till's durable end: each can only have
    // moved up to the next by the time it is read (see `positions.rs`).
    let mut positions = till_positions(till, &args.consumer)?;
    let mut client = config.connect(NoTls)?;
    positions.watermark = pg::watermark(&mut client, till_id)?;
    positions.durable = published_durable(till);
    positions::decide(
        &positions,
        &Names {
            till_id,
            consumer: &args.consumer,
        },
    )?;
    // The consumer first: it refuses (a feed that released the log a new consumer needs)
    // before PostgreSQL gets so much as a table.
    let mut feed = till.open_consumer(&args.consumer)?;
    pg::create_watermark_table(&mut client)?;
    println!(
        "till ship: till {till_id} from {} to PostgreSQL, after lsn {}",
        args.dir.display(),
        positions.watermark.map_or(0, |w| w.0)
    );
    let mut created: BTreeSet<String> = BTreeSet::new();
    let mut last_report = Instant::now();
    let report_every = Duration::from_secs_f64(args.report_seconds.max(0.1));
    loop {
        let batch = next_batch(&mut feed, args)?;
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
                    pg::create_table(&mut client, &change.table)?;
                    created.insert(change.table.clone());
                }
            }
        }
        let last = batch.last().expect("not empty").lsn;
        let mut txn = client.transaction()?;
        let applied = pg::apply(&mut txn, till_id, &batch)?;
        if tilldb::mutants::active("ship-ack-before-commit") {
            feed.acknowledge(last)?;
        }
        // Only after PostgreSQL's commit: an acknowledged position lets the till reuse its
        // log, and one past the watermark is a refusal at the next start (`proof.rs`).
        txn.commit()?;
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
                durable_lag(till, last)
            );
        }
    }
}

/// Up to `--batch` transactions: waits for the first, takes what is there after it.
fn next_batch(feed: &mut Feed, args: &ShipArgs) -> Result<Vec<FeedTxn>, Failure> {
    let wait = if args.once {
        args.once_wait
    } else {
        Duration::from_millis(500)
    };
    let mut batch: Vec<FeedTxn> = Vec::new();
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
    assert!(batch.len() <= args.batch);
    Ok(batch)
}

/// How far the till's durable log is ahead of `shipped`, in bytes (0 when unknown).
fn durable_lag(till: &Till, shipped: Lsn) -> u64 {
    published_durable(till).map_or(0, |durable| durable.0.saturating_sub(shipped.0))
}
