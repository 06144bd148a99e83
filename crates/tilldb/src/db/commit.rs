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
//! (more than a part of writes) that finds no snapshot registered records none: it holds the
//! tree lock until it is visible (its flush waited for under the lock), and snapshots are
//! registered under the tree lock, so none can be older than it and read its pages.
//!
//! A transaction that read holds the writer lock since its first read and applies its own
//! changes. One that only wrote reaches commit without it, and joins the *commit queue*: the
//! first to arrive leads, takes the writer lock once and applies every commit that queues
//! behind it while it works, each as its own log record in arrival order, handing each round
//! to the log as one batch of waiters, then hands the lock back (after 256 commits it hands
//! the lead to the first commit still queued). The others sleep once, until their commit is
//! as durable as they asked:
//!
//! ```text
//!   commit ──queue.leading?──no──> lead: lock; apply own; apply each queued ... unlock;
//!                  │                      wait for the log (leading its stages when free)
//!                  yes
//!                  └──> queued ──(leader applied it: lsn)──> enlisted with the log
//!                                   ──(log says durable, or "lead a stage")──> wait returns
//! ```
//!
//! Why: with the lock taken at `begin()` and handed from committer to committer, every commit
//! paid a wake-up of the next one inside the lock (the hand-off is serial), and a second one
//! when its flush completed: at 64 threads on 2 CPUs the CPUs idled 40 % of the time while
//! the lock went round (docs/benchmarks.md, "Commit queue"). Here the lock is handed over once
//! per batch, and a queued commit costs one sleep.
//!
//! Invariants (asserted where they hold): at most one leader (`CommitQueue::leading`);
//! every queued commit is finished (applied or failed) exactly once and woken exactly once
//! (by its leader when it failed, is `Lazy`, or leads next, else by the log); a leader that
//! unwinds fails every commit it holds and every queued one, and poisons the database (the
//! pages may be half changed), so nobody sleeps forever.

use super::counts;
use super::locks::{TreeExclusive, TreeHeld, Writer};
use super::pages::TxnPages;
use super::write_set::Writes;
use super::{CATALOG_ROOT, CATALOG_TABLE, Db, catalog_root_of};
use crate::Durability;
use crate::btree::PageOp;
use crate::btree::{Filler, Finger, Tree};
use crate::error::{Error, Result};
use crate::page::PageId;
use crate::record::{self, Alloc};
use crate::wal::{Lsn, WaitSlot};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Commits one leader applies before it hands the lead to the next queued commit: a bound on
/// how long a leader works for others before its own commit returns.
const LEAD_COMMITS_MAX: usize = 256;

/// The changes of a transaction: what a commit applies.
#[derive(Debug, Default)]
pub(super) struct Changes {
    /// The latest write of each (table, key), in that order.
    pub writes: Writes,
    /// Tables dropped. Drops apply before the writes, so a table dropped and then written to
    /// is a new table holding only those writes.
    pub dropped: BTreeSet<String>,
}

