//! Pages (`page/mod.rs`), nodes (`btree/node.rs`), overflow pages (`btree/overflow.rs`), and
//! the B+tree read over pages whose bodies are fuzz input (`btree/check.rs`, `tree.rs`,
//! `cursor.rs`).
//!
//! Input, one of two modes by bit 1 of the first byte:
//!
//! ```text
//! raw mode (bit 1 clear): one page as read from the data file
//!      0    1 flags    bit 0: seal (set the page crc to match, seeded with the id)
//!      1    1 size     page size 4096 << (size % 5)
//!      2    8 id       the id the page is read as
//!     10    … page     the page's bytes, zero-padded to the page size
//!
//! tree mode (bit 1 set): a tree of up to four 4 KiB pages, ids 1..=n, root 1
//!      0    1 flags
//!      1    1 count    n = 1 + count % 4
//!      2    4 kinds    page kind byte of pages 1..=4 (1 Leaf · 2 Branch · 3 Overflow · 4 Free)
//!      6    … bodies   n bodies of 4072 bytes, zero-padded; each page is sealed
//! ```
//!
//! Checks: validation, node and overflow parsing never panic; a valid page seals back to the
//! same bytes and its cells encode back to the same bytes; the tree check, gets and scans
//! return `Ok` or `Err`; over a tree that passes the check, scans agree with gets and with
//! each other, and a put and a delete succeed and leave a tree that passes it again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;
use std::ops::Bound;
use tilldb::Direction;
use tilldb::internals::btree::node::{self, NodeKind, NodeRef, ValueRef};
use tilldb::internals::btree::overflow::OverflowRef;
use tilldb::internals::btree::{MemPages, Tree};
use tilldb::io::AlignedBuf;
use tilldb::internals::page::{PageBuf, PageFault, PageId, PageKind, PageState};
use tilldb_fuzz::{Input, PAGE_HEADER_BYTES, seal_page};

const TREE_PAGE_BYTES: usize = 4096;
const TREE_PAGES_MAX: usize = 4;
/// Entries a scan may yield before the target stops it (a fuzzed tree is small).
const SCAN_MAX: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let flags = input.u8();
    if flags & 2 == 0 {
        raw_page(flags, input);
    } else {
        tree(input);
    }
});

fn raw_page(flags: u8, mut input: Input<'_>) {
    let page_bytes = 4096usize << (input.u8() % 5);
    let id = input.u64();
    let mut buf = AlignedBuf::zeroed(page_bytes);
    let bytes = input.take(page_bytes);
    buf[..bytes.len()].copy_from_slice(bytes);
    if flags & 1 != 0 {
        seal_page(&mut buf, id);
    }
    let state = PageBuf::validate(PageId(id), &buf);
    let zero = buf.iter().all(|&b| b == 0);
    match state {
        Ok(PageState::Unwritten) => assert!(zero),
        Ok(PageState::Valid(kind)) => {
            assert!(!zero);
            let original = buf.clone();
            let page = PageBuf::from_bytes(PageId(id), buf)
                .expect("validated")
                .expect("not zero");
            assert_eq!(page.kind(), kind);
            assert_eq!(page.id(), PageId(id));
            assert_eq!(page.page_bytes(), page_bytes);
            assert_eq!(page.body().len(), page_bytes - PAGE_HEADER_BYTES);
            let mut resealed = page.clone();
            assert_eq!(
                &resealed.seal()[..],
                &original[..],
                "seal(validate(x)) differs from x"
            );
            check_page(&page);
        }
        Err(fault) => {
            assert!(!zero);
            // A page read at another id than it holds must not validate.
            let held = u64::from_le_bytes(buf[8..16].try_into().expect("8 bytes"));
            if fault == PageFault::WrongPageId {
                assert_ne!(held, id);
            }
            assert!(PageBuf::from_bytes(PageId(id), buf).is_err());
        }
    }
}

/// Node or overflow view of a valid page, with round trips of every cell.
fn check_page(page: &PageBuf) {
    match NodeKind::of(page.kind()) {
        Some(kind) => {
            let parsed = NodeRef::parse(page);
            // The body parser must agree with the page parser.
            assert_eq!(
                parsed.is_ok(),
                NodeRef::parse_body(kind, page.body()).is_ok()
            );
            // Parsing twice (the second time from the checked mark) gives the same view.
            assert_eq!(parsed.is_ok(), NodeRef::parse(page).is_ok());
            if let Ok(node) = parsed {
                check_node(&node);
            }
        }
        None => {
            if page.kind() == PageKind::Overflow
                && let Ok(overflow) = OverflowRef::parse(page)
            {
                assert!(overflow.data.len() <= page.body().len() - 16);
            }
        }
    }
}

