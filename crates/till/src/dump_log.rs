//! `till dump-log DIR`: the write-ahead log of a database, read without changing anything (no
//! recovery, no writer, nothing written): each segment of the chain, each record in it, the
//! segment files outside the chain, and where the log ends (cleanly, or at a torn tail or
//! damage, with the file and offset).
//!
//! The chain is followed from the oldest segment on disk (`--from-lsn N`: from the segment
//! holding lsn N, as recovery does from its checkpoint), exactly as recovery follows it
//! (`tilldb::internals::wal::inspect_log`). A record line gives its lsn, its bytes on disk (header and
//! padding included), its kind, and for a commit its page operations by kind, the pages they
//! change (the first few) and the allocator state after it. `Pad` records (one after each
//! group write) are counted but shown only with `--pads`.
//!
//! Exit status: 0 when the log reads to its end (a torn tail is a normal end after a crash),
//! 1 when the log is corrupt in a way recovery refuses, or a commit record does not decode.
//!
//! # JSON (`--json`): one object
//!
//! ```text
//! field                  type            meaning
//! dir                    string          the database directory
//! checkpoint_lsn         u64 | null      the header's checkpoint; null when unreadable
//! start_lsn, end_lsn     u64             the lsns the chain holds
//! segments               [segment]       every segment file, in generation order
//!   file                 string          its path
//!   generation           u64             from its name
//!   file_bytes           u64             its length
//!   role                 string          chain | unchained | unwritten | recycling | torn
//!   base_lsn             u64 | null      from a valid header
//!   log_block_bytes      u32 | null
//!   segment_bytes        u64 | null
//!   version              u32 | null      log format version (2: with tail slots)
//!   end_lsn              u64 | null      chain: the lsn after its last record
//!   holds_records        bool | null     unchained: a valid record sits at its base
//!   stop                 stop | null     chain: where its records end without SegmentEnd
//! records                [record]        the records shown (filters and --limit applied)
//!   lsn, end_lsn         u64             where it starts and ends in the log
//!   kind                 string          commit | pad | segment_end
//!   bytes                u64             bytes on disk, header and padding included
//!   file, offset         string, u64     where it is
//!   before_checkpoint    bool | null     recovery does not replay it
//!   commit               object | null   payload_bytes, ops, op_kinds {name: count}, pages [u64]
//!                                        (every page changed), page_count, free_head; role
//!                                        (tree | buffered | drain | chunk: the write
//!                                        buffer's records), writes (a buffered commit's),
//!                                        chunk_through and last_chunk (a chunk's last part;
//!                                        null otherwise)
//!   error                string | null   why a commit payload does not decode
//! commit_records         u64             commit records in the chain (shown or not)
//! pad_records            u64
//! records_shown          u64
//! end                    stop | null     where the log ends; null for an empty log
//!   file, offset, lsn    string, u64, u64
//!   fault                string          zero | truncated | bad_len | bad_crc | wrong_lsn | bad_header | bad_tag
//!   clean                bool            fault is zero: never-written space follows
//!   what                 string          the fault in words
//! error                  string | null   corruption that stopped the scan (file and offset)
//! ```

use crate::inspect::{self, CliResult, CommitSummary};
use clap::Args;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use tilldb::internals::record::{Runs, Step};
use tilldb::internals::wal::record::RecordRef;
use tilldb::internals::wal::{
    LogEvent, LogInspection, Lsn, RecordKind, RecoveryStop, SegmentFile, SegmentHeader,
    SegmentRole, inspect_log_with,
};
use tilldb::io::FileStorage;

/// Pages named on a commit's text line.
const PAGES_SHOWN: usize = 6;

#[derive(Args, Debug)]
pub struct DumpLogArgs {
    /// The database directory (the log is DIR/wal).
    dir: PathBuf,
    /// Print one JSON object (fields in the module doc) instead of text.
    #[arg(long)]
    json: bool,
    /// Show at most this many records; the end of the log is found and reported either way.
    #[arg(long)]
    limit: Option<u64>,
    /// Start at the segment holding this lsn and show records from it on.
    #[arg(long)]
    from_lsn: Option<u64>,
    /// Show `Pad` records too.
    #[arg(long)]
    pads: bool,
}

