//! A commit's writes applied through its pages and cut into log records (*parts*) where
//! they outgrow one (`record.rs`, "parts"), and the values readers with older snapshots still
//! need of the keys they change (the overlay's entries).

use super::{Changes, Hold};
use crate::btree::PageOp;
use crate::btree::node::SLOT_BYTES;
use crate::btree::{Filler, Finger, Pages, Tree};
use crate::db::counts;
use crate::db::locks::{TreeExclusive, TreeHeld, Writer};
use crate::db::pages::TxnPages;
use crate::db::{CATALOG_ROOT, CATALOG_TABLE, Db};
use crate::error::Result;
use crate::page::PageId;
use crate::record::{self, Alloc, Write};
use crate::txn::packed::Packed;
use crate::wal::Lsn;
use std::collections::{BTreeMap, BTreeSet};

/// What [`write_in_parts`] did.
pub(super) struct Written<'c> {
    /// Parts appended before the last.
    pub(super) parts: u32,
    /// With the feed, the writes since the last part (the last part's, for its changes
    /// section), copied: the cursor they come from lends each only until the next.
    pub(super) part_writes: PartWrites<'c>,
    /// The value each key of a table that is not fresh held before.
    pub(super) befores: Befores,
    /// The rows each table gained or lost.
    pub(super) deltas: counts::Deltas,
}

/// Writes copied back to back: (table, key, value or `None`).
pub(super) type PartWrites<'c> = Packed<&'c str>;

/// `writes` as the records' changes section takes them.
pub(super) fn as_record<'w>(
    writes: &'w PartWrites<'_>,
) -> impl Iterator<Item = record::Write<'w>> + Clone {
    writes
        .iter()
        .map(|(table, key, value)| record::Write { table, key, value })
}

/// Values readers with older snapshots may need, each with its table's id and key (copied
/// back to back).
#[derive(Debug, Default)]
pub(super) struct Befores {
    keys: Vec<u8>,
    values: Vec<(u64, usize, Option<Vec<u8>>)>,
}

impl Befores {
    pub(super) fn push(&mut self, table: u64, key: &[u8], before: Option<Vec<u8>>) {
        self.keys.extend_from_slice(key);
        self.values.push((table, self.keys.len(), before));
    }

    pub(super) fn append(&mut self, other: &mut Befores) {
        let base = self.keys.len();
        self.keys.append(&mut other.keys);
        self.values.extend(
            other
                .values
                .drain(..)
                .map(|(table, end, before)| (table, base + end, before)),
        );
    }

    /// (table id, key, value before), in the order pushed.
    pub(super) fn drain(&mut self) -> impl Iterator<Item = (u64, &[u8], Option<Vec<u8>>)> {
        let keys = &self.keys;
        let mut start = 0;
        self.values.drain(..).map(move |(table, end, before)| {
            let key = &keys[start..end];
            start = end;
            (table, key, before)
        })
    }
}

