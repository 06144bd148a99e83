//! `check`: verifies every invariant of a tree, reporting the first violation as
//! [`crate::Error::Corruption`] naming the page (offset = page id × page size).
//!
//! Checked, page by page from the root:
//! - page kinds: Leaf or Branch nodes, Overflow pages in value chains; all leaves at one depth;
//! - node layout (`NodeRef::parse`), cells that do not overlap, and every byte that is not
//!   header, slot or live cell zero (free space and dead cells are zeroed);
//! - keys strictly ascending within a node and inside the bounds set by the separators above
//!   (`lower <= key < upper`), no key longer than the limit, no cell larger than a quarter;
//! - values inline exactly when they fit inline; overflow chains whole (`overflow.rs`);
//! - no page reachable twice (through children, leaf links or overflow chains);
//! - the leaf chain: `next` and `prev` link the leaves in key order, 0 at both ends.

use super::node::{NodeKind, NodeRef, SLOT_BYTES, ValueRef};
use super::walk::DEPTH_MAX;
use super::{Limits, Pages, corrupt, overflow};
use crate::Result;
use crate::page::PageId;
use std::collections::HashSet;

/// What a check found in a tree that passed it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeStats {
    /// Levels of nodes: 1 for a tree that is one leaf.
    pub depth: usize,
    /// Entries.
    pub keys: u64,
    /// Leaf pages: the nodes that hold the entries.
    pub leaf_pages: u64,
    /// Branch pages: the nodes above the leaves.
    pub branch_pages: u64,
    /// Overflow pages: the chains holding values too large for a leaf.
    pub overflow_pages: u64,
    /// Bytes of all keys.
    pub key_bytes: u64,
    /// Bytes of all values, inline or not.
    pub value_bytes: u64,
    /// Bytes of nodes taken by slots and live cells.
    pub live_bytes: u64,
    /// Bytes of nodes available to slots and cells.
    pub usable_bytes: u64,
}

impl TreeStats {
    /// Every page the tree holds.
    #[must_use]
    pub fn pages(&self) -> u64 {
        self.leaf_pages + self.branch_pages + self.overflow_pages
    }
}

/// Key bounds of a subtree: `lower <= key < upper`, `None` for unbounded.
#[derive(Clone, Copy)]
struct Bounds<'a> {
    lower: Option<&'a [u8]>,
    upper: Option<&'a [u8]>,
}

struct Checker<'p, P: Pages> {
    pages: &'p P,
    limits: Limits,
    visited: HashSet<PageId>,
    stats: TreeStats,
    /// Every leaf in key order, with its prev and next links.
    leaves: Vec<(PageId, PageId, PageId)>,
    leaf_depth: Option<usize>,
}

/// Checks the tree rooted at `root`.
pub(super) fn check<P: Pages>(pages: &P, root: PageId) -> Result<TreeStats> {
    let mut checker = Checker {
        pages,
        limits: pages.limits(),
        visited: HashSet::new(),
        stats: TreeStats::default(),
        leaves: Vec::new(),
        leaf_depth: None,
    };
    let unbounded = Bounds {
        lower: None,
        upper: None,
    };
    checker.visit(root, 1, unbounded)?;
    checker.check_leaf_chain()?;
    checker.stats.depth = checker.leaf_depth.expect("a tree has a leaf");
    Ok(checker.stats)
}

