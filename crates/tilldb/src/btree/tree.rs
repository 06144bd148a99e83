//! [`Tree`]: a B+tree named by its root page; lookups, inserts and deletes.
//!
//! A write descends from the root, remembering the path, decides what to change from copies of
//! the bytes it read, and only then applies ops (no guard is alive during an apply). An insert
//! that does not fit splits (`split.rs`); a delete that leaves a node under a quarter full
//! merges it into a sibling when both fit in one page (`merge.rs`).

use super::cursor::{Cursor, Direction};
use super::node::{self, LeafValue, NodeKind, ValueRef};
use super::walk::{self, resolve, with_node};
use super::{PageOp, Pages, TreeStats, check, merge, overflow, split};
use crate::Result;
use crate::page::{PageId, PageKind};
use std::ops::Bound;

/// A B+tree, named by its root page, which never changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tree {
    root: PageId,
}

impl Tree {
    /// Creates an empty tree: one empty leaf, its root.
    pub fn create<P: Pages>(pages: &P) -> Result<Tree> {
        let root = pages.allocate(PageKind::Leaf)?;
        Ok(Tree { root })
    }

    /// The tree whose root is `root` (as stored in a catalog).
    #[must_use]
    pub fn open(root: PageId) -> Tree {
        assert!(root.0 != 0, "page 0 is never a root");
        Tree { root }
    }

    /// The root page id.
    #[must_use]
    pub fn root(self) -> PageId {
        self.root
    }

    /// True when the tree holds no key: its root is an empty leaf. (A tree emptied by
    /// deletes may keep a branch root over empty leaves: false then, which callers must
    /// take as "maybe not empty".)
    pub fn is_empty<P: Pages>(self, pages: &P) -> Result<bool> {
        with_node(pages, self.root, |node| {
            node.kind() == NodeKind::Leaf && node.count() == 0
        })
    }

    /// The value of `key`, if present.
    pub fn get<P: Pages>(self, pages: &P, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let found = walk::with_leaf(pages, self.root, key, |node| {
            node.search(key)
                .ok()
                .map(|index| node.value(index).to_owned())
        })?;
        found.map(|value| resolve(pages, value)).transpose()
    }

