//! `till stats DIR`: what a database holds, read without changing anything (no recovery, no
//! writer): the header and both of its slots, the files and their sizes, the log, the pages
//! (allocated, in trees, on the free list, leaked) and every table's tree.
//!
//! Trees and free space are read from the data file as it is on disk, which is up to date only
//! when no commit record follows the checkpoint (a cleanly closed database). Otherwise the
//! commits after the checkpoint live only in the log until recovery replays them: `stats`
//! says so and gives the allocator state at the log's end instead; `till check DIR` recovers
//! and checks every tree.
//!
//! On a terminal, reading the log and the trees shows a progress bar on standard error
//! (`progress.rs`); the facts go to standard output once read.
//!
//! # JSON (`--json`): one object
//!
//! ```text
//! field                      type            meaning
//! dir                        string
//! header                     object | null   the newest valid slot: file, slot, generation,
//!                                            page_bytes, flush_method, torn_page_guard,
//!                                            checkpoint_lsn, catalog_root, free_head, page_count
//! encryption                 object | null   an encrypted database's: cipher, key_id (the
//!                                            name of the key that wraps its data key),
//!                                            database_id (hex); null for a plain one
//! header_error               string | null   why no slot is usable
//! header_slots               [slot]          slot, state (zero | torn | valid | corrupt),
//!                                            generation | null, checkpoint_lsn | null,
//!                                            error | null (corrupt: file offset and what)
//! files                      object          data_bytes, data_page_places (whole pages in
//!                                            the file, page 0 included), doublewrite_bytes | null,
//!                                            ledger_bytes | null (the page ledger),
//!                                            wal_segment_files, wal_bytes
//! doublewrite                object | null   pages_max, last_batch (empty | torn | valid),
//!                                            last_batch_sequence, last_batch_images, error
//!                                            (the file does not read: file and offset); each
//!                                            null when unknown
//! log                        object          start_lsn, end_lsn, chain_segments,
//!                                            commit_records, commits_after_checkpoint,
//!                                            sealed_commits (of an encrypted database read
//!                                            without its key: not decoded), redo_bytes | null (end_lsn - checkpoint lsn:
//!                                            what recovery replays), checkpoint_age_seconds
//!                                            | null (since tilldb.meta was written),
//!                                            page_count_at_end | null, free_head_at_end | null,
//!                                            end (as in dump-log) | null, error | null
//! pages                      object          page_count (header), in_trees | null,
//!                                            catalog_pages | null, dropped_pages | null
//!                                            (dropped tables awaiting reclaim), free_list | null,
//!                                            leaked_pages | null, leaked [u64] | null (the
//!                                            first 10,000 of them, in page order),
//!                                            doubly_used [{page, owners: [string, string]}] | null
//! tables                     [table] | null  name ("" is the default table), keys, depth,
//!                                            leaf_pages, branch_pages, overflow_pages,
//!                                            key_bytes, value_bytes
//! trees_unavailable          string | null   why trees and free space were not read
//! ```

use crate::dump_log::stop_json;
use crate::inspect::{self, CliResult, HeaderRead, LogFacts, Space, StorePages};
use crate::progress::{self, Unit};
use clap::Args;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use tilldb::FlushMethod;
use tilldb::internals::header::{Header, SlotState};
use tilldb::internals::page::{
    BatchState, DATA_FILE_NAME, DOUBLEWRITE_FILE_NAME, Doublewrite, LEDGER_FILE_NAME, TornPageGuard,
};
use tilldb::internals::wal::SegmentRole;
use tilldb::io::FileStorage;

#[derive(Args, Debug)]
pub struct StatsArgs {
    /// The database directory.
    dir: PathBuf,
    /// Print one JSON object (fields in the module doc) instead of text.
    #[arg(long)]
    json: bool,
}

/// Everything `stats` found.
struct Stats {
    header: HeaderRead,
    data_bytes: u64,
    doublewrite_bytes: Option<u64>,
    ledger_bytes: Option<u64>,
    /// The doublewrite guard's file, when the database uses one.
    doublewrite: Option<Result<DoublewriteFacts, String>>,
    /// Segment files in `wal/` and their bytes.
    wal_files: (usize, u64),
    log: LogFacts,
    /// Seconds since `tilldb.meta` was last written: every checkpoint (and clean close)
    /// writes it, so this is the last checkpoint's age. `None` when the clock says otherwise.
    checkpoint_age_seconds: Option<f64>,
    /// The trees and free space, or why they were not read.
    space: Result<Space, String>,
}

