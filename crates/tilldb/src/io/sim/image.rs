//! One simulated file's bytes: its live image, its durable image, and the ops between them.
//!
//! ```text
//!   durable ──apply(unflushed[0])──► … ──apply(unflushed[n-1])──► live
//! ```
//!
//! Every write and size change is applied to `live` at once (reads see it) and queued in
//! `unflushed`. A flush applies the queue to `durable`, in order, and empties it; so replaying
//! the queue onto `durable` always gives `live`, except after a flush failure dropped the queue
//! or `corrupt()` flipped bits (then `live_diverged` is set, until the next crash).

use super::FILE_BYTES_MAX;

/// Most unflushed ops one file may queue. A `NoSync` file never empties its queue, so this is
/// where a runaway test stops rather than exhausting memory.
pub(super) const UNFLUSHED_OPS_MAX: usize = 1 << 20;

/// A change to a file's bytes that is not yet durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum DataOp {
    Write { offset: u64, bytes: Vec<u8> },
    SetLen { len: u64 },
}

impl DataOp {
    pub(super) fn apply(&self, image: &mut Vec<u8>) {
        match self {
            DataOp::Write { offset, bytes } => write_into(image, *offset, bytes),
            DataOp::SetLen { len } => image.resize(to_index(*len), 0),
        }
    }

    /// The file offset just past this op's effect.
    fn end(&self) -> u64 {
        match self {
            DataOp::Write { offset, bytes } => offset + bytes.len() as u64,
            DataOp::SetLen { len } => *len,
        }
    }
}

/// Whether two ops touch a common byte (a size change touches them all: conservative).
fn overlaps(a: &DataOp, b: &DataOp) -> bool {
    match (a, b) {
        (
            DataOp::Write {
                offset: a_at,
                bytes: a_bytes,
            },
            DataOp::Write {
                offset: b_at,
                bytes: b_bytes,
            },
        ) => *a_at < b_at + b_bytes.len() as u64 && *b_at < a_at + a_bytes.len() as u64,
        _ => true,
    }
}

/// A file position as an index into an image. Positions are checked against
/// [`FILE_BYTES_MAX`] before they get here (`EFBIG`), so a larger one is a simulator bug.
pub(super) fn to_index(position: u64) -> usize {
    assert!(
        position <= FILE_BYTES_MAX,
        "position {position} beyond FILE_BYTES_MAX"
    );
    usize::try_from(position).expect("FILE_BYTES_MAX fits usize on 64-bit Linux")
}

/// Copies `bytes` into `image` at `offset`, first extending it with zeros (a hole) if needed.
pub(super) fn write_into(image: &mut Vec<u8>, offset: u64, bytes: &[u8]) {
    let start = to_index(offset);
    let end = to_index(offset + bytes.len() as u64);
    let len_before = image.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    image[start..end].copy_from_slice(bytes);
    assert_eq!(image.len(), len_before.max(end));
}

/// The bytes of one file.
#[derive(Debug, Default, Clone)]
pub(super) struct FileData {
    /// What reads see: every write and size change so far.
    pub(super) live: Vec<u8>,
    /// What a power cut keeps for sure: every op made durable by a flush.
    pub(super) durable: Vec<u8>,
    /// Ops applied to `live` but not yet to `durable`, oldest first.
    pub(super) unflushed: Vec<DataOp>,
    /// True when `live` holds changes neither `durable` nor `unflushed` accounts for: a
    /// [`super::FaultKind::FlushLosesData`] dropped them, or `corrupt()` flipped bits.
    pub(super) live_diverged: bool,
}

impl FileData {
    /// Applies `op` to the live image and queues it until the next flush.
    pub(super) fn push(&mut self, op: DataOp) {
        assert!(
            op.end() <= FILE_BYTES_MAX,
            "op past FILE_BYTES_MAX: caller checks for EFBIG"
        );
        assert!(
            self.unflushed.len() < UNFLUSHED_OPS_MAX,
            "more than {UNFLUSHED_OPS_MAX} unflushed ops"
        );
        op.apply(&mut self.live);
        self.unflushed.push(op);
    }

