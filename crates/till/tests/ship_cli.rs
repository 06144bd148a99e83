//! `till ship` into a real PostgreSQL (issue 18, item 4): the test starts its own server
//! (Debian's postgresql-15: `initdb` in a temporary directory, `pg_ctl` on a free port), runs two
//! tills (`till demo`, each its own database and id) and a shipper for each, and for a while
//! kills writers and shippers with kill -9 and restarts PostgreSQL (immediate mode: a crash)
//! at random moments. At the end PostgreSQL must hold exactly each till's database: every
//! row, every value, no sale twice or lost (each till's running total equals the sum of its
//! sales, in both), and the watermark at the last transaction's lsn.
//!
//! `SHIP_CHAOS_SECONDS` sets the chaos phase (default 8; `scripts/prove` runs a long one).

mod common;
#[path = "common/postgres.rs"]
mod postgres_server;

use common::{snapshot, till};
use postgres::Client;
use postgres_server::Postgres;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tilldb::feed::{self, Feed};
use tilldb::{Db, Direction, Options};

/// A `till` child, killed with kill -9 when dropped.
struct Proc(Child);

impl Proc {
    fn spawn(args: &[&str]) -> Proc {
        Proc(
            Command::new(env!("CARGO_BIN_EXE_till"))
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn till"),
        )
    }

    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

struct Till {
    id: String,
    dir: PathBuf,
    acks: PathBuf,
    writer: Proc,
    shipper: Proc,
}

impl Till {
    fn writer(dir: &Path, acks: &Path) -> Proc {
        Proc::spawn(&[
            "demo",
            dir.to_str().expect("utf-8"),
            "--rate",
            "400",
            "--ack-file",
            acks.to_str().expect("utf-8"),
        ])
    }

    fn shipper(&self, url: &str) -> Proc {
        Proc::spawn(&[
            "ship",
            self.dir.to_str().expect("utf-8"),
            "--to",
            url,
            "--till-id",
            &self.id,
            "--batch",
            "16",
        ])
    }
}

/// xorshift64: the test's chaos, reproducible from the printed seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A table of one till in PostgreSQL: key -> value.
fn pg_rows(client: &mut Client, table: &str, till: &str) -> BTreeMap<Vec<u8>, Vec<u8>> {
    client
        .query(
            &format!("SELECT key, value FROM {table} WHERE till_id = $1"),
            &[&till],
        )
        .expect("query")
        .into_iter()
        .map(|r| (r.get::<_, Vec<u8>>(0), r.get::<_, Vec<u8>>(1)))
        .collect()
}

fn db_rows(db: &Db, table: &str) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.scan_in(
        table,
        std::ops::Bound::Unbounded,
        std::ops::Bound::Unbounded,
        Direction::Forward,
    )
    .expect("scan")
    .into_iter()
    .collect()
}

fn total(rows: &BTreeMap<Vec<u8>, Vec<u8>>) -> u64 {
    rows.values()
        .map(|v| {
            String::from_utf8_lossy(v)
                .trim_start_matches("amount=")
                .parse::<u64>()
                .expect("an amount")
        })
        .sum()
}

/// The shipper's tables made ahead of it (with the documented schema) with a trigger that
/// records every row write: a transaction applied twice shows as the same (table, till, key,
/// lsn) twice, which the final state alone would hide (a repeated upsert converges).
fn audit_applications(client: &mut Client) {
    client
        .batch_execute(
            "CREATE TABLE audit (tbl text, till_id text, key bytea, lsn bigint);
             CREATE FUNCTION audit_write() RETURNS trigger AS $$
             BEGIN
                 INSERT INTO audit VALUES (TG_TABLE_NAME, NEW.till_id, NEW.key, NEW.lsn);
                 RETURN NEW;
             END $$ LANGUAGE plpgsql;
             CREATE TABLE tilldb_sales (till_id text NOT NULL, key bytea NOT NULL,
                 value bytea NOT NULL, lsn bigint NOT NULL, PRIMARY KEY (till_id, key));
             CREATE TABLE tilldb_totals (till_id text NOT NULL, key bytea NOT NULL,
                 value bytea NOT NULL, lsn bigint NOT NULL, PRIMARY KEY (till_id, key));
             CREATE TRIGGER audit_sales AFTER INSERT OR UPDATE ON tilldb_sales
                 FOR EACH ROW EXECUTE FUNCTION audit_write();
             CREATE TRIGGER audit_totals AFTER INSERT OR UPDATE ON tilldb_totals
                 FOR EACH ROW EXECUTE FUNCTION audit_write();",
        )
        .expect("audit tables");
}

