//! `Db::open_read_only` in one process: a snapshot at the writer's durable lsn, `refresh`,
//! nothing written to disk, writes refused, bad directories refused as `Db::open` refuses
//! them, and the writer's checkpoints deferred (never failed) while a reader holds its
//! snapshot. `tests/read_only_procs.rs` runs writer and readers as separate processes.

mod common;
#[path = "common/gate.rs"]
mod gate;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};
use tilldb::{Db, Durability, Error, Options};

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:06}").into_bytes()
}

fn put_rows(db: &Db, from: u32, to: u32, durability: Durability) {
    let mut txn = db.begin().expect("begin");
    for i in from..to {
        txn.put(&key(i), format!("value-{i}").as_bytes())
            .expect("put");
    }
    txn.commit_with(durability).expect("commit");
}

/// Every file under `dir` with its bytes, the lock files aside (empty, made by whoever
/// locks first).
fn contents(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let name = path.strip_prefix(dir).expect("under").display().to_string();
                out.insert(name, std::fs::read(&path).expect("read"));
            }
        }
    }
    out
}

/// Refreshes `reader` until `check` holds (the writer publishes its durable lsn every few
/// milliseconds), for at most 5 s.
fn refresh_until(reader: &mut Db, what: &str, check: impl Fn(&Db) -> bool) {
    let started = Instant::now();
    loop {
        reader.refresh().expect("refresh");
        if check(reader) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the reader never saw {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_reader_sees_durable_commits_at_open_and_newer_ones_only_after_refresh() {
    let dir = tempfile::tempdir().expect("tempdir");
    let writer = Db::open(dir.path(), Options::for_tests()).expect("open");
    put_rows(&writer, 0, 100, Durability::Sync);
    let mut reader = Db::open_read_only(dir.path(), Options::for_tests()).expect("read-only");
    assert!(reader.is_read_only() && !writer.is_read_only());
    // The publisher may lag the commit by a few milliseconds.
    refresh_until(&mut reader, "the first 100 rows", |r| {
        r.len().expect("len") == 100
    });
    put_rows(&writer, 100, 150, Durability::Sync);
    assert_eq!(
        reader.len().expect("len"),
        100,
        "a snapshot does not move by itself"
    );
    assert_eq!(reader.get(&key(120)).expect("get"), None);
    refresh_until(&mut reader, "the next 50 rows", |r| {
        r.len().expect("len") == 150
    });
    assert_eq!(
        reader.get(&key(120)).expect("get").as_deref(),
        Some(&b"value-120"[..])
    );
    let scanned = reader
        .begin_read()
        .expect("read txn")
        .scan(
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            tilldb::Direction::Forward,
        )
        .expect("scan")
        .len();
    assert_eq!(scanned, 150);
    drop(reader);
    writer.close().expect("close");
}

#[test]
fn a_commit_that_is_not_durable_is_never_seen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options {
        checkpoint_interval: Duration::from_hours(1),
        wal: tilldb::WalOptions {
            flush_interval: Duration::from_hours(1),
            ..Options::for_tests().wal
        },
        ..Options::for_tests()
    };
    let writer = Db::open(dir.path(), options.clone()).expect("open");
    put_rows(&writer, 0, 10, Durability::Sync);
    // Written to the log but not flushed: not durable, so not published.
    put_rows(&writer, 10, 20, Durability::Buffered);
    let mut reader = Db::open_read_only(dir.path(), options.clone()).expect("read-only");
    for _ in 0..20 {
        reader.refresh().expect("refresh");
        assert!(
            reader.get(&key(15)).expect("get").is_none(),
            "a Buffered commit the log never flushed was seen"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // A Sync commit flushes the log, the Buffered one's records with it.
    put_rows(&writer, 20, 21, Durability::Sync);
    refresh_until(&mut reader, "the flushed commits", |r| {
        r.get(&key(15)).expect("get").is_some() && r.get(&key(20)).expect("get").is_some()
    });
}

#[test]
fn a_read_only_handle_refuses_writes_and_changes_no_byte() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let writer = Db::open(dir.path(), Options::for_tests()).expect("open");
        put_rows(&writer, 0, 500, Durability::Sync);
        writer.close().expect("close");
    }
    let before = contents(dir.path());
    let reader = Db::open_read_only(dir.path(), Options::for_tests()).expect("read-only");
    assert_eq!(reader.len().expect("len"), 500);
    let err = reader.begin().expect_err("a write transaction");
    assert!(matches!(err, Error::ReadOnly { .. }), "{err:?}");
    assert!(err.to_string().contains("read-only"), "{err}");
    reader.checkpoint().expect("a checkpoint does nothing");
    reader.check().expect("check");
    drop(reader);
    let mut after = contents(dir.path());
    // The readers' lock file is made by the first reader if no writer made it.
    if !before.contains_key("tilldb.readers") {
        after.remove("tilldb.readers");
    }
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    for (name, bytes) in &before {
        assert!(
            after[name] == *bytes,
            "{name} changed under a read-only handle"
        );
    }
}

#[test]
fn a_crashed_database_is_read_as_recovery_would_find_it_without_being_recovered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options {
        background_threads: false,
        ..Options::for_tests()
    };
    {
        let writer = Db::open(dir.path(), options.clone()).expect("open");
        put_rows(&writer, 0, 300, Durability::Sync);
        // A crash: the handle is forgotten, nothing is closed or checkpointed.
        std::mem::forget(writer);
    }
    // The forgotten handle still holds the database lock in this process: a writer is
    // "live" but will never publish more; the reader reads up to what it published.
    let reader = Db::open_read_only(dir.path(), options.clone()).expect("read-only");
    assert_eq!(reader.len().expect("len"), 300);
    assert!(
        reader.recovery().log_bytes > 0,
        "the reader replayed the log"
    );
    reader.check().expect("check");
}

#[test]
fn what_is_no_database_is_refused_and_nothing_is_created() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing");
    let err = Db::open_read_only(&missing, Options::for_tests()).expect_err("missing");
    assert!(matches!(err, Error::NotADatabase { .. }), "{err:?}");
    assert!(!missing.exists(), "a read-only open created the directory");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let err = Db::open_read_only(&empty, Options::for_tests()).expect_err("empty");
    assert!(matches!(err, Error::NotADatabase { .. }), "{err:?}");
    assert_eq!(std::fs::read_dir(&empty).expect("ls").count(), 0);
}

