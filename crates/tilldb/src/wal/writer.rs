//! [`Wal`]: appending, group commit, durability levels, the background flusher, segment
//! switching and recycling, fail-stop on I/O errors. Opening is in `open.rs`, the locked state
//! in `state.rs`, the write and flush stages in `stages.rs`, segment switching in `spare.rs`.
//!
//! Locking: one mutex (`Shared::state`) guards everything below. It is held to reserve an lsn
//! and copy a record (no I/O, no allocation beyond an occasional buffer growth) and to hand
//! stages over; every write, flush and segment preparation runs with it released.

use super::group_commit::{Need, Relay, Role, WaitSlot, Waiter};
use super::reader::{self, ChainSegment, WalRecord};
use super::record::{self, HEADER_BYTES as RECORD_HEADER_BYTES, RecordKind};
use super::segment::{self, Segment, SegmentHeader};
use super::{Lsn, TailGuard, WalOptions};
use crate::crypt::{DatabaseKeys, RecordSealer};
use crate::error::{Error, IoOp, Result};
use crate::io::Storage;
use crate::{Durability, FlushMethod};
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod open;
mod spare;
mod stages;
mod state;
mod trim;

use state::{Chunk, SlotCopy, State, TailSlots};

/// The write-ahead log. Share it between threads with `Arc`; dropping it flushes what was
/// appended (errors ignored; call [`Wal::close`] to see them).
#[derive(Debug)]
pub struct Wal {
    shared: Arc<Shared>,
    /// The interval flusher and the segment preparer.
    background: Mutex<Vec<JoinHandle<()>>>,
}

/// The log's counters since open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WalStats {
    /// Records appended.
    pub appends: u64,
    /// Write stages run (each writes every pending group of records).
    pub writes: u64,
    /// Of those, the ones written through to the device by a write-through method (each is
    /// a flush of its own); the others went to the OS's cache.
    pub through_writes: u64,
    /// Flush stages run (each flushes every segment written since the last).
    pub flushes: u64,
    /// Bytes written to segment files, block padding included, and an open block counted
    /// again each time a write rewrites it.
    pub bytes_written: u64,
    /// Bytes the log grew by in written records and pads: each lsn once, however often its
    /// block was written.
    pub log_bytes: u64,
}

impl WalStats {
    /// Flushes that reached the device: flush stages, and writes made through to it by a
    /// write-through method (each its own flush).
    #[must_use]
    pub fn device_flushes(self) -> u64 {
        self.flushes + self.through_writes
    }

    /// The counts between `before` (taken earlier) and these.
    #[must_use]
    pub fn since(self, before: WalStats) -> WalStats {
        WalStats {
            appends: self.appends - before.appends,
            writes: self.writes - before.writes,
            through_writes: self.through_writes - before.through_writes,
            flushes: self.flushes - before.flushes,
            bytes_written: self.bytes_written - before.bytes_written,
            log_bytes: self.log_bytes - before.log_bytes,
        }
    }
}

#[derive(Debug)]
struct Shared {
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    /// An encrypted database's keys: its segments are sealed (version 3).
    keys: Option<Arc<DatabaseKeys>>,
    options: WalOptions,
    method: FlushMethod,
    block_bytes: u32,
    state: Mutex<State>,
    /// Signalled when a spare segment is ready, or preparing one failed.
    spare_ready: Condvar,
    /// Wakes the interval flusher early (close).
    background_wake: Condvar,
    /// Wakes the segment preparer: the spare was taken, or the log is closing.
    preparer_wake: Condvar,
    /// Signalled when the committers a flush released have all appended again.
    gather_done: Condvar,
    /// Wakes the committers a stage released, helped by the ones it woke.
    relay: Relay,
    appends: AtomicU64,
    writes: AtomicU64,
    through_writes: AtomicU64,
    flushes: AtomicU64,
    bytes_written: AtomicU64,
    log_bytes: AtomicU64,
    /// `progress.written` and `progress.durable`, published (stored under the state lock,
    /// after the field) so that a committer whose record is there already returns from
    /// [`Wal::wait`] without the lock: the committers a flush released come back all at once.
    written_mark: AtomicU64,
    durable_mark: AtomicU64,
}

