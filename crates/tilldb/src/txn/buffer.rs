//! The write buffer: commits applied to memory and the log, not yet to the tree
//! (docs/write-buffer.md). The overlay keeps the values a commit *replaced* for older
//! snapshots; the buffer keeps the values a buffered commit *wrote*, ahead of the tree:
//!
//! ```text
//!   tree:           k = v0
//!   buffer (live):  k: [(lsn 40, v1), (lsn 55, deleted)]
//!   reader at 39 -> the tree (v0)     40..54 -> v1     >= 55 -> absent
//! ```
//!
//! A reader at snapshot `r` takes, of a key's buffered versions, the newest at or before `r`
//! ([`WriteBuffer::seen`]); with none it reads the tree as it reads it today (the overlay,
//! then the tree).
//!
//! # Generations and the drain
//!
//! Buffered commits go into the *live* generation. The drain applies the newest version of
//! each of its keys to the tree as one ordinary commit ending at lsn `D`
//! ([`WriteBuffer::drain_writes`], then [`WriteBuffer::drained`]); that commit records in the
//! overlay, at `D`, the tree's values it replaced, as every commit does. The generation stays,
//! marked drained at `D`, for the readers below `D`, and a new live one starts:
//!
//! ```text
//!   reader at r < D:   the drained generation's version at or before r, else the tree as
//!                      the overlay shows it before D (the values from before the buffer)
//!   reader at r >= D:  skips the drained generation: the tree holds its values
//! ```
//!
//! A reader skips every generation drained at or before its snapshot. A commit that is not
//! buffered drains first unless it writes only keys above every key the live generation
//! holds (an append, `db/commit/buffer.rs`), so every tree change to a key of a generation
//! after that key's buffered version `b` (other than its own drain) comes after that drain's
//! `D`: a reader that takes a drained generation's version (`b <= r < D`) has no newer tree
//! change to miss. A drained generation is dropped
//! once the horizon (the oldest snapshot any reader has or will get) reaches its `D`; a
//! key's versions older than the newest at or before the horizon are dropped as it passes.
//!
//! # Chunks
//!
//! A drain of a large buffer in one commit holds the writer and the tree lock for its whole
//! length. The drain *in chunks* freezes the live generation ([`WriteBuffer::next_chunk`]:
//! new buffered commits go to a fresh live one) and applies its newest versions a range of
//! keys at a time, each chunk an ordinary commit of its own that lets both locks go after it
//! ([`WriteBuffer::chunk_drained`]), so buffered commits and readers come between the chunks.
//! Readers read the frozen generation until its last chunk, as a live one (its versions
//! equal what the chunks put in the tree); its last chunk drains it at that chunk's lsn. A
//! chunk takes the rows it added to the tree off the frozen generation's sums at its lsn (the
//! catalog counts them from there), so a length never counts a row twice. A key the live
//! generation holds too may get the frozen generation's older value in the tree from a chunk:
//! every reader that reads the tree there reads the live version first. A commit through the
//! tree, a transaction's first read and a checkpoint drain the rest whole ([`drain_writes`]:
//! the frozen generation's keys no chunk took, and the live generation's).
//!
//! [`drain_writes`]: WriteBuffer::drain_writes
//!
//! # Counts
//!
//! A buffered commit knows, per table, how many keys it added less how many it removed (it
//! looked its keys up before it appended): each generation keeps, per table, the running sum
//! after each commit. A table's length at `r` is the tree's at `r` plus
//! [`WriteBuffer::count_delta`] at `r`, summed over the generations `r` does not skip.
//!
//! # The redo point
//!
//! A buffered record is the only copy of its writes until its generation's drain is durable
//! in the tree: a checkpoint's redo point never passes the start of the live generation's
//! first record ([`WriteBuffer::redo_floor`]).

use super::{Seen, TableId};
use filter::{KeyFilters, KeyHash};
use keys::{After, BufKey, KeyView, Probe, Versions};
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;

mod chunks;
mod filter;
mod keys;

pub use chunks::Chunk;
use chunks::Frozen;

