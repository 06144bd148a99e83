//! `till bench peers`: without the `peers` feature it exists, refuses to run and says how to
//! build it; with the feature (`cargo test -p till --features peers --test bench_peers_cli`)
//! a tiny run of every quick engine keeps the JSON contract and cleans up after itself.

use std::process::{Command, Output};

fn till(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_till"))
        .args(args)
        .output()
        .expect("run till")
}

#[cfg(not(feature = "peers"))]
#[test]
fn without_the_feature_it_says_how_to_enable_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bench = dir.path().join("bench");
    let out = till(&["bench", "peers", "--dir", bench.to_str().expect("utf-8")]);
    assert!(!out.status.success(), "ran without the peers");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cargo run --release -p till --features peers -- bench peers"),
        "{err}"
    );
    assert!(err.contains("peers-rocksdb"), "{err}");
    assert!(!bench.exists(), "created the bench dir without running");
}

#[test]
fn help_lists_the_engines_and_flags() {
    let out = till(&["bench", "peers", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for word in [
        "--engines",
        "--threads",
        "--seconds",
        "--json",
        "--plot",
        "sqlite-wal",
        "sqlite-rollback",
        "lmdb",
        "redb",
        "fjall",
        "rocksdb",
    ] {
        assert!(help.contains(word), "{word} missing from: {help}");
    }
}

#[cfg(feature = "peers")]
#[test]
fn a_tiny_run_of_every_quick_engine_keeps_the_json_contract() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bench = dir.path().join("bench");
    let plot = dir.path().join("peers.svg");
    let out = till(&[
        "bench",
        "peers",
        "--engines",
        "tilldb,sqlite-wal,sqlite-rollback,lmdb,redb,fjall",
        "--threads",
        "1,2",
        "--seconds",
        "0.2",
        "--json",
        "--dir",
        bench.to_str().expect("utf-8"),
        "--plot",
        plot.to_str().expect("utf-8"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!(json["workload"], "peers-inserts");
    assert!(json["raw_flushes_per_sec"].as_f64().expect("raw") > 0.0);
    let results = json["results"].as_array().expect("results");
    assert_eq!(results.len(), 12, "{json}");
    for r in results {
        assert_eq!(r["durability"], "sync", "{r}");
        assert!(r["engine"].is_string(), "{r}");
        let rate = r["commits_per_sec"].as_f64().expect("rate");
        assert!(rate > 0.0, "{r}");
        // Issue 23: the steady-state figure, with the engine's close inside the window.
        let steady = r["commits_per_sec_with_close"]
            .as_f64()
            .expect("with close");
        assert!(steady > 0.0 && steady <= rate + 0.1, "{r}");
        assert!(r["close_seconds"].as_f64().expect("close") >= 0.0, "{r}");
        assert!(r["p99_us"].as_f64().expect("p99") > 0.0, "{r}");
        assert!(r["ratio_to_tilldb"].as_f64().is_some(), "{r}");
        let threads = r["threads"].as_u64().expect("threads");
        assert!(threads == 1 || threads == 2, "{r}");
    }
    let tilldb_one = results
        .iter()
        .find(|r| r["engine"] == "tilldb" && r["threads"] == 1)
        .expect("tilldb row");
    assert!((tilldb_one["ratio_to_tilldb"].as_f64().expect("ratio") - 1.0).abs() < 1e-9);
    let svg = std::fs::read_to_string(&plot).expect("plot written");
    assert!(svg.contains("<svg") && svg.contains("sqlite-wal"), "{svg}");
    assert!(!bench.exists(), "the bench dir it created is left behind");
}
