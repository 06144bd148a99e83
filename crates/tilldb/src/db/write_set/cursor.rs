//! Cursors over a sealed write set ([`Writes`](super::Writes)): a table's writes, or every table's, between
//! two bounds, from memory and the spilled runs merged.

use super::arena::{Arena, Entry, prefix_of};
use super::spill::{RunCursor, cmp_keys};
use super::{Disk, PREFETCH_AHEAD};
use crate::error::Result;
use crate::record::Write;
use std::cmp::Ordering;
use std::ops::Bound;

/// Which writes a [`Cursor`] yields.
#[derive(Debug, Clone, Copy)]
pub(super) struct Filter<'k> {
    /// Only this table's (`None`: every table's).
    pub(super) table: Option<u32>,
    pub(super) lower: Bound<&'k [u8]>,
    pub(super) upper: Bound<&'k [u8]>,
}

impl Filter<'_> {
    pub(super) const ALL: Filter<'static> = Filter {
        table: None,
        lower: Bound::Unbounded,
        upper: Bound::Unbounded,
    };
}

/// Where the write a [`Cursor`] yielded came from: a run in memory or one on disk, by index
/// (oldest first in each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    Memory(usize),
    Disk(usize),
}

/// The writes of a write set in (table, key) order (or its reverse), the latest of each key:
/// the sorted runs in memory merged with the runs on disk (a write in a newer run replaces
/// the older ones; every run in memory is newer than every run on disk). A lending iterator:
/// each write borrows the cursor until the next call.
pub(in crate::db) struct Cursor<'a> {
    names: &'a [String],
    arena: &'a Arena,
    /// The sorted runs in memory, oldest first, each cut to the writes the filter lets
    /// through and not yet yielded (descending: the next is each one's last).
    memory: Vec<&'a [Entry]>,
    /// The runs on disk, oldest first.
    disk: Vec<RunCursor<'a>>,
    backward: bool,
    table: Option<u32>,
    /// The bounds, owned (a cursor outlives the caller's keys); checked only for disk runs
    /// (`memory` is cut to them).
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    /// What the last call yielded: advanced past at the next.
    yielded: Option<Source>,
    /// When the last call chose `yielded` by a merge and moved no other source: the source
    /// whose head came next after it. The heads of the others have not moved since, so a
    /// `yielded` whose next head comes strictly before this one's is the next write, with no
    /// older write of its key to pass (one compare instead of two passes over every source:
    /// a large transaction's sorted load, its runs on disk one after another, took each
    /// write from the same run).
    runner_up: RunnerUp,
}

/// What a [`Cursor`] knows of the sources other than the one it yielded last.
#[derive(Debug, Clone, Copy)]
enum RunnerUp {
    /// Nothing: the next write is found by a merge of every source.
    Unknown,
    /// No other source has a head.
    None,
    /// This one's head comes first among the others'.
    Next(Source),
}

impl std::fmt::Debug for Cursor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Cursor({} in memory in {} runs, {} runs on disk{})",
            self.memory.iter().map(|r| r.len()).sum::<usize>(),
            self.memory.len(),
            self.disk.len(),
            if self.backward { ", descending" } else { "" }
        )
    }
}

/// The entries of `run` that `filter` lets through: a table's, between the bounds, found by
/// binary search.
fn cut<'r>(arena: &Arena, run: &'r [Entry], filter: &Filter<'_>) -> &'r [Entry] {
    let Some(id) = filter.table else {
        return run;
    };
    let entries = arena.table_slice(run, id);
    // An entry against a bound's key: by the key's first 8 bytes, which the entry carries
    // (the bound's taken once, not at each step), and only on a tie by the key in the arena
    // (a probe that would miss the cache).
    let order = |e: &Entry, (k, prefix): (&[u8], u64)| {
        e.prefix.cmp(&prefix).then_with(|| arena.key(e).cmp(k))
    };
    let start = match filter.lower {
        Bound::Unbounded => 0,
        Bound::Included(k) => {
            let k = (k, prefix_of(k));
            entries.partition_point(|e| order(e, k).is_lt())
        }
        Bound::Excluded(k) => {
            let k = (k, prefix_of(k));
            entries.partition_point(|e| order(e, k).is_le())
        }
    };
    let end = match filter.upper {
        Bound::Unbounded => entries.len(),
        Bound::Included(k) => {
            let k = (k, prefix_of(k));
            entries.partition_point(|e| order(e, k).is_le())
        }
        Bound::Excluded(k) => {
            let k = (k, prefix_of(k));
            entries.partition_point(|e| order(e, k).is_lt())
        }
    };
    &entries[start..end.max(start)]
}

