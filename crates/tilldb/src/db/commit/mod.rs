//! Committing: a transaction's changes applied to the tree and appended to the log, under the
//! writer lock, one transaction at a time; then the wait for the log.
//!
//! A commit is one log record, or, when its page operations outgrow `Options::commit_part_bytes`
//! (or the pages it leaves unlogged crowd the cache), several: [`apply`] cuts a *part* between
//! two writes (or two leaves of a table it fills bottom up, `btree/build.rs`), appends it,
//! and has the pool *hold* the pages it changed (never written to the data file; spilled
//! when their frames are needed) until the last part is appended, stamped
//! and the held pages released, all under the tree lock (`record.rs` has the format and
//! the rules readers of the log follow).
//!
//! The values readers with older snapshots need (the overlay) are taken from the leaves the
//! writes change and recorded before the tree lock, held exclusively from the first change,
//! is let go: no reader sees a changed page before its older value is there. A large commit
//! (more than a part of writes, or `UNSEEN_WRITES_MIN` writes) that finds no snapshot
//! registered records none: it holds the tree lock until it is visible (its flush waited for
//! under the lock), and snapshots are registered under the tree lock, so none can be older
//! than it and read its pages.
//!
//! Rooms: [`queue`] (commits of transactions that only wrote, applied by one leader per
//! batch), [`buffer`] (commits the write buffer takes, and its drain), [`parts`] (a commit's
//! writes cut into log records, and the values readers still need), and here [`apply`],
//! which runs them under the writer lock and the tree lock.

mod buffer;
mod parts;
mod queue;

pub(super) use buffer::{
    IDLE_CHUNK_BYTES, drain, drain_if_idle, drain_in_chunks, rebuild as rebuild_buffer,
};
pub(super) use queue::{CommitQueue, commit_queued};

use super::counts;
use super::locks::{TreeChanging, TreeExclusive, TreeHeld, TreeShared, Writer};
use super::pages::TxnPages;
use super::write_set::Writes;
use super::{CATALOG_ROOT, CATALOG_TABLE, Db, catalog_root_of};
use crate::Durability;
use crate::btree::Tree;
use crate::error::{Error, Result};
use crate::page::PageId;
use crate::record::{ChunkMark, Role, Tail};
use crate::txn::TableId;
use crate::wal::Lsn;
use parts::{append_parts, catalog_befores, part_limit, record_befores, write_in_parts};
use std::collections::{BTreeMap, BTreeSet};

/// Writes from which a commit that no snapshot is open to see keeps no older values for
/// readers, as a commit of more than a part does: it holds the tree lock until it is visible
/// instead. Readers wait for its flush as they waited while it changed its pages; recording a
/// value per key cost more than that flush (a third of a commit of 10,000 deletes).
const UNSEEN_WRITES_MIN: usize = 1_024;

/// The changes of a transaction: what a commit applies.
#[derive(Debug, Default)]
pub(super) struct Changes {
    /// The latest write of each (table, key), in that order.
    pub writes: Writes,
    /// Tables dropped. Drops apply before the writes, so a table dropped and then written to
    /// is a new table holding only those writes.
    pub dropped: BTreeSet<String>,
    /// Whether it is the write buffer's drain or a chunk of one (`buffer.rs`): its writes
    /// are the buffer's, its last record carries the drain's flag and no record the feed's
    /// changes.
    pub drain: Drains,
}

/// What a commit of the write buffer's versions is (`buffer.rs`), if it is one.
#[derive(Debug, Default)]
pub(super) enum Drains {
    /// Not a drain: the application's writes.
    #[default]
    No,
    /// The whole drain: every buffered version not drained.
    Whole,
    /// A chunk of a drain in chunks: its place in the drain, and the last (table, key) it
    /// applies.
    Chunk {
        mark: ChunkMark,
        through_key: (TableId, Vec<u8>),
    },
}

