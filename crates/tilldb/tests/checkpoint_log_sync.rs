//! A checkpoint makes the log durable to its end before it writes its header (the mutation
//! audit: no crash test caught the header written first, the explorers included).

#[path = "common/gate.rs"]
mod gate;

use gate::Gate;
use std::path::Path;
use std::sync::Arc;
use tilldb::io::{Call, CrashMode, CrashPoint, HookedStorage, Hooks, IoKind, SimConfig, SimDisk};
use tilldb::{Db, Durability, Options, TornPageGuard};

const DIR: &str = "/db";
const BULK_COMMITS: u32 = 80;
const BULK_ROWS: u32 = 100;

fn options() -> Options {
    let tests = Options::for_tests();
    Options {
        background_threads: false,
        // Not full-page images: with a page dirty from before its end such a checkpoint
        // writes no header at all (it waits for the image horizon).
        torn_page_guard: TornPageGuard::Doublewrite,
        cache_bytes: 16 << 20,
        // No checkpoint but the test's.
        checkpoint_log_bytes: 256 << 20,
        wal: tilldb::WalOptions {
            // Room for B's record and H's in the log buffer: H's append must not write B's.
            buffer_bytes_max: 1 << 20,
            ..tests.wal
        },
        ..tests
    }
}

fn bulk_key(i: u32) -> Vec<u8> {
    format!("bulk-{i:06}").into_bytes()
}

/// Holds, once armed, the first data-file write (a checkpoint's write-back) and the first
/// preparation of a log segment (a commit's append that needs a new segment), each at its own
/// gate.
#[derive(Debug)]
struct Gates {
    data: Arc<Gate>,
    segment: Arc<Gate>,
}

impl Hooks for Gates {
    fn before(&self, call: &Call<'_>) -> tilldb::Result<()> {
        let in_log = call.path().parent().is_some_and(|d| d.ends_with("wal"));
        match call {
            Call::Write { path, .. } if path.file_name().is_some_and(|n| n == "data.tdb") => {
                self.data.pass();
            }
            Call::Create { .. } | Call::Rename { .. } if in_log => self.segment.pass(),
            _ => {}
        }
        Ok(())
    }
}

fn put(db: &Db, table: &str, key: &[u8], value: &[u8], durability: Durability) {
    let mut txn = db.begin().expect("begin");
    txn.put_in(table, key, value).expect("put");
    txn.commit_with(durability).expect("commit");
}

