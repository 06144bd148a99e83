//! [`Tree::delete_run_at`]: the deletes of a commit that land in one leaf, with one read of
//! the leaf and one write guard for all of them (a retain, a range taken, pops from a head),
//! where one [`Tree::delete_at`] a key took a read and a write guard each.

use super::node;
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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Writes in key order applied as a commit applies them (a delete joins the run while
        /// the finger covers it, else the run goes and the delete goes alone; a put applies
        /// the run first) leave the tree a map of the same writes leaves, valid, and the
        /// count of present keys each run returns is the map's. Values of either size: some
        /// overflow (their chains are freed with the delete).
        #[test]
        fn runs_of_deletes_leave_the_tree_a_map_of_the_same_writes_leaves(
            loaded in proptest::collection::btree_set(0u16..2000, 0..600),
            writes in proptest::collection::btree_map(0u16..2000, any::<Option<bool>>(), 0..600),
            big in any::<bool>(),
        ) {
            let pages = MemPages::new(4096);
            let tree = Tree::create(&pages).expect("create");
            let value = |i: u16| vec![u8::try_from(i % 251).expect("small"); if big && i.is_multiple_of(7) { 3000 } else { 40 }];
            let mut model = BTreeMap::new();
            for &i in &loaded {
                tree.put(&pages, &key(i), &value(i)).expect("put");
                model.insert(key(i), value(i));
            }
            let mut finger = Finger::default();
            let mut run: Vec<Vec<u8>> = Vec::new();
            let mut present = 0usize;
            let mut expected = 0usize;
            let flush = |run: &mut Vec<Vec<u8>>, finger: &mut Finger| {
                let keys: Vec<&[u8]> = run.iter().map(Vec::as_slice).collect();
                let found = tree.delete_run_at(&pages, &keys, finger).expect("delete run");
                run.clear();
                found
            };
            for (&i, &write) in &writes {
                let k = key(i);
                match write {
                    None | Some(false) => {
                        expected += usize::from(model.remove(&k).is_some());
                        if finger.covers(tree.root(), &k) {
                            run.push(k);
                        } else {
                            present += flush(&mut run, &mut finger);
                            run.push(k);
                            present += flush(&mut run, &mut finger);
                        }
                    }
                    Some(true) => {
                        present += flush(&mut run, &mut finger);
                        tree.put_at(&pages, &k, &value(i), &mut finger).expect("put");
                        model.insert(k, value(i));
                    }
                }
            }
            present += flush(&mut run, &mut finger);
            tree.settle(&pages, &mut finger).expect("settle");
            prop_assert_eq!(present, expected);
            let stats = tree.check(&pages).expect("a valid tree");
            prop_assert_eq!(stats.keys, model.len() as u64);
            let got: Vec<(Vec<u8>, Vec<u8>)> = tree
                .scan(&pages, Bound::Unbounded, Bound::Unbounded, crate::btree::Direction::Forward)
                .map(|entry| entry.expect("scan"))
                .collect();
            let want: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
            prop_assert_eq!(got, want);
        }
    }
}