/// A cursor over the sorted runs `memory` (oldest first, one entry per key each) and the
/// runs `runs` of `disk`, through `filter`, ascending (or descending if `backward`; only
/// with a table in the filter).
pub(super) fn cursor<'a>(
    names: &'a [String],
    arena: &'a Arena,
    memory: &[&'a [Entry]],
    disk: &'a Disk,
    runs: std::ops::Range<usize>,
    filter: Filter<'_>,
    backward: bool,
) -> Result<Cursor<'a>> {
    assert!(
        !backward || filter.table.is_some(),
        "a descending cursor reads one table"
    );
    let memory = memory
        .iter()
        .map(|run| cut(arena, run, &filter))
        .filter(|run| !run.is_empty())
        .collect();
    let mut cursors = Vec::new();
    for i in runs {
        if let Some(id) = filter.table
            && !disk.holds(i, id)
        {
            continue;
        }
        let run = &disk.runs[i];
        let cursor = match (filter.table, backward) {
            (Some(id), true) => {
                let to = match filter.upper {
                    Bound::Included(k) | Bound::Excluded(k) => Some(k),
                    Bound::Unbounded => None,
                };
                RunCursor::seek_back(run, names, Some((id, to)), disk.removed_in(i))?
            }
            (Some(id), false) => {
                let from = match filter.lower {
                    Bound::Included(k) | Bound::Excluded(k) => k,
                    Bound::Unbounded => &[][..],
                };
                RunCursor::seek(run, names, Some((id, from)), disk.removed_in(i))?
            }
            (None, _) => RunCursor::seek(run, names, None, disk.removed_in(i))?,
        };
        cursors.push(cursor);
    }
    Ok(Cursor {
        names,
        arena,
        memory,
        disk: cursors,
        backward,
        table: filter.table,
        lower: filter.lower.map(<[u8]>::to_vec),
        upper: filter.upper.map(<[u8]>::to_vec),
        yielded: None,
        runner_up: RunnerUp::Unknown,
    })
}

impl<'a> Cursor<'a> {
    pub(super) fn empty(arena: &'a Arena) -> Cursor<'a> {
        Cursor {
            names: &arena.tables,
            arena,
            memory: Vec::new(),
            disk: Vec::new(),
            backward: false,
            table: None,
            lower: Bound::Unbounded,
            upper: Bound::Unbounded,
            yielded: None,
            runner_up: RunnerUp::Unknown,
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

    /// The write the last [`Cursor::next`] yielded, again (`None` before the first call and
    /// after the last write).
    pub fn current(&self) -> Option<Write<'_>> {
        let source = self.yielded?;
        let (table, key, value) = self.record_of(source);
        Some(Write {
            table: &self.names[table as usize],
            key,
            value,
        })
    }

    /// [`Cursor::next`], the table as its index.
    #[expect(
        clippy::type_complexity,
        reason = "a write's three fields, as the spill file holds them"
    )]
    pub(super) fn next_record(&mut self) -> Result<Option<(u32, &[u8], Option<&[u8]>)>> {
        let previous = self.yielded.take();
        if let Some(source) = previous {
            self.pass(source)?;
        }
        if self.disk.is_empty() && self.memory.len() <= 1 && !self.backward {
            return Ok(self.next_in_memory());
        }
        let mut runner_up = std::mem::replace(&mut self.runner_up, RunnerUp::Unknown);
        loop {
            let kept = match previous {
                Some(source) if self.still_first(source, runner_up) => Some(source),
                _ => None,
            };
            let best = if let Some(best) = kept {
                best
            } else {
                let Some((best, next)) = self.best() else {
                    return Ok(None);
                };
                // The older writes of the same key are replaced: skipped. Once one is, the
                // runner-up's head may have moved.
                let passed = self.pass_older_than(best)?;
                runner_up = match next {
                    _ if passed => RunnerUp::Unknown,
                    Some(next) => RunnerUp::Next(next),
                    None => RunnerUp::None,
                };
                best
            };
            let (table, key) = self.head_of(best);
            // Ascending, a key past the upper bound ends the range; descending, one below
            // the lower.
            let (end, start, beyond) = if self.backward {
                (&self.lower, &self.upper, Ordering::Less)
            } else {
                (&self.upper, &self.lower, Ordering::Greater)
            };
            let past_end = match end {
                Bound::Included(e) => key.cmp(e) == beyond,
                Bound::Excluded(e) => key.cmp(e) != beyond.reverse(),
                Bound::Unbounded => false,
            };
            if self.table.is_some_and(|t| t != table) || past_end {
                return Ok(None);
            }
            // A run seeks to the first key at or past the starting bound: only an excluded
            // bound itself is left to pass.
            if matches!(start, Bound::Excluded(s) if key == s.as_slice()) {
                self.pass(best)?;
                runner_up = RunnerUp::Unknown;
                continue;
            }
            self.yielded = Some(best);
            self.runner_up = runner_up;
            return Ok(Some(self.record_of(best)));
        }
    }

