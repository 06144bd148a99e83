//! A year of a till (issue 34, item 4), on the simulated disk and a real PostgreSQL.
//!
//! 365 days. Each day the till opens (recovering from however the last day ended), sells a
//! few demo sales (`demo::sell`: sales, running total, voids), and ends at random: a power
//! cut, a kill, or a clean close. Then, with the till's database closed, `till ship --once`
//! runs through the same code as the command (`ship`, `resync`), over the simulated disk
//! through the `Till` seam: most days PostgreSQL is up; on some it is down (the shipper
//! gives up as unreachable, exit status 5, and ships it all the next day); once the head
//! office is restored from a backup of 120 days before, the shipper refuses (exit status
//! 3) and `--resync` ships the till's whole state. At the end the head office equals the
//! till exactly, an audit trigger shows no transaction applied twice, and on every day the
//! log directory was within its documented bound and the open cost (reads on the simulated
//! disk) within 3 x the first days'.

use super::exit::Exit;
use super::till::Till;
use super::{ShipArgs, Shipped, resync, ship};
use crate::demo;
use crate::postgres_server::{Postgres, audit_applications};
use postgres::{Client, Config};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use tilldb::io::{CrashMode, IoKind, SimConfig, SimDisk, Storage};
use tilldb::{Db, Direction, Options};

const DAYS: u64 = 365;
const DIR: &str = "/till";
const TILL_ID: &str = "till-1";
/// The day the head office is backed up, and the day it is restored from that backup.
const BACKUP_DAY: u64 = 120;
const RESTORE_DAY: u64 = 240;
/// How much more than the first days' an open may read.
const OPEN_FACTOR: u64 = 3;

fn options() -> Options {
    Options {
        change_feed: true,
        // At most 8 segments (1 MiB each) held for a shipper that cannot reach PostgreSQL.
        feed_retention_bytes: 8 << 20,
        // Every I/O on the calling thread: an open's reads are counted exactly.
        background_threads: false,
        ..Options::for_tests()
    }
}

fn args(url: &str) -> ShipArgs {
    ShipArgs {
        dir: DIR.into(),
        to: url.to_owned(),
        till_id: Some(TILL_ID.to_owned()),
        consumer: "ship".to_owned(),
        batch: 256,
        once: true,
        retries: Some(0),
        resync: false,
        report_seconds: 3600.0,
        // The till is closed while it ships: nothing more comes.
        once_wait: Duration::ZERO,
    }
}

/// A day's dice: the same every run.
fn roll(day: u64, salt: u64) -> u64 {
    let mut x = day.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 31;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 29)
}

/// Segment files in the till's log directory.
fn log_segments(disk: &SimDisk) -> usize {
    disk.list_dir(&Path::new(DIR).join("wal"))
        .expect("list wal/")
        .len()
}

/// The bound `Options::checkpoint_log_bytes` documents, plus what the feed may keep
/// (`Options::feed_retention_bytes`), in segments.
fn log_bound(options: &Options) -> usize {
    let segments = |bytes: u64| usize::try_from(bytes / options.wal.segment_bytes).expect("small");
    3 * segments(options.checkpoint_log_bytes) + 7 + segments(options.feed_retention_bytes)
}

/// One table of the till, as (key, value).
fn till_rows(db: &Db, table: &str) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let read = db.begin_read().expect("read");
    read.range_in(
        table,
        Bound::Unbounded,
        Bound::Unbounded,
        Direction::Forward,
    )
    .expect("range")
    .map(|entry| entry.expect("entry"))
    .collect()
}

/// One table of the head office, for this till.
fn office_rows(client: &mut Client, table: &str) -> BTreeMap<Vec<u8>, Vec<u8>> {
    client
        .query(
            &format!("SELECT key, value FROM tilldb_{table} WHERE till_id = $1"),
            &[&TILL_ID],
        )
        .expect("select")
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

#[test]
fn a_year_of_a_till_power_cut_killed_or_closed_every_night_ships_every_sale_exactly_once() {
    let test =
        "a_year_of_a_till_power_cut_killed_or_closed_every_night_ships_every_sale_exactly_once";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    let mut client = pg.client();
    audit_applications(&mut client);
    let disk = SimDisk::new(SimConfig::default());
    let options = options();
    let bound = log_bound(&options);
    let mut open_reads = Vec::new();
    let mut most_segments = 0;
    let (mut down_days, mut shipped_days, mut sales) = (0, 0, 0u64);
    for day in 0..DAYS {
        let reads = disk.call_count(IoKind::Read);
        let db = Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options.clone())
            .unwrap_or_else(|e| panic!("day {day}: the till does not open: {e}"));
        open_reads.push(disk.call_count(IoKind::Read) - reads);
        let segments = log_segments(&disk);
        most_segments = most_segments.max(segments);
        assert!(
            segments <= bound,
            "day {day}: {segments} log segments, over the bound of {bound}"
        );
        let last: u64 = db.get_in("totals", b"last").expect("get").map_or(0, |v| {
            String::from_utf8_lossy(&v).parse().expect("a number")
        });
        for id in last + 1..=last + 3 + roll(day, 1) % 12 {
            demo::sell(&db, id).unwrap_or_else(|e| panic!("day {day}: sale {id}: {e}"));
            sales += 1;
        }
        closing_time(&disk, db, day);
        // Shipping, with the till closed.
        match ship_day(&pg, &mut client, &disk, day) {
            Day::Shipped => shipped_days += 1,
            Day::Down => down_days += 1,
            Day::Resynced => {}
        }
    }
    last_evening(&disk, &options, &pg.url(), &mut client);
    // The open's cost: every day within OPEN_FACTOR of the first days' (day 0 created).
    let first = open_reads[1..6].iter().max().copied().expect("five days");
    let worst = open_reads[1..].iter().max().copied().expect("days");
    assert!(
        worst <= OPEN_FACTOR * first,
        "an open made {worst} reads, over {OPEN_FACTOR} x the first days' {first}: {open_reads:?}"
    );
    println!(
        "a year: {sales} sales, shipped on {shipped_days} days, PostgreSQL down on \
         {down_days}, restored once; at most {most_segments} log segments (bound {bound}); \
         open reads first days {first}, worst {worst}"
    );
}

