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
//! `[base, base + capacity)` at file offsets `[block, segment_bytes)`, where `capacity =
//! segment_bytes - block`. A `SegmentEnd` record sends the stream to `base + capacity`, the next
//! segment's base. After recovery the new segment's base is the recovered end lsn instead.
//!
//! ## The tail block
//!
//! The write unit is the log block. A group's last block is usually partly filled. By default
//! (`WalOptions::pad_groups`) the writer closes it with a `Pad` record, and the next group
//! starts in a fresh block: no write ever touches a block holding acknowledged records, so a
//! power cut that leaves garbage in the sectors being written (TESTPLAN F2) cannot reach them.
//! The device cost is nil (a 4K-physical disk writes 4 KiB per group either way); the log grows
//! by up to one block per group instead of by the records alone, which brings checkpoints and
//! segment switches sooner at low concurrency (measured in `docs/benchmarks.md`).
//!
//! With padding off, the next group rewrites the partly filled block with the same leading
//! bytes plus new records. A crash then tears the rewrite per sector, each sector old or new,
//! and old and new agree on every byte already there: safe on devices whose sector writes are
//! atomic (`NVMe` guarantees it for one logical block), not on ones that leave garbage.
//!
//! A block is padded when a flush is about to cover it, not at every write: a write made
//! while a flush runs (pipelined) leaves its last block *open*, the flush running then does
//! not acknowledge anything in it (it makes durable only up to the open block), and the
//! next flush starts with a write that closes it. So no acknowledged record is ever in a
//! block written again, and concurrent committers pay one pad per flush, not one per write
//! (`group_commit.rs`, "Closed"; `tests/wal_open_block.rs`).
//!
//! Every segment keeps room at its end for the largest pad plus its `SegmentEnd` record.

pub(crate) mod follow;
mod group_commit;
mod reader;
pub mod record;
mod segment;
mod writer;

pub use reader::{
    LogEvent, LogInspection, Recovery, RecoveryStop, SegmentFile, SegmentRole, WalRecord,
    inspect_log,
};
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

/// How the log is laid out and flushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalOptions {
    /// How segment writes are made durable. Default: `Fdatasync` (the engine chooses by probing).
    pub flush_method: FlushMethod,
    /// The write unit; `None` takes the device default (see `io::IoGeometry`).
    pub log_block_bytes: Option<u32>,
    /// Size of each segment file. Default: 16 MiB. Minimum: 8 log blocks.
    pub segment_bytes: u64,
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
    /// Before a flush covers it, fill the rest of a group's last block with a `Pad` record,
    /// so no later write ever touches a block that holds acknowledged records (a write made
    /// during a flush leaves its block open until the next flush). Default: on. Off, the next
    /// group rewrites that block with the same leading bytes, which is safe only on devices
    /// that write a sector atomically (see "The tail block" above); it keeps the log
    /// up to 32x smaller for one-commit groups.
    pub pad_groups: bool,
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
            buffer_bytes_max: 4 << 20,
            flush_interval: Duration::from_millis(100),
            adaptive_gather: true,
            pad_groups: true,
            background_threads: true,
        }
    }
}

impl WalOptions {
    /// Tiny segments, so tests cross segment boundaries and recycle often.
    #[must_use]
    pub fn for_tests() -> Self {
        WalOptions {
            flush_method: FlushMethod::Fdatasync,
            log_block_bytes: Some(512),
            segment_bytes: 8 * 1024,
            buffer_bytes_max: 16 * 1024,
            flush_interval: Duration::from_millis(5),
            adaptive_gather: true,
            pad_groups: true,
            background_threads: true,
        }
    }
}
