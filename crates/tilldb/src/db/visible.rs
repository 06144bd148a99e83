//! What readers see, one room: the visible lsn (which acknowledged commits readers see), the
//! snapshots open read transactions registered, the overlay of the values commits replaced
//! that older snapshots still need (`txn/overlay.rs`), and the write buffer of commits not yet
//! applied to the tree (`txn/buffer.rs`). A reader at a snapshot takes a key's buffered
//! version if it sees one, else the overlay's, else the tree's. Its state is private here; the commit
//! path, the reads and the invariants use it through the methods below, each named after what
//! it promises.
//!
//! ```text
//!   commit: record (overlay entries, under the tree lock) ──> committed (visibility tracker)
//!   read:   advance (visible lsn moves, overlay pruned to the horizon) ──> register ... release
//!           seen / hides_table / changed_in (the buffer's and the overlay's view at a snapshot)
//! buffered commit: buffer_commit ──> committed;  drain: drain_writes ... drained
//! drain in chunks: buffer_next_chunk ... chunk_drained, by turns with buffered commits
//! ```
//!
//! Locks: one mutex, [`Visible::reads`], guards the tracker, the overlay and the snapshots;
//! the write buffer has a lock of its own that readers share ([`Visible::buffer`]), taken
//! after `reads` when both are. Three atomics publish what reads check without a lock: the
//! visible lsn (`hint`, never ahead of the tracker), whether the overlay is empty
//! (`overlay_empty`) and whether the overlay and the buffer are both empty (`tree_alone`).

use crate::Durability;
use crate::page::PageId;
use crate::txn::buffer::{BufferedWrite, Chunk, CommitAt, OwnedWrites, WriteBuffer};
use crate::txn::{Overlay, Seen, TableId, Visibility};
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// What readers see (see the module doc).
#[derive(Debug)]
pub(super) struct Visible {
    /// The visibility tracker, the overlay and the registered snapshots.
    reads: Mutex<Reads>,
    /// The write buffer: read under a shared lock, so that readers with something buffered
    /// do not queue on `reads`; changed by the writer (a buffered commit, a drain) and by
    /// the prune in [`Visible::advance`], each under `reads` too.
    buffer: RwLock<WriteBuffer>,
    /// The visible lsn as of the last advance, published for the committers' fast path: one
    /// whose commit is visible already returns without taking `reads` (after a flush, the
    /// committers it released all return at once). Written under `reads`; never ahead of
    /// `reads.visibility`.
    hint: AtomicU64,
    /// Whether `reads.overlay` and `buffer` are both empty, published for reads: a point
    /// read or a scan batch with nothing to merge skips the `reads` lock (every read took it).
    /// Set false as a commit records its entries, before it changes a page, and as a buffered
    /// commit enters the buffer, before it is visible; true by a prune that empties both;
    /// written under `reads`. A read that found a commit's change in the tree reads it after
    /// that commit set it false (the tree lock orders them), a reader whose snapshot includes
    /// a buffered commit took it after the commit set it false (the `reads` lock orders
    /// them), and a prune empties them only of what no registered snapshot needs.
    tree_alone: AtomicBool,
    /// Whether `reads.overlay` is empty: as `tree_alone`, for the overlay alone (set false
    /// where a commit records its entries, true by a prune that empties it; under `reads`).
    /// A read whose snapshot's versions the buffer answers for checks it, under the tree
    /// lock, to read the tree in place.
    overlay_empty: AtomicBool,
}

/// Guarded by `Visible::reads`.
#[derive(Debug)]
struct Reads {
    visibility: Visibility,
    overlay: Overlay,
    /// Snapshots of open read transactions, with counts.
    snapshots: BTreeMap<u64, usize>,
}

impl Reads {
    /// The oldest of the open snapshots and `visible` (the snapshot a new reader takes).
    fn horizon(&self, visible: u64) -> u64 {
        self.snapshots
            .keys()
            .next()
            .map_or(visible, |&s| s.min(visible))
    }
}

