//! Buffered commits and the drain (docs/write-buffer.md; the buffer itself is
//! `txn/buffer.rs`, read through `visible.rs`).
//!
//! A commit the write buffer takes is appended as one record holding its writes and the rows
//! it changed per table (`record::encode_buffered`) and added to the buffer; the tree is not
//! touched. The *drain* applies the buffer's newest versions to the tree: in *chunks*
//! ([`drain_chunk`], `txn/buffer.rs`, "Chunks"), each an ordinary commit whose last record
//! carries the chunk's flag and section (`record::Role::Chunk`), with commits and readers
//! between them; or *whole* ([`drain`]), one commit whose last record carries the drain flag
//! (`record::Role::Drain`).
//!
//! When: a buffered commit that fills the live generation to `write_buffer_bytes` freezes it
//! and applies its first chunk, and every buffered commit after it applies one more (at least
//! `CHUNK_BYTES`, and four times its own bytes, so the frozen generation is done long before
//! the live one fills again; if it fills first, the rest drains whole). The checkpoint thread
//! drains in chunks once the writer is idle ([`drain_if_idle`]), and before a checkpoint
//! ([`drain_in_chunks`]).
//!
//! Which commits are buffered ([`try_buffered`]): with a buffer (`Options::write_buffer_bytes`
//! above 0), a commit at any level (a `Sync` one is acknowledged once its record is durable,
//! as any) that drops no table, writes only to tables that exist, and whose writes are at
//! most a part (`Options::commit_part_bytes`) and fit one log record, unless it appends
//! ([`appends`]: `APPEND_WRITES_MIN` keys or more, all above every key of the tree and the
//! buffer, which the tree takes a run of keys at a time). Every other commit drains the
//! buffer first ([`drain`], from `apply`), except one whose keys all lie above the buffer's
//! ([`past_buffer`]: the tree then never gets a key the buffer holds undrained), and so does
//! a transaction's first read (`Txn::latch`)
//! and a checkpoint before it reads its redo point: a writer that reads, or commits through
//! the tree, finds the tree current and needs no view of the buffer, and the log a
//! checkpoint lets go of holds no buffered record the tree does not.
//!
//! Recovery and a read-only handle's refresh rebuild the buffer from the buffered records and
//! chunks after the last whole drain in the log ([`rebuild`]); the writer's open then drains
//! it with its checkpoint. A database whose header lacks the write-buffer feature (version 4)
//! refuses them, and one whose header lacks the chunks' (version 5) refuses chunks and
//! counts. On with `Options::write_buffer_bytes` above 0 (default 64 MiB; 0: off). The last
//! handle's drop drains it, as `close` does (`Drop for Db`).

use super::{Changes, Drains, PoisonOnUnwind, apply_to_tree, root_of};
use crate::Durability;
use crate::btree::{Direction, Tree};
use crate::db::locks::{TreeHeld, Writer};
use crate::db::open::{BufferedEvent, BufferedLog};
use crate::db::pages::ReadPages;
use crate::db::write_set::WriteSet;
use crate::db::{CATALOG_ROOT, DEFAULT_ROOT, Db, catalog_root_of, counts, drop};
use crate::error::{Error, Result};
use crate::page::PageId;
use crate::record;
use crate::txn::Seen;
use crate::txn::buffer::{BufferedWrite, CommitAt, OwnedWrites};
use crate::txn::packed::Packed;
use crate::wal::Lsn;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::atomic::Ordering;

/// Bytes of buffered versions (as the buffer counts them) a chunk of a drain in chunks applies
/// at least: some 260 one-row versions of 150-byte values, about a millisecond of tree work
/// for keys spread over a large table, which readers and the next committer wait for. A
/// buffer of less than `CHUNK_SHARE` of it drains in chunks of its share ([`chunk_bytes`]).
pub(super) const CHUNK_BYTES: usize = 64 << 10;

/// A drain in chunks takes at least this many chunks, however small the buffer (tests drain
/// a 2 KiB buffer in chunks of a few keys).
const CHUNK_SHARE: usize = 8;

