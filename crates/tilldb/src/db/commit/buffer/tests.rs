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

const TABLES: [&str; 2] = ["", "t"];

type State = BTreeMap<(usize, u8), Vec<u8>>;

/// A commit as the feed returns it: its writes as (table, key, value).
type Delivered = Vec<(String, Vec<u8>, Option<Vec<u8>>)>;

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
    db.set_write_buffer_bytes(buffer_bytes).expect("buffer on");
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
        for k in (0..30u8).chain((30..=255).step_by(7)) {
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

/// Makes `writes` (table index, key, put or delete) in `txn`, and in the model `state`.
fn write_all(
    txn: &mut crate::Txn<'_>,
    state: &mut State,
    writes: &[(usize, u8, bool)],
    round: usize,
) {
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
    /// A commit of puts of the keys from this one on, as many as a commit that appends
    /// past the buffer and the tree needs to go through the tree
    /// (`APPEND_WRITES_MIN`): an append when its keys lie above all others, else buffered.
    Bulk(usize, u8),
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
        2 => (0usize..2, 30u8..=(255 - BULK_KEYS)).prop_map(|(t, start)| Op::Bulk(t, start)),
    ]
}

/// Keys a [`Op::Bulk`] commit puts.
#[expect(
    clippy::cast_possible_truncation,
    reason = "APPEND_WRITES_MIN is far below 256"
)]
const BULK_KEYS: u8 = super::APPEND_WRITES_MIN as u8;

/// The writes of a [`Op::Bulk`] commit.
fn bulk(t: usize, start: u8) -> Vec<(usize, u8, bool)> {
    (start..start + BULK_KEYS).map(|k| (t, k, true)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Against a model: every reader, old snapshots included, sees exactly the commits made
    /// before it took its snapshot, by every kind of read, while commits are buffered and
    /// the buffer drains at a small threshold, at a transaction's
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
                    write_all(&mut txn, &mut state, writes, round);
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
                Op::Bulk(t, start) => {
                    let mut txn = db.begin().expect("begin");
                    write_all(&mut txn, &mut state, &bulk(*t, *start), round);
                    txn.commit_with(Durability::Lazy).expect("commit");
                }
            }
            db.check_invariants();
            prop_assert_eq!(&read_all(&db.begin_read().expect("read")), &state, "latest, after op {}", round);
            for (i, (read, seen)) in snapshots.iter().enumerate() {
                prop_assert_eq!(&read_all(read), seen, "snapshot {} after op {}", i, round);
            }
        }
        let buffered_commits = ops.iter().any(|op| matches!(op, Op::Commit(..)));
        if !small && buffered_commits {
            prop_assert!(buffered_any, "no commit was buffered");
        }
        drop(snapshots);
        db.checkpoint().expect("checkpoint");
        db.check().expect("the tree checks out");
        prop_assert_eq!(&read_all(&db.begin_read().expect("read")), &state);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// A process killed after buffered commits (acknowledged at `Buffered`, written to the
    /// OS, or `Sync`) and read-modify-write ones through the tree, some drained at a small
    /// threshold, before a tree commit or by a checkpoint, some not: the reopen
    /// rebuilds the buffer from the log after the last drain and holds every acknowledged
    /// commit, read every way; the writer's open drains it into the tree, which checks out;
    /// a second crash and reopen finds the same.
    #[test]
    fn a_killed_process_reopens_with_every_buffered_commit(
        commits in prop::collection::vec((prop::collection::vec((0usize..2, 0u8..30, prop::bool::weighted(0.75)), 1..6), prop::bool::weighted(0.2), prop::option::weighted(0.15, 30u8..=(255 - BULK_KEYS))), 1..40),
        checkpoint_at in prop::option::of(0usize..40),
        small in any::<bool>(),
    ) {
        let disk = Arc::new(SimDisk::new(SimConfig::default()));
        let options = Options { background_threads: false, ..Options::for_tests() };
        let db = open_on(&disk, options.clone(), if small { 2_000 } else { 1 << 30 });
        let mut state = State::new();
        for (round, (writes, through_tree, bulk_from)) in commits.iter().enumerate() {
            let mut txn = db.begin().expect("begin");
            if *through_tree {
                // A transaction that reads first drains, and commits through the tree.
                txn.get(b"\x00").expect("get");
            }
            // Sometimes many keys from one on: an append past the buffer when they lie
            // above all others (through the tree, the buffer left undrained), else buffered.
            let writes = bulk_from.map_or_else(|| writes.clone(), |start| bulk(round % 2, start));
            write_all(&mut txn, &mut state, &writes, round);
            let durability = if round % 3 == 0 { Durability::Sync } else { Durability::Buffered };
            txn.commit_with(durability).expect("commit");
            if checkpoint_at == Some(round) {
                db.checkpoint().expect("checkpoint");
            }
        }
        let undrained = db.inner.visible.buffer_live_bytes() > 0;
        std::mem::forget(db);
        for reopen in 0..2 {
            disk.crash(crate::io::CrashMode::ProcessKill);
            // Reopened without the buffer: what the log holds is read all the same.
            let db = Db::open_with_storage(process_view(&disk), Path::new("/db"), options.clone())
                .expect("reopen");
            prop_assert_eq!(&read_all(&db.begin_read().expect("read")), &state, "reopen {}, undrained {}", reopen, undrained);
            prop_assert_eq!(db.inner.visible.buffer_live_bytes(), 0, "the open drained the buffer");
            db.check().expect("the tree checks out");
            std::mem::forget(db);
        }
    }
}

