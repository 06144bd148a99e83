//! Merges: after a delete, a node under a quarter full is merged with a sibling when both fit
//! in one page, and a root branch left with one child takes that child's contents.
//!
//! ```text
//!  children j (left L) and j+1 (right R) of P    ops, in order
//!  --------------------------------------------  ------------------------------------------
//!  L's cells (+ P's key j, for branches) + R's   Image L   (built from copies of L and R)
//!  leaf chain around R                            SetPrev (R's next) -> L
//!  R leaves the parent                            BranchRemove P j   (key j, child j+1)
//!  R is free                                      Format R Free      (logged by Pages::free)
//! ```
//!
//! An empty leaf is not merged but unlinked (`unlink_empty_leaf`): no cell moves.
//!
//! The parent lost a key, so it is considered in turn, up to the root. A node with no sibling
//! (its parent has a single child) is left as it is; its parent is then considered. A node
//! whose merge does not fit stays under-full: merging never moves cells between pages except
//! into one page, which keeps every op simple. Under-full nodes are rare: a node only stays so
//! when its sibling is more than three quarters full.

use super::node::{self, NodeKind};
use super::walk::{DEPTH_MAX, Path, check_links_back, with_node};
use super::{PageOp, Pages, corrupt, node_mut};
use crate::Result;
use crate::page::PageId;

/// A node's links: (previous leaf, next leaf) for a leaf, (leftmost child, 0) for a branch.
fn links(node: &node::NodeRef<'_>) -> (PageId, PageId) {
    match node.kind() {
        NodeKind::Leaf => (node.prev(), node.next()),
        NodeKind::Branch => (node.leftmost(), PageId(0)),
    }
}

/// Restores balance after a delete from `node`, reached through `path` from `root`.
pub(super) fn rebalance<P: Pages>(
    pages: &P,
    root: PageId,
    mut path: Path,
    mut node: PageId,
) -> Result<()> {
    for _ in 0..=DEPTH_MAX {
        if node == root {
            return collapse_root(pages, root);
        }
        let (parent, index) = path.pop().expect("a node below the root has a parent");
        // A method path instead of these closures does not type-check: the node's lifetime
        // is higher-ranked in `with_node`.
        #[expect(clippy::redundant_closure_for_method_calls, reason = "see above")]
        let underfull = with_node(pages, node, |view| view.is_underfull())?;
        if !underfull {
            return Ok(());
        }
        #[expect(clippy::redundant_closure_for_method_calls, reason = "see above")]
        let count = with_node(pages, parent, |view| view.count())?;
        if count > 0 && unlink_empty_leaf(pages, parent, index, node)? {
            node = parent;
            continue;
        }
        if count > 0 {
            let left_index = if index < count { index } else { index - 1 };
            if !merge_children(pages, parent, left_index)? {
                return Ok(());
            }
        }
        node = parent;
    }
    unreachable!("paths are at most DEPTH_MAX long")
}

/// Takes `node`, child `index` of `parent` (which has a sibling for it), out of the tree if it
/// is an empty leaf: its parent forgets it and a separator, its neighbours link past it, and
/// it is freed; no cell moves. Returns whether it did. A merge would copy the sibling whole
/// into it (a queue taken from its head empties its first leaf again and again).
///
/// ```text
///  node is child j of P     ops, in order
///  -----------------------  ------------------------------------------------------------
///  j > 0                    BranchRemove P (j - 1)   (key j-1 and child j: key j, kept,
///                                                     separates child j-1 from child j+1)
///  j = 0                    SetLeftmost P (child 1), BranchRemove P 0 (key 0, child 1)
///  leaf chain               SetNext (prev) -> next, SetPrev (next) -> prev
///  node is free             Format node Free         (logged by Pages::free)
/// ```
fn unlink_empty_leaf<P: Pages>(
    pages: &P,
    parent: PageId,
    index: usize,
    node: PageId,
) -> Result<bool> {
    let links = with_node(pages, node, |view| {
        (view.kind() == NodeKind::Leaf && view.count() == 0).then(|| (view.prev(), view.next()))
    })?;
    let Some((prev, next)) = links else {
        return Ok(false);
    };
    let (child, sibling) = with_node(pages, parent, |view| {
        (
            view.child(index),
            view.child(if index == 0 { 1 } else { index - 1 }),
        )
    })?;
    if child != node {
        return Err(corrupt(
            pages,
            parent,
            "a branch's child is not on the path to it",
        ));
    }
    if next.0 != 0 {
        check_links_back(pages, next, node)?;
    }
    if prev.0 != 0
        && with_node(pages, prev, |view| {
            view.kind() != NodeKind::Leaf || view.next() != node
        })?
    {
        return Err(corrupt(
            pages,
            prev,
            "leaf chain: a previous leaf does not link on",
        ));
    }
    if index == 0 {
        pages.apply(PageOp::SetLeftmost {
            page: parent,
            child: sibling,
        })?;
        pages.apply(PageOp::BranchRemove {
            page: parent,
            index: 0,
        })?;
    } else {
        pages.apply(PageOp::BranchRemove {
            page: parent,
            index: u16::try_from(index - 1).expect("a node holds fewer than 65536 cells"),
        })?;
    }
    if prev.0 != 0 {
        pages.apply(PageOp::SetNext { page: prev, next })?;
    }
    if next.0 != 0 {
        pages.apply(PageOp::SetPrev { page: next, prev })?;
    }
    pages.free(node)?;
    Ok(true)
}