impl Changes {
    /// The role of the commit's records.
    pub fn role(&self) -> Role {
        match self.drain {
            Drains::No => Role::Tree,
            Drains::Whole => Role::Drain,
            Drains::Chunk { .. } => Role::Chunk,
        }
    }

    /// The root of `table` as these changes see it: `None` once they drop it.
    pub fn visible_root_of(
        &self,
        db: &Db,
        table: &str,
        tree: TreeHeld<'_>,
    ) -> Result<Option<PageId>> {
        if self.dropped.contains(table) {
            return Ok(None);
        }
        root_of(db, table, tree)
    }
}

/// The committed root of `table` (the writer sees the latest catalog).
pub(super) fn root_of(db: &Db, table: &str, _tree: TreeHeld<'_>) -> Result<Option<PageId>> {
    if table.is_empty() {
        return Ok(Some(super::DEFAULT_ROOT));
    }
    let value = Tree::open(CATALOG_ROOT).get(&db.read_pages(), table.as_bytes())?;
    value
        .map(|v| catalog_root_of(&v, &db.inner.data_path, db.inner.pool.page_bytes()))
        .transpose()
}

/// Stops the database if dropped armed: held by a thread applying a commit under the writer
/// lock outside the queue (a transaction that read), made after the lock so that an unwind
/// drops it first. A panic there must not let the next writer build on half-changed pages.
pub(super) struct PoisonOnUnwind<'a> {
    db: &'a Db,
    armed: bool,
}

impl<'a> PoisonOnUnwind<'a> {
    pub(super) fn new(db: &'a Db) -> Self {
        PoisonOnUnwind { db, armed: true }
    }

    /// The commit returned (an error it returned poisoned already, where it was made).
    pub(super) fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for PoisonOnUnwind<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.db.poison(Error::PoisonedBy {
                cause: "a committing thread panicked while it applied its commit".to_owned(),
            });
        }
    }
}

/// Commits `changes`: into the write buffer if it takes them (`buffer.rs`), else into the
/// tree ([`apply_to_tree`]), after draining the buffer unless every key lies above the
/// buffer's ([`buffer::past_buffer`]). A commit that appends ([`buffer::appends`]:
/// `buffer::APPEND_WRITES_MIN` writes or more, above the tree's and the buffer's last key)
/// goes through the tree, where keys in order fill leaves a run at a time. Returns the
/// commit's lsn.
pub(super) fn apply(
    db: &Db,
    alloc: &mut Writer<'_>,
    changes: &Changes,
    durability: Durability,
) -> Result<Lsn> {
    let appends = buffer::appends(db, changes)?;
    if !appends && let Some(lsn) = buffer::try_buffered(db, alloc, changes, durability)? {
        return Ok(lsn);
    }
    // An append is past the buffer by its definition.
    if !appends && !buffer::past_buffer(db, changes)? {
        drain(db, alloc)?;
    }
    apply_to_tree(db, alloc, changes, durability)
}

/// Bytes of versions a chunk holds at most to be applied shadowed ([`shadows`]): a drain's
/// idle chunk, or a committer's of commits up to a quarter of it.
const SHADOWED_CHUNK_BYTES: u64 = 4 * buffer::IDLE_CHUNK_BYTES as u64;

/// Whether `changes` are applied to copies of the pages they change (`db/pages.rs`,
/// `TxnPages::shadowed`) under the tree lock held shared, and installed under it held
/// exclusively: a drain's chunk of at most [`SHADOWED_CHUNK_BYTES`]. Readers then wait for
/// the install alone, where a reader on another CPU beside an idle drain waited for each
/// chunk's whole tree work.
fn shadows(changes: &Changes) -> bool {
    changes.role() == Role::Chunk
        && changes.dropped.is_empty()
        && changes.writes.bytes() <= SHADOWED_CHUNK_BYTES
}