/// A process's own view of `disk` (a clone, where an `Arc` clone is the harness's), so the
/// threads of a database leaked over a kill cannot touch the files under the next open.
fn process_view(disk: &Arc<SimDisk>) -> Arc<SimDisk> {
    Arc::new(SimDisk::clone(disk))
}

/// [`open`] on `disk`.
fn open_on(disk: &Arc<SimDisk>, options: Options, buffer_bytes: u64) -> Db {
    let db = Db::open_with_storage(process_view(disk), Path::new("/db"), options).expect("create");
    make_table_t(&db);
    db.set_write_buffer_bytes(buffer_bytes).expect("buffer on");
    db
}

fn make_table_t(db: &Db) {
    let mut txn = db.begin().expect("begin");
    txn.put_in("t", b"\xff", b"made").expect("put");
    txn.commit().expect("commit");
    let mut txn = db.begin().expect("begin");
    txn.delete_in("t", b"\xff").expect("delete");
    txn.commit().expect("commit");
}

/// With the change feed on, buffered commits reach the feed from their own records, each
/// once, in commit order among the commits through the tree; a drain (at the small
/// threshold here) delivers nothing.
#[test]
fn the_feed_delivers_buffered_commits_once_and_skips_drains() {
    let stats = feed_delivers_each_commit_once(2_000, Options::for_tests().commit_part_bytes);
    assert!(stats.drain_chunks > 0, "{stats:?}");
}

/// The same with drains and chunks logged in parts (a small `commit_part_bytes`): the feed
/// stopped at a drain's first part, a plain-looking record without the feed's changes ("made
/// with `Options::change_feed` off"), until every part carried the drain's flag.
#[test]
fn the_feed_skips_drains_and_chunks_logged_in_parts() {
    let stats = feed_delivers_each_commit_once(64 << 10, 4096);
    assert!(stats.drain_chunks > 0, "{stats:?}");
    assert!(stats.commit_parts > 0, "no drain in parts: {stats:?}");
}