impl Changes {
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

/// Who leads, and the commits waiting for a leader.
#[derive(Debug, Default)]
pub(super) struct CommitQueue {
    leading: bool,
    queued: Vec<Arc<Queued>>,
}

/// A commit waiting in the queue.
#[derive(Debug)]
struct Queued {
    /// Read by the leader, not taken: the leader lets go of a commit before the log can wake
    /// it, so the committer's own thread usually drops it last, and the allocations a
    /// transaction made go back to the thread that made them, whose allocator cache serves
    /// its next transaction (freed by the leader, they went through the allocator's shared
    /// arenas; docs/benchmarks.md, "Allocations freed where they were made").
    changes: Changes,
    durability: Durability,
    turn: Mutex<Turn>,
    slot: Arc<WaitSlot>,
}

/// What a queued commit's thread does when it wakes.
#[derive(Debug)]
enum Turn {
    /// Not applied yet (and, for a queued commit, asleep until it is).
    Waiting,
    /// Lead the queue: the previous leader applied its share and handed over.
    Lead,
    /// Applied (its lsn) or failed; the wait for the log is the thread's own.
    Finished(Result<Lsn>),
    /// The thread took its outcome: nothing is left to apply, hand over or wake.
    Taken,
}

/// Commits `changes` without the writer lock held: through the queue. Returns the commit's
/// lsn, applied and appended; the caller then waits for the log (at once for a queued commit
/// the log woke).
pub(super) fn commit_queued(db: &Db, changes: Changes, durability: Durability) -> Result<Lsn> {
    let me = Arc::new(Queued {
        changes,
        durability: if crate::mutants::active("queued-sync-as-buffered")
            && durability == Durability::Sync
        {
            Durability::Buffered
        } else {
            durability
        },
        turn: Mutex::new(Turn::Waiting),
        slot: WaitSlot::for_current_thread(),
    });
    {
        let mut queue = db.inner.commits.lock();
        if queue.leading {
            queue.queued.push(Arc::clone(&me));
            drop(queue);
            db.inner.wal.park(&me.slot);
            let turn = std::mem::replace(&mut *me.turn.lock(), Turn::Taken);
            match turn {
                Turn::Finished(outcome) => return outcome,
                // Not applied: it applies its own commit first, as the leader.
                Turn::Lead => *me.turn.lock() = Turn::Waiting,
                Turn::Waiting | Turn::Taken => {
                    unreachable!("woken before its commit was finished: {turn:?}")
                }
            }
        } else {
            queue.leading = true;
        }
    }
    lead(db, &me)
}

/// Leads the queue: applies `me` and what queues meanwhile, up to [`LEAD_COMMITS_MAX`], then
/// gives the lead up (or to the next queued commit). Returns `me`'s outcome.
fn lead(db: &Db, me: &Arc<Queued>) -> Result<Lsn> {
    // The lock before the guard: on unwind the guard drops first, so the database is
    // poisoned before a waiting writer can take the lock and build on half-changed pages.
    let mut alloc = db.inner.writer.lock();
    let mut leader = Leader {
        db,
        me: Arc::clone(me),
        batch: vec![Arc::clone(me)],
        enlisted: Vec::new(),
        done: false,
    };
    let mut applied = 0usize;
    loop {
        // Applied in place: if this unwinds, `leader` still holds every commit of the round.
        let mut i = 0;
        while i < leader.batch.len() && applied < LEAD_COMMITS_MAX {
            let queued = Arc::clone(&leader.batch[i]);
            assert!(
                matches!(*queued.turn.lock(), Turn::Waiting),
                "a queued commit is applied once"
            );
            // Checked under the lock, before every commit: one that failed in this batch (or
            // anywhere) poisoned the database, and may have left pages half changed.
            let checked = if crate::mutants::active("queue-skips-poison-check") {
                Ok(())
            } else {
                db.check_poison()
            };
            let outcome = checked
                .and_then(|()| apply(db, &mut alloc, &queued.changes, queued.durability))
                .map_err(|e| db.poison(e));
            applied += 1;
            i += 1;
            if Arc::ptr_eq(&queued, me) {
                *me.turn.lock() = Turn::Finished(outcome);
            } else {
                db.inner.counters.queued_commit();
                finish(&queued, outcome, &mut leader.enlisted);
            }
        }
        // Not applied (the lead's share is done): back to the front of the queue, before
        // anything else can unwind, so that `Leader::drop` finds them there.
        let rest = leader.batch.split_off(i);
        leader.batch.clear();
        if !rest.is_empty() {
            db.inner.commits.lock().queued.splice(0..0, rest);
        }
        // The log learns of this round's commits now, so that a follower can lead the write
        // and flush of this round while this thread applies the next.
        leader.enlist();
        let mut queue = db.inner.commits.lock();
        assert!(queue.leading, "a leader without the lead");
        if queue.queued.is_empty() {
            queue.leading = false;
            break;
        }
        if applied >= LEAD_COMMITS_MAX {
            // Enough for others: the first queued commit leads next (the lead stays taken).
            let next = queue.queued.remove(0);
            drop(queue);
            drop(alloc);
            leader.done = true;
            hand(&next, Turn::Lead);
            return take_outcome(me);
        }
        leader.batch = std::mem::take(&mut queue.queued);
    }
    drop(alloc);
    leader.done = true;
    take_outcome(me)
}

/// The outcome the leader recorded for its own commit.
fn take_outcome(me: &Queued) -> Result<Lsn> {
    match std::mem::replace(&mut *me.turn.lock(), Turn::Taken) {
        Turn::Finished(outcome) => outcome,
        turn => unreachable!("the leader's own commit not finished: {turn:?}"),
    }
}

/// Records a queued commit's outcome and arranges its one wake-up: by the log (once the
/// round is enlisted) when its commit is as durable as it asked, or when it should lead a
/// stage; now when it failed.
fn finish(queued: &Arc<Queued>, outcome: Result<Lsn>, enlisted: &mut Vec<Arc<Queued>>) {
    match outcome {
        Ok(lsn) => {
            *queued.turn.lock() = Turn::Finished(Ok(lsn));
            enlisted.push(Arc::clone(queued));
        }
        Err(e) => hand(queued, Turn::Finished(Err(e))),
    }
}

/// Gives a queued commit its turn and wakes it.
fn hand(queued: &Queued, turn: Turn) {
    *queued.turn.lock() = turn;
    queued.slot.wake();
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

/// The commits a leader holds. If the leader unwinds (a bug panicked while applying), they
/// and everything queued fail instead of sleeping forever, the lead is given up and the
/// database is poisoned: the pages may be half changed.
struct Leader<'a> {
    db: &'a Db,
    /// The leader's own commit: its thread is the one unwinding, not a sleeper to wake.
    me: Arc<Queued>,
    batch: Vec<Arc<Queued>>,
    /// Commits of this round applied for others, for the log to wake once it is enlisted.
    enlisted: Vec<Arc<Queued>>,
    done: bool,
}

impl Leader<'_> {
    /// Hands the commits applied this round to the log, which wakes each when its need is met.
    fn enlist(&mut self) {
        let waiters = self
            .enlisted
            .iter()
            .map(|queued| {
                let lsn = match &*queued.turn.lock() {
                    Turn::Finished(Ok(lsn)) => *lsn,
                    turn => unreachable!("enlisting a commit not applied: {turn:?}"),
                };
                (lsn, queued.durability, Arc::clone(&queued.slot))
            })
            .collect();
        self.enlisted.clear();
        self.db.inner.wal.enlist(waiters);
    }
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.db.poison(Error::PoisonedBy {
            cause: "a committing thread panicked while it applied commits".to_owned(),
        });
        let mut queue = self.db.inner.commits.lock();
        queue.leading = false;
        let stranded: Vec<_> = self.batch.drain(..).chain(queue.queued.drain(..)).collect();
        drop(queue);
        // Applied ones not yet enlisted fail too: nothing is acknowledged after the panic.
        let unenlisted: Vec<_> = self.enlisted.drain(..).collect();
        for queued in stranded {
            if Arc::ptr_eq(&queued, &self.me) {
                continue;
            }
            let asleep = matches!(*queued.turn.lock(), Turn::Waiting)
                || unenlisted.iter().any(|q| Arc::ptr_eq(q, &queued));
            if asleep {
                let failed = self.db.check_poison().expect_err("poisoned above");
                hand(&queued, Turn::Finished(Err(failed)));
            }
        }
    }
}

