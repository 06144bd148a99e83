//! Lazy range iterators: a scan that reads the tree a leaf or a batch at a time as it is
//! consumed, so a scan of a table of any size holds one leaf or one batch, not the range.
//! While the overlay is empty a leaf is read in place, from a copy of its page that shares the
//! bytes (a run, `btree/run.rs`: nothing copied); otherwise, or past an overflow value, a batch
//! is copied out (16 entries, then twice as many each time up to `SCAN_BATCH`, merged with the
//! overlay, `reads.rs`). Each iterator reads one snapshot: the acknowledged state when it was
//! made, whatever commits while it is read.

use super::reads::{RunChanges, ScanWindow};
use super::{Bound, Db, Direction, PageId, Result};
use crate::btree::{Entries, LeafRun};
use std::fmt;

/// The entries of a key range, in order, read lazily from one snapshot. Made by
/// [`Db::range`], [`Db::prefix`] and their `_in` and [`crate::ReadTxn`] forms.
///
/// It holds one leaf's page (shared with the cache, not copied) or one batch of entries (256)
/// at a time. While it lives, the values that later
/// commits replace in its range stay in memory for it (a long-lived iterator under heavy
/// writes keeps more); drop it when done. An error (a failed read, a stopped database) is
/// returned once, and the iterator ends.
pub struct Range<'db> {
    db: &'db Db,
    root: PageId,
    window: ScanWindow,
    snapshot: u64,
    /// A snapshot registered for this iterator alone, released when it is dropped (one of a
    /// `ReadTxn` belongs to the transaction).
    owns_snapshot: bool,
    /// The leaf being read in place, if any; taken from before `batch`.
    run: Option<LeafRun>,
    /// The buffer's changes within the run's span, merged into it as it is read.
    changes: RunChanges,
    batch: Entries,
}

/// What the run and its changes give next.
enum RunStep {
    /// The run's entry at this index.
    Entry(usize),
    /// The change [`RunChanges::current`] lends.
    Change,
    /// The run is used up (or stopped at an overflow value), with its changes.
    Done,
}

impl fmt::Debug for Range<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Range(at {}, {} buffered, {:?}, {:?})",
            self.snapshot,
            self.batch.len(),
            self.run,
            self.window
        )
    }
}

impl<'db> Range<'db> {
    /// An iterator over `table` at `snapshot`; a table that does not exist yields nothing.
    pub(super) fn new(
        db: &'db Db,
        table: &str,
        (lower, upper): (Bound<&[u8]>, Bound<&[u8]>),
        direction: Direction,
        (snapshot, owns_snapshot): (u64, bool),
    ) -> Result<Range<'db>> {
        let made = db.table_root(table, snapshot).map(|root| {
            let window = match root {
                Some(_) => ScanWindow::new(lower, upper, direction),
                None => ScanWindow::empty(direction),
            };
            Range {
                db,
                root: root.unwrap_or(super::DEFAULT_ROOT),
                window,
                snapshot,
                owns_snapshot,
                run: None,
                changes: RunChanges::default(),
                batch: Entries::new(),
            }
        });
        if made.is_err() && owns_snapshot {
            db.snapshot_release(snapshot);
        }
        made
    }
}

impl Range<'_> {
    /// The next entry, borrowed from the iterator's batch until the next call: the same
    /// entries as [`Iterator::next`] in the same order, without an allocation per key and
    /// value (a `while let Some(entry) = range.next_entry()` loop).
    ///
    /// # Errors
    ///
    /// As [`Iterator::next`]: a failed read or a stopped database, returned once, after
    /// which the iterator ends.
    pub fn next_entry(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        loop {
            if self.run.is_some() {
                match self.next_in_run() {
                    RunStep::Entry(index) => {
                        return self.run.as_ref().map(|run| Ok(run.entry(index)));
                    }
                    RunStep::Change => return Some(Ok(self.changes.current())),
                    RunStep::Done => {
                        let run = self.run.take().expect("a run being read");
                        self.window.after_run(&run, self.changes.last_yielded());
                        self.changes = RunChanges::default();
                    }
                }
            }
            if !self.batch.is_empty() {
                return self.batch.take_first().map(Ok);
            }
            let read = self
                .db
                .scan_run(self.root, &self.window, self.snapshot)
                .and_then(|run| match run {
                    Some((run, changes)) => {
                        self.run = Some(run);
                        self.changes = changes;
                        Ok(true)
                    }
                    None => self.db.scan_step(
                        self.root,
                        &mut self.window,
                        self.snapshot,
                        &mut self.batch,
                    ),
                });
            match read {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => {
                    self.window = ScanWindow::empty(Direction::Forward);
                    self.run = None;
                    self.changes = RunChanges::default();
                    return Some(Err(e));
                }
            }
        }
    }

    /// The next of the run's entries and its changes, in the scan's order: a change comes
    /// before the entries after it and replaces the entry of its key; a deletion drops it.
    /// At an overflow value the run stops, leaving it and the changes from it on to the
    /// batch that reads on past the last key yielded.
    fn next_in_run(&mut self) -> RunStep {
        let run = self.run.as_mut().expect("a run being read");
        let forward = self.window.direction == Direction::Forward;
        loop {
            let order = match (run.peek_key(), self.changes.peek_key()) {
                (None, None) => return RunStep::Done,
                (None, Some(_)) if run.stopped() => return RunStep::Done,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some(_), None) => std::cmp::Ordering::Less,
                (Some(key), Some(change)) if forward => key.cmp(change),
                (Some(key), Some(change)) => change.cmp(key),
            };
            if order != std::cmp::Ordering::Greater {
                let Some(index) = run.advance() else {
                    // An overflow value: the batch reads it, and the changes from it on.
                    return RunStep::Done;
                };
                if order == std::cmp::Ordering::Less {
                    return RunStep::Entry(index);
                }
                // Equal: the change replaces the entry just passed.
            }
            if self.changes.take() {
                return RunStep::Change;
            }
        }
    }
}

