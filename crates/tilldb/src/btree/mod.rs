//! The B+tree: ordered keys and values on slotted pages, changed only through page operations.
//!
//! ```text
//!  Tree::put / delete            tree.rs: descend, decide, emit ops
//!        |  split.rs, merge.rs   multi-page changes decomposed into single-page ops
//!        v
//!  PageOp (redo.rs)              touches exactly one page; deterministic given its prior bytes
//!        |  Pages::apply         the buffer pool applies it and records it for redo
//!        v
//!  page body (node.rs)           slotted leaf / branch layout; overflow.rs for large values
//! ```
//!
//! - **One page per op.** Every change to a page is a [`PageOp`] whose effect depends only on
//!   that page's prior bytes and the op itself, so crash recovery redoes it by the page-lsn rule
//!   (apply iff the page lsn is below the record's lsn). A split is an `Image` of the new right
//!   page (its full body, carried in the op), a `Truncate` of the old page, link updates on the
//!   neighbours and a `BranchInsert` into the parent, each op on its own page.
//! - **Only through [`Pages::apply`].** The tree never writes a page buffer itself; replay runs
//!   the very code ([`PageOp::apply_to`]) that ran the first time.
//! - **No guard is held across an apply.** The tree reads a page, copies out what it needs and
//!   drops the guard before it applies anything, so a buffer pool may latch pages freely.
//!   [`MemPages`] panics when this rule is broken.
//! - **The root page id never changes**, so a catalog can point at it: a root split moves the
//!   root's contents into two new pages and reformats the root as a branch over them; a root
//!   branch left with one child takes that child's contents back.
//! - **Writers are serialized by the caller.** A tree operation changes several pages; the
//!   engine runs at most one writer per tree at a time and does not run cursors across a write
//!   (a cursor notices a changed leaf chain and re-seeks, but sees no snapshot).
//!
//! ## Limits
//!
//! A cell plus its slot takes at most a quarter of a node's usable space ([`Limits`]), so a full
//! node and the cell that did not fit always split into two halves that each fit, and every
//! node holds at least four cells. Keys may be up to [`KEY_BYTES_MAX`] (2048) bytes, or less
//! where a quarter of the node cannot hold such a key: the exact rule is
//! `key_bytes_max = min(2048, (page_bytes - 48) / 4 - 2 - 15)`, that is 995 bytes at 4 KiB,
//! 2019 at 8 KiB and 2048 from 16 KiB up. Larger keys are refused with [`Error::TooLarge`].
//! A value is stored in the leaf when its whole cell fits in that quarter, otherwise in a chain
//! of overflow pages; values up to [`VALUE_BYTES_MAX`] (4 GiB - 1) bytes. Empty keys and values
//! are allowed.

mod build;
mod check;
mod cursor;
mod entries;
mod leaf_runs;
mod mem;
mod merge;
pub mod node;
mod node_mut;
pub mod overflow;
pub mod redo;
mod run;
mod split;
mod tree;
mod walk;

pub use build::{Filler, LEAF_FILL_PERCENT, fill_empty};
pub use check::TreeStats;
pub use cursor::{Cursor, Direction};
pub use entries::Entries;
pub use mem::MemPages;
pub use node::LeafValue;
pub use node_mut::compact_for_image;
pub use redo::PageOp;
pub use run::LeafRun;
pub use tree::{Finger, Tree};

use crate::page::{PageBuf, PageFormat, PageId, PageKind};
use crate::{Error, Result};
use std::path::Path;

/// Longest key at any page size; smaller pages allow less (see [`Limits::key_bytes_max`]).
pub const KEY_BYTES_MAX: usize = 2048;
/// Longest value: its length is stored in 32 bits.
pub const VALUE_BYTES_MAX: u64 = u32::MAX as u64;

/// The pages a tree lives on: the engine's buffer pool, or [`MemPages`] in tests.
///
/// Every change goes through [`Pages::apply`], which applies the op to `op.page()` and records
/// it for redo; the implementation stamps page lsns, the op never touches them.
pub trait Pages {
    /// Shared access to one page while the guard lives.
    type Read<'a>: std::ops::Deref<Target = PageBuf>
    where
        Self: 'a;