pub fn run(args: &DumpLogArgs) -> CliResult<()> {
    let wal_dir = args.dir.join("wal");
    if !wal_dir.is_dir() {
        return Err(format!("{} holds no tilldb log (no wal/)", args.dir.display()).into());
    }
    let _lock = inspect::hold_files(&args.dir)?;
    let header = inspect::read_header(&args.dir).map(|h| h.chosen);
    let checkpoint = match &header {
        Ok(Ok((_, h))) => Some(h.checkpoint_lsn.0),
        _ => None,
    };
    let mut dump = Dump {
        args,
        checkpoint,
        segment: None,
        shown: 0,
        checkpoint_marked: false,
        commits: 0,
        pads: 0,
        bad_commits: Vec::new(),
        stops: Vec::new(),
        records: Vec::new(),
        runs: Runs::default(),
        run_from: 0,
        unfinished: Vec::new(),
    };
    if !args.json {
        match &header {
            Ok(Ok((slot, h))) => println!(
                "log of {}: checkpoint lsn {} (header slot {slot}, generation {})",
                args.dir.display(),
                h.checkpoint_lsn,
                h.generation
            ),
            Ok(Err(why)) => println!("log of {} (header unusable: {why})", args.dir.display()),
            Err(why) => println!("log of {} (no header: {why})", args.dir.display()),
        }
    }
    let start = args.from_lsn.map(Lsn);
    // An encrypted database's records are shown opened with its key; without one, as they
    // lie (framing, sealed payloads).
    let keys = match &header {
        Ok(Ok((_, h))) if h.encryption.is_none() || crate::key::encryption()?.is_some() => {
            crate::key::database_keys(&args.dir, h)?
        }
        _ => None,
    };
    let result = inspect_log_with(
        &FileStorage::read_only(),
        &wal_dir,
        (start, keys.as_deref()),
        |e| {
            dump.on_event(e);
        },
    );
    if args.json {
        println!("{}", serde_json::to_string_pretty(&dump.json(&result))?);
    } else if let Ok(found) = &result {
        dump.print_summary(found);
    }
    let found = result?;
    if let Some(bad) = dump.bad_commits.first() {
        return Err(format!(
            "{} commit records do not decode; the first: corrupt {} at offset {} (lsn {}): {}",
            dump.bad_commits.len(),
            bad.path.display(),
            bad.offset,
            bad.lsn,
            bad.what
        )
        .into());
    }
    assert!(
        dump.shown <= args.limit.unwrap_or(u64::MAX),
        "--limit holds"
    );
    debug_assert_eq!(dump.commits, found.recovery.records);
    Ok(())
}

/// The dump as the scan goes.
struct Dump<'a> {
    args: &'a DumpLogArgs,
    checkpoint: Option<u64>,
    /// The segment whose records are being shown.
    segment: Option<(PathBuf, SegmentHeader)>,
    shown: u64,
    commits: u64,
    pads: u64,
    bad_commits: Vec<inspect::BadCommit>,
    /// The checkpoint line was printed.
    checkpoint_marked: bool,
    /// Where each segment's records stopped, by generation.
    stops: Vec<(u64, RecoveryStop)>,
    /// Records shown, as JSON (`--json` only).
    records: Vec<Value>,
    /// Where the records stand in their commits (a commit logged in parts).
    runs: Runs,
    /// The lsn of the first part of the commit being read in parts.
    run_from: u64,
    /// The first lsns of commits logged in parts whose last part never came.
    unfinished: Vec<u64>,
}