/// Free segments kept for recycling after a release; more are deleted.
const FREE_SEGMENTS_KEPT: usize = 4;
/// Longest a flush leader waits for released committers to return (see `Shared::gather`).
const GATHER_MAX: Duration = Duration::from_millis(10);
/// Shortest idle gap after which a flush leader stops waiting for returners.
const GATHER_IDLE_MIN: Duration = Duration::from_micros(20);
/// Starting capacity of a chunk buffer; it grows as a group needs.
const CHUNK_BYTES_INITIAL: usize = 64 << 10;
/// Chunk buffers kept for reuse: one being written, one being filled, and spares for a
/// segment switch.
const BUFFERS_POOLED: usize = 4;

impl Wal {
    /// Largest payload one record can carry with these options.
    #[must_use]
    pub fn max_payload_bytes(&self) -> usize {
        self.shared.max_payload_bytes()
    }

    /// Appends a record and returns its end lsn, without waiting for any I/O (unless the log
    /// buffer is full, when the caller helps write it out).
    pub fn append(&self, payload: &[u8]) -> Result<Lsn> {
        self.shared.append(payload)
    }

    /// Appends a record and returns once it is as durable as `durability` asks.
    pub fn commit(&self, payload: &[u8], durability: Durability) -> Result<Lsn> {
        let lsn = self.shared.append(payload)?;
        self.wait(lsn, durability)?;
        Ok(lsn)
    }

    /// Waits until `lsn` is as durable as `durability` asks (`Lazy` does not wait).
    pub fn wait(&self, lsn: Lsn, durability: Durability) -> Result<()> {
        match need_of(durability) {
            // Already there: nothing to wait for or lead. A failure of the log after that
            // point does not take the record back, so no poison check either.
            Some(need) if self.shared.reached(lsn.0, need) => Ok(()),
            Some(need) => self.shared.wait_for(lsn.0, need),
            None => self.shared.check_poison(),
        }
    }

    /// Parks nobody, and wakes each `(lsn, durability, slot)` once `lsn` is as durable as
    /// `durability` asks, or once its thread should lead a stage, or the log fails: they join
    /// the log's waiters, and the wake-up plan runs over all of them at once (every waiter
    /// already satisfied, plus one leader per free stage), as after a completed stage. A woken
    /// thread then calls [`Wal::wait`], which returns at once or leads the stage. So threads
    /// whose records another appended for them (the commit queue, `db/commit/`) each sleep
    /// once, in the same queue as the committers that appended their own, and a batch costs
    /// one lock hold here and at most one wake-up beyond the ones its commits need.
    pub(crate) fn enlist(&self, waiters: Vec<(Lsn, Durability, Arc<WaitSlot>)>) {
        if waiters.is_empty() {
            return;
        }
        let mut st = self.shared.state.lock();
        let mut now = Vec::new();
        for (lsn, durability, slot) in waiters {
            match need_of(durability) {
                Some(need) if !st.poisoned => st.waiters.push(Waiter {
                    lsn: lsn.0,
                    need,
                    slot,
                }),
                // `Lazy`, or a poisoned log (the waiter learns it in `wait`).
                _ => now.push(slot),
            }
        }
        now.extend(st.take_wakeups());
        drop(st);
        self.shared.relay.wake_all(now);
    }

    /// Parks the calling thread on its `slot` until woken, then wakes one more committer
    /// from the log's wake-up relay: how every committer the log may wake sleeps (the commit
    /// queue's, `db/commit/`, as the log's own waiters in `wait`).
    pub(crate) fn park(&self, slot: &WaitSlot) {
        self.shared.park(slot);
    }

    /// `Err` once the log is poisoned (a write or flush failed), naming the failure.
    pub fn check_poison(&self) -> Result<()> {
        self.shared.check_poison()
    }

    /// Writes everything appended so far to the OS.
    pub fn flush(&self) -> Result<()> {
        let lsn = self.shared.state.lock().progress.appended;
        self.shared.wait_for(lsn, Need::Written)
    }

    /// Makes everything appended so far durable.
    pub fn sync(&self) -> Result<()> {
        let lsn = self.shared.state.lock().progress.appended;
        self.shared.wait_for(lsn, Need::Durable)
    }

