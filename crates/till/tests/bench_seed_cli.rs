//! `till bench seed` and `till bench commit` end to end, with tiny settings: the JSON
//! contract, what the counters must say about each durability level, the simulated latency as
//! a physical bound, bad input, and cleanup of the bench directory.

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

/// Runs `till` with `args` plus `--json --dir DIR` and parses its JSON.
fn json_of(dir: &Path, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend_from_slice(&["--json", "--dir", dir.to_str().expect("utf-8 path")]);
    let out = till(&all);
    assert!(
        out.status.success(),
        "till {all:?}: {}",
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
fn seed_runs_each_method_and_durability_and_counts_one_flush_per_sync_commit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plots = tempfile::tempdir().expect("tempdir");
    let plot = plots.path().join("seed.svg");
    let json = json_of(
        dir.path(),
        &[
            "bench",
            "seed",
            "--plot",
            plot.to_str().expect("utf-8 path"),
            "--commits",
            "40",
            "--flush-methods",
            "fdatasync,dsync",
            "--durabilities",
            "sync,buffered,lazy",
            "--raw-seconds",
            "0.1",
        ],
    );
    assert_eq!(json["workload"], "seed");
    // Background, legend, and a bar for each of the 2 x 3 rows.
    common::assert_svg(&plot, 2 + 6);
    assert_eq!(json["commits"], 40);
    assert_eq!(json["value_bytes"], 100);
    let methods = json["methods"].as_array().expect("methods");
    assert_eq!(methods.len(), 2, "{json}");
    for m in methods {
        assert!(m["skipped"].is_null(), "{m}");
        assert!(number(m, "raw_flushes_per_sec") > 0.0, "{m}");
        assert!(number(m, "block_bytes") >= 512.0, "{m}");
    }
    let results = json["results"].as_array().expect("results");
    assert_eq!(results.len(), 6, "{json}");
    for r in results {
        assert_eq!(r["threads"], 1, "{r}");
        assert_eq!(r["commits"], 40, "{r}");
        for key in ["commits_per_sec", "elapsed_seconds", "p50_us", "max_us"] {
            assert!(number(r, key) > 0.0, "{key}: {r}");
        }
        assert!(number(r, "p50_us") <= number(r, "p99_us"), "{r}");
        assert!(number(r, "p99_us") <= number(r, "max_us"), "{r}");
        // Both rates are printed rounded to 0.1/s, so the ratio recomputed from them is off
        // by up to about 0.05 / raw_flushes_per_sec of itself (0.015 at 108 x a raw rate of
        // 353/s, which failed a fixed 0.01 bound on a slow hour): compare relatively.
        let ratio = number(r, "commits_per_sec") / number(r, "raw_flushes_per_sec");
        assert!(
            (number(r, "ratio_to_raw") - ratio).abs() <= 0.01 + ratio * 0.001,
            "{r}"
        );
        let (method, durability) = (r["flush_method"].as_str(), r["durability"].as_str());
        let flushes = r["flushes"].as_u64().expect("flushes");
        match (method, durability) {
            // One client: every sync commit is its own flushed write (a write-through
            // method's write made through to the device counts as its flush).
            // The log grows by the record alone: the tail block's copy goes to a tail slot,
            // not a fresh block per commit.
            (_, Some("sync")) => {
                assert_eq!(flushes, 40, "{r}");
                let log = number(r, "log_bytes_per_commit");
                assert!(log > 0.0 && log <= 1024.0, "{r}");
            }
            // Buffered writes to the OS per commit and flushes nothing, under every method,
            // the write-through ones included (issue 37): at most the background flusher's
            // one flush if its interval ends inside the run.
            (_, Some("buffered")) => {
                assert!(flushes <= 1, "a Buffered commit cost a device flush: {r}");
                let log = number(r, "log_bytes_per_commit");
                assert!(log > 0.0 && log <= 1024.0, "{r}");
            }
            (_, Some("lazy")) => {}
            other => panic!("unexpected row {other:?}: {r}"),
        }
    }
    assert_empty(dir.path());
}

#[test]
fn seed_prints_a_table_with_the_sync_verdict() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = till(&[
        "bench",
        "seed",
        "--commits",
        "10",
        "--flush-methods",
        "fdatasync",
        "--durabilities",
        "sync",
        "--raw-seconds",
        "0.1",
        "--dir",
        dir.path().to_str().expect("utf-8"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("10 x (insert one row, commit)"), "{text}");
    assert!(text.contains("fdatasync"), "{text}");
    assert!(text.contains("sync: lowest x raw"), "{text}");
    assert_empty(dir.path());
}

#[test]
fn seed_refuses_bad_input_before_touching_the_disk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bench = dir.path().join("bench");
    let bench = bench.to_str().expect("utf-8");
    for (args, why) in [
        (vec!["--commits", "0"], "--commits"),
        (vec!["--raw-seconds", "0"], "--raw-seconds"),
        (vec!["--page-bytes", "1000"], "page size"),
        (vec!["--sync-latency-us", "2000000"], "--sync-latency-us"),
    ] {
        let mut all = vec!["bench", "seed", "--dir", bench];
        all.extend(args);
        let out = till(&all);
        assert!(!out.status.success(), "{all:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(why), "{all:?}: {err}");
        assert!(!Path::new(bench).exists(), "{all:?} created the bench dir");
    }
}

#[test]
fn commit_rows_share_flushes_and_scale_from_one_thread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plot = dir.path().join("commit.svg");
    let bench = dir.path().join("bench");
    let json = json_of(
        &bench,
        &[
            "bench",
            "commit",
            "--threads",
            "1,8",
            "--seconds",
            "0.4",
            "--plot",
            plot.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(json["workload"], "store-inserts");
    assert_eq!(json["torn_page_guard"], "doublewrite");
    assert_eq!(json["page_bytes"], 16384);
    let results = json["results"].as_array().expect("results");
    assert_eq!(results.len(), 2);
    let one = &results[0];
    assert_eq!(one["threads"], 1);
    assert!(
        (number(one, "ratio_to_one_thread") - 1.0).abs() < 1e-9,
        "{one}"
    );
    for r in results {
        let commits = number(r, "commits");
        let flushes = number(r, "flushes");
        assert!(commits > 0.0, "{r}");
        // Sync: a commit is acknowledged only after a flush covering it.
        assert!(flushes > 0.0 && flushes <= commits, "{r}");
        assert!(number(r, "log_bytes_per_commit") > 100.0, "{r}");
    }
    let svg = std::fs::read_to_string(&plot).expect("plot written");
    assert!(
        svg.contains("<svg") && svg.contains("insert+commit"),
        "{svg}"
    );
    assert!(!bench.exists(), "the bench dir it created is left behind");
}

#[test]
fn commit_with_simulated_latency_never_flushes_faster_than_the_device() {
    // One flush at a time of at least 5 ms: at most 200 flushes/s, whatever the threads; 16
    // threads must share them (several commits per flush).
    let dir = tempfile::tempdir().expect("tempdir");
    let json = json_of(
        dir.path(),
        &[
            "bench",
            "commit",
            "--threads",
            "16",
            "--seconds",
            "0.5",
            "--sync-latency-us",
            "5000",
        ],
    );
    assert_eq!(json["simulated_sync_latency_us"], 5000);
    assert!(number(&json, "raw_flushes_per_sec") <= 200.0, "{json}");
    let r = &json["results"][0];
    assert!(number(r, "flushes_per_sec") <= 200.0, "{r}");
    assert!(number(r, "commits_per_flush") > 2.0, "{r}");
    assert_empty(dir.path());
}

/// `bench block-size`: each log block size a row, and a lone `Sync` commit grows the log by its
/// record alone, the same at every block size (its block's copy goes to a tail slot, not a
/// fresh padded block); a block size that is no power of two is refused before the disk is
/// touched.
#[test]
fn block_size_rows_grow_the_log_by_the_record_alone_per_lone_sync_commit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = json_of(
        dir.path(),
        &[
            "bench",
            "block-size",
            "--block-bytes",
            "512,4096",
            "--commits",
            "30",
            "--flush-methods",
            "fdatasync",
            "--raw-seconds",
            "0.1",
        ],
    );
    let rows = json["results"].as_array().expect("results");
    assert_eq!(rows.len(), 2, "{json}");
    // Each lone commit's block is copied to a tail slot, not padded: the log grows by the
    // record alone, whatever the block size (within a tenth: now and then a record leaves
    // its block less room than a slot's trailer, and the block is padded; with 224-byte
    // records and 512-byte blocks that adds 17 bytes a commit over 30).
    let record = number(&rows[1], "log_bytes_per_commit");
    for (row, block) in rows.iter().zip([512u32, 4096]) {
        assert_eq!(row["block_bytes"].as_u64(), Some(u64::from(block)));
        assert_eq!(row["durability"], "sync");
        let log_bytes = number(row, "log_bytes_per_commit");
        assert!(
            log_bytes < f64::from(block) / 2.0 && (log_bytes - record).abs() <= record / 10.0,
            "{row}"
        );
        assert_eq!(
            row["flushes"].as_u64(),
            Some(30),
            "one flush per lone sync commit"
        );
    }
    assert_empty(dir.path());
    let out = till(
        &["bench", "block-size", "--block-bytes", "1000", "--dir"]
            .into_iter()
            .chain([dir.path().to_str().expect("utf-8")])
            .collect::<Vec<_>>(),
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("power of two"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `--plot FILE.png` draws the same picture as a PNG; any other name is refused before the
/// benchmark runs (it used to write SVG text into whatever file it was given). Needs the
/// `png` feature (on by default).
#[cfg(feature = "png")]
#[test]
fn plot_to_png_writes_a_png_and_other_names_are_refused_up_front() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plots = tempfile::tempdir().expect("tempdir");
    let png = plots.path().join("seed.png");
    json_of(
        dir.path(),
        &[
            "bench",
            "seed",
            "--plot",
            png.to_str().expect("utf-8 path"),
            "--commits",
            "10",
            "--flush-methods",
            "fdatasync",
            "--durabilities",
            "lazy",
            "--raw-seconds",
            "0.1",
        ],
    );
    let bytes = std::fs::read(&png).expect("--plot wrote the PNG");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    assert!(
        bytes.len() > 5_000,
        "a near-empty PNG: {} bytes",
        bytes.len()
    );

    let jpg = plots.path().join("seed.jpg");
    let out = till(&[
        "bench",
        "seed",
        "--plot",
        jpg.to_str().expect("utf-8 path"),
        "--dir",
        dir.path().to_str().expect("utf-8 path"),
    ]);
    assert!(!out.status.success(), "a .jpg plot was accepted");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("seed.jpg") && err.contains("*.png"), "{err}");
    assert!(!jpg.exists(), "wrote {}", jpg.display());
    // Refused when the options were parsed: no report, no scratch database.
    assert!(out.stdout.is_empty(), "the benchmark ran first");
    assert_empty(dir.path());
}