#[test]
fn the_writer_defers_checkpoints_while_a_reader_holds_and_catches_up_after() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options {
        // Checkpoints in the committing thread: with a checkpoint thread, the data file
        // below could be read before a wrong checkpoint wrote it.
        background_threads: false,
        checkpoint_log_bytes: 64 << 10,
        wal: tilldb::WalOptions {
            segment_bytes: 64 << 10,
            first_segment_bytes: 64 << 10,
            ..Options::for_tests().wal
        },
        ..Options::for_tests()
    };
    let writer = Db::open(dir.path(), options.clone()).expect("open");
    put_rows(&writer, 0, 10, Durability::Sync);
    let reader = Db::open_read_only(dir.path(), options.clone()).expect("read-only");
    let seen = reader.len().expect("len");
    let data = dir.path().join("data.tdb");
    let pages_before = std::fs::read(&data).expect("read the data file");
    // Far past checkpoint_log_bytes: every checkpoint is deferred, no commit fails.
    for i in 0..40 {
        put_rows(&writer, 10 + i * 50, 60 + i * 50, Durability::Sync);
    }
    assert!(
        std::fs::read(&data).expect("read the data file") == pages_before,
        "the data file changed under a reader's snapshot"
    );
    assert_eq!(reader.len().expect("len"), seen, "the snapshot stayed");
    reader.check().expect("the snapshot is whole");
    drop(reader);
    writer
        .checkpoint()
        .expect("checkpoint once the reader is gone");
    let reader = Db::open_read_only(dir.path(), options.clone()).expect("read-only");
    assert_eq!(reader.len().expect("len"), 2010);
    drop(reader);
    writer.close().expect("close");
    let reopened = Db::open(dir.path(), options).expect("reopen");
    assert_eq!(reopened.len().expect("len"), 2010);
}

