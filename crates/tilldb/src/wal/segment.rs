//! # Segment format (log version 2, and 3 for an encrypted database; version 1 is read)
//!
//! A segment is the file `{generation:020}.wal` in the log directory, `segment_bytes` long,
//! preallocated by writing zeros so that `fdatasync` never has metadata to write. The zeros are
//! flushed before the header is written, so a valid header always sits on a full-length file.
//! Its first log block holds the header; records fill the blocks after it (`record.rs`); in
//! version 2 the last two blocks are the tail slots (`slot.rs`), outside the lsn space:
//!
//! ```text
//! version 2:  | header | records (lsns base .. base + capacity) ... | slot 0 | slot 1 |
//!             0        block                      segment_bytes - 2 block            segment_bytes
//! version 1:  | header | records ...                                                   |
//! ```
//!
//! Version 1 segments (written before tail slots) are read; every segment a plain database
//! writes is version 2, and recycling a version 1 segment rewrites its header as version 2.
//! An encrypted database's segments are version 3: version 2's layout, and a header that
//! carries the cipher and the random salt the segment's key is derived from
//! (`crypt/log.rs`), drawn anew whenever the header is written (create and recycle).
//!
//! ```text
//! offset size field
//!      0    8 magic            "TILLWAL1"
//!      8    4 version          2 (1: no tail slots)
//!     12    4 log_block_bytes  the write unit; records start at this offset
//!     16    8 segment_bytes    the file's length
//!     24    8 generation       unique for the life of the log; equals the number in the name
//!     32    8 base_lsn         lsn of the record at offset log_block_bytes
//!     40    4 crc32c           over bytes 0..40
//!     44    … zeros to the end of the block
//! ```
//!
//! Version 3 (an encrypted database's), from offset 40:
//!
//! ```text
//!     40    1 cipher           1 AES-256-GCM · 2 ChaCha20-Poly1305 (crypt/cipher.rs)
//!     41    3 zero
//!     44   16 salt             random; with the generation, names the segment's key
//!     60    4 crc32c           over bytes 0..60
//!     64    … zeros to the end of the block
//! ```
//!
//! A header is one of these (see [`HeaderState`]):
//! - all zeros, or a file shorter than a header holding only zeros: a segment whose creation
//!   was interrupted, free for reuse;
//! - valid, with the generation in its name: part of the log (or a prepared spare);
//! - valid but naming another generation: a segment whose recycling was interrupted, free;
//! - a header whose checksum matches but whose version is not this build's: written on purpose
//!   by another version of tilldb, never by a crash; refused wherever it is (`reader.rs`);
//! - anything else does not decode: recovery treats it as free when the segment is newer than
//!   every valid one (an interrupted preparation), and as corruption, reported with the file
//!   and offset, anywhere else (`reader.rs`).
//!
//! Recycling renames a free segment to a new generation's name, then rewrites its header. Its
//! old records stay, but their checksums are seeded with the old generation, so they never
//! validate in the new one.

use crate::FlushMethod;
use crate::checksum::crc32c;
use crate::crypt::{Cipher, SEGMENT_SALT_BYTES};
use crate::error::{Error, Result};
use crate::io::{AlignedBuf, Storage, StorageFile, parent_dir};
use std::path::{Path, PathBuf};

const MAGIC: [u8; 8] = *b"TILLWAL1";
/// The version this build writes.
pub const VERSION: u32 = 2;
/// The version before tail slots, still read.
pub const VERSION_NO_SLOTS: u32 = 1;
/// The version of an encrypted database's segments: version 2's, with cipher and salt.
pub const VERSION_SEALED: u32 = 3;
/// Tail slot blocks at the end of a segment of [`VERSION`] (their format: `slot.rs`).
pub const TAIL_SLOTS: u64 = 2;
const MAGIC_OFFSET: usize = 0;
pub(crate) const VERSION_OFFSET: usize = MAGIC_OFFSET + MAGIC.len();
const BLOCK_OFFSET: usize = VERSION_OFFSET + size_of::<u32>();
const SEGMENT_BYTES_OFFSET: usize = BLOCK_OFFSET + size_of::<u32>();
const GENERATION_OFFSET: usize = SEGMENT_BYTES_OFFSET + size_of::<u64>();
const BASE_LSN_OFFSET: usize = GENERATION_OFFSET + size_of::<u64>();
const CRC_OFFSET: usize = BASE_LSN_OFFSET + size_of::<u64>();
/// Bytes of the header that carry information; the rest of the block is zero.
pub const HEADER_BYTES: usize = CRC_OFFSET + size_of::<u32>();
const _: () = assert!(HEADER_BYTES == 44);
const CIPHER_OFFSET: usize = CRC_OFFSET;
const SALT_OFFSET: usize = CIPHER_OFFSET + size_of::<u32>();
const SEALED_CRC_OFFSET: usize = SALT_OFFSET + SEGMENT_SALT_BYTES;
/// Bytes of a version 3 header that carry information.
pub const SEALED_HEADER_BYTES: usize = SEALED_CRC_OFFSET + size_of::<u32>();
const _: () = assert!(SEALED_HEADER_BYTES == 64);
const _: () = assert!(HEADER_BYTES <= 512, "a header fits the smallest log block");

