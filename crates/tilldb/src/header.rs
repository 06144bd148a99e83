//! # Database header format (header version 2, and 3 for an encrypted database; 1 is read)
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
//!                              3: an encrypted database, with the key block at 128
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
//!     64   64 reserved         eight u64 fields for later versions; must be zero
//!    128 3964 zero             must be zero; version 3 has instead:
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
use crate::error::{Error, IoOp, Result};
use crate::io::{AlignedBuf, Storage, StorageFile};
use crate::page::{PAGE_BYTES_MAX, PAGE_BYTES_MIN, PageId, TornPageGuard};
use crate::wal::Lsn;
use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
const RESERVED_OFFSET: usize = PAGE_COUNT_OFFSET + size_of::<u64>();
/// Reserved u64 fields, zero in version 1.
pub const RESERVED_FIELDS: usize = 8;
const TAIL_OFFSET: usize = RESERVED_OFFSET + RESERVED_FIELDS * size_of::<u64>();
const CRC_OFFSET: usize = SLOT_BYTES - size_of::<u32>();
/// Where a version 3 slot's MAC sits: after the key block.
pub const MAC_OFFSET: usize = TAIL_OFFSET + crate::crypt::BLOCK_BYTES;
const MAC_END: usize = MAC_OFFSET + HEADER_MAC_BYTES;
const _: () = assert!(MAC_OFFSET == 728);
const _: () = assert!(GENERATION_OFFSET == 24);
const _: () = assert!(RESERVED_OFFSET == 64);
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
        let version = if self.encryption.is_some() {
            VERSION_ENCRYPTED
        } else {
            VERSION
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
        if !(VERSION_OLDEST_READ..=VERSION_ENCRYPTED).contains(&version) {
            return Err((
                VERSION_OFFSET,
                "header version not supported by this build (it reads versions 1 to 3): a \
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
        if bytes[RESERVED_OFFSET..TAIL_OFFSET].iter().any(|&b| b != 0) {
            return Err((RESERVED_OFFSET, "header reserved bytes not zero"));
        }
        let (encryption, zeros_from) = if version == VERSION_ENCRYPTED {
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

/// `tilldb.meta`, open, with the slot holding the newest valid header.
#[derive(Debug)]
pub struct HeaderFile {
    path: PathBuf,
    file: Box<dyn StorageFile>,
    /// The slot holding the newest valid header, and that header.
    newest: (usize, Header),
    /// A write or flush failed. The newest valid header is still intact, but what the other
    /// slot holds is unknown until reopen.
    poisoned: bool,
    /// An encrypted database's keys, once its header is authenticated (or created): every
    /// write computes the MAC with them. `None` for a plain database.
    keys: Option<Arc<DatabaseKeys>>,
    /// An encrypted header's newest slot up to the end of its MAC, as read at open: what
    /// [`HeaderFile::authenticate`] checks is what was decoded, never a second read.
    read_mac_bytes: Option<Vec<u8>>,
}

impl HeaderFile {
    /// Creates `tilldb.meta` in `dir` holding `header` as generation 1 in slot 0, by way of a
    /// temporary file renamed into place, and makes it and its name durable. Fails if
    /// `tilldb.meta` exists. Returns the header as written.
    /// An encrypted header takes the database's `keys` (for its MAC); a plain one `None`.
    pub fn create(
        storage: &dyn Storage,
        dir: &Path,
        method: FlushMethod,
        header: &Header,
        keys: Option<Arc<DatabaseKeys>>,
    ) -> Result<(HeaderFile, Header)> {
        assert_eq!(
            header.encryption.is_some(),
            keys.is_some(),
            "an encrypted header is created with its keys, a plain one without"
        );
        let path = dir.join(HEADER_FILE_NAME);
        let temp = dir.join(HEADER_TEMP_FILE_NAME);
        if storage.exists(&path)? {
            return Err(Error::os(IoOp::Create, path, crate::io::errno::EEXIST));
        }
        if storage.exists(&temp)? {
            // Left by a create that crashed before its rename: never a database.
            storage.remove(&temp)?;
        }
        let first = Header {
            generation: 1,
            ..*header
        };
        let file = storage.create(&temp, method)?;
        file.allocate_zeroed(0, (SLOT_COUNT * SLOT_BYTES) as u64)?;
        file.write_at(&first.encode_with(0, keys.as_deref()), 0)?;
        file.flush()?;
        drop(file);
        storage.rename(&temp, &path)?;
        storage.flush_dir(dir)?;
        let file = storage.open(&path, method)?;
        let header_file = HeaderFile {
            path,
            file,
            newest: (0, first),
            poisoned: false,
            keys,
            read_mac_bytes: None,
        };
        header_file.check_invariants();
        Ok((header_file, first))
    }

    /// Opens `tilldb.meta` in `dir` and reads the header. `Ok(None)` when both slots are all
    /// zeros: no database (never the result of [`HeaderFile::create`]).
    pub fn open(
        storage: &dyn Storage,
        dir: &Path,
        method: FlushMethod,
    ) -> Result<Option<(HeaderFile, Header)>> {
        let path = dir.join(HEADER_FILE_NAME);
        let file = storage.open(&path, method)?;
        let Some(((slot, header), bytes)) = read_slots(&*file, &path)? else {
            return Ok(None);
        };
        let header_file = HeaderFile {
            path,
            file,
            newest: (slot, header),
            poisoned: false,
            keys: None,
            read_mac_bytes: header
                .encryption
                .is_some()
                .then(|| bytes[slot * SLOT_BYTES..slot * SLOT_BYTES + MAC_END].to_vec()),
        };
        header_file.check_invariants();
        Ok(Some((header_file, header)))
    }

    /// Checks the newest slot's MAC with the database's `keys` (the key already checked
    /// against the key block) and keeps them for the writes to come. A MAC that does not
    /// match is [`Error::Corruption`] at the MAC's offset: the key opened the data key, so
    /// the slot was changed after it was written.
    pub fn authenticate(&mut self, keys: Arc<DatabaseKeys>) -> Result<()> {
        let (slot, header) = self.newest;
        let offset = (slot * SLOT_BYTES) as u64;
        let corrupt = |at: usize, what| Error::Corruption {
            file: self.path.clone(),
            offset: offset + at as u64,
            what,
        };
        // A header read again (a read-only handle's refresh) that is no longer the
        // database's: plain, or another database's key block.
        let same = header
            .encryption
            .is_some_and(|block| block.db_id() == keys.db_id());
        let bytes = self
            .read_mac_bytes
            .as_deref()
            .filter(|_| same)
            .ok_or_else(|| {
                corrupt(
                    VERSION_OFFSET,
                    "the header is no longer the encrypted database's it was (plain, or \
                     another database's key block)",
                )
            })?;
        let unchecked = crate::mutants::active("header-mac-unchecked");
        if !(unchecked || keys.header_mac_matches(&bytes[..MAC_OFFSET], &bytes[MAC_OFFSET..])) {
            return Err(corrupt(
                MAC_OFFSET,
                "header MAC does not match (the key is right: the slot was changed after it \
                 was written)",
            ));
        }
        self.keys = Some(keys);
        Ok(())
    }

    /// The database's keys, once authenticated or created: `None` for a plain database.
    #[must_use]
    pub fn keys(&self) -> Option<&Arc<DatabaseKeys>> {
        self.keys.as_ref()
    }

    /// Reads both slots again and returns the header with the slot it came from.
    pub fn read(&self) -> Result<Option<(usize, Header)>> {
        Ok(read_slots(&*self.file, &self.path)?.map(|(newest, _)| newest))
    }

    /// The newest valid header and its slot, as last read or written.
    #[must_use]
    pub fn newest(&self) -> (usize, Header) {
        self.newest
    }

    /// The header file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `header` with the next generation into the slot not holding the newest valid
    /// header, then flushes. Returns the header as written. Page size and guard never change;
    /// the checkpoint lsn and page count never go backwards.
    pub fn write(&mut self, header: &Header) -> Result<Header> {
        let (_, newest) = self.newest;
        assert_eq!(
            header.page_bytes, newest.page_bytes,
            "page size never changes"
        );
        assert_eq!(
            header.torn_page_guard, newest.torn_page_guard,
            "guard never changes"
        );
        assert_eq!(
            header.encryption, newest.encryption,
            "the key block changes only through a rewrap"
        );
        assert!(
            header.checkpoint_lsn >= newest.checkpoint_lsn,
            "checkpoint lsn going backwards: {} -> {}",
            newest.checkpoint_lsn,
            header.checkpoint_lsn
        );
        assert!(
            header.page_count >= newest.page_count,
            "page count going backwards"
        );
        self.write_slot(header)
    }

    /// Replaces the key block (`Db::rotate_key`): the same data key, wrapped by another
    /// application key. Written twice: first into the slot not holding the newest header and
    /// flushed (from there the new wrap is in force; a crash during that write leaves one of
    /// the two in force, whole), then into the other, so that no slot keeps the old wrap. A crash between
    /// the two leaves the old wrap in the older slot until the next header write (the next
    /// checkpoint's) replaces it.
    pub fn rewrap(&mut self, block: &crate::crypt::KeyBlock) -> Result<()> {
        let (_, newest) = self.newest;
        let old = newest
            .encryption
            .expect("only an encrypted database's key is rotated");
        assert_eq!(
            (block.cipher(), block.db_id()),
            (old.cipher(), old.db_id()),
            "a rotation keeps the data key: its cipher and database"
        );
        let writes = if crate::mutants::active("old-wrap-kept") {
            1
        } else {
            2
        };
        for _ in 0..writes {
            let header = Header {
                encryption: Some(*block),
                ..self.newest.1
            };
            self.write_slot(&header)?;
        }
        Ok(())
    }

    /// Writes `header` into the slot not holding the newest header, one generation on, and
    /// flushes it.
    fn write_slot(&mut self, header: &Header) -> Result<Header> {
        if self.poisoned {
            return Err(Error::Poisoned);
        }
        let (slot, newest) = self.newest;
        let target = 1 - slot;
        assert_ne!(target, slot, "never overwrite the newest valid header");
        let written = Header {
            generation: newest.generation + 1,
            ..*header
        };
        assert_eq!(slot_of_generation(written.generation), target);
        assert_eq!(
            written.encryption.is_some(),
            self.keys.is_some(),
            "an encrypted header is written only once authenticated"
        );
        let result = self
            .file
            .write_at(
                &written.encode_with(target, self.keys.as_deref()),
                (target * SLOT_BYTES) as u64,
            )
            .and_then(|()| self.file.flush());
        if let Err(err) = result {
            self.poisoned = true;
            return Err(err);
        }
        self.newest = (target, written);
        self.check_invariants();
        Ok(written)
    }

    /// Panics if the state is inconsistent.
    pub fn check_invariants(&self) {
        let (slot, header) = self.newest;
        assert!(slot < SLOT_COUNT);
        header.check();
        // Checked by `Header::decode` for headers read, by `write` for headers written.
        assert_eq!(
            slot,
            slot_of_generation(header.generation),
            "generation {} in slot {slot}",
            header.generation
        );
    }
}

/// Reads both slots of `file` and chooses one ([`choose_slot`]); with the bytes read (both
/// slots).
fn read_slots(
    file: &dyn StorageFile,
    path: &Path,
) -> Result<Option<((usize, Header), AlignedBuf)>> {
    let mut buf = AlignedBuf::zeroed(SLOT_COUNT * SLOT_BYTES);
    let n = file.read_at(&mut buf, 0)?;
    assert!(n <= buf.len());
    // A short file reads as zero-padded: a slot never written is zeros either way.
    let corrupt = |offset: u64, what| Error::Corruption {
        file: path.to_path_buf(),
        offset,
        what,
    };
    let mut slots = [SlotState::Zero; SLOT_COUNT];
    for (slot, state) in slots.iter_mut().enumerate() {
        let bytes = &buf[slot * SLOT_BYTES..(slot + 1) * SLOT_BYTES];
        *state = Header::decode(bytes, slot)
            .map_err(|(offset, what)| corrupt((slot * SLOT_BYTES + offset) as u64, what))?;
    }
    let chosen = choose_slot(slots).map_err(|(offset, what)| corrupt(offset, what))?;
    Ok(chosen.map(|newest| (newest, buf)))
}

#[cfg(test)]
mod tests;
