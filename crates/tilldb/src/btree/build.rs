//! Filling an empty tree from entries in key order, bottom up: each leaf is built whole and
//! logged as one image, then each level of branches over the one below, the top one in the
//! root's page (a root keeps its id).
//!
//! ```text
//!  entries in key order   ops, in order
//!  ---------------------  -------------------------------------------------------------------
//!  cells until a leaf     Format L1 (allocate), then, once the next leaf is allocated,
//!  is full                Image L1 (prev 0, next L2); Image L2 ...; the last: next 0
//!  one leaf in all        Image root (the leaf itself)
//!  a level of branches    Format B1, Image B1 (leftmost child, separators and children) ...
//!  the top node           Image root (a branch over the level below)
//! ```
//!
//! Why: a commit into a table it created or found empty (a bulk load) applied each write as
//! one put: a descent, a search, an op and its copies per row, and a split per leaf. Built
//! whole, a leaf costs one copy of each cell and one op. Leaves are filled to
//! [`LEAF_FILL_PERCENT`] of their space, branches completely; separators are the shortest
//! prefix of the right leaf's first key above the left's last key, as a split makes them.
//!
//! Requires: the tree empty, the entries strictly increasing, each key and value within
//! [`Limits`] (a value too large for a cell goes to an overflow chain, as a put does).

use super::node::{self, LeafValue, NodeKind};
use super::split::separator;
use super::walk::with_node;
use super::{Limits, PageOp, Pages, node_mut, overflow};
use crate::Result;
use crate::page::PageId;

/// How full a leaf is built, in percent of its usable bytes: the rest is room for the keys
/// inserted later between its keys, before it must split (as PostgreSQL builds its B-tree
/// indexes 90 % full). Built full, every leaf split at the first insert after a bulk load: a
/// random one-row durable commit then logged a new page and waited for its allocation, at
/// 3,240-4,863 commits/s after a 1,000,000-row load against 7,819-8,605 with room
/// (docs/benchmarks-journal.md, "Leaves built with room").
pub const LEAF_FILL_PERCENT: usize = 90;

/// Cells of the node being built, back to back, with their ends.
#[derive(Default)]
struct Cells {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Cells {
    /// Bytes the cells and their slots take in a node.
    fn node_bytes(&self) -> usize {
        self.bytes.len() + self.ends.len() * node::SLOT_BYTES
    }

    fn push(&mut self, cell: &[u8]) {
        self.bytes.extend_from_slice(cell);
        self.ends.push(self.bytes.len());
    }

    fn slices(&self) -> Vec<&[u8]> {
        let mut start = 0;
        self.ends
            .iter()
            .map(|&end| {
                let cell = &self.bytes[start..end];
                start = end;
                cell
            })
            .collect()
    }

    fn last_key(&self, kind: NodeKind) -> Option<&[u8]> {
        let end = *self.ends.last()?;
        let start = self.ends.len().checked_sub(2).map_or(0, |i| self.ends[i]);
        Some(node::cell_key(kind, &self.bytes[start..end]))
    }

    /// Removes the last cell of a branch: (its separator, its child).
    fn pop_branch_cell(&mut self) -> (Vec<u8>, PageId) {
        let end = self.ends.pop().expect("a branch cell to move");
        let start = self.ends.last().copied().unwrap_or(0);
        let cell = &self.bytes[start..end];
        let moved = (
            node::cell_key(NodeKind::Branch, cell).to_vec(),
            node::branch_cell_child(cell),
        );
        self.bytes.truncate(start);
        moved
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }
}

/// Fills the empty tree whose root is `root` with `entries` (key, value), in strictly
/// increasing key order ([`Filler`], fed from an iterator).
/// `between` runs after each full leaf is logged and before each overflow value is stored
/// (the caller may cut a commit part there).
/// Returns how many entries it put.
pub fn fill_empty<'e, P: Pages>(
    root: PageId,
    pages: &P,
    entries: impl IntoIterator<Item = (&'e [u8], &'e [u8])>,
    mut between: impl FnMut() -> Result<()>,
) -> Result<u64> {
    let mut filler = Filler::new(root, pages)?;
    for (key, value) in entries {
        filler.push(key, value, &mut between)?;
    }
    filler.finish()
}

