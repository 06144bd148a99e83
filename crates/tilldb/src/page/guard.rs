//! Torn-page guards: how a page written in place survives a crash in the middle of the write.
//!
//! A page write is not atomic: a power cut can land some of its sectors and not others, and a
//! process kill can land a 4 KiB prefix of a 16 KiB page. The page crc detects such a *torn*
//! page, but detection is not repair. A guard keeps a second copy of every page image until
//! its in-place write is durable.
//!
//!
//! The doublewrite guard's file format, write sequence and restore are in `doublewrite.rs`.

use super::PageBuf;
use super::store::PageStore;
use crate::FlushMethod;
use crate::error::Result;
use crate::io::Storage;
use std::path::Path;

use super::doublewrite::{Doublewrite, PAGES_MAX_DEFAULT, RestoreReport, restore_torn_pages_with};

/// How pages are protected from torn writes. Chosen at create time and stored in the header
/// (as [`TornPageGuard::code`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TornPageGuard {
    /// No protection: pages are written in place and flushed.
    ///
    /// **Unsafe unless the device writes every page atomically** (an atomic write unit
    /// covering the page size, aligned). On any other device a crash during write-back can
    /// leave a torn page that no log replay repairs: the database then reports corruption.
    /// A test (`page_guard`) shows it happening.
    None,
    /// Every batch of pages goes first to `doublewrite.tdb` (one write, one flush), then in
    /// place; recovery rewrites torn pages from the last batch.
    Doublewrite,
    /// The log holds a whole image of a page at its first change after the checkpoint that
    /// recovery would start from; pages are written in place and flushed, with no second
    /// copy. A page torn by a crash is rebuilt by redo from that image (`db/mod.rs`,
    /// "Full-page images", has the rule and why it holds with fuzzy checkpoints).
    ///
    /// The cost is that image, paid by the commit that first changes a page after a
    /// checkpoint: small where commits keep changing the same pages, but one-row `Sync`
    /// commits at random keys across a large table pay a whole page's image on most commits
    /// (13,810 log bytes a commit with 16 KiB pages, against 314 under `Doublewrite`;
    /// docs/benchmarks-journal.md, "The no-flush and durable rows"). There `Doublewrite` costs less.
    FullPageImages,
    /// Every page is written with one atomic write (`pwritev2(RWF_ATOMIC)`, Linux 6.11+) on
    /// an `O_DIRECT` data file: the device keeps the old page or the new one, never a mix.
    /// Needs a device whose atomic write unit covers the page size; checked with a test write
    /// at create and again at every open ([`check_atomic_pages`]).
    Atomic,
    /// Chosen at create by [`choose_guard`]: `Atomic` where the device writes pages
    /// atomically in hardware (checked with a test write), else `FullPageImages`. Never stored: the
    /// header records the guard chosen. The default.
    Auto,
}

impl TornPageGuard {
    /// Every concrete guard (not `Auto`), in the order benchmarks report them.
    pub const ALL: [TornPageGuard; 4] = [
        TornPageGuard::None,
        TornPageGuard::Doublewrite,
        TornPageGuard::FullPageImages,
        TornPageGuard::Atomic,
    ];

    /// The byte stored in the database header.
    #[must_use]
    pub fn code(self) -> u8 {
        match self {
            TornPageGuard::None => 1,
            TornPageGuard::Doublewrite => 2,
            TornPageGuard::FullPageImages => 3,
            TornPageGuard::Atomic => 4,
            TornPageGuard::Auto => panic!("the auto guard is resolved at create, never stored"),
        }
    }

    /// The guard a header byte stands for, if any.
    #[must_use]
    pub fn from_code(code: u8) -> Option<TornPageGuard> {
        match code {
            1 => Some(TornPageGuard::None),
            2 => Some(TornPageGuard::Doublewrite),
            3 => Some(TornPageGuard::FullPageImages),
            4 => Some(TornPageGuard::Atomic),
            _ => None,
        }
    }

    /// The name used on the command line and in JSON.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            TornPageGuard::None => "none",
            TornPageGuard::Doublewrite => "doublewrite",
            TornPageGuard::FullPageImages => "full-page-images",
            TornPageGuard::Atomic => "atomic",
            TornPageGuard::Auto => "auto",
        }
    }
}

impl std::fmt::Display for TornPageGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for TornPageGuard {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TornPageGuard::ALL
            .into_iter()
            .chain([TornPageGuard::Auto])
            .find(|g| g.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown torn-page guard {s:?}; expected auto, none, doublewrite, \
                     full-page-images or atomic"
                )
            })
    }
}

