//! # Database header format (header version 2, 3 for an encrypted database, 4 and 5 with features; 1 is read)
//!
//! `tilldb.meta` in the database directory holds two *slots*, each one 4 KiB unit: slot 0 at
//! offset 0, slot 1 at offset 4096. Each slot is a complete header; the valid slot with the
//! higher generation is the header. Little-endian.
//!
//! ```text
//! offset size field
//!      0    8 magic            "TILLDB01"
//!      8    4 version          2 (1: written by builds whose log held no commit in parts and
//!                              whose catalog kept no row counts; read, its tables counted
//!                              at open (db/counts.rs), written as 2 at the next header write);
//!                              3: an encrypted database, with the key block at 128;
//!                              4: version 2's fields and a features word at 64 (written
//!                              only for a database that uses a feature 2 and 3 lack);
//!                              5: version 4 with features bit 2 (the write buffer drains
//!                              in chunks), written for every database with the write
//!                              buffer on since that bit; a version 4 one is upgraded when
//!                              its buffer is turned on (its buffer drained whole first)
//!     12    4 page_bytes       4096..=65536, a power of two
//!     16    1 flush_method     1 Fsync · 2 Fdatasync · 3 Dsync · 4 Direct · 5 DirectDsync
//!                              · 6 NoSync · 7 BarrierFsync (macOS)
//!     17    1 torn_page_guard  1 None · 2 Doublewrite · 3 FullPageImages · 4 Atomic (page/guard.rs)
//!     18    6 zero             must be zero
//!     24    8 generation       >= 1; +1 at every write; odd in slot 0, even in slot 1
//!     32    8 checkpoint_lsn   redo starts here
//!     40    8 catalog_root     page id of the table catalog B-tree root; 0 = none yet
//!     48    8 free_head        first page of the free list; 0 = empty
//!     56    8 page_count       pages the allocator has handed out, page 0 included
//!     64    8 features         version 4 only (zero before): bit 0 encrypted (the key
//!                              block and MAC as version 3's) · bit 1 the log may hold
//!                              write-buffer records (`record.rs`, `txn/buffer.rs`) · bit 2
//!                              (version 5 only, with bit 1) the log may hold drain chunks
//!                              and buffered commits with counts (`record.rs` flag bits 3
//!                              and 4); other bits unknown to this build: refused
//!     72   56 reserved         seven u64 fields for later versions; must be zero
//!    128 3964 zero             must be zero; version 3 (and 4 with bit 0) has instead:
//!    128  600 key block        the data key's wrap and what names it (crypt/block.rs)
//!    728   16 mac              version 3: HMAC-SHA256 of bytes 0..728 under a key from the
//!                              data key (crypt/database.rs); then zeros to the crc
//!   4092    4 crc32c           over bytes 0..4092, seeded with the slot index (0 or 1)
//! ```
//!
//! A slot is one of ([`SlotState`]):
//! - `Zero`: all zeros, never written;
//! - `Torn`: its crc does not match (a torn write, bit rot, or a slot written at the other
//!   slot's place: the seed catches that);
//! - `Valid`: crc, magic, version and every field check out (a version 3 slot's MAC is
//!   checked once the key is known: [`HeaderFile::authenticate`]);
//! - anything else (crc matches, fields do not: a newer version, a foreign file) is
//!   [`Error::Corruption`]: it was written on purpose, so falling back to the other slot
//!   could silently go back in time.
//!
//! Which header counts, one row per case ([`choose_slot`]):
//!
//! | slot 0   | slot 1   | result                                             |
//! |----------|----------|----------------------------------------------------|
//! | Zero     | Zero     | `None`: no database                                |
//! | Valid    | Zero/Torn| slot 0                                             |
//! | Zero/Torn| Valid    | slot 1                                             |
//! | Valid a  | Valid b  | the higher generation; equal is corruption         |
//! | Torn     | Torn     | corruption at offset 0: neither slot validates     |
//! | Zero     | Torn     | corruption at the torn slot (the only header lost) |
//! | Torn     | Zero     | the same                                           |
//!
//! # Writing ([`HeaderFile::write`])
//!
//! A write goes to the slot *not* holding the newest valid header, with the next generation,
//! then flushes. So the newest valid header is never overwritten: a crash during the write
//! leaves it readable, and the torn slot loses the comparison. Each write is its own flush;
//! writing both slots in one flush could tear both (a test demonstrates it).
//!
//! [`HeaderFile::create`] writes the first header (generation 1, slot 0) to a temporary file,
//! flushes it, and renames it into place: `tilldb.meta` either does not exist or holds a
//! valid header, so an all-zero or half-written first header never looks like a database.