    /// The end of the appended log.
    #[must_use]
    pub fn end_lsn(&self) -> Lsn {
        Lsn(self.shared.state.lock().progress.appended)
    }

    /// A commit logged in more than one record begins at the end now: until
    /// [`Wal::end_parts`], [`Wal::boundary_end`] is where its first record starts. One at a
    /// time (commits append under the database's writer lock).
    pub fn begin_parts(&self) {
        let mut st = self.shared.state.lock();
        assert!(
            st.parts_from.is_none(),
            "a commit logged in parts began inside another (from {:?})",
            st.parts_from
        );
        st.parts_from = Some(st.progress.appended);
    }

    /// The commit of [`Wal::begin_parts`] has appended its last record.
    pub fn end_parts(&self) {
        let mut st = self.shared.state.lock();
        assert!(st.parts_from.is_some(), "parts ended that never began");
        st.parts_from = None;
    }

    /// The log's end at a commit boundary: [`Wal::end_lsn`], or, while a commit is logged in
    /// several records, where the first of them starts. A redo point must be one: redo from
    /// inside a commit reads its later records without its first (the buffer pool's redo
    /// point for a page changed while its copy is written back, `writeback.rs`).
    pub fn boundary_end(&self) -> Lsn {
        let st = self.shared.state.lock();
        Lsn(st.parts_from.unwrap_or(st.progress.appended))
    }

    /// [`Wal::end_lsn`], or `Err` once the log is poisoned: both under one take of the log's
    /// lock (a commit asks for both, and the lock is the log's most contended).
    pub fn end_lsn_checked(&self) -> Result<Lsn> {
        let st = self.shared.state.lock();
        if st.poisoned {
            return Err(Error::poisoned_by(st.poison_cause.as_deref()));
        }
        Ok(Lsn(st.progress.appended))
    }

    /// Everything before this lsn is durable.
    #[must_use]
    pub fn durable_lsn(&self) -> Lsn {
        Lsn(self.shared.state.lock().progress.durable)
    }

    /// How far the log is written and durable, read together (separate calls can see the
    /// durable mark pass the written one read a moment before).
    #[must_use]
    pub fn written_and_durable(&self) -> (Lsn, Lsn) {
        let st = self.shared.state.lock();
        (Lsn(st.progress.written), Lsn(st.progress.durable))
    }

    /// Everything before this lsn is written to the OS.
    #[must_use]
    pub fn written_lsn(&self) -> Lsn {
        Lsn(self.shared.state.lock().progress.written)
    }

    /// Committers parked in the log's queue, waiting for a stage to carry their records
    /// (tests use it to know a thread is asleep in [`Wal::wait`], not about to call it).
    #[must_use]
    pub fn waiters(&self) -> usize {
        self.shared.state.lock().waiters.len()
    }

    /// Counters since open.
    #[must_use]
    pub fn stats(&self) -> WalStats {
        let s = &self.shared;
        WalStats {
            appends: s.appends.load(Ordering::Relaxed),
            writes: s.writes.load(Ordering::Relaxed),
            through_writes: s.through_writes.load(Ordering::Relaxed),
            flushes: s.flushes.load(Ordering::Relaxed),
            bytes_written: s.bytes_written.load(Ordering::Relaxed),
            log_bytes: s.log_bytes.load(Ordering::Relaxed),
        }
    }

    /// The records written to the OS, from `from` (a record boundary) on.
    pub fn read_from(&self, from: Lsn) -> Result<Vec<WalRecord>> {
        let (chain, limit) = self.chain_written();
        reader::read_records(
            &*self.shared.storage,
            (&chain, self.shared.keys.as_deref()),
            from,
            limit,
        )
    }