/// Bytes a version costs beyond its key and value: the map node's share, the version, the
/// pruning index's entry (an estimate, so that the drain threshold tracks memory).
const VERSION_OVERHEAD_BYTES: usize = 64;

/// A buffered commit's place in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitAt {
    /// Where its record begins.
    pub start: u64,
    /// Where its record ends: its lsn for readers (a reader at `end` or later sees it).
    pub end: u64,
}

/// Buffered versions copied out, as a drain applies them: (table, key, value or `None` for
/// a delete), back to back.
pub type OwnedWrites = super::packed::Packed<TableId>;

/// One write of a buffered commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferedWrite<'a> {
    /// The table, by its root page.
    pub table: TableId,
    /// The key written.
    pub key: &'a [u8],
    /// `None`: the key was deleted.
    pub value: Option<&'a [u8]>,
}

/// The commits buffered between two drains.
#[derive(Debug, Default)]
struct Generation {
    /// Every version it holds is after this lsn (the drain or freeze before it began).
    since: u64,
    /// The lsn of the drain that applied it to the tree; `None` for the live generation.
    drained_at: Option<u64>,
    /// Per table, per key, its versions, lsns increasing (`buffer/keys.rs`).
    entries: BTreeMap<TableId, BTreeMap<BufKey, Versions>>,
    /// (lsn, table, key) of every version that replaced an older one of its key, in lsn
    /// order: once the horizon reaches it, the versions before it go. A key's first version
    /// is not listed (nothing before it to prune: most keys have one).
    by_lsn: VecDeque<(u64, TableId, BufKey)>,
    /// Per table, (lsn, the sum of the row deltas of the commits up to it), lsns increasing.
    counts: BTreeMap<TableId, VecDeque<(u64, i64)>>,
    /// Every (table, key) `entries` ever held (`buffer/filter.rs`): a lookup of a key it does
    /// not hold skips the map.
    filter: KeyFilters,
    /// Estimated memory of `entries` (see `VERSION_OVERHEAD_BYTES`).
    bytes: usize,
    /// Where the first buffered record of this generation begins.
    first_start: Option<u64>,
    /// The end of its last commit.
    last_end: Option<u64>,
}

impl Generation {
    /// Whether a reader at `snapshot` reads this generation (it skips a drained one at or
    /// before its snapshot: the tree holds its values).
    fn read_by(&self, snapshot: u64) -> bool {
        self.drained_at.is_none_or(|drained| snapshot < drained)
    }

    /// The newest version of `key` (of `hash`) in `table` at or before `snapshot`.
    fn version_at(
        &self,
        table: TableId,
        (key, hash): (&dyn KeyView, KeyHash),
        snapshot: u64,
    ) -> Option<&After> {
        if !self.filter.may_contain(hash) {
            return None;
        }
        self.entries.get(&table)?.get(key)?.at(snapshot)
    }

    fn is_empty(&self) -> bool {
        self.entries.values().all(BTreeMap::is_empty)
    }

    /// Adds `delta` to `table`'s sum from `lsn` on (after every entry it holds).
    fn add_to_sum(&mut self, table: TableId, lsn: u64, delta: i64) {
        let sums = self.counts.entry(table).or_default();
        assert!(
            sums.back().is_none_or(|(last, _)| *last < lsn),
            "write buffer: row sums out of lsn order"
        );
        let sum = sums.back().map_or(0, |(_, sum)| *sum) + delta;
        sums.push_back((lsn, sum));
    }