/// The story. The checkpoint's header takes the allocator state (page count, free list) at
/// its end, and redo starts at its redo point, which lags the end while a page dirtied before
/// the end stays dirty. The write-back forces the log only as far as the pages it writes
/// need (the write-ahead rule), so when every page a `Lazy` commit before the end changed is
/// kept dirty, nothing forces that commit's record: only the checkpoint's own log flush
/// before its header does. Here:
///
/// - A, `Sync`: a row into table `p`, dirtying its root leaf P (redo point: A).
/// - B, `Lazy`: an existing key of P rewritten with a 20 KiB value, so its overflow pages are
///   allocated (the page count grows) and P changes again. Its record stays in the log
///   buffer; the active segment has room for it and not for H's after it.
/// - The checkpoint begins (its end past B) and is held at its first page write: a batch of
///   the bulk rows' pages, logged by `Sync` commits, so the log stays as it is.
/// - H shrinks B's value (freeing the overflow pages: each is changed) and adds a 44 KiB one;
///   its append needs a new segment, and is held there, before it logs anything. P and B's
///   overflow pages are unlogged through every pass of the write-back.
/// - The checkpoint ends: redo point A's, page count B's.
///
/// Every call of that checkpoint is then crashed (47 points, 170 crash states, about 20 s):
/// a process kill at each cut of each write (a page write at none and all of it), two power
/// cuts; and the disk as it ends, H still held. Each recovery must hold every acknowledged
/// commit, B whole or not at all, check (trees and every page), commit, checkpoint, reopen.
///
/// With the header written before the log is durable to the end (mutant
/// `header-before-log-sync`) the header survives and B's record never reached the disk:
/// recovery replays A and stops, the allocator as A left it, behind the header's page count,
/// and the open refuses the database ("the last commit's page count is below the header's",
/// at the first state with the header written: a process kill after its write). Had recovery
/// taken the header's count, B's overflow pages would be leaked for good. That is what
/// `explore_random` seed 1398 met once under CI, not reproducibly. No other test caught the
/// mutant: where a page of every commit before the end is written back (`checkpoint_order`'s
/// `Lazy` commits, the explorers' workloads), the write-ahead rule has forced the log to the
/// end already.
#[test]
fn a_lazy_commit_before_the_checkpoint_end_whose_pages_stay_dirty_is_durable_before_the_header() {
    let disk = SimDisk::new(SimConfig::default());
    let (data, segment) = (Arc::new(Gate::default()), Arc::new(Gate::default()));
    let storage: Arc<dyn tilldb::io::Storage> = Arc::new(HookedStorage::new(
        Arc::new(disk.clone()),
        Gates {
            data: Arc::clone(&data),
            segment: Arc::clone(&segment),
        },
    ));
    // Everything before the checkpoint: A's end, and B's value.
    let (db, a_end, big) = up_to_b(&disk, &storage);

    data.arm(1);
    disk.record_crash_points(true);
    let checkpointer = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || db.checkpoint())
    };
    data.wait_held();
    segment.arm(1);
    let holder = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            let mut txn = db.begin().expect("begin");
            txn.put_in("p", b"x", b"held").expect("put");
            txn.put_in("p", b"z", &vec![8; 44 << 10]).expect("put");
            txn.commit()
        })
    };
    segment.wait_held();
    data.release();
    checkpointer
        .join()
        .expect("checkpointer")
        .expect("checkpoint");
    let mut points = disk.take_crash_points();
    points.push(disk.crash_point_now());
    disk.record_crash_points(false);
    let (_, header) = tilldb::internals::header::HeaderFile::open(
        &disk,
        Path::new(DIR),
        tilldb::FlushMethod::Fdatasync,
    )
    .expect("header")
    .expect("a header");
    // The test's premise: the redo point lags to A (P and B's pages stayed dirty), and the
    // write-back flushed no log (it wrote no page that needed B's record).
    assert!(
        header.checkpoint_lsn.0 < a_end,
        "the redo point {:?} does not lag to A's change (before lsn {a_end}): no test",
        header.checkpoint_lsn
    );
    let last_page_write = points
        .iter()
        .rposition(|p| p.kind() == Some(IoKind::Write) && p.path().ends_with("data.tdb"))
        .expect("the checkpoint wrote pages");
    assert!(
        !points[..last_page_write].iter().any(is_log_flush),
        "the write-back flushed the log: B's record was forced by a page, no test"
    );
    segment.release();
    holder
        .join()
        .expect("the held commit")
        .expect("the held commit");
    Arc::try_unwrap(db)
        .expect("threads joined")
        .close()
        .expect("close");

    let mut cases = 0;
    for point in &points {
        for (cut, mode, seed) in crashes(point) {
            let case = format!("crash at {point:?} (cut {cut}), {mode:?}");
            let crashed = point.disk(cut, seed);
            crashed.crash(mode);
            recover_and_check(&crashed, &big, &case);
            cases += 1;
        }
    }
    println!("{} crash points, {cases} crash states", points.len());
    // What kept B: the checkpoint's own log flush, after its last page write and before its
    // header write.
    let header_write = points
        .iter()
        .position(|p| p.kind() == Some(IoKind::Write) && p.path().ends_with("tilldb.meta"))
        .expect("the checkpoint wrote its header");
    assert!(
        points[last_page_write..header_write]
            .iter()
            .any(is_log_flush),
        "no log flush between the last page write and the header"
    );
}

/// The database up to B, the test's story to the checkpoint: returns it, the end of A's
/// record, and B's value.
fn up_to_b(disk: &SimDisk, storage: &Arc<dyn tilldb::io::Storage>) -> (Arc<Db>, u64, Vec<u8>) {
    let db = Db::open_with_storage(Arc::clone(storage), Path::new(DIR), options()).expect("create");
    put(&db, "p", b"x", b"small", Durability::Sync);
    db.close().expect("close");
    // A cold cache: the bulk rows' pages take the first frames, P and B's pages come after
    // them (the write-back goes through the frames in order).
    let db = Arc::new(
        Db::open_with_storage(Arc::clone(storage), Path::new(DIR), options()).expect("reopen"),
    );
    // More dirty pages than one write-back batch (256), all logged durably.
    for c in 0..BULK_COMMITS {
        let mut txn = db.begin().expect("begin");
        for r in 0..BULK_ROWS {
            txn.put_in("bulk", &bulk_key(c * BULK_ROWS + r), &[1; 200])
                .expect("put");
        }
        txn.commit().expect("commit");
    }
    // Fill the active segment in steps of about 8 KiB until under 60 KiB is left: room for
    // A and B (about 21 KiB), not for H (about 45 KiB) after them.
    for i in 0.. {
        let (base, capacity, end) = active_segment(disk);
        if base + capacity - end < 60 << 10 {
            break;
        }
        assert!(i < 1000, "the segment never filled");
        put(&db, "fill", &bulk_key(i), &[2; 8 << 10], Durability::Sync);
    }
    put(&db, "p", b"y", b"a", Durability::Sync);
    let a_end = active_segment(disk).2;
    let (written, a_appends) = (db.stats().log.log_bytes, db.stats().log.appends);
    let big = vec![7u8; 20 << 10];
    put(&db, "p", b"x", &big, Durability::Lazy);
    assert_eq!(
        db.stats().log.appends,
        a_appends + 1,
        "B appended one record"
    );
    assert_eq!(
        db.stats().log.log_bytes,
        written,
        "B's record was written: it is to stay in the log buffer"
    );
    (db, a_end, big)
}