    /// The pages' format (their size, and whether they are sealed), the same for every page.
    fn format(&self) -> PageFormat;

    /// The page size, the same for every page.
    fn page_bytes(&self) -> u32 {
        self.format().page_bytes()
    }

    /// The sizes that follow from the pages' format.
    fn limits(&self) -> Limits {
        Limits::of(self.format())
    }

    /// Shared access to page `id`. A page that cannot exist (never allocated, past the end of
    /// the file) is [`Error::Corruption`]: some page referred to it.
    fn read(&self, id: PageId) -> Result<Self::Read<'_>>;

    /// Where page `id` probably is, for [`Pages::read_guessed`]: `slot` holds the last guess
    /// (a branch keeps one per child: [`node::NodeRef::child_frame`]), checked here and
    /// refreshed when wrong; 0 when not known. Called while the branch is read, so the
    /// child's frame is found before the branch's guard goes. The default knows nothing.
    fn locate(&self, id: PageId, slot: &std::sync::atomic::AtomicU32) -> u32 {
        let _ = (id, slot);
        0
    }

    /// Whether a descent through these pages makes a page's search hints when it has none
    /// ([`node::NodeRef::parse_to_search`]): yes for readers (the default), no for a commit's
    /// pages, whose descents lead to the pages they change.
    fn make_search_hints(&self) -> bool {
        true
    }

    /// [`Pages::read`], trying first where [`Pages::locate`] said the page is (`guess`; 0
    /// for none). The default ignores the guess.
    fn read_guessed(&self, id: PageId, guess: u32) -> Result<Self::Read<'_>> {
        let _ = guess;
        self.read(id)
    }

    /// Applies `op` to `op.page()` and records it for redo.
    ///
    /// Requires: no guard from [`Pages::read`] is alive in this thread.
    fn apply(&self, op: PageOp) -> Result<()>;

    /// Applies `ops`, every one of the same page, in order, as [`Pages::apply`] applies each:
    /// an implementation may take the page once for all of them (a run of deletes from one
    /// leaf). The default applies them one by one.
    ///
    /// Requires: as [`Pages::apply`].
    fn apply_run(&self, ops: Vec<PageOp>) -> Result<()> {
        for op in ops {
            self.apply(op)?;
        }
        Ok(())
    }

    /// A new empty page of `kind` (a zero body: an empty node or overflow page). The
    /// implementation logs the allocation.
    fn allocate(&self, kind: PageKind) -> Result<PageId>;

    /// Gives page `id` back. The implementation logs it.
    fn free(&self, id: PageId) -> Result<()>;

    /// The data file named in [`Error::Corruption`]; a placeholder by default.
    fn path(&self) -> &Path {
        Path::new("<pages>")
    }
}

/// Sizes that follow from the page size. All byte counts are of the page body unless named
/// otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The page size.
    pub page_bytes: u32,
    /// Bytes of a page's body: after the page header, and before the trailer of a sealed
    /// page (`page/sealed.rs`).
    pub body_bytes: usize,
    /// Bytes of a node available to slots and cells (the body minus the node header).
    pub usable_bytes: usize,
    /// Largest cell: a cell and its slot take at most a quarter of `usable_bytes`.
    pub cell_bytes_max: usize,
    /// Longest key.
    pub key_bytes_max: usize,
    /// Value bytes one overflow page holds.
    pub overflow_data_bytes: usize,
}

impl Limits {
    /// The limits for plain pages of `page_bytes`.
    #[must_use]
    pub fn new(page_bytes: u32) -> Limits {
        Limits::of(PageFormat::plain(page_bytes))
    }

