//! Issue 34: `till ship --resync`, the way on after a refusal: the till's whole state from one
//! snapshot, then the feed from that snapshot's lsn, each transaction once.

use super::never_silent::{EXIT_REFUSED, consumer_position, count, demo, ship_once, watermark_of};
use super::*;

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
        let pg = pg_rows(client, &format!("tilldb_{table}"), till_id);
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
