//! Read-only views of a database directory, shared by `till dump-log`, `till stats` and
//! `till check`: the header slots, the log (through `tilldb::internals::wal::inspect_log`), commit records
//! in brief, and the data file's pages through the `Pages` trait. Nothing here writes, and
//! nothing runs recovery: bytes on disk are shown as they are.

use crate::progress;
use indicatif::ProgressBar;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tilldb::internals::btree::{PageOp, Pages};
use tilldb::internals::header::{
    HEADER_FILE_NAME, Header, SLOT_BYTES, SLOT_COUNT, SlotState, choose_slot,
};
use tilldb::internals::page::{PageBuf, PageId, PageStore};
use tilldb::internals::record::{Part, Role};
use tilldb::internals::wal::record::RecordFault;
use tilldb::internals::wal::{LogEvent, LogInspection, RecordKind, RecoveryStop, inspect_log_with};
use tilldb::{Db, Error};

/// The result type of the commands.
pub type CliResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Refuses a directory that holds no database.
pub fn require_database(dir: &Path) -> CliResult<()> {
    if dir.join(HEADER_FILE_NAME).exists() {
        Ok(())
    } else {
        Err(format!(
            "{} holds no tilldb database (no {HEADER_FILE_NAME})",
            dir.display()
        )
        .into())
    }
}

/// Holds the files still for a read-only tool (`stats`, `dump-log`), whether or not a `Db`
/// has the database open: the readers' lock, shared (`Db::hold_files`). A writer goes on
/// committing, but changes no page, header or log segment until the tool lets go; only the
/// log past what it published as durable grows. Two tools may read at once. On read-only
/// media without the lock file nothing is locked, and no writer can be there.
pub fn hold_files(dir: &Path) -> CliResult<Box<dyn tilldb::io::HeldLock>> {
    Ok(Db::hold_files(dir)?)
}