/// Largest lsn a segment may start at: 2^62 bytes of log (4 EiB), so `base + capacity` and
/// every lsn sum in the log stay far from `u64::MAX` (a decoded header beyond it is refused).
pub const LSN_MAX: u64 = 1 << 62;
/// Largest generation: one new segment a nanosecond would take 146 years to reach it.
pub const GENERATION_MAX: u64 = 1 << 62;
/// Largest segment a header may describe (1 TiB).
pub const SEGMENT_BYTES_MAX: u64 = 1 << 40;

/// The decoded header of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// The format version: [`VERSION`], or [`VERSION_NO_SLOTS`] for a segment written before
    /// tail slots.
    pub version: u32,
    /// The log's write unit, in bytes: the header fills the first block and records start
    /// after it.
    pub log_block_bytes: u32,
    /// The file's length, in bytes.
    pub segment_bytes: u64,
    /// Unique for the life of the log; the number in the file's name.
    pub generation: u64,
    /// The lsn of the first record, at file offset `log_block_bytes`.
    pub base_lsn: u64,
    /// Version 3 (encrypted): the cipher and the salt of the segment's key; `None` before.
    pub seal: Option<SegmentSeal>,
}

/// What names an encrypted segment's key, besides the data key and the generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentSeal {
    /// The database's cipher.
    pub cipher: Cipher,
    /// Random, drawn whenever the header is written.
    pub salt: [u8; SEGMENT_SALT_BYTES],
}

impl SegmentSeal {
    /// A version 3 header's cipher and salt, from its first bytes (crc checked).
    /// `Err((offset, what))`.
    fn decode(bytes: &[u8]) -> std::result::Result<SegmentSeal, (usize, &'static str)> {
        let cipher = Cipher::from_code(bytes[CIPHER_OFFSET])
            .ok_or((CIPHER_OFFSET, "log segment cipher unknown to this build"))?;
        if bytes[CIPHER_OFFSET + 1..SALT_OFFSET]
            .iter()
            .any(|&b| b != 0)
        {
            return Err((CIPHER_OFFSET + 1, "log segment zero bytes not zero"));
        }
        Ok(SegmentSeal {
            cipher,
            salt: bytes[SALT_OFFSET..SEALED_CRC_OFFSET]
                .try_into()
                .expect("16 bytes"),
        })
    }
}

/// What a segment's first block says about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderState {
    /// All zeros: creation was interrupted before the header was written.
    Zero,
    /// A valid header.
    Valid(SegmentHeader),
}

impl SegmentHeader {
    /// The header as one zero-padded log block.
    #[must_use]
    pub fn encode(&self) -> AlignedBuf {
        assert_eq!(
            self.version == VERSION_SEALED,
            self.seal.is_some(),
            "a version 3 segment, and only it, has a seal"
        );
        let mut block = AlignedBuf::zeroed(self.log_block_bytes as usize);
        block[MAGIC_OFFSET..VERSION_OFFSET].copy_from_slice(&MAGIC);
        block[VERSION_OFFSET..BLOCK_OFFSET].copy_from_slice(&self.version.to_le_bytes());
        block[BLOCK_OFFSET..SEGMENT_BYTES_OFFSET]
            .copy_from_slice(&self.log_block_bytes.to_le_bytes());
        block[SEGMENT_BYTES_OFFSET..GENERATION_OFFSET]
            .copy_from_slice(&self.segment_bytes.to_le_bytes());
        block[GENERATION_OFFSET..BASE_LSN_OFFSET].copy_from_slice(&self.generation.to_le_bytes());
        block[BASE_LSN_OFFSET..CRC_OFFSET].copy_from_slice(&self.base_lsn.to_le_bytes());
        let crc_offset = if let Some(seal) = &self.seal {
            block[CIPHER_OFFSET] = seal.cipher.code();
            block[SALT_OFFSET..SEALED_CRC_OFFSET].copy_from_slice(&seal.salt);
            SEALED_CRC_OFFSET
        } else {
            CRC_OFFSET
        };
        let crc = crc32c(&block[..crc_offset]);
        block[crc_offset..crc_offset + 4].copy_from_slice(&crc.to_le_bytes());
        block
    }

