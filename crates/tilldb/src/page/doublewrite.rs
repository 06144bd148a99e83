//! The doublewrite torn-page guard: every batch of pages goes first to `doublewrite.tdb`
//! (one write, one flush), then in place; recovery rewrites torn pages from the last batch.
//!
//! # Doublewrite file format (version 1)
//!
//! `doublewrite.tdb` in the database directory, preallocated with zeros to
//! `BATCH_HEADER_BYTES + pages_max * page_bytes`. It holds one batch, the last one written.
//! Little-endian.
//!
//! ```text
//! offset size  field
//!      0    8  magic       "TILLDW01"
//!      8    4  version     1
//!     12    4  page_bytes  of every image; equals the data file's
//!     16    8  sequence    batch number, +1 per batch (informational: correctness never
//!                          depends on it, and it restarts after a torn batch header)
//!     24    4  count       images in the batch, 1..=ENTRIES_MAX and at most pages_max
//!     28    4  zero
//!     32 12*n  entries     one per image, in image order, ids strictly increasing:
//!                            +0 8 page_id   nonzero
//!                            +8 4 page_crc  the image's own crc (page format offset 0)
//!      …    …  zero        the unused entries, up to CRC_OFFSET
//!   4092    4  crc32c      over bytes 0..4092
//!   4096    …  images      image i at 4096 + i * page_bytes: the sealed page, exactly the
//!                          bytes that go in place (self-validating through the page crc;
//!                          in an encrypted database, the page sealed once for both copies)
//! ```
//!
//! The batch header is valid iff its crc matches; a valid crc with impossible fields (bad
//! magic, version, sizes, ids) is [`Error::Corruption`]. Image `i` is valid iff it validates as
//! page `entries[i].page_id` and its crc equals `entries[i].page_crc`, which binds every image
//! to its batch: a stale image of an older batch left by a torn batch write never passes.
//!
//! # The write sequence ([`Doublewrite::write_pages`])
//!
//! ```text
//!   1 seal every page into the batch (PageStore::seal_into)      (memory)
//!   2 write header + images at offset 0 of doublewrite.tdb       ONE write
//!   3 flush doublewrite.tdb                                      ONE flush: the batch is durable
//!   4 write the same images in place in data.tdb (coalesced)     PageStore::write_images
//!   5 flush data.tdb                                             the batch may now be overwritten
//! ```
//!
//! A crash before 3 returns leaves the in-place pages untouched (step 4 never began), whatever
//! state the doublewrite file is in. A crash after 3 leaves a durable, valid batch holding the
//! new image of every page step 4 may have torn. So [`restore_torn_pages`] needs only the last
//! batch, and decides per image (the table at [`RestoreAction`]). A batch is never overwritten
//! before the previous one's in-place writes are flushed (step 5), and any failure poisons the
//! guard, so no later batch can break that rule.

use super::store::{PageSlot, PageStore};
use super::{CRC_OFFSET, KIND_OFFSET, PageBuf, PageId};
use crate::FlushMethod;
use crate::checksum::crc32c;
use crate::error::{Error, Result};
use crate::io::{AlignedBuf, Storage, StorageFile, parent_dir};
use std::path::{Path, PathBuf};

pub use crate::files::DOUBLEWRITE_FILE_NAME;

