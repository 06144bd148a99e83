//! Arguments from Python: keys and values, table names, durability levels. Checked before
//! tilldb is called, so a wrong type is Python's `TypeError` and a wrong value `ValueError`.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyMemoryView};
use std::borrow::Cow;
use tilldb::Durability;

/// The bytes of a key or value: `bytes` are borrowed as they are (immutable, and the caller
/// holds them for the call); `bytearray` and `memoryview` are copied, since Python code may
/// change them while tilldb runs without the GIL. Anything else, `str` above all, is a
/// `TypeError`: tilldb stores bytes, and picking an encoding is the caller's decision.
pub fn bytes_arg<'a>(value: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(bytes) = value.cast::<PyBytes>() {
        return Ok(Cow::Borrowed(bytes.as_bytes()));
    }
    if let Ok(array) = value.cast::<PyByteArray>() {
        return Ok(Cow::Owned(array.to_vec()));
    }
    if value.is_instance_of::<PyMemoryView>() {
        // The limited API before Python 3.11 has no buffer protocol: `tobytes()` is one copy.
        let copy = value.call_method0("tobytes")?;
        let bytes = copy.cast::<PyBytes>()?;
        return Ok(Cow::Owned(bytes.as_bytes().to_vec()));
    }
    let type_name = value
        .get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string());
    let hint = if type_name == "str" {
        " (encode text first, e.g. key.encode())"
    } else {
        ""
    };
    Err(PyTypeError::new_err(format!(
        "{what} must be bytes, bytearray or memoryview, not {type_name}{hint}"
    )))
}

/// An optional key bound: None is unbounded.
pub fn bound_arg<'a>(
    value: Option<&'a Bound<'_, PyAny>>,
    what: &str,
) -> PyResult<Option<Cow<'a, [u8]>>> {
    value
        .filter(|v| !v.is_none())
        .map(|v| bytes_arg(v, what))
        .transpose()
}

/// A table name: None (and `""`) is the default table.
pub fn table_arg(table: Option<&str>) -> &str {
    table.unwrap_or("")
}

/// A durability level by name: `"sync"`, `"buffered"` or `"lazy"`.
pub fn durability_arg(name: &str) -> PyResult<Durability> {
    name.parse::<Durability>().map_err(PyValueError::new_err)
}