/// The tree lock as a commit holds it while it changes pages: exclusively, or shared while
/// its pages are shadowed.
pub(super) enum Hold<'a> {
    Exclusive(TreeExclusive<'a>),
    Shadowed(TreeShared<'a>),
    /// Between the two, for a moment ([`Hold::exclusive`]).
    Upgrading,
}

impl<'a> Hold<'a> {
    fn held(&self) -> TreeHeld<'_> {
        match self {
            Hold::Exclusive(exclusive) => exclusive.held(),
            Hold::Shadowed(shared) => shared.held(),
            Hold::Upgrading => unreachable!("the tree lock is held between upgrades"),
        }
    }

    fn changing(&self, pages: &TxnPages<'_>) -> TreeChanging<'_> {
        match self {
            Hold::Exclusive(exclusive) => exclusive.changing(),
            Hold::Shadowed(shared) => shared.changing_shadows(pages.is_shadowed()),
            Hold::Upgrading => unreachable!("the tree lock is held between upgrades"),
        }
    }

    /// Holds the tree lock exclusively from now on, a shadowed commit's pages installed under
    /// it (`TxnPages::install`); the lock stays held, exclusively, when the install fails.
    pub(super) fn exclusive(&mut self, db: &'a Db, pages: &TxnPages<'_>) -> Result<()> {
        if !matches!(self, Hold::Shadowed(_)) {
            return Ok(());
        }
        // Only this commit changes pages (it holds the writer lock): they are as it found
        // them when the shared hold goes.
        *self = Hold::Upgrading;
        let exclusive = db.inner.tree_lock.write();
        let installed = pages.install(&exclusive);
        *self = Hold::Exclusive(exclusive);
        installed
    }

    fn into_exclusive(self) -> TreeExclusive<'a> {
        match self {
            Hold::Exclusive(exclusive) => exclusive,
            Hold::Shadowed(_) | Hold::Upgrading => unreachable!("the tree lock held shared"),
        }
    }
}

