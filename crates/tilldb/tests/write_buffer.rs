//! The write buffer through the public API (docs/write-buffer.md, `Options::write_buffer_bytes`;
//! the hidden `Db::set_write_buffer_bytes` moves its threshold mid-test): buffered commits read back by
//! every read, an older snapshot kept through a drain, and a killed process that reopens with
//! every acknowledged commit. The crate's own tests (`db/commit/buffer/tests.rs`) run the
//! same against a model of every state; the crash explorer's `/buffer` scenarios crash it at
//! every point.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use tilldb::io::{CrashMode, SimConfig, SimDisk};
use tilldb::{Db, Direction, Durability, Options};

fn options() -> Options {
    Options {
        background_threads: false,
        ..Options::for_tests()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:04}").into_bytes()
}

/// Every entry of the default table, by a range each way and by point reads, checked
/// against each other and the length; returns them.
fn read_all(read: &tilldb::ReadTxn<'_>) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let forward: Vec<(Vec<u8>, Vec<u8>)> = read
        .range(Bound::Unbounded, Bound::Unbounded, Direction::Forward)
        .expect("range")
        .collect::<tilldb::Result<_>>()
        .expect("entries");
    let mut backward: Vec<(Vec<u8>, Vec<u8>)> = read
        .range(Bound::Unbounded, Bound::Unbounded, Direction::Backward)
        .expect("range")
        .collect::<tilldb::Result<_>>()
        .expect("entries");
    backward.reverse();
    assert_eq!(forward, backward, "forward and backward");
    assert_eq!(read.len().expect("len"), forward.len() as u64, "length");
    for (k, v) in &forward {
        assert_eq!(read.get(k).expect("get").as_ref(), Some(v), "get {k:?}");
    }
    forward.into_iter().collect()
}

fn commit(db: &Db, state: &mut BTreeMap<Vec<u8>, Vec<u8>>, round: u32) {
    let mut txn = db.begin().expect("begin");
    for i in 0..5 {
        let k = key((round * 7 + i * 13) % 200);
        if (round + i).is_multiple_of(4) {
            txn.delete(&k).expect("delete");
            state.remove(&k);
        } else {
            let v = format!("{round}-{i}").into_bytes();
            txn.put(&k, &v).expect("put");
            state.insert(k, v);
        }
    }
    txn.commit_with(Durability::Buffered).expect("commit");
}

/// A process's own view of `disk` (a clone, where an `Arc` clone is the harness's), so the
/// threads of a database leaked over a kill cannot rename or remove files under the next
/// open.
fn process_view(disk: &Arc<SimDisk>) -> Arc<SimDisk> {
    Arc::new(SimDisk::clone(disk))
}

/// Kills the process holding `db` (nothing closed), reopens the database on `disk` with
/// the buffer off, and checks that it holds `state` (every acknowledged commit) and that
/// its tree checks out.
fn kill_and_reopen(db: Db, disk: &Arc<SimDisk>, state: &BTreeMap<Vec<u8>, Vec<u8>>) {
    std::mem::forget(db);
    disk.crash(CrashMode::ProcessKill);
    let db =
        Db::open_with_storage(process_view(disk), Path::new("/db"), options()).expect("reopen");
    assert_eq!(
        &read_all(&db.begin_read().expect("read")),
        state,
        "after a kill"
    );
    db.check().expect("the tree checks out");
}

#[test]
fn buffered_commits_read_back_and_an_old_snapshot_keeps_its_view_through_a_drain() {
    let disk = Arc::new(SimDisk::new(SimConfig::default()));
    let db = Db::open_with_storage(
        disk,
        Path::new("/db"),
        Options {
            write_buffer_bytes: 1 << 30,
            ..options()
        },
    )
    .expect("create");
    let mut state = BTreeMap::new();
    for round in 0..40 {
        commit(&db, &mut state, round);
    }
    let old = db.begin_read().expect("read");
    let old_state = state.clone();
    for round in 40..80 {
        commit(&db, &mut state, round);
    }
    assert_eq!(read_all(&db.begin_read().expect("read")), state, "latest");
    assert_eq!(read_all(&old), old_state, "the old snapshot");
    // A transaction's first read drains the buffer into the tree.
    let mut txn = db.begin().expect("begin");
    assert_eq!(txn.get(&key(7)).expect("get"), state.get(&key(7)).cloned());
    txn.rollback();
    assert_eq!(
        read_all(&old),
        old_state,
        "the old snapshot, after the drain"
    );
    assert_eq!(
        read_all(&db.begin_read().expect("read")),
        state,
        "after the drain"
    );
    db.check().expect("the tree checks out");
}