/// Bytes of versions a chunk applies: `base` ([`CHUNK_BYTES`], or the idle drain's
/// [`IDLE_CHUNK_BYTES`]), at most the threshold's share, and at least `floor` (a committer's
/// pace).
fn chunk_bytes(db: &Db, base: usize, floor: usize) -> usize {
    let limit =
        usize::try_from(db.inner.write_buffer_bytes.load(Ordering::Relaxed)).unwrap_or(usize::MAX);
    // With the buffer turned off, what is left drains in chunks of `base`.
    let share = if limit == 0 {
        base
    } else {
        limit / CHUNK_SHARE
    };
    base.min(share).max(floor).max(1)
}

/// How many times its own bytes a buffered commit drains, in chunks, while a drain in chunks
/// is under way: the frozen generation is done when the live one holds a quarter of what it
/// held.
const CHUNK_PACE: usize = 4;

/// Buffers `changes` if the buffer takes them (see the module doc): appends their record,
/// adds them to the buffer, and drains it once it holds `write_buffer_bytes`. `None`: not
/// buffered, nothing done. Requires: the writer lock (`alloc`).
pub(super) fn try_buffered(
    db: &Db,
    alloc: &mut Writer<'_>,
    changes: &Changes,
    durability: Durability,
) -> Result<Option<Lsn>> {
    let inner = &db.inner;
    let limit = inner.write_buffer_bytes.load(Ordering::Relaxed);
    let max = inner.wal.max_payload_bytes();
    // At most a part of writes (`Options::commit_part_bytes`): a larger commit gains nothing
    // from the buffer (its drain is its own tree work, one commit later), and one of 500,000
    // deletes buffered moved its whole cost into the next transaction's first read.
    let largest = super::part_limit(db).min(max) as u64;
    if limit == 0 || !changes.dropped.is_empty() || changes.writes.bytes() > largest {
        return Ok(None);
    }
    let tables: Vec<String> = changes
        .writes
        .tables()
        .into_iter()
        .map(str::to_owned)
        .collect();
    let Some((roots, writes, deltas)) = looked_up(db, changes, &tables)? else {
        // A table this commit would create: through the tree.
        return Ok(None);
    };
    let as_record = writes.iter().map(|(table, key, value)| record::Write {
        table: &tables[table],
        key,
        value,
    });
    let counts: Vec<(&str, i64)> = tables
        .iter()
        .zip(&deltas)
        .filter(|(_, delta)| **delta != 0)
        .map(|(table, delta)| (table.as_str(), *delta))
        .collect();
    let tail = record::Tail {
        chunk: None,
        counts: Some(&counts),
    };
    if record::HEADER_BYTES + record::changes_len(as_record.clone()) + tail.bytes() > max {
        return Ok(None);
    }
    // Under the writer lock: the record starts at or after the log's end now.
    let start = inner.wal.end_lsn_checked()?.0;
    let lsn = inner
        .wal
        .append(&record::encode_buffered(**alloc, as_record, &counts))?;
    assert!(start < lsn.0, "a buffered record ends after it begins");
    let live_before = inner.visible.buffer_live_bytes();
    let deltas: Vec<(u64, i64)> = roots
        .iter()
        .zip(&deltas)
        .filter(|(_, delta)| **delta != 0)
        .map(|(root, delta)| (root.0, *delta))
        .collect();
    inner.visible.buffer_commit(
        CommitAt { start, end: lsn.0 },
        writes.iter().map(|(table, key, value)| BufferedWrite {
            table: roots[table].0,
            key,
            value,
        }),
        &deltas,
    );
    inner.visible.committed(lsn.0, durability);
    // Its share of a drain in chunks: one chunk, or the first (freezing the live generation)
    // once the live generation is full; the rest whole when it fills during one.
    let live = inner.visible.buffer_live_bytes();
    let full = live as u64 >= limit;
    let draining = inner.visible.buffer_draining();
    if full && draining {
        drain(db, alloc)?;
    } else if full || draining {
        // This commit's bytes as the buffer counts them (a reader's prune may have taken some
        // meanwhile: then less).
        let own = live.saturating_sub(live_before);
        drain_chunk(db, alloc, chunk_bytes(db, CHUNK_BYTES, CHUNK_PACE * own))?;
    }
    Ok(Some(lsn))
}

