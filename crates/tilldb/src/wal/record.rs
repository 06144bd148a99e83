//! # Record format (log version 1)
//!
//! Little-endian. Records are 8-byte aligned and never cross a segment boundary.
//!
//! ```text
//! offset size field
//!      0    4 crc32c       over the segment generation (8 bytes, LE), then bytes 4..len
//!      4    4 len          header + payload + padding; a multiple of 8, at least 24
//!      8    8 lsn          position of this record in the log stream
//!     16    1 kind         1 Data · 2 SegmentEnd · 3 Pad
//!     17    3 zero         must be zero
//!     20    4 payload_len  payload bytes; len = round_up(24 + payload_len, 8)
//!     24    … payload, then zeros up to len
//! ```
//!
//! A record at position `p` of a segment is valid iff, in this order (see [`RecordFault`]):
//! 1. the segment has at least 24 bytes left at `p`, and `len` is a multiple of 8, at least 24
//!    and fits in the segment;
//! 2. the crc matches (it is seeded with the segment's generation, so stale records left in a
//!    recycled segment never validate, and neither do torn or zeroed bytes);
//! 3. `lsn` is the expected next lsn (catches a valid record in the wrong place);
//! 4. kind is known, the reserved bytes are zero, `payload_len` agrees with `len`.
//!
//! `Pad` fills the rest of a log block after a group write, so that no later write touches a
//! block holding acknowledged records (see `wal/mod.rs`); it is at least
//! [`PAD_MIN_BYTES`] long. Its payload is the *durable mark*, then zeros:
//!
//! ```text
//! payload offset size field
//!              0    8 durable   the lsn the log was durable to when the group was closed
//!                               (0: unknown; logs written before the mark existed)
//!              8    … zeros
//! ```
//!
//! Readers skip pads, except to tell a damaged record from a torn tail: a record that does not
//! validate, with a valid pad later in its segment (or a valid tail slot, which carries the
//! same mark: `slot.rs`) whose durable mark is at or past its end, was durable before it was
//! damaged, and recovery refuses the log instead of ending it there (`reader.rs`). A mark is
//! where the last flush ended (a block boundary, or with tail slots a record's end), which a
//! record can cross; such a record was partly in an open block, not durable, and its tear is a
//! torn tail. A torn tail has no such mark after it: every group written after a group that a
//! power cut could tear was closed before that group was durable.
//!
//! In a version 3 segment (an encrypted database's, `segment.rs`), a `Data` record's payload
//! is sealed (`crypt/log.rs`): ciphertext of `payload_len` bytes, then its 16-byte tag, then
//! the zeros; `len = round_up(24 + payload_len + 16, 8)`. The tag binds bytes 4..24 of the
//! header (length, lsn, kind, payload length) and is made under the segment's key with the
//! lsn as nonce. The crc covers the ciphertext, so a torn or stale record is still `BadCrc`;
//! a record whose crc matches but whose tag does not was changed on purpose: `BadTag`, always
//! corruption (`reader/cases.rs`). `Pad` and `SegmentEnd` records carry a tag as well, made
//! at their lsn over their header and their payload, which stays plain (a durable mark is no
//! secret, and recovery reads pads' marks before it knows a key): so no record can be turned
//! into another kind, or its mark changed, without the tag failing (a `Data` record turned
//! into a `Pad`, its crc made again, would otherwise be skipped, one commit lost in silence).
//!
//! `SegmentEnd` has no payload. It closes a segment: the log continues at the start of the next
//! segment, whose header names the lsn that follows the `SegmentEnd` record. Every segment keeps
//! room for one, so a segment always ends with one unless the log ended inside it.

use crate::checksum::crc32c_seeded;
use crate::crypt::{RecordOpener, RecordSealer, TAG_BYTES};
use std::fmt;

/// Bytes of the record header.
pub const HEADER_BYTES: usize = 24;
/// The smallest `Pad`: a header and the durable mark.
pub const PAD_MIN_BYTES: usize = HEADER_BYTES + size_of::<u64>();

/// The smallest `Pad` in a segment that seals (`sealed`): with its tag.
#[must_use]
pub fn pad_min_bytes(sealed: bool) -> usize {
    PAD_MIN_BYTES + if sealed { TAG_BYTES } else { 0 }
}