const MAGIC: [u8; 8] = *b"TILLDW01";
const VERSION: u32 = 1;
/// Bytes of the batch header block; images start here.
pub const BATCH_HEADER_BYTES: usize = 4096;
const MAGIC_OFFSET: usize = 0;
const VERSION_OFFSET: usize = MAGIC_OFFSET + MAGIC.len();
const PAGE_BYTES_OFFSET: usize = VERSION_OFFSET + size_of::<u32>();
const SEQUENCE_OFFSET: usize = PAGE_BYTES_OFFSET + size_of::<u32>();
const COUNT_OFFSET: usize = SEQUENCE_OFFSET + size_of::<u64>();
const ZERO_OFFSET: usize = COUNT_OFFSET + size_of::<u32>();
const ENTRIES_OFFSET: usize = ZERO_OFFSET + size_of::<u32>();
const ENTRY_BYTES: usize = size_of::<u64>() + size_of::<u32>();
/// Most images one batch holds: the entry table fits the header block.
pub const ENTRIES_MAX: usize = 256;
const BATCH_CRC_OFFSET: usize = BATCH_HEADER_BYTES - size_of::<u32>();
const _: () = assert!(ENTRIES_OFFSET == 32);
const _: () = assert!(ENTRIES_OFFSET + ENTRIES_MAX * ENTRY_BYTES <= BATCH_CRC_OFFSET);
const _: () = assert!(BATCH_HEADER_BYTES.is_multiple_of(crate::io::AlignedBuf::ALIGN));

/// Default images per batch: 64 pages (1 MiB of 16 KiB pages) amortize the flush well.
pub const PAGES_MAX_DEFAULT: usize = 64;

/// The doublewrite area: `doublewrite.tdb` and the batch buffer.
#[derive(Debug)]
pub struct Doublewrite {
    path: PathBuf,
    file: Box<dyn StorageFile>,
    page_bytes: u32,
    /// Images per batch; the file holds this many.
    pages_max: usize,
    /// Sequence number of the next batch.
    next_sequence: u64,
    /// A write or flush failed: a batch may be durable whose in-place writes are not, so no
    /// later batch may overwrite it. Reopen (and restore) to go on.
    poisoned: bool,
    /// Header block plus `pages_max` images, reused by every batch.
    buf: AlignedBuf,
}

/// What the doublewrite file holds.
#[derive(Debug, Clone)]
pub enum BatchState {
    /// All zeros: no batch was ever written.
    Empty,
    /// The header does not validate: the batch write was torn (or the header rotted), so the
    /// in-place writes never began.
    Torn,
    /// A valid batch header, with each image that validates.
    Valid(Batch),
}

/// The last doublewrite batch.
#[derive(Debug, Clone)]
pub struct Batch {
    /// The batch number from its header: +1 per batch, informational only (it restarts
    /// after a torn batch header).
    pub sequence: u64,
    /// In batch order (ids increasing); `page` is `None` for an image that does not validate.
    pub images: Vec<BatchImage>,
}

/// One image of a batch.
#[derive(Debug, Clone)]
pub struct BatchImage {
    /// The page the image is of, from the batch header's entry.
    pub id: PageId,
    /// The image as it lies in the batch (sealed, in an encrypted database), when it
    /// validates as that page and matches the entry's crc.
    pub page: Option<PageBuf>,
}

/// What [`restore_torn_pages`] found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// Sequence number of the last batch, if its header is valid.
    pub sequence: Option<u64>,
    /// True when the doublewrite header was torn (so nothing needed restoring).
    pub batch_torn: bool,
    /// Images that validate.
    pub images_valid: usize,
    /// Images that do not (a torn batch write, or bit rot): skipped.
    pub images_invalid: usize,
    /// Pages written back from their image, in id order.
    pub restored: Vec<PageId>,
}

/// What restore does with one valid image, by what the page's place holds.
///
/// | in place                        | action    | why                                        |
/// |---------------------------------|-----------|--------------------------------------------|
/// | `Missing` (past the end)        | `Restore` | the extension and the write were lost      |
/// | `Unwritten` (zeros)             | `Restore` | the in-place write was lost                |
/// | `Invalid` (torn, rotted)        | `Restore` | the in-place write was torn                |
/// | `Invalid`, a fault never torn   | (error)   | changed on purpose: `Corruption`, not here |
/// | `Valid`, lsn below the image's  | `Restore` | the in-place write was lost: old version   |
/// | `Valid`, lsn at or above        | `Keep`    | the write landed, or a later one did       |
///
/// Restoring is always safe: a batch is written only after the log is durable up to every
/// image's lsn (the WAL rule), so an image is never ahead of the log. A page whose fault no
/// tear makes ([`crate::page::PageFault::never_torn`]: a sealed page's tag, a page of the
/// other format) is reported by [`restore_torn_pages`] as `Corruption`, never overwritten in silence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestoreAction {
    /// Write the image in place: the page there is missing, torn or older.
    Restore,
    /// Leave the page in place: the batch's write landed, or a later one did.
    Keep,
}

