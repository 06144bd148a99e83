//! # Page operation format (log payload, data file version 1)
//!
//! A page op changes exactly one page and is deterministic given that page's prior bytes, so
//! recovery redoes it: op `o` of a log record at lsn `l` is applied to page `o.page()` iff that
//! page's lsn is below `l`. Ops never touch the page header beyond the kind (`Format`,
//! `Image`); the caller stamps the lsn. Little-endian; ops are concatenated without padding.
//!
//! ```text
//! offset size field
//!      0    1 tag    which op (below)
//!      1    8 page   the page it changes, never 0
//!      9    … operands, by tag:
//!
//! tag op             operands
//!   1 Format         kind u8 (1 Leaf · 2 Branch · 3 Overflow · 4 Free)
//!   2 Image          kind u8, body_len u32, head_len u32, tail_len u32, head, tail
//!                      the body is head, then body_len - head_len - tail_len zeros, then tail
//!   3 LeafPut        key_len u16, key, value_kind u8 (0 inline · 1 overflow), value_len u32,
//!                      inline: value_len bytes · overflow: first page u64
//!   4 LeafDelete     key_len u16, key
//!   5 Truncate       from u16
//!   6 BranchInsert   key_len u16, key, child u64
//!   7 BranchRemove   index u16
//!   8 SetLeftmost    child u64
//!   9 SetPrev        prev u64
//!  10 SetNext        next u64
//!  11 OverflowWrite  next u64, data_len u32, data
//! ```
//!
//! [`decode`] refuses unknown tags and kinds, a zero page id, lengths running past the input,
//! and an `Image` body larger than the largest page body; it never panics and never allocates
//! more than the input holds. It does not check an op against a page: applying an op that
//! cannot apply (a delete of an absent key) panics, because the log record that carried it had
//! a valid checksum, so the op was built wrong.

use super::node::{self, LeafValue, NodeKind};
use super::node_mut::NodeMut;
use super::overflow;
use crate::page::{HEADER_BYTES, PAGE_BYTES_MAX, PageBuf, PageId, PageKind};

const TAG_FORMAT: u8 = 1;
const TAG_IMAGE: u8 = 2;
const TAG_LEAF_PUT: u8 = 3;
const TAG_LEAF_DELETE: u8 = 4;
const TAG_TRUNCATE: u8 = 5;
const TAG_BRANCH_INSERT: u8 = 6;
const TAG_BRANCH_REMOVE: u8 = 7;
const TAG_SET_LEFTMOST: u8 = 8;
const TAG_SET_PREV: u8 = 9;
const TAG_SET_NEXT: u8 = 10;
const TAG_OVERFLOW_WRITE: u8 = 11;
const VALUE_INLINE: u8 = 0;
const VALUE_OVERFLOW: u8 = 1;
/// Bytes of tag and page id before the operands.
pub const OP_HEADER_BYTES: usize = 9;
const BODY_BYTES_MAX: usize = PAGE_BYTES_MAX as usize - HEADER_BYTES;