/// Bytes of a `SegmentEnd` record in a segment that seals (`sealed`): a header, and its tag.
#[must_use]
pub fn segment_end_bytes(sealed: bool) -> usize {
    data_record_len(0, sealed)
}
/// Record alignment within a segment.
pub const ALIGN_BYTES: usize = 8;
const CRC_OFFSET: usize = 0;
const LEN_OFFSET: usize = CRC_OFFSET + size_of::<u32>();
const LSN_OFFSET: usize = LEN_OFFSET + size_of::<u32>();
const KIND_OFFSET: usize = LSN_OFFSET + size_of::<u64>();
const RESERVED_OFFSET: usize = KIND_OFFSET + 1;
const PAYLOAD_LEN_OFFSET: usize = RESERVED_OFFSET + 3;
const _: () = assert!(PAYLOAD_LEN_OFFSET + size_of::<u32>() == HEADER_BYTES);
const _: () = assert!(HEADER_BYTES.is_multiple_of(ALIGN_BYTES));

/// What a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RecordKind {
    /// A record written by the layer above (a commit, a page image, a checkpoint).
    Data = 1,
    /// Closes a segment; the log continues in the next one.
    SegmentEnd = 2,
    /// Fills the rest of a block after a group write; skipped by readers.
    Pad = 3,
}

impl RecordKind {
    fn from_byte(b: u8) -> Option<RecordKind> {
        match b {
            1 => Some(RecordKind::Data),
            2 => Some(RecordKind::SegmentEnd),
            3 => Some(RecordKind::Pad),
            _ => None,
        }
    }
}

/// Bytes a record with `payload_len` bytes of payload occupies.
///
/// Worked example: a 100-byte payload takes 24 + 100 = 124 bytes, padded to 128.
#[must_use]
pub fn record_len(payload_len: usize) -> usize {
    (HEADER_BYTES + payload_len).next_multiple_of(ALIGN_BYTES)
}

/// Bytes a `Data` record with `payload_len` bytes of payload occupies in a segment that seals
/// (`sealed`): its tag after the payload.
#[must_use]
pub fn data_record_len(payload_len: usize, sealed: bool) -> usize {
    record_len(payload_len + if sealed { TAG_BYTES } else { 0 })
}

/// Encodes a record into the front of `target`, which must hold [`record_len`] bytes, and
/// returns that length. Padding bytes are written as zeros.
pub fn encode(
    target: &mut [u8],
    generation: u64,
    lsn: u64,
    kind: RecordKind,
    payload: &[u8],
) -> usize {
    encode_with(target, (generation, None), lsn, kind, payload.len(), |p| {
        p.copy_from_slice(payload);
    })
}

/// [`encode`] of a `Data` record in a segment that seals: its payload sealed by `sealer` (the
/// segment's, at this record's lsn), its tag after it.
pub fn encode_sealed(
    target: &mut [u8],
    generation: u64,
    lsn: u64,
    payload: &[u8],
    sealer: &RecordSealer,
) -> usize {
    encode_with(
        target,
        (generation, Some(sealer)),
        lsn,
        RecordKind::Data,
        payload.len(),
        |p| p.copy_from_slice(payload),
    )
}

/// Encodes a `Pad` record of `len` bytes (at least [`PAD_MIN_BYTES`], a multiple of 8)
/// carrying the durable mark `durable`, without building its payload elsewhere: it is
/// written once per group, on the commit path.
pub fn encode_pad(
    target: &mut [u8],
    (generation, sealer): (u64, Option<&RecordSealer>),
    lsn: u64,
    len: usize,
    durable: u64,
) {
    let tagged = sealer.is_some();
    assert!(
        len >= pad_min_bytes(tagged) && len.is_multiple_of(ALIGN_BYTES),
        "pad of {len} bytes"
    );
    let tag = if tagged { TAG_BYTES } else { 0 };
    let written = encode_with(
        target,
        (generation, sealer),
        lsn,
        RecordKind::Pad,
        len - HEADER_BYTES - tag,
        |p| {
            p[..8].copy_from_slice(&durable.to_le_bytes());
            p[8..].fill(0);
        },
    );
    assert_eq!(written, len);
}

/// Encodes a `SegmentEnd` record at `lsn` (its tag made by `sealer` in a segment that seals)
/// and returns its length, [`segment_end_bytes`].
pub fn encode_segment_end(
    target: &mut [u8],
    (generation, sealer): (u64, Option<&RecordSealer>),
    lsn: u64,
) -> usize {
    encode_with(
        target,
        (generation, sealer),
        lsn,
        RecordKind::SegmentEnd,
        0,
        |_| {},
    )
}