/// Stops a till's writer and shipper, ships the rest, and checks PostgreSQL against it.
fn check_till(client: &mut Client, url: &str, t: &mut Till) {
    t.writer.kill();
    t.shipper.kill();
    // The till again (recovery publishes what its killed writer made durable, which the
    // writer may not have published before the kill), then the shipper to the end.
    let db = Db::open(
        &t.dir,
        Options {
            change_feed: true,
            ..Options::default()
        },
    )
    .expect("the till opens");
    let dir = t.dir.to_str().expect("utf-8");
    let last = till(&["ship", dir, "--to", url, "--till-id", &t.id, "--once"]);
    assert!(last.ok, "the last shipper run: {}", last.text());
    let sales = db_rows(&db, "sales");
    let totals = db_rows(&db, "totals");
    // Every acknowledged sale is in the till (or voided by a later sale that is). Only
    // lines ended by a newline count, as `till`'s own reader of these files does
    // (`acks.rs`): a line without one was never wholly written.
    let acked: Vec<u64> = std::fs::read_to_string(&t.acks)
        .expect("acks")
        .split_inclusive('\n')
        .filter(|l| l.ends_with('\n'))
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    let last_sale: u64 = String::from_utf8_lossy(&totals[&b"last".to_vec()])
        .parse()
        .expect("last");
    for &id in &acked {
        let voided = (id + 5) % 10 == 0 && id + 5 <= last_sale;
        let key = format!("{id:012}").into_bytes();
        assert!(
            voided || sales.contains_key(&key),
            "{}: acknowledged sale {id} is not in the till",
            t.id
        );
    }
    assert!(
        acked.len() > 50,
        "{}: only {} sales acknowledged",
        t.id,
        acked.len()
    );
    // The till's total is the sum of its sales: no sale applied twice or torn.
    let db_total: u64 = String::from_utf8_lossy(&totals[&b"all".to_vec()])
        .parse()
        .expect("total");
    assert_eq!(db_total, total(&sales), "{}: the till's own total", t.id);
    // PostgreSQL holds exactly the t.
    let pg_sales = pg_rows(client, "tilldb_sales", &t.id);
    let pg_totals = pg_rows(client, "tilldb_totals", &t.id);
    assert_eq!(pg_sales.len(), sales.len(), "{}: sales rows", t.id);
    assert!(
        pg_sales == sales,
        "{}: PostgreSQL's sales differ from the till's",
        t.id
    );
    assert!(
        pg_totals == totals,
        "{}: PostgreSQL's totals differ from the till's",
        t.id
    );
    // The watermark is the last transaction's lsn.
    let watermark: i64 = client
        .query_one(
            "SELECT lsn FROM tilldb_watermark WHERE till_id = $1",
            &[&t.id],
        )
        .expect("watermark")
        .get(0);
    // Nothing after it, and the shipper's consumer acknowledged it.
    let watermark = tilldb::Lsn(u64::try_from(watermark).expect("non-negative"));
    let mut rest = Feed::open(&t.dir, watermark).expect("feed");
    assert!(
        rest.next(Duration::from_millis(200))
            .expect("feed")
            .is_none(),
        "{}: transactions after the watermark were not shipped",
        t.id
    );
    let consumers = feed::consumers(&t.dir).expect("consumers");
    assert_eq!(consumers.len(), 1, "{consumers:?}");
    assert_eq!(
        consumers[0].position, watermark,
        "{}: consumer position",
        t.id
    );
    db.close().expect("close");
}

