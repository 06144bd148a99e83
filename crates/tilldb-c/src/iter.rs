//! Range iterators over the C ABI: [`tilldb_scan`] opens one, [`tilldb_iter_next`] steps it,
//! [`tilldb_iter_free`] frees it (the conventions of every function: `lib.rs`).

use super::{bytes_arg, guard, invalid, table_arg, tilldb_db, tilldb_iter, tilldb_status};
use std::ffi::{c_char, c_int};
use std::ops::Bound;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tilldb::{Direction, Range};

/// A lazy iterator over the acknowledged entries of `table` from `start` (inclusive) to
/// `end` (exclusive), backward when `reverse` is not 0; a NULL bound is open.
///
/// # Safety
/// `db` a live handle; `table` NULL or NUL-terminated; bounds NULL or holding their lengths;
/// `out` a valid pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tilldb_scan(
    db: *const tilldb_db,
    table: *const c_char,
    start: *const u8,
    start_len: usize,
    end: *const u8,
    end_len: usize,
    reverse: c_int,
    out: *mut *mut tilldb_iter,
) -> tilldb_status {
    guard(|| {
        if db.is_null() || out.is_null() {
            return Err(invalid("tilldb_scan: NULL handle or out"));
        }
        // SAFETY: per the contract above.
        let (db, table) = unsafe { (&*db, table_arg(table)?) };
        // SAFETY: per the contract above.
        let lower = if start.is_null() {
            Bound::Unbounded
        } else {
            Bound::Included(unsafe { bytes_arg(start, start_len) }?)
        };
        // SAFETY: per the contract above.
        let upper = if end.is_null() {
            Bound::Unbounded
        } else {
            Bound::Excluded(unsafe { bytes_arg(end, end_len) }?)
        };
        let direction = if reverse == 0 {
            Direction::Forward
        } else {
            Direction::Backward
        };
        let boxed = Box::new(db.db.clone());
        let range = boxed.range_in(table, lower, upper, direction)?;
        // SAFETY: the range borrows the boxed database, which the handle owns and drops
        // after it (field order); the box's contents never move.
        let range: Range<'static> =
            unsafe { std::mem::transmute::<Range<'_>, Range<'static>>(range) };
        db.open_handles.fetch_add(1, Ordering::SeqCst);
        let handle = Box::new(tilldb_iter {
            range,
            _db: boxed,
            open_handles: Arc::clone(&db.open_handles),
        });
        // SAFETY: valid output pointer.
        unsafe { *out = Box::into_raw(handle) };
        Ok(tilldb_status::TILLDB_OK)
    })
}

/// The iterator's next entry: `TILLDB_OK` with `*key`/`*value` pointing at bytes the
/// iterator owns (valid until its next call), or `TILLDB_NOT_FOUND` at the end.
///
/// # Safety
/// `it` a live iterator; the four output pointers valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tilldb_iter_next(
    it: *mut tilldb_iter,
    key: *mut *const u8,
    key_len: *mut usize,
    value: *mut *const u8,
    value_len: *mut usize,
) -> tilldb_status {
    guard(|| {
        if it.is_null()
            || key.is_null()
            || key_len.is_null()
            || value.is_null()
            || value_len.is_null()
        {
            return Err(invalid("tilldb_iter_next: NULL iterator or output"));
        }
        // SAFETY: a live iterator.
        let it = unsafe { &mut *it };
        // Lent, not copied (`Range::next_entry`): the bytes live in the range's batch, which
        // only the next call on the range changes, so they stay valid until the iterator's
        // next call, as the contract says.
        match it.range.next_entry().transpose()? {
            Some((k, v)) => {
                // SAFETY: valid output pointers; the bytes live in the range's batch.
                unsafe {
                    *key = k.as_ptr();
                    *key_len = k.len();
                    *value = v.as_ptr();
                    *value_len = v.len();
                }
                Ok(tilldb_status::TILLDB_OK)
            }
            None => Ok(tilldb_status::TILLDB_NOT_FOUND),
        }
    })
}

/// Frees an iterator. NULL is ignored.
///
/// # Safety
/// `it` is NULL or a live iterator; not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tilldb_iter_free(it: *mut tilldb_iter) {
    if it.is_null() {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: a live iterator, given back here once.
        let handle = unsafe { Box::from_raw(it) };
        handle.open_handles.fetch_sub(1, Ordering::SeqCst);
        drop(handle);
    }));
}