    /// Makes every unflushed op durable, in order: what a successful `fsync` does.
    pub(super) fn make_durable(&mut self) {
        for op in self.unflushed.drain(..) {
            op.apply(&mut self.durable);
        }
        assert!(self.unflushed.is_empty());
        // Paired with `push`: the queue replayed onto the durable image is what reads saw.
        if !self.live_diverged {
            debug_assert!(
                self.durable == self.live,
                "flush made durable what reads never saw"
            );
        }
    }

    /// What a write through a write-through handle (`O_DSYNC`, `O_DIRECT | O_DSYNC`,
    /// `FILE_FLAG_WRITE_THROUGH`) makes durable as it returns: itself (the op just pushed),
    /// every older unflushed op its bytes overlap, transitively (they share its pages: `O_DSYNC`
    /// writes them out with it, `O_DIRECT` writes the cached range back first), and every size
    /// change before it, with all ops older than that (the write's metadata; conservative).
    /// The rest stays unflushed, in order: a buffered write through another handle of the file
    /// is not made durable by a write-through write elsewhere in it, only by a flush. (Until
    /// issue 37's buffered log writes, every write-through write made the whole queue
    /// durable, which hid exactly that.)
    pub(super) fn make_last_durable(&mut self) {
        let n = self.unflushed.len();
        assert!(n > 0, "no write to make durable");
        let mut take = vec![false; n];
        take[n - 1] = true;
        if let Some(k) = self.unflushed[..n - 1]
            .iter()
            .rposition(|op| matches!(op, DataOp::SetLen { .. }))
        {
            take[..=k].fill(true);
        }
        // Newest first: an op taken here takes every older op it overlaps, which the loop
        // then visits in turn.
        for j in (0..n).rev() {
            if !take[j] {
                continue;
            }
            let (older, rest) = take.split_at_mut(j);
            debug_assert!(rest[0]);
            for (taken, op) in older.iter_mut().zip(&self.unflushed) {
                if !*taken && overlaps(op, &self.unflushed[j]) {
                    *taken = true;
                }
            }
        }
        let ops = std::mem::take(&mut self.unflushed);
        for (op, taken) in ops.into_iter().zip(take) {
            if taken {
                op.apply(&mut self.durable);
            } else {
                self.unflushed.push(op);
            }
        }
        if !self.live_diverged && self.unflushed.is_empty() {
            debug_assert!(
                self.durable == self.live,
                "a write-through write made durable what reads never saw"
            );
        }
    }

    /// A failed `fsync` on Linux (TESTPLAN F4): the kernel marks the pages clean, so the
    /// unflushed ops will never be written, yet reads keep showing them until a crash.
    pub(super) fn lose_unflushed(&mut self) {
        if !self.unflushed.is_empty() {
            self.live_diverged = true;
        }
        self.unflushed.clear();
    }

    /// After a crash: `image` is both what reads see and what is durable.
    pub(super) fn settle(&mut self, image: Vec<u8>) {
        self.live.clone_from(&image);
        self.durable = image;
        self.unflushed.clear();
        self.live_diverged = false;
    }

    /// Flips bits at `offset` in whichever images reach it; false if neither does.
    pub(super) fn corrupt(&mut self, offset: u64, xor_mask: u8) -> bool {
        let index = to_index(offset);
        let mut hit = false;
        for image in [&mut self.live, &mut self.durable] {
            if let Some(byte) = image.get_mut(index) {
                *byte ^= xor_mask;
                hit = true;
            }
        }
        if hit && !self.unflushed.is_empty() {
            // The queue no longer replays onto `durable` to give `live`.
            self.live_diverged = true;
        }
        hit
    }

