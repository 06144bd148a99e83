//! What readers may see while commits are in flight.
//!
//! A commit changes pages in the buffer pool before its log record is durable (the flush wait
//! happens outside the writer lock, so the next writer can go on). Readers must not see such a
//! change until the commit is acknowledged at its level ([`Visibility`]), and must see a
//! consistent prefix of commits. The overlay keeps, for every key an unacknowledged (or
//! still-needed) commit changed, the value it had *before* that commit:
//!
//! ```text
//!   tree (latest):  k = v3
//!   overlay:        k: [(lsn 40, before = v1), (lsn 55, before = v2)]
//!   reader at 39 -> v1     reader at 40..54 -> v2     reader at >= 55 -> v3 (the tree)
//! ```
//!
//! A reader with snapshot lsn `r` sees, for key `k`, the `before` value of the first entry
//! with `lsn > r`, or the tree's value when there is none. Entries are pruned once every
//! reader's snapshot is at or past their lsn.
//!
//! A commit that fills a table it found empty (a bulk load) records no entry per key: it
//! records one *empty mark*, "table `t` was empty before lsn `m`", which stands for an entry
//! `before = None` of every key of `t` at `m`. So a reader at `r` takes, of the key's first
//! entry after `r` and the table's first mark after `r`, the earlier: a mark first means the
//! key was absent at `r` (the table was empty just before `m`, and nothing changed the key
//! between `r` and `m`). A scan by a reader below a mark reads no tree key of that table: it
//! sees only the overlay's keys, each as [`Overlay::seen`] says (`hides_table`).

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

/// Which table a key belongs to.
pub type TableId = u64;

/// The value a key had before one commit, and that commit's lsn.
#[derive(Debug, PartialEq, Eq)]
struct Before {
    lsn: u64,
    value: Option<Vec<u8>>,
}

/// A key's hidden versions, oldest first, lsns strictly increasing. The first is inline: most
/// keys have one (a second commit of the same key while the first is unacknowledged is rare).
#[derive(Debug)]
struct Versions {
    oldest: Before,
    newer: VecDeque<Before>,
}

impl Versions {
    fn iter(&self) -> impl Iterator<Item = &Before> {
        std::iter::once(&self.oldest).chain(&self.newer)
    }

    fn last(&self) -> &Before {
        self.newer.back().unwrap_or(&self.oldest)
    }
}

/// The overlay's key for `key` of `table`: the table id big-endian, then the key, so that the
/// byte order is (table, key) order and a lookup borrows a `[u8]`. One allocation, shared by
/// the versions map and the lsn index.
#[expect(
    clippy::big_endian_bytes,
    reason = "big-endian so that byte order is table order"
)]
pub(super) fn entry_key(table: TableId, key: &[u8]) -> Arc<[u8]> {
    // Collected from an iterator of known length: written straight into the `Arc`'s one
    // allocation (a `Vec` converted would be a second).
    table.to_be_bytes().iter().chain(key).copied().collect()
}

/// Bytes of the table id at the start of an entry key.
pub(super) const TABLE_BYTES: usize = 8;

/// Calls `f` with the entry key of `key` in `table`, built on the stack when it is short (the
/// reads that consult the overlay allocate nothing for it).
#[expect(
    clippy::big_endian_bytes,
    reason = "big-endian so that byte order is table order"
)]
pub(super) fn with_entry_key<R>(table: TableId, key: &[u8], f: impl FnOnce(&[u8]) -> R) -> R {
    const STACK: usize = 256;
    if TABLE_BYTES + key.len() <= STACK {
        let mut buf = [0u8; STACK];
        buf[..TABLE_BYTES].copy_from_slice(&table.to_be_bytes());
        buf[TABLE_BYTES..TABLE_BYTES + key.len()].copy_from_slice(key);
        f(&buf[..TABLE_BYTES + key.len()])
    } else {
        f(&entry_key(table, key))
    }
}

/// Older values of recently changed keys (see the module doc).
#[derive(Debug, Default)]
pub struct Overlay {
    /// Per (table, key) as an entry key.
    entries: BTreeMap<Arc<[u8]>, Versions>,
    /// Every version's (lsn, entry key), in recording order, which is lsn order: for pruning.
    by_lsn: VecDeque<(u64, Arc<[u8]>)>,
    /// Per table, the lsns of its empty marks (see the module doc), increasing.
    empty_marks: BTreeMap<TableId, VecDeque<u64>>,
    /// Every empty mark's (lsn, table), in lsn order: for pruning.
    marks_by_lsn: VecDeque<(u64, TableId)>,
}

