//! The change feed (issue 18, item 1): committed transactions in commit order from the one
//! log, only durable ones, named consumers that resume and hold the log, and a consumer that
//! falls too far behind dropped rather than the disk filled.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tilldb::feed::{self, Change, Feed, FeedTxn};
use tilldb::io::{CrashMode, SimConfig, SimDisk, Storage};
use tilldb::{Db, Durability, Error, Lsn, Options};

fn options() -> Options {
    Options {
        change_feed: true,
        ..Options::for_tests()
    }
}

/// Commit `i`'s writes: a put in the default table, one in `orders` and (odd `i`) a delete.
fn writes(i: u32) -> Vec<Change> {
    let mut changes = vec![
        Change {
            table: String::new(),
            key: format!("k{i:05}").into_bytes(),
            value: Some(vec![u8::try_from(i % 251).expect("small"); 300]),
        },
        Change {
            table: "orders".into(),
            key: format!("o{i:05}").into_bytes(),
            value: Some(format!("order {i}").into_bytes()),
        },
    ];
    if i % 2 == 1 {
        changes.insert(
            0,
            Change {
                table: String::new(),
                key: format!("k{:05}", i - 1).into_bytes(),
                value: None,
            },
        );
    }
    changes
}

fn commit(db: &Db, changes: &[Change], durability: Durability) {
    let mut txn = db.begin().expect("begin");
    for c in changes {
        match &c.value {
            Some(v) => txn.put_in(&c.table, &c.key, v).expect("put"),
            None => txn.delete_in(&c.table, &c.key).expect("delete"),
        }
    }
    txn.commit_with(durability).expect("commit");
}

/// Every transaction the feed returns until it is caught up.
fn drain(feed: &mut Feed) -> Vec<FeedTxn> {
    let mut out = Vec::new();
    while let Some(txn) = feed.next(Duration::from_millis(50)).expect("feed") {
        out.push(txn);
    }
    out
}

#[test]
fn the_feed_returns_every_committed_transaction_in_order_with_its_writes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = Db::open(tmp.path(), options()).expect("open");
    // Registered before the commits, a consumer holds the log for itself: with nobody
    // registered the feed keeps no more than checkpoint_log_bytes (2 MiB here) of log files.
    let mut feed = Feed::open_consumer(tmp.path(), "reader").expect("register");
    // About 3 MiB of log over 1 MiB segments: the feed crosses segments and checkpoints.
    for i in 0..4000 {
        commit(&db, &writes(i), Durability::Sync);
    }
    let got = drain(&mut feed);
    assert_eq!(got.len(), 4000);
    let mut last = Lsn(0);
    for (i, txn) in (0..).zip(&got) {
        assert!(txn.lsn > last, "lsns increase");
        last = txn.lsn;
        let mut expected = writes(i);
        // Tables in name order, keys in order within each.
        expected.sort_by(|a, b| (&a.table, &a.key).cmp(&(&b.table, &b.key)));
        assert_eq!(txn.changes, expected, "transaction {i}");
    }
    assert_eq!(feed.position(), last);
    // Caught up: nothing more, and later commits come as they are made.
    commit(&db, &writes(4000), Durability::Sync);
    let next = feed
        .next(Duration::from_secs(5))
        .expect("feed")
        .expect("the new commit");
    assert_eq!(next.changes.len(), writes(4000).len());
    db.close().expect("close");
}

#[test]
fn a_consumer_resumes_after_its_acknowledged_position_across_reopens() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = Db::open(tmp.path(), options()).expect("open");
    for i in 0..10 {
        commit(&db, &writes(i), Durability::Sync);
    }
    let mut consumer = Feed::open_consumer(tmp.path(), "head-office").expect("register");
    let first = drain(&mut consumer);
    assert_eq!(first.len(), 10);
    consumer
        .acknowledge(first[6].lsn)
        .expect("acknowledge seven");
    drop(consumer);
    db.close().expect("close");

    let db = Db::open(tmp.path(), options()).expect("reopen");
    commit(&db, &writes(10), Durability::Sync);
    let mut consumer = Feed::open_consumer(tmp.path(), "head-office").expect("resume");
    let again = drain(&mut consumer);
    assert_eq!(again.len(), 4, "three not acknowledged, one new");
    assert_eq!(again[..3], first[7..]);
    let states = feed::consumers(tmp.path()).expect("consumers");
    assert_eq!(states.len(), 1);
    assert_eq!(
        (
            states[0].name.as_str(),
            states[0].position,
            &states[0].dropped
        ),
        ("head-office", first[6].lsn, &None)
    );
    db.close().expect("close");
}

