//! The commands that open a database take an encrypted one's key (docs/encryption.md, piece
//! 7): `--key-file FILE` on any command, else `TILLDB_KEY_FILE`, else `TILLDB_KEY` (64
//! hexadecimal digits). With the key, `till check`, `stats`, `dump-log`, `get` and `backup`
//! read an encrypted database as a plain one; without it `check` and `get` stop with the key
//! id the header names and `stats` shows the header's facts and what needs the key; a wrong
//! key is told apart, and no message ever holds the key. A backup
//! stays encrypted: its files hold no key or value, and it opens with the same key.

mod common;

use common::{options, till};
use std::path::Path;
use std::sync::Arc;
use tilldb::Db;
use tilldb::internals::crypt::{Cipher, Encryption, StaticKey};

const KEY: [u8; 32] = [0x2a; 32];
const MARKER: &str = "MARKER-e4c9";

fn hex(key: &[u8; 32]) -> String {
    key.iter().fold(String::new(), |mut s, b| {
        use std::fmt::Write as _;
        write!(s, "{b:02x}").expect("a String takes it");
        s
    })
}

fn arg(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// An encrypted database of 300 rows in `dir`, closed after a checkpoint, with a few more
/// commits after it (so the log holds commits to decode).
fn encrypted_database(dir: &Path) {
    let db = Db::open(
        dir,
        tilldb::Options {
            encryption: Some(Encryption {
                provider: Arc::new(StaticKey::new(&KEY)),
                cipher: Cipher::Aes256Gcm,
            }),
            ..options()
        },
    )
    .expect("create");
    let mut txn = db.begin().expect("begin");
    for i in 0..300 {
        txn.put(
            format!("{MARKER}-{i:04}").as_bytes(),
            format!("{MARKER}-value-{i}").as_bytes(),
        )
        .expect("put");
    }
    txn.commit().expect("commit");
    db.checkpoint().expect("checkpoint");
    for i in 300..310 {
        let mut txn = db.begin().expect("begin");
        txn.put(format!("{MARKER}-{i:04}").as_bytes(), b"after")
            .expect("put");
        txn.commit().expect("commit");
    }
    db.close().expect("close");
}

/// Whether any file under `dir` holds `needle`.
fn any_file_holds(dir: &Path, needle: &[u8]) -> bool {
    common::snapshot(dir)
        .values()
        .any(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
}

#[test]
fn commands_read_an_encrypted_database_with_its_key_and_stop_without_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    encrypted_database(&dir);
    assert!(
        !any_file_holds(&dir, MARKER.as_bytes()),
        "plaintext on disk"
    );
    let key_file = tmp.path().join("till.key");
    std::fs::write(&key_file, format!("{}\n", hex(&KEY))).expect("key file");
    let d = arg(&dir);
    let k = arg(&key_file);

    let check = till(&["check", d, "--key-file", k]);
    assert!(check.ok, "{}", check.text());
    assert!(check.stdout.contains("check ok"), "{}", check.text());
    assert!(check.stdout.contains("0 bad"), "{}", check.text());

    let get = till(&["get", d, &format!("{MARKER}-0007"), "--key-file", k]);
    assert!(get.ok, "{}", get.text());
    assert!(
        get.stdout.contains(&format!("{MARKER}-value-7")),
        "{}",
        get.text()
    );

    let dump = till(&["dump-log", d, "--key-file", k, "--json"]);
    assert!(dump.ok, "{}", dump.text());
    // Opened with the key, the commits decode: each shows its page operations.
    let records = dump.json()["records"].clone();
    let decoded = records
        .as_array()
        .expect("records")
        .iter()
        .filter(|r| r["commit"]["ops"].as_u64().is_some_and(|n| n > 0))
        .count();
    assert!(decoded > 0, "no commit decoded: {}", dump.text());

    let stats = till(&["stats", d, "--key-file", k, "--json"]);
    assert!(stats.ok, "{}", stats.text());
    let json = stats.json();
    assert_eq!(json["tables"][0]["keys"], 310, "{json}");
    assert_eq!(
        json["log"]["sealed_commits"], 0,
        "decoded with the key: {json}"
    );

    assert_eq!(json["encryption"]["cipher"], "aes-256-gcm", "{json}");
    assert!(
        json["encryption"]["key_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("kek:")),
        "{json}"
    );
    for args in [vec!["check", d], vec!["get", d, "x"]] {
        let run = till(&args);
        assert!(!run.ok, "{args:?} without the key: {}", run.text());
        assert!(
            run.text().contains("kek:"),
            "{args:?}: the key id: {}",
            run.text()
        );
    }
    // Stats without the key: the header's facts, and what needs the key.
    let bare = till(&["stats", d]);
    assert!(bare.ok, "{}", bare.text());
    assert!(
        bare.stdout.contains("encrypted: aes-256-gcm"),
        "{}",
        bare.text()
    );
    assert!(bare.stdout.contains("give its key"), "{}", bare.text());
    let bare_json = till(&["stats", d, "--json"]).json();
    assert!(
        bare_json["log"]["sealed_commits"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "the commits after the checkpoint stay sealed without the key: {bare_json}"
    );
    let wrong = tmp.path().join("wrong.key");
    std::fs::write(&wrong, [0x2b; 32]).expect("wrong key file");
    let run = till(&["check", d, "--key-file", arg(&wrong)]);
    assert!(!run.ok);
    assert!(run.text().contains("does not open"), "{}", run.text());
    for run in [&check, &get, &dump, &stats, &bare, &run] {
        assert!(!run.text().contains(&hex(&KEY)), "a message holds the key");
    }
}

#[test]
fn the_key_comes_from_the_environment_too() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    encrypted_database(&dir);
    let key_file = tmp.path().join("raw.key");
    std::fs::write(&key_file, KEY).expect("raw key file");
    let get = |var: &str, value: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_till"))
            .args(["get", arg(&dir), &format!("{MARKER}-0003")])
            .env(var, value)
            .output()
            .expect("run till");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (ok, out) = get("TILLDB_KEY_FILE", arg(&key_file));
    assert!(ok && out.contains(&format!("{MARKER}-value-3")), "{out}");
    let (ok, out) = get("TILLDB_KEY", &hex(&KEY));
    assert!(ok && out.contains(&format!("{MARKER}-value-3")), "{out}");
    let (ok, _) = get("TILLDB_KEY", "not a key");
    assert!(!ok, "a malformed TILLDB_KEY is refused");
}

#[test]
fn a_backup_of_an_encrypted_database_stays_encrypted_and_opens_with_its_key() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    encrypted_database(&dir);
    let key_file = tmp.path().join("till.key");
    std::fs::write(&key_file, KEY).expect("key file");
    let copy = tmp.path().join("copy");
    let backup = till(&[
        "backup",
        arg(&dir),
        arg(&copy),
        "--key-file",
        arg(&key_file),
    ]);
    assert!(backup.ok, "{}", backup.text());
    assert!(
        !any_file_holds(&copy, MARKER.as_bytes()),
        "plaintext in the copy"
    );
    let get = till(&[
        "get",
        arg(&copy),
        &format!("{MARKER}-0305"),
        "--key-file",
        arg(&key_file),
    ]);
    assert!(get.ok && get.stdout.contains("after"), "{}", get.text());
    let without = till(&["get", arg(&copy), &format!("{MARKER}-0305")]);
    assert!(!without.ok, "the copy opened without the key");
}

/// `till compact` of an encrypted database builds an encrypted copy (under a new data key,
/// wrapped by the same application key) and swaps it in: it opens with the key, holds every
/// row, and no file of it holds a key or value.
#[test]
fn compact_keeps_an_encrypted_database_encrypted() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    encrypted_database(&dir);
    let key_file = tmp.path().join("till.key");
    std::fs::write(&key_file, KEY).expect("key file");
    let id_before =
        till(&["stats", arg(&dir), "--json"]).json()["encryption"]["database_id"].clone();
    let compact = till(&["compact", arg(&dir), "--key-file", arg(&key_file)]);
    assert!(compact.ok, "{}", compact.text());
    assert!(
        !any_file_holds(&dir, MARKER.as_bytes()),
        "plaintext after compact"
    );
    let stats = till(&["stats", arg(&dir), "--json", "--key-file", arg(&key_file)]).json();
    assert_eq!(stats["tables"][0]["keys"], 310, "{stats}");
    assert_ne!(
        stats["encryption"]["database_id"], id_before,
        "the copy is a new database"
    );
    let check = till(&["check", arg(&dir), "--key-file", arg(&key_file)]);
    assert!(check.ok, "{}", check.text());
}