/// Holds a writer's open at its first read of the header (after it took the database lock)
/// until released; with `after_lock`, as soon as it has taken the database lock.
#[derive(Debug, Default)]
struct HoldAtHeader {
    after_lock: bool,
    held: std::sync::Mutex<bool>,
    reached: std::sync::Condvar,
    release: std::sync::Condvar,
}

impl HoldAtHeader {
    /// The first time: says it is reached and waits for the release.
    fn hold(&self) {
        let mut held = self.held.lock().expect("lock");
        if !*held {
            *held = true;
            self.reached.notify_all();
            while *held {
                held = self.release.wait(held).expect("wait");
            }
        }
    }
}

impl tilldb::io::Hooks for HoldAtHeader {
    fn before(&self, call: &tilldb::io::Call<'_>) -> tilldb::Result<()> {
        if let tilldb::io::Call::Open { path, .. } = call
            && path.ends_with("tilldb.meta")
            && !self.after_lock
        {
            self.hold();
        }
        Ok(())
    }

    fn after(&self, call: &tilldb::io::Call<'_>) {
        if let tilldb::io::Call::Lock { path, mode } = call
            && path.ends_with(tilldb::LOCK_FILE_NAME)
            && *mode == tilldb::io::LockMode::Exclusive
            && self.after_lock
        {
            self.hold();
        }
    }
}

#[test]
fn a_reader_never_takes_a_dead_writers_lsn_for_the_opening_writers() {
    readers_beside_an_opening_writer(HoldAtHeader::default());
}

/// The same, with the next writer held the moment it has the database lock, before it
/// does anything else. It used to mark itself opening only after that, so in between a
/// reader took the dead writer's published lsn for the live writer's and went back from
/// what a reader had read with no writer running (`tests/read_only_procs.rs` under Wine: a
/// transfer count that went from 4018 back to 4017, CI stop 43). The mark is now written
/// before the lock is taken, under the lock held shared.
#[test]
fn a_reader_never_takes_a_dead_writers_lsn_for_a_writer_that_just_took_the_lock() {
    readers_beside_an_opening_writer(HoldAtHeader {
        after_lock: true,
        ..HoldAtHeader::default()
    });
}