#[test]
fn a_killed_process_reopens_with_every_buffered_commit() {
    let disk = Arc::new(SimDisk::new(SimConfig::default()));
    let db =
        Db::open_with_storage(process_view(&disk), Path::new("/db"), options()).expect("create");
    // Small: drains among the commits, and some commits after the last.
    db.set_write_buffer_bytes(4096).expect("buffer on");
    let mut state = BTreeMap::new();
    for round in 0..60 {
        commit(&db, &mut state, round);
    }
    // And some that no drain reaches before the kill.
    db.set_write_buffer_bytes(1 << 30).expect("a larger buffer");
    for round in 60..64 {
        commit(&db, &mut state, round);
    }
    kill_and_reopen(db, &disk, &state);
}

/// A read-only handle (`Db::open_read_only`) beside a writer that buffers: it rebuilds the
/// buffer from the log at open and at each refresh, across a drain the writer makes between
/// two refreshes, and reads what the writer's readers read.
#[test]
fn a_read_only_handle_reads_the_buffered_commits_across_refreshes_and_drains() {
    let dir = tempfile::tempdir().expect("tempdir");
    let writer = Db::open(dir.path(), Options::for_tests()).expect("open");
    writer.set_write_buffer_bytes(1 << 30).expect("buffer on");
    let mut state = BTreeMap::new();
    for round in 0..20 {
        commit(&writer, &mut state, round);
    }
    let mut reader = Db::open_read_only(dir.path(), Options::for_tests()).expect("read-only");
    // Buffered commits are durable within the flush interval, published every few ms.
    let wait_for = |reader: &mut Db, state: &BTreeMap<Vec<u8>, Vec<u8>>, what: &str| {
        let started = std::time::Instant::now();
        loop {
            reader.refresh().expect("refresh");
            if read_all(&reader.begin_read().expect("read")) == *state {
                return;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(5),
                "the reader never saw {what}"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    };
    wait_for(&mut reader, &state, "the first buffered commits");
    // A drain (the writer's transaction reads first), then more buffered commits.
    let mut txn = writer.begin().expect("begin");
    txn.get(&key(3)).expect("get");
    txn.rollback();
    for round in 20..40 {
        commit(&writer, &mut state, round);
    }
    wait_for(&mut reader, &state, "the commits after the drain");
    drop(reader);
    writer.close().expect("close");
}

/// A table's entries.
type Rows = BTreeMap<Vec<u8>, Vec<u8>>;

/// A database on disk with buffered commits in two tables, some drained and some not:
/// returns it and what each table holds.
fn buffered_on_disk(dir: &Path) -> (Db, Rows, Rows) {
    let db = Db::open(dir, Options::for_tests()).expect("open");
    let mut txn = db.begin().expect("begin");
    txn.put_in("queue", b"head", b"0").expect("put");
    txn.commit().expect("the table made through the tree");
    let mut queue = BTreeMap::from([(b"head".to_vec(), b"0".to_vec())]);
    db.set_write_buffer_bytes(4096).expect("buffer on");
    let mut state = BTreeMap::new();
    for round in 0..40 {
        if round == 30 {
            // The last commits stay in the buffer.
            db.set_write_buffer_bytes(1 << 30).expect("a larger buffer");
        }
        commit(&db, &mut state, round);
        let mut txn = db.begin().expect("begin");
        let k = format!("item-{round:03}").into_bytes();
        txn.put_in("queue", &k, b"x").expect("put");
        txn.commit().expect("commit");
        queue.insert(k, b"x".to_vec());
    }
    (db, state, queue)
}

fn queue_of(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let read = db.begin_read().expect("read");
    let entries: BTreeMap<Vec<u8>, Vec<u8>> = read
        .range_in(
            "queue",
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
        )
        .expect("range")
        .collect::<tilldb::Result<_>>()
        .expect("entries");
    assert_eq!(
        read.len_in("queue").expect("len"),
        entries.len() as u64,
        "length of the queue"
    );
    entries
}

/// `Db::backup_to` while commits sit in the buffer: the copy's log holds their records from
/// its redo point, and opening the copy (with the buffer off) rebuilds and drains them.
#[test]
fn a_backup_taken_with_buffered_commits_opens_with_all_of_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, state, queue) = buffered_on_disk(&dir.path().join("db"));
    let target = dir.path().join("copy");
    db.backup_to(&target).expect("backup");
    db.close().expect("close");
    let copy = Db::open(&target, Options::for_tests()).expect("open the copy");
    assert_eq!(
        read_all(&copy.begin_read().expect("read")),
        state,
        "default table"
    );
    assert_eq!(queue_of(&copy), queue, "the queue table");
    copy.check().expect("the copy checks out");
}