/// One change to one page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageOp {
    /// Reformats the page as `kind` with a zero body (an empty node, an empty overflow page,
    /// a free page). Logs allocations and frees.
    Format {
        /// The page changed.
        page: PageId,
        /// Its new kind.
        kind: PageKind,
    },
    /// Sets the page's kind and whole body.
    Image {
        /// The page changed.
        page: PageId,
        /// Its new kind.
        kind: PageKind,
        /// Its new body, all of it (encoded as head and tail around a run of zeros).
        body: Vec<u8>,
    },
    /// Leaf: inserts `key` with `value`, or replaces its value.
    LeafPut {
        /// The page changed.
        page: PageId,
        /// The key.
        key: Vec<u8>,
        /// Its value: inline, or the overflow chain holding it.
        value: LeafValue,
    },
    /// Leaf: removes `key`, which must be present.
    LeafDelete {
        /// The page changed.
        page: PageId,
        /// The key removed.
        key: Vec<u8>,
    },
    /// Leaf or branch: removes cells `from..count`.
    Truncate {
        /// The page changed.
        page: PageId,
        /// The index of the first cell removed.
        from: u16,
    },
    /// Branch: inserts separator `key`, which must be absent, with `child` to its right.
    BranchInsert {
        /// The page changed.
        page: PageId,
        /// The separator key.
        key: Vec<u8>,
        /// The child to its right, holding the keys from it up to the next separator.
        child: PageId,
    },
    /// Branch: removes key `index` and child `index + 1`.
    BranchRemove {
        /// The page changed.
        page: PageId,
        /// The index of the key removed.
        index: u16,
    },
    /// Branch: sets the leftmost child.
    SetLeftmost {
        /// The page changed.
        page: PageId,
        /// The new leftmost child.
        child: PageId,
    },
    /// Leaf: sets the previous leaf.
    SetPrev {
        /// The page changed.
        page: PageId,
        /// The previous leaf, 0 for none.
        prev: PageId,
    },
    /// Leaf: sets the next leaf.
    SetNext {
        /// The page changed.
        page: PageId,
        /// The next leaf, 0 for none.
        next: PageId,
    },
    /// Overflow: sets the next page and the data, zeroing the rest.
    OverflowWrite {
        /// The page changed.
        page: PageId,
        /// The next page of the chain, 0 on the last.
        next: PageId,
        /// The value bytes this page holds.
        data: Vec<u8>,
    },
}

fn kind_byte(kind: PageKind) -> u8 {
    kind as u8
}

fn kind_from_byte(byte: u8) -> Option<PageKind> {
    match byte {
        1 => Some(PageKind::Leaf),
        2 => Some(PageKind::Branch),
        3 => Some(PageKind::Overflow),
        4 => Some(PageKind::Free),
        _ => None,
    }
}

impl PageOp {
    /// True when the op sets the whole page (kind and body) from its own bytes alone, so it
    /// can rebuild a page whose old bytes are unreadable.
    #[must_use]
    pub fn rewrites_whole_page(&self) -> bool {
        matches!(self, PageOp::Format { .. } | PageOp::Image { .. })
    }

    /// The page this op changes.
    #[must_use]
    pub fn page(&self) -> PageId {
        match self {
            PageOp::Format { page, .. }
            | PageOp::Image { page, .. }
            | PageOp::LeafPut { page, .. }
            | PageOp::LeafDelete { page, .. }
            | PageOp::Truncate { page, .. }
            | PageOp::BranchInsert { page, .. }
            | PageOp::BranchRemove { page, .. }
            | PageOp::SetLeftmost { page, .. }
            | PageOp::SetPrev { page, .. }
            | PageOp::SetNext { page, .. }
            | PageOp::OverflowWrite { page, .. } => *page,
        }
    }

    /// True when this op can apply to a page of `kind`: whole-page ops to any, an overflow
    /// write to an overflow page, node ops to a node of their kind.
    #[must_use]
    pub fn fits_kind(&self, kind: PageKind) -> bool {
        match self {
            PageOp::Format { .. } | PageOp::Image { .. } => true,
            PageOp::OverflowWrite { .. } => kind == PageKind::Overflow,
            _ => NodeKind::of(kind).is_some_and(|k| self.node_kind().is_none_or(|want| want == k)),
        }
    }

    /// The node kind a node op needs (`None`: either kind, or not a node op).
    fn node_kind(&self) -> Option<NodeKind> {
        match self {
            PageOp::LeafPut { .. }
            | PageOp::LeafDelete { .. }
            | PageOp::SetPrev { .. }
            | PageOp::SetNext { .. } => Some(NodeKind::Leaf),
            PageOp::BranchInsert { .. }
            | PageOp::BranchRemove { .. }
            | PageOp::SetLeftmost { .. } => Some(NodeKind::Branch),
            PageOp::Truncate { .. }
            | PageOp::Format { .. }
            | PageOp::Image { .. }
            | PageOp::OverflowWrite { .. } => None,
        }
    }

