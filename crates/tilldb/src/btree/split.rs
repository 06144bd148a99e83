//! Splits: a node that cannot take one more cell becomes two, each op on one page.
//!
//! ```text
//!  leaf L full, put k            ops, in order
//!  ----------------------------  ----------------------------------------------------------
//!  R = allocate(Leaf)            Format R               (logged by Pages::allocate)
//!  right half of L + k -> R      Image R                (body built from copies of L's cells)
//!  L keeps the left half         Truncate L, then LeafPut L if k belongs left
//!  leaf chain                    SetNext L -> R, SetPrev (L's old next) -> R
//!  separator into the parent     BranchInsert P, or split P the same way, up to the root
//! ```
//!
//! The split point balances bytes, so with every cell at most a quarter of a node both halves
//! fit: the left half holds at most half the bytes, the right at most half plus one cell
//! (`5/8 + 1/4 < 1` of a node). Appending past the last key of the last leaf splits off the
//! new cell alone instead, so loads in key order fill leaves completely.
//!
//! The root keeps its page id: a root split moves both halves into new pages and reformats the
//! root as a branch over them (`Format`, `SetLeftmost`, `BranchInsert`).
//!
//! A leaf separator is the shortest prefix of the right half's first key that is above the
//! left half's last key, so branches hold short keys.

use super::node::{self, LeafValue, NodeKind, NodeRef};
use super::walk::{Path, check_links_back, with_node};
use super::{Limits, PageOp, Pages, corrupt, node_mut};
use crate::Result;
use crate::page::PageId;

/// The index of the first cell of the right half: the byte midpoint, never 0 or past the
/// last cell. Requires: at least two cells.
fn split_point<C: AsRef<[u8]>>(cells: &[C]) -> usize {
    assert!(cells.len() >= 2, "split of {} cells", cells.len());
    let total = node::cells_bytes(cells);
    let mut left = 0;
    for (index, cell) in cells.iter().enumerate() {
        let size = cell.as_ref().len() + node::SLOT_BYTES;
        if index > 0 && left + size > total / 2 {
            return index;
        }
        left += size;
    }
    cells.len() - 1
}

/// The shortest prefix of `right_first` that is above `left_last`.
pub(super) fn separator(left_last: &[u8], right_first: &[u8]) -> Vec<u8> {
    assert!(left_last < right_first, "split halves out of order");
    let common = left_last
        .iter()
        .zip(right_first)
        .take_while(|(a, b)| a == b)
        .count();
    // right_first is longer than the common prefix, or it would not be above left_last.
    let separator = right_first[..=common].to_vec();
    debug_assert!(left_last < separator.as_slice() && separator.as_slice() <= right_first);
    separator
}

fn index_u16(index: usize) -> u16 {
    u16::try_from(index).expect("a node holds fewer than 65536 cells")
}

/// Puts `key` = `value` into `leaf`, which has no room for it, by splitting it.
pub(super) fn split_leaf<P: Pages>(
    pages: &P,
    root: PageId,
    path: Path,
    leaf: PageId,
    key: &[u8],
    value: LeafValue,
) -> Result<()> {
    let limits = pages.limits();
    // One copy of the leaf's body; the cells are borrowed from it.
    let (body, found, next) = with_node(pages, leaf, |node| {
        (node.body().to_vec(), node.search(key), node.next())
    })?;
    let new_cell = node::encode_leaf_cell(key, &value);
    let mut cells = NodeRef::trusted(NodeKind::Leaf, &body).cell_slices();
    let old_count = cells.len();
    let (position, replaces) = match found {
        Ok(index) => {
            cells[index] = &new_cell;
            (index, true)
        }
        Err(index) => {
            cells.insert(index, &new_cell);
            (index, false)
        }
    };
    let appending = !replaces && position + 1 == cells.len() && next.0 == 0;
    let middle = if appending {
        cells.len() - 1
    } else {
        split_point(&cells)
    };
    assert!(node::cells_bytes(&cells[..middle]) <= limits.usable_bytes);
    assert!(node::cells_bytes(&cells[middle..]) <= limits.usable_bytes);
    let separator = separator(
        node::cell_key(NodeKind::Leaf, cells[middle - 1]),
        node::cell_key(NodeKind::Leaf, cells[middle]),
    );
    if next.0 != 0 {
        check_links_back(pages, next, leaf)?;
    }
    if leaf == root {
        return split_root(
            pages,
            &limits,
            root,
            NodeKind::Leaf,
            PageId(0),
            &cells,
            middle,
            separator,
        );
    }
    let right = pages.allocate(NodeKind::Leaf.page_kind())?;
    pages.apply(PageOp::Image {
        page: right,
        kind: NodeKind::Leaf.page_kind(),
        body: node_mut::build(NodeKind::Leaf, &limits, leaf, next, &cells[middle..]),
    })?;
    // Old cells left of the middle stay; the new cell, if it belongs left, displaced one.
    let keep = if position < middle && !replaces {
        middle - 1
    } else {
        middle
    };
    if keep < old_count {
        pages.apply(PageOp::Truncate {
            page: leaf,
            from: index_u16(keep),
        })?;
    }
    if position < middle {
        pages.apply(PageOp::LeafPut {
            page: leaf,
            key: key.to_vec(),
            value,
        })?;
    }
    pages.apply(PageOp::SetNext {
        page: leaf,
        next: right,
    })?;
    if next.0 != 0 {
        pages.apply(PageOp::SetPrev {
            page: next,
            prev: right,
        })?;
    }
    insert_separator(pages, &limits, root, path, separator, right)
}