#[test]
fn shipping_is_exactly_once_through_kills_of_writers_shippers_and_postgres() {
    let test = "shipping_is_exactly_once_through_kills_of_writers_shippers_and_postgres";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    let seconds: u64 = std::env::var("SHIP_CHAOS_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| u64::from(d.subsec_nanos()) ^ d.as_secs() | 1);
    eprintln!("chaos seed {seed}, {seconds} s");
    let mut rng = Rng(seed);
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let url = pg.url();
    audit_applications(&mut pg.client());
    let mut tills: Vec<Till> = (1..=2)
        .map(|n| {
            let dir = work.path().join(format!("till-{n}"));
            let acks = work.path().join(format!("acks-{n}.txt"));
            let writer = Till::writer(&dir, &acks);
            // The shipper starts once the database exists.
            let start = Instant::now();
            while feed::start(&dir).is_err() {
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "the till never started"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            let mut till = Till {
                id: format!("till-{n}"),
                dir,
                acks,
                writer,
                shipper: Proc::spawn(&["--version"]),
            };
            till.shipper = till.shipper(&url);
            till
        })
        .collect();
    let (mut writer_kills, mut shipper_kills, mut pg_restarts) = (0, 0, 0);
    let chaos = Instant::now();
    while chaos.elapsed() < Duration::from_secs(seconds) {
        std::thread::sleep(Duration::from_millis(150 + rng.below(450)));
        let till = &mut tills[usize::try_from(rng.below(2)).expect("0 or 1")];
        match rng.below(5) {
            0 | 1 => {
                till.shipper.kill();
                shipper_kills += 1;
                till.shipper = till.shipper(&url);
            }
            2 | 3 => {
                till.writer.kill();
                writer_kills += 1;
                till.writer = Till::writer(&till.dir, &till.acks);
            }
            _ => {
                pg.crash_restart();
                pg_restarts += 1;
            }
        }
    }
    eprintln!(
        "{writer_kills} writer kills, {shipper_kills} shipper kills, {pg_restarts} PostgreSQL restarts"
    );
    let mut client = pg.client();
    for t in &mut tills {
        check_till(&mut client, &url, t);
    }
    // No transaction applied twice: each row write of each lsn happened once.
    let repeated: i64 = client
        .query_one(
            "SELECT count(*) FROM (SELECT 1 FROM audit GROUP BY tbl, till_id, key, lsn
             HAVING count(*) > 1) AS twice",
            &[],
        )
        .expect("audit")
        .get(0);
    assert_eq!(repeated, 0, "row writes applied more than once");
    // Both tills in one PostgreSQL, apart.
    let tills_in_pg: i64 = client
        .query_one("SELECT count(DISTINCT till_id) FROM tilldb_sales", &[])
        .expect("count")
        .get(0);
    assert_eq!(tills_in_pg, 2);
}

/// `till ship`'s exit statuses (docs/feed.md, "Exit status").
const EXIT_USAGE: i32 = 2;
const EXIT_REFUSED: i32 = 3;
const EXIT_POSTGRES_REFUSED: i32 = 4;
const EXIT_POSTGRES_UNREACHABLE: i32 = 5;

/// How a run of `till` ended: its exit code (`None`: killed at the deadline) and output.
struct Ended {
    code: Option<i32>,
    text: String,
    seconds: f64,
}

/// Runs `till` with `args`, killed after `limit`: a run that would retry forever fails its
/// test instead of hanging it.
fn till_within(args: &[&str], limit: Duration) -> Ended {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_till"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn till");
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("till's output");
    Ended {
        code: out.status.code(),
        text: format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// `till ship DIR --to URL --till-id ID --once` plus `extra`, given a minute.
fn ship_once(dir: &Path, url: &str, till_id: &str, extra: &[&str]) -> Ended {
    let mut args = vec![
        "ship",
        dir.to_str().expect("utf-8"),
        "--to",
        url,
        "--till-id",
        till_id,
        "--once",
    ];
    args.extend_from_slice(extra);
    till_within(&args, Duration::from_mins(1))
}

/// Makes `sales` more demo sales in the till at `dir`.
fn demo(dir: &Path, sales: u64) {
    let run = till(&[
        "demo",
        dir.to_str().expect("utf-8"),
        "--sales",
        &sales.to_string(),
    ]);
    assert!(run.ok, "till demo: {}", run.text());
}

/// The position the till's `ship` consumer acknowledged.
fn consumer_position(dir: &Path) -> u64 {
    let consumers = feed::consumers(dir).expect("consumers");
    let ship = consumers
        .iter()
        .find(|c| c.name == "ship")
        .expect("the ship consumer");
    ship.position.0
}

fn watermark_of(client: &mut Client, till_id: &str) -> Option<i64> {
    client
        .query_opt(
            "SELECT lsn FROM tilldb_watermark WHERE till_id = $1",
            &[&till_id],
        )
        .expect("watermark")
        .map(|r| r.get(0))
}

fn count(client: &mut Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).expect(sql).get(0)
}

/// Asserts that a run was refused (exit status 3) naming `positions`, and said what to do.
fn assert_refused(run: &Ended, positions: &[u64]) {
    assert_eq!(run.code, Some(EXIT_REFUSED), "{}", run.text);
    for lsn in positions {
        assert!(
            run.text.contains(&lsn.to_string()),
            "the refusal does not name lsn {lsn}: {}",
            run.text
        );
    }
    assert!(
        run.text.contains("--resync"),
        "the refusal does not say what to do: {}",
        run.text
    );
}

/// Issue 34: a till shipped to head office A, then pointed at an empty head office B (or at
/// A under a new till id, as a renamed host's default id would be), printed "caught up: 0
/// transactions" and exited 0: its consumer had acknowledged everything, so B got nothing,
/// not even a watermark, and nobody was told. It must refuse, naming the consumer's position
/// and the feed's start, and change nothing in either place.
#[test]
fn shipping_a_shipped_till_to_an_empty_head_office_is_refused_not_caught_up_with_nothing() {
    let test =
        "shipping_a_shipped_till_to_an_empty_head_office_is_refused_not_caught_up_with_nothing";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let dir = work.path().join("t1");
    demo(&dir, 200);
    let first = ship_once(&dir, &pg.url(), "a", &[]);
    assert_eq!(first.code, Some(0), "{}", first.text);
    assert!(first.text.contains("200 transactions"), "{}", first.text);
    let start = feed::start(&dir).expect("feed start").0;
    let acknowledged = consumer_position(&dir);
    assert!(acknowledged > start);
    let till_files = snapshot(&dir);
    let mut a = pg.client();
    a.batch_execute("CREATE DATABASE headoffice_b")
        .expect("create B");

    let to_b = ship_once(&dir, &pg.url_of("headoffice_b"), "b", &[]);
    assert_refused(&to_b, &[acknowledged, start]);
    let mut b = Client::connect(&pg.url_of("headoffice_b"), postgres::NoTls).expect("B");
    assert_eq!(
        count(
            &mut b,
            "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'tilldb%'"
        ),
        0,
        "a refusal created tables in B"
    );

    let renamed = ship_once(&dir, &pg.url(), "renamed-host", &[]);
    assert_refused(&renamed, &[acknowledged, start]);
    assert_eq!(watermark_of(&mut a, "renamed-host"), None);
    assert_eq!(
        count(
            &mut a,
            "SELECT count(*) FROM tilldb_sales WHERE till_id <> 'a'"
        ),
        0
    );
    assert!(
        snapshot(&dir) == till_files,
        "a refusal changed the till's files"
    );
}

/// Issue 34: a head office restored from a backup older than the till's shipments holds a
/// watermark behind what the till's consumer acknowledged (or none at all, when restored from
/// before the first shipment); shipping on would skip what the restore lost. Refused, naming
/// PostgreSQL's watermark and the consumer's position, leaving both sides as they were.
#[test]
fn a_head_office_restored_from_before_the_shipments_is_refused_naming_both_positions() {
    let test = "a_head_office_restored_from_before_the_shipments_is_refused_naming_both_positions";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let dir = work.path().join("t1");
    let mut client = pg.client();
    demo(&dir, 100);
    assert_eq!(ship_once(&dir, &pg.url(), "a", &[]).code, Some(0));
    let older = watermark_of(&mut client, "a").expect("a watermark");
    demo(&dir, 100);
    assert_eq!(ship_once(&dir, &pg.url(), "a", &[]).code, Some(0));
    let acknowledged = consumer_position(&dir);
    assert!(u64::try_from(older).expect("lsn") < acknowledged);
    let till_files = snapshot(&dir);

    // The restore: the watermark as it was after the first shipment.
    client
        .execute(
            "UPDATE tilldb_watermark SET lsn = $1 WHERE till_id = 'a'",
            &[&older],
        )
        .expect("restore");
    let behind = ship_once(&dir, &pg.url(), "a", &[]);
    assert_refused(&behind, &[u64::try_from(older).expect("lsn"), acknowledged]);
    assert_eq!(watermark_of(&mut client, "a"), Some(older));

    // From before the first shipment: no watermark at all.
    client
        .batch_execute(
            "DELETE FROM tilldb_watermark; DELETE FROM tilldb_sales; DELETE FROM tilldb_totals",
        )
        .expect("restore");
    let none = ship_once(&dir, &pg.url(), "a", &[]);
    let start = feed::start(&dir).expect("feed start").0;
    assert_refused(&none, &[acknowledged, start]);
    assert_eq!(watermark_of(&mut client, "a"), None);
    assert_eq!(count(&mut client, "SELECT count(*) FROM tilldb_sales"), 0);
    assert!(
        snapshot(&dir) == till_files,
        "a refusal changed the till's files"
    );
}

/// Issue 34: PostgreSQL's errors printed as "db error", without the server's message: a
/// missing database or a `tilldb_sales` of another schema said nothing an operator could
/// act on. Each must print the server's message and SQLSTATE and exit 4.
#[test]
fn postgres_errors_print_the_servers_message_and_sqlstate_not_just_db_error() {
    let test = "postgres_errors_print_the_servers_message_and_sqlstate_not_just_db_error";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let dir = work.path().join("t1");
    demo(&dir, 20);

    let missing = ship_once(&dir, &pg.url_of("nosuch"), "a", &[]);
    assert_eq!(
        missing.code,
        Some(EXIT_POSTGRES_REFUSED),
        "{}",
        missing.text
    );
    assert!(
        missing.text.contains("3D000"),
        "no SQLSTATE: {}",
        missing.text
    );
    assert!(
        missing.text.contains("database \"nosuch\" does not exist"),
        "no server message: {}",
        missing.text
    );

    let mut client = pg.client();
    client
        .batch_execute("CREATE TABLE tilldb_sales (id integer PRIMARY KEY)")
        .expect("a table of another schema");
    let schema = ship_once(&dir, &pg.url(), "a", &[]);
    assert_eq!(schema.code, Some(EXIT_POSTGRES_REFUSED), "{}", schema.text);
    assert!(
        schema.text.contains("42703"),
        "no SQLSTATE: {}",
        schema.text
    );
    assert!(
        schema.text.contains("column \"till_id\""),
        "no server message: {}",
        schema.text
    );
    assert_eq!(watermark_of(&mut client, "a"), None);
}

/// Issue 34: `till ship --to notaurl --once` retried forever. A URL that does not parse is
/// a usage error (exit 2) at once; no retry can fix it.
#[test]
fn an_invalid_url_is_a_usage_error_at_once_not_retried_forever() {
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let dir = work.path().join("t1");
    demo(&dir, 5);
    let run = ship_once(&dir, "notaurl", "a", &[]);
    assert_eq!(run.code, Some(EXIT_USAGE), "{}", run.text);
    assert!(run.seconds < 10.0, "took {:.1} s", run.seconds);
    assert!(run.text.contains("--to"), "{}", run.text);
}

/// Issue 34: with `--once`, a server that refuses connections was retried forever. It is
/// retried a bounded number of times, then the shipper exits 5 naming the cause.
#[test]
fn an_unreachable_server_with_once_gives_up_after_bounded_retries() {
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let dir = work.path().join("t1");
    demo(&dir, 5);
    // A port nothing listens on: bound, then closed.
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        probe.local_addr().expect("addr").port()
    };
    let url = format!("postgresql://tilldb@127.0.0.1:{port}/postgres");
    let run = ship_once(&dir, &url, "a", &[]);
    assert_eq!(run.code, Some(EXIT_POSTGRES_UNREACHABLE), "{}", run.text);
    assert!(run.seconds < 30.0, "took {:.1} s", run.seconds);
    assert!(
        run.text.to_lowercase().contains("connection refused"),
        "{}",
        run.text
    );
    let retries = run.text.matches("retrying in").count();
    assert!(
        (1..=10).contains(&retries),
        "{retries} retries: {}",
        run.text
    );
}

