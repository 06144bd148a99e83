//! Changing a node in place: insert, remove, truncate, compact, and building fresh node
//! bodies. The layout is documented, and checked on every read, in `node.rs`; this file only
//! writes it, and asserts that every change leaves a valid node.

use super::Limits;
use super::node::{
    CELL_BYTES_OFFSET, COUNT_OFFSET, DEAD_BYTES_OFFSET, LINK_HIGH_OFFSET, LINK_LOW_OFFSET,
    NODE_HEADER_BYTES, NodeKind, NodeRef, SLOT_BYTES, put_u16,
};
use crate::page::PageId;

/// Changes a node in place. Only page ops (redo.rs) and the image builder use it.
pub(super) struct NodeMut<'a> {
    kind: NodeKind,
    body: &'a mut [u8],
}

impl<'a> NodeMut<'a> {
    /// A mutable node on `body`, which must be a valid node: changing a corrupt page is a bug
    /// (the op that does it was built from other bytes).
    pub(super) fn new(kind: NodeKind, body: &'a mut [u8]) -> NodeMut<'a> {
        if let Err(what) = NodeRef::parse_body(kind, body) {
            panic!("page op on an invalid {kind:?} node: {what}");
        }
        NodeMut { kind, body }
    }

    /// A mutable node on `body`, which the caller knows is valid: its page was checked and
    /// has changed only through node ops since (re-checked in debug builds).
    pub(super) fn trusted(kind: NodeKind, body: &'a mut [u8]) -> NodeMut<'a> {
        debug_assert!(
            NodeRef::parse_body(kind, body).is_ok(),
            "a trusted node is invalid"
        );
        NodeMut { kind, body }
    }

    /// Asserts that `cell` obeys the node's size rule (at most a quarter of the node), which
    /// `insert_cell` relies on the caller for.
    fn assert_cell_size(&self, cell: &[u8]) {
        let max = (self.body.len() - NODE_HEADER_BYTES) / 4 - SLOT_BYTES;
        assert!(
            cell.len() <= max,
            "cell of {} bytes is over a quarter of the node ({max})",
            cell.len()
        );
    }

    fn view(&self) -> NodeRef<'_> {
        NodeRef::trusted(self.kind, self.body)
    }

    fn set_counts(&mut self, count: usize, cell_bytes: usize, dead_bytes: usize) {
        assert!(dead_bytes <= cell_bytes);
        assert!(NODE_HEADER_BYTES + SLOT_BYTES * count + cell_bytes <= self.body.len());
        put_u16(self.body, COUNT_OFFSET, count);
        put_u16(self.body, CELL_BYTES_OFFSET, cell_bytes);
        put_u16(self.body, DEAD_BYTES_OFFSET, dead_bytes);
    }

    pub(super) fn set_link_low(&mut self, id: PageId) {
        self.body[LINK_LOW_OFFSET..LINK_HIGH_OFFSET].copy_from_slice(&id.0.to_le_bytes());
    }

    pub(super) fn set_link_high(&mut self, id: PageId) {
        assert_eq!(self.kind, NodeKind::Leaf, "only leaves have a high link");
        self.body[LINK_HIGH_OFFSET..NODE_HEADER_BYTES].copy_from_slice(&id.0.to_le_bytes());
    }

    pub(super) fn search(&self, key: &[u8]) -> Result<usize, usize> {
        self.view().search(key)
    }

    pub(super) fn count(&self) -> usize {
        self.view().count()
    }

    /// Inserts the encoded `cell` at slot `index`, compacting first if the gap is too small.
    /// The caller keeps key order (asserted in debug builds).
    pub(super) fn insert_cell(&mut self, index: usize, cell: &[u8]) {
        self.assert_cell_size(cell);
        let view = self.view();
        let (count, free, gap) = (view.count(), view.free_bytes(), view.gap_bytes());
        assert!(index <= count, "insert at {index} of {count} cells");
        let need = SLOT_BYTES + cell.len();
        assert!(
            need <= free,
            "cell of {} bytes does not fit in a node with {free} bytes free",
            cell.len()
        );
        if need > gap {
            self.compact();
        }
        let view = self.view();
        let (cell_bytes, dead_bytes) = (view.cell_area_bytes(), view.dead_bytes());
        assert!(need <= view.gap_bytes(), "compaction left too small a gap");
        let offset = self.body.len() - cell_bytes - cell.len();
        self.body[offset..offset + cell.len()].copy_from_slice(cell);
        let slot = NODE_HEADER_BYTES + SLOT_BYTES * index;
        let slots_end = NODE_HEADER_BYTES + SLOT_BYTES * count;
        self.body.copy_within(slot..slots_end, slot + SLOT_BYTES);
        put_u16(self.body, slot, offset);
        self.set_counts(count + 1, cell_bytes + cell.len(), dead_bytes);
        debug_assert!(self.view().is_sorted(), "insert broke key order");
    }

    /// Replaces cell `index` by `cell`, which must have the same key: in place when the two
    /// are the same size (a value overwritten by one as long, the common update: no slot
    /// moves, no compaction), otherwise as a removal and an insertion at `index`. Profiled
    /// (`till bench readers`, one-row overwrites of 10,000 rows): a removal and insertion
    /// compacted the leaf whenever its scattered free bytes ran out, 9% of the run's CPU in
    /// the writer and in a read-only handle's redo.
    pub(super) fn replace_cell(&mut self, index: usize, cell: &[u8]) {
        self.assert_cell_size(cell);
        let view = self.view();
        assert!(
            index < view.count(),
            "replace cell {index} of {}",
            view.count()
        );
        let (offset, size) = (view.cell_offset(index), view.cell(index).len());
        if size == cell.len() {
            self.body[offset..offset + size].copy_from_slice(cell);
            debug_assert!(self.view().is_sorted(), "a replacement broke key order");
        } else {
            self.remove_cell(index);
            self.insert_cell(index, cell);
        }
    }

    /// Removes cell `index`; its bytes are zeroed and become dead (or leave the cell area when
    /// they were its first bytes).
    pub(super) fn remove_cell(&mut self, index: usize) {
        let view = self.view();
        let count = view.count();
        assert!(index < count, "remove cell {index} of {count}");
        let (cell_bytes, dead_bytes) = (view.cell_area_bytes(), view.dead_bytes());
        let offset = view.cell_offset(index);
        let size = view.cell(index).len();
        self.body[offset..offset + size].fill(0);
        let slot = NODE_HEADER_BYTES + SLOT_BYTES * index;
        let slots_end = NODE_HEADER_BYTES + SLOT_BYTES * count;
        self.body.copy_within(slot + SLOT_BYTES..slots_end, slot);
        self.body[slots_end - SLOT_BYTES..slots_end].fill(0);
        if count == 1 {
            // Every dead byte is zero, so an empty node is an all-zero cell area.
            self.set_counts(0, 0, 0);
        } else if offset == self.body.len() - cell_bytes {
            self.set_counts(count - 1, cell_bytes - size, dead_bytes);
        } else {
            self.set_counts(count - 1, cell_bytes, dead_bytes + size);
        }
    }

    /// Removes cells `from..count`.
    pub(super) fn truncate(&mut self, from: usize) {
        let count = self.count();
        assert!(from <= count, "truncate from {from} of {count} cells");
        for index in (from..count).rev() {
            self.remove_cell(index);
        }
        assert_eq!(self.count(), from);
    }

    /// Moves the live cells to the end of the body, in slot order, leaving no dead bytes.
    /// Works from one copy of the body (not a copy per cell: a compaction is on the commit
    /// path whenever an insert meets a leaf whose free bytes are scattered).
    pub(super) fn compact(&mut self) {
        let live = self.view().live_bytes();
        let old = self.body.to_vec();
        let before = NodeRef::trusted(self.kind, &old);
        let count = before.count();
        let slots_end = NODE_HEADER_BYTES + SLOT_BYTES * count;
        self.body[slots_end..].fill(0);
        let mut offset = self.body.len();
        for index in 0..count {
            let cell = before.cell(index);
            offset -= cell.len();
            self.body[offset..offset + cell.len()].copy_from_slice(cell);
            put_u16(self.body, NODE_HEADER_BYTES + SLOT_BYTES * index, offset);
        }
        self.set_counts(count, self.body.len() - offset, 0);
        assert_eq!(self.view().live_bytes(), live, "compaction lost bytes");
    }
}

/// Compacts the node on `page` if it holds dead bytes (a page that is not a node is left as
/// it is), before a full-page image is taken of it: the image then leaves out the node's
/// free space and its dead bytes together, found from the header, where it scanned the page
/// for its longest run of zeros and logged the rest (a leaf that lost half its cells in
/// place logged some 14 KB of its 16 KiB, and the scan was a third of a pop commit's encoding:
/// docs/benchmarks-journal.md). Redo rebuilds the page from the image, so the compacted page
/// is the page from here on, for the writer and for redo alike; the ops that follow name
/// keys and slots, which a compaction keeps, never offsets.
pub fn compact_for_image(page: &mut crate::page::PageBuf) {
    let Some(kind) = NodeKind::of(page.kind()) else {
        return;
    };
    if NodeRef::parse_body(kind, page.body()).is_ok_and(|node| node.dead_bytes() > 0) {
        NodeMut::trusted(kind, page.body_mut()).compact();
    }
}

/// The body of a fresh node holding `cells` (encoded, in key order), compacted.
#[must_use]
pub(super) fn build<C: AsRef<[u8]>>(
    kind: NodeKind,
    limits: &Limits,
    link_low: PageId,
    link_high: PageId,
    cells: &[C],
) -> Vec<u8> {
    let mut body = vec![0; limits.body_bytes];
    let mut node = NodeMut::new(kind, &mut body);
    node.set_link_low(link_low);
    if kind == NodeKind::Leaf {
        node.set_link_high(link_high);
    } else {
        assert_eq!(link_high.0, 0, "a branch has no high link");
    }
    for (index, cell) in cells.iter().enumerate() {
        node.insert_cell(index, cell.as_ref());
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btree::node::{LeafValue, ValueRef, encode_leaf_cell};

    fn limits() -> Limits {
        Limits::new(4096)
    }

    fn leaf_cell(key: &[u8], value: &[u8]) -> Vec<u8> {
        encode_leaf_cell(key, &LeafValue::Inline(value.to_vec()))
    }

    #[test]
    fn insert_remove_search() {
        let mut body = vec![0; limits().body_bytes];
        let mut node = NodeMut::new(NodeKind::Leaf, &mut body);
        for key in [b"b", b"d", b"a", b"c"] {
            let index = node.search(key).expect_err("absent");
            node.insert_cell(index, &leaf_cell(key, b"value"));
        }
        node.remove_cell(1);
        let view = NodeRef::parse_body(NodeKind::Leaf, &body).expect("valid");
        let keys: Vec<&[u8]> = (0..view.count()).map(|i| view.key(i)).collect();
        assert_eq!(keys, [&b"a"[..], b"c", b"d"]);
        assert_eq!(view.value(0), ValueRef::Inline(b"value"));
        assert_eq!(view.search(b"c"), Ok(1));
        assert_eq!(view.search(b"b"), Err(1));
        // "b" was not the lowest cell, so it is dead now; the accounting says so.
        assert_eq!(view.dead_bytes(), leaf_cell(b"b", b"value").len());
    }

    /// A same-size replacement writes over the old cell: no dead bytes, no slot moved; a
    /// longer one is a removal and an insertion.
    #[test]
    fn a_same_size_replacement_is_in_place() {
        let mut body = vec![0; limits().body_bytes];
        let mut node = NodeMut::new(NodeKind::Leaf, &mut body);
        for (i, key) in [b"a", b"b", b"c"].into_iter().enumerate() {
            node.insert_cell(i, &leaf_cell(key, b"value"));
        }
        let before = node.view().cell_offset(1);
        node.replace_cell(1, &leaf_cell(b"b", b"VALUE"));
        assert_eq!(node.view().cell_offset(1), before);
        assert_eq!(node.view().dead_bytes(), 0);
        assert_eq!(node.view().value(1), ValueRef::Inline(b"VALUE"));
        node.replace_cell(1, &leaf_cell(b"b", b"longer value"));
        assert_eq!(node.view().value(1), ValueRef::Inline(b"longer value"));
        assert_eq!(node.view().dead_bytes(), leaf_cell(b"b", b"VALUE").len());
        let view = NodeRef::parse_body(NodeKind::Leaf, &body).expect("valid");
        let keys: Vec<&[u8]> = (0..view.count()).map(|i| view.key(i)).collect();
        assert_eq!(keys, [&b"a"[..], b"b", b"c"]);
    }

    #[test]
    fn compaction_reclaims_dead_bytes_and_keeps_order() {
        let limits = limits();
        let mut body = vec![0; limits.body_bytes];
        let mut node = NodeMut::new(NodeKind::Leaf, &mut body);
        let value = vec![7u8; 300];
        // Fill, then remove every other cell, then insert a cell that only fits after a
        // compaction.
        let mut count = 0u8;
        while NodeRef::trusted(NodeKind::Leaf, node.body).free_bytes() >= 2 + 7 + 1 + 300 {
            let index = node.count();
            node.insert_cell(index, &leaf_cell(&[count], &value));
            count += 1;
        }
        assert!(count >= 4);
        node.remove_cell(2);
        node.remove_cell(0);
        let before = NodeRef::trusted(NodeKind::Leaf, node.body);
        assert!(before.gap_bytes() < 2 + 7 + 1 + 300);
        assert!(before.free_bytes() >= 2 + 7 + 1 + 300);
        node.insert_cell(0, &leaf_cell(&[0], &value));
        let view = NodeRef::parse_body(NodeKind::Leaf, &body).expect("valid");
        assert!(view.is_sorted());
        assert_eq!(view.key(0), &[0]);
        assert_eq!(view.key(1), &[1]);
        assert_eq!(view.key(2), &[3]);
    }

    #[test]
    fn removing_every_cell_leaves_a_zero_body() {
        let limits = limits();
        let mut body = vec![0; limits.body_bytes];
        let mut node = NodeMut::new(NodeKind::Leaf, &mut body);
        node.set_link_low(PageId(3));
        for index in 0..10u8 {
            node.insert_cell(usize::from(index), &leaf_cell(&[index], &[index; 20]));
        }
        node.remove_cell(4);
        node.truncate(0);
        node.set_link_low(PageId(0));
        assert!(body.iter().all(|&b| b == 0));
    }
}
