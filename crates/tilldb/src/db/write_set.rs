//! A transaction's write set: every put and delete it made, kept until commit, the latest per
//! key winning.
//!
//! Kept as an arena, not a map of owned keys and values: each put copies its key and value
//! into the current *chunk* (1 MiB, or one of the value's size when it is larger) and pushes a
//! 32-byte [`Entry`] naming them. The entries are appended in put order and sorted only when
//! something must read them in key order:
//!
//! ```text
//!   put ──> pending (put order) ──get, once > PENDING_SCAN_MAX──> sorted run ──merge──> runs
//!   commit: seal() = every run and the pending entries merged: one sorted run, one entry per
//!           (table, key), the latest put or delete of each
//! ```
//!
//! A get looks through the few pending entries newest first, then binary-searches the runs,
//! newest first; the runs are merged as a binary counter (a run is merged into the one
//! before it while that one is at most twice its size), so there are O(log n) of them. A
//! transaction that only writes (a bulk load) sorts once, at commit.
//!
//! Why: a `BTreeMap<(table, key), value>` allocated a key and a value per put, compared the
//! table name at every step of every insert, and put each insert through ~log2(n) cache
//! misses; a bulk load of 200,000 rows spent as long collecting its puts as LMDB took to load
//! them all (docs/benchmarks.md, "The write set as an arena"). The entry carries the key's
//! first 8 bytes, so most comparisons never touch the arena.
//!
//! Space: the bytes of a key written twice stay in the arena until the dead bytes outweigh
//! the live ones (over [`COMPACT_DEAD_BYTES_MIN`]); then the live entries are copied into
//! fresh chunks.
//!
//! Order: tables by name (as bytes), then keys as bytes: the order the commit applies them
//! and the change feed carries them.

use crate::record::Write;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::ops::Bound;

/// Bytes of an arena chunk (a key and value larger than that get a chunk of their own size).
const CHUNK_BYTES: usize = 1 << 20;

/// Pending entries a get looks through one by one; beyond this it sorts them into a run.
const PENDING_SCAN_MAX: usize = 32;

/// Dead arena bytes (keys written again, deletes of keys put) below which no compaction runs.
const COMPACT_DEAD_BYTES_MIN: usize = 4 << 20;

/// Writes ahead of the one yielded whose bytes [`WritesIter`] asks the CPU to fetch.
const PREFETCH_AHEAD: usize = 4;

/// `Entry::value_len` of a delete.
const DELETED: u32 = u32::MAX;

/// One put or delete: where its key and value lie in the arena.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// The key's first 8 bytes, big-endian, zero-padded: ordered as the keys are where they
    /// differ (a tie falls back to the whole keys).
    prefix: u64,
    /// The chunk, and the key's offset in it; the value follows the key.
    chunk: u32,
    at: u32,
    key_len: u32,
    /// The value's length, or [`DELETED`].
    value_len: u32,
    /// The table's index in `Arena::tables`.
    table: u32,
}

impl Entry {
    fn bytes(&self) -> usize {
        self.key_len as usize + self.value_bytes()
    }

    fn value_bytes(&self) -> usize {
        if self.value_len == DELETED {
            0
        } else {
            self.value_len as usize
        }
    }
}

