//! # Node format (B+tree Leaf and Branch pages, data file version 1)
//!
//! A node fills the body of a Leaf or Branch page, after the 24-byte page header
//! (`page/mod.rs`). Offsets are from the start of the body. Little-endian.
//!
//! ```text
//! offset      size field
//!      0         2 count       cells in the node
//!      2         2 cell_bytes  size of the cell area, which ends at the end of the body
//!      4         2 dead_bytes  bytes of removed cells inside the cell area (all zero)
//!      6         2 zero        must be zero
//!      8         8 link_low    leaf: previous leaf · branch: leftmost child (0 = none)
//!     16         8 link_high   leaf: next leaf (0 = none) · branch: must be zero
//!     24   2×count slots       body offset of each cell, in strictly ascending key order
//!      …           free space  all zero
//!   body - cell_bytes          cells in any order, between them dead (zeroed) bytes
//! ```
//!
//! A zero body is a valid empty node without links, so a freshly allocated page needs no
//! formatting. Leaf cells, then branch cells:
//!
//! ```text
//! offset size field                      offset size field
//!      0    2 key_len                         0    2 key_len
//!      2    1 value_kind  0 inline           2    8 child   keys >= this key (and < the
//!                         1 overflow                        next key) are under this page
//!      3    4 value_len   all of it          10    … key
//!      7    … key
//!      …    … inline: the value
//!             overflow: first page id (8)
//! ```
//!
//! A branch of `count` keys has `count + 1` children: `link_low` for keys below key 0, and the
//! child of cell `i` for keys in `[key i, key i+1)`.
//!
//! A node is valid iff (checked by [`NodeRef::parse`] on every read) the slots and the cell
//! area do not overlap, every cell lies inside the cell area and takes at most a quarter of
//! the node (`(body - 24) / 4 - 2` bytes), leaf value kinds are known, the reserved fields are
//! zero, the sizes of the live cells plus `dead_bytes` equal `cell_bytes`, and the keys are
//! strictly ascending. `check.rs` checks the rest (overlaps, zeroed free space, key bounds).
//!
//! Free space: `usable = body - 24`, `live = 2 × count + cell_bytes - dead_bytes`, free =
//! `usable - live`. An insert that does not find `2 + cell` contiguous bytes between the slots
//! and the cell area first compacts the node (moves live cells to the end, in slot order).

use crate::page::{PageBuf, PageId, PageKind, SearchHints};
use std::sync::atomic::AtomicU32;

/// Bytes of the node header.
pub const NODE_HEADER_BYTES: usize = 24;
/// Bytes of one slot.
pub const SLOT_BYTES: usize = 2;
pub(super) const COUNT_OFFSET: usize = 0;
pub(super) const CELL_BYTES_OFFSET: usize = COUNT_OFFSET + 2;
pub(super) const DEAD_BYTES_OFFSET: usize = CELL_BYTES_OFFSET + 2;
const RESERVED_OFFSET: usize = DEAD_BYTES_OFFSET + 2;
pub(super) const LINK_LOW_OFFSET: usize = RESERVED_OFFSET + 2;
pub(super) const LINK_HIGH_OFFSET: usize = LINK_LOW_OFFSET + 8;
const _: () = assert!(LINK_HIGH_OFFSET + 8 == NODE_HEADER_BYTES);

/// Bytes of a leaf cell before its key.
pub const LEAF_CELL_HEADER_BYTES: usize = 7;
/// Bytes of a leaf cell that refers to overflow pages, besides its key.
pub const LEAF_OVERFLOW_CELL_OVERHEAD: usize = LEAF_CELL_HEADER_BYTES + 8;
/// Bytes of a branch cell before its key.
pub const BRANCH_CELL_HEADER_BYTES: usize = 10;
const VALUE_KIND_INLINE: u8 = 0;
const VALUE_KIND_OVERFLOW: u8 = 1;

