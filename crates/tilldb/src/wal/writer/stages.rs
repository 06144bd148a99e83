//! The write and flush stages of group commit: a committer waits for its lsn to be written
//! or durable, leading the stage that is free (`group_commit.rs` decides who leads and whom
//! to wake); the leader writes the records appended so far, or flushes what was written,
//! with the state lock released, and closes the last block (a tail slot copy, or a pad) before
//! a flush covers it.

use super::{
    Arc, Chunk, Duration, Error, GATHER_IDLE_MIN, GATHER_MAX, Instant, MutexGuard, Need, Ordering,
    Result, Role, Shared, SlotCopy, State, TailGuard, WaitSlot, Waiter, record,
};
use crate::io::AlignedBuf;
use crate::wal::segment::Segment;
use crate::wal::slot;

impl Shared {
    /// Waits until `lsn` reaches `need`, leading the write or flush stage when it is free.
    pub(super) fn wait_for(&self, lsn: u64, need: Need) -> Result<()> {
        let mut st = self.state.lock();
        loop {
            if st.poisoned {
                return Err(Error::poisoned_by(st.poison_cause.as_deref()));
            }
            match st.progress.role(lsn, need) {
                Role::Done => return Ok(()),
                Role::Write | Role::Flush
                    if need == Need::Durable
                        && !st.progress.flushing
                        && !st.progress.writing
                        && st.returning > 0 =>
                {
                    // About to lead the next flush: first let the committers the last flush
                    // released join it, then write what they appended (see `gather`).
                    self.gather(&mut st);
                    if st.progress.appended > st.progress.closed && !st.progress.writing {
                        self.write_stage(&mut st, true)?;
                    }
                }
                Role::Write => {
                    let durable_wanted =
                        need == Need::Durable || st.waiters.iter().any(|w| w.need == Need::Durable);
                    self.write_stage(&mut st, durable_wanted)?;
                }
                Role::Flush => self.flush_stage(&mut st)?,
                Role::Wait => {
                    let slot = WaitSlot::for_current_thread();
                    st.waiters.push(Waiter {
                        lsn,
                        need,
                        slot: Arc::clone(&slot),
                    });
                    MutexGuard::unlocked(&mut st, || self.park(&slot));
                }
            }
        }
    }

