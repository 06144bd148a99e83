//! Options and the small enums callers choose from.

use std::fmt;
use std::str::FromStr;

/// How a file's writes reach stable storage.
///
/// Each method is one way of opening the file plus one way of flushing it (`io/os/`: one
/// module per platform). On the same disk they differ in cost by 2-7x, so `till probe`
/// measures them all.
///
/// | method        | Linux: open flags   | Linux: `flush()` does              | Windows (name also accepted) |
/// |---------------|---------------------|------------------------------------|------------------------------|
/// | `Fsync`       | -                   | `fsync`                            | `WriteFile`, then `FlushFileBuffers` (`flush-file-buffers`) |
/// | `Fdatasync`   | -                   | `fdatasync`                        | the same as `Fsync`: Windows has no data-only flush every version offers |
/// | `Dsync`       | `O_DSYNC`           | nothing (each write is durable), `fdatasync` after `set_len` | `FILE_FLAG_WRITE_THROUGH`, no flush call (`write-through`) |
/// | `Direct`      | `O_DIRECT`          | `fdatasync`                        | `FILE_FLAG_NO_BUFFERING`, then `FlushFileBuffers` (`no-buffering`) |
/// | `DirectDsync` | `O_DIRECT\|O_DSYNC` | nothing, `fdatasync` after `set_len` | both flags, no flush call (`write-through-no-buffering`) |
/// | `BarrierFsync`| refused             | refused                            | refused |
/// | `NoSync`      | -                   | nothing: **not durable**           | the same |
///
/// macOS (`io/os/macos/`) flushes every durable method with `F_FULLFSYNC`, refuses the
/// write-through ones (its `O_DSYNC` leaves the drive cache volatile) and alone has
/// `BarrierFsync`. A method a platform lacks is refused when a file is opened with it, naming
/// the file; [`FlushMethod::available`] lists the ones this platform has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlushMethod {
    /// Buffered writes, then `fsync` (data and all metadata).
    Fsync,
    /// Buffered writes, then `fdatasync` (data and the metadata needed to read it back).
    Fdatasync,
    /// Write-through: the file is opened `O_DSYNC`, so every write returns only once durable.
    Dsync,
    /// `O_DIRECT` (bypasses the page cache; I/O must be aligned), then `fdatasync`.
    Direct,
    /// `O_DIRECT|O_DSYNC`: unbuffered and write-through, like Windows'
    /// `FILE_FLAG_NO_BUFFERING|FILE_FLAG_WRITE_THROUGH`.
    DirectDsync,
    /// macOS only: `fcntl(F_BARRIERFSYNC)`, an `fsync` plus an I/O barrier: every write
    /// before it reaches the drive before any write after it, but the drive's volatile cache
    /// is not flushed. **Ordered, not durable against a power cut**: a process kill or an OS
    /// crash loses nothing it flushed, and a power cut returns the database to the state of an
    /// earlier moment, consistent (the write-ahead rule holds because the order holds) but
    /// without the commits acknowledged after that moment, whatever their durability level.
    /// Several times cheaper than `F_FULLFSYNC` on Apple SSDs; never chosen automatically.
    BarrierFsync,
    /// **Never durable.** Writes go to the OS and are never flushed. Exists only so tests and
    /// benchmarks can measure everything but the flush; a power cut loses any amount of data.
    NoSync,
}

impl FlushMethod {
    /// Every method that makes data durable, in the order `till probe` reports them.
    pub const DURABLE: [FlushMethod; 5] = [
        FlushMethod::Fsync,
        FlushMethod::Fdatasync,
        FlushMethod::Dsync,
        FlushMethod::Direct,
        FlushMethod::DirectDsync,
    ];

    /// True when the file is opened with `O_DIRECT`, so buffers, offsets and lengths must be
    /// aligned to the device's direct-I/O alignment.
    #[must_use]
    pub fn is_direct(self) -> bool {
        matches!(self, FlushMethod::Direct | FlushMethod::DirectDsync)
    }

    /// True when each write is durable on return (`O_DSYNC`).
    #[must_use]
    pub fn is_write_through(self) -> bool {
        matches!(self, FlushMethod::Dsync | FlushMethod::DirectDsync)
    }