/// What the overlay says a reader sees for one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Read the tree: no newer change is hidden from this reader.
    Tree,
    /// This value (`None`: the key did not exist) instead of the tree's.
    Value(Option<Vec<u8>>),
}

impl Overlay {
    /// Records that the commit at `lsn` changed `key`, which held `before` until then.
    /// Commits are recorded in lsn order.
    pub fn record(&mut self, table: TableId, key: &[u8], lsn: u64, before: Option<Vec<u8>>) {
        self.assert_in_order(lsn);
        let version = Before { lsn, value: before };
        let existing = with_entry_key(table, key, |probe| {
            self.entries
                .get_key_value(probe)
                .map(|(shared, _)| Arc::clone(shared))
        });
        let shared = if let Some(shared) = existing {
            let versions = self.entries.get_mut(&*shared).expect("found just above");
            let last = versions.last().lsn;
            assert!(
                last < lsn,
                "overlay lsns must increase per key: {last} then {lsn}"
            );
            versions.newer.push_back(version);
            shared
        } else {
            let shared = entry_key(table, key);
            let versions = Versions {
                oldest: version,
                newer: VecDeque::new(),
            };
            self.entries.insert(Arc::clone(&shared), versions);
            shared
        };
        self.by_lsn.push_back((lsn, shared));
    }

    /// Records that the commit at `lsn` found `table` empty: every key it holds from then
    /// on was absent before `lsn` (see the module doc). Commits are recorded in lsn order.
    pub fn record_empty(&mut self, table: TableId, lsn: u64) {
        self.assert_in_order(lsn);
        let marks = self.empty_marks.entry(table).or_default();
        if let Some(last) = marks.back() {
            assert!(
                *last < lsn,
                "overlay: empty marks of table {table} out of order: {last} then {lsn}"
            );
        }
        marks.push_back(lsn);
        self.marks_by_lsn.push_back((lsn, table));
    }

    fn assert_in_order(&self, lsn: u64) {
        let last = self
            .by_lsn
            .back()
            .map(|(l, _)| *l)
            .max(self.marks_by_lsn.back().map(|(l, _)| *l));
        if let Some(last) = last {
            assert!(
                last <= lsn,
                "overlay: commits recorded out of lsn order: {last} then {lsn}"
            );
        }
    }

    /// The first empty mark of `table` after `read_lsn`: a reader at `read_lsn` sees the
    /// table as it was before that commit, when it was empty.
    fn first_mark_after(&self, table: TableId, read_lsn: u64) -> Option<u64> {
        self.empty_marks
            .get(&table)?
            .iter()
            .copied()
            .find(|lsn| *lsn > read_lsn)
    }

    /// True when a reader at `read_lsn` may see none of `table`'s keys in the tree: a
    /// commit after its snapshot found the table empty. Its view of the table is the
    /// overlay's keys alone ([`Overlay::keys_in`], each [`Overlay::seen`]).
    #[must_use]
    pub fn hides_table(&self, table: TableId, read_lsn: u64) -> bool {
        self.first_mark_after(table, read_lsn).is_some()
    }

    /// What a reader at snapshot `read_lsn` sees for `key`.
    #[must_use]
    pub fn seen(&self, table: TableId, key: &[u8], read_lsn: u64) -> Seen {
        let mark = self.first_mark_after(table, read_lsn);
        let version = with_entry_key(table, key, |probe| {
            self.entries
                .get(probe)
                .and_then(|versions| versions.iter().find(|b| b.lsn > read_lsn))
        });
        match (version, mark) {
            (None, None) => Seen::Tree,
            (Some(b), mark) if mark.is_none_or(|m| b.lsn < m) => Seen::Value(b.value.clone()),
            // The table was empty just before the mark, and the key unchanged since the
            // snapshot: it was absent then.
            _ => Seen::Value(None),
        }
    }

