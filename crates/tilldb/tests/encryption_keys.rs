//! Encryption at rest, piece 2 (docs/encryption.md): the header's key block. A database
//! created with a key stores its data key wrapped (header version 3) and opens again with
//! that key alone. A missing key, a wrong key, a key for another database's wrap, and a key
//! for a plain database are each a clear error that changes no byte of any file, for a
//! writer's open and a read-only one alike. (Pages and log are not encrypted yet.)

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tilldb::internals::crypt::{Cipher, Encryption, KeyBlock, KeyProvider, StaticKey};
use tilldb::internals::header::{Header, SlotState};
use tilldb::{Db, Error, Options};

fn with_key(provider: StaticKey) -> Options {
    Options {
        encryption: Some(Encryption {
            provider: Arc::new(provider),
            cipher: Cipher::Aes256Gcm,
        }),
        ..Options::for_tests()
    }
}

/// The files that differ between two listings.
fn changed(
    before: &BTreeMap<PathBuf, Vec<u8>>,
    after: &BTreeMap<PathBuf, Vec<u8>>,
) -> Vec<PathBuf> {
    let mut names: Vec<&PathBuf> = before.keys().chain(after.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|n| before.get(*n) != after.get(*n))
        .cloned()
        .collect()
}

/// Every file under `dir`, with its bytes.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    common::files_under(dir, |_| true)
}

/// Creates an encrypted database in `dir` under `key`, commits one receipt and closes it.
fn create_with_a_receipt(dir: &Path, key: [u8; 32]) {
    let db = Db::open(dir, with_key(StaticKey::new(&key))).expect("create");
    let mut txn = db.begin().expect("begin");
    txn.put(b"receipt 1", b"2 coffees").expect("put");
    txn.commit().expect("commit");
    db.close().expect("close");
}

#[test]
fn an_encrypted_database_opens_with_its_key_and_only_with_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let key = [0x42; 32];
    create_with_a_receipt(dir, key);
    let meta = std::fs::read(dir.join("tilldb.meta")).expect("header");
    assert_eq!(&meta[8..12], &3u32.to_le_bytes(), "header version 3");
    let key_id = StaticKey::new(&key).key_id();
    let db = Db::open(dir, with_key(StaticKey::new(&key))).expect("reopen with the key");
    assert_eq!(
        db.get(b"receipt 1").expect("get"),
        Some(b"2 coffees".to_vec())
    );
    db.close().expect("close");

    let before = files(dir);
    let refusals: [(&str, Options); 3] = [
        ("no key", Options::for_tests()),
        ("another key", with_key(StaticKey::new(&[0x43; 32]))),
        // Named as the right one, but not it: the wrap's tag tells.
        (
            "another key under its name",
            with_key(StaticKey::with_id(&[0x43; 32], key_id.clone())),
        ),
    ];
    for (what, options) in refusals {
        for read_only in [false, true] {
            let result = if read_only {
                Db::open_read_only(dir, options.clone())
            } else {
                Db::open(dir, options.clone())
            };
            match (what, result) {
                ("no key", Err(Error::KeyRequired { key_id: named, .. }))
                | (_, Err(Error::WrongKey { key_id: named, .. })) => {
                    assert_eq!(named, key_id, "{what}: the error names the database's key");
                }
                (_, Err(e)) => panic!("{what} (read-only {read_only}): {e}"),
                (_, Ok(_)) => panic!("{what} (read-only {read_only}) opened the database"),
            }
            let changed = changed(&before, &files(dir));
            assert!(
                changed.is_empty(),
                "{what} (read-only {read_only}) changed {changed:?}"
            );
        }
    }
    let db = Db::open(dir, with_key(StaticKey::new(&key))).expect("the key still opens it");
    assert_eq!(
        db.get(b"receipt 1").expect("get"),
        Some(b"2 coffees".to_vec())
    );
    db.close().expect("close");
}