    /// True when a flushed write survives a power cut on a device that honours flushes:
    /// every method but [`FlushMethod::NoSync`] (nothing flushed) and
    /// [`FlushMethod::BarrierFsync`] (ordered, the drive cache not flushed).
    #[must_use]
    pub fn is_durable(self) -> bool {
        !matches!(self, FlushMethod::NoSync | FlushMethod::BarrierFsync)
    }

    /// Every method, durable or not, in the order `till probe` reports them.
    pub const ALL: [FlushMethod; 7] = [
        FlushMethod::Fsync,
        FlushMethod::Fdatasync,
        FlushMethod::Dsync,
        FlushMethod::Direct,
        FlushMethod::DirectDsync,
        FlushMethod::BarrierFsync,
        FlushMethod::NoSync,
    ];

    /// The methods that flush (all but [`FlushMethod::NoSync`]) and that this platform has:
    /// what `till probe`, `till diskcheck` and `till bench seed` measure by default.
    #[must_use]
    pub fn available() -> Vec<FlushMethod> {
        FlushMethod::ALL
            .into_iter()
            .filter(|&m| m != FlushMethod::NoSync && crate::io::platform_supports(m))
            .collect()
    }

    /// The name used on the command line and in JSON.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            FlushMethod::Fsync => "fsync",
            FlushMethod::Fdatasync => "fdatasync",
            FlushMethod::Dsync => "dsync",
            FlushMethod::Direct => "direct",
            FlushMethod::DirectDsync => "direct-dsync",
            FlushMethod::BarrierFsync => "barrier-fsync",
            FlushMethod::NoSync => "nosync",
        }
    }
}

impl fmt::Display for FlushMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FlushMethod {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FlushMethod::ALL
            .into_iter()
            .find(|m| m.name() == s)
        .or(match s {
            // Windows' own names for the same methods.
            "flush-file-buffers" => Some(FlushMethod::Fsync),
            "write-through" => Some(FlushMethod::Dsync),
            "no-buffering" => Some(FlushMethod::Direct),
            "write-through-no-buffering" => Some(FlushMethod::DirectDsync),
            _ => None,
        })
        .ok_or_else(|| {
            format!(
                "unknown flush method {s:?}; expected one of fsync, fdatasync, dsync, direct, \
                 direct-dsync, barrier-fsync (macOS), nosync (on Windows also flush-file-buffers, write-through, \
                 no-buffering, write-through-no-buffering)"
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_names_parse_to_their_methods() {
        for (name, method) in [
            ("flush-file-buffers", FlushMethod::Fsync),
            ("write-through", FlushMethod::Dsync),
            ("no-buffering", FlushMethod::Direct),
            ("write-through-no-buffering", FlushMethod::DirectDsync),
        ] {
            assert_eq!(name.parse::<FlushMethod>(), Ok(method), "{name}");
        }
        assert!("write-thru".parse::<FlushMethod>().is_err());
    }

    #[test]
    fn flush_method_names_round_trip() {
        for m in FlushMethod::ALL {
            assert_eq!(m.name().parse::<FlushMethod>(), Ok(m));
        }
        assert!("o_sync".parse::<FlushMethod>().is_err());
    }

    #[test]
    fn only_nosync_and_the_barrier_are_not_durable() {
        assert!(FlushMethod::DURABLE.iter().all(|m| m.is_durable()));
        assert!(!FlushMethod::NoSync.is_durable());
        assert!(!FlushMethod::BarrierFsync.is_durable());
        for m in FlushMethod::ALL {
            assert_eq!(FlushMethod::DURABLE.contains(&m), m.is_durable(), "{m}");
        }
    }

    #[test]
    fn the_barrier_is_available_on_macos_only_and_nosync_never() {
        let available = FlushMethod::available();
        assert!(!available.contains(&FlushMethod::NoSync));
        assert_eq!(
            available.contains(&FlushMethod::BarrierFsync),
            cfg!(target_os = "macos")
        );
        assert!(available.contains(&FlushMethod::Fsync));
    }
}

/// How durable a commit must be before it is acknowledged.
///
/// | level      | acknowledged once the record is | survives a process kill | survives a power cut |
/// |------------|---------------------------------|-------------------------|----------------------|
/// | `Sync`     | flushed to stable storage       | yes                     | yes                  |
/// | `Buffered` | written to the OS               | yes                     | loses at most the last flush interval |
/// | `Lazy`     | copied into the log buffer      | loses at most the last flush interval | the same |
///
/// Whatever the level, the log is always a prefix of what was appended: a crash loses a suffix
/// of records, never one from the middle, and never part of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Durability {
    /// Acknowledged after the log is flushed to stable storage up to the record.
    #[default]
    Sync,
    /// Acknowledged after the record is written to the OS; a background flush follows within
    /// the flush interval.
    Buffered,
    /// Acknowledged once in the log buffer; written and flushed in the background within the
    /// flush interval.
    Lazy,
}

impl Durability {
    /// The name used on the command line and in JSON.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Durability::Sync => "sync",
            Durability::Buffered => "buffered",
            Durability::Lazy => "lazy",
        }
    }
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Durability {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Durability::Sync, Durability::Buffered, Durability::Lazy]
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| format!("unknown durability {s:?}; expected sync, buffered or lazy"))
    }
}

