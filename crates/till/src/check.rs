//! `till check DIR`: checks a database, reporting every problem with the file and offset; the
//! exit status is non-zero when any is found.
//!
//! Before recovery, on the files as they are:
//! 1. the log chain, followed from the header's checkpoint as recovery follows it: every
//!    segment header it needs valid, segments in sequence with no gap (a segment that ends
//!    with `SegmentEnd` has its successor), each as long as its header says, the checkpoint
//!    inside the log, every commit record decodable; where the log ends, cleanly or at a torn
//!    tail, and segments outside the chain that hold records past its end;
//! 2. every page of the data file: checksum and id.
//!
//! Then it opens the database (running recovery) on an overlay that keeps every change in
//! memory (`tilldb::io::OverlayStorage`): recovery, the checks and the close run as they
//! would, and no byte of the database's files changes, damaged or not, on read-only media
//! too. It holds the database lock shared throughout: refused while a `Db` has the database
//! open, it keeps one from opening while it reads. Under the writer lock it checks:
//! 3. every table's tree (order, links, page kinds, overflow chains);
//! 4. free-space accounting: every page is in exactly one tree or on the free list; leaked
//!    pages (no owner) and doubly used ones (two owners) are named with their offsets;
//!
//! and after closing it, every page again.
//!
//! On a terminal, each step shows its progress on standard error (`progress.rs`): the log's
//! bytes read, the pages scanned, the pages the tree and free-space checks read; a spinner
//! while recovery and the close run.

use crate::inspect::{self, CliResult, LogFacts, Space};
use crate::progress::{self, Unit};
use clap::Args;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tilldb::Db;
use tilldb::internals::crypt::DatabaseKeys;
use tilldb::internals::header::{Header, SLOT_BYTES, SlotState};
use tilldb::internals::page::{PageFault, PageId, PageSlot, PageStore};
use tilldb::internals::wal::SegmentRole;
use tilldb::internals::wal::record::RecordFault;
use tilldb::io::{FileStorage, LockMode, OverlayStorage, Storage};

/// Pages listed one by one per kind of problem; the rest are counted.
const PAGES_LISTED_MAX: usize = 20;

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The database directory.
    dir: PathBuf,
    /// Check an encrypted database without its key: the header's slots, every page's and
    /// log record's checksum and framing, the log chain. Tags, the header's MAC, recovery,
    /// the trees and free space need the key and are not checked.
    #[arg(long)]
    without_key: bool,
}

pub fn run(args: &CheckArgs) -> CliResult<()> {
    inspect::require_database(&args.dir)?;
    // Held until the check ends: no writer opens meanwhile. Refused when one has it open:
    // then the snapshot a read-only handle reads is checked instead.
    let storage = FileStorage::read_only();
    let _lock = match storage.lock(&args.dir.join(tilldb::LOCK_FILE_NAME), LockMode::Shared) {
        Ok(lock) => lock,
        Err(e @ tilldb::Error::Locked { .. }) if args.without_key => {
            return Err(format!(
                "{e}; --without-key reads the files as they are, so it runs while no writer \
                 has the database open"
            )
            .into());
        }
        Err(tilldb::Error::Locked { .. }) => return run_live(args),
        Err(e) => return Err(e.into()),
    };
    let read = inspect::read_header(&args.dir)?;
    let (chosen, header) = read
        .chosen
        .clone()
        .map_err(|why| format!("no usable header: {why}"))?;
    report_torn_slots(&read, chosen);
    report_ledger_slots(&args.dir, header.page_bytes)?;
    if args.without_key {
        return run_without_key(&args.dir, &header);
    }
    let keys = crate::key::database_keys(&args.dir, &header)?;
    let mut problems = check_log(&args.dir, header.checkpoint_lsn.0, keys.as_deref());
    let before = scan_pages(
        &FileStorage::read_only(),
        (&args.dir, keys.clone()),
        header.page_bytes,
        "reading every page",
    )?;
    for (path, offset, what) in &before {
        println!(
            "  before recovery: bad page in {} at offset {offset}: {what}",
            path.display()
        );
    }
    let overlay: Arc<OverlayStorage> =
        Arc::new(OverlayStorage::new(Arc::new(FileStorage::read_only())));
    let spinner = progress::spinner("recovering (in memory)");
    let db = Db::open_with_storage(overlay.clone(), &args.dir, crate::key::options()?)?;
    spinner.finish_and_clear();
    println!(
        "recovered and opened {} (in memory: its files are not changed)",
        args.dir.display()
    );
    let space = Space::of_db(
        &db,
        &progress::bar("checking trees, free space", Unit::Pages, 0),
    )?;
    print_tables(&space);
    problems += report_space(&space, &args.dir, header.page_bytes);
    let spinner = progress::spinner("closing (in memory)");
    db.close()?;
    spinner.finish_and_clear();
    let after = scan_pages(
        &*overlay,
        (&args.dir, keys),
        header.page_bytes,
        "reading every page again",
    )?;
    for (path, offset, what) in &after {
        println!(
            "  BAD page in {} at offset {offset}: {what}",
            path.display()
        );
    }
    problems += after.len();
    if !before.is_empty() && after.is_empty() {
        println!(
            "  recovery repaired {} bad pages (torn-page guard and log)",
            before.len()
        );
    }
    if problems > 0 {
        return Err(format!("{problems} problems found").into());
    }
    println!("check ok");
    Ok(())
}