impl Iterator for Range<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_entry()
            .map(|entry| entry.map(|(key, value)| (key.to_vec(), value.to_vec())))
    }
}

impl Drop for Range<'_> {
    fn drop(&mut self) {
        if self.owns_snapshot {
            self.db.snapshot_release(self.snapshot);
        }
    }
}

/// The bounds of the keys starting with `prefix`: from it, to the next key that does not
/// start with it (none when the prefix is all `0xFF` bytes, or empty).
#[must_use]
pub(super) fn prefix_bounds(prefix: &[u8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return (Bound::Included(prefix.to_vec()), Bound::Excluded(end));
        }
    }
    (Bound::Included(prefix.to_vec()), Bound::Unbounded)
}

impl Db {
    /// The acknowledged entries of the default table between `lower` and `upper`, in
    /// `direction`, read lazily from the state now (see [`Range`]).
    pub fn range(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> Result<Range<'_>> {
        self.range_in("", lower, upper, direction)
    }

    /// [`Db::range`] over `table`.
    pub fn range_in(
        &self,
        table: &str,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> Result<Range<'_>> {
        self.check_poison()?;
        let snapshot = self.snapshot_register();
        Range::new(self, table, (lower, upper), direction, (snapshot, true))
    }

    /// The acknowledged entries of the default table whose keys start with `prefix`, lazily.
    pub fn prefix(&self, prefix: &[u8], direction: Direction) -> Result<Range<'_>> {
        self.prefix_in("", prefix, direction)
    }

    /// [`Db::prefix`] over `table`.
    pub fn prefix_in(&self, table: &str, prefix: &[u8], direction: Direction) -> Result<Range<'_>> {
        let (lower, upper) = prefix_bounds(prefix);
        self.range_in(
            table,
            super::reads::as_ref(&lower),
            super::reads::as_ref(&upper),
            direction,
        )
    }
}

impl<'db> super::ReadTxn<'db> {
    /// The entries of the default table between the bounds, in this snapshot, lazily.
    pub fn range(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> Result<Range<'db>> {
        self.range_in("", lower, upper, direction)
    }

    /// [`super::ReadTxn::range`] over `table`.
    pub fn range_in(
        &self,
        table: &str,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> Result<Range<'db>> {
        Range::new(
            self.db(),
            table,
            (lower, upper),
            direction,
            (self.snapshot(), false),
        )
    }

    /// The entries of the default table whose keys start with `prefix`, in this snapshot.
    pub fn prefix(&self, prefix: &[u8], direction: Direction) -> Result<Range<'db>> {
        self.prefix_in("", prefix, direction)
    }

    /// [`super::ReadTxn::prefix`] over `table`.
    pub fn prefix_in(
        &self,
        table: &str,
        prefix: &[u8],
        direction: Direction,
    ) -> Result<Range<'db>> {
        let (lower, upper) = prefix_bounds(prefix);
        self.range_in(
            table,
            super::reads::as_ref(&lower),
            super::reads::as_ref(&upper),
            direction,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_bounds_end_at_the_next_prefix() {
        assert_eq!(
            prefix_bounds(b"ab"),
            (
                Bound::Included(b"ab".to_vec()),
                Bound::Excluded(b"ac".to_vec())
            )
        );
        assert_eq!(
            prefix_bounds(b"a\xff"),
            (
                Bound::Included(b"a\xff".to_vec()),
                Bound::Excluded(b"b".to_vec())
            )
        );
        assert_eq!(
            prefix_bounds(b"\xff\xff"),
            (Bound::Included(b"\xff\xff".to_vec()), Bound::Unbounded)
        );
        assert_eq!(
            prefix_bounds(b""),
            (Bound::Included(Vec::new()), Bound::Unbounded)
        );
    }
}