use crate::FlushMethod;
use crate::checksum::crc32c_seeded;
use crate::crypt::{DatabaseKeys, HEADER_MAC_BYTES};
use crate::io::AlignedBuf;
use crate::page::{PAGE_BYTES_MAX, PAGE_BYTES_MIN, PageId, TornPageGuard};
use crate::wal::Lsn;
use std::cmp::Ordering;

pub use crate::files::{HEADER_FILE_NAME, HEADER_TEMP_FILE_NAME};

/// Bytes of one slot.
pub const SLOT_BYTES: usize = 4096;
/// Slots in the file.
pub const SLOT_COUNT: usize = 2;

const MAGIC: [u8; 8] = *b"TILLDB01";
/// The version this build writes. Version 2 says the log may hold commits logged in parts
/// (`record.rs`) and the catalog row counts (`db/counts.rs`), which a build that knows
/// only version 1 would misread as damage: it refuses the header instead.
pub const VERSION: u32 = 2;
/// The version of an encrypted database's header: version 2's fields and the key block.
pub const VERSION_ENCRYPTED: u32 = 3;
/// The version with a features word (`features` at offset 64): written only when a feature
/// versions 2 and 3 lack is on (the write buffer), so a database without it stays readable
/// by builds that know only those.
pub const VERSION_FEATURES: u32 = 4;
/// Feature bit: encrypted (the key block and MAC as version 3).
const FEATURE_ENCRYPTED: u64 = 1;
/// Feature bit: the log may hold write-buffer records.
const FEATURE_WRITE_BUFFER: u64 = 2;
/// Feature bit: the log may hold drain chunks and buffered commits with counts.
const FEATURE_DRAIN_CHUNKS: u64 = 4;
/// The version whose features word has the drain chunks' bit: a build that knows version 4
/// only refuses it by its version, not by a record it cannot read.
pub const VERSION_DRAIN_CHUNKS: u32 = 5;
/// The oldest version this build reads (its fields are version 2's).
const VERSION_OLDEST_READ: u32 = 1;
const MAGIC_OFFSET: usize = 0;
/// Where the version (u32, little-endian) sits in a slot.
pub const VERSION_OFFSET: usize = MAGIC_OFFSET + MAGIC.len();
const PAGE_BYTES_OFFSET: usize = VERSION_OFFSET + size_of::<u32>();
const FLUSH_METHOD_OFFSET: usize = PAGE_BYTES_OFFSET + size_of::<u32>();
const GUARD_OFFSET: usize = FLUSH_METHOD_OFFSET + 1;
const ZERO_OFFSET: usize = GUARD_OFFSET + 1;
const GENERATION_OFFSET: usize = ZERO_OFFSET + 6;
const CHECKPOINT_LSN_OFFSET: usize = GENERATION_OFFSET + size_of::<u64>();
const CATALOG_ROOT_OFFSET: usize = CHECKPOINT_LSN_OFFSET + size_of::<u64>();
const FREE_HEAD_OFFSET: usize = CATALOG_ROOT_OFFSET + size_of::<u64>();
const PAGE_COUNT_OFFSET: usize = FREE_HEAD_OFFSET + size_of::<u64>();
const FEATURES_OFFSET: usize = PAGE_COUNT_OFFSET + size_of::<u64>();
const RESERVED_OFFSET: usize = FEATURES_OFFSET + size_of::<u64>();
/// Reserved u64 fields, zero in version 1.
pub const RESERVED_FIELDS: usize = 7;
const TAIL_OFFSET: usize = RESERVED_OFFSET + RESERVED_FIELDS * size_of::<u64>();
const CRC_OFFSET: usize = SLOT_BYTES - size_of::<u32>();
/// Where a version 3 slot's MAC sits: after the key block.
pub const MAC_OFFSET: usize = TAIL_OFFSET + crate::crypt::BLOCK_BYTES;
const MAC_END: usize = MAC_OFFSET + HEADER_MAC_BYTES;
const _: () = assert!(MAC_OFFSET == 728);
const _: () = assert!(GENERATION_OFFSET == 24);
const _: () = assert!(FEATURES_OFFSET == 64);
const _: () = assert!(TAIL_OFFSET == 128);
const _: () = assert!(
    SLOT_BYTES.is_multiple_of(AlignedBuf::ALIGN),
    "slots suit direct I/O"
);