// Body offsets are stored in u16: the largest body (64 KiB page) must fit.
const _: () =
    assert!(crate::page::PAGE_BYTES_MAX as usize - crate::page::HEADER_BYTES <= u16::MAX as usize);

/// Which of the two node layouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeKind {
    /// Keys with their values (or the overflow chains holding them).
    Leaf,
    /// Separator keys with child page ids.
    Branch,
}

impl NodeKind {
    /// The node kind of a page kind, if it is a node.
    #[must_use]
    pub fn of(kind: PageKind) -> Option<NodeKind> {
        match kind {
            PageKind::Leaf => Some(NodeKind::Leaf),
            PageKind::Branch => Some(NodeKind::Branch),
            PageKind::Overflow | PageKind::Free => None,
        }
    }

    /// The page kind of this node kind.
    #[must_use]
    pub fn page_kind(self) -> PageKind {
        match self {
            NodeKind::Leaf => PageKind::Leaf,
            NodeKind::Branch => PageKind::Branch,
        }
    }
}

/// A leaf's value as stored in its cell: the bytes, or where they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeafValue {
    /// The value itself.
    Inline(Vec<u8>),
    /// A chain of overflow pages holding `len` bytes, starting at `first`.
    Overflow {
        /// The value's length in bytes.
        len: u32,
        /// The first page of the chain.
        first: PageId,
    },
}

/// A leaf's value as stored, borrowed from the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueRef<'a> {
    /// The value itself, in the cell.
    Inline(&'a [u8]),
    /// A chain of overflow pages holding `len` bytes, starting at `first`.
    Overflow {
        /// The value's length in bytes.
        len: u32,
        /// The first page of the chain.
        first: PageId,
    },
}

impl ValueRef<'_> {
    /// An owned copy.
    #[must_use]
    pub fn to_owned(self) -> LeafValue {
        match self {
            ValueRef::Inline(bytes) => LeafValue::Inline(bytes.to_vec()),
            ValueRef::Overflow { len, first } => LeafValue::Overflow { len, first },
        }
    }

    /// The value's length.
    #[must_use]
    pub fn len(self) -> u64 {
        match self {
            ValueRef::Inline(bytes) => bytes.len() as u64,
            ValueRef::Overflow { len, .. } => u64::from(len),
        }
    }

    /// Whether the value is empty.
    #[must_use]
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }
}

pub(super) fn u16_at(bytes: &[u8], offset: usize) -> usize {
    usize::from(u16::from_le_bytes(
        bytes[offset..offset + 2].try_into().expect("2 bytes"),
    ))
}

fn u32_at(bytes: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes(bytes[offset..offset + 4].try_into().expect("4 bytes"))
}

fn u64_at(bytes: &[u8], offset: usize) -> u64 {
    u64::from_le_bytes(bytes[offset..offset + 8].try_into().expect("8 bytes"))
}

pub(super) fn put_u16(bytes: &mut [u8], offset: usize, value: usize) {
    let value = u16::try_from(value).expect("node fields fit in 16 bits");
    bytes[offset..offset + 2].copy_from_slice(&value.to_le_bytes());
}

/// Bytes of a leaf cell holding `key_bytes` of key and `value`.
#[must_use]
pub fn leaf_cell_bytes(key_bytes: usize, value: &LeafValue) -> usize {
    LEAF_CELL_HEADER_BYTES
        + key_bytes
        + match value {
            LeafValue::Inline(bytes) => bytes.len(),
            LeafValue::Overflow { .. } => 8,
        }
}

/// Bytes of a branch cell holding `key_bytes` of key.
#[must_use]
pub fn branch_cell_bytes(key_bytes: usize) -> usize {
    BRANCH_CELL_HEADER_BYTES + key_bytes
}

