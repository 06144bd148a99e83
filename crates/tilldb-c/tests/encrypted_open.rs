//! Encrypted databases through the C ABI (docs/encryption.md, piece 8): one made by
//! `tilldb_open_encrypted` opens with its key (read-write and read-only) and with no other,
//! a plain one refuses a key, and a key of the wrong length is refused before anything is
//! opened, its bytes never in the message. Every refusal leaves no handle and the database's
//! header as it was.

use std::ffi::{CStr, CString};
use std::path::Path;
use tilldb_c::{
    TILLDB_KEY_BYTES, tilldb_begin, tilldb_close, tilldb_commit, tilldb_db, tilldb_durability,
    tilldb_free, tilldb_get, tilldb_last_error, tilldb_open, tilldb_open_encrypted,
    tilldb_open_read_only, tilldb_open_read_only_encrypted, tilldb_put, tilldb_status, tilldb_txn,
};

/// The key the tests' databases are made with: printable, so a message holding it would show.
const KEY: &[u8; 32] = b"SECRET-KEY-0123456789abcdefghijk";
/// Another key of the right length.
const OTHER_KEY: &[u8; 32] = b"OTHER!-KEY-0123456789abcdefghijk";
/// The value written, which a wrong key must never give back.
const VALUE: &[u8] = b"MARKER-PLAINTEXT-1234";

const _: () = assert!(TILLDB_KEY_BYTES == KEY.len());

fn c_path(dir: &Path) -> CString {
    CString::new(dir.to_str().expect("UTF-8")).expect("no NUL")
}