    /// Applies the op to `page`, which must be `self.page()`. Leaves the lsn alone.
    ///
    /// Panics if the op cannot apply to the page (wrong kind, absent key, no room): the op
    /// was built from other bytes than these, which is a bug.
    pub fn apply_to(&self, page: &mut PageBuf) {
        assert_eq!(
            page.id(),
            self.page(),
            "op for {} applied to {}",
            self.page(),
            page.id()
        );
        let lsn = page.lsn();
        match self {
            PageOp::Format { kind, .. } => page.reset(*kind),
            PageOp::Image { kind, body, .. } => {
                assert_eq!(body.len(), page.body().len(), "image of the wrong size");
                page.reset(*kind);
                page.body_mut().copy_from_slice(body);
            }
            PageOp::OverflowWrite { next, data, .. } => {
                assert_eq!(
                    page.kind(),
                    PageKind::Overflow,
                    "overflow write to {page:?}"
                );
                overflow::write(page.body_mut(), *next, data);
            }
            _ => self.apply_to_node(page),
        }
        assert_eq!(page.lsn(), lsn, "page ops never change the page lsn");
    }

    fn apply_to_node(&self, page: &mut PageBuf) {
        let kind = NodeKind::of(page.kind()).expect("node op applied to a non-node page");
        // A page checked since its last read from disk changed only through node ops, each of
        // which leaves a valid node (they insert at the search position, and the NodeMut
        // primitives keep the accounting and assert the cell size), so it is not checked
        // again; debug builds check it before and after.
        let checked = page.node_checked();
        let mut node = if checked {
            NodeMut::trusted(kind, page.body_mut())
        } else {
            NodeMut::new(kind, page.body_mut())
        };
        self.apply_node_op(kind, &mut node);
        debug_assert!(
            super::node::NodeRef::parse_body(kind, page.body()).is_ok(),
            "{self:?} left an invalid node"
        );
        page.set_node_checked();
    }

    fn apply_node_op(&self, kind: NodeKind, node: &mut NodeMut<'_>) {
        let expect_kind = |wanted: NodeKind| {
            assert_eq!(kind, wanted, "{self:?} applied to a {kind:?} node");
        };
        match self {
            PageOp::LeafPut { key, value, .. } => {
                expect_kind(NodeKind::Leaf);
                let cell = node::encode_leaf_cell(key, value);
                match node.search(key) {
                    Ok(index) => node.replace_cell(index, &cell),
                    Err(index) => node.insert_cell(index, &cell),
                }
            }
            PageOp::LeafDelete { key, .. } => {
                expect_kind(NodeKind::Leaf);
                let index = node.search(key).expect("LeafDelete of an absent key");
                node.remove_cell(index);
            }
            PageOp::Truncate { from, .. } => node.truncate(usize::from(*from)),
            PageOp::BranchInsert { key, child, .. } => {
                expect_kind(NodeKind::Branch);
                let index = node
                    .search(key)
                    .expect_err("BranchInsert of a key already present");
                node.insert_cell(index, &node::encode_branch_cell(key, *child));
            }
            PageOp::BranchRemove { index, .. } => {
                expect_kind(NodeKind::Branch);
                node.remove_cell(usize::from(*index));
            }
            PageOp::SetLeftmost { child, .. } => {
                expect_kind(NodeKind::Branch);
                node.set_link_low(*child);
            }
            PageOp::SetPrev { prev, .. } => {
                expect_kind(NodeKind::Leaf);
                node.set_link_low(*prev);
            }
            PageOp::SetNext { next, .. } => {
                expect_kind(NodeKind::Leaf);
                node.set_link_high(*next);
            }
            PageOp::Format { .. } | PageOp::Image { .. } | PageOp::OverflowWrite { .. } => {
                unreachable!("handled by apply_to")
            }
        }
    }