    /// Keys of `table` in `[start, end)` (as bounds) that the overlay knows, in order: a
    /// scan merges these with the tree's keys.
    #[must_use]
    pub fn keys_in(
        &self,
        table: TableId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> impl DoubleEndedIterator<Item = &[u8]> {
        let lo = match start {
            Bound::Included(k) => Bound::Included(entry_key(table, k)),
            Bound::Excluded(k) => Bound::Excluded(entry_key(table, k)),
            Bound::Unbounded => Bound::Included(entry_key(table, &[])),
        };
        let hi = match end {
            Bound::Included(k) => Bound::Included(entry_key(table, k)),
            Bound::Excluded(k) => Bound::Excluded(entry_key(table, k)),
            Bound::Unbounded => match table.checked_add(1) {
                Some(next) => Bound::Excluded(entry_key(next, &[])),
                None => Bound::Unbounded,
            },
        };
        let bounds: (Bound<&[u8]>, Bound<&[u8]>) = (as_slice(&lo), as_slice(&hi));
        self.entries
            .range::<[u8], _>(bounds)
            .map(|(k, _)| &k[TABLE_BYTES..])
    }

    /// Forgets what no reader can need: entries of commits at or before `horizon` (the lowest
    /// snapshot any reader has or will get).
    pub fn prune(&mut self, horizon: u64) {
        // Oldest first (called after every commit, mostly with one version or none to drop).
        while let Some((lsn, _)) = self.by_lsn.front() {
            if *lsn > horizon {
                break;
            }
            let (lsn, key) = self.by_lsn.pop_front().expect("looked at above");
            let versions = self
                .entries
                .get_mut(&*key)
                .expect("by_lsn and entries agree");
            assert_eq!(versions.oldest.lsn, lsn, "pruning out of order");
            match versions.newer.pop_front() {
                Some(next) => versions.oldest = next,
                None => {
                    self.entries.remove(&*key);
                }
            }
        }
        while let Some(&(lsn, table)) = self.marks_by_lsn.front() {
            if lsn > horizon {
                break;
            }
            self.marks_by_lsn.pop_front();
            let marks = self
                .empty_marks
                .get_mut(&table)
                .expect("marks_by_lsn and empty_marks agree");
            assert_eq!(marks.pop_front(), Some(lsn), "pruning marks out of order");
            if marks.is_empty() {
                self.empty_marks.remove(&table);
            }
        }
    }

    /// Number of keys with hidden versions (empty marks not counted).
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no key has a hidden version and no table an empty mark: every reader
    /// reads the tree as it is.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.empty_marks.is_empty()
    }

    /// Panics unless every key's versions are in strictly increasing lsn order, none past
    /// `end` + 1 (a commit being appended records its values under a provisional lsn one past
    /// the log end it read), and the by-lsn index lists exactly those versions, in lsn order.
    /// O(entries log entries).
    pub fn check_invariants(&self, end: u64) {
        let mut indexed: BTreeMap<(u64, &[u8]), usize> = BTreeMap::new();
        let mut previous = 0;
        for (lsn, key) in &self.by_lsn {
            assert!(
                previous <= *lsn,
                "overlay: index out of lsn order: {previous} then {lsn}"
            );
            previous = *lsn;
            *indexed.entry((*lsn, &**key)).or_default() += 1;
        }
        let mut versions_total = 0;
        for (key, versions) in &self.entries {
            let mut last = None;
            for b in versions.iter() {
                if let Some(last) = last {
                    assert!(
                        last < b.lsn,
                        "overlay: {key:?} versions out of lsn order: {last} then {}",
                        b.lsn
                    );
                }
                last = Some(b.lsn);
                assert!(
                    b.lsn <= end + 1,
                    "overlay: version {} past the log end {end} + 1",
                    b.lsn
                );
                assert_eq!(
                    indexed.get(&(b.lsn, &**key)),
                    Some(&1),
                    "overlay: version {} of {key:?} not in the index exactly once",
                    b.lsn
                );
                versions_total += 1;
            }
        }
        assert_eq!(
            self.by_lsn.len(),
            versions_total,
            "overlay: the index and the versions disagree"
        );
        let mut marks_total = 0;
        for (table, marks) in &self.empty_marks {
            assert!(
                !marks.is_empty(),
                "overlay: table {table} with no marks kept"
            );
            for (i, lsn) in marks.iter().enumerate() {
                assert!(
                    i == 0 || marks[i - 1] < *lsn,
                    "overlay: marks of table {table} out of order"
                );
                assert!(
                    *lsn <= end + 1,
                    "overlay: mark {lsn} past the log end {end} + 1"
                );
                assert!(
                    self.marks_by_lsn.contains(&(*lsn, *table)),
                    "overlay: mark {lsn} of table {table} not in the index"
                );
                marks_total += 1;
            }
        }
        assert_eq!(
            self.marks_by_lsn.len(),
            marks_total,
            "overlay: the marks' index and the marks disagree"
        );
    }
}

