//! Unit tests of `reader.rs`.

use super::*;
use crate::Durability;
use crate::io::{SimConfig, SimDisk};
// The reader's behaviour is observed through the tools' view of it.
use crate::wal::inspect::{SegmentRole, inspect_log};
use crate::wal::{Wal, WalOptions};
use std::sync::Arc;

/// Every file of the disk under `dir` and its bytes.
fn contents(disk: &SimDisk, dir: &Path) -> Vec<(String, Vec<u8>)> {
    disk.list_dir(dir)
        .expect("ls")
        .into_iter()
        .map(|name| {
            let bytes = disk.live_contents(&dir.join(&name)).expect("contents");
            (name, bytes)
        })
        .collect()
}

/// A log of 60 records over several segments, reopened once (so the chain holds a
/// segment made by an open), then inspected: every record is shown once, in lsn order,
/// the chain's segments are listed as such, and not a byte changes.
#[test]
fn inspect_log_shows_every_record_and_writes_nothing() {
    let disk = SimDisk::new(SimConfig::default());
    let storage: Arc<dyn Storage> = Arc::new(disk.clone());
    let dir = Path::new("/db/wal");
    for round in 0..2u8 {
        let (wal, _) = Wal::open(Arc::clone(&storage), dir, WalOptions::for_tests()).expect("open");
        for i in 0..200u8 {
            wal.commit(&[round, i, 7, 7, 7], Durability::Sync)
                .expect("commit");
        }
        wal.close().expect("close");
    }
    let before = contents(&disk, dir);
    let (mut data, mut ends, mut stops, mut segments) = (Vec::new(), 0, Vec::new(), 0);
    let found = inspect_log(&*storage, dir, None, |event| match event {
        LogEvent::Segment { .. } => segments += 1,
        LogEvent::Record { record, .. } => match record.kind {
            RecordKind::Data => data.push((record.lsn, record.payload.to_vec())),
            RecordKind::SegmentEnd => ends += 1,
            RecordKind::Pad => {}
        },
        LogEvent::Stop(stop) => stops.push(stop.fault),
    })
    .expect("inspect");
    assert_eq!(contents(&disk, dir), before, "inspect_log changed the log");
    assert_eq!(data.len(), 400);
    assert_eq!(found.recovery.records, 400);
    assert!(data.windows(2).all(|w| w[0].0 < w[1].0), "lsn order");
    let expected: Vec<Vec<u8>> = (0..2u8)
        .flat_map(|round| (0..200u8).map(move |i| vec![round, i, 7, 7, 7]))
        .collect();
    assert_eq!(
        data.into_iter().map(|(_, p)| p).collect::<Vec<_>>(),
        expected
    );
    assert!(ends >= 1, "200 records of 5 bytes cross an 8 KiB segment");
    assert_eq!(segments, found.recovery.segments);
    assert_eq!(
        stops,
        vec![RecordFault::Zero; 2],
        "each open's last segment ends in zeros"
    );
    let chained = found
        .segments
        .iter()
        .filter(|s| matches!(s.role, SegmentRole::Chain { .. }))
        .count();
    assert_eq!(chained, found.recovery.segments);
    assert_eq!(found.segments.len(), before.len());
    assert!(
        found
            .segments
            .windows(2)
            .all(|w| w[0].generation < w[1].generation)
    );
}

/// A damaged last record of a full segment, in a log without durable marks, ends the log
/// there, and the next segment, which the damaged one's `SegmentEnd` led to, falls out of
/// the chain: it is listed as unchained and holding records (what a check warns about),
/// the spare as not.
#[test]
fn a_segment_cut_off_by_damage_is_listed_as_holding_records() {
    let disk = SimDisk::new(SimConfig::default());
    let storage: Arc<dyn Storage> = Arc::new(disk.clone());
    let dir = Path::new("/db/wal");
    // Without padding there are no durable marks, so nothing vouches for the damaged
    // record and the log ends there (with marks it is refused: the next test).
    let options = WalOptions {
        tail: crate::wal::TailGuard::None,
        ..WalOptions::for_tests()
    };
    let (wal, _) = Wal::open(Arc::clone(&storage), dir, options).expect("open");
    for i in 0..120u8 {
        wal.commit(&[i; 100], Durability::Sync).expect("commit");
    }
    wal.close().expect("close");
    // The last data record of the first segment, and the lsn it starts at.
    let mut last: Option<(PathBuf, u64, u64)> = None;
    let mut current = PathBuf::new();
    let mut segments_seen = 0;
    let intact = inspect_log(&*storage, dir, None, |event| match event {
        LogEvent::Segment { path, .. } => {
            current = path.to_path_buf();
            segments_seen += 1;
        }
        LogEvent::Record { offset, record }
            if record.kind == RecordKind::Data && segments_seen == 1 =>
        {
            last = Some((current.clone(), offset, record.lsn));
        }
        _ => {}
    })
    .expect("inspect");
    let used = intact.recovery.segments;
    assert!(used >= 3, "120 records of 100 bytes fill 8 KiB segments");
    let (path, offset, lsn) = last.expect("records");
    let mut bytes = disk.live_contents(&path).expect("contents");
    bytes[usize::try_from(offset).expect("small") + 30] ^= 0x01;
    let file = storage.open(&path, FlushMethod::Fdatasync).expect("open");
    file.write_at(&bytes, 0).expect("write");
    let found = inspect_log(&*storage, dir, None, |_| {}).expect("inspect");
    assert_eq!(found.recovery.segments, 1);
    let roles: Vec<SegmentRole> = found.segments.iter().map(|s| s.role).collect();
    assert!(
        matches!(roles[0], SegmentRole::Chain { end_lsn } if end_lsn.0 == lsn),
        "{roles:?}"
    );
    let cut_off = SegmentRole::Unchained {
        holds_records: true,
    };
    assert!(roles[1..used].iter().all(|r| *r == cut_off), "{roles:?}");
    // A spare, when the preparer made one before the close.
    let spare = SegmentRole::Unchained {
        holds_records: false,
    };
    assert!(roles[used..].iter().all(|r| *r == spare), "{roles:?}");
}