/// The decoded header: the database's fixed parameters and its last checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The size of every page of the data file, in bytes: fixed at create.
    pub page_bytes: u32,
    /// How the database's files are flushed: chosen (or probed) at create and kept.
    pub flush_method: FlushMethod,
    /// The torn-page guard in use: fixed at create, never `Auto`.
    pub torn_page_guard: TornPageGuard,
    /// Set by [`HeaderFile::write`]; what callers pass in is ignored.
    pub generation: u64,
    /// Redo starts here.
    pub checkpoint_lsn: Lsn,
    /// Root of the table catalog B-tree; `PageId(0)` before it exists.
    pub catalog_root: PageId,
    /// First page of the free list; `PageId(0)` when empty.
    pub free_head: PageId,
    /// Pages the allocator has handed out, page 0 included.
    pub page_count: u64,
    /// An encrypted database's key block (version 3); `None` for a plain one. Made at create;
    /// only a rotation (`HeaderFile::rewrap`) changes its wrap and key id.
    pub encryption: Option<crate::crypt::KeyBlock>,
    /// The log may hold write-buffer records (version 4, feature bit 1): set before the first
    /// one is written, never cleared.
    pub write_buffer: bool,
    /// The log may hold drain chunks and buffered commits with counts (version 5, feature bit
    /// 2; only with `write_buffer`): set before the first one is written, never cleared.
    pub drain_chunks: bool,
}

/// What one slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[expect(
    clippy::large_enum_variant,
    reason = "an encrypted header's key block is 600 bytes; two slot states exist at a time"
)]
pub enum SlotState {
    /// All zeros: never written.
    Zero,
    /// The crc does not match: torn or rotted.
    Torn,
    /// Crc, magic, version and every field check out.
    Valid(Header),
}

/// The slot generation `generation` is written to: 1 goes to slot 0 (by
/// [`HeaderFile::create`]) and each write to the other slot, so odd to 0 and even to 1.
#[must_use]
pub fn slot_of_generation(generation: u64) -> usize {
    assert!(generation >= 1, "generation 0 is never written");
    usize::from(generation.is_multiple_of(2))
}

/// The code stored for a flush method.
#[must_use]
pub fn flush_method_code(method: FlushMethod) -> u8 {
    match method {
        FlushMethod::Fsync => 1,
        FlushMethod::Fdatasync => 2,
        FlushMethod::Dsync => 3,
        FlushMethod::Direct => 4,
        FlushMethod::DirectDsync => 5,
        FlushMethod::NoSync => 6,
        FlushMethod::BarrierFsync => 7,
    }
}

/// The flush method a stored code stands for, if any.
#[must_use]
pub fn flush_method_from_code(code: u8) -> Option<FlushMethod> {
    match code {
        1 => Some(FlushMethod::Fsync),
        2 => Some(FlushMethod::Fdatasync),
        3 => Some(FlushMethod::Dsync),
        4 => Some(FlushMethod::Direct),
        5 => Some(FlushMethod::DirectDsync),
        6 => Some(FlushMethod::NoSync),
        7 => Some(FlushMethod::BarrierFsync),
        _ => None,
    }
}

