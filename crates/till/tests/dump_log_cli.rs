//! `till dump-log`: lists every commit record of a database (as many as were committed, each
//! with the pages it changed), changes nothing, and names the file and offset where the log
//! ends: cleanly, at a damaged record, or at a segment cut short.

mod common;

use common::{options, segments, snapshot, till};
use serde_json::Value;
use std::path::Path;
use tilldb::Db;

/// Commits made by `populate`, besides the one that creates the database.
const COMMITS: u64 = 60;

/// A database of `COMMITS` commits over several log segments (4,500-byte values: the log grows
/// by the records alone), closed cleanly.
fn populate(dir: &Path) {
    let db = Db::open(dir, options()).expect("open");
    for i in 0..COMMITS {
        let mut txn = db.begin().expect("begin");
        txn.put(format!("k{i:04}").as_bytes(), &[1u8; 4_500])
            .expect("put");
        if i % 10 == 0 {
            txn.put_in("other", format!("o{i}").as_bytes(), b"x")
                .expect("put");
        }
        txn.commit().expect("commit");
    }
    db.close().expect("close");
}

/// The commit records that end a commit: a whole commit, or the last part of one logged in
/// parts (the test's small cache cuts a commit that changes a few pages into parts).
fn commits(dump: &Value) -> Vec<&Value> {
    dump["records"]
        .as_array()
        .expect("records")
        .iter()
        .filter(|r| r["kind"] == "commit" && r["commit"]["last_part"] == true)
        .collect()
}

#[test]
fn dump_log_lists_every_commit_and_changes_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    populate(&dir);
    let dir_arg = dir.to_str().expect("utf-8 path");
    let before = snapshot(&dir);

    let run = till(&["dump-log", "--json", dir_arg]);
    assert!(run.ok, "{}", run.text());
    let dump = run.json();
    // The create commit (catalog and default table), then one per transaction; some in
    // several records.
    let records = commits(&dump);
    assert_eq!(records.len() as u64, COMMITS + 1, "{dump:#}");
    assert!(dump["commit_records"].as_u64() >= Some(COMMITS + 1));
    assert_eq!(dump["unfinished_commits"], serde_json::json!([]));
    assert!(
        records
            .windows(2)
            .all(|w| w[0]["lsn"].as_u64() < w[1]["lsn"].as_u64()),
        "lsn order"
    );
    for r in &records {
        let commit = &r["commit"];
        assert!(commit["ops"].as_u64().expect("ops") >= 1, "{r:#}");
        assert!(
            !commit["pages"].as_array().expect("pages").is_empty(),
            "{r:#}"
        );
        assert!(r["error"].is_null());
        assert_eq!(
            r["before_checkpoint"], true,
            "a clean close checkpoints at the end"
        );
    }
    // The first commit formats the catalog (page 1) and the default table (page 2).
    assert_eq!(records[0]["commit"]["pages"], serde_json::json!([1, 2]));
    let chain: Vec<&Value> = dump["segments"]
        .as_array()
        .expect("segments")
        .iter()
        .filter(|s| s["role"] == "chain")
        .collect();
    assert!(
        chain.len() >= 3,
        "60 sync commits span 128 KiB segments: {dump:#}"
    );
    let end = &dump["end"];
    assert_eq!(end["clean"], true, "{end:#}");
    assert_eq!(end["fault"], "zero");
    assert_eq!(end["lsn"], dump["end_lsn"]);
    assert_eq!(dump["checkpoint_lsn"], dump["end_lsn"]);
    assert!(dump["error"].is_null());

    let text = till(&["dump-log", dir_arg]);
    assert!(text.ok, "{}", text.text());
    assert!(
        text.stdout
            .contains(&format!("{} commit records", COMMITS + 1)),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("ends cleanly"), "{}", text.stdout);
    assert_eq!(
        text.stdout
            .lines()
            .filter(|l| l.starts_with("  lsn") && l.contains(" commit "))
            .count() as u64,
        COMMITS + 1,
        "one line per commit record: {}",
        text.stdout
    );

    let limited = till(&["dump-log", "--json", "--limit", "5", dir_arg]).json();
    assert_eq!(limited["records_shown"], 5);
    assert_eq!(limited["records"].as_array().expect("records").len(), 5);
    assert_eq!(
        limited["commit_records"],
        COMMITS + 1,
        "the whole log is still read"
    );

    let from = records[30]["lsn"].as_u64().expect("lsn");
    let later = till(&[
        "dump-log",
        "--json",
        "--from-lsn",
        &from.to_string(),
        dir_arg,
    ])
    .json();
    let later = commits(&later)
        .iter()
        .map(|r| r["lsn"].as_u64().expect("lsn"))
        .collect::<Vec<_>>();
    assert_eq!(later.len(), records.len() - 30);
    assert_eq!(later[0], from);

    assert_eq!(snapshot(&dir), before, "dump-log changed the database");
}

