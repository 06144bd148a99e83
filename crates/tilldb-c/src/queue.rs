//! A write transaction's queue calls over the C ABI: [`tilldb_pop_first`] and
//! [`tilldb_pop_last`] take the entry at either end of a table, this transaction's own
//! writes included (the conventions of every function: `lib.rs`).

use super::{guard, invalid, table_arg, tilldb_status, tilldb_txn, txn_arg};
use std::ffi::c_char;

/// Removes the entry of `table` with the smallest key and returns it: `TILLDB_OK` with
/// `*key`, `*value` (free each with `tilldb_free(ptr, len)`), or `TILLDB_NOT_FOUND` when the
/// table is empty as the transaction sees it. A queue's head: one descent a pop, however many
/// came before in the transaction. It reads, so it takes the writer lock.
///
/// # Safety
/// `txn` a live transaction; `table` NULL or NUL-terminated; the four outputs valid pointers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tilldb_pop_first(
    txn: *mut tilldb_txn,
    table: *const c_char,
    key: *mut *mut u8,
    key_len: *mut usize,
    value: *mut *mut u8,
    value_len: *mut usize,
) -> tilldb_status {
    // SAFETY: per the contract above.
    unsafe { pop(txn, table, (key, key_len), (value, value_len), true) }
}

/// [`tilldb_pop_first`] at the other end: the entry with the largest key.
///
/// # Safety
/// As [`tilldb_pop_first`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tilldb_pop_last(
    txn: *mut tilldb_txn,
    table: *const c_char,
    key: *mut *mut u8,
    key_len: *mut usize,
    value: *mut *mut u8,
    value_len: *mut usize,
) -> tilldb_status {
    // SAFETY: per the contract above.
    unsafe { pop(txn, table, (key, key_len), (value, value_len), false) }
}

/// A buffer handed to C, freed with `tilldb_free`: where it goes and where its length goes.
type Out = (*mut *mut u8, *mut usize);

/// Both pops: the first entry if `first`, else the last.
///
/// # Safety
/// As [`tilldb_pop_first`].
unsafe fn pop(
    txn: *mut tilldb_txn,
    table: *const c_char,
    key: Out,
    value: Out,
    first: bool,
) -> tilldb_status {
    guard(|| {
        if [
            key.0.is_null(),
            key.1.is_null(),
            value.0.is_null(),
            value.1.is_null(),
        ]
        .contains(&true)
        {
            return Err(invalid("tilldb_pop: NULL output"));
        }
        // SAFETY: per the contract of the callers.
        let (txn, table) = unsafe { (txn_arg(txn)?, table_arg(table)?) };
        let popped = if first {
            txn.pop_first_in(table)?
        } else {
            txn.pop_last_in(table)?
        };
        let Some((k, v)) = popped else {
            return Ok(tilldb_status::TILLDB_NOT_FOUND);
        };
        for (bytes, (ptr, len)) in [(k, key), (v, value)] {
            let boxed = bytes.into_boxed_slice();
            // SAFETY: valid output pointers (checked non-NULL).
            unsafe {
                *len = boxed.len();
                *ptr = Box::into_raw(boxed).cast::<u8>();
            }
        }
        Ok(tilldb_status::TILLDB_OK)
    })
}
