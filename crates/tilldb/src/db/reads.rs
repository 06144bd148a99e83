//! Reads: what a snapshot sees. The visible lsn moves over acknowledged commits; a reader
//! registers its snapshot; a point read or a scan reads the tree and then the write buffer's
//! versions it sees (`txn/buffer.rs`) and the overlay of values that commits not yet visible
//! to it replaced (`txn/overlay.rs`), through `Visible` (`visible.rs`).

use super::{Bound, Db, Direction, PageId, Result, SCAN_BATCH, Seen, Tree};
use crate::btree::{Entries, LeafRun};

impl Db {
    /// Moves the visible lsn over commits acknowledged since, and prunes the overlay.
    pub(super) fn visible_lsn(&self) -> u64 {
        // One read of both marks: two reads could see durable pass the written mark read first.
        let (written, durable) = self.inner.wal.written_and_durable();
        let (written, durable) = (written.0, durable.0);
        self.inner.visible.advance(written, durable)
    }

    /// Makes the commit whose record ends at `lsn` visible to this thread's next reads, if an
    /// advance has not already: then the overlay was pruned past it too, by that advance.
    pub(super) fn visible_through(&self, lsn: u64) {
        if self.inner.visible.hint() < lsn {
            self.visible_lsn();
        }
    }

    /// The oldest snapshot a reader holds or may take from now on: every reader sees each
    /// commit that ends at or before it.
    pub(super) fn horizon(&self) -> u64 {
        let visible = self.visible_lsn();
        self.inner.visible.horizon(visible)
    }

    /// Whether the overlay and the write buffer hold nothing: every snapshot reads the tree
    /// alone (read after the tree: see `visible.rs`).
    fn tree_alone(&self) -> bool {
        self.inner.visible.tree_alone()
    }

    /// Registers a snapshot of what is visible now. Under the tree lock, shared: a large
    /// commit that found no snapshot registered keeps no values for older ones, and holds the
    /// tree lock exclusively until it is visible (`commit.rs`), so a snapshot registered
    /// meanwhile would read its pages with none of them. Registered by the advance that
    /// takes it, before that advance prunes ([`Visible::advance_and_register`]).
    pub(super) fn snapshot_register(&self) -> u64 {
        let _shared = (!crate::mutants::active("snapshot-registered-unlocked"))
            .then(|| self.inner.tree_lock.read());
        let (written, durable) = self.inner.wal.written_and_durable();
        self.inner
            .visible
            .advance_and_register(written.0, durable.0)
    }

    pub(super) fn snapshot_release(&self, snapshot: u64) {
        self.inner.visible.release(snapshot);
    }

    /// `key` as a reader at `snapshot` sees it: the buffer's version at or before the
    /// snapshot if it holds one, else the tree's value, else the overlay's older one. The
    /// reader's snapshot is registered ([`Db::snapshot_register`]): nothing it reads is
    /// pruned meanwhile. [`Db::read_latest`] is the read of a snapshot no one registered.
    pub(super) fn read_at(
        &self,
        root: PageId,
        key: &[u8],
        snapshot: u64,
    ) -> Result<Option<Vec<u8>>> {
        self.read_seen(root, key, snapshot, false)
    }

    /// The latest acknowledged value of `key`, with no snapshot registered (`Db::get`): as
    /// [`Db::read_at`] at `snapshot` (the visible lsn the read began with), except that the
    /// buffer is read at the visible lsn of the moment it is read. A prune may run meanwhile
    /// and take the buffered versions older than the newest one visible (no registered
    /// snapshot holds them back); read at the first visible lsn, the buffer would then hold
    /// no version of the key there and the tree would give the value from before them all.
    pub(super) fn read_latest(
        &self,
        root: PageId,
        key: &[u8],
        snapshot: u64,
    ) -> Result<Option<Vec<u8>>> {
        self.read_seen(root, key, snapshot, true)
    }