/// `till check --without-key` of the database in `dir` (header `header`): what can be checked
/// of an encrypted database without its key. The log's framing and chain are followed from
/// the checkpoint (its commit payloads stay sealed); every page's crc, id, kind and version
/// are read, a sealed page counting as whole, and a plain page in an encrypted database as
/// bad (one a crash never writes). A plain database is checked as `till check` would, saying
/// no key is needed.
fn run_without_key(dir: &Path, header: &Header) -> CliResult<()> {
    if header.encryption.is_none() {
        println!(
            "  {} is not encrypted: the whole check needs no key",
            dir.display()
        );
        return run(&CheckArgs {
            dir: dir.to_path_buf(),
            without_key: false,
        });
    }
    let mut problems = check_log(dir, header.checkpoint_lsn.0, None);
    let storage = FileStorage::read_only();
    let store = PageStore::open(
        &storage,
        dir,
        tilldb::FlushMethod::Fdatasync,
        header.page_bytes,
    )?;
    let bar = progress::bar(
        "reading every page",
        Unit::Pages,
        store.page_count().saturating_sub(1),
    );
    let (mut sealed, mut unwritten) = (0u64, 0u64);
    if let Some(offset) = page_zero_not_zeros(store.path(), header.page_bytes)? {
        println!(
            "  BAD page in {} at offset {offset}: page 0 is not zeros",
            store.path().display()
        );
        problems += 1;
    }
    for id in 1..store.page_count() {
        bar.inc(1);
        let what = match store.inspect(PageId(id))? {
            // Whole framing, and sealed: what this check can tell without the key.
            PageSlot::Invalid(PageFault::WrongFormat) => {
                sealed += 1;
                continue;
            }
            PageSlot::Unwritten | PageSlot::Missing => {
                unwritten += 1;
                continue;
            }
            PageSlot::Valid(_) => "a plain page in an encrypted database",
            PageSlot::Invalid(fault) => fault.what(),
        };
        println!(
            "  BAD page in {} at offset {}: {what}",
            store.path().display(),
            PageId(id).offset(header.page_bytes)
        );
        problems += 1;
    }
    bar.finish_and_clear();
    println!(
        "  data file: {sealed} sealed pages whose framing is whole, {unwritten} never written \
         ({} B pages)",
        header.page_bytes
    );
    println!(
        "  without the key: the tags of pages and records, the header's MAC, recovery (which \
         may repair a torn page reported here), the trees and free space are not checked"
    );
    if problems > 0 {
        return Err(format!("{problems} problems found").into());
    }
    println!("check ok (framing only)");
    Ok(())
}

/// `till check` of a database a writer has open: a read-only handle's snapshot (at the
/// writer's durable lsn), whose lock holds the data file still while its pages are scanned
/// too. The log is read by the handle's recovery up to that lsn (a damaged record there
/// fails the open, naming file and offset); the writer's tail past it is not checked.
fn run_live(args: &CheckArgs) -> CliResult<()> {
    let spinner = progress::spinner("reading the snapshot");
    let db = Db::open_read_only(&args.dir, crate::key::options()?)?;
    spinner.finish_and_clear();
    let header = inspect::read_header(&args.dir)?;
    let (_, header) = header
        .chosen
        .map_err(|why| format!("no usable header: {why}"))?;
    println!(
        "{} is open for writing elsewhere: checking the snapshot of its durable commits          (read in memory: its files are not changed)",
        args.dir.display()
    );
    let keys = crate::key::database_keys(&args.dir, &header)?;
    let pages = scan_pages(
        &FileStorage::read_only(),
        (&args.dir, keys),
        header.page_bytes,
        "reading every page",
    )?;
    for (path, offset, what) in &pages {
        // Torn pages of the writer's own crash are repaired by its recovery, as the snapshot's
        // redo did here; anything else fails the check below.
        println!(
            "  on disk: bad page in {} at offset {offset}: {what}",
            path.display()
        );
    }
    let space = Space::of_db(
        &db,
        &progress::bar("checking trees, free space", Unit::Pages, 0),
    )?;
    print_tables(&space);
    let problems = report_space(&space, &args.dir, header.page_bytes);
    if problems > 0 {
        return Err(format!("{problems} problems found").into());
    }
    println!("check ok");
    Ok(())
}