/// A flipped byte in the last record ends the log there: the stop names the file and the
/// record's offset, and the records before it are still shown.
/// A damaged record with a later group in its segment whose durable mark is past it was
/// durable before it was damaged: recovery refuses the log, naming the file and offset,
/// instead of ending the log there and dropping the acknowledged records after it.
#[test]
fn damage_before_a_later_durable_mark_is_corruption_not_the_end() {
    let disk = SimDisk::new(SimConfig::default());
    let storage: Arc<dyn Storage> = Arc::new(disk.clone());
    let dir = Path::new("/db/wal");
    let (wal, _) = Wal::open(Arc::clone(&storage), dir, WalOptions::for_tests()).expect("open");
    for i in 0..10u8 {
        wal.commit(&[i; 100], Durability::Sync).expect("commit");
    }
    wal.close().expect("close");
    let mut first: Option<(PathBuf, u64)> = None;
    let mut current = PathBuf::new();
    inspect_log(&*storage, dir, None, |event| match event {
        LogEvent::Segment { path, .. } => current = path.to_path_buf(),
        LogEvent::Record { offset, record }
            if record.kind == RecordKind::Data && first.is_none() =>
        {
            first = Some((current.clone(), offset));
        }
        _ => {}
    })
    .expect("inspect");
    let (path, offset) = first.expect("records");
    disk.corrupt(&path, offset + 30, 0x01);
    let err = scan(&*storage, dir, None, None).expect_err("damage under a durable mark");
    match err {
        Error::Corruption {
            file, offset: at, ..
        } => {
            assert_eq!((file, at), (path, offset));
        }
        other => panic!("{other:?}"),
    }
}

/// The `wal_crash` failure of seed 67 (a flush crashed, then a power cut tearing 4 KiB
/// chunks with garbage): a flush made the log durable to a block boundary D that a
/// record R crosses (durable marks are block boundaries, records are not), and a later
/// group's pad carries D. R's tail lay in the open block after D, which the power cut
/// tore, so R never was durable: the log ends at R (a torn tail), rather than being
/// refused as damaged under a durable mark. R was not acknowledged: a `Sync` commit waits
/// for its end.
#[test]
fn a_torn_record_that_crosses_the_durable_mark_ends_the_log() {
    let disk = SimDisk::new(SimConfig::default());
    let storage: Arc<dyn Storage> = Arc::new(disk.clone());
    let dir = Path::new("/db/wal");
    storage.create_dir_all(dir).expect("dir");
    let block = 512u64;
    let header = SegmentHeader {
        version: super::super::segment::VERSION,
        log_block_bytes: 512,
        segment_bytes: 8192,
        generation: 1,
        base_lsn: 4096,
        seal: None,
    };
    let lsn_at = |offset: u64| header.base_lsn + offset - block;
    let mut bytes = vec![0u8; 8192];
    bytes[..512].copy_from_slice(&header.encode());
    let put = |bytes: &mut Vec<u8>, offset: u64, payload_len: usize| {
        let at = usize::try_from(offset).expect("small");
        let len = record::record_len(payload_len);
        record::encode(
            &mut bytes[at..at + len],
            header.generation,
            lsn_at(offset),
            RecordKind::Data,
            &vec![7u8; payload_len],
        );
        offset + len as u64
    };
    // A in block 1; R from 912 to 1144, across the boundary at 1024 (the durable mark).
    let r_offset = put(&mut bytes, 512, 376);
    assert_eq!(r_offset, 912);
    let r_end = put(&mut bytes, r_offset, 208);
    assert!(
        r_offset < 1024 && r_end > 1024,
        "R crosses the block boundary"
    );
    let durable = lsn_at(1024);
    // The power cut tore the block after the mark: garbage over R's tail and after.
    bytes[1024..1536].fill(0xA5);
    // A later group, closed with a pad carrying the mark.
    let pad_at = put(&mut bytes, 1536, 8);
    let pad_len = usize::try_from(2048 - pad_at).expect("small");
    let at = usize::try_from(pad_at).expect("small");
    record::encode_pad(
        &mut bytes[at..at + pad_len],
        (header.generation, None),
        lsn_at(pad_at),
        pad_len,
        durable,
    );
    let path = dir.join(crate::wal::segment::segment_name(1));
    let file = storage
        .create(&path, FlushMethod::Fdatasync)
        .expect("create");
    file.write_at(&bytes, 0).expect("write");
    let found = scan(&*storage, dir, None, None).expect("a torn tail, not damage");
    let stop = found.recovery.stop.expect("the log ends at R");
    assert_eq!((stop.path, stop.offset), (path.clone(), r_offset));
    assert_eq!(found.recovery.end_lsn.0, lsn_at(r_offset));

    // The same, but R ends before the mark: R was durable, so its damage is corruption.
    let mut bytes = vec![0u8; 8192];
    bytes[..512].copy_from_slice(&header.encode());
    let r_offset = put(&mut bytes, 512, 376);
    let r_end = put(&mut bytes, r_offset, 80);
    assert!(r_end <= 1024);
    bytes[usize::try_from(r_offset).expect("small") + 40] ^= 1;
    let pad_at = put(&mut bytes, 1536, 8);
    let at = usize::try_from(pad_at).expect("small");
    record::encode_pad(
        &mut bytes[at..at + pad_len],
        (header.generation, None),
        lsn_at(pad_at),
        pad_len,
        durable,
    );
    file.write_at(&bytes, 0).expect("write");
    let err = scan(&*storage, dir, None, None).expect_err("damage under the mark");
    assert!(
        matches!(&err, Error::Corruption { offset, .. } if *offset == r_offset),
        "{err:?}"
    );
}

