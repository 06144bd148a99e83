//! The log writer's state behind its one lock (`Shared::state`): the progress of group commit,
//! the pending chunks, the segments (active, spare, free, dirty, the chain), the waiters, the
//! tail slots and the poison; with the checks of its invariants.

use super::{BUFFERS_POOLED, CHUNK_BYTES_INITIAL};
use crate::error::Error;
use crate::io::{AlignedBuf, AlignedVec};
use crate::wal::TailGuard;
use crate::wal::group_commit::{Need, Progress, WaitSlot, Waiter, wake_plan};
use crate::wal::reader::ChainSegment;
use crate::wal::segment::Segment;
use std::sync::Arc;

/// Bytes appended but not yet taken by a writer, for one segment.
#[derive(Debug)]
pub(super) struct Chunk {
    pub(super) segment: Arc<Segment>,
    /// Block-aligned offset of `buf[0]` in the segment file.
    pub(super) file_offset: u64,
    /// Lsn of `buf[0]`.
    pub(super) start_lsn: u64,
    pub(super) buf: AlignedVec,
}

/// Everything the log's state lock guards (`Shared::state`).
#[derive(Debug)]
pub(super) struct State {
    pub(super) progress: Progress,
    /// Pending bytes in lsn order; the last chunk is the one appends go to. Never empty.
    pub(super) chunks: Vec<Chunk>,
    /// The next segment, prepared ahead with base = the active segment's end.
    pub(super) spare: Option<Arc<Segment>>,
    pub(super) preparing: bool,
    /// Bytes the next segment must have at least: a record too large for the spare's room
    /// asks for a larger one here (see `Shared::next_segment_bytes`). 0 when no one waits.
    pub(super) segment_need: u64,
    pub(super) next_generation: u64,
    /// Generations of segments free for recycling.
    pub(super) free: Vec<u64>,
    /// Segments written since the last flush stage began.
    pub(super) dirty: Vec<Arc<Segment>>,
    /// Segments written through their buffered handles (`Segment::buffered`) since the last
    /// flush: what a flush stage under a write-through method flushes.
    pub(super) dirty_buffered: Vec<Arc<Segment>>,
    /// Cleared chunk buffers kept for reuse, so the commit path does not allocate.
    pub(super) buffers: Vec<AlignedVec>,
    /// Closed segments of the log, oldest first, for reading and release.
    pub(super) chain: Vec<ChainSegment>,
    pub(super) waiters: Vec<Waiter>,
    /// Committers the last flush released that have not appended since (see `gather`).
    pub(super) returning: usize,
    /// Recent flush stage duration, an exponentially weighted average.
    pub(super) flush_ns_ewma: u64,
    /// Where the commit being logged in several records began (`Wal::begin_parts`): a log
    /// end read meanwhile lies inside it, not at a commit boundary.
    pub(super) parts_from: Option<u64>,
    pub(super) poisoned: bool,
    /// The failure that poisoned the log, for the errors everyone else gets.
    pub(super) poison_cause: Option<String>,
    pub(super) closing: bool,
    /// What the tail slots of the active segment hold (`TailGuard::Slots`).
    pub(super) slots: TailSlots,
    /// A block-sized buffer for slot writes, kept between writes.
    pub(super) slot_buf: Option<AlignedBuf>,
}

/// Which tail slot holds which copy (`slot.rs`). A write goes to the slot that is not
/// `durable`, so that slot's copy survives any tear of the write.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct TailSlots {
    /// The newest copy a completed flush made durable.
    pub(super) durable: Option<SlotCopy>,
    /// The newest copy written since, not yet covered by a completed flush.
    pub(super) written: Option<SlotCopy>,
}

/// A copy of a tail block in a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SlotCopy {
    pub(super) generation: u64,
    pub(super) index: usize,
    /// Lsn of the block's first byte.
    pub(super) block_lsn: u64,
    /// Lsn after the last byte copied.
    pub(super) end: u64,
}

impl TailSlots {
    /// The slot the next copy of a tail block in segment `generation` goes to.
    pub(super) fn next(&self, generation: u64) -> usize {
        match self.durable {
            Some(d) if crate::mutants::active("slot-overwrites-durable-copy") => d.index,
            Some(d) if d.generation == generation => 1 - d.index,
            _ => 0,
        }
    }
}

impl State {
    pub(super) fn active(&self) -> &Chunk {
        self.chunks.last().expect("there is always an active chunk")
    }

    /// A cleared buffer from the pool, or a new one.
    pub(super) fn buffer(&mut self) -> AlignedVec {
        self.buffers
            .pop()
            .unwrap_or_else(|| AlignedVec::with_capacity(CHUNK_BYTES_INITIAL))
    }