struct DoublewriteFacts {
    pages_max: usize,
    batch: BatchState,
}

pub fn run(args: &StatsArgs) -> CliResult<()> {
    inspect::require_database(&args.dir)?;
    let _lock = inspect::hold_files(&args.dir)?;
    let header = inspect::read_header(&args.dir)?;
    let chosen = match &header.chosen {
        Ok((_, h)) => *h,
        Err(why) => {
            if args.json {
                let out = json!({
                    "dir": args.dir,
                    "header": null,
                    "header_error": why,
                    "header_slots": slots_json(&header),
                });
                println!("{}", serde_json::to_string_pretty(&out)?);
            }
            return Err(why.clone().into());
        }
    };
    let data_bytes = inspect::file_bytes(&args.dir.join(DATA_FILE_NAME))?.unwrap_or(0);
    let doublewrite_bytes = inspect::file_bytes(&args.dir.join(DOUBLEWRITE_FILE_NAME))?;
    let ledger_bytes = inspect::file_bytes(&args.dir.join(LEDGER_FILE_NAME))?;
    let doublewrite = (chosen.torn_page_guard == TornPageGuard::Doublewrite)
        .then(|| read_doublewrite(&args.dir, chosen.page_bytes));
    let wal_files = segment_files(&args.dir.join("wal"))?;
    // An encrypted database's counts need its key; without one the header's facts still show.
    let keys = crate::key::database_keys(&args.dir, &chosen).map_err(|e| e.to_string());
    let log = inspect::read_log_facts(
        &args.dir,
        chosen.checkpoint_lsn.0,
        keys.as_ref().ok().and_then(Option::as_deref),
        &progress::bar("reading the log", Unit::Bytes, 0),
    );
    let space = keys.and_then(|keys| read_space(&args.dir, (&chosen, keys), &log));
    let checkpoint_age_seconds = std::fs::metadata(&header.path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .map(|d| d.as_secs_f64());
    let stats = Stats {
        header,
        data_bytes,
        doublewrite_bytes,
        ledger_bytes,
        doublewrite,
        wal_files,
        log,
        checkpoint_age_seconds,
        space,
    };
    let feed = feed_json(&args.dir, chosen.checkpoint_lsn)?;
    if args.json {
        let mut out = stats.json(&args.dir, &chosen);
        out["feed"] = feed;
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        stats.print(&args.dir, &chosen);
        print_feed(&feed);
    }
    // Facts are printed either way; damage recovery would refuse also fails the command.
    if let Err(e) = &stats.log.inspection {
        return Err(format!("the log does not read: {e}").into());
    }
    if let Some(bad) = stats.log.bad_commits.first() {
        return Err(format!(
            "corrupt {} at offset {} (lsn {}): {}",
            bad.path.display(),
            bad.offset,
            bad.lsn,
            bad.what
        )
        .into());
    }
    Ok(())
}

/// The doublewrite file's room and last batch; the error names the file and offset.
fn read_doublewrite(dir: &Path, page_bytes: u32) -> Result<DoublewriteFacts, String> {
    let read = || -> tilldb::Result<DoublewriteFacts> {
        let dw = Doublewrite::open(
            &FileStorage::read_only(),
            dir,
            FlushMethod::Fdatasync,
            page_bytes,
        )?;
        Ok(DoublewriteFacts {
            pages_max: dw.pages_max(),
            batch: dw.read_batch()?,
        })
    };
    read().map_err(|e| e.to_string())
}

/// The segment files in `wal_dir` (names ending in `.wal`) and their total bytes; none when
/// the directory is missing.
fn segment_files(wal_dir: &Path) -> CliResult<(usize, u64)> {
    let entries = match std::fs::read_dir(wal_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, 0)),
        Err(e) => return Err(format!("list {}: {e}", wal_dir.display()).into()),
    };
    let (mut count, mut bytes) = (0, 0);
    for entry in entries {
        let entry = entry.map_err(|e| format!("list {}: {e}", wal_dir.display()))?;
        if entry.file_name().to_string_lossy().ends_with(".wal") {
            count += 1;
            bytes += entry
                .metadata()
                .map_err(|e| format!("stat {}: {e}", entry.path().display()))?
                .len();
        }
    }
    Ok((count, bytes))
}