#[test]
fn a_key_for_a_plain_database_is_refused_and_changes_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let db = Db::open(dir, Options::for_tests()).expect("create");
    let mut txn = db.begin().expect("begin");
    txn.put(b"k", b"v").expect("put");
    txn.commit().expect("commit");
    db.close().expect("close");
    let meta = std::fs::read(dir.join("tilldb.meta")).expect("header");
    assert_eq!(
        &meta[8..12],
        &2u32.to_le_bytes(),
        "a plain database keeps version 2"
    );
    let before = files(dir);
    for read_only in [false, true] {
        let options = with_key(StaticKey::new(&[1; 32]));
        let result = if read_only {
            Db::open_read_only(dir, options)
        } else {
            Db::open(dir, options)
        };
        assert!(
            matches!(result, Err(Error::NotEncrypted { .. })),
            "read-only {read_only}: {:?}",
            result.err()
        );
        assert!(
            files(dir) == before,
            "read-only {read_only}: a file changed"
        );
    }
    Db::open(dir, Options::for_tests())
        .expect("opens without a key")
        .close()
        .expect("close");
}

#[test]
fn a_wrap_moved_into_another_databases_header_does_not_open_it() {
    // Two databases under one key: each wrap is bound to its database's id, so a wrapped key
    // copied into the other's header (crc recomputed) is refused, not used.
    let key = [7u8; 32];
    let (a, b) = (
        tempfile::tempdir().expect("a"),
        tempfile::tempdir().expect("b"),
    );
    for dir in [a.path(), b.path()] {
        Db::open(dir, with_key(StaticKey::new(&key)))
            .expect("create")
            .close()
            .expect("close");
    }
    let meta_a = std::fs::read(a.path().join("tilldb.meta")).expect("a's header");
    let mut meta_b = std::fs::read(b.path().join("tilldb.meta")).expect("b's header");
    let (_, header_a) = newest_slot(&meta_a);
    let (slot, mut header_b) = newest_slot(&meta_b);
    let (block_a, block_b) = (
        header_a.encryption.expect("a is encrypted"),
        header_b.encryption.expect("b is encrypted"),
    );
    // b's header with a's wrapped data key, b's own database id.
    header_b.encryption = Some(
        KeyBlock::new(
            block_b.cipher(),
            block_b.db_id(),
            block_b.key_id(),
            block_a.wrapped(),
        )
        .expect("fits"),
    );
    meta_b[slot * 4096..(slot + 1) * 4096].copy_from_slice(&header_b.encode(slot));
    std::fs::write(b.path().join("tilldb.meta"), &meta_b).expect("write");
    match Db::open(b.path(), with_key(StaticKey::new(&key))) {
        Err(Error::WrongKey { .. }) => {}
        other => panic!("a moved wrap: {:?}", other.err()),
    }
}

/// The newest valid slot of a header file's bytes, with its index.
fn newest_slot(meta: &[u8]) -> (usize, Header) {
    (0..2)
        .filter_map(
            |slot| match Header::decode(&meta[slot * 4096..(slot + 1) * 4096], slot) {
                Ok(SlotState::Valid(h)) => Some((slot, h)),
                _ => None,
            },
        )
        .max_by_key(|(_, h)| h.generation)
        .expect("a valid slot")
}