/// A bound over an entry key, borrowed as bytes.
pub(super) fn as_slice(bound: &Bound<Arc<[u8]>>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn readers_see_the_version_of_their_snapshot() {
        let mut o = Overlay::default();
        o.record(1, b"k", 40, Some(b"v1".to_vec()));
        o.record(1, b"k", 55, Some(b"v2".to_vec()));
        o.record(1, b"new", 55, None);
        assert_eq!(o.seen(1, b"k", 39), Seen::Value(Some(b"v1".to_vec())));
        assert_eq!(o.seen(1, b"k", 40), Seen::Value(Some(b"v2".to_vec())));
        assert_eq!(o.seen(1, b"k", 55), Seen::Tree);
        assert_eq!(o.seen(1, b"new", 54), Seen::Value(None));
        assert_eq!(o.seen(2, b"k", 0), Seen::Tree, "other table");
        assert_eq!(
            o.keys_in(1, Bound::Unbounded, Bound::Unbounded)
                .collect::<Vec<_>>(),
            vec![&b"k"[..], b"new"]
        );
        o.prune(40);
        assert_eq!(o.seen(1, b"k", 40), Seen::Value(Some(b"v2".to_vec())));
        o.prune(55);
        assert!(o.is_empty());
    }

    proptest! {
        /// Against a model that keeps the whole history: a reader at any snapshot at or after
        /// the prune horizon sees exactly the state after the commits up to its snapshot. A
        /// commit that finds the table empty records an empty mark instead of its keys when
        /// `marks` says so; a reader's scan then reads no tree key while the table is hidden.
        #[test]
        fn overlay_matches_full_history(
            commits in prop::collection::vec(prop::collection::vec((0u8..6, prop::option::of(0u8..50)), 1..4), 1..30),
            marks in prop::collection::vec(any::<bool>(), 30),
            // Half the cases prune nothing: every snapshot, the oldest ones too, is read.
            prune_at in prop_oneof![Just(0usize), 0usize..30],
        ) {
            let mut tree: BTreeMap<u8, u8> = BTreeMap::new();
            let mut history: Vec<(u64, BTreeMap<u8, u8>)> = vec![(0, tree.clone())];
            let mut o = Overlay::default();
            for (i, changes) in commits.iter().enumerate() {
                let lsn = (i as u64 + 1) * 10;
                let mark = tree.is_empty() && marks[i];
                if mark {
                    o.record_empty(0, lsn);
                }
                let mut seen_in_commit = std::collections::BTreeSet::new();
                for &(k, v) in changes {
                    if !mark && seen_in_commit.insert(k) {
                        o.record(0, &[k], lsn, tree.get(&k).map(|b| vec![*b]));
                    }
                    match v { Some(v) => { tree.insert(k, v); } None => { tree.remove(&k); } }
                }
                o.check_invariants(lsn);
                history.push((lsn, tree.clone()));
            }
            let horizon = (prune_at.min(commits.len()) as u64) * 10;
            o.prune(horizon);
            for (lsn, state) in history.iter().filter(|(l, _)| *l >= horizon) {
                for k in 0u8..6 {
                    let want = state.get(&k).map(|b| vec![*b]);
                    let got = match o.seen(0, &[k], *lsn) {
                        Seen::Tree => tree.get(&k).map(|b| vec![*b]),
                        Seen::Value(v) => v,
                    };
                    prop_assert_eq!(got, want, "key {} at {}", k, lsn);
                }
                // A scan as `Db::scan_step` makes one: the tree's entries (none while the
                // table is hidden), then each overlay key's view over them.
                let mut scanned: BTreeMap<u8, u8> = if o.hides_table(0, *lsn) {
                    BTreeMap::new()
                } else {
                    tree.clone()
                };
                for k in o.keys_in(0, Bound::Unbounded, Bound::Unbounded) {
                    match o.seen(0, k, *lsn) {
                        Seen::Tree => {}
                        Seen::Value(Some(v)) => {
                            scanned.insert(k[0], v[0]);
                        }
                        Seen::Value(None) => {
                            scanned.remove(&k[0]);
                        }
                    }
                }
                prop_assert_eq!(&scanned, state, "scan at {}", lsn);
            }
        }
    }
}
