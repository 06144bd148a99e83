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
#[path = "ship_cli/encrypted.rs"]
mod encrypted;
#[path = "ship_cli/never_silent.rs"]
mod never_silent;
#[path = "common/postgres.rs"]
mod postgres_server;
#[path = "ship_cli/resync.rs"]
mod resync;

use common::{snapshot, till};
use postgres::Client;
use postgres_server::{Postgres, audit_applications};
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

    /// Kills the child; returns its exit code if it had ended by itself before.
    fn kill(&mut self) -> Option<i32> {
        let ended = self.0.try_wait().ok().flatten().and_then(|s| s.code());
        let _ = self.0.kill();
        let _ = self.0.wait();
        ended
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.kill();
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

/// Stops a till's writer and shipper, ships the rest, and checks PostgreSQL against it.
fn check_till(client: &mut Client, url: &str, t: &mut Till) {
    t.writer.kill();
    // A following shipper retries PostgreSQL until stopped: one that ended by itself refused
    // or failed (issue 34: a refusal here would be a false one, as nothing was restored).
    let ended = t.shipper.kill();
    assert_eq!(ended, None, "{}: the shipper ended by itself", t.id);
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
                let ended = till.shipper.kill();
                assert_eq!(ended, None, "{}: the shipper ended by itself", till.id);
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
