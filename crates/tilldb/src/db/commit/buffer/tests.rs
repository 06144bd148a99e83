//! The write buffer through a database: buffered commits, reads at every snapshot, drains
//! (at the threshold, before a commit through the tree, at a transaction's first read, at a
//! checkpoint), against a model of every state.

use crate::io::{SimConfig, SimDisk};
use crate::{Db, Direction, Durability, Options};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

const TABLES: [&str; 2] = ["", "t"];

type State = BTreeMap<(usize, u8), Vec<u8>>;

fn open(buffer_bytes: u64) -> Db {
    let db = Db::open_with_storage(
        Arc::new(SimDisk::new(SimConfig::default())),
        Path::new("/db"),
        Options {
            background_threads: false,
            ..Options::for_tests()
        },
    )
    .expect("create");
    // Table "t" exists before the buffer is on: a commit that creates a table goes
    // through the tree.
    let mut txn = db.begin().expect("begin");
    txn.put_in("t", b"\xff", b"made").expect("put");
    txn.commit().expect("commit");
    let mut txn = db.begin().expect("begin");
    txn.delete_in("t", b"\xff").expect("delete");
    txn.commit().expect("commit");
    db.inner
        .write_buffer_bytes
        .store(buffer_bytes, Ordering::Relaxed);
    db
}

fn value(key: u8, round: usize) -> Vec<u8> {
    // Some values long enough that a few dozen versions pass a small threshold.
    let len = 3 + usize::from(key % 4) * 40;
    let mut v = format!("{key}-{round}-").into_bytes();
    v.resize(len, b'.');
    v
}

/// What a reader holding `read` sees, read every way: point reads, ranges both ways (whole
/// and part of each table), and each table's length.
fn read_all(read: &crate::ReadTxn<'_>) -> State {
    let mut state = State::new();
    for (t, table) in TABLES.iter().enumerate() {
        let forward: Vec<(Vec<u8>, Vec<u8>)> = read
            .range_in(
                table,
                Bound::Unbounded,
                Bound::Unbounded,
                Direction::Forward,
            )
            .expect("range")
            .collect::<crate::Result<_>>()
            .expect("entries");
        let mut backward: Vec<(Vec<u8>, Vec<u8>)> = read
            .range_in(
                table,
                Bound::Unbounded,
                Bound::Unbounded,
                Direction::Backward,
            )
            .expect("range")
            .collect::<crate::Result<_>>()
            .expect("entries");
        backward.reverse();
        assert_eq!(forward, backward, "table {table:?} forward and backward");
        let part: Vec<(Vec<u8>, Vec<u8>)> = read
            .range_in(
                table,
                Bound::Included(&[5u8][..]),
                Bound::Excluded(&[20u8][..]),
                Direction::Forward,
            )
            .expect("range")
            .collect::<crate::Result<_>>()
            .expect("entries");
        let want_part: Vec<_> = forward
            .iter()
            .filter(|(k, _)| (5..20).contains(&k[0]))
            .cloned()
            .collect();
        assert_eq!(part, want_part, "table {table:?} part");
        assert_eq!(
            read.len_in(table).expect("len"),
            forward.len() as u64,
            "table {table:?} length"
        );
        for k in 0..30u8 {
            let got = read.get_in(table, &[k]).expect("get");
            let scanned = forward.iter().find(|(key, _)| key[..] == [k]);
            assert_eq!(
                got.as_ref(),
                scanned.map(|(_, v)| v),
                "get {k} in {table:?}"
            );
        }
        for (k, v) in forward {
            state.insert((t, k[0]), v);
        }
    }
    state
}

#[derive(Debug, Clone)]
enum Op {
    /// A commit of these writes at this durability, through the queue (it only wrote).
    Commit(Vec<(usize, u8, bool)>, Durability),
    /// A transaction that reads, then writes (a read-modify-write: drains first).
    ReadThenWrite(u8),
    /// A reader takes a snapshot, kept until the end.
    Snapshot,
    /// A checkpoint (drains first).
    Checkpoint,
}

fn op() -> impl Strategy<Value = Op> {
    let writes = prop::collection::vec((0usize..2, 0u8..30, prop::bool::weighted(0.75)), 1..6);
    let durability = prop_oneof![
        3 => Just(Durability::Buffered),
        3 => Just(Durability::Lazy),
        1 => Just(Durability::Sync),
    ];
    prop_oneof![
        8 => (writes, durability).prop_map(|(w, d)| Op::Commit(w, d)),
        1 => (0u8..30).prop_map(Op::ReadThenWrite),
        2 => Just(Op::Snapshot),
        1 => Just(Op::Checkpoint),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Against a model: every reader, old snapshots included, sees exactly the commits made
    /// before it took its snapshot, by every kind of read, while commits are buffered and
    /// the buffer drains at a small threshold, before `Sync` commits, at a transaction's
    /// first read and at checkpoints. At the end, after a last drain, the tree holds it all
    /// and checks out.
    #[test]
    fn reads_through_the_buffer_match_the_commits_at_every_snapshot(
        ops in prop::collection::vec(op(), 1..40),
        small in any::<bool>(),
    ) {
        let db = open(if small { 2_000 } else { 1 << 30 });
        let mut state = State::new();
        let mut snapshots: Vec<(crate::ReadTxn<'_>, State)> = Vec::new();
        let mut buffered_any = false;
        for (round, op) in ops.iter().enumerate() {
            match op {
                Op::Commit(writes, durability) => {
                    let mut txn = db.begin().expect("begin");
                    for &(t, k, put) in writes {
                        if put {
                            let v = value(k, round);
                            txn.put_in(TABLES[t], &[k], &v).expect("put");
                            state.insert((t, k), v);
                        } else {
                            txn.delete_in(TABLES[t], &[k]).expect("delete");
                            state.remove(&(t, k));
                        }
                    }
                    txn.commit_with(*durability).expect("commit");
                    buffered_any |= db.inner.visible.buffer_live_bytes() > 0;
                }
                Op::ReadThenWrite(k) => {
                    let mut txn = db.begin().expect("begin");
                    let old = txn.get(&[*k]).expect("get");
                    prop_assert_eq!(&old, &state.get(&(0, *k)).cloned(), "the writer's read of {}", k);
                    prop_assert_eq!(db.inner.visible.buffer_live_bytes(), 0, "a read drains");
                    let mut v = old.unwrap_or_default();
                    v.push(b'+');
                    txn.put(&[*k], &v).expect("put");
                    txn.commit_with(Durability::Lazy).expect("commit");
                    state.insert((0, *k), v);
                }
                Op::Snapshot => {
                    snapshots.push((db.begin_read().expect("read"), state.clone()));
                }
                Op::Checkpoint => {
                    db.checkpoint().expect("checkpoint");
                    prop_assert_eq!(db.inner.visible.buffer_live_bytes(), 0, "a checkpoint drains");
                }
            }
            db.check_invariants();
            prop_assert_eq!(&read_all(&db.begin_read().expect("read")), &state, "latest, after op {}", round);
            for (i, (read, seen)) in snapshots.iter().enumerate() {
                prop_assert_eq!(&read_all(read), seen, "snapshot {} after op {}", i, round);
            }
        }
        let buffered_commits = ops.iter().any(|op| matches!(op, Op::Commit(_, d) if *d != Durability::Sync));
        if !small && buffered_commits {
            prop_assert!(buffered_any, "no commit was buffered");
        }
        drop(snapshots);
        db.checkpoint().expect("checkpoint");
        db.check().expect("the tree checks out");
        prop_assert_eq!(&read_all(&db.begin_read().expect("read")), &state);
    }
}
