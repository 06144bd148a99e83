//! [`Cursor`]: ordered range scans, forward or backward, yielding owned `(key, value)` pairs.
//!
//! ```text
//!  Start --seek()--> Batch --entries run out--> follow the leaf link --> Batch ...
//!                      |                          | link does not point back: seek() again
//!                      +-- a key past the far bound, or no link --> Done
//! ```
//!
//! A cursor copies the entries of one leaf that lie in the range (a batch, found by a binary
//! search for the start, no more than its [`Cursor::limit`]), drops the guard, and yields
//! them; overflow values are read when yielded. [`Cursor::fill`] copies a leaf's entries
//! straight into a caller's [`super::Entries`] instead (one copy, no allocation per entry). It then follows the leaf chain
//! (`next` forward, `prev` backward). It holds no guard between calls, so it must not run
//! across a write to the tree (the engine serializes them); if a leaf it follows does not link
//! back to the leaf it came from, it seeks again from the root past the last key it yielded,
//! so it never yields a key twice or out of order. A leaf chain that does not link back right
//! after a seek, or that goes backwards in key order, is [`crate::Error::Corruption`].

use super::entries::Entries;
use super::node::{NodeKind, NodeRef, ValueRef};
use super::walk;
use super::{Pages, corrupt, overflow};
use crate::Result;
use crate::page::{PageId, PageKind};
use std::fmt;
use std::ops::Bound;

/// The order of a scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Ascending keys.
    Forward,
    /// Descending keys.
    Backward,
}

/// Most leaves a scan may visit in a row without yielding an entry before it calls the leaf
/// chain a loop. Empty leaves are rare (a merge empties them), so real trees stay far below.
const EMPTY_LEAVES_MAX: u64 = 1 << 20;

/// An ordered scan over a key range; see the module docs.
pub struct Cursor<'p, P: Pages> {
    pages: &'p P,
    root: PageId,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    direction: Direction,
    /// Entries of the current leaf still to yield, in order (an overflow value's bytes are
    /// empty here: `far` says where they are).
    batch: Entries,
    /// Per entry of the batch, from the first not yet yielded: the overflow chain
    /// `(len, first page)` holding its value, if it has one.
    far: std::collections::VecDeque<Option<(u32, PageId)>>,
    /// The leaf the batch came from; 0 before the first seek.
    leaf: PageId,
    /// The next leaf in `direction`; 0 when the scan ends with the batch.
    link: PageId,
    /// The last key yielded.
    last: Option<Vec<u8>>,
    /// Whether the current batch came from a seek rather than a link.
    seeked: bool,
    /// Whether the current batch stopped at `limit` before its leaf's range ended: the scan
    /// goes on by a seek past the last key yielded, not by the link.
    truncated: bool,
    /// Most entries the scan yields ([`Cursor::limit`]); a load copies no more than are left.
    limit: usize,
    /// Entries yielded so far.
    yielded: usize,
    empty_leaves: u64,
    done: bool,
}

impl<'p, P: Pages> Cursor<'p, P> {
    pub(super) fn new(
        pages: &'p P,
        root: PageId,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        direction: Direction,
    ) -> Self {
        Cursor {
            pages,
            root,
            lower,
            upper,
            direction,
            batch: Entries::new(),
            far: std::collections::VecDeque::new(),
            leaf: PageId(0),
            link: PageId(0),
            last: None,
            seeked: false,
            truncated: false,
            limit: usize::MAX,
            yielded: 0,
            empty_leaves: 0,
            done: false,
        }
    }

    /// The scan yields at most `entries` entries, and copies no more than that out of a
    /// leaf: a range of 10 keys copies 10 entries, not the rest of its leaf.
    #[must_use]
    pub fn limit(mut self, entries: usize) -> Self {
        self.limit = entries;
        self
    }

    /// The bound the scan starts (or resumes) from: past the last key yielded, else the
    /// range's near end.
    fn start_bound(&self) -> Bound<&[u8]> {
        match (&self.last, self.direction) {
            (Some(last), _) => Bound::Excluded(last.as_slice()),
            (None, Direction::Forward) => self.lower.as_ref().map(Vec::as_slice),
            (None, Direction::Backward) => self.upper.as_ref().map(Vec::as_slice),
        }
    }

