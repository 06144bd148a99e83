//! Runs of a commit's writes that land in one leaf, applied with one read of the leaf and
//! one write guard for all of them, where one [`Tree::delete_at`] or [`Tree::put_at`] a key
//! took a read and a write guard each: [`Tree::delete_run_at`] (a retain, a range taken,
//! pops from a head) and [`Tree::put_run_at`] (a load in key order, puts that append).
//!
//! The caller gathers a run while [`Finger::covers`] the next key: then either the first key
//! is covered too and the whole run is in the finger's leaf, or the run holds one key.

use super::node::{self, LeafValue};
use super::tree::overflow_of;
use super::walk::with_node;
use super::{Finger, PageOp, Pages, Tree, merge, overflow};
use crate::Result;

impl Tree {
    /// Deletes `keys`, in ascending order, through `finger`, as one [`Tree::delete_at`] each
    /// would; returns how many were present.
    ///
    /// Requires: the keys ascend, and every key after the first is one the finger covered
    /// when the caller looked ([`Finger::covers`]): then either the first is covered too and
    /// all are in the finger's leaf, or `keys` holds the first alone. Asserted.
    pub fn delete_run_at<P: Pages>(
        self,
        pages: &P,
        keys: &[&[u8]],
        finger: &mut Finger,
    ) -> Result<usize> {
        let Some(&first) = keys.first() else {
            return Ok(0);
        };
        assert!(
            keys.len() == 1 || finger.covers(self.root(), first),
            "a run of deletes whose first key is outside the finger's leaf"
        );
        assert!(
            finger.tracked,
            "a run of deletes through an untracked finger"
        );
        assert!(
            keys.windows(2).all(|pair| pair[0] < pair[1]),
            "a run of deletes out of key order"
        );
        let mut at = self.finger_at(pages, first, finger)?;
        let leaf = at.leaf;
        // Ascending keys, the first and the last in the leaf's range: all of them are.
        assert!(
            keys.len() == 1 || at.covers(keys[keys.len() - 1]),
            "a run of deletes past the range of leaf {leaf}"
        );
        // The keys present, the overflow chains their values own, and the leaf's fill after
        // all of them go: one read.
        let mut overflows = Vec::new();
        let (found, underfull) = with_node(pages, leaf, |node| {
            let mut found = Vec::with_capacity(keys.len());
            let mut live = node.live_bytes();
            let mut from = 0;
            for &key in keys {
                // Ascending keys: each search starts where the last one ended.
                match node.search_from(key, from) {
                    Ok(index) => {
                        live -= node.cell(index).len() + node::SLOT_BYTES;
                        overflows.extend(overflow_of(node.value(index)));
                        found.push(key);
                        from = index + 1;
                    }
                    Err(index) => from = index,
                }
            }
            (found, node::is_underfull_at(live, node.usable_bytes()))
        })?;
        let present = found.len();
        if present > 0 {
            let ops = found
                .into_iter()
                .map(|key| PageOp::LeafDelete {
                    page: leaf,
                    key: key.to_vec(),
                })
                .collect();
            pages.apply_run(ops)?;
            for (first, len) in overflows {
                overflow::free(pages, first, len)?;
            }
        }
        // As one delete: a leaf still a quarter full keeps the finger; one left under-full
        // owes its rebalance to when the finger leaves it; the root is rebalanced at once.
        if present == 0 || (leaf != self.root() && !underfull) {
            finger.at = Some(at);
        } else if leaf != self.root() {
            at.pending = true;
            finger.at = Some(at);
        } else {
            merge::rebalance(pages, self.root(), at.path, leaf)?;
        }
        Ok(present)
    }