    /// Returns a written chunk's buffer to the pool (at most `BUFFERS_POOLED` are kept).
    pub(super) fn recycle_buffer(&mut self, mut buf: AlignedVec) {
        if self.buffers.len() < BUFFERS_POOLED {
            buf.clear();
            self.buffers.push(buf);
        }
    }

    /// Asserts the invariant tail slots keep: every acknowledged (durable) record in the
    /// active segment's partly filled block has a durable copy in a slot, so a tear of the
    /// block's rewrite at home cannot destroy it.
    pub(super) fn check_tail_covered(&self, block_bytes: u32, tail: TailGuard) {
        if tail != TailGuard::Slots {
            return;
        }
        let durable = self.progress.durable;
        let header = &self.active().segment.header;
        if durable <= header.base_lsn {
            return;
        }
        let into = (durable - header.base_lsn) % u64::from(block_bytes);
        if into == 0 {
            return;
        }
        let block_lsn = durable - into;
        assert!(
            self.slots
                .durable
                .is_some_and(|d| d.generation == header.generation
                    && d.block_lsn == block_lsn
                    && d.end >= durable),
            "durable lsn {durable} in block {block_lsn} of generation {} without a durable \
             slot copy: {:?}",
            header.generation,
            self.slots
        );
    }

    pub(super) fn pending_bytes(&self) -> usize {
        self.chunks.iter().map(|c| c.buf.len()).sum()
    }

    /// Records a segment in the chain once appends have moved past it.
    pub(super) fn close_segment_if_done(&mut self, segment: &Arc<Segment>) {
        if Arc::ptr_eq(&self.active().segment, segment) {
            return;
        }
        if self
            .chain
            .last()
            .is_none_or(|c| c.header.generation < segment.header.generation)
        {
            self.chain.push(ChainSegment {
                header: segment.header,
                path: segment.path.clone(),
                end_lsn: segment.end_lsn(),
            });
        }
    }

    /// Removes from the queue the waiters a completed stage satisfied, and one leader per free
    /// stage, for the caller to wake.
    pub(super) fn take_wakeups(&mut self) -> Vec<Arc<WaitSlot>> {
        let keys: Vec<(u64, Need)> = self.waiters.iter().map(|w| (w.lsn, w.need)).collect();
        let mut wake = wake_plan(&self.progress, &keys);
        wake.sort_unstable_by(|a, b| b.cmp(a));
        wake.into_iter()
            .map(|i| self.waiters.swap_remove(i).slot)
            .collect()
    }

    /// Fail-stop: after a failed write or flush nothing more is acknowledged until reopen.
    /// The caller gets the original error; everyone else gets `Poisoned`. Never retried: a
    /// failed fsync may have dropped the data it was meant to save.
    pub(super) fn poison(&mut self, error: Error) -> Error {
        self.poisoned = true;
        if self.poison_cause.is_none() {
            tracing::error!(
                target: "tilldb",
                cause = %error,
                "log stopped after a failed write or flush (fail-stop); reopen to recover"
            );
            self.poison_cause = Some(error.to_string());
        }
        for w in self.waiters.drain(..) {
            w.slot.wake();
        }
        error
    }

    pub(super) fn check_invariants(&self, block: u32) {
        self.progress.check_invariants();
        assert!(!self.chunks.is_empty());
        for c in &self.chunks {
            assert!(
                c.file_offset.is_multiple_of(u64::from(block)),
                "chunk not block-aligned"
            );
            assert!(c.start_lsn >= c.segment.header.base_lsn);
        }
        let active = self.active();
        assert_eq!(
            active.start_lsn + active.buf.len() as u64,
            self.progress.appended,
            "active chunk end"
        );
        assert!(self.waiters.len() <= 1 << 20, "waiter queue bound");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(generation: u64, index: usize) -> SlotCopy {
        SlotCopy {
            generation,
            index,
            block_lsn: 4096,
            end: 4200,
        }
    }

    /// A tail block's copy never goes to the slot holding the durable copy of the same
    /// segment: a torn write must leave that one whole.
    #[test]
    fn the_next_slot_copy_spares_the_durable_one() {
        let none = TailSlots::default();
        assert_eq!(none.next(7), 0);
        for index in [0, 1] {
            let slots = TailSlots {
                durable: Some(copy(7, index)),
                written: None,
            };
            assert_eq!(slots.next(7), 1 - index, "durable copy in slot {index}");
            // A durable copy of an older segment protects nothing in this one.
            assert_eq!(slots.next(8), 0);
        }
    }
}