/// Applies `changes` to the tree and appends their record to the log; returns its lsn. A
/// commit whose page operations outgrow one part ([`part_limit`]) is logged in several
/// records (`record.rs`, "parts"): the pages the earlier parts changed are held by the
/// pool (never written to the data file) until the last part is appended.
pub(super) fn apply(
    db: &Db,
    alloc: &mut Writer<'_>,
    changes: &Changes,
    durability: Durability,
) -> Result<Lsn> {
    let inner = &db.inner;
    let exclusive = inner.tree_lock.write();
    // Tables this commit drops that exist, with their roots.
    let mut drops: Vec<(String, PageId)> = Vec::new();
    for table in &changes.dropped {
        if let Some(root) = root_of(db, table, exclusive.held())? {
            drops.push((table.clone(), root));
        }
    }
    // Roots of the tables written to; `None` for tables this commit creates (a dropped
    // table written to is created anew).
    let mut roots: BTreeMap<String, Option<PageId>> = BTreeMap::new();
    for table in changes.writes.tables() {
        roots.insert(
            table.to_owned(),
            changes.visible_root_of(db, table, exclusive.held())?,
        );
    }
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
    let unseen =
        changes.writes.bytes() >= part_limit(db) as u64 && inner.reads.lock().snapshots.is_empty();
    let (mut befores, empties) = catalog_befores(db, changes, &drops, &roots, &exclusive)?;
    // Tables whose every key is absent before this commit: created by it (hidden by their
    // absent catalog entry) or found empty (hidden by an empty mark). Their writes keep no
    // value per key.
    let fresh: BTreeSet<&str> = roots
        .iter()
        .filter(|(_, root)| root.is_none_or(|root| empties.contains(&root)))
        .map(|(table, _)| table.as_str())
        .collect();
    let pages = TxnPages::new(&inner.pool, &inner.data_path, **alloc, db.image_below());
    // From the first change on, a failure poisons the database before the tree lock is let
    // go: no reader may see pages half changed (reads check the poison under the lock).
    let poisoned = |e| db.poison(e);
    super::drop::apply_drops(&pages, &drops, &exclusive).map_err(poisoned)?;
    let created = create_tables(&pages, &roots).map_err(poisoned)?;
    let feed = inner.options.change_feed;
    let mut written = write_in_parts(
        db,
        &pages,
        changes,
        (&created, &fresh, !unseen),
        alloc,
        &exclusive,
    )
    .map_err(poisoned)?;
    let parts = written.parts;
    befores.append(&mut written.befores);
    // The entries whose counts change, of tables that exist before this commit (a created
    // one is hidden by its absent entry), as they are before `apply_deltas` changes them.
    for (table, delta) in &written.deltas {
        if *delta != 0
            && roots[table.as_str()].is_some()
            && !crate::mutants::active("count-not-kept-for-readers")
        {
            let key = counts::key_of(table);
            let entry = Tree::open(CATALOG_ROOT).get(&pages, key);
            befores.push(CATALOG_TABLE, key, entry.map_err(poisoned)?);
        }
    }
    record_befores(db, befores, &empties, provisional, &exclusive);
    // The rows each table gained or lost, in its catalog entry: the last change of the
    // commit, in its last part.
    counts::apply_deltas(&pages, &written.deltas, alloc, &exclusive).map_err(poisoned)?;
    let part_writes = written.part_writes;
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
    let (ops, new_alloc, touched) = pages.finish();
    let held = parts > 0;
    let mut records = parts;
    // With the feed, the last part's writes (all of them when there is one part).
    let feed = feed.then(|| part_writes.iter());
    let lsn = append_parts(db, &ops, new_alloc, feed.as_ref(), &mut records, true)?;
    drop(ops);
    assert!(
        lsn.0 >= provisional,
        "commit lsn {lsn} below its provisional lsn {provisional}"
    );
    let redo_from = if crate::mutants::active("redo-point-at-record-end") {
        lsn.0
    } else {
        before
    };
    inner.pool.stamp(&touched, lsn.0, redo_from);
    if held {
        inner.pool.release_held(lsn.0, redo_from)?;
    }
    if records > 1 {
        inner.counters.parts_logged(records);
    }
    if unseen && !crate::mutants::active("unseen-commit-unlocks-early") {
        // Visible before the tree lock goes: a snapshot registered after it sees all of
        // this commit, which kept no values for older ones.
        inner.reads.lock().visibility.committed(lsn.0, durability);
        inner.wal.wait(lsn, durability).map_err(poisoned)?;
        db.visible_through(lsn.0);
        drop(exclusive);
    } else {
        drop(exclusive);
        inner.reads.lock().visibility.committed(lsn.0, durability);
    }
    **alloc = new_alloc;
    bury(db, drops, lsn);
    Ok(lsn)
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

/// What [`write_in_parts`] did.
struct Written<'c> {
    /// Parts appended before the last.
    parts: u32,
    /// With the feed, the writes since the last part (the last part's, for its changes
    /// section), copied: the cursor they come from lends each only until the next.
    part_writes: PartWrites<'c>,
    /// The value each key of a table that is not fresh held before.
    befores: Befores,
    /// The rows each table gained or lost.
    deltas: counts::Deltas,
}