    /// [`Wal::read_from`], showing `visit` each record with its payload borrowed, one
    /// segment in memory at a time, instead of collecting them (redo of hundreds of MiB of
    /// log); the first error `visit` returns ends the read.
    pub fn visit_from(
        &self,
        from: Lsn,
        visit: &mut dyn FnMut(reader::WalRecordRef<'_>) -> Result<()>,
    ) -> Result<()> {
        let (chain, limit) = self.chain_written();
        reader::visit_records(
            &*self.shared.storage,
            (&chain, self.shared.keys.as_deref()),
            from,
            limit,
            visit,
        )
    }

    /// The segments that hold records, and the lsn up to which they were written to the OS.
    fn chain_written(&self) -> (Vec<ChainSegment>, Lsn) {
        let (chain, limit) = {
            let st = self.shared.state.lock();
            let mut chain = st.chain.clone();
            let mut segments: Vec<&Arc<Segment>> = st
                .dirty
                .iter()
                .chain(st.chunks.iter().map(|c| &c.segment))
                .collect();
            segments.dedup_by_key(|s| s.header.generation);
            for seg in segments {
                if chain
                    .last()
                    .is_none_or(|c: &ChainSegment| c.header.generation < seg.header.generation)
                {
                    chain.push(ChainSegment {
                        header: seg.header,
                        path: seg.path.clone(),
                        end_lsn: seg.end_lsn(),
                    });
                }
            }
            (chain, st.progress.written)
        };
        (chain, Lsn(limit))
    }

    /// The oldest lsn the log can be kept from within `bytes` of segment files: keeping it
    /// from there keeps the closed segments from the one holding it on, plus the segment
    /// being written, and their files total at most `bytes` (the newest segment alone may
    /// be more). `Lsn(0)` when every segment the log holds fits: keeping more costs nothing
    /// (and an lsn the log no longer holds is no reason to give up on it here). Retention
    /// measured on disk, not in lsns: every open starts a fresh segment, so a few kilobytes
    /// of lsns can span many 64 MiB files (issue 34).
    #[must_use]
    pub fn lsn_kept_within(&self, bytes: u64) -> Lsn {
        let st = self.shared.state.lock();
        // The segment being written is kept whatever the answer.
        let mut total = self.shared.options.segment_bytes;
        let mut oldest = st.chain.last().map_or(Lsn(0), |s| Lsn(s.end_lsn));
        for segment in st.chain.iter().rev() {
            total += segment.header.segment_bytes;
            if total > bytes {
                return oldest;
            }
            assert!(
                segment.header.base_lsn <= oldest.0,
                "the log's chain is not in lsn order at generation {}",
                segment.header.generation
            );
            oldest = Lsn(segment.header.base_lsn);
        }
        Lsn(0)
    }

    /// Lets closed segments wholly before `lsn` be recycled: the caller (a checkpoint) no
    /// longer needs their records. Segments not yet durable are kept whatever `lsn` says.
    /// Returns how many segments were released. A failed directory flush after removing the
    /// surplus poisons the log, as any failed flush does: the directory's state is unknown.
    pub fn release_before(&self, lsn: Lsn) -> Result<usize> {
        let mut st = self.shared.state.lock();
        let limit = lsn.0.min(st.progress.durable);
        let keep_from = st
            .chain
            .iter()
            .position(|s| s.end_lsn > limit)
            .unwrap_or(st.chain.len());
        let released: Vec<ChainSegment> = st.chain.drain(..keep_from).collect();
        st.free.extend(released.iter().map(|s| s.header.generation));
        st.free.sort_unstable_by(|a, b| b.cmp(a));
        // Delete the oldest: what stays on disk must be a contiguous suffix of the log, since
        // recovery chains segments from the oldest valid one (`free` is sorted newest first).
        let surplus = st.free.len().saturating_sub(FREE_SEGMENTS_KEPT);
        let keep = st.free.len() - surplus;
        let extra: Vec<u64> = st.free.drain(keep..).collect();
        drop(st);
        if !extra.is_empty() {
            let storage = &*self.shared.storage;
            let removed = extra.iter().all(|&g| {
                storage
                    .remove(&self.shared.dir.join(segment::segment_name(g)))
                    .is_ok()
            });
            // A failed removal only leaves a free segment behind, which the next open finds.
            if removed && let Err(e) = storage.flush_dir(&self.shared.dir) {
                return Err(self.shared.state.lock().poison(e));
            }
        }
        Ok(released.len())
    }

    /// Flushes everything, stops the background thread, and reports any error.
    pub fn close(self) -> Result<()> {
        self.stop_background();
        self.shared.check_poison()?;
        self.sync()
    }

    fn stop_background(&self) {
        self.shared.state.lock().closing = true;
        self.shared.background_wake.notify_all();
        self.shared.preparer_wake.notify_all();
        for handle in self.background.lock().drain(..) {
            let _ = handle.join();
        }
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        self.stop_background();
        let _ = self.sync();
    }
}

/// What a commit at `durability` waits for: `None` for `Lazy`, which does not wait.
fn need_of(durability: Durability) -> Option<Need> {
    match durability {
        Durability::Sync if crate::mutants::active("ack-before-flush") => Some(Need::Written),
        Durability::Sync => Some(Need::Durable),
        Durability::Buffered => Some(Need::Written),
        Durability::Lazy => None,
    }
}

fn prepare_segment(
    storage: &dyn Storage,
    dir: &Path,
    (method, keys): (FlushMethod, Option<&DatabaseKeys>),
    header: SegmentHeader,
    free: Option<u64>,
) -> Result<Segment> {
    let mut segment = Segment::prepare(storage, dir, method, header, free)?;
    segment.sealer = match (header.seal, keys) {
        (Some(seal), Some(keys)) => Some(RecordSealer::new(keys, &seal.salt, header.generation)),
        (None, None) => None,
        _ => unreachable!("a log's segments are sealed exactly when it has keys"),
    };
    Ok(segment)
}

/// The header of a new segment: sealed (version 3, with a fresh random salt: a new key for
/// its records, docs/encryption.md section 3) when the log has `keys`.
fn new_segment_header(
    (storage, dir): (&dyn Storage, &Path),
    keys: Option<&DatabaseKeys>,
    (log_block_bytes, segment_bytes): (u32, u64),
    generation: u64,
    base_lsn: u64,
) -> Result<SegmentHeader> {
    let seal = match keys {
        None => None,
        Some(keys) => {
            let mut salt = [0u8; crate::crypt::SEGMENT_SALT_BYTES];
            storage
                .fill_random(&mut salt)
                .map_err(|reason| Error::KeyUnavailable {
                    dir: dir.to_path_buf(),
                    reason,
                })?;
            if crate::mutants::active("segment-salt-not-random") {
                salt = [0; crate::crypt::SEGMENT_SALT_BYTES];
            }
            Some(segment::SegmentSeal {
                cipher: keys.cipher(),
                salt,
            })
        }
    };
    Ok(SegmentHeader {
        version: if seal.is_some() {
            segment::VERSION_SEALED
        } else {
            segment::VERSION
        },
        log_block_bytes,
        segment_bytes,
        generation,
        base_lsn,
        seal,
    })
}

impl Shared {
    fn max_payload_bytes(&self) -> usize {
        let blocks = 1 + super::slot::SLOTS;
        let capacity =
            usize::try_from(self.options.segment_bytes - blocks * u64::from(self.block_bytes))
                .expect("fits usize");
        let tag = if self.keys.is_some() {
            crate::crypt::TAG_BYTES
        } else {
            0
        };
        capacity - RECORD_HEADER_BYTES - tag - self.tail_reserve()
    }