    /// The first index of `node` (forward), or one past the last (backward), whose key lies
    /// past the bound the scan starts from: the keys to copy are `from..count` forward and
    /// `0..from` backward. A binary search, as a descent's.
    fn start_index(&self, node: &NodeRef<'_>) -> usize {
        match (self.start_bound(), self.direction) {
            (Bound::Unbounded, Direction::Forward) => 0,
            (Bound::Unbounded, Direction::Backward) => node.count(),
            (Bound::Included(bound), Direction::Forward)
            | (Bound::Excluded(bound), Direction::Backward) => {
                node.search(bound).unwrap_or_else(|at| at)
            }
            (Bound::Excluded(bound), Direction::Forward)
            | (Bound::Included(bound), Direction::Backward) => match node.search(bound) {
                Ok(at) => at + 1,
                Err(at) => at,
            },
        }
    }

    /// Whether `key` is past the bound the scan starts from (or past the last key yielded).
    fn after_start(&self, key: &[u8]) -> bool {
        match (self.start_bound(), self.direction) {
            (Bound::Unbounded, _) => true,
            (Bound::Included(bound), Direction::Forward) => key >= bound,
            (Bound::Excluded(bound), Direction::Forward) => key > bound,
            (Bound::Included(bound), Direction::Backward) => key <= bound,
            (Bound::Excluded(bound), Direction::Backward) => key < bound,
        }
    }

    /// Whether `key` is before the bound the scan ends at.
    fn before_end(&self, key: &[u8]) -> bool {
        match (self.direction, &self.upper, &self.lower) {
            (Direction::Forward, Bound::Included(bound), _) => key <= bound.as_slice(),
            (Direction::Forward, Bound::Excluded(bound), _) => key < bound.as_slice(),
            (Direction::Backward, _, Bound::Included(bound)) => key >= bound.as_slice(),
            (Direction::Backward, _, Bound::Excluded(bound)) => key > bound.as_slice(),
            (Direction::Forward, Bound::Unbounded, _)
            | (Direction::Backward, _, Bound::Unbounded) => true,
        }
    }

    /// Descends to the leaf where the scan starts (or resumes).
    fn seek_leaf(&mut self) -> Result<PageId> {
        let start = match (&self.last, self.direction) {
            (Some(last), _) => Some(last.as_slice()),
            (None, Direction::Forward) => match &self.lower {
                Bound::Included(key) | Bound::Excluded(key) => Some(key.as_slice()),
                Bound::Unbounded => Some(&[][..]),
            },
            (None, Direction::Backward) => match &self.upper {
                Bound::Included(key) | Bound::Excluded(key) => Some(key.as_slice()),
                Bound::Unbounded => None,
            },
        };
        let leaf = match start {
            Some(key) => walk::find_leaf(self.pages, self.root, key)?,
            None => walk::descend_by(self.pages, self.root, walk::last_child)?.1,
        };
        self.seeked = true;
        Ok(leaf)
    }

    /// The leaf the next batch comes from, and whether it is reached through the chain
    /// (`Some((leaf, true))`: its link back to the current leaf is checked when it is
    /// loaded); `None` at the end of the scan.
    fn next_leaf(&mut self) -> Result<Option<(PageId, bool)>> {
        if self.done || self.yielded >= self.limit {
            self.done = true;
            return Ok(None);
        }
        if self.leaf.0 == 0 || self.truncated {
            return self.seek_leaf().map(|leaf| Some((leaf, false)));
        }
        if self.link.0 == 0 {
            self.done = true;
            return Ok(None);
        }
        Ok(Some((self.link, true)))
    }