/// An empty tree being filled, one entry at a time in strictly increasing key order: what
/// [`fill_empty`] does, for a caller whose entries are not an iterator of borrowed slices
/// (a commit's writes read back from its spilled runs, `db/write_set/`).
pub struct Filler<'p, P: Pages> {
    pages: &'p P,
    root: PageId,
    limits: Limits,
    leaf: Cells,
    /// The leaf being built: its page once the one before is logged (`None`: the first).
    leaf_page: Option<PageId>,
    prev: PageId,
    /// The level above: each leaf's page with the separator to its left (none for the first).
    children: Vec<(Option<Vec<u8>>, PageId)>,
    count: u64,
    last: Vec<u8>,
}

impl<P: Pages> std::fmt::Debug for Filler<'_, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Filler(root {}, {} entries)", self.root, self.count)
    }
}

impl<'p, P: Pages> Filler<'p, P> {
    /// Starts filling the tree whose root is `root`, which must be empty.
    pub fn new(root: PageId, pages: &'p P) -> Result<Self> {
        let empty = with_node(pages, root, |node| {
            node.kind() == NodeKind::Leaf && node.count() == 0
        })?;
        assert!(empty, "fill_empty of a tree that holds keys");
        Ok(Filler {
            pages,
            root,
            limits: pages.limits(),
            leaf: Cells::default(),
            leaf_page: None,
            prev: PageId(0),
            children: Vec::new(),
            count: 0,
            last: Vec::new(),
        })
    }

    /// Adds `key` (above every key added before) with `value`. `between` as for
    /// [`fill_empty`].
    pub fn push(
        &mut self,
        key: &[u8],
        value: &[u8],
        mut between: impl FnMut() -> Result<()>,
    ) -> Result<()> {
        let (pages, limits) = (self.pages, &self.limits);
        limits.check_key(key)?;
        limits.check_value(value)?;
        assert!(
            self.count == 0 || self.last.as_slice() < key,
            "fill_empty: keys out of order"
        );
        let value = if limits.is_inline(key.len(), value.len()) {
            LeafValue::Inline(value.to_vec())
        } else {
            // An overflow chain changes pages of its own: a part may end before it too.
            between()?;
            LeafValue::Overflow {
                len: u32::try_from(value.len()).expect("checked against VALUE_BYTES_MAX"),
                first: overflow::store(pages, value)?,
            }
        };
        let cell = node::encode_leaf_cell(key, &value);
        let fill_bytes = limits.usable_bytes * LEAF_FILL_PERCENT / 100;
        if self.leaf.node_bytes() + cell.len() + node::SLOT_BYTES > fill_bytes {
            // Filled: log it, linked to the next, which gets its page now.
            let page = match self.leaf_page {
                Some(page) => page,
                None => pages.allocate(NodeKind::Leaf.page_kind())?,
            };
            let next = pages.allocate(NodeKind::Leaf.page_kind())?;
            self.log_leaf(page, self.prev, next)?;
            let left_last = self.leaf.last_key(NodeKind::Leaf).expect("a full leaf");
            let separator = separator(left_last, key);
            if self.children.is_empty() {
                self.children.push((None, page));
            }
            self.children.push((Some(separator), next));
            self.prev = page;
            self.leaf_page = Some(next);
            self.leaf.clear();
            between()?;
        }
        self.leaf.push(&cell);
        self.last.clear();
        self.last.extend_from_slice(key);
        self.count += 1;
        Ok(())
    }

