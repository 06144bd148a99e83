//! # Commit record format (store version 1)
//!
//! The payload of one log record (`wal::RecordKind::Data`) per commit. Little-endian.
//!
//! ```text
//! offset size field
//!      0    1 kind         1 Commit
//!      1    7 zero         must be zero
//!      8    8 page_count   allocator state after the commit: pages handed out, page 0 included
//!     16    8 free_head    first page of the free list after the commit (0: empty)
//!     24    4 op_count     page operations that follow
//!     28    4 zero         must be zero
//!     32    … ops          `op_count` page operations, each as `btree::redo` encodes it
//! ```
//!
//! Replay applies each op to its page iff the page's lsn is below the record's end lsn, then
//! sets the allocator state from the record. Bytes that break this format are corruption of a
//! record whose checksum matched: reported with the log file and offset, never applied.

use crate::btree::PageOp;
use crate::btree::redo;
use crate::page::PageId;

const KIND_COMMIT: u8 = 1;
/// Bytes before the ops.
pub const HEADER_BYTES: usize = 32;

/// The allocator's state: what a commit leaves behind for the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Alloc {
    pub page_count: u64,
    pub free_head: PageId,
}

/// A decoded commit record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    pub alloc: Alloc,
    pub ops: Vec<PageOp>,
}

/// Encodes a commit record.
#[must_use]
pub fn encode(alloc: Alloc, ops: &[PageOp]) -> Vec<u8> {
    let mut out =
        Vec::with_capacity(HEADER_BYTES + ops.iter().map(PageOp::encoded_len).sum::<usize>());
    out.push(KIND_COMMIT);
    out.extend_from_slice(&[0; 7]);
    out.extend_from_slice(&alloc.page_count.to_le_bytes());
    out.extend_from_slice(&alloc.free_head.0.to_le_bytes());
    out.extend_from_slice(&u32::try_from(ops.len()).expect("ops fit u32").to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    assert_eq!(out.len(), HEADER_BYTES);
    for op in ops {
        op.encode(&mut out);
    }
    out
}

/// Decodes a commit record; `Err` names what is wrong.
pub fn decode(bytes: &[u8]) -> Result<Commit, &'static str> {
    if bytes.len() < HEADER_BYTES {
        return Err("commit record shorter than its header");
    }
    if bytes[0] != KIND_COMMIT || bytes[1..8] != [0; 7] || bytes[28..32] != [0; 4] {
        return Err("commit record header has an unknown kind or nonzero reserved bytes");
    }
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8 bytes"));
    let alloc = Alloc {
        page_count: u64_at(8),
        free_head: PageId(u64_at(16)),
    };
    let count = u32::from_le_bytes(bytes[24..28].try_into().expect("4 bytes")) as usize;
    let mut ops = Vec::with_capacity(count.min(bytes.len() / redo::OP_HEADER_BYTES));
    let mut at = HEADER_BYTES;
    for _ in 0..count {
        let (op, used) = redo::decode(&bytes[at..])?;
        ops.push(op);
        at += used;
    }
    if at != bytes.len() {
        return Err("commit record has bytes after its last op");
    }
    Ok(Commit { alloc, ops })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::PageKind;

    #[test]
    fn round_trip_and_every_truncation_is_an_error() {
        let alloc = Alloc {
            page_count: 9,
            free_head: PageId(4),
        };
        let ops = vec![
            PageOp::Format {
                page: PageId(3),
                kind: PageKind::Leaf,
            },
            PageOp::LeafDelete {
                page: PageId(3),
                key: b"k".to_vec(),
            },
        ];
        let bytes = encode(alloc, &ops);
        assert_eq!(decode(&bytes), Ok(Commit { alloc, ops }));
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = bytes.clone();
        bad[3] = 1;
        assert!(decode(&bad).is_err());
    }
}
