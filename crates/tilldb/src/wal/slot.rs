//! # Tail slots (log version 2)
//!
//! A group's last log block is usually partly filled, and the next group writes it again with
//! the same leading bytes plus new records. A power cut during that rewrite can leave garbage
//! in the sectors being written (TESTPLAN F2), and so destroy commits already acknowledged in
//! that block. Padding every group to a fresh block avoids the rewrite but costs a whole block
//! per lone commit (4 KiB for a 115-byte commit). Tail slots keep the log dense and still never
//! leave an acknowledged commit in only one copy while a write runs:
//!
//! - A version 2 segment ends with two slot blocks, at file offsets `segment_bytes - 2 *
//!   block` (slot 0) and `segment_bytes - block` (slot 1), outside the lsn space.
//! - A *closing* write (one a flush will cover) whose last block is partly filled writes that
//!   block to a slot instead of its home: the slot that does not hold the newest copy a
//!   completed flush made durable. A block's home is written when the block is full (or left
//!   open by a write made while a flush runs, which acknowledges nothing in it). So a lone
//!   commit costs one block write, and while any write touches the tail block's home or a
//!   slot, the other slot holds a durable copy of every acknowledged record in that block.
//! - A full home block is never written again. So a reader of a live log that reads the
//!   slots first and the home bytes after finds every durable byte in one or the other
//!   ([`read_from`]).
//! - Slot writes never overlap a flush: a closing write starts only while no flush runs, and
//!   a flush does not start while a slot write runs (`group_commit.rs`). So a completed flush
//!   makes durable exactly the slot writes that completed before it started.
//!
//! Recovery applies every valid slot of the segment's generation to the segment's bytes
//! before it reads records ([`apply`]): a slot holds the log stream's own bytes for its lsns,
//! and within one generation each lsn is written with one content only (after a crash the log
//! continues in a new segment, so a new generation), so a slot can only repair a torn home
//! block, never change an intact one.
//!
//! ```text
//! slot offset   size  field
//!           0   used  the log block's bytes [0, used): log lsns block_lsn .. block_lsn + used
//!        used      …  zeros
//!    block-32      4  magic           "TLSL"
//!    block-28      4  used            1 ..= block - 32
//!    block-24      8  block_lsn       lsn of the block's first byte (a block boundary)
//!    block-16      8  durable         the lsn the log was durable to when the slot was written
//!     block-8      4  reserved        zero
//!     block-4      4  crc32c          seeded with the generation, over bytes 0 .. block-4
//! ```
//!
//! A slot that does not validate (torn, zeros, a recycled segment's old generation) is
//! ignored: the other slot, or the home block, holds what it protected. A group whose last
//! block has fewer than 32 bytes free is padded instead (`record.rs`, `Pad`).

use super::segment::SegmentHeader;
use crate::checksum::crc32c_seeded;
use crate::error::Result;
use crate::io::StorageFile;

/// Bytes at the end of a slot block that describe it.
pub const TRAILER_BYTES: usize = 32;
/// Slot blocks at the end of a version 2 segment (the segment layout's, `segment.rs`).
pub const SLOTS: u64 = super::segment::TAIL_SLOTS;
/// The slots' indices.
const INDICES: [usize; 2] = [0, 1];
const MAGIC: [u8; 4] = *b"TLSL";

/// What a valid slot says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Lsn of the block's first byte.
    pub block_lsn: u64,
    /// Bytes of the block the slot holds.
    pub used: usize,
    /// The lsn the log was durable to when the slot was written.
    pub durable: u64,
}

/// File offset of slot `index` in a segment with `header`, which must have slots.
#[must_use]
pub fn offset(header: &SegmentHeader, index: usize) -> u64 {
    assert!(header.slots() == SLOTS, "segment version without slots");
    assert!((index as u64) < SLOTS, "slot index {index}");
    header.segment_bytes - (SLOTS - index as u64) * u64::from(header.log_block_bytes)
}

/// Fills `target` (one log block) with a slot holding `content` (the block's first bytes).
pub fn encode(target: &mut [u8], generation: u64, block_lsn: u64, content: &[u8], durable: u64) {
    let block = target.len();
    let used = content.len();
    assert!(
        used > 0 && used <= block - TRAILER_BYTES,
        "slot content of {used} bytes in a {block}-byte block"
    );
    assert!(
        durable <= block_lsn + used as u64,
        "slot for lsn {block_lsn} with durable mark {durable} past its bytes"
    );
    target[..used].copy_from_slice(content);
    target[used..].fill(0);
    let t = block - TRAILER_BYTES;
    target[t..t + 4].copy_from_slice(&MAGIC);
    target[t + 4..t + 8].copy_from_slice(&u32::try_from(used).expect("small").to_le_bytes());
    target[t + 8..t + 16].copy_from_slice(&block_lsn.to_le_bytes());
    target[t + 16..t + 24].copy_from_slice(&durable.to_le_bytes());
    let crc = crc32c_seeded(generation, &[&target[..block - 4]]);
    target[block - 4..].copy_from_slice(&crc.to_le_bytes());
}