    /// Logs the last leaf and the branches over the leaves; returns how many entries were
    /// added.
    pub fn finish(self) -> Result<u64> {
        match self.leaf_page {
            // One leaf in all: the root's page holds it.
            None => self.log_leaf(self.root, PageId(0), PageId(0))?,
            Some(page) => {
                self.log_leaf(page, self.prev, PageId(0))?;
                fill_branches(self.pages, &self.limits, self.root, self.children)?;
            }
        }
        Ok(self.count)
    }

    /// Logs the leaf being built as `page`, linked to `prev` and `next`.
    fn log_leaf(&self, page: PageId, prev: PageId, next: PageId) -> Result<()> {
        image(
            self.pages,
            &self.limits,
            NodeKind::Leaf,
            page,
            prev,
            next,
            &self.leaf,
        )
    }
}

/// Builds the levels of branches over `children` (each with the separator to its left; the
/// first has none), the top one in `root`'s page.
fn fill_branches<P: Pages>(
    pages: &P,
    limits: &Limits,
    root: PageId,
    mut children: Vec<(Option<Vec<u8>>, PageId)>,
) -> Result<()> {
    loop {
        assert!(children.len() >= 2, "a level of branches over one child");
        let mut level: Vec<(Option<Vec<u8>>, PageId)> = Vec::new();
        let mut cells = Cells::default();
        let mut leftmost = children[0].1;
        // The separator to the left of the branch being built.
        let mut left_separator: Option<Vec<u8>> = None;
        let mut nodes: Vec<(Option<Vec<u8>>, PageId, Cells)> = Vec::new();
        for (separator, child) in children.drain(..).skip(1) {
            let separator = separator.expect("every child but the first has a separator");
            let cell = node::encode_branch_cell(&separator, child);
            if cells.node_bytes() + cell.len() + node::SLOT_BYTES > limits.usable_bytes {
                // Full: this separator moves up, and `child` leads the next branch.
                nodes.push((left_separator.take(), leftmost, std::mem::take(&mut cells)));
                left_separator = Some(separator);
                leftmost = child;
                continue;
            }
            cells.push(&cell);
        }
        nodes.push((left_separator, leftmost, cells));
        // A branch holds one key at least: a last branch left with its leftmost child alone
        // takes the previous branch's last child, whose separator moves up in its place.
        if nodes.len() >= 2
            && nodes
                .last()
                .is_some_and(|(_, _, cells)| cells.ends.is_empty())
        {
            let (separator, leftmost, _) = nodes.pop().expect("two");
            let (_, _, before) = nodes.last_mut().expect("two");
            let (moved_separator, moved_child) = before.pop_branch_cell();
            let mut cells = Cells::default();
            cells.push(&node::encode_branch_cell(
                &separator.expect("a branch after the first has a separator"),
                leftmost,
            ));
            nodes.push((Some(moved_separator), moved_child, cells));
        }
        if nodes.len() == 1 {
            let (_, leftmost, cells) = nodes.pop().expect("one");
            return image(
                pages,
                limits,
                NodeKind::Branch,
                root,
                leftmost,
                PageId(0),
                &cells,
            );
        }
        for (separator, leftmost, cells) in nodes {
            let page = pages.allocate(NodeKind::Branch.page_kind())?;
            image(
                pages,
                limits,
                NodeKind::Branch,
                page,
                leftmost,
                PageId(0),
                &cells,
            )?;
            level.push((separator, page));
        }
        children = level;
    }
}

/// Logs `page` as a node of `kind` holding `cells`, with its links (a leaf: previous and
/// next; a branch: its leftmost child, and 0).
fn image<P: Pages>(
    pages: &P,
    limits: &Limits,
    kind: NodeKind,
    page: PageId,
    link_low: PageId,
    link_high: PageId,
    cells: &Cells,
) -> Result<()> {
    pages.apply(PageOp::Image {
        page,
        kind: kind.page_kind(),
        body: node_mut::build(kind, limits, link_low, link_high, &cells.slices()),
    })
}