    /// Takes every pending chunk and writes it, leaving a new active chunk that starts with a
    /// copy of the partly filled tail block (rewritten, same bytes first, by the next write).
    ///
    /// A write that starts while no flush runs *closes* its last block, which the flush that
    /// follows may then acknowledge: with `TailGuard::Slots` it writes that block to the free
    /// tail slot instead of its home (`slot.rs`), with `TailGuard::Pad` (or a block too full
    /// for a slot) it pads it. A write made while a flush runs leaves the block open, and the
    /// flush that follows this one starts with a closing write (`group_commit.rs`).
    ///
    /// Under a write-through method a write is its own flush when `durable_wanted` (a
    /// committer waits for `Sync`) and the log is durable as far as it is written: it goes
    /// through the log's handle and closes its last block. Otherwise (only `Buffered` or
    /// `Lazy` records wait, or earlier buffered writes are not durable yet) it goes through
    /// the segment's buffered handle, costs no device write, and is made durable by a flush
    /// stage, exactly as under `fdatasync`: so a buffered write is never followed by a
    /// write-through one that could reach the device before it, and the durable log is
    /// always a prefix of the written one. Under `direct` (`O_DIRECT`, flushed by
    /// `fdatasync`) a write no `Sync` committer waits for goes through the buffered handle
    /// too, instead of to the device; the flush stage's `fdatasync` covers both handles (it
    /// flushes the file).
    pub(super) fn write_stage(
        &self,
        st: &mut MutexGuard<'_, State>,
        durable_wanted: bool,
    ) -> Result<()> {
        assert!(!st.progress.writing);
        st.progress.writing = true;
        // The log's own handle, or the segment's buffered one (`Segment::writer`).
        let by_log_handle = durable_wanted
            && (!self.method.is_write_through()
                || st.progress.durable == st.progress.written
                || crate::mutants::active("buffered-then-through"));
        let through = self.method.is_write_through() && by_log_handle;
        if through && !crate::mutants::active("buffered-then-through") {
            // The log durable as far as written means every buffered write was covered by
            // a flush that began after it, and that flush took it off the list.
            assert!(
                !st.progress.flushing && st.dirty_buffered.is_empty(),
                "a write-through write with buffered writes not flushed"
            );
        }
        let close = !st.progress.flushing || through;
        let block = self.block_bytes as usize;
        let used = st.active().buf.len() % block;
        let shadow = self.options.tail == TailGuard::Slots
            && close
            && !st.progress.flushing
            && used > 0
            && used <= block - slot::TRAILER_BYTES;
        if self.options.tail != TailGuard::None && close && !shadow {
            self.pad_active_block(st);
        }
        let target = st.progress.appended;
        let mut buf = st.buffer();
        let last = st.active();
        let tail = last.buf.len() % block;
        let kept = last.buf.len() - tail;
        buf.extend_from_slice(&last.buf[kept..]);
        let open_from = last.start_lsn + kept as u64;
        let segment = Arc::clone(&last.segment);
        let next = Chunk {
            segment: Arc::clone(&segment),
            file_offset: last.file_offset + kept as u64,
            start_lsn: open_from,
            buf,
        };
        // The copy of the tail block for a slot, made under the lock like the chunk's.
        let slot_write = shadow.then(|| {
            assert_eq!(tail, used, "a shadowed write was padded");
            self.slot_copy(st, kept, open_from)
        });
        st.progress.shadowing = slot_write.is_some();
        let mut taken = std::mem::replace(&mut st.chunks, vec![next]);
        let result = MutexGuard::unlocked(st, || {
            let slot = slot_write
                .as_ref()
                .map(|(copy, at, _)| (&**copy, *at, kept));
            write_chunks(&mut taken, &segment, slot, block, by_log_handle)
        });
        st.progress.writing = false;
        st.progress.shadowing = false;
        let bytes = match result {
            Ok(bytes) => bytes,
            Err(e) => return Err(st.poison(e)),
        };
        if let Some((copy, _, made)) = slot_write {
            st.slot_buf = Some(copy);
            if through {
                st.slots.durable = Some(made);
            } else {
                st.slots.written = Some(made);
            }
        }
        self.writes.fetch_add(1, Ordering::Relaxed);
        if through {
            self.through_writes.fetch_add(1, Ordering::Relaxed);
        }
        self.bytes_written.fetch_add(bytes, Ordering::Relaxed);
        self.log_bytes
            .fetch_add(target - st.progress.written, Ordering::Relaxed);
        for c in taken {
            note_written(st, &c.segment, by_log_handle);
            st.close_segment_if_done(&c.segment);
            st.recycle_buffer(c.buf);
        }
        assert!(target >= st.progress.written, "written lsn went backwards");
        st.progress.written = target;
        self.written_mark.store(target, Ordering::Release);
        if crate::mutants::active("durable-mark-at-write") {
            self.durable_mark.store(target, Ordering::Release);
        }
        let closed = self.closed_by_write(st.progress.closed, shadow, open_from, target);
        assert!(
            closed >= st.progress.closed && closed <= target,
            "closed lsn {closed} outside [{}, {target}]",
            st.progress.closed
        );
        st.progress.closed = closed;
        if through {
            assert_eq!(closed, target, "a write-through write left its block open");
            st.progress.durable = target;
            self.durable_mark.store(target, Ordering::Release);
            st.check_tail_covered(self.block_bytes, self.options.tail);
        }
        self.wake_unlocked(st);
        Ok(())
    }

    /// How far the log is closed after a write that ended at `target` with its last block
    /// from `open_from` (`closed` before it; `shadow`: it wrote a slot copy). Unguarded, every
    /// write may be rewritten (the documented cost of `TailGuard::None`); guarded, everything
    /// before the open block is closed, and with a slot copy the open block's bytes too. A
    /// write left open (a flush runs) does not reopen what an earlier write's slot copy
    /// closed: the flush running began after that copy was written, and makes it the durable
    /// one.
    fn closed_by_write(&self, closed: u64, shadow: bool, open_from: u64, target: u64) -> u64 {
        if self.options.tail == TailGuard::None || shadow {
            target
        } else {
            open_from.max(closed)
        }
    }