fn check_node(node: &NodeRef<'_>) {
    assert!(node.live_bytes() <= node.usable_bytes());
    let _ = (node.free_bytes(), node.gap_bytes(), node.is_underfull());
    assert!(node.is_sorted());
    for index in 0..node.count() {
        let key = node.key(index);
        assert_eq!(
            node.search(key),
            Ok(index),
            "a key is not found where it is"
        );
        let cell = node.cell(index);
        // The encoders refuse a reference to page 0 (their callers never make one); the
        // node parser leaves those to the tree check, so they are not round-tripped here.
        let again = match node.kind() {
            NodeKind::Leaf => match node.value(index) {
                ValueRef::Overflow { first, .. } if first.0 == 0 => continue,
                value => node::encode_leaf_cell(key, &value.to_owned()),
            },
            NodeKind::Branch => match node.child(index + 1) {
                child if child.0 == 0 => continue,
                child => node::encode_branch_cell(key, child),
            },
        };
        assert_eq!(again, cell, "a cell does not encode back to itself");
    }
    if node.kind() == NodeKind::Branch {
        let _ = node.child(0);
        let _ = node.child_index(b"some key");
    } else {
        let _ = (node.prev(), node.next());
    }
}

fn tree(mut input: Input<'_>) {
    let count = 1 + usize::from(input.u8()) % TREE_PAGES_MAX;
    let kinds: [u8; TREE_PAGES_MAX] = input.array();
    let body_bytes = TREE_PAGE_BYTES - PAGE_HEADER_BYTES;
    let mut pages = BTreeMap::new();
    for (index, &kind) in kinds.iter().enumerate().take(count) {
        let id = index as u64 + 1;
        let mut buf = AlignedBuf::zeroed(TREE_PAGE_BYTES);
        buf[4] = kind;
        buf[5] = 1; // version
        buf[8..16].copy_from_slice(&id.to_le_bytes());
        let body = input.take(body_bytes);
        buf[PAGE_HEADER_BYTES..PAGE_HEADER_BYTES + body.len()].copy_from_slice(body);
        seal_page(&mut buf, id);
        if let Ok(Some(page)) = PageBuf::from_bytes(PageId(id), buf) {
            check_page(&page);
            pages.insert(PageId(id), page);
        }
    }
    if !pages.contains_key(&PageId(1)) {
        return;
    }
    let mut probes: Vec<Vec<u8>> = vec![Vec::new(), b"key".to_vec(), vec![0xFF; 3]];
    if let Some(root) = pages.get(&PageId(1))
        && let Ok(node) = NodeRef::parse(root)
    {
        probes.extend((0..node.count().min(8)).map(|i| node.key(i).to_vec()));
    }
    let mem = MemPages::from_pages(TREE_PAGE_BYTES as u32, pages);
    let tree = Tree::open(PageId(1));
    let checked = tree.check(&mem);
    let forward = scan(&mem, tree, Direction::Forward);
    let backward = scan(&mem, tree, Direction::Backward);
    let gets: Vec<_> = probes.iter().map(|k| tree.get(&mem, k)).collect();
    let _ = tree
        .scan_prefix(&mem, b"k", Direction::Forward)
        .take(SCAN_MAX)
        .count();
    let Ok(stats) = checked else {
        return;
    };
    // A tree that passed the check reads consistently...
    let forward = forward.expect("a checked tree scans forward");
    let mut backward = backward.expect("a checked tree scans backward");
    backward.reverse();
    assert_eq!(forward, backward, "forward and backward scans disagree");
    assert_eq!(
        forward.len() as u64,
        stats.keys,
        "a scan misses keys the check counted"
    );
    assert!(
        forward.windows(2).all(|w| w[0].0 < w[1].0),
        "a scan is out of order"
    );
    for (key, value) in forward.iter().take(16) {
        assert_eq!(tree.get(&mem, key).expect("get").as_ref(), Some(value));
    }
    for (probe, got) in probes.iter().zip(gets) {
        let scanned = forward
            .iter()
            .find(|(k, _)| k == probe)
            .map(|(_, v)| v.clone());
        assert_eq!(got.expect("a checked tree answers gets"), scanned);
    }
    // ... and accepts writes.
    let key = b"fuzz-key".to_vec();
    tree.put(&mem, &key, b"fuzz-value")
        .expect("put into a checked tree");
    tree.check(&mem).expect("the tree after a put");
    assert_eq!(
        tree.get(&mem, &key).expect("get"),
        Some(b"fuzz-value".to_vec())
    );
    if let Some((first, _)) = forward.first() {
        assert!(
            tree.delete(&mem, first)
                .expect("delete from a checked tree")
        );
        tree.check(&mem).expect("the tree after a delete");
        assert_eq!(tree.get(&mem, first).expect("get"), None);
    }
    mem.check_invariants();
}

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn scan(mem: &MemPages, tree: Tree, direction: Direction) -> tilldb::Result<Entries> {
    tree.scan(mem, Bound::Unbounded, Bound::Unbounded, direction)
        .take(SCAN_MAX)
        .collect()
}
