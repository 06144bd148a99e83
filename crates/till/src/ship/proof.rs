//! `till ship`'s exactly-once steps, each pinned by a deterministic test (issue 35, item 7):
//! the feed is acknowledged only after PostgreSQL committed, and two shippers of one till at
//! once apply nothing twice (the watermark row lock). Gates are PostgreSQL's own: a deferred
//! constraint that fails a commit, an advisory lock the test holds.

use super::exit::Exit;
use super::till::Till;
use super::{ShipArgs, Shipped, ship};
use crate::demo;
use crate::postgres_server::{Postgres, audit_applications};
use postgres::{Client, Config};
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tilldb::io::{SimConfig, SimDisk};
use tilldb::{Db, Lsn, Options};

const DIR: &str = "/till";
const TILL_ID: &str = "till-1";

fn args(url: &str, batch: usize) -> ShipArgs {
    ShipArgs {
        dir: DIR.into(),
        to: url.to_owned(),
        till_id: Some(TILL_ID.to_owned()),
        consumer: "ship".to_owned(),
        batch,
        once: true,
        retries: Some(0),
        resync: false,
        report_seconds: 3600.0,
        once_wait: Duration::ZERO,
    }
}

/// A closed till on the simulated disk with demo sales `from..=to` made.
fn sell(disk: &SimDisk, from: u64, to: u64) {
    let options = Options {
        change_feed: true,
        ..Options::for_tests()
    };
    let db = Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options)
        .expect("open the till");
    for id in from..=to {
        demo::sell(&db, id).expect("sale");
    }
    db.close().expect("close");
}

fn till(disk: &SimDisk) -> Till {
    Till::on(Arc::new(disk.clone()), Path::new(DIR))
}

/// `till ship --once` of the till on `disk`, which must succeed (`what` names it if not).
fn ship_all(disk: &SimDisk, url: &str, config: &Config, what: &str) {
    ship(
        &till(disk),
        &args(url, 256),
        config,
        TILL_ID,
        &mut Shipped::default(),
    )
    .unwrap_or_else(|f| panic!("{what}: {}", f.message));
}

fn watermark(client: &mut Client) -> Lsn {
    let row = client
        .query_one(
            "SELECT lsn FROM tilldb_watermark WHERE till_id = $1",
            &[&TILL_ID],
        )
        .expect("the watermark");
    Lsn(u64::try_from(row.get::<_, i64>(0)).expect("an lsn"))
}

/// Waits until `n` PostgreSQL backends wait for a lock (the gates below hold them).
fn wait_for_blocked(client: &mut Client, n: i64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let blocked: i64 = client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'",
                &[],
            )
            .expect("pg_stat_activity")
            .get(0);
        if blocked >= n {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: not within 30 s");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A batch whose PostgreSQL commit fails (a deferred constraint on sale 7, checked at
/// commit) is not acknowledged to the till's feed: the consumer stays at the watermark of the
/// last batch PostgreSQL committed. With the mutant `ship-ack-before-commit` the consumer
/// passed the watermark, and the next start refused (or, had the till reused its log, the
/// batch was gone).
#[test]
fn a_batch_whose_postgres_commit_fails_is_not_acknowledged_to_the_feed() {
    let Some(pg) = Postgres::start("a_batch_whose_postgres_commit_fails_is_not_acknowledged")
    else {
        return;
    };
    let mut client = pg.client();
    audit_applications(&mut client);
    let seventh = String::from_utf8(demo::sale_key(7)).expect("a sale key is text");
    client
        .batch_execute(&format!(
            "CREATE FUNCTION refuse_seven() RETURNS trigger AS $$
             BEGIN
                 IF NEW.key = convert_to('{seventh}', 'UTF8') THEN
                     RAISE EXCEPTION 'the head office refuses sale 7 at commit';
                 END IF;
                 RETURN NEW;
             END $$ LANGUAGE plpgsql;
             CREATE CONSTRAINT TRIGGER refuse_at_commit AFTER INSERT OR UPDATE ON tilldb_sales
                 DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_seven();"
        ))
        .expect("the deferred constraint");
    let disk = SimDisk::new(SimConfig::default());
    sell(&disk, 1, 20);
    let url = pg.url();
    let config = Config::from_str(&url).expect("url");
    // Batches of five sales: 1-5 commit, 6-10 fail at commit.
    let failed = ship(
        &till(&disk),
        &args(&url, 5),
        &config,
        TILL_ID,
        &mut Shipped::default(),
    )
    .expect_err("PostgreSQL refuses the second batch at commit");
    assert_eq!(failed.exit, Exit::PostgresRefused, "{}", failed.message);
    let committed = watermark(&mut client);
    let consumer = till(&disk)
        .consumers()
        .expect("consumers")
        .into_iter()
        .find(|c| c.name == "ship")
        .expect("the shipper's consumer")
        .position;
    assert!(
        committed > Lsn(0),
        "the first batch was not committed: no test"
    );
    assert_eq!(
        consumer, committed,
        "the consumer acknowledged lsn {} while PostgreSQL committed up to {}",
        consumer.0, committed.0
    );
}

/// Two shippers of one till at once: the first holds its transaction open at the gate (its
/// watermark update waits for an advisory lock the test holds) while the second starts; the
/// second must wait for the watermark row and then apply nothing. With the mutant
/// `ship-watermark-unlocked` (the watermark read without `FOR UPDATE`) the second read the
/// old watermark, applied the same sales again once the first committed, and the audit shows
/// rows written twice.
#[test]
fn two_shippers_of_one_till_at_once_apply_nothing_twice() {
    let Some(pg) = Postgres::start("two_shippers_of_one_till_at_once_apply_nothing_twice") else {
        return;
    };
    let mut client = pg.client();
    audit_applications(&mut client);
    let disk = SimDisk::new(SimConfig::default());
    let url = pg.url();
    let config = Config::from_str(&url).expect("url");
    // A first shipment: the watermark row exists and is committed.
    sell(&disk, 1, 3);
    ship_all(&disk, &url, &config, "the first shipment");
    sell(&disk, 4, 20);
    client
        .batch_execute(
            "CREATE FUNCTION gate() RETURNS trigger AS $$
             BEGIN
                 PERFORM pg_advisory_lock(42);
                 PERFORM pg_advisory_unlock(42);
                 RETURN NEW;
             END $$ LANGUAGE plpgsql;
             CREATE TRIGGER gate_watermark BEFORE UPDATE ON tilldb_watermark
                 FOR EACH ROW EXECUTE FUNCTION gate();
             SELECT pg_advisory_lock(42);",
        )
        .expect("the gate, closed");
    let shipper = |name: &'static str| {
        let (disk, url, config) = (disk.clone(), url.clone(), config.clone());
        std::thread::spawn(move || {
            ship_all(&disk, &url, &config, name);
        })
    };
    let first = shipper("A");
    wait_for_blocked(&mut client, 1, "the first shipper at the gate");
    let second = shipper("B");
    wait_for_blocked(&mut client, 2, "the second shipper behind the first");
    client
        .batch_execute("SELECT pg_advisory_unlock(42);")
        .expect("open the gate");
    first.join().expect("shipper A");
    second.join().expect("shipper B");
    let twice = client
        .query(
            "SELECT tbl, key, lsn FROM audit GROUP BY tbl, key, lsn HAVING count(*) > 1",
            &[],
        )
        .expect("audit");
    assert!(
        twice.is_empty(),
        "{} row writes applied twice by two shippers at once",
        twice.len()
    );
}
