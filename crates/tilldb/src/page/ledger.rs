//! # Page ledger (`ledger.tdb`, version 1): lost-write detection
//!
//! A write the device acknowledged but lost leaves an older, valid version of a page in place
//! (TESTPLAN F6). Nothing in the page tells it from the current one. The ledger remembers, for
//! every page, the lsn of the newest version made durable; a page read with a smaller lsn (or
//! zeros, or nothing, where a version was written) is a lost write: `PageFault::LostWrite`,
//! refused as [`Error::Corruption`](crate::Error::Corruption) unless a torn-page guard rebuilds
//! the page first (a doublewrite image, or a whole-page image in the log).
//!
//! The file is an array of blocks of `page_bytes` bytes. Block `b` records the pages
//! `b * E .. (b + 1) * E`, `E = (page_bytes - 32) / 8`, and has two slots, slot `s` at offset
//! `(2b + s) * page_bytes`, written in turn. Little-endian.
//!
//! ```text
//! offset size field
//!      0    4 crc32c   over the block index (8 bytes, LE) then bytes 4..page_bytes
//!      4    4 magic    "TLDG"
//!      8    8 block    the block index b (a slot at the wrong place does not validate)
//!     16    8 save     the save that wrote the slot: 1, 2, ... (never 0)
//!     24    8 zero     must be zero
//!     32    … lsns     E × u64: lsn of the newest durable version of page b*E + i; 0 = none
//! ```
//!
//! A block's lsns are those of its valid slot with the larger save. A save writes each block
//! that changed into the slot that does not hold its newest valid version, then flushes: a
//! crash tears at most the slot being written, and the other still holds the previous save.
//!
//! | slots                                 | reads as                                   |
//! |---------------------------------------|--------------------------------------------|
//! | one or both valid                     | the valid one with the larger save         |
//! | both zeros (or past the end)          | nothing known (never saved)                |
//! | one zeros, one not valid              | nothing known: the first save of the block was torn by a crash |
//! | neither zeros nor valid               | `Corruption` naming the file and offset     |
//!
//! Every lsn in the ledger is a lower bound of what is durable in the data file, whichever
//! save it came from, finished or not: the store records a write only after it returned, and
//! [`PageStore::save_ledger`](super::PageStore::save_ledger) flushes the data file before it
//! writes. So an older slot, or a damaged ledger read as "nothing known", only weakens the
//! check; it never makes a current page look lost.
//!
//! When it is saved: by every checkpoint and clean close, after the pages are durable and
//! before the header moves the redo point (`db/mod.rs`), and by a create before its header. A page written back since the last save and lost
//! still holds a version the ledger knows or a newer one, and its later changes are at or
//! after the redo point in force, so redo replays them.

use super::PageId;
use crate::checksum::crc32c_seeded;
use crate::error::{Error, Result};
use crate::io::{AlignedBuf, StorageFile};
use std::collections::BTreeSet;
use std::path::PathBuf;

pub use crate::files::LEDGER_FILE_NAME;

const CRC_OFFSET: usize = 0;
const MAGIC_OFFSET: usize = 4;
const BLOCK_OFFSET: usize = 8;
const SAVE_OFFSET: usize = 16;
const RESERVED_OFFSET: usize = 24;
/// Bytes before a slot's lsns.
pub const SLOT_HEADER_BYTES: usize = 32;
const MAGIC: &[u8; 4] = b"TLDG";

/// Whether one slot's bytes are a valid slot of `block`, and which save wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// All zeros: never written.
    Zeros,
    /// Valid, written by this save.
    Valid(u64),
    /// Anything else.
    Invalid,
}

fn decode_slot(block: u64, bytes: &[u8]) -> Slot {
    if bytes.iter().all(|&b| b == 0) {
        return Slot::Zeros;
    }
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let crc = u32::from_le_bytes(bytes[CRC_OFFSET..4].try_into().expect("4 bytes"));
    if crc != crc32c_seeded(block, &[&bytes[4..]])
        || &bytes[MAGIC_OFFSET..MAGIC_OFFSET + 4] != MAGIC
        || word(BLOCK_OFFSET) != block
        || word(SAVE_OFFSET) == 0
        || word(RESERVED_OFFSET) != 0
    {
        return Slot::Invalid;
    }
    Slot::Valid(word(SAVE_OFFSET))
}