/// The active (last) segment of the log on `disk`: its base lsn, capacity and end (what was
/// written to it).
fn active_segment(disk: &SimDisk) -> (u64, u64, u64) {
    let log = tilldb::internals::wal::inspect_log(disk, &Path::new(DIR).join("wal"), None, |_| {})
        .expect("inspect the log");
    let last = log
        .segments
        .iter()
        .rfind(|s| matches!(s.role, tilldb::internals::wal::SegmentRole::Chain { .. }))
        .expect("a chain");
    let header = last.header.expect("a chained segment has a header");
    let capacity = header.segment_bytes - 3 * u64::from(header.log_block_bytes);
    (header.base_lsn, capacity, log.recovery.end_lsn.0)
}

fn is_log_flush(point: &CrashPoint) -> bool {
    point.kind() == Some(IoKind::Flush) && point.path().extension().is_some_and(|e| e == "wal")
}

/// A process kill at each cut of the call (of a page write, where the order of the log and
/// the header is not in question, at none and all of it: a batch of 256 pages has 257 cuts),
/// and two power cuts after all of it.
fn crashes(point: &CrashPoint) -> Vec<(u32, CrashMode, u64)> {
    let last = point.cuts() - 1;
    let pages = point.path().extension().is_some_and(|e| e == "tdb");
    let kills = (0..=last)
        .filter(|&cut| !pages || cut == 0 || cut == last)
        .map(|cut| (cut, CrashMode::ProcessKill, 0));
    let power_cuts = [(512, false, 1), (512, true, 2)].map(|(tear_bytes, garbage, seed)| {
        (
            last,
            CrashMode::PowerLoss {
                tear_bytes,
                garbage,
            },
            seed,
        )
    });
    kills.chain(power_cuts).collect()
}

/// Recovery opens; every acknowledged commit is there (B, `Lazy`, may be lost; H was never
/// acknowledged); the trees and every page check; commits that allocate, a checkpoint and a
/// reopen go on.
fn recover_and_check(disk: &SimDisk, big: &[u8], case: &str) {
    let storage: Arc<dyn tilldb::io::Storage> = Arc::new(disk.clone());
    let db = Db::open_with_storage(Arc::clone(&storage), Path::new(DIR), options())
        .unwrap_or_else(|e| panic!("{case}: recovery: {e}"));
    let x = db.get_in("p", b"x").expect("get");
    assert!(
        x.as_deref() == Some(b"small") || x.as_deref() == Some(big),
        "{case}: p/x is {:?}, neither before nor B's value",
        x.map(|v| v.len())
    );
    assert_eq!(
        db.get_in("p", b"y").expect("get").as_deref(),
        Some(&b"a"[..]),
        "{case}: A lost"
    );
    assert_eq!(
        db.get_in("p", b"z").expect("get"),
        None,
        "{case}: H was never acknowledged"
    );
    for i in 0..BULK_COMMITS * BULK_ROWS {
        assert!(
            db.get_in("bulk", &bulk_key(i)).expect("get").is_some(),
            "{case}: bulk row {i} lost"
        );
    }
    db.check().unwrap_or_else(|e| panic!("{case}: check: {e}"));
    let space = db.check_space().expect("space");
    assert!(space.is_clean(), "{case}: space: {space:?}");
    // The allocator goes on from where the pages are.
    put(&db, "p", b"after", big, Durability::Sync);
    db.checkpoint()
        .unwrap_or_else(|e| panic!("{case}: checkpoint after recovery: {e}"));
    db.close().expect("close");
    let db = Db::open_with_storage(storage, Path::new(DIR), options())
        .unwrap_or_else(|e| panic!("{case}: reopen: {e}"));
    assert_eq!(
        db.get_in("p", b"after").expect("get").as_deref(),
        Some(big),
        "{case}: the commit after recovery"
    );
    db.check()
        .unwrap_or_else(|e| panic!("{case}: check after reopen: {e}"));
    assert!(
        db.check_space().expect("space").is_clean(),
        "{case}: space after reopen"
    );
    db.close().expect("close");
}