    /// A copy of the active chunk's partly filled tail block (from `kept`, at lsn
    /// `open_from`) for the slot that does not hold the durable copy: the slot block, its
    /// file offset, and what it holds.
    fn slot_copy(
        &self,
        st: &mut State,
        kept: usize,
        open_from: u64,
    ) -> (AlignedBuf, u64, SlotCopy) {
        let segment = Arc::clone(&st.active().segment);
        let generation = segment.header.generation;
        let index = st.slots.next(generation);
        let mut copy = st
            .slot_buf
            .take()
            .unwrap_or_else(|| AlignedBuf::zeroed(self.block_bytes as usize));
        let content = &st.active().buf[kept..];
        slot::encode(
            &mut copy,
            generation,
            open_from,
            content,
            st.progress.durable,
        );
        let made = SlotCopy {
            generation,
            index,
            block_lsn: open_from,
            end: st.progress.appended,
        };
        (copy, slot::offset(&segment.header, index), made)
    }

    /// Closes the active chunk's partly filled block with a `Pad` record (at least a header
    /// and its 8-byte durable mark, so a smaller gap pads into the next block as well). The
    /// mark is the lsn the log is durable to now: recovery uses it to tell a record damaged
    /// after it was durable from a torn tail (`record.rs`).
    pub(super) fn pad_active_block(&self, st: &mut State) {
        let block = self.block_bytes as usize;
        let used = st.active().buf.len() % block;
        if used == 0 {
            return;
        }
        let tagged = self.keys.is_some();
        let mut pad = block - used;
        if pad < record::pad_min_bytes(tagged) {
            pad += block;
        }
        let lsn = st.progress.appended;
        let segment = &st.active().segment;
        let generation = segment.header.generation;
        assert!(
            lsn + (pad + record::segment_end_bytes(tagged)) as u64 <= segment.end_lsn(),
            "no room to pad: the tail reserve was not kept"
        );
        let durable = st.progress.durable;
        assert!(durable <= lsn, "durable past the appended log");
        let chunk = st.chunks.last_mut().expect("active chunk");
        let target = chunk.buf.extend_zeroed(pad);
        let sealer = chunk.segment.sealer.as_ref();
        record::encode_pad(target, (generation, sealer), lsn, pad, durable);
        st.progress.appended = lsn + pad as u64;
        assert!(
            st.active().buf.len().is_multiple_of(block),
            "pad did not reach a block boundary"
        );
    }

    /// Flushes every segment written since the last flush began.
    pub(super) fn flush_stage(&self, st: &mut MutexGuard<'_, State>) -> Result<()> {
        assert!(!st.progress.flushing);
        st.progress.flushing = true;
        // Not `written`: the open block will be written again, so nothing in it may be
        // acknowledged yet.
        let target = if crate::mutants::active("flush-covers-open-block") {
            st.progress.written
        } else {
            st.progress.closed
        };
        // Under a write-through method only the segments written through their buffered
        // handles need a flush (its other writes were durable as they returned).
        let written = std::mem::take(&mut st.dirty);
        let buffered = std::mem::take(&mut st.dirty_buffered);
        let segments = if self.method.is_write_through() {
            buffered
        } else {
            written
        };
        let flush_all = || {
            segments
                .iter()
                .try_for_each(|s| s.buffered.as_deref().unwrap_or(&*s.file).flush())
        };
        let promote = st.slots.written;
        let started = Instant::now();
        let result = MutexGuard::unlocked(st, flush_all);
        let result = if result.is_err() && crate::mutants::active("retry-failed-fsync") {
            MutexGuard::unlocked(st, flush_all)
        } else {
            result
        };
        let flush_ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        st.progress.flushing = false;
        if let Err(e) = result {
            return Err(st.poison(e));
        }
        self.flushes.fetch_add(1, Ordering::Relaxed);
        assert!(target >= st.progress.durable, "durable lsn went backwards");
        st.progress.durable = target;
        self.durable_mark.store(target, Ordering::Release);
        // No slot write ran during the flush (`Progress::shadowing`, and a closing write
        // starts only while no flush runs), so the newest slot copy written before it is
        // durable now.
        if let Some(made) = promote {
            assert_eq!(
                st.slots.written,
                Some(made),
                "a slot was written during a flush"
            );
            st.slots.durable = Some(made);
            st.slots.written = None;
        }
        st.check_tail_covered(self.block_bytes, self.options.tail);
        st.flush_ns_ewma = if st.flush_ns_ewma == 0 {
            flush_ns
        } else {
            (st.flush_ns_ewma * 7 + flush_ns) / 8
        };
        if self.options.adaptive_gather {
            st.returning = st
                .waiters
                .iter()
                .filter(|w| w.need == Need::Durable && w.lsn <= target)
                .count();
        }
        self.wake_unlocked(st);
        Ok(())
    }

