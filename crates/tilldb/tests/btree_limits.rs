//! The tree's size limits: keys longer than the page size allows are refused with `TooLarge`
//! before anything changes; empty keys and values work; a 16 MiB value round-trips through an
//! overflow chain, and replacing or deleting it gives every overflow page back.

use std::ops::Bound;
use tilldb::Error;
use tilldb::internals::btree::{Direction, Limits, MemPages, Tree};

fn assert_too_large(err: &Error, bytes: u64, max: u64) {
    assert!(
        matches!(err, Error::TooLarge { what: "key", bytes: b, max: m } if *b == bytes && *m == max),
        "{err}"
    );
}

#[test]
fn keys_up_to_the_limit_are_stored_and_longer_ones_refused() {
    for (page_bytes, key_max) in [
        (4096u32, 995usize),
        (8192, 2019),
        (16384, 2048),
        (65536, 2048),
    ] {
        assert_eq!(Limits::new(page_bytes).key_bytes_max, key_max);
        let pages = MemPages::new(page_bytes);
        let tree = Tree::create(&pages).expect("create");
        // Enough keys of the largest size to split leaves and branches.
        for i in 0..40u8 {
            let mut key = vec![b'k'; key_max];
            key[key_max - 1] = i;
            tree.put(&pages, &key, &[i; 3]).expect("largest key");
        }
        let ops_before = pages.log().len();
        let long = vec![b'k'; key_max + 1];
        assert_too_large(
            &tree.put(&pages, &long, b"v").expect_err("too long"),
            key_max as u64 + 1,
            key_max as u64,
        );
        assert_eq!(
            pages.log().len(),
            ops_before,
            "a refused put changes nothing"
        );
        // Lookups and deletes of a key that cannot exist simply find nothing.
        assert_eq!(tree.get(&pages, &long).expect("get"), None);
        assert!(!tree.delete(&pages, &long).expect("delete"));
        let stats = tree.check(&pages).expect("check");
        assert_eq!(stats.keys, 40);
        assert!(stats.depth >= 2, "{page_bytes}: {stats:?}");
    }
}

#[test]
fn empty_key_and_empty_value() {
    let pages = MemPages::new(4096);
    let tree = Tree::create(&pages).expect("create");
    tree.put(&pages, b"", b"").expect("put");
    tree.put(&pages, b"a", b"").expect("put");
    assert_eq!(tree.get(&pages, b"").expect("get"), Some(Vec::new()));
    let all: Vec<(Vec<u8>, Vec<u8>)> = tree
        .scan(
            &pages,
            Bound::Unbounded,
            Bound::Excluded(b"a"),
            Direction::Forward,
        )
        .collect::<Result<_, _>>()
        .expect("scan");
    assert_eq!(all, [(Vec::new(), Vec::new())]);
    assert!(tree.delete(&pages, b"").expect("delete"));
    assert_eq!(tree.get(&pages, b"").expect("get"), None);
    tree.check(&pages).expect("check");
}

#[test]
fn a_16_mib_value_round_trips_and_its_pages_come_back() {
    const MIB: usize = 1 << 20;
    let pages = MemPages::new(16384);
    let tree = Tree::create(&pages).expect("create");
    let value: Vec<u8> = (0..16 * MIB)
        .map(|i| u8::try_from((i * 31 + i / 4099) % 256).expect("a byte"))
        .collect();
    tree.put(&pages, b"small", b"neighbour").expect("put");
    assert!(!tree.put(&pages, b"big", &value).expect("put"));
    pages.take_log();
    assert!(tree.get(&pages, b"big").expect("get") == Some(value.clone()));
    let stats = tree.check(&pages).expect("check");
    let limits = Limits::new(16384);
    assert_eq!(stats.overflow_pages, limits.overflow_pages(16 * MIB as u64));
    assert_eq!(stats.value_bytes, 16 * MIB as u64 + 9);
    let scanned: Vec<(Vec<u8>, Vec<u8>)> = tree
        .scan_prefix(&pages, b"b", Direction::Backward)
        .collect::<Result<_, _>>()
        .expect("scan");
    assert!(scanned == [(b"big".to_vec(), value)]);
    // Replacing with a small value frees the chain; so does deleting a large one.
    assert!(tree.put(&pages, b"big", b"now small").expect("put"));
    assert_eq!(pages.live_pages(), 1);
    tree.put(&pages, b"big", &vec![5; 100_000]).expect("put");
    assert!(tree.delete(&pages, b"big").expect("delete"));
    assert_eq!(pages.live_pages(), 1);
    let stats = tree.check(&pages).expect("check");
    assert_eq!((stats.keys, stats.pages()), (1, 1));
}
