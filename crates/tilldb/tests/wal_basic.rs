//! The log's contract, on the simulated disk and on real files: appends come back in order
//! across segment switches and reopens, at every durability level.

use std::path::Path;
use std::sync::Arc;
use tilldb::internals::wal::{Lsn, TailGuard, Wal, WalOptions};
use tilldb::io::{FileStorage, SimConfig, SimDisk, Storage};
use tilldb::{Durability, FlushMethod};

fn payload(i: u32) -> Vec<u8> {
    let len = 4 + (i as usize * 37) % 300;
    let mut p = vec![u8::try_from(i % 251).expect("small"); len];
    p[..4].copy_from_slice(&i.to_le_bytes());
    p
}

fn check_log(storage: Arc<dyn Storage>, dir: &Path, options: &WalOptions, count: u32) {
    let (wal, recovery) = Wal::open(storage, dir, options.clone()).expect("reopen");
    assert_eq!(recovery.records, u64::from(count), "{recovery:?}");
    let records = wal.read_from(recovery.start_lsn).expect("read");
    assert_eq!(records.len(), count as usize);
    for (i, r) in (0u32..).zip(&records) {
        assert_eq!(r.payload, payload(i), "record {i}");
    }
    assert!(
        records.windows(2).all(|w| w[0].end_lsn <= w[1].lsn),
        "lsns in order"
    );
    wal.close().expect("close");
}

fn append_many(
    storage: Arc<dyn Storage>,
    dir: &Path,
    options: &WalOptions,
    count: u32,
    durability: Durability,
) {
    let (wal, _) = Wal::open(storage, dir, options.clone()).expect("open");
    let mut last = Lsn(0);
    for i in 0..count {
        let lsn = wal.commit(&payload(i), durability).expect("commit");
        assert!(lsn > last, "commit lsns increase");
        last = lsn;
        if durability == Durability::Sync {
            assert!(
                wal.durable_lsn() >= lsn,
                "Sync commit acknowledged before durable"
            );
        }
        if durability == Durability::Buffered {
            assert!(
                wal.written_lsn() >= lsn,
                "Buffered commit acknowledged before written"
            );
        }
    }
    wal.close().expect("close");
}

#[test]
fn records_survive_reopen_across_segment_switches_on_simdisk() {
    for durability in [Durability::Sync, Durability::Buffered, Durability::Lazy] {
        let disk: Arc<dyn Storage> = Arc::new(SimDisk::new(SimConfig::default()));
        let dir = Path::new("/db/wal");
        let options = WalOptions::for_tests();
        append_many(Arc::clone(&disk), dir, &options, 200, durability);
        check_log(Arc::clone(&disk), dir, &options, 200);
        assert!(
            disk.list_dir(dir).expect("ls").len() > 5,
            "expected many segments"
        );
    }
}

#[test]
fn records_survive_reopen_on_real_files_with_every_flush_method() {
    for method in FlushMethod::DURABLE {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("wal");
        let options = WalOptions {
            flush_method: method,
            log_block_bytes: Some(4096),
            segment_bytes: 64 << 10,
            ..WalOptions::for_tests()
        };
        let storage: Arc<dyn Storage> = Arc::new(FileStorage::new());
        append_many(Arc::clone(&storage), &dir, &options, 300, Durability::Sync);
        check_log(storage, &dir, &options, 300);
    }
}

#[test]
fn reopen_appends_after_the_recovered_end() {
    let disk: Arc<dyn Storage> = Arc::new(SimDisk::new(SimConfig::default()));
    let dir = Path::new("/db/wal");
    let options = WalOptions::for_tests();
    for round in 0..4u32 {
        let (wal, recovery) = Wal::open(Arc::clone(&disk), dir, options.clone()).expect("open");
        assert_eq!(recovery.records, u64::from(round * 10));
        for i in round * 10..round * 10 + 10 {
            wal.commit(&payload(i), Durability::Sync).expect("commit");
        }
        wal.close().expect("close");
    }
    check_log(disk, dir, &options, 40);
}