/// `Db::compact_to` while commits sit in the buffer: the copy holds what a snapshot sees,
/// buffered commits included.
#[test]
fn a_compacted_copy_holds_the_buffered_commits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, state, queue) = buffered_on_disk(&dir.path().join("db"));
    let target = dir.path().join("compacted");
    db.compact_to(&target).expect("compact");
    assert_eq!(queue_of(&db), queue, "the source still holds the queue");
    db.close().expect("close");
    let copy = Db::open(&target, Options::for_tests()).expect("open the copy");
    assert_eq!(
        read_all(&copy.begin_read().expect("read")),
        state,
        "default table"
    );
    assert_eq!(queue_of(&copy), queue, "the queue table");
    copy.check().expect("the copy checks out");
}

/// The first `n` entries of the default table from `from` in `direction` (`None`: from the
/// table's edge), as a `ReadTxn` range yields them.
fn first_n(
    read: &tilldb::ReadTxn<'_>,
    from: Option<&[u8]>,
    direction: Direction,
    n: usize,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let bound = from.map_or(Bound::Unbounded, Bound::Included);
    let (lower, upper) = match direction {
        Direction::Forward => (bound, Bound::Unbounded),
        Direction::Backward => (Bound::Unbounded, bound),
    };
    read.range(lower, upper, direction)
        .expect("range")
        .take(n)
        .collect::<tilldb::Result<_>>()
        .expect("entries")
}

fn model_n(
    state: &Rows,
    from: Option<&[u8]>,
    direction: Direction,
    n: usize,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let bound = from.map_or(Bound::Unbounded, |k| Bound::Included(k.to_vec()));
    let (lower, upper) = match direction {
        Direction::Forward => (bound, Bound::Unbounded),
        Direction::Backward => (Bound::Unbounded, bound),
    };
    let range = state.range::<Vec<u8>, _>((lower, upper));
    let pairs = |(k, v): (&Vec<u8>, &Vec<u8>)| (k.clone(), v.clone());
    match direction {
        Direction::Forward => range.map(pairs).take(n).collect(),
        Direction::Backward => range.rev().map(pairs).take(n).collect(),
    }
}