impl Visible {
    /// Readers see every commit up to `visible` (the log's end at open), nothing is kept for
    /// older snapshots and none is registered.
    pub(super) fn new(visible: u64) -> Visible {
        Visible {
            reads: Mutex::new(Reads {
                visibility: Visibility::new(visible),
                overlay: Overlay::default(),
                snapshots: BTreeMap::new(),
            }),
            buffer: RwLock::new(WriteBuffer::default()),
            hint: AtomicU64::new(visible),
            tree_alone: AtomicBool::new(true),
            overlay_empty: AtomicBool::new(true),
        }
    }

    /// Moves the visible lsn over the commits the log's `written` and `durable` marks
    /// acknowledge, and prunes the overlay of what no snapshot needs any more. Returns the
    /// visible lsn.
    pub(super) fn advance(&self, written: u64, durable: u64) -> u64 {
        self.advance_registering(written, durable, false)
    }

    /// [`Visible::advance`], registering a reader at the visible lsn it reaches before it
    /// prunes, under one hold of the readers' lock: registered after the advance, another
    /// reader's advance between the two could move the visible lsn on and prune what this
    /// reader's snapshot needs (a length then missed rows the buffer's pruned sums held).
    /// Returns the reader's snapshot; the caller releases it ([`Visible::release`]).
    pub(super) fn advance_and_register(&self, written: u64, durable: u64) -> u64 {
        self.advance_registering(written, durable, true)
    }

    fn advance_registering(&self, written: u64, durable: u64, register: bool) -> u64 {
        let late = crate::mutants::active("snapshot-registered-after-its-advance");
        let mut reads = self.reads.lock();
        let visible = reads.visibility.advance(written, durable);
        super::advance_mark(&self.hint, visible, "the visible lsn");
        if register && !late {
            *reads.snapshots.entry(visible).or_default() += 1;
        }
        let horizon = reads.horizon(visible);
        reads.overlay.prune(horizon);
        let buffer_empty = {
            let mut buffer = self.buffer.write();
            buffer.prune(horizon);
            buffer.is_empty()
        };
        let overlay_empty =
            reads.overlay.is_empty() || crate::mutants::active("reads-skip-overlay");
        self.overlay_empty.store(overlay_empty, Ordering::Release);
        self.tree_alone.store(
            (overlay_empty && buffer_empty) || crate::mutants::active("reads-skip-overlay"),
            Ordering::Release,
        );
        if register && late {
            drop(reads);
            self.register(visible);
        }
        visible
    }

    /// The visible lsn as of the last advance, without the lock (never ahead of the tracker).
    pub(super) fn hint(&self) -> u64 {
        self.hint.load(Ordering::Acquire)
    }

    /// The oldest of the registered snapshots and `visible`.
    pub(super) fn horizon(&self, visible: u64) -> u64 {
        self.reads.lock().horizon(visible)
    }

    /// Whether the overlay and the buffer hold nothing: every snapshot reads the tree alone
    /// (read after the tree: see `tree_alone`).
    pub(super) fn tree_alone(&self) -> bool {
        self.tree_alone.load(Ordering::Acquire)
    }

    /// Whether the overlay holds nothing: no commit changed the tree under a registered
    /// snapshot. Read under the tree lock, after the tree, as [`Visible::tree_alone`] is.
    pub(super) fn overlay_empty(&self) -> bool {
        self.overlay_empty.load(Ordering::Acquire)
    }

    /// Registers one more reader at `snapshot`.
    pub(super) fn register(&self, snapshot: u64) {
        *self.reads.lock().snapshots.entry(snapshot).or_default() += 1;
    }

    /// A reader at `snapshot` ended.
    pub(super) fn release(&self, snapshot: u64) {
        let mut reads = self.reads.lock();
        let count = reads
            .snapshots
            .get_mut(&snapshot)
            .expect("registered snapshot");
        assert!(
            *count > 0,
            "snapshot {snapshot} released more often than registered"
        );
        *count -= 1;
        if *count == 0 {
            reads.snapshots.remove(&snapshot);
        }
    }