/// A table of one till in PostgreSQL, or empty when PostgreSQL has no such table.
fn pg_rows_of(client: &mut Client, table: &str, till: &str) -> BTreeMap<Vec<u8>, Vec<u8>> {
    pg_rows(client, table, till)
}

/// Asserts that PostgreSQL holds exactly the till's sales and totals, with the watermark at
/// the consumer's position, and no row write of one lsn applied twice.
fn assert_head_office_equals_till(client: &mut Client, dir: &Path, till_id: &str) {
    let db = Db::open(
        dir,
        Options {
            change_feed: true,
            ..Options::default()
        },
    )
    .expect("the till opens");
    for table in ["sales", "totals"] {
        let pg = pg_rows_of(client, &format!("tilldb_{table}"), till_id);
        let till_rows = db_rows(&db, table);
        assert_eq!(pg.len(), till_rows.len(), "{table}: rows");
        assert!(pg == till_rows, "{table}: PostgreSQL differs from the till");
    }
    db.close().expect("close");
    let watermark = watermark_of(client, till_id).expect("a watermark");
    assert_eq!(
        u64::try_from(watermark).expect("lsn"),
        consumer_position(dir),
        "the watermark is the consumer's position"
    );
    let repeated = count(
        client,
        "SELECT count(*) FROM (SELECT 1 FROM audit GROUP BY tbl, till_id, key, lsn
         HAVING count(*) > 1) AS twice",
    );
    assert_eq!(repeated, 0, "row writes applied more than once");
}