/// Applies `changes`' writes to their trees through `pages`, cutting a part (appended to the
/// log, its pages held by the pool) before the next write once the current one holds
/// [`part_limit`] bytes, or once the pages it left unlogged would crowd the cache. A part
/// cut while `pages` are shadowed (`db/pages.rs`) installs them first, and `hold` is
/// exclusive from then on. A table in
/// `fresh` held no key before this commit; of the others, each write keeps the value its key
/// held, read from the leaf it changes (one descent per write: a lookup before the changes
/// and the change took two), and the rows each table gained or lost are counted.
pub(super) fn write_in_parts<'c, 'd>(
    db: &'d Db,
    pages: &TxnPages<'_>,
    changes: &'c Changes,
    (roots, fresh, keep_befores): (&BTreeMap<String, Option<PageId>>, &BTreeSet<&str>, bool),
    _writer: &Writer<'_>,
    hold: &mut Hold<'d>,
) -> Result<Written<'c>> {
    let inner = &db.inner;
    // A drain's writes reach the feed from their buffered records, not from its parts.
    let feed = inner.options.change_feed && changes.role() == record::Role::Tree;
    let role = changes.role();
    let limit = part_limit(db);
    // Unlogged frames the pool cannot evict: a part is cut before they crowd it.
    let unlogged_max = (inner.pool.capacity() / 4).max(4);
    let mut written = Written {
        parts: 0,
        part_writes: PartWrites::default(),
        befores: Befores::default(),
        deltas: counts::Deltas::new(),
    };
    let mut part_changes_bytes = 0;
    for table in changes.writes.tables() {
        let tree = Tree::open(roots[table].expect("every table has a root by now"));
        let fresh = fresh.contains(table);
        let mut writes = changes.writes.table(table)?;
        if fresh && !feed {
            // Built bottom up, a leaf at a time (`btree/build.rs`); a part may be cut after
            // each leaf. (With the feed, each part's changes section must hold the writes
            // its ops apply: the puts below keep that.)
            let mut filler = Filler::new(tree.root(), pages)?;
            while let Some(write) = writes.next()? {
                if let Some(value) = write.value {
                    filler.push(write.key, value, || {
                        if pages.ops_bytes() >= limit || pages.touched_len() >= unlogged_max {
                            hold.exclusive(db, pages)?;
                            cut_part(db, pages, &mut written, (false, role))?;
                        }
                        Ok(())
                    })?;
                }
            }
            let put = filler.finish()?;
            if put > 0 {
                let put = i64::try_from(put).expect("counts fit i64");
                written.deltas.insert(table.to_owned(), put);
            }
            continue;
        }
        // The writes come in key order: a put usually lands in the leaf the last one did,
        // and writes that land in one leaf are applied together (`WriteRun`).
        let mut finger = Finger::default();
        let mut run = WriteRun::default();
        let mut delta = 0i64;
        // A table in `fresh` held no key before: nothing of it to keep, and no key found.
        let keep = keep_befores && !fresh;
        let limits = pages.limits();
        while let Some(write) = writes.next()? {
            let cut = pages.ops_bytes() + part_changes_bytes >= limit
                || (pages.ops_bytes() > 0 && pages.touched_len() >= unlogged_max);
            if cut {
                delta += run.apply(tree, pages, &mut finger)?;
                hold.exclusive(db, pages)?;
                cut_part(db, pages, &mut written, (feed, role))?;
                part_changes_bytes = 0;
            }
            if feed {
                written.part_writes.push(table, write.key, write.value);
                part_changes_bytes += record::changes_len([write]) - 4;
            }
            let runs = !keep
                && write
                    .value
                    .is_none_or(|value| limits.is_inline(write.key.len(), value.len()));
            if runs {
                delta += run.add(&write, tree, pages, &mut finger)?;
                continue;
            }
            delta += run.apply(tree, pages, &mut finger)?;
            let (existed, before) = apply_write(tree, pages, &write, keep, &mut finger)?;
            delta += i64::from(write.value.is_some()) - i64::from(existed);
            if keep {
                written.befores.push(tree.root().0, write.key, before);
            }
        }
        delta += run.apply(tree, pages, &mut finger)?;
        // The last leaf the writes left under-full is rebalanced now.
        tree.settle(pages, &mut finger)?;
        if delta != 0 {
            written.deltas.insert(table.to_owned(), delta);
        }
    }
    Ok(written)
}

/// Writes of one kind (puts or deletes) gathered while they land in the leaf a finger holds,
/// applied together ([`Tree::delete_run_at`], [`Tree::put_run_at`]: one read and one write
/// guard of the leaf for all of them, where a write each took both; a retain's commit spent
/// a quarter of its time there).
#[derive(Debug, Default)]
struct WriteRun {
    /// The keys and values back to back, and where each key and value ends.
    bytes: Vec<u8>,
    ends: Vec<(usize, usize)>,
    /// Whether the run holds puts (else deletes).
    puts: bool,
}

impl WriteRun {
    /// Whether `write` is of the run's kind (any write, when the run is empty).
    fn takes(&self, write: &Write<'_>) -> bool {
        self.ends.is_empty() || self.puts == write.value.is_some()
    }

    fn push(&mut self, write: &Write<'_>) {
        assert!(self.takes(write), "a put and a delete in one run");
        self.puts = write.value.is_some();
        self.bytes.extend_from_slice(write.key);
        let key_end = self.bytes.len();
        if let Some(value) = write.value {
            self.bytes.extend_from_slice(value);
        }
        self.ends.push((key_end, self.bytes.len()));
    }

    /// Gathers `write` (a put of an inline value, or a delete) into the run; applies the run
    /// first when `write` is of another kind or outside the finger's leaf (that one then goes
    /// alone, and moves the finger), and after it once it holds as much as a leaf does (else
    /// a run of appends, every one in the last leaf's range, would gather the table's writes
    /// whole, their ops cut into no part). Returns the rows the table gained (or lost).
    fn add(
        &mut self,
        write: &Write<'_>,
        tree: Tree,
        pages: &TxnPages<'_>,
        finger: &mut Finger,
    ) -> Result<i64> {
        let mut delta = 0;
        if !self.takes(write) || !finger.covers(tree.root(), write.key) {
            delta += self.apply(tree, pages, finger)?;
            if !finger.covers(tree.root(), write.key) {
                self.push(write);
                return Ok(delta + self.apply(tree, pages, finger)?);
            }
        }
        self.push(write);
        if self.bytes.len() + self.ends.len() * SLOT_BYTES >= pages.limits().usable_bytes {
            delta += self.apply(tree, pages, finger)?;
        }
        Ok(delta)
    }

