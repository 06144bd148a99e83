//! Shared by the fuzz targets (`fuzz_targets/`) and the seed-corpus generator
//! (`examples/gen_corpus.rs`): a reader of fuzz input, checksum helpers that let a target make
//! a checksum match (so libFuzzer reaches the checks behind it), and the small database that
//! `open_files` damages.
//!
//! Every target's input format is written at the top of its file; the generator writes seeds
//! in the same formats from a real database's files.

pub mod base;
pub mod guard;

/// Reads fields from the front of a fuzz input. Past the end, every field reads as zeros and
/// every slice as empty, so any input is a valid one.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    bytes: &'a [u8],
}

impl<'a> Input<'a> {
    #[must_use]
    pub fn new(bytes: &'a [u8]) -> Self {
        Input { bytes }
    }

    /// Up to `len` bytes.
    pub fn take(&mut self, len: usize) -> &'a [u8] {
        let (head, tail) = self.bytes.split_at(len.min(self.bytes.len()));
        self.bytes = tail;
        head
    }

    /// Exactly `N` bytes, zero-padded.
    pub fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        let head = self.take(N);
        out[..head.len()].copy_from_slice(head);
        out
    }

    pub fn u8(&mut self) -> u8 {
        self.array::<1>()[0]
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.array())
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.array())
    }

    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.array())
    }

    /// Everything left.
    #[must_use]
    pub fn rest(self) -> &'a [u8] {
        self.bytes
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// CRC32C, as tilldb computes it (`checksum.rs`).
#[must_use]
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(bytes)
}

/// CRC32C of `seed` (little-endian) then `bytes`, as tilldb's `crc32c_seeded`.
#[must_use]
pub fn crc32c_seeded(seed: u64, bytes: &[u8]) -> u32 {
    let mut joined = Vec::with_capacity(8 + bytes.len());
    joined.extend_from_slice(&seed.to_le_bytes());
    joined.extend_from_slice(bytes);
    crc32c(&joined)
}

/// Log record header bytes (`wal/record.rs`).
pub const RECORD_HEADER_BYTES: usize = 24;
/// Log segment header bytes that carry fields (`wal/segment.rs`); its crc is at 40.
pub const SEGMENT_HEADER_BYTES: usize = 44;
/// Page header bytes (`page/mod.rs`).
pub const PAGE_HEADER_BYTES: usize = 24;

/// Makes the record at the front of `rest` validate in a segment of `generation` at `lsn`:
/// rewrites its `len`, unless it is already plausible, to one derived from it (a multiple of
/// 8, at least 24, inside `rest`), its `lsn`, and its crc. Kind, reserved bytes and payload length
/// stay as the fuzzer chose them. Returns the record's length, or `None` when `rest` is too
/// short for any record.
pub fn seal_record(rest: &mut [u8], generation: u64, lsn: u64) -> Option<usize> {
    if rest.len() < RECORD_HEADER_BYTES {
        return None;
    }
    let raw = u32::from_le_bytes(rest[4..8].try_into().expect("4 bytes")) as usize;
    let len = if raw >= RECORD_HEADER_BYTES && raw.is_multiple_of(8) && raw <= rest.len() {
        raw
    } else {
        let span = (rest.len() - RECORD_HEADER_BYTES) / 8 + 1;
        RECORD_HEADER_BYTES + (raw % span) * 8
    };
    rest[4..8].copy_from_slice(&u32::try_from(len).expect("small").to_le_bytes());
    rest[8..16].copy_from_slice(&lsn.to_le_bytes());
    let crc = crc32c_seeded(generation, &rest[4..len]);
    rest[0..4].copy_from_slice(&crc.to_le_bytes());
    Some(len)
}

/// Seals records one after another from the front of `area` (the records part of a segment
/// whose first lsn is `base_lsn`), up to `count` of them or to a `SegmentEnd` (kind 2), so the
/// fuzzer controls a chain of records that all pass their checksums. Returns the offsets.
pub fn seal_records(area: &mut [u8], generation: u64, base_lsn: u64, count: usize) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut at = 0;
    while offsets.len() < count {
        let Some(len) = seal_record(
            &mut area[at..],
            generation,
            base_lsn.wrapping_add(at as u64),
        ) else {
            break;
        };
        offsets.push(at);
        let kind = area[at + 16];
        at += len;
        if kind == 2 {
            break;
        }
    }
    offsets
}

/// Sets the crc of a log segment header (bytes 0..44 of its first block).
pub fn seal_segment_header(block: &mut [u8]) {
    if block.len() >= SEGMENT_HEADER_BYTES {
        let crc = crc32c(&block[..40]);
        block[40..44].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Bytes of an encrypted database's segment header (version 3, `wal/segment.rs`).
pub const SEALED_SEGMENT_HEADER_BYTES: usize = 64;

/// Makes `block` a version 3 segment header's bytes with a matching crc (at 60, over 0..60).
pub fn seal_segment_header_v3(block: &mut [u8]) {
    if block.len() >= SEALED_SEGMENT_HEADER_BYTES {
        block[8..12].copy_from_slice(&3u32.to_le_bytes());
        let crc = crc32c(&block[..60]);
        block[60..64].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Sets the crc of header slot `slot` (4096 bytes; crc at 4092, seeded with the slot index).
pub fn seal_header_slot(slot_bytes: &mut [u8], slot: usize) {
    let end = slot_bytes.len() - 4;
    let crc = crc32c_seeded(slot as u64, &slot_bytes[..end]);
    slot_bytes[end..].copy_from_slice(&crc.to_le_bytes());
}

/// Sets the crc of a page read as page `id` (crc at 0, over bytes 4.., seeded with the id).
pub fn seal_page(page: &mut [u8], id: u64) {
    if page.len() >= PAGE_HEADER_BYTES {
        let crc = crc32c_seeded(id, &page[4..]);
        page[0..4].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Sets the crc of a doublewrite batch header block (crc32c over 0..4092, at 4092).
pub fn seal_batch_header(block: &mut [u8]) {
    if block.len() >= 4096 {
        let crc = crc32c(&block[..4092]);
        block[4092..4096].copy_from_slice(&crc.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_records_decode() {
        let mut area = vec![0u8; 256];
        area[4] = 5; // len 24 + 5 * 8 = 64
        area[16] = 1; // Data
        area[20] = 40; // payload_len
        let offsets = seal_records(&mut area, 7, 4096, 1);
        assert_eq!(offsets, vec![0]);
        let rec = tilldb::internals::wal::record::decode(&area, 7, 4096).expect("sealed");
        assert_eq!(rec.len, 64);
    }
}