#[expect(
    clippy::big_endian_bytes,
    reason = "big-endian so that the prefixes' order is the keys' byte order"
)]
fn prefix_of(key: &[u8]) -> u64 {
    let mut head = [0u8; 8];
    let n = key.len().min(8);
    head[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(head)
}

/// The keys and values, and the tables' names.
#[derive(Debug, Default)]
struct Arena {
    chunks: Vec<Vec<u8>>,
    /// Table names by index, in first-use order.
    tables: Vec<String>,
    index: HashMap<String, u32>,
    /// Key and value bytes stored, live or dead.
    stored_bytes: usize,
}

impl Arena {
    /// The index of `table`, added if new.
    fn table_id(&mut self, table: &str) -> u32 {
        if let Some(last) = self.tables.last()
            && last == table
        {
            return u32::try_from(self.tables.len() - 1).expect("tables fit u32");
        }
        if let Some(id) = self.index.get(table) {
            return *id;
        }
        let id = u32::try_from(self.tables.len()).expect("tables fit u32");
        self.tables.push(table.to_owned());
        self.index.insert(table.to_owned(), id);
        id
    }

    fn find_table(&self, table: &str) -> Option<u32> {
        self.index.get(table).copied()
    }

    fn push(&mut self, table: u32, key: &[u8], value: Option<&[u8]>) -> Entry {
        let value_len = value.map_or(0, <[u8]>::len);
        let len = key.len() + value_len;
        let fits = self
            .chunks
            .last()
            .is_some_and(|c| c.capacity() - c.len() >= len);
        if !fits {
            self.chunks.push(Vec::with_capacity(CHUNK_BYTES.max(len)));
        }
        let chunk_index = self.chunks.len() - 1;
        let chunk = self.chunks.last_mut().expect("pushed above");
        let at = chunk.len();
        chunk.extend_from_slice(key);
        if let Some(v) = value {
            chunk.extend_from_slice(v);
        }
        self.stored_bytes += len;
        let value_len = match value {
            Some(v) => {
                let len = u32::try_from(v.len()).expect("values are checked below 4 GiB");
                assert_ne!(len, DELETED, "a value of u32::MAX bytes");
                len
            }
            None => DELETED,
        };
        Entry {
            prefix: prefix_of(key),
            chunk: u32::try_from(chunk_index).expect("chunks fit u32"),
            at: u32::try_from(at).expect("a chunk is under 4 GiB"),
            key_len: u32::try_from(key.len()).expect("keys are short"),
            value_len,
            table,
        }
    }

    fn key(&self, e: &Entry) -> &[u8] {
        let at = e.at as usize;
        &self.chunks[e.chunk as usize][at..at + e.key_len as usize]
    }

    fn value(&self, e: &Entry) -> Option<&[u8]> {
        if e.value_len == DELETED {
            return None;
        }
        let at = e.at as usize + e.key_len as usize;
        Some(&self.chunks[e.chunk as usize][at..at + e.value_len as usize])
    }

    fn cmp(&self, a: &Entry, b: &Entry) -> Ordering {
        if a.table != b.table {
            return self.tables[a.table as usize]
                .as_bytes()
                .cmp(self.tables[b.table as usize].as_bytes());
        }
        a.prefix
            .cmp(&b.prefix)
            .then_with(|| self.key(a).cmp(self.key(b)))
    }

    /// `e` against the probe (`table`, `key` with `prefix`).
    fn cmp_probe(&self, e: &Entry, table: u32, prefix: u64, key: &[u8]) -> Ordering {
        if e.table != table {
            return self.tables[e.table as usize]
                .as_bytes()
                .cmp(self.tables[table as usize].as_bytes());
        }
        e.prefix.cmp(&prefix).then_with(|| self.key(e).cmp(key))
    }

    /// `entries` (in put order) sorted, the latest of each key kept. Adds the bytes of the
    /// ones dropped to `dead`.
    fn sorted_run(&self, mut entries: Vec<Entry>, dead: &mut usize) -> Vec<Entry> {
        // Stable: equal keys stay in put order, and the dedup keeps the last.
        entries.sort_by(|a, b| self.cmp(a, b));
        entries.dedup_by(|later, kept| {
            if self.cmp(later, kept) == Ordering::Equal {
                *dead += kept.bytes();
                std::mem::swap(later, kept);
                true
            } else {
                false
            }
        });
        entries
    }

    /// Two sorted runs as one; of a key in both, `newer`'s entry.
    fn merge(&self, older: Vec<Entry>, newer: Vec<Entry>, dead: &mut usize) -> Vec<Entry> {
        let mut out = Vec::with_capacity(older.len() + newer.len());
        let (mut a, mut b) = (older.into_iter().peekable(), newer.into_iter().peekable());
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) => match self.cmp(x, y) {
                    Ordering::Less => a.next(),
                    Ordering::Greater => b.next(),
                    Ordering::Equal => {
                        *dead += x.bytes();
                        a.next();
                        b.next()
                    }
                },
                (Some(_), None) => a.next(),
                (None, Some(_)) => b.next(),
                (None, None) => break,
            };
            out.push(next.expect("peeked"));
        }
        out
    }

    /// The entries of table `id` in a sorted run (contiguous: tables sort by name).
    fn table_slice<'r>(&self, run: &'r [Entry], id: u32) -> &'r [Entry] {
        let name = self.tables[id as usize].as_bytes();
        let start = run
            .partition_point(|e| e.table != id && self.tables[e.table as usize].as_bytes() < name);
        let len = run[start..].partition_point(|e| e.table == id);
        &run[start..start + len]
    }

    /// Copies the entries' keys and values into fresh chunks (dropping the dead bytes).
    fn compact<'a>(&mut self, runs: impl Iterator<Item = &'a mut Vec<Entry>>) {
        let mut fresh = Arena {
            chunks: Vec::new(),
            tables: std::mem::take(&mut self.tables),
            index: std::mem::take(&mut self.index),
            stored_bytes: 0,
        };
        for run in runs {
            for e in run.iter_mut() {
                let (key, value) = (self.key(e), self.value(e));
                *e = fresh.push(e.table, key, value);
            }
        }
        *self = fresh;
    }
}