/// Issue 34: after a refusal there was no way on but by hand. `--resync` ships the till's
/// whole state to the empty head office B from one snapshot, deletes what B held for the
/// till that the till does not have (a stale sale, a table the till never had), leaves
/// other tills' rows alone, sets the watermark to the snapshot's lsn, then follows the feed:
/// later sales arrive once each, and B equals the till.
#[test]
fn resync_ships_the_whole_state_then_follows_the_feed_exactly_once() {
    let test = "resync_ships_the_whole_state_then_follows_the_feed_exactly_once";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let dir = work.path().join("t1");
    demo(&dir, 200);
    assert_eq!(ship_once(&dir, &pg.url(), "a", &[]).code, Some(0));
    pg.client()
        .batch_execute("CREATE DATABASE headoffice_b")
        .expect("create B");
    let url_b = pg.url_of("headoffice_b");
    let mut b = Client::connect(&url_b, postgres::NoTls).expect("B");
    audit_applications(&mut b);
    b.batch_execute(
        "INSERT INTO tilldb_sales VALUES ('b', 'stale', 'amount=1', 1), ('other', 'k', 'v', 1);
         CREATE TABLE tilldb_gone (till_id text NOT NULL, key bytea NOT NULL,
             value bytea NOT NULL, lsn bigint NOT NULL, PRIMARY KEY (till_id, key));
         INSERT INTO tilldb_gone VALUES ('b', 'k', 'v', 1), ('other', 'k', 'v', 1);",
    )
    .expect("stale rows");
    assert_eq!(
        ship_once(&dir, &url_b, "b", &[]).code,
        Some(EXIT_REFUSED),
        "before --resync"
    );

    let resync = ship_once(&dir, &url_b, "b", &["--resync"]);
    assert_eq!(resync.code, Some(0), "{}", resync.text);
    assert!(resync.text.contains("resynchronised"), "{}", resync.text);
    assert_head_office_equals_till(&mut b, &dir, "b");
    assert_eq!(
        count(
            &mut b,
            "SELECT count(*) FROM tilldb_gone WHERE till_id = 'b'"
        ),
        0
    );
    assert_eq!(
        count(
            &mut b,
            "SELECT count(*) FROM tilldb_sales WHERE till_id = 'other'"
        ) + count(
            &mut b,
            "SELECT count(*) FROM tilldb_gone WHERE till_id = 'other'"
        ),
        2,
        "another till's rows were touched"
    );

    // The feed from the snapshot's lsn on: each later sale once.
    demo(&dir, 50);
    let follow = ship_once(&dir, &url_b, "b", &[]);
    assert_eq!(follow.code, Some(0), "{}", follow.text);
    assert!(follow.text.contains("50 transactions"), "{}", follow.text);
    assert_head_office_equals_till(&mut b, &dir, "b");
}

