//! # Page format (data file versions 1 and 2)
//!
//! The data file is an array of fixed-size pages; page `n` lives at offset `n * page_bytes`.
//! Page 0 is never used (a zero page id means "none"), so a stray zero is never mistaken for a
//! page reference. Little-endian.
//!
//! ```text
//! offset size field
//!      0    4 crc32c     over the page id (8 bytes, LE) then bytes 4..page_bytes
//!      4    1 kind       1 Leaf · 2 Branch · 3 Overflow · 4 Free
//!      5    1 version    1 plain · 2 sealed (an encrypted database's: page/sealed.rs)
//!      6    2 zero       must be zero
//!      8    8 page_id    the page's own id (catches misdirected writes and reads)
//!     16    8 page_lsn   lsn of the last log record applied to this page
//!     24    … body       kind-specific (btree/node.rs for Leaf and Branch); in version 2 it
//!                        ends 40 bytes early, before the trailer, and is ciphertext on disk
//! ```
//!
//! A page is valid iff its crc matches (seeded with the id it was read as, so a page written at
//! the wrong offset does not validate), its `page_id` is that id, its kind and version are
//! known and the reserved bytes are zero. A page of all zeros was allocated but never written
//! and reads as [`PageState::Unwritten`]. A database's pages all have one version, which
//! its [`PageFormat`] names: the data file refuses a page of the other (`PageStore`).
//!
//! The write-ahead rule: a page goes to the data file only after the log is durable up to its
//! `page_lsn` (asserted in the buffer pool).

mod buffer_pool;
mod data_files;
mod doublewrite;
mod guard;
mod ledger;
mod sealed;
mod spill;
mod store;

pub use buffer_pool::{Backend, BufferPool, PageRead, PageWrite, PoolStats};
pub use data_files::DataFiles;
pub use doublewrite::{
    BATCH_HEADER_BYTES, Batch, BatchImage, BatchState, DOUBLEWRITE_FILE_NAME, Doublewrite,
    ENTRIES_MAX, PAGES_MAX_DEFAULT, RestoreAction, RestoreReport, restore_torn_pages,
};
pub use guard::{
    ATOMIC_CHECK_FILE, PageGuard, TornPageGuard, check_atomic_pages, choose_guard, data_file_method,
};
pub use ledger::LEDGER_FILE_NAME;
pub use sealed::TRAILER_BYTES;
pub use spill::{SPILL_FILE_NAME, SpillFile};
pub use store::{
    BATCH_PAGES_MAX, COALESCE_BYTES_MAX, CheckedImage, DATA_FILE_NAME, PAGE_COUNT_MAX, PageSlot,
    PageStore,
};

use crate::checksum::crc32c_seeded;
use crate::io::AlignedBuf;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// Bytes of the page header; the body follows.
pub const HEADER_BYTES: usize = 24;
const CRC_OFFSET: usize = 0;
const KIND_OFFSET: usize = CRC_OFFSET + size_of::<u32>();
const VERSION_OFFSET: usize = KIND_OFFSET + 1;
const RESERVED_OFFSET: usize = VERSION_OFFSET + 1;
const PAGE_ID_OFFSET: usize = RESERVED_OFFSET + 2;
const PAGE_LSN_OFFSET: usize = PAGE_ID_OFFSET + size_of::<u64>();
const _: () = assert!(PAGE_LSN_OFFSET + size_of::<u64>() == HEADER_BYTES);
/// The version of a plain page.
const VERSION: u8 = 1;
/// The version of a sealed page (an encrypted database's, `sealed.rs`).
const VERSION_SEALED: u8 = 2;

/// Smallest page size.
pub const PAGE_BYTES_MIN: u32 = 4096;
/// Largest page size.
pub const PAGE_BYTES_MAX: u32 = 64 * 1024;

/// A page number in the data file. Zero is never a valid page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PageId(pub u64);

impl PageId {
    /// The byte offset of this page in the data file.
    #[must_use]
    ///
    /// Saturates rather than overflowing: ids read from corrupt bytes can be huge, and the
    /// caller's range check against the file then refuses them.
    pub fn offset(self, page_bytes: u32) -> u64 {
        assert!(self.0 != 0, "page 0 is never read or written");
        self.0.saturating_mul(u64::from(page_bytes))
    }
}