/// Inserts `separator` with `child` to its right into the last branch of `path`, splitting
/// branches up to the root as needed.
fn insert_separator<P: Pages>(
    pages: &P,
    limits: &Limits,
    root: PageId,
    mut path: Path,
    mut separator: Vec<u8>,
    mut child: PageId,
) -> Result<()> {
    while let Some((parent, _)) = path.pop() {
        let cell = node::encode_branch_cell(&separator, child);
        let (fits, body, leftmost, found) = with_node(pages, parent, |node| {
            let fits = cell.len() + node::SLOT_BYTES <= node.free_bytes();
            let body = if fits {
                Vec::new()
            } else {
                node.body().to_vec()
            };
            (fits, body, node.leftmost(), node.search(&separator))
        })?;
        let Err(position) = found else {
            return Err(corrupt(
                pages,
                parent,
                "separator key is already in its parent",
            ));
        };
        if fits {
            return pages.apply(PageOp::BranchInsert {
                page: parent,
                key: separator,
                child,
            });
        }
        // The cells borrowed from one copy of the branch's body.
        let mut cells = NodeRef::trusted(NodeKind::Branch, &body).cell_slices();
        let old_count = cells.len();
        cells.insert(position, &cell);
        let middle = split_point(&cells);
        assert!(node::cells_bytes(&cells[..middle]) <= limits.usable_bytes);
        assert!(node::cells_bytes(&cells[middle + 1..]) <= limits.usable_bytes);
        let up = node::cell_key(NodeKind::Branch, cells[middle]).to_vec();
        if parent == root {
            return split_root(
                pages,
                limits,
                root,
                NodeKind::Branch,
                leftmost,
                &cells,
                middle,
                up,
            );
        }
        let right = pages.allocate(NodeKind::Branch.page_kind())?;
        pages.apply(PageOp::Image {
            page: right,
            kind: NodeKind::Branch.page_kind(),
            body: node_mut::build(
                NodeKind::Branch,
                limits,
                node::branch_cell_child(cells[middle]),
                PageId(0),
                &cells[middle + 1..],
            ),
        })?;
        let keep = if position < middle {
            middle - 1
        } else {
            middle
        };
        if keep < old_count {
            pages.apply(PageOp::Truncate {
                page: parent,
                from: index_u16(keep),
            })?;
        }
        if position < middle {
            pages.apply(PageOp::BranchInsert {
                page: parent,
                key: separator,
                child,
            })?;
        }
        separator = up;
        child = right;
    }
    unreachable!("the root is the first page of every path, and a root split returns")
}

/// Splits the root: `cells` (the root's cells and the new one) go into two new pages split at
/// `middle`, and the root becomes a branch over them with `separator`. For a branch root,
/// `leftmost` is its leftmost child and cell `middle` moves up as the separator.
#[expect(
    clippy::too_many_arguments,
    reason = "one call per node kind, all of it needed"
)]
fn split_root<P: Pages>(
    pages: &P,
    limits: &Limits,
    root: PageId,
    kind: NodeKind,
    leftmost: PageId,
    cells: &[&[u8]],
    middle: usize,
    separator: Vec<u8>,
) -> Result<()> {
    let left = pages.allocate(kind.page_kind())?;
    let right = pages.allocate(kind.page_kind())?;
    let (left_body, right_body) = match kind {
        NodeKind::Leaf => (
            node_mut::build(kind, limits, PageId(0), right, &cells[..middle]),
            node_mut::build(kind, limits, left, PageId(0), &cells[middle..]),
        ),
        NodeKind::Branch => {
            assert_eq!(node::cell_key(kind, cells[middle]), separator.as_slice());
            (
                node_mut::build(kind, limits, leftmost, PageId(0), &cells[..middle]),
                node_mut::build(
                    kind,
                    limits,
                    node::branch_cell_child(cells[middle]),
                    PageId(0),
                    &cells[middle + 1..],
                ),
            )
        }
    };
    for (page, body) in [(left, left_body), (right, right_body)] {
        pages.apply(PageOp::Image {
            page,
            kind: kind.page_kind(),
            body,
        })?;
    }
    pages.apply(PageOp::Format {
        page: root,
        kind: NodeKind::Branch.page_kind(),
    })?;
    pages.apply(PageOp::SetLeftmost {
        page: root,
        child: left,
    })?;
    pages.apply(PageOp::BranchInsert {
        page: root,
        key: separator,
        child: right,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separator_is_the_shortest_prefix_above_the_left_key() {
        assert_eq!(separator(b"apple", b"banana"), b"b");
        assert_eq!(separator(b"abc", b"abd"), b"abd");
        assert_eq!(separator(b"ab", b"abc"), b"abc");
        assert_eq!(separator(b"", b"a"), b"a");
        assert_eq!(separator(b"a", b"a\x00"), b"a\x00");
        assert_eq!(separator(b"key0001", b"key0002zzz"), b"key0002");
    }

    #[test]
    fn split_point_balances_bytes() {
        let cells: Vec<Vec<u8>> = [10, 10, 10, 10, 200].iter().map(|&n| vec![0; n]).collect();
        assert_eq!(split_point(&cells), 4);
        let cells: Vec<Vec<u8>> = [200, 10, 10, 10, 10].iter().map(|&n| vec![0; n]).collect();
        assert_eq!(split_point(&cells), 1);
        let cells: Vec<Vec<u8>> = [50; 6].iter().map(|&n| vec![0; n]).collect();
        assert_eq!(split_point(&cells), 3);
    }
}