/// The slot in `bytes` (one log block), if it is valid for `generation` and lies in the lsns
/// of the segment `header`.
#[must_use]
pub fn decode(bytes: &[u8], header: &SegmentHeader) -> Option<Slot> {
    let block = header.log_block_bytes as usize;
    if bytes.len() != block || block <= TRAILER_BYTES {
        return None;
    }
    let t = block - TRAILER_BYTES;
    let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4 bytes"));
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8 bytes"));
    if bytes[t..t + 4] != MAGIC || u32_at(t + 24) != 0 {
        return None;
    }
    if u32_at(block - 4) != crc32c_seeded(header.generation, &[&bytes[..block - 4]]) {
        return None;
    }
    let slot = Slot {
        block_lsn: u64_at(t + 8),
        used: u32_at(t + 4) as usize,
        durable: u64_at(t + 16),
    };
    let in_segment = slot.block_lsn >= header.base_lsn
        && (slot.block_lsn - header.base_lsn).is_multiple_of(block as u64)
        && slot.block_lsn + block as u64 <= header.base_lsn + header.capacity();
    (in_segment && slot.used > 0 && slot.used <= t).then_some(slot)
}

/// The valid slots of a segment whose whole file is `bytes`, with their index.
#[must_use]
pub fn read(bytes: &[u8], header: &SegmentHeader) -> Vec<(usize, Slot)> {
    if header.slots() == 0 {
        return Vec::new();
    }
    let block = header.log_block_bytes as usize;
    INDICES
        .into_iter()
        .filter_map(|i| {
            let at = usize::try_from(offset(header, i)).expect("segment fits usize");
            Some((i, decode(bytes.get(at..at + block)?, header)?))
        })
        .collect()
}

/// Copies every valid slot's bytes over its home block in `bytes` (a whole segment file):
/// each holds the log's own bytes for its lsns, so this repairs a home block torn while it was
/// rewritten and leaves an intact one as it was. Returns the slots applied.
pub fn apply(bytes: &mut [u8], header: &SegmentHeader) -> Vec<Slot> {
    let block = header.log_block_bytes as usize;
    let slots = read(bytes, header);
    for (i, s) in &slots {
        let at = usize::try_from(offset(header, *i)).expect("fits");
        let content = bytes[at..at + block].to_vec();
        lay(bytes, 0, header, s, &content);
    }
    slots.into_iter().map(|(_, s)| s).collect()
}

/// The valid slots of the segment `header` in `file`, each with its slot block, for
/// [`Copies::lay`]. A reader of a live log reads these *before* the home bytes they repair: a
/// tail block's acknowledged bytes are in a slot until its home block is written full, and a
/// full home block is never written again, so what a slot no longer holds (read first) its
/// home holds (read after).
pub fn read_from(file: &dyn StorageFile, header: &SegmentHeader) -> Result<Copies> {
    let mut copies = Vec::new();
    if header.slots() == 0 {
        return Ok(Copies(copies));
    }
    let block = header.log_block_bytes as usize;
    let mut slots = vec![0u8; block * INDICES.len()];
    let n = file.read_at(&mut slots, offset(header, 0))?;
    for content in slots[..n].chunks_exact(block) {
        if let Some(s) = decode(content, header) {
            copies.push((s, content.to_vec()));
        }
    }
    Ok(Copies(copies))
}

/// Slot copies read by [`read_from`].
#[derive(Debug, Default)]
pub struct Copies(Vec<(Slot, Vec<u8>)>);

impl Copies {
    /// Lays the copies over `bytes`, read (after the copies) from file offset `from` of the
    /// segment `header`.
    pub fn lay(&self, bytes: &mut [u8], from: u64, header: &SegmentHeader) {
        for (s, content) in &self.0 {
            lay(bytes, from, header, s, content);
        }
    }
}

