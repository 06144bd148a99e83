//! `till bench torn` end to end with a tiny database: one row per guard, and the bytes each
//! guard writes say what it is (only doublewrite writes the doublewrite file; full-page
//! images write more log than none).

mod common;

use serde_json::Value;
use std::process::Command;

fn number(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number: {v}"))
}

#[test]
fn each_guard_gets_a_row_and_its_bytes_say_what_it_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plots = tempfile::tempdir().expect("tempdir");
    let plot = plots.path().join("torn.svg");
    let out = Command::new(env!("CARGO_BIN_EXE_till"))
        .args([
            "bench",
            "torn",
            "--keys",
            "20000",
            "--cache-mib",
            "1",
            "--page-bytes",
            "4096",
            "--threads",
            "2",
            "--seconds",
            "0.5",
            // Enough commits over 20,000 keys in a 1 MiB cache that every guard writes pages
            // back, however loaded the machine (a window alone wrote none under load).
            "--min-ops",
            "2000",
            "--rounds",
            "1",
            "--json",
            "--dir",
        ])
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
    common::assert_commit_rows(&json);
    // Background, legend, one bar per guard.
    common::assert_svg(&plot, 2 + 3);
    let rows = json["results"].as_array().expect("results");
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["guard"].as_str().expect("guard"))
        .collect();
    assert_eq!(names, ["none", "doublewrite", "full-page-images"]);
    for r in rows {
        assert!(number(r, "commits_per_sec") > 0.0, "{r}");
        assert!(number(r, "p50_us") <= number(r, "p99_us"), "{r}");
        let parts = number(r, "log_bytes_per_commit")
            + number(r, "doublewrite_bytes_per_commit")
            + number(r, "page_bytes_per_commit")
            + number(r, "other_bytes_per_commit");
        assert!(
            (parts - number(r, "device_bytes_per_commit")).abs() < 1.0,
            "the total is not the sum of its parts: {r}"
        );
        // A database 5x the cache: every guard writes pages back.
        assert!(number(r, "page_bytes_per_commit") > 0.0, "{r}");
        let dw = number(r, "doublewrite_bytes_per_commit");
        if r["guard"] == "doublewrite" {
            assert!(dw > 0.0, "{r}");
        } else {
            assert!(dw.abs() < f64::EPSILON, "{r}");
        }
    }
    assert!((number(&rows[0], "ratio_to_none") - 1.0).abs() < 1e-9);
    let left: Vec<_> = std::fs::read_dir(dir.path()).expect("ls").collect();
    assert!(left.is_empty(), "bench left files: {left:?}");
}