/// `tilldb.meta` as read: each slot, and which one is the header.
#[derive(Debug)]
pub struct HeaderRead {
    pub path: PathBuf,
    /// Each slot's state, or `(offset in the file, what)` when its crc matches and its fields
    /// do not.
    pub slots: [Result<SlotState, (u64, &'static str)>; SLOT_COUNT],
    /// The header and its slot, or why there is none usable.
    pub chosen: Result<(usize, Header), String>,
}

/// Reads both header slots with a plain read (a short file reads as zero-padded, as the
/// engine reads it).
pub fn read_header(dir: &Path) -> CliResult<HeaderRead> {
    let path = dir.join(HEADER_FILE_NAME);
    let mut bytes = std::fs::read(&path).map_err(|e| format!("read {}: {e}", path.display()))?;
    bytes.resize(bytes.len().max(SLOT_COUNT * SLOT_BYTES), 0);
    let slots: [Result<SlotState, (u64, &'static str)>; SLOT_COUNT] = std::array::from_fn(|slot| {
        let start = slot * SLOT_BYTES;
        Header::decode(&bytes[start..start + SLOT_BYTES], slot)
            .map_err(|(offset, what)| ((start + offset) as u64, what))
    });
    let corrupt =
        |offset: u64, what: &str| format!("corrupt {} at offset {offset}: {what}", path.display());
    let chosen = match &slots {
        [Ok(a), Ok(b)] => match choose_slot([*a, *b]) {
            Ok(Some(found)) => Ok(found),
            Ok(None) => Err(format!("{}: both header slots are empty", path.display())),
            Err((offset, what)) => Err(corrupt(offset, what)),
        },
        [Err((offset, what)), _] | [_, Err((offset, what))] => Err(corrupt(*offset, what)),
    };
    Ok(HeaderRead {
        path,
        slots,
        chosen,
    })
}

/// A slot's state as one word, for text and JSON.
pub fn slot_state_name(slot: &Result<SlotState, (u64, &'static str)>) -> &'static str {
    match slot {
        Ok(SlotState::Zero) => "zero",
        Ok(SlotState::Torn) => "torn",
        Ok(SlotState::Valid(_)) => "valid",
        Err(_) => "corrupt",
    }
}

/// A record fault's stable name in JSON.
pub fn fault_name(fault: RecordFault) -> &'static str {
    match fault {
        RecordFault::Truncated => "truncated",
        RecordFault::Zero => "zero",
        RecordFault::BadLen => "bad_len",
        RecordFault::BadCrc => "bad_crc",
        RecordFault::WrongLsn => "wrong_lsn",
        RecordFault::BadHeader => "bad_header",
        RecordFault::BadTag => "bad_tag",
    }
}

/// A record kind's stable name.
pub fn kind_name(kind: RecordKind) -> &'static str {
    match kind {
        RecordKind::Data => "commit",
        RecordKind::Pad => "pad",
        RecordKind::SegmentEnd => "segment_end",
    }
}

/// Where the log ends, in words: a clean end, or a torn tail (or damage) that recovery cuts.
pub fn describe_stop(stop: &RecoveryStop) -> String {
    let place = format!(
        "{} offset {} (lsn {})",
        stop.path.display(),
        stop.offset,
        stop.lsn
    );
    if stop.fault == RecordFault::Zero {
        format!("ends cleanly at {place}: zeroed (never written) space follows")
    } else {
        format!(
            "ends at {place}: {}; a torn tail (or damage): recovery drops everything after it",
            stop.fault
        )
    }
}

/// One commit record in brief.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitSummary {
    /// Where the record stands in its commit (a whole commit, or a part of one logged in
    /// parts).
    pub part: Part,
    pub payload_bytes: usize,
    /// Pages the allocator had handed out after the commit, page 0 included.
    pub page_count: u64,
    pub free_head: PageId,
    pub ops: usize,
    /// Ops per kind, by name.
    pub op_kinds: BTreeMap<&'static str, usize>,
    /// Every page an op changes, ascending, once each.
    pub pages: Vec<u64>,
    /// What the record does besides its ops (`record.rs`, flags): `tree`, `buffered` (a
    /// commit the write buffer took), `drain` (a part of a whole drain of the buffer) or
    /// `chunk` (a part of a chunk of a drain in chunks).
    pub role: &'static str,
    /// A buffered commit's writes (0 for the others).
    pub writes: usize,
    /// A chunk's last part: the end of the last buffered commit of the generation it drains,
    /// and whether it is the drain's last chunk.
    pub chunk: Option<(u64, bool)>,
}

impl CommitSummary {
    /// Decodes a commit record's payload; `Err` says what is wrong with it.
    pub fn of(payload: &[u8]) -> Result<CommitSummary, &'static str> {
        let commit = Db::decode_commit_record(payload)?;
        let mut op_kinds = BTreeMap::new();
        for op in &commit.ops {
            *op_kinds.entry(op_name(op)).or_default() += 1;
        }
        let mut pages: Vec<u64> = commit.ops.iter().map(|op| op.page().0).collect();
        pages.sort_unstable();
        pages.dedup();
        let role = match commit.role {
            Role::Tree => "tree",
            Role::Buffered => "buffered",
            Role::Drain => "drain",
            Role::Chunk => "chunk",
        };
        Ok(CommitSummary {
            role,
            writes: if commit.role == Role::Buffered {
                commit.changes.as_ref().map_or(0, Vec::len)
            } else {
                0
            },
            chunk: commit.chunk.map(|mark| (mark.through, mark.last)),
            part: commit.part,
            payload_bytes: payload.len(),
            page_count: commit.alloc.page_count,
            free_head: commit.alloc.free_head,
            ops: commit.ops.len(),
            op_kinds,
            pages,
        })
    }