/// Files in the log directory.
fn log_files(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("wal")).expect("wal dir").count()
}

#[test]
fn a_consumer_holds_the_log_and_one_too_far_behind_is_dropped() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        feed_retention_bytes: 6 << 20,
        ..options()
    };
    let db = Db::open(tmp.path(), opts.clone()).expect("open");
    let mut keeping_up = Feed::open_consumer(tmp.path(), "keeps-up").expect("register");
    let mut lagging = Feed::open_consumer(tmp.path(), "lags").expect("register");
    let first = lagging.next(Duration::from_secs(1)).expect("feed");
    assert!(first.is_none(), "nothing committed yet");
    let mut most_files = 0;
    for round in 0..40 {
        for i in 0..250 {
            commit(&db, &writes(round * 250 + i), Durability::Sync);
        }
        let read = drain(&mut keeping_up);
        keeping_up
            .acknowledge(read.last().expect("read").lsn)
            .expect("acknowledge");
        most_files = most_files.max(log_files(tmp.path()));
    }
    // About 20 MiB of log went by. The lagging consumer held about 6 MiB of it, then was
    // dropped; the log stayed within the retention limit plus the writer's own segments.
    let err = lagging.next(Duration::ZERO).expect_err("dropped");
    assert!(
        matches!(&err, Error::FeedConsumerDropped { name, reason, .. }
            if name == "lags" && reason.contains("more than feed_retention_bytes")),
        "{err}"
    );
    assert!(most_files <= 6 + 2 + 4 + 1, "{most_files} log files");
    let states = feed::consumers(tmp.path()).expect("consumers");
    let lags = states.iter().find(|c| c.name == "lags").expect("listed");
    assert!(lags.dropped.is_some());
    let keeps = states
        .iter()
        .find(|c| c.name == "keeps-up")
        .expect("listed");
    assert!(keeps.dropped.is_none(), "{keeps:?}");
    // Removing the dropped consumer lets the name register afresh, at the feed's start.
    feed::remove_consumer(tmp.path(), "lags").expect("remove");
    assert!(Feed::open_consumer(tmp.path(), "lags").is_ok());
    db.close().expect("close");
}

#[test]
fn a_commit_made_with_the_feed_off_stops_the_feed_with_a_clear_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = Db::open(tmp.path(), options()).expect("open");
    commit(&db, &writes(0), Durability::Sync);
    db.close().expect("close");
    let db = Db::open(tmp.path(), Options::for_tests()).expect("feed off");
    commit(&db, &writes(1), Durability::Sync);
    db.close().expect("close");
    let mut feed = Feed::open(tmp.path(), feed::start(tmp.path()).expect("start")).expect("feed");
    let err = feed.next(Duration::from_millis(100)).expect_err("a gap");
    assert!(
        matches!(&err, Error::FeedUnavailable { reason, .. } if reason.contains("change_feed off")),
        "{err}"
    );

    let plain = tempfile::tempdir().expect("tempdir");
    Db::open(plain.path(), Options::for_tests())
        .expect("open")
        .close()
        .expect("close");
    let err = feed::start(plain.path()).expect_err("never on");
    assert!(
        err.to_string()
            .contains("never been opened with Options::change_feed"),
        "{err}"
    );
}

#[test]
fn buffered_commits_reach_the_feed_only_once_durable() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        background_threads: false,
        ..options()
    };
    let db = Db::open(tmp.path(), opts).expect("open");
    let mut feed = Feed::open(tmp.path(), feed::start(tmp.path()).expect("start")).expect("feed");
    commit(&db, &writes(0), Durability::Buffered);
    commit(&db, &writes(1), Durability::Lazy);
    assert!(
        feed.next(Duration::from_millis(50))
            .expect("feed")
            .is_none(),
        "not durable yet: a power cut could take them"
    );
    commit(&db, &writes(2), Durability::Sync);
    assert_eq!(
        drain(&mut feed).len(),
        3,
        "the sync commit made all three durable"
    );
    db.close().expect("close");
}

