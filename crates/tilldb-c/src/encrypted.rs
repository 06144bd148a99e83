//! Opening an encrypted database over the C ABI (docs/encryption.md, piece 8):
//! [`tilldb_open_encrypted`] and [`tilldb_open_read_only_encrypted`] are `tilldb_open` and
//! `tilldb_open_read_only` with the application's key after the path (the conventions of
//! every function: `lib.rs`).
//!
//! The key is the 32 bytes the application keeps apart from the database (a key file, a key
//! store), the same key `till --key-file` takes. The call copies it into memory zeroed on
//! drop (`Zeroizing`) and hands it to `Encryption::with_key`, which keeps it as the cipher's
//! key for as long as the handle is open. It is never printed: a refusal names the key's
//! length, and the engine's errors name only its id (`kek:` and 16 hex digits derived one way
//! from it). Wiping the caller's own copy is the caller's job; the header says so.

use super::{Failure, open_handle, tilldb_db, tilldb_status};
use std::ffi::{c_char, c_int};
use tilldb::{Db, Encryption, Options};
use zeroize::Zeroizing;

/// The length of an application key in bytes: `key_len` of [`tilldb_open_encrypted`] and
/// [`tilldb_open_read_only_encrypted`].
pub const TILLDB_KEY_BYTES: usize = 32;

/// Opens (creating when missing) the encrypted database in directory `path` under the
/// application's key, the `key_len` bytes at `key`, with the default options, or the change
/// feed on when `change_feed` is not 0. A new database is encrypted (AES-256-GCM where the CPU
/// has AES instructions, else ChaCha20-Poly1305) under a data key of its own, which `key`
/// wraps. On success `*out` is the handle; close it with
/// `tilldb_close`.
///
/// `key_len` must be `TILLDB_KEY_BYTES` (32) and `key` not NULL, else `TILLDB_ERR_INVALID`
/// and nothing is opened. The call copies the key into memory it zeroes before it returns,
/// and the handle keeps it in the cipher's form (which the cipher library does not wipe when
/// the handle closes): once this returns, wipe
/// your own copy (`explicit_bzero`, `memset_s`, `SecureZeroMemory`; a plain `memset` before
/// `free` may be optimized away). A key that does not open the database is
/// `TILLDB_ERR_WRONG_KEY`; a database that is not encrypted, `TILLDB_ERR_NOT_ENCRYPTED`;
/// neither changes anything on disk, and no error message holds a byte of the key.
///
/// # Safety
/// `path` is a NUL-terminated string; `key` is NULL or points to `key_len` readable bytes;
/// `out` is a valid pointer to write the handle to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tilldb_open_encrypted(
    path: *const c_char,
    key: *const u8,
    key_len: usize,
    change_feed: c_int,
    out: *mut *mut tilldb_db,
) -> tilldb_status {
    let options = Options {
        change_feed: change_feed != 0,
        ..Options::default()
    };
    let what = "tilldb_open_encrypted";
    // SAFETY: per this function's contract.
    unsafe {
        open_with_key(what, path, (key, key_len), out, options, |p, o| {
            Db::open(p, o)
        })
    }
}

/// `tilldb_open_read_only` for an encrypted database: opens the existing database in
/// directory `path` read-only, at its latest durable commit, with the application's key,
/// the `key_len` bytes at `key`. The key's rules and errors are those of
/// `tilldb_open_encrypted`: `key_len` must be `TILLDB_KEY_BYTES` (32), and once this returns
/// the caller wipes its own copy of the key.
///
/// # Safety
/// `path` is a NUL-terminated string; `key` is NULL or points to `key_len` readable bytes;
/// `out` is a valid pointer to write the handle to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tilldb_open_read_only_encrypted(
    path: *const c_char,
    key: *const u8,
    key_len: usize,
    out: *mut *mut tilldb_db,
) -> tilldb_status {
    let what = "tilldb_open_read_only_encrypted";
    let options = Options::default();
    // SAFETY: per this function's contract.
    unsafe {
        open_with_key(what, path, (key, key_len), out, options, |p, o| {
            Db::open_read_only(p, o)
        })
    }
}

/// Opens a handle with `open` (the call named `what`), `options` and the key `key` (pointer
/// and length), checked after the path and before anything is opened.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `key.0` is NULL or points to `key.1` readable
/// bytes; `out` is NULL or a valid pointer.
unsafe fn open_with_key(
    what: &str,
    path: *const c_char,
    key: (*const u8, usize),
    out: *mut *mut tilldb_db,
    options: Options,
    open: impl FnOnce(&str, Options) -> tilldb::Result<Db>,
) -> tilldb_status {
    let open_keyed = |path: &str| {
        // SAFETY: per this function's contract.
        let key = unsafe { key_arg(what, key.0, key.1) }?;
        let options = Options {
            encryption: Some(Encryption::with_key(&key)),
            ..options
        };
        Ok(open(path, options)?)
    };
    // SAFETY: per this function's contract.
    unsafe { open_handle(what, path, out, open_keyed) }
}

/// The application's key from the `key_len` bytes at `key`, copied into memory zeroed on
/// drop. A NULL key or a length other than [`TILLDB_KEY_BYTES`] is refused with a message
/// that names the length only: the bytes might be a key cut short, and must not be shown.
///
/// # Safety
/// `key` is NULL or points to `key_len` readable bytes.
unsafe fn key_arg(
    what: &str,
    key: *const u8,
    key_len: usize,
) -> Result<Zeroizing<[u8; TILLDB_KEY_BYTES]>, Failure> {
    if key.is_null() {
        return Err(Failure::Invalid(format!("{what}: NULL key")));
    }
    if key_len != TILLDB_KEY_BYTES {
        return Err(Failure::Invalid(format!(
            "{what}: a key is {TILLDB_KEY_BYTES} bytes, not {key_len}"
        )));
    }
    // SAFETY: checked non-NULL; the caller passes `key_len` (here TILLDB_KEY_BYTES) readable
    // bytes at `key`.
    let bytes = unsafe { std::slice::from_raw_parts(key, TILLDB_KEY_BYTES) };
    let mut copy = Zeroizing::new([0u8; TILLDB_KEY_BYTES]);
    copy.copy_from_slice(bytes);
    Ok(copy)
}