    /// One line: ops by kind, the first pages, the allocator state after the commit.
    pub fn line(&self, pages_shown: usize) -> String {
        let kinds: Vec<String> = self
            .op_kinds
            .iter()
            .map(|(name, n)| format!("{n} {name}"))
            .collect();
        let mut pages: Vec<String> = self
            .pages
            .iter()
            .take(pages_shown)
            .map(u64::to_string)
            .collect();
        if self.pages.len() > pages_shown {
            pages.push(format!("+{} more", self.pages.len() - pages_shown));
        }
        let part = match self.part {
            Part {
                index: 0,
                last: true,
            } => String::new(),
            Part { index, last: false } => format!("part {index} (not the last) of a commit: "),
            Part { index, last: true } => format!("part {index}, the last, of a commit: "),
        };
        let role = match (self.role, self.chunk) {
            ("buffered", _) => format!("buffered, {} writes, ", self.writes),
            ("drain", _) => "drain of the write buffer: ".to_owned(),
            ("chunk", Some((through, true))) => {
                format!("the last chunk of a drain through lsn {through}: ")
            }
            ("chunk", Some((through, false))) => {
                format!("a chunk of a drain through lsn {through}: ")
            }
            ("chunk", None) => "a chunk of a drain: ".to_owned(),
            _ => String::new(),
        };
        format!(
            "{part}{role}{} ops ({}) on {} pages [{}]; page_count {}, free_head {}",
            self.ops,
            kinds.join(", "),
            self.pages.len(),
            pages.join(" "),
            self.page_count,
            self.free_head.0
        )
    }
}

/// The name of a page operation (`btree/redo.rs`).
fn op_name(op: &PageOp) -> &'static str {
    match op {
        PageOp::Format { .. } => "format",
        PageOp::Image { .. } => "image",
        PageOp::LeafPut { .. } => "leaf_put",
        PageOp::LeafDelete { .. } => "leaf_delete",
        PageOp::Truncate { .. } => "truncate",
        PageOp::BranchInsert { .. } => "branch_insert",
        PageOp::BranchRemove { .. } => "branch_remove",
        PageOp::SetLeftmost { .. } => "set_leftmost",
        PageOp::SetPrev { .. } => "set_prev",
        PageOp::SetNext { .. } => "set_next",
        PageOp::OverflowWrite { .. } => "overflow_write",
    }
}

/// A commit record whose payload does not decode, though its checksum matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadCommit {
    pub path: PathBuf,
    pub offset: u64,
    pub lsn: u64,
    pub what: &'static str,
}

/// What one pass over the log found, for `till stats` and `till check`.
#[derive(Debug)]
pub struct LogFacts {
    /// The chain and the segment files, or the corruption that stopped the scan.
    pub inspection: Result<LogInspection, Error>,
    /// Commit records in the chain.
    pub commits: u64,
    /// Commit records at or after the checkpoint: what recovery replays.
    pub commits_after_checkpoint: u64,
    /// The allocator state after the last commit record, if there is one.
    pub last_alloc: Option<(u64, PageId)>,
    /// Commit records that do not decode.
    pub bad_commits: Vec<BadCommit>,
    /// Commit records of an encrypted database's log read without its key: not decoded.
    pub sealed_commits: u64,
    /// Where each segment's records stop without `SegmentEnd`, in log order; the last one is
    /// the end of the log.
    pub stops: Vec<RecoveryStop>,
}