/// `--resync` needs the till's database to itself (its snapshot and lsn come from opening
/// it): beside the till's live application it refuses with exit status 6, says what to do,
/// and creates nothing in PostgreSQL.
#[test]
fn resync_beside_a_live_writer_is_refused_as_locked_and_changes_nothing() {
    let test = "resync_beside_a_live_writer_is_refused_as_locked_and_changes_nothing";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let dir = work.path().join("t1");
    let acks = work.path().join("acks.txt");
    demo(&dir, 20);
    let _writer = Till::writer(&dir, &acks);
    // The writer holds the database once it acknowledged a sale.
    let started = Instant::now();
    while std::fs::read_to_string(&acks).map_or(true, |a| a.is_empty()) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the writer never sold"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let run = ship_once(&dir, &pg.url(), "a", &["--resync"]);
    assert_eq!(run.code, Some(6), "{}", run.text);
    assert!(
        run.text.contains("stop the till's application"),
        "{}",
        run.text
    );
    assert_eq!(
        count(
            &mut pg.client(),
            "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'tilldb%'"
        ),
        0,
        "a refusal created tables"
    );
}

/// Issue 34 ("never silent"): a second till shipping under a till id another till already
/// shipped (two machines with one host name, the default id) found PostgreSQL's watermark
/// past its own log, skipped every transaction of its own at or below it, and printed
/// "caught up: 0 transactions (20 already there)". Refused: the watermark is past the end of
/// this till's durable log, which no honest state allows.
#[test]
fn a_watermark_past_the_tills_log_end_is_refused_not_skipped_over() {
    let test = "a_watermark_past_the_tills_log_end_is_refused_not_skipped_over";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let (first, second) = (work.path().join("t1"), work.path().join("t2"));
    demo(&first, 200);
    demo(&second, 20);
    assert_eq!(ship_once(&first, &pg.url(), "shop", &[]).code, Some(0));
    let mut client = pg.client();
    let watermark = watermark_of(&mut client, "shop").expect("a watermark");
    let durable = feed::published_durable(&second)
        .expect("durable")
        .expect("published")
        .0;
    assert!(u64::try_from(watermark).expect("lsn") > durable);
    let till_files = snapshot(&second);
    let run = ship_once(&second, &pg.url(), "shop", &[]);
    assert_refused(&run, &[u64::try_from(watermark).expect("lsn"), durable]);
    assert_eq!(watermark_of(&mut client, "shop"), Some(watermark));
    assert!(
        snapshot(&second) == till_files,
        "a refusal changed the till's files"
    );
}