    /// Decodes the first `HEADER_BYTES`+ bytes of a segment file named `path`.
    pub fn decode(bytes: &[u8], path: &Path) -> Result<HeaderState> {
        let corrupt = |offset: usize, what: &'static str| Error::Corruption {
            file: path.to_path_buf(),
            offset: offset as u64,
            what,
        };
        // Zeros, or a file cut short inside zeros: a create whose zero-fill and header never
        // landed. Nothing in it was ever part of the log.
        if bytes[..bytes.len().min(HEADER_BYTES)]
            .iter()
            .all(|&b| b == 0)
        {
            return Ok(HeaderState::Zero);
        }
        if bytes.len() < HEADER_BYTES {
            return Err(corrupt(bytes.len(), "log segment shorter than its header"));
        }
        if bytes[MAGIC_OFFSET..VERSION_OFFSET] != MAGIC {
            return Err(corrupt(
                MAGIC_OFFSET,
                "not a tilldb log segment (bad magic)",
            ));
        }
        let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8 bytes"));
        // The crc is where the version says; a version torn or unknown is checked at both
        // places, so a header another build wrote on purpose is told from a torn one.
        let crc_matches = |at: usize| bytes.len() >= at + 4 && u32_at(at) == crc32c(&bytes[..at]);
        let version = u32_at(VERSION_OFFSET);
        let crc_offset = if version == VERSION_SEALED {
            SEALED_CRC_OFFSET
        } else {
            CRC_OFFSET
        };
        if !crc_matches(crc_offset)
            && (matches!(version, VERSION_NO_SLOTS | VERSION | VERSION_SEALED)
                || !crc_matches(SEALED_CRC_OFFSET))
        {
            return Err(corrupt(crc_offset, "log segment header checksum mismatch"));
        }
        if !matches!(version, VERSION_NO_SLOTS | VERSION | VERSION_SEALED) {
            return Err(corrupt(
                VERSION_OFFSET,
                "log segment version not supported by this build",
            ));
        }
        let seal = if version == VERSION_SEALED {
            Some(SegmentSeal::decode(bytes).map_err(|(at, what)| corrupt(at, what))?)
        } else {
            None
        };
        let header = SegmentHeader {
            version,
            log_block_bytes: u32_at(BLOCK_OFFSET),
            segment_bytes: u64_at(SEGMENT_BYTES_OFFSET),
            generation: u64_at(GENERATION_OFFSET),
            base_lsn: u64_at(BASE_LSN_OFFSET),
            seal,
        };
        let block = header.log_block_bytes;
        if !block.is_power_of_two()
            || block < 512
            || header.segment_bytes < 8 * u64::from(block)
            || header.segment_bytes > SEGMENT_BYTES_MAX
        {
            return Err(corrupt(
                BLOCK_OFFSET,
                "log segment header has impossible sizes",
            ));
        }
        // Room for the lsns of this segment and far more: lsn arithmetic never overflows.
        if header.base_lsn > LSN_MAX {
            return Err(corrupt(
                BASE_LSN_OFFSET,
                "log segment header has an impossible base lsn",
            ));
        }
        if header.generation > GENERATION_MAX {
            return Err(corrupt(
                GENERATION_OFFSET,
                "log segment header has an impossible generation",
            ));
        }
        Ok(HeaderState::Valid(header))
    }

    /// Lsns one segment holds: its blocks but the header and the tail slots.
    #[must_use]
    pub fn capacity(&self) -> u64 {
        self.segment_bytes - (1 + self.slots()) * u64::from(self.log_block_bytes)
    }

    /// Tail slot blocks at the segment's end (`slot.rs`): 2 from version 2 on, 0 before.
    #[must_use]
    pub fn slots(&self) -> u64 {
        if self.version == VERSION_NO_SLOTS {
            0
        } else {
            TAIL_SLOTS
        }
    }
}

