//! # Data file layout (data file version 1)
//!
//! The data file is `data.tdb` in the database directory: an array of page places, page `n` at
//! offset `n * page_bytes`. Each place holds a page in the format of `page/mod.rs`, or zeros.
//!
//! ```text
//! offset                    size        holds
//!      0                    page_bytes  page 0: never used, always zeros (0 means "no page")
//!      1 * page_bytes       page_bytes  page 1
//!      n * page_bytes       page_bytes  page n
//!      page_count * pb      -           end of the file (a torn extension may leave a partial
//!                                       place here; it reads as zeros + whatever landed)
//! ```
//!
//! What a read of page `n` finds, and what [`PageStore::read`] returns for it:
//!
//! | bytes at `n * page_bytes`                      | [`PageSlot`]  | `read`                  |
//! |------------------------------------------------|---------------|-------------------------|
//! | past the end of the file                       | `Missing`     | `Ok(None)`              |
//! | all zeros (allocated, never written)           | `Unwritten`   | `Ok(None)`              |
//! | a valid page with id `n`                       | `Valid`       | `Ok(Some(page))`        |
//! | anything else (torn, bit flips, misdirected)   | `Invalid`     | `Err(Corruption)` naming the file and offset `n * page_bytes` |
//! | any of the above older than the ledger's lsn   | `Invalid`     | `Err(Corruption)`: a lost write |
//!
//! A place cut short by the end of the file is read as if padded with zeros: it is `Unwritten`
//! if what exists is zeros, and `Invalid` otherwise (a valid page is never cut short).
//!
//! Rules, each asserted where it is enforced:
//! - The file grows only through [`PageStore::extend_to`], which writes zeros and flushes, so
//!   a later overwrite plus `fdatasync` has no metadata to write. A page is written only into a
//!   place that exists (`id < page_count`), so only into zeros made durable.
//! - Hence garbage can sit only past the last extension that returned: a power cut during
//!   `extend_to` may land its zeros torn (TESTPLAN F2 writes garbage into sectors being
//!   written). No page there was ever allocated, so nothing refers to it; the engine formats a
//!   page past its durable page count before reading it, and must not report such a place
//!   as corruption.
//! - Every buffer is an [`AlignedBuf`] and every offset a multiple of `page_bytes`, itself a
//!   multiple of the direct-I/O alignment, so the direct flush methods work.
//! - Every page written is noted in the page ledger (`ledger.rs`, `ledger.tdb` beside the data
//!   file) with its lsn; [`PageStore::save_ledger`] makes the notes durable. A read that
//!   finds an older version than the ledger's (or zeros, or nothing) is `Invalid(LostWrite)`,
//!   so `read` refuses it like a torn page.
//! - A failed write or flush poisons the store: every later write and flush returns
//!   [`Error::Poisoned`] (a flush is never retried; recovery runs at reopen). Reads go on.
//! - An encrypted database's store holds its page keys ([`PageStore::with_keys`]): every page
//!   it writes is sealed (`sealed.rs`) into its scratch buffer under this open's epoch, never
//!   in the page itself, and every page it reads is opened. A page of the other format than
//!   the store's is `Invalid(WrongFormat)`, so a plain page slipped into an encrypted file is
//!   never trusted (nor a sealed one in a plain file).

use super::ledger::{LEDGER_FILE_NAME, Ledger};
use super::{PAGE_BYTES_MAX, PAGE_BYTES_MIN, PageBuf, PageFault, PageFormat, PageId};
use crate::FlushMethod;
use crate::crypt::{DatabaseKeys, PageKeys};
use crate::error::{Error, Result};
use crate::io::{AlignedBuf, Storage, StorageFile, parent_dir};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use crate::files::DATA_FILE_NAME;

/// Most bytes one coalesced write carries. Copying adjacent pages into one buffer is cheaper
/// than a system call each up to about this size; beyond it the copy stops paying.
pub const COALESCE_BYTES_MAX: usize = 1 << 20;
const _: () = assert!(COALESCE_BYTES_MAX >= PAGE_BYTES_MAX as usize);

/// Most pages one [`PageStore::write_batch`] takes; more is a runaway caller.
pub const BATCH_PAGES_MAX: usize = 1 << 16;

/// Most pages a data file may hold: 2^40 places, so `id * page_bytes` never overflows a u64.
pub const PAGE_COUNT_MAX: u64 = 1 << 40;
const _: () = assert!(PAGE_COUNT_MAX.checked_mul(PAGE_BYTES_MAX as u64).is_some());