/// A consumer the till dropped (it fell past `feed_retention_bytes`: the log it needed was
/// reused) is refused with exit status 3 naming `--resync`, and `--resync` starts it afresh
/// at its snapshot: the head office equals the till again, and the dropped mark is gone.
#[test]
fn a_dropped_consumer_is_refused_and_resync_starts_it_afresh() {
    let test = "a_dropped_consumer_is_refused_and_resync_starts_it_afresh";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let dir = work.path().join("t1");
    let mut client = pg.client();
    audit_applications(&mut client);
    demo(&dir, 100);
    assert_eq!(ship_once(&dir, &pg.url(), "a", &[]).code, Some(0));
    demo(&dir, 100);
    // What the till's checkpoint writes when it drops a consumer (`feed::mark_dropped`).
    let mark = dir.join("feed").join("ship.dropped");
    std::fs::write(&mark, "fell 5 GiB of log files behind").expect("dropped mark");
    let dropped = ship_once(&dir, &pg.url(), "a", &[]);
    assert_eq!(dropped.code, Some(EXIT_REFUSED), "{}", dropped.text);
    assert!(dropped.text.contains("dropped"), "{}", dropped.text);
    assert!(dropped.text.contains("--resync"), "{}", dropped.text);
    let resync = ship_once(&dir, &pg.url(), "a", &["--resync"]);
    assert_eq!(resync.code, Some(0), "{}", resync.text);
    assert!(!mark.exists(), "the dropped mark outlived --resync");
    assert_head_office_equals_till(&mut client, &dir, "a");
}