pub use crate::files::{parse_segment_name, segment_name};

/// An open segment, ready for appends.
#[derive(Debug)]
pub struct Segment {
    /// Its header, as written.
    pub header: SegmentHeader,
    /// The segment file.
    pub path: PathBuf,
    /// The open file, with the log's flush method.
    pub file: Box<dyn StorageFile>,
    /// When the log's method writes to the device as it writes (`dsync`, `direct-dsync`,
    /// `direct`): a second handle on the file through the OS's cache (`fdatasync`), for
    /// writes no committer needs durable yet (`Durability::Buffered`, `Lazy`), which then
    /// cost no device write; the flush stage makes them durable with its `fdatasync`.
    /// `None` for other methods.
    pub buffered: Option<Box<dyn StorageFile>>,
    /// A sealed segment's (version 3): seals its `Data` records at append. Set by the log's
    /// writer once the segment is prepared (`writer.rs`, `prepare_segment`).
    pub sealer: Option<crate::crypt::RecordSealer>,
}

impl Segment {
    /// The handle a write goes through: the log's own (`through`: a write-through method's
    /// writes are its flushes), or the buffered one where there is one.
    #[must_use]
    pub fn writer(&self, through: bool) -> &dyn StorageFile {
        match &self.buffered {
            Some(buffered) if !through => &**buffered,
            _ => &*self.file,
        }
    }

    /// File offset of `lsn`, which must lie in this segment.
    #[must_use]
    pub fn offset_of(&self, lsn: u64) -> u64 {
        assert!(
            lsn >= self.header.base_lsn,
            "lsn {lsn} before segment base {}",
            self.header.base_lsn
        );
        let offset = u64::from(self.header.log_block_bytes) + (lsn - self.header.base_lsn);
        assert!(
            offset <= self.records_end(),
            "lsn {lsn} past the end of {}",
            self.path.display()
        );
        offset
    }

    /// File offset just past the last byte records may use (the tail slots follow).
    #[must_use]
    pub fn records_end(&self) -> u64 {
        u64::from(self.header.log_block_bytes) + self.header.capacity()
    }

    /// The lsn just past the last byte this segment can hold.
    #[must_use]
    pub fn end_lsn(&self) -> u64 {
        self.header.base_lsn + self.header.capacity()
    }

