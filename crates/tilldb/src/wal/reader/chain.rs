//! Which segments form the log's chain: every segment header read, the ones set aside (free,
//! superseded, damaged but unneeded), and the segment a `SegmentEnd` leads to (see the chain
//! rules at the top of `reader.rs`, whose scan uses these).

use super::{RecoveryStop, Scan, read_header_block, read_prefix};
use crate::error::{Error, Result};
use crate::io::Storage;
use crate::wal::segment::{HeaderState, SegmentHeader, parse_segment_name};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Generations that a newer valid segment with the same base supersedes: the spare of a
/// failed preparation (its flush failed), whose place the writer gave to the next generation.
/// Its header can land in a power cut without its zeros, leaving it short. Only a short one
/// is set aside: a full-length one with the same base can be a real segment the chain
/// passes through (an empty segment recovery left, before the one opened after it).
pub(super) fn superseded(found: &[(u64, SegmentHeader, PathBuf)]) -> Vec<u64> {
    found
        .iter()
        .filter(|(g, h, _)| {
            found
                .iter()
                .any(|(g2, h2, _)| g2 > g && h2.base_lsn == h.base_lsn)
        })
        .map(|(g, _, _)| *g)
        .collect()
}

/// Whether a segment whose header continues the chain (`bytes` its whole file) is in it: one
/// shorter than its header says is corruption, unless it is `superseded` (a short spare of a
/// failed preparation, which holds nothing).
pub(super) fn in_chain(
    bytes: &[u8],
    header: &SegmentHeader,
    path: &Path,
    superseded: bool,
) -> Result<bool> {
    if bytes.len() as u64 == header.segment_bytes {
        return Ok(true);
    }
    if superseded {
        return Ok(false);
    }
    Err(Error::Corruption {
        file: path.to_path_buf(),
        offset: bytes.len() as u64,
        what: "log segment is shorter than its header says",
    })
}

/// The segments the log would have gone on in after `header`'s: the one its `SegmentEnd`
/// would have led to, the one that one's would have, and so on (each newer than the one
/// before), for the durable marks of their groups. Empty when there is none, or when a newer
/// segment starts where this one stops: an open accepted this end before and went on from it
/// (an empty tail segment recovery left, or a torn tail), so later segments belong to that
/// later life (the random tier's seed 1028). Read lazily by the caller: a commit logged in
/// parts writes whole blocks, without a durable mark, for as many segments as it fills, so
/// the mark that vouches for a record before it may be several segments on.
pub(super) fn successors_of(
    segments: &[(u64, SegmentHeader, PathBuf)],
    generation: u64,
    header: &SegmentHeader,
    stop: &RecoveryStop,
) -> Vec<(SegmentHeader, PathBuf)> {
    let went_on = segments
        .iter()
        .any(|(g, h, _)| *g > generation && h.base_lsn == stop.lsn.0);
    if went_on {
        return Vec::new();
    }
    // Newest last, so the newest segment with that base wins.
    let by_base: BTreeMap<u64, &(u64, SegmentHeader, PathBuf)> =
        segments.iter().map(|s| (s.1.base_lsn, s)).collect();
    let mut found = Vec::new();
    let (mut previous, mut next_base) = (generation, header.base_lsn + header.capacity());
    while let Some((g, h, path)) = by_base.get(&next_base) {
        if *g <= previous {
            break;
        }
        found.push((*h, path.clone()));
        previous = *g;
        next_base = h.base_lsn + h.capacity();
    }
    found
}

/// A successor's bytes, for its marks: all of it (its slots are at its end).
pub(super) fn read_successor(
    storage: &dyn Storage,
    header: &SegmentHeader,
    path: &Path,
) -> Result<Vec<u8>> {
    read_prefix(storage, path, header.segment_bytes)
}

/// Reads every segment header in `dir`: the valid segments (generation, header, path), and
/// the older segments whose header does not validate, with the error. Zeroed, recycled and
/// newest-invalid segments go to `scan.free`; `scan.max_generation` is set.
///
/// A header that does not validate belongs to a segment whose preparation a crash cut short,
/// if it is newer than every valid segment: a header is flushed before its segment is used.
/// An older one is a preparation that failed (its flush, say), whose place a newer segment
/// took, unless the chain needs it: then the chain has a gap below, and this header's damage
/// is the error reported (`scan_visit`).
#[allow(clippy::type_complexity)]
pub(super) fn read_headers(
    storage: &dyn Storage,
    dir: &Path,
    scan: &mut Scan,
) -> Result<(Vec<(u64, SegmentHeader, PathBuf)>, Vec<(u64, Error)>)> {
    let mut found = Vec::new();
    let mut invalid = Vec::new();
    for name in storage.list_dir(dir)? {
        let Some(generation) = parse_segment_name(&name) else {
            continue;
        };
        scan.max_generation = scan.max_generation.max(generation);
        let path = dir.join(&name);
        let bytes = match read_header_block(storage, &path) {
            Ok(bytes) => bytes,
            // Gone since the listing: recycled or removed by a writer that opened meanwhile
            // (a read-only handle scans a log nobody holds): a free segment, not there.
            Err(e) if e.raw_os_error() == Some(crate::io::errno::ENOENT) => continue,
            Err(e) => return Err(e),
        };
        match SegmentHeader::decode(&bytes, &path) {
            Ok(HeaderState::Valid(h)) if h.generation == generation => {
                found.push((generation, h, path));
            }
            // An interrupted create (zeros) or recycle (the old generation's header).
            Ok(HeaderState::Zero | HeaderState::Valid(_)) => scan.free.push(generation),
            // A whole, checksummed header of another log version: no crash writes one, and
            // taking the segment as free would read a newer tilldb's log as missing.
            Err(e @ Error::Corruption { offset, .. })
                if offset == crate::wal::segment::VERSION_OFFSET as u64 =>
            {
                return Err(e);
            }
            Err(e) => invalid.push((generation, e)),
        }
    }
    let newest_valid = found.iter().map(|(g, _, _)| *g).max().unwrap_or(0);
    let mut invalid_older = Vec::new();
    for (generation, error) in invalid {
        if generation > newest_valid {
            scan.free.push(generation);
        } else {
            invalid_older.push((generation, error));
        }
    }
    Ok((found, invalid_older))
}
