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

mod arena;
mod cursor;
mod spill;

pub(super) use arena::same_name;
use arena::{Arena, Entry, prefix_of};
pub(super) use cursor::Cursor;
use cursor::{Filter, cursor};

use crate::btree::Direction;
use crate::error::Result;

use spill::{Run, RunWriter};
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
            let runs = from..self.runs.len();
            let mut merged = cursor(names, &arena, &[], self, runs, Filter::ALL, false)?;
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
        self.table_range(
            table,
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
        )
    }

    /// [`WriteSet::table`], only the keys between the bounds (found by binary search in
    /// each sorted run: a scan of a few keys does not walk the table's writes), in
    /// `direction`. The runs in memory are merged as they are read, not into one first, so
    /// that a transaction that writes a key between reads (a queue's pop) does not copy
    /// its write set at each read.
    pub fn table_range(
        &mut self,
        table: &str,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> Result<Cursor<'_>> {
        self.fold_pending();
        let runs: Vec<&[Entry]> = self.runs.iter().map(Vec::as_slice).collect();
        match self.arena.find_table(table) {
            Some(id) => cursor(
                &self.arena.tables,
                &self.arena,
                &runs,
                &self.disk,
                0..self.disk.runs.len(),
                Filter {
                    table: Some(id),
                    lower,
                    upper,
                },
                direction == Direction::Backward,
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
        // One run in memory, for the `retain` below.
        self.normalize();
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
            // Writes in key order past the newest run's last (a retain's deletes, a queue
            // taken from its head, a sorted load) extend that run: no merge, where a run a
            // batch merged log2(batches) times (a quarter of a retain's reads). It stays the
            // newest run, so its entries still win over older runs' of the same keys.
            let arena = &self.arena;
            match self.runs.last_mut() {
                Some(last)
                    if last
                        .last()
                        .zip(run.first())
                        .is_some_and(|(a, b)| arena.cmp(a, b) == std::cmp::Ordering::Less) =>
                {
                    last.extend(run);
                }
                _ => self.runs.push(run),
            }
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
            &[&self.entries],
            &self.disk,
            0..self.disk.runs.len(),
            Filter::ALL,
            false,
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
            &[entries],
            &self.disk,
            0..self.disk.runs.len(),
            Filter {
                table: Some(id),
                lower: Bound::Unbounded,
                upper: Bound::Unbounded,
            },
            false,
        )
    }

    /// Whether the set holds at least `n` writes (any run spilled to disk counts as many).
    pub fn len_at_least(&self, n: usize) -> bool {
        self.entries.len() >= n || !self.disk.runs.is_empty()
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

#[cfg(test)]
mod tests;
