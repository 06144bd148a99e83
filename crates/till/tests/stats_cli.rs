//! `till stats`: the numbers match what was written (keys per table, pages, files, log), the
//! database is not changed, and a database with commits after its checkpoint (a crash image)
//! is described without recovery, pointing at `till check` for its trees.

mod common;

use common::{copy_dir, options, snapshot, till};
use serde_json::Value;
use std::path::Path;
use tilldb::Db;

/// Keys left in the default table by `populate`.
const DEFAULT_KEYS: u64 = 40 * 30 - 25 * 30 + 1;
/// Keys in table "other".
const OTHER_KEYS: u64 = 40;

/// 40 commits of 30 keys and one key of "other" each, a value in overflow pages, then 25
/// commits deleting (which frees pages). Returns the database, still open.
fn populate(dir: &Path) -> Db {
    let db = Db::open(dir, options()).expect("open");
    for i in 0..40u32 {
        let mut txn = db.begin().expect("begin");
        for j in 0..30u32 {
            txn.put(format!("k{i:04}{j:03}").as_bytes(), &[1u8; 100])
                .expect("put");
        }
        txn.put_in("other", format!("o{i:02}").as_bytes(), b"x")
            .expect("put");
        txn.commit().expect("commit");
    }
    let mut txn = db.begin().expect("begin");
    txn.put(b"big", &vec![3u8; 30_000]).expect("put");
    txn.commit().expect("commit");
    for i in 0..25u32 {
        let mut txn = db.begin().expect("begin");
        for j in 0..30u32 {
            txn.delete(format!("k{i:04}{j:03}").as_bytes())
                .expect("delete");
        }
        txn.commit().expect("commit");
    }
    db
}

fn table<'a>(stats: &'a Value, name: &str) -> &'a Value {
    stats["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no table {name:?}: {stats:#}"))
}

#[test]
fn stats_match_what_was_written_and_change_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    populate(&dir).close().expect("close");
    let dir_arg = dir.to_str().expect("utf-8 path");
    let before = snapshot(&dir);

    let run = till(&["stats", "--json", dir_arg]);
    assert!(run.ok, "{}", run.text());
    let stats = run.json();
    let header = &stats["header"];
    assert_eq!(header["page_bytes"], 4096);
    assert_eq!(header["flush_method"], "fdatasync");
    assert_eq!(header["torn_page_guard"], "doublewrite");
    let valid_slots = stats["header_slots"]
        .as_array()
        .expect("slots")
        .iter()
        .filter(|s| s["state"] == "valid")
        .count();
    assert_eq!(
        valid_slots, 2,
        "create, checkpoints and close wrote both slots"
    );

    assert_eq!(table(&stats, "")["keys"], DEFAULT_KEYS);
    assert_eq!(table(&stats, "other")["keys"], OTHER_KEYS);
    assert!(
        table(&stats, "")["overflow_pages"].as_u64() >= Some(7),
        "30 000 B in 4 KiB pages"
    );
    assert_eq!(table(&stats, "other")["depth"], 1);
    assert!(stats["trees_unavailable"].is_null(), "{stats:#}");

    let pages = &stats["pages"];
    let count = pages["page_count"].as_u64().expect("page count");
    let free = pages["free_list"].as_u64().expect("free list");
    assert!(free > 0, "deleting 750 keys freed pages: {stats:#}");
    assert_eq!(
        pages["in_trees"].as_u64().expect("in trees") + free + 1,
        count
    );
    assert_eq!(pages["leaked"], serde_json::json!([]));
    assert_eq!(pages["doubly_used"], serde_json::json!([]));

    let data_bytes = std::fs::metadata(dir.join("data.tdb")).expect("data").len();
    let files = &stats["files"];
    assert_eq!(files["data_bytes"], data_bytes);
    assert_eq!(files["data_page_places"], data_bytes / 4096);
    assert_eq!(
        files["data_page_places"], count,
        "a clean close wrote every page"
    );
    // The page ledger: a clean close saved an lsn for every page written (one block here).
    let ledger_bytes = std::fs::metadata(dir.join("ledger.tdb"))
        .expect("ledger")
        .len();
    assert_eq!(files["ledger_bytes"], ledger_bytes);
    assert!(
        ledger_bytes >= 4096,
        "no ledger block saved: {ledger_bytes} B"
    );
    let segments = common::segments(&dir);
    assert_eq!(files["wal_segment_files"], segments.len());
    let wal_bytes: u64 = segments
        .iter()
        .map(|p| std::fs::metadata(p).expect("segment").len())
        .sum();
    assert_eq!(files["wal_bytes"], wal_bytes);

    let log = &stats["log"];
    assert_eq!(log["commits_after_checkpoint"], 0);
    assert_eq!(log["end_lsn"], header["checkpoint_lsn"]);
    assert_eq!(log["end"]["clean"], true);
    assert!(log["error"].is_null());

    let text = till(&["stats", dir_arg]);
    assert!(text.ok, "{}", text.text());
    assert!(text.stdout.contains("(default)"), "{}", text.stdout);
    assert!(
        text.stdout.contains(&format!("{free} on the free list")),
        "{}",
        text.stdout
    );
    assert_eq!(snapshot(&dir), before, "stats changed the database");
}