/// The data file's flush method under `guard`: atomic page writes need `O_DIRECT`, so the
/// atomic guard turns every method into a direct one (write-through stays write-through;
/// `NoSync`, a benchmark-only method, becomes `Direct`); other guards keep `method`.
#[must_use]
pub fn data_file_method(guard: TornPageGuard, method: FlushMethod) -> FlushMethod {
    match (guard, method) {
        (TornPageGuard::Atomic, FlushMethod::Dsync | FlushMethod::DirectDsync) => {
            FlushMethod::DirectDsync
        }
        (TornPageGuard::Atomic, _) => FlushMethod::Direct,
        (_, method) => method,
    }
}

/// The scratch file of [`check_atomic_pages`]'s test write (its name: `files.rs`).
pub use crate::files::ATOMIC_CHECK_FILE;

/// Checks that pages of `page_bytes` can be written atomically in `dir`: the device facts
/// promise it and a test write of one page with `RWF_ATOMIC` on an `O_DIRECT` file succeeds.
/// `Err` says what is missing; `db` uses it at create and at every open of an atomic
/// database.
pub fn check_atomic_pages(storage: &dyn Storage, dir: &Path, page_bytes: u32) -> Result<()> {
    let facts = storage.device_facts(dir)?;
    let refuse = |why: String| {
        Err(crate::Error::InvalidOptions(format!(
            "the atomic torn-page guard needs atomic writes of {page_bytes} B in {}: {why}",
            dir.display()
        )))
    };
    if facts.atomic_write_covers(page_bytes) != Some(true) {
        let units = match (
            facts.atomic_write_unit_min_bytes,
            facts.atomic_write_unit_max_bytes,
        ) {
            (Some(min), Some(max)) if max > 0 => format!("atomic write units of {min}..{max} B"),
            (Some(_), Some(_)) => "no atomic writes".to_owned(),
            _ => "no atomic write units it could read".to_owned(),
        };
        return refuse(format!(
            "the device reports {units} (`till probe` shows them)"
        ));
    }
    // One fixed name: a crash between the create and the remove leaves the file behind, and
    // the next check removes it first (the crash explorer found opens refused by a leftover).
    let scratch = dir.join(ATOMIC_CHECK_FILE);
    if storage.exists(&scratch)? {
        storage.remove(&scratch)?;
    }
    let file = storage.create(&scratch, FlushMethod::Direct)?;
    let buf = crate::io::AlignedBuf::zeroed(page_bytes as usize);
    let written = file.write_atomic_at(&buf, 0);
    drop(file);
    storage.remove(&scratch)?;
    if let Err(e) = written {
        return refuse(format!("a test write with RWF_ATOMIC failed: {e}"));
    }
    Ok(())
}

/// What [`TornPageGuard::Auto`] becomes for pages of `page_bytes` in `dir`, and why.
///
/// The rule: `Atomic` when the device itself (its queue's hardware atomic write limit, from
/// sysfs) writes a page atomically and a test write with `RWF_ATOMIC` succeeds; otherwise
/// `FullPageImages`. Measured with `till bench torn` (docs/benchmarks.md): full-page images
/// 0.98-1.03 x the throughput of no guard and doublewrite 0.74-0.84 on ext4 and XFS, while
/// atomic writes that XFS does in software (copy-on-write, on a device without hardware
/// atomics) with an `O_DIRECT` data file came to 0.44. Never `None`.
pub fn choose_guard(
    storage: &dyn Storage,
    dir: &Path,
    page_bytes: u32,
) -> Result<(TornPageGuard, String)> {
    let facts = storage.device_facts(dir)?;
    let hardware = facts
        .device_atomic_write_max_bytes
        .is_some_and(|max| max >= page_bytes);
    if !hardware {
        return Ok((
            TornPageGuard::FullPageImages,
            format!(
                "the device has no hardware atomic writes of {page_bytes} B (software ones \
                 measured 0.44 x no guard); full-page images cost the least (till bench torn)"
            ),
        ));
    }
    Ok(match check_atomic_pages(storage, dir, page_bytes) {
        Ok(()) => (
            TornPageGuard::Atomic,
            format!("the device writes {page_bytes} B pages atomically (RWF_ATOMIC, verified)"),
        ),
        Err(crate::Error::InvalidOptions(why)) => (
            TornPageGuard::FullPageImages,
            format!(
                "no atomic page writes ({why}); full-page images cost the least of the rest \
                 (till bench torn)"
            ),
        ),
        Err(e) => return Err(e),
    })
}

