//! An encrypted database opened through the C ABI without its key: `TILLDB_ERR_KEY_REQUIRED`
//! with the engine's message, no handle, and the database as it was. (The ABI's own opens
//! with a key come with piece 8 of docs/encryption.md.)

use std::ffi::{CStr, CString};
use std::sync::Arc;
use tilldb::internals::crypt::{Cipher, Encryption, StaticKey};
use tilldb::{Db, Options};
use tilldb_c::{tilldb_db, tilldb_last_error, tilldb_open, tilldb_status};

#[test]
fn an_encrypted_database_opened_without_its_key_is_key_required() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let options = Options {
        encryption: Some(Encryption {
            provider: Arc::new(StaticKey::new(&[5; 32])),
            cipher: Cipher::Aes256Gcm,
        }),
        ..Options::for_tests()
    };
    Db::open(tmp.path(), options)
        .expect("create")
        .close()
        .expect("close");
    let meta = std::fs::read(tmp.path().join("tilldb.meta")).expect("header");
    let path = CString::new(tmp.path().to_str().expect("UTF-8")).expect("no NUL");
    let mut db: *mut tilldb_db = std::ptr::null_mut();
    // SAFETY: a valid C string and a valid out pointer.
    let status = unsafe { tilldb_open(path.as_ptr(), 0, &raw mut db) };
    assert_eq!(status, tilldb_status::TILLDB_ERR_KEY_REQUIRED);
    assert!(db.is_null(), "no handle for a refused open");
    // SAFETY: the thread's last error, valid until its next call.
    let message = unsafe { CStr::from_ptr(tilldb_last_error()) }
        .to_string_lossy()
        .into_owned();
    assert!(message.contains("kek:"), "names the key's id: {message}");
    assert_eq!(
        std::fs::read(tmp.path().join("tilldb.meta")).expect("header"),
        meta,
        "the header is as it was"
    );
}