/// A leaf cell, encoded.
#[must_use]
pub fn encode_leaf_cell(key: &[u8], value: &LeafValue) -> Vec<u8> {
    let mut cell = Vec::with_capacity(leaf_cell_bytes(key.len(), value));
    let key_len = u16::try_from(key.len()).expect("keys are checked against the limit");
    cell.extend_from_slice(&key_len.to_le_bytes());
    match value {
        LeafValue::Inline(bytes) => {
            let len = u32::try_from(bytes.len()).expect("inline values are smaller than a page");
            cell.push(VALUE_KIND_INLINE);
            cell.extend_from_slice(&len.to_le_bytes());
            cell.extend_from_slice(key);
            cell.extend_from_slice(bytes);
        }
        LeafValue::Overflow { len, first } => {
            assert!(first.0 != 0, "overflow value without a first page");
            cell.push(VALUE_KIND_OVERFLOW);
            cell.extend_from_slice(&len.to_le_bytes());
            cell.extend_from_slice(key);
            cell.extend_from_slice(&first.0.to_le_bytes());
        }
    }
    assert_eq!(cell.len(), leaf_cell_bytes(key.len(), value));
    cell
}

/// A branch cell, encoded.
#[must_use]
pub fn encode_branch_cell(key: &[u8], child: PageId) -> Vec<u8> {
    assert!(child.0 != 0, "branch cell without a child");
    let key_len = u16::try_from(key.len()).expect("keys are checked against the limit");
    let mut cell = Vec::with_capacity(branch_cell_bytes(key.len()));
    cell.extend_from_slice(&key_len.to_le_bytes());
    cell.extend_from_slice(&child.0.to_le_bytes());
    cell.extend_from_slice(key);
    cell
}

/// The key of an encoded cell of `kind`.
#[must_use]
pub fn cell_key(kind: NodeKind, cell: &[u8]) -> &[u8] {
    let start = match kind {
        NodeKind::Leaf => LEAF_CELL_HEADER_BYTES,
        NodeKind::Branch => BRANCH_CELL_HEADER_BYTES,
    };
    &cell[start..start + u16_at(cell, 0)]
}

/// The child of an encoded branch cell.
#[must_use]
pub fn branch_cell_child(cell: &[u8]) -> PageId {
    PageId(u64_at(cell, 2))
}

/// Size of the cell at body offset `offset`, checked to lie inside the body.
fn cell_size_at(kind: NodeKind, body: &[u8], offset: usize) -> Result<usize, &'static str> {
    let header = match kind {
        NodeKind::Leaf => LEAF_CELL_HEADER_BYTES,
        NodeKind::Branch => BRANCH_CELL_HEADER_BYTES,
    };
    if offset + header > body.len() {
        return Err("node cell header runs past the end of the page");
    }
    let key_len = u16_at(body, offset);
    let size = match kind {
        NodeKind::Branch => header + key_len,
        NodeKind::Leaf => match body[offset + 2] {
            VALUE_KIND_INLINE => header + key_len + u32_at(body, offset + 3) as usize,
            VALUE_KIND_OVERFLOW => header + key_len + 8,
            _ => return Err("leaf cell has an unknown value kind"),
        },
    };
    if offset + size > body.len() {
        return Err("node cell runs past the end of the page");
    }
    Ok(size)
}

/// The free space of a node's `body`, between its slots and its cells (`start..end`), and
/// the dead bytes among its cells (removed cells, zeroed), as its header gives them: `None`
/// when `kind` is not a node's or the header's counts do not fit the body. Not checked
/// further: for the log's page images, which leave out a run of zeros and check the run is
/// zeros (`redo.rs`).
#[must_use]
pub fn free_space(kind: PageKind, body: &[u8]) -> Option<(usize, usize, usize)> {
    NodeKind::of(kind)?;
    if body.len() < NODE_HEADER_BYTES {
        return None;
    }
    let start = NODE_HEADER_BYTES + SLOT_BYTES * u16_at(body, COUNT_OFFSET);
    let end = body.len().checked_sub(u16_at(body, CELL_BYTES_OFFSET))?;
    (start <= end).then_some((start, end, u16_at(body, DEAD_BYTES_OFFSET)))
}