/// Hashes page ids for the buffer pool's map with one multiplication instead of `SipHash`
/// (every page access looks its frame up under the map lock). Page ids are not chosen by an
/// adversary that could aim collisions at it.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PageIdHasher(u64);

impl std::hash::Hasher for PageIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write_u64(&mut self, id: u64) {
        // Fibonacci hashing: an odd multiplier spreads sequential ids over the high bits
        // (hashbrown's tag) and keeps the low bits (its bucket index) a permutation.
        self.0 = (self.0 ^ id).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
}

/// Builds [`PageIdHasher`]s.
pub(crate) type PageIdHash = std::hash::BuildHasherDefault<PageIdHasher>;

impl fmt::Display for PageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "page {}", self.0)
    }
}

/// The pages of one database: their size, and whether they are sealed (an encrypted
/// database's pages are version 2, whose body leaves room for the trailer: `sealed.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageFormat {
    page_bytes: u32,
    sealed: bool,
}

impl PageFormat {
    /// Plain pages (version 1) of `page_bytes`.
    #[must_use]
    pub fn plain(page_bytes: u32) -> PageFormat {
        PageFormat::new(page_bytes, false)
    }

    /// Pages of `page_bytes`, sealed (version 2) or plain (version 1).
    #[must_use]
    pub fn new(page_bytes: u32, sealed: bool) -> PageFormat {
        assert!(
            page_bytes.is_power_of_two() && (PAGE_BYTES_MIN..=PAGE_BYTES_MAX).contains(&page_bytes),
            "page size {page_bytes}"
        );
        PageFormat { page_bytes, sealed }
    }

    /// The page size.
    #[must_use]
    pub fn page_bytes(self) -> u32 {
        self.page_bytes
    }

    /// Whether the pages are sealed.
    #[must_use]
    pub fn is_sealed(self) -> bool {
        self.sealed
    }

    /// Bytes of a page's body: after the header, before the trailer of a sealed page.
    #[must_use]
    pub fn body_bytes(self) -> usize {
        let trailer = if self.sealed { TRAILER_BYTES } else { 0 };
        self.page_bytes as usize - HEADER_BYTES - trailer
    }

    fn version(self) -> u8 {
        if self.sealed { VERSION_SEALED } else { VERSION }
    }
}

/// What a page holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PageKind {
    /// A B+tree leaf: keys and values (or overflow references).
    Leaf = 1,
    /// A B+tree branch: separator keys and child page ids.
    Branch = 2,
    /// Part of a value too large for a leaf.
    Overflow = 3,
    /// On the free list, available for reuse.
    Free = 4,
}

impl PageKind {
    fn from_byte(b: u8) -> Option<PageKind> {
        match b {
            1 => Some(PageKind::Leaf),
            2 => Some(PageKind::Branch),
            3 => Some(PageKind::Overflow),
            4 => Some(PageKind::Free),
            _ => None,
        }
    }
}

/// Why bytes read as a page are not a valid page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageFault {
    /// The checksum does not match: a torn or corrupt page, or one written at another page's
    /// place (the crc is seeded with the id it is read as).
    BadCrc,
    /// The checksum matches, yet the header's `page_id` is another page's.
    WrongPageId,
    /// The checksum matches, yet the kind, version or reserved bytes are wrong.
    BadHeader,
    /// A valid page (or zeros) older than the version the ledger says was written there.
    LostWrite,
    /// The crc matches, yet the sealed page's tag does not: changed on purpose, or sealed
    /// under another database's key (an encrypted database's pages only).
    BadTag,
    /// A plain page in an encrypted database's data file, or a sealed one in a plain
    /// database's: never trusted as the other.
    WrongFormat,
}

