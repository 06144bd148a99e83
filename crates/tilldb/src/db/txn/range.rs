//! A write transaction's reads of many keys, lazily: [`TxnRange`] merges the tree as the
//! transaction found it with the transaction's own writes (in memory and in spilled runs),
//! in either direction, reading each side as it is consumed. A range costs what it reads,
//! never a copy of the table. On it: the first and last entry, taking them (`pop_first`,
//! `pop_last`: a queue), and removing by predicate (`retain_in`, `extract_if_in`).
//!
//! The transaction holds the writer lock from its first read, so nothing but its own
//! commit changes the tree while it reads: the tree's side is read a leaf at a time in place
//! (a `LeafRun`: a descent under the tree lock, then the shared copy of the leaf's page, no
//! entry copied until it is taken), or past an overflow value a batch at a time (16 entries,
//! then twice as many each time up to 256, as a snapshot's range reads) by a cursor; each read starts past
//! the last key read.
//!
//! Every range starts at the table's edges the transaction knows, and a read of an end reads
//! ahead for the next pops (`edges.rs`).

use super::Txn;
use super::edges::READ_AHEAD_BYTES;
use crate::btree::{Direction, LeafRun, Tree};
use crate::db::Db;
use crate::db::reads::{ScanWindow, as_ref};
use crate::db::write_set::Cursor;
use crate::error::Result;
use crate::page::PageId;
use std::cmp::Ordering;
use std::collections::VecDeque;
use std::fmt;
use std::ops::Bound;

/// Entries [`Txn::retain_in`] finds to remove before it removes them and reads on.
const DOOMED_BATCH: usize = 1024;

/// A write transaction's entries of a key range, in order: the tree merged with the
/// transaction's own writes, read lazily (module doc). Made by [`Txn::range`] and its
/// `_in` and `prefix` forms; it borrows the transaction, which writes again once it is
/// dropped. An error (a failed read) is returned once, and the range ends.
pub struct TxnRange<'t> {
    db: &'t Db,
    /// The table's root as the transaction sees it (`None`: no tree to read).
    root: Option<PageId>,
    /// The tree's side: entries read and not yet yielded, the leaf being read in place,
    /// and what is left to read of the tree (as a snapshot's range keeps it).
    tree: VecDeque<(Vec<u8>, Vec<u8>)>,
    run: Option<LeafRun>,
    /// The run's entry taken and not yet passed: the tree's head when set.
    run_at: Option<usize>,
    window: ScanWindow,
    /// The transaction's own writes in the range, and whether its current write is merged.
    own: Cursor<'t>,
    own_at: Own,
    /// The side the last entry came from: passed at the next call.
    yielded: Option<Side>,
}

/// Where a [`TxnRange`] stands in its own writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Own {
    /// The cursor's current write (if any) is merged: the next is to be read.
    Read,
    /// The cursor's current write is not merged yet.
    Ready,
    /// No write is left.
    Done,
}

impl fmt::Debug for TxnRange<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "TxnRange({:?}, {} read ahead, {:?})",
            self.window,
            self.tree.len(),
            self.own
        )
    }
}