    /// [`Db::read_at`] and [`Db::read_latest`]. The buffer is asked before the tree: a drain
    /// may apply a version the reader sees and the prune after it take it away, and a tree
    /// read made before that drain would give the value from before the version. The tree
    /// is read before the overlay: a commit holds the tree lock exclusively from before it
    /// changes a page until it has recorded the overlay entries, so a change seen in the
    /// tree always has its entry by the time the overlay is asked.
    fn read_seen(
        &self,
        root: PageId,
        key: &[u8],
        snapshot: u64,
        latest: bool,
    ) -> Result<Option<Vec<u8>>> {
        let buffered = if self.tree_alone() {
            Seen::Tree
        } else if latest {
            self.inner.visible.buffer_seen_latest(root.0, key, snapshot)
        } else {
            self.inner.visible.buffer_seen(root.0, key, snapshot)
        };
        if let Seen::Value(value) = buffered {
            return Ok(value);
        }
        let tree_value = {
            let _shared = self.inner.tree_lock.read();
            // Under the lock: a commit that failed with pages half changed poisoned the
            // database before it let the lock go.
            self.check_poison()?;
            Tree::open(root).get(&self.read_pages(), key)?
        };
        if self.tree_alone() {
            return Ok(tree_value);
        }
        Ok(
            match self.inner.visible.overlay_seen(root.0, key, snapshot) {
                Seen::Tree => tree_value,
                Seen::Value(v) => v,
            },
        )
    }