    /// The limits for pages of `format`: a sealed page's body leaves room for its trailer.
    #[must_use]
    pub fn of(format: PageFormat) -> Limits {
        let page_bytes = format.page_bytes();
        let body_bytes = format.body_bytes();
        let usable_bytes = body_bytes - node::NODE_HEADER_BYTES;
        let cell_bytes_max = usable_bytes / 4 - node::SLOT_BYTES;
        let key_bytes_max = KEY_BYTES_MAX.min(cell_bytes_max - node::LEAF_OVERFLOW_CELL_OVERHEAD);
        let limits = Limits {
            page_bytes,
            body_bytes,
            usable_bytes,
            cell_bytes_max,
            key_bytes_max,
            overflow_data_bytes: body_bytes - overflow::OVERFLOW_HEADER_BYTES,
        };
        // A branch cell of the longest key fits too, and the longest key with an overflow
        // reference is a valid leaf cell.
        assert!(node::branch_cell_bytes(key_bytes_max) <= cell_bytes_max);
        assert!(key_bytes_max + node::LEAF_OVERFLOW_CELL_OVERHEAD <= cell_bytes_max);
        limits
    }

    /// Refuses a key longer than [`Limits::key_bytes_max`].
    pub fn check_key(&self, key: &[u8]) -> Result<()> {
        if key.len() > self.key_bytes_max {
            return Err(Error::TooLarge {
                what: "key",
                bytes: key.len() as u64,
                max: self.key_bytes_max as u64,
            });
        }
        Ok(())
    }

    /// Refuses a value longer than [`VALUE_BYTES_MAX`].
    // A method beside `check_key`, though the bound is the same for every page size. Allowed,
    // not expected: clippy sees it only when this type is not exported (without `internals`).
    #[allow(clippy::unused_self, reason = "the twin of check_key")]
    pub fn check_value(&self, value: &[u8]) -> Result<()> {
        if value.len() as u64 > VALUE_BYTES_MAX {
            return Err(Error::TooLarge {
                what: "value",
                bytes: value.len() as u64,
                max: VALUE_BYTES_MAX,
            });
        }
        Ok(())
    }

    /// Whether a value of `value_bytes` with a key of `key_bytes` is stored in the leaf.
    #[must_use]
    pub fn is_inline(&self, key_bytes: usize, value_bytes: usize) -> bool {
        node::LEAF_CELL_HEADER_BYTES + key_bytes + value_bytes <= self.cell_bytes_max
    }

    /// Overflow pages a value of `value_bytes` stored out of line takes.
    #[must_use]
    pub fn overflow_pages(&self, value_bytes: u64) -> u64 {
        value_bytes.div_ceil(self.overflow_data_bytes as u64)
    }
}

/// The error for bad bytes found on page `id`.
pub(crate) fn corrupt<P: Pages + ?Sized>(pages: &P, id: PageId, what: &'static str) -> Error {
    Error::Corruption {
        file: pages.path().to_path_buf(),
        // Not `PageId::offset`: a corrupt id may be 0 or so large the offset overflows.
        offset: id.0.saturating_mul(u64::from(pages.page_bytes())),
        what,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_at_every_page_size() {
        let cases = [
            (4096, 1010, 995),
            (8192, 2034, 2019),
            (16384, 4082, 2048),
            (32768, 8178, 2048),
            (65536, 16370, 2048),
        ];
        for (page_bytes, cell_max, key_max) in cases {
            let limits = Limits::new(page_bytes);
            assert_eq!(limits.cell_bytes_max, cell_max, "{page_bytes}");
            assert_eq!(limits.key_bytes_max, key_max, "{page_bytes}");
            // The documented formula.
            let formula = KEY_BYTES_MAX.min((page_bytes as usize - 48) / 4 - 2 - 15);
            assert_eq!(limits.key_bytes_max, formula, "{page_bytes}");
        }
    }

    #[test]
    fn too_large_key_is_refused() {
        let limits = Limits::new(16384);
        assert!(limits.check_key(&[0; 2048]).is_ok());
        let err = limits.check_key(&[0; 2049]).expect_err("too long");
        assert!(matches!(
            err,
            Error::TooLarge {
                what: "key",
                bytes: 2049,
                max: 2048
            }
        ));
    }

    #[test]
    fn inline_threshold() {
        let limits = Limits::new(4096);
        assert!(limits.is_inline(10, 1010 - 7 - 10));
        assert!(!limits.is_inline(10, 1010 - 7 - 10 + 1));
        assert!(limits.is_inline(0, 0));
    }
}
