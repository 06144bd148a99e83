//! What the writer, the listener and verify say to each other, and the listener's record.
//!
//! ## Protocol (TCP, one request per line, UTF-8, `\n`-terminated)
//!
//! ```text
//! client                                   listener
//! STREAM <run> <stream> <meta JSON>   ->   OK | ERR <why>       new stream: record created, durable
//! ACK <seq>                           ->   OK <seq>             after the STREAM line; seq 0, 1, 2...
//!                                          (one OK for the newest seq of each batch, sent only
//!                                           once the batch is durable in the record)
//! FETCH <run>                         ->   RUN <run> <n>, then n times
//!                                          STREAM <stream> <bytes> + that many bytes of its record,
//!                                          then END | ERR <why>
//! RUNS                                ->   RUNS <run> <run> ...
//! ```
//!
//! The writer sends `ACK n` only after write `n` was acknowledged by its method, and never
//! waits for the `OK` before its next write (at most [`MAX_UNRECORDED`] may be outstanding): an
//! acknowledgement lost in flight is simply not counted, so nothing is counted that the
//! listener did not record. An `ACK` out of order is refused and ends the connection.
//!
//! ## The listener's record: `<dir>/<run>/<stream>.acks`
//!
//! ```text
//! line 1      tilldb-diskcheck-acks 2 <meta JSON>
//! line 2...   <first seq> <last seq> <unix ms when recorded>    one line per batch; the
//!                                                               first batch starts at 0, each
//!                                                               next one where the last ended
//! ```
//!
//! The listener gathers the acknowledgements that arrive within [`BATCH_WINDOW`] into one
//! line, appends it and flushes it (`fdatasync`, `FlushFileBuffers` on Windows) before the `OK`
//! that covers them: a record grows by at most about a hundred lines a second per stream,
//! however fast the disk under test, so a run left writing for hours stays small. A last line
//! without its `\n` is a write the listener's own crash cut short, never confirmed: it is
//! ignored. Anything else out of shape is an error naming the file and the byte offset.

use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// The first word of a record file, and its version.
pub const RECORD_MAGIC: &str = "tilldb-diskcheck-acks 2 ";
/// Most acknowledgements a writer sends before the listener has confirmed them.
pub const MAX_UNRECORDED: u64 = 4096;
/// How long the listener gathers acknowledgements before it records them as one batch.
pub const BATCH_WINDOW: std::time::Duration = std::time::Duration::from_millis(10);
/// The listener's port unless `--port` says otherwise.
pub const DEFAULT_PORT: u16 = 7400;

/// `raw` writes blocks with each flush method; `db` commits to tilldb.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Blocks written in place with the method's own write (and flush).
    Raw,
    /// tilldb commits at the chosen durability.
    Db,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Raw => "raw",
            Mode::Db => "db",
        }
    }
}

/// What one stream of a run writes, as `diskcheck.json` and the listener both keep it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamMeta {
    /// The run id: 16 hex digits.
    pub run: String,
    /// `raw-<method>` or `db-<method>`.
    pub stream: String,
    pub mode: Mode,
    /// The flush method's name.
    pub method: String,
    /// `db` mode: the commits' durability.
    pub durability: Option<String>,
    /// `db` mode: the log's flush interval, the window `buffered` and `lazy` may lose.
    pub flush_interval_ms: Option<u64>,
    /// `raw` mode: bytes per block and blocks in the file.
    pub block_bytes: u32,
    pub slots: u64,
    /// The file (`raw`) or database directory (`db`), relative to the run's directory.
    pub path: String,
    /// Where it was written: host name and directory, for the humans reading a report.
    pub host: String,
    pub dir: String,
    pub started_unix_ms: u64,
}

/// A name the listener accepts for a run or stream: it becomes a file name there.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// A run id as a name: 16 lowercase hex digits.
pub fn run_name(run: u64) -> String {
    format!("{run:016x}")
}

/// The run id of a run name.
pub fn parse_run_name(name: &str) -> Option<u64> {
    (name.len() == 16)
        .then(|| u64::from_str_radix(name, 16).ok())
        .flatten()
}

/// The first line of a record file.
pub fn record_header(meta: &StreamMeta) -> String {
    let mut line = String::from(RECORD_MAGIC);
    line.push_str(&serde_json::to_string(meta).expect("meta serializes"));
    line.push('\n');
    line
}

/// One batch line: acknowledgements `first..=last`, recorded at `unix_ms`.
pub fn record_line(out: &mut String, first: u64, last: u64, unix_ms: u64) {
    assert!(first <= last, "a batch holds at least one acknowledgement");
    writeln!(out, "{first} {last} {unix_ms}").expect("writing to a String");
}

/// A record read back: its stream, how many acknowledgements, and when each batch was
/// recorded.
#[derive(Debug, Clone)]
pub struct Record {
    pub meta: StreamMeta,
    /// Acknowledgements recorded: seqs `0..acknowledged`.
    pub acknowledged: u64,
    /// `(first seq, unix ms)` of each batch, in order.
    pub batches: Vec<(u64, u64)>,
}