    /// Copies the in-range entries of `leaf` (no more than `room`) into `sink`, which may
    /// refuse one (the load is abandoned, nothing about the cursor changed, and `Ok(None)` is
    /// returned). `linked`: reached through the leaf chain from the current leaf, so it must
    /// link back to it and its keys must all lie beyond the last key yielded; one that does
    /// not link back is sought from the root instead (`Ok(Some(0))`, nothing copied), or is
    /// corrupt when the current leaf came from a seek. Returns how many were copied.
    fn load_with(
        &mut self,
        leaf: PageId,
        linked: bool,
        room: usize,
        sink: &mut impl Sink,
    ) -> Result<Option<usize>> {
        let from_leaf = self.leaf;
        let page = self.pages.read(leaf)?;
        assert_eq!(page.id(), leaf, "the pages returned another page");
        let links_back = !linked
            || page.kind() == PageKind::Leaf && {
                let node = NodeRef::parse(&page).map_err(|what| corrupt(self.pages, leaf, what))?;
                match self.direction {
                    Direction::Forward => node.prev() == from_leaf,
                    Direction::Backward => node.next() == from_leaf,
                }
            };
        if !links_back {
            drop(page);
            if self.seeked {
                return Err(corrupt(
                    self.pages,
                    from_leaf,
                    "leaf chain link does not link back",
                ));
            }
            // The chain changed under the cursor (a write between batches): seek again.
            self.truncated = true;
            return Ok(Some(0));
        }
        let node = NodeRef::parse(&page).map_err(|what| corrupt(self.pages, leaf, what))?;
        if node.kind() != NodeKind::Leaf {
            drop(page);
            return Err(corrupt(
                self.pages,
                leaf,
                "leaf chain or descent leads to a branch",
            ));
        }
        let count = node.count();
        // A linked leaf's first key in scan order must lie past the last key yielded.
        let first = match self.direction {
            Direction::Forward => 0,
            Direction::Backward => count.wrapping_sub(1),
        };
        if linked && self.last.is_some() && count > 0 && !self.after_start(node.key(first)) {
            drop(page);
            return Err(corrupt(
                self.pages,
                leaf,
                "leaf chain goes backwards in key order",
            ));
        }
        let from = self.start_index(&node);
        let indices: Box<dyn Iterator<Item = usize>> = match self.direction {
            Direction::Forward => Box::new(from..count),
            Direction::Backward => Box::new((0..from).rev()),
        };
        // Room for the entries this load may copy, at the leaf's mean cell size.
        let estimate = room.min(match self.direction {
            Direction::Forward => count - from.min(count),
            Direction::Backward => from.min(count),
        });
        if let Some(mean) = node.cell_area_bytes().checked_div(count) {
            sink.reserve(estimate, estimate * mean);
        }
        let (mut copied, mut ended, mut truncated) = (0, false, false);
        for index in indices {
            let key = node.key(index);
            if !self.after_start(key) {
                // Only in a leaf whose keys are out of order (the search assumes them
                // sorted): skipped, as a linear pass would.
                continue;
            }
            if !self.before_end(key) {
                ended = true;
                break;
            }
            if copied == room {
                truncated = true;
                break;
            }
            if !sink.push(key, node.value(index)) {
                return Ok(None);
            }
            copied += 1;
        }
        let link = match self.direction {
            Direction::Forward => node.next(),
            Direction::Backward => node.prev(),
        };
        drop(page);
        if copied == 0 {
            self.empty_leaves += 1;
            if self.empty_leaves > EMPTY_LEAVES_MAX {
                return Err(corrupt(self.pages, leaf, "leaf chain loops"));
            }
        } else {
            self.empty_leaves = 0;
        }
        if linked {
            self.seeked = false;
        }
        self.leaf = leaf;
        self.truncated = truncated;
        self.link = if ended { PageId(0) } else { link };
        Ok(Some(copied))
    }

    /// Loads the cursor's own batch from `leaf` (no more than the limit leaves).
    fn load(&mut self, leaf: PageId, linked: bool) -> Result<()> {
        let room = self.limit.saturating_sub(self.yielded);
        let mut own = Own {
            batch: std::mem::take(&mut self.batch),
            far: std::mem::take(&mut self.far),
        };
        own.batch.clear();
        own.far.clear();
        let loaded = self.load_with(leaf, linked, room, &mut own);
        self.batch = own.batch;
        self.far = own.far;
        loaded.map(|_| ())
    }