/// What the place of one page holds (see the table at the top of the file).
#[derive(Debug, Clone)]
pub enum PageSlot {
    /// Past the end of the file.
    Missing,
    /// All zeros: allocated, never written.
    Unwritten,
    /// A valid page.
    Valid(PageBuf),
    /// Bytes that are not a valid page of this id.
    Invalid(PageFault),
}

/// A page image as it lies on disk (sealed, in an encrypted database) that
/// [`PageStore::check_image`] found to be a page of this store: its format, its tag.
#[derive(Debug)]
pub struct CheckedImage(PageBuf);

impl CheckedImage {
    /// The page's lsn, from its plain header.
    #[must_use]
    pub fn lsn(&self) -> u64 {
        self.0.lsn()
    }
}

/// The data file: pages read and written in place at `id * page_bytes`.
#[derive(Debug)]
pub struct PageStore {
    path: PathBuf,
    file: Box<dyn StorageFile>,
    page_bytes: u32,
    /// Whole page places in the file, page 0 included. Only grows.
    page_count: u64,
    /// A write or flush failed; see the module rules.
    poisoned: bool,
    /// The failure that poisoned the file, for the errors later calls get.
    poison_cause: Option<String>,
    /// Reused for coalesced writes; allocated on first use.
    scratch: Option<AlignedBuf>,
    /// The newest lsn written for each page (`ledger.rs`): an older one read back is a lost
    /// write.
    ledger: Ledger,
    /// An encrypted database's page keys: this open's epoch, and the keys of the epochs read.
    keys: Option<PageKeys>,
}

impl PageStore {
    /// Creates `data.tdb` in `dir` holding only page 0 (zeros), flushes it and its directory
    /// entry. Fails if the file exists.
    pub fn create(
        storage: &dyn Storage,
        dir: &Path,
        method: FlushMethod,
        page_bytes: u32,
    ) -> Result<PageStore> {
        let path = dir.join(DATA_FILE_NAME);
        let file = storage.create(&path, method)?;
        let ledger_path = dir.join(LEDGER_FILE_NAME);
        let ledger_file = storage.create(&ledger_path, method)?;
        let ledger = Ledger::new(ledger_path, ledger_file, page_bytes);
        let mut store = PageStore::new(path, file, page_bytes, 0, ledger);
        store.extend_to(1)?;
        storage.flush_dir(&parent_dir(&store.path))?;
        assert_eq!(store.page_count, 1);
        store.check_invariants();
        Ok(store)
    }

    /// Opens the existing `data.tdb` in `dir`. A trailing partial place (a torn extension) is
    /// not counted in [`PageStore::page_count`]; the next [`PageStore::extend_to`] zeroes it.
    pub fn open(
        storage: &dyn Storage,
        dir: &Path,
        method: FlushMethod,
        page_bytes: u32,
    ) -> Result<PageStore> {
        let path = dir.join(DATA_FILE_NAME);
        let file = storage.open(&path, method)?;
        let len = file.len()?;
        let page_count = len / u64::from(page_bytes);
        if page_count > PAGE_COUNT_MAX {
            return Err(Error::Corruption {
                file: path,
                offset: len,
                what: "data file longer than the most pages tilldb addresses",
            });
        }
        let ledger_path = dir.join(LEDGER_FILE_NAME);
        if !storage.exists(&ledger_path)? {
            return Err(Error::Corruption {
                file: ledger_path,
                offset: 0,
                what: "the page ledger is missing (every database has one beside its data \
                       file since 2026-11-23; restore it with the data file, or create an \
                       empty file of that name to open without lost-write detection for \
                       the pages written so far)",
            });
        }
        let ledger_file = storage.open(&ledger_path, method)?;
        let ledger = Ledger::load(ledger_path, ledger_file, page_bytes)?;
        // Every page the ledger knows was durable in the data file before the ledger said so
        // (a save flushes the data file first), and the file never shrinks: a file that ends
        // before one was cut short (copied in part, truncated by hand). Refused here, before
        // recovery writes anything, rather than at the first read of a missing page.
        if let Some(highest) = ledger.highest_known()
            && highest.0 >= page_count
        {
            return Err(Error::Corruption {
                file: path,
                offset: len,
                what: "the data file ends before pages the page ledger says were written (truncated or copied in part)",
            });
        }
        let store = PageStore::new(path, file, page_bytes, page_count, ledger);
        store.check_invariants();
        Ok(store)
    }

