//! Step 3 of recovery (`open/mod.rs`): torn pages restored from the guard, the log read from
//! the checkpoint (or followed up to a live writer's published lsn), and redo: each page
//! operation applied to a page that lacks it, a commit logged in parts only with its last part.

use super::{Opener, RecoveryReport};
use crate::btree::PageOp;
use crate::db::readers::ReaderGate;
use crate::error::{Error, Result};
use crate::io::Storage;
use crate::page::{BufferPool, DATA_FILE_NAME, PageGuard, PageId, PageStore};
use crate::record::{self, Alloc};
use crate::wal::Wal;
use std::path::Path;
use std::sync::Arc;

/// Where a read-only handle's own log lives, in its overlay's memory only.
const READER_WAL_DIR_NAME: &str = "wal.read-only";

/// A follower of the log in `dir` from `from`, opening an encrypted database's records with
/// its `keys`.
pub(super) fn log_follower(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    from: crate::wal::Lsn,
    keys: Option<Arc<crate::crypt::DatabaseKeys>>,
) -> crate::wal::follow::LogFollower {
    crate::wal::follow::LogFollower::new(
        Arc::clone(storage),
        &dir.join(crate::db::claim::WAL_DIR_NAME),
        from,
    )
    .with_keys(keys)
}

/// The records `follower` reads from its position to the last one ending at or before
/// `durable`, read as the change feed reads a live log (`wal/follow.rs`).
pub(super) fn follow_log(
    follower: &mut crate::wal::follow::LogFollower,
    durable: crate::wal::Lsn,
) -> Result<Vec<crate::wal::WalRecord>> {
    let mut records = Vec::new();
    loop {
        let batch = follower.read(durable, 8 << 20)?;
        if batch.is_empty() {
            return Ok(records);
        }
        if let Some(last) = records.last() {
            let last: &crate::wal::WalRecord = last;
            assert!(
                batch[0].lsn >= last.end_lsn,
                "the log followed out of order"
            );
        }
        records.extend(batch);
    }
}

/// The log an opener recovers from the checkpoint: the database's own, recovered (a
/// writer, or a reader while no writer has the database open), or, for a reader following a
/// live writer, an empty one of its own in memory and the records it followed up to the
/// writer's published durable lsn.
pub(super) fn log_of(
    opener: &Opener,
    storage: &Arc<dyn Storage>,
    dir: &Path,
    (wal_options, keys): (
        crate::wal::WalOptions,
        Option<Arc<crate::crypt::DatabaseKeys>>,
    ),
    checkpoint: crate::wal::Lsn,
) -> Result<(Wal, Option<Vec<crate::wal::WalRecord>>)> {
    if let Opener::Reader {
        base,
        follow: Some(durable),
    } = opener
    {
        let mut follower = log_follower(base, dir, checkpoint, keys);
        let records = follow_log(&mut follower, (*durable).max(checkpoint))?;
        let end = records.last().map_or(checkpoint, |r| r.end_lsn);
        let own_dir = dir.join(READER_WAL_DIR_NAME);
        let wal = Wal::detached(Arc::clone(storage), &own_dir, wal_options, end)?;
        return Ok((wal, Some(records)));
    }
    Ok((
        super::assemble::open_log(storage, dir, (wal_options, keys), checkpoint)?,
        None,
    ))
}

/// Restores torn pages from the guard's last batch; returns how many. A writer (`gate`)
/// writes them only once read-only handles let go of the files.
pub(super) fn restore_torn(
    guard: &PageGuard,
    store: &mut PageStore,
    gate: Option<&ReaderGate>,
) -> Result<usize> {
    let mut entered = None;
    let restored = guard.restore_torn_pages_with(store, &mut || {
        if let Some(gate) = gate {
            entered = Some(gate.enter()?);
        }
        Ok(())
    })?;
    drop(entered);
    Ok(restored.restored.len())
}