/// A guard in use: what [`TornPageGuard`] chose, with its files.
#[derive(Debug)]
pub enum PageGuard {
    /// See [`TornPageGuard::None`]: unsafe unless page writes are atomic.
    None,
    /// See [`TornPageGuard::Doublewrite`]: each batch goes to `doublewrite.tdb` first, then
    /// in place.
    Doublewrite(Doublewrite),
    /// See [`TornPageGuard::FullPageImages`]: pages go in place; the log repairs them.
    FullPageImages,
    /// See [`TornPageGuard::Atomic`]: each page one atomic write.
    Atomic,
}

impl PageGuard {
    /// Creates the guard's files in `dir` (none for `None`).
    pub fn create(
        kind: TornPageGuard,
        storage: &dyn Storage,
        dir: &Path,
        method: FlushMethod,
        page_bytes: u32,
    ) -> Result<PageGuard> {
        Ok(match kind {
            TornPageGuard::None => PageGuard::None,
            TornPageGuard::FullPageImages => PageGuard::FullPageImages,
            TornPageGuard::Atomic => PageGuard::Atomic,
            TornPageGuard::Auto => panic!("the auto guard is resolved before files are made"),
            TornPageGuard::Doublewrite => PageGuard::Doublewrite(Doublewrite::create(
                storage,
                dir,
                method,
                page_bytes,
                PAGES_MAX_DEFAULT,
            )?),
        })
    }

    /// Opens the guard's files in `dir`.
    pub fn open(
        kind: TornPageGuard,
        storage: &dyn Storage,
        dir: &Path,
        method: FlushMethod,
        page_bytes: u32,
    ) -> Result<PageGuard> {
        Ok(match kind {
            TornPageGuard::None => PageGuard::None,
            TornPageGuard::FullPageImages => PageGuard::FullPageImages,
            TornPageGuard::Atomic => PageGuard::Atomic,
            TornPageGuard::Auto => panic!("headers never hold the auto guard"),
            TornPageGuard::Doublewrite => {
                PageGuard::Doublewrite(Doublewrite::open(storage, dir, method, page_bytes)?)
            }
        })
    }

    /// The [`TornPageGuard`] this guard implements (never `Auto`).
    #[must_use]
    pub fn kind(&self) -> TornPageGuard {
        match self {
            PageGuard::None => TornPageGuard::None,
            PageGuard::Doublewrite(_) => TornPageGuard::Doublewrite,
            PageGuard::FullPageImages => TornPageGuard::FullPageImages,
            PageGuard::Atomic => TornPageGuard::Atomic,
        }
    }

    /// Writes `pages` in place, durably, through the guard.
    pub fn write_pages(&mut self, store: &mut PageStore, pages: &mut [PageBuf]) -> Result<()> {
        match self {
            PageGuard::None | PageGuard::FullPageImages => {
                store.write_batch(pages)?;
                store.flush()
            }
            PageGuard::Doublewrite(dw) => dw.write_pages(store, pages),
            PageGuard::Atomic => {
                store.write_batch_atomic(pages)?;
                store.flush()
            }
        }
    }

    /// Repairs pages torn by a crash during [`PageGuard::write_pages`]; run before redo.
    pub fn restore_torn_pages(&self, store: &mut PageStore) -> Result<RestoreReport> {
        self.restore_torn_pages_with(store, &mut || Ok(()))
    }

    /// [`PageGuard::restore_torn_pages`], calling `before_write` once before the first page
    /// is written.
    pub fn restore_torn_pages_with(
        &self,
        store: &mut PageStore,
        before_write: &mut dyn FnMut() -> Result<()>,
    ) -> Result<RestoreReport> {
        match self {
            PageGuard::None | PageGuard::FullPageImages | PageGuard::Atomic => {
                Ok(RestoreReport::default())
            }
            PageGuard::Doublewrite(dw) => restore_torn_pages_with(store, dw, before_write),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_names_round_trip() {
        for g in TornPageGuard::ALL {
            assert_eq!(g.name().parse::<TornPageGuard>(), Ok(g));
            assert_eq!(TornPageGuard::from_code(g.code()), Some(g));
        }
        assert!("rwf-atomic".parse::<TornPageGuard>().is_err());
    }

    #[test]
    fn codes_round_trip_and_zero_is_no_guard() {
        for guard in TornPageGuard::ALL {
            assert_eq!(TornPageGuard::from_code(guard.code()), Some(guard));
        }
        assert_eq!(TornPageGuard::from_code(0), None);
        assert_eq!(TornPageGuard::from_code(5), None);
    }
}