/// Closing time: a power cut, a kill, or a clean close, as the day's dice say.
fn closing_time(disk: &SimDisk, db: Db, day: u64) {
    match roll(day, 2) % 3 {
        0 => {
            std::mem::forget(db);
            disk.crash(CrashMode::PowerLoss {
                tear_bytes: 512,
                garbage: false,
            });
        }
        1 => {
            std::mem::forget(db);
            disk.crash(CrashMode::ProcessKill);
        }
        _ => db.close().expect("close"),
    }
}

/// How a day's shipping went.
enum Day {
    Shipped,
    /// PostgreSQL was down: the shipper gave up as unreachable.
    Down,
    /// The head office was restored from the backup: refused, then resynchronised.
    Resynced,
}

/// A shipper: a process of its own, started after the till's day ended (a crash of the
/// simulated machine ends every process with handles open then).
fn shipper(disk: &SimDisk) -> Till {
    Till::on(Arc::new(disk.clone()), Path::new(DIR))
}

/// The day's `till ship --once`, with the till closed; PostgreSQL down on some days,
/// restored from the backup on `RESTORE_DAY`, backed up on `BACKUP_DAY`.
fn ship_day(pg: &Postgres, client: &mut Client, disk: &SimDisk, day: u64) -> Day {
    let url = pg.url();
    let config = Config::from_str(&url).expect("url");
    let args = args(&url);
    let till = shipper(disk);
    let ship_once = || ship(&till, &args, &config, TILL_ID, &mut Shipped::default());
    let done = if day == RESTORE_DAY {
        client
            .batch_execute(
                "BEGIN;
                 SET LOCAL session_replication_role = replica;
                 TRUNCATE tilldb_watermark, tilldb_sales, tilldb_totals;
                 INSERT INTO tilldb_watermark SELECT * FROM backup_watermark;
                 INSERT INTO tilldb_sales SELECT * FROM backup_sales;
                 INSERT INTO tilldb_totals SELECT * FROM backup_totals;
                 COMMIT;",
            )
            .expect("restore the head office");
        let refused = ship_once().expect_err("a head office restored from a backup");
        assert_eq!(refused.exit, Exit::Refused, "{}", refused.message);
        assert!(refused.message.contains("--resync"), "{}", refused.message);
        resync::resync(&till, &args, &config, TILL_ID).expect("resync");
        ship_once().unwrap_or_else(|f| panic!("shipping after the resync: {}", f.message));
        Day::Resynced
    } else if roll(day, 3).is_multiple_of(29) {
        pg.stop();
        let down = ship_once().expect_err("PostgreSQL is down");
        assert_eq!(down.exit, Exit::PostgresUnavailable, "{}", down.message);
        pg.start_again();
        *client = pg.client();
        Day::Down
    } else {
        ship_once().unwrap_or_else(|f| panic!("day {day}: {}", f.message));
        Day::Shipped
    };
    if day == BACKUP_DAY {
        client
            .batch_execute(
                "CREATE TABLE backup_watermark AS SELECT * FROM tilldb_watermark;
                 CREATE TABLE backup_sales AS SELECT * FROM tilldb_sales;
                 CREATE TABLE backup_totals AS SELECT * FROM tilldb_totals;",
            )
            .expect("back up the head office");
    }
    done
}

/// The last evening: the till opened and closed (publishing what it made durable) and
/// shipped; then the head office must equal the till exactly, with no row applied twice.
fn last_evening(disk: &SimDisk, options: &Options, url: &str, client: &mut Client) {
    let open = || {
        Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options.clone())
            .expect("open")
    };
    open().close().expect("close");
    let config = Config::from_str(url).expect("url");
    ship(
        &shipper(disk),
        &args(url),
        &config,
        TILL_ID,
        &mut Shipped::default(),
    )
    .unwrap_or_else(|f| panic!("the last shipment: {}", f.message));
    let db = open();
    for table in ["sales", "totals"] {
        let (ours, theirs) = (till_rows(&db, table), office_rows(client, table));
        assert_eq!(
            ours.len(),
            theirs.len(),
            "table {table}: the till holds {} rows, the head office {}",
            ours.len(),
            theirs.len()
        );
        assert!(
            ours == theirs,
            "table {table}: the head office differs from the till"
        );
    }
    db.close().expect("close");
    let twice = client
        .query(
            "SELECT tbl, key, lsn FROM audit WHERE till_id = $1 GROUP BY tbl, key, lsn \
             HAVING count(*) > 1",
            &[&TILL_ID],
        )
        .expect("audit");
    assert!(
        twice.is_empty(),
        "{} rows applied twice, e.g. lsn {}",
        twice.len(),
        twice[0].get::<_, i64>(2)
    );
}