/// Whether a node of `live` bytes of slots and cells out of `usable` is under a quarter full
/// (a merge is then considered, `merge.rs`).
#[must_use]
pub fn is_underfull_at(live: usize, usable: usize) -> bool {
    live * 4 < usable
}

/// A validated read-only view of a node on a page body.
#[derive(Debug, Clone, Copy)]
pub struct NodeRef<'a> {
    kind: NodeKind,
    body: &'a [u8],
    count: usize,
    /// The page's search hints, when it has them (see [`search_hints`]).
    hints: Option<&'a [u32]>,
    /// A branch's guesses of its children's frames (see [`SearchHints::child_frames`]):
    /// empty when the page has none.
    child_frames: &'a [AtomicU32],
}

impl<'a> NodeRef<'a> {
    /// Views the node on `page`, checking the layout rules in the format table once per
    /// version of the page: a page changes only through a mutable access, which clears its
    /// checked mark, so an unchanged page checked before is trusted.
    pub fn parse(page: &'a PageBuf) -> Result<NodeRef<'a>, &'static str> {
        Self::parse_to_search(page, false)
    }

    /// [`NodeRef::parse`], and with `hints`, the page's search hints made when it has none:
    /// a page changed in place keeps its checked mark but loses its hints (they describe the
    /// version before), and was searched without them until it left the cache. Readers ask
    /// for them (a page is read many times a change); a commit's own descents do not (the
    /// leaf it changes loses them again at once, and making them reads every key).
    pub fn parse_to_search(page: &'a PageBuf, hints: bool) -> Result<NodeRef<'a>, &'static str> {
        let kind = NodeKind::of(page.kind()).ok_or("page is not a tree node")?;
        if page.node_checked() {
            debug_assert!(
                Self::parse_body(kind, page.body()).is_ok(),
                "a checked page changed"
            );
            let mut node = Self::trusted(kind, page.body());
            if hints && page.search_hints().is_none() {
                page.set_search_hints(node.make_hints());
            }
            node.with_hints(page.search_hints());
            return Ok(node);
        }
        let mut node = Self::parse_body(kind, page.body())?;
        // Hints first: a reader that sees the page checked may use them at once.
        page.set_search_hints(node.make_hints());
        page.set_node_checked();
        node.with_hints(page.search_hints());
        Ok(node)
    }