/// Trees and free space from the data file as it is, when it is up to date.
fn read_space(
    dir: &Path,
    (header, keys): (
        &Header,
        Option<std::sync::Arc<tilldb::internals::crypt::DatabaseKeys>>,
    ),
    log: &LogFacts,
) -> Result<Space, String> {
    if let Err(e) = &log.inspection {
        return Err(format!("the log does not read ({e})"));
    }
    if log.commits_after_checkpoint > 0 {
        return Err(format!(
            "{} commit records follow the checkpoint, so the data file is not up to date \
             until recovery replays them; `till check` recovers and checks every tree",
            log.commits_after_checkpoint
        ));
    }
    // Each page of a tree and of the free list is read once: the bar ends near the total.
    let bar = progress::bar(
        "reading the trees",
        Unit::Pages,
        header.page_count.saturating_sub(1),
    );
    let pages = StorePages::open(dir, header.page_bytes, keys)
        .map_err(|e| e.to_string())?
        .with_progress(bar.clone());
    let space = Space::of_pages(&pages, header.page_count, header.free_head).map_err(|e| {
        format!(
            "{e}; recovery may repair it (torn-page guard and log): `till check` recovers and \
             checks every tree"
        )
    });
    bar.finish_and_clear();
    space
}

impl Stats {
    fn print(&self, dir: &Path, h: &Header) {
        println!("database {}", dir.display());
        let slot = self.header.chosen.as_ref().map_or(0, |(s, _)| *s);
        println!(
            "header {}: slot {slot} (generation {}) is the header",
            self.header.path.display(),
            h.generation
        );
        for (i, state) in self.header.slots.iter().enumerate() {
            println!("  slot {i}: {}", slot_text(state));
        }
        println!(
            "  page size {} B, flush method {}, torn-page guard {}",
            h.page_bytes, h.flush_method, h.torn_page_guard
        );
        println!(
            "  checkpoint lsn {}, page count {}, free-list head {}, catalog root {}",
            h.checkpoint_lsn, h.page_count, h.free_head.0, h.catalog_root.0
        );
        if let Some(block) = &h.encryption {
            println!(
                "  encrypted: {}, data key wrapped by the key \"{}\", database id {}",
                block.cipher().name(),
                block.key_id(),
                hex(&block.db_id())
            );
            if block.cipher() == tilldb::Cipher::Aes256Gcm
                && !tilldb::Cipher::has_aes_instructions()
            {
                println!(
                    "  note: this CPU has no AES instructions, so AES-256-GCM runs in software, \
                     several times slower; till compact --rekey --cipher chacha20-poly1305 \
                     rewrites the database with a cipher fast here"
                );
            }
        }
        println!("files");
        println!(
            "  {DATA_FILE_NAME:<16} {:>12} B  {} page places",
            self.data_bytes,
            self.data_bytes / u64::from(h.page_bytes)
        );
        if let Some(bytes) = self.ledger_bytes {
            println!("  {LEDGER_FILE_NAME:<16} {bytes:>12} B  newest lsn written per page");
        }
        if let Some(bytes) = self.doublewrite_bytes {
            let batch = match &self.doublewrite {
                Some(Ok(dw)) => {
                    format!(
                        "  room for {} pages; {}",
                        dw.pages_max,
                        batch_text(&dw.batch)
                    )
                }
                Some(Err(e)) => format!("  DOES NOT READ: {e}"),
                None => String::new(),
            };
            println!("  {DOUBLEWRITE_FILE_NAME:<16} {bytes:>12} B{batch}");
        }
        let (files, bytes) = self.wal_files;
        println!("  {:<16} {bytes:>12} B  {files} segment files", "wal/");
        self.print_log();
        self.print_space(h);
    }

    /// The checkpoint lsn of the header in force (0 when none is usable).
    fn checkpoint_lsn(&self) -> u64 {
        self.header
            .chosen
            .as_ref()
            .map_or(0, |(_, h)| h.checkpoint_lsn.0)
    }