impl PageFault {
    /// The text used in `Error::Corruption`.
    #[must_use]
    pub fn what(self) -> &'static str {
        match self {
            PageFault::BadCrc => "page checksum mismatch (torn or corrupt page)",
            PageFault::WrongPageId => "page holds another page's id (misdirected write)",
            PageFault::BadHeader => "page header has an unknown kind, version or reserved bytes",
            PageFault::LostWrite => {
                "page is older than the version last written there (a write the device \
                 acknowledged was lost, or an older copy of the data file)"
            }
            PageFault::BadTag => {
                "page failed authentication (its bytes were changed, or it was sealed under \
                 another key)"
            }
            PageFault::WrongFormat => {
                "page of another format than the database's (a plain page in an encrypted \
                 database, or a sealed one in a plain database)"
            }
        }
    }

    /// Every fault, for [`PageFault::of_text`].
    const ALL: [PageFault; 6] = [
        PageFault::BadCrc,
        PageFault::WrongPageId,
        PageFault::BadHeader,
        PageFault::LostWrite,
        PageFault::BadTag,
        PageFault::WrongFormat,
    ];

    /// The fault whose [`PageFault::what`] is `what`, if any.
    #[must_use]
    pub fn of_text(what: &str) -> Option<PageFault> {
        PageFault::ALL.into_iter().find(|f| f.what() == what)
    }

    /// True for a fault no tear, crash or lost write makes: a sealed page whose crc matches
    /// and whose tag fails was changed on purpose, and a page of the other format came from
    /// elsewhere. Never repaired in silence (from a doublewrite image or by redo): reported.
    #[must_use]
    pub fn never_torn(self) -> bool {
        matches!(self, PageFault::BadTag | PageFault::WrongFormat)
            && !crate::mutants::active("tampered-page-repaired")
    }
}

/// What bytes read from a page's place in the file are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageState {
    /// All zeros: allocated, never written.
    Unwritten,
    /// A valid page of this kind.
    Valid(PageKind),
}

/// One page in memory: an aligned buffer of `page_bytes` with typed header access.
pub struct PageBuf {
    id: PageId,
    buf: AlignedBuf,
    /// Set once the node layer has checked this version of the page; cleared by every
    /// mutable access, so a changed page is checked again before it is trusted.
    node_checked: AtomicBool,
    /// What the node layer derived from this version of the page for its searches (in
    /// memory only, never written; `btree/node.rs`): dropped by every mutable access.
    search_hints: OnceLock<SearchHints>,
}

/// What the node layer derived from one version of a page for its searches, kept with it in
/// memory (never written) until the page changes.
#[derive(Debug)]
pub struct SearchHints {
    /// The words a search narrows by (`btree/node/search.rs`).
    pub words: Box<[u32]>,
    /// A branch's children, by index: the frame each was last found in, plus one (0: not
    /// known). Guesses only, which the buffer pool checks before it trusts one
    /// ([`crate::page::BufferPool::locate`]); empty for a leaf.
    pub child_frames: Box<[AtomicU32]>,
}

impl Clone for SearchHints {
    fn clone(&self) -> Self {
        SearchHints {
            words: self.words.clone(),
            child_frames: self
                .child_frames
                .iter()
                .map(|frame| AtomicU32::new(frame.load(Ordering::Relaxed)))
                .collect(),
        }
    }
}

impl Clone for PageBuf {
    fn clone(&self) -> Self {
        PageBuf {
            id: self.id,
            buf: self.buf.clone(),
            node_checked: AtomicBool::new(self.node_checked.load(Ordering::Acquire)),
            search_hints: self.search_hints.clone(),
        }
    }
}

impl PageBuf {
    /// A fresh plain page of `kind`, zero body, lsn 0.
    #[must_use]
    pub fn new(id: PageId, kind: PageKind, page_bytes: u32) -> Self {
        PageBuf::formatted(id, kind, PageFormat::plain(page_bytes))
    }

    /// A fresh page of `kind` in `format`, zero body, lsn 0.
    #[must_use]
    pub fn formatted(id: PageId, kind: PageKind, format: PageFormat) -> Self {
        assert!(id.0 != 0, "page 0 is never used");
        let page_bytes = format.page_bytes();
        let mut page = PageBuf {
            id,
            buf: AlignedBuf::zeroed(page_bytes as usize),
            node_checked: AtomicBool::new(false),
            search_hints: OnceLock::new(),
        };
        page.buf[KIND_OFFSET] = kind as u8;
        page.buf[VERSION_OFFSET] = format.version();
        page.buf[PAGE_ID_OFFSET..PAGE_LSN_OFFSET].copy_from_slice(&id.0.to_le_bytes());
        page
    }