    /// Bytes every segment keeps free after its last data record: the `SegmentEnd` record,
    /// and with padding the largest pad before it (a block plus a record header). `Slots`
    /// pads too, when a block has less room than a slot's trailer.
    fn tail_reserve(&self) -> usize {
        let segment_end = record::segment_end_bytes(self.keys.is_some());
        if self.options.tail == TailGuard::None {
            segment_end
        } else {
            2 * self.block_bytes as usize + segment_end
        }
    }

    /// Whether the log is written (or durable, as `need` says) through `lsn`, from the
    /// published marks: never ahead of the state's.
    fn reached(&self, lsn: u64, need: Need) -> bool {
        let mark = match need {
            Need::Written => &self.written_mark,
            Need::Durable if crate::mutants::active("wait-reads-written-mark") => {
                &self.written_mark
            }
            Need::Durable => &self.durable_mark,
        };
        mark.load(Ordering::Acquire) >= lsn
    }

    /// Wakes the waiters a completed stage released, with the state lock released: unparking
    /// a hundred threads under the lock would make each of them block on it again as it wakes.
    fn wake_unlocked(&self, st: &mut MutexGuard<'_, State>) {
        let slots = st.take_wakeups();
        if !slots.is_empty() {
            MutexGuard::unlocked(st, || self.relay.wake_all(slots));
        }
    }