/// Makes 600 one-row commits (every tenth `Sync`, the others buffered) with the feed on and
/// the buffer draining at `buffer_bytes`, then a checkpoint (a whole drain) and a last `Sync`
/// commit; the feed must return each once, in order. Returns the database's stats.
fn feed_delivers_each_commit_once(buffer_bytes: u64, part_bytes: u64) -> crate::Stats {
    use crate::feed::{self, Feed};
    let disk = Arc::new(SimDisk::new(SimConfig::default()));
    let storage: Arc<dyn crate::io::Storage> = disk.clone();
    let dir = Path::new("/db");
    let options = Options {
        background_threads: false,
        change_feed: true,
        commit_part_bytes: part_bytes,
        ..Options::for_tests()
    };
    let db = open_on(&disk, options, buffer_bytes);
    let start = feed::start_with_storage(&*storage, dir).expect("start");
    let mut feed = Feed::open_with_storage(Arc::clone(&storage), dir, start, None).expect("feed");
    let mut made: Vec<Delivered> = Vec::new();
    for i in 0..600u16 {
        let key = (i % 200).to_le_bytes();
        let table = TABLES[usize::from(i % 3 == 0)];
        let mut txn = db.begin().expect("begin");
        let low = u8::try_from(i % 256).expect("below 256");
        let value = (i % 7 != 0).then(|| value(low, usize::from(i)));
        match &value {
            Some(v) => txn.put_in(table, &key, v).expect("put"),
            None => txn.delete_in(table, &key).expect("delete"),
        }
        let durability = if i % 10 == 9 {
            Durability::Sync
        } else {
            Durability::Buffered
        };
        txn.commit_with(durability).expect("commit");
        made.push(vec![(table.to_owned(), key.to_vec(), value)]);
    }
    db.checkpoint().expect("checkpoint: a whole drain");
    // A last durable commit: the feed reads up to what the writer published as durable.
    let mut txn = db.begin().expect("begin");
    txn.put(b"last", b"1").expect("put");
    txn.commit_with(Durability::Sync).expect("commit");
    made.push(vec![(String::new(), b"last".to_vec(), Some(b"1".to_vec()))]);
    let mut got = Vec::new();
    while let Some(txn) = feed.next(std::time::Duration::ZERO).expect("feed") {
        got.push(
            txn.changes
                .into_iter()
                .map(|c| (c.table, c.key, c.value))
                .collect::<Vec<_>>(),
        );
    }
    // The feed starts where the log does: the two commits that made table "t" first.
    assert_eq!(
        got.len(),
        made.len() + 2,
        "every commit once, none for a drain"
    );
    assert!(got[..2].iter().all(|txn| txn[0].0 == "t"), "made table t");
    assert!(got[2..] == made[..], "every commit once, in order");
    db.stats()
}

/// The close of a handle dropped without `close` (no checkpoint first) moved the header's
/// redo point to the log's end, past buffered records not drained: the next open replayed
/// none of them, and their commits were gone (found by the crash explorer,
/// segment-switch/doublewrite/Buffered/buffer, at the close's header write). A drop drains
/// the buffer first now, as `close` does, and the close moves the redo point behind it
/// (`tests/write_buffer_close.rs` drops one while its thread panics, which drains nothing).
#[test]
fn a_handle_dropped_with_buffered_commits_keeps_them_at_the_next_open() {
    let disk = Arc::new(SimDisk::new(SimConfig::default()));
    let options = Options {
        background_threads: false,
        ..Options::for_tests()
    };
    let db = open_on(&disk, options.clone(), 1 << 30);
    let mut txn = db.begin().expect("begin");
    txn.put(b"kept", b"yes").expect("put");
    txn.commit_with(Durability::Buffered).expect("commit");
    assert!(db.inner.visible.buffer_live_bytes() > 0, "buffered");
    drop(db);
    let db = Db::open_with_storage(disk, Path::new("/db"), options).expect("reopen");
    assert_eq!(db.get(b"kept").expect("get").as_deref(), Some(&b"yes"[..]));
    assert!(
        db.recovery().records == 0,
        "the drop drained the buffer and the close moved the redo point past it: {:?}",
        db.recovery()
    );
}

/// A commit of more than a part of writes goes through the tree: buffered, one of 500,000
/// deletes in `till bench kv` moved its whole tree work into the next transaction's first
/// read (10,000 pops at 19,000 a second against 950,000).
#[test]
fn a_commit_larger_than_a_part_is_not_buffered() {
    let disk = Arc::new(SimDisk::new(SimConfig::default()));
    let options = Options {
        background_threads: false,
        ..Options::for_tests()
    };
    let part = options.commit_part_bytes;
    let db = open_on(&disk, options, 1 << 30);
    let mut txn = db.begin().expect("begin");
    txn.put(b"small", b"1").expect("put");
    txn.commit().expect("commit");
    assert!(
        db.inner.visible.buffer_live_bytes() > 0,
        "a small commit is buffered"
    );
    let mut txn = db.begin().expect("begin");
    let value = [7u8; 100];
    let rows = part / 100 + 10;
    for i in 0..rows {
        txn.put(format!("big-{i:08}").as_bytes(), &value)
            .expect("put");
    }
    let before = db.inner.visible.buffer_live_bytes();
    txn.commit().expect("commit");
    assert_eq!(
        db.inner.visible.buffer_live_bytes(),
        0,
        "the large commit drained the buffer and went through the tree (buffered before: {before})"
    );
    assert_eq!(db.len().expect("len"), rows + 1);
}