/// Applies `changes` to the tree and appends their record to the log; returns its lsn. A
/// commit whose page operations outgrow one part ([`part_limit`]) is logged in several
/// records (`record.rs`, "parts"): the pages the earlier parts changed are held by the
/// pool (never written to the data file) until the last part is appended. A drain
/// (`Changes::drain`) flags its records and carries no changes for the feed (the buffered
/// records did), and is the moment the buffer's versions are in the tree.
/// Its pages are shadowed ([`shadows`]) or changed in place.
fn apply_to_tree(
    db: &Db,
    alloc: &mut Writer<'_>,
    changes: &Changes,
    durability: Durability,
) -> Result<Lsn> {
    let role = changes.role();
    let inner = &db.inner;
    let shadowed = shadows(changes);
    let mut hold = if shadowed {
        Hold::Shadowed(inner.tree_lock.read())
    } else {
        Hold::Exclusive(inner.tree_lock.write())
    };
    let (drops, roots) = tables_of(db, changes, hold.held())?;
    // Readers may not see this commit until it is acknowledged: the overlay keeps the
    // values they still need, under a provisional lsn above every current snapshot and at
    // most this commit's lsn. The log end now, under the writer lock: this commit's record
    // starts at or after it. A log that failed in the background (the interval flusher)
    // fails this commit here, before it changes a page or the overlay.
    let before = inner.wal.end_lsn_checked()?.0;
    let provisional = before + 1;
    // A large commit that no snapshot is open to see keeps no value per key for readers: it
    // holds the tree lock until it is visible, and a snapshot is registered under that lock
    // (`Db::snapshot_register`), so every snapshot from now on sees all of it. Its memory
    // then does not grow with the keys it changes (docs/durability.md, "Large transactions").
    // Not a chunk of a drain: it is at most `CHUNK_BYTES` of versions (its values for readers
    // are few, and none when the buffer answers every reader), and readers would wait for its
    // record's append.
    let unseen = role != Role::Chunk
        && (changes.writes.bytes() >= part_limit(db) as u64
            || changes.writes.len_at_least(UNSEEN_WRITES_MIN))
        && inner.visible.no_snapshots();
    let (mut befores, empties) = catalog_befores(db, changes, &drops, &roots, hold.held())?;
    // Tables whose every key is absent before this commit: created by it (hidden by their
    // absent catalog entry) or found empty (hidden by an empty mark). Their writes keep no
    // value per key.
    let keep_befores = !unseen && keeps_befores(db, role);
    let fresh: BTreeSet<&str> = roots
        .iter()
        .filter(|(_, root)| root.is_none_or(|root| empties.contains(&root)))
        .map(|(table, _)| table.as_str())
        .collect();
    let pages = if shadowed {
        TxnPages::shadowed(&inner.pool, &inner.data_path, **alloc, db.image_below())
    } else {
        TxnPages::new(&inner.pool, &inner.data_path, **alloc, db.image_below())
    };
    // From the first change on, a failure poisons the database before the tree lock is let
    // go: no reader may see pages half changed (reads check the poison under the lock).
    let poisoned = |e| db.poison(e);
    super::drop::apply_drops(&pages, &drops, hold.changing(&pages)).map_err(poisoned)?;
    let created = create_tables(&pages, &roots).map_err(poisoned)?;
    let feed = inner.options.change_feed && role == Role::Tree;
    let mut written = write_in_parts(
        db,
        &pages,
        changes,
        (&created, &fresh, keep_befores),
        alloc,
        &mut hold,
    )
    .map_err(poisoned)?;
    let parts = written.parts;
    befores.append(&mut written.befores);
    count_befores(&pages, &roots, &written.deltas, &mut befores).map_err(poisoned)?;
    // The rows each table gained or lost, in its catalog entry: the last change of the
    // commit, in its last part.
    counts::apply_deltas(&pages, &written.deltas, alloc, hold.changing(&pages))
        .map_err(poisoned)?;
    if pages.is_shadowed() {
        inner.counters.chunk_shadowed();
    }
    hold.exclusive(db, &pages).map_err(poisoned)?;
    let exclusive = hold.into_exclusive();
    record_befores(db, befores, &empties, provisional, &exclusive);
    let part_writes = written.part_writes;
    // A chunk's section: its place in the drain and the rows it changed per table.
    let chunk_counts = nonzero_counts(&written.deltas);
    let tail = tail_of(changes, &chunk_counts);
    // The pages are whole again (no node half split) and the overlay hides this commit
    // from readers until it is acknowledged: readers may go on while the record is
    // appended, which can wait for a log segment to be prepared. Not after parts: the
    // held pages must all be released before anyone can read one back from the spill.
    let exclusive = if parts == 0 && !unseen {
        drop(exclusive);
        None
    } else {
        Some(exclusive)
    };
    let (ops, new_alloc, touched) = pages.finish()?;
    // With the feed, the last part's writes (all of them when there is one part).
    let feed = feed.then(|| parts::as_record(&part_writes));
    let lsn = append_and_stamp(
        db,
        (ops, new_alloc, &touched),
        feed.as_ref(),
        (parts, role, tail),
        before,
    )?;
    // A drain's rows leave the buffer's sums before any reader sees them in the catalog
    // (`tests/write_buffer_lengths.rs`).
    let marked_late = crate::mutants::active("drain-marked-after-visible");
    if !marked_late {
        drained(db, changes, lsn, (&chunk_counts, &created));
    }
    make_visible(db, lsn, durability, exclusive, unseen)?;
    if marked_late {
        // Wide enough for a reader on another thread to see the commit first.
        db.visible_through(lsn.0);
        std::thread::yield_now();
        drained(db, changes, lsn, (&chunk_counts, &created));
    }
    **alloc = new_alloc;
    bury(db, drops, lsn);
    Ok(lsn)
}