    /// Loads the next batch into the cursor's own. Returns false at the end of the scan.
    fn advance(&mut self) -> Result<bool> {
        match self.next_leaf()? {
            Some((leaf, linked)) => self.load(leaf, linked).map(|()| true),
            None => Ok(false),
        }
    }
}

/// Where a load copies entries.
trait Sink {
    fn reserve(&mut self, entries: usize, bytes: usize);
    /// Copies an entry; false refuses it (and abandons the load).
    fn push(&mut self, key: &[u8], value: ValueRef<'_>) -> bool;
}

/// The cursor's own batch: an overflow value is kept as where it is, read when yielded.
struct Own {
    batch: Entries,
    far: std::collections::VecDeque<Option<(u32, PageId)>>,
}

impl Sink for Own {
    fn reserve(&mut self, entries: usize, bytes: usize) {
        self.batch.reserve(entries, bytes);
        self.far.reserve(entries);
    }

    fn push(&mut self, key: &[u8], value: ValueRef<'_>) -> bool {
        match value {
            ValueRef::Inline(value) => {
                self.batch.push(key, value);
                self.far.push_back(None);
            }
            ValueRef::Overflow { len, first } => {
                self.batch.push(key, &[]);
                self.far.push_back(Some((len, first)));
            }
        }
        true
    }
}

/// A caller's batch, filled straight from the leaf: refuses an overflow value (its chain
/// is read through the cursor's own batch instead).
impl Sink for Entries {
    fn reserve(&mut self, entries: usize, bytes: usize) {
        Entries::reserve(self, entries, bytes);
    }

    fn push(&mut self, key: &[u8], value: ValueRef<'_>) -> bool {
        match value {
            ValueRef::Inline(value) => {
                Entries::push(self, key, value);
                true
            }
            ValueRef::Overflow { .. } => false,
        }
    }
}

impl<P: Pages> Cursor<'_, P> {
    /// The next entry, handed to `f` as borrowed bytes (an overflow value is read first).
    fn next_with<T>(&mut self, f: impl FnOnce(&[u8], &[u8]) -> T) -> Option<Result<T>> {
        loop {
            if let Some((key, value)) = self.batch.take_first() {
                let far = self.far.pop_front().expect("a chain slot per entry");
                match &mut self.last {
                    Some(last) => {
                        match self.direction {
                            Direction::Forward => assert!(key > &last[..], "scan went backwards"),
                            Direction::Backward => assert!(key < &last[..], "scan went forwards"),
                        }
                        last.clear();
                        last.extend_from_slice(key);
                    }
                    None => self.last = Some(key.to_vec()),
                }
                self.yielded += 1;
                return Some(match far {
                    None => Ok(f(key, value)),
                    Some((len, first)) => match overflow::read(self.pages, first, len) {
                        Ok(value) => Ok(f(key, &value)),
                        Err(err) => {
                            self.done = true;
                            self.batch.clear();
                            self.far.clear();
                            Err(err)
                        }
                    },
                });
            }
            match self.advance() {
                Ok(true) => {}
                Ok(false) => return None,
                Err(err) => {
                    self.done = true;
                    return Some(Err(err));
                }
            }
        }
    }

    /// Appends up to `max` next entries to `out`, copied into its buffer (no allocation per
    /// entry). Returns how many.
    ///
    /// # Errors
    ///
    /// A failed page read or a corrupt leaf chain; the scan ends.
    pub fn fill(&mut self, out: &mut Entries, max: usize) -> Result<usize> {
        let filled = self.fill_from_leaves(out, max);
        if filled.is_err() {
            self.done = true;
            self.batch.clear();
            self.far.clear();
        }
        filled
    }

