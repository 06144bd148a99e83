//! Log records (`wal/record.rs`) and the log reader over them (`wal/reader.rs`).
//!
//! Input:
//!
//! ```text
//! offset size field
//!      0    8 generation  of the segment the bytes are in (its top bit is ignored)
//!      8    8 lsn         the lsn expected at the first byte (its top two bits are ignored)
//!     16    1 flags       bit 0: seal (make lens, lsns and crcs of a chain of records match,
//!                                so the fuzzer's kinds, reserved bytes and payloads are checked)
//!                         bit 1: also lay the bytes out as a log directory on a SimDisk and
//!                                read it with `inspect_log`, then open it with `Wal`
//!                         bit 2: recovery starts at lsn + 8 * byte 17 (a checkpoint) instead
//!                                of at the oldest segment
//!     17    1 start step  see bit 2
//!     18    … bytes       from a record position to the end of a segment (the first 7680
//!                         bytes are segment 1's record area, the rest segment 2's)
//! ```
//!
//! Checks: `decode` never panics; a record it accepts lies inside the bytes, is 8-aligned,
//! has the expected lsn, and encodes back to the same header and payload; a chain of records
//! decodes to the same records the log reader shows; the reader and the log writer return
//! `Ok` or `Err` over any directory, never panic, and a record appended after recovery
//! reads back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use std::sync::Arc;
use tilldb::io::{CrashMode, SimConfig, SimDisk, Storage};
use tilldb::internals::wal::record::{self, RecordKind};
use tilldb::internals::wal::{LogEvent, Lsn, SegmentHeader, Wal, WalOptions};
use tilldb::{Durability, FlushMethod};
use tilldb_fuzz::{Input, RECORD_HEADER_BYTES, seal_records};

const LOG_BLOCK_BYTES: u32 = 512;
const SEGMENT_BYTES: u64 = 8192;
const AREA_BYTES: usize = (SEGMENT_BYTES - LOG_BLOCK_BYTES as u64) as usize;
const WAL_DIR: &str = "/wal";

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    // The whole range: generations and lsns near u64::MAX are refused cleanly now (they once
    // overflowed; `crates/tilldb/tests/fuzz_regressions.rs`).
    let generation = input.u64();
    let lsn = input.u64();
    let flags = input.u8();
    let start_step = input.u8();
    let mut bytes = input.rest().to_vec();
    if flags & 1 != 0 {
        let area = bytes.len().min(AREA_BYTES);
        seal_records(&mut bytes[..area], generation, lsn, 64);
    }
    check_one(&bytes, generation, lsn);
    let chain = check_chain(&bytes[..bytes.len().min(AREA_BYTES)], generation, lsn);
    if flags & 2 != 0 {
        let start = (flags & 4 != 0).then(|| Lsn(lsn.wrapping_add(8 * u64::from(start_step))));
        check_log_dir(&bytes, generation, lsn, start, &chain);
    }
});

/// One decode, with its postconditions and the encode round trip.
fn check_one(rest: &[u8], generation: u64, lsn: u64) {
    let Ok(rec) = record::decode(rest, generation, lsn) else {
        return;
    };
    assert!(rec.len <= rest.len(), "record past the bytes");
    assert!(
        rec.len >= RECORD_HEADER_BYTES && rec.len % 8 == 0,
        "len {}",
        rec.len
    );
    assert_eq!(rec.lsn, lsn);
    assert_eq!(rec.len, record::record_len(rec.payload.len()));
    assert!(rec.kind != RecordKind::SegmentEnd || rec.payload.is_empty());
    let mut again = vec![0xA5u8; rec.len];
    let len = record::encode(&mut again, generation, lsn, rec.kind, rec.payload);
    assert_eq!(len, rec.len);
    let used = RECORD_HEADER_BYTES + rec.payload.len();
    // The padding after the payload is covered by the crc but not checked to be zero, so
    // only the header and payload must come back byte for byte.
    assert_eq!(
        &again[4..used],
        &rest[4..used],
        "encode(decode(x)) differs from x"
    );
    if rest[used..rec.len].iter().all(|&b| b == 0) {
        assert_eq!(
            &again[..],
            &rest[..rec.len],
            "crc differs after a round trip"
        );
    }
    assert_eq!(record::decode(&again, generation, lsn), Ok(rec));
}

/// Decodes records one after another as recovery does; returns (lsn, kind, payload) of each
/// valid one up to the first that does not decode or a `SegmentEnd`.
fn check_chain(area: &[u8], generation: u64, base_lsn: u64) -> Vec<(u64, RecordKind, Vec<u8>)> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at <= area.len() {
        let Some(lsn) = base_lsn.checked_add(at as u64) else {
            break;
        };
        let Ok(rec) = record::decode(&area[at..], generation, lsn) else {
            break;
        };
        out.push((lsn, rec.kind, rec.payload.to_vec()));
        at += rec.len;
        if rec.kind == RecordKind::SegmentEnd {
            break;
        }
    }
    out
}

