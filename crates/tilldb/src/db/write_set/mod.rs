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
//! them all (docs/benchmarks-journal.md, "The write set as an arena"). The entry carries the key's
//! first 8 bytes, so most comparisons never touch the arena.
//!
//! Space: the bytes of a key written twice stay in the arena until the dead bytes outweigh
//! the live ones (over [`COMPACT_DEAD_BYTES_MIN`]); then the live entries are copied into
//! fresh chunks.
//!
//! Order: tables by name (as bytes), then keys as bytes: the order the commit applies them
//! and the change feed carries them.

mod spill;

use crate::error::Result;
use crate::record::Write;
use spill::{Run, RunCursor, RunWriter, cmp_keys};
pub(crate) use spill::{SpillTo, remove_leftovers};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;

/// Bytes of an arena chunk (a key and value larger than that get a chunk of their own size).
const CHUNK_BYTES: usize = 1 << 20;

/// Bytes of a transaction's first arena chunk; each next one is twice the last, up to
/// [`CHUNK_BYTES`].
const FIRST_CHUNK_BYTES: usize = 4 << 10;

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

    /// Forgets every key and value (the tables stay).
    fn clear_bytes(&mut self) {
        self.chunks.clear();
        self.stored_bytes = 0;
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
            // The first chunks small, doubling: a transaction of a few writes (most of them)
            // allocates a few KiB, not a chunk of 1 MiB.
            let size = self
                .chunks
                .last()
                .map_or(FIRST_CHUNK_BYTES, |c| (c.capacity() * 2).min(CHUNK_BYTES));
            self.chunks.push(Vec::with_capacity(size.max(len)));
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

/// Spilled runs of one level merged into one of the next once there are this many: a
/// transaction keeps at most this many runs per level (16 per 16 GiB at the default bound),
/// and a byte spilled is rewritten once per level.
const RUNS_PER_LEVEL: usize = 16;

/// Bytes an entry takes in memory.
const ENTRY_BYTES: usize = std::mem::size_of::<Entry>();

/// What a transaction wrote, as it writes (see the module doc).
#[derive(Debug, Default)]
pub(super) struct WriteSet {
    arena: Arena,
    /// Sorted runs, oldest first, each with one entry per key.
    runs: Vec<Vec<Entry>>,
    /// Entries since the last sort, in put order.
    pending: Vec<Entry>,
    /// Entries in `runs` and `pending`.
    entries: usize,
    /// Arena bytes of entries a later write of the same key replaced.
    dead_bytes: usize,
    /// The runs spilled to disk, all older than what is in memory.
    disk: Disk,
    /// The block of a spilled run a get read.
    read_buf: Vec<u8>,
}

/// A write set's runs on disk (`spill.rs`).
#[derive(Debug, Default)]
struct Disk {
    /// Where runs go; `None`: the write set never spills.
    to: Option<Arc<SpillTo>>,
    /// Oldest first.
    runs: Vec<Run>,
    /// Tables the transaction removed (`WriteSet::remove_table`) after runs were spilled:
    /// the records of the table in the runs before this index are not part of the set.
    removed: HashMap<u32, usize>,
}

impl Disk {
    /// The tables whose records in run `i` are not part of the set.
    fn removed_in(&self, i: usize) -> Vec<u32> {
        self.removed
            .iter()
            .filter(|&(_, &before)| i < before)
            .map(|(&table, _)| table)
            .collect()
    }

    /// Whether run `i` holds a record of `table` that is part of the set.
    fn holds(&self, i: usize, table: u32) -> bool {
        self.runs[i].tables.binary_search(&table).is_ok()
            && self.removed.get(&table).is_none_or(|&before| i >= before)
    }

    /// Merges the runs of one level into one of the next while the last
    /// [`RUNS_PER_LEVEL`] runs are of one level.
    fn merge_levels(&mut self, names: &[String]) -> Result<()> {
        while self.runs.len() >= RUNS_PER_LEVEL {
            let from = self.runs.len() - RUNS_PER_LEVEL;
            let level = self.runs[from].level;
            if self.runs[from..].iter().any(|r| r.level != level) {
                break;
            }
            let to = self.to.as_ref().expect("runs were spilled");
            let mut writer = RunWriter::create(to, level + 1)?;
            let arena = Arena::default();
            let mut merged = cursor(names, &arena, &[], self, from..self.runs.len(), Filter::ALL)?;
            while let Some(w) = merged.next_record()? {
                writer.push(w.0, w.1, w.2)?;
            }
            let run = writer.finish()?;
            self.runs.truncate(from);
            self.runs.push(run);
            // The merged run holds only what was part of the set.
            for before in self.removed.values_mut() {
                if *before > from {
                    *before = from;
                }
            }
        }
        Ok(())
    }
}

impl WriteSet {
    /// A write set that spills its writes to runs on disk past `to.bound` bytes in memory.
    pub fn spilling(to: Arc<SpillTo>) -> Self {
        WriteSet {
            disk: Disk {
                to: Some(to),
                ..Disk::default()
            },
            ..WriteSet::default()
        }
    }

    /// Sets `key` of `table` to `value` (`None`: deletes it). Fails only if the write set
    /// had to spill and could not; then it holds what it held before.
    pub fn put(&mut self, table: &str, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        if let Some(to) = &self.disk.to {
            let adding = key.len() + value.map_or(0, <[u8]>::len) + ENTRY_BYTES;
            if self.entries > 0 && self.resident_bytes() + adding > to.bound {
                self.spill()?;
            }
        }
        let table = self.arena.table_id(table);
        let entry = self.arena.push(table, key, value);
        self.pending.push(entry);
        self.entries += 1;
        Ok(())
    }

    /// Bytes of keys, values and entries held in memory (dead ones included).
    pub fn resident_bytes(&self) -> usize {
        self.arena.stored_bytes + self.entries * ENTRY_BYTES
    }

    /// True when nothing was written.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
            && self.runs.iter().all(Vec::is_empty)
            && (0..self.disk.runs.len()).all(|i| {
                self.disk.runs[i]
                    .tables
                    .iter()
                    .all(|&t| !self.disk.holds(i, t))
            })
    }

    /// Puts and deletes made, counting a key written twice twice (until a sort merges
    /// them), and not counting those spilled.
    pub fn len_upper(&self) -> usize {
        self.entries
    }

    /// What this write set holds for `key` of `table`: `None` if it never wrote it, else the
    /// latest value (`Some(None)`: deleted).
    #[expect(
        clippy::option_option,
        reason = "absent, deleted or put: what `Txn::get` distinguishes"
    )]
    pub fn get(&mut self, table: &str, key: &[u8]) -> Result<Option<Option<&[u8]>>> {
        let Some(table) = self.arena.find_table(table) else {
            return Ok(None);
        };
        if self.pending.len() > PENDING_SCAN_MAX {
            self.fold_pending();
        }
        let prefix = prefix_of(key);
        let arena = &self.arena;
        let in_memory = self
            .pending
            .iter()
            .rev()
            .find(|e| arena.cmp_probe(e, table, prefix, key) == Ordering::Equal)
            .copied()
            .or_else(|| {
                self.runs.iter().rev().find_map(|run| {
                    run.binary_search_by(|e| arena.cmp_probe(e, table, prefix, key))
                        .ok()
                        .map(|i| run[i])
                })
            });
        if let Some(e) = in_memory {
            return Ok(Some(self.arena.value(&e)));
        }
        for i in (0..self.disk.runs.len()).rev() {
            if !self.disk.holds(i, table) {
                continue;
            }
            let names = &self.arena.tables;
            if let Some(record) = self.disk.runs[i].get(names, table, key, &mut self.read_buf)? {
                return Ok(Some(record.value(&self.read_buf)));
            }
        }
        Ok(None)
    }

    /// The latest write of each key of `table`, in key order.
    pub fn table(&mut self, table: &str) -> Result<Cursor<'_>> {
        self.table_range(table, Bound::Unbounded, Bound::Unbounded)
    }

    /// [`WriteSet::table`], only the keys between the bounds (found by binary search: a
    /// scan of a few keys does not walk the table's writes).
    pub fn table_range(
        &mut self,
        table: &str,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> Result<Cursor<'_>> {
        self.normalize();
        let run = self.runs.first().map_or(&[][..], Vec::as_slice);
        match self.arena.find_table(table) {
            Some(id) => cursor(
                &self.arena.tables,
                &self.arena,
                run,
                &self.disk,
                0..self.disk.runs.len(),
                Filter {
                    table: Some(id),
                    lower,
                    upper,
                },
            ),
            None => Ok(Cursor::empty(&self.arena)),
        }
    }

    /// Forgets every write to `table`; returns whether any of them (the latest of its key)
    /// was a put.
    pub fn remove_table(&mut self, table: &str) -> Result<bool> {
        let Some(id) = self.arena.find_table(table) else {
            return Ok(false);
        };
        let mut put = false;
        let mut writes = self.table(table)?;
        while let Some(w) = writes.next()? {
            if w.value.is_some() {
                put = true;
                break;
            }
        }
        drop(writes);
        if !self.disk.runs.is_empty() {
            self.disk.removed.insert(id, self.disk.runs.len());
        }
        if let Some(run) = self.runs.first_mut() {
            let mut dead = 0;
            run.retain(|e| {
                if e.table == id {
                    dead += e.bytes();
                }
                e.table != id
            });
            self.dead_bytes += dead;
            self.entries = run.len();
        }
        Ok(put)
    }

    /// The write set sorted, one entry per key: what a commit applies.
    pub fn seal(mut self) -> Writes {
        self.normalize();
        Writes {
            entries: self.runs.pop().unwrap_or_default(),
            arena: self.arena,
            disk: self.disk,
        }
    }

    /// Writes what is in memory to a run on disk, and empties the memory. On failure, the
    /// write set holds what it held (sorted).
    fn spill(&mut self) -> Result<()> {
        self.normalize();
        if let Some(run) = self.runs.first()
            && !run.is_empty()
        {
            let to = self.disk.to.as_ref().expect("a spilling write set");
            let mut writer = RunWriter::create(to, 0)?;
            for e in run {
                writer.push(e.table, self.arena.key(e), self.arena.value(e))?;
            }
            self.disk.runs.push(writer.finish()?);
        }
        self.runs.clear();
        self.entries = 0;
        self.dead_bytes = 0;
        self.arena.clear_bytes();
        self.disk.merge_levels(&self.arena.tables)
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
        self.entries = self.runs.iter().map(Vec::len).sum();
        self.compact_if_mostly_dead();
    }

    /// Everything in memory in one sorted run (none when empty).
    fn normalize(&mut self) {
        self.fold_pending();
        while self.runs.len() > 1 {
            self.merge_last_two();
        }
        self.entries = self.runs.first().map_or(0, Vec::len);
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
    disk: Disk,
}

