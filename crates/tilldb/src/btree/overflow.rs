//! # Overflow page format (data file version 1)
//!
//! A value too large for its leaf lives in a chain of Overflow pages; the leaf cell holds its
//! length and the first page id (`node.rs`). Offsets are from the start of the page body.
//! Little-endian.
//!
//! ```text
//! offset size field
//!      0    8 next   next page of the chain, 0 on the last page
//!      8    4 len    value bytes on this page
//!     12    4 zero   must be zero
//!     16    … data   len bytes of the value, then zeros
//! ```
//!
//! A chain is whole iff it has exactly `ceil(value_len / capacity)` pages, every page but the
//! last is full (`len = capacity = body - 16`), the last holds the rest, its `next` is 0, and
//! every page is of kind Overflow. A zero body is an empty last page.

use super::{Pages, corrupt};
use crate::Result;
use crate::page::{PageBuf, PageId, PageKind};

/// Bytes of the overflow page header.
pub const OVERFLOW_HEADER_BYTES: usize = 16;
const NEXT_OFFSET: usize = 0;
const LEN_OFFSET: usize = NEXT_OFFSET + 8;
const RESERVED_OFFSET: usize = LEN_OFFSET + 4;
const _: () = assert!(RESERVED_OFFSET + 4 == OVERFLOW_HEADER_BYTES);

/// One overflow page, checked.
#[derive(Debug, Clone, Copy)]
pub struct OverflowRef<'a> {
    /// The next page of the chain, 0 on the last.
    pub next: PageId,
    /// The value bytes on this page.
    pub data: &'a [u8],
}

impl<'a> OverflowRef<'a> {
    /// Views the overflow page `page`, checking its header.
    pub fn parse(page: &'a PageBuf) -> Result<OverflowRef<'a>, &'static str> {
        if page.kind() != PageKind::Overflow {
            return Err("overflow chain leads to a page that is not an overflow page");
        }
        let body = page.body();
        let next = PageId(u64::from_le_bytes(
            body[NEXT_OFFSET..LEN_OFFSET].try_into().expect("8 bytes"),
        ));
        let len = u32::from_le_bytes(
            body[LEN_OFFSET..RESERVED_OFFSET]
                .try_into()
                .expect("4 bytes"),
        ) as usize;
        if body[RESERVED_OFFSET..OVERFLOW_HEADER_BYTES] != [0; 4] {
            return Err("overflow page reserved bytes are not zero");
        }
        if len > body.len() - OVERFLOW_HEADER_BYTES {
            return Err("overflow page length exceeds the page");
        }
        Ok(OverflowRef {
            next,
            data: &body[OVERFLOW_HEADER_BYTES..OVERFLOW_HEADER_BYTES + len],
        })
    }
}

/// Writes `next` and `data` into an overflow page body, zeroing the rest. The body of the
/// `OverflowWrite` page op.
pub(super) fn write(body: &mut [u8], next: PageId, data: &[u8]) {
    assert!(
        data.len() <= body.len() - OVERFLOW_HEADER_BYTES,
        "{} bytes of overflow data do not fit a page",
        data.len()
    );
    let len = u32::try_from(data.len()).expect("smaller than a page");
    body[NEXT_OFFSET..LEN_OFFSET].copy_from_slice(&next.0.to_le_bytes());
    body[LEN_OFFSET..RESERVED_OFFSET].copy_from_slice(&len.to_le_bytes());
    body[RESERVED_OFFSET..OVERFLOW_HEADER_BYTES].fill(0);
    let end = OVERFLOW_HEADER_BYTES + data.len();
    body[OVERFLOW_HEADER_BYTES..end].copy_from_slice(data);
    body[end..].fill(0);
}