impl Record {
    /// When the listener recorded acknowledgement `seq` (below `acknowledged`).
    pub fn time_of(&self, seq: u64) -> u64 {
        assert!(
            seq < self.acknowledged,
            "acknowledgement {seq} was never recorded"
        );
        let batch = self.batches.partition_point(|&(first, _)| first <= seq) - 1;
        self.batches[batch].1
    }

    /// When the last acknowledgement was recorded, if any was.
    pub fn last_time(&self) -> Option<u64> {
        self.batches.last().map(|&(_, ms)| ms)
    }
}

/// Parses a record file's bytes; `file` names it in errors.
pub fn parse_record(bytes: &[u8], file: &str) -> Result<Record, String> {
    let bad = |offset: usize, what: &str| format!("{file}: at byte {offset}: {what}");
    let header_end = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| bad(0, "no complete first line: not a diskcheck record"))?;
    let header = std::str::from_utf8(&bytes[..header_end])
        .map_err(|_| bad(0, "first line is not UTF-8: not a diskcheck record"))?;
    let json = header.strip_prefix(RECORD_MAGIC).ok_or_else(|| {
        bad(
            0,
            "first line does not start with `tilldb-diskcheck-acks 2`",
        )
    })?;
    let meta: StreamMeta = serde_json::from_str(json).map_err(|e| {
        bad(
            RECORD_MAGIC.len() + e.column().saturating_sub(1),
            &e.to_string(),
        )
    })?;
    let mut record = Record {
        meta,
        acknowledged: 0,
        batches: Vec::new(),
    };
    let mut at = header_end + 1;
    while at < bytes.len() {
        let Some(len) = bytes[at..].iter().position(|&b| b == b'\n') else {
            // The listener died in the middle of this line: it never confirmed it.
            break;
        };
        let line = std::str::from_utf8(&bytes[at..at + len]).map_err(|_| bad(at, "not UTF-8"))?;
        let numbers: Vec<u64> = line.split(' ').filter_map(|n| n.parse().ok()).collect();
        let [first, last, ms] = numbers[..] else {
            return Err(bad(
                at,
                &format!("expected `<first seq> <last seq> <unix ms>`, found {line:?}"),
            ));
        };
        if first != record.acknowledged || last < first {
            return Err(bad(
                at,
                &format!(
                    "acknowledgements {first}..={last} where {} was next: the record is not in \
                     order",
                    record.acknowledged
                ),
            ));
        }
        record.batches.push((first, ms));
        record.acknowledged = last + 1;
        at += len + 1;
    }
    Ok(record)
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> StreamMeta {
        StreamMeta {
            run: run_name(0xabc),
            stream: "raw-fdatasync".into(),
            mode: Mode::Raw,
            method: "fdatasync".into(),
            durability: None,
            flush_interval_ms: None,
            block_bytes: 4096,
            slots: 16,
            path: "raw-fdatasync.dat".into(),
            host: "till-1".into(),
            dir: "/data/dc".into(),
            started_unix_ms: 1,
        }
    }

    #[test]
    fn a_record_reads_back_and_a_cut_last_line_is_not_counted() {
        let mut text = record_header(&meta());
        record_line(&mut text, 0, 0, 100);
        record_line(&mut text, 1, 5, 110);
        record_line(&mut text, 6, 6, 120);
        text.push_str("7 9 13");
        let record = parse_record(text.as_bytes(), "r.acks").expect("parses");
        assert_eq!(record.meta, meta());
        assert_eq!(record.acknowledged, 7);
        let times: Vec<u64> = (0..7).map(|seq| record.time_of(seq)).collect();
        assert_eq!(times, [100, 110, 110, 110, 110, 110, 120]);
        assert_eq!(record.last_time(), Some(120));
    }

    #[test]
    fn a_gap_in_the_record_is_an_error_naming_file_and_offset() {
        let mut text = record_header(&meta());
        record_line(&mut text, 0, 3, 5);
        let offset = text.len();
        record_line(&mut text, 5, 6, 6);
        let err = parse_record(text.as_bytes(), "r.acks").expect_err("a gap");
        assert!(
            err.starts_with(&format!(
                "r.acks: at byte {offset}: acknowledgements 5..=6 where 4 was next"
            )),
            "{err}"
        );
    }

    #[test]
    fn names_that_could_leave_the_directory_are_refused() {
        assert!(valid_name("raw-direct-dsync"));
        for bad in ["", "../x", "a/b", "A", "a b", &"x".repeat(65)] {
            assert!(!valid_name(bad), "{bad:?}");
        }
        assert_eq!(parse_run_name(&run_name(u64::MAX)), Some(u64::MAX));
        assert_eq!(parse_run_name("xyz"), None);
    }
}