/// Merges children `index` and `index + 1` of `parent` into the first if they fit in one
/// page. Returns whether it did.
fn merge_children<P: Pages>(pages: &P, parent: PageId, index: usize) -> Result<bool> {
    let limits = pages.limits();
    let (separator, left, right) = with_node(pages, parent, |view| {
        (
            view.key(index).to_vec(),
            view.child(index),
            view.child(index + 1),
        )
    })?;
    if left == right {
        return Err(corrupt(pages, parent, "branch has the same child twice"));
    }
    // Whether the two fit in one page, from their headers, before any cell is copied: a
    // node left under-full beside a full sibling is looked at again at each delete from it
    // (a queue taken from its head deletes every key of a leaf in turn), and copying both
    // nodes each time only to find no room was most of such a delete's cost.
    let (left_kind, left_live) = with_node(pages, left, |view| (view.kind(), view.live_bytes()))?;
    let (right_kind, right_live) =
        with_node(pages, right, |view| (view.kind(), view.live_bytes()))?;
    if left_kind != right_kind {
        return Err(corrupt(
            pages,
            right,
            "sibling nodes are of different kinds",
        ));
    }
    let separator_bytes = match left_kind {
        NodeKind::Branch => node::branch_cell_bytes(separator.len()) + node::SLOT_BYTES,
        NodeKind::Leaf => 0,
    };
    if left_live + right_live + separator_bytes > limits.usable_bytes {
        return Ok(false);
    }
    // The merged node is the left node's body (compacted) with the parent's separator (for
    // branches) and the right node's cells appended, each cell copied once from its page:
    // copying every cell of both into a vector of its own, then into a fresh body, was most
    // of a merge (a third of a retain's deletes: docs/benchmarks-journal.md).
    let (kind, mut body, left_links, left_last, left_dead) = with_node(pages, left, |view| {
        let last = view.count().checked_sub(1).map(|i| view.key(i).to_vec());
        let dead = view.dead_bytes() > 0;
        (view.kind(), view.body().to_vec(), links(view), last, dead)
    })?;
    let mut merged = node_mut::NodeMut::trusted(kind, &mut body);
    if left_dead {
        merged.compact();
    }
    let right_links = with_node(pages, right, |view| -> Result<(PageId, PageId)> {
        let right_links = links(view);
        let mut last = left_last.as_deref();
        if kind == NodeKind::Branch {
            // The parent's separator comes down, with the right node's leftmost child.
            if last.is_some_and(|l| l >= separator.as_slice()) {
                return Err(corrupt(pages, right, "sibling keys overlap"));
            }
            merged.insert_cell(
                merged.count(),
                &node::encode_branch_cell(&separator, right_links.0),
            );
            last = Some(&separator);
        } else if left_links.1 != right || right_links.0 != left {
            return Err(corrupt(
                pages,
                right,
                "leaf chain disagrees with the parent's order",
            ));
        }
        if view.count() > 0 && last.is_some_and(|l| l >= view.key(0)) {
            return Err(corrupt(pages, right, "sibling keys overlap"));
        }
        for index in 0..view.count() {
            merged.insert_cell(merged.count(), view.cell(index));
        }
        Ok(right_links)
    })??;
    if kind == NodeKind::Leaf {
        merged.set_link_high(right_links.1);
        if right_links.1.0 != 0 {
            check_links_back(pages, right_links.1, right)?;
        }
    }
    pages.apply(PageOp::Image {
        page: left,
        kind: kind.page_kind(),
        body,
    })?;
    if kind == NodeKind::Leaf && right_links.1.0 != 0 {
        pages.apply(PageOp::SetPrev {
            page: right_links.1,
            prev: left,
        })?;
    }
    pages.apply(PageOp::BranchRemove {
        page: parent,
        index: u16::try_from(index).expect("a node holds fewer than 65536 cells"),
    })?;
    pages.free(right)?;
    Ok(true)
}

/// While the root is a branch with a single child, moves that child's contents into the root
/// (whose id never changes) and frees the child.
fn collapse_root<P: Pages>(pages: &P, root: PageId) -> Result<()> {
    for _ in 0..DEPTH_MAX {
        let only_child = with_node(pages, root, |view| {
            (view.kind() == NodeKind::Branch && view.count() == 0).then(|| view.leftmost())
        })?;
        let Some(child) = only_child else {
            return Ok(());
        };
        let (kind, body) = {
            let page = pages.read(child)?;
            let view = node::NodeRef::parse(&page).map_err(|what| corrupt(pages, child, what))?;
            if view.kind() == NodeKind::Leaf && (view.prev().0 != 0 || view.next().0 != 0) {
                return Err(corrupt(pages, child, "the only leaf has sibling links"));
            }
            (page.kind(), page.body().to_vec())
        };
        pages.apply(PageOp::Image {
            page: root,
            kind,
            body,
        })?;
        pages.free(child)?;
    }
    Err(corrupt(
        pages,
        root,
        "tree is deeper than any real tree (a cycle)",
    ))
}