impl RestoreAction {
    /// The table above.
    #[must_use]
    pub fn decide(in_place: &PageSlot, image_lsn: u64) -> RestoreAction {
        match in_place {
            PageSlot::Missing | PageSlot::Unwritten | PageSlot::Invalid(_) => {
                RestoreAction::Restore
            }
            PageSlot::Valid(page) if page.lsn() < image_lsn => RestoreAction::Restore,
            PageSlot::Valid(_) => RestoreAction::Keep,
        }
    }
}

/// Rewrites every page the last doublewrite batch shows to be torn or stale in place, then
/// flushes the data file. Idempotent; safe to crash and run again.
pub fn restore_torn_pages(store: &mut PageStore, dw: &Doublewrite) -> Result<RestoreReport> {
    restore_torn_pages_with(store, dw, &mut || Ok(()))
}

/// [`restore_torn_pages`], calling `before_write` once before the first page is written (a
/// writer takes the readers' lock there: `db/readers.rs`).
pub fn restore_torn_pages_with(
    store: &mut PageStore,
    dw: &Doublewrite,
    before_write: &mut dyn FnMut() -> Result<()>,
) -> Result<RestoreReport> {
    assert_eq!(
        store.page_bytes(),
        dw.page_bytes,
        "one page size per database"
    );
    let mut report = RestoreReport::default();
    let batch = match dw.read_batch()? {
        BatchState::Empty => return Ok(report),
        BatchState::Torn => {
            report.batch_torn = true;
            return Ok(report);
        }
        BatchState::Valid(batch) => batch,
    };
    report.sequence = Some(batch.sequence);
    let count = batch.images.len();
    assert!(count <= dw.pages_max, "decoded batch is bounded");
    for (i, image) in batch.images.into_iter().enumerate() {
        let Some(page) = image.page else {
            report.images_invalid += 1;
            continue;
        };
        report.images_valid += 1;
        assert_eq!(page.id(), image.id);
        // An image whose crc matches but whose tag fails was changed on purpose: never
        // written in place, and never skipped in silence.
        let checked = store.check_image(page).map_err(|fault| Error::Corruption {
            file: dw.path.clone(),
            offset: (BATCH_HEADER_BYTES + i * dw.page_bytes as usize) as u64,
            what: fault.what(),
        })?;
        let in_place = store.inspect(image.id)?;
        if let PageSlot::Invalid(fault) = in_place
            && fault.never_torn()
        {
            return Err(Error::Corruption {
                file: store.path().to_path_buf(),
                offset: image.id.offset(dw.page_bytes),
                what: fault.what(),
            });
        }
        if RestoreAction::decide(&in_place, checked.lsn()) == RestoreAction::Restore {
            if report.restored.is_empty() {
                before_write()?;
            }
            store.extend_to(image.id.0 + 1)?;
            store.write_image(checked)?;
            report.restored.push(image.id);
        }
    }
    if !report.restored.is_empty() {
        store.flush()?;
    }
    assert_eq!(report.images_valid + report.images_invalid, count);
    assert!(report.restored.len() <= report.images_valid);
    Ok(report)
}

impl Doublewrite {
    /// Creates `doublewrite.tdb` in `dir`, zero-filled for `pages_max` images, and makes it and
    /// its name durable.
    pub fn create(
        storage: &dyn Storage,
        dir: &Path,
        method: FlushMethod,
        page_bytes: u32,
        pages_max: usize,
    ) -> Result<Doublewrite> {
        assert!(
            (1..=ENTRIES_MAX).contains(&pages_max),
            "pages_max {pages_max} not in 1..={ENTRIES_MAX}"
        );
        let path = dir.join(DOUBLEWRITE_FILE_NAME);
        let file = storage.create(&path, method)?;
        let dw = Doublewrite::new(path, file, page_bytes, pages_max, 1);
        dw.file.allocate_zeroed(0, dw.buf.len() as u64)?;
        dw.file.flush()?;
        storage.flush_dir(&parent_dir(&dw.path))?;
        dw.check_invariants();
        Ok(dw)
    }