/// Ranges over a table of many leaves with a few buffered keys among them: a scan reads a
/// leaf in place only where the buffer holds nothing its snapshot sees in the leaf's span
/// (to the window's end when the leaf ends the window), and merges the buffer elsewhere;
/// an older snapshot reads the leaves in place past versions it does not see.
#[test]
fn ranges_over_many_leaves_take_the_few_buffered_keys_among_them() {
    let disk = Arc::new(SimDisk::new(SimConfig::default()));
    let db = Db::open_with_storage(disk, Path::new("/db"), options()).expect("create");
    let wide = |i: u32| format!("row-{i:05}").into_bytes();
    let mut state = Rows::new();
    let mut txn = db.begin().expect("begin");
    for i in (0..6000).step_by(2) {
        let mut v = format!("tree-{i}").into_bytes();
        if i % 500 == 0 {
            // An overflow value: a run stops there, and a batch reads on.
            v.resize(20_000, b'o');
        }
        txn.put(&wide(i), &v).expect("put");
        state.insert(wide(i), v);
    }
    txn.commit().expect("the tree's rows");
    let before = db.begin_read().expect("read");
    let before_state = state.clone();
    db.set_write_buffer_bytes(1 << 30).expect("buffer on");
    // A few keys buffered: new ones between rows, before the first and after the last,
    // rows deleted and rows changed, in a handful of leaves.
    let mut txn = db.begin().expect("begin");
    let write = |txn: &mut tilldb::Txn<'_>, state: &mut Rows, k: Vec<u8>, v: Option<&str>| {
        if let Some(v) = v {
            txn.put(&k, v.as_bytes()).expect("put");
            state.insert(k, v.as_bytes().to_vec());
        } else {
            txn.delete(&k).expect("delete");
            state.remove(&k);
        }
    };
    write(&mut txn, &mut state, b"row-".to_vec(), Some("first"));
    write(&mut txn, &mut state, wide(1001), Some("new"));
    write(&mut txn, &mut state, wide(3000), Some("changed"));
    write(&mut txn, &mut state, wide(9999), Some("last"));
    write(&mut txn, &mut state, wide(4500), None);
    // At and around overflow values: one replaced, one deleted, new keys beside them.
    write(
        &mut txn,
        &mut state,
        wide(2000),
        Some("was an overflow value"),
    );
    write(
        &mut txn,
        &mut state,
        wide(2001),
        Some("after an overflow value"),
    );
    write(
        &mut txn,
        &mut state,
        wide(1499),
        Some("before an overflow value"),
    );
    write(&mut txn, &mut state, wide(3500), None);
    // A stretch of rows all deleted, longer than a leaf.
    for i in (5000..5400).step_by(2) {
        write(&mut txn, &mut state, wide(i), None);
    }
    txn.commit_with(Durability::Buffered).expect("buffered");
    let read = db.begin_read().expect("read");
    let starts: Vec<Option<Vec<u8>>> = [None]
        .into_iter()
        .chain((0..10_100).step_by(37).map(|i| Some(wide(i))))
        .chain([1499, 1500, 2000, 2001, 3500, 4999, 5000, 5201, 5400].map(|i| Some(wide(i))))
        .collect();
    for from in &starts {
        for direction in [Direction::Forward, Direction::Backward] {
            for n in [5, 200] {
                assert_eq!(
                    first_n(&read, from.as_deref(), direction, n),
                    model_n(&state, from.as_deref(), direction, n),
                    "{n} from {from:?} {direction:?}"
                );
                assert_eq!(
                    first_n(&before, from.as_deref(), direction, n),
                    model_n(&before_state, from.as_deref(), direction, n),
                    "the older snapshot: {n} from {from:?} {direction:?}"
                );
            }
        }
    }
    assert_eq!(read_all(&read), state, "everything");
    assert_eq!(read_all(&before), before_state, "everything, before");
}

/// A commit of many keys in order above every key (an append: a queue's or a log's new
/// entries) goes through the tree without draining the buffer, and one whose keys reach
/// into the buffer's does not skip the buffer: each key reads its latest value, older
/// snapshots read theirs, and a killed process reopens with all of it.
#[test]
fn appends_past_the_buffer_go_through_the_tree_and_overlapping_ones_do_not() {
    let disk = Arc::new(SimDisk::new(SimConfig::default()));
    let db = Db::open_with_storage(
        process_view(&disk),
        Path::new("/db"),
        Options {
            write_buffer_bytes: 1 << 30,
            ..options()
        },
    )
    .expect("create");
    let mut state = Rows::new();
    let mut snapshots = Vec::new();
    let bulk = |db: &Db, state: &mut Rows, prefix: &str, keys: std::ops::Range<u32>, v: &str| {
        let mut txn = db.begin().expect("begin");
        for i in keys {
            let k = format!("{prefix}{i:03}").into_bytes();
            txn.put(&k, v.as_bytes()).expect("put");
            state.insert(k, v.as_bytes().to_vec());
        }
        txn.commit_with(Durability::Buffered).expect("commit");
    };
    bulk(&db, &mut state, "a", 0..80, "tree");
    snapshots.push((db.begin_read().expect("read"), state.clone()));
    // Small commits above the tree's keys: buffered.
    for i in 100..111 {
        bulk(&db, &mut state, "k", i..i + 1, "buffered");
    }
    snapshots.push((db.begin_read().expect("read"), state.clone()));
    // Keys from inside the buffered ones on, above the tree's: not an append past the
    // buffer, so the buffered versions of k105..k110 must not hide these.
    bulk(&db, &mut state, "k", 105..175, "overlapping");
    snapshots.push((db.begin_read().expect("read"), state.clone()));
    // Above everything: an append.
    bulk(&db, &mut state, "m", 0..70, "appended");
    for i in 0..5 {
        bulk(&db, &mut state, "b", i..i + 1, "buffered after");
    }
    snapshots.push((db.begin_read().expect("read"), state.clone()));
    for (i, (read, want)) in snapshots.iter().enumerate() {
        assert_eq!(&read_all(read), want, "snapshot {i}");
    }
    drop(snapshots);
    kill_and_reopen(db, &disk, &state);
}