/// Page size of a new database when [`Options::page_bytes`] is `None`.
pub const DEFAULT_PAGE_BYTES: u32 = 16 * 1024;

/// How a database is laid out, cached, flushed and protected. Validated at open
/// ([`Options::validate`]). The page size, flush method and torn-page guard are fixed when a
/// database is created and stored in its header: an existing database uses its own, and an
/// open that asks for another page size or torn-page guard (not `None` / `Auto`) is refused
/// with [`crate::Error::InvalidOptions`] naming the header file, never silently changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Page size, a power of two from 4 KiB to 64 KiB. `None` (the default): 16 KiB for a new
    /// database ([`DEFAULT_PAGE_BYTES`]), the stored size for an existing one.
    pub page_bytes: Option<u32>,
    /// Most bytes of pages the buffer pool caches. Default: 64 MiB. Minimum: 8 pages.
    pub cache_bytes: u64,
    /// Durability of `Txn::commit()`; `Txn::commit_with` chooses per commit. Default: `Sync`.
    pub durability: Durability,
    /// How the log and data file are flushed. `None` (the default) probes the device when the
    /// database is created and stores the fastest durable method.
    pub flush_method: Option<FlushMethod>,
    /// How pages are protected from torn writes. Default: `Auto` (atomic page writes where
    /// the device has them, else full-page images; see `page::choose_guard`).
    pub torn_page_guard: crate::page::TornPageGuard,
    /// A checkpoint runs once this much log was written since the last. Default: 256 MiB.
    ///
    /// The bound it sets, under any steady load (hot pages included): the log that recovery
    /// replays after a crash stays below twice this, plus the commits in flight. When a
    /// checkpoint falls behind (the disk too slow for the load), commits wait for it before
    /// returning rather than let the log grow (`Stats::backpressure_waits` counts them).
    /// Recovery time is proportional to the log it replays (`till bench recovery`), so it is
    /// bounded too, whatever the uptime.
    ///
    /// The log directory (`wal/`), however often the process is killed or the power cut:
    /// at most `3 * checkpoint_log_bytes + 7 * segment_bytes` of segment files (default: 1.2
    /// GiB, 19 of 64 MiB; a lightly loaded database holds 2-3 segments, from 1 MiB: the log
    /// starts small and doubles its segments as it fills, `WalOptions::first_segment_bytes`). Three, not two, checkpoint distances:
    /// the redo point may lag the last checkpoint's end by one under hot pages
    /// (`tests/checkpoint_progress.rs` holds replay to that). The seven: the segment partly
    /// before the redo point, the one being written, the next one prepared, and up to four
    /// free ones kept for reuse. An open after a crash checkpoints once it has replayed the log, so a
    /// crash never leaves a segment more behind (`tests/log_bound.rs`: 100 kills and power
    /// cuts). With [`Options::change_feed`], add what the feed keeps
    /// ([`Options::feed_retention_bytes`]).
    pub checkpoint_log_bytes: u64,
    /// A checkpoint also runs at the first commit this long after the last one, if any log
    /// was written since, so a slow trickle of commits does not grow the log (and recovery)
    /// without bound in time. Default: 5 minutes.
    pub checkpoint_interval: std::time::Duration,
    /// The log's options (segment size, flush interval, gathering); its flush method is set
    /// from `flush_method`, its `background_threads` from `background_threads`.
    pub wal: crate::wal::WalOptions,
    /// Run the background threads: page write-back, the log's interval flusher and segment
    /// preparer. Default: on. Off, every I/O happens on a calling thread in program order,
    /// so one sequence of calls gives the same I/O sequence every time (the crash explorer
    /// numbers I/O steps this way); `Buffered` and `Lazy` commits then reach the disk only
    /// when a later `Sync` commit, checkpoint or close writes the log.
    pub background_threads: bool,
    /// Log every commit's writes (table, key, value or delete) beside its page changes, so a
    /// change feed can read committed transactions from the one log (`tilldb::feed`; `till
    /// ship`). Costs log bytes (about the size of the writes again), never an extra flush.
    /// While on, the log is kept from the oldest position a feed consumer still needs,
    /// up to `feed_retention_bytes`. Default: off.
    pub change_feed: bool,
    /// With `change_feed`: the most log files (bytes on disk, in `wal/`) kept for a feed
    /// consumer. A consumer whose position would keep more is dropped (its `read` fails with
    /// [`crate::Error::FeedConsumerDropped`], `till stats` lists it) rather than let the log
    /// fill the disk. With no consumer registered the feed keeps at most the smaller of this
    /// and `checkpoint_log_bytes` of log files; then its start moves up, and a consumer that
    /// registers later gets [`crate::Error::FeedUnavailable`] naming the first lsn it can
    /// have (`crate::feed`, "Retention"). Default: 4 GiB.
    pub feed_retention_bytes: u64,
    /// A commit whose page operations (and, with `change_feed`, writes) pass this many bytes
    /// is logged as several records, its *parts*, instead of one (`record.rs`): a
    /// transaction is bounded by the disk, not by the largest log record. It is durable and
    /// visible only once its last part is, recovery applies all of it or none, and until its
    /// last part the pages it changed stay out of the data file (in the cache, or in the
    /// spill file `txn-spill.tdb`). At most half the largest record a log segment holds.
    /// Default: 8 MiB.
    pub commit_part_bytes: u64,
    /// Bytes of its writes (keys, values, 32 bytes an entry) a transaction keeps in memory;
    /// past them it sorts them into a run and writes it to a scratch file of its own
    /// (`txn-writes-<n>.tdb`, removed when the transaction ends), so a transaction
    /// of any size needs about this much memory, not memory in proportion to its size
    /// (docs/durability.md, "Large transactions"). Its reads of its own writes then read the
    /// runs back. Default: 64 MiB.
    pub write_set_bytes: u64,
    /// Bytes of buffered writes at which the write buffer drains into the tree; 0: no
    /// buffer, every commit changes the tree before it returns. With a buffer, a commit (at
    /// any level) that drops no table, writes only to tables that exist and fits one log
    /// record is appended to the log and kept in memory, and the tree takes many such
    /// commits at once later (docs/write-buffer.md): a commit costs a log append, a lookup
    /// of each key (for the table's length) and a map insert. Any other commit, a write
    /// transaction's first read and a checkpoint drain it first; reads see it at every snapshot; recovery rebuilds it from the log. Memory:
    /// about this much, and up to as much again while older snapshots need a drained
    /// buffer. Turning it on once makes the database's header version 5 (this build and
    /// later read it; earlier builds refuse it, naming the version). Default: 64 MiB
    /// (docs/write-buffer.md, "On by default"); 0 turns it off.
    pub write_buffer_bytes: u64,
    /// Encryption at rest (docs/encryption.md): the application's key, which wraps the
    /// database's data key in its header; pages, log records and scratch files are sealed.
    /// A database is created encrypted or plain and stays so; `Db::compact_encrypted_to`
    /// writes an encrypted copy of a plain one (`till encrypt` swaps it in place). Opening an encrypted
    /// database needs the key that wraps its data key (`KeyRequired`, `WrongKey`), and a
    /// plain one refuses a key (`NotEncrypted`). Default: `None`, a plain database.
    pub encryption: Option<crate::crypt::Encryption>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            page_bytes: None,
            cache_bytes: 64 << 20,
            durability: Durability::Sync,
            flush_method: None,
            torn_page_guard: crate::page::TornPageGuard::Auto,
            checkpoint_log_bytes: 256 << 20,
            checkpoint_interval: std::time::Duration::from_mins(5),
            // Segments of up to 64 MiB: one record must fit in a segment, and a 16 MiB value
            // logs its overflow pages in full. The log starts with 1 MiB (a new database
            // takes about 3 MiB on disk) and doubles them as it fills.
            wal: crate::wal::WalOptions {
                segment_bytes: 64 << 20,
                ..crate::wal::WalOptions::default()
            },
            background_threads: true,
            change_feed: false,
            feed_retention_bytes: 4 << 30,
            commit_part_bytes: 8 << 20,
            write_set_bytes: 64 << 20,
            write_buffer_bytes: 64 << 20,
            encryption: None,
        }
    }
}

