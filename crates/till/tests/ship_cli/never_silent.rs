//! Issue 34: `till ship` is never silent. Each test is named after what went wrong before:
//! a refusal where it shipped nothing and said "caught up", the server's message and SQLSTATE
//! where it said "db error", an exit status where it retried forever.

use super::*;

/// `till ship`'s exit statuses (docs/feed.md, "Exit status").
const EXIT_USAGE: i32 = 2;
pub(super) const EXIT_REFUSED: i32 = 3;
const EXIT_POSTGRES_REFUSED: i32 = 4;
const EXIT_POSTGRES_UNREACHABLE: i32 = 5;

/// How a run of `till` ended: its exit code (`None`: killed at the deadline) and output.
pub(super) struct Ended {
    pub(super) code: Option<i32>,
    pub(super) text: String,
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
pub(super) fn ship_once(dir: &Path, url: &str, till_id: &str, extra: &[&str]) -> Ended {
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
pub(super) fn demo(dir: &Path, sales: u64) {
    let run = till(&[
        "demo",
        dir.to_str().expect("utf-8"),
        "--sales",
        &sales.to_string(),
    ]);
    assert!(run.ok, "till demo: {}", run.text());
}

/// The position the till's `ship` consumer acknowledged.
pub(super) fn consumer_position(dir: &Path) -> u64 {
    let consumers = feed::consumers(dir).expect("consumers");
    let ship = consumers
        .iter()
        .find(|c| c.name == "ship")
        .expect("the ship consumer");
    ship.position.0
}

pub(super) fn watermark_of(client: &mut Client, till_id: &str) -> Option<i64> {
    client
        .query_opt(
            "SELECT lsn FROM tilldb_watermark WHERE till_id = $1",
            &[&till_id],
        )
        .expect("watermark")
        .map(|r| r.get(0))
}

pub(super) fn count(client: &mut Client, sql: &str) -> i64 {
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

/// Issue 34: PostgreSQL's errors printed as "db error", without the server's message: an
/// unknown role, a missing database or a `tilldb_sales` of another schema said nothing an
/// operator could act on. Each must print the server's message and SQLSTATE and exit 4.
#[test]
fn postgres_errors_print_the_servers_message_and_sqlstate_not_just_db_error() {
    let test = "postgres_errors_print_the_servers_message_and_sqlstate_not_just_db_error";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let dir = work.path().join("t1");
    demo(&dir, 20);

    // A server that refuses the connection: an unknown role, at once, not after retries.
    let url = pg.url_of("postgres").replace("tilldb@", "nosuchrole@");
    let role = ship_once(&dir, &url, "a", &[]);
    assert_eq!(role.code, Some(EXIT_POSTGRES_REFUSED), "{}", role.text);
    assert!(role.text.contains("28000"), "no SQLSTATE: {}", role.text);
    assert!(
        role.text.contains("role \"nosuchrole\" does not exist"),
        "no server message: {}",
        role.text
    );
    assert!(!role.text.contains("retrying"), "{}", role.text);

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