#[test]
fn inspect_log_names_a_damaged_record() {
    let disk = SimDisk::new(SimConfig::default());
    let storage: Arc<dyn Storage> = Arc::new(disk.clone());
    let dir = Path::new("/db/wal");
    // Padded, so the records are at home (with tail slots they would be in a slot: the
    // next test).
    let options = WalOptions {
        tail: crate::wal::TailGuard::Pad,
        ..WalOptions::for_tests()
    };
    let (wal, _) = Wal::open(Arc::clone(&storage), dir, options).expect("open");
    for i in 0..3u8 {
        wal.commit(&[i; 40], Durability::Sync).expect("commit");
    }
    wal.close().expect("close");
    let mut offsets = Vec::new();
    let mut last_path = PathBuf::new();
    inspect_log(&*storage, dir, None, |event| {
        if let LogEvent::Record { offset, record } = event
            && record.kind == RecordKind::Data
        {
            offsets.push(offset);
        }
        if let LogEvent::Segment { path, .. } = event {
            last_path = path.to_path_buf();
        }
    })
    .expect("inspect");
    let victim = *offsets.last().expect("three records");
    let mut bytes = disk.live_contents(&last_path).expect("contents");
    bytes[usize::try_from(victim).expect("small") + 30] ^= 0x01;
    let file = storage
        .open(&last_path, FlushMethod::Fdatasync)
        .expect("open");
    file.write_at(&bytes, 0).expect("write");
    let count = || {
        let mut data = 0;
        let found = inspect_log(&*storage, dir, None, |event| {
            if let LogEvent::Record { record, .. } = event
                && record.kind == RecordKind::Data
            {
                data += 1;
            }
        })
        .expect("inspect");
        (data, found)
    };
    let (data, found) = count();
    assert_eq!(data, 2);
    let stop = found.recovery.stop.expect("the log stops");
    assert_eq!(
        (stop.path, stop.offset, stop.fault),
        (last_path, victim, RecordFault::BadCrc)
    );
}

/// With tail slots, a partly filled block lives in a slot until it is full: its home is
/// never written (so damage there changes nothing), and the slot alone gives the records.
#[test]
fn a_partly_filled_block_is_read_from_its_tail_slot() {
    let disk = SimDisk::new(SimConfig::default());
    let storage: Arc<dyn Storage> = Arc::new(disk.clone());
    let dir = Path::new("/db/wal");
    let (wal, _) = Wal::open(Arc::clone(&storage), dir, WalOptions::for_tests()).expect("open");
    for i in 0..3u8 {
        wal.commit(&[i; 40], Durability::Sync).expect("commit");
    }
    wal.close().expect("close");
    let path = dir.join("00000000000000000001.wal");
    let mut bytes = disk.live_contents(&path).expect("contents");
    assert!(
        bytes[512..1024].iter().all(|&b| b == 0),
        "home never written"
    );
    let payloads = |storage: &dyn Storage| {
        let mut data = Vec::new();
        inspect_log(storage, dir, None, |event| {
            if let LogEvent::Record { record, .. } = event
                && record.kind == RecordKind::Data
            {
                data.push(record.payload[0]);
            }
        })
        .expect("inspect");
        data
    };
    assert_eq!(payloads(&*storage), vec![0, 1, 2]);
    bytes[600] = 0xFF;
    let file = storage.open(&path, FlushMethod::Fdatasync).expect("open");
    file.write_at(&bytes, 0).expect("write");
    assert_eq!(
        payloads(&*storage),
        vec![0, 1, 2],
        "the slot holds the block"
    );
}