    fn new(
        path: PathBuf,
        file: Box<dyn StorageFile>,
        page_bytes: u32,
        count: u64,
        ledger: Ledger,
    ) -> Self {
        assert!(
            page_bytes.is_power_of_two(),
            "page size {page_bytes} is not a power of two"
        );
        assert!(
            (PAGE_BYTES_MIN..=PAGE_BYTES_MAX).contains(&page_bytes),
            "page size {page_bytes} out of range"
        );
        if let Some(align) = file.direct_align() {
            // Guaranteed by `IoGeometry` at open; a failure here is a bug, not a bad device.
            assert!(
                page_bytes.is_multiple_of(align),
                "page size {page_bytes} is not a multiple of the direct-I/O alignment {align}"
            );
        }
        PageStore {
            path,
            file,
            page_bytes,
            page_count: count,
            poisoned: false,
            poison_cause: None,
            scratch: None,
            ledger,
            keys: None,
        }
    }

    /// This store, sealing and opening its pages with the database's `keys` (none: a plain
    /// database) under a new epoch whose salt the storage draws.
    pub fn with_keys(
        mut self,
        storage: &dyn Storage,
        keys: Option<Arc<DatabaseKeys>>,
    ) -> Result<PageStore> {
        let Some(keys) = keys else {
            return Ok(self);
        };
        let keys =
            PageKeys::new_epoch(keys, |salt| storage.fill_random(salt)).map_err(|reason| {
                Error::KeyUnavailable {
                    dir: parent_dir(&self.path),
                    reason,
                }
            })?;
        self.keys = Some(keys);
        Ok(self)
    }

    /// The format of the pages this store reads and writes.
    #[must_use]
    pub fn format(&self) -> PageFormat {
        PageFormat::new(self.page_bytes, self.keys.is_some())
    }

    /// The data file's path, as errors name it.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The page size.
    #[must_use]
    pub fn page_bytes(&self) -> u32 {
        self.page_bytes
    }

    /// Whole page places in the file, page 0 included: pages `1..page_count` can be written.
    #[must_use]
    pub fn page_count(&self) -> u64 {
        self.page_count
    }

    /// True once a write or flush has failed.
    #[must_use]
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    /// Reads page `id`: `None` if it was never written or lies past the end of the file.
    /// Bytes that are not a valid page are [`Error::Corruption`], never returned as data.
    pub fn read(&self, id: PageId) -> Result<Option<PageBuf>> {
        match self.inspect(id)? {
            PageSlot::Missing | PageSlot::Unwritten => Ok(None),
            PageSlot::Valid(page) => Ok(Some(page)),
            PageSlot::Invalid(fault) => Err(Error::Corruption {
                file: self.path.clone(),
                offset: id.offset(self.page_bytes),
                what: fault.what(),
            }),
        }
    }

    /// File offsets in `ledger.tdb` of the page ledger's slots that did not validate when it
    /// was read beside a usable one: a save torn by a crash, or damage (`till check` notes
    /// them).
    #[must_use]
    pub fn ledger_damaged_slots(&self) -> &[u64] {
        self.ledger.damaged_slots()
    }

    /// Reads the place of page `id` and says what it holds, invalid pages included (for torn
    /// page repair and checks).
    pub fn inspect(&self, id: PageId) -> Result<PageSlot> {
        let offset = id.offset(self.page_bytes);
        let mut buf = AlignedBuf::zeroed(self.page_bytes as usize);
        let n = self.file.read_at(&mut buf, offset)?;
        assert!(n <= buf.len(), "read_at returned more than asked");
        if n == 0 {
            if id.0 < self.page_count {
                // Only someone else can shrink the file: tilldb never truncates it.
                return Err(Error::Corruption {
                    file: self.path.clone(),
                    offset,
                    what: "data file shorter than its page count (truncated while open?)",
                });
            }
            return Ok(self.unless_lost(id, PageSlot::Missing));
        }
        // Fewer bytes only at the end of the file: the rest of `buf` is still zero, as if the
        // place were padded (see the module table).
        debug_assert!(buf[n..].iter().all(|&b| b == 0));
        let page = match &self.keys {
            Some(keys) => PageBuf::open_sealed(id, buf, keys),
            None => PageBuf::from_bytes(id, buf).and_then(|page| match page {
                Some(page) if page.is_sealed() => Err(PageFault::WrongFormat),
                page => Ok(page),
            }),
        };
        Ok(match page {
            Ok(None) => self.unless_lost(id, PageSlot::Unwritten),
            Ok(Some(page)) => {
                assert_eq!(page.id(), id);
                self.unless_lost(id, PageSlot::Valid(page))
            }
            Err(fault) => PageSlot::Invalid(fault),
        })
    }