/// A writer publishes its Sync commits (10 rows), then writes Buffered ones (not durable,
/// not published) and dies: they are in the log all the same (a process kill loses
/// nothing), and a reader with no writer live reads the log to its end (20 rows), as the
/// next writer's recovery will. The next writer is then held where `hold` says while it
/// opens: its predecessor's published lsn is not its own, so a new reader and the first
/// one, refreshed, must wait for what it publishes, never go back to 10 rows.
fn readers_beside_an_opening_writer(hold: HoldAtHeader) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tilldb::io::{CrashMode, HookedStorage, SimConfig, SimDisk, Storage};
    let disk = SimDisk::new(SimConfig::default());
    let dir = Path::new("/db");
    let options = Options {
        background_threads: false,
        ..Options::for_tests()
    };
    let writer = Db::open_with_storage(Arc::new(disk.clone()), dir, options.clone()).expect("open");
    put_rows(&writer, 0, 10, Durability::Sync);
    put_rows(&writer, 10, 20, Durability::Buffered);
    disk.crash(CrashMode::ProcessKill);
    std::mem::forget(writer);
    // Each reader's reads of the published file, counted: a reader that read it three times
    // saw the opening writer's mark and polls (one read holds the snapshot, one finds where
    // it ends; a reader that took the dead writer's lsn read no more).
    let counted = |reads: &Arc<AtomicUsize>| -> Arc<dyn Storage> {
        Arc::new(HookedStorage::new(
            Arc::new(disk.clone()),
            DurableReads(Arc::clone(reads)),
        ))
    };
    let (first_reads, reader_reads) =
        (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut first =
        Db::open_read_only_with_storage(counted(&first_reads), dir, options.clone()).expect("ro");
    assert_eq!(first.len().expect("len"), 20);
    let hold = Arc::new(hold);
    let hooked: Arc<dyn Storage> = Arc::new(HookedStorage::new(
        Arc::new(disk.clone()),
        ArcHooks(Arc::clone(&hold)),
    ));
    std::thread::scope(|scope| {
        let opening = scope.spawn(|| Db::open_with_storage(hooked, dir, options.clone()));
        {
            let mut reached = hold.held.lock().expect("lock");
            while !*reached {
                reached = hold.reached.wait(reached).expect("wait");
            }
        }
        let reader_storage = counted(&reader_reads);
        let reader = scope.spawn(|| {
            Db::open_read_only_with_storage(reader_storage, dir, options.clone())
                .expect("ro")
                .len()
                .expect("len")
        });
        let before = first_reads.load(Ordering::SeqCst);
        let refreshed = scope.spawn(move || {
            first.refresh().expect("refresh");
            first.len().expect("len")
        });
        // Release the writer only once each reader has finished (wrongly) or polls for
        // what it will publish: not after a time, which a late-starting thread outlasts.
        let deadline = std::time::Instant::now() + Duration::from_mins(1);
        while !(reader.is_finished() || reader_reads.load(Ordering::SeqCst) >= 3)
            || !(refreshed.is_finished() || first_reads.load(Ordering::SeqCst) >= before + 3)
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the readers neither ended nor polled within a minute"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        *hold.held.lock().expect("lock") = false;
        hold.release.notify_all();
        let writer = opening
            .join()
            .expect("join")
            .expect("the second writer opens");
        assert_eq!(
            reader.join().expect("join"),
            20,
            "a new reader went back to the dead writer's published lsn"
        );
        assert_eq!(
            refreshed.join().expect("join"),
            20,
            "a refreshed reader went back to the dead writer's published lsn"
        );
        drop(writer);
    });
}

/// Counts reads of the published file (`tilldb.durable`).
#[derive(Debug)]
struct DurableReads(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl tilldb::io::Hooks for DurableReads {
    fn before(&self, call: &tilldb::io::Call<'_>) -> tilldb::Result<()> {
        if let tilldb::io::Call::Read { path, .. } = call
            && path.file_name().is_some_and(|n| n == "tilldb.durable")
        {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        Ok(())
    }
}

/// Hooks through an `Arc`, so the test keeps a handle on them.
#[derive(Debug)]
struct ArcHooks(std::sync::Arc<HoldAtHeader>);

impl tilldb::io::Hooks for ArcHooks {
    fn before(&self, call: &tilldb::io::Call<'_>) -> tilldb::Result<()> {
        self.0.before(call)
    }

    fn after(&self, call: &tilldb::io::Call<'_>) {
        self.0.after(call);
    }
}

/// Rows of each commit in `a_refreshing_reader_sees_a_commit_in_parts_whole_or_not_at_all`.
const PART_ROWS: u32 = 3_000;

#[test]
fn a_refreshing_reader_sees_a_commit_in_parts_whole_or_not_at_all() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options {
        // Small parts: each of these commits is logged in many records.
        commit_part_bytes: 16 << 10,
        ..Options::for_tests()
    };
    let writer = Db::open(dir.path(), options.clone()).expect("open");
    let write_all = |round: u32| {
        let mut txn = writer.begin().expect("begin");
        for i in 0..PART_ROWS {
            txn.put(
                &key(i),
                format!("round-{round:04}-{}", "x".repeat(40)).as_bytes(),
            )
            .expect("put");
        }
        txn.commit().expect("commit");
    };
    write_all(0);
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let rounds = scope.spawn(|| {
            let mut round = 1;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                write_all(round);
                round += 1;
            }
            round
        });
        // The writer stops however the reader's checks end (a failed one unwinds through
        // the scope, which joins the writer).
        let _stop = common::StopOnDrop(&stop);
        let mut reader = Db::open_read_only(dir.path(), options.clone()).expect("read-only");
        // The writer publishes its durable lsn every few milliseconds: round 0 may not be
        // there yet.
        refresh_until(&mut reader, "round 0", |r| {
            r.get(&key(0)).expect("get").is_some()
        });
        let started = Instant::now();
        let (mut refreshes, mut last) = (0, String::new());
        while started.elapsed() < Duration::from_secs(3) {
            reader.refresh().expect("refresh");
            refreshes += 1;
            let txn = reader.begin_read().expect("read txn");
            let first = txn.get(&key(0)).expect("get").expect("row 0");
            let round = String::from_utf8(first[..10].to_vec()).expect("utf-8");
            for i in (0..PART_ROWS).step_by(97) {
                let value = txn.get(&key(i)).expect("get").expect("a row");
                assert!(
                    value.starts_with(round.as_bytes()),
                    "row {i} is from another commit than row 0 ({round}): a commit seen in part"
                );
            }
            assert!(round >= last, "the reader went back from {last} to {round}");
            last = round;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let written = rounds.join().expect("writer");
        assert!(
            refreshes > 10 && written > 3,
            "{refreshes} refreshes, {written} rounds"
        );
    });
}

