//! Walking a tree's pages: reading a node, descending to a leaf, checking a leaf chain link,
//! reading a value's overflow pages. Every tree operation (`tree.rs`, `cursor.rs`, `check.rs`,
//! `merge.rs`, `split.rs`) uses these; none of them is used by this file.

use super::node::{LeafValue, NodeKind, NodeRef};
use super::{Pages, corrupt, overflow};
use crate::Result;
use crate::page::PageId;

/// Deepest tree the code will descend; deeper means a cycle of branch pages. A tree of 4 KiB
/// pages holding four cells each reaches 2^64 keys before 33 levels.
pub(super) const DEPTH_MAX: usize = 64;

/// The branches passed on the way to a leaf: each branch page and the child index taken.
pub(super) type Path = Vec<(PageId, usize)>;

/// Reads page `id` as a node and runs `f` on it; the guard is dropped before returning.
pub(super) fn with_node<P: Pages, T>(
    pages: &P,
    id: PageId,
    f: impl FnOnce(&NodeRef<'_>) -> T,
) -> Result<T> {
    let page = pages.read(id)?;
    assert_eq!(page.id(), id, "the pages returned another page");
    let node = NodeRef::parse(&page).map_err(|what| corrupt(pages, id, what))?;
    Ok(f(&node))
}

/// Checks, before a split or merge changes it, that `leaf`'s previous leaf is `prev`.
pub(super) fn check_links_back<P: Pages>(pages: &P, leaf: PageId, prev: PageId) -> Result<()> {
    let links_back = with_node(pages, leaf, |node| {
        node.kind() == NodeKind::Leaf && node.prev() == prev
    })?;
    if links_back {
        Ok(())
    } else {
        Err(corrupt(
            pages,
            leaf,
            "leaf chain: a next leaf does not link back",
        ))
    }
}

/// The bytes of `value`, read from its overflow chain when it has one; an inline value is
/// moved, not copied.
pub(super) fn resolve<P: Pages>(pages: &P, value: LeafValue) -> Result<Vec<u8>> {
    match value {
        LeafValue::Inline(bytes) => Ok(bytes),
        LeafValue::Overflow { len, first } => overflow::read(pages, first, len),
    }
}

/// Descends from `root` to the leaf that holds `key` (or would), without recording the path:
/// for reads.
pub(super) fn find_leaf<P: Pages>(pages: &P, root: PageId, key: &[u8]) -> Result<PageId> {
    walk_down(pages, root, |node| node.child_index(key), |_, _| {})
}

/// Descends from `root` to the leaf that holds `key` (or would) and runs `f` on it, read once:
/// the guard the descent stopped at is the one `f` reads (a lookup that let it go and read
/// the leaf again by its id paid a second look-up of its frame: docs/benchmarks-journal.md).
pub(super) fn with_leaf<P: Pages, T>(
    pages: &P,
    root: PageId,
    key: &[u8],
    f: impl FnOnce(&NodeRef<'_>) -> T,
) -> Result<T> {
    let page = find_leaf_held(pages, root, key)?;
    let id = page.id();
    let node = NodeRef::parse(&page).map_err(|what| corrupt(pages, id, what))?;
    Ok(f(&node))
}

/// Descends from `root` choosing the child with `pick` at each branch.
pub(super) fn descend_by<P: Pages>(
    pages: &P,
    root: PageId,
    pick: impl FnMut(&NodeRef<'_>) -> usize,
) -> Result<(Path, PageId)> {
    let mut path = Path::new();
    let leaf = walk_down(pages, root, pick, |id, index| path.push((id, index)))?;
    Ok((path, leaf))
}

/// Descends from `root` choosing the child with `pick` at each branch and telling `step`
/// each branch passed and the index taken; returns the leaf.
fn walk_down<P: Pages>(
    pages: &P,
    root: PageId,
    pick: impl FnMut(&NodeRef<'_>) -> usize,
    step: impl FnMut(PageId, usize),
) -> Result<PageId> {
    descend_held(pages, root, pick, step).map(|leaf| leaf.id())
}

/// Descends from `root` to the leaf that holds `key` (or would) and returns it still held:
/// one read of the leaf, for a caller that reads it next (`run.rs`).
pub(super) fn find_leaf_held<'p, P: Pages>(
    pages: &'p P,
    root: PageId,
    key: &[u8],
) -> Result<P::Read<'p>> {
    descend_held(pages, root, |node| node.child_index(key), |_, _| {})
}

/// The index of a branch's last child (its key count): the way to the rightmost leaf.
pub(super) fn last_child(node: &NodeRef<'_>) -> usize {
    node.count()
}

/// Descends from `root` to the rightmost leaf and returns it still held.
pub(super) fn last_leaf_held<P: Pages>(pages: &P, root: PageId) -> Result<P::Read<'_>> {
    descend_held(pages, root, last_child, |_, _| {})
}

/// [`walk_down`], returning the leaf's guard (checked to be a node; the caller checks it is
/// a leaf if it needs to: a descent only stops at one).
fn descend_held<P: Pages>(
    pages: &P,
    root: PageId,
    mut pick: impl FnMut(&NodeRef<'_>) -> usize,
    mut step: impl FnMut(PageId, usize),
) -> Result<P::Read<'_>> {
    let mut depth = 0;
    let mut id = root;
    let mut guess = 0;
    loop {
        let page = pages.read_guessed(id, guess)?;
        page.prefetch_for_search();
        assert_eq!(page.id(), id, "the pages returned another page");
        let next = {
            let node = NodeRef::parse_to_search(&page, pages.make_search_hints())
                .map_err(|what| corrupt(pages, id, what))?;
            match node.kind() {
                NodeKind::Leaf => None,
                NodeKind::Branch => {
                    let index = pick(&node);
                    let child = node.child(index);
                    // The child's frame from the branch's guess, checked: found while the
                    // branch is held, whose guesses live while it is unchanged.
                    guess = match node.child_frame(index) {
                        Some(slot) if child.0 != 0 => pages.locate(child, slot),
                        _ => 0,
                    };
                    Some((index, child))
                }
            }
        };
        let Some((index, child)) = next else {
            return Ok(page);
        };
        drop(page);
        if child.0 == 0 {
            return Err(corrupt(pages, id, "branch has a child of page 0"));
        }
        if depth == DEPTH_MAX {
            return Err(corrupt(
                pages,
                id,
                "tree is deeper than any real tree (a cycle)",
            ));
        }
        depth += 1;
        step(id, index);
        id = child;
    }
}