impl Writes {
    /// Every write, in (table, key) order.
    #[cfg(test)]
    pub fn cursor(&self) -> Result<Cursor<'_>> {
        cursor(
            &self.arena.tables,
            &self.arena,
            &self.entries,
            &self.disk,
            0..self.disk.runs.len(),
            Filter::ALL,
        )
    }

    /// The writes of `table`, in key order.
    pub fn table(&self, table: &str) -> Result<Cursor<'_>> {
        let Some(id) = self.arena.find_table(table) else {
            return Ok(Cursor::empty(&self.arena));
        };
        let entries = self.arena.table_slice(&self.entries, id);
        cursor(
            &self.arena.tables,
            &self.arena,
            entries,
            &self.disk,
            0..self.disk.runs.len(),
            Filter {
                table: Some(id),
                lower: Bound::Unbounded,
                upper: Bound::Unbounded,
            },
        )
    }

    /// Bytes of keys and values (those replaced in memory since the last sort included).
    pub fn bytes(&self) -> u64 {
        self.arena.stored_bytes as u64 + self.disk.runs.iter().map(|r| r.bytes).sum::<u64>()
    }

    /// The tables written to, in name order.
    pub fn tables(&self) -> Vec<&str> {
        // The entries are sorted by table: one id per table, not one per entry.
        let mut ids: Vec<u32> = self
            .entries
            .chunk_by(|a, b| a.table == b.table)
            .map(|group| group[0].table)
            .collect();
        for (i, run) in self.disk.runs.iter().enumerate() {
            ids.extend(run.tables.iter().filter(|&&t| self.disk.holds(i, t)));
        }
        ids.sort_unstable();
        ids.dedup();
        let mut names: Vec<&str> = ids
            .into_iter()
            .map(|t| self.arena.tables[t as usize].as_str())
            .collect();
        names.sort_unstable();
        names
    }
}