/// [`encode`] with the payload (`payload_len` bytes) written in place by `write_payload`, and
/// sealed when a sealer comes with the generation.
fn encode_with(
    target: &mut [u8],
    (generation, sealer): (u64, Option<&RecordSealer>),
    lsn: u64,
    kind: RecordKind,
    payload_len: usize,
    write_payload: impl FnOnce(&mut [u8]),
) -> usize {
    let len = data_record_len(payload_len, sealer.is_some());
    assert!(
        target.len() >= len,
        "record of {len} bytes does not fit in {}",
        target.len()
    );
    assert!(
        kind != RecordKind::SegmentEnd || payload_len == 0,
        "SegmentEnd has no payload"
    );
    let len_u32 = u32::try_from(len).expect("records are smaller than 4 GiB");
    let payload_len_u32 = u32::try_from(payload_len).expect("payload fits u32");
    let rec = &mut target[..len];
    rec[LEN_OFFSET..LSN_OFFSET].copy_from_slice(&len_u32.to_le_bytes());
    rec[LSN_OFFSET..KIND_OFFSET].copy_from_slice(&lsn.to_le_bytes());
    rec[KIND_OFFSET] = kind as u8;
    rec[RESERVED_OFFSET..PAYLOAD_LEN_OFFSET].fill(0);
    rec[PAYLOAD_LEN_OFFSET..HEADER_BYTES].copy_from_slice(&payload_len_u32.to_le_bytes());
    write_payload(&mut rec[HEADER_BYTES..HEADER_BYTES + payload_len]);
    let mut end = HEADER_BYTES + payload_len;
    if let Some(sealer) = sealer {
        let tag = if kind == RecordKind::Data {
            let (head, body) = rec.split_at_mut(HEADER_BYTES);
            sealer.seal(lsn, &head[LEN_OFFSET..], &mut body[..payload_len])
        } else {
            // Authenticated, not encrypted: the header and the plain payload.
            sealer.seal(lsn, &rec[LEN_OFFSET..end], &mut [])
        };
        rec[end..end + TAG_BYTES].copy_from_slice(&tag);
        end += TAG_BYTES;
    }
    rec[end..].fill(0);
    let crc = crc32c_seeded(generation, &[&rec[LEN_OFFSET..]]);
    rec[CRC_OFFSET..LEN_OFFSET].copy_from_slice(&crc.to_le_bytes());
    debug_assert!(decode_in(rec, generation, lsn, sealer.is_some()).is_ok());
    len
}

/// What a sealed record carries besides its payload: the bytes its tag binds, and the tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sealed<'a> {
    /// Header bytes 4..24 (length, lsn, kind, payload length); for a `Pad` or `SegmentEnd`,
    /// its plain payload after them.
    pub aad: &'a [u8],
    /// The tag after the payload.
    pub tag: &'a [u8; TAG_BYTES],
}

/// The record `rec` (of a sealed segment, decoded) with its payload in `plain`: a `Data`
/// record's opened by `opener`, the segment's, a `Pad`'s or `SegmentEnd`'s as it is, its tag
/// checked; `Err(BadTag)` when the tag does not match. A record that is not sealed comes back
/// as it is.
pub fn open<'p>(
    rec: RecordRef<'_>,
    opener: &RecordOpener,
    plain: &'p mut Vec<u8>,
) -> Result<RecordRef<'p>, RecordFault> {
    plain.clear();
    plain.extend_from_slice(rec.payload);
    let checked = match rec.sealed {
        None => Ok(()),
        Some(sealed) if rec.kind == RecordKind::Data => {
            opener.open(rec.lsn, sealed.aad, plain, sealed.tag)
        }
        Some(sealed) => opener.open(rec.lsn, sealed.aad, &mut [], sealed.tag),
    };
    if checked.is_err() && !crate::mutants::active("record-tag-unchecked") {
        return Err(RecordFault::BadTag);
    }
    Ok(RecordRef {
        payload: plain,
        sealed: None,
        ..rec
    })
}

/// A record that validated, borrowed from the segment bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// The record's position in the log stream: where it starts.
    pub lsn: u64,
    /// `Data`, `SegmentEnd` or `Pad`.
    pub kind: RecordKind,
    /// The `payload_len` bytes after the header, without the padding.
    pub payload: &'a [u8],
    /// Bytes the record occupies, padding included.
    pub len: usize,
    /// A record of a sealed segment, its tag not checked yet: a `Data` record's `payload` is
    /// ciphertext until [`open`]ed.
    pub sealed: Option<Sealed<'a>>,
}