#[test]
fn a_writer_closes_while_a_reader_holds_its_snapshot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let writer = Db::open(dir.path(), Options::for_tests()).expect("open");
    put_rows(&writer, 0, 200, Durability::Sync);
    let mut reader = Db::open_read_only(dir.path(), Options::for_tests()).expect("read-only");
    refresh_until(&mut reader, "the 200 rows", |r| {
        r.len().expect("len") == 200
    });
    // The close's checkpoint cannot write while the reader holds: it waits a moment, then
    // leaves the write-back to the next open's recovery. It never waits for the reader.
    let started = Instant::now();
    writer.close().expect("close");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the close waited {:?} for a reader",
        started.elapsed()
    );
    assert_eq!(reader.len().expect("len"), 200);
    reader.check().expect("the snapshot is whole");
    drop(reader);
    let reopened = Db::open(dir.path(), Options::for_tests()).expect("reopen");
    assert_eq!(reopened.len().expect("len"), 200);
    reopened.check().expect("check");
}

/// A `Sync` commit, once it returns, is seen by a read-only handle opened after it: another
/// process's `till get` run right after a sale is rung up finds the sale. The publisher thread
/// alone (every 2 ms) left a handle opened within that window one commit behind: `till`'s
/// `data_cli` test failed so once, `till get` finding no key the writer had just committed.
#[test]
fn a_read_only_handle_opened_after_a_sync_commit_sees_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let writer = Db::open(dir.path(), Options::for_tests()).expect("open");
    for i in 0..30 {
        put_rows(&writer, i, i + 1, Durability::Sync);
        let reader = Db::open_read_only(dir.path(), Options::for_tests()).expect("read-only");
        assert!(
            reader.get(&key(i)).expect("get").is_some(),
            "commit {i} returned, yet a read-only handle opened after it does not see it"
        );
    }
    writer.close().expect("close");
}

/// Rows per commit and commits in the parking tests: 250 commits of 80 rows of 100-byte
/// values dirty hundreds of pages, many times the 64 frames of `Options::for_tests`.
const PARK_COMMITS: u32 = 250;
const PARK_ROWS: u32 = 80;