    /// `slot`, unless the ledger knows a newer version of `id` was written: then the write
    /// was lost and the place holds an older version, or none.
    fn unless_lost(&self, id: PageId, slot: PageSlot) -> PageSlot {
        let written = self.ledger.lsn(id);
        let found = match &slot {
            PageSlot::Valid(page) => page.lsn(),
            _ => 0,
        };
        if found < written && !crate::mutants::active("ledger-unchecked") {
            return PageSlot::Invalid(PageFault::LostWrite);
        }
        slot
    }

    /// Makes the ledger of written lsns durable (`ledger.rs`): flushes the data file, then
    /// writes the ledger's changed blocks and flushes it. A checkpoint calls this before its
    /// header moves the redo point past the log records that built those versions.
    pub fn save_ledger(&mut self) -> Result<()> {
        self.check_writable()?;
        if !self.ledger.is_dirty() {
            return Ok(());
        }
        let result = self.file.flush();
        self.poison_on_error(result)?;
        let result = self.ledger.save();
        self.poison_on_error(result)
    }

    /// The lsn of the newest version of `id` written (by this handle, or durable before it
    /// opened: the ledger); 0 when none is.
    #[must_use]
    pub fn written_lsn(&self, id: PageId) -> u64 {
        self.ledger.lsn(id)
    }

    /// Seals `page` and writes it in place. Durable after the next [`PageStore::flush`].
    pub fn write(&mut self, page: &mut PageBuf) -> Result<()> {
        self.check_writable()?;
        self.check_page(page);
        let offset = page.id().offset(self.page_bytes);
        let result = match &self.keys {
            None => self.file.write_at(page.seal(), offset),
            Some(keys) => {
                let out = &mut self.scratch.get_or_insert_with(Self::new_scratch)
                    [..self.page_bytes as usize];
                page.seal_into(keys, out);
                self.file.write_at(out, offset)
            }
        };
        self.poison_on_error(result)?;
        self.ledger.note(page.id(), page.lsn());
        Ok(())
    }

    /// The bytes `page` goes to disk as, into `out` (its size): sealed under this open's
    /// epoch in an encrypted database, its crc made in a plain one. The doublewrite area
    /// takes them, then hands them to [`PageStore::write_images`]: one seal for both copies.
    pub fn seal_into(&self, page: &mut PageBuf, out: &mut [u8]) {
        self.check_page(page);
        match &self.keys {
            None => out.copy_from_slice(page.seal()),
            Some(keys) => page.seal_into(keys, out),
        }
    }

    /// Writes pages already sealed ([`PageStore::seal_into`]) in place: `images` holds the
    /// bytes of `pages` (sorted by id, distinct) one after the other, and runs of adjacent
    /// ids go in one write each. Durable after the next [`PageStore::flush`].
    pub fn write_images(&mut self, pages: &[PageBuf], images: &[u8]) -> Result<()> {
        self.check_writable()?;
        let page_bytes = self.page_bytes as usize;
        assert_eq!(images.len(), pages.len() * page_bytes, "one image per page");
        for pair in pages.windows(2) {
            assert!(pair[0].id() < pair[1].id(), "images sorted by id, distinct");
        }
        let run_pages_max = COALESCE_BYTES_MAX / page_bytes;
        let mut start = 0;
        while start < pages.len() {
            self.check_page(&pages[start]);
            let mut end = start + 1;
            while end < pages.len()
                && end - start < run_pages_max
                && pages[end].id().0 == pages[end - 1].id().0 + 1
            {
                self.check_page(&pages[end]);
                end += 1;
            }
            let offset = pages[start].id().offset(self.page_bytes);
            let bytes = &images[start * page_bytes..end * page_bytes];
            debug_assert!(
                pages[start..end]
                    .iter()
                    .zip(bytes.chunks(page_bytes))
                    .all(|(p, b)| PageBuf::validate(p.id(), b).is_ok()),
                "an image that is not its page's"
            );
            let result = self.file.write_at(bytes, offset);
            self.poison_on_error(result)?;
            for page in &pages[start..end] {
                self.ledger.note(page.id(), page.lsn());
            }
            start = end;
        }
        Ok(())
    }