    /// Puts the longest prefix of `entries` (ascending keys, inline values) that fits in
    /// the finger's leaf beside what it holds, as one [`Tree::put_at`] each would (no split);
    /// returns how many it put and how many of those keys held a value. The caller puts the
    /// rest one at a time (the first of them splits the leaf).
    ///
    /// Requires: as [`Tree::delete_run_at`], and every value inline
    /// ([`super::Limits::is_inline`]). Asserted.
    pub fn put_run_at<P: Pages>(
        self,
        pages: &P,
        entries: &[(&[u8], &[u8])],
        finger: &mut Finger,
    ) -> Result<(usize, usize)> {
        let Some(&(first, _)) = entries.first() else {
            return Ok((0, 0));
        };
        let limits = pages.limits();
        assert!(finger.tracked, "a run of puts through an untracked finger");
        assert!(
            entries.len() == 1 || finger.covers(self.root(), first),
            "a run of puts whose first key is outside the finger's leaf"
        );
        assert!(
            entries.windows(2).all(|pair| pair[0].0 < pair[1].0),
            "a run of puts out of key order"
        );
        for &(key, value) in entries {
            limits.check_key(key)?;
            limits.check_value(value)?;
            assert!(
                limits.is_inline(key.len(), value.len()),
                "a run of puts with a value stored apart"
            );
        }
        let at = self.finger_at(pages, first, finger)?;
        let leaf = at.leaf;
        assert!(
            entries.len() == 1 || at.covers(entries[entries.len() - 1].0),
            "a run of puts past the range of leaf {leaf}"
        );
        // How many fit, the keys that held a value, and the overflow chains their old values
        // own: one read, the leaf's live bytes counted as each put would change them.
        let mut overflows = Vec::new();
        let (fit, existed) = with_node(pages, leaf, |node| {
            let mut live = node.live_bytes();
            let mut from = 0;
            let mut existed = 0;
            let mut fit = 0;
            for &(key, value) in entries {
                let cell = node::LEAF_CELL_HEADER_BYTES + key.len() + value.len();
                let found = node.search_from(key, from);
                let after = match found {
                    Ok(index) => live - node.cell(index).len() + cell,
                    Err(_) => live + cell + node::SLOT_BYTES,
                };
                if after > node.usable_bytes() {
                    break;
                }
                match found {
                    Ok(index) => {
                        overflows.extend(overflow_of(node.value(index)));
                        existed += 1;
                        from = index + 1;
                    }
                    Err(index) => from = index,
                }
                live = after;
                fit += 1;
            }
            (fit, existed)
        })?;
        if fit > 0 {
            let ops = entries[..fit]
                .iter()
                .map(|&(key, value)| PageOp::LeafPut {
                    page: leaf,
                    key: key.to_vec(),
                    value: LeafValue::Inline(value.to_vec()),
                })
                .collect();
            pages.apply_run(ops)?;
            for (first, len) in overflows {
                overflow::free(pages, first, len)?;
            }
        }
        finger.at = Some(at);
        Ok((fit, existed))
    }