/// Writes copied back to back: (table, key, value or `None`).
#[derive(Debug, Default)]
struct PartWrites<'c> {
    bytes: Vec<u8>,
    writes: Vec<(&'c str, usize, Option<usize>)>,
}

impl<'c> PartWrites<'c> {
    fn push(&mut self, table: &'c str, key: &[u8], value: Option<&[u8]>) {
        self.bytes.extend_from_slice(key);
        let key_end = self.bytes.len();
        let value_end = value.map(|v| {
            self.bytes.extend_from_slice(v);
            self.bytes.len()
        });
        self.writes.push((table, key_end, value_end));
    }

    fn iter(&self) -> impl Iterator<Item = record::Write<'_>> + Clone {
        let mut start = 0;
        self.writes.iter().map(move |&(table, key_end, value_end)| {
            let key = &self.bytes[start..key_end];
            let value = value_end.map(|end| &self.bytes[key_end..end]);
            start = value_end.unwrap_or(key_end);
            record::Write { table, key, value }
        })
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.writes.clear();
    }
}

/// Values readers with older snapshots may need, each with its table's id and key (copied
/// back to back).
#[derive(Debug, Default)]
struct Befores {
    keys: Vec<u8>,
    values: Vec<(u64, usize, Option<Vec<u8>>)>,
}