#[test]
fn oversized_records_are_refused_not_truncated() {
    let disk: Arc<dyn Storage> = Arc::new(SimDisk::new(SimConfig::default()));
    let (wal, _) = Wal::open(disk, Path::new("/db/wal"), WalOptions::for_tests()).expect("open");
    let max = wal.max_payload_bytes();
    wal.commit(&vec![7u8; max], Durability::Sync)
        .expect("largest record fits");
    let err = wal
        .commit(&vec![7u8; max + 1], Durability::Sync)
        .expect_err("too large");
    assert!(matches!(err, tilldb::Error::TooLarge { .. }), "{err}");
}

/// Records ending at every 8-byte position near a segment's end: the last record that fits,
/// the `SegmentEnd` exactly filling the segment, and the first record of the next segment
/// all round-trip through a reopen.
#[test]
fn record_round_trip_at_every_offset_near_a_segment_boundary() {
    // 512 B blocks, 8 KiB segments; without padding, so records sit back to back and the
    // arithmetic below places them exactly.
    let options = WalOptions {
        tail: TailGuard::None,
        ..WalOptions::for_tests()
    };
    // A header block, then records, then two tail slots.
    let capacity = usize::try_from(options.segment_bytes).expect("small") - 3 * 512;
    for gap in (0..=256usize).step_by(8) {
        let disk: Arc<dyn Storage> = Arc::new(SimDisk::new(SimConfig::default()));
        let dir = Path::new("/db/wal");
        let (wal, _) = Wal::open(Arc::clone(&disk), dir, options.clone()).expect("open");
        // A filler that leaves `gap` bytes before the room reserved for SegmentEnd (24 B).
        let filler = capacity - 24 - gap - 24; // minus its own 24-byte header
        let mut written = vec![vec![0xF1; filler]];
        wal.commit(&written[0], Durability::Buffered)
            .expect("filler");
        for i in 0..6u8 {
            let p = vec![i; usize::from(i) * 5];
            wal.commit(&p, Durability::Buffered).expect("commit");
            written.push(p);
        }
        wal.close().expect("close");
        let (wal, recovery) = Wal::open(disk, dir, options.clone()).expect("reopen");
        let back: Vec<Vec<u8>> = wal
            .read_from(recovery.start_lsn)
            .expect("read")
            .into_iter()
            .map(|r| r.payload)
            .collect();
        assert_eq!(back, written, "gap {gap}");
        // The six records take 240 bytes: they fill the gap exactly at 240 and switch below.
        let tail: usize = (0..6)
            .map(|i| tilldb::internals::wal::record::record_len(i * 5))
            .sum();
        assert_eq!(tail, 240);
        assert_eq!(
            recovery.segments >= 2,
            gap < tail,
            "gap {gap}: {recovery:?}"
        );
    }
}

/// Recovery from a checkpoint reads from the segment holding it: older segments are left
/// out of the chain (free), every record from the checkpoint on is still there, and the log
/// goes on after a reopen.
#[test]
fn open_from_a_checkpoint_skips_older_segments_and_keeps_everything_after() {
    let disk: Arc<dyn Storage> = Arc::new(SimDisk::new(SimConfig::default()));
    let dir = Path::new("/db/wal");
    let options = WalOptions::for_tests();
    let (wal, _) = Wal::open(Arc::clone(&disk), dir, options.clone()).expect("open");
    let ends: Vec<Lsn> = (0..200)
        .map(|i| wal.commit(&payload(i), Durability::Sync).expect("commit"))
        .collect();
    wal.close().expect("close");
    let checkpoint = ends[149];
    let (wal, recovery) = Wal::open_from(Arc::clone(&disk), dir, options.clone(), Some(checkpoint))
        .expect("open from");
    assert!(
        recovery.start_lsn > Lsn(0),
        "older segments were not left out: {recovery:?}"
    );
    assert!(recovery.start_lsn <= checkpoint);
    let after: Vec<Vec<u8>> = wal
        .read_from(checkpoint)
        .expect("read")
        .into_iter()
        .map(|r| r.payload)
        .collect();
    assert_eq!(after, (150..200).map(payload).collect::<Vec<_>>());
    wal.commit(&payload(200), Durability::Sync)
        .expect("commit after");
    wal.close().expect("close");
    let (wal, _) = Wal::open_from(disk, dir, options, Some(checkpoint)).expect("reopen");
    let after: Vec<Vec<u8>> = wal
        .read_from(checkpoint)
        .expect("read")
        .into_iter()
        .map(|r| r.payload)
        .collect();
    assert_eq!(after, (150..201).map(payload).collect::<Vec<_>>());
}