/// Which way a commit of `APPEND_WRITES_MIN` keys or more goes: above every key of the
/// tree and the buffer, through the tree, the buffer kept as it was (not drained, not
/// grown); reaching into the buffer's keys, buffered; below the tree's last key, buffered.
#[test]
fn an_append_goes_through_the_tree_and_leaves_the_buffer_as_it_was() {
    let disk = Arc::new(SimDisk::new(SimConfig::default()));
    let options = Options {
        background_threads: false,
        ..Options::for_tests()
    };
    let db = open_on(&disk, options, 1 << 30);
    let commit = |prefix: &str, keys: std::ops::Range<usize>| {
        let mut txn = db.begin().expect("begin");
        for i in keys {
            txn.put(format!("{prefix}{i:04}").as_bytes(), b"v")
                .expect("put");
        }
        txn.commit().expect("commit");
        db.inner.visible.buffer_live_bytes()
    };
    let n = super::APPEND_WRITES_MIN;
    let buffered = commit("k", 0..1);
    assert!(buffered > 0, "a small commit is buffered");
    assert_eq!(commit("m", 0..n), buffered, "an append past the buffer");
    assert_eq!(commit("n", 0..n), buffered, "another");
    assert!(
        commit("c", 0..n) > buffered,
        "keys below the tree's last key are buffered"
    );
    let before = db.inner.visible.buffer_live_bytes();
    assert!(
        commit("z", 0..n - 1) > before,
        "fewer than APPEND_WRITES_MIN keys are buffered"
    );
    let before = db.inner.visible.buffer_live_bytes();
    assert!(
        commit("z", n - 2..2 * n) > before,
        "keys that reach into the buffer's are buffered"
    );
    assert_eq!(db.len().expect("len"), 1 + 5 * n as u64);
    db.check_invariants();
}

/// A drain in chunks (`txn/buffer.rs`, "Chunks"): once the live generation fills, every
/// buffered commit after it applies one chunk of the frozen generation, so several commits
/// come between the first chunk and the last; every read between them, length included,
/// matches the commits. Killed in the middle of one, the log rebuilds the same view: a
/// read-only open (which keeps the rebuilt buffer, counts and all) and the writer's reopen
/// (which drains it) read exactly the acknowledged commits.
#[test]
fn a_drain_in_chunks_lets_commits_in_between_and_counts_each_row_once() {
    let disk = Arc::new(SimDisk::new(SimConfig::default()));
    let options = Options {
        background_threads: false,
        ..Options::for_tests()
    };
    let db = open_on(&disk, options.clone(), 2_000);
    let mut state = State::new();
    let mut commits_while_draining = 0;
    let mut killed_mid_drain = false;
    for round in 0..400usize {
        // New keys, overwrites and deletes over both tables.
        let key = u8::try_from(round * 7 % 30).expect("small");
        let writes = [
            (round % 2, key, round % 5 != 4),
            ((round + 1) % 2, key / 2, true),
        ];
        let mut txn = db.begin().expect("begin");
        write_all(&mut txn, &mut state, &writes, round);
        txn.commit_with(Durability::Buffered).expect("commit");
        if db.inner.visible.buffer_draining() {
            commits_while_draining += 1;
        }
        db.check_invariants();
        assert_eq!(
            read_all(&db.begin_read().expect("read")),
            state,
            "after commit {round}"
        );
        if commits_while_draining >= 20 && db.inner.visible.buffer_draining() {
            killed_mid_drain = true;
            break;
        }
    }
    assert!(killed_mid_drain, "no drain in chunks spanned commits");
    assert!(db.stats().drain_chunks >= 20, "{:?}", db.stats());
    std::mem::forget(db);
    disk.crash(crate::io::CrashMode::ProcessKill);
    let reader =
        Db::open_read_only_with_storage(process_view(&disk), Path::new("/db"), options.clone())
            .expect("read-only open");
    assert!(
        reader.inner.visible.buffer_undrained_bytes() > 0,
        "the read-only handle rebuilt the buffer"
    );
    assert_eq!(
        read_all(&reader.begin_read().expect("read")),
        state,
        "a read-only open of the crashed log"
    );
    drop(reader);
    let db = Db::open_with_storage(process_view(&disk), Path::new("/db"), options).expect("reopen");
    assert_eq!(
        read_all(&db.begin_read().expect("read")),
        state,
        "the writer's reopen"
    );
    db.check().expect("the tree checks out");
}
