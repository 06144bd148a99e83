//! `fill_empty`: an empty tree filled bottom up from entries in key order (how a commit
//! applies a load into a table it created or found empty) is the tree the same entries put
//! one by one describe: every entry found, in order, by gets and scans both ways, `check`
//! passing, and later puts and deletes (splits, merges, root collapse) working on it. The
//! page ops it logged rebuild every page byte for byte when redone onto nothing.

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::ops::Bound;
use tilldb::internals::btree::{Direction, LEAF_FILL_PERCENT, MemPages, Tree, fill_empty};

/// Checks the tree against the model: check, every get, a scan each way.
fn same(tree: Tree, pages: &MemPages, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let stats = tree.check(pages).expect("check");
    assert_eq!(stats.keys, model.len() as u64);
    for (key, value) in model {
        assert_eq!(tree.get(pages, key).expect("get").as_ref(), Some(value));
    }
    for direction in [Direction::Forward, Direction::Backward] {
        let scanned: Vec<(Vec<u8>, Vec<u8>)> = tree
            .scan(pages, Bound::Unbounded, Bound::Unbounded, direction)
            .collect::<Result<_, _>>()
            .expect("scan");
        let mut want: Vec<_> = model.clone().into_iter().collect();
        if direction == Direction::Backward {
            want.reverse();
        }
        assert_eq!(scanned, want, "{direction:?}");
    }
}

fn filled(page_bytes: u32, model: &BTreeMap<Vec<u8>, Vec<u8>>) -> (Tree, MemPages, u64) {
    let pages = MemPages::new(page_bytes);
    let tree = Tree::create(&pages).expect("create");
    let mut leaves = 0u64;
    let put = fill_empty(
        tree.root(),
        &pages,
        model.iter().map(|(k, v)| (k.as_slice(), v.as_slice())),
        || {
            leaves += 1;
            Ok(())
        },
    )
    .expect("fill");
    assert_eq!(put, model.len() as u64);
    (tree, pages, leaves)
}

#[test]
fn sizes_from_empty_to_five_levels() {
    // 4 KiB pages and 300-byte keys that differ only at their end (so separators are as
    // long): 12 keys fit a leaf and a branch (a built leaf takes 11), so 30,000 rows make
    // five levels.
    for rows in [0usize, 1, 2, 11, 12, 13, 14, 100, 157, 1_000, 30_000] {
        let model: BTreeMap<Vec<u8>, Vec<u8>> = (0..rows)
            .map(|i| {
                let mut key = vec![b'k'; 292];
                key.extend(format!("{i:08}").into_bytes());
                (key, format!("v{i:05}").into_bytes())
            })
            .collect();
        let (tree, pages, leaves) = filled(4096, &model);
        same(tree, &pages, &model);
        let stats = tree.check(&pages).expect("check");
        assert_eq!(
            stats.leaf_pages,
            leaves + 1,
            "{rows} rows: one leaf after each call"
        );
        if rows == 30_000 {
            assert_eq!(stats.depth, 5, "{stats:?}");
        }
        // Every leaf but the last is filled to `LEAF_FILL_PERCENT` (90 %): 11 of these
        // cells a leaf (12 fit).
        assert_eq!(LEAF_FILL_PERCENT, 90);
        assert_eq!(
            stats.leaf_pages,
            rows.div_ceil(11).max(1) as u64,
            "{rows} rows"
        );
        // Redone onto nothing, the log rebuilds every page.
        let again = MemPages::new(4096);
        again.redo(&pages.log());
        let (want, got) = (pages.snapshot(), again.snapshot());
        assert_eq!(got.len(), want.len(), "{rows} rows: pages after redo");
        for (id, page) in &want {
            assert!(
                page.bytes() == got[id].bytes(),
                "{rows} rows: {id} differs after redo"
            );
        }
    }
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<u16>(),
        prop::sample::select(vec![0usize, 1, 8, 40, 400]),
    )
        .prop_map(|(n, pad)| {
            // The number's bytes high first, so that keys sort as their numbers.
            let mut key = vec![u8::try_from(n >> 8).expect("high byte"), n.to_le_bytes()[0]];
            key.extend(std::iter::repeat_n(b'x', pad));
            key
        })
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(vec![0usize, 3, 150, 900, 5000]),
        any::<u8>(),
    )
        .prop_map(|(len, b)| vec![b; len])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Any entries (empty keys and values, overflow values, keys of very different
    /// lengths), filled, then changed by puts and deletes like any tree.
    #[test]
    fn a_filled_tree_is_the_tree_of_its_entries_and_changes_like_one(
        entries in prop::collection::btree_map(key(), value(), 0..600),
        later in prop::collection::vec((key(), prop::option::of(value())), 0..300),
    ) {
        let mut model = entries;
        let (tree, pages, _) = filled(4096, &model);
        same(tree, &pages, &model);
        for (key, value) in later {
            if let Some(value) = value {
                tree.put(&pages, &key, &value).expect("put");
                model.insert(key, value);
            } else {
                tree.delete(&pages, &key).expect("delete");
                model.remove(&key);
            }
        }
        same(tree, &pages, &model);
    }
}
