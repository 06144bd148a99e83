//! The file does not grow under steady updates: overwriting the same keys again and again
//! (values growing, shrinking, moving in and out of overflow pages), and deleting and
//! reinserting them, reuses freed pages, so the number of pages ever allocated stays bounded.

use tilldb::internals::btree::{MemPages, Tree};

const KEYS: u32 = 300;
const ROUNDS: u32 = 40;

fn key(i: u32) -> Vec<u8> {
    format!("{:0>30}", i * 7).into_bytes()
}

/// A value whose size depends on the round, from empty to three overflow pages.
fn value(i: u32, round: u32) -> Vec<u8> {
    let sizes = [0usize, 10, 300, 900, 2000, 9000];
    let len = sizes[((i + round) % 6) as usize];
    vec![u8::try_from(round % 256).expect("a byte"); len]
}

#[test]
fn steady_overwrites_and_reinserts_keep_the_file_bounded() {
    let pages = MemPages::new(4096);
    let tree = Tree::create(&pages).expect("create");
    let mut high_water_after_warmup = 0;
    for round in 0..ROUNDS {
        for i in 0..KEYS {
            tree.put(&pages, &key(i), &value(i, round)).expect("put");
        }
        // Delete and reinsert a third of the keys.
        for i in (round % 3..KEYS).step_by(3) {
            assert!(tree.delete(&pages, &key(i)).expect("delete"));
        }
        for i in (round % 3..KEYS).step_by(3) {
            tree.put(&pages, &key(i), &value(i, round + 1))
                .expect("put");
        }
        let stats = tree.check(&pages).expect("check");
        assert_eq!(stats.keys, u64::from(KEYS));
        assert_eq!(
            stats.pages(),
            pages.live_pages() as u64,
            "round {round}: pages leaked"
        );
        // Drop the log as a checkpoint would, to keep memory flat.
        pages.take_log();
        if round == 5 {
            high_water_after_warmup = pages.file_pages();
        }
    }
    let high_water = pages.file_pages();
    assert!(
        high_water * 10 <= high_water_after_warmup * 11,
        "file grew from {high_water_after_warmup} to {high_water} pages"
    );
}