/// A copy of an open database (what a crash leaves: every commit in the log, the data file
/// as of the last checkpoint): `stats` counts the commits recovery would replay and does not
/// read trees from the stale data file; after `till check` (which recovers) it does.
#[test]
fn stats_of_a_crash_image_defers_trees_to_check() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let image = tmp.path().join("image");
    let db = populate(&dir);
    copy_dir(&dir, &image);
    db.close().expect("close");
    let image_arg = image.to_str().expect("utf-8 path");
    let before = snapshot(&image);

    let stats = till(&["stats", "--json", image_arg]);
    assert!(stats.ok, "{}", stats.text());
    let stats = stats.json();
    assert_eq!(
        stats["log"]["commits_after_checkpoint"], 66,
        "every commit but the create's: {stats:#}"
    );
    assert!(stats["tables"].is_null());
    // Issue 21: what recovery would replay, and how old the last checkpoint is.
    let redo = stats["log"]["redo_bytes"].as_u64().expect("redo_bytes");
    assert!(redo > 66 * 100, "66 commits after the checkpoint: {redo} B");
    assert!(
        stats["log"]["checkpoint_age_seconds"]
            .as_f64()
            .is_some_and(|s| (0.0..3600.0).contains(&s)),
        "{stats:#}"
    );
    let why = stats["trees_unavailable"].as_str().expect("why");
    assert!(why.contains("till check"), "{why}");
    let at_end = stats["log"]["page_count_at_end"]
        .as_u64()
        .expect("from the log");
    assert!(at_end > stats["pages"]["page_count"].as_u64().expect("header"));
    assert_eq!(snapshot(&image), before, "stats changed the crash image");

    // `till check` recovers in memory and reports the trees, changing nothing; opening the
    // database recovers it for good, and then stats reads its trees.
    let check = till(&["check", image_arg]);
    assert!(check.ok, "{}", check.text());
    assert!(check.stdout.contains("table (default)"), "{}", check.text());
    assert!(snapshot(&image) == before, "check changed the crash image");
    Db::open(&image, options())
        .expect("recover")
        .close()
        .expect("close");
    let stats = till(&["stats", "--json", image_arg]).json();
    assert_eq!(table(&stats, "")["keys"], DEFAULT_KEYS);
    assert_eq!(table(&stats, "other")["keys"], OTHER_KEYS);
    assert_eq!(stats["pages"]["page_count"], at_end);
}

#[test]
fn stats_refuses_a_directory_without_a_database() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let run = till(&["stats", tmp.path().to_str().expect("utf-8")]);
    assert!(!run.ok);
    assert!(run.stderr.contains("no tilldb database"), "{}", run.text());
}

