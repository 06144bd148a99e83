//! [`LeafRun`]: the entries of one leaf that lie in a key range, read in place from a shared
//! copy of the leaf's page ([`PageBuf::share`]) instead of copied out of it.
//!
//! A short range read (10 keys from a random key) cost a descent and a copy of every entry it
//! might yield, values too, from a leaf not in the CPU's cache: the copy was a fifth of its
//! time, and a batch that ran past the leaf's end paid a second descent. A run costs the
//! descent and a binary search or two (a scan that resumes past its leaf's last key steps to the
//! next leaf by its link, checked to link back); each entry is read where it lies when taken. The
//! shared copy keeps the version of the leaf it was made from however the page changes after
//! (the page copies its bytes before its next change), so a run, once made, needs no latch,
//! no lock and no care about later commits.
//!
//! A run yields inline values only: at an overflow value it stops ([`LeafRun::stopped`]), and
//! the caller reads on with a [`super::Cursor`], which reads overflow chains.

use super::node::{NodeKind, NodeRef, ValueRef};
use super::{Direction, Pages, Tree, corrupt, walk};
use crate::Result;
use crate::page::{PageBuf, PageId};
use std::fmt;
use std::ops::Bound;

/// The entries of one leaf in a range, in scan order, read in place; see the module docs.
pub struct LeafRun {
    page: PageBuf,
    /// `next`'s first value.
    start: usize,
    /// Forward: the index of the next entry; backward: one past it.
    next: usize,
    /// Forward: one past the last index; backward: the last index. `next == end` once the run
    /// has yielded all it holds.
    end: usize,
    direction: Direction,
    /// The range ends with this run: its far bound lies inside this leaf, or no leaf follows
    /// in the run's direction.
    ends_range: bool,
    /// The run stopped at an overflow value before `end`.
    stopped: bool,
}