    /// Calls `f` with the value of `key`, where it lies: an inline value in its leaf (no copy),
    /// an overflow value once read into one buffer. `None`, and `f` not called, when absent.
    pub fn get_with<P: Pages, R>(
        self,
        pages: &P,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>> {
        let mut f = Some(f);
        let found = walk::with_leaf(pages, self.root, key, |node| {
            node.search(key).ok().map(|index| match node.value(index) {
                ValueRef::Inline(value) => Ok(f.take().expect("called once")(value)),
                overflow @ ValueRef::Overflow { .. } => Err(overflow.to_owned()),
            })
        })?;
        match found {
            None => Ok(None),
            Some(Ok(read)) => Ok(Some(read)),
            Some(Err(overflow)) => {
                let value = resolve(pages, overflow)?;
                Ok(Some(f.take().expect("not called yet")(&value)))
            }
        }
    }

    /// Sets `key` to `value`, inserting or replacing. Returns whether it replaced a value.
    ///
    /// Keys longer than [`Limits::key_bytes_max`] are refused with `TooLarge`, before anything
    /// changes. An I/O error from the pages may leave the tree half changed; the engine then
    /// stops and recovers from the log.
    pub fn put<P: Pages>(self, pages: &P, key: &[u8], value: &[u8]) -> Result<bool> {
        self.put_at(pages, key, value, &mut Finger::untracked())
    }

    /// [`Tree::put`], starting at the leaf `finger` holds when that leaf's key range holds
    /// `key`, and leaving it on the leaf this put changed (cleared by a split). For a run of
    /// puts in key order (a commit applies its writes so): most of them land in the leaf the
    /// last one did, and skip the descent from the root. The finger must be this tree's, and
    /// nothing but puts through it may change the tree while it is kept
    /// ([`Tree::delete`] does not keep it: clear it around one).
    pub fn put_at<P: Pages>(
        self,
        pages: &P,
        key: &[u8],
        value: &[u8],
        finger: &mut Finger,
    ) -> Result<bool> {
        Ok(self.put_inner(pages, key, value, finger, false)?.0)
    }

    /// [`Tree::put_at`], returning the value `key` held before (read from the leaf the put
    /// changes: one descent where a lookup and a put took two).
    pub fn put_keeping<P: Pages>(
        self,
        pages: &P,
        key: &[u8],
        value: &[u8],
        finger: &mut Finger,
    ) -> Result<Option<Vec<u8>>> {
        Ok(self.put_inner(pages, key, value, finger, true)?.1)
    }

    /// A put; with `keep`, the old value too (else `None`).
    fn put_inner<P: Pages>(
        self,
        pages: &P,
        key: &[u8],
        value: &[u8],
        finger: &mut Finger,
        keep: bool,
    ) -> Result<(bool, Option<Vec<u8>>)> {
        let limits = pages.limits();
        limits.check_key(key)?;
        limits.check_value(value)?;
        let mut at = self.finger_at(pages, key, finger)?;
        let leaf = at.leaf;
        let inline = limits.is_inline(key.len(), value.len());
        let cell_bytes = if inline {
            node::LEAF_CELL_HEADER_BYTES + key.len() + value.len()
        } else {
            node::LEAF_OVERFLOW_CELL_OVERHEAD + key.len()
        };
        assert!(
            cell_bytes <= limits.cell_bytes_max,
            "cell of {cell_bytes} bytes"
        );
        // What the key holds now, and whether the new cell fits beside the others.
        let (old, fits, kept) = with_node(pages, leaf, |node| match node.search(key) {
            Ok(index) => (
                Some(overflow_of(node.value(index))),
                cell_bytes <= node.free_bytes() + node.cell(index).len(),
                keep.then(|| node.value(index).to_owned()),
            ),
            Err(_) => (
                None,
                cell_bytes + node::SLOT_BYTES <= node.free_bytes(),
                None,
            ),
        })?;
        // The old value whole (an overflow chain read) before anything changes.
        let kept = kept.map(|value| resolve(pages, value)).transpose()?;
        let new_value = if inline {
            LeafValue::Inline(value.to_vec())
        } else {
            LeafValue::Overflow {
                len: u32::try_from(value.len()).expect("checked against VALUE_BYTES_MAX"),
                first: overflow::store(pages, value)?,
            }
        };
        assert_eq!(node::leaf_cell_bytes(key.len(), &new_value), cell_bytes);
        if fits {
            pages.apply(PageOp::LeafPut {
                page: leaf,
                key: key.to_vec(),
                value: new_value,
            })?;
            if finger.tracked {
                finger.at = Some(at);
            }
        } else {
            // An under-full leaf has room for any cell, so it never splits; were one to, the
            // rebalance it owed would be dropped, which leaves a node under-full (allowed: a
            // merge that does not fit leaves one so) and the tree valid.
            at.pending = false;
            split::split_leaf(pages, self.root, at.path, leaf, key, new_value)?;
        }
        if let Some(Some((first, len))) = old {
            overflow::free(pages, first, len)?;
        }
        Ok((old.is_some(), kept))
    }

    /// Removes `key`. Returns whether it was present.
    pub fn delete<P: Pages>(self, pages: &P, key: &[u8]) -> Result<bool> {
        Ok(self
            .delete_inner(pages, key, &mut Finger::untracked(), false)?
            .0)
    }

    /// [`Tree::delete`] through `finger` (as [`Tree::put_at`]; kept unless the delete
    /// merges), returning the value `key` held (`None`: it was absent, nothing changed).
    pub fn delete_keeping<P: Pages>(
        self,
        pages: &P,
        key: &[u8],
        finger: &mut Finger,
    ) -> Result<Option<Vec<u8>>> {
        Ok(self.delete_inner(pages, key, finger, true)?.1)
    }

    /// [`Tree::delete`] through `finger` (as [`Tree::put_at`]): whether `key` was present.
    pub fn delete_at<P: Pages>(self, pages: &P, key: &[u8], finger: &mut Finger) -> Result<bool> {
        Ok(self.delete_inner(pages, key, finger, false)?.0)
    }

    /// A delete; with `keep`, the old value too (else `None`).
    fn delete_inner<P: Pages>(
        self,
        pages: &P,
        key: &[u8],
        finger: &mut Finger,
        keep: bool,
    ) -> Result<(bool, Option<Vec<u8>>)> {
        let mut at = self.finger_at(pages, key, finger)?;
        let leaf = at.leaf;
        // The leaf's fill after the delete, from its header and the cell's size: one read of
        // the leaf a delete, not a second after the change.
        let old = with_node(pages, leaf, |node| {
            node.search(key).ok().map(|index| {
                let live_after = node.live_bytes() - node.cell(index).len() - node::SLOT_BYTES;
                (
                    overflow_of(node.value(index)),
                    keep.then(|| node.value(index).to_owned()),
                    node::is_underfull_at(live_after, node.usable_bytes()),
                )
            })
        })?;
        let Some((old_overflow, kept, underfull)) = old else {
            if finger.tracked {
                finger.at = Some(at);
            }
            return Ok((false, None));
        };
        let kept = kept.map(|value| resolve(pages, value)).transpose()?;
        pages.apply(PageOp::LeafDelete {
            page: leaf,
            key: key.to_vec(),
        })?;
        if let Some((first, len)) = old_overflow {
            overflow::free(pages, first, len)?;
        }
        // A leaf still at least a quarter full is not merged: the finger stays on it. One
        // left under-full is rebalanced once the writes leave it (a tracked finger): a run of
        // deletes that empties a leaf (a queue taken from its head, a retain) merged it
        // again at each delete after the first under-full one, copying its sibling each time;
        // now an emptied leaf is unlinked, and one left under-full merged once.
        if leaf != self.root && !underfull {
            if finger.tracked {
                finger.at = Some(at);
            }
        } else if leaf != self.root && finger.tracked {
            at.pending = true;
            finger.at = Some(at);
        } else {
            merge::rebalance(pages, self.root, at.path, leaf)?;
        }
        Ok((true, kept))
    }

    /// The leaf `finger` holds when its range covers `key`, else (after the rebalance the
    /// finger's leaf owes) a descent to `key`'s leaf.
    pub(super) fn finger_at<P: Pages>(
        self,
        pages: &P,
        key: &[u8],
        finger: &mut Finger,
    ) -> Result<FingerAt> {
        match finger.at.take() {
            Some(at) if at.root == self.root && at.covers(key) => Ok(at),
            held => {
                if let Some(at) = held {
                    self.settle_at(pages, at)?;
                }
                FingerAt::descend(pages, self.root, key, finger.tracked)
            }
        }
    }

    /// Makes the rebalance `finger`'s leaf owes, if it owes one, and clears the finger: after
    /// the last write through it (a commit does so at the end of each table's writes).
    pub fn settle<P: Pages>(self, pages: &P, finger: &mut Finger) -> Result<()> {
        match finger.at.take() {
            Some(at) => self.settle_at(pages, at),
            None => Ok(()),
        }
    }

    fn settle_at<P: Pages>(self, pages: &P, at: FingerAt) -> Result<()> {
        if at.pending && at.root == self.root {
            merge::rebalance(pages, self.root, at.path, at.leaf)?;
        }
        Ok(())
    }

    /// The entries with keys between `lower` and `upper`, in `direction`.
    pub fn scan<'p, P: Pages>(
        self,
        pages: &'p P,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> Cursor<'p, P> {
        Cursor::new(
            pages,
            self.root,
            lower.map(<[u8]>::to_vec),
            upper.map(<[u8]>::to_vec),
            direction,
        )
    }

    /// The entries whose keys start with `prefix`, in `direction`.
    pub fn scan_prefix<'p, P: Pages>(
        self,
        pages: &'p P,
        prefix: &[u8],
        direction: Direction,
    ) -> Cursor<'p, P> {
        let upper = prefix_end(prefix).map_or(Bound::Unbounded, Bound::Excluded);
        Cursor::new(
            pages,
            self.root,
            Bound::Included(prefix.to_vec()),
            upper,
            direction,
        )
    }

    /// Frees every page of the tree, its root and overflow pages included. The tree must not
    /// be used afterwards. The whole tree is checked first, so a corrupt tree frees nothing.
    pub fn destroy<P: Pages>(self, pages: &P) -> Result<()> {
        self.check(pages)?;
        let mut doomed = Vec::new();
        let mut stack = vec![self.root];
        while let Some(id) = stack.pop() {
            doomed.push(id);
            let (children, chains) = with_node(pages, id, |node| match node.kind() {
                NodeKind::Branch => ((0..=node.count()).map(|i| node.child(i)).collect(), vec![]),
                NodeKind::Leaf => (
                    Vec::new(),
                    (0..node.count())
                        .filter_map(|i| overflow_of(node.value(i)))
                        .collect::<Vec<_>>(),
                ),
            })?;
            stack.extend(children);
            for (first, len) in chains {
                overflow::walk(pages, first, u64::from(len), |page, _| {
                    doomed.push(page);
                    Ok(())
                })?;
            }
        }
        for id in doomed {
            pages.free(id)?;
        }
        Ok(())
    }

    /// Checks every invariant of the tree (see `check.rs`), returning its statistics.
    pub fn check<P: Pages>(self, pages: &P) -> Result<TreeStats> {
        check::check(pages, self.root)
    }
}