    /// This node's search hints (see [`search_hints`]), and for a branch a guess per child of
    /// its frame, none known yet.
    fn make_hints(&self) -> SearchHints {
        let children = match self.kind {
            NodeKind::Leaf => 0,
            NodeKind::Branch => self.count + 1,
        };
        SearchHints {
            words: search_hints(self),
            child_frames: (0..children).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// Takes the page's hints, when it has them, for searches and child reads.
    fn with_hints(&mut self, hints: Option<&'a SearchHints>) {
        if let Some(hints) = hints {
            self.hints = Some(&hints.words);
            self.child_frames = &hints.child_frames;
        }
    }

    /// Views a node of `kind` on `body`, checking the layout rules in the format table.
    pub fn parse_body(kind: NodeKind, body: &'a [u8]) -> Result<NodeRef<'a>, &'static str> {
        if body.len() < NODE_HEADER_BYTES || body.len() > usize::from(u16::MAX) {
            return Err("node body has an impossible size");
        }
        let count = u16_at(body, COUNT_OFFSET);
        let cell_bytes = u16_at(body, CELL_BYTES_OFFSET);
        let dead_bytes = u16_at(body, DEAD_BYTES_OFFSET);
        if u16_at(body, RESERVED_OFFSET) != 0 {
            return Err("node header reserved bytes are not zero");
        }
        if kind == NodeKind::Branch && u64_at(body, LINK_HIGH_OFFSET) != 0 {
            return Err("branch node has a nonzero high link");
        }
        if NODE_HEADER_BYTES + SLOT_BYTES * count + cell_bytes > body.len() {
            return Err("node slots overlap its cell area");
        }
        if dead_bytes > cell_bytes {
            return Err("node dead bytes exceed its cell area");
        }
        let cell_start = body.len() - cell_bytes;
        let cell_bytes_max = (body.len() - NODE_HEADER_BYTES) / 4 - SLOT_BYTES;
        let mut live_cell_bytes = 0;
        for index in 0..count {
            let offset = u16_at(body, NODE_HEADER_BYTES + SLOT_BYTES * index);
            if offset < cell_start {
                return Err("node slot points outside the cell area");
            }
            let size = cell_size_at(kind, body, offset)?;
            if size > cell_bytes_max {
                return Err("node cell is larger than a quarter of the node");
            }
            live_cell_bytes += size;
        }
        if live_cell_bytes + dead_bytes != cell_bytes {
            return Err("node free-space accounting is inconsistent");
        }
        let node = NodeRef {
            kind,
            body,
            count,
            hints: None,
            child_frames: &[],
        };
        // Splits and merges rely on order and cell size; checking them here means a corrupt
        // page is an error wherever it is read, never a failed assertion later.
        if !node.is_sorted() {
            return Err("node keys are not in strictly ascending order");
        }
        Ok(node)
    }

    /// A view of a body already known to be valid (it was parsed before it was changed).
    pub(super) fn trusted(kind: NodeKind, body: &'a [u8]) -> NodeRef<'a> {
        NodeRef {
            kind,
            body,
            count: u16_at(body, COUNT_OFFSET),
            hints: None,
            child_frames: &[],
        }
    }

    /// Leaf or branch.
    #[must_use]
    pub fn kind(&self) -> NodeKind {
        self.kind
    }

    /// The page body the node lives on.
    #[must_use]
    pub fn body(&self) -> &'a [u8] {
        self.body
    }

    /// Cells (keys) in the node.
    #[must_use]
    pub fn count(&self) -> usize {
        self.count
    }

    /// Leaf: the previous leaf, 0 for none.
    #[must_use]
    pub fn prev(&self) -> PageId {
        assert_eq!(self.kind, NodeKind::Leaf);
        PageId(u64_at(self.body, LINK_LOW_OFFSET))
    }

    /// Leaf: the next leaf, 0 for none.
    #[must_use]
    pub fn next(&self) -> PageId {
        assert_eq!(self.kind, NodeKind::Leaf);
        PageId(u64_at(self.body, LINK_HIGH_OFFSET))
    }

    /// Branch: the child for keys below key 0.
    #[must_use]
    pub fn leftmost(&self) -> PageId {
        assert_eq!(self.kind, NodeKind::Branch);
        PageId(u64_at(self.body, LINK_LOW_OFFSET))
    }

    /// Body offset of cell `index`.
    #[must_use]
    pub fn cell_offset(&self, index: usize) -> usize {
        assert!(index < self.count, "cell {index} of {}", self.count);
        u16_at(self.body, NODE_HEADER_BYTES + SLOT_BYTES * index)
    }

    /// The encoded cell `index`.
    #[must_use]
    pub fn cell(&self, index: usize) -> &'a [u8] {
        let offset = self.cell_offset(index);
        let size = cell_size_at(self.kind, self.body, offset).expect("parsed node");
        &self.body[offset..offset + size]
    }

    /// The key of cell `index`.
    #[must_use]
    pub fn key(&self, index: usize) -> &'a [u8] {
        // Straight from the cell header (the search's inner loop): the node was checked when
        // parsed, so the key lies inside its cell, and the slice is bounds-checked anyway.
        let offset = self.cell_offset(index);
        let start = offset
            + match self.kind {
                NodeKind::Leaf => LEAF_CELL_HEADER_BYTES,
                NodeKind::Branch => BRANCH_CELL_HEADER_BYTES,
            };
        let key = &self.body[start..start + u16_at(self.body, offset)];
        debug_assert_eq!(key, cell_key(self.kind, self.cell(index)));
        key
    }