/// `changes`' writes to `tables` copied out, with each table's root and row change:
/// whether each key held a value before (in the buffer's newest version, else in the tree)
/// and does after. `None`: a table does not exist yet.
#[expect(
    clippy::type_complexity,
    reason = "three lists by table, read together"
)]
fn looked_up(
    db: &Db,
    changes: &Changes,
    tables: &[String],
) -> Result<Option<(Vec<PageId>, Packed<usize>, Vec<i64>)>> {
    let mut roots = Vec::with_capacity(tables.len());
    let mut writes = Packed::<usize>::default();
    // Pushed, not `vec![0; n]`: glibc's calloc passes by its per-thread cache, and cost a
    // buffered commit some 0.7 us (13 % of its own work).
    let mut deltas: Vec<i64> = Vec::with_capacity(tables.len());
    let shared = db.inner.tree_lock.read();
    db.check_poison()?;
    let pages = db.read_pages();
    for (index, table) in tables.iter().enumerate() {
        let Some(root) = root_of(db, table, shared.held())? else {
            return Ok(None);
        };
        roots.push(root);
        let mut cursor = changes.writes.table(table)?;
        let mut delta = 0;
        while let Some(write) = cursor.next()? {
            delta += row_delta(db, &pages, root, write.key, write.value.is_some())?;
            writes.push(index, write.key, write.value);
        }
        deltas.push(delta);
    }
    Ok(Some((roots, writes, deltas)))
}

/// Writes from which a commit that appends past the tree and the buffer goes through the
/// tree: keys in order above every key fill leaves a run at a time there (1.6 us a row for
/// `till bench kv`'s sorted inserts, transactions of 1,000), where buffered they cost a
/// lookup each, a map insert and a drain later. A smaller one (a queue's one new entry) is
/// cheaper buffered.
pub(super) const APPEND_WRITES_MIN: usize = 64;

/// Whether `changes` may go through the tree without a drain first: they drop no table and
/// every key they write lies above every key the live generation holds of its table, so the
/// tree never gets a key the buffer holds undrained (`txn/buffer.rs`). Cheap with nothing
/// buffered (no lookup). Requires: the writer lock (the live generation changes only under
/// it).
pub(super) fn past_buffer(db: &Db, changes: &Changes) -> Result<bool> {
    if !changes.dropped.is_empty() {
        return Ok(false);
    }
    if db.inner.visible.buffer_redo_floor().is_none() {
        return Ok(true);
    }
    let shared = db.inner.tree_lock.read();
    db.check_poison()?;
    Ok(first_keys(db, changes, shared.held())?.is_some_and(|firsts| above_buffer(db, &firsts)))
}