/// Which writes a [`Cursor`] yields.
#[derive(Debug, Clone, Copy)]
struct Filter<'k> {
    /// Only this table's (`None`: every table's).
    table: Option<u32>,
    lower: Bound<&'k [u8]>,
    upper: Bound<&'k [u8]>,
}

impl Filter<'_> {
    const ALL: Filter<'static> = Filter {
        table: None,
        lower: Bound::Unbounded,
        upper: Bound::Unbounded,
    };
}

/// Where the write a [`Cursor`] yielded came from.
#[derive(Debug, Clone, Copy)]
enum Source {
    Memory,
    Disk(usize),
}

/// The writes of a write set in (table, key) order, the latest of each key: the run in
/// memory merged with the runs on disk (a write in a newer run replaces the older ones).
/// A lending iterator: each write borrows the cursor until the next call.
pub(super) struct Cursor<'a> {
    names: &'a [String],
    arena: &'a Arena,
    /// The entries in memory not yet yielded (only those the filter lets through).
    memory: &'a [Entry],
    /// The runs on disk, oldest first.
    disk: Vec<RunCursor<'a>>,
    table: Option<u32>,
    /// The bounds, owned (a cursor outlives the caller's keys); checked only for disk runs
    /// (`memory` is cut to them).
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    /// What the last call yielded: advanced past at the next.
    yielded: Option<Source>,
}