/// The records redo reads, twice: once for each record's place in its commit, once to apply
/// them. From the log itself (a writer's open, or a reader's with no writer live), one
/// segment in memory at a time, the payloads borrowed from it; or as a follower read them.
///
/// Collecting the log first held all of it in memory: 374 MiB after a 1,000,000-row commit
/// (a till's recovery could run out of memory after a larger one), with a copy and a page
/// fault per 4 KiB for each byte of it.
#[derive(Clone, Copy)]
pub(in crate::db) enum Records<'a> {
    /// The log from this lsn to where it was written.
    Log(&'a Wal, crate::wal::Lsn),
    /// Records read already.
    Read(&'a [crate::wal::WalRecord]),
}

impl Records<'_> {
    /// Shows `visit` each record in log order; the first error ends the walk.
    fn each(self, visit: &mut dyn FnMut(crate::wal::WalRecordRef<'_>) -> Result<()>) -> Result<()> {
        match self {
            Records::Log(wal, from) => wal.visit_from(from, visit),
            Records::Read(records) => records.iter().try_for_each(|r| visit(r.as_ref())),
        }
    }
}

/// Redo: applies the log from the header's checkpoint to the pages (each op only to a page
/// older than its record), skipping the records of commits logged in parts that never got
/// their last part. Returns the allocator state of the last commit.
pub(in crate::db) fn replay(
    records: Records<'_>,
    pool: &BufferPool,
    dir: &Path,
    mut alloc: Alloc,
    (report, buffered): (&mut RecoveryReport, &mut BufferedLog),
) -> Result<(Alloc, Option<crate::wal::Lsn>)> {
    // Where the records after the last applied one begin: parts of a commit whose last part
    // the records do not reach (a read-only handle's next refresh reads again from there).
    let mut pending_from = None;
    let corrupt = |lsn: crate::wal::Lsn, what| Error::Corruption {
        file: dir.join(crate::db::claim::WAL_DIR_NAME),
        offset: lsn.0,
        what,
    };
    let (lsns, parts, applies) = commit_places(records, &corrupt)?;
    // The last applied commit and its page count.
    let mut last_count = None;
    let start_count = alloc.page_count;
    // Where the commit being replayed began: its first part's lsn, the redo point of every
    // page it changes (as a running commit stamps them). Its later parts' own lsns lie inside
    // it: a page first changed by one and left dirty (a checkpoint after recovery deferred for
    // read-only handles, then one whose passes a running commit kept it out of) would give a
    // later checkpoint a redo point inside the commit.
    let mut commit_from = None;
    // Once, not per op: a path joined per op was a few percent of replaying a large commit.
    let data_path = dir.join(DATA_FILE_NAME);
    let mut seen = PageLsns::default();
    // The second walk applies: it must meet the records the first one decided about.
    let mut index = 0;
    records.each(&mut |rec| {
        assert_eq!(
            lsns.get(index),
            Some(&rec.lsn),
            "redo's second walk of the log met another record"
        );
        let applies = applies[index];
        index += 1;
        if !applies {
            report.parts_skipped += 1;
            if pending_from.is_none() {
                pending_from = Some(rec.lsn);
            }
            return Ok(());
        }
        let commit = record::decode(rec.payload).map_err(|what| corrupt(rec.lsn, what))?;
        assert_eq!(
            commit.part,
            parts[index - 1],
            "a record's part changed between redo's walks"
        );
        if commit.part.index == 0 {
            commit_from = Some(rec.lsn.0);
        }
        let redo_from = if crate::mutants::active("replay-redo-point-at-part") {
            rec.lsn.0
        } else {
            commit_from.expect("a later part applies only after its first")
        };
        if commit.part.last {
            // Page counts only grow from commit to commit.
            if let Some((_, before)) = last_count
                && commit.alloc.page_count < before
            {
                return Err(corrupt(
                    rec.lsn,
                    "a commit's page count is below the commit's before it",
                ));
            }
            last_count = Some((rec.lsn, commit.alloc.page_count));
        }
        apply_ops(
            pool,
            (&data_path, &mut seen),
            &commit.ops,
            (rec.end_lsn.0, redo_from),
            report,
        )?;
        if commit.part.last {
            alloc = commit.alloc;
            pending_from = None;
            commit_from = None;
        }
        buffered
            .read((rec.lsn.0, rec.end_lsn.0), commit)
            .map_err(|what| corrupt(rec.lsn, what))?;
        Ok(())
    })?;
    assert_eq!(
        index,
        lsns.len(),
        "redo's second walk of the log met fewer records"
    );
    if let Some((lsn, count)) = last_count {
        check_last_count(count, start_count).map_err(|what| corrupt(lsn, what))?;
    }
    Ok((alloc, pending_from))
}

/// The buffered commits and drain chunks redo read after the last whole drain it read
/// (`record::Role`): what the write buffer held where the records end (`commit/buffer.rs`
/// rebuilds it).
#[derive(Debug, Default)]
pub(in crate::db) struct BufferedLog {
    /// The header allows write-buffer records (`Header::write_buffer`).
    allowed: bool,
    /// The header allows drain chunks and buffered commits with counts
    /// (`Header::drain_chunks`, version 5).
    chunks_allowed: bool,
    /// A whole drain was read: every buffered commit before it, in these records or before
    /// them, is in the tree.
    pub drained: bool,
    /// The buffered commits and chunks after the last whole drain read, in log order.
    pub events: Vec<BufferedEvent>,
}

/// A record of the write buffer's, as the rebuild takes it.
#[derive(Debug)]
pub(in crate::db) enum BufferedEvent {
    /// A buffered commit: its record's (start, end) lsns, its writes, and the rows it
    /// changed per table (`None`: a version 4 record, counted by looking its keys up).
    Commit {
        at: (u64, u64),
        changes: Vec<record::Change>,
        counts: Option<record::Counts>,
    },
    /// A drain chunk whose record ends at `end`: the rows it changed per table; with its
    /// mark's `last`, the buffered commits through `mark.through` are in the tree.
    Chunk {
        end: u64,
        mark: record::ChunkMark,
        counts: record::Counts,
    },
}

impl BufferedLog {
    /// Buffered commits to come, from a log whose header says whether it may hold
    /// write-buffer records (`allowed`) and chunks (`chunks_allowed`).
    pub(in crate::db) fn allowing(allowed: bool, chunks_allowed: bool) -> Self {
        BufferedLog {
            allowed,
            chunks_allowed,
            ..BufferedLog::default()
        }
    }

    /// Takes in one applied record, spanning `lsns`: a buffered commit and a chunk are kept,
    /// a whole drain's last part forgets every one before it (it took the whole buffer under
    /// the writer lock, so none was buffered between its parts). `Err`: a write-buffer
    /// record in a log whose header does not allow it (replayed as a commit of no ops, its
    /// writes would be lost without a word).
    fn read(&mut self, lsns: (u64, u64), commit: record::Commit) -> Result<(), &'static str> {
        if commit.role != record::Role::Tree && !self.allowed {
            return Err(
                "a write-buffer record (buffered commit or drain) in a database whose \
                        header does not allow them (version 4, feature bit 1)",
            );
        }
        if (commit.role == record::Role::Chunk || commit.counts.is_some()) && !self.chunks_allowed {
            return Err(
                "a drain chunk or a buffered commit with counts in a database whose header \
                 does not allow them (version 5, feature bit 2)",
            );
        }
        match commit.role {
            record::Role::Buffered => {
                let changes = commit
                    .changes
                    .expect("a buffered record decodes with its writes");
                if !crate::mutants::active("replay-forgets-the-buffer") {
                    self.events.push(BufferedEvent::Commit {
                        at: lsns,
                        changes,
                        counts: commit.counts,
                    });
                }
            }
            record::Role::Drain if commit.part.last => {
                self.drained = true;
                self.events.clear();
            }
            record::Role::Chunk if commit.part.last => self.events.push(BufferedEvent::Chunk {
                end: lsns.1,
                mark: commit.chunk.expect("a chunk decodes with its mark"),
                counts: commit.counts.expect("a chunk decodes with its counts"),
            }),
            // A tree commit, or a drain's or a chunk's part before its last.
            record::Role::Tree | record::Role::Drain | record::Role::Chunk => {}
        }
        Ok(())
    }
}

