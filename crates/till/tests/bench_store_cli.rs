//! `till bench store` end to end, with tiny settings: the JSON contract scripts rely on, a
//! database kept between runs (reopened, not loaded again), `--fresh`, and bad input.

mod common;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn till(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_till"))
        .args(args)
        .output()
        .expect("run till")
}

/// Runs `till bench store` on `dir` with tiny settings plus `extra`, and parses its JSON.
fn bench_json(dir: &Path, extra: &[&str]) -> Value {
    let dir = dir.to_str().expect("utf-8 path");
    let mut args = vec![
        "bench",
        "store",
        "--dir",
        dir,
        "--keys",
        "2000",
        "--threads",
        "1,4",
        "--seconds",
        "0.3",
        // Each phase does some work however loaded the machine: the checks below are of
        // what it did, not of how fast.
        "--min-ops",
        "50",
        "--cache-mib",
        "1",
        "--page-bytes",
        "4096",
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = till(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    common::assert_machine_and_disk(&json);
    common::assert_commit_rows(&json);
    json
}

fn number(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number: {v}"))
}

/// The keys every run reports, whether it created the database or reopened it.
fn assert_run_shape(json: &Value) {
    for key in ["open_seconds", "close_seconds", "page_bytes", "cache_bytes"] {
        assert!(number(json, key) > 0.0, "{key}: {json}");
    }
    assert_eq!(json["page_bytes"], 4096, "{json}");
    assert_eq!(json["durability"], "sync", "{json}");
    assert!(json["flush_method"].is_string(), "{json}");
    assert!(json["dir"].is_string(), "{json}");
    assert_eq!(json["load"]["keys"], 2000, "{json}");
    let results = json["results"].as_array().expect("results array");
    assert_eq!(results.len(), 2, "{json}");
    for (r, threads) in results.iter().zip([1, 4]) {
        assert_eq!(r["threads"], threads, "{r}");
        assert_eq!(r["durability"], "sync", "{r}");
        for key in [
            "commits_per_sec",
            "p50_us",
            "p99_us",
            "max_us",
            "commits_per_flush",
            "log_bytes_per_commit",
        ] {
            assert!(number(r, key) > 0.0, "{key}: {r}");
        }
        assert!(number(r, "p50_us") <= number(r, "p99_us"), "{r}");
        assert!(number(r, "p99_us") <= number(r, "max_us"), "{r}");
        assert_eq!(r["log_appends"], r["commits"], "{r}");
    }
    let reads = &json["reads"];
    assert_eq!(reads["threads"], 4, "{reads}");
    for key in ["gets_per_sec", "p50_us", "p99_us"] {
        assert!(number(reads, key) > 0.0, "{key}: {reads}");
    }
    assert_eq!(reads["missing"], 0, "every key was loaded: {reads}");
    assert!(number(json, "size_on_disk_bytes") > 0.0, "{json}");
}

#[test]
fn a_database_is_kept_reopened_without_reloading_and_recreated_with_fresh() {
    let base = tempfile::tempdir().expect("tempdir");
    let dir = base.path().join("db");

    let first = bench_json(&dir, &[]);
    assert_run_shape(&first);
    assert_eq!(first["created"], true, "{first}");
    assert_eq!(first["load"]["inserted"], 2000, "{first}");
    assert!(number(&first["load"], "inserts_per_sec") > 0.0, "{first}");
    assert!(
        dir.join("tilldb.meta").exists(),
        "the database was not left in place"
    );

    let second = bench_json(&dir, &[]);
    assert_run_shape(&second);
    assert_eq!(second["created"], false, "{second}");
    assert_eq!(second["load"]["inserted"], 0, "{second}");
    assert!(second["load"]["inserts_per_sec"].is_null(), "{second}");
    assert_eq!(second["flush_method"], first["flush_method"], "{second}");
    assert_eq!(second["flush_method_source"], "header", "{second}");

    let fresh = bench_json(&dir, &["--fresh"]);
    assert_run_shape(&fresh);
    assert_eq!(fresh["created"], true, "{fresh}");
    assert_eq!(fresh["load"]["inserted"], 2000, "{fresh}");
}

#[test]
fn bad_input_is_refused_with_a_message_not_a_panic() {
    let base = tempfile::tempdir().expect("tempdir");
    let dir = base.path().join("db");
    let dir_flag = format!("--dir={}", dir.display());
    let file = base.path().join("a-file");
    std::fs::write(&file, b"not a database").expect("write");
    let file_flag = format!("--dir={}", file.display());
    let foreign = base.path().join("foreign");
    std::fs::create_dir(&foreign).expect("mkdir");
    std::fs::write(foreign.join("notes.txt"), b"mine").expect("write");
    let foreign_flag = format!("--dir={}", foreign.display());
    let cases: [(&[&str], &str); 11] = [
        (&["--threads=1,0"], "thread count of 0"),
        (&["--threads="], "--threads"),
        (&["--seconds=0"], "--seconds"),
        (&["--seconds=-1"], "--seconds"),
        (&["--keys=0"], "--keys"),
        (&["--keys=many"], "--keys"),
        (&["--cache-mib=0"], "fewer than 8 pages"),
        (&["--page-bytes=1000"], "power of two"),
        (&["--durability=eventually"], "sync, buffered or lazy"),
        (&[&file_flag], "not a directory"),
        (&[&foreign_flag, "--fresh"], "notes.txt"),
    ];
    for (flags, expected) in cases {
        let mut args = vec!["bench", "store", dir_flag.as_str()];
        args.extend_from_slice(flags);
        // A later --dir replaces the default one only when given once: drop ours.
        if flags.iter().any(|f| f.starts_with("--dir")) {
            args.remove(2);
        }
        let out = till(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flags:?}: {err}");
        assert!(err.contains(expected), "{flags:?}: {err}");
        assert!(!err.contains("panicked"), "{flags:?}: {err}");
        assert!(!dir.exists(), "{flags:?}: created a database anyway");
    }
    assert!(
        foreign.join("notes.txt").exists(),
        "--fresh removed a directory that was not a database"
    );
}

/// With a SIMULATED 2 ms flush, one committer's `Sync` commits wait for a flush each: at most
/// about 500/s, and the document says the latency was simulated.
#[test]
fn simulated_sync_latency_bounds_one_committer_and_is_reported() {
    let base = tempfile::tempdir().expect("tempdir");
    let json = bench_json(
        &base.path().join("db"),
        &["--threads", "1", "--sync-latency-us", "2000"],
    );
    assert_eq!(json["simulated_sync_latency_us"], 2000, "{json}");
    let one = &json["results"][0];
    assert_eq!(one["threads"], 1, "{one}");
    let rate = number(one, "commits_per_sec");
    assert!(rate > 0.0 && rate < 600.0, "{one}");
}