    /// Whether no reader holds a snapshot now.
    pub(super) fn no_snapshots(&self) -> bool {
        self.reads.lock().snapshots.is_empty()
    }

    /// The commit whose record ends at `lsn` is appended, to become visible once the log is as
    /// durable as `durability` asks.
    pub(super) fn committed(&self, lsn: u64, durability: Durability) {
        self.reads.lock().visibility.committed(lsn, durability);
    }

    /// Records what readers below `provisional` (a commit's provisional lsn) still need: the
    /// value each key of `befores` held before the commit, and an empty mark for each table
    /// of `empties` (found empty, so its writes keep no value per key). Requires: the tree
    /// lock held exclusively since before the pages changed, so no reader has seen a change
    /// the overlay does not hold yet.
    pub(super) fn record<'k>(
        &self,
        empties: &[PageId],
        befores: impl Iterator<Item = (TableId, &'k [u8], Option<Vec<u8>>)>,
        provisional: u64,
    ) {
        let mut reads = self.reads.lock();
        if !crate::mutants::active("empty-mark-lost") {
            for root in empties {
                reads.overlay.record_empty(root.0, provisional);
            }
        }
        for (table_id, key, before) in befores {
            reads.overlay.record(table_id, key, provisional, before);
        }
        if !reads.overlay.is_empty()
            && !crate::mutants::active("reads-skip-overlay")
            && !crate::mutants::active("commit-leaves-overlay-hint")
        {
            if !crate::mutants::active("overlay-hint-left-set") {
                self.overlay_empty.store(false, Ordering::Release);
            }
            self.tree_alone.store(false, Ordering::Release);
        }
    }

