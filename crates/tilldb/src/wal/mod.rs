//! The write-ahead log: self-validating records in preallocated, recycled segments, appended by
//! many threads at once and made durable by group commit.
//!
//! ```text
//!  append()  --copy under a short lock-->  log buffer (pending chunks)
//!                                              |  writer: one thread at a time, no lock held
//!                                              v
//!                                    segment files (OS)   written_lsn
//!                                              |  flusher: one at a time, may overlap a write
//!                                              v
//!                                      stable storage      durable_lsn
//! ```
//!
//! - Formats: records in `record.rs`, segment headers in `segment.rs`; both documented as byte
//!   tables at the top of their file.
//! - Group commit (`group_commit.rs`): a committer that needs its record written or flushed
//!   either takes the free stage itself (leader) or parks; when a stage completes, exactly the
//!   committers it satisfied are woken, plus one that can lead the next stage.
//! - Recovery (`reader.rs`): follow the segment chain from the oldest segment; the log ends at
//!   the first record that does not validate. New appends always go to a fresh segment whose
//!   header names the lsn where the old log ended, so bytes left after that point (a torn tail,
//!   a lost write's neighbours) can never be read as part of the log again. So two valid
//!   segments can share a base (the empty tail recovery left, and the next open's segment),
//!   and the chain passes through both; only a *short* older one (a spare whose preparation
//!   failed, superseded by the next generation) is set aside as free. Tools read the log the
//!   same way, without writing, through [`inspect_log`].
//!
//! ## Lsn
//!
//! An [`Lsn`] is a position in the log stream. A segment of generation `g` holds the lsns
//! `[base, base + capacity)` at file offsets `[block, block + capacity)`, where `capacity =
//! segment_bytes - 3 * block` (a header block and two tail slots; `segment_bytes - block` in a
//! version 1 segment). A `SegmentEnd` record sends the stream to `base + capacity`, the next
//! segment's base. After recovery the new segment's base is the recovered end lsn instead.
//!
//! ## The tail block
//!
//! The write unit is the log block. A group's last block is usually partly filled, and the
//! next group writes it again: the same leading bytes plus new records. A power cut during
//! that rewrite may leave garbage in the sectors being written (TESTPLAN F2), which would
//! destroy the commits already acknowledged in that block. [`WalOptions::tail`] chooses how
//! that is prevented:
//!
//! - [`TailGuard::Slots`] (the default): a write that a flush will cover sends its partly
//!   filled last block to one of two *tail slots* at the segment's end (`slot.rs`): the one
//!   that does not hold the newest flushed copy. The block's home is written once it is full.
//!   Whenever a write touches the tail block (at home, or in a slot), the other slot holds
//!   every acknowledged record in it, durably; every reader lays valid slots over their home
//!   blocks. The log grows by the records alone (a lone 115-byte commit costs about 140 log
//!   bytes, not a 4 KiB block), and a lone commit still writes one block
//!   (docs/benchmarks-journal.md, "Tail slots").
//! - [`TailGuard::Pad`]: the writer closes the block with a `Pad` record and the next group
//!   starts in a fresh block: no write ever touches a block holding acknowledged records. The
//!   log grows by up to one block per group. (`Slots` pads too, when a block has fewer bytes
//!   free than a slot's trailer.)
//! - [`TailGuard::None`]: the next group rewrites the block in place. A crash tears the
//!   rewrite per sector, each sector old or new, and old and new agree on every byte already
//!   there: safe on devices whose sector writes are atomic (`NVMe` guarantees it for one
//!   logical block), not on ones that leave garbage.
//!
//! A block is closed (padded or copied to a slot) when a flush is about to cover it, not at
//! every write: a write made while a flush runs (pipelined) leaves its last block *open*, the
//! flush running then does not acknowledge anything in it (it makes durable only up to the
//! open block), and the next flush starts with a write that closes it. So concurrent
//! committers pay one pad or slot write per flush, not one per write (`group_commit.rs`,
//! "Closed"; `tests/wal_open_block.rs`).
//!
//! Every segment keeps room at its end for the largest pad plus its `SegmentEnd` record.

pub(crate) mod follow;
mod group_commit;
mod inspect;
mod reader;
pub mod record;
pub mod segment;
pub mod slot;
mod writer;

