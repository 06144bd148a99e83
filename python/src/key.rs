//! The application's key of an encrypted database (docs/encryption.md, piece 8), as
//! `tilldb.open(path, key=..., key_file=...)` takes it: `key` the 32 bytes themselves
//! (`bytes` or `bytearray`), or `key_file` a file holding them, in the format of the `till`
//! CLI's `--key-file`: the 32 bytes, or 64 hexadecimal digits with white space around (a
//! trailing newline). The rules are those of `crates/till/src/key.rs` (`read_key_file`),
//! repeated here so the package does not depend on the CLI.
//!
//! Every copy of the key made here is zeroed on drop (`Zeroizing`), and no message holds a
//! byte of it: a refusal names the key's length, or the file and its length. The caller's own
//! `bytes` cannot be wiped (Python's `bytes` are immutable); a `bytearray` can, by the caller,
//! once the database is open.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes};
use std::path::{Path, PathBuf};
use tilldb::Encryption;
use zeroize::Zeroizing;

/// The length of a key in bytes.
const KEY_BYTES: usize = 32;
/// The length of a key written as hexadecimal digits.
const KEY_HEX_DIGITS: usize = 2 * KEY_BYTES;

/// The encryption `open`'s `key` and `key_file` ask for: `None` when neither is given. Both
/// at once is a `ValueError`, as is a key of the wrong length or a key file in neither
/// format; a key of another type is a `TypeError`; a key file that cannot be read, the
/// `OSError` of the failure (`FileNotFoundError`, ...) naming the file.
pub fn encryption_arg(
    key: Option<&Bound<'_, PyAny>>,
    key_file: Option<PathBuf>,
) -> PyResult<Option<Encryption>> {
    let key = key.filter(|k| !k.is_none());
    let bytes = match (key, key_file) {
        (Some(_), Some(_)) => {
            return Err(PyValueError::new_err(
                "give key or key_file, not both: each is the whole key",
            ));
        }
        (Some(key), None) => key_arg(key)?,
        (None, Some(path)) => read_key_file(&path)?,
        (None, None) => return Ok(None),
    };
    Ok(Some(Encryption::with_key(&bytes)))
}

/// The 32 bytes of `key`, a `bytes` or `bytearray`.
fn key_arg(key: &Bound<'_, PyAny>) -> PyResult<Zeroizing<[u8; KEY_BYTES]>> {
    let bytes: Zeroizing<Vec<u8>> = if let Ok(bytes) = key.cast::<PyBytes>() {
        Zeroizing::new(bytes.as_bytes().to_vec())
    } else if let Ok(array) = key.cast::<PyByteArray>() {
        Zeroizing::new(array.to_vec())
    } else {
        let type_name = key
            .get_type()
            .name()
            .map_or_else(|_| "?".to_owned(), |n| n.to_string());
        return Err(PyTypeError::new_err(format!(
            "key must be bytes or bytearray of {KEY_BYTES} bytes, not {type_name} (for a key \
             written as hexadecimal digits, use key_file or bytes.fromhex)"
        )));
    };
    let array = <[u8; KEY_BYTES]>::try_from(bytes.as_slice()).map_err(|_| {
        PyValueError::new_err(format!(
            "key must be {KEY_BYTES} bytes, not {}",
            bytes.len()
        ))
    })?;
    Ok(Zeroizing::new(array))
}

/// The key in the key file at `path`: its 32 bytes, or 64 hexadecimal digits.
fn read_key_file(path: &Path) -> PyResult<Zeroizing<[u8; KEY_BYTES]>> {
    let bytes = std::fs::read(path).map_err(|e| {
        let message = format!("read the key file {}: {e}", path.display());
        PyErr::from(std::io::Error::new(e.kind(), message))
    })?;
    let bytes = Zeroizing::new(bytes);
    parse_key_file(&bytes)
        .map_err(|why| PyValueError::new_err(format!("the key file {}: {why}", path.display())))
}

/// A key file's 32 bytes: the key itself, or 64 hexadecimal digits with white space around.
fn parse_key_file(bytes: &[u8]) -> Result<Zeroizing<[u8; KEY_BYTES]>, String> {
    if let Ok(raw) = <[u8; KEY_BYTES]>::try_from(bytes) {
        return Ok(Zeroizing::new(raw));
    }
    parse_hex(bytes.trim_ascii()).map_err(|why| {
        format!(
            "{why} (a key file holds the key's {KEY_BYTES} bytes, or {KEY_HEX_DIGITS} \
             hexadecimal digits; this one holds {} bytes)",
            bytes.len()
        )
    })
}

/// 64 hexadecimal digits as 32 bytes.
fn parse_hex(digits: &[u8]) -> Result<Zeroizing<[u8; KEY_BYTES]>, String> {
    if digits.len() != KEY_HEX_DIGITS {
        return Err(format!(
            "a key is {KEY_HEX_DIGITS} hexadecimal digits, not {}",
            digits.len()
        ));
    }
    let mut key = Zeroizing::new([0u8; KEY_BYTES]);
    for (byte, pair) in key.iter_mut().zip(digits.chunks_exact(2)) {
        let digit = |d: u8| {
            char::from(d)
                .to_digit(16)
                .ok_or_else(|| "a key holds only hexadecimal digits".to_owned())
        };
        let value = digit(pair[0])? * 16 + digit(pair[1])?;
        *byte = u8::try_from(value).expect("two hexadecimal digits are at most 255");
    }
    Ok(key)
}