    /// Adds a buffered commit's writes and row deltas to the write buffer. Requires: the
    /// writer lock held, and the commit not yet [`Visible::committed`] (no reader may see it
    /// before its versions are here).
    pub(super) fn buffer_commit<'a>(
        &self,
        at: CommitAt,
        writes: impl IntoIterator<Item = BufferedWrite<'a>>,
        deltas: &[(TableId, i64)],
    ) {
        let mut reads = self.reads.lock();
        assert!(
            reads.visibility.visible_lsn() < at.end,
            "a buffered commit visible before its versions are buffered"
        );
        self.add_to_buffer(&mut reads, at, writes, deltas);
    }

    /// Adds a buffered commit replay read, as [`Visible::buffer_commit`] does, visible
    /// already (its lsn is at or below the log's end the database opened at). Requires: no
    /// reader holds a snapshot.
    pub(super) fn buffer_replayed<'a>(
        &self,
        at: CommitAt,
        writes: impl IntoIterator<Item = BufferedWrite<'a>>,
        deltas: &[(TableId, i64)],
    ) {
        let mut reads = self.reads.lock();
        assert!(
            reads.snapshots.is_empty(),
            "a buffer rebuilt under a reader"
        );
        assert!(
            at.end <= reads.visibility.visible_lsn(),
            "a replayed buffered commit past the end the log was read to"
        );
        self.add_to_buffer(&mut reads, at, writes, deltas);
    }

    /// Forgets every buffered version: a drain replayed put them in the tree. Requires: no
    /// reader holds a snapshot.
    pub(super) fn buffer_forget_all(&self) {
        let reads = self.reads.lock();
        assert!(
            reads.snapshots.is_empty(),
            "a buffer forgotten under a reader"
        );
        *self.buffer.write() = WriteBuffer::default();
    }

    /// Adds a buffered commit to the buffer and clears the tree-alone hint (under `reads`,
    /// before any reader can see the commit).
    fn add_to_buffer<'a>(
        &self,
        _reads: &mut Reads,
        at: CommitAt,
        writes: impl IntoIterator<Item = BufferedWrite<'a>>,
        deltas: &[(TableId, i64)],
    ) {
        let mut buffer = self.buffer.write();
        buffer.commit(at, writes, deltas);
        if !buffer.is_empty() && !crate::mutants::active("reads-skip-overlay") {
            self.tree_alone.store(false, Ordering::Release);
        }
    }

    /// The drain's writes: the newest buffered version of each key not drained, in (table,
    /// key) order, copied out. Requires: the writer lock held until [`Visible::drained`].
    pub(super) fn drain_writes(&self) -> OwnedWrites {
        let mut writes = OwnedWrites::default();
        for write in self.buffer.read().drain_writes() {
            writes.push(write.table, write.key, write.value);
        }
        writes
    }

    /// The next chunk of a drain in chunks, freezing the live generation first when none is
    /// under way (`txn/buffer.rs`, "Chunks"); `None`: nothing buffered. Requires: the writer
    /// lock held until [`Visible::chunk_drained`].
    pub(super) fn buffer_next_chunk(&self, max_bytes: usize) -> Option<Chunk> {
        self.buffer.write().next_chunk(max_bytes)
    }

    /// The chunk whose commit ends at `lsn` applied [`Visible::buffer_next_chunk`]'s writes,
    /// through `through_key`, changing each table's row count by `deltas`. Requires: what
    /// [`Visible::drained`] requires of a drain.
    pub(super) fn chunk_drained(
        &self,
        lsn: u64,
        through_key: (TableId, &[u8]),
        deltas: &[(TableId, i64)],
        last: bool,
    ) {
        let _reads = self.reads.lock();
        self.buffer
            .write()
            .chunk_drained(lsn, through_key, deltas, last);
    }

    /// A chunk replay read, ending at `lsn`, that changed each table's row count by
    /// `deltas`; a drain's last chunk forgets the versions through `forget_through`.
    /// Requires: no reader holds a snapshot (an open, a read-only handle's refresh).
    pub(super) fn buffer_chunk_replayed(
        &self,
        lsn: u64,
        deltas: &[(TableId, i64)],
        forget_through: Option<u64>,
    ) {
        let reads = self.reads.lock();
        assert!(
            reads.snapshots.is_empty(),
            "a buffer rebuilt under a reader"
        );
        self.buffer
            .write()
            .replayed_chunk(lsn, deltas, forget_through);
    }

    /// Whether a drain in chunks is under way.
    pub(super) fn buffer_draining(&self) -> bool {
        self.buffer.read().draining()
    }

    /// The drain whose commit ends at `lsn` applied [`Visible::drain_writes`] to the tree.
    /// Requires: the writer lock held since `drain_writes` (no commit buffered between), and
    /// the drain not yet [`Visible::committed`]: no reader is at or past `lsn` yet, and one
    /// below it goes on reading the drained versions, which the tree's values from before
    /// the drain (the overlay's) would hide otherwise.
    pub(super) fn drained(&self, lsn: u64) {
        let _reads = self.reads.lock();
        self.buffer.write().drained(lsn);
    }

    /// Estimated bytes of the live generation's versions: the drain's threshold.
    pub(super) fn buffer_live_bytes(&self) -> usize {
        self.buffer.read().live_bytes()
    }

    /// Estimated bytes of the versions not drained: the live generation's and a frozen one's.
    pub(super) fn buffer_undrained_bytes(&self) -> usize {
        self.buffer.read().undrained_bytes()
    }

    /// Where the first buffered record not drained begins: a checkpoint's redo point may not
    /// pass it.
    pub(super) fn buffer_redo_floor(&self) -> Option<u64> {
        self.buffer.read().redo_floor()
    }

    /// What the writer sees of `key` in the buffer: the newest version not drained, or
    /// [`Seen::Tree`].
    pub(super) fn buffered_newest(&self, table: TableId, key: &[u8]) -> Seen {
        self.buffer.read().seen(table, key, u64::MAX)
    }

    /// The greatest key of `table` with a buffered version not drained, copied out.
    pub(super) fn buffer_undrained_last_key(&self, table: TableId) -> Option<Vec<u8>> {
        self.buffer
            .read()
            .undrained_last_key(table)
            .map(<[u8]>::to_vec)
    }

    /// The rows buffered commits added to `table` (less those they removed) that a reader at
    /// `snapshot` sees and the tree does not hold for it.
    pub(super) fn buffered_rows(&self, table: TableId, snapshot: u64) -> i64 {
        self.buffer.read().count_delta(table, snapshot)
    }

    /// What a reader at `snapshot` sees of `key` in `table` in the overlay: the value it
    /// keeps from before a commit the reader does not see, or [`Seen::Tree`].
    pub(super) fn overlay_seen(&self, table: TableId, key: &[u8], snapshot: u64) -> Seen {
        if self.overlay_empty() {
            return Seen::Tree;
        }
        self.reads.lock().overlay.seen(table, key, snapshot)
    }

    /// Whether a drain (`chunk`: a chunk of a drain in chunks) may keep no older values of
    /// its keys for readers: every version the generations it drains hold (a chunk: the
    /// frozen one) is at or before the horizon (the oldest snapshot any reader holds or will
    /// get), so every reader before the drain finds, in the generation that stays for it, its
    /// own version of each key the drain writes, the newest being what the drain puts in the
    /// tree. Requires: the tree lock, exclusively (no snapshot registers meanwhile).
    pub(super) fn buffer_answers_every_reader(&self, chunk: bool) -> bool {
        let horizon = self.reads.lock().horizon(self.hint());
        let buffer = self.buffer.read();
        let end = if chunk {
            buffer.frozen_last_end()
        } else {
            buffer.undrained_last_end()
        };
        crate::mutants::active("drain-drops-needed-befores")
            || end.is_some_and(|end| end <= horizon)
    }

    /// What a reader at `snapshot` sees of `key` in the buffer alone: its newest buffered
    /// version at or before the snapshot, or [`Seen::Tree`] (read the overlay and the tree).
    pub(super) fn buffer_seen(&self, table: TableId, key: &[u8], snapshot: u64) -> Seen {
        if crate::mutants::active("reads-skip-buffer") {
            return Seen::Tree;
        }
        self.buffer.read().seen(table, key, snapshot)
    }

    /// The keys of `table` within the bounds that a reader at `snapshot` sees a buffered
    /// version of, with that version (`None`: deleted), in key order, copied out: the
    /// buffer's part of [`Visible::changed_in`].
    pub(super) fn buffer_changed_in(
        &self,
        table: TableId,
        bounds: (Bound<&[u8]>, Bound<&[u8]>),
        snapshot: u64,
    ) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        if crate::mutants::active("reads-skip-buffer") {
            return Vec::new();
        }
        self.buffer.read().changed_in(table, bounds, snapshot)
    }

    /// [`Visible::buffer_seen`] for a reader whose snapshot no one registered: at the later
    /// of `snapshot` and the visible lsn as the buffer is read. A prune keeps the newest
    /// version at or before the horizon, which is at most that visible lsn (the hint moves
    /// before the prune, under `reads`; the buffer's lock orders the prune before this read).
    pub(super) fn buffer_seen_latest(&self, table: TableId, key: &[u8], snapshot: u64) -> Seen {
        if crate::mutants::active("reads-skip-buffer") {
            return Seen::Tree;
        }
        let buffer = self.buffer.read();
        let at = if crate::mutants::active("latest-read-at-its-first-snapshot") {
            snapshot
        } else {
            snapshot.max(self.hint())
        };
        buffer.seen(table, key, at)
    }

    /// Whether a commit after `snapshot` found `table` empty: the reader's view of it is the
    /// overlay's keys alone.
    pub(super) fn hides_table(&self, table: TableId, snapshot: u64) -> bool {
        !self.overlay_empty() && self.reads.lock().overlay.hides_table(table, snapshot)
    }

    /// The keys of `table` between `lower` and `upper` whose value a reader at `snapshot`
    /// sees in the overlay rather than the tree, with that value (`None`: absent for it).
    pub(super) fn changed_in(
        &self,
        table: TableId,
        (lower, upper): (Bound<&[u8]>, Bound<&[u8]>),
        snapshot: u64,
    ) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        let overlay: Vec<(Vec<u8>, Option<Vec<u8>>)> = if self.overlay_empty() {
            // Only the buffer holds anything (no lock, no bounds built to search an empty map).
            Vec::new()
        } else {
            let reads = self.reads.lock();
            reads
                .overlay
                .keys_in(table, lower, upper)
                .filter_map(|key| match reads.overlay.seen(table, key, snapshot) {
                    Seen::Tree => None,
                    Seen::Value(value) => Some((key.to_vec(), value)),
                })
                .collect()
        };
        let buffered = self
            .buffer
            .read()
            .changed_in(table, (lower, upper), snapshot);
        if buffered.is_empty() || crate::mutants::active("reads-skip-buffer") {
            return overlay;
        }
        if overlay.is_empty() {
            return buffered;
        }
        // A key's buffered version is newer than what the overlay keeps of the tree.
        let mut merged: BTreeMap<Vec<u8>, Option<Vec<u8>>> = overlay.into_iter().collect();
        merged.extend(buffered);
        merged.into_iter().collect()
    }

    /// Calls `f` with the changes a reader at `snapshot` sees in the window of `table`, as
    /// [`Visible::changed_in`] gives them, borrowed from the buffer (held shared meanwhile)
    /// while the overlay is empty: a scan batch merges them without copying them first.
    pub(super) fn with_changes_in<R>(
        &self,
        table: TableId,
        bounds: (Bound<&[u8]>, Bound<&[u8]>),
        snapshot: u64,
        f: impl FnOnce(&[(&[u8], Option<&[u8]>)]) -> R,
    ) -> R {
        if self.overlay_empty() {
            if crate::mutants::active("reads-skip-buffer") {
                return f(&[]);
            }
            let buffer = self.buffer.read();
            return f(&buffer.seen_in(table, bounds, snapshot));
        }
        let owned = self.changed_in(table, bounds, snapshot);
        let borrowed: Vec<(&[u8], Option<&[u8]>)> = owned
            .iter()
            .map(|(key, value)| (key.as_slice(), value.as_deref()))
            .collect();
        f(&borrowed)
    }

    /// Keys the overlay keeps older values of now.
    pub(super) fn overlay_keys(&self) -> usize {
        self.reads.lock().overlay.len()
    }

    /// A read-only handle's refresh moved its snapshot to `end`: every commit up to it is
    /// visible, and no reader may hold a snapshot meanwhile (the handle is borrowed mutably).
    pub(super) fn restart_at(&mut self, end: u64) {
        let reads = self.reads.get_mut();
        assert!(
            reads.snapshots.is_empty(),
            "a refresh under a read transaction"
        );
        reads.visibility = Visibility::new(end);
        super::advance_mark(&self.hint, end, "the visible lsn");
    }

    /// Checks the tracker, the snapshots and the overlay against `end` (the log's end, read
    /// under the lock, after the marks); returns the visible lsn and the newest snapshot.
    pub(super) fn check_invariants(&self, end: impl FnOnce() -> u64) -> (u64, Option<u64>) {
        let reads = self.reads.lock();
        reads.visibility.check_invariants();
        for (&snapshot, &count) in &reads.snapshots {
            assert!(count > 0, "snapshot {snapshot} registered with no reader");
        }
        reads.overlay.check_invariants(end());
        let buffer = self.buffer.read();
        buffer.check_invariants();
        if !buffer.is_empty() {
            assert!(!self.tree_alone(), "tree_alone set with versions buffered");
        }
        if !reads.overlay.is_empty() && !crate::mutants::active("reads-skip-overlay") {
            assert!(
                !self.overlay_empty(),
                "overlay_empty set with entries in the overlay"
            );
        }
        assert_eq!(
            self.hint(),
            reads.visibility.visible_lsn(),
            "the published visible lsn differs from the tracker's"
        );
        (
            reads.visibility.visible_lsn(),
            reads.snapshots.keys().next_back().copied(),
        )
    }
}