/// Follows the log in `dir/wal` from the checkpoint, as recovery would, without writing.
///
/// `bar` follows the bytes of the segments read, of all the segment files' bytes (segments
/// before the checkpoint's are not read: it may end short).
pub fn read_log_facts(
    dir: &Path,
    checkpoint: u64,
    keys: Option<&tilldb::internals::crypt::DatabaseKeys>,
    bar: &ProgressBar,
) -> LogFacts {
    let storage = tilldb::io::FileStorage::read_only();
    let file_bytes = |path: &Path| std::fs::metadata(path).map_or(0, |m| m.len());
    // Only the bar's length: a directory that does not list is the inspection's to report.
    let segment_bytes: u64 = std::fs::read_dir(dir.join("wal")).map_or(0, |entries| {
        entries
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == "wal"))
            .map(|e| file_bytes(&e.path()))
            .sum()
    });
    bar.set_length(segment_bytes);
    // Bytes of the segments read before the current one, and the current one's.
    let (mut before_bytes, mut current_bytes) = (0u64, 0u64);
    let mut facts = LogFacts {
        inspection: Ok(LogInspection::default()),
        commits: 0,
        commits_after_checkpoint: 0,
        last_alloc: None,
        bad_commits: Vec::new(),
        sealed_commits: 0,
        stops: Vec::new(),
    };
    let mut path = PathBuf::new();
    let mut sealed_unopened = false;
    let inspection = inspect_log_with(
        &storage,
        &dir.join("wal"),
        (Some(tilldb::Lsn(checkpoint)), keys),
        |event| match event {
            LogEvent::Segment { path: p, header } => {
                path = p.to_path_buf();
                // A sealed segment read without the key: its records' payloads stay sealed.
                sealed_unopened = header.seal.is_some() && keys.is_none();
                before_bytes += current_bytes;
                current_bytes = file_bytes(p);
                bar.set_position(before_bytes);
            }
            LogEvent::Record { offset, record } if record.kind == RecordKind::Data => {
                bar.set_position(before_bytes + offset);
                facts.commits += 1;
                if record.lsn >= checkpoint {
                    facts.commits_after_checkpoint += 1;
                }
                if sealed_unopened {
                    facts.sealed_commits += 1;
                    return;
                }
                match CommitSummary::of(record.payload) {
                    // An allocator state counts once its commit happened (its last part).
                    Ok(c) if c.part.last => facts.last_alloc = Some((c.page_count, c.free_head)),
                    Ok(_) => {}
                    Err(what) => facts.bad_commits.push(BadCommit {
                        path: path.clone(),
                        offset,
                        lsn: record.lsn,
                        what,
                    }),
                }
            }
            LogEvent::Record { .. } => {}
            LogEvent::Stop(stop) => facts.stops.push(stop.clone()),
        },
    );
    facts.inspection = inspection;
    bar.finish_and_clear();
    facts
}

/// The data file's pages as they are on disk, for tree and free-space checks without
/// recovery. Read-only: the check calls only `read`.
#[derive(Debug)]
pub struct StorePages {
    pub store: PageStore,
    /// Counts every page read (a check reads each page of a tree once): hidden unless
    /// [`StorePages::with_progress`].
    read: ProgressBar,
}

impl StorePages {
    /// Opens `data.tdb` in `dir` for reading, its pages opened with `keys` (an encrypted
    /// database's).
    pub fn open(
        dir: &Path,
        page_bytes: u32,
        keys: Option<std::sync::Arc<tilldb::internals::crypt::DatabaseKeys>>,
    ) -> CliResult<StorePages> {
        let storage = tilldb::io::FileStorage::read_only();
        let store = PageStore::open(&storage, dir, tilldb::FlushMethod::Fdatasync, page_bytes)?
            .with_keys(&storage, keys)?;
        Ok(StorePages {
            store,
            read: ProgressBar::hidden(),
        })
    }

    /// These pages, each read counted on `bar`.
    pub fn with_progress(self, bar: ProgressBar) -> StorePages {
        StorePages { read: bar, ..self }
    }
}

impl Pages for StorePages {
    type Read<'a> = Box<PageBuf>;

    fn format(&self) -> tilldb::internals::page::PageFormat {
        self.store.format()
    }

    fn read(&self, id: PageId) -> tilldb::Result<Box<PageBuf>> {
        self.read.inc(1);
        match self.store.read(id)? {
            Some(page) => Ok(Box::new(page)),
            None => Err(Error::Corruption {
                file: self.store.path().to_path_buf(),
                offset: id.0.saturating_mul(u64::from(self.store.page_bytes())),
                what: "page in use was never written (or lies past the end of the file)",
            }),
        }
    }

    fn apply(&self, op: PageOp) -> tilldb::Result<()> {
        panic!("a read-only view was asked to change {}", op.page());
    }

