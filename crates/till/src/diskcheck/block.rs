//! The blocks of a `raw` diskcheck file: self-identifying, checksummed per 512-byte sector, so
//! that what a power cut left can be told apart: the write itself, an older write, nothing, a
//! torn mix of two writes, or damage.
//!
//! A stream's file is `slots` blocks of `block_bytes` (a multiple of 512), zero-filled and
//! flushed before the first write. Write `seq` goes to slot `seq % slots`, so the file is
//! rewritten lap after lap and each slot holds the newest write made to it. Every 512-byte
//! sector of a block is:
//!
//! ```text
//! offset  size  field
//!      0     8  magic "TLDCKBLK"
//!      8     8  run id (u64 LE): the run in `diskcheck.json`
//!     16     8  seq (u64 LE): the stream's write number, from 0
//!     24     4  slot (u32 LE): seq % slots
//!     28     2  sector index in the block (u16 LE)
//!     30     2  sectors per block (u16 LE)
//!     32   476  filler: a xorshift stream seeded from run, seq and sector index
//!    508     4  CRC32C of bytes 0..508 (u32 LE)
//! ```
//!
//! A block read back is one of: all zeros (never written); every sector valid and of one seq
//! (intact); every sector valid or zero but not all of one seq (torn: parts of two writes);
//! any other sector (corrupt: a checksum, magic, run, slot or index that does not match).

use std::fmt;

/// Bytes per sector: the unit each carrying its own header and checksum.
pub const SECTOR_BYTES: usize = 512;
const MAGIC: &[u8; 8] = b"TLDCKBLK";
const CRC_AT: usize = SECTOR_BYTES - 4;

/// Fills `block` (a multiple of [`SECTOR_BYTES`]) with write `seq` of `run` at `slot`.
pub fn encode(block: &mut [u8], run: u64, seq: u64, slot: u32) {
    assert!(
        !block.is_empty() && block.len().is_multiple_of(SECTOR_BYTES),
        "a block is a whole number of sectors, not {} bytes",
        block.len()
    );
    let sectors = u16::try_from(block.len() / SECTOR_BYTES).expect("at most 32 MiB blocks");
    for (index, sector) in block.chunks_exact_mut(SECTOR_BYTES).enumerate() {
        let index = u16::try_from(index).expect("fewer sectors than u16::MAX");
        sector[0..8].copy_from_slice(MAGIC);
        sector[8..16].copy_from_slice(&run.to_le_bytes());
        sector[16..24].copy_from_slice(&seq.to_le_bytes());
        sector[24..28].copy_from_slice(&slot.to_le_bytes());
        sector[28..30].copy_from_slice(&index.to_le_bytes());
        sector[30..32].copy_from_slice(&sectors.to_le_bytes());
        let mut x = run ^ seq.rotate_left(17) ^ (u64::from(index) << 48) ^ 0x9E37_79B9_7F4A_7C15;
        for chunk in sector[32..CRC_AT].chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
        }
        let crc = crc_fast::crc32_iscsi(&sector[..CRC_AT]);
        sector[CRC_AT..].copy_from_slice(&crc.to_le_bytes());
    }
}

/// What a block read back holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// All zeros: no write ever reached it.
    Empty,
    /// Write `seq`, whole.
    Intact(u64),
    /// Sectors of different writes (or some still zero): a write torn by the cut. `newest` is
    /// the highest seq among its sectors, `oldest` the lowest, `None` when a sector is zero.
    Torn { newest: u64, oldest: Option<u64> },
    /// A sector that is neither zero nor a valid sector of this run and slot, at this byte
    /// offset in the block.
    Corrupt { offset: usize },
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Found::Empty => f.write_str("zeros (never written)"),
            Found::Intact(seq) => write!(f, "write {seq}"),
            Found::Torn { newest, .. } => write!(f, "torn (sectors of writes up to {newest})"),
            Found::Corrupt { offset } => write!(f, "corrupt sector at block offset {offset}"),
        }
    }
}