impl Dump<'_> {
    fn on_event(&mut self, event: LogEvent<'_>) {
        match event {
            LogEvent::Segment { path, header } => {
                if !self.args.json {
                    println!(
                        "segment {}: generation {}, base lsn {}, {} B, log block {} B, \
                         version {} ({} tail slots)",
                        file_name(path),
                        header.generation,
                        header.base_lsn,
                        header.segment_bytes,
                        header.log_block_bytes,
                        header.version,
                        header.slots()
                    );
                }
                self.segment = Some((path.to_path_buf(), *header));
            }
            LogEvent::Record { offset, record } => self.on_record(offset, record),
            LogEvent::Stop(stop) => {
                let (_, header) = self.segment.as_ref().expect("a stop follows its segment");
                let generation = header.generation;
                if !self.args.json {
                    self.mark_checkpoint(stop.lsn.0);
                    println!(
                        "  records end at offset {} (lsn {}): {}",
                        stop.offset, stop.lsn, stop.fault
                    );
                }
                self.stops.push((generation, stop.clone()));
            }
        }
    }

    fn on_record(&mut self, offset: u64, record: RecordRef<'_>) {
        let (path, header) = self.segment.as_ref().expect("a record follows its segment");
        let path = path.clone();
        // A sealed record (an encrypted database's log, read without its key) is not
        // decoded: its payload is ciphertext.
        let commit = (record.kind == RecordKind::Data && record.sealed.is_none())
            .then(|| CommitSummary::of(record.payload));
        match record.kind {
            RecordKind::Data => self.commits += 1,
            RecordKind::Pad => self.pads += 1,
            RecordKind::SegmentEnd => {}
        }
        if let Some(Ok(c)) = &commit {
            // A dump from --from-lsn, or from a log whose start was recycled, may begin in
            // the middle of a commit logged in parts: its tail is not followed.
            if let Ok((step, abandoned)) = self.runs.step(c.part) {
                if abandoned {
                    self.unfinished.push(self.run_from);
                }
                if step == Step::Begins {
                    self.run_from = record.lsn;
                }
            }
        }
        if let Some(Err(what)) = &commit {
            self.bad_commits.push(inspect::BadCommit {
                path: path.clone(),
                offset,
                lsn: record.lsn,
                what,
            });
        }
        let wanted = record.lsn >= self.args.from_lsn.unwrap_or(0)
            && (record.kind != RecordKind::Pad || self.args.pads)
            && self.shown < self.args.limit.unwrap_or(u64::MAX);
        if !wanted {
            return;
        }
        self.shown += 1;
        let before_checkpoint = self.checkpoint.map(|c| record.lsn < c);
        let header = *header;
        if self.args.json {
            self.records.push(json!({
                "lsn": record.lsn,
                "end_lsn": record.lsn + record.len as u64,
                "kind": inspect::kind_name(record.kind),
                "bytes": record.len,
                "file": path,
                "offset": offset,
                "before_checkpoint": before_checkpoint,
                "commit": commit.as_ref().and_then(|c| c.as_ref().ok()).map(commit_json),
                "error": commit.as_ref().and_then(|c| c.as_ref().err()),
            }));
            return;
        }
        let detail = match (&commit, record.kind) {
            (Some(Ok(c)), _) => c.line(PAGES_SHOWN),
            (Some(Err(what)), _) => format!("DOES NOT DECODE at offset {offset}: {what}"),
            (None, RecordKind::SegmentEnd) => format!(
                "the log continues in the next segment at lsn {}",
                header.base_lsn + header.capacity()
            ),
            (None, _) => String::new(),
        };
        self.mark_checkpoint(record.lsn);
        println!(
            "  lsn {:>10} {:>7} B  {:<11} {detail}",
            record.lsn,
            record.len,
            inspect::kind_name(record.kind)
        );
    }

    /// Prints, once, where recovery starts replaying: before the first line at or past the
    /// checkpoint.
    fn mark_checkpoint(&mut self, lsn: u64) {
        if let Some(checkpoint) = self.checkpoint
            && lsn >= checkpoint
            && !self.checkpoint_marked
        {
            println!("  --- checkpoint at lsn {checkpoint}: recovery replays from here ---");
            self.checkpoint_marked = true;
        }
    }

    fn print_summary(&self, found: &LogInspection) {
        let others: Vec<&SegmentFile> = found
            .segments
            .iter()
            .filter(|s| !matches!(s.role, SegmentRole::Chain { .. }))
            .collect();
        if !others.is_empty() {
            println!("segment files outside the chain:");
            for s in others {
                println!(
                    "  {}: {}",
                    file_name(&s.path),
                    role_text(s, found.recovery.start_lsn)
                );
            }
        }
        let recovery = &found.recovery;
        match &recovery.stop {
            Some(stop) => println!("end: the log {}", inspect::describe_stop(stop)),
            None => println!("end: the log is empty (no segments)"),
        }
        println!(
            "{} commit records, {} pad records, {} segments in the chain, lsns {}..{}; {} \
             records shown",
            self.commits,
            self.pads,
            recovery.segments,
            recovery.start_lsn,
            recovery.end_lsn,
            self.shown
        );
        for lsn in self.unfinished_commits() {
            println!(
                "the commit logged in parts from lsn {lsn} never got its last part: recovery \
                 applies none of it"
            );
        }
    }

    /// The first lsns of commits logged in parts whose last part is not in the log.
    fn unfinished_commits(&self) -> Vec<u64> {
        let mut all = self.unfinished.clone();
        if self.runs.is_open() {
            all.push(self.run_from);
        }
        all
    }

    fn json(&self, result: &tilldb::Result<LogInspection>) -> Value {
        let empty = LogInspection::default();
        let found = result.as_ref().unwrap_or(&empty);
        let segments: Vec<Value> = found
            .segments
            .iter()
            .map(|s| {
                let stop = self
                    .stops
                    .iter()
                    .find(|(g, _)| *g == s.generation)
                    .map(|(_, stop)| stop);
                segment_json(s, stop)
            })
            .collect();
        json!({
            "dir": self.args.dir,
            "checkpoint_lsn": self.checkpoint,
            "start_lsn": found.recovery.start_lsn.0,
            "end_lsn": found.recovery.end_lsn.0,
            "segments": segments,
            "records": self.records,
            "commit_records": self.commits,
            "pad_records": self.pads,
            "records_shown": self.shown,
            "unfinished_commits": self.unfinished_commits(),
            "end": found.recovery.stop.as_ref().map(stop_json),
            "error": result.as_ref().err().map(ToString::to_string),
        })
    }
}