impl std::fmt::Debug for Cursor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Cursor({} in memory, {} runs)",
            self.memory.len(),
            self.disk.len()
        )
    }
}

/// A cursor over `memory` (sorted, one entry per key) and the runs `runs` of `disk`, through
/// `filter`.
fn cursor<'a>(
    names: &'a [String],
    arena: &'a Arena,
    memory: &'a [Entry],
    disk: &'a Disk,
    runs: std::ops::Range<usize>,
    filter: Filter<'_>,
) -> Result<Cursor<'a>> {
    let memory = match filter.table {
        None => memory,
        Some(id) => {
            let entries = arena.table_slice(memory, id);
            let start = match filter.lower {
                Bound::Unbounded => 0,
                Bound::Included(k) => entries.partition_point(|e| arena.key(e) < k),
                Bound::Excluded(k) => entries.partition_point(|e| arena.key(e) <= k),
            };
            let end = match filter.upper {
                Bound::Unbounded => entries.len(),
                Bound::Included(k) => entries.partition_point(|e| arena.key(e) <= k),
                Bound::Excluded(k) => entries.partition_point(|e| arena.key(e) < k),
            };
            &entries[start..end.max(start)]
        }
    };
    let mut cursors = Vec::new();
    for i in runs {
        let from = match filter.table {
            Some(id) if !disk.holds(i, id) => continue,
            Some(id) => match filter.lower {
                Bound::Included(k) | Bound::Excluded(k) => Some((id, k)),
                Bound::Unbounded => Some((id, &[][..])),
            },
            None => None,
        };
        cursors.push(RunCursor::seek(
            &disk.runs[i],
            names,
            from,
            disk.removed_in(i),
        )?);
    }
    Ok(Cursor {
        names,
        arena,
        memory,
        disk: cursors,
        table: filter.table,
        lower: filter.lower.map(<[u8]>::to_vec),
        upper: filter.upper.map(<[u8]>::to_vec),
        yielded: None,
    })
}

