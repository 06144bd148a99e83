//! The change feed across crashes (issue 35, items 4 and 5): where the log reopens when a
//! consumer holds it, what a consumer behind a removed segment is told, and that the feed's
//! publisher never publishes past what is durable.

#[path = "common/gate.rs"]
mod gate;

use gate::{FlushGate, Gate};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tilldb::feed::Feed;
use tilldb::io::{CrashMode, HookedStorage, SimConfig, SimDisk, Storage};
use tilldb::{Db, Error, Options};

const DIR: &str = "/db";

fn options() -> Options {
    Options {
        change_feed: true,
        background_threads: false,
        ..Options::for_tests()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("sale-{i:06}").into_bytes()
}

fn sell(db: &Db, from: u32, to: u32) {
    for i in from..to {
        let mut txn = db.begin().expect("begin");
        txn.put(&key(i), &[7; 300]).expect("put");
        txn.commit().expect("commit");
    }
}

fn open(disk: &SimDisk) -> Db {
    Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options()).expect("open")
}

fn consumer(disk: &SimDisk) -> Feed {
    Feed::open_consumer_with_storage(Arc::new(disk.clone()), Path::new(DIR), "office")
        .expect("consumer")
}

/// Reads the feed until it is caught up; returns how many transactions and the last lsn.
fn drain(feed: &mut Feed) -> (usize, Option<tilldb::Lsn>) {
    let mut count = 0;
    let mut last = None;
    while let Some(txn) = feed.next(Duration::from_millis(20)).expect("feed") {
        count += 1;
        last = Some(txn.lsn);
    }
    (count, last)
}

/// Item 4: a consumer ahead of the last checkpoint, past a segment switch, then a crash: the
/// log reopens from the older of the two (the checkpoint), so redo finds every commit. With
/// the mutant `reopen-from-newer` the log reopened at the consumer's position, freed the
/// segments before it, and the commits between the checkpoint and it were gone.
#[test]
fn a_consumer_ahead_of_the_checkpoint_loses_nothing_across_a_crash() {
    for mode in [
        CrashMode::ProcessKill,
        CrashMode::PowerLoss {
            tear_bytes: 512,
            garbage: true,
        },
    ] {
        let disk = SimDisk::new(SimConfig::default());
        let db = open(&disk);
        let mut feed = consumer(&disk);
        sell(&db, 0, 500);
        db.checkpoint().expect("checkpoint");
        // About 1.7 MiB of log after the checkpoint: past at least one segment switch (1 MiB
        // segments), below the next checkpoint (2 MiB).
        sell(&db, 500, 5000);
        let (read, last) = drain(&mut feed);
        assert_eq!(read, 5000, "{mode:?}");
        feed.acknowledge(last.expect("read")).expect("acknowledge");
        std::mem::forget(db);
        disk.crash(mode);
        let db = open(&disk);
        for i in 0..5000 {
            assert!(
                db.get(&key(i)).expect("get").is_some(),
                "{mode:?}: sale {i} lost after a crash with the consumer ahead of the checkpoint"
            );
        }
        db.close().expect("close");
    }
}

/// Item 4: a consumer behind, and a segment it needs removed (by hand, or by a bug): the
/// database still opens (recovery needs only the log from its checkpoint), and the consumer's
/// next read fails with `LogMissing` naming the lsns gone, never skipping them. With the
/// mutant `feed-skips-missing-log` it went on at the next segment and returned transactions
/// after the gap as if none were missing.
#[test]
fn a_consumer_behind_a_removed_segment_gets_log_missing_not_a_silent_gap() {
    let disk = SimDisk::new(SimConfig::default());
    let db = open(&disk);
    let mut feed = consumer(&disk);
    sell(&db, 0, 10);
    let (read, last) = drain(&mut feed);
    assert_eq!(read, 10);
    feed.acknowledge(last.expect("read")).expect("acknowledge");
    // About 3 MiB more: the consumer, holding the log, falls behind by three segments.
    sell(&db, 10, 9000);
    db.checkpoint().expect("checkpoint");
    db.close().expect("close");
    drop(feed);
    // The oldest segment, which holds the consumer's position, removed.
    let wal = Path::new(DIR).join("wal");
    let mut names = disk.list_dir(&wal).expect("list");
    names.sort();
    let oldest = wal.join(&names[0]);
    disk.remove(&oldest).expect("remove");
    let db = open(&disk);
    assert!(db.get(&key(8999)).expect("get").is_some());
    let mut feed = consumer(&disk);
    let err = feed
        .next(Duration::from_millis(200))
        .expect_err("a read across the removed segment");
    let Error::LogMissing {
        from_lsn, to_lsn, ..
    } = &err
    else {
        panic!("expected LogMissing, got {err}");
    };
    assert_eq!(*from_lsn, last.expect("read").0, "{err}");
    assert!(to_lsn > from_lsn, "{err}");
    db.close().expect("close");
}