/// `till rotate-key`: the database opens with the new key only, every row there.
#[test]
fn rotate_key_replaces_the_key_that_opens_the_database() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    encrypted_database(&dir);
    let (old, new) = (tmp.path().join("old.key"), tmp.path().join("new.key"));
    std::fs::write(&old, KEY).expect("old key");
    std::fs::write(&new, hex(&[0x3d; 32])).expect("new key");
    let rotate = till(&[
        "rotate-key",
        arg(&dir),
        "--key-file",
        arg(&old),
        "--new-key-file",
        arg(&new),
    ]);
    assert!(rotate.ok, "{}", rotate.text());
    let get = |key: &Path| {
        till(&[
            "get",
            arg(&dir),
            &format!("{MARKER}-0009"),
            "--key-file",
            arg(key),
        ])
    };
    assert!(!get(&old).ok, "the old key still opens it");
    let with_new = get(&new);
    assert!(with_new.ok, "{}", with_new.text());
    assert!(with_new.stdout.contains(&format!("{MARKER}-value-9")));
    assert!(
        !rotate.text().contains(&hex(&KEY)),
        "a message holds the key"
    );
}

/// `till check --without-key`: what can be checked of an encrypted database by someone
/// without its key (a support desk, a backup's operator): every page's checksum and
/// framing and the log's chain. A page changed on disk is reported with its file and offset;
/// a plain database is checked in full, saying no key is needed.
#[test]
fn check_without_key_checks_the_framing_of_an_encrypted_database() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    encrypted_database(&dir);
    let d = arg(&dir);
    let framing = till(&["check", d, "--without-key"]);
    assert!(framing.ok, "{}", framing.text());
    assert!(
        framing.stdout.contains("check ok (framing only)"),
        "{}",
        framing.text()
    );
    assert!(
        framing
            .stdout
            .contains("sealed pages whose framing is whole"),
        "{}",
        framing.text()
    );
    let without = till(&["check", d]);
    assert!(
        !without.ok,
        "the full check needs the key: {}",
        without.text()
    );

    let data = dir.join("data.tdb");
    let mut bytes = std::fs::read(&data).expect("data file");
    let offset = 2 * 4096 + 1000;
    bytes[offset] ^= 0x10;
    std::fs::write(&data, &bytes).expect("change a page");
    let bad = till(&["check", d, "--without-key"]);
    assert!(!bad.ok, "{}", bad.text());
    assert!(
        bad.stdout
            .contains(&format!("BAD page in {} at offset 8192", data.display())),
        "{}",
        bad.text()
    );

    let plain = tmp.path().join("plain");
    let db = Db::open(&plain, options()).expect("create");
    db.close().expect("close");
    let full = till(&["check", arg(&plain), "--without-key"]);
    assert!(full.ok, "{}", full.text());
    assert!(full.stdout.contains("needs no key"), "{}", full.text());
    assert!(full.stdout.contains("check ok"), "{}", full.text());
}