    /// Leaf: the value of cell `index`.
    #[must_use]
    pub fn value(&self, index: usize) -> ValueRef<'a> {
        assert_eq!(self.kind, NodeKind::Leaf);
        let cell = self.cell(index);
        let key_end = LEAF_CELL_HEADER_BYTES + u16_at(cell, 0);
        let len = u32_at(cell, 3);
        if cell[2] == VALUE_KIND_INLINE {
            ValueRef::Inline(&cell[key_end..])
        } else {
            ValueRef::Overflow {
                len,
                first: PageId(u64_at(cell, key_end)),
            }
        }
    }

    /// Branch: child `index`, 0 ≤ index ≤ count; child 0 is the leftmost.
    #[must_use]
    pub fn child(&self, index: usize) -> PageId {
        assert!(index <= self.count, "child {index} of {} keys", self.count);
        if index == 0 {
            self.leftmost()
        } else {
            branch_cell_child(self.cell(index - 1))
        }
    }

    /// Branch: where child `index` was last found in the buffer pool (a guess the pool
    /// checks and refreshes: [`super::Pages::locate`]); `None` when the page keeps none.
    #[must_use]
    pub fn child_frame(&self, index: usize) -> Option<&'a AtomicU32> {
        if self.kind == NodeKind::Branch && self.child_frames.len() == self.count + 1 {
            self.child_frames.get(index)
        } else {
            None
        }
    }

    /// Branch: the index of the child whose key range holds `key`.
    #[must_use]
    pub fn child_index(&self, key: &[u8]) -> usize {
        match self.search(key) {
            Ok(index) => index + 1,
            Err(index) => index,
        }
    }

    /// Bytes of the cell area.
    #[must_use]
    pub fn cell_area_bytes(&self) -> usize {
        u16_at(self.body, CELL_BYTES_OFFSET)
    }

    /// Bytes of removed cells inside the cell area.
    #[must_use]
    pub fn dead_bytes(&self) -> usize {
        u16_at(self.body, DEAD_BYTES_OFFSET)
    }

    /// Bytes available to slots and cells.
    #[must_use]
    pub fn usable_bytes(&self) -> usize {
        self.body.len() - NODE_HEADER_BYTES
    }

    /// Bytes taken by slots and live cells.
    #[must_use]
    pub fn live_bytes(&self) -> usize {
        SLOT_BYTES * self.count + self.cell_area_bytes() - self.dead_bytes()
    }

    /// Bytes a new cell and its slot may take, after compaction.
    #[must_use]
    pub fn free_bytes(&self) -> usize {
        self.usable_bytes() - self.live_bytes()
    }

    /// Bytes between the slots and the cell area.
    #[must_use]
    pub fn gap_bytes(&self) -> usize {
        self.usable_bytes() - SLOT_BYTES * self.count - self.cell_area_bytes()
    }

    /// Whether the keys are strictly ascending (O(n), for debug assertions and checks).
    #[must_use]
    pub fn is_sorted(&self) -> bool {
        (1..self.count).all(|index| self.key(index - 1) < self.key(index))
    }

    /// Whether a node below a quarter full should merge with a sibling.
    #[must_use]
    pub fn is_underfull(&self) -> bool {
        is_underfull_at(self.live_bytes(), self.usable_bytes())
    }

    /// Copies of every cell, in key order.
    #[must_use]
    pub fn cells(&self) -> Vec<Vec<u8>> {
        (0..self.count)
            .map(|index| self.cell(index).to_vec())
            .collect()
    }

    /// Every cell, in key order, borrowed from the body.
    #[must_use]
    pub fn cell_slices(&self) -> Vec<&'a [u8]> {
        (0..self.count).map(|index| self.cell(index)).collect()
    }
}

/// Bytes `cells` take in a node, slots included.
#[must_use]
pub fn cells_bytes<C: AsRef<[u8]>>(cells: &[C]) -> usize {
    cells
        .iter()
        .map(|cell| cell.as_ref().len() + SLOT_BYTES)
        .sum()
}

mod search;

pub use search::search_hints;

#[cfg(test)]
mod tests;