impl Befores {
    fn push(&mut self, table: u64, key: &[u8], before: Option<Vec<u8>>) {
        self.keys.extend_from_slice(key);
        self.values.push((table, self.keys.len(), before));
    }

    fn append(&mut self, other: &mut Befores) {
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
    fn drain(&mut self) -> impl Iterator<Item = (u64, &[u8], Option<Vec<u8>>)> {
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
/// [`part_limit`] bytes, or once the pages it left unlogged would crowd the cache. A table in
/// `fresh` held no key before this commit; of the others, each write keeps the value its key
/// held, read from the leaf it changes (one descent per write: a lookup before the changes
/// and the change took two), and the rows each table gained or lost are counted.
fn write_in_parts<'c>(
    db: &Db,
    pages: &TxnPages<'_>,
    changes: &'c Changes,
    (roots, fresh, keep_befores): (&BTreeMap<String, Option<PageId>>, &BTreeSet<&str>, bool),
    _writer: &Writer<'_>,
    _tree: &TreeExclusive<'_>,
) -> Result<Written<'c>> {
    let inner = &db.inner;
    let feed = inner.options.change_feed;
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
                            cut_part(db, pages, &mut written, false)?;
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
        // The writes come in key order: a put usually lands in the leaf the last one did.
        let mut finger = Finger::default();
        let mut delta = 0i64;
        while let Some(write) = writes.next()? {
            let cut = pages.ops_bytes() + part_changes_bytes >= limit
                || (pages.ops_bytes() > 0 && pages.touched_len() >= unlogged_max);
            if cut {
                cut_part(db, pages, &mut written, feed)?;
                part_changes_bytes = 0;
            }
            let before = match (write.value, fresh) {
                (Some(v), true) => {
                    tree.put_at(pages, write.key, v, &mut finger)?;
                    None
                }
                (None, true) => {
                    tree.delete_keeping(pages, write.key, &mut finger)?;
                    None
                }
                (Some(v), false) => Some(tree.put_keeping(pages, write.key, v, &mut finger)?),
                (None, false) => Some(tree.delete_keeping(pages, write.key, &mut finger)?),
            };
            delta += i64::from(write.value.is_some())
                - i64::from(before.as_ref().is_some_and(Option::is_some));
            if let Some(before) = before
                && keep_befores
            {
                written.befores.push(tree.root().0, write.key, before);
            }
            if feed {
                written.part_writes.push(table, write.key, write.value);
                part_changes_bytes += record::changes_len([write]) - 4;
            }
        }
        if delta != 0 {
            written.deltas.insert(table.to_owned(), delta);
        }
    }
    Ok(written)
}