pub(crate) use group_commit::WaitSlot;
pub use inspect::{LogInspection, SegmentFile, SegmentRole, inspect_log, inspect_log_with};
pub use reader::{LogEvent, Recovery, RecoveryStop, WalRecord, WalRecordRef};
pub use record::RecordKind;
pub use segment::SegmentHeader;
pub(crate) use segment::{HeaderState, parse_segment_name};
pub use writer::{Wal, WalStats};

use crate::FlushMethod;
use std::fmt;
use std::time::Duration;

/// A position in the log stream. Commit lsns are the end of their record: the log is durable
/// "up to lsn" when every byte before it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lsn(pub u64);

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// How a group's partly filled last log block is protected from the next group's rewrite of
/// it (see "The tail block" in the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TailGuard {
    /// Also write a copy of the block to the segment's free tail slot (`slot.rs`). Dense log,
    /// no acknowledged commit ever in one copy while a write runs.
    Slots,
    /// Close the block with a `Pad` record: the next group starts in a fresh block.
    Pad,
    /// Rewrite the block in place: safe only where a sector write is atomic.
    None,
}

/// How the log is laid out and flushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalOptions {
    /// How segment writes are made durable. Default: `Fdatasync` (the engine chooses by probing).
    pub flush_method: FlushMethod,
    /// The write unit; `None` takes the device default (see `io::IoGeometry`).
    pub log_block_bytes: Option<u32>,
    /// Size of the largest segment file. Default: 16 MiB. Minimum: 8 log blocks.
    pub segment_bytes: u64,
    /// Size of the first segment of a new log. Each new segment doubles the one before, up to
    /// `segment_bytes` (and is made larger at once when a record needs the room), so a small
    /// database keeps a small log and a busy one reaches full-size segments after a few
    /// switches. Every open starts again at this size (the segment it opens is the tail the
    /// next open reads whole). Taken as `segment_bytes` when larger. Default: 1 MiB.
    pub first_segment_bytes: u64,
    /// A clean close whose log's segment files take more than this begins a fresh segment of
    /// `first_segment_bytes` at the log's end and removes the rest (`writer/trim.rs`): a
    /// closed database keeps a small log. A smaller log stays, for `till dump-log` to show.
    /// Default: 8 MiB.
    pub close_trim_bytes: u64,
    /// Appenders stop and help write once this many bytes wait in the log buffer.
    /// Default: 4 MiB.
    pub buffer_bytes_max: usize,
    /// How often the background thread writes and flushes `Buffered` and `Lazy` records.
    /// Default: 100 ms. This bounds what a power cut (or, for `Lazy`, a kill) can take.
    pub flush_interval: Duration,
    /// Before a flush, wait (at most half a recent flush, and 10 ms) for the
    /// committers the previous flush released to append again, so that closed-loop committers
    /// share one flush instead of taking turns. Default: on. It never delays a lone
    /// committer; see `docs/benchmarks.md` for the measured effect.
    pub adaptive_gather: bool,
    /// How a group's partly filled last block is kept safe from the write that rewrites it
    /// (see "The tail block" above). Default: [`TailGuard::Slots`].
    pub tail: TailGuard,
    /// Run the interval flusher and the segment preparer threads. Default: on. Off, every log
    /// write, flush and segment preparation happens on a calling thread, in program order (a
    /// crash explorer needs that to number I/O steps); `Buffered` and `Lazy` records then reach
    /// the disk only when a later commit, `flush`, `sync` or `close` writes them.
    pub background_threads: bool,
}

impl Default for WalOptions {
    fn default() -> Self {
        WalOptions {
            flush_method: FlushMethod::Fdatasync,
            log_block_bytes: None,
            segment_bytes: 16 << 20,
            first_segment_bytes: 1 << 20,
            close_trim_bytes: 8 << 20,
            buffer_bytes_max: 4 << 20,
            flush_interval: Duration::from_millis(100),
            adaptive_gather: true,
            tail: TailGuard::Slots,
            background_threads: true,
        }
    }
}

impl WalOptions {
    /// Tiny segments, so tests cross segment boundaries and recycle often.
    #[must_use]
    #[cfg(any(test, feature = "internals"))]
    pub fn for_tests() -> Self {
        WalOptions {
            flush_method: FlushMethod::Fdatasync,
            log_block_bytes: Some(512),
            segment_bytes: 8 * 1024,
            first_segment_bytes: 8 * 1024,
            close_trim_bytes: 8 << 20,
            buffer_bytes_max: 16 * 1024,
            flush_interval: Duration::from_millis(5),
            adaptive_gather: true,
            tail: TailGuard::Slots,
            background_threads: true,
        }
    }
}