    /// Checks a page image read as it lies on disk (a doublewrite batch's: sealed in an
    /// encrypted database) as [`PageStore::read`] would check it in place: its format, and a
    /// sealed image's tag. Only a checked image can be written in place.
    pub fn check_image(&self, image: PageBuf) -> std::result::Result<CheckedImage, PageFault> {
        match &self.keys {
            Some(keys) => {
                PageBuf::open_sealed(image.id(), image.buf.clone(), keys)?;
            }
            None if image.is_sealed() => return Err(PageFault::WrongFormat),
            None => {}
        }
        Ok(CheckedImage(image))
    }

    /// Writes `image`, a page's bytes as they lie on disk (a doublewrite batch's image), in
    /// place unchanged.
    pub fn write_image(&mut self, image: CheckedImage) -> Result<()> {
        self.check_writable()?;
        let CheckedImage(mut image) = image;
        self.check_page(&image);
        // The crc over the bytes as they are: the one they carry, checked when read.
        let offset = image.id().offset(self.page_bytes);
        let result = self.file.write_at(image.seal(), offset);
        self.poison_on_error(result)?;
        self.ledger.note(image.id(), image.lsn());
        Ok(())
    }

    fn new_scratch() -> AlignedBuf {
        AlignedBuf::zeroed(COALESCE_BYTES_MAX)
    }

    /// Seals `pages` (their crc, in a plain database; sealed into the scratch buffer, in an
    /// encrypted one), sorts them by id and writes each in place, adjacent pages coalesced into
    /// one write of up to [`COALESCE_BYTES_MAX`]. Durable after the next [`PageStore::flush`].
    /// Two pages with one id in a batch is a bug (which would win?) and panics.
    pub fn write_batch(&mut self, pages: &mut [PageBuf]) -> Result<()> {
        self.check_writable()?;
        assert!(
            pages.len() <= BATCH_PAGES_MAX,
            "batch of {} pages exceeds {BATCH_PAGES_MAX}",
            pages.len()
        );
        pages.sort_unstable_by_key(PageBuf::id);
        for pair in pages.windows(2) {
            assert!(
                pair[0].id() != pair[1].id(),
                "{} twice in one batch",
                pair[0].id()
            );
        }
        for page in pages.iter_mut() {
            self.check_page(page);
            if self.keys.is_none() {
                page.seal();
            }
        }
        let run_pages_max = COALESCE_BYTES_MAX / self.page_bytes as usize;
        let mut start = 0;
        let mut writes = 0;
        while start < pages.len() {
            let mut end = start + 1;
            while end < pages.len()
                && end - start < run_pages_max
                && pages[end].id().0 == pages[end - 1].id().0 + 1
            {
                end += 1;
            }
            let result = self.write_run(&pages[start..end]);
            self.poison_on_error(result)?;
            for page in &pages[start..end] {
                self.ledger.note(page.id(), page.lsn());
            }
            start = end;
            writes += 1;
            assert!(writes <= pages.len(), "more writes than pages");
        }
        assert_eq!(start, pages.len());
        Ok(())
    }

    /// Seals `pages` and writes each in place with one atomic write
    /// ([`StorageFile::write_atomic_at`]): after a crash each page is old or new, never torn.
    /// The file must be open for direct I/O. Durable after the next [`PageStore::flush`].
    pub fn write_batch_atomic(&mut self, pages: &mut [PageBuf]) -> Result<()> {
        self.check_writable()?;
        for page in pages.iter_mut() {
            self.check_page(page);
            let offset = page.id().offset(self.page_bytes);
            let result = match &self.keys {
                None => self.file.write_atomic_at(page.seal(), offset),
                Some(keys) => {
                    let out = &mut self.scratch.get_or_insert_with(Self::new_scratch)
                        [..self.page_bytes as usize];
                    page.seal_into(keys, out);
                    self.file.write_atomic_at(out, offset)
                }
            };
            self.poison_on_error(result)?;
            self.ledger.note(page.id(), page.lsn());
        }
        Ok(())
    }