    /// Puts every one of `entries` (ascending keys, inline values) through `finger`: the
    /// ones the finger's leaf covers that fit with one [`Tree::put_run_at`], the first that
    /// does not fit with one [`Tree::put_at`] (it splits the leaf), and so on from the next
    /// (after an append's split, in the new leaf: putting the rest of a run one at a time
    /// filled half of every run into the next leaf that way). Returns how many keys held a
    /// value.
    ///
    /// Requires: as [`Tree::put_run_at`].
    pub fn put_all_at<P: Pages>(
        self,
        pages: &P,
        entries: &[(&[u8], &[u8])],
        finger: &mut Finger,
    ) -> Result<usize> {
        let mut existed = 0;
        let mut rest = entries;
        while let Some(&(key, value)) = rest.first() {
            // The entries the finger's leaf covers (the first alone, when it does not: it
            // finds its leaf).
            let covered = if finger.covers(self.root(), key) {
                rest.partition_point(|&(k, _)| finger.covers(self.root(), k))
            } else {
                1
            };
            let (fit, held) = self.put_run_at(pages, &rest[..covered], finger)?;
            existed += held;
            rest = &rest[fit..];
            if fit == 0 {
                existed += usize::from(self.put_at(pages, key, value, finger)?);
                rest = &rest[1..];
            }
        }
        Ok(existed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btree::MemPages;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::ops::Bound;

    fn key(i: u16) -> Vec<u8> {
        format!("key{i:05}").into_bytes()
    }

    /// A value of one of a few sizes (`size` 0..4), the largest stored apart with `big`.
    fn value(i: u16, size: u8, big: bool) -> Vec<u8> {
        let len = match size % 4 {
            0 => 8,
            1 => 40,
            2 => 300,
            _ if big => 3000,
            _ => 120,
        };
        vec![u8::try_from(i % 251).expect("small"); len]
    }

    /// A run being gathered, as the commit gathers one: writes of one kind in the leaf the
    /// finger holds.
    #[derive(Default)]
    struct Run {
        entries: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    }

    impl Run {
        /// Applies the run as `WriteRun::apply` does; returns the rows gained (or lost).
        fn apply(&mut self, tree: Tree, pages: &MemPages, finger: &mut Finger) -> i64 {
            let Some((_, first)) = self.entries.first() else {
                return 0;
            };
            let count = |n: usize| i64::try_from(n).expect("small");
            let delta = if first.is_some() {
                let entries: Vec<(&[u8], &[u8])> = self
                    .entries
                    .iter()
                    .map(|(k, v)| (k.as_slice(), v.as_deref().expect("a put")))
                    .collect();
                let existed = tree.put_all_at(pages, &entries, finger).expect("puts");
                count(entries.len()) - count(existed)
            } else {
                let keys: Vec<&[u8]> = self.entries.iter().map(|(k, _)| k.as_slice()).collect();
                -count(
                    tree.delete_run_at(pages, &keys, finger)
                        .expect("delete run"),
                )
            };
            self.entries.clear();
            delta
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        /// Writes in key order applied as a commit applies them (a put or delete joins the
        /// run of its kind while the finger covers it, else the run goes and the write goes
        /// alone; a value stored apart applies the run first and goes alone) leave the tree
        /// the map the same writes leave, valid, and the rows the runs count gained or lost
        /// are the map's. Values of several sizes: replaced by larger and smaller ones, runs
        /// that fill their leaf (the rest goes one put at a time), and values stored apart
        /// (their chains freed when replaced or deleted).
        #[test]
        fn runs_of_writes_leave_the_tree_a_map_of_the_same_writes_leaves(
            loaded in proptest::collection::btree_map(0u16..2000, 0u8..4, 0..600),
            writes in proptest::collection::btree_map(0u16..2000, proptest::option::of(0u8..4), 0..600),
            big in any::<bool>(),
        ) {
            let pages = MemPages::new(4096);
            let limits = pages.limits();
            let tree = Tree::create(&pages).expect("create");
            let mut model = BTreeMap::new();
            for (&i, &size) in &loaded {
                tree.put(&pages, &key(i), &value(i, size, big)).expect("put");
                model.insert(key(i), value(i, size, big));
            }
            let before = i64::try_from(model.len()).expect("small");
            let mut finger = Finger::default();
            let mut run = Run::default();
            let mut delta = 0i64;
            for (&i, &write) in &writes {
                let k = key(i);
                let v = write.map(|size| value(i, size, big));
                match &v {
                    Some(v) => model.insert(k.clone(), v.clone()),
                    None => model.remove(&k),
                };
                if v.as_ref().is_some_and(|v| !limits.is_inline(k.len(), v.len())) {
                    delta += run.apply(tree, &pages, &mut finger);
                    let existed = tree.put_at(&pages, &k, v.as_deref().expect("a put"), &mut finger).expect("put");
                    delta += 1 - i64::from(existed);
                    continue;
                }
                let same_kind = run.entries.first().is_none_or(|(_, w)| w.is_some() == v.is_some());
                if !same_kind || !finger.covers(tree.root(), &k) {
                    delta += run.apply(tree, &pages, &mut finger);
                    if !finger.covers(tree.root(), &k) {
                        run.entries.push((k, v));
                        delta += run.apply(tree, &pages, &mut finger);
                        continue;
                    }
                }
                run.entries.push((k, v));
            }
            delta += run.apply(tree, &pages, &mut finger);
            tree.settle(&pages, &mut finger).expect("settle");
            prop_assert_eq!(before + delta, i64::try_from(model.len()).expect("small"));
            let stats = tree.check(&pages).expect("a valid tree");
            prop_assert_eq!(stats.keys, model.len() as u64);
            // No page lost: every live page is the tree's (a replaced or deleted value's
            // chain freed).
            pages.check_invariants();
            prop_assert_eq!(pages.live_pages() as u64, stats.pages());
            let got: Vec<(Vec<u8>, Vec<u8>)> = tree
                .scan(&pages, Bound::Unbounded, Bound::Unbounded, crate::btree::Direction::Forward)
                .map(|entry| entry.expect("scan"))
                .collect();
            let want: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
            prop_assert_eq!(got, want);
        }
    }
}