    /// Applies the writes gathered and empties the run; returns the rows the table gained
    /// (lost, if negative). Puts that do not fit the leaf go on after a split
    /// ([`Tree::put_all_at`]).
    fn apply(&mut self, tree: Tree, pages: &TxnPages<'_>, finger: &mut Finger) -> Result<i64> {
        if self.ends.is_empty() {
            return Ok(0);
        }
        let mut start = 0;
        let entries: Vec<(&[u8], &[u8])> = self
            .ends
            .iter()
            .map(|&(key_end, value_end)| {
                let entry = (&self.bytes[start..key_end], &self.bytes[key_end..value_end]);
                start = value_end;
                entry
            })
            .collect();
        let count = |n: usize| i64::try_from(n).expect("a leaf's keys fit i64");
        let delta = if self.puts {
            count(entries.len()) - count(tree.put_all_at(pages, &entries, finger)?)
        } else {
            let keys: Vec<&[u8]> = entries.iter().map(|&(key, _)| key).collect();
            -count(tree.delete_run_at(pages, &keys, finger)?)
        };
        drop(entries);
        self.bytes.clear();
        self.ends.clear();
        Ok(delta)
    }
}

/// Applies one write to `tree` through `finger`; returns whether its key held a value, and
/// with `keep` that value. Without `keep` (a table in `fresh`, or no reader needs older
/// values) the tree is asked only whether there was one: a copy of every old value was a
/// tenth of a retain's deletes.
fn apply_write(
    tree: Tree,
    pages: &TxnPages<'_>,
    write: &Write<'_>,
    keep: bool,
    finger: &mut Finger,
) -> Result<(bool, Option<Vec<u8>>)> {
    Ok(match (write.value, keep) {
        (Some(v), false) => (tree.put_at(pages, write.key, v, finger)?, None),
        (None, false) => (tree.delete_at(pages, write.key, finger)?, None),
        (Some(v), true) => {
            let old = tree.put_keeping(pages, write.key, v, finger)?;
            (old.is_some(), old)
        }
        (None, true) => {
            let old = tree.delete_keeping(pages, write.key, finger)?;
            (old.is_some(), old)
        }
    })
}

/// Appends the ops applied since the last part as a part of the commit (with the feed, the
/// changes section of the writes they apply), and has the pool hold the pages they changed.
fn cut_part(
    db: &Db,
    pages: &TxnPages<'_>,
    written: &mut Written<'_>,
    (feed, role): (bool, record::Role),
) -> Result<()> {
    let (ops, now, touched) = pages.take_part()?;
    let writes = feed.then(|| as_record(&written.part_writes));
    append_parts(
        db,
        &ops,
        now,
        writes.as_ref(),
        &mut written.parts,
        (role, false, record::NO_TAIL),
    )?;
    drop((ops, writes));
    db.inner.pool.hold(&touched);
    written.part_writes.clear();
    Ok(())
}

/// The values readers with older snapshots need of the catalog before this commit changes
/// it: a dropped table's catalog entry, and the absent entry that hides a table this commit
/// creates. Returns them, with the existing tables this commit finds empty (each gets an
/// empty mark instead of a value per key: `txn/overlay.rs`).
pub(super) fn catalog_befores(
    db: &Db,
    changes: &Changes,
    drops: &[(String, PageId)],
    roots: &BTreeMap<String, Option<PageId>>,
    _tree: TreeHeld<'_>,
) -> Result<(Befores, Vec<PageId>)> {
    let pages = db.read_pages();
    let catalog = Tree::open(CATALOG_ROOT);
    let mut befores = Befores::default();
    // A dropped table's catalog entry, for readers that still see it (and, if this
    // commit creates it anew, the one entry that hides the new table from them).
    for (table, _) in drops {
        let entry = catalog.get(&pages, counts::key_of(table))?;
        assert!(entry.is_some(), "a dropped table without its catalog entry");
        befores.push(CATALOG_TABLE, counts::key_of(table), entry);
    }
    for (table, root) in roots {
        if root.is_none() && !drops.iter().any(|(t, _)| t == table) {
            befores.push(CATALOG_TABLE, counts::key_of(table), None);
        }
    }
    let mut empties = Vec::new();
    for table in changes.writes.tables() {
        if let Some(root) = roots[table]
            && Tree::open(root).is_empty(&pages)?
        {
            empties.push(root);
        }
    }
    Ok((befores, empties))
}