impl Options {
    /// Tiny pages, cache and log, so tests hit eviction, splits and checkpoints quickly.
    #[must_use]
    #[cfg(any(test, feature = "internals"))]
    pub fn for_tests() -> Self {
        Options {
            page_bytes: Some(4096),
            cache_bytes: 64 * 4096,
            durability: Durability::Sync,
            flush_method: Some(FlushMethod::Fdatasync),
            torn_page_guard: crate::page::TornPageGuard::Doublewrite,
            checkpoint_log_bytes: 2 << 20,
            checkpoint_interval: std::time::Duration::from_mins(5),
            wal: crate::wal::WalOptions {
                segment_bytes: 1 << 20,
                first_segment_bytes: 1 << 20,
                ..crate::wal::WalOptions::for_tests()
            },
            background_threads: true,
            change_feed: false,
            feed_retention_bytes: 64 << 20,
            commit_part_bytes: 64 << 10,
            write_set_bytes: 512 << 10,
            write_buffer_bytes: 0,
            encryption: None,
        }
    }

    /// These options with `encryption`.
    #[must_use]
    pub(crate) fn with_encryption(
        mut self,
        encryption: Option<crate::crypt::Encryption>,
    ) -> Options {
        self.encryption = encryption;
        self
    }

    /// The encryption asked for.
    #[must_use]
    pub(crate) fn encryption(&self) -> Option<&crate::crypt::Encryption> {
        self.encryption.as_ref()
    }

