//! The write buffer through the C ABI (`tilldb_open_with_write_buffer`, docs/write-buffer.md):
//! commits made through it read back, after a close through a plain `tilldb_open` too, and
//! the header carries the write buffer's feature (version 5) only once it was on.

use std::ffi::CString;
use std::path::Path;
use tilldb::FlushMethod;
use tilldb::internals::header::HeaderFile;
use tilldb_c::{
    tilldb_begin, tilldb_close, tilldb_commit, tilldb_db, tilldb_durability, tilldb_free,
    tilldb_get, tilldb_open, tilldb_open_with_write_buffer, tilldb_put, tilldb_status, tilldb_txn,
};

fn c_path(dir: &Path) -> CString {
    CString::new(dir.to_str().expect("UTF-8")).expect("no NUL")
}

/// Whether the header of the database in `dir` has the write buffer's feature.
fn header_has_write_buffer(dir: &Path) -> bool {
    let storage = tilldb::io::FileStorage::new();
    let (_, header) = HeaderFile::open(&storage, dir, FlushMethod::Fdatasync)
        .expect("read the header")
        .expect("a header");
    header.write_buffer
}

/// Puts `key` = `value` in one transaction committed at `durability`.
fn put(db: *mut tilldb_db, key: &[u8], value: &[u8], durability: tilldb_durability) {
    let mut txn: *mut tilldb_txn = std::ptr::null_mut();
    // SAFETY: a live handle; `txn` is written on success.
    assert_eq!(
        unsafe { tilldb_begin(db, &raw mut txn) },
        tilldb_status::TILLDB_OK
    );
    // SAFETY: a live transaction; the buffers outlive the call.
    let status = unsafe {
        tilldb_put(
            txn,
            std::ptr::null(),
            key.as_ptr(),
            key.len(),
            value.as_ptr(),
            value.len(),
        )
    };
    assert_eq!(status, tilldb_status::TILLDB_OK);
    // SAFETY: a live transaction, freed by the call.
    assert_eq!(
        unsafe { tilldb_commit(txn, durability) },
        tilldb_status::TILLDB_OK
    );
}

/// The value of `key`, read through `tilldb_get`.
fn get(db: *mut tilldb_db, key: &[u8]) -> Option<Vec<u8>> {
    let mut value: *mut u8 = std::ptr::null_mut();
    let mut len = 0usize;
    // SAFETY: a live handle; `value` and `len` are written on success.
    let status = unsafe {
        tilldb_get(
            db,
            std::ptr::null(),
            key.as_ptr(),
            key.len(),
            &raw mut value,
            &raw mut len,
        )
    };
    match status {
        tilldb_status::TILLDB_OK => {
            // SAFETY: `len` bytes at `value`, ours until `tilldb_free`.
            let bytes = unsafe { std::slice::from_raw_parts(value, len) }.to_vec();
            // SAFETY: a buffer tilldb returned.
            unsafe { tilldb_free(value, len) };
            Some(bytes)
        }
        tilldb_status::TILLDB_NOT_FOUND => None,
        other => panic!("tilldb_get: {other:?}"),
    }
}

#[test]
fn commits_through_the_write_buffer_read_back_and_after_a_plain_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = c_path(dir.path());
    let mut db: *mut tilldb_db = std::ptr::null_mut();
    // SAFETY: a NUL-terminated path; `db` is written on success.
    let status = unsafe { tilldb_open_with_write_buffer(path.as_ptr(), 0, 1 << 20, &raw mut db) };
    assert_eq!(status, tilldb_status::TILLDB_OK);
    assert!(
        header_has_write_buffer(dir.path()),
        "the buffer's feature in the header"
    );
    for i in 0..50u32 {
        let durability = if i % 10 == 0 {
            tilldb_durability::TILLDB_SYNC
        } else {
            tilldb_durability::TILLDB_BUFFERED
        };
        put(
            db,
            format!("key-{i:02}").as_bytes(),
            &i.to_le_bytes(),
            durability,
        );
    }
    assert_eq!(get(db, b"key-07"), Some(7u32.to_le_bytes().to_vec()));
    // SAFETY: a live handle with nothing open on it, freed by the call.
    assert_eq!(unsafe { tilldb_close(db) }, tilldb_status::TILLDB_OK);
    // SAFETY: as above.
    let status = unsafe { tilldb_open(path.as_ptr(), 0, &raw mut db) };
    assert_eq!(status, tilldb_status::TILLDB_OK);
    for i in 0..50u32 {
        assert_eq!(
            get(db, format!("key-{i:02}").as_bytes()),
            Some(i.to_le_bytes().to_vec()),
            "key {i} after the reopen"
        );
    }
    // SAFETY: as above.
    assert_eq!(unsafe { tilldb_close(db) }, tilldb_status::TILLDB_OK);
}

#[test]
fn a_database_opened_without_the_buffer_keeps_its_older_header() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = c_path(dir.path());
    let mut db: *mut tilldb_db = std::ptr::null_mut();
    // SAFETY: a NUL-terminated path; `db` is written on success.
    let status = unsafe { tilldb_open_with_write_buffer(path.as_ptr(), 0, 0, &raw mut db) };
    assert_eq!(status, tilldb_status::TILLDB_OK);
    put(db, b"k", b"v", tilldb_durability::TILLDB_SYNC);
    // SAFETY: a live handle with nothing open on it, freed by the call.
    assert_eq!(unsafe { tilldb_close(db) }, tilldb_status::TILLDB_OK);
    assert!(
        !header_has_write_buffer(dir.path()),
        "0 bytes is no buffer: the header stays readable by earlier releases"
    );
}
