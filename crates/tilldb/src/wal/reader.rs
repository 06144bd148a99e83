//! Reading the log: the recovery scan that finds where the log ends, and iteration over
//! records from an lsn.
//!
//! Recovery, as a table (one row per case; `scan_segment` implements it):
//!
//! | bytes at the expected lsn                 | decision                                        |
//! |-------------------------------------------|-------------------------------------------------|
//! | a valid `Data` record                     | keep it; continue after it                      |
//! | a valid `Pad` record                      | skip it; continue after it                      |
//! | a valid `SegmentEnd`                      | continue at `base + capacity` in the next segment |
//! | zeros                                     | end of log (never written)                      |
//! | bad length, bad crc, truncated header     | end of log (torn tail); report file and offset  |
//! | valid crc but another lsn                 | end of log (stale or misplaced); report it      |
//! | valid crc but unknown kind / reserved bits | end of log; report it                          |
//!
//! A segment whose header does not validate is free if it is newer than every valid segment
//! (its preparation was cut short: headers are flushed before use), and corruption otherwise.
//!
//! Segments are chained in generation order by lsn: the next segment is the first later one
//! whose header's `base_lsn` is the lsn where this one's records ended. Segments outside the
//! chain (an unused spare, an interrupted create or recycle) are free for reuse.

use super::Lsn;
use super::record::{self, RecordFault, RecordKind};
use super::segment::{HeaderState, SegmentHeader, parse_segment_name};
use crate::FlushMethod;
use crate::error::{Error, Result};
use crate::io::Storage;
use std::path::{Path, PathBuf};

/// One record read back from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalRecord {
    /// Where the record starts.
    pub lsn: Lsn,
    /// Where it ends: the lsn a commit of this record waited for.
    pub end_lsn: Lsn,
    pub payload: Vec<u8>,
}

/// Where and why the recovery scan stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryStop {
    pub path: PathBuf,
    pub offset: u64,
    pub lsn: Lsn,
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

/// Reads a whole segment file.
fn read_segment(storage: &dyn Storage, path: &Path) -> Result<Vec<u8>> {
    let file = storage.open(path, FlushMethod::Fdatasync)?;
    let len = usize::try_from(file.len()?).expect("segments fit in memory");
    let mut bytes = vec![0u8; len];
    let n = file.read_at(&mut bytes, 0)?;
    bytes.truncate(n);
    Ok(bytes)
}

/// Walks the records of one segment from `from` (an lsn in it), calling `visit` for each valid
/// `Data` record, until the log leaves the segment or ends.
fn scan_segment(
    bytes: &[u8],
    header: &SegmentHeader,
    path: &Path,
    from: u64,
    mut visit: impl FnMut(u64, &[u8], usize),
) -> SegmentEnd {
    let block = u64::from(header.log_block_bytes);
    let end = usize::try_from(header.segment_bytes)
        .expect("segment fits usize")
        .min(bytes.len());
    let mut lsn = from;
    loop {
        let offset = block + (lsn - header.base_lsn);
        let at = usize::try_from(offset).expect("offset fits usize");
        let rest = if at <= end { &bytes[at..end] } else { &[][..] };
        match record::decode(rest, header.generation, lsn) {
            Ok(rec) if rec.kind == RecordKind::SegmentEnd => {
                return SegmentEnd::Next(header.base_lsn + header.capacity());
            }
            Ok(rec) => {
                if rec.kind == RecordKind::Data {
                    visit(lsn, rec.payload, rec.len);
                }
                lsn += rec.len as u64;
            }
            Err(fault) => {
                return SegmentEnd::Stop(RecoveryStop {
                    path: path.to_path_buf(),
                    offset,
                    lsn: Lsn(lsn),
                    fault,
                });
            }
        }
    }
}

/// Reads every segment header in `dir` and follows the chain to the end of the log.
/// Reads the first block of a segment file (enough for its header), or less if shorter.
fn read_header_block(storage: &dyn Storage, path: &Path) -> Result<Vec<u8>> {
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
pub(crate) fn scan(storage: &dyn Storage, dir: &Path, start: Option<Lsn>) -> Result<Scan> {
    let mut found: Vec<(u64, SegmentHeader, PathBuf)> = Vec::new();
    let mut invalid: Vec<(u64, Error)> = Vec::new();
    let mut scan = Scan::default();
    for name in storage.list_dir(dir)? {
        let Some(generation) = parse_segment_name(&name) else {
            continue;
        };
        scan.max_generation = scan.max_generation.max(generation);
        let path = dir.join(&name);
        let bytes = read_header_block(storage, &path)?;
        match SegmentHeader::decode(&bytes, &path) {
            Ok(HeaderState::Valid(h)) if h.generation == generation => {
                found.push((generation, h, path));
            }
            // An interrupted create (zeros) or recycle (the old generation's header).
            Ok(HeaderState::Zero | HeaderState::Valid(_)) => scan.free.push(generation),
            // Judged below, against the log's newest segment.
            Err(e) => invalid.push((generation, e)),
        }
    }
    // A header that does not validate belongs to a segment whose preparation a crash cut
    // short, if it is newer than every valid segment: a header is flushed before its segment
    // is used. Anywhere else it is corruption of the log.
    let newest_valid = found.iter().map(|(g, _, _)| *g).max().unwrap_or(0);
    for (generation, error) in invalid {
        if generation > newest_valid {
            scan.free.push(generation);
        } else {
            return Err(error);
        }
    }
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
    for (generation, header, path) in found {
        if header.base_lsn != expected {
            scan.free.push(generation);
            continue;
        }
        let bytes = read_segment(storage, &path)?;
        if bytes.len() as u64 != header.segment_bytes {
            return Err(Error::Corruption {
                file: path,
                offset: bytes.len() as u64,
                what: "log segment is shorter than its header says",
            });
        }
        let mut records = 0u64;
        let end = scan_segment(&bytes, &header, &path, expected, |_, _, _| records += 1);
        scan.recovery.records += records;
        scan.recovery.segments += 1;
        let end_lsn = match end {
            SegmentEnd::Next(next) => {
                scan.recovery.stop = None;
                next
            }
            SegmentEnd::Stop(stop) => {
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
        return Err(Error::Corruption {
            file: last.path.clone(),
            offset: last.header.segment_bytes,
            what: "the log continues past this segment, but the next segment is missing",
        });
    }
    scan.recovery.end_lsn = Lsn(expected);
    scan.free.sort_unstable();
    Ok(scan)
}

/// Reads records of the segments in `chain` from `from` up to `limit` (exclusive).
pub(crate) fn read_records(
    storage: &dyn Storage,
    chain: &[ChainSegment],
    from: Lsn,
    limit: Lsn,
) -> Result<Vec<WalRecord>> {
    let mut out = Vec::new();
    let mut lsn = from.0;
    for seg in chain {
        let h = &seg.header;
        if lsn >= limit.0 {
            break;
        }
        if lsn < h.base_lsn || lsn >= seg.end_lsn {
            continue;
        }
        let bytes = read_segment(storage, &seg.path)?;
        let end = scan_segment(&bytes, h, &seg.path, lsn, |at, payload, len| {
            if at < limit.0 {
                out.push(WalRecord {
                    lsn: Lsn(at),
                    end_lsn: Lsn(at + len as u64),
                    payload: payload.to_vec(),
                });
            }
        });
        lsn = match end {
            SegmentEnd::Next(next) => next,
            SegmentEnd::Stop(stop) => {
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
    Ok(out)
}