fn park_rows(db: &Db, commit: u32) {
    let mut txn = db.begin().expect("begin");
    for j in 0..PARK_ROWS {
        // Spread over the key space: every commit dirties pages all over the tree.
        let i = (commit * PARK_ROWS + j).wrapping_mul(2_654_435_761) % 1_000_000;
        txn.put(&key(i), &[u8::try_from(commit % 251).expect("small"); 100])
            .expect("put");
    }
    txn.commit_with(Durability::Sync).expect("commit");
}

/// A reader holds its snapshot while the writer's commits dirty many times more pages than the
/// cache has frames. A miss that must evict a dirty page used to wait until the reader let go
/// of its snapshot (here the same thread holds it: for ever); now it parks the page in the
/// spill file and goes on. The snapshot and the data file stay as they were; the checkpoint
/// once the reader is gone writes the parked pages back; a reopen finds every row.
#[test]
fn a_writer_whose_cache_fills_with_dirty_pages_never_waits_for_a_reader() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options {
        background_threads: false,
        ..Options::for_tests()
    };
    let writer = Db::open(dir.path(), options.clone()).expect("open");
    put_rows(&writer, 0, 10, Durability::Sync);
    writer.checkpoint().expect("checkpoint");
    let reader = Db::open_read_only(dir.path(), options.clone()).expect("read-only");
    let seen = reader.len().expect("len");
    let data = dir.path().join("data.tdb");
    let pages_before = std::fs::read(&data).expect("read the data file");
    let (done, finished) = std::sync::mpsc::channel();
    let writing = std::thread::spawn(move || {
        for commit in 0..PARK_COMMITS {
            park_rows(&writer, commit);
        }
        done.send(()).expect("send");
        writer
    });
    finished
        .recv_timeout(Duration::from_mins(1))
        .expect("the writer's commits waited for the reader's snapshot");
    let writer = writing.join().expect("join");
    let parks = writer.stats().pool.parks;
    assert!(parks > 0, "nothing was parked: {:?}", writer.stats().pool);
    assert!(
        std::fs::read(&data).expect("read the data file") == pages_before,
        "the data file changed under a reader's snapshot"
    );
    assert_eq!(reader.len().expect("len"), seen, "the snapshot stayed");
    reader.check().expect("the snapshot is whole");
    drop(reader);
    let expected = writer.len().expect("len");
    writer
        .checkpoint()
        .expect("checkpoint once the reader is gone");
    assert_eq!(writer.len().expect("len"), expected);
    writer
        .check()
        .expect("the tree after the parked pages came back");
    println!("{parks} pages parked; {expected} rows");
    writer.close().expect("close");
    let reopened = Db::open(dir.path(), options).expect("reopen");
    assert_eq!(reopened.len().expect("len"), expected);
    reopened.check().expect("check after reopen");
    assert_eq!(
        reopened.recovery().records,
        0,
        "the close wrote every parked page back: nothing to redo"
    );
}

/// The same load on the simulated disk, and a power cut while pages are parked (the reader
/// still holding): recovery finds every acknowledged commit (parked pages are dirty pages:
/// the header's redo point stays before their first change).
#[test]
fn parked_pages_lost_in_a_power_cut_are_redone_from_the_log() {
    use std::sync::Arc;
    use tilldb::io::{CrashMode, SimConfig, SimDisk};
    let disk = SimDisk::new(SimConfig::default());
    let dir = Path::new("/db");
    let options = Options {
        background_threads: false,
        ..Options::for_tests()
    };
    let writer = Db::open_with_storage(Arc::new(disk.clone()), dir, options.clone()).expect("open");
    put_rows(&writer, 0, 10, Durability::Sync);
    let reader =
        Db::open_read_only_with_storage(Arc::new(disk.clone()), dir, options.clone()).expect("ro");
    for commit in 0..PARK_COMMITS / 2 {
        park_rows(&writer, commit);
    }
    assert!(writer.stats().pool.parks > 0, "nothing was parked");
    let expected: Vec<(Vec<u8>, Vec<u8>)> = writer
        .scan(
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            tilldb::Direction::Forward,
        )
        .expect("scan");
    disk.crash(CrashMode::PowerLoss {
        tear_bytes: 512,
        garbage: true,
    });
    std::mem::forget(writer);
    std::mem::forget(reader);
    let reopened = Db::open_with_storage(Arc::new(disk.clone()), dir, options).expect("reopen");
    let found: Vec<(Vec<u8>, Vec<u8>)> = reopened
        .scan(
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            tilldb::Direction::Forward,
        )
        .expect("scan");
    assert_eq!(found.len(), expected.len(), "rows after the power cut");
    assert!(found == expected, "the rows differ after the power cut");
    reopened.check().expect("check");
}

