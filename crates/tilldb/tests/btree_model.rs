//! The B+tree against a `BTreeMap` model: random puts, deletes, gets and range scans in both
//! directions, with keys from empty to near the limit and values from empty to several
//! overflow pages, on 4096-byte pages so that splits, merges and overflow chains happen within
//! a few operations. `check` runs after every operation.
//!
//! Redo: the log of page ops each run recorded is replayed onto nothing, and onto a fuzzy crash
//! image (every page as it was at some earlier moment, each its own), with the recovery rule
//! (apply iff page lsn < op lsn); every page must come out byte for byte as the run left it.

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::ops::Bound;
use tilldb::internals::btree::{Direction, Finger, MemPages, Pages, Tree};
use tilldb::internals::page::{PageBuf, PageId};

const PAGE_BYTES: u32 = 4096;

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Get(Vec<u8>),
    Scan {
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        direction: Direction,
        limit: usize,
    },
    /// Takes a snapshot of every page, for the fuzzy crash image.
    Snapshot,
}

/// Keys from a small space (432 keys), so that puts replace and deletes hit: `[a; n]` then
/// `b` unless `b` is 0. Lengths reach 901 bytes (the limit at 4 KiB pages is 995), and long
/// keys that differ only in their last byte make long separators, so branches split too;
/// `n = 0, b = 0` is the empty key.
fn key() -> impl Strategy<Value = Vec<u8>> {
    (
        0u8..6,
        prop::sample::select(vec![0usize, 1, 2, 10, 200, 900]),
        0u8..12,
    )
        .prop_map(|(a, n, b)| {
            let mut key = vec![a; n];
            if b > 0 {
                key.push(b);
            }
            key
        })
}

/// Values from empty to five overflow pages; inline up to about 1000 bytes at 4 KiB.
fn value() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(vec![0usize, 1, 10, 100, 500, 990, 1000, 3000, 5000, 20_000]),
        any::<u8>(),
    )
        .prop_map(|(len, seed)| {
            (0..len)
                .map(|i| seed.wrapping_add(u8::try_from(i % 251).expect("small")))
                .collect()
        })
}

fn bound() -> impl Strategy<Value = Bound<Vec<u8>>> {
    prop_oneof![
        1 => Just(Bound::Unbounded),
        2 => key().prop_map(Bound::Included),
        2 => key().prop_map(Bound::Excluded),
    ]
}

/// An op; `puts` and `deletes` weigh the two against each other.
fn op(puts: u32, deletes: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        puts => (key(), value()).prop_map(|(k, v)| Op::Put(k, v)),
        deletes => key().prop_map(Op::Delete),
        2 => key().prop_map(Op::Get),
        2 => (bound(), bound(), any::<bool>(), 1usize..300).prop_map(
            |(lower, upper, backward, limit)| Op::Scan {
                lower,
                upper,
                direction: if backward { Direction::Backward } else { Direction::Forward },
                limit,
            }
        ),
        1 => Just(Op::Snapshot),
    ]
}

fn as_slice(bound: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    bound.as_ref().map(Vec::as_slice)
}

fn in_bounds(key: &[u8], lower: &Bound<Vec<u8>>, upper: &Bound<Vec<u8>>) -> bool {
    let above = match lower {
        Bound::Unbounded => true,
        Bound::Included(bound) => key >= bound.as_slice(),
        Bound::Excluded(bound) => key > bound.as_slice(),
    };
    let below = match upper {
        Bound::Unbounded => true,
        Bound::Included(bound) => key <= bound.as_slice(),
        Bound::Excluded(bound) => key < bound.as_slice(),
    };
    above && below
}

type Snapshot = BTreeMap<PageId, PageBuf>;

/// Runs `ops` against the tree and the model, checking after each. Returns the pages and the
/// snapshots taken.
fn run(ops: &[Op]) -> Result<(MemPages, Vec<Snapshot>), TestCaseError> {
    let pages = MemPages::new(PAGE_BYTES);
    let tree = Tree::create(&pages).expect("create");
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut snapshots = Vec::new();
    // Puts go through a finger kept across them, as a commit's do (cleared at a delete): a
    // run of them in key order starts at the leaf the last one changed.
    let mut finger = Finger::default();
    for (step, op) in ops.iter().enumerate() {
        match op {
            Op::Put(key, value) => {
                let replaced = tree.put_at(&pages, key, value, &mut finger).expect("put");
                prop_assert_eq!(replaced, model.insert(key.clone(), value.clone()).is_some());
            }
            Op::Delete(key) => {
                finger.clear();
                let deleted = tree.delete(&pages, key).expect("delete");
                prop_assert_eq!(deleted, model.remove(key).is_some());
            }
            Op::Get(key) => {
                prop_assert_eq!(tree.get(&pages, key).expect("get"), model.get(key).cloned());
            }
            Op::Scan {
                lower,
                upper,
                direction,
                limit,
            } => {
                let found: Vec<(Vec<u8>, Vec<u8>)> = tree
                    .scan(&pages, as_slice(lower), as_slice(upper), *direction)
                    .take(*limit)
                    .collect::<Result<_, _>>()
                    .expect("scan");
                let matching = model.iter().filter(|(k, _)| in_bounds(k, lower, upper));
                let expected: Vec<(Vec<u8>, Vec<u8>)> = match direction {
                    Direction::Forward => matching.take(*limit).map(clone_entry).collect(),
                    Direction::Backward => matching.rev().take(*limit).map(clone_entry).collect(),
                };
                prop_assert_eq!(found, expected, "scan at step {}", step);
            }
            Op::Snapshot => snapshots.push(pages.snapshot()),
        }
        let stats = tree
            .check(&pages)
            .unwrap_or_else(|err| panic!("check after step {step} ({op:?}): {err}"));
        prop_assert_eq!(stats.keys, model.len() as u64);
        pages.check_invariants();
        // Every page is the tree's: nothing leaks (the root is always there).
        prop_assert_eq!(
            stats.pages(),
            pages.live_pages() as u64,
            "leak at step {}",
            step
        );
    }
    Ok((pages, snapshots))
}