impl<P: Pages> Checker<'_, P> {
    fn mark(&mut self, id: PageId) -> Result<()> {
        if id.0 == 0 {
            return Err(corrupt(self.pages, id, "reference to page 0"));
        }
        if !self.visited.insert(id) {
            return Err(corrupt(self.pages, id, "page is reachable twice"));
        }
        Ok(())
    }

    fn visit(&mut self, id: PageId, depth: usize, bounds: Bounds<'_>) -> Result<()> {
        if depth > DEPTH_MAX {
            return Err(corrupt(self.pages, id, "tree is deeper than any real tree"));
        }
        self.mark(id)?;
        let page = self.pages.read(id)?;
        let node = NodeRef::parse(&page).map_err(|what| corrupt(self.pages, id, what))?;
        self.check_layout(id, &node)?;
        self.check_keys(id, &node, bounds)?;
        self.stats.live_bytes += node.live_bytes() as u64;
        self.stats.usable_bytes += node.usable_bytes() as u64;
        match node.kind() {
            NodeKind::Leaf => {
                if *self.leaf_depth.get_or_insert(depth) != depth {
                    return Err(corrupt(self.pages, id, "leaves at different depths"));
                }
                self.stats.leaf_pages += 1;
                self.leaves.push((id, node.prev(), node.next()));
                let mut chains = Vec::new();
                for index in 0..node.count() {
                    let key = node.key(index);
                    self.stats.keys += 1;
                    self.stats.key_bytes += key.len() as u64;
                    let value = node.value(index);
                    self.stats.value_bytes += value.len();
                    let inline = self.limits.is_inline(
                        key.len(),
                        usize::try_from(value.len()).unwrap_or(usize::MAX),
                    );
                    match value {
                        ValueRef::Inline(_) if !inline => {
                            return Err(corrupt(self.pages, id, "inline value is too large"));
                        }
                        ValueRef::Overflow { .. } if inline => {
                            return Err(corrupt(self.pages, id, "overflow value fits inline"));
                        }
                        ValueRef::Inline(_) => {}
                        ValueRef::Overflow { len, first } => chains.push((first, len)),
                    }
                }
                drop(page);
                for (first, len) in chains {
                    self.check_chain(first, len)?;
                }
            }
            NodeKind::Branch => {
                self.stats.branch_pages += 1;
                let keys: Vec<Vec<u8>> = (0..node.count()).map(|i| node.key(i).to_vec()).collect();
                let children: Vec<PageId> = (0..=node.count()).map(|i| node.child(i)).collect();
                drop(page);
                for (index, child) in children.into_iter().enumerate() {
                    let child_bounds = Bounds {
                        lower: if index == 0 {
                            bounds.lower
                        } else {
                            Some(keys[index - 1].as_slice())
                        },
                        upper: keys.get(index).map(Vec::as_slice).or(bounds.upper),
                    };
                    self.visit(child, depth + 1, child_bounds)?;
                }
            }
        }
        Ok(())
    }

    /// Cells do not overlap, and every byte outside the header, slots and live cells is zero.
    fn check_layout(&self, id: PageId, node: &NodeRef<'_>) -> Result<()> {
        let body = node.body();
        let mut extents: Vec<(usize, usize)> = (0..node.count())
            .map(|index| (node.cell_offset(index), node.cell(index).len()))
            .collect();
        extents.sort_unstable();
        let mut covered = super::node::NODE_HEADER_BYTES + SLOT_BYTES * node.count();
        for (offset, len) in extents {
            if offset < covered {
                return Err(corrupt(self.pages, id, "node cells overlap"));
            }
            if body[covered..offset].iter().any(|&b| b != 0) {
                return Err(corrupt(
                    self.pages,
                    id,
                    "node free space or dead cell is not zero",
                ));
            }
            if len > self.limits.cell_bytes_max {
                return Err(corrupt(
                    self.pages,
                    id,
                    "node cell is larger than a quarter",
                ));
            }
            covered = offset + len;
        }
        if body[covered..].iter().any(|&b| b != 0) {
            return Err(corrupt(
                self.pages,
                id,
                "node free space or dead cell is not zero",
            ));
        }
        Ok(())
    }

    fn check_keys(&self, id: PageId, node: &NodeRef<'_>, bounds: Bounds<'_>) -> Result<()> {
        for index in 0..node.count() {
            let key = node.key(index);
            if key.len() > self.limits.key_bytes_max {
                return Err(corrupt(self.pages, id, "key is longer than the limit"));
            }
            if index > 0 && node.key(index - 1) >= key {
                return Err(corrupt(self.pages, id, "keys out of order within a node"));
            }
            if bounds.lower.is_some_and(|lower| key < lower) {
                return Err(corrupt(self.pages, id, "key below its parent's separator"));
            }
            if bounds.upper.is_some_and(|upper| key >= upper) {
                return Err(corrupt(
                    self.pages,
                    id,
                    "key at or above its parent's separator",
                ));
            }
        }
        Ok(())
    }

    fn check_chain(&mut self, first: PageId, len: u32) -> Result<()> {
        let mut chain = Vec::new();
        overflow::walk(self.pages, first, u64::from(len), |id, _| {
            chain.push(id);
            Ok(())
        })?;
        for id in chain {
            self.mark(id)?;
            self.stats.overflow_pages += 1;
        }
        Ok(())
    }

    fn check_leaf_chain(&self) -> Result<()> {
        for (index, &(id, prev, next)) in self.leaves.iter().enumerate() {
            let expected_prev = index.checked_sub(1).map_or(PageId(0), |i| self.leaves[i].0);
            let expected_next = self.leaves.get(index + 1).map_or(PageId(0), |leaf| leaf.0);
            if prev != expected_prev {
                return Err(corrupt(
                    self.pages,
                    id,
                    "leaf prev link is not the previous leaf",
                ));
            }
            if next != expected_next {
                return Err(corrupt(
                    self.pages,
                    id,
                    "leaf next link is not the next leaf",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use crate::btree::{MemPages, PageOp, Tree};

    fn corruption_what(err: Error) -> &'static str {
        match err {
            Error::Corruption { what, .. } => what,
            other => panic!("expected corruption, got {other}"),
        }
    }

    fn two_level_tree() -> (MemPages, Tree) {
        let pages = MemPages::new(4096);
        let tree = Tree::create(&pages).expect("create");
        for i in 0..200u32 {
            tree.put(&pages, format!("{i:04}").as_bytes(), &[1; 50])
                .expect("put");
        }
        tree.put(&pages, b"big", &[2; 10_000]).expect("put");
        let stats = tree.check(&pages).expect("check");
        assert_eq!((stats.depth, stats.keys, stats.overflow_pages), (2, 201, 3));
        (pages, tree)
    }

    #[test]
    fn a_healthy_tree_passes() {
        let (pages, tree) = two_level_tree();
        let stats = tree.check(&pages).expect("check");
        assert!(stats.leaf_pages > 2);
        assert_eq!(stats.branch_pages, 1);
        assert_eq!(stats.pages(), pages.live_pages() as u64);
    }

    #[test]
    fn a_broken_leaf_link_is_reported_with_its_page() {
        let (pages, tree) = two_level_tree();
        let leaf = super::super::walk::find_leaf(&pages, tree.root(), b"0100").expect("descend");
        pages
            .apply(PageOp::SetNext {
                page: leaf,
                next: PageId(0),
            })
            .expect("apply");
        let err = tree.check(&pages).expect_err("broken");
        let Error::Corruption { offset, .. } = &err else {
            panic!("{err}");
        };
        assert_eq!(*offset, leaf.0 * 4096);
        assert_eq!(corruption_what(err), "leaf next link is not the next leaf");
    }

    #[test]
    fn a_key_outside_its_separators_is_reported() {
        let (pages, tree) = two_level_tree();
        let leaf = super::super::walk::find_leaf(&pages, tree.root(), b"0100").expect("descend");
        pages
            .apply(PageOp::LeafPut {
                page: leaf,
                key: b"zzz".to_vec(),
                value: super::super::LeafValue::Inline(Vec::new()),
            })
            .expect("apply");
        let what = corruption_what(tree.check(&pages).expect_err("broken"));
        assert_eq!(what, "key at or above its parent's separator");
    }

    #[test]
    fn a_child_reachable_twice_is_reported() {
        let (pages, tree) = two_level_tree();
        let child = with_root_child(&pages, tree);
        pages
            .apply(PageOp::BranchInsert {
                page: tree.root(),
                key: b"zzzz".to_vec(),
                child,
            })
            .expect("apply");
        let what = corruption_what(tree.check(&pages).expect_err("broken"));
        assert_eq!(what, "page is reachable twice");
    }

    fn with_root_child(pages: &MemPages, tree: Tree) -> PageId {
        let page = pages.read(tree.root()).expect("read");
        NodeRef::parse(&page).expect("node").child(0)
    }

    #[test]
    fn a_short_overflow_chain_is_reported() {
        let (pages, tree) = two_level_tree();
        // Cut the chain of "big" after its first page.
        let log = pages.log();
        let first = log
            .iter()
            .find_map(|(_, op)| match op {
                PageOp::OverflowWrite { page, .. } => Some(*page),
                _ => None,
            })
            .expect("an overflow write");
        pages
            .apply(PageOp::OverflowWrite {
                page: first,
                next: PageId(0),
                data: vec![2; 4056],
            })
            .expect("apply");
        let what = corruption_what(tree.check(&pages).expect_err("broken"));
        assert_eq!(what, "overflow chain ends early");
    }
}