/// Copies the bytes of `slot` (whose slot block is `content`) over the part of its home block
/// that `bytes` (read from file offset `from`) holds.
fn lay(bytes: &mut [u8], from: u64, header: &SegmentHeader, slot: &Slot, content: &[u8]) {
    let home = u64::from(header.log_block_bytes) + (slot.block_lsn - header.base_lsn);
    assert!(
        home + slot.used as u64 <= offset(header, 0),
        "a slot's home lies among the slots"
    );
    let lo = home.max(from);
    let hi = (home + slot.used as u64).min(from + bytes.len() as u64);
    if lo < hi {
        let at = |x: u64, base: u64| usize::try_from(x - base).expect("fits");
        bytes[at(lo, from)..at(hi, from)].copy_from_slice(&content[at(lo, home)..at(hi, home)]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::segment::VERSION;

    fn header() -> SegmentHeader {
        SegmentHeader {
            version: VERSION,
            log_block_bytes: 512,
            segment_bytes: 8192,
            generation: 5,
            base_lsn: 4096,
            seal: None,
        }
    }

    /// A segment whose block 2 (lsns 5120..) holds `home`, with a slot copy of `copy` in
    /// slot `index`.
    fn segment(home: &[u8], copy: &[u8], index: usize) -> Vec<u8> {
        let h = header();
        let mut bytes = vec![0u8; 8192];
        bytes[1536..1536 + home.len()].copy_from_slice(home);
        let at = usize::try_from(offset(&h, index)).expect("small");
        encode(&mut bytes[at..at + 512], h.generation, 5120, copy, 5100);
        bytes
    }

    #[test]
    fn a_slot_repairs_a_torn_home_block_and_leaves_an_intact_one() {
        let h = header();
        let good: Vec<u8> = (0..200u8).collect();
        // Torn: the home block holds garbage where the slot has the log's bytes.
        let mut bytes = segment(&[0xEE; 300], &good, 1);
        let applied = apply(&mut bytes, &h);
        assert_eq!(
            applied,
            vec![Slot {
                block_lsn: 5120,
                used: 200,
                durable: 5100
            }]
        );
        assert_eq!(&bytes[1536..1736], &good[..]);
        assert_eq!(
            &bytes[1736..1836],
            &[0xEE; 100][..],
            "past the copy: untouched"
        );
        // Intact (the home block went on past the copy): nothing changes.
        let mut longer = good.clone();
        longer.extend(200..255u8);
        let mut bytes = segment(&longer, &good, 0);
        let before = bytes[..7168].to_vec();
        apply(&mut bytes, &h);
        assert_eq!(&bytes[..7168], &before[..]);
    }

    #[test]
    fn a_torn_stale_or_misplaced_slot_is_ignored() {
        let h = header();
        let good = [7u8; 100];
        let bytes = segment(&[0; 100], &good, 0);
        let at = usize::try_from(offset(&h, 0)).expect("small");
        assert!(decode(&bytes[at..at + 512], &h).is_some());
        // Any flipped byte (a tear), content or trailer.
        for i in [0, 99, 300, 480, 484, 490, 500, 511] {
            let mut torn = bytes[at..at + 512].to_vec();
            torn[i] ^= 0x40;
            assert_eq!(decode(&torn, &h), None, "byte {i}");
        }
        // Another generation's slot (a recycled segment).
        let other = SegmentHeader { generation: 6, ..h };
        assert_eq!(decode(&bytes[at..at + 512], &other), None);
        // A block outside this segment's lsns, or not on a block boundary.
        for block_lsn in [4096 + 6656, 5128, 4000] {
            let mut b = vec![0u8; 512];
            encode(&mut b, h.generation, block_lsn, &good, 0);
            assert_eq!(decode(&b, &h), None, "block lsn {block_lsn}");
        }
        // A version 1 segment has none.
        let v1 = SegmentHeader { version: 1, ..h };
        assert!(read(&bytes, &v1).is_empty());
    }

    #[test]
    fn a_range_read_gets_the_slot_bytes_it_covers() {
        use crate::io::{SimConfig, SimDisk, Storage};
        let h = header();
        let good: Vec<u8> = (0..200u8).collect();
        let bytes = segment(&[0xEE; 200], &good, 1);
        let disk = SimDisk::new(SimConfig::default());
        disk.create_dir_all(std::path::Path::new("/w"))
            .expect("dir");
        let file = disk
            .create(std::path::Path::new("/w/s"), crate::FlushMethod::Fdatasync)
            .expect("create");
        file.write_at(&bytes, 0).expect("write");
        // Bytes 1600..1700 of the file: lsns 5184..5284, inside the copy.
        let mut part = bytes[1600..1700].to_vec();
        read_from(&*file, &h)
            .expect("read slots")
            .lay(&mut part, 1600, &h);
        assert_eq!(&part[..], &good[64..164]);
    }
}