impl Tree {
    /// The entries of the leaf where a scan of `lower..upper` in `direction` starts, as a
    /// run: the leaf the descent reaches, or the next one when the scan starts past its last
    /// key. `None` when neither holds any (an empty leaf, or an empty range): a
    /// [`super::Cursor`] then follows the leaf chain.
    ///
    /// Requires what a cursor does: no write to the tree while this runs. The run, once
    /// made, is independent of the tree.
    ///
    /// # Errors
    ///
    /// A failed page read, or a descent that ends at a page that is not a leaf
    /// ([`crate::Error::Corruption`]).
    pub fn leaf_run<P: Pages>(
        self,
        pages: &P,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> Result<Option<LeafRun>> {
        let root = self.root();
        let page = match (direction, lower, upper) {
            (Direction::Forward, Bound::Unbounded, _) => walk::find_leaf_held(pages, root, &[])?,
            (Direction::Forward, Bound::Included(key) | Bound::Excluded(key), _)
            | (Direction::Backward, _, Bound::Included(key) | Bound::Excluded(key)) => {
                walk::find_leaf_held(pages, root, key)?
            }
            (Direction::Backward, _, Bound::Unbounded) => walk::last_leaf_held(pages, root)?,
        };
        let hop = Self::run_in(pages, &page, lower, upper, direction)?;
        drop(page);
        match hop {
            Hop::Run(run) => Ok(Some(run)),
            Hop::Empty => Ok(None),
            // The scan starts past this leaf's last key (a run that ended at the leaf's end
            // resumes past its last key, which lies in this leaf): the next leaf holds it.
            Hop::Next(id, link) => {
                let page = pages.read(link)?;
                assert_eq!(page.id(), link, "the pages returned another page");
                let links_back = NodeRef::parse(&page).is_ok_and(|node| {
                    node.kind() == NodeKind::Leaf
                        && match direction {
                            Direction::Forward => node.prev() == id,
                            Direction::Backward => node.next() == id,
                        }
                });
                if !links_back {
                    return Err(corrupt(pages, id, "leaf chain link does not link back"));
                }
                match Self::run_in(pages, &page, lower, upper, direction)? {
                    Hop::Run(run) => Ok(Some(run)),
                    // An empty leaf (a merge left it): the cursor walks on.
                    Hop::Empty | Hop::Next(..) => Ok(None),
                }
            }
        }
    }

    /// The run of `page` (a leaf the scan reached) in the range.
    fn run_in<P: Pages>(
        pages: &P,
        page: &PageBuf,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> Result<Hop> {
        let id = page.id();
        let node = NodeRef::parse(page).map_err(|what| corrupt(pages, id, what))?;
        if node.kind() != NodeKind::Leaf {
            return Err(corrupt(pages, id, "a descent ends at a branch"));
        }
        // The first index at or past `lower`, and the first past `upper`, as a cursor reads
        // the bounds (`cursor.rs`: `start_index`, `before_end`).
        let low = match lower {
            Bound::Unbounded => 0,
            Bound::Included(key) => node.search(key).unwrap_or_else(|at| at),
            Bound::Excluded(key) => node.search(key).map_or_else(|at| at, |at| at + 1),
        };
        let high = match upper {
            Bound::Unbounded => node.count(),
            Bound::Included(key) => node.search(key).map_or_else(|at| at, |at| at + 1),
            Bound::Excluded(key) => node.search(key).unwrap_or_else(|at| at),
        };
        if low >= high {
            // Past the leaf's end in the scan's direction, with the range going on: the next
            // leaf may hold the start.
            return Ok(match direction {
                Direction::Forward if low == node.count() && node.next().0 != 0 => {
                    Hop::Next(id, node.next())
                }
                Direction::Backward if high == 0 && node.prev().0 != 0 => {
                    Hop::Next(id, node.prev())
                }
                _ => Hop::Empty,
            });
        }
        let (next, end, ends_range) = match direction {
            Direction::Forward => (low, high, high < node.count() || node.next().0 == 0),
            Direction::Backward => (high, low, low > 0 || node.prev().0 == 0),
        };
        // The first entries arrive together, not one after another as they are taken.
        for ahead in 0..RUN_PREFETCH.min(high - low) {
            let index = match direction {
                Direction::Forward => low + ahead,
                Direction::Backward => high - 1 - ahead,
            };
            crate::io::prefetch(&node.body()[node.cell_offset(index)..]);
        }
        Ok(Hop::Run(LeafRun {
            // Shared after the parse above: the copy is known checked, as the page is.
            page: page.share(),
            start: next,
            next,
            end,
            direction,
            ends_range,
            stopped: false,
        }))
    }
}

/// Entries whose cells a new run asks the CPU for at once.
const RUN_PREFETCH: usize = 4;

/// What a leaf holds of a scan's range.
enum Hop {
    Run(LeafRun),
    /// None of it, and the range does not go on past it (or it is empty).
    Empty,
    /// None of it: the range starts past it, in the leaf it links to (`(leaf, link)`).
    Next(PageId, PageId),
}

impl LeafRun {
    /// The node, read in place (it was checked before the page was shared).
    fn node(&self) -> NodeRef<'_> {
        debug_assert!(self.page.node_checked());
        NodeRef::trusted(NodeKind::Leaf, self.page.body())
    }

    /// Moves past the next entry and returns its index, or `None` at the end of the run or
    /// at an overflow value (then [`LeafRun::stopped`]).
    pub fn advance(&mut self) -> Option<usize> {
        if self.stopped || self.next == self.end {
            return None;
        }
        let index = match self.direction {
            Direction::Forward => self.next,
            Direction::Backward => self.next - 1,
        };
        let node = NodeRef::trusted(NodeKind::Leaf, self.page.body());
        if matches!(node.value(index), ValueRef::Overflow { .. }) {
            self.stopped = true;
            return None;
        }
        self.next = match self.direction {
            Direction::Forward => self.next + 1,
            Direction::Backward => self.next - 1,
        };
        // The entry after this one arrives while the caller reads this one.
        let after = match self.direction {
            Direction::Forward => Some(self.next),
            Direction::Backward => self.next.checked_sub(1),
        };
        if let Some(after) = after.filter(|&after| after < node.count()) {
            crate::io::prefetch(&self.page.body()[node.cell_offset(after)..]);
        }
        Some(index)
    }

    /// The key of the entry [`LeafRun::advance`] would take next (an overflow value's too),
    /// or `None` once the run is used up or stopped.
    #[must_use]
    pub fn peek_key(&self) -> Option<&[u8]> {
        if self.stopped || self.next == self.end {
            return None;
        }
        let index = match self.direction {
            Direction::Forward => self.next,
            Direction::Backward => self.next - 1,
        };
        Some(self.node().key(index))
    }

    /// The key and value of entry `index`, as [`LeafRun::advance`] returned it.
    ///
    /// # Panics
    ///
    /// If the value at `index` is not inline (`advance` never returns such an index).
    #[must_use]
    pub fn entry(&self, index: usize) -> (&[u8], &[u8]) {
        let node = self.node();
        match node.value(index) {
            ValueRef::Inline(value) => (node.key(index), value),
            ValueRef::Overflow { .. } => panic!("entry {index} of a run is an overflow value"),
        }
    }

    /// The key of the last entry taken, if any was.
    #[must_use]
    pub fn last_taken(&self) -> Option<&[u8]> {
        let index = match self.direction {
            Direction::Forward => (self.next > self.start).then(|| self.next - 1)?,
            Direction::Backward => (self.next < self.start).then_some(self.next)?,
        };
        Some(self.node().key(index))
    }

    /// The key of the run's last entry in its direction (the far end of what it spans),
    /// whether or not it has been taken; `None` for a run of no entries.
    #[must_use]
    pub fn far_key(&self) -> Option<&[u8]> {
        let index = match self.direction {
            Direction::Forward => (self.end > self.start).then(|| self.end - 1)?,
            Direction::Backward => (self.start > self.end).then_some(self.end)?,
        };
        Some(self.node().key(index))
    }

    /// Whether the run stopped at an overflow value: the caller reads on past the last key
    /// taken with a cursor.
    #[must_use]
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Whether nothing follows this run in its range (once it is used up without stopping).
    #[must_use]
    pub fn ends_range(&self) -> bool {
        self.ends_range
    }
}

impl fmt::Debug for LeafRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "LeafRun(page {}, next {} of {}..{}, {:?})",
            self.page.id(),
            self.next,
            self.start,
            self.end,
            self.direction
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btree::MemPages;