impl TxnRange<'_> {
    /// Makes sure the tree's side has a head if any entry is left: the run's next entry
    /// (read in place), else the next leaf's run, else a batch copied by a cursor (past an
    /// overflow value, which a run does not read).
    fn fill(&mut self) -> Result<()> {
        while self.run_at.is_none() && self.tree.is_empty() && !self.window.done {
            let Some(root) = self.root else {
                self.window.done = true;
                break;
            };
            if let Some(run) = &mut self.run {
                if let Some(index) = run.advance() {
                    self.run_at = Some(index);
                    break;
                }
                let run = self.run.take().expect("a run above");
                self.window.after_run(&run, None);
                continue;
            }
            let window = &self.window;
            let _shared = self.db.inner.tree_lock.read();
            let pages = self.db.read_pages();
            if !window.copy_next {
                self.run = Tree::open(root).leaf_run(
                    &pages,
                    as_ref(&window.lower),
                    as_ref(&window.upper),
                    window.direction,
                )?;
                if self.run.is_some() {
                    continue;
                }
            }
            // Past an overflow value (a run stops there) or where no run starts (an empty
            // leaf): a batch copied by a cursor, which reads overflow chains.
            let mut cursor = Tree::open(root).scan(
                &pages,
                as_ref(&window.lower),
                as_ref(&window.upper),
                window.direction,
            );
            let mut ended = false;
            for _ in 0..window.batch {
                let Some(entry) = cursor.next() else {
                    ended = true;
                    break;
                };
                self.tree.push_back(entry?);
            }
            let last = self.tree.back().map(|(key, _)| key.as_slice());
            self.window.after_batch(last, ended);
        }
        Ok(())
    }

    /// The tree's head: the run's entry in place, or the batch's first.
    fn tree_head(&self) -> Option<(&[u8], &[u8])> {
        match (self.run_at, &self.run) {
            (Some(index), Some(run)) => Some(run.entry(index)),
            _ => self.tree.front().map(|(k, v)| (k.as_slice(), v.as_slice())),
        }
    }

    /// Moves the tree's side past its head.
    fn pass_tree(&mut self) {
        if self.run_at.take().is_none() {
            self.tree.pop_front();
        }
    }

    /// The next entry, borrowed from the range until the next call: the same entries as
    /// [`Iterator::next`] in the same order, without an allocation per key and value (a
    /// `while let Some(entry) = range.next_entry()` loop).
    ///
    /// # Errors
    ///
    /// As [`Iterator::next`]: a failed read, returned once, after which the range ends.
    pub fn next_entry(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        match self.advance() {
            Ok(Some(side)) => self.entry_of(side).map(Ok),
            Ok(None) => None,
            Err(e) => {
                // Returned once: nothing is left to read.
                self.tree.clear();
                self.run = None;
                self.run_at = None;
                self.window.done = true;
                self.own_at = Own::Done;
                Some(Err(e))
            }
        }
    }

    /// The entry `side` holds now.
    fn entry_of(&self, side: Side) -> Option<(&[u8], &[u8])> {
        match side {
            Side::Tree => self.tree_head(),
            Side::Own => self
                .own
                .current()
                .and_then(|w| w.value.map(|value| (w.key, value))),
        }
    }

    /// Passes what the last call yielded, then finds the side that holds the next entry.
    fn advance(&mut self) -> Result<Option<Side>> {
        match self.yielded.take() {
            Some(Side::Tree) => self.pass_tree(),
            Some(Side::Own) => self.own_at = Own::Read,
            None => {}
        }
        loop {
            self.fill()?;
            if self.own_at == Own::Read {
                self.own_at = match self.own.next()? {
                    Some(_) => Own::Ready,
                    None => Own::Done,
                };
            }
            let own = match self.own_at {
                Own::Ready => self.own.current(),
                Own::Read | Own::Done => None,
            };
            let Some(own) = own else {
                if self.tree_head().is_none() {
                    return Ok(None);
                }
                self.yielded = Some(Side::Tree);
                return Ok(self.yielded);
            };
            let order = self.tree_head().map(|(key, _)| {
                let order = key.cmp(own.key);
                match self.window.direction {
                    Direction::Forward => order,
                    Direction::Backward => order.reverse(),
                }
            });
            let deleted = own.value.is_none();
            match order {
                // The tree's entry comes first.
                Some(Ordering::Less) => {
                    self.yielded = Some(Side::Tree);
                    return Ok(self.yielded);
                }
                // The transaction wrote the tree's key: its write replaces the entry.
                Some(Ordering::Equal) => self.pass_tree(),
                Some(Ordering::Greater) | None => {}
            }
            if deleted {
                // A delete of a key the tree may not have had: nothing to yield.
                self.own_at = Own::Read;
                continue;
            }
            self.yielded = Some(Side::Own);
            return Ok(self.yielded);
        }
    }
}

