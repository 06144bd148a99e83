//! Chunks of a drain applied to copies of their pages (docs/write-buffer.md, "Chunks that
//! readers do not wait for"; `db/pages.rs`, `TxnPages::shadowed`): a chunk changes copies
//! while readers go on reading the pool's pages, then installs them under the tree lock held
//! exclusively. A chunk that outgrows its copies (a part due: a quarter of a small cache) installs
//! them there and goes on in place.
//!
//! Readers on other threads read every key they can while the writer's random keys drain in
//! chunks over a table of many leaves, through a cache small enough that some chunks outgrow
//! their copies (a quarter of the cache's 32 pages): each value read must be the one committed last before the read or one
//! committed while it ran. Then the process is killed, and the database reopens with every
//! commit (each `Buffered`: in the OS once acknowledged).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tilldb::io::{CrashMode, SimConfig, SimDisk};
use tilldb::{Db, Durability, Options};

const KEYS: u64 = 3_000;

fn key(k: u64) -> Vec<u8> {
    format!("key-{k:06}").into_bytes()
}

/// The value of `key(k)` written by commit `n`: the commit's number, then filler.
fn value(n: u64) -> Vec<u8> {
    let mut value = n.to_le_bytes().to_vec();
    value.resize(120, 0x5a);
    value
}

fn number_of(value: &[u8]) -> u64 {
    u64::from_le_bytes(value[..8].try_into().expect("8 bytes"))
}

#[test]
fn readers_beside_chunks_on_copies_read_each_key_as_last_committed_and_a_kill_loses_none() {
    let disk = Arc::new(SimDisk::new(SimConfig::default()));
    let options = Options {
        background_threads: false,
        // Chunks of an eighth of the buffer, some 16 keys.
        write_buffer_bytes: 64 << 10,
        // 32 pages: a chunk that leaves 8 pages unlogged cuts a part.
        cache_bytes: 32 * 4096,
        ..Options::for_tests()
    };
    let db = Db::open_with_storage(
        Arc::new(SimDisk::clone(&disk)),
        Path::new("/db"),
        options.clone(),
    )
    .expect("create");
    // A table of many leaves, loaded through the tree.
    let mut last = BTreeMap::new();
    let mut txn = db.begin().expect("begin");
    for k in 0..KEYS {
        txn.put(&key(k), &value(0)).expect("put");
        last.insert(k, 0u64);
    }
    txn.commit().expect("load");
    // `acked[k]`: the last commit of key k acknowledged; `begun`: commits begun so far.
    let acked: Vec<AtomicU64> = (0..KEYS).map(|_| AtomicU64::new(0)).collect();
    let begun = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    let commits = 6_000u64;
    std::thread::scope(|s| {
        for reader in 0..2u64 {
            let (db, acked, begun, done, reads) = (&db, &acked, &begun, &done, &reads);
            s.spawn(move || {
                let mut k = reader * 7;
                while !done.load(Ordering::Acquire) {
                    k = (k * 31 + 17) % KEYS;
                    let floor = acked[usize::try_from(k).expect("index")].load(Ordering::Acquire);
                    let read = db.get(&key(k)).expect("get").expect("every key is there");
                    let ceiling = begun.load(Ordering::Acquire);
                    let n = number_of(&read);
                    assert!(
                        floor <= n && n <= ceiling,
                        "key {k} read as of commit {n}, after commit {floor} of it was \
                         acknowledged and before commit {} began ({:?})",
                        ceiling + 1,
                        db.stats()
                    );
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        // By turns, 250 commits of keys in order (a chunk's keys land in a leaf or two:
        // applied to copies) and 250 of keys spread over the table (a chunk's keys land in
        // more leaves than a quarter of the cache: they go on in place).
        let mut k = 1;
        for n in 1..=commits {
            k = if (n / 250) % 2 == 0 {
                (k + 1) % KEYS
            } else {
                (k * 1_103 + 12_345) % KEYS
            };
            begun.store(n, Ordering::Release);
            let mut txn = db.begin().expect("begin");
            txn.put(&key(k), &value(n)).expect("put");
            txn.commit_with(Durability::Buffered).expect("commit");
            acked[usize::try_from(k).expect("index")].store(n, Ordering::Release);
            last.insert(k, n);
        }
        done.store(true, Ordering::Release);
    });
    let stats = db.stats();
    assert!(
        stats.drain_chunks_shadowed >= 30,
        "chunks applied to copies: {stats:?}"
    );
    assert!(
        stats.drain_chunks_shadowed + 3 <= stats.drain_chunks,
        "fewer than 3 chunks outgrew their copies and went on in place: {stats:?}"
    );
    assert!(
        reads.load(Ordering::Relaxed) >= 100,
        "the readers read beside them"
    );
    db.check().expect("the tree checks out");
    std::mem::forget(db);
    disk.crash(CrashMode::ProcessKill);
    let db = Db::open_with_storage(Arc::new(SimDisk::clone(&disk)), Path::new("/db"), options)
        .expect("reopen");
    for (k, n) in &last {
        let read = db.get(&key(*k)).expect("get").expect("every key is there");
        assert_eq!(number_of(&read), *n, "key {k} after the kill");
    }
    db.check().expect("the tree checks out after the kill");
}