    /// The page size asked for, or the default for a new database.
    #[must_use]
    pub fn page_bytes_or_default(&self) -> u32 {
        self.page_bytes.unwrap_or(DEFAULT_PAGE_BYTES)
    }

    /// Refuses options that cannot work, saying what would.
    pub fn validate(&self) -> crate::Result<()> {
        let bad = |what: String| Err(crate::Error::InvalidOptions(what));
        let page_bytes = self.page_bytes_or_default();
        if !page_bytes.is_power_of_two() || !(4096..=65536).contains(&page_bytes) {
            return bad(format!(
                "page size {page_bytes} must be a power of two from 4096 to 65536"
            ));
        }
        if self.cache_bytes < 8 * u64::from(page_bytes) {
            return bad(format!(
                "cache of {} bytes holds fewer than 8 pages of {page_bytes}",
                self.cache_bytes
            ));
        }
        if self.write_set_bytes < 64 << 10 {
            return bad(format!(
                "write_set_bytes of {} is below the minimum of 65536",
                self.write_set_bytes
            ));
        }
        if self.commit_part_bytes == 0 {
            return bad("commit_part_bytes must be above zero".to_owned());
        }
        if self.checkpoint_interval.is_zero() {
            return bad("checkpoint_interval must be above zero".to_owned());
        }
        if self.checkpoint_log_bytes < self.wal.segment_bytes {
            return bad(format!(
                "checkpoint_log_bytes {} is smaller than one log segment ({})",
                self.checkpoint_log_bytes, self.wal.segment_bytes
            ));
        }
        Ok(())
    }
}