/// Records in the overlay, under the provisional lsn, what readers with older snapshots
/// still need: `befores`, and an empty mark for each table of `empties`. Requires: the tree
/// lock held exclusively since before the pages changed in the pool (a shadowed commit's at
/// their install), so no reader has seen a change the overlay does not hold yet.
pub(super) fn record_befores(
    db: &Db,
    mut befores: Befores,
    empties: &[PageId],
    provisional: u64,
    _tree: &TreeExclusive<'_>,
) {
    db.inner
        .visible
        .record(empties, befores.drain(), provisional);
}

/// The most bytes of ops one record of a commit holds: `Options::commit_part_bytes`, at most
/// half of what one log record can carry (the changes section rides beside them).
pub(super) fn part_limit(db: &Db) -> usize {
    let max = db.inner.wal.max_payload_bytes();
    usize::try_from(db.inner.options.commit_part_bytes)
        .unwrap_or(usize::MAX)
        .min(max / 2)
        .max(1)
}

/// Bytes of the memory records are encoded into (`Inner::record_scratch`) kept after a
/// commit: a drain's chunk's record of a few MiB of page images is encoded into memory
/// already faulted in, and a larger one's memory goes back.
const RECORD_SCRATCH_KEPT_BYTES: usize = 16 << 20;

/// Appends `ops`, and the changes section of `writes` (with the change feed), as records
/// `*records..` of one commit, and counts them in `records`: as few as hold them (at least one
/// op each: an op is at most a page and its header), the changes on the last (or in a record
/// of their own where they do not fit beside its ops). A part [`write_in_parts`] cut holds a
/// little more than [`part_limit`] bytes of ops (the write that passed it), which one record
/// carries: split at the limit, every part was a full record and a second of one op, whose
/// append waited for a segment of its own (docs/benchmarks-journal.md, "The write set as an arena").
/// Each record has the commit's `role`; with `last`, the last record ends the commit. The parts of one commit may
/// divide its ops anywhere, even inside one write's split: replay applies all of them or
/// none. Returns the last record's end.
pub(super) fn append_parts<'a, I>(
    db: &Db,
    ops: &[PageOp],
    alloc: Alloc,
    writes: Option<&I>,
    records: &mut u32,
    (role, last, tail): (record::Role, bool, record::Tail<'_>),
) -> Result<Lsn>
where
    I: IntoIterator<Item = record::Write<'a>> + Clone,
{
    let max = db.inner.wal.max_payload_bytes();
    let chunk_max = max - record::HEADER_BYTES;
    // The last part's tail (a chunk's section) rides with its changes.
    let changes_bytes = writes.map_or(0, |w| record::changes_len(w.clone())) + tail.bytes();
    // The ops in chunks that each fill at most one record (an op at least; none for no ops),
    // counting each op's length at most (an image whole: no scan of it before its encoding).
    let mut chunks: Vec<&[PageOp]> = Vec::new();
    let (mut from, mut bytes) = (0, 0);
    for (i, op) in ops.iter().enumerate() {
        let len = op.encoded_len_at_most();
        if i > from && bytes + len > chunk_max {
            chunks.push(&ops[from..i]);
            (from, bytes) = (i, 0);
        }
        bytes += len;
    }
    chunks.push(&ops[from..]);
    if record::HEADER_BYTES + bytes + changes_bytes > max {
        // The changes do not fit beside the last chunk: a record of their own.
        chunks.push(&[]);
    }
    let count = chunks.len();
    // A commit in more than one record: until its last, the log's end is inside it, and no
    // redo point may be taken from there (`Wal::boundary_end`).
    let several = *records > 0 || count > 1 || !last;
    if *records == 0 && several {
        db.inner.wal.begin_parts();
    }
    let mut end = Lsn(0);
    let mut payload = db.inner.record_scratch.lock();
    for (i, chunk) in chunks.into_iter().enumerate() {
        let part = record::Part {
            index: *records,
            last: last && i + 1 == count,
        };
        let feed = if i + 1 == count {
            writes.cloned()
        } else {
            None
        };
        // Every part carries the role (the feed skips a drain's parts by it); the tail
        // rides with the last.
        let (part_role, part_tail) = if part.last {
            (role, tail)
        } else {
            (role, record::NO_TAIL)
        };
        record::encode_as_into(&mut payload, part_role, part, alloc, chunk, feed, part_tail);
        assert!(
            payload.len() <= max,
            "a commit part of {} bytes",
            payload.len()
        );
        // The pair of the read side's check: the part reads back as it was written.
        debug_assert_eq!(record::part_of(&payload), Ok(part), "a part read back");
        let appended = db.inner.wal.append(&payload)?;
        // A commit's parts follow each other in the log: each ends after the one before.
        assert!(
            appended > end,
            "part {} of a commit ends at {appended}, not after the part before it ({end})",
            part.index
        );
        end = appended;
        *records += 1;
    }
    // One commit's parts of several MiB (a value logged in overflow pages) need not hold that
    // much memory for good.
    payload.shrink_to(RECORD_SCRATCH_KEPT_BYTES);
    if last && several {
        db.inner.wal.end_parts();
    }
    Ok(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Options;
    use crate::io::{SimConfig, SimDisk};
    use crate::page::PageKind;
    use std::path::Path;
    use std::sync::Arc;

    /// The call sites of `Wal::begin_parts` and `Wal::end_parts`: while a commit logged in
    /// several records is between them (its parts appended, its last not yet), the log's
    /// commit boundary stays at its first record's start, where a redo point may be taken
    /// (`writeback.rs`); a commit in one record never moves it off the log's end. The
    /// redo-point tests (`tests/redo_points.rs`) take the boundary from here.
    #[test]
    fn a_commit_between_its_records_keeps_the_log_boundary_at_its_start() {
        const LAST: (record::Role, bool, record::Tail<'_>) =
            (record::Role::Tree, true, record::NO_TAIL);
        const NOT_LAST: (record::Role, bool, record::Tail<'_>) =
            (record::Role::Tree, false, record::NO_TAIL);
        let disk = SimDisk::new(SimConfig::default());
        let db = Db::open_with_storage(
            Arc::new(disk),
            Path::new("/db"),
            Options {
                background_threads: false,
                ..Options::for_tests()
            },
        )
        .expect("create");
        let wal = &db.inner.wal;
        let alloc = Alloc {
            page_count: 100,
            free_head: PageId(0),
        };
        let body = vec![7u8; db.inner.pool.page_bytes() as usize - crate::page::HEADER_BYTES];
        let image = |page: u64| PageOp::Image {
            page: PageId(page),
            kind: PageKind::Overflow,
            body: body.clone(),
        };
        let none: Option<&Vec<record::Write<'_>>> = None;
        // One record, the whole commit: the boundary is the log's end.
        let mut records = 0;
        append_parts(&db, &[image(50)], alloc, none, &mut records, LAST).expect("append");
        assert_eq!(records, 1);
        assert_eq!(wal.boundary_end(), wal.end_lsn());
        // A first part of one record that is not the commit's last: the boundary stays at its
        // start.
        let start = wal.end_lsn();
        let mut records = 0;
        append_parts(&db, &[image(50)], alloc, none, &mut records, NOT_LAST).expect("append");
        assert_eq!(records, 1);
        assert!(wal.end_lsn() > start);
        assert_eq!(wal.boundary_end(), start, "a first part of one record");
        append_parts(&db, &[image(50)], alloc, none, &mut records, LAST).expect("append");
        assert_eq!(wal.boundary_end(), wal.end_lsn());
        // A part of a commit in more records than one (more images than a record holds),
        // not its last: the boundary stays where the commit began.
        let start = wal.end_lsn();
        let per_record = wal.max_payload_bytes() / body.len();
        let ops: Vec<PageOp> = (0..u64::try_from(per_record + 2).expect("small"))
            .map(|i| image(51 + i))
            .collect();
        let mut records = 0;
        append_parts(&db, &ops, alloc, none, &mut records, NOT_LAST).expect("append");
        assert!(records >= 2, "{records} records");
        assert!(wal.end_lsn() > start);
        assert_eq!(
            wal.boundary_end(),
            start,
            "the boundary moved inside a commit logged in several records"
        );
        // Its last part, in one record: the commit ends, and the boundary is the end again.
        append_parts(&db, &ops[..1], alloc, none, &mut records, LAST).expect("append");
        assert_eq!(wal.boundary_end(), wal.end_lsn());
        // A commit whose first part is its last but takes two records.
        let start = wal.end_lsn();
        let mut records = 0;
        append_parts(&db, &ops, alloc, none, &mut records, LAST).expect("append");
        assert!(records >= 2);
        assert!(wal.end_lsn() > start);
        assert_eq!(wal.boundary_end(), wal.end_lsn());
        drop(db);
    }
}