/// Reads `block` as a block of `run` at `slot`.
pub fn decode(block: &[u8], run: u64, slot: u32) -> Found {
    assert!(block.len().is_multiple_of(SECTOR_BYTES) && !block.is_empty());
    let sectors = block.len() / SECTOR_BYTES;
    let mut seqs = Vec::with_capacity(sectors);
    let mut zero_sectors = 0;
    for (index, sector) in block.chunks_exact(SECTOR_BYTES).enumerate() {
        if sector.iter().all(|&b| b == 0) {
            zero_sectors += 1;
            continue;
        }
        match decode_sector(sector, run, slot, index, sectors) {
            Some(seq) => seqs.push(seq),
            None => {
                return Found::Corrupt {
                    offset: index * SECTOR_BYTES,
                };
            }
        }
    }
    if zero_sectors == sectors {
        return Found::Empty;
    }
    let newest = *seqs.iter().max().expect("a sector that is not zero");
    let oldest = *seqs.iter().min().expect("a sector that is not zero");
    if zero_sectors == 0 && oldest == newest {
        Found::Intact(newest)
    } else {
        Found::Torn {
            newest,
            oldest: (zero_sectors == 0).then_some(oldest),
        }
    }
}

/// The seq of one valid sector, or `None`.
fn decode_sector(sector: &[u8], run: u64, slot: u32, index: usize, sectors: usize) -> Option<u64> {
    let le64 = |at: usize| u64::from_le_bytes(sector[at..at + 8].try_into().expect("8 bytes"));
    let le32 = |at: usize| u32::from_le_bytes(sector[at..at + 4].try_into().expect("4 bytes"));
    let le16 = |at: usize| u16::from_le_bytes(sector[at..at + 2].try_into().expect("2 bytes"));
    let crc = crc_fast::crc32_iscsi(&sector[..CRC_AT]);
    (sector[0..8] == MAGIC[..]
        && crc == le32(CRC_AT)
        && le64(8) == run
        && le32(24) == slot
        && usize::from(le16(28)) == index
        && usize::from(le16(30)) == sectors)
        .then(|| le64(16))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_reads_back_as_the_write_that_made_it() {
        let mut block = vec![0; 4096];
        assert_eq!(decode(&block, 7, 3), Found::Empty);
        encode(&mut block, 7, 1003, 3);
        assert_eq!(decode(&block, 7, 3), Found::Intact(1003));
    }

    #[test]
    fn a_block_of_another_run_or_slot_is_corrupt_not_present() {
        let mut block = vec![0; 4096];
        encode(&mut block, 7, 1003, 3);
        assert_eq!(decode(&block, 8, 3), Found::Corrupt { offset: 0 });
        assert_eq!(decode(&block, 7, 4), Found::Corrupt { offset: 0 });
    }

    #[test]
    fn sectors_of_two_writes_or_half_zero_are_torn() {
        let (mut old, mut new) = (vec![0; 4096], vec![0; 4096]);
        encode(&mut old, 7, 3, 3);
        encode(&mut new, 7, 1003, 3);
        let mut mixed = old.clone();
        mixed[..1024].copy_from_slice(&new[..1024]);
        assert_eq!(
            decode(&mixed, 7, 3),
            Found::Torn {
                newest: 1003,
                oldest: Some(3)
            }
        );
        let mut half = vec![0; 4096];
        half[2048..].copy_from_slice(&new[2048..]);
        assert_eq!(
            decode(&half, 7, 3),
            Found::Torn {
                newest: 1003,
                oldest: None
            }
        );
    }

    #[test]
    fn a_flipped_bit_is_corrupt_at_its_sector() {
        let mut block = vec![0; 4096];
        encode(&mut block, 7, 5, 5);
        block[1500] ^= 1;
        assert_eq!(decode(&block, 7, 5), Found::Corrupt { offset: 1024 });
    }
}