#[test]
fn stats_lists_the_change_feed_and_its_consumers() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let feed_options = tilldb::Options {
        change_feed: true,
        ..options()
    };
    let db = Db::open(&dir, feed_options).expect("open");
    let mut consumer = tilldb::feed::Feed::open_consumer(&dir, "head-office").expect("register");
    for i in 0..5u32 {
        let mut txn = db.begin().expect("begin");
        txn.put(format!("k{i}").as_bytes(), b"v").expect("put");
        txn.commit().expect("commit");
    }
    let first = consumer
        .next(std::time::Duration::from_secs(5))
        .expect("feed")
        .expect("a transaction");
    consumer.acknowledge(first.lsn).expect("acknowledge");
    db.close().expect("close");
    let run = till(&["stats", "--json", dir.to_str().expect("utf-8")]);
    assert!(run.ok, "{}", run.text());
    let feed = &run.json()["feed"];
    assert_eq!(feed["consumers"][0]["name"], "head-office", "{feed:#}");
    assert_eq!(feed["consumers"][0]["position"], first.lsn.0, "{feed:#}");
    assert!(
        feed["consumers"][0]["behind_bytes"].as_u64() > Some(0),
        "{feed:#}"
    );
    assert_eq!(feed["consumers"][0]["dropped"], Value::Null, "{feed:#}");
    // What the log is kept for, and why: the consumer, behind the clean close's checkpoint.
    assert_eq!(feed["log_kept_from"], first.lsn.0, "{feed:#}");
    assert!(
        feed["log_kept_for"]
            .as_str()
            .is_some_and(|w| w.starts_with("consumer head-office")),
        "{feed:#}"
    );
    assert_eq!(feed["released_for_nobody_before"], Value::Null, "{feed:#}");
    let text = till(&["stats", dir.to_str().expect("utf-8")]);
    assert!(
        text.stdout.contains("consumer head-office: at lsn"),
        "{}",
        text.text()
    );
    assert!(
        text.stdout.contains(&format!(
            "the log is kept from lsn {} for consumer head-office",
            first.lsn.0
        )),
        "{}",
        text.text()
    );
    // A database that never had the feed says nothing of one.
    let plain = tmp.path().join("plain");
    Db::open(&plain, options())
        .expect("open")
        .close()
        .expect("close");
    let run = till(&["stats", "--json", plain.to_str().expect("utf-8")]);
    assert_eq!(run.json()["feed"], Value::Null);
}

/// Issue 34: with the feed on and nobody consuming it, `till stats` says what the log is kept
/// for (the feed's start, within its bound), and once the feed released log for nobody, that
/// a new consumer is refused and what to do.
#[test]
fn stats_says_what_the_log_is_kept_for_with_no_consumer_and_when_the_feed_released_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let feed_options = tilldb::Options {
        change_feed: true,
        ..tilldb::Options::for_tests()
    };
    let db = Db::open(&dir, feed_options.clone()).expect("open");
    let mut txn = db.begin().expect("begin");
    txn.put(b"k", b"v").expect("put");
    txn.commit().expect("commit");
    db.close().expect("close");
    let run = till(&["stats", "--json", dir.to_str().expect("utf-8")]);
    assert!(run.ok, "{}", run.text());
    let feed = &run.json()["feed"];
    assert_eq!(feed["log_kept_from"], feed["start"], "{feed:#}");
    assert!(
        feed["log_kept_for"]
            .as_str()
            .is_some_and(|w| w.contains("no consumer registered")),
        "{feed:#}"
    );
    // Reopens and sales until the feed releases log for nobody (1 MiB segments, 2 MiB of
    // log files kept for nobody).
    for day in 0..12 {
        let db = Db::open(&dir, feed_options.clone()).expect("open");
        for i in 0..400 {
            let mut txn = db.begin().expect("begin");
            txn.put(format!("{day}-{i}").as_bytes(), &[1; 150])
                .expect("put");
            txn.commit().expect("commit");
        }
        db.checkpoint().expect("checkpoint");
        db.close().expect("close");
    }
    let run = till(&["stats", "--json", dir.to_str().expect("utf-8")]);
    let feed = &run.json()["feed"];
    assert_eq!(
        feed["released_for_nobody_before"], feed["start"],
        "{feed:#}"
    );
    let text = till(&["stats", dir.to_str().expect("utf-8")]);
    assert!(
        text.stdout
            .contains("log released while no consumer was registered"),
        "{}",
        text.text()
    );
}