    pub(super) fn check_invariants(&self) {
        assert!(self.unflushed.len() <= UNFLUSHED_OPS_MAX);
        assert!(self.live.len() as u64 <= FILE_BYTES_MAX);
        assert!(self.durable.len() as u64 <= FILE_BYTES_MAX);
        assert!(self.unflushed.iter().all(|op| op.end() <= FILE_BYTES_MAX));
        if self.live_diverged {
            return;
        }
        if self.unflushed.is_empty() {
            debug_assert!(
                self.live == self.durable,
                "nothing unflushed, yet live != durable"
            );
        } else if cfg!(debug_assertions) {
            let mut replayed = self.durable.clone();
            for op in &self.unflushed {
                op.apply(&mut replayed);
            }
            assert!(
                replayed == self.live,
                "unflushed ops replayed onto durable != live"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_past_end_leaves_a_zero_hole() {
        let mut image = vec![1, 2];
        write_into(&mut image, 4, &[9, 9]);
        assert_eq!(image, [1, 2, 0, 0, 9, 9]);
        write_into(&mut image, 1, &[7]);
        assert_eq!(image, [1, 7, 0, 0, 9, 9]);
    }

    #[test]
    fn flush_replays_the_queue_and_a_lost_flush_diverges() {
        let mut file = FileData::default();
        file.push(DataOp::Write {
            offset: 0,
            bytes: vec![1; 8],
        });
        file.push(DataOp::SetLen { len: 4 });
        file.check_invariants();
        assert!(file.durable.is_empty());
        file.make_durable();
        assert_eq!(file.durable, [1; 4]);
        file.push(DataOp::Write {
            offset: 4,
            bytes: vec![2; 4],
        });
        file.lose_unflushed();
        assert!(file.live_diverged);
        assert_eq!(file.live, [1, 1, 1, 1, 2, 2, 2, 2]);
        file.make_durable();
        assert_eq!(
            file.durable, [1; 4],
            "a retried flush must not write the lost pages"
        );
        file.check_invariants();
        file.settle(vec![3]);
        assert!(!file.live_diverged);
        file.check_invariants();
    }

    fn write(offset: u64, byte: u8, len: usize) -> DataOp {
        DataOp::Write {
            offset,
            bytes: vec![byte; len],
        }
    }

    /// A write-through write makes durable itself and the older writes it overlaps,
    /// transitively, never a buffered write elsewhere in the file.
    #[test]
    fn a_write_through_write_leaves_buffered_writes_elsewhere_unflushed() {
        let mut file = FileData::default();
        file.push(write(0, 1, 8));
        file.make_durable();
        file.push(write(0, 2, 2)); // buffered, apart
        file.push(write(3, 3, 2)); // buffered, under the next
        file.push(write(4, 4, 2)); // write-through: takes [3, 5), which takes nothing more
        file.make_last_durable();
        assert_eq!(file.durable, [1, 1, 1, 3, 4, 4, 1, 1]);
        assert_eq!(file.unflushed, [write(0, 2, 2)]);
        file.check_invariants();
        assert_eq!(file.live, [2, 2, 1, 3, 4, 4, 1, 1]);
        // A size change before a write-through write goes with it, and all before it.
        file.push(DataOp::SetLen { len: 10 });
        file.push(write(9, 5, 1));
        file.make_last_durable();
        assert!(file.unflushed.is_empty());
        assert_eq!(file.durable, file.live);
        file.check_invariants();
    }

    #[test]
    fn corrupt_flips_both_images() {
        let mut file = FileData::default();
        file.push(DataOp::Write {
            offset: 0,
            bytes: vec![0; 4],
        });
        file.make_durable();
        assert!(file.corrupt(2, 0xFF));
        assert_eq!(file.live, [0, 0, 0xFF, 0]);
        assert_eq!(file.durable, [0, 0, 0xFF, 0]);
        assert!(!file.live_diverged);
        assert!(!file.corrupt(4, 1));
        file.check_invariants();
    }
}
