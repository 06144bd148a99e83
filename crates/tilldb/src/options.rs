//! Options and the small enums callers choose from.

use std::fmt;
use std::str::FromStr;

/// How a file's writes reach stable storage.
///
/// Each method is one way of opening the file plus one way of flushing it; see `io::flush`.
/// On the same disk they differ in cost by 2-7x, so `till probe` measures them all.
///
/// | method        | open flags          | `flush()` does                     |
/// |---------------|---------------------|------------------------------------|
/// | `Fsync`       | -                   | `fsync`                            |
/// | `Fdatasync`   | -                   | `fdatasync`                        |
/// | `Dsync`       | `O_DSYNC`           | nothing (each write is durable), `fdatasync` after `set_len` |
/// | `Direct`      | `O_DIRECT`          | `fdatasync`                        |
/// | `DirectDsync` | `O_DIRECT\|O_DSYNC` | nothing, `fdatasync` after `set_len` |
/// | `NoSync`      | -                   | nothing: **not durable**           |
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

    /// True unless this is [`FlushMethod::NoSync`].
    #[must_use]
    pub fn is_durable(self) -> bool {
        self != FlushMethod::NoSync
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
        [
            FlushMethod::Fsync,
            FlushMethod::Fdatasync,
            FlushMethod::Dsync,
            FlushMethod::Direct,
            FlushMethod::DirectDsync,
            FlushMethod::NoSync,
        ]
        .into_iter()
        .find(|m| m.name() == s)
        .ok_or_else(|| {
            format!(
                "unknown flush method {s:?}; expected one of fsync, fdatasync, dsync, direct, \
                 direct-dsync, nosync"
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flush_method_names_round_trip() {
        for m in FlushMethod::DURABLE
            .into_iter()
            .chain([FlushMethod::NoSync])
        {
            assert_eq!(m.name().parse::<FlushMethod>(), Ok(m));
        }
        assert!("o_sync".parse::<FlushMethod>().is_err());
    }

    #[test]
    fn only_nosync_is_not_durable() {
        assert!(FlushMethod::DURABLE.iter().all(|m| m.is_durable()));
        assert!(!FlushMethod::NoSync.is_durable());
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
