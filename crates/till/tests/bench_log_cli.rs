//! `till bench log` end to end, with tiny settings: the JSON contract scripts rely on, the
//! simulated flush latency, the plot, bad input, and cleanup of the bench directory.

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

/// Runs `till bench log` in `dir` with tiny settings plus `extra`, and parses its JSON.
fn bench_json(dir: &Path, extra: &[&str]) -> Value {
    let dir = dir.to_str().expect("utf-8 path");
    let mut args = vec![
        "bench",
        "log",
        "--json",
        "--threads",
        "1,4",
        "--seconds",
        "0.3",
        "--segment-bytes",
        "1048576",
        "--dir",
        dir,
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

fn assert_empty(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir).expect("ls").collect();
    assert!(left.is_empty(), "bench left files: {left:?}");
}

fn number(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number: {v}"))
}

#[test]
fn json_has_the_documented_shape_and_the_dir_is_cleaned_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = bench_json(dir.path(), &[]);
    for key in [
        "raw_flushes_per_sec",
        "raw_p99_us",
        "block_bytes",
        "seconds",
    ] {
        assert!(number(&json, key) > 0.0, "{key}: {json}");
    }
    assert_eq!(json["record_bytes"], 100);
    assert_eq!(json["flush_method"], "fdatasync");
    assert_eq!(json["durability"], "sync");
    assert!(json["simulated_sync_latency_us"].is_null(), "{json}");
    assert!(json.get("fs_type").is_some(), "{json}");
    let results = json["results"].as_array().expect("results array");
    assert_eq!(results.len(), 2);
    for (r, threads) in results.iter().zip([1, 4]) {
        assert_eq!(r["threads"], threads, "{r}");
        assert_eq!(r["durability"], "sync", "{r}");
        assert_eq!(r["flush_method"], "fdatasync", "{r}");
        for key in [
            "commits_per_sec",
            "flushes_per_sec",
            "commits_per_flush",
            "p50_us",
            "p99_us",
            "max_us",
            "ratio_to_raw",
        ] {
            assert!(number(r, key) > 0.0, "{key}: {r}");
        }
        assert!(number(r, "p50_us") <= number(r, "p99_us"), "{r}");
        assert!(number(r, "p99_us") <= number(r, "max_us"), "{r}");
        // The process's CPU over the row, per commit: known on Linux, and no more than every
        // CPU of the machine busy for the whole row (10 ms of tick rounding allowed).
        if cfg!(target_os = "linux") {
            let cpu_us = number(r, "cpu_us_per_commit");
            let cpus = std::thread::available_parallelism().map_or(1, usize::from);
            #[expect(clippy::cast_precision_loss, reason = "a bound on a few CPUs")]
            let bound =
                (number(r, "elapsed_seconds") * cpus as f64 + 0.01) * 1e6 / number(r, "commits");
            assert!((0.0..=bound).contains(&cpu_us), "{cpu_us} > {bound}: {r}");
        } else {
            assert!(r["cpu_us_per_commit"].is_null(), "{r}");
        }
    }
    assert_empty(dir.path());
}

/// With a 2 ms flush and one committer, each commit waits for its own flush: at most ~500/s.
#[test]
fn simulated_sync_latency_bounds_one_committer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = bench_json(dir.path(), &["--sync-latency-us", "2000"]);
    assert_eq!(json["simulated_sync_latency_us"], 2000);
    assert!(number(&json, "raw_flushes_per_sec") < 600.0, "{json}");
    let one = &json["results"][0];
    assert_eq!(one["threads"], 1);
    assert!(number(one, "commits_per_sec") < 600.0, "{one}");
    assert!(number(one, "commits_per_sec") > 0.0, "{one}");
    assert_empty(dir.path());
}

#[test]
fn plot_writes_an_svg_and_text_output_names_the_simulation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bench = dir.path().join("bench");
    let plot = dir.path().join("log.svg");
    let out = till(&[
        "bench",
        "log",
        "--threads",
        "1,2",
        "--seconds",
        "0.2",
        "--segment-bytes",
        "1048576",
        "--sync-latency-us",
        "500",
        "--dir",
        bench.to_str().expect("utf-8 path"),
        "--plot",
        plot.to_str().expect("utf-8 path"),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("SIMULATED flush latency of 500 us"),
        "{stdout}"
    );
    assert!(stdout.contains("commits/flush"), "{stdout}");
    let svg = std::fs::read_to_string(&plot).expect("plot written");
    assert!(svg.contains("<svg"), "{svg}");
    assert!(svg.contains("<polyline"), "{svg}");
    assert!(svg.contains("SIMULATED"), "{svg}");
    assert!(!bench.exists(), "the bench dir it created was left behind");
}

#[test]
fn bad_input_is_refused_with_a_message_not_a_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bench = dir.path().join("bench");
    let cases: [(&str, &str); 7] = [
        ("--threads=1,0", "thread count of 0"),
        ("--threads=", "--threads"),
        ("--seconds=0", "--seconds"),
        ("--seconds=-1", "--seconds"),
        ("--durability=eventually", "sync, buffered or lazy"),
        ("--flush-method=o_sync", "fdatasync"),
        ("--block-bytes=1000", "log block"),
    ];
    for (flag, expected) in cases {
        let out = till(&[
            "bench",
            "log",
            "--dir",
            bench.to_str().expect("utf-8"),
            flag,
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flag}: {err}");
        assert!(err.contains(expected), "{flag}: {err}");
        assert!(!err.contains("panicked"), "{flag}: {err}");
        assert!(!bench.exists(), "{flag}: bench dir left behind");
    }
}