    fn print_log(&self) {
        let log = &self.log;
        match &log.inspection {
            Ok(found) => {
                let r = &found.recovery;
                let spare = found
                    .segments
                    .iter()
                    .filter(|s| !matches!(s.role, SegmentRole::Chain { .. }))
                    .count();
                println!(
                    "log (from the checkpoint's segment): lsns {}..{}, {} segments in the chain \
                     ({spare} more free), {} commit records, {} after the checkpoint",
                    r.start_lsn, r.end_lsn, r.segments, log.commits, log.commits_after_checkpoint
                );
                if let Some(stop) = &r.stop {
                    println!("  the log {}", inspect::describe_stop(stop));
                }
                if log.sealed_commits > 0 {
                    println!(
                        "  {} commit records are sealed (an encrypted database's log): give \
                         its key (--key-file) to read them",
                        log.sealed_commits
                    );
                }
                let age = self
                    .checkpoint_age_seconds
                    .map_or_else(|| "unknown".to_owned(), |s| format!("{s:.0} s"));
                println!(
                    "  redo distance {} B (what recovery would replay, from the checkpoint at \
                     lsn {}); last checkpoint {age} ago; log files {} B",
                    r.end_lsn.0.saturating_sub(self.checkpoint_lsn()),
                    self.checkpoint_lsn(),
                    self.wal_files.1
                );
                if let Some((count, head)) = log.last_alloc {
                    println!(
                        "  after the last commit: page count {count}, free-list head {}",
                        head.0
                    );
                }
            }
            Err(e) => println!("log: does not read: {e}"),
        }
        for bad in &log.bad_commits {
            println!(
                "  commit record does not decode: {} offset {} (lsn {}): {}",
                bad.path.display(),
                bad.offset,
                bad.lsn,
                bad.what
            );
        }
    }

    fn print_space(&self, h: &Header) {
        let space = match &self.space {
            Ok(space) => space,
            Err(why) => {
                println!("pages {} allocated (header)", h.page_count);
                println!("tables not read: {why}");
                return;
            }
        };
        println!(
            "pages {} allocated: {} in trees (catalog {}, dropped tables awaiting reclaim {}), {} \
             on the free list, {} leaked, {} doubly used",
            space.page_count,
            space.tree_pages,
            space.catalog_pages,
            space.dropped_pages,
            space.free_pages,
            space.leaked_pages,
            space.doubly_used.len()
        );
        println!("tables");
        println!(
            "  {:<20} {:>10} {:>6} {:>8} {:>8} {:>9}",
            "name", "keys", "depth", "leaves", "branches", "overflow"
        );
        for (name, t) in &space.tables {
            let name = if name.is_empty() { "(default)" } else { name };
            println!(
                "  {name:<20} {:>10} {:>6} {:>8} {:>8} {:>9}",
                t.keys, t.depth, t.leaf_pages, t.branch_pages, t.overflow_pages
            );
        }
    }