/// Pushes onto `befores` the catalog entries whose counts `deltas` change, of tables that
/// exist before this commit (`roots`; a created one is hidden by its absent entry), as they
/// are before `counts::apply_deltas` changes them.
fn count_befores(
    pages: &TxnPages<'_>,
    roots: &Roots,
    deltas: &counts::Deltas,
    befores: &mut parts::Befores,
) -> Result<()> {
    for (table, delta) in deltas {
        if *delta != 0
            && roots[table.as_str()].is_some()
            && !crate::mutants::active("count-not-kept-for-readers")
        {
            let key = counts::key_of(table);
            let entry = Tree::open(CATALOG_ROOT).get(pages, key)?;
            befores.push(CATALOG_TABLE, key, entry);
        }
    }
    Ok(())
}

/// Appends a commit's last records (after `parts` cut already), with the `feed`'s writes
/// and its `tail`, and stamps the pages it changed (`touched`) with its lsn and a redo
/// point at `before`, the log's end when it began; releases the pages earlier parts held.
/// Returns its lsn.
fn append_and_stamp<'a, I>(
    db: &Db,
    (ops, new_alloc, touched): (Vec<crate::btree::PageOp>, crate::record::Alloc, &[PageId]),
    feed: Option<&I>,
    (parts, role, tail): (u32, Role, Tail<'_>),
    before: u64,
) -> Result<Lsn>
where
    I: IntoIterator<Item = crate::record::Write<'a>> + Clone,
{
    let inner = &db.inner;
    let mut records = parts;
    let lsn = append_parts(db, &ops, new_alloc, feed, &mut records, (role, true, tail))?;
    drop(ops);
    assert!(
        lsn.0 > before,
        "commit lsn {lsn} not past the log end {before} it began from"
    );
    let redo_from = if crate::mutants::active("redo-point-at-record-end") {
        lsn.0
    } else {
        before
    };
    // The redo point of a page this commit dirtied is inside the commit: at or after the log
    // end it started from, never past its own end.
    assert!(
        before <= redo_from && redo_from <= lsn.0,
        "redo point {redo_from} outside the commit [{before}, {lsn}]"
    );
    inner.pool.stamp(touched, lsn.0, redo_from);
    if parts > 0 {
        inner.pool.release_held(lsn.0, redo_from)?;
    }
    if records > 1 {
        inner.counters.parts_logged(records);
    }
    Ok(lsn)
}

/// Lets the tree lock go (if still held) and registers the commit at `lsn` for readers:
/// visible once it is acknowledged. A commit `unseen` (it kept no values for older snapshots) is made visible
/// before the tree lock goes: a snapshot registered after it sees all of this commit.
fn make_visible(
    db: &Db,
    lsn: Lsn,
    durability: Durability,
    exclusive: Option<TreeExclusive<'_>>,
    unseen: bool,
) -> Result<()> {
    let inner = &db.inner;
    if unseen && !crate::mutants::active("unseen-commit-unlocks-early") {
        inner.visible.committed(lsn.0, durability);
        inner.wal.wait(lsn, durability).map_err(|e| db.poison(e))?;
        db.visible_through(lsn.0);
        drop(exclusive);
    } else {
        drop(exclusive);
        inner.visible.committed(lsn.0, durability);
    }
    Ok(())
}

/// Whether a commit of `role` that some snapshot may not see keeps, for older readers, the
/// value each key it changes held. A drain (or a chunk) whose buffered versions every reader
/// sees keeps none: readers before it find theirs in the generation it drains
/// (`txn/buffer.rs`), and with the overlay left empty of the keys they read those in place.
fn keeps_befores(db: &Db, role: Role) -> bool {
    match role {
        Role::Drain => !db.inner.visible.buffer_answers_every_reader(false),
        Role::Chunk => !db.inner.visible.buffer_answers_every_reader(true),
        Role::Tree | Role::Buffered => true,
    }
}

/// Each table a commit writes to, by name, with its root (`None`: one it creates).
type Roots = BTreeMap<String, Option<PageId>>;

