//! # Commit record format (store version 1)
//!
//! The payload of one log record (`wal::RecordKind::Data`) per commit. Little-endian.
//!
//! ```text
//! offset size field
//!      0    1 kind         1 Commit
//!      1    1 flags        bit 0: the changes section follows the ops (`Options::change_feed`);
//!                          the other bits must be zero
//!      2    6 zero         must be zero
//!      8    8 page_count   allocator state after the commit: pages handed out, page 0 included
//!     16    8 free_head    first page of the free list after the commit (0: empty)
//!     24    4 op_count     page operations that follow
//!     28    4 zero         must be zero
//!     32    … ops          `op_count` page operations, each as `btree::redo` encodes it
//!      …    … changes      with flag bit 0 only: the commit's writes as the application made
//!                          them, for the change feed (`feed.rs`); replay ignores them
//! ```
//!
//! The changes section, in key order within each table, tables in name order:
//!
//! ```text
//! size field
//!    4 change_count
//!  per change:
//!    1 kind         1 put · 2 delete
//!    2 table_len    bytes of the table name (0: the default table)
//!    … table        UTF-8
//!    4 key_len
//!    … key
//!    4 value_len    puts only
//!    … value        puts only
//! ```
//!
//! Replay applies each op to its page iff the page's lsn is below the record's end lsn, then
//! sets the allocator state from the record. Bytes that break this format are corruption of a
//! record whose checksum matched: reported with the log file and offset, never applied. A
//! build older than the changes section reads a flagged record as such corruption: a database
//! with the change feed on needs this build or a later one.

use crate::btree::PageOp;
use crate::btree::redo;
use crate::page::PageId;

const KIND_COMMIT: u8 = 1;
const FLAG_CHANGES: u8 = 1;
const CHANGE_PUT: u8 = 1;
const CHANGE_DELETE: u8 = 2;
/// Bytes before the ops.
pub const HEADER_BYTES: usize = 32;

/// The allocator's state: what a commit leaves behind for the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Alloc {
    pub page_count: u64,
    pub free_head: PageId,
}

/// One write of a committed transaction, as the change feed shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The table (`""`: the default table).
    pub table: String,
    /// The key written.
    pub key: Vec<u8>,
    /// The new value; `None`: the key was deleted.
    pub value: Option<Vec<u8>>,
}

/// A decoded commit record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    pub alloc: Alloc,
    pub ops: Vec<PageOp>,
    /// The writes, when the record carries them (`Options::change_feed`).
    pub changes: Option<Vec<Change>>,
}

/// One write as a transaction holds it: ((table, key), value or `None` to delete).
pub type Write<'a> = (&'a (String, Vec<u8>), &'a Option<Vec<u8>>);

/// Bytes the changes section takes for `writes`.
pub fn changes_len<'a>(writes: impl IntoIterator<Item = Write<'a>>) -> usize {
    4 + writes
        .into_iter()
        .map(|((table, key), value)| {
            1 + 2 + table.len() + 4 + key.len() + value.as_ref().map_or(0, |v| 4 + v.len())
        })
        .sum::<usize>()
}

/// Bytes reserved for a record's page operations before encoding them: a one-put commit's
/// leaf put (key, value and their headers) fits.
const OPS_BYTES_GUESS: usize = 512;