    /// The source whose head comes next: the smallest key (descending: the largest); of
    /// equal ones the newest (memory is newer than every run on disk, and a later run newer
    /// than an earlier one). With it, the one whose head comes next among the others (`None`:
    /// no other has a head).
    fn best(&self) -> Option<(Source, Option<Source>)> {
        let newer_wins = !crate::mutants::active("spilled-older-wins");
        let backward = self.backward;
        let wins = |order: Ordering| {
            let order = if backward { order.reverse() } else { order };
            order == Ordering::Less || (newer_wins && order.is_eq())
        };
        let mut best: Option<Source> = None;
        let mut next: Option<Source> = None;
        let sources = (0..self.disk.len())
            .filter(|&i| self.disk[i].head().is_some())
            .map(Source::Disk)
            .chain(
                (0..self.memory.len())
                    .filter(|&i| !self.memory[i].is_empty())
                    .map(Source::Memory),
            );
        for source in sources {
            let head = self.head_of(source);
            match best {
                Some(b) if !wins(self.cmp_head(head, b)) => {
                    if next.is_none_or(|n| wins(self.cmp_head(head, n))) {
                        next = Some(source);
                    }
                }
                _ => {
                    next = best;
                    best = Some(source);
                }
            }
        }
        best.map(|best| (best, next))
    }

    /// Whether `source` has a head that comes strictly before the heads of every other source
    /// (as `next` knows them): then it is the next write, and no other source holds its key.
    fn still_first(&self, source: Source, next: RunnerUp) -> bool {
        let has_head = match source {
            Source::Memory(i) => !self.memory[i].is_empty(),
            Source::Disk(i) => self.disk[i].head().is_some(),
        };
        if !has_head || crate::mutants::active("spilled-older-wins") {
            return false;
        }
        let next = match next {
            RunnerUp::Unknown => return false,
            RunnerUp::None => return true,
            RunnerUp::Next(next) => next,
        };
        let order = self.cmp_head(self.head_of(source), next);
        if self.backward {
            order == Ordering::Greater
        } else {
            order == Ordering::Less
        }
    }

    /// Passes the heads of every source but `best` that hold the same key as it; returns
    /// whether it passed any.
    fn pass_older_than(&mut self, best: Source) -> Result<bool> {
        let mut passed = false;
        for i in 0..self.disk.len() {
            if best == Source::Disk(i) {
                continue;
            }
            while let Some(head) = self.disk[i].head()
                && self.cmp_head((head.0, head.1), best) == Ordering::Equal
            {
                self.disk[i].advance()?;
                passed = true;
            }
        }
        for i in 0..self.memory.len() {
            if best != Source::Memory(i)
                && !self.memory[i].is_empty()
                && self.cmp_head(self.head_of(Source::Memory(i)), best) == Ordering::Equal
            {
                self.pass(Source::Memory(i))?;
                passed = true;
            }
        }
        Ok(passed)
    }

    /// Moves `source` past its head.
    fn pass(&mut self, source: Source) -> Result<()> {
        match source {
            Source::Memory(i) => {
                let run = self.memory[i];
                self.memory[i] = if self.backward {
                    &run[..run.len() - 1]
                } else {
                    &run[1..]
                };
                Ok(())
            }
            Source::Disk(i) => self.disk[i].advance(),
        }
    }

    /// The next write when one run in memory is all there is, ascending (no merge).
    #[expect(
        clippy::type_complexity,
        reason = "a write's three fields, as the spill file holds them"
    )]
    fn next_in_memory(&mut self) -> Option<(u32, &'a [u8], Option<&'a [u8]>)> {
        let run = *self.memory.first()?;
        let e = run.first()?;
        // The entries in key order point all over the arena (it is in put order): the bytes
        // of a write a few ahead are asked for now, so that they are in cache when it comes
        // (a 200,000-row load's commit: 0.28-0.29 s without, 0.25-0.26 s with, by turns).
        if let Some(ahead) = run.get(PREFETCH_AHEAD) {
            let at = ahead.at as usize;
            let chunk = &self.arena.chunks[ahead.chunk as usize];
            crate::io::prefetch(&chunk[at..at + ahead.bytes()]);
        }
        self.yielded = Some(Source::Memory(0));
        Some((e.table, self.arena.key(e), self.arena.value(e)))
    }

    /// The entry at the head of memory run `i`.
    fn memory_head(&self, i: usize) -> &'a Entry {
        let run = self.memory[i];
        if self.backward {
            &run[run.len() - 1]
        } else {
            &run[0]
        }
    }

    fn head_of(&self, source: Source) -> (u32, &[u8]) {
        let (table, key, _) = self.record_of(source);
        (table, key)
    }

    fn record_of(&self, source: Source) -> (u32, &[u8], Option<&[u8]>) {
        match source {
            Source::Memory(i) => {
                let e = self.memory_head(i);
                (e.table, self.arena.key(e), self.arena.value(e))
            }
            Source::Disk(i) => self.disk[i].head().expect("a source with a head"),
        }
    }

    fn cmp_head(&self, probe: (u32, &[u8]), source: Source) -> Ordering {
        cmp_keys(self.names, probe, self.head_of(source))
    }
}