#[test]
fn everything_the_feed_returned_survives_a_power_cut() {
    for seed in 0..20 {
        let sim = SimDisk::new(SimConfig {
            seed,
            ..SimConfig::default()
        });
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let dir = Path::new("/db");
        let opts = Options {
            background_threads: false,
            ..options()
        };
        let db = Db::open_with_storage(Arc::clone(&storage), dir, opts.clone()).expect("open");
        let start = feed::start_with_storage(&*storage, dir).expect("start");
        let mut feed =
            Feed::open_with_storage(Arc::clone(&storage), dir, start, None).expect("feed");
        let mut returned: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for i in 0..60u32 {
            let durability = match (i + u32::try_from(seed).expect("small")) % 3 {
                0 => Durability::Sync,
                1 => Durability::Buffered,
                _ => Durability::Lazy,
            };
            let key = format!("key{i:03}").into_bytes();
            let mut txn = db.begin().expect("begin");
            txn.put(&key, &i.to_le_bytes()).expect("put");
            txn.commit_with(durability).expect("commit");
            while let Some(txn) = feed.next(Duration::ZERO).expect("feed") {
                for c in txn.changes {
                    returned.insert(c.key, c.value.expect("puts only"));
                }
            }
        }
        assert!(
            !returned.is_empty(),
            "seed {seed}: the feed returned nothing"
        );
        sim.crash(CrashMode::PowerLoss {
            tear_bytes: 512,
            garbage: true,
        });
        drop((db, feed));
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let db = Db::open_with_storage(storage, dir, opts).expect("recover");
        for (key, value) in &returned {
            assert_eq!(
                db.get(key).expect("get").as_ref(),
                Some(value),
                "seed {seed}: the feed returned {} but the power cut took it",
                String::from_utf8_lossy(key)
            );
        }
        db.close().expect("close");
    }
}

#[test]
fn a_feed_read_while_many_threads_commit_sees_every_commit_and_no_invalid_record() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = Db::open(tmp.path(), options()).expect("open");
    let start = feed::start(tmp.path()).expect("start");
    let done = std::sync::atomic::AtomicBool::new(false);
    let read = std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            let mut feed = Feed::open(tmp.path(), start).expect("feed");
            let mut read = 0u64;
            loop {
                let finished = done.load(std::sync::atomic::Ordering::SeqCst);
                match feed.next(Duration::from_millis(5)).expect("the feed reads") {
                    Some(_) => read += 1,
                    None if finished => return read,
                    None => {}
                }
            }
        });
        let writers: Vec<_> = (0..32u32)
            .map(|t| {
                let db = &db;
                scope.spawn(move || {
                    for i in 0..200u32 {
                        let mut txn = db.begin().expect("begin");
                        txn.put(format!("t{t:02}-{i:04}").as_bytes(), &[7; 120])
                            .expect("put");
                        txn.commit().expect("commit");
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().expect("writer");
        }
        // Let the publisher catch up with the last flush.
        std::thread::sleep(Duration::from_millis(50));
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        reader.join().expect("reader")
    });
    assert_eq!(read, 32 * 200);
    db.close().expect("close");
}

#[test]
fn a_range_delete_reaches_the_feed_as_one_transaction_of_deletes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = Db::open(tmp.path(), options()).expect("open");
    for i in 0..3 {
        commit(&db, &writes(i * 2), Durability::Sync);
    }
    let mut txn = db.begin().expect("begin");
    let deleted = txn
        .delete_range_in(
            "orders",
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
        )
        .expect("delete range");
    assert_eq!(deleted, 3);
    txn.commit().expect("commit");
    let mut feed = Feed::open(tmp.path(), feed::start(tmp.path()).expect("start")).expect("feed");
    let got = drain(&mut feed);
    assert_eq!(got.len(), 4);
    let last = &got[3].changes;
    assert_eq!(last.len(), 3);
    assert!(
        last.iter()
            .all(|c| c.table == "orders" && c.value.is_none()),
        "{last:?}"
    );
    db.close().expect("close");
}