/// The ledger in memory: every page's newest durable lsn, and the blocks changed since the
/// last save.
#[derive(Debug)]
pub struct Ledger {
    path: PathBuf,
    file: Box<dyn StorageFile>,
    block_bytes: usize,
    /// Lsns recorded per block.
    per_block: u64,
    /// Indexed by page id; pages past the end have none recorded.
    lsns: Vec<u64>,
    /// Per block, the slot holding its newest valid version, if any.
    newest: Vec<Option<u8>>,
    /// Blocks changed since the last save.
    dirty: BTreeSet<u64>,
    /// The largest save number found or written.
    save: u64,
    /// File offsets of the slots found neither zeros nor valid beside a usable one at load: a
    /// save torn by a crash, or damage (for `till check` to note).
    damaged: Vec<u64>,
    buf: AlignedBuf,
}

impl Ledger {
    /// An empty ledger in `file` (newly created, empty).
    pub fn new(path: PathBuf, file: Box<dyn StorageFile>, page_bytes: u32) -> Ledger {
        let block_bytes = page_bytes as usize;
        Ledger {
            path,
            file,
            block_bytes,
            per_block: ((block_bytes - SLOT_HEADER_BYTES) / 8) as u64,
            lsns: Vec::new(),
            newest: Vec::new(),
            dirty: BTreeSet::new(),
            save: 0,
            damaged: Vec::new(),
            buf: AlignedBuf::zeroed(block_bytes),
        }
    }

    /// Reads the ledger in `file` (see the table at the top of the file).
    pub fn load(path: PathBuf, file: Box<dyn StorageFile>, page_bytes: u32) -> Result<Ledger> {
        let mut ledger = Ledger::new(path, file, page_bytes);
        let len = ledger.file.len()?;
        let slot_bytes = ledger.block_bytes as u64;
        let blocks = len.div_ceil(2 * slot_bytes);
        let per_block = usize::try_from(ledger.per_block).expect("small");
        // Bounded by the file, itself bounded by the data file's largest page count.
        let mut slots = [
            AlignedBuf::zeroed(ledger.block_bytes),
            AlignedBuf::zeroed(ledger.block_bytes),
        ];
        for block in 0..blocks {
            let mut found = [Slot::Zeros; 2];
            for (s, buf) in slots.iter_mut().enumerate() {
                buf.fill(0);
                let offset = (2 * block + s as u64) * slot_bytes;
                let n = ledger.file.read_at(buf, offset)?;
                assert!(n <= buf.len(), "read_at returned more than asked");
                found[s] = decode_slot(block, buf);
            }
            for (s, slot) in found.iter().enumerate() {
                if *slot == Slot::Invalid {
                    ledger.damaged.push((2 * block + s as u64) * slot_bytes);
                }
            }
            let pick = match found {
                [Slot::Valid(a), Slot::Valid(b)] => Some(usize::from(b > a)),
                [Slot::Valid(_), _] => Some(0),
                [_, Slot::Valid(_)] => Some(1),
                [Slot::Zeros, _] | [_, Slot::Zeros] => None,
                [Slot::Invalid, Slot::Invalid] => {
                    return Err(Error::Corruption {
                        file: ledger.path.clone(),
                        offset: 2 * block * slot_bytes,
                        what: "both copies of a page ledger block are damaged",
                    });
                }
            };
            ledger
                .newest
                .push(pick.map(|s| u8::try_from(s).expect("0 or 1")));
            let start = ledger.lsns.len();
            ledger.lsns.resize(start + per_block, 0);
            if let Some(s) = pick {
                let Slot::Valid(save) = found[s] else {
                    unreachable!("picked a valid slot")
                };
                ledger.save = ledger.save.max(save);
                for (i, lsn) in slots[s][SLOT_HEADER_BYTES..]
                    .chunks_exact(8)
                    .take(per_block)
                    .enumerate()
                {
                    ledger.lsns[start + i] = u64::from_le_bytes(lsn.try_into().expect("8 bytes"));
                }
            }
        }
        ledger.check_invariants();
        Ok(ledger)
    }