    /// [`Db::read_at`], calling `f` with the value where it lies instead of copying it out.
    /// While the overlay and the buffer are empty (checked under the tree lock, which every commit holds
    /// exclusively while it records what older snapshots need), the tree holds what every
    /// snapshot sees, and `f` reads the value in its page; otherwise through [`Db::read_at`].
    pub(super) fn read_at_with<R>(
        &self,
        root: PageId,
        key: &[u8],
        snapshot: u64,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>> {
        {
            let _shared = self.inner.tree_lock.read();
            self.check_poison()?;
            if self.tree_alone() {
                return Tree::open(root).get_with(&self.read_pages(), key, f);
            }
        }
        // A buffered version the snapshot sees is its value, whatever the tree holds.
        if let Seen::Value(value) = self.inner.visible.buffer_seen(root.0, key, snapshot) {
            return Ok(value.map(|value| f(&value)));
        }
        // None: the overlay, then the tree, both under the tree lock (after the buffer: a
        // drain that changed the key since recorded the tree's older value in the overlay).
        // A commit holds the lock exclusively from before it changes a page until it has
        // recorded what it replaced, so under it the two agree; a key the overlay holds no
        // older value of for the snapshot reads in place. (After a drain a snapshot older than
        // it reads here while the overlay holds anything: the drain's tables' counts at
        // least, or every key's older value when some buffered version was newer than it.)
        let _shared = self.inner.tree_lock.read();
        self.check_poison()?;
        match self.inner.visible.overlay_seen(root.0, key, snapshot) {
            Seen::Value(value) => Ok(value.map(|value| f(&value))),
            Seen::Tree => Tree::open(root).get_with(&self.read_pages(), key, f),
        }
    }

    pub(super) fn scan_at(
        &self,
        root: PageId,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
        snapshot: u64,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut window = ScanWindow::new(lower, upper, direction);
        let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut batch = Entries::new();
        while self.scan_step(root, &mut window, snapshot, &mut batch)? {
            out.extend(
                batch
                    .iter()
                    .map(|(key, value)| (key.to_vec(), value.to_vec())),
            );
        }
        Ok(out)
    }

    /// The next entries of a scan at `snapshot` as a run read in place (`btree/run.rs`): the
    /// rest of the window in the leaf it starts in, with the buffer's changes a reader at the
    /// snapshot sees between the window's start and the run's far end (the window's end when
    /// the run ends it), in the scan's order, copied out (`None`: deleted): the caller merges
    /// them ([`RunChanges`]). Only while the overlay is empty (checked under the tree lock,
    /// as [`Db::read_at_with`] does: the tree, with the buffer's changes over it, then holds
    /// what every registered snapshot sees of it); the run keeps the leaf as it is now whatever commits after. `None` otherwise,
    /// when that leaf holds none of the window, or right after a run stopped at an overflow
    /// value: [`Db::scan_step`] reads the next batch instead.
    pub(super) fn scan_run(
        &self,
        root: PageId,
        window: &ScanWindow,
        snapshot: u64,
    ) -> Result<Option<(LeafRun, RunChanges)>> {
        if window.done || window.copy_next {
            return Ok(None);
        }
        let _shared = self.inner.tree_lock.read();
        self.check_poison()?;
        let tree_alone = self.tree_alone();
        if !tree_alone && !self.inner.visible.overlay_empty() {
            return Ok(None);
        }
        let Some(run) = Tree::open(root).leaf_run(
            &self.read_pages(),
            as_ref(&window.lower),
            as_ref(&window.upper),
            window.direction,
        )?
        else {
            return Ok(None);
        };
        if tree_alone || crate::mutants::active("run-ignores-the-buffer") {
            return Ok(Some((run, RunChanges::default())));
        }
        // What the run spans of the window: any buffered version there belongs among it.
        let (lower, upper) = (as_ref(&window.lower), as_ref(&window.upper));
        let ends = run.ends_range() && !crate::mutants::active("run-span-stops-at-its-leaf");
        let span = match (ends, run.far_key(), window.direction) {
            (true, _, _) | (false, None, _) => (lower, upper),
            (false, Some(far), Direction::Forward) => (lower, Bound::Included(far)),
            (false, Some(far), Direction::Backward) => (Bound::Included(far), upper),
        };
        let mut changes = self.inner.visible.buffer_changed_in(root.0, span, snapshot);
        if window.direction == Direction::Backward {
            changes.reverse();
        }
        Ok(Some((run, RunChanges::new(changes))))
    }

    /// Fills `out` (cleared first) with the next batch of a scan at `snapshot`: at most
    /// `SCAN_BATCH` entries from the tree, merged with the overlay's view of the same key
    /// window, in order, moving `window` past it. Returns false, with `out` empty, once the
    /// window is used up; a batch may be empty (the overlay removed all it held) and more
    /// follow. Batches join in strict key order.
    pub(super) fn scan_step(
        &self,
        root: PageId,
        window: &mut ScanWindow,
        snapshot: u64,
        out: &mut Entries,
    ) -> Result<bool> {
        out.clear();
        if window.done {
            return Ok(false);
        }
        // This batch reads past any overflow value a run stopped at.
        window.copy_next = false;
        self.check_poison()?;
        let direction = window.direction;
        let wanted = window.batch;
        // One batch from the tree, under the shared lock, copied into `out`'s buffer; none
        // when a commit after this snapshot found the table empty (an empty mark): the
        // reader's view of it is then the overlay's keys alone, in the whole window (checked
        // under the tree lock, which that commit held while it recorded the mark, before it
        // changed a page).
        {
            let _shared = self.inner.tree_lock.read();
            self.check_poison()?;
            let hidden = !self.tree_alone() && self.inner.visible.hides_table(root.0, snapshot);
            if !hidden {
                let pages = self.read_pages();
                Tree::open(root)
                    .scan(
                        &pages,
                        as_ref(&window.lower),
                        as_ref(&window.upper),
                        direction,
                    )
                    .limit(wanted)
                    .fill(out, wanted)?;
            }
        }
        let done = out.len() < wanted;
        window.batch = (wanted * 2).min(SCAN_BATCH);
        // The window this batch covers: to its last key, or all that is left when it is the
        // last; the next batch starts past that edge whatever the overlay makes of it.
        let edge = if done {
            None
        } else {
            out.last().map(|(key, _)| key)
        };
        let next_bound = edge.map(|key| Bound::Excluded(key.to_vec()));
        let (lower, upper) = match (direction, edge) {
            (_, None) => (as_ref(&window.lower), as_ref(&window.upper)),
            (Direction::Forward, Some(key)) => (as_ref(&window.lower), Bound::Included(key)),
            (Direction::Backward, Some(key)) => (Bound::Included(key), as_ref(&window.upper)),
        };
        // The buffer's and the overlay's changes in the window (under their lock: usually none, so the
        // batch stays as the tree gave it).
        if !self.tree_alone() {
            let spare = &mut window.spare;
            let merged =
                self.inner
                    .visible
                    .with_changes_in(root.0, (lower, upper), snapshot, |changed| {
                        if changed.is_empty() {
                            return false;
                        }
                        spare.clear();
                        merge_changes(out, changed, direction, spare);
                        true
                    });
            if merged {
                // The merged batch becomes the batch; the tree's is kept for the next merge.
                std::mem::swap(out, &mut window.spare);
            }
        }
        // Batches join in strict key order (each window starts past the last one).
        if let (Some(last), Some((first, _))) = (&window.last_key, out.first()) {
            assert!(
                match direction {
                    Direction::Forward => first > &last[..],
                    Direction::Backward => first < &last[..],
                },
                "scan out of key order: {first:?} after {last:?}"
            );
        }
        if let Some((key, _)) = out.last() {
            let last = window.last_key.get_or_insert_with(Vec::new);
            last.clear();
            last.extend_from_slice(key);
        }
        match (next_bound, direction) {
            (None, _) => window.done = true,
            (Some(bound), Direction::Forward) => window.lower = bound,
            (Some(bound), Direction::Backward) => window.upper = bound,
        }
        Ok(true)
    }
}

/// The buffer's changes within a run's span, in the scan's order, merged into the run as it
/// is read (`range.rs`): a change comes before the run's entries that follow it, replaces
/// the entry of its key, and a deletion (`None`) drops it.
#[derive(Debug, Default)]
pub(super) struct RunChanges {
    pending: std::collections::VecDeque<(Vec<u8>, Option<Vec<u8>>)>,
    /// The change last yielded, lent until the next.
    current: Option<(Vec<u8>, Vec<u8>)>,
}

impl RunChanges {
    fn new(changes: Vec<(Vec<u8>, Option<Vec<u8>>)>) -> Self {
        RunChanges {
            pending: changes.into(),
            current: None,
        }
    }