/// `Db::get` takes no registered snapshot: a drain and the prune after it may run between
/// its look at the buffer and its look at the tree. Readers on other threads check that a
/// value the writer acknowledged is never followed by an older one, while the writer's
/// commits drain every few commits.
#[test]
fn a_point_read_beside_drains_never_returns_a_value_older_than_an_acknowledged_one() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let db = Db::open_with_storage(
        Arc::new(SimDisk::new(SimConfig::default())),
        Path::new("/db"),
        options(),
    )
    .expect("create");
    db.set_write_buffer_bytes(1 << 30).expect("buffer on");
    let acked = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let value_of = |db: &Db| {
        db.get(b"k").expect("get").map_or(0, |v| {
            u64::from_le_bytes(v.as_slice().try_into().expect("eight bytes"))
        })
    };
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                while !done.load(Ordering::Acquire) {
                    let floor = acked.load(Ordering::Acquire);
                    let seen = value_of(&db);
                    assert!(seen >= floor, "read {seen} after {floor} was acknowledged");
                }
            });
        }
        for n in 1..=3_000u64 {
            let mut txn = db.begin().expect("begin");
            txn.put(b"k", &n.to_le_bytes()).expect("put");
            // Rows beside it, so that a drain takes a while.
            for i in 0..8u64 {
                txn.put(format!("beside-{:08}", n * 8 + i).as_bytes(), b"beside")
                    .expect("put");
            }
            txn.commit_with(Durability::Buffered).expect("commit");
            acked.store(n, Ordering::Release);
            if n % 3 == 0 {
                // A transaction's first read drains the buffer.
                let mut txn = db.begin().expect("begin");
                txn.get(b"x").expect("get");
                txn.rollback();
            }
        }
        done.store(true, Ordering::Release);
    });
    assert_eq!(value_of(&db), 3_000);
}

/// A new database on a simulated disk with the buffer on, draining at 1 GiB: only what a
/// test does drains it.
fn open_buffered() -> Db {
    Db::open_with_storage(
        Arc::new(SimDisk::new(SimConfig::default())),
        Path::new("/db"),
        Options {
            write_buffer_bytes: 1 << 30,
            ..options()
        },
    )
    .expect("create")
}

/// Drains the buffer into the tree the way a transaction's first read does.
fn drain_by_a_read(db: &Db) {
    let mut txn = db.begin().expect("begin");
    txn.get(b"any").expect("a first read drains");
    txn.rollback();
}