    fn allocate(&self, _kind: tilldb::internals::page::PageKind) -> tilldb::Result<PageId> {
        panic!("a read-only view was asked to allocate a page");
    }

    fn free(&self, id: PageId) -> tilldb::Result<()> {
        panic!("a read-only view was asked to free {id}");
    }

    fn path(&self) -> &Path {
        self.store.path()
    }
}

/// Where every page of the data file belongs: `tilldb::Db::check_space` copied into a type the
/// CLI can name (tilldb's `SpaceCheck` is not re-exported from the crate root yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Space {
    pub tables: Vec<(String, tilldb::internals::btree::TreeStats)>,
    pub catalog_pages: u64,
    /// Pages of dropped tables not yet reclaimed (counted in `tree_pages`).
    pub dropped_pages: u64,
    pub tree_pages: u64,
    pub page_count: u64,
    pub free_pages: u64,
    /// Every leaked page counted; `leaked` lists the first of them.
    pub leaked_pages: u64,
    pub leaked: Vec<PageId>,
    pub doubly_used: Vec<(PageId, String, String)>,
}

/// Moves a `SpaceCheck` into a [`Space`].
macro_rules! space_from {
    ($check:expr) => {{
        let check = $check;
        Space {
            catalog_pages: check.catalog_pages,
            dropped_pages: check.dropped_pages,
            tree_pages: check.tree_pages(),
            page_count: check.page_count,
            free_pages: check.free_pages,
            tables: check.tables,
            leaked_pages: check.leaked_pages,
            leaked: check.leaked,
            doubly_used: check.doubly_used,
        }
    }};
}

impl Space {
    /// The trees and free space of an open (recovered) database; `bar` follows the pages
    /// read.
    pub fn of_db(db: &Db, bar: &ProgressBar) -> tilldb::Result<Space> {
        let space = db.check_space_with_progress(&mut progress::follow(bar))?;
        bar.finish_and_clear();
        Ok(space_from!(space))
    }

    /// The trees and free space of the data file as it is on disk, with the allocator state
    /// its pages were written with.
    pub fn of_pages(
        pages: &StorePages,
        page_count: u64,
        free_head: PageId,
    ) -> tilldb::Result<Space> {
        Ok(space_from!(tilldb::internals::check_space_of(
            pages, page_count, free_head
        )?))
    }

    /// True when every page is accounted for exactly once.
    pub fn is_clean(&self) -> bool {
        self.leaked_pages == 0 && self.doubly_used.is_empty()
    }
}

/// A file's length, `None` if it does not exist.
pub fn file_bytes(path: &Path) -> CliResult<Option<u64>> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(Some(m.len())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("stat {}: {e}", path.display()).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_summary_lists_pages_once_and_in_order() {
        let mut summary = CommitSummary {
            part: Part {
                index: 0,
                last: true,
            },
            payload_bytes: 100,
            page_count: 9,
            free_head: PageId(0),
            ops: 3,
            op_kinds: BTreeMap::from([("leaf_put", 2), ("format", 1)]),
            pages: vec![2, 3, 4, 5],
            role: "tree",
            writes: 0,
            chunk: None,
        };
        assert_eq!(
            summary.line(2),
            "3 ops (1 format, 2 leaf_put) on 4 pages [2 3 +2 more]; page_count 9, free_head 0"
        );
        summary.part = Part {
            index: 2,
            last: false,
        };
        assert!(
            summary
                .line(2)
                .starts_with("part 2 (not the last) of a commit: 3 ops"),
            "{}",
            summary.line(2)
        );
        summary.role = "chunk";
        summary.chunk = Some((1234, true));
        assert!(
            summary
                .line(2)
                .contains("of a commit: the last chunk of a drain through lsn 1234: 3 ops"),
            "{}",
            summary.line(2)
        );
    }

    #[test]
    fn garbage_is_not_a_commit_record() {
        assert!(CommitSummary::of(&[0u8; 40]).is_err());
        assert!(CommitSummary::of(&[]).is_err());
    }
}