/// The header took its page count from the commit at its checkpoint's end, and redo may start
/// before that end (a page dirty through the checkpoint), so earlier records may count fewer
/// pages than the header; the last commit never does. A header counting more is damaged (or
/// the record is): the allocator would be left behind the header, whose next write refuses a
/// count going backwards (`open_files`).
fn check_last_count(last: u64, header: u64) -> std::result::Result<(), &'static str> {
    if last < header {
        return Err(
            "the last commit's page count is below the header's: the header or this record \
             is damaged",
        );
    }
    Ok(())
}

/// The first walk of redo: each record's lsn and place in its commit, and whether it applies.
/// A commit logged in parts counts only with its last part (`record.rs`): the records of one
/// the log ends before, or a reopen's records follow, are skipped. It reads each record's
/// header alone (16 bytes kept per record).
fn commit_places(
    records: Records<'_>,
    corrupt: &dyn Fn(crate::wal::Lsn, &'static str) -> Error,
) -> Result<(Vec<crate::wal::Lsn>, Vec<record::Part>, Vec<bool>)> {
    let mut lsns = Vec::new();
    let mut parts = Vec::new();
    records.each(&mut |rec| {
        parts.push(record::part_of(rec.payload).map_err(|what| corrupt(rec.lsn, what))?);
        lsns.push(rec.lsn);
        Ok(())
    })?;
    let applies = record::committed(&parts).map_err(|(i, what)| corrupt(lsns[i], what))?;
    Ok((lsns, parts, applies))
}

/// The lsn each page had when redo last read it (0: not read, or no version written). A page's lsn only grows, so an op of a record ending at or before it is
/// in the page already and is skipped without the page.
///
/// Without it, redo read every page an op names to learn its lsn. A writer killed with its
/// checkpoints far behind has written most of its pages back since, newer than most records:
/// after 256 MiB of random puts (12,378 records, 379,399 ops over 12,700 pages, a 64 MiB
/// cache) redo read 409,421 pages, each evicted again before its next op came, in 16-18 s
/// with direct I/O. It knows the lsn of each page it read once, 8 bytes a page.
#[derive(Default)]
struct PageLsns(Vec<u64>);

impl PageLsns {
    /// Whether `page` is known to hold the change of a record ending at `end`.
    fn has(&self, page: PageId, end: u64) -> bool {
        usize::try_from(page.0)
            .ok()
            .and_then(|i| self.0.get(i))
            .is_some_and(|&lsn| {
                lsn >= end || (lsn > 0 && crate::mutants::active("replay-skips-pages-seen"))
            })
    }

    /// Redo read `page` with `lsn`.
    fn saw(&mut self, page: PageId, lsn: u64) {
        let Ok(i) = usize::try_from(page.0) else {
            return;
        };
        if i >= self.0.len() {
            // Grows with the largest page redo reads, never past the data file's page count
            // by more than the log allocates.
            self.0.resize((i + 1).next_power_of_two(), 0);
        }
        self.0[i] = self.0[i].max(lsn);
    }
}

/// Applies the ops of one record ending at `end` and stamps the pages they changed with it
/// and the redo point `redo_from` (where its commit began).
fn apply_ops(
    pool: &BufferPool,
    (data_path, seen): (&Path, &mut PageLsns),
    ops: &[crate::btree::PageOp],
    (end, redo_from): (u64, u64),
    report: &mut RecoveryReport,
) -> Result<()> {
    let mut touched = Vec::new();
    for op in ops {
        if seen.has(op.page(), end) {
            continue;
        }
        if redo_op(pool, (data_path, seen), op, end, &mut touched)? {
            report.pages_rebuilt += 1;
        }
    }
    report.records += 1;
    report.ops_applied += touched.len() as u64;
    touched.sort_unstable();
    touched.dedup();
    pool.stamp(&touched, end, redo_from);
    Ok(())
}

/// Replays one page operation of the record ending at `lsn`, unless the page has it already.
///
/// An operation that rewrites the whole page (`Format`, `Image`) needs nothing of the page's
/// old bytes, so it rebuilds a page whose place holds garbage: a page allocated in memory is
/// first written (and the file extended for it) only at write-back, and a crash can cut that
/// extension after the allocation is durable in the log. Any other operation on an unreadable
/// page is corruption, and so is any operation on a page no crash makes unreadable
/// (`PageFault::never_torn`).
/// Returns whether the page was unreadable and rebuilt.
fn redo_op(
    pool: &BufferPool,
    (data_path, seen): (&Path, &mut PageLsns),
    op: &PageOp,
    lsn: u64,
    touched: &mut Vec<PageId>,
) -> Result<bool> {
    let (page_lsn, rebuilt) = match pool.read(op.page()) {
        Ok(page) => {
            seen.saw(op.page(), page.lsn());
            (page.lsn(), false)
        }
        // Only a page a crash could have left so: a sealed page whose tag fails, or a page of
        // the other format, was changed on purpose, and is reported, not rebuilt over.
        Err(Error::Corruption { what, .. })
            if op.rewrites_whole_page()
                && !crate::page::PageFault::of_text(what)
                    .is_some_and(crate::page::PageFault::never_torn) =>
        {
            drop(pool.create(op.page(), crate::page::PageKind::Free)?);
            (0, true)
        }
        Err(e) => return Err(e),
    };
    if page_lsn < lsn {
        let mut page = pool.write(op.page())?;
        if !op.fits_kind(page.kind()) {
            // The log and the data file disagree about this page (a damaged data file whose
            // torn-page guard could not restore it, say): refuse, never apply.
            return Err(Error::Corruption {
                file: data_path.to_path_buf(),
                offset: op.page().0 * page.page_bytes() as u64,
                what: "a log record changes this page as a page of another kind",
            });
        }
        op.apply_to(&mut page);
        touched.push(op.page());
    }
    Ok(rebuilt)
}