    /// Runs chained as a range reads them: each from past the last key the one before took.
    fn chained(pages: &MemPages, tree: Tree, direction: Direction) -> Vec<Vec<u8>> {
        let (mut lower, mut upper): (Bound<Vec<u8>>, Bound<Vec<u8>>) = (
            Bound::Included(b"00100".to_vec()),
            Bound::Excluded(b"00900".to_vec()),
        );
        let mut keys = Vec::new();
        loop {
            let run = tree
                .leaf_run(
                    pages,
                    lower.as_ref().map(Vec::as_slice),
                    upper.as_ref().map(Vec::as_slice),
                    direction,
                )
                .expect("run");
            let Some(mut run) = run else { break };
            while let Some(index) = run.advance() {
                keys.push(run.entry(index).0.to_vec());
            }
            assert!(!run.stopped(), "no overflow value here");
            let last = Bound::Excluded(run.last_taken().expect("a run holds an entry").to_vec());
            if run.ends_range() {
                break;
            }
            match direction {
                Direction::Forward => lower = last,
                Direction::Backward => upper = last,
            }
        }
        keys
    }

    #[test]
    fn runs_chained_from_leaf_to_leaf_yield_what_the_cursor_yields() {
        let pages = MemPages::new(4096);
        let tree = Tree::create(&pages).expect("create");
        for i in 0..1000u32 {
            tree.put(&pages, format!("{i:05}").as_bytes(), &[7; 60])
                .expect("put");
        }
        for direction in [Direction::Forward, Direction::Backward] {
            let cursor: Vec<Vec<u8>> = tree
                .scan(
                    &pages,
                    Bound::Included(b"00100"),
                    Bound::Excluded(b"00900"),
                    direction,
                )
                .map(|entry| entry.expect("scan").0)
                .collect();
            assert_eq!(cursor.len(), 800);
            // Every run after the first starts past its leaf's last key: it steps to the next
            // leaf by the link rather than ending the chain.
            assert_eq!(chained(&pages, tree, direction), cursor, "{direction:?}");
        }
    }
}
