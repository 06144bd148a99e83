//! `till crashtest` end to end: real SIGKILLs of a committing process, then the oracle
//! (nothing acknowledged lost, nothing half applied, trees check) after every kill.

use std::process::Command;

#[test]
fn real_kills_lose_nothing_acknowledged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_till"))
        .args([
            "crashtest",
            "--kills",
            "12",
            "--max-run-ms",
            "250",
            "--seed",
            "99",
            "--dir",
        ])
        .arg(dir.path())
        .output()
        .expect("run till");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.matches("check ok").count(), 12, "{stdout}");
    assert!(stdout.contains("12 kills"), "{stdout}");
    assert!(stdout.contains("lost = 0, corrupt = 0"), "{stdout}");
}

/// With the write buffer on and drains every 64 KiB, kills land in buffered commits, in
/// drains and in the recovery that rebuilds the buffer (docs/write-buffer.md).
#[test]
fn real_kills_with_the_write_buffer_lose_nothing_acknowledged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_till"))
        .args([
            "crashtest",
            "--kills",
            "10",
            "--max-run-ms",
            "250",
            "--seed",
            "7",
            "--durability",
            "buffered",
            "--write-buffer-bytes",
            "65536",
            "--json",
            "--dir",
        ])
        .arg(dir.path())
        .output()
        .expect("run till");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(doc["kills"], 10, "{stdout}");
    assert_eq!(doc["lost"], 0, "{stdout}");
    assert_eq!(doc["corrupt"], 0, "{stdout}");
    assert_eq!(doc["write_buffer_bytes"], 65536, "{stdout}");
    assert!(
        doc["commits_verified"].as_u64().is_some_and(|n| n > 0),
        "{stdout}"
    );
    assert!(doc["error"].is_null(), "{stdout}");
}

#[test]
fn crashtest_refuses_nonsense() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_till"))
        .args(["crashtest", "--kills", "0", "--dir"])
        .arg(dir.path())
        .output()
        .expect("run till");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--kills"));
}

#[test]
fn real_kills_with_full_page_images_lose_nothing_and_the_guard_sticks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |guard: &str| {
        Command::new(env!("CARGO_BIN_EXE_till"))
            .args([
                "crashtest",
                "--kills",
                "6",
                "--max-run-ms",
                "250",
                "--seed",
                "5",
                "--guard",
                guard,
                "--dir",
            ])
            .arg(dir.path())
            .output()
            .expect("run till")
    };
    let out = run("full-page-images");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("guard full-page-images"), "{stdout}");
    assert_eq!(stdout.matches("check ok").count(), 6, "{stdout}");
    // The database keeps its guard: asking for another is refused, not silently ignored.
    let out = run("doublewrite");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--guard full-page-images"), "{err}");
}

#[test]
fn json_summary_counts_kills_and_verified_commits_of_every_thread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_till"))
        .args([
            "crashtest",
            "--kills",
            "5",
            "--threads",
            "3",
            "--durability",
            "buffered",
            "--max-run-ms",
            "200",
            "--seed",
            "17",
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
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(json["kills"], 5, "{json}");
    assert_eq!(json["lost"], 0, "{json}");
    assert_eq!(json["corrupt"], 0, "{json}");
    assert_eq!(json["threads"], 3, "{json}");
    assert!(json["error"].is_null(), "{json}");
    assert!(
        json["commits_verified"].as_u64().expect("count") > 0,
        "{json}"
    );
    // Every thread acknowledged commits of its own.
    for t in 0..3 {
        let acks = std::fs::read_to_string(dir.path().join(format!("acks-{t}.txt")))
            .expect("acks of each thread");
        assert!(acks.lines().count() > 0, "thread {t} acknowledged nothing");
    }
}

#[test]
fn lazy_commits_are_refused_they_may_not_survive_a_kill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_till"))
        .args(["crashtest", "--durability", "lazy", "--dir"])
        .arg(dir.path())
        .output()
        .expect("run till");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("lazy"));
}

/// Issue 15: processes racing to open one database while one of them commits. Exactly one
/// holds it at a time (the others are refused and retry), so nothing is lost or corrupt;
/// without the lock, two logs in one directory broke the database at the first kill.
#[test]
fn racing_processes_open_one_at_a_time_and_lose_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_till"))
        .args([
            "crashtest",
            "--kills",
            "6",
            "--max-run-ms",
            "200",
            "--racers",
            "2",
            "--flush-method",
            "fdatasync",
            "--seed",
            "7",
            "--json",
            "--dir",
        ])
        .arg(dir.path())
        .output()
        .expect("run till");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(doc["kills"], 6, "{doc}");
    assert_eq!(doc["lost"], 0, "{doc}");
    assert_eq!(doc["corrupt"], 0, "{doc}");
    assert_eq!(doc["racers"], 2, "{doc}");
    assert!(
        doc["opens_refused"].as_u64().expect("a count") > 0,
        "two racers were never refused: {doc}"
    );
    assert!(
        doc["commits_verified"].as_u64().expect("a count") > 0,
        "{doc}"
    );
}

/// `--encrypt`: the same oracle over an encrypted database (its key made in DIR), killed and
/// reopened; the database is encrypted (stats names the cipher) and holds no key in clear.
#[test]
fn real_kills_of_an_encrypted_database_lose_nothing_acknowledged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_till"))
        .args([
            "crashtest",
            "--kills",
            "6",
            "--threads",
            "2",
            "--max-run-ms",
            "200",
            "--seed",
            "23",
            "--encrypt",
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
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        (
            json["kills"].as_u64(),
            json["lost"].as_u64(),
            json["corrupt"].as_u64()
        ),
        (Some(6), Some(0), Some(0)),
        "{json}"
    );
    assert_eq!(json["encrypted"], true, "{json}");
    assert!(
        json["commits_verified"].as_u64().expect("count") > 0,
        "{json}"
    );
    let stats = Command::new(env!("CARGO_BIN_EXE_till"))
        .args(["stats", "--json"])
        .arg(dir.path().join("db"))
        .output()
        .expect("run till");
    let stats: serde_json::Value = serde_json::from_slice(&stats.stdout).expect("JSON");
    assert_eq!(stats["encryption"]["cipher"], "aes-256-gcm", "{stats}");
    let data = std::fs::read(dir.path().join("db").join("data.tdb")).expect("data file");
    assert!(
        !data.windows(4).any(|w| w == b"c00-"),
        "a key of the workload in clear"
    );
}