/// The overflow chain of a value, if it has one.
pub(super) fn overflow_of(value: ValueRef<'_>) -> Option<(PageId, u32)> {
    match value {
        ValueRef::Inline(_) => None,
        ValueRef::Overflow { len, first } => Some((first, len)),
    }
}

/// Where a run of puts last landed (see [`Tree::put_at`]).
#[derive(Debug)]
pub struct Finger {
    pub(super) at: Option<FingerAt>,
    /// Whether it keeps the leaf (a lone put's does not: no separators copied).
    pub(super) tracked: bool,
}

impl Default for Finger {
    fn default() -> Self {
        Finger {
            at: None,
            tracked: true,
        }
    }
}

impl Finger {
    /// Whether the leaf the finger holds (if any, of the tree rooted at `root`) is where `key`
    /// belongs: a run of writes gathers the keys it covers for one [`Tree::delete_run_at`] or
    /// [`Tree::put_run_at`].
    #[must_use]
    pub fn covers(&self, root: PageId, key: &[u8]) -> bool {
        self.at
            .as_ref()
            .is_some_and(|at| at.root == root && at.covers(key))
    }

    fn untracked() -> Self {
        Finger {
            at: None,
            tracked: false,
        }
    }

    /// Forgets the leaf: the next put descends from the root.
    pub fn clear(&mut self) {
        self.at = None;
    }
}