    /// Forgets the versions at or before `lsn` and the commits that wrote them; the sums stay
    /// as they are (their newest entry is what a reader after `lsn` counts: `WriteBuffer::
    /// replayed_chunk`).
    fn forget_through(&mut self, lsn: u64) {
        let bytes = &mut self.bytes;
        for keys in self.entries.values_mut() {
            let old = std::mem::take(keys);
            for (key, versions) in old {
                let kept = versions.drop_through(lsn, |after| {
                    *bytes -= version_bytes(key.bytes(), after.value.as_deref());
                });
                if let Some(kept) = kept {
                    keys.insert(key, kept);
                }
            }
        }
        self.entries.retain(|_, keys| !keys.is_empty());
        self.by_lsn.retain(|(at, table, key)| {
            *at > lsn
                && self
                    .entries
                    .get(table)
                    .and_then(|keys| keys.get(key))
                    .is_some_and(|v| v.iter().any(|a| a.lsn == *at) && v.oldest().lsn < *at)
        });
        if self.is_empty() {
            self.first_start = None;
            self.last_end = None;
        } else {
            // The first record after `lsn` begins at or after it.
            self.first_start = Some(lsn);
        }
    }

    fn count_delta(&self, table: TableId, snapshot: u64) -> i64 {
        self.counts.get(&table).map_or(0, |sums| {
            sums.iter()
                .rev()
                .find(|(lsn, _)| *lsn <= snapshot)
                .map_or(0, |(_, sum)| *sum)
        })
    }

    /// Forgets the versions and sums no reader at or past `horizon` needs: those older than
    /// the newest at or before it.
    fn prune(&mut self, horizon: u64) {
        while let Some((lsn, _, _)) = self.by_lsn.front() {
            if *lsn > horizon {
                break;
            }
            let (lsn, table, key) = self.by_lsn.pop_front().expect("looked at above");
            let versions = self
                .entries
                .get_mut(&table)
                .and_then(|keys| keys.get_mut(&key))
                .expect("by_lsn and entries agree");
            let bytes = &mut self.bytes;
            versions.drop_before(lsn, |old| {
                *bytes -= version_bytes(key.bytes(), old.value.as_deref());
            });
            assert_eq!(
                versions.oldest().lsn,
                lsn,
                "write buffer: pruned past the version the index names"
            );
        }
        for sums in self.counts.values_mut() {
            while sums.len() > 1 && sums[1].0 <= horizon {
                sums.pop_front();
            }
        }
    }
}

fn version_bytes(key: &[u8], value: Option<&[u8]>) -> usize {
    TABLE_BYTES + key.len() + value.map_or(0, <[u8]>::len) + VERSION_OVERHEAD_BYTES
}

/// Bytes a version's table costs in the estimate (as when keys carried their table).
const TABLE_BYTES: usize = 8;

/// Buffered commits (see the module doc).
#[derive(Debug, Default)]
pub struct WriteBuffer {
    live: Generation,
    /// The generation being drained in chunks, if a drain in chunks is under way.
    frozen: Option<Frozen>,
    /// Drained generations still read by older snapshots, oldest first.
    drained: VecDeque<Generation>,
    /// The newest lsn it was told of: a commit's end, a chunk's or a drain's lsn.
    last_lsn: u64,
}