    /// Opens the existing `doublewrite.tdb` in `dir`; its length says how many images a batch
    /// holds. The last batch is read by [`restore_torn_pages`].
    pub fn open(
        storage: &dyn Storage,
        dir: &Path,
        method: FlushMethod,
        page_bytes: u32,
    ) -> Result<Doublewrite> {
        let path = dir.join(DOUBLEWRITE_FILE_NAME);
        let file = storage.open(&path, method)?;
        let len = file.len()?;
        let image_room = len.saturating_sub(BATCH_HEADER_BYTES as u64) / u64::from(page_bytes);
        if image_room == 0 {
            return Err(Error::Corruption {
                file: path,
                offset: len,
                what: "doublewrite file shorter than a batch of one page",
            });
        }
        let pages_max = usize::try_from(image_room)
            .unwrap_or(usize::MAX)
            .min(ENTRIES_MAX);
        let mut dw = Doublewrite::new(path, file, page_bytes, pages_max, 1);
        if let BatchState::Valid(batch) = dw.read_batch()? {
            dw.next_sequence = batch.sequence + 1;
        }
        dw.check_invariants();
        Ok(dw)
    }

    fn new(
        path: PathBuf,
        file: Box<dyn StorageFile>,
        page_bytes: u32,
        pages_max: usize,
        next_sequence: u64,
    ) -> Self {
        assert!(page_bytes.is_power_of_two());
        assert!((super::PAGE_BYTES_MIN..=super::PAGE_BYTES_MAX).contains(&page_bytes));
        if let Some(align) = file.direct_align() {
            assert!(
                page_bytes.is_multiple_of(align),
                "page size {page_bytes} is not a multiple of the direct-I/O alignment {align}"
            );
        }
        let buf = AlignedBuf::zeroed(BATCH_HEADER_BYTES + pages_max * page_bytes as usize);
        Doublewrite {
            path,
            file,
            page_bytes,
            pages_max,
            next_sequence,
            poisoned: false,
            buf,
        }
    }

    /// The doublewrite file's path, as errors name it.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Images one batch holds; [`Doublewrite::write_pages`] splits larger sets.
    #[must_use]
    pub fn pages_max(&self) -> usize {
        self.pages_max
    }

    /// True once a write or flush has failed.
    #[must_use]
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    /// Writes `pages` durably in place through the doublewrite area (the sequence at the top of
    /// the file), in batches of at most [`Doublewrite::pages_max`]. Sorts `pages` by id. Any
    /// failure poisons the guard (and the store, if it was the store's).
    pub fn write_pages(&mut self, store: &mut PageStore, pages: &mut [PageBuf]) -> Result<()> {
        if self.poisoned {
            return Err(Error::Poisoned);
        }
        assert_eq!(
            store.page_bytes(),
            self.page_bytes,
            "one page size per database"
        );
        pages.sort_unstable_by_key(PageBuf::id);
        for pair in pages.windows(2) {
            assert!(
                pair[0].id() != pair[1].id(),
                "{} twice in one batch",
                pair[0].id()
            );
        }
        // Checked before any I/O, so a bad batch never reaches the doublewrite file.
        if let Some(last) = pages.last() {
            assert!(
                last.id().0 < store.page_count(),
                "{} is past the end ({} pages): extend_to first",
                last.id(),
                store.page_count()
            );
        }
        for batch in pages.chunks_mut(self.pages_max) {
            let result = self.write_one_batch(store, batch);
            if result.is_err() {
                self.poisoned = true;
            }
            result?;
        }
        Ok(())
    }

