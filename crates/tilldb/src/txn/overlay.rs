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

use std::collections::BTreeMap;
use std::ops::Bound;

/// Which table a key belongs to.
pub type TableId = u64;

/// The value a key had before one commit, and that commit's lsn.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Before {
    lsn: u64,
    value: Option<Vec<u8>>,
}

/// Older values of recently changed keys (see the module doc).
#[derive(Debug, Default)]
pub struct Overlay {
    /// Per key, oldest first; lsns strictly increase.
    entries: BTreeMap<(TableId, Vec<u8>), Vec<Before>>,
    /// Keys per commit lsn, for pruning in lsn order.
    by_lsn: BTreeMap<u64, Vec<(TableId, Vec<u8>)>>,
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
        let versions = self.entries.entry((table, key.to_vec())).or_default();
        if let Some(last) = versions.last() {
            assert!(
                last.lsn < lsn,
                "overlay lsns must increase per key: {} then {lsn}",
                last.lsn
            );
        }
        versions.push(Before { lsn, value: before });
        self.by_lsn
            .entry(lsn)
            .or_default()
            .push((table, key.to_vec()));
    }

    /// What a reader at snapshot `read_lsn` sees for `key`.
    #[must_use]
    pub fn seen(&self, table: TableId, key: &[u8], read_lsn: u64) -> Seen {
        match self.entries.get(&(table, key.to_vec())) {
            None => Seen::Tree,
            Some(versions) => match versions.iter().find(|b| b.lsn > read_lsn) {
                Some(b) => Seen::Value(b.value.clone()),
                None => Seen::Tree,
            },
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
            Bound::Included(k) => Bound::Included((table, k.to_vec())),
            Bound::Excluded(k) => Bound::Excluded((table, k.to_vec())),
            Bound::Unbounded => Bound::Included((table, Vec::new())),
        };
        let hi = match end {
            Bound::Included(k) => Bound::Included((table, k.to_vec())),
            Bound::Excluded(k) => Bound::Excluded((table, k.to_vec())),
            Bound::Unbounded => Bound::Excluded((table + 1, Vec::new())),
        };
        self.entries.range((lo, hi)).map(|((_, k), _)| k.as_slice())
    }

    /// Forgets what no reader can need: entries of commits at or before `horizon` (the lowest
    /// snapshot any reader has or will get).
    pub fn prune(&mut self, horizon: u64) {
        // Oldest first, without splitting the map (called after every commit, and mostly
        // with one entry or none to drop).
        while let Some(entry) = self.by_lsn.first_entry() {
            if *entry.key() > horizon {
                break;
            }
            let (lsn, keys) = entry.remove_entry();
            for key in keys {
                let versions = self
                    .entries
                    .get_mut(&key)
                    .expect("by_lsn and entries agree");
                assert_eq!(
                    versions.first().map(|b| b.lsn),
                    Some(lsn),
                    "pruning out of order"
                );
                versions.remove(0);
                if versions.is_empty() {
                    self.entries.remove(&key);
                }
            }
        }
    }

    /// Number of keys with hidden versions.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no key has a hidden version.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Panics unless every key's versions are non-empty and in strictly increasing lsn order,
    /// none past `end` + 1 (a commit being appended records its values under a provisional
    /// lsn one past the log end it read), and the by-lsn index lists exactly those versions.
    /// O(entries).
    pub fn check_invariants(&self, end: u64) {
        let mut versions_total = 0;
        for (key, versions) in &self.entries {
            assert!(!versions.is_empty(), "overlay: {key:?} with no version");
            for pair in versions.windows(2) {
                assert!(
                    pair[0].lsn < pair[1].lsn,
                    "overlay: {key:?} versions out of lsn order: {} then {}",
                    pair[0].lsn,
                    pair[1].lsn
                );
            }
            for b in versions {
                assert!(
                    b.lsn <= end + 1,
                    "overlay: version {} past the log end {end} + 1",
                    b.lsn
                );
                assert!(
                    self.by_lsn
                        .get(&b.lsn)
                        .is_some_and(|keys| keys.contains(key)),
                    "overlay: version {} of {key:?} missing from the index",
                    b.lsn
                );
            }
            versions_total += versions.len();
        }
        let indexed: usize = self.by_lsn.values().map(Vec::len).sum();
        assert_eq!(
            indexed, versions_total,
            "overlay: the index and the versions disagree"
        );
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
        /// the prune horizon sees exactly the state after the commits up to its snapshot.
        #[test]
        fn overlay_matches_full_history(
            commits in prop::collection::vec(prop::collection::vec((0u8..6, prop::option::of(0u8..50)), 1..4), 1..30),
            prune_at in 0usize..30,
        ) {
            let mut tree: BTreeMap<u8, u8> = BTreeMap::new();
            let mut history: Vec<(u64, BTreeMap<u8, u8>)> = vec![(0, tree.clone())];
            let mut o = Overlay::default();
            for (i, changes) in commits.iter().enumerate() {
                let lsn = (i as u64 + 1) * 10;
                let mut seen_in_commit = std::collections::BTreeSet::new();
                for &(k, v) in changes {
                    if seen_in_commit.insert(k) {
                        o.record(0, &[k], lsn, tree.get(&k).map(|b| vec![*b]));
                    }
                    match v { Some(v) => { tree.insert(k, v); } None => { tree.remove(&k); } }
                }
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
            }
        }
    }
}