#[test]
fn a_read_only_handle_opens_while_the_writer_has_spill_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let writer = Db::open(dir.path(), Options::for_tests()).expect("open");
    // A commit larger than the cache: the pages of its earlier parts spill to
    // `txn-spill.tdb`. Read back at its last part, they leave the file empty (and removed)
    // unless evictions park pages there: they do while a read-only handle holds a snapshot.
    let early = Db::open_read_only(dir.path(), Options::for_tests()).expect("read-only");
    let snapshot = early.begin_read().expect("read");
    let mut txn = writer.begin().expect("begin");
    for i in 0..20_000 {
        txn.put(&key(i), &[7u8; 100]).expect("put");
    }
    txn.commit().expect("commit");
    assert!(writer.stats().pool.parks > 0, "{:?}", writer.stats().pool);
    // A transaction past `write_set_bytes`, open: its writes are in `txn-writes-*.tdb`.
    let mut open_txn = writer.begin().expect("begin");
    for i in 0..20_000 {
        open_txn.put(&key(i), &[8u8; 100]).expect("put");
    }
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().any(|n| n == "txn-spill.tdb"), "{names:?}");
    assert!(
        names.iter().any(|n| n.starts_with("txn-writes-")),
        "{names:?}"
    );
    // The reader opens beside them, removes neither, and reads the committed rows.
    let reader = Db::open_read_only(dir.path(), Options::for_tests()).expect("read-only");
    assert_eq!(
        reader
            .begin_read()
            .expect("read")
            .get(&key(19_999))
            .expect("get"),
        Some(vec![7u8; 100])
    );
    assert!(dir.path().join("txn-spill.tdb").exists());
    drop(snapshot);
    drop(early);
    open_txn.commit().expect("the spilled transaction commits");
    assert_eq!(
        writer
            .begin_read()
            .expect("read")
            .get(&key(5))
            .expect("get"),
        Some(vec![8u8; 100])
    );
}

/// Holds a read-only handle's refresh at its next try at the snapshot lock (`tilldb.readers`,
/// shared) once armed: the handle has let go of its old snapshot and holds none, so the
/// writer may write pages and its header, and release log segments, meanwhile.
#[derive(Debug)]
struct SnapshotLockGate(std::sync::Arc<gate::Gate>);

impl tilldb::io::Hooks for SnapshotLockGate {
    fn before(&self, call: &tilldb::io::Call<'_>) -> tilldb::Result<()> {
        if let tilldb::io::Call::Lock { path, mode } = call
            && path.ends_with("tilldb.readers")
            && *mode == tilldb::io::LockMode::Shared
        {
            self.0.pass();
        }
        Ok(())
    }
}

/// Round `round` of `REWRITE_ROWS` rows, each about 400 bytes: every round rewrites the same
/// keys, so a reader that misses a commit shows an older round.
fn rewrite_rows(db: &Db, round: u32) {
    let mut txn = db.begin().expect("begin");
    for i in 0..REWRITE_ROWS {
        txn.put(
            &key(i),
            format!("round-{round:04}-{}", "r".repeat(390)).as_bytes(),
        )
        .expect("put");
    }
    txn.commit_with(Durability::Sync).expect("commit");
}

/// Rows each round of `rewrite_rows` writes.
const REWRITE_ROWS: u32 = 100;

