//! [`inspect_log`]: the log read for tools (`till dump-log`, `till check`, `till stats`),
//! changing nothing: the chain as recovery follows it (`reader.rs`), every record in it, and
//! every segment file of the directory with its role (in the chain, released, a spare, or a
//! creation, recycling or preparation a crash interrupted).

use super::Lsn;
use super::reader::{LogEvent, Recovery, read_header_block, read_segment, scan_visit};
use super::record;
use super::segment::{HeaderState, SegmentHeader, parse_segment_name};
use crate::FlushMethod;
use crate::error::{Error, Result};
use crate::io::Storage;
use std::path::{Path, PathBuf};

/// Why a segment file is, or is not, part of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentRole {
    /// In the chain: its records run from its header's base to `end_lsn`.
    Chain {
        /// The lsn after its last valid record (its base plus capacity when it closes with a
        /// `SegmentEnd`).
        end_lsn: Lsn,
    },
    /// A valid header outside the chain: a segment released before the log's start, or a
    /// prepared spare. `holds_records`: a valid record sits at its base, so it was written to
    /// (a released segment always; a spare never, unless a crash kept its records and lost
    /// the end of the segment before it).
    Unchained {
        /// True when a valid record sits at the segment's base.
        holds_records: bool,
    },
    /// All zeros: its creation was interrupted.
    Unwritten,
    /// A valid header naming generation `header_generation`: its recycling was interrupted.
    Recycling {
        /// The generation its header names, not the one in its file name.
        header_generation: u64,
    },
    /// A header that does not decode, in a segment newer than every valid one: its
    /// preparation was interrupted. `offset` and `what` say what is wrong with it.
    Torn {
        /// Where in the file the header fails to decode.
        offset: u64,
        /// What is wrong there.
        what: &'static str,
    },
}

/// A segment file of the log directory, as [`inspect_log`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentFile {
    /// The segment file.
    pub path: PathBuf,
    /// The generation the file's name stands for.
    pub generation: u64,
    /// The file's length.
    pub file_bytes: u64,
    /// Its header, when that is valid and names the file's generation.
    pub header: Option<SegmentHeader>,
    /// Whether the file is part of the log, and if not, why.
    pub role: SegmentRole,
}

/// What [`inspect_log`] found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LogInspection {
    /// Every segment file in the directory, in generation order.
    pub segments: Vec<SegmentFile>,
    /// The chain as recovery from `start` follows it: where the log starts, ends and why.
    pub recovery: Recovery,
}

/// Reads the log in `dir` without changing anything, for tools (`till dump-log`, `till
/// check`, `till stats`): no writer is opened, no segment is prepared, nothing is written.
///
/// The chain is followed exactly as [`super::Wal::open_from`] does from `start` (`None`: from
/// the oldest valid segment), and `visit` is shown each of its segments, every valid record in
/// them and where each segment's records stop. Then every segment file is listed with its
/// role. Bytes that recovery would refuse (a damaged header of a segment the log needs, a
/// segment shorter than its header says, a missing segment) are the same
/// [`Error::Corruption`], naming the file and offset; events already shown stay valid.
///
/// The records of a sealed log (an encrypted database's) are shown as they lie, their
/// payloads sealed: [`inspect_log_with`] opens them with the database's keys.
pub fn inspect_log(
    storage: &dyn Storage,
    dir: &Path,
    start: Option<Lsn>,
    visit: impl FnMut(LogEvent<'_>),
) -> Result<LogInspection> {
    inspect_log_with(storage, dir, (start, None), visit)
}

/// [`inspect_log`] with an encrypted database's `keys`: every record of a sealed segment is
/// opened (a tag that fails is `Corruption` naming the segment and offset, as at recovery),
/// and shown with its plain payload; a plain segment in the chain is refused.
pub fn inspect_log_with(
    storage: &dyn Storage,
    dir: &Path,
    (start, keys): (Option<Lsn>, Option<&crate::crypt::DatabaseKeys>),
    mut visit: impl FnMut(LogEvent<'_>),
) -> Result<LogInspection> {
    let scan = scan_visit(storage, dir, (start, keys), &mut visit)?;
    let mut segments = Vec::new();
    for name in storage.list_dir(dir)? {
        let Some(generation) = parse_segment_name(&name) else {
            continue;
        };
        let path = dir.join(&name);
        let file_bytes = storage.open(&path, FlushMethod::Fdatasync)?.len()?;
        let (header, role) = match scan
            .chain
            .iter()
            .find(|s| s.header.generation == generation)
        {
            Some(segment) => (
                Some(segment.header),
                SegmentRole::Chain {
                    end_lsn: Lsn(segment.end_lsn),
                },
            ),
            None => unchained_role(storage, &path, generation)?,
        };
        segments.push(SegmentFile {
            path,
            generation,
            file_bytes,
            header,
            role,
        });
    }
    segments.sort_by_key(|s| s.generation);
    assert!(
        segments
            .iter()
            .filter(|s| matches!(s.role, SegmentRole::Chain { .. }))
            .count()
            == scan.recovery.segments,
        "every segment of the chain is listed once"
    );
    Ok(LogInspection {
        segments,
        recovery: scan.recovery,
    })
}

/// The header and role of a segment file outside the chain.
fn unchained_role(
    storage: &dyn Storage,
    path: &Path,
    generation: u64,
) -> Result<(Option<SegmentHeader>, SegmentRole)> {
    Ok(
        match SegmentHeader::decode(&read_header_block(storage, path)?, path) {
            Ok(HeaderState::Valid(h)) if h.generation == generation => {
                let holds_records = first_record_is_valid(storage, path, &h)?;
                (Some(h), SegmentRole::Unchained { holds_records })
            }
            Ok(HeaderState::Valid(h)) => (
                None,
                SegmentRole::Recycling {
                    header_generation: h.generation,
                },
            ),
            Ok(HeaderState::Zero) => (None, SegmentRole::Unwritten),
            // `scan` accepted it, so it is newer than every valid segment.
            Err(Error::Corruption { offset, what, .. }) => {
                (None, SegmentRole::Torn { offset, what })
            }
            Err(e) => return Err(e),
        },
    )
}

/// Whether a valid record sits at the base of the segment `header` describes. Reads the first
/// 64 KiB after the header block, and the whole segment (with its tail slots) only for a
/// longer first record, or one not at home.
fn first_record_is_valid(
    storage: &dyn Storage,
    path: &Path,
    header: &SegmentHeader,
) -> Result<bool> {
    const FIRST_READ_BYTES: usize = 64 << 10;
    let file = storage.open(path, FlushMethod::Fdatasync)?;
    let mut bytes = vec![0u8; FIRST_READ_BYTES];
    let n = file.read_at(&mut bytes, u64::from(header.log_block_bytes))?;
    bytes.truncate(n);
    let sealed = header.seal.is_some();
    let decoded = record::decode_in(&bytes, header.generation, header.base_lsn, sealed);
    // A longer first record, or a first block whose bytes are only in a tail slot.
    if decoded.is_err() && (header.slots() > 0 || n == FIRST_READ_BYTES) {
        let whole = read_segment(storage, path, header)?;
        let at = usize::try_from(header.log_block_bytes).expect("u32 fits usize");
        let rest = whole.get(at..).unwrap_or_default();
        return Ok(record::decode_in(rest, header.generation, header.base_lsn, sealed).is_ok());
    }
    Ok(decoded.is_ok())
}
