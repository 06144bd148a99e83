//! Feed retention a till can live with (issue 34, item 2). The story: with the change feed
//! on and no consumer registered, the log was kept from the feed's start until it was
//! `feed_retention_bytes` (4 GiB) of lsns behind; every open starts a fresh 64 MiB segment, so
//! 2,200 demo sales over a few reopens kept 13 segments (833 MB). Retention is now measured
//! in log files on disk, and with no consumer the feed keeps at most `checkpoint_log_bytes`
//! of them; a consumer registering after that is told the first lsn it can have.

use std::path::Path;
use std::sync::Arc;
use tilldb::feed::{self, Feed};
use tilldb::io::{CrashMode, SimConfig, SimDisk, Storage};
use tilldb::{Db, Error, Lsn, Options};

const DIR: &str = "/db";

fn options() -> Options {
    Options {
        change_feed: true,
        background_threads: false,
        ..Options::for_tests()
    }
}

fn sale(db: &Db, day: u32, i: u32) {
    let mut txn = db.begin().expect("begin");
    txn.put_in("sales", format!("{day:04}-{i:03}").as_bytes(), &[1; 150])
        .expect("put");
    txn.commit().expect("commit");
}

fn log_segments(disk: &SimDisk) -> usize {
    disk.list_dir(&Path::new(DIR).join("wal"))
        .expect("list wal/")
        .len()
}

/// A day: open, a few sales, then the power goes (`kill`) or the till is closed.
fn day(disk: &SimDisk, options: &Options, n: u32, crash: bool) {
    let db = Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options.clone())
        .unwrap_or_else(|e| panic!("open on day {n}: {e}"));
    for i in 0..20 {
        sale(&db, n, i);
    }
    if crash {
        std::mem::forget(db);
        disk.crash(CrashMode::ProcessKill);
    } else {
        db.close().expect("close");
    }
}

#[test]
fn with_no_consumer_the_feed_keeps_a_bounded_log_and_a_late_consumer_is_told_where_it_can_start() {
    let disk = SimDisk::new(SimConfig::default());
    let options = options();
    // Recovery's bound (`Options::checkpoint_log_bytes`) plus what the feed may keep for
    // nobody: checkpoint_log_bytes of log files.
    let segments_per_checkpoint =
        usize::try_from(options.checkpoint_log_bytes / options.wal.segment_bytes).expect("small");
    let bound = 3 * segments_per_checkpoint + 7 + segments_per_checkpoint;
    let mut most = 0;
    for n in 0..60 {
        day(&disk, &options, n, n % 3 != 2);
        most = most.max(log_segments(&disk));
        assert!(
            log_segments(&disk) <= bound,
            "after day {n} the log directory holds {} segments, over the bound of {bound}",
            log_segments(&disk)
        );
    }
    println!("60 days, no consumer: at most {most} log segments (bound {bound})");
    // The feed released log for nobody: a new consumer is refused, naming where it can start.
    let start = feed::start_with_storage(&disk, Path::new(DIR)).expect("start");
    assert!(start > Lsn(0), "the start never moved");
    let err = Feed::open_consumer_with_storage(Arc::new(disk.clone()), Path::new(DIR), "ship")
        .expect_err("a consumer registering after the feed released log");
    assert!(
        matches!(&err, Error::FeedUnavailable { lsn, reason, .. }
            if *lsn == start.0 && reason.contains("--resync")),
        "{err}"
    );
    // Refused, nothing registered.
    assert!(
        feed::consumers_with_storage(&disk, Path::new(DIR))
            .expect("consumers")
            .is_empty()
    );
}

#[test]
fn a_consumer_holding_more_log_files_than_the_retention_is_dropped_even_a_few_lsns_behind() {
    let disk = SimDisk::new(SimConfig::default());
    let options = Options {
        feed_retention_bytes: 6 << 20,
        ..options()
    };
    day(&disk, &options, 0, false);
    // Registered, then never acknowledging: it falls behind by a few kilobytes of sales, but
    // every crash costs a 1 MiB segment file.
    drop(
        Feed::open_consumer_with_storage(Arc::new(disk.clone()), Path::new(DIR), "slow")
            .expect("register"),
    );
    let mut most = 0;
    for n in 1..40 {
        day(&disk, &options, n, true);
        most = most.max(log_segments(&disk));
    }
    let states = feed::consumers_with_storage(&disk, Path::new(DIR)).expect("consumers");
    let slow = states.iter().find(|c| c.name == "slow").expect("listed");
    let why = slow
        .dropped
        .as_deref()
        .unwrap_or_else(|| panic!("a consumer holding {most} 1 MiB segments was kept: {states:?}"));
    assert!(why.contains("feed_retention_bytes"), "{why}");
    // Recovery's bound plus six segments for the consumer.
    let bound = 3 * 2 + 7 + 6;
    assert!(most <= bound, "{most} log segments, over {bound}");
}