    /// Before a flush that nothing else is flushing, waits for the committers the previous
    /// flush released to append again, while they keep arriving, for at most half a flush.
    ///
    /// Why: when flush k completes, the committers it released append their next records
    /// microseconds later. A leader that starts flush k+1 at once leaves them all for flush
    /// k+2, and in a closed loop the committers split into two groups that take turns: every
    /// commit waits two flushes and each flush carries half the threads (measured: 32 of 64
    /// threads per flush with an 8 ms flush). Waiting for the returners while they arrive,
    /// bounded by a fraction of the flush time, merges the groups. It costs nothing when no one returns
    /// (one committer, or an open workload), since `returning` is then zero.
    ///
    /// Requires: the write stage is free (the caller is about to lead it).
    pub(super) fn gather(&self, st: &mut MutexGuard<'_, State>) {
        assert!(!st.progress.writing);
        let flush = Duration::from_nanos(st.flush_ns_ewma);
        if flush.is_zero() {
            return;
        }
        // Keep waiting while returners keep arriving: stop after an idle gap of 1/16 of a
        // flush (at least GATHER_IDLE_MIN), and never wait longer than half a flush in all.
        let idle = (flush / 16).max(GATHER_IDLE_MIN);
        let give_up = Instant::now() + (flush / 2).min(GATHER_MAX);
        // Claim the write stage, so the returners queue behind this leader instead of
        // writing and flushing a group of one.
        st.progress.writing = true;
        let mut waiting_for = st.returning;
        while st.returning > 0 {
            let deadline = (Instant::now() + idle).min(give_up);
            let timed_out = self.gather_done.wait_until(st, deadline).timed_out();
            let arrived = st.returning < waiting_for;
            waiting_for = st.returning;
            if timed_out && (!arrived || Instant::now() >= give_up) {
                st.returning = 0;
            }
        }
        st.progress.writing = false;
    }
}

/// Notes `segment` as written since the last flush stage began, and as written through its
/// buffered handle (unless `through`) where it has one: what that flush stage flushes.
fn note_written(st: &mut State, segment: &Arc<Segment>, through: bool) {
    if st.dirty.last().is_none_or(|d| !Arc::ptr_eq(d, segment)) {
        st.dirty.push(Arc::clone(segment));
    }
    if !through
        && segment.buffered.is_some()
        && st
            .dirty_buffered
            .last()
            .is_none_or(|d| !Arc::ptr_eq(d, segment))
    {
        st.dirty_buffered.push(Arc::clone(segment));
    }
}

/// Writes the chunks of a write stage to their segments, and the slot copy `slot` (its block,
/// file offset in `segment`, and the bytes of the last chunk before its partly filled block)
/// if there is one. Returns the bytes written.
fn write_chunks(
    taken: &mut [Chunk],
    segment: &Segment,
    slot: Option<(&[u8], u64, usize)>,
    block: usize,
    through: bool,
) -> Result<u64> {
    let mut bytes = 0u64;
    let last_index = taken.len() - 1;
    for (i, c) in taken.iter_mut().enumerate() {
        // With a slot copy, the partly filled last block goes to the slot only: a block's
        // home is written when it is full (or left open by a pipelined write), so a lone
        // commit costs one block write, not two (`slot.rs`).
        let home_len = match slot {
            Some((_, _, kept)) if i == last_index => kept,
            _ => c.buf.len(),
        };
        if home_len == 0 {
            continue;
        }
        assert_eq!(
            c.segment.offset_of(c.start_lsn),
            c.file_offset,
            "chunk lsn vs offset"
        );
        let padded = c.buf.padded_to(block);
        let home = &padded[..home_len.next_multiple_of(block)];
        assert!(
            c.file_offset + home.len() as u64 <= c.segment.records_end(),
            "write past the segment's records"
        );
        c.segment.writer(through).write_at(home, c.file_offset)?;
        bytes += home.len() as u64;
    }
    if let Some((copy, at, _)) = slot {
        segment.writer(through).write_at(copy, at)?;
        bytes += copy.len() as u64;
    }
    Ok(bytes)
}