#[test]
fn a_header_field_changed_with_its_crc_recomputed_is_corruption_at_the_mac() {
    // The crc only catches what was torn or rotted: a field changed on purpose, its crc
    // made again, is caught by the MAC, which only the data key makes. Each change is one
    // the crc alone lets through (decoded as a valid slot), named at the MAC's offset.
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let key = [0x42; 32];
    create_with_a_receipt(dir, key);
    let meta_path = dir.join("tilldb.meta");
    let good = std::fs::read(&meta_path).expect("header");
    let (slot, header) = newest_slot(&good);
    let at = slot * 4096;
    assert!(
        good[at + 728..at + 744].iter().any(|&b| b != 0),
        "an encrypted slot carries a MAC"
    );
    // (what, offset in the slot, new bytes): checkpoint lsn, page count, the MAC itself,
    // and a zero byte after it.
    let changes: [(&str, usize, Vec<u8>); 4] = [
        (
            "checkpoint lsn",
            32,
            (header.checkpoint_lsn.0 + 8).to_le_bytes().to_vec(),
        ),
        (
            "page count",
            56,
            (header.page_count + 1).to_le_bytes().to_vec(),
        ),
        ("mac", 728, vec![good[at + 728] ^ 0x01]),
        ("a byte after the mac", 744, vec![0x01]),
    ];
    for (what, offset, bytes) in changes {
        let mut meta = good.clone();
        meta[at + offset..at + offset + bytes.len()].copy_from_slice(&bytes);
        let crc = common::crc32c(Some(slot as u64), &meta[at..at + 4092]);
        meta[at + 4092..at + 4096].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(&meta_path, &meta).expect("write");
        for read_only in [false, true] {
            let options = with_key(StaticKey::new(&key));
            let result = if read_only {
                Db::open_read_only(dir, options)
            } else {
                Db::open(dir, options)
            };
            match result {
                Err(Error::Corruption {
                    file,
                    offset: found,
                    ..
                }) => {
                    assert_eq!(file, meta_path, "{what}: names the header file");
                    let expected = if offset == 744 { at + 744 } else { at + 728 };
                    assert_eq!(found, expected as u64, "{what}: the offset");
                }
                other => panic!("{what} (read-only {read_only}): {:?}", other.err()),
            }
        }
    }
    std::fs::write(&meta_path, &good).expect("restore");
    let db = Db::open(dir, with_key(StaticKey::new(&key))).expect("the original opens");
    assert_eq!(
        db.get(b"receipt 1").expect("get"),
        Some(b"2 coffees".to_vec())
    );
    db.close().expect("close");
}

#[test]
fn a_simulated_disk_draws_the_same_keys_from_the_same_seed_and_others_from_another() {
    use tilldb::io::{SimConfig, SimDisk};
    let dir = Path::new("/db");
    let db_id = |seed: u64| {
        let disk = SimDisk::new(SimConfig {
            seed,
            ..SimConfig::default()
        });
        let db = Db::open_with_storage(
            Arc::new(disk.clone()),
            dir,
            with_key(StaticKey::new(&[9; 32])),
        )
        .expect("create");
        db.close().expect("close");
        let meta = disk
            .live_contents(&dir.join("tilldb.meta"))
            .expect("header");
        let (_, header) = newest_slot(&meta);
        header.encryption.expect("encrypted").db_id()
    };
    assert_eq!(db_id(11), db_id(11), "the same seed, the same database id");
    assert_ne!(db_id(11), db_id(12), "another seed, another id");
}

#[test]
fn a_backup_of_an_encrypted_database_opens_with_the_same_key_and_only_with_it() {
    // The copy keeps the wrap and gets a header whose MAC its keys made: it opens with the
    // database's key (its MAC checked), and refuses a missing one like the original.
    let tmp = tempfile::tempdir().expect("tempdir");
    let (dir, copy) = (tmp.path().join("db"), tmp.path().join("copy"));
    let key = [0x17; 32];
    let db = Db::open(&dir, with_key(StaticKey::new(&key))).expect("create");
    let mut txn = db.begin().expect("begin");
    txn.put(b"sale 9", b"one loaf").expect("put");
    txn.commit().expect("commit");
    db.backup_to(&copy).expect("backup");
    db.close().expect("close");
    match Db::open(&copy, Options::for_tests()) {
        Err(Error::KeyRequired { .. }) => {}
        other => panic!("the copy without its key: {:?}", other.err()),
    }
    let restored = Db::open(&copy, with_key(StaticKey::new(&key))).expect("the copy opens");
    assert_eq!(
        restored.get(b"sale 9").expect("get"),
        Some(b"one loaf".to_vec())
    );
    restored.close().expect("close");
}