#[test]
fn a_consumer_registered_at_a_known_position_after_a_release_reads_from_there() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let options = Options {
        change_feed: true,
        ..Options::for_tests()
    };
    // Enough reopens and sales that the feed releases log for nobody.
    for n in 0..12 {
        let db = Db::open(tmp.path(), options.clone()).expect("open");
        for i in 0..400 {
            sale(&db, n, i);
        }
        db.checkpoint().expect("checkpoint");
        db.close().expect("close");
    }
    let start = feed::start(tmp.path()).expect("start");
    let err = Feed::open_consumer(tmp.path(), "ship").expect_err("released");
    assert!(
        matches!(&err, Error::FeedUnavailable { lsn, .. } if *lsn == start.0),
        "{err}"
    );
    // Before the start: refused. At it: registered, and the feed reads on from there.
    let before = Lsn(start.0 - 1);
    assert!(matches!(
        feed::register_consumer(tmp.path(), "ship", before),
        Err(Error::FeedUnavailable { .. })
    ));
    feed::register_consumer(tmp.path(), "ship", start).expect("register at the start");
    let db = Db::open(tmp.path(), options.clone()).expect("open");
    sale(&db, 99, 0);
    let mut consumer = Feed::open_consumer(tmp.path(), "ship").expect("open consumer");
    assert_eq!(consumer.position(), start);
    let mut seen = 0;
    while let Some(txn) = consumer
        .next(std::time::Duration::from_millis(200))
        .expect("feed")
    {
        assert!(txn.lsn > start);
        seen += 1;
    }
    assert!(seen >= 1, "the sale after the registration was not fed");
    db.close().expect("close");
}

/// The log files a consumer at `position` keeps on the disk as it is: the chain of segments
/// recovery follows from the one holding it, in bytes.
fn log_file_bytes_from(disk: &SimDisk, position: Lsn) -> (usize, u64) {
    use tilldb::internals::wal::{SegmentRole, inspect_log};
    let log = inspect_log(
        &disk.fork(0),
        &Path::new(DIR).join("wal"),
        Some(position),
        |_| {},
    )
    .expect("inspect");
    let chain: Vec<u64> = log
        .segments
        .iter()
        .filter(|s| matches!(s.role, SegmentRole::Chain { .. }))
        .map(|s| s.file_bytes)
        .collect();
    (chain.len(), chain.iter().sum())
}

/// The mutation audit, item 7 (a step no test guarded). `feed_retention_bytes` is the most log
/// files a consumer's position may keep: exactly that much is within it, one byte more is over. A
/// consumer registered at the feed's start and never acknowledging, several segments of sales, a
/// checkpoint, a kill; then the open (which decides whom to keep before it releases any log) with
/// the retention set to exactly the log files the consumer keeps (the chain from its segment plus
/// the fresh segment every open starts) keeps it, and one byte less drops it. With the mutant
/// `feed-retention-exact-counts-over` the open at exactly the retention dropped the consumer: a
/// head office cut off, and made to copy the whole database again, one segment early.
#[test]
fn a_consumer_keeping_exactly_feed_retention_bytes_of_log_files_is_not_dropped() {
    let disk = SimDisk::new(SimConfig::default());
    let options = options();
    let db = Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options.clone())
        .expect("create");
    let position =
        Feed::open_consumer_with_storage(Arc::new(disk.clone()), Path::new(DIR), "office")
            .expect("register")
            .position();
    for i in 0..6000 {
        sale(&db, 0, i);
    }
    db.checkpoint().expect("checkpoint");
    std::mem::forget(db);
    disk.crash(CrashMode::ProcessKill);
    let (segments, chain_bytes) = log_file_bytes_from(&disk, position);
    assert!(segments >= 3, "the consumer keeps {segments} segments");
    // The open starts a fresh segment; retention counts a whole one for the segment being
    // written, so the two must agree for this sum to be the files on disk.
    assert_eq!(options.wal.first_segment_bytes, options.wal.segment_bytes);
    let exact = chain_bytes + options.wal.first_segment_bytes;
    for (retention, dropped) in [(exact, false), (exact - 1, true)] {
        let fork = disk.fork(1);
        let options = Options {
            feed_retention_bytes: retention,
            ..options.clone()
        };
        let db =
            Db::open_with_storage(Arc::new(fork.clone()), Path::new(DIR), options).expect("open");
        let states = feed::consumers_with_storage(&fork, Path::new(DIR)).expect("consumers");
        let office = states.iter().find(|c| c.name == "office").expect("listed");
        assert_eq!(
            office.dropped.is_some(),
            dropped,
            "a consumer keeping {} log files of {exact} bytes in all with \
             feed_retention_bytes = {retention}: {office:?}",
            segments + 1
        );
        db.close().expect("close");
    }
}

