//! Opening an existing database, for the writer or a read-only handle: torn-page restore, the
//! log from the checkpoint (recovered, or followed up to a live writer's published lsn), redo
//! with page-lsn checks, then assembling the running [`Db`] (a new one is made by
//! `create.rs`, which assembles it here too). What recovery did is kept as a
//! [`RecoveryReport`] ([`Db::recovery`]).

use super::readers::ReaderGate;
use super::{Db, Inner, Reads, pages, writeback};
use crate::btree::PageOp;
use crate::error::{Error, Result};
use crate::header::{Header, HeaderFile};
use crate::io::{HeldLock, IoGeometry, Storage};
use crate::page::{
    BufferPool, DATA_FILE_NAME, PageGuard, PageId, PageStore, SpillFile, TornPageGuard,
    check_atomic_pages, data_file_method,
};
use crate::record;
use crate::txn::{Overlay, Visibility};
use crate::wal::Wal;
use crate::{FlushMethod, Options};
use pages::PoolBackend;
use parking_lot::Mutex;
use record::Alloc;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::{Duration, Instant};

/// What opening a database did ([`Db::recovery`]): nothing for a new or cleanly closed
/// database, the restore and replay for one that crashed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// True when this open created the database.
    pub created: bool,
    /// Pages rewritten from the torn-page guard's last batch before redo.
    pub torn_pages_restored: usize,
    /// Log bytes from the checkpoint to the end of the valid log: what redo read.
    pub log_bytes: u64,
    /// Commit records redo applied (each part of a commit logged in parts counts).
    pub records: u64,
    /// Records of a commit logged in parts that never finished (the log ends before its
    /// last part, or a reopen's records follow it): skipped, none of it applied.
    pub parts_skipped: u64,
    /// Page operations redo applied (the others were on pages already newer).
    pub ops_applied: u64,
    /// Pages redo could not read (torn by a crash, or garbage past a cut file extension)
    /// and rebuilt from a whole-page op of the log: full-page images at work.
    pub pages_rebuilt: u64,
    /// From the start of `Db::open` until redo was done (the background threads start after).
    pub elapsed: Duration,
}

/// Who opens an existing database.
pub(super) enum Opener {
    /// The one writer: recovery on the database's own files.
    Writer,
    /// A read-only handle on an overlay over `base` (`db/readers.rs`): everything it writes
    /// stays in memory. With `follow`, a writer is live: the log is read on `base` from the
    /// checkpoint up to the durable lsn the writer published, never past it; without, the
    /// log is recovered as a writer's open would.
    Reader {
        base: Arc<dyn Storage>,
        follow: Option<crate::wal::Lsn>,
    },
}

/// Where a read-only handle's own log lives, in its overlay's memory only.
const READER_WAL_DIR_NAME: &str = "wal.read-only";