fn clone_entry((key, value): (&Vec<u8>, &Vec<u8>)) -> (Vec<u8>, Vec<u8>) {
    (key.clone(), value.clone())
}

fn assert_same_pages(expected: &Snapshot, actual: &Snapshot) {
    assert_eq!(
        expected.keys().collect::<Vec<_>>(),
        actual.keys().collect::<Vec<_>>(),
        "page sets differ"
    );
    for (id, page) in expected {
        assert!(
            page.bytes() == actual[id].bytes(),
            "{id} differs after redo"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// A growing phase, a run of puts in key order, a shrinking phase (merges, root collapse),
    /// then a mixed one.
    #[test]
    fn tree_matches_model_and_redo_rebuilds_every_page(
        grow in prop::collection::vec(op(8, 1), 0..300),
        in_order in prop::collection::vec((key(), value()), 0..200),
        shrink in prop::collection::vec(op(1, 8), 0..300),
        mixed in prop::collection::vec(op(4, 3), 0..100),
        choices in prop::collection::vec(any::<prop::sample::Index>(), 64),
    ) {
        // A run of puts in key order, as a commit applies its write set.
        let mut in_order = in_order;
        in_order.sort_by(|a, b| a.0.cmp(&b.0));
        let in_order = in_order.into_iter().map(|(k, v)| Op::Put(k, v));
        let ops: Vec<Op> = grow.into_iter().chain(in_order).chain(shrink).chain(mixed).collect();
        let (pages, snapshots) = run(&ops)?;
        let log = pages.log();
        let final_pages = pages.snapshot();

        // Redo onto nothing.
        let replayed = MemPages::new(PAGE_BYTES);
        prop_assert_eq!(replayed.redo(&log), log.len());
        assert_same_pages(&final_pages, &replayed.snapshot());

        // Redo onto a fuzzy crash image: each page as of a snapshot of its own choosing (or
        // missing, as if never written back), then the whole log.
        let mut image = Snapshot::new();
        for (n, (id, _)) in final_pages.iter().enumerate() {
            let choice = choices[n % choices.len()].index(snapshots.len() + 2);
            let version = match choice {
                0 => None,
                1 => final_pages.get(id),
                _ => snapshots[choice - 2].get(id),
            };
            if let Some(page) = version {
                image.insert(*id, page.clone());
            }
        }
        let recovered = MemPages::from_pages(PAGE_BYTES, image);
        recovered.redo(&log);
        recovered.check_invariants();
        assert_same_pages(&final_pages, &recovered.snapshot());
        // The recovered tree is the tree.
        let tree = Tree::open(PageId(1));
        let stats = tree.check(&recovered).expect("recovered tree checks");
        prop_assert_eq!(stats, tree.check(&pages).expect("check"));
        prop_assert_eq!(recovered.live_pages(), pages.live_pages());
        prop_assert_eq!(recovered.page_bytes(), PAGE_BYTES);
    }
}

/// Keys in ascending and descending order fill the tree to several levels and empty it
/// again; the replayed log matches too.
#[test]
fn sequential_load_and_unload_in_both_orders() {
    let pages = MemPages::new(PAGE_BYTES);
    let tree = Tree::create(&pages).expect("create");
    let key = |i: u32| format!("{i:0>60}").into_bytes();
    for i in 0..4000 {
        tree.put(&pages, &key(i), &i.to_le_bytes()).expect("put");
    }
    for i in (4000..8000).rev() {
        tree.put(&pages, &key(i), &i.to_le_bytes()).expect("put");
    }
    let stats = tree.check(&pages).expect("check");
    assert_eq!(stats.keys, 8000);
    assert!(stats.depth >= 3, "{stats:?}");
    // Appends at the right end fill leaves completely; descending loads half fill them.
    assert!(
        stats.live_bytes * 20 >= stats.usable_bytes * 11,
        "{stats:?}"
    );
    let all: Vec<Vec<u8>> = tree
        .scan(
            &pages,
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Backward,
        )
        .map(|entry| entry.expect("scan").0)
        .collect();
    assert_eq!(all.len(), 8000);
    assert!(all.windows(2).all(|pair| pair[0] > pair[1]));
    for i in (0..8000).step_by(2) {
        assert!(tree.delete(&pages, &key(i)).expect("delete"));
    }
    tree.check(&pages).expect("check");
    for i in (1..8000).step_by(2).rev() {
        assert!(tree.delete(&pages, &key(i)).expect("delete"));
    }
    let stats = tree.check(&pages).expect("check");
    assert_eq!((stats.keys, stats.depth, stats.pages()), (0, 1, 1));
    let replayed = MemPages::new(PAGE_BYTES);
    replayed.redo(&pages.log());
    assert_same_pages(&pages.snapshot(), &replayed.snapshot());
}