    /// Writes pages with consecutive ids in one write: plain ones already sealed (their
    /// crc made), copied; an encrypted database's sealed here, into the scratch buffer.
    fn write_run(&mut self, run: &[PageBuf]) -> Result<()> {
        assert!(!run.is_empty());
        let offset = run[0].id().offset(self.page_bytes);
        if let ([page], None) = (run, &self.keys) {
            return self.file.write_at(page.bytes(), offset);
        }
        let page_bytes = self.page_bytes as usize;
        let run_bytes = run.len() * page_bytes;
        assert!(run_bytes <= COALESCE_BYTES_MAX, "run of {run_bytes} bytes");
        let scratch = self.scratch.get_or_insert_with(Self::new_scratch);
        for (i, page) in run.iter().enumerate() {
            assert_eq!(page.id().0, run[0].id().0 + i as u64, "run is consecutive");
            let out = &mut scratch[i * page_bytes..(i + 1) * page_bytes];
            match &self.keys {
                None => out.copy_from_slice(page.bytes()),
                Some(keys) => page.seal_into(keys, out),
            }
        }
        self.file.write_at(&scratch[..run_bytes], offset)
    }

    /// Makes every write so far durable, as the file's flush method does it.
    pub fn flush(&mut self) -> Result<()> {
        self.check_writable()?;
        let result = self.file.flush();
        self.poison_on_error(result)
    }

    /// Grows the file to `count` page places by writing zeros and flushes them, so the new
    /// places are durable zeros before any page is written there, and later overwrites plus
    /// `fdatasync` have no metadata to write. A partial place at the old end is zeroed too.
    /// Never shrinks. Grow in large steps: each call is a flush.
    pub fn extend_to(&mut self, count: u64) -> Result<()> {
        self.check_writable()?;
        assert!(
            count <= PAGE_COUNT_MAX,
            "{count} pages exceed {PAGE_COUNT_MAX}"
        );
        if count <= self.page_count {
            return Ok(());
        }
        let page_bytes = u64::from(self.page_bytes);
        let offset = self.page_count * page_bytes;
        let len = (count - self.page_count) * page_bytes;
        let result = self.file.allocate_zeroed(offset, len);
        self.poison_on_error(result)?;
        self.flush()?;
        // A failed `len` is no broken invariant: the disk may die right after the flush (the
        // random crash tier met it, seed 1382). A short file is a device that acknowledged
        // the zeros and lost them (TESTPLAN F6): refuse, never write pages past its end.
        if let Ok(l) = self.file.len()
            && l < count * page_bytes
        {
            let e = Error::Corruption {
                file: self.path.clone(),
                offset: l,
                what: "the data file is shorter than the extension just made durable (the \
                       device lost a write)",
            };
            return self.poison_on_error(Err(e));
        }
        self.page_count = count;
        Ok(())
    }

    fn check_writable(&self) -> Result<()> {
        if self.poisoned {
            return Err(Error::poisoned_by(self.poison_cause.as_deref()));
        }
        Ok(())
    }

    /// Panics unless `page` belongs in this file: its size, and a place that exists.
    fn check_page(&self, page: &PageBuf) {
        assert_eq!(
            page.page_bytes(),
            self.page_bytes as usize,
            "{} has the wrong size for {}",
            page.id(),
            self.path.display()
        );
        assert!(page.id().0 != 0, "page 0 is never written");
        assert!(
            page.id().0 < self.page_count,
            "{} is past the end ({} pages): extend_to first",
            page.id(),
            self.page_count
        );
    }

    fn poison_on_error(&mut self, result: Result<()>) -> Result<()> {
        if let Err(e) = &result {
            self.poisoned = true;
            if self.poison_cause.is_none() {
                self.poison_cause = Some(e.to_string());
            }
        }
        result
    }

    /// Panics if the store's state is inconsistent.
    pub fn check_invariants(&self) {
        assert!(self.page_bytes.is_power_of_two());
        assert!(self.page_count <= PAGE_COUNT_MAX);
        if let Some(scratch) = &self.scratch {
            assert_eq!(scratch.len(), COALESCE_BYTES_MAX);
        }
        self.ledger.check_invariants();
        if !self.poisoned
            && let Ok(len) = self.file.len()
        {
            assert!(
                len >= self.page_count * u64::from(self.page_bytes),
                "{} is shorter than its {} pages",
                self.path.display(),
                self.page_count
            );
        }
    }
}

#[cfg(test)]
mod tests;