impl<'a> Cursor<'a> {
    fn empty(arena: &'a Arena) -> Cursor<'a> {
        Cursor {
            names: &arena.tables,
            arena,
            memory: &[],
            disk: Vec::new(),
            table: None,
            lower: Bound::Unbounded,
            upper: Bound::Unbounded,
            yielded: None,
        }
    }

    /// The next write, or `None` after the last. Fails only if a run on disk cannot be read
    /// back (an I/O error, or a block whose checksum differs).
    pub fn next(&mut self) -> Result<Option<Write<'_>>> {
        let names = self.names;
        Ok(self.next_record()?.map(|(table, key, value)| Write {
            table: &names[table as usize],
            key,
            value,
        }))
    }

    /// [`Cursor::next`], the table as its index.
    #[expect(
        clippy::type_complexity,
        reason = "a write's three fields, as the spill file holds them"
    )]
    fn next_record(&mut self) -> Result<Option<(u32, &[u8], Option<&[u8]>)>> {
        match self.yielded.take() {
            Some(Source::Memory) => self.memory = &self.memory[1..],
            Some(Source::Disk(i)) => self.disk[i].advance()?,
            None => {}
        }
        if self.disk.is_empty() {
            return Ok(self.next_in_memory());
        }
        loop {
            // The smallest head; of equal ones the newest (memory is newer than every run).
            let newer_wins = !crate::mutants::active("spilled-older-wins");
            let wins = |order: Ordering| order == Ordering::Less || (newer_wins && order.is_eq());
            let mut best: Option<Source> = None;
            for i in 0..self.disk.len() {
                if let Some(head) = self.disk[i].head()
                    && best.is_none_or(|b| wins(self.cmp_head((head.0, head.1), b)))
                {
                    best = Some(Source::Disk(i));
                }
            }
            if let Some(e) = self.memory.first()
                && best.is_none_or(|b| wins(self.cmp_head((e.table, self.arena.key(e)), b)))
            {
                best = Some(Source::Memory);
            }
            let Some(best) = best else {
                return Ok(None);
            };
            // The older writes of the same key are replaced: skipped.
            for i in 0..self.disk.len() {
                if matches!(best, Source::Disk(b) if b == i) {
                    continue;
                }
                while let Some(head) = self.disk[i].head()
                    && self.cmp_head((head.0, head.1), best) == Ordering::Equal
                {
                    self.disk[i].advance()?;
                }
            }
            let (table, key) = self.head_of(best);
            let past_upper = match &self.upper {
                Bound::Included(u) => key > u.as_slice(),
                Bound::Excluded(u) => key >= u.as_slice(),
                Bound::Unbounded => false,
            };
            if self.table.is_some_and(|t| t != table) || past_upper {
                return Ok(None);
            }
            // A run seeks to the first key at or above the lower bound: only an excluded
            // lower bound itself is left to pass.
            if matches!(&self.lower, Bound::Excluded(l) if key == l.as_slice()) {
                match best {
                    Source::Memory => self.memory = &self.memory[1..],
                    Source::Disk(i) => self.disk[i].advance()?,
                }
                continue;
            }
            self.yielded = Some(best);
            return Ok(Some(match best {
                Source::Memory => {
                    let e = &self.memory[0];
                    (e.table, self.arena.key(e), self.arena.value(e))
                }
                Source::Disk(i) => self.disk[i].head().expect("a head above"),
            }));
        }
    }

    /// The next write when every run is in memory (no merge).
    #[expect(
        clippy::type_complexity,
        reason = "a write's three fields, as the spill file holds them"
    )]
    fn next_in_memory(&mut self) -> Option<(u32, &'a [u8], Option<&'a [u8]>)> {
        let e = self.memory.first()?;
        // The entries in key order point all over the arena (it is in put order): the bytes
        // of a write a few ahead are asked for now, so that they are in cache when it comes
        // (a 200,000-row load's commit: 0.28-0.29 s without, 0.25-0.26 s with, by turns).
        if let Some(ahead) = self.memory.get(PREFETCH_AHEAD) {
            let at = ahead.at as usize;
            let chunk = &self.arena.chunks[ahead.chunk as usize];
            crate::io::prefetch(&chunk[at..at + ahead.bytes()]);
        }
        self.yielded = Some(Source::Memory);
        Some((e.table, self.arena.key(e), self.arena.value(e)))
    }

    fn head_of(&self, source: Source) -> (u32, &[u8]) {
        match source {
            Source::Memory => {
                let e = &self.memory[0];
                (e.table, self.arena.key(e))
            }
            Source::Disk(i) => {
                let (table, key, _) = self.disk[i].head().expect("a source with a head");
                (table, key)
            }
        }
    }

    fn cmp_head(&self, probe: (u32, &[u8]), source: Source) -> Ordering {
        cmp_keys(self.names, probe, self.head_of(source))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{Fault, FaultKind, IoKind, SimConfig, SimDisk, Storage};
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::path::Path;

    /// A write set on a simulated disk that spills past `bound` bytes, and the disk.
    fn spilling(bound: usize) -> (WriteSet, Arc<SimDisk>) {
        let disk = Arc::new(SimDisk::new(SimConfig::default()));
        disk.create_dir_all(Path::new("/db")).expect("mkdir");
        let storage: Arc<dyn Storage> = Arc::clone(&disk) as Arc<dyn Storage>;
        let to = SpillTo::new(storage, "/db".into(), bound);
        (WriteSet::spilling(Arc::new(to)), disk)
    }

    fn runs_on(disk: &SimDisk) -> usize {
        disk.list_dir(Path::new("/db")).expect("list").len()
    }

    type OwnedWrite = ((String, Vec<u8>), Option<Vec<u8>>);

    /// Every write of a cursor, owned.
    fn drain(mut cursor: Cursor<'_>) -> Vec<OwnedWrite> {
        let mut out = Vec::new();
        while let Some(w) = cursor.next().expect("read back") {
            out.push((
                (w.table.to_owned(), w.key.to_vec()),
                w.value.map(<[u8]>::to_vec),
            ));
        }
        out
    }

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
        /// writes, a table's removal, and the sealed set in (table, key) order; in memory,
        /// and spilling to runs on disk (merged into larger ones) every few writes.
        #[test]
        fn the_write_set_is_a_map_of_the_latest_writes(
            ops in prop::collection::vec(op(), 0..300),
            bound in prop_oneof![Just(None), (40usize..400).prop_map(Some)],
        ) {
            let (mut set, disk) = match bound {
                None => (WriteSet::default(), None),
                Some(bound) => {
                    let (set, disk) = spilling(bound);
                    (set, Some(disk))
                }
            };
            let mut model = Model::new();
            for op in ops {
                match op {
                    Op::Put(t, k, v) => {
                        set.put(TABLES[t], &k, v.as_deref()).expect("put");
                        model.insert((TABLES[t].to_owned(), k), v);
                    }
                    Op::Get(t, k) => {
                        let got = set.get(TABLES[t], &k).expect("get").map(|v| v.map(<[u8]>::to_vec));
                        prop_assert_eq!(got, model.get(&(TABLES[t].to_owned(), k)).cloned());
                    }
                    Op::Table(t) => {
                        let got: Vec<_> = drain(set.table(TABLES[t]).expect("table"))
                            .into_iter()
                            .map(|((_, k), v)| (k, v))
                            .collect();
                        prop_assert_eq!(got, model_table(&model, TABLES[t]));
                    }
                    Op::Range(t, lo, hi) => {
                        let range = set
                            .table_range(TABLES[t], lo.as_ref().map(Vec::as_slice), hi.as_ref().map(Vec::as_slice))
                            .expect("range");
                        let got: Vec<_> = drain(range).into_iter().map(|((_, k), v)| (k, v)).collect();
                        let want: Vec<_> = model_table(&model, TABLES[t])
                            .into_iter()
                            .filter(|(k, _)| std::ops::RangeBounds::contains(&(lo.clone(), hi.clone()), k))
                            .collect();
                        prop_assert_eq!(got, want);
                    }
                    Op::RemoveTable(t) => {
                        let put = model_table(&model, TABLES[t]).iter().any(|(_, v)| v.is_some());
                        prop_assert_eq!(set.remove_table(TABLES[t]).expect("remove"), put);
                        model.retain(|(table, _), _| table != TABLES[t]);
                    }
                }
            }
            prop_assert_eq!(set.is_empty(), model.is_empty());
            let sealed = set.seal();
            let got = drain(sealed.cursor().expect("cursor"));
            let want: Vec<_> = model.clone().into_iter().collect();
            prop_assert_eq!(&got, &want);
            let mut tables: Vec<&str> = model.keys().map(|(t, _)| t.as_str()).collect();
            tables.dedup();
            prop_assert_eq!(sealed.tables(), tables.clone());
            let grouped: Vec<_> = tables
                .iter()
                .flat_map(|&name| drain(sealed.table(name).expect("table")))
                .collect();
            prop_assert_eq!(&grouped, &want);
            // The runs' files go with the write set.
            drop(sealed);
            if let Some(disk) = disk {
                prop_assert_eq!(runs_on(&disk), 0);
            }
        }
    }

    #[test]
    fn a_key_written_again_and_again_does_not_grow_the_arena_without_bound() {
        let mut set = WriteSet::default();
        let value = [5u8; 1000];
        for i in 0..50_000u32 {
            set.put("", b"counter", Some(&value)).expect("put");
            if i % 7 == 0 {
                // A read now and then sorts the pending writes, dropping the replaced ones.
                assert_eq!(
                    set.get("", b"counter").expect("get"),
                    Some(Some(&value[..]))
                );
            }
        }
        // 50 MB written; at most the compaction threshold twice over (and a chunk) kept.
        assert!(
            set.arena.stored_bytes <= 2 * COMPACT_DEAD_BYTES_MIN + CHUNK_BYTES,
            "{} bytes stored",
            set.arena.stored_bytes
        );
        let sealed = set.seal();
        assert_eq!(drain(sealed.cursor().expect("cursor")).len(), 1);
    }

    #[test]
    fn a_value_larger_than_a_chunk_gets_a_chunk_of_its_own() {
        let mut set = WriteSet::default();
        let big = vec![9u8; CHUNK_BYTES * 3 + 5];
        set.put("t", b"small", Some(b"x")).expect("put");
        set.put("t", b"big", Some(&big)).expect("put");
        set.put("t", b"after", Some(b"y")).expect("put");
        assert_eq!(set.get("t", b"big").expect("get"), Some(Some(&big[..])));
        let sealed = set.seal();
        let keys: Vec<_> = drain(sealed.cursor().expect("cursor"))
            .into_iter()
            .map(|((_, k), _)| k)
            .collect();
        assert_eq!(keys, [&b"after"[..], b"big", b"small"]);
    }

    #[test]
    fn a_write_set_past_its_bound_keeps_that_much_in_memory_and_the_rest_in_runs() {
        let (mut set, disk) = spilling(64 << 10);
        let value = [7u8; 150];
        for i in 0..20_000u32 {
            set.put("t", format!("key{i:08}").as_bytes(), Some(&value))
                .expect("put");
            assert!(
                set.resident_bytes() <= 64 << 10,
                "{} bytes",
                set.resident_bytes()
            );
        }
        // 3.6 MB written: about 56 runs of 64 KiB, merged by sixteens.
        assert!(runs_on(&disk) >= 4, "{} runs", runs_on(&disk));
        assert!(
            runs_on(&disk) < 2 * RUNS_PER_LEVEL,
            "{} runs",
            runs_on(&disk)
        );
        assert_eq!(
            set.get("t", b"key00000017").expect("get"),
            Some(Some(&value[..]))
        );
        assert_eq!(set.get("t", b"key99999999").expect("get"), None);
        let sealed = set.seal();
        let all = drain(sealed.cursor().expect("cursor"));
        assert_eq!(all.len(), 20_000);
        assert!(
            all.windows(2).all(|w| w[0].0 < w[1].0),
            "in key order, once each"
        );
        drop(sealed);
        assert_eq!(runs_on(&disk), 0, "the runs go with the write set");
    }

    #[test]
    fn a_spill_that_fails_leaves_the_write_set_as_it_was() {
        let (mut set, disk) = spilling(4 << 10);
        let mut i = 0u32;
        // Up to the bound: in memory.
        while set.resident_bytes() < 3 << 10 {
            set.put("t", &i.to_le_bytes(), Some(&[1u8; 100]))
                .expect("put");
            i += 1;
        }
        disk.inject(Fault::once(IoKind::Write, 1, FaultKind::Enospc).on_path("txn-writes-"));
        let mut failed = None;
        for j in i..i + 100 {
            if let Err(e) = set.put("t", &j.to_le_bytes(), Some(&[1u8; 100])) {
                failed = Some((j, e));
                break;
            }
        }
        let (j, e) = failed.expect("a spill hit the full disk");
        assert!(e.to_string().contains("txn-writes-"), "{e}");
        assert_eq!(runs_on(&disk), 0, "the run cut short is removed");
        // Every write before the failed one is there; the failed one is not; the next
        // spill succeeds.
        for k in 0..j {
            assert_eq!(
                set.get("t", &k.to_le_bytes()).expect("get"),
                Some(Some(&[1u8; 100][..])),
                "{k}"
            );
        }
        assert_eq!(set.get("t", &j.to_le_bytes()).expect("get"), None);
        set.put("t", &j.to_le_bytes(), Some(&[2u8; 100]))
            .expect("put again");
        let sealed = set.seal();
        assert_eq!(
            drain(sealed.cursor().expect("cursor")).len(),
            j as usize + 1
        );
    }

    #[test]
    fn a_spilled_block_that_reads_back_changed_is_corruption_naming_the_file_and_offset() {
        let (mut set, disk) = spilling(4 << 10);
        for i in 0..400u32 {
            set.put("t", &i.to_le_bytes(), Some(&[3u8; 100]))
                .expect("put");
        }
        let names = disk.list_dir(Path::new("/db")).expect("list");
        let first = names.iter().min().expect("a run");
        disk.corrupt(&Path::new("/db").join(first), 40, 0x10);
        let sealed = set.seal();
        // A cursor reads each run's first block as it is made.
        let err = match sealed.cursor() {
            Err(e) => e,
            Ok(mut cursor) => loop {
                match cursor.next() {
                    Ok(Some(_)) => {}
                    Ok(None) => panic!("a changed block read back whole"),
                    Err(e) => break e,
                }
            },
        };
        match err {
            crate::Error::Corruption { file, offset, .. } => {
                assert!(file.ends_with(first), "{}", file.display());
                assert_eq!(offset, 0);
            }
            other => panic!("{other}"),
        }
    }
}