    /// Wraps bytes read from the place of page `id`, checking them. `Ok(None)` for an
    /// unwritten (all-zero) page.
    pub fn from_bytes(id: PageId, buf: AlignedBuf) -> Result<Option<PageBuf>, PageFault> {
        match Self::validate(id, &buf)? {
            PageState::Unwritten => Ok(None),
            PageState::Valid(_) => Ok(Some(PageBuf::from_bytes_unchecked(id, buf))),
        }
    }

    /// Wraps bytes its caller checked as page `id`.
    fn from_bytes_unchecked(id: PageId, buf: AlignedBuf) -> PageBuf {
        PageBuf {
            id,
            buf,
            node_checked: AtomicBool::new(false),
            search_hints: OnceLock::new(),
        }
    }

    /// A read-only copy of this version of the page that shares its bytes (no copy is made):
    /// the page copies them the next time it changes, so the copy keeps this version (see
    /// [`AlignedBuf::share`]). Whether the node layer checked it carries over; its search
    /// hints do not (a shared copy is read in place, not searched).
    #[must_use]
    pub fn share(&self) -> PageBuf {
        PageBuf {
            id: self.id,
            buf: self.buf.share(),
            node_checked: AtomicBool::new(self.node_checked.load(Ordering::Acquire)),
            search_hints: OnceLock::new(),
        }
    }

    /// Checks the bytes found at page `id`'s place.
    pub fn validate(id: PageId, bytes: &[u8]) -> Result<PageState, PageFault> {
        if bytes.iter().all(|&b| b == 0) {
            return Ok(PageState::Unwritten);
        }
        let stored =
            u32::from_le_bytes(bytes[CRC_OFFSET..KIND_OFFSET].try_into().expect("4 bytes"));
        let unchecked = crate::mutants::active("page-id-unchecked");
        let seed = if unchecked { 0 } else { id.0 };
        if stored != crc32c_seeded(seed, &[&bytes[KIND_OFFSET..]]) {
            return Err(PageFault::BadCrc);
        }
        let page_id = u64::from_le_bytes(
            bytes[PAGE_ID_OFFSET..PAGE_LSN_OFFSET]
                .try_into()
                .expect("8 bytes"),
        );
        if page_id != id.0 && !unchecked {
            return Err(PageFault::WrongPageId);
        }
        let kind = PageKind::from_byte(bytes[KIND_OFFSET]).ok_or(PageFault::BadHeader)?;
        let version = bytes[VERSION_OFFSET];
        if !matches!(version, VERSION | VERSION_SEALED)
            || bytes[RESERVED_OFFSET..PAGE_ID_OFFSET] != [0, 0]
        {
            return Err(PageFault::BadHeader);
        }
        Ok(PageState::Valid(kind))
    }

    /// Seals the page for writing: computes the crc over the current contents. Returns the
    /// bytes to write. A sealed page's bytes on disk come from [`PageBuf::seal_into`]; for a
    /// sealed page in memory this crc over its plaintext serves copies kept elsewhere (the
    /// spill file, under its own key), and for a doublewrite image held as read it is the crc
    /// the image carries.
    pub fn seal(&mut self) -> &AlignedBuf {
        let seed = if crate::mutants::active("page-id-unchecked") {
            0
        } else {
            self.id.0
        };
        let crc = crc32c_seeded(seed, &[&self.buf[KIND_OFFSET..]]);
        self.buf[CRC_OFFSET..KIND_OFFSET].copy_from_slice(&crc.to_le_bytes());
        debug_assert_eq!(
            Self::validate(self.id, &self.buf),
            Ok(PageState::Valid(self.kind()))
        );
        &self.buf
    }

    /// The page's id: where it lives in the data file.
    #[must_use]
    pub fn id(&self) -> PageId {
        self.id
    }

    /// What the page holds, from its header.
    #[must_use]
    pub fn kind(&self) -> PageKind {
        PageKind::from_byte(self.buf[KIND_OFFSET]).expect("in-memory pages have a valid kind")
    }