/// Appends the ops applied since the last part as a part of the commit (with the feed, the
/// changes section of the writes they apply), and has the pool hold the pages they changed.
fn cut_part(db: &Db, pages: &TxnPages<'_>, written: &mut Written<'_>, feed: bool) -> Result<()> {
    let (ops, now, touched) = pages.take_part();
    let writes = feed.then(|| written.part_writes.iter());
    append_parts(db, &ops, now, writes.as_ref(), &mut written.parts, false)?;
    drop((ops, writes));
    db.inner.pool.hold(&touched);
    written.part_writes.clear();
    Ok(())
}

/// The values readers with older snapshots need of the catalog before this commit changes
/// it: a dropped table's catalog entry, and the absent entry that hides a table this commit
/// creates. Returns them, with the existing tables this commit finds empty (each gets an
/// empty mark instead of a value per key: `txn/overlay.rs`).
fn catalog_befores(
    db: &Db,
    changes: &Changes,
    drops: &[(String, PageId)],
    roots: &BTreeMap<String, Option<PageId>>,
    _tree: &TreeExclusive<'_>,
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
/// lock held exclusively since before the pages changed, so no reader has seen a change
/// the overlay does not hold yet.
fn record_befores(
    db: &Db,
    mut befores: Befores,
    empties: &[PageId],
    provisional: u64,
    _tree: &TreeExclusive<'_>,
) {
    let inner = &db.inner;
    let mut reads = inner.reads.lock();
    if !crate::mutants::active("empty-mark-lost") {
        for root in empties {
            reads.overlay.record_empty(root.0, provisional);
        }
    }
    for (table_id, key, before) in befores.drain() {
        reads.overlay.record(table_id, key, provisional, before);
    }
    if !reads.overlay.is_empty()
        && !crate::mutants::active("reads-skip-overlay")
        && !crate::mutants::active("commit-leaves-overlay-hint")
    {
        inner
            .overlay_empty
            .store(false, std::sync::atomic::Ordering::Release);
    }
}

/// The most bytes of ops one record of a commit holds: `Options::commit_part_bytes`, at most
/// half of what one log record can carry (the changes section rides beside them).
fn part_limit(db: &Db) -> usize {
    let max = db.inner.wal.max_payload_bytes();
    usize::try_from(db.inner.options.commit_part_bytes)
        .unwrap_or(usize::MAX)
        .min(max / 2)
        .max(1)
}

/// Appends `ops`, and the changes section of `writes` (with the change feed), as records
/// `*records..` of one commit, and counts them in `records`: as few as hold them (at least one
/// op each: an op is at most a page and its header), the changes on the last (or in a record
/// of their own where they do not fit beside its ops). A part [`write_in_parts`] cut holds a
/// little more than [`part_limit`] bytes of ops (the write that passed it), which one record
/// carries: split at the limit, every part was a full record and a second of one op, whose
/// append waited for a segment of its own (docs/benchmarks.md, "The write set as an arena").
/// With `last`, the last record ends the commit. The parts of one commit may
/// divide its ops anywhere, even inside one write's split: replay applies all of them or
/// none. Returns the last record's end.
fn append_parts<'a, I>(
    db: &Db,
    ops: &[PageOp],
    alloc: Alloc,
    writes: Option<&I>,
    records: &mut u32,
    last: bool,
) -> Result<Lsn>
where
    I: IntoIterator<Item = record::Write<'a>> + Clone,
{
    let max = db.inner.wal.max_payload_bytes();
    let chunk_max = max - record::HEADER_BYTES;
    let changes_bytes = writes.map_or(0, |w| record::changes_len(w.clone()));
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
        let payload = record::encode(part, alloc, chunk, feed);
        assert!(
            payload.len() <= max,
            "a commit part of {} bytes",
            payload.len()
        );
        // The pair of the read side's check: the part reads back as it was written.
        debug_assert_eq!(record::part_of(&payload), Ok(part), "a part read back");
        end = db.inner.wal.append(&payload)?;
        *records += 1;
    }
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

    /// The call sites of `Wal::begin_parts` and `Wal::end_parts`: while a commit logged in
    /// several records is between them (its parts appended, its last not yet), the log's
    /// commit boundary stays at its first record's start, where a redo point may be taken
    /// (`writeback.rs`); a commit in one record never moves it off the log's end. The
    /// redo-point tests (`tests/redo_points.rs`) take the boundary from here.
    #[test]
    fn a_commit_between_its_records_keeps_the_log_boundary_at_its_start() {
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
        append_parts(&db, &[image(50)], alloc, none, &mut records, true).expect("append");
        assert_eq!(records, 1);
        assert_eq!(wal.boundary_end(), wal.end_lsn());
        // A first part of one record that is not the commit's last: the boundary stays at its
        // start.
        let start = wal.end_lsn();
        let mut records = 0;
        append_parts(&db, &[image(50)], alloc, none, &mut records, false).expect("append");
        assert_eq!(records, 1);
        assert!(wal.end_lsn() > start);
        assert_eq!(wal.boundary_end(), start, "a first part of one record");
        append_parts(&db, &[image(50)], alloc, none, &mut records, true).expect("append");
        assert_eq!(wal.boundary_end(), wal.end_lsn());
        // A part of a commit in more records than one (more images than a record holds),
        // not its last: the boundary stays where the commit began.
        let start = wal.end_lsn();
        let per_record = wal.max_payload_bytes() / body.len();
        let ops: Vec<PageOp> = (0..u64::try_from(per_record + 2).expect("small"))
            .map(|i| image(51 + i))
            .collect();
        let mut records = 0;
        append_parts(&db, &ops, alloc, none, &mut records, false).expect("append");
        assert!(records >= 2, "{records} records");
        assert!(wal.end_lsn() > start);
        assert_eq!(
            wal.boundary_end(),
            start,
            "the boundary moved inside a commit logged in several records"
        );
        // Its last part, in one record: the commit ends, and the boundary is the end again.
        append_parts(&db, &ops[..1], alloc, none, &mut records, true).expect("append");
        assert_eq!(wal.boundary_end(), wal.end_lsn());
        // A commit whose first part is its last but takes two records.
        let start = wal.end_lsn();
        let mut records = 0;
        append_parts(&db, &ops, alloc, none, &mut records, true).expect("append");
        assert!(records >= 2);
        assert!(wal.end_lsn() > start);
        assert_eq!(wal.boundary_end(), wal.end_lsn());
        drop(db);
    }
}
