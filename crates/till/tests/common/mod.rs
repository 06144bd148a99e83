//! Helpers shared by the CLI tests that build a database and run `till` on it.

#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use tilldb::WalOptions;
use tilldb::internals::header::{HEADER_FILE_NAME, Header, SLOT_BYTES, SlotState, choose_slot};
use tilldb::{FlushMethod, Options};

/// What a run of `till` printed and how it ended.
#[derive(Debug)]
pub struct Run {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Both streams, for assertions on either and for failure messages.
    pub fn text(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }

    /// Stdout as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.text()))
    }
}

/// Runs `till` with `args`.
pub fn till(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_till"))
        .args(args)
        .output()
        .expect("run till");
    Run {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// 4 KiB pages and 128 KiB log segments, so a few dozen `Sync` commits span segments; the
/// write buffer off, so that each commit changes the tree's pages and logs them, which these
/// tests read (`dump_log_cli.rs` and `crashtest_cli.rs` turn it on where they test it).
pub fn options() -> Options {
    Options {
        flush_method: Some(FlushMethod::Fdatasync),
        page_bytes: Some(4096),
        // These tests read the doublewrite file too (the default, auto, would choose
        // full-page images here).
        torn_page_guard: tilldb::TornPageGuard::Doublewrite,
        write_buffer_bytes: 0,
        wal: WalOptions {
            segment_bytes: 128 << 10,
            ..WalOptions::default()
        },
        ..Options::default()
    }
}

/// Every file under `dir` and its bytes: equal before and after a read-only command.
pub fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            files.extend(snapshot(&path));
        } else {
            let bytes = std::fs::read(&path).expect("read file");
            files.insert(path, bytes);
        }
    }
    files
}

/// Copies the files of a database directory (its `wal/` included).
pub fn copy_dir(source: &Path, target: &Path) {
    std::fs::create_dir_all(target).expect("mkdir");
    for entry in std::fs::read_dir(source).expect("read dir") {
        let path = entry.expect("entry").path();
        let to = target.join(path.file_name().expect("name"));
        if path.is_dir() {
            copy_dir(&path, &to);
        } else {
            std::fs::copy(&path, &to).expect("copy");
        }
    }
}

/// The `.wal` files of a database, in generation order.
pub fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("wal"))
        .expect("wal dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    files.sort();
    files
}

/// The newest valid header of the database in `dir`.
pub fn newest_header(dir: &Path) -> Header {
    let bytes = std::fs::read(dir.join(HEADER_FILE_NAME)).expect("header file");
    let slots: [SlotState; 2] = std::array::from_fn(|slot| {
        Header::decode(&bytes[slot * SLOT_BYTES..(slot + 1) * SLOT_BYTES], slot).expect("slot")
    });
    choose_slot(slots).expect("valid").expect("a header").1
}

/// Writes the newest header, changed by `change`, as the next generation into the other slot:
/// what a broken allocator could have written.
pub fn rewrite_header(dir: &Path, change: impl FnOnce(&mut Header)) {
    let path = dir.join(HEADER_FILE_NAME);
    let mut bytes = std::fs::read(&path).expect("header file");
    let slots: [SlotState; 2] = std::array::from_fn(|slot| {
        Header::decode(&bytes[slot * SLOT_BYTES..(slot + 1) * SLOT_BYTES], slot).expect("slot")
    });
    let (slot, mut header) = choose_slot(slots).expect("valid").expect("a header");
    change(&mut header);
    header.generation += 1;
    let target = 1 - slot;
    bytes[target * SLOT_BYTES..(target + 1) * SLOT_BYTES].copy_from_slice(&header.encode(target));
    std::fs::write(&path, &bytes).expect("write header");
}

/// Every row of a commit benchmark's JSON `results` carries the fields issue 7 asks of all
/// of them: `engine`, `threads`, `durability`, `commits_per_sec`, `p99_us`, and the
/// measures it asks of every report: `flushes_per_sec` and `ratio_to_raw` (commits/s over
/// the raw flushed-write rate measured in the same run, positive when it committed).
pub fn assert_commit_rows(json: &serde_json::Value) {
    let rows = json["results"].as_array().expect("results is an array");
    assert!(!rows.is_empty(), "no result rows: {json}");
    for row in rows {
        assert!(row["engine"].is_string(), "no engine: {row}");
        assert!(row["threads"].as_u64().is_some_and(|t| t >= 1), "{row}");
        assert!(row["durability"].is_string(), "no durability: {row}");
        let rate = row["commits_per_sec"].as_f64().expect("commits_per_sec");
        assert!(row["p99_us"].as_f64().is_some(), "{row}");
        assert!(
            row["flushes_per_sec"].as_f64().is_some(),
            "no flushes_per_sec: {row}"
        );
        let ratio = row["ratio_to_raw"].as_f64().expect("ratio_to_raw");
        assert!(
            rate == 0.0 || ratio > 0.0,
            "ratio_to_raw {ratio} at {rate} commits/s: {row}"
        );
    }
}

/// Every `till bench` JSON document says what machine and disk it measured
/// (`crates/till-bench/src/machine.rs`).
pub fn assert_machine_and_disk(json: &serde_json::Value) {
    let machine = &json["machine"];
    assert!(machine["cpus"].as_u64().is_some_and(|n| n >= 1), "{json}");
    assert!(machine.get("kernel").is_some(), "{json}");
    assert!(machine.get("memory_bytes").is_some(), "{json}");
    let disk = &json["disk"];
    for key in [
        "fs_type",
        "device",
        "logical_block_bytes",
        "write_cache",
        "rotational",
    ] {
        assert!(disk.get(key).is_some(), "disk.{key} missing: {json}");
    }
}

/// The file `--plot` wrote is an SVG document with `marks` or more bars, points or lines.
pub fn assert_svg(path: &Path, marks: usize) {
    let svg = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("--plot wrote no {}: {e}", path.display()));
    assert!(
        svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
        "{svg}"
    );
    let drawn = svg.matches("<rect").count() + svg.matches("<circle").count();
    assert!(
        drawn >= marks,
        "{drawn} marks, expected {marks} or more: {svg}"
    );
}

/// Records that `test` skipped a check and why: printed, and appended to
/// `target/tmp/skipped.txt`, which `scripts/test` counts, so a skip is never a silent pass.
pub fn skip(test: &str, reason: &str) {
    use std::io::Write;
    let line = format!("SKIPPED {test}: {reason}");
    eprintln!("{line}");
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("skipped.txt");
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(f, "{line}");
    }
}

/// True when running under CI (`CI=true`, as `.ci/run` sets it).
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// A check that needs what this machine lacks (root, loop devices, a tool to install):
/// skipped here, but under CI, which must install everything the tests need, it fails,
/// naming what is missing, so a skipped real-device test can never pass CI unseen.
pub fn skip_missing(test: &str, reason: &str) {
    assert!(
        !under_ci(),
        "{test} cannot run under CI: {reason} (.ci/run must provide it)"
    );
    skip(test, reason);
}