/// Makes `sales` sales in table `sales` of the till at `dir` through the API, with `options`.
fn api_sales(dir: &Path, options: &Options, day: u32, sales: u32) {
    let db = Db::open(dir, options.clone()).expect("open the till");
    for i in 0..sales {
        let mut txn = db.begin().expect("begin");
        txn.put_in("sales", format!("{day:04}-{i:03}").as_bytes(), &[b'x'; 150])
            .expect("put");
        txn.commit().expect("commit");
    }
    db.checkpoint().expect("checkpoint");
    db.close().expect("close");
}

/// A till's life (issue 34): switched on and off for days with the feed on and nothing
/// shipping, its feed released the log it kept for nobody, so the first `till ship` cannot
/// have what came before. It is refused (exit status 3) naming `--resync`, before PostgreSQL
/// gets a table, and `--resync` ships the whole state, after which later sales follow.
#[test]
fn a_first_shipment_after_the_feed_released_its_log_is_refused_and_resync_ships_it_all() {
    let test =
        "a_first_shipment_after_the_feed_released_its_log_is_refused_and_resync_ships_it_all";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let dir = work.path().join("t1");
    // Small log segments and checkpoint distance, as tilldb's tests/feed_retention.rs: 12
    // days of 400 sales release the log (Buffered: the close makes them durable).
    let options = Options {
        change_feed: true,
        durability: tilldb::Durability::Buffered,
        ..Options::for_tests()
    };
    for day in 0..12 {
        api_sales(&dir, &options, day, 400);
    }
    assert!(
        feed::consumers(&dir).expect("consumers").is_empty(),
        "nothing consumed the feed"
    );
    let till_files = snapshot(&dir);
    let first = ship_once(&dir, &pg.url(), "r", &[]);
    assert_eq!(first.code, Some(EXIT_REFUSED), "{}", first.text);
    assert!(first.text.contains("--resync"), "{}", first.text);
    let mut client = pg.client();
    assert_eq!(
        count(
            &mut client,
            "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'tilldb%'"
        ),
        0,
        "a refusal created tables"
    );
    assert!(
        snapshot(&dir) == till_files,
        "a refusal changed the till's files"
    );

    audit_applications(&mut client);
    let resync = ship_once(&dir, &pg.url(), "r", &["--resync"]);
    assert_eq!(resync.code, Some(0), "{}", resync.text);
    assert!(resync.text.contains("4800 rows"), "{}", resync.text);
    assert_head_office_equals_till(&mut client, &dir, "r");
    api_sales(&dir, &options, 99, 10);
    let follow = ship_once(&dir, &pg.url(), "r", &[]);
    assert_eq!(follow.code, Some(0), "{}", follow.text);
    assert!(follow.text.contains("10 transactions"), "{}", follow.text);
    assert_head_office_equals_till(&mut client, &dir, "r");
}