    /// File offsets of the slots that did not validate at load beside a usable one (a save
    /// torn by a crash, or damage): the other slot's older save, or nothing, was read.
    #[must_use]
    pub fn damaged_slots(&self) -> &[u64] {
        &self.damaged
    }

    /// The lsn of the newest version of `id` known durable; 0 when none is.
    #[must_use]
    pub fn lsn(&self, id: PageId) -> u64 {
        usize::try_from(id.0)
            .ok()
            .and_then(|i| self.lsns.get(i))
            .copied()
            .unwrap_or(0)
    }

    /// The highest page with a version known durable, if any.
    #[must_use]
    pub fn highest_known(&self) -> Option<PageId> {
        self.lsns
            .iter()
            .rposition(|&lsn| lsn != 0)
            .map(|i| PageId(i as u64))
    }

    /// Records that a version of `id` with `lsn` was written (durable at the next flush of the
    /// data file, which every save makes first). Never lowers what is recorded.
    pub fn note(&mut self, id: PageId, lsn: u64) {
        let i = usize::try_from(id.0).expect("page ids fit in memory");
        if lsn <= self.lsn(id) {
            return;
        }
        if i >= self.lsns.len() {
            let per_block = usize::try_from(self.per_block).expect("small");
            let blocks = i / per_block + 1;
            self.lsns.resize(blocks * per_block, 0);
            self.newest.resize(blocks, None);
        }
        self.lsns[i] = lsn;
        self.dirty.insert(id.0 / self.per_block);
    }

    /// Whether anything was noted since the last save.
    #[must_use]
    pub fn is_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// Writes every changed block into its older slot and flushes the file. The caller has
    /// flushed the data file: the lsns saved must be durable there.
    pub fn save(&mut self) -> Result<()> {
        if self.dirty.is_empty() {
            return Ok(());
        }
        self.save += 1;
        let per_block = usize::try_from(self.per_block).expect("small");
        let mut written = Vec::with_capacity(self.dirty.len());
        for &block in &self.dirty {
            let b = usize::try_from(block).expect("in memory");
            let slot = match self.newest[b] {
                Some(0) => 1u8,
                _ => 0,
            };
            let buf = &mut self.buf;
            buf.fill(0);
            buf[MAGIC_OFFSET..MAGIC_OFFSET + 4].copy_from_slice(MAGIC);
            buf[BLOCK_OFFSET..BLOCK_OFFSET + 8].copy_from_slice(&block.to_le_bytes());
            buf[SAVE_OFFSET..SAVE_OFFSET + 8].copy_from_slice(&self.save.to_le_bytes());
            let lsns = &self.lsns[b * per_block..(b + 1) * per_block];
            for (at, lsn) in buf[SLOT_HEADER_BYTES..].chunks_exact_mut(8).zip(lsns) {
                at.copy_from_slice(&lsn.to_le_bytes());
            }
            let crc = crc32c_seeded(block, &[&buf[4..]]);
            buf[CRC_OFFSET..4].copy_from_slice(&crc.to_le_bytes());
            debug_assert_eq!(decode_slot(block, buf), Slot::Valid(self.save));
            let offset = (2 * block + u64::from(slot)) * self.block_bytes as u64;
            self.file.write_at(buf, offset)?;
            written.push((b, slot));
        }
        self.file.flush()?;
        for (b, slot) in written {
            self.newest[b] = Some(slot);
        }
        self.dirty.clear();
        Ok(())
    }