    /// See [`Wal::park`].
    fn park(&self, slot: &WaitSlot) {
        slot.park();
        self.relay.help();
    }

    fn check_poison(&self) -> Result<()> {
        let st = self.state.lock();
        if st.poisoned {
            Err(Error::poisoned_by(st.poison_cause.as_deref()))
        } else {
            Ok(())
        }
    }

    fn append(&self, payload: &[u8]) -> Result<Lsn> {
        let max = self.max_payload_bytes();
        if payload.len() > max {
            return Err(Error::TooLarge {
                what: "log record",
                bytes: payload.len() as u64,
                max: max as u64,
            });
        }
        let len = record::data_record_len(payload.len(), self.keys.is_some());
        loop {
            let mut st = self.state.lock();
            if st.poisoned {
                return Err(Error::poisoned_by(st.poison_cause.as_deref()));
            }
            if st.pending_bytes() + len > self.options.buffer_bytes_max
                && st.progress.appended > st.progress.written
            {
                let lsn = st.progress.appended;
                drop(st);
                self.wait_for(lsn, Need::Written)?;
                continue;
            }
            let lsn = st.progress.appended;
            let segment_end = st.active().segment.end_lsn();
            if lsn + (len + self.tail_reserve()) as u64 > segment_end {
                self.ensure_spare_room(&mut st, len);
                if !self.switch_segment(&mut st) {
                    drop(st);
                    self.prepare_spare()?;
                }
                continue;
            }
            let chunk = st.chunks.last_mut().expect("active chunk");
            let generation = chunk.segment.header.generation;
            let target = chunk.buf.extend_zeroed(len);
            let written = match &chunk.segment.sealer {
                Some(sealer) => record::encode_sealed(target, generation, lsn, payload, sealer),
                None => record::encode(target, generation, lsn, RecordKind::Data, payload),
            };
            assert_eq!(written, len, "the record's length as reserved");
            st.progress.appended = lsn + len as u64;
            debug_assert!({
                st.check_invariants(self.block_bytes);
                true
            });
            // The published marks are stored under this lock after each change: equal while
            // it is held. Checked in release builds too (two loads per append): a durable
            // mark ahead of the state would let a `Sync` committer return through
            // `Wal::wait`'s lock-free path before its flush (issue 35).
            assert_eq!(
                self.written_mark.load(Ordering::Acquire),
                st.progress.written,
                "the published written mark differs from the log's"
            );
            assert_eq!(
                self.durable_mark.load(Ordering::Acquire),
                st.progress.durable,
                "the published durable mark differs from the log's: a Sync commit could \
                 return before its flush"
            );
            if st.returning > 0 {
                st.returning -= 1;
                if st.returning == 0 {
                    self.gather_done.notify_all();
                }
            }
            self.appends.fetch_add(1, Ordering::Relaxed);
            return Ok(Lsn(st.progress.appended));
        }
    }

    /// Every flush interval: make everything appended durable (`Buffered` and `Lazy` commits).
    fn background(&self) {
        loop {
            {
                let mut st = self.state.lock();
                if st.closing || st.poisoned {
                    return;
                }
                let _ = self
                    .background_wake
                    .wait_for(&mut st, self.options.flush_interval);
                if st.closing || st.poisoned {
                    return;
                }
            }
            let appended = self.state.lock().progress.appended;
            if self.wait_for(appended, Need::Durable).is_err() {
                return; // poisoned: every committer already has its error
            }
        }
    }

    /// Keeps one spare segment ready, so appends rarely wait for a segment to be created, and
    /// the interval flusher never waits behind a preparation.
    fn preparer(&self) {
        loop {
            {
                let mut st = self.state.lock();
                while !st.closing && !st.poisoned && (st.spare.is_some() || st.preparing) {
                    self.preparer_wake.wait(&mut st);
                }
                if st.closing || st.poisoned {
                    return;
                }
            }
            if self.prepare_spare().is_err() {
                // Disk full or similar: retry later; an appender that needs the spare now
                // prepares it itself and gets the error.
                let mut st = self.state.lock();
                let _ = self
                    .preparer_wake
                    .wait_for(&mut st, self.options.flush_interval);
            }
        }
    }
}