    /// [`Cursor::fill`]: a leaf's entries go straight into `out` (one copy), unless one holds
    /// an overflow value: then that leaf goes through the cursor's own batch.
    fn fill_from_leaves(&mut self, out: &mut Entries, max: usize) -> Result<usize> {
        let mut filled = 0;
        while filled < max {
            if !self.batch.is_empty() {
                match self.next_with(|key, value| out.push(key, value)) {
                    Some(Ok(())) => filled += 1,
                    Some(Err(err)) => return Err(err),
                    None => break,
                }
                continue;
            }
            let Some((leaf, linked)) = self.next_leaf()? else {
                break;
            };
            let room = (max - filled).min(self.limit - self.yielded);
            let before = out.pushed();
            match self.load_with(leaf, linked, room, out)? {
                Some(0) => {}
                Some(copied) => {
                    self.yielded += copied;
                    filled += copied;
                    let (key, _) = out.last().expect("entries were copied");
                    debug_assert!(self.after_start(key), "a batch starts past the last key");
                    let last = self.last.get_or_insert_with(Vec::new);
                    last.clear();
                    last.extend_from_slice(key);
                }
                None => {
                    out.truncate(before);
                    self.load(leaf, linked)?;
                }
            }
        }
        Ok(filled)
    }
}

impl<P: Pages> Iterator for Cursor<'_, P> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_with(|key, value| (key.to_vec(), value.to_vec()))
    }
}