    /// The next change's key.
    pub(super) fn peek_key(&self) -> Option<&[u8]> {
        self.pending.front().map(|(key, _)| key.as_slice())
    }

    /// Takes the next change: `true` when it is a value (lent by [`RunChanges::current`])
    /// and `false` for a deletion.
    pub(super) fn take(&mut self) -> bool {
        let (key, value) = self.pending.pop_front().expect("a pending change");
        match value {
            Some(value) => {
                self.current = Some((key, value));
                true
            }
            None => false,
        }
    }

    /// The change [`RunChanges::take`] last returned `true` for.
    pub(super) fn current(&self) -> (&[u8], &[u8]) {
        let (key, value) = self.current.as_ref().expect("a change taken");
        (key, value)
    }

    /// The key of the last change yielded, if any.
    pub(super) fn last_yielded(&self) -> Option<&[u8]> {
        self.current.as_ref().map(|(key, _)| key.as_slice())
    }
}

/// Fills `out` with a batch the tree gave (`batch`, in `direction`'s order) with `changed`
/// applied (keys ascending; `None`: absent for the reader), in `direction`'s order: one
/// pass over both, each of which is sorted.
fn merge_changes(
    batch: &Entries,
    changed: &[(&[u8], Option<&[u8]>)],
    direction: Direction,
    out: &mut Entries,
) {
    let forward = direction == Direction::Forward;
    let mut tree = batch.iter().peekable();
    let mut pending = changed.iter();
    let mut take_change = || {
        if forward {
            pending.next()
        } else {
            pending.next_back()
        }
    };
    let mut change = take_change();
    loop {
        // Which comes first in the scan's order: the tree's next entry or the next change.
        let order = match (tree.peek(), change) {
            (None, None) => break,
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (Some((key, _)), Some((changed_key, _))) => {
                let order = (*key).cmp(changed_key);
                if forward { order } else { order.reverse() }
            }
        };
        if order == std::cmp::Ordering::Less {
            let (key, value) = tree.next().expect("peeked");
            out.push(key, value);
            continue;
        }
        if order == std::cmp::Ordering::Equal {
            // The change replaces the tree's entry.
            tree.next();
        }
        let (key, value) = change.expect("a change comes first");
        if let Some(value) = value {
            out.push(key, value);
        }
        change = take_change();
    }
}

/// Where a scan stands: the key window still to read, its direction, the last key returned.
#[derive(Debug, Clone)]
pub(super) struct ScanWindow {
    pub(super) lower: Bound<Vec<u8>>,
    pub(super) upper: Bound<Vec<u8>>,
    pub(super) direction: Direction,
    last_key: Option<Vec<u8>>,
    pub(super) done: bool,
    /// The last run stopped at an overflow value: the next batch is read by `scan_step`.
    pub(super) copy_next: bool,
    /// Entries the next batch reads from the tree: a few at first (a short range read should
    /// not copy 256 entries to return 10: `till bench kv`'s ranges of 10 keys cost 37 point
    /// reads each), doubling up to `SCAN_BATCH`.
    pub(super) batch: usize,
    /// Where a batch merged with the buffer's and the overlay's changes is built: swapped
    /// with the batch, so that a scan's merges reuse two buffers.
    spare: Entries,
}

/// Entries a scan's first batch reads.
const FIRST_BATCH: usize = 16;

impl ScanWindow {
    pub(super) fn new(lower: Bound<&[u8]>, upper: Bound<&[u8]>, direction: Direction) -> Self {
        ScanWindow {
            lower: lower.map(<[u8]>::to_vec),
            upper: upper.map(<[u8]>::to_vec),
            direction,
            last_key: None,
            done: false,
            copy_next: false,
            batch: FIRST_BATCH,
            spare: Entries::new(),
        }
    }

