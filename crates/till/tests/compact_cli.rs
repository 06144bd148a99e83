//! `till compact DIR` (issue 20, item 4): after most rows are deleted the data file shrinks
//! to what the rows need, every row is still there and the database checks clean; a database
//! open elsewhere is refused; the remains of a compaction cut short are cleared; and a
//! compaction killed with kill -9 at any moment leaves DIR a whole database with every row.

mod common;

use common::{options, till};
use std::ops::Bound;
use std::path::Path;
use tilldb::{Db, Direction};

const ROWS: u32 = 6000;

fn key(i: u32) -> Vec<u8> {
    format!("sale-{i:06}").into_bytes()
}

/// `ROWS` rows in the default table and in "lines", then all but every tenth deleted from
/// both.
fn populate(dir: &Path) {
    let db = Db::open(dir, options()).expect("open");
    for batch in 0..ROWS / 200 {
        let mut txn = db.begin().expect("begin");
        for i in batch * 200..(batch + 1) * 200 {
            txn.put(&key(i), &[3; 120]).expect("put");
            txn.put_in("lines", &key(i), &[4; 60]).expect("put");
        }
        txn.commit().expect("commit");
    }
    for batch in 0..ROWS / 200 {
        let mut txn = db.begin().expect("begin");
        for i in (batch * 200..(batch + 1) * 200).filter(|i| i % 10 != 0) {
            txn.delete(&key(i)).expect("delete");
            txn.delete_in("lines", &key(i)).expect("delete");
        }
        txn.commit().expect("commit");
    }
    db.close().expect("close");
}

/// Every row the populated database keeps, checked, and the trees and pages clean.
fn assert_whole(dir: &Path) {
    let db = Db::open(dir, options()).expect("DIR opens");
    for table in ["", "lines"] {
        let rows: Vec<(Vec<u8>, Vec<u8>)> = db
            .range_in(
                table,
                Bound::Unbounded,
                Bound::Unbounded,
                Direction::Forward,
            )
            .expect("range")
            .collect::<tilldb::Result<_>>()
            .expect("rows");
        let expected: Vec<Vec<u8>> = (0..ROWS).filter(|i| i % 10 == 0).map(key).collect();
        let keys: Vec<Vec<u8>> = rows.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(keys, expected, "table {table:?}");
        let value = if table.is_empty() {
            [3; 120].to_vec()
        } else {
            [4; 60].to_vec()
        };
        assert!(rows.iter().all(|(_, v)| *v == value), "table {table:?}");
    }
    db.check_tables().expect("trees");
    assert!(db.check_space().expect("space").is_clean());
    db.close().expect("close");
}

fn data_bytes(dir: &Path) -> u64 {
    std::fs::metadata(dir.join("data.tdb"))
        .expect("data file")
        .len()
}

#[test]
fn compact_shrinks_the_data_file_and_keeps_every_row() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("till");
    populate(&dir);
    let before = data_bytes(&dir);
    // The remains of a compaction cut short beside it are cleared, with a note.
    std::fs::create_dir_all(tmp.path().join("till.tilldb-compacted/wal")).expect("leftover");
    let run = till(&["compact", dir.to_str().expect("utf-8"), "--json"]);
    assert!(run.ok, "{}", run.text());
    assert!(
        run.stderr.contains("left by a compaction cut short"),
        "{}",
        run.text()
    );
    let json = run.json();
    assert_eq!(json["tables"], 2, "{json}");
    assert_eq!(json["entries"], u64::from(ROWS / 10 * 2), "{json}");
    let after = data_bytes(&dir);
    assert_eq!(json["data_bytes_before"], before, "{json}");
    assert_eq!(json["data_bytes_after"], after, "{json}");
    assert!(
        after * 4 < before,
        "a tenth of the rows left: the data file shrinks ({before} -> {after} bytes)"
    );
    assert!(
        json["pages_after"].as_u64().expect("pages")
            < json["pages_before"].as_u64().expect("pages"),
        "{json}"
    );
    assert_whole(&dir);
    let names: Vec<String> = std::fs::read_dir(tmp.path())
        .expect("ls")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["till".to_string()], "nothing left beside it");

    // Compacting again changes nothing it holds.
    let again = till(&["compact", dir.to_str().expect("utf-8")]);
    assert!(again.ok, "{}", again.text());
    assert!(
        again.stdout.contains("2 tables, 1200 entries"),
        "{}",
        again.text()
    );
    assert_whole(&dir);
}

#[test]
fn a_database_open_elsewhere_is_refused_and_a_missing_one_too() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("till");
    populate(&dir);
    let db = Db::open(&dir, options()).expect("open");
    let run = till(&["compact", dir.to_str().expect("utf-8")]);
    assert!(!run.ok);
    assert!(run.stderr.contains("already open"), "{}", run.text());
    drop(db);
    let none = till(&[
        "compact",
        tmp.path().join("nothing").to_str().expect("utf-8"),
    ]);
    assert!(!none.ok);
    assert!(
        none.stderr.contains("holds no tilldb database"),
        "{}",
        none.text()
    );
    assert_whole(&dir);
}

/// kill -9 at moments spread over a whole compaction (one is timed first): DIR is always a whole
/// database with every row (the old one or the compacted one), whatever is left beside it;
/// the next compaction clears the leftovers and finishes.
#[test]
fn a_compaction_killed_at_any_moment_leaves_the_database_whole() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("till");
    populate(&dir);
    // The first compaction shrinks the file; the killed ones below redo one of the compacted
    // database, so the second run is the one timed to spread the kills over.
    let first = till(&["compact", dir.to_str().expect("utf-8")]);
    assert!(first.ok, "{}", first.text());
    let started = std::time::Instant::now();
    let run = till(&["compact", dir.to_str().expect("utf-8")]);
    assert!(run.ok, "{}", run.text());
    let whole_run = started.elapsed();
    let mut killed = 0;
    let points = 16u32;
    for point in 0..=points {
        let delay = whole_run * point / points;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_till"))
            .args(["compact", dir.to_str().expect("utf-8")])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(delay);
        if child.try_wait().expect("wait").is_none() {
            killed += 1;
        }
        let _ = child.kill();
        let _ = child.wait();
        assert_whole(&dir);
    }
    println!(
        "compactions killed midway: {killed} of {} (a whole run {whole_run:?})",
        points + 1
    );
    // How many land inside a run depends on the machine's load; the first, at once after
    // the start, always does (a compaction opens a database first).
    assert!(killed >= 1, "no kill landed inside a compaction");
    let run = till(&["compact", dir.to_str().expect("utf-8")]);
    assert!(run.ok, "{}", run.text());
    assert_whole(&dir);
}
