//! Recovery: everything that opens a database, in one room. Opening runs these steps, each in
//! the file named:
//!
//! 1. `Db::open_with_storage` (here): validate the options, claim the directory (`claim.rs`),
//!    create a database that is missing (`create.rs`), or choose the header slot to recover
//!    from (`header.rs`) and reopen the header file with the flush method stored in it.
//! 2. [`open_existing`] (here): refuse options that contradict the header and a device that
//!    cannot do the stored flush method or atomic writes (`check_openable`).
//! 3. `replay.rs`: restore torn pages from the guard's last batch, read the log from the
//!    checkpoint (recovered, or, for a read-only handle beside a live writer, followed up to
//!    the writer's published durable lsn), and redo each page operation a page lacks
//!    (page-lsn checks; commits logged in parts applied only with their last part).
//! 4. `assemble.rs`: the buffer pool over the data files, the log opened from where feed
//!    consumers still need it, and the running [`Db`] with every room's state.
//! 5. [`after_replay`] (here), for the writer: a checkpoint of what was replayed, counts for
//!    tables written before counts were kept (`counts.rs`), and dropped tables reclaimed
//!    (`drop.rs`).
//!
//! A read-only handle (`read_only.rs`) opens through steps 2-4 on an overlay and sets up its
//! own state ([`ReadOnly`]), which its `refresh` replays forward with step 3. What recovery
//! did is kept as a [`RecoveryReport`] ([`Db::recovery`]).

mod assemble;
mod create;
mod keys;

pub(crate) use keys::database_keys;
mod read_only;
mod replay;

pub(in crate::db) use read_only::ReadOnly;
pub(in crate::db) use replay::{BufferedEvent, BufferedLog, Records, replay};

use crate::db::Db;
use crate::db::claim;
use crate::db::readers::ReaderGate;
use crate::error::{Error, Result};
use crate::header::{Header, HeaderFile};
use crate::io::{FileStorage, HeldLock, IoGeometry, Storage};
use crate::page::{
    PageGuard, PageStore, SpillFile, TornPageGuard, check_atomic_pages, data_file_method,
};
use crate::record::Alloc;
use crate::{FlushMethod, Options};
use assemble::{assemble, pool_over};
use replay::{log_of, restore_torn};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
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
    let mut store = PageStore::open(&**storage, dir, data_method, header.page_bytes)?
        .with_keys(&**storage, header_file.keys().cloned())?;
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
    let keys = header_file.keys().cloned();
    let (wal, followed) = log_of(
        &opener,
        storage,
        dir,
        (wal_options, keys),
        header.checkpoint_lsn,
    )?;
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
    let scratch = keys::scratch_key(&**storage, dir, header_file.keys().map(|k| &**k))?;
    let spill = SpillFile::new(Arc::clone(storage), dir, header.page_bytes)?.with_key(scratch);
    let snapshot_end = read_only.then(|| Arc::new(AtomicU64::new(wal.end_lsn().0)));
    let (pool, poisoned) = pool_over(
        options.cache_bytes,
        (&wal, gate.clone(), snapshot_end.clone()),
        (store, guard, spill),
    );
    let records = match &followed {
        Some(records) => replay::Records::Read(records),
        None => replay::Records::Log(&wal, header.checkpoint_lsn),
    };
    let first = Alloc {
        page_count: header.page_count,
        free_head: header.free_head,
    };
    let mut buffered = replay::BufferedLog::allowing(header.write_buffer, header.drain_chunks);
    let (alloc, pending_from) = replay(records, &pool, dir, first, (&mut report, &mut buffered))?;
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
            .read_only = Some(read_only::ReadOnly::new(
            Arc::clone(&base),
            kept,
            end,
            (resume, header.checkpoint_lsn),
        ));
    }
    // What the write buffer held when the log ended (the writer's open drains it with the
    // checkpoint after recovery).
    crate::db::commit::rebuild_buffer(&db, buffered)?;
    // After the read-only state went in (`get_mut` needs no weak reference either).
    crate::db::checkpoint::start_for(&db)?;
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
    create::remove_creating_marker(&**storage, dir)?;
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

/// An error's text for another error to quote: an `InvalidOptions` without its own prefix, so
/// the wrapping one does not say "invalid options" twice.
pub(super) fn reason(e: &Error) -> String {
    match e {
        Error::InvalidOptions(why) => why.clone(),
        other => other.to_string(),
    }
}

impl Db {
    /// Opens the database in `dir`, creating it when missing, on the real file system.
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<Db> {
        Db::open_with_storage(Arc::new(FileStorage::new()), dir.as_ref(), options)
    }

