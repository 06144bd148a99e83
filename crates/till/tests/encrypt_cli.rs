//! `till encrypt DIR` turns a plain database into an encrypted one in place, and `till
//! compact --rekey` gives an encrypted one a new data key, optionally under a new key and
//! cipher (docs/encryption.md, pieces 6 and 7). Each is checked by what is left on disk: no
//! plaintext, a header whose wrap only the right key opens, every row there; and each
//! refusal (no key, already encrypted, not encrypted, a key too long for an encrypted page,
//! the change feed) leaves every row as it was: no file changes, but for a key too long,
//! found only with the database open (and closed: its header rewritten, no row changed). A plain
//! database left beside an encrypted one by a run killed after its swap is removed by the
//! next run.

mod common;

use common::{newest_header, options, snapshot, till};
use std::path::Path;
use tilldb::{Db, Encryption, Error, KeyProvider, Options, StaticKey};

const KEY: [u8; 32] = [0x2a; 32];
const NEW_KEY: [u8; 32] = [0x5c; 32];
const MARKER: &str = "MARKER-7d1f";

fn arg(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

fn key_file(dir: &Path, name: &str, key: &[u8; 32]) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, key).expect("key file");
    path
}

/// 400 rows in the default table and 100 in "sales", carrying the marker.
fn fill(db: &Db) {
    let mut txn = db.begin().expect("begin");
    for i in 0..400 {
        txn.put(
            format!("{MARKER}-{i:04}").as_bytes(),
            format!("{MARKER}-value-{i}").as_bytes(),
        )
        .expect("put");
    }
    for i in 0..100 {
        txn.put_in(
            "sales",
            format!("{MARKER}-sale-{i:03}").as_bytes(),
            b"12.50",
        )
        .expect("put");
    }
    txn.commit().expect("commit");
}

/// Every row of the database in `dir`, opened with `options`.
fn rows(dir: &Path, options: Options) -> Result<Vec<(String, u64)>, Error> {
    let db = Db::open(dir, options)?;
    let tables = db.table_entries()?;
    let value = db.get(format!("{MARKER}-0123").as_bytes())?;
    assert_eq!(
        value.as_deref(),
        Some(format!("{MARKER}-value-123").as_bytes())
    );
    db.close()?;
    Ok(tables)
}

fn with_key(key: &[u8; 32]) -> Options {
    Options {
        encryption: Some(Encryption::with_key(key)),
        ..options()
    }
}

fn any_file_holds(dir: &Path, needle: &[u8]) -> bool {
    snapshot(dir)
        .values()
        .any(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
}

/// The data key in the header of `dir`, unwrapped with `key`.
fn data_key(dir: &Path, key: &[u8; 32]) -> [u8; 32] {
    let header = newest_header(dir);
    let block = header.encryption.expect("an encrypted header");
    *StaticKey::new(key)
        .unwrap(block.wrapped(), &block.context())
        .expect("the key opens the wrap")
        .bytes()
}

#[test]
fn till_encrypt_turns_a_plain_database_into_an_encrypted_one() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, options()).expect("create");
    fill(&db);
    db.close().expect("close");
    let expected = rows(&dir, options()).expect("plain rows");
    assert!(any_file_holds(&dir, MARKER.as_bytes()), "the plain control");
    let d = arg(&dir);
    let k = key_file(tmp.path(), "till.key", &KEY);

    // Without a key there is nothing to encrypt with: refused, nothing changed.
    let before = snapshot(&dir);
    let refused = till(&["encrypt", d]);
    assert!(!refused.ok, "{}", refused.text());
    assert!(refused.stderr.contains("--key-file"), "{}", refused.text());
    assert_eq!(snapshot(&dir), before, "a refusal changed a file");

    let done = till(&["encrypt", d, "--key-file", arg(&k), "--json"]);
    assert!(done.ok, "{}", done.text());
    let json = done.json();
    assert_eq!(json["entries"], 500, "{json}");
    assert_eq!(json["cipher"], "aes-256-gcm", "{json}");
    assert!(done.stderr.contains("not wiped"), "{}", done.text());

    assert!(!any_file_holds(&dir, MARKER.as_bytes()), "plaintext left");
    assert!(
        !dir.with_file_name("db.tilldb-compacted").exists(),
        "the plain copy is left beside it"
    );
    assert!(matches!(
        rows(&dir, options()),
        Err(Error::KeyRequired { .. })
    ));
    assert!(matches!(
        rows(&dir, with_key(&NEW_KEY)),
        Err(Error::WrongKey { .. })
    ));
    assert_eq!(rows(&dir, with_key(&KEY)).expect("with the key"), expected);
    let check = till(&["check", d, "--key-file", arg(&k)]);
    assert!(check.ok, "{}", check.text());

    // Once encrypted, again is refused and says what replaces the data key.
    let before = snapshot(&dir);
    let again = till(&["encrypt", d, "--key-file", arg(&k)]);
    assert!(!again.ok, "{}", again.text());
    assert!(
        again.stderr.contains("already encrypted"),
        "{}",
        again.text()
    );
    assert!(again.stderr.contains("--rekey"), "{}", again.text());
    assert_eq!(snapshot(&dir), before, "a refusal changed a file");

    // A run killed after its swap leaves the plain database beside the encrypted one: the
    // next run removes it, though it refuses the encrypted database.
    let left = dir.with_file_name("db.tilldb-compacted");
    let plain = tmp.path().join("plain");
    let db = Db::open(&plain, options()).expect("create");
    fill(&db);
    db.close().expect("close");
    common::copy_dir(&plain, &left);
    let again = till(&["encrypt", d, "--key-file", arg(&k)]);
    assert!(!again.ok, "{}", again.text());
    assert!(again.stderr.contains("removing"), "{}", again.text());
    assert!(!left.exists(), "the plain database left beside it");
    assert_eq!(snapshot(&dir), before, "the encrypted database changed");
}

