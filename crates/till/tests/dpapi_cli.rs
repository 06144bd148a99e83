//! `--key-dpapi SCOPE`: the application's key Windows keeps (DPAPI, `OsKeyStore`) on every
//! command that opens a database, and `till rotate-key --new-key-dpapi SCOPE`, which moves a
//! database from a key file to it (docs/encryption.md, piece 8). Under Wine on Linux (run by
//! `scripts/test`); elsewhere the flag is refused, saying there is no key store.

mod common;

use common::{options, till};
use tilldb::{Db, Encryption};

const KEY: [u8; 32] = [0x41; 32];

fn arg(path: &std::path::Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// An encrypted database under `KEY` holding one row, and a key file of `KEY`.
fn database(tmp: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = tmp.join("db");
    let db = Db::open(
        &dir,
        tilldb::Options {
            encryption: Some(Encryption::with_key(&KEY)),
            ..options()
        },
    )
    .expect("create");
    let mut txn = db.begin().expect("begin");
    txn.put(b"receipt-1", b"12.50").expect("put");
    txn.commit().expect("commit");
    db.close().expect("close");
    let key_file = tmp.join("till.key");
    std::fs::write(&key_file, KEY).expect("key file");
    (dir, key_file)
}

#[cfg(windows)]
#[test]
fn rotate_key_moves_a_database_to_dpapi_and_key_dpapi_opens_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (dir, key_file) = database(tmp.path());
    let (d, k) = (arg(&dir), arg(&key_file));
    let rotated = till(&[
        "rotate-key",
        d,
        "--key-file",
        k,
        "--new-key-dpapi",
        "machine",
    ]);
    assert!(rotated.ok, "{}", rotated.text());
    assert!(
        rotated.stdout.contains("dpapi:machine"),
        "{}",
        rotated.text()
    );
    let get = till(&["get", d, "receipt-1", "--key-dpapi", "machine"]);
    assert!(get.ok, "{}", get.text());
    assert!(get.stdout.contains("12.50"), "{}", get.text());
    for refused in [
        till(&["get", d, "receipt-1", "--key-file", k]),
        till(&["get", d, "receipt-1", "--key-dpapi", "user"]),
    ] {
        assert!(!refused.ok, "{}", refused.text());
        assert!(
            refused.stderr.contains("dpapi:machine"),
            "{}",
            refused.text()
        );
    }
    let check = till(&["check", d, "--key-dpapi", "machine"]);
    assert!(check.ok, "{}", check.text());
}

#[cfg(not(windows))]
#[test]
fn key_dpapi_is_refused_where_there_is_no_key_store() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (dir, key_file) = database(tmp.path());
    let wrap = |dir: &std::path::Path| {
        let block = common::newest_header(dir).encryption.expect("encrypted");
        (block.key_id().to_owned(), block.wrapped().to_vec())
    };
    let before = wrap(&dir);
    let files = common::snapshot(&dir);
    let rotated = till(&[
        "rotate-key",
        arg(&dir),
        "--key-file",
        arg(&key_file),
        "--new-key-dpapi",
        "machine",
    ]);
    assert!(!rotated.ok, "{}", rotated.text());
    assert!(
        rotated.stderr.contains("no OS key store"),
        "{}",
        rotated.text()
    );
    // Refused before the database is opened: no file changed.
    assert!(
        common::snapshot(&dir) == files,
        "the refused rotation changed a file"
    );
    let get = till(&["get", arg(&dir), "receipt-1", "--key-dpapi", "user"]);
    // The header names the key file's key: another key, before any key store is asked.
    assert!(!get.ok, "{}", get.text());
    assert!(get.stderr.contains("kek:"), "{}", get.text());
    assert!(wrap(&dir) == before, "a refusal changed the wrap");
    // Still the key file's database.
    let get = till(&["get", arg(&dir), "receipt-1", "--key-file", arg(&key_file)]);
    assert!(get.ok, "{}", get.text());
}