    /// Reformats the page as `kind` with an empty body, keeping its id and lsn.
    pub fn reset(&mut self, kind: PageKind) {
        self.search_hints = OnceLock::new();
        self.node_checked.store(false, Ordering::Release);
        self.buf[HEADER_BYTES..].fill(0);
        self.buf[KIND_OFFSET] = kind as u8;
    }

    /// Lsn of the last log record applied to this page.
    #[must_use]
    pub fn lsn(&self) -> u64 {
        u64::from_le_bytes(
            self.buf[PAGE_LSN_OFFSET..HEADER_BYTES]
                .try_into()
                .expect("8 bytes"),
        )
    }

    /// Stamps the lsn of the record that changed this page. Page lsns never go backwards.
    pub fn set_lsn(&mut self, lsn: u64) {
        assert!(
            lsn >= self.lsn(),
            "page {} lsn going backwards: {} -> {lsn}",
            self.id.0,
            self.lsn()
        );
        self.buf[PAGE_LSN_OFFSET..HEADER_BYTES].copy_from_slice(&lsn.to_le_bytes());
    }

    /// The page size.
    #[must_use]
    pub fn page_bytes(&self) -> usize {
        self.buf.len()
    }

    /// The kind-specific body (before the trailer of a sealed page).
    #[must_use]
    pub fn body(&self) -> &[u8] {
        &self.buf[HEADER_BYTES..self.body_end()]
    }

    /// The kind-specific body, for changing.
    pub fn body_mut(&mut self) -> &mut [u8] {
        self.node_checked.store(false, Ordering::Release);
        self.search_hints = OnceLock::new();
        let end = self.body_end();
        &mut self.buf[HEADER_BYTES..end]
    }

    /// Whether this is a sealed page (version 2), whose body ends before the trailer.
    #[must_use]
    pub fn is_sealed(&self) -> bool {
        self.buf[VERSION_OFFSET] == VERSION_SEALED
    }

    /// The page's format.
    #[must_use]
    pub fn format(&self) -> PageFormat {
        PageFormat::new(
            u32::try_from(self.buf.len()).expect("a page size"),
            self.is_sealed(),
        )
    }

    fn body_end(&self) -> usize {
        if self.is_sealed() {
            self.buf.len() - TRAILER_BYTES
        } else {
            self.buf.len()
        }
    }

    /// True when the node layer checked this version of the page.
    #[must_use]
    pub fn node_checked(&self) -> bool {
        self.node_checked.load(Ordering::Acquire)
    }

    /// The node layer's search hints for this version of the page, if it made them.
    #[must_use]
    pub fn search_hints(&self) -> Option<&SearchHints> {
        self.search_hints.get()
    }

    /// Asks the CPU to bring in what a search of the page reads first: its header, the slots
    /// that follow it (a leaf's, most of them), and its search hints (a hint only: a read
    /// finds the page's frame, then the page, its slots and the hints arrive together rather
    /// than one after the other).
    #[inline]
    pub fn prefetch_for_search(&self) {
        crate::io::prefetch(&self.buf[..192]);
        if let Some(hints) = self.search_hints.get() {
            crate::io::prefetch_spread(&hints.words, 8);
        }
    }

    /// Keeps the node layer's search hints for this version of the page (the first made
    /// wins: two readers that checked the same version made the same).
    pub fn set_search_hints(&self, hints: SearchHints) {
        let _ = self.search_hints.set(hints);
    }

    /// Records that the node layer checked this version of the page.
    pub fn set_node_checked(&self) {
        self.node_checked.store(true, Ordering::Release);
    }

    /// All bytes of the page (for page images in the log and the doublewrite area).
    #[must_use]
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }
}

impl fmt::Debug for PageBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "PageBuf({}, {:?}, lsn {}, {} B)",
            self.id.0,
            self.kind(),
            self.lsn(),
            self.buf.len()
        )
    }
}

impl Deref for PageBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf
    }
}