    /// Steps 1-5 of the write sequence for one batch.
    fn write_one_batch(&mut self, store: &mut PageStore, pages: &mut [PageBuf]) -> Result<()> {
        assert!(!pages.is_empty());
        assert!(
            pages.len() <= self.pages_max,
            "batch of {} pages",
            pages.len()
        );
        let sequence = self.next_sequence;
        let len = self.encode_batch(store, sequence, pages);
        self.file.write_at(&self.buf[..len], 0)?;
        // The one flush: only a durable batch may back the in-place writes below.
        if !crate::mutants::active("skip-doublewrite-flush") {
            self.file.flush()?;
        }
        store.write_images(pages, &self.buf[BATCH_HEADER_BYTES..len])?;
        // The next batch overwrites this one, so these pages must be durable first.
        store.flush()?;
        self.next_sequence = sequence + 1;
        Ok(())
    }

    /// Seals `pages` (sorted, distinct) as `store` writes them and lays the batch out in
    /// `self.buf`; returns its length in bytes.
    fn encode_batch(&mut self, store: &PageStore, sequence: u64, pages: &mut [PageBuf]) -> usize {
        let page_bytes = self.page_bytes as usize;
        let count = pages.len();
        assert!(count <= ENTRIES_MAX);
        let header = &mut self.buf[..BATCH_HEADER_BYTES];
        header.fill(0);
        header[MAGIC_OFFSET..VERSION_OFFSET].copy_from_slice(&MAGIC);
        header[VERSION_OFFSET..PAGE_BYTES_OFFSET].copy_from_slice(&VERSION.to_le_bytes());
        header[PAGE_BYTES_OFFSET..SEQUENCE_OFFSET].copy_from_slice(&self.page_bytes.to_le_bytes());
        header[SEQUENCE_OFFSET..COUNT_OFFSET].copy_from_slice(&sequence.to_le_bytes());
        let count_u32 = u32::try_from(count).expect("at most ENTRIES_MAX");
        header[COUNT_OFFSET..ZERO_OFFSET].copy_from_slice(&count_u32.to_le_bytes());
        for (i, page) in pages.iter_mut().enumerate() {
            assert_eq!(
                page.page_bytes(),
                page_bytes,
                "{} has the wrong size",
                page.id()
            );
            assert!(page.id().0 != 0, "page 0 is never written");
            let image = BATCH_HEADER_BYTES + i * page_bytes;
            store.seal_into(page, &mut self.buf[image..image + page_bytes]);
            let entry = ENTRIES_OFFSET + i * ENTRY_BYTES;
            self.buf[entry..entry + 8].copy_from_slice(&page.id().0.to_le_bytes());
            self.buf
                .copy_within(image + CRC_OFFSET..image + KIND_OFFSET, entry + 8);
        }
        let crc = crc32c(&self.buf[..BATCH_CRC_OFFSET]);
        self.buf[BATCH_CRC_OFFSET..BATCH_HEADER_BYTES].copy_from_slice(&crc.to_le_bytes());
        let len = BATCH_HEADER_BYTES + count * page_bytes;
        debug_assert!(matches!(
            decode_header(
                &self.buf[..BATCH_HEADER_BYTES],
                self.page_bytes,
                self.pages_max
            ),
            Ok(Some(_))
        ));
        len
    }

    /// Reads the last batch back.
    pub fn read_batch(&self) -> Result<BatchState> {
        let mut header = AlignedBuf::zeroed(BATCH_HEADER_BYTES);
        let n = self.file.read_at(&mut header, 0)?;
        assert!(n <= header.len());
        if header.iter().all(|&b| b == 0) {
            return Ok(BatchState::Empty);
        }
        let decoded = decode_header(&header, self.page_bytes, self.pages_max)
            .map_err(|(offset, what)| self.corrupt(offset, what))?;
        let Some((sequence, entries)) = decoded else {
            return Ok(BatchState::Torn);
        };
        let page_bytes = self.page_bytes as usize;
        let mut images = AlignedBuf::zeroed(entries.len() * page_bytes);
        let n = self.file.read_at(&mut images, BATCH_HEADER_BYTES as u64)?;
        assert!(n <= images.len());
        let images = entries
            .iter()
            .enumerate()
            .map(|(i, &(id, crc))| {
                let bytes = AlignedBuf::from_slice_padded(
                    &images[i * page_bytes..(i + 1) * page_bytes],
                    page_bytes,
                );
                let bound = bytes[CRC_OFFSET..KIND_OFFSET] == crc.to_le_bytes();
                let page = match PageBuf::from_bytes(id, bytes) {
                    Ok(Some(page)) if bound => Some(page),
                    _ => None,
                };
                BatchImage { id, page }
            })
            .collect();
        Ok(BatchState::Valid(Batch { sequence, images }))
    }

