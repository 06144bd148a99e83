//! The files the buffer pool reads pages from and writes them to: the data file
//! ([`PageStore`], with its page ledger), its torn-page guard ([`PageGuard`]) and the spill
//! file ([`SpillFile`]), under one lock. The store (`db/pages.rs`) wraps them with what only it
//! knows: the log (the write-ahead rule), the readers' lock, the fail-stop switch.
//!
//! One owner of "the newest lsn written per page": the page ledger (`ledger.rs`), which every
//! write of the store notes. Writers copy a page and write it later; a copy not newer than
//! what the ledger has for its page is dropped, so an old copy that lands after a newer one
//! never undoes it (the newer change would be lost once a checkpoint moved redo past it).

use super::{PageBuf, PageGuard, PageId, PageStore, SpillFile};
use crate::error::{Error, Result};
use parking_lot::Mutex;

/// The data file, its guard and the spill file.
#[derive(Debug)]
pub struct DataFiles {
    files: Mutex<Files>,
    spill: SpillFile,
}

#[derive(Debug)]
struct Files {
    store: PageStore,
    guard: PageGuard,
}

impl DataFiles {
    /// The files of a database just opened or created.
    #[must_use]
    pub fn new(store: PageStore, guard: PageGuard, spill: SpillFile) -> Self {
        DataFiles {
            files: Mutex::new(Files { store, guard }),
            spill,
        }
    }

    /// Reads page `id` (`None`: allocated, never written). The write-ahead rule, checked
    /// backwards: a page on disk never carries an lsn past `log_end`. One that does means log
    /// records it depends on are lost (a damaged log with a torn newer header slot, found by
    /// fuzzing): `Err(Corruption)` naming the file and offset, never built on.
    pub fn read(&self, id: PageId, log_end: u64) -> Result<Option<PageBuf>> {
        let files = self.files.lock();
        let page = files.store.read(id)?;
        if let Some(page) = &page
            && page.lsn() > log_end
        {
            return Err(Error::Corruption {
                file: files.store.path().to_path_buf(),
                offset: id.offset(files.store.page_bytes()),
                what: "the page's lsn is past the end of the log: log records it depends on \
                       are lost",
            });
        }
        Ok(page)
    }

    /// Writes the pages of `pages` newer than what was written of them (the ledger), through
    /// the guard, growing the file for pages past its end.
    pub fn write(&self, pages: &[PageBuf]) -> Result<()> {
        let mut files = self.files.lock();
        let Files { store, guard } = &mut *files;
        let mut fresh: Vec<PageBuf> = pages
            .iter()
            .filter(|p| p.lsn() > store.written_lsn(p.id()))
            .cloned()
            .collect();
        if fresh.is_empty() {
            return Ok(());
        }
        let last = fresh.iter().map(|p| p.id().0).max().unwrap_or(0);
        if last >= store.page_count() {
            store.extend_to(last + 1)?;
        }
        guard.write_pages(store, &mut fresh)?;
        for p in &fresh {
            debug_assert!(
                store.written_lsn(p.id()) >= p.lsn(),
                "{} written at lsn {} but the ledger has {}",
                p.id(),
                p.lsn(),
                store.written_lsn(p.id())
            );
        }
        Ok(())
    }

    /// Makes the ledger of written lsns durable (`PageStore::save_ledger`).
    pub fn save_ledger(&self) -> Result<()> {
        self.files.lock().store.save_ledger()
    }

    /// Runs `f` while no page is read or written.
    pub fn quiet(&self, f: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        let _files = self.files.lock();
        f()
    }

    /// Where held pages go when their frames are needed (`spill.rs`).
    #[must_use]
    pub fn spill(&self) -> &SpillFile {
        &self.spill
    }
}