impl WriteBuffer {
    /// Adds a buffered commit: its writes (at most one per key) and, per table, the keys it
    /// added less the keys it removed. Commits are added in log order.
    pub fn commit<'a>(
        &mut self,
        at: CommitAt,
        writes: impl IntoIterator<Item = BufferedWrite<'a>>,
        deltas: &[(TableId, i64)],
    ) {
        assert!(
            at.start < at.end,
            "write buffer: a record ends after it begins"
        );
        assert!(
            self.last_lsn <= at.start,
            "write buffer: commits out of log order: the last lsn was {}, the next began at {}",
            self.last_lsn,
            at.start
        );
        self.last_lsn = at.end;
        let live = &mut self.live;
        live.first_start.get_or_insert(at.start);
        live.last_end = Some(at.end);
        for write in writes {
            let keys = live.entries.entry(write.table).or_default();
            let after = After {
                lsn: at.end,
                value: write.value.map(Box::from),
            };
            live.bytes += version_bytes(write.key, write.value);
            // One search when the key is new (most buffered keys are).
            if let Some(versions) = keys.get_mut(&Probe::new(write.key) as &dyn KeyView) {
                versions.push(after);
                // The older version becomes prunable once this one is at the horizon; a
                // key with one version never needs the index.
                live.by_lsn
                    .push_back((at.end, write.table, BufKey::new(write.key)));
            } else {
                keys.insert(BufKey::new(write.key), Versions::One(after));
                live.filter.insert(KeyHash::of(write.table, write.key));
            }
        }
        for &(table, delta) in deltas {
            live.add_to_sum(table, at.end, delta);
        }
    }

    /// What a reader at `snapshot` sees of `key`: the newest buffered version at or before
    /// its snapshot, or [`Seen::Tree`] (read the overlay and the tree) when there is none.
    #[must_use]
    pub fn seen(&self, table: TableId, key: &[u8], snapshot: u64) -> Seen {
        let probe = Probe::new(key);
        let hash = KeyHash::of(table, key);
        self.newest_first()
            .filter(|g| g.read_by(snapshot))
            .find_map(|g| g.version_at(table, (&probe, hash), snapshot))
            .map_or(Seen::Tree, |after| {
                Seen::Value(after.value.as_deref().map(<[u8]>::to_vec))
            })
    }

    /// The keys of `table` within the bounds that a reader at `snapshot` sees a buffered
    /// version of, in key order, each with that version (`None`: deleted): a scan applies
    /// them over what it reads of the tree (and the overlay).
    #[must_use]
    pub fn changed_in(
        &self,
        table: TableId,
        bounds: (Bound<&[u8]>, Bound<&[u8]>),
        snapshot: u64,
    ) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        self.seen_in(table, bounds, snapshot)
            .into_iter()
            .map(|(key, value)| (key.to_vec(), value.map(<[u8]>::to_vec)))
            .collect()
    }

    /// [`WriteBuffer::changed_in`], borrowed from the buffer: no key or value copied.
    #[must_use]
    pub fn seen_in(
        &self,
        table: TableId,
        (lower, upper): (Bound<&[u8]>, Bound<&[u8]>),
        snapshot: u64,
    ) -> Vec<(&[u8], Option<&[u8]>)> {
        let (lo, hi) = (probe_bound(lower), probe_bound(upper));
        let bounds = (as_view(&lo), as_view(&hi));
        // Oldest generation first: a newer one's version replaces an older one's.
        let mut read = self
            .drained
            .iter()
            .chain(self.frozen.as_ref().map(|f| &f.generation))
            .chain([&self.live])
            .filter(|g| g.read_by(snapshot))
            .filter_map(|g| g.entries.get(&table));
        let Some(first) = read.next() else {
            return Vec::new();
        };
        let mut seen = generation_seen_in(first, bounds, snapshot);
        // More than one generation (a drained one an older snapshot still reads): merge.
        for keys in read {
            let newer = generation_seen_in(keys, bounds, snapshot);
            if newer.is_empty() {
                continue;
            }
            let mut merged: BTreeMap<&[u8], Option<&[u8]>> = seen.into_iter().collect();
            merged.extend(newer);
            seen = merged.into_iter().collect();
        }
        seen
    }

    /// The greatest key of `table` the generations not drained (the live one, a frozen one)
    /// hold a version of (deleted or not): a commit whose keys all lie above it shares none
    /// with the buffer not drained.
    #[must_use]
    pub fn undrained_last_key(&self, table: TableId) -> Option<&[u8]> {
        fn last(g: &Generation, table: TableId) -> Option<&[u8]> {
            g.entries
                .get(&table)?
                .last_key_value()
                .map(|(key, _)| key.bytes())
        }
        let frozen = self
            .frozen
            .as_ref()
            .and_then(|f| last(&f.generation, table));
        last(&self.live, table).max(frozen)
    }

    /// The rows `table` gained (less those it lost) in the buffered commits a reader at
    /// `snapshot` sees: its length there is the tree's plus this.
    #[must_use]
    pub fn count_delta(&self, table: TableId, snapshot: u64) -> i64 {
        self.newest_first()
            .filter(|g| g.read_by(snapshot))
            .map(|g| g.count_delta(table, snapshot))
            .sum()
    }

    fn newest_first(&self) -> impl Iterator<Item = &Generation> {
        std::iter::once(&self.live)
            .chain(self.frozen.as_ref().map(|f| &f.generation))
            .chain(self.drained.iter().rev())
    }

    /// What the whole drain applies to the tree: the newest version of each key not drained,
    /// in (table, key) order: the live generation's, and a frozen one's that no chunk applied
    /// (a key both hold: the live version).
    #[must_use]
    pub fn drain_writes(&self) -> Vec<BufferedWrite<'_>> {
        let live = self.live.entries.iter().flat_map(|(&table, keys)| {
            keys.iter().map(move |(key, versions)| BufferedWrite {
                table,
                key: key.bytes(),
                value: versions.newest().value.as_deref(),
            })
        });
        let Some(frozen) = &self.frozen else {
            return live.collect();
        };
        let mut merged: BTreeMap<(TableId, &[u8]), Option<&[u8]>> = frozen
            .remaining()
            .map(|(table, key, versions)| {
                ((table, key.bytes()), versions.newest().value.as_deref())
            })
            .collect();
        merged.extend(live.map(|w| ((w.table, w.key), w.value)));
        merged
            .into_iter()
            .map(|((table, key), value)| BufferedWrite { table, key, value })
            .collect()
    }

    /// Records that the drain whose commit ends at `at` applied [`WriteBuffer::drain_writes`]
    /// to the tree: the frozen generation, if any, and the live one are kept for readers below
    /// `at`, and a new live one starts.
    pub fn drained(&mut self, at: u64) {
        assert!(
            self.last_lsn < at,
            "write buffer: a drain at {at} before what it drains, at {}",
            self.last_lsn
        );
        self.last_lsn = at;
        if let Some(frozen) = self.frozen.take() {
            self.retire(frozen.generation, at);
        }
        let live = std::mem::take(&mut self.live);
        self.retire(live, at);
        self.live.since = at;
    }

    /// Keeps `generation`, drained at `at`, for the readers below `at`.
    fn retire(&mut self, mut generation: Generation, at: u64) {
        generation.drained_at = Some(at);
        generation.by_lsn.clear();
        if !generation.is_empty() {
            self.drained.push_back(generation);
        }
    }

    /// Forgets what no reader at or past `horizon` (the oldest snapshot any reader has or
    /// will get) can need.
    pub fn prune(&mut self, horizon: u64) {
        while self
            .drained
            .front()
            .is_some_and(|g| g.drained_at.is_some_and(|at| at <= horizon))
        {
            self.drained.pop_front();
        }
        for g in self
            .drained
            .iter_mut()
            .chain(self.frozen.as_mut().map(|f| &mut f.generation))
            .chain([&mut self.live])
        {
            g.prune(horizon);
        }
    }

    /// Estimated bytes of the live generation: the drain's threshold.
    #[must_use]
    pub fn live_bytes(&self) -> usize {
        self.live.bytes
    }

    /// Estimated bytes of the generations not drained: the live one and a frozen one.
    #[must_use]
    pub fn undrained_bytes(&self) -> usize {
        self.live.bytes + self.frozen.as_ref().map_or(0, |f| f.generation.bytes)
    }

    /// Estimated bytes of every generation.
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.live.bytes
            + self.frozen.as_ref().map_or(0, |f| f.generation.bytes)
            + self.drained.iter().map(|g| g.bytes).sum::<usize>()
    }

    /// Whether no generation holds a version: every reader reads the tree.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.live.is_empty() && self.frozen.is_none() && self.drained.is_empty()
    }

    /// Where the first record not yet drained begins: a checkpoint's redo point stays at or
    /// before it (see the module doc).
    #[must_use]
    pub fn redo_floor(&self) -> Option<u64> {
        self.frozen
            .as_ref()
            .and_then(|f| f.generation.first_start)
            .or(self.live.first_start)
    }

    /// Where the last commit not drained ends (`None`: there is none): a reader at that lsn
    /// or later sees every version not drained.
    #[must_use]
    pub fn undrained_last_end(&self) -> Option<u64> {
        self.live
            .last_end
            .or_else(|| self.frozen.as_ref().and_then(|f| f.generation.last_end))
    }

    /// Where the frozen generation's last commit ends (`None`: no drain in chunks): a reader
    /// at that lsn or later sees every version a chunk applies.
    #[must_use]
    pub fn frozen_last_end(&self) -> Option<u64> {
        self.frozen.as_ref().and_then(|f| f.generation.last_end)
    }

    /// Panics unless each generation's versions increase per key and its index lists, in lsn
    /// order, versions it holds; the byte counts add up; drained generations are in drain
    /// order, each after its own versions and before the live ones. O(versions).
    pub fn check_invariants(&self) {
        let mut previous_drain = 0;
        for g in &self.drained {
            let at = g
                .drained_at
                .expect("a drained generation has its drain's lsn");
            // A frozen generation and the live one drained together share their lsn.
            assert!(previous_drain <= at, "write buffer: drains out of order");
            previous_drain = at;
        }
        assert!(
            previous_drain <= self.last_lsn,
            "write buffer: a drain after the last lsn"
        );
        if let Some(frozen) = &self.frozen {
            assert!(
                frozen.generation.drained_at.is_none(),
                "write buffer: a frozen generation drained"
            );
            assert!(
                frozen
                    .generation
                    .last_end
                    .is_some_and(|end| end <= self.live.since),
                "write buffer: a frozen generation's commit after the live one began"
            );
        }
        for g in self
            .drained
            .iter()
            .chain(self.frozen.as_ref().map(|f| &f.generation))
            .chain([&self.live])
        {
            let mut bytes = 0;
            for (key, versions) in g.entries.values().flatten() {
                let mut last = None;
                for after in versions.iter() {
                    assert!(
                        last.is_none_or(|l| l < after.lsn),
                        "write buffer: versions out of lsn order"
                    );
                    last = Some(after.lsn);
                    if let Some(at) = g.drained_at {
                        assert!(after.lsn < at, "write buffer: a version after its drain");
                    }
                    assert!(
                        g.since < after.lsn && after.lsn <= self.last_lsn,
                        "write buffer: a version before its generation began, or after the last lsn"
                    );
                    bytes += version_bytes(key.bytes(), after.value.as_deref());
                }
            }
            assert_eq!(g.bytes, bytes, "write buffer: byte count");
            let mut previous = 0;
            for (lsn, table, key) in &g.by_lsn {
                assert!(previous <= *lsn, "write buffer: index out of lsn order");
                previous = *lsn;
                assert!(
                    g.entries
                        .get(table)
                        .and_then(|keys| keys.get(key))
                        .is_some_and(|v| v.iter().any(|a| a.lsn == *lsn)),
                    "write buffer: the index names a version not kept"
                );
            }
        }
    }
}

/// The keys of one generation's table within `bounds` with a version a reader at `snapshot`
/// sees, in key order, with that version.
fn generation_seen_in<'g>(
    keys: &'g BTreeMap<BufKey, Versions>,
    bounds: (Bound<&dyn KeyView>, Bound<&dyn KeyView>),
    snapshot: u64,
) -> Vec<(&'g [u8], Option<&'g [u8]>)> {
    keys.range::<dyn KeyView, _>(bounds)
        .filter_map(|(key, versions)| {
            versions
                .at(snapshot)
                .map(|after| (key.bytes(), after.value.as_deref()))
        })
        .collect()
}

/// A key bound as the map searches it.
fn probe_bound(bound: Bound<&[u8]>) -> Bound<Probe<'_>> {
    bound.map(Probe::new)
}

fn as_view<'p>(bound: &'p Bound<Probe<'_>>) -> Bound<&'p dyn KeyView> {
    match bound {
        Bound::Included(p) => Bound::Included(p),
        Bound::Excluded(p) => Bound::Excluded(p),
        Bound::Unbounded => Bound::Unbounded,
    }
}

#[cfg(test)]
mod tests;