/// Item 5: the feed's publisher thread (background threads on, as in production) publishes
/// only what the log made durable. A `Sync` commit is written and its flush held at a gate:
/// for as long as it is held, the feed returns nothing of it; once let go, it does. With the
/// mutant `feed-publishes-written` (the written lsn published) the feed returned the sale
/// during its flush: a head office could hold a sale the till then lost to a power cut.
#[test]
fn the_feed_returns_no_sync_commit_while_its_flush_runs() {
    let disk = SimDisk::new(SimConfig::default());
    let gate = Arc::new(Gate::default());
    let storage = Arc::new(HookedStorage::new(
        Arc::new(disk.clone()),
        FlushGate(Arc::clone(&gate)),
    ));
    let options = Options {
        background_threads: true,
        ..options()
    };
    let db = Arc::new(Db::open_with_storage(storage, Path::new(DIR), options).expect("open"));
    let mut feed = consumer(&disk);
    sell(&db, 0, 1);
    assert_eq!(drain(&mut feed).0, 1, "the first sale, flushed");
    gate.arm(1);
    let seller = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || sell(&db, 1, 2))
    };
    gate.wait_held();
    // The publisher looks every 2 ms. Look for 300 ms, and until two of its rounds have
    // ended since the hold (the second began after it) before a look: time alone is no
    // proof, a publisher that got no CPU in it published nothing, right or wrong.
    let rounds = db.publisher_rounds();
    let until = Instant::now() + Duration::from_millis(300);
    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        assert!(
            Instant::now() < deadline,
            "the publisher finished no two rounds within a minute"
        );
        let published = db.publisher_rounds() >= rounds + 2;
        let early = feed.next(Duration::from_millis(10)).expect("feed");
        assert!(
            early.is_none(),
            "the feed returned a Sync commit while its flush was held: {early:?}"
        );
        if published && Instant::now() >= until {
            break;
        }
    }
    gate.release();
    seller.join().expect("seller");
    let txn = feed
        .next(Duration::from_secs(5))
        .expect("feed")
        .expect("the sale, once flushed");
    assert_eq!(txn.changes[0].key, key(1));
    Arc::try_unwrap(db)
        .expect("seller joined")
        .close()
        .expect("close");
}

/// Found by `till ship`'s chaos test (issue 34: a head office thousands of sales short while
/// `till ship --once` said "caught up"). A writer killed mid-write left a torn record at lsn
/// P; the reopened log went on in a newer segment based at P. A feed that had read up to P
/// through the old segment took the torn record's garbage length for a record running past
/// the durable mark, "not durable yet", and waited for ever; a feed opened afresh found the
/// newer segment. Here the torn record is laid at P by hand, then a crash, a reopen and more
/// sales: the feed that was open all along returns them.
#[test]
fn a_feed_at_a_torn_record_reads_on_in_the_segment_the_reopened_log_began_there() {
    let disk = SimDisk::new(SimConfig::default());
    let options = Options {
        background_threads: true,
        ..options()
    };
    let open = || {
        Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options.clone())
            .expect("open")
    };
    let db = open();
    let mut feed = consumer(&disk);
    sell(&db, 0, 3);
    let (read, last) = drain(&mut feed);
    assert_eq!(read, 3);
    let p = last.expect("read").0;
    // The writer goes (closed here: the simulated disk's crash would end the feed's process
    // too), and a torn record is left at P: a header whose length runs far past any durable
    // mark, garbage after it, in the segment the feed reads.
    db.close().expect("close");
    let wal = Path::new(DIR).join("wal");
    let log = tilldb::internals::wal::inspect_log(&disk, &wal, None, |_| {}).expect("inspect");
    let first = log
        .segments
        .iter()
        .find(|s| matches!(s.role, tilldb::internals::wal::SegmentRole::Chain { .. }))
        .expect("a chained segment");
    let header = first.header.expect("a chained segment's header");
    let file = disk
        .open(&first.path, tilldb::FlushMethod::Fdatasync)
        .expect("open the segment");
    assert!(p >= header.base_lsn, "P lies in the first segment");
    let mut torn = vec![0xA5u8; 512];
    torn[4..8].copy_from_slice(&0x00F0_0000u32.to_le_bytes());
    file.write_at(
        &torn,
        u64::from(header.log_block_bytes) + (p - header.base_lsn),
    )
    .expect("lay the torn record");
    file.flush().expect("flush");
    drop(file);
    let db = open();
    sell(&db, 3, 6);
    let mut got = 0;
    let deadline = Instant::now() + Duration::from_secs(5);
    while got < 3 && Instant::now() < deadline {
        if feed
            .next(Duration::from_millis(50))
            .expect("feed")
            .is_some()
        {
            got += 1;
        }
    }
    assert_eq!(
        got, 3,
        "the feed stopped at lsn {p}, the torn record, while the reopened log went on past it"
    );
    db.close().expect("close");
}

/// The chain of log segments recovery follows from `from`: each file with its base and end.
fn chain_from(disk: &SimDisk, from: tilldb::Lsn) -> Vec<(std::path::PathBuf, u64, u64)> {
    use tilldb::internals::wal::{SegmentRole, inspect_log};
    let wal = Path::new(DIR).join("wal");
    let log = inspect_log(&disk.fork(0), &wal, Some(from), |_| {}).expect("inspect");
    log.segments
        .into_iter()
        .filter_map(|s| match s.role {
            SegmentRole::Chain { end_lsn } => Some((
                s.path,
                s.header.expect("a chained header").base_lsn,
                end_lsn.0,
            )),
            _ => None,
        })
        .collect()
}