#[test]
fn dump_log_names_a_damaged_record_and_a_truncated_segment() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    populate(&dir);
    let dir_arg = dir.to_str().expect("utf-8 path");
    let dump = till(&["dump-log", "--json", dir_arg]).json();
    let records = commits(&dump);
    let victim = records.last().expect("commits");
    let file = victim["file"].as_str().expect("file").to_string();
    let offset = victim["offset"].as_u64().expect("offset");

    // A flipped byte inside the last commit: the log ends there, a torn tail, named.
    let mut bytes = std::fs::read(&file).expect("segment");
    bytes[usize::try_from(offset).expect("small") + 40] ^= 0x10;
    std::fs::write(&file, &bytes).expect("write segment");
    let run = till(&["dump-log", "--json", dir_arg]);
    assert!(
        run.ok,
        "a torn tail is an end, not an error: {}",
        run.text()
    );
    let damaged = run.json();
    assert_eq!(
        damaged["commit_records"].as_u64(),
        dump["commit_records"].as_u64().map(|n| n - 1),
        "{damaged:#}"
    );
    let end = &damaged["end"];
    assert_eq!(end["file"], file.as_str());
    assert_eq!(end["offset"], offset);
    assert_eq!(end["fault"], "bad_crc");
    assert_eq!(end["clean"], false);
    let text = till(&["dump-log", dir_arg]);
    assert!(
        text.stdout.contains(&format!("{file} offset {offset}")),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("torn tail"), "{}", text.stdout);

    // A segment cut short: corruption recovery refuses, named with the file and its length.
    let first = segments(&dir).into_iter().next().expect("a segment");
    let len = std::fs::metadata(&first).expect("stat").len();
    let cut = len - 4096;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&first)
        .expect("open")
        .set_len(cut)
        .expect("truncate");
    let run = till(&["dump-log", dir_arg]);
    assert!(!run.ok, "a truncated segment passed: {}", run.text());
    assert!(
        run.stderr.contains(&first.display().to_string()),
        "{}",
        run.text()
    );
    assert!(
        run.stderr.contains(&format!("offset {cut}")),
        "{}",
        run.text()
    );
    assert!(
        run.stderr.contains("shorter than its header"),
        "{}",
        run.text()
    );
    let run = till(&["dump-log", "--json", dir_arg]);
    assert!(!run.ok);
    let json = run.json();
    assert!(
        json["error"]
            .as_str()
            .expect("error")
            .contains(&format!("offset {cut}")),
        "{json:#}"
    );
}

#[test]
fn dump_log_refuses_a_directory_without_a_log() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let run = till(&["dump-log", tmp.path().to_str().expect("utf-8")]);
    assert!(!run.ok);
    assert!(run.stderr.contains("no tilldb log"), "{}", run.text());
}

/// `till dump-log DIR | head -1`: the reader goes after one line, and `till` ends as every
/// Unix tool does (killed by SIGPIPE, quietly), not with a panic for the line it could not
/// print ("failed printing to stdout: Broken pipe"). 3,000 commits print far more than a pipe
/// holds, so the writes after the reader left fail whatever the timing.
#[cfg(unix)]
#[test]
fn dump_log_into_a_pipe_closed_early_ends_without_a_panic() {
    use std::io::BufRead as _;
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, common::options()).expect("create");
    for i in 0..3000u32 {
        let mut txn = db.begin().expect("begin");
        txn.put(format!("receipt-{i:06}").as_bytes(), b"paid")
            .expect("put");
        txn.commit_with(tilldb::Durability::Buffered)
            .expect("commit");
    }
    drop(db);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_till"))
        .args(["dump-log", dir.to_str().expect("UTF-8")])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run till");
    let mut first = String::new();
    {
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        stdout.read_line(&mut first).expect("one line");
        // Dropped here: the pipe's only reader is gone.
    }
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!first.is_empty());
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A database whose write buffer took its commits and drained them in chunks: each record
/// says what it is (`role`), a buffered commit how many writes it holds, a chunk's last part
/// the drain it belongs to and whether it was the drain's last chunk.
#[test]
fn dump_log_names_buffered_commits_and_drain_chunks() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let db = Db::open(
        &dir,
        tilldb::Options {
            write_buffer_bytes: 8_000,
            background_threads: false,
            ..options()
        },
    )
    .expect("open");
    for i in 0..200u32 {
        let mut txn = db.begin().expect("begin");
        txn.put(format!("k{:04}", i * 7 % 200).as_bytes(), &[2u8; 60])
            .expect("put");
        txn.commit_with(tilldb::Durability::Buffered)
            .expect("commit");
    }
    assert!(db.stats().drain_chunks > 1, "{:?}", db.stats());
    std::mem::forget(db);
    let run = till(&["dump-log", "--json", dir.to_str().expect("utf-8 path")]);
    assert!(run.ok, "{}", run.text());
    let dump = run.json();
    let records = dump["records"].as_array().expect("records");
    let role = |r: &&Value| r["commit"]["role"].as_str().map(str::to_owned);
    let buffered: Vec<&Value> = records
        .iter()
        .filter(|r| role(r).as_deref() == Some("buffered"))
        .collect();
    assert_eq!(buffered.len(), 200, "{dump:#}");
    assert!(buffered.iter().all(|r| r["commit"]["writes"] == 1));
    let chunks: Vec<&Value> = records
        .iter()
        .filter(|r| role(r).as_deref() == Some("chunk") && r["commit"]["last_part"] == true)
        .collect();
    assert!(chunks.len() > 1, "{dump:#}");
    for r in &chunks {
        let (through, lsn) = (r["commit"]["chunk_through"].as_u64(), r["lsn"].as_u64());
        assert!(through.is_some() && through <= lsn, "{r:#}");
    }
    assert!(
        chunks.iter().any(|r| r["commit"]["last_chunk"] == true),
        "a drain's last chunk: {dump:#}"
    );
    let text = till(&["dump-log", dir.to_str().expect("utf-8 path")]).text();
    assert!(text.contains("buffered, 1 writes"), "{text}");
    assert!(
        text.contains("the last chunk of a drain through lsn"),
        "{text}"
    );
}