impl DerefMut for PageBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.node_checked.store(false, Ordering::Release);
        self.search_hints = OnceLock::new();
        &mut self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_id_hashes_spread_sequential_ids_over_tags_and_buckets() {
        use std::hash::BuildHasher;
        let hash = PageIdHash::default();
        let hashes: Vec<u64> = (1..=4096u64).map(|id| hash.hash_one(PageId(id))).collect();
        let distinct: std::collections::BTreeSet<_> = hashes.iter().collect();
        assert_eq!(distinct.len(), hashes.len(), "sequential ids collide");
        // hashbrown takes its 7-bit tag from the top bits and the bucket from the low bits.
        let tags: std::collections::BTreeSet<_> = hashes.iter().map(|h| h >> 57).collect();
        assert_eq!(tags.len(), 128, "tags: {}", tags.len());
        let buckets: std::collections::BTreeSet<_> = hashes.iter().map(|h| h & 1023).collect();
        assert!(
            buckets.len() >= 1000,
            "buckets of 1024 used: {}",
            buckets.len()
        );
    }

    #[test]
    fn seal_then_validate_round_trip() {
        let mut page = PageBuf::new(PageId(7), PageKind::Leaf, 4096);
        page.set_lsn(99);
        page.body_mut()[..5].copy_from_slice(b"hello");
        let bytes = page.seal().clone();
        let back = PageBuf::from_bytes(PageId(7), bytes)
            .expect("valid")
            .expect("written");
        assert_eq!(back.kind(), PageKind::Leaf);
        assert_eq!(back.lsn(), 99);
        assert_eq!(&back.body()[..5], b"hello");
    }

    /// Issue 24: the checksum alone rejects every flipped bit of the page's id field (before
    /// the id comparison runs), and it is seeded with the id the page is read as: the same
    /// bytes checksum differently at every other id.
    #[test]
    fn the_checksum_alone_rejects_every_flipped_bit_of_the_page_id() {
        let mut page = PageBuf::new(PageId(7), PageKind::Leaf, 4096);
        page.set_lsn(1234);
        let bytes = page.seal().clone();
        for byte in PAGE_ID_OFFSET..PAGE_LSN_OFFSET {
            for bit in 0..8 {
                let mut flipped = bytes.to_vec();
                flipped[byte] ^= 1 << bit;
                assert_eq!(
                    PageBuf::validate(PageId(7), &flipped),
                    Err(PageFault::BadCrc),
                    "bit {bit} of byte {byte}"
                );
            }
        }
        // Read at another id, the same bytes fail the checksum itself, not only the id check.
        for other in [0, 6, 8, 7 | 1 << 33] {
            assert_eq!(
                PageBuf::validate(PageId(other), &bytes),
                Err(PageFault::BadCrc),
                "page 7's bytes read as page {other}"
            );
        }
    }

    #[test]
    fn zero_page_is_unwritten() {
        assert_eq!(
            PageBuf::validate(PageId(3), &[0u8; 4096]),
            Ok(PageState::Unwritten)
        );
    }

    #[test]
    fn a_page_read_at_another_id_is_refused() {
        let mut page = PageBuf::new(PageId(7), PageKind::Branch, 4096);
        let bytes = page.seal().clone();
        // The crc is seeded with the id the page is read as, so this fails as BadCrc.
        assert_eq!(PageBuf::validate(PageId(8), &bytes), Err(PageFault::BadCrc));
    }

    #[test]
    fn every_bit_flip_in_a_sealed_page_is_detected() {
        let mut page = PageBuf::new(PageId(5), PageKind::Leaf, 4096);
        page.set_lsn(12);
        page.body_mut()[100] = 1;
        let good = page.seal().clone();
        for bit in (0..4096 * 8).step_by(7) {
            let mut bad = good.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(PageBuf::validate(PageId(5), &bad).is_err(), "bit {bit}");
        }
    }

    #[test]
    #[should_panic(expected = "lsn going backwards")]
    fn page_lsn_never_goes_backwards() {
        let mut page = PageBuf::new(PageId(1), PageKind::Leaf, 4096);
        page.set_lsn(10);
        page.set_lsn(9);
    }

    #[test]
    #[should_panic(expected = "page 0")]
    fn page_zero_is_never_used() {
        let _ = PageBuf::new(PageId(0), PageKind::Leaf, 4096);
    }
}