    /// Panics if the ledger's state is inconsistent.
    pub fn check_invariants(&self) {
        let per_block = usize::try_from(self.per_block).expect("small");
        assert!(self.per_block > 0);
        assert_eq!(self.lsns.len(), self.newest.len() * per_block);
        assert!(
            self.dirty
                .last()
                .is_none_or(|&b| b < self.newest.len() as u64),
            "a dirty block past the ledger's end"
        );
        assert_eq!(self.buf.len(), self.block_bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FlushMethod;
    use crate::io::{SimConfig, SimDisk, Storage};
    use std::path::Path;

    const PATH: &str = "/ledger.tdb";

    fn create(disk: &SimDisk) -> Ledger {
        let file = disk
            .create(Path::new(PATH), FlushMethod::Fdatasync)
            .expect("create");
        Ledger::new(PATH.into(), file, 4096)
    }

    fn load(disk: &SimDisk) -> Result<Ledger> {
        let file = disk
            .open(Path::new(PATH), FlushMethod::Fdatasync)
            .expect("open");
        Ledger::load(PATH.into(), file, 4096)
    }

    #[test]
    fn saved_lsns_load_back_and_only_ever_grow() {
        let disk = SimDisk::new(SimConfig::default());
        let mut ledger = create(&disk);
        ledger.note(PageId(3), 100);
        ledger.note(PageId(3), 90);
        ledger.note(PageId(2000), 7);
        assert_eq!(
            ledger.lsn(PageId(3)),
            100,
            "a smaller lsn lowered the record"
        );
        ledger.save().expect("save");
        ledger.note(PageId(3), 150);
        ledger.save().expect("save");
        let back = load(&disk).expect("load");
        assert_eq!(back.lsn(PageId(3)), 150);
        assert_eq!(back.lsn(PageId(2000)), 7);
        assert_eq!(back.lsn(PageId(4)), 0);
        assert_eq!(back.lsn(PageId(1 << 40)), 0);
    }

    #[test]
    fn a_torn_save_leaves_the_previous_one() {
        let disk = SimDisk::new(SimConfig::default());
        let mut ledger = create(&disk);
        ledger.note(PageId(3), 100);
        ledger.save().expect("save");
        ledger.note(PageId(3), 200);
        ledger.save().expect("save");
        // The third save goes to slot 0 (slot 1 holds the newest): garbage there, as a torn
        // write leaves it.
        let file = disk
            .open(Path::new(PATH), FlushMethod::Fdatasync)
            .expect("open");
        file.write_at(&[0xA5; 512], 0).expect("tear");
        let back = load(&disk).expect("load");
        assert_eq!(back.lsn(PageId(3)), 200);
    }

    #[test]
    fn a_torn_first_save_of_a_block_is_nothing_known() {
        let disk = SimDisk::new(SimConfig::default());
        let ledger = create(&disk);
        drop(ledger);
        let file = disk
            .open(Path::new(PATH), FlushMethod::Fdatasync)
            .expect("open");
        file.write_at(&[0xA5; 512], 4096 * 2)
            .expect("tear block 1 slot 0");
        let back = load(&disk).expect("load");
        assert_eq!(back.lsn(PageId(600)), 0);
    }

    #[test]
    fn both_slots_damaged_is_corruption_naming_the_file_and_offset() {
        let disk = SimDisk::new(SimConfig::default());
        let mut ledger = create(&disk);
        ledger.note(PageId(600), 5);
        ledger.save().expect("save");
        ledger.note(PageId(600), 6);
        ledger.save().expect("save");
        let file = disk
            .open(Path::new(PATH), FlushMethod::Fdatasync)
            .expect("open");
        file.write_at(&[0xA5; 8], 4096 * 2 + 100)
            .expect("damage slot 0");
        file.write_at(&[0xA5; 8], 4096 * 3 + 100)
            .expect("damage slot 1");
        match load(&disk) {
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!((file.as_path(), offset), (Path::new(PATH), 4096 * 2));
            }
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    #[test]
    fn a_slot_copied_to_another_block_does_not_validate() {
        let disk = SimDisk::new(SimConfig::default());
        let mut ledger = create(&disk);
        ledger.note(PageId(1), 5);
        ledger.save().expect("save");
        let file = disk
            .open(Path::new(PATH), FlushMethod::Fdatasync)
            .expect("open");
        let mut slot = vec![0; 4096];
        file.read_at(&mut slot, 0).expect("read");
        assert_eq!(decode_slot(0, &slot), Slot::Valid(1));
        assert_eq!(decode_slot(1, &slot), Slot::Invalid);
    }
}