/// A follower of the log in `dir` from `from`.
pub(super) fn log_follower(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    from: crate::wal::Lsn,
) -> crate::wal::follow::LogFollower {
    crate::wal::follow::LogFollower::new(
        Arc::clone(storage),
        &dir.join(super::claim::WAL_DIR_NAME),
        from,
    )
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

/// Opens an existing database: restore torn pages, recover the log, redo from the
/// checkpoint, open for business.
pub(super) fn open_existing(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    (options, opener): (Options, Opener),
    (header_file, header): (HeaderFile, Header),
    (started, lock): (Instant, Box<dyn HeldLock>),
) -> Result<Db> {
    let read_only = matches!(opener, Opener::Reader { .. });
    let (method, data_method) = check_openable(storage, dir, &options, &header)?;
    let mut store = PageStore::open(&**storage, dir, data_method, header.page_bytes)?;
    let guard = PageGuard::open(
        header.torn_page_guard,
        &**storage,
        dir,
        method,
        header.page_bytes,
    )?;
    let wal_options = crate::wal::WalOptions {
        flush_method: method,
        background_threads: options.background_threads && !read_only,
        ..options.wal.clone()
    };
    let (wal, followed) = log_of(&opener, storage, dir, wal_options, header.checkpoint_lsn)?;
    let wal = Arc::new(wal);
    let gate = if read_only {
        None
    } else {
        Some(Arc::new(ReaderGate::open(storage, dir, &wal)?))
    };
    let mut report = RecoveryReport {
        torn_pages_restored: restore_torn(&guard, &mut store, gate.as_deref())?,
        ..RecoveryReport::default()
    };
    let options = Options {
        page_bytes: Some(header.page_bytes),
        flush_method: Some(method),
        torn_page_guard: header.torn_page_guard,
        ..options
    };
    let spill = SpillFile::new(Arc::clone(storage), dir, header.page_bytes)?;
    let snapshot_end = read_only.then(|| Arc::new(AtomicU64::new(wal.end_lsn().0)));
    let (pool, poisoned) = pool_over(
        header.page_bytes,
        options.cache_bytes,
        (&wal, gate.clone(), snapshot_end.clone()),
        (store, guard, spill),
    );
    let records = match followed {
        Some(records) => records,
        None => wal.read_from(header.checkpoint_lsn)?,
    };
    let first = Alloc {
        page_count: header.page_count,
        free_head: header.free_head,
    };
    let (alloc, pending_from) = replay(&records, &pool, dir, first, &mut report)?;
    report.log_bytes = wal.end_lsn().0.saturating_sub(header.checkpoint_lsn.0);
    report.elapsed = started.elapsed();
    let options = Options {
        change_feed: options.change_feed && !read_only,
        background_threads: options.background_threads && !read_only,
        ..options
    };
    let resume = pending_from.unwrap_or_else(|| wal.end_lsn());
    let kept = options.clone();
    let mut db = assemble(
        (storage, dir),
        options,
        (wal, gate),
        (pool, poisoned),
        header_file,
        alloc,
        (report, lock),
    )?;
    if let (Opener::Reader { base, .. }, Some(end)) = (opener, snapshot_end) {
        Arc::get_mut(&mut db.inner)
            .expect("a handle just opened has no clone")
            .read_only = Some(super::read_only::ReadOnly::new(
            Arc::clone(&base),
            kept,
            end,
            (resume, header.checkpoint_lsn),
        ));
    }
    // After the read-only state went in (`get_mut` needs no weak reference either).
    super::checkpointer::start_for(&db)?;
    Ok(db)
}

/// What must hold before an existing database is opened: options that do not contradict the
/// header, a device that can do its flush method and block size (and its atomic writes, under
/// that guard). Removes the marker of a create that crashed after its header was durable.
/// Returns the log's flush method and the data file's.
fn check_openable(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    options: &Options,
    header: &Header,
) -> Result<(FlushMethod, FlushMethod)> {
    refuse_contradicting_options(dir, options, header)?;
    // Again with the stored page size (the cache must hold 8 of its pages).
    Options {
        page_bytes: Some(header.page_bytes),
        ..options.clone()
    }
    .validate()?;
    // A create that crashed after its header was durable: complete, but for the marker.
    super::create::remove_creating_marker(&**storage, dir)?;
    let method = header.flush_method;
    let facts = storage.device_facts(dir)?;
    IoGeometry::resolve(
        &facts,
        method,
        options.wal.log_block_bytes,
        header.page_bytes,
    )?;
    let data_method = data_file_method(header.torn_page_guard, method);
    if header.torn_page_guard == TornPageGuard::Atomic {
        // The device may have changed under the database (copied to another file system):
        // writing pages without the atomicity it was created with would risk torn pages.
        IoGeometry::resolve(&facts, data_method, None, header.page_bytes)?;
        check_atomic_pages(&**storage, dir, header.page_bytes).map_err(|e| {
            Error::InvalidOptions(format!(
                "{} was created with the atomic torn-page guard, but {}; open it on a file \
                 system that supports atomic writes of this size (XFS on Linux 6.11+; \
                 `till probe DIR` tells), where it will recover",
                dir.display(),
                reason(&e)
            ))
        })?;
    }
    Ok((method, data_method))
}

/// The log an opener recovers from the checkpoint: the database's own, recovered (a
/// writer, or a reader while no writer has the database open), or, for a reader following a
/// live writer, an empty one of its own in memory and the records it followed up to the
/// writer's published durable lsn.
fn log_of(
    opener: &Opener,
    storage: &Arc<dyn Storage>,
    dir: &Path,
    wal_options: crate::wal::WalOptions,
    checkpoint: crate::wal::Lsn,
) -> Result<(Wal, Option<Vec<crate::wal::WalRecord>>)> {
    if let Opener::Reader {
        base,
        follow: Some(durable),
    } = opener
    {
        let mut follower = log_follower(base, dir, checkpoint);
        let records = follow_log(&mut follower, (*durable).max(checkpoint))?;
        let end = records.last().map_or(checkpoint, |r| r.end_lsn);
        let own_dir = dir.join(READER_WAL_DIR_NAME);
        let wal = Wal::detached(Arc::clone(storage), &own_dir, wal_options, end)?;
        return Ok((wal, Some(records)));
    }
    Ok((open_log(storage, dir, wal_options, checkpoint)?, None))
}

/// Restores torn pages from the guard's last batch; returns how many. A writer (`gate`)
/// writes them only once read-only handles let go of the files.
fn restore_torn(
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

/// Redo: applies the log from the header's checkpoint to the pages (each op only to a page
/// older than its record), skipping the records of commits logged in parts that never got
/// their last part. Returns the allocator state of the last commit.
pub(super) fn replay(
    records: &[crate::wal::WalRecord],
    pool: &BufferPool,
    dir: &Path,
    mut alloc: Alloc,
    report: &mut RecoveryReport,
) -> Result<(Alloc, Option<crate::wal::Lsn>)> {
    // Where the records after the last applied one begin: parts of a commit whose last part
    // the records do not reach (a read-only handle's next refresh reads again from there).
    let mut pending_from = None;
    let corrupt = |lsn: crate::wal::Lsn, what| Error::Corruption {
        file: dir.join(super::claim::WAL_DIR_NAME),
        offset: lsn.0,
        what,
    };
    // A commit logged in parts counts only with its last part (`record.rs`): the records of
    // one the log ends before, or a reopen's records follow, are skipped.
    let parts = records
        .iter()
        .map(|rec| record::part_of(&rec.payload).map_err(|what| corrupt(rec.lsn, what)))
        .collect::<Result<Vec<_>>>()?;
    let applies = record::committed(&parts).map_err(|(i, what)| corrupt(records[i].lsn, what))?;
    // The last applied commit and its page count.
    let mut last_count = None;
    let start_count = alloc.page_count;
    // Where the commit being replayed began: its first part's lsn, the redo point of every
    // page it changes (as a running commit stamps them). Its later parts' own lsns lie inside
    // it: a page first changed by one and left dirty (a checkpoint after recovery deferred for
    // read-only handles, then one whose passes a running commit kept it out of) would give a
    // later checkpoint a redo point inside the commit.
    let mut commit_from = None;
    for (rec, applies) in records.iter().zip(applies) {
        if !applies {
            report.parts_skipped += 1;
            if pending_from.is_none() {
                pending_from = Some(rec.lsn);
            }
            continue;
        }
        let commit = record::decode(&rec.payload).map_err(|what| corrupt(rec.lsn, what))?;
        if commit.part.index == 0 {
            commit_from = Some(rec.lsn.0);
        }
        let redo_from = commit_from.expect("a later part applies only after its first");
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
        let mut touched = Vec::new();
        for op in &commit.ops {
            if redo_op(
                pool,
                &dir.join(DATA_FILE_NAME),
                op,
                rec.end_lsn.0,
                &mut touched,
            )? {
                report.pages_rebuilt += 1;
            }
        }
        report.records += 1;
        report.ops_applied += touched.len() as u64;
        touched.sort_unstable();
        touched.dedup();
        pool.stamp(&touched, rec.end_lsn.0, redo_from);
        if commit.part.last {
            alloc = commit.alloc;
            pending_from = None;
            commit_from = None;
        }
    }
    // The header took its page count from the commit at its checkpoint's end, and redo may
    // start before that end (a page dirty through the checkpoint), so earlier records may
    // count fewer pages than the header; the last commit never does. A header counting more
    // is damaged (or the record is): the allocator would be left behind the header, whose
    // next write refuses a count going backwards (`open_files`).
    if let Some((lsn, count)) = last_count
        && count < start_count
    {
        return Err(corrupt(
            lsn,
            "the last commit's page count is below the header's: the header or this record \
             is damaged",
        ));
    }
    Ok((alloc, pending_from))
}

/// `Err(InvalidOptions)` when `options` ask for a page size or torn-page guard other than the
/// ones `header` says the database was created with: they cannot change, and taking the
/// stored ones silently would let a caller believe a setting it asked for is in force.
/// `None` and `Auto` ask for nothing. Checked before any byte is written.
fn refuse_contradicting_options(dir: &Path, options: &Options, header: &Header) -> Result<()> {
    let header_path = dir.join(crate::header::HEADER_FILE_NAME);
    if let Some(asked) = options.page_bytes
        && asked != header.page_bytes
    {
        return Err(Error::InvalidOptions(format!(
            "{} says the database has pages of {} bytes, fixed at create; Options::page_bytes \
             asks for {asked} (leave it None to use the database's)",
            header_path.display(),
            header.page_bytes
        )));
    }
    let asked = options.torn_page_guard;
    if asked != TornPageGuard::Auto && asked != header.torn_page_guard {
        return Err(Error::InvalidOptions(format!(
            "{} says the database has the {} torn-page guard, fixed at create; \
             Options::torn_page_guard asks for {asked} (leave it Auto to use the database's)",
            header_path.display(),
            header.torn_page_guard
        )));
    }
    Ok(())
}

/// Replays one page operation of the record ending at `lsn`, unless the page has it already.
///
/// An operation that rewrites the whole page (`Format`, `Image`) needs nothing of the page's
/// old bytes, so it rebuilds a page whose place holds garbage: a page allocated in memory is
/// first written (and the file extended for it) only at write-back, and a crash can cut that
/// extension after the allocation is durable in the log. Any other operation on an unreadable
/// page is corruption.
/// Returns whether the page was unreadable and rebuilt.
fn redo_op(
    pool: &BufferPool,
    data_path: &Path,
    op: &PageOp,
    lsn: u64,
    touched: &mut Vec<PageId>,
) -> Result<bool> {
    let (page_lsn, rebuilt) = match pool.read(op.page()) {
        Ok(page) => (page.lsn(), false),
        Err(Error::Corruption { .. }) if op.rewrites_whole_page() => {
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

/// The buffer pool over the data files, and the fail-stop switch their write-backs set.
pub(super) fn pool_over(
    page_bytes: u32,
    cache_bytes: u64,
    (wal, gate, snapshot_end): (&Arc<Wal>, Option<Arc<ReaderGate>>, Option<Arc<AtomicU64>>),
    (store, guard, spill): (PageStore, PageGuard, SpillFile),
) -> (BufferPool, Arc<super::Poison>) {
    let poisoned = Arc::new(super::Poison::default());
    let pool = BufferPool::new(
        page_bytes,
        cache_bytes,
        Box::new(PoolBackend {
            wal: Arc::clone(wal),
            files: crate::page::DataFiles::new(store, guard, spill),
            poison: Arc::clone(&poisoned),
            gate,
            snapshot_end,
        }),
    );
    (pool, poisoned)
}

pub(super) fn assemble(
    (storage, dir): (&Arc<dyn Storage>, &Path),
    options: Options,
    (wal, gate): (Arc<Wal>, Option<Arc<ReaderGate>>),
    (pool, poisoned): (BufferPool, Arc<super::Poison>),
    header: HeaderFile,
    alloc: Alloc,
    (recovery, lock): (RecoveryReport, Box<dyn HeldLock>),
) -> Result<Db> {
    let checkpoint = header.newest().1.checkpoint_lsn;
    let visible = wal.end_lsn().0;
    // The feed, when it is on or was ever on (its consumers still hold the log); never for a
    // read-only handle (`gate` is `None`), which publishes nothing and releases no log.
    let feed_on = gate.is_some()
        && (options.change_feed || storage.exists(&dir.join(crate::feed::FEED_DIR_NAME))?);
    let feed = if feed_on {
        Some(Arc::new(crate::feed::writer::FeedWriter::open(
            storage,
            dir,
            &options,
            wal.end_lsn(),
            wal.durable_lsn(),
        )?))
    } else {
        None
    };
    // Segments wholly before the checkpoint (and what feed consumers still need) are not
    // needed: free them for recycling now, or every open would add a segment.
    let keep = match &feed {
        Some(feed) => checkpoint.min(feed.keep_from(wal.end_lsn(), checkpoint, &wal)?),
        None => checkpoint,
    };
    if gate.is_some() {
        wal.release_before(keep)?;
        // Runs of transactions a process that died was writing (`db/write_set/spill.rs`).
        super::write_set::remove_leftovers(&**storage, dir)?;
    }
    let spill_to = Arc::new(super::write_set::SpillTo::new(
        Arc::clone(storage),
        dir.to_owned(),
        usize::try_from(options.write_set_bytes).unwrap_or(usize::MAX),
    ));
    if let Some(gate) = &gate
        && options.background_threads
    {
        gate.start_publisher(feed.clone())
            .map_err(|source| Error::Io {
                op: crate::IoOp::Create,
                path: dir.to_path_buf(),
                source,
            })?;
    }
    tracing::info!(
        target: "tilldb",
        created = recovery.created,
        torn_pages_restored = recovery.torn_pages_restored,
        log_bytes_replayed = recovery.log_bytes,
        records_replayed = recovery.records,
        pages_rebuilt = recovery.pages_rebuilt,
        elapsed_ms = u64::try_from(recovery.elapsed.as_millis()).unwrap_or(u64::MAX),
        "database opened"
    );
    let pool = Arc::new(pool);
    let writeback = if options.background_threads {
        writeback::WriteBack::start(Arc::clone(&pool), Arc::clone(&poisoned))
    } else {
        Ok(writeback::WriteBack::idle())
    }
    .map_err(|source| Error::Io {
        op: crate::IoOp::Create,
        path: dir.to_path_buf(),
        source,
    })?;
    Ok(Db {
        counted: true,
        inner: Arc::new(Inner {
            dir: dir.to_path_buf(),
            storage: Arc::clone(storage),
            data_path: dir.join(DATA_FILE_NAME),
            options,
            wal,
            pool,
            writer: Mutex::new(alloc),
            commits: Mutex::default(),
            tree_lock: super::locks::TreeLock::default(),
            reads: Mutex::new(Reads {
                visibility: Visibility::new(visible),
                overlay: Overlay::default(),
                snapshots: BTreeMap::new(),
            }),
            visible_hint: AtomicU64::new(visible),
            overlay_empty: AtomicBool::new(true),
            header: Mutex::new(header),
            checkpointing: Mutex::new(()),
            checkpointer: Mutex::new(super::checkpointer::Checkpointer::idle()),
            handles: std::sync::atomic::AtomicUsize::new(1),
            poisoned,
            writeback: Mutex::new(writeback),
            checkpoint_end: AtomicU64::new(checkpoint.0),
            image_horizon: AtomicU64::new(checkpoint.0),
            opened: Instant::now(),
            checkpoint_ms: AtomicU64::new(0),
            recovery,
            counters: super::Counters::default(),
            spill_to,
            graveyard: Mutex::new(super::drop::Graveyard::new()),
            feed,
            gate,
            read_only: None,
            _lock: lock,
        }),
    })
}

/// Opens the log of an existing database from its checkpoint, or from earlier where feed
/// consumers still need it (the log's open frees what lies before where it is told to
/// begin). If the log no longer holds what they need, they find out when they read; the
/// database opens all the same.
fn open_log(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    wal_options: crate::wal::WalOptions,
    checkpoint: crate::wal::Lsn,
) -> Result<Wal> {
    let wal_dir = dir.join(super::claim::WAL_DIR_NAME);
    // The older of the two: the log's open frees what lies before `begin`, and recovery
    // replays from the checkpoint whatever a consumer acknowledged.
    let begin = crate::feed::writer::retain_hint(&**storage, dir)?.map_or(checkpoint, |r| {
        if crate::mutants::active("reopen-from-newer") {
            r.max(checkpoint)
        } else {
            r.min(checkpoint)
        }
    });
    assert!(begin <= checkpoint, "the log reopened after its redo point");
    let opened = Wal::open_from(
        Arc::clone(storage),
        &wal_dir,
        wal_options.clone(),
        Some(begin),
    );
    let (wal, _recovery) = match opened {
        Err(Error::LogMissing { .. }) if begin < checkpoint => {
            Wal::open_from(Arc::clone(storage), &wal_dir, wal_options, Some(checkpoint))?
        }
        other => other?,
    };
    Ok(wal)
}

/// An error's text for another error to quote: an `InvalidOptions` without its own prefix, so
/// the wrapping one does not say "invalid options" twice.
pub(super) fn reason(e: &Error) -> String {
    match e {
        Error::InvalidOptions(why) => why.clone(),
        other => other.to_string(),
    }
}
