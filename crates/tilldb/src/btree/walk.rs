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

/// The value of a leaf entry, read from its overflow pages if it has any.
pub(super) fn resolve<P: Pages>(pages: &P, value: &LeafValue) -> Result<Vec<u8>> {
    match value {
        LeafValue::Inline(bytes) => Ok(bytes.clone()),
        LeafValue::Overflow { len, first } => overflow::read(pages, *first, *len),
    }
}

/// Descends from `root` to the leaf that holds `key` (or would).
pub(super) fn descend<P: Pages>(pages: &P, root: PageId, key: &[u8]) -> Result<(Path, PageId)> {
    descend_by(pages, root, |node| node.child_index(key))
}

/// Descends from `root` choosing the child with `pick` at each branch.
pub(super) fn descend_by<P: Pages>(
    pages: &P,
    root: PageId,
    mut pick: impl FnMut(&NodeRef<'_>) -> usize,
) -> Result<(Path, PageId)> {
    let mut path = Path::new();
    let mut id = root;
    loop {
        let step = with_node(pages, id, |node| match node.kind() {
            NodeKind::Leaf => None,
            NodeKind::Branch => {
                let index = pick(node);
                Some((index, node.child(index)))
            }
        })?;
        let Some((index, child)) = step else {
            return Ok((path, id));
        };
        if child.0 == 0 {
            return Err(corrupt(pages, id, "branch has a child of page 0"));
        }
        if path.len() == DEPTH_MAX {
            return Err(corrupt(
                pages,
                id,
                "tree is deeper than any real tree (a cycle)",
            ));
        }
        path.push((id, index));
        id = child;
    }
}
