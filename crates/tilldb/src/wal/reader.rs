//! Reading the log: the recovery scan that finds where the log ends, and iteration over
//! records from an lsn.
//!
//! Recovery, as a table (one row per case), over a segment's bytes with its valid tail slots
//! laid over their home blocks first (`slot.rs`). The table is data: `reader/cases.rs`
//! (`CASES`, which the scan asks through `cases::decide`; its test checks that every input
//! matches exactly one row). "Vouched": a valid `Pad` later in the segment or its successors,
//! or a tail slot, carries a durable mark past the record that should be here
//! (`check_not_damaged`).
//!
//! | bytes at the expected lsn                  | vouched | decision                              |
//! |--------------------------------------------|---------|---------------------------------------|
//! | a valid `Data` record                      | -       | keep it; continue after it            |
//! | a valid `Pad` record                       | -       | skip it; continue after it            |
//! | a valid `SegmentEnd`                       | -       | continue at `base + capacity` in the next segment |
//! | zeros                                      | no      | end of log (never written)            |
//! | bad length, bad crc, truncated header      | no      | end of log (torn tail); report file and offset |
//! | valid crc but another lsn                  | no      | end of log (stale or misplaced); report it |
//! | valid crc but unknown kind / reserved bits | no      | end of log; report it                 |
//! | any of the four above                      | yes     | `Error::Corruption`: damaged after it was written |
//! | valid crc, but its tag fails (sealed)      | -       | `Error::Corruption`: changed on purpose |
//!
//! In a sealed segment (an encrypted database's, `segment.rs` version 3) a `Data` record is
//! opened with the segment's key when the reader has the database's keys; without them (a
//! tool checking only the framing) its payload is shown sealed.
//!
//! A segment whose header does not validate is free if it is newer than every valid segment
//! (its preparation was cut short: headers are flushed before use), and corruption otherwise.
//! A header with a matching checksum but another log version is refused wherever it lies.
//!
//! Where the log must begin and end, given the checkpoint's redo point `c` (the caller's
//! `start`; checked in `Wal::open_from` before anything is written):
//!
//! | the chain found                            | decision                                   |
//! |--------------------------------------------|--------------------------------------------|
//! | first segment's base <= `c` <= end of log  | redo from `c`                              |
//! | first segment's base > `c`                 | `Error::LogMissing`: lsns `c`..base lost (a segment removed); names the first segment present |
//! | log ends before `c`                        | `Error::Corruption` at the stop: records the data file depends on are gone |
//! | a gap between segments                     | `Error::Corruption` at the end of the segment before it |
//!
//! Segments are chained in generation order by lsn: the next segment is the first later one
//! whose header's `base_lsn` is the lsn where this one's records ended. Segments outside the
//! chain (an unused spare, an interrupted create or recycle) are free for reuse.
//!
//! Tools read the log through [`inspect_log`]: the same scan, shown record by record, with no
//! writer opened and nothing written.

use super::Lsn;
use super::record::{self, RecordFault, RecordKind, RecordRef};
use super::segment::SegmentHeader;
use super::slot;
use crate::FlushMethod;
use crate::crypt::{DatabaseKeys, RecordOpener};
use crate::error::{Error, Result};
use crate::io::Storage;
use std::convert::Infallible;
use std::path::{Path, PathBuf};

mod cases;
mod chain;
mod sealed;

pub(super) use sealed::{check_sealed, opener_of};

use cases::{Decision, Found};
use chain::{in_chain, read_headers, read_successor, successors_of, superseded};

/// One record read back from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalRecord {
    /// Where the record starts.
    pub lsn: Lsn,
    /// Where it ends: the lsn a commit of this record waited for.
    pub end_lsn: Lsn,
    /// The record's payload: one commit record (`record.rs`), without header or padding.
    pub payload: Vec<u8>,
}

/// One record as [`visit_records`] shows it: its payload borrowed from the segment being
/// read, so that a reader going through the log once (redo) copies nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalRecordRef<'a> {
    /// Where the record starts.
    pub lsn: Lsn,
    /// Where it ends.
    pub end_lsn: Lsn,
    /// The record's payload, as [`WalRecord::payload`].
    pub payload: &'a [u8],
}

impl WalRecord {
    /// This record as a visitor sees it.
    #[must_use]
    pub fn as_ref(&self) -> WalRecordRef<'_> {
        WalRecordRef {
            lsn: self.lsn,
            end_lsn: self.end_lsn,
            payload: &self.payload,
        }
    }
}

