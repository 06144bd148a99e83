//! `till bench recovery` end to end with tiny logs: a child writes the log and exits without
//! closing, the parent recovers it; the JSON reports what redo replayed.

mod common;

use serde_json::Value;
use std::process::Command;

#[test]
fn recovery_replays_at_least_the_log_asked_for_and_cleans_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plots = tempfile::tempdir().expect("tempdir");
    let plot = plots.path().join("recovery.svg");
    let out = Command::new(env!("CARGO_BIN_EXE_till"))
        .args(["bench", "recovery", "--log-mib", "1,3", "--json", "--dir"])
        .arg(dir.path())
        .arg("--plot")
        .arg(&plot)
        .output()
        .expect("run till");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    common::assert_machine_and_disk(&json);
    common::assert_svg(&plot, 2 + 2);
    assert_eq!(json["cold"], false);
    let results = json["results"].as_array().expect("results");
    assert_eq!(results.len(), 2);
    for (r, mib) in results.iter().zip([1u64, 3]) {
        assert_eq!(r["log_mib"], mib, "{r}");
        let log_bytes = r["log_bytes"].as_u64().expect("log_bytes");
        assert!(log_bytes >= mib << 20, "replayed less than written: {r}");
        // The child commits transactions of 100 puts, then the marker: redo read them all.
        let records = r["records"].as_u64().expect("records");
        assert_eq!(
            records,
            r["commits_written"].as_u64().expect("commits"),
            "{r}"
        );
        assert!(r["ops_applied"].as_u64().expect("ops") >= records, "{r}");
        assert!(r["seconds_per_mib"].as_f64().expect("s/MiB") > 0.0, "{r}");
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).expect("ls").collect();
    assert!(left.is_empty(), "bench left files: {left:?}");
}

#[test]
fn recovery_refuses_bad_sizes() {
    let out = Command::new(env!("CARGO_BIN_EXE_till"))
        .args(["bench", "recovery", "--log-mib", "0"])
        .output()
        .expect("run till");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--log-mib"));
}

/// The large-commit case: a child commits 1,000 rows, then 20,000 rows in one transaction
/// (logged in parts under the default options), is killed once the commit returned, and the
/// open replays the commit: its parts, every row found.
#[test]
fn recovery_of_a_large_commit_replays_it_and_finds_every_row() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_till"))
        .args([
            "bench",
            "recovery",
            "--large-commit-rows",
            "20000",
            "--json",
            "--dir",
        ])
        .arg(dir.path())
        .output()
        .expect("run till");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    common::assert_machine_and_disk(&json);
    assert_eq!(json["key_bytes"], 24);
    assert_eq!(json["value_bytes"], 150);
    assert_eq!(json["cold"], false);
    let results = json["results"].as_array().expect("results");
    assert_eq!(results.len(), 1);
    let r = &results[0];
    assert_eq!(r["rows"], 20_000, "{r}");
    // The base's 1,000 rows and the commit's.
    assert_eq!(json["base_rows"], 1_000);
    assert_eq!(r["rows_found"], 21_000, "{r}");
    // Killed before a checkpoint wrote the commit's pages back: redo read the base's record
    // and the commit's parts (row by row into a table with rows, 20,000 rows make about
    // 8 MiB of log, more than one 8 MiB part).
    assert!(r["records"].as_u64().expect("records") > 2, "{r}");
    assert_eq!(r["parts_skipped"], 0, "{r}");
    assert!(
        r["log_bytes"].as_u64().expect("log_bytes") > 20_000 * 150,
        "{r}"
    );
    assert!(r["ops_applied"].as_u64().expect("ops") > 0, "{r}");
    for field in [
        "commit_seconds",
        "redo_seconds",
        "open_seconds",
        "mib_per_sec",
    ] {
        assert!(r[field].as_f64().expect(field) > 0.0, "{field}: {r}");
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).expect("ls").collect();
    assert!(left.is_empty(), "bench left files: {left:?}");
}