/// Waits (polling, up to 20 s) until `db` has nothing buffered; panics naming `what`.
fn wait_until_drained(db: &Db, what: &str) {
    let started = std::time::Instant::now();
    while db.stats().write_buffer_bytes > 0 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{what}: still buffered 20 s later ({:?})",
            db.stats()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// With background threads, once no commit came for a while the checkpoint thread drains
/// what the last commits left buffered (mutant `idle-buffer-unwatched`: no commit asks it
/// to watch, and the buffer waits for its threshold), readers find the same values in the
/// tree, a commit after that drain is watched and drained in turn, and a killed process
/// reopens with all of it. No checkpoint is due by time or volume here: only the idle
/// drain empties the buffer.
#[test]
fn an_idle_writer_leaves_the_buffer_to_the_checkpoint_thread_which_drains_it() {
    let disk = Arc::new(SimDisk::new(SimConfig::default()));
    let db = Db::open_with_storage(
        process_view(&disk),
        Path::new("/db"),
        Options {
            background_threads: true,
            checkpoint_interval: std::time::Duration::from_hours(1),
            write_buffer_bytes: 1 << 30,
            ..options()
        },
    )
    .expect("create");
    let mut state = BTreeMap::new();
    for round in 0..20 {
        commit(&db, &mut state, round);
    }
    wait_until_drained(&db, "the commits before the first idle drain");
    assert!(db.stats().idle_drains >= 1, "{:?}", db.stats());
    assert_eq!(&read_all(&db.begin_read().expect("read")), &state);
    let drains = db.stats().idle_drains;
    commit(&db, &mut state, 20);
    wait_until_drained(&db, "a commit after an idle drain");
    assert!(db.stats().idle_drains > drains, "{:?}", db.stats());
    assert_eq!(&read_all(&db.begin_read().expect("read")), &state);
    kill_and_reopen(db, &disk, &state);
}

/// A drain whose buffered versions some snapshot precedes keeps, for that snapshot, the
/// values it replaced in the tree (mutant `drain-drops-needed-befores`: it keeps none, as it
/// may when every snapshot sees all of them): the snapshot reads its values, not the
/// drained ones, by point reads, a range and its length.
#[test]
fn a_snapshot_older_than_the_buffered_commits_keeps_its_view_through_their_drain() {
    let db = open_buffered();
    let put = |key: &[u8], value: &[u8]| {
        let mut txn = db.begin().expect("begin");
        txn.put(key, value).expect("put");
        txn.commit_with(Durability::Buffered).expect("commit");
    };
    put(b"k", b"old");
    drain_by_a_read(&db);
    let old = db.begin_read().expect("read");
    put(b"k", b"new");
    put(b"added", b"new");
    drain_by_a_read(&db);
    assert_eq!(old.get(b"k").expect("get").as_deref(), Some(&b"old"[..]));
    assert_eq!(old.get(b"added").expect("get"), None);
    let before: BTreeMap<Vec<u8>, Vec<u8>> = [(b"k".to_vec(), b"old".to_vec())].into();
    assert_eq!(
        read_all(&old),
        before,
        "the old snapshot's range and length"
    );
    let now = db.begin_read().expect("read");
    assert_eq!(now.get(b"k").expect("get").as_deref(), Some(&b"new"[..]));
    assert_eq!(now.len().expect("len"), 2);
}

/// A drain whose buffered versions every snapshot sees keeps no older value of their keys
/// for the snapshots (only its table's count, for their lengths): such a reader finds each
/// key's version in the drained generation, and reads the rest of the tree in place.
#[test]
fn a_drain_that_every_snapshot_sees_keeps_no_older_values_of_its_keys() {
    let db = open_buffered();
    let mut state = BTreeMap::new();
    for round in 0..40 {
        commit(&db, &mut state, round);
    }
    let reader = db.begin_read().expect("read");
    drain_by_a_read(&db);
    assert!(
        db.stats().overlay_keys <= 1,
        "only the count's older value is kept: {:?}",
        db.stats()
    );
    assert_eq!(
        read_all(&reader),
        state,
        "the reader's view, after the drain"
    );
}

/// A drain in chunks (docs/write-buffer.md, "The drain in chunks"): once the buffer fills,
/// each buffered commit after it applies one chunk, so commits and readers come between a
/// drain's chunks; each read then, length included, matches the commits (mutant
/// `chunk-counts-rows-twice`: a chunk's rows counted in the catalog and in the frozen
/// generation). Killed between two chunks of a drain, the log reads back the same through a
/// read-only open, which keeps the rebuilt buffer and its counts (mutant
/// `rebuild-counts-chunks-twice`), and through the writer's reopen.
#[test]
fn commits_between_the_chunks_of_a_drain_read_back_and_count_once_after_a_kill() {
    let disk = Arc::new(SimDisk::new(SimConfig::default()));
    let db = Db::open_with_storage(
        process_view(&disk),
        Path::new("/db"),
        Options {
            write_buffer_bytes: 4_000,
            ..options()
        },
    )
    .expect("create");
    let mut state = BTreeMap::new();
    let mut chunks_before = 0;
    let mut rounds_with_a_chunk = 0;
    for round in 0..400 {
        commit(&db, &mut state, round);
        assert_eq!(
            &read_all(&db.begin_read().expect("read")),
            &state,
            "after commit {round}"
        );
        let chunks = db.stats().drain_chunks;
        if chunks > chunks_before {
            rounds_with_a_chunk += 1;
        }
        chunks_before = chunks;
        // Stop inside a drain: a chunk this round, the buffer not empty.
        if rounds_with_a_chunk >= 30 && chunks > 0 && db.stats().write_buffer_bytes > 4_000 {
            break;
        }
    }
    assert!(
        rounds_with_a_chunk >= 30,
        "chunks came in {rounds_with_a_chunk} commits: {:?}",
        db.stats()
    );
    std::mem::forget(db);
    disk.crash(CrashMode::ProcessKill);
    let reader = Db::open_read_only_with_storage(process_view(&disk), Path::new("/db"), options())
        .expect("read-only open");
    assert!(
        reader.stats().write_buffer_bytes > 0,
        "the read-only open rebuilt a buffer: {:?}",
        reader.stats()
    );
    assert_eq!(
        &read_all(&reader.begin_read().expect("read")),
        &state,
        "a read-only open after the kill"
    );
    drop(reader);
    let db =
        Db::open_with_storage(process_view(&disk), Path::new("/db"), options()).expect("reopen");
    assert_eq!(
        &read_all(&db.begin_read().expect("read")),
        &state,
        "the writer's reopen"
    );
    db.check().expect("the tree checks out");
}