/// A leaf, the path to it, and the key range it holds: `low <= key < high` (a missing
/// bound: open on that side), the separators beside the path's innermost branches.
#[derive(Debug)]
pub(super) struct FingerAt {
    pub(super) root: PageId,
    pub(super) path: walk::Path,
    pub(super) leaf: PageId,
    low: Option<Vec<u8>>,
    high: Option<Vec<u8>>,
    /// A delete left the leaf under-full and its rebalance is owed: made when the finger
    /// leaves the leaf, or by [`Tree::settle`] (see [`Tree::delete_keeping`]).
    pub(super) pending: bool,
}

impl FingerAt {
    /// Descends to `key`'s leaf; with `fences`, keeps the range it holds.
    fn descend<P: Pages>(pages: &P, root: PageId, key: &[u8], fences: bool) -> Result<FingerAt> {
        let (mut low, mut high) = (None, None);
        let (path, leaf) = walk::descend_by(pages, root, |node| {
            let index = node.child_index(key);
            if !fences {
                return index;
            }
            // Child `index` holds the keys from separator `index - 1` up to separator
            // `index`: the innermost branch with a separator on a side bounds that side.
            if index > 0 {
                low = Some(node.key(index - 1).to_vec());
            }
            if index < node.count() {
                high = Some(node.key(index).to_vec());
            }
            index
        })?;
        Ok(FingerAt {
            root,
            path,
            leaf,
            low,
            high,
            pending: false,
        })
    }

    pub(super) fn covers(&self, key: &[u8]) -> bool {
        self.low.as_deref().is_none_or(|low| low <= key)
            && self.high.as_deref().is_none_or(|high| key < high)
    }
}