/// The mutation audit, item 7 (a step no test guarded). With no consumer registered the feed's
/// start moves up at a checkpoint, and `feed/released` says the log before it is gone: a consumer
/// registering later is refused, told where it can start. The two are separate durable writes, the
/// released mark first: a crash between them leaves a start that is refused although it could still
/// be read, never a moved start with no mark. Here the checkpoint that moves the start is crashed
/// at every call it makes (process kill at every cut of each write; power cuts with and without
/// garbage sectors), and on each crashed disk a new consumer either registers at the feed's first
/// start, or is refused naming an lsn. With the mutant `feed-start-before-released` (the start
/// written first), a kill once the new start was renamed into place, before the released mark,
/// registered the new consumer at the moved start without a word: the transactions before it, which
/// it believes it has, never reach it.
#[test]
fn a_crash_while_the_feed_start_moves_never_registers_a_new_consumer_late_without_a_word() {
    let disk = SimDisk::new(SimConfig::default());
    let options = Options {
        // Retention for nobody: 2 MiB of log files; checkpoints only by hand.
        feed_retention_bytes: 2 << 20,
        checkpoint_log_bytes: 64 << 20,
        ..options()
    };
    let db =
        Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options).expect("create");
    let first = feed::start_with_storage(&disk, Path::new(DIR)).expect("start");
    for i in 0..6000 {
        sale(&db, 0, i);
    }
    disk.record_crash_points(true);
    db.checkpoint().expect("checkpoint");
    let mut points = disk.take_crash_points();
    points.push(disk.crash_point_now());
    disk.record_crash_points(false);
    db.close().expect("close");
    let moved = feed::start_with_storage(&disk, Path::new(DIR)).expect("start");
    assert!(
        moved > first,
        "the checkpoint did not move the start from {first}"
    );
    let power_cuts = [
        CrashMode::PowerLoss {
            tear_bytes: 512,
            garbage: false,
        },
        CrashMode::PowerLoss {
            tear_bytes: 512,
            garbage: true,
        },
    ];
    let (mut at_first, mut refused) = (0, 0);
    for point in &points {
        let kills = (0..point.cuts()).map(|cut| (cut, CrashMode::ProcessKill, 0));
        let cuts = power_cuts
            .iter()
            .enumerate()
            .map(|(seed, &mode)| (point.cuts() - 1, mode, seed as u64));
        for (cut, mode, seed) in kills.chain(cuts) {
            let case = format!("crash at {point:?} (cut {cut}), {mode:?}");
            let crashed = point.disk(cut, seed);
            crashed.crash(mode);
            match Feed::open_consumer_with_storage(Arc::new(crashed), Path::new(DIR), "late") {
                Ok(late) => {
                    assert_eq!(
                        late.position(),
                        first,
                        "{case}: a new consumer registered at lsn {} with no word that the \
                         feed, which began at lsn {first}, released the log before it",
                        late.position()
                    );
                    at_first += 1;
                }
                Err(Error::FeedUnavailable { lsn, .. }) => {
                    assert!(lsn >= first.0, "{case}: refused naming lsn {lsn}");
                    refused += 1;
                }
                Err(e) => panic!("{case}: {e}"),
            }
        }
    }
    println!(
        "{} crash points of the checkpoint: {at_first} crashed disks register at the first \
         start, {refused} refuse",
        points.len()
    );
    assert!(
        at_first > 0 && refused > 0,
        "{at_first} at the start, {refused} refused"
    );
}