/// Walks the chain of a value of `len` bytes from `first`, calling `visit` on each page id and
/// its data, checking that the chain is whole (see the format rules above).
pub(super) fn walk<P: Pages>(
    pages: &P,
    first: PageId,
    len: u64,
    mut visit: impl FnMut(PageId, &[u8]) -> Result<()>,
) -> Result<()> {
    let limits = pages.limits();
    let capacity = limits.overflow_data_bytes as u64;
    let page_count = limits.overflow_pages(len);
    let mut id = first;
    for index in 0..page_count {
        if id.0 == 0 {
            return Err(corrupt(pages, first, "overflow chain ends early"));
        }
        let page = pages.read(id)?;
        let overflow = OverflowRef::parse(&page).map_err(|what| corrupt(pages, id, what))?;
        let expected = if index + 1 == page_count {
            len - capacity * index
        } else {
            capacity
        };
        if overflow.data.len() as u64 != expected {
            return Err(corrupt(
                pages,
                id,
                "overflow page holds the wrong amount of data",
            ));
        }
        let next = overflow.next;
        visit(id, overflow.data)?;
        drop(page);
        id = next;
    }
    if id.0 != 0 {
        return Err(corrupt(
            pages,
            id,
            "overflow chain is longer than its value",
        ));
    }
    Ok(())
}

/// Reads a whole value of `len` bytes from the chain at `first`.
pub(super) fn read<P: Pages>(pages: &P, first: PageId, len: u32) -> Result<Vec<u8>> {
    // The length comes from a page: do not trust it with a huge allocation up front.
    let mut value = Vec::with_capacity((len as usize).min(1 << 24));
    walk(pages, first, u64::from(len), |_, data| {
        value.extend_from_slice(data);
        Ok(())
    })?;
    assert_eq!(
        value.len(),
        len as usize,
        "walk checked every page's length"
    );
    Ok(value)
}

/// Writes `value` into a new chain and returns its first page. Requires: `value` is not empty
/// (empty values are always inline).
pub(super) fn store<P: Pages>(pages: &P, value: &[u8]) -> Result<PageId> {
    assert!(!value.is_empty(), "empty values are inline");
    let limits = pages.limits();
    let chunks: Vec<&[u8]> = value.chunks(limits.overflow_data_bytes).collect();
    let mut ids = Vec::with_capacity(chunks.len());
    for _ in &chunks {
        ids.push(pages.allocate(PageKind::Overflow)?);
    }
    for (index, data) in chunks.iter().enumerate() {
        let next = ids.get(index + 1).copied().unwrap_or(PageId(0));
        pages.apply(super::PageOp::OverflowWrite {
            page: ids[index],
            next,
            data: data.to_vec(),
        })?;
    }
    Ok(ids[0])
}

/// Frees the chain of a value of `len` bytes starting at `first`.
pub(super) fn free<P: Pages>(pages: &P, first: PageId, len: u32) -> Result<()> {
    let mut ids = Vec::new();
    walk(pages, first, u64::from(len), |id, _| {
        ids.push(id);
        Ok(())
    })?;
    for id in ids {
        pages.free(id)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btree::{Limits, MemPages};

    #[test]
    fn store_read_free_round_trip() {
        let pages = MemPages::new(4096);
        let capacity = Limits::new(4096).overflow_data_bytes;
        for len in [1, capacity - 1, capacity, capacity + 1, 3 * capacity + 17] {
            let value: Vec<u8> = (0..len)
                .map(|i| u8::try_from(i % 253).expect("a byte"))
                .collect();
            let first = store(&pages, &value).expect("store");
            let len32 = u32::try_from(len).expect("small");
            assert_eq!(read(&pages, first, len32).expect("read"), value);
            let live = pages.live_pages();
            free(&pages, first, len32).expect("free");
            assert_eq!(
                pages.live_pages() as u64,
                live as u64 - Limits::new(4096).overflow_pages(len as u64)
            );
        }
    }

    #[test]
    fn a_short_chain_is_corruption() {
        let pages = MemPages::new(4096);
        let value = vec![1u8; 5000];
        let first = store(&pages, &value).expect("store");
        let err = read(&pages, first, 9000).expect_err("chain too short for 9000 bytes");
        assert!(matches!(err, crate::Error::Corruption { .. }), "{err}");
        let err = read(&pages, first, 4000).expect_err("chain too long for 4000 bytes");
        assert!(matches!(err, crate::Error::Corruption { .. }), "{err}");
    }
}