    fn json(&self, dir: &Path, h: &Header) -> Value {
        let slot = self.header.chosen.as_ref().map_or(0, |(s, _)| *s);
        let (wal_files, wal_bytes) = self.wal_files;
        let log = &self.log;
        let found = log.inspection.as_ref().ok();
        let space = self.space.as_ref().ok();
        json!({
            "dir": dir,
            "header": {
                "file": self.header.path,
                "slot": slot,
                "generation": h.generation,
                "page_bytes": h.page_bytes,
                "flush_method": h.flush_method.name(),
                "torn_page_guard": h.torn_page_guard.name(),
                "checkpoint_lsn": h.checkpoint_lsn.0,
                "catalog_root": h.catalog_root.0,
                "free_head": h.free_head.0,
                "page_count": h.page_count,
            },
            "encryption": h.encryption.as_ref().map(|block| json!({
                "cipher": block.cipher().name(),
                "key_id": block.key_id(),
                "database_id": hex(&block.db_id()),
            })),
            "header_error": null,
            "header_slots": slots_json(&self.header),
            "files": {
                "data_bytes": self.data_bytes,
                "data_page_places": self.data_bytes / u64::from(h.page_bytes),
                "doublewrite_bytes": self.doublewrite_bytes,
                "ledger_bytes": self.ledger_bytes,
                "wal_segment_files": wal_files,
                "wal_bytes": wal_bytes,
            },
            "doublewrite": self.doublewrite.as_ref().map(|dw| match dw {
                Ok(dw) => {
                    let (state, sequence, images) = match &dw.batch {
                        BatchState::Empty => ("empty", None, None),
                        BatchState::Torn => ("torn", None, None),
                        BatchState::Valid(b) => ("valid", Some(b.sequence), Some(b.images.len())),
                    };
                    json!({
                        "pages_max": dw.pages_max,
                        "last_batch": state,
                        "last_batch_sequence": sequence,
                        "last_batch_images": images,
                        "error": null,
                    })
                }
                Err(e) => json!({
                    "pages_max": null,
                    "last_batch": null,
                    "last_batch_sequence": null,
                    "last_batch_images": null,
                    "error": e,
                }),
            }),
            "log": {
                "start_lsn": found.map(|f| f.recovery.start_lsn.0),
                "end_lsn": found.map(|f| f.recovery.end_lsn.0),
                "chain_segments": found.map(|f| f.recovery.segments),
                "commit_records": log.commits,
                "commits_after_checkpoint": log.commits_after_checkpoint,
                "sealed_commits": log.sealed_commits,
                "redo_bytes": found.map(|f| f.recovery.end_lsn.0.saturating_sub(h.checkpoint_lsn.0)),
                "checkpoint_age_seconds": self.checkpoint_age_seconds,
                "page_count_at_end": log.last_alloc.map(|(count, _)| count),
                "free_head_at_end": log.last_alloc.map(|(_, head)| head.0),
                "end": found.and_then(|f| f.recovery.stop.as_ref()).map(stop_json),
                "error": log.inspection.as_ref().err().map(ToString::to_string),
            },
            "pages": {
                "page_count": h.page_count,
                "in_trees": space.map(|s| s.tree_pages),
                "catalog_pages": space.map(|s| s.catalog_pages),
                "dropped_pages": space.map(|s| s.dropped_pages),
                "free_list": space.map(|s| s.free_pages),
                "leaked_pages": space.map(|s| s.leaked_pages),
                "leaked": space.map(|s| s.leaked.iter().map(|p| p.0).collect::<Vec<_>>()),
                "doubly_used": space.map(|s| s.doubly_used.iter().map(|(p, a, b)| json!({
                    "page": p.0,
                    "owners": [a, b],
                })).collect::<Vec<_>>()),
            },
            "tables": space.map(|s| s.tables.iter().map(|(name, t)| json!({
                "name": name,
                "keys": t.keys,
                "depth": t.depth,
                "leaf_pages": t.leaf_pages,
                "branch_pages": t.branch_pages,
                "overflow_pages": t.overflow_pages,
                "key_bytes": t.key_bytes,
                "value_bytes": t.value_bytes,
            })).collect::<Vec<_>>()),
            "trees_unavailable": self.space.as_ref().err(),
        })
    }
}

fn slots_json(header: &HeaderRead) -> Vec<Value> {
    header
        .slots
        .iter()
        .enumerate()
        .map(|(slot, state)| {
            let valid = match state {
                Ok(SlotState::Valid(h)) => Some(h),
                _ => None,
            };
            json!({
                "slot": slot,
                "state": inspect::slot_state_name(state),
                "generation": valid.map(|h| h.generation),
                "checkpoint_lsn": valid.map(|h| h.checkpoint_lsn.0),
                "error": state.as_ref().err().map(|(offset, what)| {
                    format!("offset {offset}: {what}")
                }),
            })
        })
        .collect()
}