impl<P: Pages> fmt::Debug for Cursor<'_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cursor")
            .field("root", &self.root)
            .field("direction", &self.direction)
            .field("leaf", &self.leaf)
            .field("link", &self.link)
            .field("batch", &self.batch.len())
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btree::{MemPages, Tree};

    fn tree_of(count: u32) -> (MemPages, Tree) {
        let pages = MemPages::new(4096);
        let tree = Tree::create(&pages).expect("create");
        for i in 0..count {
            tree.put(&pages, format!("{i:05}").as_bytes(), &i.to_le_bytes())
                .expect("put");
        }
        (pages, tree)
    }

    fn keys(cursor: Cursor<'_, MemPages>) -> Vec<String> {
        cursor
            .map(|entry| String::from_utf8(entry.expect("scan").0).expect("utf8"))
            .collect()
    }

    #[test]
    fn bounds_in_both_directions() {
        let (pages, tree) = tree_of(1000);
        let scan = |lower: Bound<&[u8]>, upper: Bound<&[u8]>, direction| {
            keys(tree.scan(&pages, lower, upper, direction))
        };
        let all = scan(Bound::Unbounded, Bound::Unbounded, Direction::Forward);
        assert_eq!(all.len(), 1000);
        assert!(all.windows(2).all(|pair| pair[0] < pair[1]));
        let mut backward = scan(Bound::Unbounded, Bound::Unbounded, Direction::Backward);
        backward.reverse();
        assert_eq!(backward, all);
        let (a, b) = (&b"00100"[..], &b"00200"[..]);
        assert_eq!(
            scan(Bound::Included(a), Bound::Excluded(b), Direction::Forward).len(),
            100
        );
        assert_eq!(
            scan(Bound::Excluded(a), Bound::Included(b), Direction::Forward).len(),
            100
        );
        let back = scan(Bound::Included(a), Bound::Included(b), Direction::Backward);
        assert_eq!((back.len(), back[0].as_str()), (101, "00200"));
        assert!(scan(Bound::Included(b), Bound::Excluded(a), Direction::Forward).is_empty());
        assert!(scan(Bound::Included(b), Bound::Excluded(a), Direction::Backward).is_empty());
        assert!(scan(Bound::Excluded(a), Bound::Excluded(a), Direction::Forward).is_empty());
    }

    #[test]
    fn a_limited_scan_yields_exactly_the_first_entries_of_the_unlimited_one() {
        let (pages, tree) = tree_of(1000);
        let (a, b) = (&b"00100"[..], &b"00900"[..]);
        for direction in [Direction::Forward, Direction::Backward] {
            for (lower, upper) in [
                (Bound::Unbounded, Bound::Unbounded),
                (Bound::Included(a), Bound::Excluded(b)),
                (Bound::Excluded(a), Bound::Included(b)),
            ] {
                let all = keys(tree.scan(&pages, lower, upper, direction));
                // Across leaf boundaries (a 4 KiB leaf holds some tens of these entries).
                for limit in [0, 1, 10, 16, 57, 300, 5000] {
                    let limited = keys(tree.scan(&pages, lower, upper, direction).limit(limit));
                    let want = &all[..limit.min(all.len())];
                    assert_eq!(
                        limited, want,
                        "{direction:?} {lower:?}..{upper:?} limit {limit}"
                    );
                    let mut entries = Entries::new();
                    let mut cursor = tree.scan(&pages, lower, upper, direction).limit(limit);
                    let mut filled = 0;
                    loop {
                        let got = cursor.fill(&mut entries, 7).expect("fill");
                        filled += got;
                        if got < 7 {
                            break;
                        }
                    }
                    assert_eq!(filled, want.len());
                    let got: Vec<String> = entries
                        .iter()
                        .map(|(key, _)| String::from_utf8(key.to_vec()).expect("utf8"))
                        .collect();
                    assert_eq!(got, want, "fill, {direction:?} limit {limit}");
                }
            }
        }
    }

    #[test]
    fn a_fill_across_overflow_values_matches_the_iterator() {
        let pages = MemPages::new(4096);
        let tree = Tree::create(&pages).expect("create");
        let value = |i: u32| -> Vec<u8> {
            // Every seventh value is too large for a leaf cell: an overflow chain.
            let len: u32 = if i % 7 == 3 { 3000 } else { 20 };
            (0..len).map(|b| (b.wrapping_add(i) % 251) as u8).collect()
        };
        for i in 0..400 {
            tree.put(&pages, format!("{i:05}").as_bytes(), &value(i))
                .expect("put");
        }
        for direction in [Direction::Forward, Direction::Backward] {
            let all: Vec<(Vec<u8>, Vec<u8>)> = tree
                .scan(&pages, Bound::Unbounded, Bound::Unbounded, direction)
                .map(|entry| entry.expect("scan"))
                .collect();
            assert_eq!(all.len(), 400);
            for step in [1, 5, 64] {
                let mut cursor = tree.scan(&pages, Bound::Unbounded, Bound::Unbounded, direction);
                let mut entries = Entries::new();
                let mut got = Vec::new();
                loop {
                    entries.clear();
                    let filled = cursor.fill(&mut entries, step).expect("fill");
                    got.extend(entries.iter().map(|(k, v)| (k.to_vec(), v.to_vec())));
                    if filled < step {
                        break;
                    }
                }
                assert_eq!(got, all, "{direction:?}, {step} at a time");
            }
        }
    }

    #[test]
    fn prefix_scan() {
        let (pages, tree) = tree_of(1000);
        let found = keys(tree.scan_prefix(&pages, b"0042", Direction::Forward));
        assert_eq!(
            found,
            (420..430).map(|i| format!("{i:05}")).collect::<Vec<_>>()
        );
        let found = keys(tree.scan_prefix(&pages, b"0042", Direction::Backward));
        assert_eq!(found.first().map(String::as_str), Some("00429"));
        assert_eq!(
            keys(tree.scan_prefix(&pages, b"", Direction::Forward)).len(),
            1000
        );
        assert!(keys(tree.scan_prefix(&pages, b"9", Direction::Forward)).is_empty());
    }

    #[test]
    fn a_write_between_steps_is_survived_by_a_seek() {
        let (pages, tree) = tree_of(2000);
        let mut cursor = tree.scan(
            &pages,
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
        );
        let mut seen = Vec::new();
        for _ in 0..300 {
            seen.push(cursor.next().expect("entry").expect("ok").0);
        }
        // Delete everything from 00300 to 01500: leaves are merged and freed under the cursor.
        for i in 300..1500 {
            tree.delete(&pages, format!("{i:05}").as_bytes())
                .expect("delete");
        }
        seen.extend(cursor.map(|entry| entry.expect("ok").0));
        // Keys still in the batch copied before the deletes may appear; nothing repeats, the
        // order holds and every key that was never deleted is there.
        assert!(seen.windows(2).all(|pair| pair[0] < pair[1]));
        for i in (0..300).chain(1500..2000) {
            assert!(seen.contains(&format!("{i:05}").into_bytes()), "{i} missed");
        }
    }
}
