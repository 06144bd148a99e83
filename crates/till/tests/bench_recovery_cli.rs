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