impl Header {
    /// Panics unless the fields are ones tilldb could have written.
    fn check(&self) {
        assert!(
            self.page_bytes.is_power_of_two(),
            "page size {}",
            self.page_bytes
        );
        assert!((PAGE_BYTES_MIN..=PAGE_BYTES_MAX).contains(&self.page_bytes));
        assert!(self.generation >= 1, "generation 0 is never written");
        assert!(self.page_count >= 1, "page 0 always exists");
        assert!(
            self.catalog_root.0 < self.page_count,
            "catalog root past page_count"
        );
        assert!(
            self.free_head.0 < self.page_count,
            "free head past page_count"
        );
        assert!(
            self.write_buffer || !self.drain_chunks,
            "the drain chunks' feature without the write buffer's"
        );
    }

    /// The header as slot `slot`'s bytes; an encrypted header's MAC left zero
    /// ([`Header::encode_with`] computes it).
    #[must_use]
    pub fn encode(&self, slot: usize) -> AlignedBuf {
        self.encode_with(slot, None)
    }

    /// The header as slot `slot`'s bytes, an encrypted header's MAC computed with `keys`.
    #[must_use]
    pub fn encode_with(&self, slot: usize, keys: Option<&DatabaseKeys>) -> AlignedBuf {
        assert!(slot < SLOT_COUNT, "slot {slot}");
        self.check();
        assert_eq!(
            slot_of_generation(self.generation),
            slot,
            "generation in the wrong slot"
        );
        let mut b = AlignedBuf::zeroed(SLOT_BYTES);
        b[MAGIC_OFFSET..VERSION_OFFSET].copy_from_slice(&MAGIC);
        let version = match (self.write_buffer, self.encryption.is_some()) {
            (true, encrypted) => {
                let chunks = if self.drain_chunks {
                    FEATURE_DRAIN_CHUNKS
                } else {
                    0
                };
                let features =
                    FEATURE_WRITE_BUFFER | chunks | if encrypted { FEATURE_ENCRYPTED } else { 0 };
                b[FEATURES_OFFSET..RESERVED_OFFSET].copy_from_slice(&features.to_le_bytes());
                if self.drain_chunks {
                    VERSION_DRAIN_CHUNKS
                } else {
                    VERSION_FEATURES
                }
            }
            (false, true) => VERSION_ENCRYPTED,
            (false, false) => VERSION,
        };
        b[VERSION_OFFSET..PAGE_BYTES_OFFSET].copy_from_slice(&version.to_le_bytes());
        b[PAGE_BYTES_OFFSET..FLUSH_METHOD_OFFSET].copy_from_slice(&self.page_bytes.to_le_bytes());
        b[FLUSH_METHOD_OFFSET] = flush_method_code(self.flush_method);
        b[GUARD_OFFSET] = self.torn_page_guard.code();
        let fields = [
            (GENERATION_OFFSET, self.generation),
            (CHECKPOINT_LSN_OFFSET, self.checkpoint_lsn.0),
            (CATALOG_ROOT_OFFSET, self.catalog_root.0),
            (FREE_HEAD_OFFSET, self.free_head.0),
            (PAGE_COUNT_OFFSET, self.page_count),
        ];
        for (offset, value) in fields {
            b[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
        }
        if let Some(block) = &self.encryption {
            block.encode(&mut b[TAIL_OFFSET..MAC_OFFSET]);
            if let Some(keys) = keys {
                assert_eq!(keys.db_id(), block.db_id(), "the keys of another database");
                let mac = keys.header_mac(&b[..MAC_OFFSET]);
                b[MAC_OFFSET..MAC_END].copy_from_slice(&mac);
            }
        } else {
            assert!(keys.is_none(), "a plain header has no MAC");
        }
        let crc = crc32c_seeded(slot as u64, &[&b[..CRC_OFFSET]]);
        b[CRC_OFFSET..].copy_from_slice(&crc.to_le_bytes());
        debug_assert_eq!(Header::decode(&b, slot), Ok(SlotState::Valid(*self)));
        b
    }

    /// Decodes slot `slot`'s bytes. `Err((offset in the slot, what))` when the crc matches but
    /// the fields do not (see the module doc).
    pub fn decode(bytes: &[u8], slot: usize) -> Result<SlotState, (usize, &'static str)> {
        assert!(slot < SLOT_COUNT, "slot {slot}");
        assert_eq!(bytes.len(), SLOT_BYTES);
        if bytes.iter().all(|&b| b == 0) {
            return Ok(SlotState::Zero);
        }
        let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8 bytes"));
        if u32_at(CRC_OFFSET) != crc32c_seeded(slot as u64, &[&bytes[..CRC_OFFSET]]) {
            return Ok(SlotState::Torn);
        }
        if bytes[MAGIC_OFFSET..VERSION_OFFSET] != MAGIC {
            return Err((MAGIC_OFFSET, "not a tilldb database header (bad magic)"));
        }
        let version = u32_at(VERSION_OFFSET);
        if !(VERSION_OLDEST_READ..=VERSION_DRAIN_CHUNKS).contains(&version) {
            return Err((
                VERSION_OFFSET,
                "header version not supported by this build (it reads versions 1 to 5): a \
                 newer tilldb wrote it; open the database with that version or a later one",
            ));
        }
        let page_bytes = u32_at(PAGE_BYTES_OFFSET);
        if !page_bytes.is_power_of_two() || !(PAGE_BYTES_MIN..=PAGE_BYTES_MAX).contains(&page_bytes)
        {
            return Err((PAGE_BYTES_OFFSET, "header page size impossible"));
        }
        let flush_method = flush_method_from_code(bytes[FLUSH_METHOD_OFFSET])
            .ok_or((FLUSH_METHOD_OFFSET, "header flush method unknown"))?;
        let torn_page_guard = TornPageGuard::from_code(bytes[GUARD_OFFSET])
            .ok_or((GUARD_OFFSET, "header torn-page guard unknown"))?;
        if bytes[ZERO_OFFSET..GENERATION_OFFSET]
            .iter()
            .any(|&b| b != 0)
        {
            return Err((ZERO_OFFSET, "header zero bytes not zero"));
        }
        let features = features_of(version, u64_at(FEATURES_OFFSET))?;
        if bytes[RESERVED_OFFSET..TAIL_OFFSET].iter().any(|&b| b != 0) {
            return Err((RESERVED_OFFSET, "header reserved bytes not zero"));
        }
        let encrypted =
            version == VERSION_ENCRYPTED || features & FEATURE_ENCRYPTED == FEATURE_ENCRYPTED;
        let (encryption, zeros_from) = if encrypted {
            let block = crate::crypt::KeyBlock::decode(&bytes[TAIL_OFFSET..MAC_OFFSET])
                .map_err(|(offset, what)| (TAIL_OFFSET + offset, what))?;
            // The MAC, any 16 bytes here, is checked once the key is known.
            (Some(block), MAC_END)
        } else {
            (None, TAIL_OFFSET)
        };
        if bytes[zeros_from..CRC_OFFSET].iter().any(|&b| b != 0) {
            return Err((zeros_from, "header reserved bytes not zero"));
        }
        let header = Header {
            page_bytes,
            flush_method,
            torn_page_guard,
            generation: u64_at(GENERATION_OFFSET),
            checkpoint_lsn: Lsn(u64_at(CHECKPOINT_LSN_OFFSET)),
            catalog_root: PageId(u64_at(CATALOG_ROOT_OFFSET)),
            free_head: PageId(u64_at(FREE_HEAD_OFFSET)),
            page_count: u64_at(PAGE_COUNT_OFFSET),
            encryption,
            write_buffer: features & FEATURE_WRITE_BUFFER != 0,
            drain_chunks: features & FEATURE_DRAIN_CHUNKS != 0,
        };
        if header.generation == 0 {
            return Err((GENERATION_OFFSET, "header generation zero"));
        }
        if slot_of_generation(header.generation) != slot {
            return Err((GENERATION_OFFSET, "header generation in the wrong slot"));
        }
        if header.page_count == 0 {
            return Err((PAGE_COUNT_OFFSET, "header page count zero"));
        }
        if header.catalog_root.0 >= header.page_count {
            return Err((
                CATALOG_ROOT_OFFSET,
                "header catalog root past the page count",
            ));
        }
        if header.free_head.0 >= header.page_count {
            return Err((
                FREE_HEAD_OFFSET,
                "header free-list head past the page count",
            ));
        }
        Ok(SlotState::Valid(header))
    }
}

/// The features word of a slot of `version`, checked: zero before version 4, no bit this build
/// does not know, the write buffer's bit in versions 4 and 5 (written only for a feature 2 and
/// 3 lack), and the drain chunks' bit in version 5 and only there. `Err((offset in the slot,
/// what))`.
fn features_of(version: u32, features: u64) -> Result<u64, (usize, &'static str)> {
    if version < VERSION_FEATURES && features != 0 {
        return Err((FEATURES_OFFSET, "header reserved bytes not zero"));
    }
    if features & !(FEATURE_ENCRYPTED | FEATURE_WRITE_BUFFER | FEATURE_DRAIN_CHUNKS) != 0 {
        return Err((
            FEATURES_OFFSET,
            "header features unknown to this build: a newer tilldb wrote it; open the \
             database with that version or a later one",
        ));
    }
    if version >= VERSION_FEATURES && features & FEATURE_WRITE_BUFFER == 0 {
        return Err((
            FEATURES_OFFSET,
            "header version 4 or 5 with no feature of its own",
        ));
    }
    if (version == VERSION_DRAIN_CHUNKS) != (features & FEATURE_DRAIN_CHUNKS != 0) {
        return Err((
            FEATURES_OFFSET,
            "header drain chunks' feature bit not in version 5, or version 5 without it",
        ));
    }
    Ok(features)
}

/// The table at the top of the file: which slot holds the header. `Ok(None)`: no database.
/// `Err((file offset, what))`: neither slot can be used.
#[allow(
    clippy::large_types_passed_by_value,
    reason = "two slot states, matched by value in the table's shape (linted only where the \
              module is not exported)"
)]
pub fn choose_slot(
    slots: [SlotState; SLOT_COUNT],
) -> Result<Option<(usize, Header)>, (u64, &'static str)> {
    let slot_offset = |slot: usize| (slot * SLOT_BYTES) as u64;
    match slots {
        [SlotState::Zero, SlotState::Zero] => Ok(None),
        [SlotState::Valid(h), SlotState::Zero | SlotState::Torn] => Ok(Some((0, h))),
        [SlotState::Zero | SlotState::Torn, SlotState::Valid(h)] => Ok(Some((1, h))),
        [SlotState::Valid(a), SlotState::Valid(b)] => match a.generation.cmp(&b.generation) {
            Ordering::Greater => Ok(Some((0, a))),
            Ordering::Less => Ok(Some((1, b))),
            Ordering::Equal => Err((
                slot_offset(1) + GENERATION_OFFSET as u64,
                "both header slots hold the same generation",
            )),
        },
        [SlotState::Torn, SlotState::Torn] => Err((
            slot_offset(0),
            "neither header slot validates (torn or corrupt)",
        )),
        [SlotState::Zero, SlotState::Torn] => Err((
            slot_offset(1),
            "the only header slot written does not validate",
        )),
        [SlotState::Torn, SlotState::Zero] => Err((
            slot_offset(0),
            "the only header slot written does not validate",
        )),
    }
}

mod file;
pub use file::HeaderFile;

#[cfg(test)]
mod tests;