/// Which side of a [`TxnRange`] the entry it yielded came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Tree,
    Own,
}

impl Iterator for TxnRange<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_entry()
            .map(|entry| entry.map(|(key, value)| (key.to_vec(), value.to_vec())))
    }
}

impl Txn<'_> {
    /// The entries of the default table between the bounds, in `direction`, this
    /// transaction's own writes included, read lazily (see [`TxnRange`]).
    pub fn range(
        &mut self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> Result<TxnRange<'_>> {
        self.range_in("", lower, upper, direction)
    }

    /// [`Txn::range`] over `table`.
    pub fn range_in(
        &mut self,
        table: &str,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> Result<TxnRange<'_>> {
        // Held until the transaction ends: the range reads the tree a leaf at a time, and no
        // commit may change it in between.
        if !crate::mutants::active("txn-range-unlatched") {
            self.latch()?;
        }
        let root = {
            let shared = self.db.inner.tree_lock.read();
            self.visible_root_of(table, shared.held())?
        };
        let (lower, upper) = self.edges.narrow(table, lower, upper);
        let own = self
            .writes
            .table_range(table, as_ref(&lower), as_ref(&upper), direction)?;
        Ok(TxnRange {
            db: self.db,
            root,
            tree: VecDeque::new(),
            run: None,
            run_at: None,
            window: ScanWindow::new(as_ref(&lower), as_ref(&upper), direction),
            own,
            own_at: Own::Read,
            yielded: None,
        })
    }

    /// The entries of the default table whose keys start with `prefix`, lazily.
    pub fn prefix(&mut self, prefix: &[u8], direction: Direction) -> Result<TxnRange<'_>> {
        self.prefix_in("", prefix, direction)
    }

    /// [`Txn::prefix`] over `table`.
    pub fn prefix_in(
        &mut self,
        table: &str,
        prefix: &[u8],
        direction: Direction,
    ) -> Result<TxnRange<'_>> {
        let (lower, upper) = crate::db::range::prefix_bounds(prefix);
        self.range_in(table, as_ref(&lower), as_ref(&upper), direction)
    }

    /// The entry of the default table with the smallest key, own writes included.
    pub fn first(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.first_in("")
    }

    /// [`Txn::first`] of `table`.
    pub fn first_in(&mut self, table: &str) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.end_of(table, Direction::Forward, false)
    }

    /// The entry of the default table with the largest key, own writes included.
    pub fn last(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.last_in("")
    }

    /// [`Txn::last`] of `table`.
    pub fn last_in(&mut self, table: &str) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.end_of(table, Direction::Backward, false)
    }

    /// Removes the entry of the default table with the smallest key and returns it: the
    /// head of a queue. Each pop costs a descent, however many this transaction took before.
    pub fn pop_first(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.pop_first_in("")
    }

    /// [`Txn::pop_first`] of `table`.
    pub fn pop_first_in(&mut self, table: &str) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.end_of(table, Direction::Forward, true)
    }

    /// Removes the entry of the default table with the largest key and returns it.
    pub fn pop_last(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.pop_last_in("")
    }

    /// [`Txn::pop_last`] of `table`.
    pub fn pop_last_in(&mut self, table: &str) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.end_of(table, Direction::Backward, true)
    }

    /// The first entry of `table` in `direction`, removed if `take`; the edge learned.
    fn end_of(
        &mut self,
        table: &str,
        direction: Direction,
        take: bool,
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let (entry, ahead) = if let Some(entry) = self.edges.ahead(table, direction, take) {
            (entry, None)
        } else {
            let Some((entry, ahead)) = self.read_end(table, direction)? else {
                return Ok(None);
            };
            (entry, Some(ahead))
        };
        let (key, value) = entry;
        if take {
            self.delete_in(table, &key)?;
            self.edges.learn(table, direction, Bound::Excluded(&key));
        } else {
            self.edges.learn(table, direction, Bound::Included(&key));
        }
        if let Some(mut ahead) = ahead {
            // Only now: `learn` made the table's edge, and the delete above is of the entry
            // itself, which is not among these.
            if !take {
                ahead.insert(0, (key.clone(), value.clone()));
            }
            self.edges.keep_ahead(table, direction, ahead);
        }
        Ok(Some((key, value)))
    }

    /// The first entry of `table` in `direction` and the ones after it to read ahead
    /// (`Edges::read_ahead` of them, `READ_AHEAD_BYTES` at most), by a range.
    #[expect(clippy::type_complexity, reason = "an entry and the entries after it")]
    fn read_end(
        &mut self,
        table: &str,
        direction: Direction,
    ) -> Result<Option<((Vec<u8>, Vec<u8>), Vec<(Vec<u8>, Vec<u8>)>)>> {
        let batch = self.edges.read_ahead(table, direction);
        let mut range = self.range_in(table, Bound::Unbounded, Bound::Unbounded, direction)?;
        let Some(entry) = range.next().transpose()? else {
            return Ok(None);
        };
        let mut ahead = Vec::new();
        let mut bytes = 0;
        while ahead.len() + 1 < batch && bytes < READ_AHEAD_BYTES {
            let Some((key, value)) = range.next().transpose()? else {
                break;
            };
            bytes += key.len() + value.len();
            ahead.push((key, value));
        }
        Ok(Some((entry, ahead)))
    }

    /// Removes every entry of `table` between the bounds that `keep` rejects, as this
    /// transaction sees them; returns how many. The range is read once, lazily, and the
    /// rejected keys removed a batch at a time: it holds at most 1,024 keys.
    pub fn retain_in(
        &mut self,
        table: &str,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        mut keep: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<u64> {
        let mut removed = 0;
        self.remove_where(table, (lower, upper), |key, value| {
            if keep(key, value) {
                false
            } else {
                removed += 1;
                true
            }
        })?;
        Ok(removed)
    }

    /// [`Txn::retain_in`] over the whole default table.
    pub fn retain(&mut self, keep: impl FnMut(&[u8], &[u8]) -> bool) -> Result<u64> {
        self.retain_in("", Bound::Unbounded, Bound::Unbounded, keep)
    }

    /// Removes every entry of `table` between the bounds that `take` selects and returns
    /// them, in key order; the rest of the range is read, not collected.
    pub fn extract_if_in(
        &mut self,
        table: &str,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        mut take: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut taken = Vec::new();
        self.remove_where(table, (lower, upper), |key, value| {
            let chosen = take(key, value);
            if chosen {
                taken.push((key.to_vec(), value.to_vec()));
            }
            chosen
        })?;
        Ok(taken)
    }

    /// [`Txn::extract_if_in`] over the whole default table.
    pub fn extract_if(
        &mut self,
        take: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.extract_if_in("", Bound::Unbounded, Bound::Unbounded, take)
    }

    /// Removes the entries of a range that `doomed` chooses: read lazily, removed a batch
    /// at a time, the read going on past the last key read.
    fn remove_where(
        &mut self,
        table: &str,
        (lower, upper): (Bound<&[u8]>, Bound<&[u8]>),
        mut doomed: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        let upper = upper.map(<[u8]>::to_vec);
        let mut from = lower.map(<[u8]>::to_vec);
        loop {
            let mut batch = Vec::new();
            // Where the batch filled: the read goes on past it once the batch is removed.
            let mut full_at = None;
            {
                let mut range =
                    self.range_in(table, as_ref(&from), as_ref(&upper), Direction::Forward)?;
                while let Some(entry) = range.next_entry() {
                    let (key, value) = entry?;
                    if doomed(key, value) {
                        batch.push(key.to_vec());
                        if batch.len() == DOOMED_BATCH {
                            full_at = Some(key.to_vec());
                            break;
                        }
                    }
                }
            }
            for key in &batch {
                self.delete_in(table, key)?;
            }
            match full_at {
                Some(key) => from = Bound::Excluded(key),
                None => return Ok(()),
            }
        }
    }
}