    /// Appends the encoded op to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let tag = match self {
            PageOp::Format { .. } => TAG_FORMAT,
            PageOp::Image { .. } => TAG_IMAGE,
            PageOp::LeafPut { .. } => TAG_LEAF_PUT,
            PageOp::LeafDelete { .. } => TAG_LEAF_DELETE,
            PageOp::Truncate { .. } => TAG_TRUNCATE,
            PageOp::BranchInsert { .. } => TAG_BRANCH_INSERT,
            PageOp::BranchRemove { .. } => TAG_BRANCH_REMOVE,
            PageOp::SetLeftmost { .. } => TAG_SET_LEFTMOST,
            PageOp::SetPrev { .. } => TAG_SET_PREV,
            PageOp::SetNext { .. } => TAG_SET_NEXT,
            PageOp::OverflowWrite { .. } => TAG_OVERFLOW_WRITE,
        };
        assert!(self.page().0 != 0, "op on page 0");
        let start = out.len();
        out.push(tag);
        out.extend_from_slice(&self.page().0.to_le_bytes());
        match self {
            PageOp::Format { kind, .. } => out.push(kind_byte(*kind)),
            PageOp::Image { kind, body, .. } => encode_image(out, *kind, body),
            PageOp::LeafPut { key, value, .. } => {
                put_key(out, key);
                match value {
                    LeafValue::Inline(bytes) => {
                        out.push(VALUE_INLINE);
                        put_bytes32(out, bytes);
                    }
                    LeafValue::Overflow { len, first } => {
                        out.push(VALUE_OVERFLOW);
                        out.extend_from_slice(&len.to_le_bytes());
                        out.extend_from_slice(&first.0.to_le_bytes());
                    }
                }
            }
            PageOp::LeafDelete { key, .. } => put_key(out, key),
            PageOp::Truncate { from: index, .. } | PageOp::BranchRemove { index, .. } => {
                out.extend_from_slice(&index.to_le_bytes());
            }
            PageOp::BranchInsert { key, child, .. } => {
                put_key(out, key);
                out.extend_from_slice(&child.0.to_le_bytes());
            }
            PageOp::SetLeftmost { page: _, child: id }
            | PageOp::SetPrev { page: _, prev: id }
            | PageOp::SetNext { page: _, next: id } => out.extend_from_slice(&id.0.to_le_bytes()),
            PageOp::OverflowWrite { next, data, .. } => {
                out.extend_from_slice(&next.0.to_le_bytes());
                put_bytes32(out, data);
            }
        }
        debug_assert_eq!(
            decode(&out[start..]).map(|(op, len)| (&op == self, len)),
            Ok((true, out.len() - start)),
            "encode and decode disagree"
        );
    }

    /// At least [`PageOp::encoded_len`], without scanning an image's body for its run of
    /// zeros (an image counts whole): the size a commit's parts are cut and its records
    /// filled by. The exact length scanned each image's 16 KiB three times a commit (twice
    /// for lengths, once to encode): 17 % of a no-flush commit's CPU after a bulk load
    /// (docs/benchmarks-journal.md, "Images measured once").
    #[must_use]
    pub fn encoded_len_at_most(&self) -> usize {
        match self {
            PageOp::Image { body, .. } => Self::image_len_at_most(body.len()),
            _ => self.encoded_len(),
        }
    }

    /// At least the encoded length of an image of a body of `body_bytes`.
    #[must_use]
    pub fn image_len_at_most(body_bytes: usize) -> usize {
        1 + size_of::<u64>() + 1 + 3 * size_of::<u32>() + body_bytes
    }

    /// Bytes of the encoded op, counted without encoding it (a commit asks for it once per
    /// op it applies and once per op it logs; encoding into a scratch vector each time was
    /// most of what `encode` cost a bulk load).
    #[must_use]
    pub fn encoded_len(&self) -> usize {
        const TAG_AND_PAGE: usize = 1 + size_of::<u64>();
        let key = |key: &[u8]| size_of::<u16>() + key.len();
        let bytes32 = |bytes: &[u8]| size_of::<u32>() + bytes.len();
        TAG_AND_PAGE
            + match self {
                PageOp::Format { .. } => 1,
                PageOp::Image { kind, body, .. } => {
                    let (_, zeros) = image_gap(*kind, body);
                    1 + 3 * size_of::<u32>() + body.len() - zeros
                }
                PageOp::LeafPut { key: k, value, .. } => {
                    key(k)
                        + 1
                        + match value {
                            LeafValue::Inline(bytes) => bytes32(bytes),
                            LeafValue::Overflow { .. } => size_of::<u32>() + size_of::<u64>(),
                        }
                }
                PageOp::LeafDelete { key: k, .. } => key(k),
                PageOp::Truncate { .. } | PageOp::BranchRemove { .. } => size_of::<u16>(),
                PageOp::BranchInsert { key: k, .. } => key(k) + size_of::<u64>(),
                PageOp::SetLeftmost { .. } | PageOp::SetPrev { .. } | PageOp::SetNext { .. } => {
                    size_of::<u64>()
                }
                PageOp::OverflowWrite { data, .. } => size_of::<u64>() + bytes32(data),
            }
    }
}