/// Encodes a commit record; with `changes`, the changes section too.
#[must_use]
pub fn encode<'a, I>(alloc: Alloc, ops: &[PageOp], changes: Option<I>) -> Vec<u8>
where
    I: IntoIterator<Item = Write<'a>> + Clone,
{
    // Sized for the changes and a small op or two; a larger record grows the vector (sizing
    // it exactly meant encoding every op twice).
    let changes_bytes = changes.clone().map_or(0, changes_len);
    let mut out = Vec::with_capacity(HEADER_BYTES + OPS_BYTES_GUESS + changes_bytes);
    out.push(KIND_COMMIT);
    out.push(if changes.is_some() { FLAG_CHANGES } else { 0 });
    out.extend_from_slice(&[0; 6]);
    out.extend_from_slice(&alloc.page_count.to_le_bytes());
    out.extend_from_slice(&alloc.free_head.0.to_le_bytes());
    out.extend_from_slice(&u32::try_from(ops.len()).expect("ops fit u32").to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    assert_eq!(out.len(), HEADER_BYTES);
    for op in ops {
        op.encode(&mut out);
    }
    let ops_end = out.len();
    if let Some(changes) = changes {
        let count_at = out.len();
        out.extend_from_slice(&[0; 4]);
        let mut count = 0u32;
        for ((table, key), value) in changes {
            let len32 = |n: usize| u32::try_from(n).expect("under the log's record limit");
            out.push(if value.is_some() {
                CHANGE_PUT
            } else {
                CHANGE_DELETE
            });
            out.extend_from_slice(
                &u16::try_from(table.len())
                    .expect("table names are short")
                    .to_le_bytes(),
            );
            out.extend_from_slice(table.as_bytes());
            out.extend_from_slice(&len32(key.len()).to_le_bytes());
            out.extend_from_slice(key);
            if let Some(v) = value {
                out.extend_from_slice(&len32(v.len()).to_le_bytes());
                out.extend_from_slice(v);
            }
            count += 1;
        }
        out[count_at..count_at + 4].copy_from_slice(&count.to_le_bytes());
    }
    assert_eq!(
        out.len(),
        ops_end + changes_bytes,
        "changes_len is the section's size"
    );
    out
}

/// Encodes a commit record without the changes section (the one a create makes).
#[must_use]
pub fn encode_plain(alloc: Alloc, ops: &[PageOp]) -> Vec<u8> {
    encode::<[Write<'_>; 0]>(alloc, ops, None)
}

/// Decodes a commit record; `Err` names what is wrong.
pub fn decode(bytes: &[u8]) -> Result<Commit, &'static str> {
    if bytes.len() < HEADER_BYTES {
        return Err("commit record shorter than its header");
    }
    if bytes[0] != KIND_COMMIT
        || bytes[1] & !FLAG_CHANGES != 0
        || bytes[2..8] != [0; 6]
        || bytes[28..32] != [0; 4]
    {
        return Err("commit record header has an unknown kind, flag or nonzero reserved bytes");
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
    let changes = if bytes[1] & FLAG_CHANGES == 0 {
        None
    } else {
        let (changes, used) = decode_changes(&bytes[at..])?;
        at += used;
        Some(changes)
    };
    if at != bytes.len() {
        return Err("commit record has bytes after its last op or change");
    }
    Ok(Commit {
        alloc,
        ops,
        changes,
    })
}

/// Decodes a changes section; returns the changes and the bytes it took.
fn decode_changes(bytes: &[u8]) -> Result<(Vec<Change>, usize), &'static str> {
    const SHORT: &str = "commit record's changes section is cut short";
    let mut at = 0;
    let mut take = |n: usize| -> Result<&[u8], &'static str> {
        let part = bytes.get(at..at + n).ok_or(SHORT)?;
        at += n;
        Ok(part)
    };
    let u32_of = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize;
    let count = u32_of(take(4)?);
    let mut changes = Vec::with_capacity(count.min(bytes.len() / 11));
    for _ in 0..count {
        let kind = take(1)?[0];
        let table_len = usize::from(u16::from_le_bytes(take(2)?.try_into().expect("2 bytes")));
        let table = std::str::from_utf8(take(table_len)?)
            .map_err(|_| "commit record's changes name a table that is not UTF-8")?
            .to_owned();
        let key_len = u32_of(take(4)?);
        let key = take(key_len)?.to_vec();
        let value = match kind {
            CHANGE_PUT => {
                let value_len = u32_of(take(4)?);
                Some(take(value_len)?.to_vec())
            }
            CHANGE_DELETE => None,
            _ => return Err("commit record's changes hold an unknown kind of change"),
        };
        changes.push(Change { table, key, value });
    }
    Ok((changes, at))
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
        let bytes = encode::<[Write<'_>; 0]>(alloc, &ops, None);
        assert_eq!(
            decode(&bytes),
            Ok(Commit {
                alloc,
                ops: ops.clone(),
                changes: None
            })
        );
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = bytes.clone();
        bad[3] = 1;
        assert!(decode(&bad).is_err());
    }

    #[test]
    fn changes_round_trip_and_every_truncation_is_an_error() {
        let alloc = Alloc {
            page_count: 2,
            free_head: PageId(0),
        };
        let writes: std::collections::BTreeMap<(String, Vec<u8>), Option<Vec<u8>>> = [
            ((String::new(), b"a".to_vec()), Some(b"1".to_vec())),
            ((String::new(), b"b".to_vec()), None),
            (("orders".to_string(), b"o-1".to_vec()), Some(vec![7; 300])),
        ]
        .into_iter()
        .collect();
        let bytes = encode(alloc, &[], Some(writes.iter()));
        let commit = decode(&bytes).expect("decodes");
        let changes = commit.changes.expect("carried");
        assert_eq!(changes.len(), 3);
        assert_eq!(
            changes[1],
            Change {
                table: String::new(),
                key: b"b".to_vec(),
                value: None
            }
        );
        assert_eq!(changes[2].table, "orders");
        assert_eq!(changes[2].value.as_deref(), Some(&[7; 300][..]));
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = bytes.clone();
        bad[1] = 2;
        assert!(decode(&bad).is_err(), "an unknown flag");
    }
}