/// Where and why the recovery scan stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryStop {
    /// The segment file the scan stopped in.
    pub path: PathBuf,
    /// Where in that file the bytes that are not a valid record begin.
    pub offset: u64,
    /// The lsn a record at `offset` would have had: where the log ends.
    pub lsn: Lsn,
    /// Why the bytes there are not a valid record (`Zero`: never-written space, a clean end).
    pub fault: RecordFault,
}

/// What recovery found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Recovery {
    /// The first lsn still in the log.
    pub start_lsn: Lsn,
    /// The log ends here; new records are appended from here.
    pub end_lsn: Lsn,
    /// Data records in the log.
    pub records: u64,
    /// Segments in the chain.
    pub segments: usize,
    /// Where the scan stopped, unless the log is empty.
    pub stop: Option<RecoveryStop>,
    /// The highest durable mark in the chain (in its pads and tail slots): the log was
    /// durable to here before its last writes. Damage to a record that ends at or below it
    /// is refused as corruption; damage above it cannot be told from a torn tail.
    pub durable_mark: Lsn,
}

/// A segment of the chain and the lsn range of its valid records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChainSegment {
    pub header: SegmentHeader,
    pub path: PathBuf,
    /// Lsn after its last valid record (or after `SegmentEnd`: its base + capacity).
    pub end_lsn: u64,
}

/// The log as found on disk.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    pub chain: Vec<ChainSegment>,
    /// Generations of segments outside the chain, free for reuse.
    pub free: Vec<u64>,
    pub max_generation: u64,
    pub recovery: Recovery,
}

/// How scanning one segment ended.
enum SegmentEnd {
    /// A `SegmentEnd` record: the log goes on at this lsn in the next segment.
    Next(u64),
    /// The log ends inside this segment.
    Stop(RecoveryStop),
}

/// Reads a whole segment file, with its valid tail slots laid over their home blocks
/// (`slot.rs`: a slot repairs a block torn while it was rewritten, and changes no intact one).
pub(super) fn read_segment(
    storage: &dyn Storage,
    path: &Path,
    header: &SegmentHeader,
) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    read_segment_into(storage, path, header, &mut bytes)?;
    Ok(bytes)
}

/// [`read_segment`] into `bytes`, which a caller reading segment after segment keeps: a fresh
/// 64 MiB buffer per segment cost a page fault per 4 KiB on the read into it and an unmap
/// after (about a tenth of an open that replays 374 MiB of log, docs/benchmarks.md, "After a
/// large commit"). On return `bytes` holds exactly what the file holds: every byte below its
/// length was read from the file (a buffer left longer by an earlier segment is cut to what
/// this read returned).
fn read_segment_into(
    storage: &dyn Storage,
    path: &Path,
    header: &SegmentHeader,
    bytes: &mut Vec<u8>,
) -> Result<()> {
    let file = storage.open(path, FlushMethod::Fdatasync)?;
    let len = usize::try_from(file.len()?).expect("segments fit in memory");
    bytes.resize(len, 0);
    let n = file.read_at(bytes, 0)?;
    assert!(n <= len, "read {n} bytes into a buffer of {len}");
    bytes.truncate(n);
    slot::apply(bytes, header);
    Ok(())
}

