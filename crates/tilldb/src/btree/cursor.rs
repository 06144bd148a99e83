//! [`Cursor`]: ordered range scans, forward or backward, yielding owned `(key, value)` pairs.
//!
//! ```text
//!  Start --seek()--> Batch --entries run out--> follow the leaf link --> Batch ...
//!                      |                          | link does not point back: seek() again
//!                      +-- a key past the far bound, or no link --> Done
//! ```
//!
//! A cursor copies the entries of one leaf that lie in the range (a batch), drops the guard,
//! and yields them; overflow values are read when yielded. It then follows the leaf chain
//! (`next` forward, `prev` backward). It holds no guard between calls, so it must not run
//! across a write to the tree (the engine serializes them); if a leaf it follows does not link
//! back to the leaf it came from, it seeks again from the root past the last key it yielded,
//! so it never yields a key twice or out of order. A leaf chain that does not link back right
//! after a seek, or that goes backwards in key order, is [`crate::Error::Corruption`].

use super::node::{LeafValue, NodeKind, NodeRef};
use super::walk::{self, resolve, with_node};
use super::{Pages, corrupt};
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
    /// Entries of the current leaf still to yield, in reverse order of yielding.
    batch: Vec<(Vec<u8>, LeafValue)>,
    /// The leaf the batch came from; 0 before the first seek.
    leaf: PageId,
    /// The next leaf in `direction`; 0 when the scan ends with the batch.
    link: PageId,
    /// The last key yielded.
    last: Option<Vec<u8>>,
    /// Whether the current batch came from a seek rather than a link.
    seeked: bool,
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
            batch: Vec::new(),
            leaf: PageId(0),
            link: PageId(0),
            last: None,
            seeked: false,
            empty_leaves: 0,
            done: false,
        }
    }

    /// Whether `key` is past the bound the scan starts from (or past the last key yielded).
    fn after_start(&self, key: &[u8]) -> bool {
        let start = match (&self.last, self.direction) {
            (Some(last), _) => Bound::Excluded(last.as_slice()),
            (None, Direction::Forward) => self.lower.as_ref().map(Vec::as_slice),
            (None, Direction::Backward) => self.upper.as_ref().map(Vec::as_slice),
        };
        match (start, self.direction) {
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

    /// Descends to the leaf where the scan starts (or resumes) and loads it.
    fn seek(&mut self) -> Result<()> {
        let start = match (&self.last, self.direction) {
            (Some(last), _) => Some(last.clone()),
            (None, Direction::Forward) => match &self.lower {
                Bound::Included(key) | Bound::Excluded(key) => Some(key.clone()),
                Bound::Unbounded => Some(Vec::new()),
            },
            (None, Direction::Backward) => match &self.upper {
                Bound::Included(key) | Bound::Excluded(key) => Some(key.clone()),
                Bound::Unbounded => None,
            },
        };
        let (_, leaf) = match start {
            Some(key) => walk::descend(self.pages, self.root, &key)?,
            None => walk::descend_by(self.pages, self.root, last_child)?,
        };
        self.seeked = true;
        self.load(leaf, false)
    }

    /// Copies the in-range entries of `leaf` into the batch. `linked`: reached through the
    /// leaf chain, so its keys must all lie beyond the last key yielded.
    fn load(&mut self, leaf: PageId, linked: bool) -> Result<()> {
        let (batch, link, ended, in_order) = with_node(self.pages, leaf, |node| {
            if node.kind() != NodeKind::Leaf {
                return Err("leaf chain or descent leads to a branch");
            }
            let indices: Box<dyn Iterator<Item = usize>> = match self.direction {
                Direction::Forward => Box::new(0..node.count()),
                Direction::Backward => Box::new((0..node.count()).rev()),
            };
            let mut batch = Vec::new();
            let mut ended = false;
            let mut in_order = true;
            for (position, index) in indices.enumerate() {
                let key = node.key(index);
                if !self.after_start(key) {
                    in_order &= !(linked && position == 0 && self.last.is_some());
                    continue;
                }
                if !self.before_end(key) {
                    ended = true;
                    break;
                }
                batch.push((key.to_vec(), node.value(index).to_owned()));
            }
            let link = match self.direction {
                Direction::Forward => node.next(),
                Direction::Backward => node.prev(),
            };
            Ok((batch, link, ended, in_order))
        })?
        .map_err(|what| corrupt(self.pages, leaf, what))?;
        if !in_order {
            return Err(corrupt(
                self.pages,
                leaf,
                "leaf chain goes backwards in key order",
            ));
        }
        if batch.is_empty() {
            self.empty_leaves += 1;
            if self.empty_leaves > EMPTY_LEAVES_MAX {
                return Err(corrupt(self.pages, leaf, "leaf chain loops"));
            }
        } else {
            self.empty_leaves = 0;
        }
        self.batch = batch;
        self.batch.reverse();
        self.leaf = leaf;
        self.link = if ended { PageId(0) } else { link };
        Ok(())
    }

    /// Loads the next batch. Returns false at the end of the scan.
    fn advance(&mut self) -> Result<bool> {
        if self.done {
            return Ok(false);
        }
        if self.leaf.0 == 0 {
            self.seek()?;
            return Ok(true);
        }
        if self.link.0 == 0 {
            self.done = true;
            return Ok(false);
        }
        let (from, to) = (self.leaf, self.link);
        let links_back = {
            let page = self.pages.read(to)?;
            page.kind() == PageKind::Leaf && {
                let node = NodeRef::parse(&page).map_err(|what| corrupt(self.pages, to, what))?;
                match self.direction {
                    Direction::Forward => node.prev() == from,
                    Direction::Backward => node.next() == from,
                }
            }
        };
        if links_back {
            self.seeked = false;
            self.load(to, true)?;
        } else if self.seeked {
            return Err(corrupt(
                self.pages,
                from,
                "leaf chain link does not link back",
            ));
        } else {
            self.seek()?;
        }
        Ok(true)
    }
}

/// The index of a branch's last child (its key count): the way to the rightmost leaf.
fn last_child(node: &NodeRef<'_>) -> usize {
    node.count()
}

impl<P: Pages> Iterator for Cursor<'_, P> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((key, value)) = self.batch.pop() {
                if let Some(last) = &self.last {
                    match self.direction {
                        Direction::Forward => assert!(key > *last, "scan went backwards"),
                        Direction::Backward => assert!(key < *last, "scan went forwards"),
                    }
                }
                self.last = Some(key.clone());
                let value = resolve(self.pages, value);
                if value.is_err() {
                    self.done = true;
                    self.batch.clear();
                }
                return Some(value.map(|value| (key, value)));
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
