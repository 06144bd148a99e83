//! Corrupt pages make tree operations fail with `Error::Corruption`, never panic: a page of a
//! healthy tree gets random bytes changed (and sometimes its kind), then lookups, scans in
//! both directions, puts, deletes and `check` run on it. Any of them may fail; none may panic.
//! (A flipped byte inside a key or value that keeps the structure valid is not detectable by
//! the tree: the page checksum catches it when the page is read from disk.)

use proptest::prelude::*;
use std::ops::Bound;
use tilldb::Error;
use tilldb::internals::btree::{Direction, MemPages, PageOp, Pages, Tree};
use tilldb::internals::page::{HEADER_BYTES, PageKind};

const PAGE_BYTES: u32 = 4096;
const KEYS: u32 = 300;

fn key(i: u32) -> Vec<u8> {
    format!("{}{i:05}", "k".repeat((i % 7 * 40) as usize)).into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    let len = if i.is_multiple_of(50) {
        9000
    } else {
        (i % 13 * 20) as usize
    };
    vec![u8::try_from(i % 256).expect("a byte"); len]
}

fn healthy_tree() -> (MemPages, Tree) {
    let pages = MemPages::new(PAGE_BYTES);
    let tree = Tree::create(&pages).expect("create");
    for i in 0..KEYS {
        tree.put(&pages, &key(i), &value(i)).expect("put");
    }
    tree.check(&pages).expect("healthy");
    (pages, tree)
}

fn is_corruption(result: &Result<impl Sized, Error>) -> bool {
    matches!(result, Err(Error::Corruption { .. }))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn corrupt_pages_are_errors_never_panics(
        page_pick in any::<prop::sample::Index>(),
        flips in prop::collection::vec(
            (any::<bool>(), any::<prop::sample::Index>(), 1u8..=255), 1..4),
        new_kind in prop::option::weighted(0.1, prop::sample::select(vec![
            PageKind::Leaf, PageKind::Branch, PageKind::Overflow, PageKind::Free,
        ])),
    ) {
        let (pages, tree) = healthy_tree();
        let live: Vec<_> = pages
            .snapshot()
            .into_iter()
            .filter(|(_, page)| page.kind() != PageKind::Free)
            .collect();
        let (id, page) = &live[page_pick.index(live.len())];
        let mut body = page.body().to_vec();
        for (near_header, at, xor) in flips {
            // Half the flips hit the first 64 bytes: headers, slots, the first cells.
            let offset = if near_header { at.index(64) } else { at.index(body.len()) };
            body[offset] ^= xor;
        }
        assert_eq!(body.len(), PAGE_BYTES as usize - HEADER_BYTES);
        pages
            .apply(PageOp::Image { page: *id, kind: new_kind.unwrap_or(page.kind()), body })
            .expect("apply");
        let checked = tree.check(&pages);
        prop_assert!(checked.is_ok() || is_corruption(&checked));
        for i in 0..KEYS {
            let got = tree.get(&pages, &key(i));
            prop_assert!(got.is_ok() || is_corruption(&got), "{got:?}");
        }
        for direction in [Direction::Forward, Direction::Backward] {
            let mut count = 0;
            for entry in tree.scan(&pages, Bound::Unbounded, Bound::Unbounded, direction) {
                prop_assert!(entry.is_ok() || is_corruption(&entry));
                count += 1;
                prop_assert!(count <= 10 * KEYS, "scan does not end");
            }
        }
        // Writes: each may fail; none may panic.
        for i in (0..KEYS).step_by(5) {
            let put = tree.put(&pages, &key(i), &value(i + 1));
            prop_assert!(put.is_ok() || is_corruption(&put), "{put:?}");
            let extra = tree.put(&pages, &key(i + KEYS), &value(i));
            prop_assert!(extra.is_ok() || is_corruption(&extra), "{extra:?}");
        }
        for i in (0..KEYS).step_by(2) {
            let deleted = tree.delete(&pages, &key(i));
            prop_assert!(deleted.is_ok() || is_corruption(&deleted), "{deleted:?}");
        }
        let after = tree.check(&pages);
        prop_assert!(after.is_ok() || is_corruption(&after));
    }
}