/// Notes a header slot that does not validate beside the `chosen` one: what a crash during a
/// header write leaves (the other slot holds the header before it), or damage. Not a problem:
/// the chosen slot's checkpoint is whole, which the rest of the check shows.
fn report_torn_slots(read: &inspect::HeaderRead, chosen: usize) {
    for (slot, state) in read.slots.iter().enumerate() {
        if slot != chosen && matches!(state, Ok(SlotState::Torn)) {
            println!(
                "  note: header slot {slot} in {} (offset {}) does not validate: torn by a \
                 crash during a header write, or damaged; slot {chosen} is the header",
                read.path.display(),
                slot * SLOT_BYTES
            );
        }
    }
}

/// Notes the page ledger's slots that do not validate beside a usable one: what a crash
/// during a save leaves (the other slot holds the save before), or damage. Not a problem: the
/// older save only weakens the lost-write check of its pages until the next save.
fn report_ledger_slots(dir: &Path, page_bytes: u32) -> CliResult<()> {
    let storage = FileStorage::read_only();
    let store = PageStore::open(&storage, dir, tilldb::FlushMethod::Fdatasync, page_bytes)?;
    for offset in store.ledger_damaged_slots() {
        println!(
            "  note: a page ledger slot in {} (offset {offset}) does not validate: torn by a \
             crash during a save, or damaged; the other slot's older save is read",
            dir.join(tilldb::internals::page::LEDGER_FILE_NAME)
                .display()
        );
    }
    Ok(())
}

/// Prints each table's tree as checked.
fn print_tables(space: &Space) {
    for (name, stats) in &space.tables {
        let name = if name.is_empty() {
            "(default)"
        } else {
            name.as_str()
        };
        println!(
            "  table {name:<20} {} keys, depth {}, {} leaf + {} branch + {} overflow pages: ok",
            stats.keys, stats.depth, stats.leaf_pages, stats.branch_pages, stats.overflow_pages
        );
    }
}

/// Checks the log as recovery will read it; prints what it finds and returns the number of
/// problems.
fn check_log(dir: &Path, checkpoint: u64, keys: Option<&DatabaseKeys>) -> usize {
    let bar = progress::bar("reading the log", Unit::Bytes, 0);
    let facts = inspect::read_log_facts(dir, checkpoint, keys, &bar);
    let found = match &facts.inspection {
        Ok(found) => found,
        Err(e) => {
            println!("  BAD log: {e}");
            return 1;
        }
    };
    let r = &found.recovery;
    println!(
        "  log: {} segment files, {} in the chain, lsns {}..{}, {} commit records ({} after \
         the checkpoint at lsn {checkpoint})",
        found.segments.len(),
        r.segments,
        r.start_lsn,
        r.end_lsn,
        facts.commits,
        facts.commits_after_checkpoint
    );
    let mut problems = 0;
    if checkpoint < r.start_lsn.0 || checkpoint > r.end_lsn.0 {
        println!(
            "  BAD log: the checkpoint (lsn {checkpoint}) is not in the log (lsns {}..{}): the \
             segments recovery needs are missing",
            r.start_lsn, r.end_lsn
        );
        problems += 1;
    }
    for bad in &facts.bad_commits {
        println!(
            "  BAD log: commit record does not decode: {} offset {} (lsn {}): {}",
            bad.path.display(),
            bad.offset,
            bad.lsn,
            bad.what
        );
        problems += 1;
    }
    report_log_notes(&facts);
    problems
}

/// What is worth knowing about the log without being a problem: torn tails (the normal end
/// after a crash) and segments holding records past the end.
fn report_log_notes(facts: &LogFacts) {
    let Ok(found) = &facts.inspection else {
        return;
    };
    let (last, earlier) = match facts.stops.split_last() {
        Some((last, earlier)) => (Some(last), earlier),
        None => (None, &[][..]),
    };
    for stop in earlier.iter().filter(|s| s.fault != RecordFault::Zero) {
        println!(
            "  note: a torn tail from an earlier crash at {} offset {} (lsn {}): {}; a later \
             open went on in a new segment",
            stop.path.display(),
            stop.offset,
            stop.lsn,
            stop.fault
        );
    }
    match last {
        Some(stop) => println!("  log {}", inspect::describe_stop(stop)),
        None => println!("  log is empty"),
    }
    let last_chained = found
        .segments
        .iter()
        .filter(|s| matches!(s.role, SegmentRole::Chain { .. }))
        .map(|s| s.generation)
        .max()
        .unwrap_or(0);
    for s in &found.segments {
        if let SegmentRole::Torn { offset, what } = &s.role {
            println!(
                "  note: the header of {} does not decode at offset {offset} ({what}): a \
                 preparation cut short by a crash, which recovery reuses, or damage",
                s.path.display()
            );
        }
        if s.generation > last_chained
            && s.role
                == (SegmentRole::Unchained {
                    holds_records: true,
                })
        {
            println!(
                "  note: {} holds records from lsn {} past the end of the log (lsn {}): \
                 written before a crash lost what precedes them, or a segment is missing; \
                 recovery never reads them",
                s.path.display(),
                s.header.map_or(0, |h| h.base_lsn),
                found.recovery.end_lsn
            );
        }
    }
}