/// The rows each table gained or lost, of the tables whose count changed.
fn nonzero_counts(deltas: &counts::Deltas) -> Vec<(&str, i64)> {
    deltas
        .iter()
        .filter(|(_, delta)| **delta != 0)
        .map(|(table, delta)| (table.as_str(), *delta))
        .collect()
}

/// What a commit's last record carries after its ops: a chunk's section (its place in the
/// drain and `counts`, the rows it changed per table), else nothing.
fn tail_of<'a>(changes: &Changes, counts: &'a [(&'a str, i64)]) -> Tail<'a> {
    match &changes.drain {
        Drains::Chunk { mark, .. } => Tail {
            chunk: Some(*mark),
            counts: Some(counts),
        },
        Drains::No | Drains::Whole => crate::record::NO_TAIL,
    }
}

/// Tells the buffer what a drain or a chunk whose commit ends at `lsn` applied (a chunk: the
/// rows it changed per table, `counts`, by the roots in `roots`). Requires: the commit not
/// yet visible (a reader at or past it skips the drained versions, and counts a chunk's rows
/// in the catalog, not in the frozen generation).
fn drained(db: &Db, changes: &Changes, lsn: Lsn, (counts, roots): (&[(&str, i64)], &Roots)) {
    match &changes.drain {
        Drains::Whole => db.inner.visible.drained(lsn.0),
        Drains::Chunk { mark, through_key } => {
            let deltas: Vec<(TableId, i64)> = counts
                .iter()
                .map(|(table, delta)| {
                    let root = roots[*table].expect("a chunk's table exists");
                    (root.0, *delta)
                })
                .collect();
            db.inner.visible.chunk_drained(
                lsn.0,
                (through_key.0, &through_key.1),
                &deltas,
                mark.last,
            );
        }
        Drains::No => {}
    }
}

/// The tables `changes` drop that exist, with their roots; and the roots of the tables they
/// write to, `None` for a table they create (a dropped table written to is created anew).
#[expect(
    clippy::type_complexity,
    reason = "two lists read together at the start of a commit"
)]
fn tables_of(
    db: &Db,
    changes: &Changes,
    tree: TreeHeld<'_>,
) -> Result<(Vec<(String, PageId)>, BTreeMap<String, Option<PageId>>)> {
    let mut drops: Vec<(String, PageId)> = Vec::new();
    for table in &changes.dropped {
        if let Some(root) = root_of(db, table, tree)? {
            drops.push((table.clone(), root));
        }
    }
    let mut roots: BTreeMap<String, Option<PageId>> = BTreeMap::new();
    for table in changes.writes.tables() {
        roots.insert(table.to_owned(), changes.visible_root_of(db, table, tree)?);
    }
    Ok((drops, roots))
}

/// Hands the trees of the tables a commit at `lsn` dropped to the graveyard, until no
/// snapshot can see them (`drop.rs`).
fn bury(db: &Db, drops: Vec<(String, PageId)>, lsn: Lsn) {
    if !drops.is_empty() {
        let mut graveyard = db.inner.graveyard.lock();
        for (_, root) in drops {
            let earlier = graveyard.insert(root, lsn.0);
            assert!(earlier.is_none(), "tree {root} dropped twice");
        }
    }
}

/// `roots` with a new tree, and its catalog entry (count 0), for each table this commit
/// creates (`None`).
fn create_tables(
    pages: &TxnPages<'_>,
    roots: &BTreeMap<String, Option<PageId>>,
) -> Result<BTreeMap<String, Option<PageId>>> {
    let mut created = roots.clone();
    for (table, root) in &mut created {
        if root.is_none() {
            let tree = Tree::create(pages)?;
            Tree::open(CATALOG_ROOT).put(
                pages,
                counts::key_of(table),
                &counts::entry(tree.root(), 0),
            )?;
            *root = Some(tree.root());
        }
    }
    Ok(created)
}