/// The durable mark of a `Pad` record's payload (see the module doc); 0 if it has none.
#[must_use]
pub fn pad_durable_mark(payload: &[u8]) -> u64 {
    payload
        .get(..8)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

/// What a sealed record whose tag fails is, as `Error::Corruption` says it.
pub const TAG_FAILED: &str = "log record authentication failed: its checksum matches, so it \
                              was changed after it was written, not torn by a crash";

/// Why the bytes at a position are not a valid record. Recovery treats each the same way (the
/// log ends here) but reports which one it was, with the file and offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordFault {
    /// Fewer than 24 bytes left in the segment.
    Truncated,
    /// `len` is zero: never-written (zeroed) space, the normal end of a log.
    Zero,
    /// `len` is not a multiple of 8, below 24, or past the end of the segment.
    BadLen,
    /// The checksum does not match: a torn or partial write, stale bytes of a recycled
    /// segment, or corruption.
    BadCrc,
    /// A valid record, but not the one expected here.
    WrongLsn,
    /// Checksummed, yet the kind, reserved bytes or payload length are wrong: written by a
    /// newer or broken writer.
    BadHeader,
    /// Checksummed, but its tag does not match its sealed payload and header: changed on
    /// purpose after it was written (a crash never makes one). Always corruption.
    BadTag,
}

impl fmt::Display for RecordFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RecordFault::Truncated => "segment ends inside a record header",
            RecordFault::Zero => "zeroed (never written) space",
            RecordFault::BadLen => "record length is invalid",
            RecordFault::BadCrc => "record checksum mismatch (torn write, stale or corrupt bytes)",
            RecordFault::WrongLsn => "record has an unexpected lsn",
            RecordFault::BadHeader => "record header has an unknown kind or nonzero reserved bytes",
            RecordFault::BadTag => TAG_FAILED,
        })
    }
}

fn u32_at(bytes: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes(bytes[offset..offset + 4].try_into().expect("4 bytes"))
}

fn u64_at(bytes: &[u8], offset: usize) -> u64 {
    u64::from_le_bytes(bytes[offset..offset + 8].try_into().expect("8 bytes"))
}

/// Decodes the record at the front of `rest` (the segment bytes from this position to the end
/// of the segment), checking every rule above, in a segment that does not seal.
pub fn decode(
    rest: &[u8],
    generation: u64,
    expected_lsn: u64,
) -> Result<RecordRef<'_>, RecordFault> {
    decode_in(rest, generation, expected_lsn, false)
}

/// [`decode`] in a segment that seals its `Data` records (`sealed`): the record's payload is
/// ciphertext, with its tag in [`RecordRef::sealed`] (not checked here: [`open`]).
pub fn decode_in(
    rest: &[u8],
    generation: u64,
    expected_lsn: u64,
    sealed: bool,
) -> Result<RecordRef<'_>, RecordFault> {
    if rest.len() < HEADER_BYTES {
        return Err(RecordFault::Truncated);
    }
    let len = u32_at(rest, LEN_OFFSET) as usize;
    if len == 0 {
        return Err(RecordFault::Zero);
    }
    if len < HEADER_BYTES || !len.is_multiple_of(ALIGN_BYTES) || len > rest.len() {
        return Err(RecordFault::BadLen);
    }
    let rec = &rest[..len];
    if crc32c_seeded(generation, &[&rec[LEN_OFFSET..]]) != u32_at(rec, CRC_OFFSET) {
        return Err(RecordFault::BadCrc);
    }
    let lsn = u64_at(rec, LSN_OFFSET);
    if lsn != expected_lsn {
        return Err(RecordFault::WrongLsn);
    }
    let kind = RecordKind::from_byte(rec[KIND_OFFSET]).ok_or(RecordFault::BadHeader)?;
    let payload_len = u32_at(rec, PAYLOAD_LEN_OFFSET) as usize;
    let reserved_zero = rec[RESERVED_OFFSET..PAYLOAD_LEN_OFFSET]
        .iter()
        .all(|&b| b == 0);
    let tagged = sealed;
    if !reserved_zero
        || data_record_len(payload_len, tagged) != len
        || (kind == RecordKind::SegmentEnd && payload_len != 0)
    {
        return Err(RecordFault::BadHeader);
    }
    let payload_end = HEADER_BYTES + payload_len;
    Ok(RecordRef {
        lsn,
        kind,
        payload: &rec[HEADER_BYTES..payload_end],
        len,
        sealed: tagged.then(|| Sealed {
            // A `Data` record's tag binds its header; the others' their header and plain
            // payload, which lie after it.
            aad: if kind == RecordKind::Data {
                &rec[LEN_OFFSET..HEADER_BYTES]
            } else {
                &rec[LEN_OFFSET..payload_end]
            },
            tag: rec[payload_end..payload_end + TAG_BYTES]
                .try_into()
                .expect("16 bytes"),
        }),
    })
}

#[cfg(test)]
mod tests;
