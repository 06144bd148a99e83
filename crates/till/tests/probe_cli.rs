//! `till probe` end to end: the JSON contract scripts rely on, and cleanup.

use serde_json::Value;
use std::process::Command;

fn till(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_till"))
        .args(args)
        .output()
        .expect("run till")
}

#[test]
fn probe_json_has_the_documented_shape_and_cleans_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_str().expect("utf-8 path");
    let out = till(&[
        "probe",
        path,
        "--json",
        "--seconds",
        "0.6",
        "--write-bytes",
        "512,4096",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");

    let device = &json["device"];
    assert!(device["fs_type"].is_string(), "{device}");
    assert!(device.get("logical_block_bytes").is_some());
    assert!(device.get("rotational").is_some());

    let results = json["results"].as_array().expect("results array");
    // 5 durable methods x 2 sizes x 2 files.
    assert_eq!(results.len(), 20);
    for r in results {
        for key in [
            "method",
            "write_bytes",
            "file",
            "flushes_per_sec",
            "p50_us",
            "p99_us",
        ] {
            assert!(r.get(key).is_some(), "result lacks {key}: {r}");
        }
        assert!(
            matches!(r["file"].as_str(), Some("preallocated" | "append")),
            "{r}"
        );
        if r["skipped"].is_null() {
            assert!(r["flushes_per_sec"].as_f64().expect("number") > 0.0, "{r}");
        }
    }
    assert!(json["recommendation"]["flush_method"].is_string());
    assert!(
        json["recommendation"]["log_block_bytes"]
            .as_u64()
            .expect("number")
            >= 4096
    );
    assert!(json["warnings"].is_array());
    let left: Vec<_> = std::fs::read_dir(dir.path()).expect("ls").collect();
    assert!(left.is_empty(), "probe left files: {left:?}");
}

#[test]
fn probe_rejects_unknown_flush_methods_with_the_list() {
    let out = till(&["probe", ".", "--methods", "o_sync"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("fdatasync"), "{err}");
}

#[test]
fn probe_rejects_a_non_positive_time_budget() {
    let out = till(&["probe", ".", "--seconds", "0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--seconds"));
}

#[test]
fn probe_refuses_a_method_this_platform_lacks_naming_it_and_the_ones_it_has() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dir_arg = dir.path().to_str().expect("utf-8");
    // The barrier is macOS's alone; this suite runs on Linux and Windows.
    let out = till(&[
        "probe",
        dir_arg,
        "--methods",
        "barrier-fsync",
        "--seconds",
        "0.1",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("barrier-fsync is not available"), "{err}");
    assert!(err.contains("fdatasync"), "{err}");
    assert!(
        std::fs::read_dir(dir.path()).expect("ls").next().is_none(),
        "a refused probe wrote into {dir_arg}"
    );
}