/// A segment file's role in words.
fn role_text(s: &SegmentFile, start: Lsn) -> String {
    let base = s.header.map_or(0, |h| h.base_lsn);
    match s.role {
        SegmentRole::Chain { end_lsn } => format!("in the chain, lsns {base}..{end_lsn}"),
        SegmentRole::Unchained { .. } if base < start.0 => {
            format!("released before the log's start (base lsn {base}); free for reuse")
        }
        SegmentRole::Unchained {
            holds_records: true,
        } => format!(
            "NOT in the chain, yet holds records from lsn {base}, past the end of the log: \
             written before a crash lost what precedes them, or a segment is missing; \
             recovery never reads them"
        ),
        SegmentRole::Unchained {
            holds_records: false,
        } => format!("a spare prepared for lsn {base}, never written to"),
        SegmentRole::Unwritten => "all zeros: an interrupted create; free for reuse".into(),
        SegmentRole::Recycling { header_generation } => format!(
            "holds generation {header_generation}'s header: an interrupted recycle; free for reuse"
        ),
        SegmentRole::Torn { offset, what } => format!(
            "header does not decode at offset {offset} ({what}): an interrupted preparation; \
             free for reuse"
        ),
    }
}

fn role_name(role: SegmentRole) -> &'static str {
    match role {
        SegmentRole::Chain { .. } => "chain",
        SegmentRole::Unchained { .. } => "unchained",
        SegmentRole::Unwritten => "unwritten",
        SegmentRole::Recycling { .. } => "recycling",
        SegmentRole::Torn { .. } => "torn",
    }
}

fn segment_json(s: &SegmentFile, stop: Option<&RecoveryStop>) -> Value {
    json!({
        "file": s.path,
        "generation": s.generation,
        "file_bytes": s.file_bytes,
        "role": role_name(s.role),
        "base_lsn": s.header.map(|h| h.base_lsn),
        "log_block_bytes": s.header.map(|h| h.log_block_bytes),
        "segment_bytes": s.header.map(|h| h.segment_bytes),
        "version": s.header.map(|h| h.version),
        "end_lsn": match s.role {
            SegmentRole::Chain { end_lsn } => Some(end_lsn.0),
            _ => None,
        },
        "holds_records": match s.role {
            SegmentRole::Unchained { holds_records } => Some(holds_records),
            _ => None,
        },
        "stop": stop.map(stop_json),
    })
}

/// A stop as JSON (also used by `till stats`).
pub fn stop_json(stop: &RecoveryStop) -> Value {
    json!({
        "file": stop.path,
        "offset": stop.offset,
        "lsn": stop.lsn.0,
        "fault": inspect::fault_name(stop.fault),
        "clean": stop.fault == tilldb::internals::wal::record::RecordFault::Zero,
        "what": stop.fault.to_string(),
    })
}

fn commit_json(c: &CommitSummary) -> Value {
    json!({
        "role": c.role,
        "writes": c.writes,
        "chunk_through": c.chunk.map(|(through, _)| through),
        "last_chunk": c.chunk.map(|(_, last)| last),
        "part": c.part.index,
        "last_part": c.part.last,
        "payload_bytes": c.payload_bytes,
        "ops": c.ops,
        "op_kinds": c.op_kinds,
        "pages": c.pages,
        "page_count": c.page_count,
        "free_head": c.free_head.0,
    })
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}