    /// Makes a segment ready for appends: recycles `free` if given (rename, header, flush),
    /// otherwise creates and zero-fills a new file, flushes the zeros, then writes and
    /// flushes the header. Either way the header and the name are durable when this returns,
    /// and a valid header is only ever on a full-length file.
    pub fn prepare(
        storage: &dyn Storage,
        dir: &Path,
        method: FlushMethod,
        header: SegmentHeader,
        free: Option<u64>,
    ) -> Result<Segment> {
        let path = dir.join(segment_name(header.generation));
        let file = if let Some(old) = free {
            assert!(
                old < header.generation,
                "recycling must move to a newer generation"
            );
            storage.rename(&dir.join(segment_name(old)), &path)?;
            storage.flush_dir(dir)?;
            let file = storage.open(&path, method)?;
            // A free segment may be one whose creation was cut short, or one made with
            // another segment size: give it exactly this segment's length, allocated.
            let len = file.len()?;
            if len != header.segment_bytes {
                file.set_len(0)?;
                file.allocate_zeroed(0, header.segment_bytes)?;
                file.flush()?;
            }
            file
        } else {
            let file = storage.create(&path, method)?;
            file.allocate_zeroed(0, header.segment_bytes)?;
            // The zeros are durable before the header is written: a power cut can then never
            // leave a valid header on a short file, which recovery would call corruption.
            if !crate::mutants::active("segment-header-before-zeros") {
                file.flush()?;
            }
            file
        };
        file.write_at(&header.encode(), 0)?;
        file.flush()?;
        if !crate::mutants::active("skip-segment-dir-flush") {
            storage.flush_dir(&parent_dir(&path))?;
        }
        let buffered = if method.is_write_through() || method.is_direct() {
            Some(storage.open(&path, FlushMethod::Fdatasync)?)
        } else {
            None
        };
        Ok(Segment {
            header,
            path,
            file,
            buffered,
            sealer: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> SegmentHeader {
        SegmentHeader {
            version: VERSION,
            log_block_bytes: 512,
            segment_bytes: 8192,
            generation: 7,
            base_lsn: 1000,
            seal: None,
        }
    }

    #[test]
    fn golden_header() {
        // Version 1, as written before tail slots: still decoded, with no slots.
        let v1 = SegmentHeader {
            version: VERSION_NO_SLOTS,
            ..header()
        };
        let block = v1.encode();
        assert_eq!(
            SegmentHeader::decode(&block, Path::new("x.wal")).expect("ok"),
            HeaderState::Valid(v1)
        );
        assert_eq!((v1.slots(), v1.capacity()), (0, 8192 - 512));
        assert_eq!((header().slots(), header().capacity()), (2, 8192 - 3 * 512));
        assert_eq!(block.len(), 512);
        let hex: Vec<String> = block[..HEADER_BYTES]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            hex.join(""),
            "54494c4c57414c3101000000000200000020000000000000\
             0700000000000000e8030000000000000f8f1983"
        );
        assert!(block[HEADER_BYTES..].iter().all(|&b| b == 0));
    }

    #[test]
    fn header_round_trip_and_states() {
        let p = Path::new("x.wal");
        assert_eq!(
            SegmentHeader::decode(&header().encode(), p).expect("ok"),
            HeaderState::Valid(header())
        );
        assert_eq!(
            SegmentHeader::decode(&[0u8; 512], p).expect("ok"),
            HeaderState::Zero
        );
    }

    fn sealed() -> SegmentHeader {
        SegmentHeader {
            version: VERSION_SEALED,
            seal: Some(SegmentSeal {
                cipher: Cipher::Aes256Gcm,
                salt: *b"0123456789abcdef",
            }),
            ..header()
        }
    }

    #[test]
    fn golden_sealed_header() {
        let block = sealed().encode();
        assert_eq!(
            SegmentHeader::decode(&block, Path::new("x.wal")).expect("ok"),
            HeaderState::Valid(sealed())
        );
        assert_eq!((sealed().slots(), sealed().capacity()), (2, 8192 - 3 * 512));
        let hex: Vec<String> = block[..SEALED_HEADER_BYTES]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let hex = hex.join("");
        assert_eq!(
            &hex[..80],
            concat!(
                "54494c4c57414c3103000000000200000020000000000000",
                "0700000000000000e803000000000000"
            ),
            "version 2's fields, version 3"
        );
        assert_eq!(
            &hex[80..],
            "010000003031323334353637383961626364656663e6e799",
            "cipher, zeros, salt, crc"
        );
        assert!(block[SEALED_HEADER_BYTES..].iter().all(|&b| b == 0));
    }

    #[test]
    fn every_sealed_header_bit_flip_is_corruption_naming_the_file() {
        let good = sealed().encode();
        for bit in 0..SEALED_HEADER_BYTES * 8 {
            let mut bad = good.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            match SegmentHeader::decode(&bad, Path::new("/db/wal/x.wal")) {
                Err(Error::Corruption { file, .. }) => assert_eq!(file, Path::new("/db/wal/x.wal")),
                other => panic!("bit {bit}: {other:?}"),
            }
        }
    }

    #[test]
    fn an_unknown_version_with_a_matching_crc_at_either_place_is_refused_as_unsupported() {
        for mut header in [header(), sealed()] {
            let block = {
                let mut block = header.encode();
                let at = if header.seal.is_some() {
                    SEALED_CRC_OFFSET
                } else {
                    CRC_OFFSET
                };
                block[VERSION_OFFSET..BLOCK_OFFSET].copy_from_slice(&9u32.to_le_bytes());
                let crc = crc32c(&block[..at]);
                block[at..at + 4].copy_from_slice(&crc.to_le_bytes());
                header.version = 9;
                block
            };
            match SegmentHeader::decode(&block, Path::new("x.wal")) {
                Err(Error::Corruption { offset, what, .. }) => {
                    assert_eq!(offset, VERSION_OFFSET as u64, "{header:?}");
                    assert!(what.contains("not supported"), "{what}");
                }
                other => panic!("{header:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn every_header_bit_flip_is_corruption_naming_the_file() {
        let good = header().encode();
        for bit in 0..HEADER_BYTES * 8 {
            let mut bad = good.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            match SegmentHeader::decode(&bad, Path::new("/db/wal/x.wal")) {
                Err(Error::Corruption { file, .. }) => assert_eq!(file, Path::new("/db/wal/x.wal")),
                other => panic!("bit {bit}: {other:?}"),
            }
        }
    }
}
