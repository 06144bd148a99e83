//! Encryption at rest, piece 5 (docs/encryption.md): an encrypted database's scratch files.
//! A transaction too large for its write set spills sorted runs (`txn-writes-<n>.tdb`), and a
//! commit too large for the cache spills the pages it holds (`txn-spill.tdb`); both are sealed
//! under a key drawn at open and never written. Each file is read just before tilldb removes
//! it: no key or value of the transaction is in it, and the same workload unencrypted does
//! put them there (so the check can fail). The transaction reads its own spilled writes back
//! and its commit survives a reopen.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tilldb::internals::crypt::{Cipher, Encryption, StaticKey};
use tilldb::io::{Call, FileStorage, HookedStorage, Hooks};
use tilldb::{Db, Options};

const MARKER: &[u8] = b"MARKER-77c1";

/// Files with their bytes.
type Files = Vec<(PathBuf, Vec<u8>)>;

/// The bytes of every scratch file, read just before its removal.
#[derive(Debug, Default)]
struct Capture {
    files: Arc<Mutex<Files>>,
}

impl Hooks for Capture {
    fn before(&self, call: &Call<'_>) -> tilldb::Result<()> {
        if let Call::Remove { path } = call
            && path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("txn-"))
            && let Ok(bytes) = std::fs::read(path)
        {
            self.files
                .lock()
                .expect("capture")
                .push((path.to_path_buf(), bytes));
        }
        Ok(())
    }
}

fn key_of(i: u32) -> Vec<u8> {
    [MARKER, format!("-key-{i:06}").as_bytes()].concat()
}

fn value_of(i: u32) -> Vec<u8> {
    [MARKER, format!("-value-{i:06}-").as_bytes(), &[b'v'; 150]].concat()
}

fn options(encrypted: bool) -> Options {
    Options {
        encryption: encrypted.then(|| Encryption {
            provider: Arc::new(StaticKey::new(&[0x31; 32])),
            cipher: Cipher::Aes256Gcm,
        }),
        // The smallest write set and cache: the transaction spills runs, its commit pages.
        write_set_bytes: 64 << 10,
        cache_bytes: 8 * 16384,
        page_bytes: Some(16384),
        ..Options::for_tests()
    }
}

/// Runs the large transaction on `dir`; returns the scratch files it left to remove.
fn large_transaction(dir: &Path, encrypted: bool, rows: u32) -> Files {
    let files = Arc::new(Mutex::new(Vec::new()));
    let storage = Arc::new(HookedStorage::new(
        Arc::new(FileStorage::new()),
        Capture {
            files: Arc::clone(&files),
        },
    ));
    let db = Db::open_with_storage(storage, dir, options(encrypted)).expect("open");
    let mut txn = db.begin().expect("begin");
    for i in 0..rows {
        txn.put(&key_of(i), &value_of(i)).expect("put");
    }
    // Read back from the spilled runs, opened with the scratch key.
    assert_eq!(txn.get(&key_of(7)).expect("get"), Some(value_of(7)));
    txn.commit().expect("commit");
    db.close().expect("close");
    let db = Db::open(dir, options(encrypted)).expect("reopen");
    for i in (0..rows).step_by(97) {
        assert_eq!(
            db.get(&key_of(i)).expect("get"),
            Some(value_of(i)),
            "row {i}"
        );
    }
    db.close().expect("close");
    files.lock().expect("capture").clone()
}

fn holds_marker(bytes: &[u8]) -> bool {
    bytes.windows(MARKER.len()).any(|w| w == MARKER)
}

#[test]
fn an_encrypted_databases_scratch_files_hold_no_key_or_value() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let rows = 6_000;
    for encrypted in [true, false] {
        let dir = tmp.path().join(if encrypted { "sealed" } else { "plain" });
        let files = large_transaction(&dir, encrypted, rows);
        let runs = files
            .iter()
            .filter(|(p, _)| p.to_string_lossy().contains("txn-writes-"))
            .count();
        let spills = files
            .iter()
            .filter(|(p, _)| p.to_string_lossy().contains("txn-spill"))
            .count();
        assert!(runs > 0, "encrypted {encrypted}: no run spilled");
        assert!(spills > 0, "encrypted {encrypted}: no page spilled");
        for (path, bytes) in &files {
            assert!(!bytes.is_empty(), "{}: read empty", path.display());
            assert_eq!(
                holds_marker(bytes),
                !encrypted,
                "{} (encrypted {encrypted}): a marker {}",
                path.display(),
                if encrypted {
                    "in the clear"
                } else {
                    "missing: the check could not fail"
                }
            );
        }
    }
}