/// What a transaction wrote, as it writes (see the module doc).
#[derive(Debug, Default)]
pub(super) struct WriteSet {
    arena: Arena,
    /// Sorted runs, oldest first, each with one entry per key.
    runs: Vec<Vec<Entry>>,
    /// Entries since the last sort, in put order.
    pending: Vec<Entry>,
    /// Arena bytes of entries a later write of the same key replaced.
    dead_bytes: usize,
}

impl WriteSet {
    /// Sets `key` of `table` to `value` (`None`: deletes it).
    pub fn put(&mut self, table: &str, key: &[u8], value: Option<&[u8]>) {
        let table = self.arena.table_id(table);
        let entry = self.arena.push(table, key, value);
        self.pending.push(entry);
    }

    /// True when nothing was written.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.runs.iter().all(Vec::is_empty)
    }

    /// Puts and deletes made, counting a key written twice twice (until a sort merges them).
    pub fn len_upper(&self) -> usize {
        self.pending.len() + self.runs.iter().map(Vec::len).sum::<usize>()
    }

    /// What this write set holds for `key` of `table`: `None` if it never wrote it, else the
    /// latest value (`Some(None)`: deleted).
    #[expect(
        clippy::option_option,
        reason = "absent, deleted or put: what `Txn::get` distinguishes"
    )]
    pub fn get(&mut self, table: &str, key: &[u8]) -> Option<Option<&[u8]>> {
        let table = self.arena.find_table(table)?;
        if self.pending.len() > PENDING_SCAN_MAX {
            self.fold_pending();
        }
        let prefix = prefix_of(key);
        let arena = &self.arena;
        if let Some(e) = self
            .pending
            .iter()
            .rev()
            .find(|e| arena.cmp_probe(e, table, prefix, key) == Ordering::Equal)
        {
            return Some(arena.value(e));
        }
        for run in self.runs.iter().rev() {
            if let Ok(i) = run.binary_search_by(|e| arena.cmp_probe(e, table, prefix, key)) {
                return Some(arena.value(&run[i]));
            }
        }
        None
    }

    /// The latest write of each key of `table`, in key order: (key, value or `None`).
    pub fn table(&mut self, table: &str) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.table_range(table, Bound::Unbounded, Bound::Unbounded)
    }

    /// [`WriteSet::table`], only the keys between the bounds (found by binary search: a
    /// scan of a few keys does not walk the table's writes).
    pub fn table_range(
        &mut self,
        table: &str,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.normalize();
        let entries = self.arena.find_table(table).map_or(&[][..], |id| {
            let run = self.runs.first().map_or(&[][..], Vec::as_slice);
            self.arena.table_slice(run, id)
        });
        let arena = &self.arena;
        let start = match lower {
            Bound::Unbounded => 0,
            Bound::Included(k) => entries.partition_point(|e| arena.key(e) < k),
            Bound::Excluded(k) => entries.partition_point(|e| arena.key(e) <= k),
        };
        let end = match upper {
            Bound::Unbounded => entries.len(),
            Bound::Included(k) => entries.partition_point(|e| arena.key(e) <= k),
            Bound::Excluded(k) => entries.partition_point(|e| arena.key(e) < k),
        };
        entries[start..end.max(start)]
            .iter()
            .map(|e| (arena.key(e), arena.value(e)))
    }

    /// Forgets every write to `table`; returns whether any of them (the latest of its key)
    /// was a put.
    pub fn remove_table(&mut self, table: &str) -> bool {
        let Some(id) = self.arena.find_table(table) else {
            return false;
        };
        self.normalize();
        let Some(run) = self.runs.first_mut() else {
            return false;
        };
        let put = self
            .arena
            .table_slice(run, id)
            .iter()
            .any(|e| e.value_len != DELETED);
        let mut dead = 0;
        run.retain(|e| {
            if e.table == id {
                dead += e.bytes();
            }
            e.table != id
        });
        self.dead_bytes += dead;
        put
    }

    /// The write set sorted, one entry per key: what a commit applies.
    pub fn seal(mut self) -> Writes {
        self.normalize();
        Writes {
            entries: self.runs.pop().unwrap_or_default(),
            arena: self.arena,
        }
    }

    /// Sorts the pending entries into a run and merges runs as a binary counter.
    fn fold_pending(&mut self) {
        if !self.pending.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            let run = self.arena.sorted_run(pending, &mut self.dead_bytes);
            self.runs.push(run);
        }
        while let [.., older, newer] = &self.runs[..]
            && older.len() <= 2 * newer.len()
        {
            self.merge_last_two();
        }
        self.compact_if_mostly_dead();
    }

    /// Everything in one sorted run (none when empty).
    fn normalize(&mut self) {
        self.fold_pending();
        while self.runs.len() > 1 {
            self.merge_last_two();
        }
        self.compact_if_mostly_dead();
    }

    fn merge_last_two(&mut self) {
        let newer = self.runs.pop().expect("two runs");
        let older = self.runs.pop().expect("two runs");
        let merged = self.arena.merge(older, newer, &mut self.dead_bytes);
        self.runs.push(merged);
    }

    fn compact_if_mostly_dead(&mut self) {
        let live = self.arena.stored_bytes - self.dead_bytes;
        if self.dead_bytes > COMPACT_DEAD_BYTES_MIN.max(live) {
            self.arena.compact(
                self.runs
                    .iter_mut()
                    .chain(std::iter::once(&mut self.pending)),
            );
            self.dead_bytes = 0;
        }
    }
}