/// The redo point of the newest checkpoint (its header's checkpoint lsn).
fn checkpoint_lsn(disk: &SimDisk) -> tilldb::Lsn {
    use tilldb::internals::header::HeaderFile;
    let (_, header) = HeaderFile::open(
        &disk.fork(0),
        Path::new(DIR),
        tilldb::FlushMethod::Fdatasync,
    )
    .expect("header")
    .expect("a header");
    header.checkpoint_lsn
}

/// The mutation audit, item 6 (a step no test guarded). A consumer far behind holds the log from
/// its position, so an open reads the log from there, not from the checkpoint; when that log is
/// gone (`LogMissing`), the open retries from the checkpoint's redo point, which recovery needs
/// whatever the consumer lost. That retry must still check that the log begins at or before the
/// redo point and reaches it. Two days of sales, each ended by a kill, the second with a checkpoint
/// in its own segment; then, on one copy, the segments from the consumer's through the redo point's
/// are removed (the log begins after the redo point), and on another the consumer's segment and
/// every one from the redo point's on (the log ends, cleanly, where the first day stopped: before
/// the redo point). Each open is refused, naming the gap or the end. With the mutant
/// `feed-reopen-without-start` the retry opened the log with no start: the log that begins after
/// the redo point opened, redo read nothing from a redo point the log no longer held, and 2,852 of
/// 5,000 acknowledged sales were gone without a word; the log that ends before it was still
/// refused, but by a later check, naming a page of the data file whose lsn is past the log's end
/// instead of the log.
#[test]
fn a_log_lost_through_the_checkpoint_behind_a_consumer_is_refused_not_opened_without_it() {
    const SALES: u32 = 5000;
    let options = Options {
        // Only the checkpoints below: the redo point stays where this test puts it.
        checkpoint_log_bytes: 64 << 20,
        ..options()
    };
    let base = SimDisk::new(SimConfig::default());
    let open = || {
        Db::open_with_storage(Arc::new(base.clone()), Path::new(DIR), options.clone())
            .expect("open")
    };
    // Day one: a consumer registered at the feed's start, never acknowledging (it holds the
    // log from there), and about 1.5 MiB of sales over two 1 MiB segments.
    let db = open();
    let position = consumer(&base).position();
    sell(&db, 0, 2000);
    std::mem::forget(db);
    base.crash(CrashMode::ProcessKill);
    // Day two, in a segment of its own: sales, the checkpoint (its redo point in that first
    // segment of the day), and about 2 MiB more.
    let db = open();
    sell(&db, 2000, 2500);
    db.checkpoint().expect("checkpoint");
    sell(&db, 2500, SALES);
    std::mem::forget(db);
    base.crash(CrashMode::ProcessKill);
    let redo = checkpoint_lsn(&base);
    let chain = chain_from(&base, position);
    let holding = |lsn: tilldb::Lsn| {
        chain
            .iter()
            .rposition(|&(_, base_lsn, _)| base_lsn <= lsn.0)
            .expect("a segment holds it")
    };
    let at_redo = holding(redo);
    assert_eq!(
        holding(position),
        0,
        "the chain begins at the consumer's segment"
    );
    assert!(
        at_redo >= 2 && at_redo + 1 < chain.len(),
        "the redo point {redo} is in segment {at_redo} of {}: the cases need one before and \
         one after it",
        chain.len()
    );
    let removing = |which: &[usize]| {
        let disk = base.fork(1);
        for &i in which {
            disk.remove(&chain[i].0).expect("remove a segment");
        }
        disk
    };
    let begins_after: Vec<usize> = (0..=at_redo).collect();
    let ends_before: Vec<usize> = std::iter::once(0).chain(at_redo..chain.len()).collect();
    for (case, which) in [
        ("begins after the redo point", begins_after),
        ("ends before the redo point", ends_before),
    ] {
        let disk = removing(&which);
        let err =
            match Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options.clone()) {
                Ok(db) => {
                    let lost = (0..SALES)
                        .filter(|&i| !matches!(db.get(&key(i)), Ok(Some(_))))
                        .count();
                    std::mem::forget(db);
                    panic!(
                        "the log {case} ({which:?} of {} segments removed) opened all the same: \
                     {lost} of {SALES} acknowledged sales missing",
                        chain.len()
                    );
                }
                Err(e) => e,
            };
        match (case, &err) {
            (
                "begins after the redo point",
                Error::LogMissing {
                    from_lsn, to_lsn, ..
                },
            ) => {
                assert_eq!(*from_lsn, redo.0, "{case}: {err}");
                assert_eq!(*to_lsn, chain[at_redo + 1].1, "{case}: {err}");
            }
            ("ends before the redo point", Error::Corruption { what, .. }) => {
                assert!(what.contains("ends before the checkpoint"), "{case}: {err}");
            }
            _ => panic!("{case}: refused with the wrong error: {err}"),
        }
    }
}