    fn corrupt(&self, offset: usize, what: &'static str) -> Error {
        Error::Corruption {
            file: self.path.clone(),
            offset: offset as u64,
            what,
        }
    }

    /// Panics if the guard's state is inconsistent.
    pub fn check_invariants(&self) {
        assert!((1..=ENTRIES_MAX).contains(&self.pages_max));
        assert!(self.next_sequence >= 1);
        assert_eq!(
            self.buf.len(),
            BATCH_HEADER_BYTES + self.pages_max * self.page_bytes as usize
        );
    }
}

/// A decoded batch header: its sequence number and `(page id, page crc)` per image.
type DecodedHeader = (u64, Vec<(PageId, u32)>);

/// Decodes a non-zero batch header block. `Ok(None)`: the crc does not match (torn).
/// `Err((offset, what))`: the crc matches but the fields are impossible.
fn decode_header(
    block: &[u8],
    page_bytes: u32,
    pages_max: usize,
) -> Result<Option<DecodedHeader>, (usize, &'static str)> {
    assert_eq!(block.len(), BATCH_HEADER_BYTES);
    let u32_at = |o: usize| u32::from_le_bytes(block[o..o + 4].try_into().expect("4 bytes"));
    let u64_at = |o: usize| u64::from_le_bytes(block[o..o + 8].try_into().expect("8 bytes"));
    if u32_at(BATCH_CRC_OFFSET) != crc32c(&block[..BATCH_CRC_OFFSET]) {
        return Ok(None);
    }
    if block[MAGIC_OFFSET..VERSION_OFFSET] != MAGIC {
        return Err((MAGIC_OFFSET, "not a tilldb doublewrite file (bad magic)"));
    }
    if u32_at(VERSION_OFFSET) != VERSION {
        return Err((
            VERSION_OFFSET,
            "doublewrite version not supported by this build",
        ));
    }
    if u32_at(PAGE_BYTES_OFFSET) != page_bytes {
        return Err((PAGE_BYTES_OFFSET, "doublewrite batch of another page size"));
    }
    let count = u32_at(COUNT_OFFSET) as usize;
    if count == 0 || count > pages_max {
        return Err((COUNT_OFFSET, "doublewrite batch count out of range"));
    }
    let entries_end = ENTRIES_OFFSET + count * ENTRY_BYTES;
    let zeros = block[ZERO_OFFSET..ENTRIES_OFFSET]
        .iter()
        .chain(&block[entries_end..BATCH_CRC_OFFSET]);
    if zeros.into_iter().any(|&b| b != 0) {
        return Err((ZERO_OFFSET, "doublewrite header reserved bytes not zero"));
    }
    let mut entries = Vec::with_capacity(count);
    for i in 0..count {
        let entry = ENTRIES_OFFSET + i * ENTRY_BYTES;
        let id = PageId(u64_at(entry));
        let previous = entries.last().map_or(0, |&(PageId(p), _)| p);
        if id.0 <= previous {
            return Err((entry, "doublewrite page ids not increasing"));
        }
        entries.push((id, u32_at(entry + 8)));
    }
    assert_eq!(entries.len(), count);
    Ok(Some((u64_at(SEQUENCE_OFFSET), entries)))
}

#[cfg(test)]
mod tests;