    /// Opens the database in `dir` on any storage (the simulated disk in tests).
    pub fn open_with_storage(
        storage: Arc<dyn Storage>,
        dir: &Path,
        options: Options,
    ) -> Result<Db> {
        let write_buffer_bytes = options.write_buffer_bytes;
        let db = Db::open_unbuffered(storage, dir, options)?;
        // The header allows buffered records before the first one (`commit/buffer.rs`).
        db.turn_write_buffer_on(write_buffer_bytes)?;
        Ok(db)
    }

    /// [`Db::open_with_storage`] but for the write buffer, which it turns on after.
    #[expect(
        clippy::needless_pass_by_value,
        reason = "callers hand the storage over; the log keeps its own clone"
    )]
    fn open_unbuffered(storage: Arc<dyn Storage>, dir: &Path, options: Options) -> Result<Db> {
        let started = std::time::Instant::now();
        let _span = tracing::info_span!("tilldb.open", dir = %dir.display()).entered();
        options.validate()?;
        let header_path = dir.join(crate::header::HEADER_FILE_NAME);
        let early =
            if crate::mutants::active("header-read-before-lock") && storage.exists(&header_path)? {
                Some(HeaderFile::open(
                    &*storage,
                    dir,
                    crate::FlushMethod::Fdatasync,
                )?)
            } else {
                None
            };
        // Before anything else touches the directory: one process at a time. Nothing of the
        // database is read before this (a holder may checkpoint or close until it lets go;
        // `tests/db_lock.rs` checks the order of the calls).
        let claim::Claimed {
            lock,
            durable_before,
        } = claim::claim(&*storage, dir)?;
        if !storage.exists(&header_path)? {
            return create::create(&storage, dir, options, (started, lock));
        }
        // Read with any method; then flushed, as every file of the database, with the method
        // stored at create, whatever `options.flush_method` says (a header flushed with
        // `NoSync` while the log before it is reused would lose the log the old header needs).
        let read = match early {
            Some(early) => early,
            None => HeaderFile::open(&*storage, dir, crate::FlushMethod::Fdatasync)?,
        };
        match read {
            Some((header_file, header)) => {
                // The key before anything is written: a wrong one changes nothing (the opening
                // mark the claim put in `tilldb.durable` is taken back).
                let key_first = !crate::mutants::active("key-checked-after-open");
                let checked = keys::check(dir, &header, &options);
                if key_first && let Err(refused) = checked {
                    // The refusal is the answer; a mark that cannot be taken back (read-only
                    // media) is harmless: the next writer's open overwrites it.
                    if let Some(before) = durable_before
                        && let Err(e) =
                            crate::db::readers::withdraw_opening(&*storage, dir, &before)
                    {
                        tracing::warn!(
                            target: "tilldb",
                            dir = %dir.display(),
                            error = %e,
                            "the opening mark in tilldb.durable stays after a refused key"
                        );
                    }
                    return Err(refused);
                }
                let mut existing = if header.flush_method == crate::FlushMethod::Fdatasync {
                    (header_file, header)
                } else {
                    drop(header_file);
                    HeaderFile::open(&*storage, dir, header.flush_method)?.ok_or_else(|| {
                        Error::Corruption {
                            file: header_path.clone(),
                            offset: 0,
                            what: "the header file changed while it was opened",
                        }
                    })?
                };
                // The key is right: a MAC that fails now is a changed header.
                if let Ok(Some(keys)) = &checked {
                    existing.0.authenticate(Arc::clone(keys))?;
                }
                // Kept only for the mutant's late check.
                let late = (!key_first).then(|| options.clone());
                let db = open_existing(
                    &storage,
                    dir,
                    (options, Opener::Writer),
                    existing,
                    (started, lock),
                )?;
                if let Some(options) = late {
                    keys::check(dir, &header, &options)?;
                }
                after_replay(&db)?;
                Ok(db)
            }
            // `HeaderFile::create` writes and flushes a slot before the file gets its name.
            None => Err(Error::Corruption {
                file: header_path,
                offset: 0,
                what: "the header file holds no header (empty or all zeros); the database's \
                       other files are left as they are",
            }),
        }
    }
}

/// Step 5 of recovery, for the writer, once the database is assembled and its threads run:
/// a checkpoint of what redo replayed (so the next open does not replay it again, however
/// often the till crashes), counts for tables written before counts were kept, and the pages
/// of tables dropped before the crash reclaimed. Each step is its room's own
/// (`checkpoint.rs`, `counts.rs`, `drop.rs`); this is their order.
fn after_replay(db: &Db) -> Result<()> {
    db.checkpoint_after_recovery()?;
    db.count_after_open()?;
    db.reclaim_after_open()
}