#[test]
fn till_compact_rekey_replaces_the_data_key_and_optionally_the_key_and_cipher() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, with_key(&KEY)).expect("create");
    fill(&db);
    db.close().expect("close");
    let expected = rows(&dir, with_key(&KEY)).expect("rows");
    let d = arg(&dir);
    let k = key_file(tmp.path(), "till.key", &KEY);
    let k2 = key_file(tmp.path(), "new.key", &NEW_KEY);
    let first = data_key(&dir, &KEY);

    let rekeyed = till(&["compact", d, "--rekey", "--key-file", arg(&k)]);
    assert!(rekeyed.ok, "{}", rekeyed.text());
    let second = data_key(&dir, &KEY);
    assert_ne!(first, second, "--rekey kept the data key");
    assert_eq!(rows(&dir, with_key(&KEY)).expect("same key"), expected);

    let moved = till(&[
        "compact",
        d,
        "--rekey",
        "--key-file",
        arg(&k),
        "--new-key-file",
        arg(&k2),
        "--cipher",
        "chacha20-poly1305",
        "--json",
    ]);
    assert!(moved.ok, "{}", moved.text());
    assert_eq!(
        moved.json()["cipher"],
        "chacha20-poly1305",
        "{}",
        moved.text()
    );
    assert_eq!(
        moved.json()["key_id"],
        StaticKey::new(&NEW_KEY).key_id(),
        "{}",
        moved.text()
    );
    assert_ne!(data_key(&dir, &NEW_KEY), second, "a new data key each time");
    let header = newest_header(&dir);
    assert_eq!(
        header
            .encryption
            .as_ref()
            .map(tilldb::internals::crypt::KeyBlock::cipher),
        Some(tilldb::Cipher::ChaCha20Poly1305)
    );
    assert!(matches!(
        rows(&dir, with_key(&KEY)),
        Err(Error::WrongKey { .. })
    ));
    assert_eq!(rows(&dir, with_key(&NEW_KEY)).expect("new key"), expected);
    assert!(!any_file_holds(&dir, MARKER.as_bytes()), "plaintext left");

    // The new key and cipher come only with --rekey.
    let bare = till(&["compact", d, "--new-key-file", arg(&k2)]);
    assert!(!bare.ok, "{}", bare.text());
    assert!(bare.stderr.contains("--rekey"), "{}", bare.text());
}

#[test]
fn till_compact_rekey_refuses_a_plain_database() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, options()).expect("create");
    fill(&db);
    db.close().expect("close");
    let before = snapshot(&dir);
    let refused = till(&["compact", arg(&dir), "--rekey"]);
    assert!(!refused.ok, "{}", refused.text());
    assert!(
        refused.stderr.contains("not encrypted"),
        "{}",
        refused.text()
    );
    assert!(
        refused.stderr.contains("till encrypt"),
        "{}",
        refused.text()
    );
    // Told by the header, before the database is opened: no file changes.
    assert!(snapshot(&dir) == before, "a refusal changed a file");
    assert_eq!(rows(&dir, options()).expect("rows")[0].1, 400);
}

#[test]
fn till_encrypt_refuses_a_key_too_long_for_an_encrypted_page_and_the_change_feed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let k = key_file(tmp.path(), "till.key", &KEY);

    // 990 bytes fit a plain 4 KiB page (995) but not an encrypted one (985).
    let long = tmp.path().join("long");
    let db = Db::open(&long, options()).expect("create");
    fill(&db);
    let mut txn = db.begin().expect("begin");
    txn.put_in("notes", &[b'n'; 990], b"long key").expect("put");
    txn.commit().expect("commit");
    db.close().expect("close");
    let refused = till(&["encrypt", arg(&long), "--key-file", arg(&k)]);
    assert!(!refused.ok, "{}", refused.text());
    assert!(refused.stderr.contains("\"notes\""), "{}", refused.text());
    assert!(refused.stderr.contains("990 bytes"), "{}", refused.text());
    assert!(
        !tmp.path()
            .join("long.tilldb-compacted.tilldb-partial")
            .exists()
            && !tmp.path().join("long.tilldb-compacted").exists(),
        "the copy cut short is left"
    );
    let tables = rows(&long, options()).expect("still plain, every row there");
    assert!(tables.contains(&("notes".to_owned(), 1)), "{tables:?}");

    let fed = tmp.path().join("fed");
    let db = Db::open(
        &fed,
        Options {
            change_feed: true,
            ..options()
        },
    )
    .expect("create");
    fill(&db);
    db.close().expect("close");
    let before = snapshot(&fed);
    let refused = till(&["encrypt", arg(&fed), "--key-file", arg(&k)]);
    assert!(!refused.ok, "{}", refused.text());
    assert!(refused.stderr.contains("change feed"), "{}", refused.text());
    assert!(snapshot(&fed) == before, "a refusal changed a file");
    assert!(any_file_holds(&fed, MARKER.as_bytes()), "still plain");
}