/// A sealed write set: sorted by (table, key), one entry per key (see the module doc).
#[derive(Debug, Default)]
pub(super) struct Writes {
    arena: Arena,
    entries: Vec<Entry>,
}

impl Writes {
    /// Every write, in (table, key) order.
    pub fn iter(&self) -> WritesIter<'_> {
        WritesIter {
            arena: &self.arena,
            entries: self.entries.iter(),
        }
    }

    /// The writes of each table, in table order: (name, its writes in key order).
    pub fn tables(&self) -> impl Iterator<Item = (&str, WritesIter<'_>)> {
        self.entries
            .chunk_by(|a, b| a.table == b.table)
            .map(|group| {
                (
                    self.arena.tables[group[0].table as usize].as_str(),
                    WritesIter {
                        arena: &self.arena,
                        entries: group.iter(),
                    },
                )
            })
    }
}

/// Writes in order, borrowed from a [`Writes`].
#[derive(Debug, Clone)]
pub(super) struct WritesIter<'a> {
    arena: &'a Arena,
    entries: std::slice::Iter<'a, Entry>,
}

impl<'a> Iterator for WritesIter<'a> {
    type Item = Write<'a>;

    fn next(&mut self) -> Option<Write<'a>> {
        let e = self.entries.next()?;
        // The entries in key order point all over the arena (it is in put order): the bytes
        // of a write a few ahead are asked for now, so that they are in cache when it comes
        // (a 200,000-row load's commit: 0.28-0.29 s without, 0.25-0.26 s with, by turns).
        if let Some(ahead) = self.entries.as_slice().get(PREFETCH_AHEAD) {
            let at = ahead.at as usize;
            let chunk = &self.arena.chunks[ahead.chunk as usize];
            crate::io::prefetch(&chunk[at..at + ahead.bytes()]);
        }
        Some(Write {
            table: &self.arena.tables[e.table as usize],
            key: self.arena.key(e),
            value: self.arena.value(e),
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

impl ExactSizeIterator for WritesIter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    type Model = BTreeMap<(String, Vec<u8>), Option<Vec<u8>>>;

    #[derive(Debug, Clone)]
    enum Op {
        Put(usize, Vec<u8>, Option<Vec<u8>>),
        Get(usize, Vec<u8>),
        Table(usize),
        Range(usize, Bound<Vec<u8>>, Bound<Vec<u8>>),
        RemoveTable(usize),
    }

    const TABLES: [&str; 3] = ["", "orders", "a"];

    fn op() -> impl Strategy<Value = Op> {
        // Short keys over few bytes: repeats, shared prefixes and keys longer than the
        // 8-byte prefix all happen.
        let key = prop::collection::vec(0u8..3, 0..11);
        let value = prop::option::of(prop::collection::vec(any::<u8>(), 0..20));
        prop_oneof![
            8 => (0..3usize, key.clone(), value).prop_map(|(t, k, v)| Op::Put(t, k, v)),
            4 => (0..3usize, key).prop_map(|(t, k)| Op::Get(t, k)),
            1 => (0..3usize).prop_map(Op::Table),
            2 => (0..3usize, bound(), bound()).prop_map(|(t, lo, hi)| Op::Range(t, lo, hi)),
            1 => (0..3usize).prop_map(Op::RemoveTable),
        ]
    }

    fn bound() -> impl Strategy<Value = Bound<Vec<u8>>> {
        let key = prop::collection::vec(0u8..3, 0..11);
        prop_oneof![
            Just(Bound::Unbounded),
            key.clone().prop_map(Bound::Included),
            key.prop_map(Bound::Excluded),
        ]
    }

    fn model_table(model: &Model, table: &str) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        model
            .iter()
            .filter(|((t, _), _)| t == table)
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Against a map of the latest write per (table, key): every get, every table's
        /// writes, a table's removal, and the sealed set in (table, key) order.
        #[test]
        fn the_write_set_is_a_map_of_the_latest_writes(ops in prop::collection::vec(op(), 0..300)) {
            let mut set = WriteSet::default();
            let mut model = Model::new();
            for op in ops {
                match op {
                    Op::Put(t, k, v) => {
                        set.put(TABLES[t], &k, v.as_deref());
                        model.insert((TABLES[t].to_owned(), k), v);
                    }
                    Op::Get(t, k) => {
                        let got = set.get(TABLES[t], &k).map(|v| v.map(<[u8]>::to_vec));
                        prop_assert_eq!(got, model.get(&(TABLES[t].to_owned(), k)).cloned());
                    }
                    Op::Table(t) => {
                        let got: Vec<_> = set
                            .table(TABLES[t])
                            .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                            .collect();
                        prop_assert_eq!(got, model_table(&model, TABLES[t]));
                    }
                    Op::Range(t, lo, hi) => {
                        let got: Vec<_> = set
                            .table_range(TABLES[t], lo.as_ref().map(Vec::as_slice), hi.as_ref().map(Vec::as_slice))
                            .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                            .collect();
                        let want: Vec<_> = model_table(&model, TABLES[t])
                            .into_iter()
                            .filter(|(k, _)| std::ops::RangeBounds::contains(&(lo.clone(), hi.clone()), k))
                            .collect();
                        prop_assert_eq!(got, want);
                    }
                    Op::RemoveTable(t) => {
                        let put = model_table(&model, TABLES[t]).iter().any(|(_, v)| v.is_some());
                        prop_assert_eq!(set.remove_table(TABLES[t]), put);
                        model.retain(|(table, _), _| table != TABLES[t]);
                    }
                }
            }
            prop_assert_eq!(set.is_empty(), model.is_empty());
            let sealed = set.seal();
            let got: Vec<_> = sealed
                .iter()
                .map(|w| ((w.table.to_owned(), w.key.to_vec()), w.value.map(<[u8]>::to_vec)))
                .collect();
            let want: Vec<_> = model.clone().into_iter().collect();
            prop_assert_eq!(&got, &want);
            prop_assert_eq!(sealed.iter().len(), model.len());
            let grouped: Vec<_> = sealed
                .tables()
                .flat_map(|(name, writes)| writes.map(move |w| (name, w.table)))
                .collect();
            prop_assert!(grouped.iter().all(|(name, table)| name == table));
            prop_assert_eq!(grouped.len(), model.len());
        }
    }

    #[test]
    fn a_key_written_again_and_again_does_not_grow_the_arena_without_bound() {
        let mut set = WriteSet::default();
        let value = [5u8; 1000];
        for i in 0..50_000u32 {
            set.put("", b"counter", Some(&value));
            if i % 7 == 0 {
                // A read now and then sorts the pending writes, dropping the replaced ones.
                assert_eq!(set.get("", b"counter"), Some(Some(&value[..])));
            }
        }
        // 50 MB written; at most the compaction threshold twice over (and a chunk) kept.
        assert!(
            set.arena.stored_bytes <= 2 * COMPACT_DEAD_BYTES_MIN + CHUNK_BYTES,
            "{} bytes stored",
            set.arena.stored_bytes
        );
        let sealed = set.seal();
        assert_eq!(sealed.iter().len(), 1);
    }

    #[test]
    fn a_value_larger_than_a_chunk_gets_a_chunk_of_its_own() {
        let mut set = WriteSet::default();
        let big = vec![9u8; CHUNK_BYTES * 3 + 5];
        set.put("t", b"small", Some(b"x"));
        set.put("t", b"big", Some(&big));
        set.put("t", b"after", Some(b"y"));
        assert_eq!(set.get("t", b"big"), Some(Some(&big[..])));
        let sealed = set.seal();
        let keys: Vec<_> = sealed.iter().map(|w| w.key).collect();
        assert_eq!(keys, [&b"after"[..], b"big", b"small"]);
    }
}