/// Whether `changes` append: with the buffer on, `APPEND_WRITES_MIN` writes or more, past
/// the buffer ([`past_buffer`]) and above the tree's last key of each table they write.
/// Such a commit goes through the tree rather than the buffer. Only a large commit looks
/// at the tree. Requires: the writer lock.
pub(super) fn appends(db: &Db, changes: &Changes) -> Result<bool> {
    let buffer_on = db.inner.write_buffer_bytes.load(Ordering::Relaxed) > 0;
    if !buffer_on || !changes.dropped.is_empty() || !changes.writes.len_at_least(APPEND_WRITES_MIN)
    {
        return Ok(false);
    }
    let shared = db.inner.tree_lock.read();
    db.check_poison()?;
    let Some(firsts) = first_keys(db, changes, shared.held())? else {
        return Ok(false);
    };
    if !above_buffer(db, &firsts) {
        return Ok(false);
    }
    let pages = db.read_pages();
    for (root, first) in &firsts {
        let tree_last = Tree::open(*root)
            .scan(
                &pages,
                Bound::Unbounded,
                Bound::Unbounded,
                Direction::Backward,
            )
            .next()
            .transpose()?;
        if tree_last.is_some_and(|(last, _)| *first <= last) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A table's root and the first key a commit writes there.
type FirstKey = (PageId, Vec<u8>);

/// The root of each table `changes` write to, with the first key written there; `None`
/// when one of them does not exist yet (the commit creates it: through the tree, after a
/// drain). Requires: the tree lock held.
fn first_keys(db: &Db, changes: &Changes, tree: TreeHeld<'_>) -> Result<Option<Vec<FirstKey>>> {
    let mut firsts = Vec::new();
    for table in changes.writes.tables() {
        let Some(root) = root_of(db, table, tree)? else {
            return Ok(None);
        };
        if let Some(write) = changes.writes.table(table)?.next()? {
            firsts.push((root, write.key.to_vec()));
        }
    }
    Ok(Some(firsts))
}

/// Whether each first key lies above every key the live generation holds of its table.
fn above_buffer(db: &Db, firsts: &[FirstKey]) -> bool {
    crate::mutants::active("append-check-ignores-the-buffer")
        || firsts.iter().all(|(root, first)| {
            db.inner
                .visible
                .buffer_undrained_last_key(root.0)
                .is_none_or(|last| *first > last)
        })
}

impl Db {
    /// Turns the write buffer on, draining at `bytes` of buffered versions (0: off; what is
    /// buffered drains at the next commit through the tree, read or checkpoint). The header
    /// gets the write-buffer features first (`header.rs`, version 5), durable before the
    /// first buffered record; a version 4 header's buffer is drained whole before. At open
    /// (`Options::write_buffer_bytes`), before any commit.
    pub(in crate::db) fn turn_write_buffer_on(&self, bytes: u64) -> Result<()> {
        if bytes > 0 {
            if !self.inner.checkpoints.drain_chunks_allowed() {
                // A version 4 log's buffered commits carry no counts, which chunks need
                // (`rebuild`): drained whole, under the version that wrote them, first.
                let mut alloc = self.inner.writer.lock();
                self.check_poison()?;
                let unwinding = PoisonOnUnwind::new(self);
                let drained = drain(self, &mut alloc).map_err(|e| self.poison(e));
                unwinding.disarm();
                drained?;
            }
            self.inner.checkpoints.allow_write_buffer()?;
        }
        self.inner
            .write_buffer_bytes
            .store(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// Changes where the write buffer drains, as [`Db::turn_write_buffer_on`] does, while the
    /// database is open: for tests that want drains at a moment of their own. Requires: no
    /// other handle commits meanwhile.
    #[doc(hidden)]
    #[cfg(any(test, feature = "internals"))]
    pub fn set_write_buffer_bytes(&self, bytes: u64) -> Result<()> {
        self.turn_write_buffer_on(bytes)
    }
}

/// The rows a write of `key` to the table at `root` adds (1), removes (-1) or leaves (0):
/// whether the key held a value before, in the buffer's newest version, else in the tree
/// (a read-only descent; the caller holds the tree lock shared), and whether it does after.
fn row_delta(db: &Db, pages: &ReadPages<'_>, root: PageId, key: &[u8], put: bool) -> Result<i64> {
    let before = match db.inner.visible.buffered_newest(root.0, key) {
        Seen::Value(value) => value.is_some(),
        Seen::Tree => counts::holds(pages, root, key)?,
    };
    Ok(i64::from(put) - i64::from(before))
}

/// Rebuilds the write buffer from what replay read (`open/replay.rs`), in log order: each
/// buffered commit at its own lsns with the rows its record says it changed (a version 4
/// record, which says none, with the rows its keys' lookups find: in the buffered versions
/// before it, else in the tree as redo left it, which no chunk changed under such a record);
/// each chunk takes its rows off at its lsn, and a drain's last chunk forgets the commits it
/// drained; a whole drain read forgets what the buffer held first. Requires: no reader yet
/// (an open, or a read-only handle's refresh, which holds the handle mutably), and every
/// table named still existing (a drop drains first).
pub(in crate::db) fn rebuild(db: &Db, log: BufferedLog) -> Result<()> {
    if log.drained {
        db.inner.visible.buffer_forget_all();
    }
    let shared = db.inner.tree_lock.read();
    let pages = db.read_pages();
    let mut roots: BTreeMap<String, PageId> = BTreeMap::new();
    let mut root_of_table = |table: &str, offset: u64| -> Result<PageId> {
        if let Some(root) = roots.get(table) {
            return Ok(*root);
        }
        let root = root_of(db, table, shared.held())?.ok_or_else(|| Error::Corruption {
            file: db.inner.dir.join(crate::db::claim::WAL_DIR_NAME),
            offset,
            what: "a buffered commit or drain chunk names a table that does not exist",
        })?;
        roots.insert(table.to_owned(), root);
        Ok(root)
    };
    for event in log.events {
        match event {
            BufferedEvent::Commit {
                at: (start, end),
                changes,
                counts,
            } => {
                let mut deltas: BTreeMap<u64, i64> = BTreeMap::new();
                let mut writes = Vec::with_capacity(changes.len());
                for change in &changes {
                    let root = root_of_table(&change.table, start)?;
                    if counts.is_none() {
                        let delta =
                            row_delta(db, &pages, root, &change.key, change.value.is_some())?;
                        *deltas.entry(root.0).or_default() += delta;
                    }
                    writes.push(BufferedWrite {
                        table: root.0,
                        key: &change.key,
                        value: change.value.as_deref(),
                    });
                }
                for (table, delta) in counts.iter().flatten() {
                    *deltas.entry(root_of_table(table, start)?.0).or_default() += delta;
                }
                let deltas: Vec<(u64, i64)> = deltas.into_iter().filter(|(_, d)| *d != 0).collect();
                db.inner
                    .visible
                    .buffer_replayed(CommitAt { start, end }, writes, &deltas);
            }
            BufferedEvent::Chunk { end, mark, counts } => {
                let deltas = counts
                    .iter()
                    .map(|(table, delta)| Ok((root_of_table(table, end)?.0, *delta)))
                    .collect::<Result<Vec<_>>>()?;
                db.inner.visible.buffer_chunk_replayed(
                    end,
                    &deltas,
                    mark.last.then_some(mark.through),
                );
            }
        }
    }
    Ok(())
}

/// Applies the next chunk of a drain in chunks (`txn/buffer.rs`, "Chunks"), freezing the live
/// generation first when none is under way: one commit (at `Lazy`: its writes were
/// acknowledged by their buffered records) of the frozen generation's next keys, at most
/// `max_bytes` of versions (one at least), whose last record carries the chunk's mark and
/// rows. Nothing when nothing is buffered. Requires: the writer lock.
pub(in crate::db) fn drain_chunk(db: &Db, alloc: &mut Writer<'_>, max_bytes: usize) -> Result<()> {
    let Some(chunk) = db.inner.visible.buffer_next_chunk(max_bytes) else {
        return Ok(());
    };
    let set = write_set_of(db, &chunk.writes)?;
    let (table, key, _) = chunk.writes.last().expect("a chunk holds a key");
    let through_key = (table, key.to_vec());
    let changes = Changes {
        writes: set.seal(),
        dropped: BTreeSet::new(),
        drain: Drains::Chunk {
            mark: record::ChunkMark {
                through: chunk.through,
                last: chunk.last,
            },
            through_key,
        },
    };
    apply_to_tree(db, alloc, &changes, Durability::Lazy)?;
    db.inner.counters.chunk_drained();
    Ok(())
}

/// Drains in chunks of `base_bytes` (at most the threshold's share: [`chunk_bytes`]) until no
/// drain in chunks is under way, taking the writer lock for each
/// chunk and letting it go (fairly: a committer waiting for it comes first) after it: one
/// under way is finished, else the live generation is frozen and drained. Commits buffered
/// meanwhile stay in the live generation. A failed chunk poisons the database. Requires: the
/// caller holds no writer lock.
pub(in crate::db) fn drain_in_chunks(db: &Db, base_bytes: usize) -> Result<()> {
    let max_bytes = chunk_bytes(db, base_bytes, 0);
    loop {
        let mut alloc = db.inner.writer.lock();
        db.check_poison()?;
        let unwinding = PoisonOnUnwind::new(db);
        let drained = drain_chunk(db, &mut alloc, max_bytes).map_err(|e| db.poison(e));
        unwinding.disarm();
        drained?;
        let done = !db.inner.visible.buffer_draining();
        Writer::unlock_fair(alloc);
        if done {
            return Ok(());
        }
    }
}

/// Applies the buffer's versions not drained to the tree, whole: the live generation's and
/// what no chunk applied of a frozen one, as one commit of many parts (at `Lazy`: its writes
/// are acknowledged already, by their buffered records) whose last part carries the drain
/// flag. Nothing when the buffer holds none. Requires: the writer lock.
pub(in crate::db) fn drain(db: &Db, alloc: &mut Writer<'_>) -> Result<()> {
    let writes = db.inner.visible.drain_writes();
    if writes.is_empty() {
        return Ok(());
    }
    let set = write_set_of(db, &writes)?;
    let changes = Changes {
        writes: set.seal(),
        dropped: BTreeSet::new(),
        drain: Drains::Whole,
    };
    apply_to_tree(db, alloc, &changes, Durability::Lazy)?;
    Ok(())
}

/// Bytes of versions a chunk of the idle drain applies: larger than a committer's
/// ([`CHUNK_BYTES`]), as no committer waits, but short enough that a reader or a commit
/// that comes waits for one chunk only.
pub(in crate::db) const IDLE_CHUNK_BYTES: usize = 4 * CHUNK_BYTES;

/// The checkpoint thread's drain when the writer is idle (`checkpoint/thread.rs`): drains
/// the buffer in chunks ([`drain_in_chunks`]) unless the log's end moved past `since` (a
/// commit came since the thread last looked). `Some`: it moved, to the end returned, and
/// nothing was done; `None`: drained (or nothing left to drain; another drain came first).
/// A failed drain poisons the database, as any commit's failure does.
pub(in crate::db) fn drain_if_idle(db: &Db, since: u64) -> Result<Option<u64>> {
    // A first look without the writer lock: a busy writer is not held up by the looks.
    let now = db.inner.wal.end_lsn().0;
    if now != since {
        return Ok(Some(now));
    }
    {
        let _alloc = db.inner.writer.lock();
        db.check_poison()?;
        let now = db.inner.wal.end_lsn().0;
        if now != since {
            return Ok(Some(now));
        }
        // Under the writer lock: a commit buffered after this look sees the thread unwatched.
        db.inner.checkpoints.buffer_unwatched();
        if db.inner.visible.buffer_live_bytes() == 0 && !db.inner.visible.buffer_draining() {
            return Ok(None);
        }
    }
    drain_in_chunks(db, IDLE_CHUNK_BYTES)?;
    db.inner.counters.idle_drained();
    Ok(None)
}

/// A drain's or a chunk's writes, (table by its root, key, value or `None`), as a write set
/// by table name.
fn write_set_of(db: &Db, writes: &OwnedWrites) -> Result<WriteSet> {
    let names = table_names(db)?;
    let mut set = WriteSet::default();
    for (table, key, value) in writes.iter() {
        let name = names
            .get(&PageId(table))
            .expect("a buffered table exists until a drain: a drop drains first");
        set.put(name, key, value)?;
    }
    Ok(set)
}

/// The name of each table by its root, from the catalog (the writer's view).
fn table_names(db: &Db) -> Result<BTreeMap<PageId, String>> {
    let _shared = db.inner.tree_lock.read();
    let mut names = BTreeMap::from([(DEFAULT_ROOT, String::new())]);
    let entries = Tree::open(CATALOG_ROOT)
        .scan(
            &db.read_pages(),
            counts::names_lower(),
            drop::names_upper(),
            Direction::Forward,
        )
        .collect::<Result<Vec<_>>>()?;
    for (name, entry) in entries {
        let root = catalog_root_of(&entry, &db.inner.data_path, db.inner.pool.page_bytes())?;
        names.insert(root, String::from_utf8_lossy(&name).into_owned());
    }
    Ok(names)
}

#[cfg(test)]
mod tests;