/// Prints the free-space accounting; returns the number of problems.
fn report_space(space: &Space, dir: &Path, page_bytes: u32) -> usize {
    println!(
        "  pages: {} allocated, {} in trees (catalog {}), {} on the free list, {} leaked, {} \
         doubly used",
        space.page_count,
        space.tree_pages,
        space.catalog_pages,
        space.free_pages,
        space.leaked_pages,
        space.doubly_used.len()
    );
    let data = dir.join(tilldb::internals::page::DATA_FILE_NAME);
    let offset = |id: PageId| id.0.saturating_mul(u64::from(page_bytes));
    for id in space.leaked.iter().take(PAGES_LISTED_MAX) {
        println!(
            "  BAD leaked page {} in {} at offset {}: in no tree and not on the free list",
            id.0,
            data.display(),
            offset(*id)
        );
    }
    for (id, first, second) in space.doubly_used.iter().take(PAGES_LISTED_MAX) {
        println!(
            "  BAD doubly used page {} in {} at offset {}: held by {first} and by {second}",
            id.0,
            data.display(),
            offset(*id)
        );
    }
    let listed =
        space.leaked.len().min(PAGES_LISTED_MAX) + space.doubly_used.len().min(PAGES_LISTED_MAX);
    let problems = space.leaked_pages + space.doubly_used.len() as u64;
    if problems > listed as u64 {
        println!("  ... and {} more", problems - listed as u64);
    }
    assert_eq!(
        space.is_clean(),
        problems == 0,
        "clean means nothing to report"
    );
    usize::try_from(problems).unwrap_or(usize::MAX)
}

/// A page that does not validate: its file, offset, and what is wrong.
type BadPage = (PathBuf, u64, &'static str);

/// Every page of the data file, as `storage` shows it, that does not validate; `what` labels
/// the progress bar.
fn scan_pages(
    storage: &dyn Storage,
    (dir, keys): (&Path, Option<Arc<DatabaseKeys>>),
    page_bytes: u32,
    what: &'static str,
) -> CliResult<Vec<BadPage>> {
    let store = PageStore::open(storage, dir, tilldb::FlushMethod::Fdatasync, page_bytes)?
        .with_keys(storage, keys)?;
    let bar = progress::bar(what, Unit::Pages, store.page_count().saturating_sub(1));
    let (mut valid, mut unwritten, mut bad) = (0u64, 0u64, Vec::new());
    if let Some(offset) = page_zero_not_zeros(store.path(), page_bytes)? {
        bad.push((
            store.path().to_path_buf(),
            offset,
            "page 0 is never used and always zeros, and this byte is not: damage",
        ));
    }
    for id in 1..store.page_count() {
        bar.inc(1);
        match store.inspect(PageId(id))? {
            PageSlot::Valid(_) => valid += 1,
            PageSlot::Unwritten | PageSlot::Missing => unwritten += 1,
            PageSlot::Invalid(fault) => {
                bad.push((
                    store.path().to_path_buf(),
                    PageId(id).offset(page_bytes),
                    fault.what(),
                ));
            }
        }
    }
    bar.finish_and_clear();
    println!(
        "  data file: {valid} valid pages, {unwritten} never written, {} bad ({page_bytes} B pages)",
        bad.len()
    );
    Ok(bad)
}

/// The offset of the first byte of page 0 (never used: a zero page id means "no page") that
/// is not zero in the data file at `path`, if any.
fn page_zero_not_zeros(path: &Path, page_bytes: u32) -> CliResult<Option<u64>> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).map_err(|e| format!("open {}: {e}", path.display()))?;
    let mut page = Vec::new();
    file.take(u64::from(page_bytes))
        .read_to_end(&mut page)
        .map_err(|e| format!("read {}: {e}", path.display()))?;
    Ok(page.iter().position(|&b| b != 0).map(|at| at as u64))
}