/// The length of every segment file in `dir`, by name (oldest generation first).
fn segment_lengths(disk: &dyn Storage, dir: &Path) -> Vec<u64> {
    let mut names: Vec<String> = disk
        .list_dir(dir)
        .expect("list")
        .into_iter()
        .filter(|n| Path::new(n).extension().is_some_and(|e| e == "wal"))
        .collect();
    names.sort();
    names
        .iter()
        .map(|n| {
            disk.open(&dir.join(n), FlushMethod::Fdatasync)
                .expect("open")
                .len()
                .expect("len")
        })
        .collect()
}

/// Growing options: segments from 8 KiB up to 256 KiB.
fn growing() -> WalOptions {
    WalOptions {
        segment_bytes: 256 << 10,
        first_segment_bytes: 8 << 10,
        background_threads: false,
        ..WalOptions::for_tests()
    }
}

/// A new log starts with `first_segment_bytes` and doubles each segment up to `segment_bytes`
/// (issue 37: a new database's log is not three full-size files); every record reads back
/// across the switches and a reopen, and the reopened log starts small again.
#[test]
fn segments_start_small_and_double_up_to_segment_bytes() {
    let disk: Arc<dyn Storage> = Arc::new(SimDisk::new(SimConfig::default()));
    let dir = Path::new("/db/wal");
    let options = growing();
    let (wal, _) = Wal::open(Arc::clone(&disk), dir, options.clone()).expect("open");
    assert_eq!(
        segment_lengths(&*disk, dir),
        [8 << 10],
        "a new log: one small segment"
    );
    let count = 6000u32; // about 950 KiB of records: past the largest segment size
    for i in 0..count {
        wal.commit(&payload(i), Durability::Sync).expect("commit");
    }
    wal.close().expect("close");
    let lengths = segment_lengths(&*disk, dir);
    let expected_start: Vec<u64> = [8u64, 16, 32, 64, 128, 256]
        .iter()
        .map(|k| k << 10)
        .collect();
    assert_eq!(
        &lengths[..expected_start.len()],
        &expected_start[..],
        "doubling: {lengths:?}"
    );
    assert!(
        lengths[expected_start.len()..]
            .iter()
            .all(|&l| l == 256 << 10),
        "never past segment_bytes: {lengths:?}"
    );
    check_log(Arc::clone(&disk), dir, &options, count);
    // check_log reopened it once: every open starts small again.
    let reopened = segment_lengths(&*disk, dir);
    assert_eq!(reopened.last(), Some(&(8 << 10)), "{reopened:?}");
}

/// A record larger than the next segment's doubling gets a segment that holds it at once:
/// the spare too small for it is resized, not switched through empty.
#[test]
fn a_record_larger_than_the_spare_gets_a_segment_that_holds_it() {
    let disk: Arc<dyn Storage> = Arc::new(SimDisk::new(SimConfig::default()));
    let dir = Path::new("/db/wal");
    let options = growing();
    let (wal, _) = Wal::open(Arc::clone(&disk), dir, options.clone()).expect("open");
    wal.commit(&payload(0), Durability::Sync).expect("small");
    let big = vec![0xabu8; 100 << 10];
    wal.commit(&big, Durability::Sync).expect("100 KiB record");
    wal.commit(&payload(2), Durability::Sync)
        .expect("small again");
    wal.close().expect("close");
    let lengths = segment_lengths(&*disk, dir);
    assert_eq!(lengths.len(), 2, "no empty segment between: {lengths:?}");
    assert_eq!(lengths[0], 8 << 10);
    assert!(
        lengths[1] >= 100 << 10 && lengths[1] <= 256 << 10,
        "{lengths:?}"
    );
    let (wal, recovery) = Wal::open(Arc::clone(&disk), dir, options).expect("reopen");
    let records = wal.read_from(recovery.start_lsn).expect("read");
    assert_eq!(records.len(), 3);
    assert_eq!(records[1].payload, big);
    assert_eq!(records[2].payload, payload(2));
    // The largest record the options allow still fits: it asks for a full-size segment.
    let max = wal.max_payload_bytes();
    wal.commit(&vec![1u8; max], Durability::Sync)
        .expect("the largest record");
    wal.close().expect("close");
}