/// The start and length of the run of zeros an image of `body` leaves out: a node's free
/// space, found from its header, when it is all zeros and no shorter than the node's dead
/// bytes (a split's new page, a node built or compacted: the usual images); else the longest
/// run, found by a scan (a node that lost cells in place, whose zeroed cells may make a
/// longer run). The free space is checked, not trusted: a node changed in place could leave
/// bytes there. Its check reads the free space once, 64 bytes at a time; the scan reads the
/// whole body, a word at a time (6 % of a no-flush commit's CPU: docs/benchmarks-journal.md).
fn image_gap(kind: PageKind, body: &[u8]) -> (usize, usize) {
    if let Some((start, end, dead)) = node::free_space(kind, body)
        && start < end
        && end - start >= dead
        && all_zero(&body[start..end])
    {
        return (start, end - start);
    }
    longest_zero_run(body)
}

/// True when every byte of `bytes` is zero (a line at a time: the OR of 64 bytes vectorizes).
fn all_zero(bytes: &[u8]) -> bool {
    let mut lines = bytes.chunks_exact(64);
    lines
        .by_ref()
        .all(|line| line.iter().fold(0u8, |acc, &b| acc | b) == 0)
        && lines.remainder().iter().all(|&b| b == 0)
}

/// The start and length of the longest run of zero bytes in `body` (the first of equal
/// runs; `(0, 0)` when there is none). Eight bytes at a time through the zeros: a page image
/// is mostly its free space, and a split images a page.
fn longest_zero_run(body: &[u8]) -> (usize, usize) {
    let (mut best_start, mut best_len, mut run_start) = (0, 0, 0);
    let mut index = 0;
    while index < body.len() {
        let word = body
            .get(index..index + 8)
            .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")));
        match word {
            // Zeros: the whole word extends the run, and so does every all-zero line of 64
            // bytes after it (a freed page's body, a node's free space: one vector OR a
            // line, not eight words).
            Some(0) => {
                index += 8;
                while let Some(line) = body.get(index..index + 64)
                    && all_zero(line)
                {
                    index += 64;
                }
            }
            // Once the best run is 8 bytes or more, the runs inside a word (6 bytes at most)
            // cannot beat it: only the zeros that end the current run (the word's first
            // bytes, its low ones) and those that start the next (its last) matter.
            Some(word) if best_len >= 8 => {
                let leading = usize::try_from(word.trailing_zeros() / 8).expect("at most 8");
                let end = index + leading;
                if end - run_start > best_len {
                    best_start = run_start;
                    best_len = end - run_start;
                }
                let last = 7 - usize::try_from(word.leading_zeros() / 8).expect("at most 8");
                run_start = index + last + 1;
                index += 8;
            }
            _ => {
                if body[index] != 0 {
                    run_start = index + 1;
                }
                index += 1;
            }
        }
        if index > run_start && index - run_start > best_len {
            best_start = run_start;
            best_len = index - run_start;
        }
    }
    (best_start, best_len)
}

fn put_key(out: &mut Vec<u8>, key: &[u8]) {
    let len = u16::try_from(key.len()).expect("keys are checked against the limit");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(key);
}