/// The smallest key above every key starting with `prefix`, or `None` when there is none (the
/// prefix is empty or all `0xFF`).
#[must_use]
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btree::MemPages;

    fn key(i: u32) -> Vec<u8> {
        format!("key{i:06}").into_bytes()
    }

    /// Long keys that differ only at the end, so separators are long and branches split.
    fn long_key(i: u32) -> Vec<u8> {
        format!("{}{i:06}", "x".repeat(190)).into_bytes()
    }

    #[test]
    fn put_get_delete_small() {
        let pages = MemPages::new(4096);
        let tree = Tree::create(&pages).expect("create");
        assert_eq!(tree.get(&pages, b"a").expect("get"), None);
        assert!(!tree.put(&pages, b"a", b"1").expect("put"));
        assert!(tree.put(&pages, b"a", b"2").expect("put"));
        assert!(!tree.put(&pages, b"", b"").expect("put"));
        assert_eq!(tree.get(&pages, b"a").expect("get"), Some(b"2".to_vec()));
        assert_eq!(tree.get(&pages, b"").expect("get"), Some(Vec::new()));
        assert!(tree.delete(&pages, b"a").expect("delete"));
        assert!(!tree.delete(&pages, b"a").expect("delete"));
        tree.check(&pages).expect("check");
    }

    #[test]
    fn many_keys_split_and_merge_back_to_one_leaf() {
        let pages = MemPages::new(4096);
        let tree = Tree::create(&pages).expect("create");
        for i in 0..3000 {
            tree.put(&pages, &long_key(i * 7919 % 3000), &[7; 40])
                .expect("put");
        }
        let stats = tree.check(&pages).expect("check");
        assert_eq!(stats.keys, 3000);
        assert!(stats.depth >= 3, "{stats:?}");
        for i in 0..3000 {
            assert_eq!(
                tree.get(&pages, &long_key(i)).expect("get"),
                Some(vec![7; 40])
            );
        }
        for i in 0..3000 {
            assert!(
                tree.delete(&pages, &long_key(i * 13 % 3000))
                    .expect("delete")
            );
        }
        let stats = tree.check(&pages).expect("check");
        assert_eq!(
            (stats.keys, stats.depth, stats.leaf_pages),
            (0, 1, 1),
            "{stats:?}"
        );
        assert_eq!(pages.live_pages(), 1, "every page but the root was freed");
    }

    #[test]
    fn root_id_never_changes() {
        let pages = MemPages::new(4096);
        let tree = Tree::create(&pages).expect("create");
        let root = tree.root();
        for i in 0..500 {
            tree.put(&pages, &key(i), &[1; 100]).expect("put");
        }
        assert_eq!(pages.read(root).expect("read").kind(), PageKind::Branch);
        assert_eq!(
            Tree::open(root).get(&pages, &key(42)).expect("get"),
            Some(vec![1; 100])
        );
    }

    #[test]
    fn destroy_frees_every_page() {
        let pages = MemPages::new(4096);
        let keep = Tree::create(&pages).expect("create");
        keep.put(&pages, b"kept", b"value").expect("put");
        let tree = Tree::create(&pages).expect("create");
        for i in 0..300 {
            tree.put(
                &pages,
                &long_key(i),
                &vec![3; usize::try_from(i).expect("small") * 20],
            )
            .expect("put");
        }
        assert!(tree.check(&pages).expect("check").depth >= 2);
        tree.destroy(&pages).expect("destroy");
        assert_eq!(pages.live_pages(), 1);
        assert_eq!(
            keep.get(&pages, b"kept").expect("get"),
            Some(b"value".to_vec())
        );
    }

    #[test]
    fn prefix_end_cases() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
        assert_eq!(prefix_end(b""), None);
    }

    /// Deletes through one finger in key order (as a commit applies its writes) that empty
    /// leaves at the head, in the middle and at the tail: each emptied leaf is unlinked
    /// (`merge::unlink_empty_leaf`), the last leaf left under-full is rebalanced by `settle`,
    /// and the tree is valid, holding exactly the keys left, in as many leaves as a tree
    /// built by puts of them alone would need at a quarter full.
    #[test]
    fn deletes_through_a_finger_unlink_emptied_leaves_and_settle_the_last() {
        let pages = MemPages::new(4096);
        let tree = Tree::create(&pages).expect("create");
        let n = 3000;
        for i in 0..n {
            tree.put(&pages, &key(i), &[7; 40]).expect("put");
        }
        let before = tree.check(&pages).expect("valid");
        let doomed =
            |i: u32| i < 1000 || (1400..1700).contains(&i) || i >= 2000 || i.is_multiple_of(3);
        let mut finger = Finger::default();
        for i in (0..n).filter(|&i| doomed(i)) {
            let old = tree
                .delete_keeping(&pages, &key(i), &mut finger)
                .expect("delete");
            assert_eq!(old, Some(vec![7; 40]), "key {i}");
        }
        tree.settle(&pages, &mut finger).expect("settle");
        assert!(finger.at.is_none(), "settle clears the finger");
        let after = tree.check(&pages).expect("a valid tree after the deletes");
        let left: Vec<u32> = (0..n).filter(|&i| !doomed(i)).collect();
        assert_eq!(after.keys, left.len() as u64);
        for i in 0..n {
            let got = tree.get(&pages, &key(i)).expect("get");
            assert_eq!(got.is_some(), !doomed(i), "key {i}");
        }
        // Every leaf left but one holds at least a quarter of a page (an under-full leaf
        // beside a full sibling may stay so; none is empty).
        let quarter = after.usable_bytes / after.pages().max(1) / 4;
        assert!(
            after.leaf_pages <= after.live_bytes / quarter + 2,
            "{} leaves for {} live bytes (before: {} leaves)",
            after.leaf_pages,
            after.live_bytes,
            before.leaf_pages
        );
    }
}