    /// A window that yields nothing (a table that does not exist).
    pub(super) fn empty(direction: Direction) -> Self {
        ScanWindow {
            lower: Bound::Unbounded,
            upper: Bound::Unbounded,
            direction,
            last_key: None,
            done: true,
            copy_next: false,
            batch: FIRST_BATCH,
            spare: Entries::new(),
        }
    }

    /// Moves the window past a batch a writer read from the tree alone (no overlay: a write
    /// transaction sees the tree as it is): past its last key, or done when the tree had no
    /// more (`ended`). The next batch reads twice as many, up to `SCAN_BATCH`.
    pub(super) fn after_batch(&mut self, last: Option<&[u8]>, ended: bool) {
        self.copy_next = false;
        self.batch = (self.batch * 2).min(SCAN_BATCH);
        if let Some(key) = last {
            self.past(key);
        }
        if ended {
            self.done = true;
        }
    }

    /// The entries after this window's next start past `key`, the last key taken.
    fn past(&mut self, key: &[u8]) {
        if let Some(last) = &self.last_key {
            assert!(
                match self.direction {
                    Direction::Forward => key > &last[..],
                    Direction::Backward => key < &last[..],
                },
                "scan out of key order: {key:?} after {last:?}"
            );
        }
        let last = self.last_key.get_or_insert_with(Vec::new);
        last.clear();
        last.extend_from_slice(key);
        let bound = Bound::Excluded(key.to_vec());
        match self.direction {
            Direction::Forward => self.lower = bound,
            Direction::Backward => self.upper = bound,
        }
    }

    /// Moves the window past a run that is used up (its entries all taken, or stopped at an
    /// overflow value): the next entries start past its last key taken, or the scan is done
    /// when the range ended in the run's leaf.
    /// `last_change` is the last of the buffer's changes merged into the run that was
    /// yielded ([`RunChanges`]): the window moves past it too when it lies further.
    pub(super) fn after_run(&mut self, run: &LeafRun, last_change: Option<&[u8]>) {
        let last_change =
            last_change.filter(|_| !crate::mutants::active("run-window-forgets-changes"));
        if run.stopped() {
            self.copy_next = true;
        }
        let further = |a: &[u8], b: &[u8]| match self.direction {
            Direction::Forward => a > b,
            Direction::Backward => a < b,
        };
        let key = match (run.last_taken(), last_change) {
            (Some(taken), Some(change)) if further(change, taken) => change,
            (Some(taken), _) => taken,
            (None, change) => {
                assert!(run.stopped(), "a run used up without an entry taken");
                let Some(change) = change else {
                    return;
                };
                change
            }
        };
        let key = key.to_vec();
        self.past(&key);
        if !run.stopped() && run.ends_range() {
            self.done = true;
        }
    }
}

pub(super) fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(pairs: &[(&str, &str)]) -> Entries {
        let mut out = Entries::new();
        for (key, value) in pairs {
            out.push(key.as_bytes(), value.as_bytes());
        }
        out
    }

    fn listed(out: &Entries) -> Vec<(String, String)> {
        out.iter()
            .map(|(k, v)| {
                (
                    String::from_utf8_lossy(k).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            })
            .collect()
    }

    /// A batch merged with the buffer's and the overlay's changes: a change replaces the
    /// tree's entry of its key, a deletion removes it, a new key lands in order; both ways.
    #[test]
    fn a_merged_batch_takes_each_change_in_the_scans_order() {
        let changed: Vec<(&[u8], Option<&[u8]>)> = vec![
            (b"a", Some(b"new")),
            (b"c", None),
            (b"d", Some(b"put")),
            (b"f", Some(b"last")),
        ];
        let mut out = Entries::new();
        let forward = entries(&[("a", "1"), ("b", "2"), ("c", "3"), ("e", "5")]);
        merge_changes(&forward, &changed, Direction::Forward, &mut out);
        let want = [
            ("a", "new"),
            ("b", "2"),
            ("d", "put"),
            ("e", "5"),
            ("f", "last"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        assert_eq!(listed(&out), want, "forward");
        let mut out = Entries::new();
        let backward = entries(&[("e", "5"), ("c", "3"), ("b", "2"), ("a", "1")]);
        merge_changes(&backward, &changed, Direction::Backward, &mut out);
        let mut reversed = want;
        reversed.reverse();
        assert_eq!(listed(&out), reversed, "backward");
    }
}