/// This thread's last error message.
fn last_error() -> String {
    // SAFETY: the thread's last error, valid until its next call.
    unsafe { CStr::from_ptr(tilldb_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// Opens `dir` the way `how` names, with `key` (its pointer and length) where `how` takes
/// one: the status and the handle (NULL when refused).
fn open(dir: &Path, how: Open, key: (*const u8, usize)) -> (tilldb_status, *mut tilldb_db) {
    let path = c_path(dir);
    let mut db: *mut tilldb_db = std::ptr::null_mut();
    // SAFETY: a valid C string, a key of the length given (or NULL), a valid out pointer.
    let status = unsafe {
        match how {
            Open::Plain => tilldb_open(path.as_ptr(), 0, &raw mut db),
            Open::PlainReadOnly => tilldb_open_read_only(path.as_ptr(), &raw mut db),
            Open::Keyed => tilldb_open_encrypted(path.as_ptr(), key.0, key.1, 0, &raw mut db),
            Open::KeyedReadOnly => {
                tilldb_open_read_only_encrypted(path.as_ptr(), key.0, key.1, &raw mut db)
            }
        }
    };
    assert_eq!(
        status == tilldb_status::TILLDB_OK,
        !db.is_null(),
        "a handle exactly when the open succeeds ({status:?})"
    );
    (status, db)
}

/// The four opens of the C ABI.
#[derive(Debug, Clone, Copy)]
enum Open {
    Plain,
    PlainReadOnly,
    Keyed,
    KeyedReadOnly,
}

/// A key as the ABI takes it.
fn key_arg(key: &[u8]) -> (*const u8, usize) {
    (key.as_ptr(), key.len())
}

fn put(db: *mut tilldb_db, key: &[u8], value: &[u8]) {
    let mut txn: *mut tilldb_txn = std::ptr::null_mut();
    // SAFETY: a live handle, valid buffers and out pointer; the transaction ends here.
    unsafe {
        assert_eq!(tilldb_begin(db, &raw mut txn), tilldb_status::TILLDB_OK);
        let status = tilldb_put(
            txn,
            std::ptr::null(),
            key.as_ptr(),
            key.len(),
            value.as_ptr(),
            value.len(),
        );
        assert_eq!(status, tilldb_status::TILLDB_OK, "{}", last_error());
        let status = tilldb_commit(txn, tilldb_durability::TILLDB_SYNC);
        assert_eq!(status, tilldb_status::TILLDB_OK, "{}", last_error());
    }
}

fn get(db: *mut tilldb_db, key: &[u8]) -> Option<Vec<u8>> {
    let mut value: *mut u8 = std::ptr::null_mut();
    let mut value_len = 0usize;
    // SAFETY: a live handle, a valid key and out pointers; the value is freed once copied.
    unsafe {
        let status = tilldb_get(
            db,
            std::ptr::null(),
            key.as_ptr(),
            key.len(),
            &raw mut value,
            &raw mut value_len,
        );
        match status {
            tilldb_status::TILLDB_NOT_FOUND => None,
            tilldb_status::TILLDB_OK => {
                let copy = std::slice::from_raw_parts(value, value_len).to_vec();
                tilldb_free(value, value_len);
                Some(copy)
            }
            other => panic!("tilldb_get: {other:?}: {}", last_error()),
        }
    }
}

fn close(db: *mut tilldb_db) {
    // SAFETY: a live handle, not used afterwards.
    let status = unsafe { tilldb_close(db) };
    assert_eq!(status, tilldb_status::TILLDB_OK, "{}", last_error());
}

fn header(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join("tilldb.meta")).expect("the database's header")
}

#[test]
fn a_database_created_with_a_key_through_c_opens_with_that_key_only() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let (status, db) = open(&dir, Open::Keyed, key_arg(KEY));
    assert_eq!(status, tilldb_status::TILLDB_OK, "create: {}", last_error());
    put(db, b"sale-1", VALUE);
    close(db);

    let (status, db) = open(&dir, Open::Keyed, key_arg(KEY));
    assert_eq!(status, tilldb_status::TILLDB_OK, "reopen: {}", last_error());
    assert_eq!(get(db, b"sale-1").as_deref(), Some(VALUE));
    close(db);
    let (status, db) = open(&dir, Open::KeyedReadOnly, key_arg(KEY));
    assert_eq!(
        status,
        tilldb_status::TILLDB_OK,
        "read-only: {}",
        last_error()
    );
    assert_eq!(get(db, b"sale-1").as_deref(), Some(VALUE));
    close(db);

    let before = header(&dir);
    for how in [Open::Plain, Open::PlainReadOnly] {
        let (status, _) = open(&dir, how, (std::ptr::null(), 0));
        assert_eq!(status, tilldb_status::TILLDB_ERR_KEY_REQUIRED, "{how:?}");
        let message = last_error();
        assert!(message.contains("kek:"), "names the key's id: {message}");
    }
    for how in [Open::Keyed, Open::KeyedReadOnly] {
        let (status, _) = open(&dir, how, key_arg(OTHER_KEY));
        assert_eq!(status, tilldb_status::TILLDB_ERR_WRONG_KEY, "{how:?}");
        let message = last_error();
        assert!(message.contains("kek:"), "names the key's id: {message}");
        assert!(!message.contains("KEY-0123"), "shows the key: {message}");
    }
    assert_eq!(header(&dir), before, "a refused open changed the header");
}

#[test]
fn a_plain_database_opened_with_a_key_is_not_encrypted() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let (status, db) = open(&dir, Open::Plain, (std::ptr::null(), 0));
    assert_eq!(status, tilldb_status::TILLDB_OK, "create: {}", last_error());
    put(db, b"sale-1", VALUE);
    close(db);
    let before = header(&dir);
    for how in [Open::Keyed, Open::KeyedReadOnly] {
        let (status, _) = open(&dir, how, key_arg(KEY));
        assert_eq!(status, tilldb_status::TILLDB_ERR_NOT_ENCRYPTED, "{how:?}");
        let message = last_error();
        assert!(!message.contains("KEY-0123"), "shows the key: {message}");
    }
    assert_eq!(header(&dir), before, "a refused open changed the header");
    let (status, db) = open(&dir, Open::Plain, (std::ptr::null(), 0));
    assert_eq!(status, tilldb_status::TILLDB_OK, "{}", last_error());
    assert_eq!(get(db, b"sale-1").as_deref(), Some(VALUE));
    close(db);
}

#[test]
fn a_key_of_31_bytes_is_invalid_before_anything_is_opened_and_is_never_shown() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    for how in [Open::Keyed, Open::KeyedReadOnly] {
        for length in [31, 33, 0] {
            let (status, _) = open(&dir, how, (KEY.as_ptr(), length));
            assert_eq!(
                status,
                tilldb_status::TILLDB_ERR_INVALID,
                "{how:?} {length}"
            );
            let message = last_error();
            assert!(
                message.contains(&format!("a key is 32 bytes, not {length}")),
                "{message}"
            );
            assert!(!message.contains("KEY-0123"), "shows the key: {message}");
        }
        let (status, _) = open(&dir, how, (std::ptr::null(), 32));
        assert_eq!(status, tilldb_status::TILLDB_ERR_INVALID, "{how:?} NULL");
        assert!(last_error().contains("NULL key"), "{}", last_error());
    }
    assert!(!dir.exists(), "a refused key created the database");
}
