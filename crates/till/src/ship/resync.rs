//! `till ship --resync`: ships the till's whole current state from one snapshot, then the
//! feed from that snapshot's lsn on.
//!
//! For a head office that lacks what the till's consumer acknowledged (restored from a
//! backup, a new head office, a new till id), for a consumer the till dropped, and for a
//! feed that released log nobody consumed. In one PostgreSQL transaction, holding the
//! watermark row's lock (`pg::lock_watermark`): every table's live rows upserted, the keys
//! PostgreSQL holds for this till that the till no longer has deleted (in tables the till
//! dropped too), and the watermark set to the snapshot's lsn. Then the consumer is
//! registered at that lsn (`tilldb::feed::register_consumer`) and shipping goes on from it,
//! so every transaction reaches PostgreSQL once: those up to the lsn inside the snapshot,
//! those after it from the feed.
//!
//! ## Why the database must not be open elsewhere
//!
//! The snapshot and its lsn must match: every commit up to the lsn in it, none after. The
//! public API gives a consistent snapshot only to the process that opens the database
//! (`Db::begin_read`, and `Db::open` is exclusive), and tells no snapshot's lsn. So `--resync`
//! opens the database itself: no other process commits while it is open, so its snapshot
//! holds every commit in the log, and the durable lsn the open publishes
//! (`feed::published_durable`) is the log's end, a position the feed can start from (checked:
//! the feed opened there has nothing after it). When the till's application holds the
//! database, it refuses (exit status 6) and changes nothing. A resync beside a live writer
//! needs the engine to tell a read snapshot's lsn, which it does not yet.

use super::exit::{Exit, Failure};
use super::till::Till;
use super::{ShipArgs, pg};
use postgres::{Config, NoTls};
use std::ops::Bound;
use std::time::{Duration, Instant};
use tilldb::{Db, Direction, Lsn, Options, ReadTxn};

/// Ships the till's current state (see the module doc); the watermark and the consumer are
/// then at the snapshot's lsn.
pub fn resync(till: &Till, args: &ShipArgs, config: &Config, till_id: &str) -> Result<(), Failure> {
    let started = Instant::now();
    let db = open_alone(till)?;
    let lsn = snapshot_lsn(till)?;
    let read = db.begin_read()?;
    let tables = tables_with_entries(&db, &read)?;
    // Every name is checked before anything is written.
    let names = tables
        .iter()
        .map(|t| pg::pg_table(t))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Failure::new(Exit::PostgresRefused, e))?;
    let mut client = config.connect(NoTls)?;
    pg::create_watermark_table(&mut client)?;
    for table in &tables {
        pg::create_table(&mut client, table)?;
    }
    let mut txn = client.transaction()?;
    let before = pg::lock_watermark(&mut txn, till_id)?;
    let (mut rows, mut deleted) = (0, 0);
    for table in &tables {
        let entries = read.range_in(
            table,
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
        )?;
        let done = pg::resync_table(&mut txn, till_id, table, entries, lsn)?;
        rows += done.rows;
        deleted += done.deleted;
    }
    deleted += pg::delete_other_tables(&mut txn, till_id, &names)?;
    pg::set_watermark(&mut txn, till_id, lsn)?;
    txn.commit()?;
    // After PostgreSQL's commit: a crash between the two leaves the consumer behind the
    // watermark, which ships on (skipping up to it), or dropped, which refuses again.
    till.register_consumer(&args.consumer, lsn)
        .map_err(|e| failed(&e))?;
    drop(read);
    db.close()?;
    println!(
        "till ship: resynchronised till {till_id} from one snapshot at lsn {}: {rows} rows of \
         {} tables, {deleted} rows the till no longer has deleted, watermark lsn {} -> {} \
         ({:.1} s)",
        lsn.0,
        tables.len(),
        before.0,
        lsn.0,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The till's tables with entries in the snapshot of `read`, the default table (`""`) first.
/// An empty one (the default table, unused) needs no table in PostgreSQL, and what
/// PostgreSQL holds of it for this till is deleted (`pg::delete_other_tables`).
fn tables_with_entries(db: &Db, read: &ReadTxn<'_>) -> Result<Vec<String>, Failure> {
    let mut tables = Vec::new();
    for table in std::iter::once(String::new()).chain(db.tables()?) {
        if read
            .range_in(
                &table,
                Bound::Unbounded,
                Bound::Unbounded,
                Direction::Forward,
            )?
            .next()
            .is_some()
        {
            tables.push(table);
        }
    }
    Ok(tables)
}

/// Opens the till's database, which no other process may have open (see the module doc).
fn open_alone(till: &Till) -> Result<Db, Failure> {
    // `Db::open` creates a database where there is none: a mistyped DIR must not become one.
    if !till.has_database()? {
        return Err(Failure::new(
            Exit::Till,
            format!(
                "{} is not a tilldb database (no {})",
                till.dir().display(),
                tilldb::internals::header::HEADER_FILE_NAME
            ),
        ));
    }
    let options = Options {
        change_feed: true,
        ..Options::default()
    };
    till.open_db(options).map_err(|e| match e {
        tilldb::Error::Locked { .. } => Failure::new(
            Exit::Locked,
            format!(
                "{e}. --resync reads one snapshot of the till with its lsn, which only the \
                 process holding the database can; stop the till's application, run `till \
                 ship --resync` again, then start the application. Nothing was changed."
            ),
        ),
        e => e.into(),
    })
}

/// The lsn of the snapshot a reader of the database, held by this process alone, sees: the
/// durable lsn its open published. Checked as a feed position: the feed opened there reads
/// no record, and no torn or foreign one.
fn snapshot_lsn(till: &Till) -> Result<Lsn, Failure> {
    let dir = till.dir();
    let lsn = till.published_durable()?.ok_or_else(|| {
        Failure::new(
            Exit::Till,
            format!(
                "{}: the open published no durable lsn (feed/durable)",
                dir.display()
            ),
        )
    })?;
    let start = till.start()?;
    // Read from files: a value out of order is a damaged file, reported, not asserted.
    if lsn < start {
        return Err(Failure::new(
            Exit::Till,
            format!(
                "{}: the published durable lsn {} is before the feed's start {}",
                dir.display(),
                lsn.0,
                start.0
            ),
        ));
    }
    let mut after = till.open_feed(lsn).map_err(|e| failed(&e))?;
    if let Some(txn) = after.next(Duration::ZERO).map_err(|e| failed(&e))? {
        return Err(Failure::new(
            Exit::Till,
            format!(
                "{}: a commit ending at lsn {} follows the published durable lsn {} while \
                 this process holds the database; refusing to guess the snapshot's lsn",
                dir.display(),
                txn.lsn.0,
                lsn.0
            ),
        ));
    }
    Ok(lsn)
}

/// A feed error inside a resync is a failure of the till's database (exit status 1), not a
/// refusal: the refusals' advice, `--resync`, is what is running.
fn failed(e: &tilldb::Error) -> Failure {
    Failure::new(Exit::Till, format!("--resync: {e}"))
}