fn slot_text(state: &Result<SlotState, (u64, &'static str)>) -> String {
    match state {
        Ok(SlotState::Valid(h)) => format!(
            "valid, generation {}, checkpoint lsn {}, page count {}",
            h.generation, h.checkpoint_lsn, h.page_count
        ),
        Ok(SlotState::Zero) => "zero (never written)".into(),
        Ok(SlotState::Torn) => "torn (checksum mismatch; the other slot is used)".into(),
        Err((offset, what)) => format!("CORRUPT at file offset {offset}: {what}"),
    }
}

fn batch_text(batch: &BatchState) -> String {
    match batch {
        BatchState::Empty => "no batch written yet".into(),
        BatchState::Torn => "last batch torn (its in-place writes never began)".into(),
        BatchState::Valid(b) => {
            format!("last batch #{} with {} images", b.sequence, b.images.len())
        }
    }
}

/// The change feed's facts: its start, the durable lsn its writer last published, each named
/// consumer (position, how far behind, dropped and why), and what the log is kept for (the
/// oldest of the checkpoint's redo point `checkpoint` and what the feed holds, and who holds
/// it); `null` when the feed was never on.
fn feed_json(dir: &Path, checkpoint: tilldb::Lsn) -> CliResult<Value> {
    let start = match tilldb::feed::start(dir) {
        Ok(start) => start,
        Err(tilldb::Error::FeedUnavailable { .. }) => return Ok(Value::Null),
        Err(e) => return Err(e.into()),
    };
    let durable = tilldb::feed::published_durable(dir)?.map(|lsn| lsn.0);
    let consumers: Vec<Value> = tilldb::feed::consumers(dir)?
        .into_iter()
        .map(|c| {
            json!({
                "name": c.name,
                "position": c.position.0,
                "behind_bytes": durable.map(|d| d.saturating_sub(c.position.0)),
                "dropped": c.dropped,
            })
        })
        .collect();
    let (kept_from, kept_for) = log_kept_for(&tilldb::feed::consumers(dir)?, start, checkpoint);
    Ok(json!({
        "start": start.0,
        "published_durable": durable,
        "consumers": consumers,
        "released_for_nobody_before": tilldb::feed::released(dir)?.map(|l| l.0),
        "log_kept_from": kept_from.0,
        "log_kept_for": kept_for,
    }))
}

/// Where the writer keeps the log from, and why: the oldest consumer not dropped, else the
/// feed's start (no consumer registered), unless recovery's redo point `checkpoint` is older.
fn log_kept_for(
    consumers: &[tilldb::feed::ConsumerState],
    start: tilldb::Lsn,
    checkpoint: tilldb::Lsn,
) -> (tilldb::Lsn, String) {
    let oldest = consumers
        .iter()
        .filter(|c| c.dropped.is_none())
        .min_by_key(|c| c.position);
    let (held, why) = match oldest {
        Some(c) => (
            c.position,
            format!(
                "consumer {} (the oldest; up to feed_retention_bytes of log files)",
                c.name
            ),
        ),
        None if consumers.is_empty() => (
            start,
            "the feed's start: no consumer registered (up to the smaller of \
             feed_retention_bytes and checkpoint_log_bytes of log files, then released)"
                .to_owned(),
        ),
        // Every consumer dropped: the feed holds nothing.
        None => (checkpoint, String::new()),
    };
    if held < checkpoint {
        (held, why)
    } else {
        (
            checkpoint,
            "recovery: the checkpoint's redo point (the feed holds nothing older)".to_owned(),
        )
    }
}

/// `bytes` as lower-case hexadecimal digits.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        use std::fmt::Write as _;
        write!(s, "{b:02x}").expect("a String takes it");
        s
    })
}

fn print_feed(feed: &Value) {
    if feed.is_null() {
        return;
    }
    println!(
        "change feed: from lsn {}, published durable to lsn {}",
        feed["start"], feed["published_durable"]
    );
    println!(
        "  the log is kept from lsn {} for {}",
        feed["log_kept_from"],
        feed["log_kept_for"].as_str().unwrap_or("?")
    );
    if let Some(released) = feed["released_for_nobody_before"].as_u64() {
        println!(
            "  log released while no consumer was registered (the feed then began at lsn \
             {released}): a new consumer is refused with the first lsn it can have (`till \
             ship --resync` starts one from a copy of the database)"
        );
    }
    let consumers = feed["consumers"].as_array().map_or(&[][..], Vec::as_slice);
    for c in consumers {
        match c["dropped"].as_str() {
            Some(why) => println!(
                "  consumer {}: DROPPED at lsn {}: {why}",
                c["name"].as_str().unwrap_or("?"),
                c["position"]
            ),
            None => println!(
                "  consumer {}: at lsn {}, {} bytes behind",
                c["name"].as_str().unwrap_or("?"),
                c["position"],
                c["behind_bytes"]
            ),
        }
    }
}