fn segment_file(generation: u64, base_lsn: u64, area: &[u8]) -> Vec<u8> {
    let header = SegmentHeader {
        version: 2,
        log_block_bytes: LOG_BLOCK_BYTES,
        segment_bytes: SEGMENT_BYTES,
        generation,
        base_lsn,
        seal: None,
    };
    let mut file = header.encode().to_vec();
    file.resize(SEGMENT_BYTES as usize, 0);
    let n = area.len().min(AREA_BYTES);
    file[LOG_BLOCK_BYTES as usize..LOG_BLOCK_BYTES as usize + n].copy_from_slice(&area[..n]);
    file
}

/// The bytes as segment 1 (and the rest as segment 2, where the first ends with `SegmentEnd`)
/// of a log directory; read by `inspect_log`, then recovered and appended to by `Wal`.
fn check_log_dir(
    bytes: &[u8],
    generation: u64,
    base_lsn: u64,
    start: Option<Lsn>,
    chain: &[(u64, RecordKind, Vec<u8>)],
) {
    // Generations are file names of 20 digits: every u64 has one.
    let disk = Arc::new(SimDisk::new(SimConfig::default()));
    let storage: &dyn Storage = &*disk;
    let dir = Path::new(WAL_DIR);
    storage.create_dir_all(dir).expect("directory");
    let mut files = vec![(generation, segment_file(generation, base_lsn, bytes))];
    let ends_segment = chain
        .last()
        .is_some_and(|(_, kind, _)| *kind == RecordKind::SegmentEnd);
    if ends_segment
        && let (Some(next_generation), Some(next_base)) = (
            generation.checked_add(1),
            base_lsn.checked_add(SEGMENT_BYTES - u64::from(LOG_BLOCK_BYTES)),
        )
    {
        let mut second = bytes.get(AREA_BYTES..).unwrap_or(&[]).to_vec();
        seal_records(&mut second, next_generation, next_base, 64);
        files.push((
            next_generation,
            segment_file(next_generation, next_base, &second),
        ));
    }
    for (g, file_bytes) in &files {
        let path = dir.join(format!("{g:020}.wal"));
        let file = storage
            .create(&path, FlushMethod::Fdatasync)
            .expect("create");
        file.write_at(file_bytes, 0).expect("write");
    }
    disk.crash(CrashMode::ProcessKill);

    let mut shown = Vec::new();
    let inspection = tilldb::internals::wal::inspect_log(storage, dir, start, |event| {
        if let LogEvent::Record { offset, record } = event {
            assert!(offset >= u64::from(LOG_BLOCK_BYTES) && offset < SEGMENT_BYTES);
            assert!(
                offset + record.len as u64 <= SEGMENT_BYTES,
                "record past the segment"
            );
            shown.push((record.lsn, record.kind, record.payload.to_vec()));
        }
    });
    if let Ok(inspection) = &inspection {
        assert!(inspection.recovery.start_lsn <= inspection.recovery.end_lsn);
        if start.is_none() {
            // The reader shows the same records of segment 1 that decoding them one by one
            // found (the chain may stop earlier in the reader only where segment 1 ends).
            let n = chain.len().min(shown.len());
            assert_eq!(&shown[..n], &chain[..n], "reader and decoder disagree");
        }
    }
    let options = WalOptions {
        flush_method: FlushMethod::Fdatasync,
        log_block_bytes: Some(LOG_BLOCK_BYTES),
        segment_bytes: SEGMENT_BYTES,
        background_threads: false,
        ..WalOptions::for_tests()
    };
    let Ok((wal, recovery)) = Wal::open_from(disk.clone(), dir, options.clone(), start) else {
        return;
    };
    let _ = wal.read_from(recovery.start_lsn);
    let Ok(lsn) = wal.commit(b"appended after recovery", Durability::Sync) else {
        return;
    };
    assert!(
        lsn > recovery.end_lsn,
        "an appended record ends at or before the recovered end"
    );
    if wal.close().is_err() {
        return;
    }
    let Ok((wal, _)) = Wal::open_from(disk, dir, options, start) else {
        return;
    };
    if let Ok(records) = wal.read_from(recovery.end_lsn) {
        assert!(
            records
                .iter()
                .any(|r| r.end_lsn == lsn && r.payload == b"appended after recovery"),
            "a record acknowledged at Sync is missing after reopen"
        );
    }
}