/// Walks the records of one segment from `from` (an lsn in it), calling `visit` with the file
/// offset of each valid record (`Data`, `Pad`, and the closing `SegmentEnd`), until the log
/// leaves the segment or ends. A sealed `Data` record is opened with `opener` (its tag
/// failing stops the walk with `BadTag`), or shown sealed without one.
fn scan_segment(
    bytes: &[u8],
    header: &SegmentHeader,
    path: &Path,
    (from, opener): (u64, Option<&RecordOpener>),
    mut visit: impl FnMut(u64, RecordRef<'_>),
) -> SegmentEnd {
    let mut plain = Vec::new();
    let block = u64::from(header.log_block_bytes);
    let end = usize::try_from(block + header.capacity())
        .expect("segment fits usize")
        .min(bytes.len());
    let mut lsn = from;
    loop {
        let offset = block + (lsn - header.base_lsn);
        let at = usize::try_from(offset).expect("offset fits usize");
        let rest = if at <= end { &bytes[at..end] } else { &[][..] };
        let decoded = record::decode_in(rest, header.generation, lsn, header.seal.is_some());
        let readable = match (decoded, opener) {
            (Ok(rec), Some(opener)) if rec.sealed.is_some() => {
                record::open(rec, opener, &mut plain)
            }
            (decoded, _) => decoded,
        };
        let rec = match readable {
            Ok(rec) => rec,
            // The fault's rows depend on a later durable mark: the caller asks
            // (`check_not_damaged`).
            Err(fault) => {
                return SegmentEnd::Stop(RecoveryStop {
                    path: path.to_path_buf(),
                    offset,
                    lsn: Lsn(lsn),
                    fault,
                });
            }
        };
        let case = cases::decide(Found::Record(rec.kind), || -> Result<bool, Infallible> {
            unreachable!("a valid record's row does not depend on a later durable mark")
        });
        match case.map(|c| c.decision) {
            Ok(Decision::Keep | Decision::Skip) => {
                visit(offset, rec);
                lsn += rec.len as u64;
            }
            Ok(Decision::NextSegment) => {
                visit(offset, rec);
                return SegmentEnd::Next(header.base_lsn + header.capacity());
            }
            Ok(decision @ (Decision::End | Decision::Corrupt)) => {
                unreachable!("a valid {:?} record decided {decision:?}", rec.kind)
            }
        }
    }
}

/// Where the records of a segment stop at `stop`, decided by the table (`cases.rs`):
/// `Err(Corruption)` if a valid `Pad` later in the segment, or in one of its `successors` (the
/// segments the log would have gone on in, read one by one until a mark vouches), carries a
/// durable mark at or past the end of the record at `stop`: that record was durable, then
/// damaged. Else `Ok`: a torn or never-written tail.
fn check_not_damaged(
    storage: &dyn Storage,
    bytes: &[u8],
    header: &SegmentHeader,
    stop: &RecoveryStop,
    successors: &[(SegmentHeader, PathBuf)],
) -> Result<()> {
    let case = cases::decide(Found::Fault(stop.fault), || {
        vouched_past(storage, bytes, header, stop, successors)
    })?;
    match case.decision {
        Decision::End => Ok(()),
        Decision::Corrupt => Err(Error::Corruption {
            file: stop.path.clone(),
            offset: stop.offset,
            what: case.why,
        }),
        decision @ (Decision::Keep | Decision::Skip | Decision::NextSegment) => {
            unreachable!("no valid record ({:?}) decided {decision:?}", stop.fault)
        }
    }
}

/// Whether a durable mark later in the log vouches that the log was durable past the record
/// at `stop` (see [`check_not_damaged`]).
fn vouched_past(
    storage: &dyn Storage,
    bytes: &[u8],
    header: &SegmentHeader,
    stop: &RecoveryStop,
    successors: &[(SegmentHeader, PathBuf)],
) -> Result<bool> {
    if crate::mutants::active("mid-log-damage-is-end") {
        return Ok(false);
    }
    let under = |mark: Option<u64>| mark.is_some_and(|m| durable_under(bytes, header, stop, m));
    let mut vouched = under(highest_mark(bytes, header, stop.offset + 1));
    for (h, path) in successors {
        if vouched {
            break;
        }
        let later = read_successor(storage, h, path)?;
        vouched = under(highest_mark(&later, h, u64::from(h.log_block_bytes)));
    }
    Ok(vouched)
}

/// Whether the record at `stop` lay wholly before the durable mark `mark`, so that it was
/// durable and no later write touched it. A durable mark is a block boundary (the end of
/// the last block a write closed), and a record may cross one: then its part past the mark
/// was in a block still open, which the next write rewrote and a power cut may tear, and it
/// was never acknowledged (a `Sync` commit waits for its record's end). Its length comes
/// from its header when the header lies before the mark (durable, so what was written); a
/// header there with an impossible length is itself damaged under the mark. A header that
/// crosses the mark could be torn, so that record is not vouched for.
///
/// Worked example, 512-byte blocks: a record at file offset 912 of 232 bytes ends at 1144;
/// a mark at the boundary 1024 does not vouch for it, a mark at 1536 does.
fn durable_under(bytes: &[u8], header: &SegmentHeader, stop: &RecoveryStop, mark: u64) -> bool {
    let start = stop.lsn.0;
    if mark < start + record::HEADER_BYTES as u64 {
        return false;
    }
    // A valid record after it, in its place, that begins at or before the mark: the damaged
    // one ended before that, whatever its (possibly damaged) length field says.
    if valid_record_between(bytes, header, stop, mark) {
        return true;
    }
    let at = usize::try_from(stop.offset).expect("a segment offset fits usize");
    let len = bytes
        .get(at + 4..at + 8)
        .map(|b| u64::from(u32::from_le_bytes(b.try_into().expect("4 bytes"))));
    match len {
        Some(len)
            if len >= record::HEADER_BYTES as u64
                && len.is_multiple_of(record::ALIGN_BYTES as u64)
                && stop.offset + len <= header.segment_bytes =>
        {
            start + len <= mark
        }
        _ => true,
    }
}

/// Whether a valid record lies after the record at `stop`, in the place its lsn gives it,
/// beginning at or before lsn `until`.
fn valid_record_between(
    bytes: &[u8],
    header: &SegmentHeader,
    stop: &RecoveryStop,
    until: u64,
) -> bool {
    let block = u64::from(header.log_block_bytes);
    let end = (block + header.capacity()).min(bytes.len() as u64);
    let align = record::ALIGN_BYTES as u64;
    let mut offset = stop.offset + align;
    while offset + record::HEADER_BYTES as u64 <= end {
        let expected = header.base_lsn + (offset - block);
        if expected > until {
            return false;
        }
        let at = usize::try_from(offset).expect("a segment offset fits usize");
        // The lsn field first: cheap, and it rules out most bytes before a checksum.
        if bytes[at + 8..at + 16] == expected.to_le_bytes()
            && record::decode_in(
                &bytes[at..usize::try_from(end).expect("fits")],
                header.generation,
                expected,
                header.seal.is_some(),
            )
            .is_ok()
        {
            return true;
        }
        offset += align;
    }
    false
}

/// The highest durable mark of a valid `Pad` at or after file offset `from` of a segment, or
/// of a valid tail slot (`bytes`, possibly only its first part); `None` if there is none.
/// Groups start at block boundaries, so only those are tried, and each group found is walked
/// to its pad.
fn highest_mark(bytes: &[u8], header: &SegmentHeader, from: u64) -> Option<u64> {
    let block = u64::from(header.log_block_bytes);
    let end = (block + header.capacity()).min(bytes.len() as u64);
    let mut offset = from.next_multiple_of(block).max(block);
    let mut highest = slot::read(bytes, header)
        .into_iter()
        .map(|(_, s)| s.durable)
        .max();
    while offset < end {
        let mut at = offset;
        let mut expected = header.base_lsn + (offset - block);
        loop {
            let rest =
                &bytes[usize::try_from(at).expect("fits")..usize::try_from(end).expect("fits")];
            // The lsn field first: cheap, and it rules out stale records of a recycled
            // segment and bytes that are no record, before a checksum over them.
            if rest.get(8..16) != Some(&expected.to_le_bytes()[..]) {
                break;
            }
            let Ok(rec) =
                record::decode_in(rest, header.generation, expected, header.seal.is_some())
            else {
                break;
            };
            if rec.kind == RecordKind::Pad {
                highest = highest.max(Some(record::pad_durable_mark(rec.payload)));
            }
            if rec.kind != RecordKind::Data {
                break;
            }
            expected += rec.len as u64;
            at += rec.len as u64;
        }
        offset = (at / block + 1) * block;
    }
    highest
}

/// The first `len` bytes of a segment file (fewer if it is shorter).
fn read_prefix(storage: &dyn Storage, path: &Path, len: u64) -> Result<Vec<u8>> {
    let file = storage.open(path, FlushMethod::Fdatasync)?;
    let mut bytes = vec![0u8; usize::try_from(len.min(file.len()?)).expect("fits")];
    let n = file.read_at(&mut bytes, 0)?;
    bytes.truncate(n);
    Ok(bytes)
}

/// Reads the first block of a segment file (enough for its header), or less if shorter.
pub(super) fn read_header_block(storage: &dyn Storage, path: &Path) -> Result<Vec<u8>> {
    let file = storage.open(path, FlushMethod::Fdatasync)?;
    let mut bytes = vec![0u8; 4096];
    let n = file.read_at(&mut bytes, 0)?;
    bytes.truncate(n);
    Ok(bytes)
}

/// Reads every segment header in `dir` and follows the chain to the end of the log. With
/// `start` (a checkpoint: nothing before it is needed), the chain begins at the segment that
/// holds it: the newest valid segment whose base is at or before it (every segment made later
/// has a higher generation and a base at or past the log end of its time, so past `start`).
/// Older segments are free, and only headers of them are read.
pub(crate) fn scan(
    storage: &dyn Storage,
    dir: &Path,
    start: Option<Lsn>,
    keys: Option<&DatabaseKeys>,
) -> Result<Scan> {
    scan_visit(storage, dir, (start, keys), &mut |_| {})
}

/// [`scan`], showing `visit` each segment of the chain, each valid record in it and where its
/// records stop (see [`LogEvent`]).
pub(super) fn scan_visit(
    storage: &dyn Storage,
    dir: &Path,
    (start, keys): (Option<Lsn>, Option<&DatabaseKeys>),
    visit: &mut dyn FnMut(LogEvent<'_>),
) -> Result<Scan> {
    let mut scan = Scan::default();
    let (mut found, mut invalid_older) = read_headers(storage, dir, &mut scan)?;
    found.sort_by_key(|(g, _, _)| *g);
    if let Some(start) = start {
        let from = found
            .iter()
            .rposition(|(_, h, _)| h.base_lsn <= start.0)
            .unwrap_or(0);
        scan.free.extend(found.drain(..from).map(|(g, _, _)| g));
    }
    let Some((_, first, _)) = found.first() else {
        return Ok(scan);
    };
    let mut expected = first.base_lsn;
    scan.recovery.start_lsn = Lsn(expected);
    let superseded = superseded(&found);
    let segments = found.clone();
    let mut buffer = Vec::new();
    for (generation, header, path) in found {
        if header.base_lsn != expected {
            scan.free.push(generation);
            continue;
        }
        read_segment_into(storage, &path, &header, &mut buffer)?;
        let bytes = buffer.as_slice();
        if !in_chain(bytes, &header, &path, superseded.contains(&generation))? {
            scan.free.push(generation);
            continue;
        }
        check_sealed(keys, &header, &path)?;
        let mut records = 0u64;
        visit(LogEvent::Segment {
            path: &path,
            header: &header,
        });
        let mut mark = slot::read(bytes, &header)
            .iter()
            .map(|(_, s)| s.durable)
            .max()
            .unwrap_or(0);
        let opener = opener_of(keys, &header);
        // Every record of the chain is opened here, those before the checkpoint too, so a
        // record changed anywhere in it is reported; replay opens those it applies again.
        let from = (expected, opener.as_ref());
        let end = scan_segment(bytes, &header, &path, from, |offset, record| {
            match record.kind {
                RecordKind::Data => records += 1,
                RecordKind::Pad => mark = mark.max(record::pad_durable_mark(record.payload)),
                RecordKind::SegmentEnd => {}
            }
            visit(LogEvent::Record { offset, record });
        });
        scan.recovery.records += records;
        scan.recovery.durable_mark = scan.recovery.durable_mark.max(Lsn(mark));
        scan.recovery.segments += 1;
        let end_lsn = match end {
            SegmentEnd::Next(next) => {
                scan.recovery.stop = None;
                next
            }
            SegmentEnd::Stop(stop) => {
                let successors = successors_of(&segments, generation, &header, &stop);
                check_not_damaged(storage, bytes, &header, &stop, &successors)?;
                visit(LogEvent::Stop(&stop));
                let lsn = stop.lsn.0;
                scan.recovery.stop = Some(stop);
                lsn
            }
        };
        scan.chain.push(ChainSegment {
            header,
            path,
            end_lsn,
        });
        expected = end_lsn;
    }
    // A segment that ended with `SegmentEnd` has a successor on disk: the writer switches only
    // to a prepared spare whose header and name are durable. If none continues the log, a
    // segment is missing: refuse, rather than take what followed it for free space.
    if scan.recovery.stop.is_none()
        && let Some(last) = scan.chain.last()
    {
        if let Some((_, damaged)) = invalid_older.into_iter().next() {
            return Err(damaged);
        }
        return Err(Error::Corruption {
            file: last.path.clone(),
            offset: last.header.segment_bytes,
            what: "the log continues past this segment, but the next segment is missing",
        });
    }
    // Without a start (a checkpoint), the log begins at its oldest valid segment: an older
    // damaged one may have been its true beginning. With one, older segments are not needed.
    let first_chained = scan.chain.first().map_or(0, |c| c.header.generation);
    if start.is_none()
        && let Some(i) = invalid_older.iter().position(|(g, _)| *g < first_chained)
    {
        return Err(invalid_older.swap_remove(i).1);
    }
    scan.recovery.end_lsn = Lsn(expected);
    scan.free.extend(invalid_older.iter().map(|(g, _)| *g));
    scan.free.sort_unstable();
    Ok(scan)
}

/// Reads records of the segments in `chain` from `from` up to `limit` (exclusive).
pub(crate) fn read_records(
    storage: &dyn Storage,
    (chain, keys): (&[ChainSegment], Option<&DatabaseKeys>),
    from: Lsn,
    limit: Lsn,
) -> Result<Vec<WalRecord>> {
    let mut out = Vec::new();
    visit_records(storage, (chain, keys), from, limit, &mut |rec| {
        out.push(WalRecord {
            lsn: rec.lsn,
            end_lsn: rec.end_lsn,
            payload: rec.payload.to_vec(),
        });
        Ok(())
    })?;
    Ok(out)
}

/// [`read_records`], showing `visit` each `Data` record in log order, one segment in memory at
/// a time; the first error `visit` returns ends the read and is returned.
pub(crate) fn visit_records(
    storage: &dyn Storage,
    (chain, keys): (&[ChainSegment], Option<&DatabaseKeys>),
    from: Lsn,
    limit: Lsn,
    visit: &mut dyn FnMut(WalRecordRef<'_>) -> Result<()>,
) -> Result<()> {
    let mut failed = None;
    let mut lsn = from.0;
    let mut bytes = Vec::new();
    for seg in chain {
        let h = &seg.header;
        if lsn >= limit.0 {
            break;
        }
        if lsn < h.base_lsn || lsn >= seg.end_lsn {
            continue;
        }
        read_segment_into(storage, &seg.path, h, &mut bytes)?;
        let opener = opener_of(keys, h);
        if h.seal.is_some() && opener.is_none() {
            return Err(Error::InvalidOptions(format!(
                "{} is sealed (an encrypted database's log): it is read with the database's \
                 key, through Db::open",
                seg.path.display()
            )));
        }
        let end = scan_segment(&bytes, h, &seg.path, (lsn, opener.as_ref()), |_, rec| {
            if rec.kind == RecordKind::Data && rec.lsn < limit.0 && failed.is_none() {
                let shown = WalRecordRef {
                    lsn: Lsn(rec.lsn),
                    end_lsn: Lsn(rec.lsn + rec.len as u64),
                    payload: rec.payload,
                };
                if let Err(e) = visit(shown) {
                    failed = Some(e);
                }
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
        lsn = match end {
            SegmentEnd::Next(next) => next,
            SegmentEnd::Stop(stop) => {
                if stop.fault == RecordFault::BadTag {
                    return Err(Error::Corruption {
                        file: stop.path,
                        offset: stop.offset,
                        what: record::TAG_FAILED,
                    });
                }
                if stop.lsn.0 < limit.0.min(seg.end_lsn) {
                    return Err(Error::Corruption {
                        file: stop.path,
                        offset: stop.offset,
                        what: "log record that was valid at recovery no longer validates",
                    });
                }
                stop.lsn.0
            }
        };
    }
    Ok(())
}

/// What [`inspect_log`](super::inspect_log) shows its visitor, in log order.
#[derive(Debug, Clone, Copy)]
pub enum LogEvent<'a> {
    /// A segment joins the chain; its records follow.
    Segment {
        /// The segment file.
        path: &'a Path,
        /// Its decoded header.
        header: &'a SegmentHeader,
    },
    /// A valid record (`Data`, `Pad` or `SegmentEnd`) at `offset` in the current segment.
    Record {
        /// Where the record starts in the segment file.
        offset: u64,
        /// The record, borrowed from the segment's bytes.
        record: RecordRef<'a>,
    },
    /// The records of the current segment end here without a `SegmentEnd`; the fault says why
    /// (`Zero`: never-written space, a clean end). The chain goes on only if a later segment
    /// begins at this lsn: one made by a later open, which never reads what followed.
    Stop(&'a RecoveryStop),
}

#[cfg(test)]
mod tests;
