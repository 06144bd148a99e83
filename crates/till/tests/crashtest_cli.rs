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
    assert!(stdout.contains("none lost or half applied"), "{stdout}");
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