fn put_bytes32(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = u32::try_from(bytes.len()).expect("op data is smaller than a page");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Encodes an image as the bytes around its longest run of zeros: a node's free space and an
/// overflow page's tail cost nothing in the log.
fn encode_image(out: &mut Vec<u8>, kind: PageKind, body: &[u8]) {
    let (best_start, best_len) = image_gap(kind, body);
    let head = &body[..best_start];
    let tail = &body[best_start + best_len..];
    out.push(kind_byte(kind));
    for len in [body.len(), head.len(), tail.len()] {
        out.extend_from_slice(&u32::try_from(len).expect("a page body").to_le_bytes());
    }
    out.extend_from_slice(head);
    out.extend_from_slice(tail);
}

/// Reads fields from the front of an encoded op, failing on a short input.
struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], &'static str> {
        let end = self
            .position
            .checked_add(len)
            .filter(|&end| end <= self.bytes.len())
            .ok_or("page op is truncated")?;
        let bytes = &self.bytes[self.position..end];
        self.position = end;
        Ok(bytes)
    }

    fn u8(&mut self) -> Result<u8, &'static str> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, &'static str> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }

    fn u32(&mut self) -> Result<u32, &'static str> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn page(&mut self) -> Result<PageId, &'static str> {
        Ok(PageId(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        )))
    }

    fn key(&mut self) -> Result<Vec<u8>, &'static str> {
        let len = self.u16()?;
        Ok(self.take(usize::from(len))?.to_vec())
    }

    fn bytes32(&mut self) -> Result<Vec<u8>, &'static str> {
        let len = self.u32()? as usize;
        Ok(self.take(len)?.to_vec())
    }

    fn kind(&mut self) -> Result<PageKind, &'static str> {
        kind_from_byte(self.u8()?).ok_or("page op has an unknown page kind")
    }
}

/// Decodes the op at the front of `bytes`, returning it and its encoded length.
pub fn decode(bytes: &[u8]) -> Result<(PageOp, usize), &'static str> {
    let mut reader = Reader { bytes, position: 0 };
    let tag = reader.u8()?;
    let page = reader.page()?;
    if page.0 == 0 {
        return Err("page op names page 0");
    }
    let op = match tag {
        TAG_FORMAT => PageOp::Format {
            page,
            kind: reader.kind()?,
        },
        TAG_IMAGE => decode_image(&mut reader, page)?,
        TAG_LEAF_PUT => {
            let key = reader.key()?;
            let value = match reader.u8()? {
                VALUE_INLINE => LeafValue::Inline(reader.bytes32()?),
                VALUE_OVERFLOW => LeafValue::Overflow {
                    len: reader.u32()?,
                    first: reader.page()?,
                },
                _ => return Err("page op has an unknown value kind"),
            };
            if let LeafValue::Overflow {
                first: PageId(0), ..
            } = value
            {
                return Err("overflow value starts at page 0");
            }
            PageOp::LeafPut { page, key, value }
        }
        TAG_LEAF_DELETE => PageOp::LeafDelete {
            page,
            key: reader.key()?,
        },
        TAG_TRUNCATE => PageOp::Truncate {
            page,
            from: reader.u16()?,
        },
        TAG_BRANCH_INSERT => PageOp::BranchInsert {
            page,
            key: reader.key()?,
            child: reader.page()?,
        },
        TAG_BRANCH_REMOVE => PageOp::BranchRemove {
            page,
            index: reader.u16()?,
        },
        TAG_SET_LEFTMOST => PageOp::SetLeftmost {
            page,
            child: reader.page()?,
        },
        TAG_SET_PREV => PageOp::SetPrev {
            page,
            prev: reader.page()?,
        },
        TAG_SET_NEXT => PageOp::SetNext {
            page,
            next: reader.page()?,
        },
        TAG_OVERFLOW_WRITE => PageOp::OverflowWrite {
            page,
            next: reader.page()?,
            data: reader.bytes32()?,
        },
        _ => return Err("page op has an unknown tag"),
    };
    if let PageOp::BranchInsert {
        child: PageId(0), ..
    } = op
    {
        return Err("branch insert of child page 0");
    }
    Ok((op, reader.position))
}

fn decode_image(reader: &mut Reader<'_>, page: PageId) -> Result<PageOp, &'static str> {
    let kind = reader.kind()?;
    let body_len = reader.u32()? as usize;
    let head_len = reader.u32()? as usize;
    let tail_len = reader.u32()? as usize;
    if body_len > BODY_BYTES_MAX || head_len.saturating_add(tail_len) > body_len {
        return Err("page image lengths are impossible");
    }
    let head = reader.take(head_len)?;
    let tail = reader.take(tail_len)?;
    let mut body = Vec::with_capacity(body_len);
    body.extend_from_slice(head);
    body.resize(body_len - tail_len, 0);
    body.extend_from_slice(tail);
    Ok(PageOp::Image { page, kind, body })
}

#[cfg(test)]
mod tests;