/// A read-only handle follows a live writer's log: a refresh while the writer's checkpoint
/// stays where the snapshot's was replays the records since onto the snapshot, its log
/// follower keeping the segment it reads open. The next refresh lets go of the snapshot lock
/// and is held before it takes it again (a gate on the lock); meanwhile the writer commits
/// 25 rounds (some 20 segments of log) and checkpoints, which nothing defers now: the redo
/// point moves to the log's end and every segment the reader knew is released (removed, or
/// recycled under a newer generation). Let go, the refresh finds another redo point in the
/// header and must open anew from it, seeing exactly the writer's last round. Going on in
/// place instead (mutant `refresh-in-place-past-checkpoint`) follows the log from where the
/// old snapshot ended, in segments that are no longer there: the refresh failed with
/// `LogMissing` (lsns 128000 to 1408000) and left the handle unusable. It cannot read stale
/// rows that way: a released segment's records either still validate (they are the log's
/// own) or, overwritten under a newer generation, do not, and the follower stops there.
#[test]
fn a_reader_refreshing_after_a_checkpoint_released_the_log_it_followed_opens_anew() {
    use std::sync::Arc;
    use tilldb::io::{HookedStorage, SimConfig, SimDisk, Storage};
    let disk = SimDisk::new(SimConfig::default());
    let dir = Path::new("/db");
    let log_dir = dir.join("wal");
    let options = Options {
        background_threads: false,
        // Only the test's own checkpoints move the redo point.
        checkpoint_log_bytes: 64 << 20,
        wal: tilldb::WalOptions {
            segment_bytes: 64 << 10,
            first_segment_bytes: 64 << 10,
            ..Options::for_tests().wal
        },
        ..Options::for_tests()
    };
    let writer = Db::open_with_storage(Arc::new(disk.clone()), dir, options.clone()).expect("open");
    rewrite_rows(&writer, 0);
    writer.checkpoint().expect("checkpoint");
    let gate = Arc::new(gate::Gate::default());
    let storage = Arc::new(HookedStorage::new(
        Arc::new(disk.clone()),
        SnapshotLockGate(Arc::clone(&gate)),
    ));
    let mut reader = Db::open_read_only_with_storage(storage, dir, options).expect("read-only");
    let round_of = |db: &Db, i: u32| {
        let value = db.get(&key(i)).expect("get").expect("a row");
        String::from_utf8(value[..10].to_vec()).expect("utf-8")
    };
    assert_eq!(round_of(&reader, 7), "round-0000");
    // In place: the checkpoint has not moved.
    rewrite_rows(&writer, 1);
    reader.refresh().expect("refresh");
    assert_eq!(round_of(&reader, 7), "round-0001");
    let known = disk.list_dir(&log_dir).expect("list the log");
    gate.arm(1);
    let refreshing = std::thread::spawn(move || {
        let refreshed = reader.refresh();
        (reader, refreshed)
    });
    gate.wait_held();
    // About 50 KiB of log a round: 1.2 MiB, some 20 segments of 64 KiB.
    let rounds = 27;
    for round in 2..rounds {
        rewrite_rows(&writer, round);
    }
    writer
        .checkpoint()
        .expect("a checkpoint while the reader holds no snapshot");
    let now = disk.list_dir(&log_dir).expect("list the log");
    assert!(
        known.iter().all(|name| !now.contains(name)),
        "the checkpoint kept a segment the reader knew: {known:?} then {now:?}"
    );
    gate.release();
    let (reader, refreshed) = refreshing.join().expect("join the refresh");
    refreshed.expect("a refresh after a checkpoint that released the log it followed");
    let last = format!("round-{:04}", rounds - 1);
    for i in 0..REWRITE_ROWS {
        assert_eq!(round_of(&reader, i), last, "row {i} after the refresh");
    }
    assert_eq!(reader.len().expect("len"), u64::from(REWRITE_ROWS));
    reader.check().expect("the refreshed snapshot is whole");
}
