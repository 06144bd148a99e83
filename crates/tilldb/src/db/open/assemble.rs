//! Step 4 of recovery (`open/mod.rs`), shared with `create.rs`: the buffer pool over the data
//! files, the log opened, and the running [`Db`] assembled with every room's state.

use super::RecoveryReport;
use crate::Options;
use crate::db::checkpoint::Checkpoints;
use crate::db::pages::PoolBackend;
use crate::db::readers::ReaderGate;
use crate::db::visible::Visible;
use crate::db::{Db, Inner, writeback};
use crate::error::{Error, Result};
use crate::header::HeaderFile;
use crate::io::{HeldLock, Storage};
use crate::page::{BufferPool, DATA_FILE_NAME, PageGuard, PageStore, SpillFile};
use crate::record::Alloc;
use crate::wal::Wal;
use parking_lot::Mutex;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

/// The buffer pool over the data files, and the fail-stop switch their write-backs set.
pub(super) fn pool_over(
    cache_bytes: u64,
    (wal, gate, snapshot_end): (&Arc<Wal>, Option<Arc<ReaderGate>>, Option<Arc<AtomicU64>>),
    (store, guard, spill): (PageStore, PageGuard, SpillFile),
) -> (BufferPool, Arc<crate::db::Poison>) {
    let poisoned = Arc::new(crate::db::Poison::default());
    let pool = BufferPool::new(
        store.format(),
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

/// Where the database's large transactions spill their runs, sealed under a scratch key of
/// this open when the database is encrypted.
fn spill_to(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    options: &Options,
    header: &HeaderFile,
) -> Result<Arc<crate::db::write_set::SpillTo>> {
    let scratch = super::keys::scratch_key(&**storage, dir, header.keys().map(|k| &**k))?;
    Ok(Arc::new(
        crate::db::write_set::SpillTo::new(
            Arc::clone(storage),
            dir.to_owned(),
            usize::try_from(options.write_set_bytes).unwrap_or(usize::MAX),
        )
        .with_key(scratch),
    ))
}

pub(super) fn assemble(
    (storage, dir): (&Arc<dyn Storage>, &Path),
    options: Options,
    (wal, gate): (Arc<Wal>, Option<Arc<ReaderGate>>),
    (pool, poisoned): (BufferPool, Arc<crate::db::Poison>),
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
        crate::db::write_set::remove_leftovers(&**storage, dir)?;
    }
    let spill_to = spill_to(storage, dir, &options, &header)?;
    let encryption = options.encryption().cloned();
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
            writer: crate::db::locks::WriterLock::new(alloc),
            commits: Mutex::default(),
            record_scratch: Mutex::default(),
            tree_lock: crate::db::locks::TreeLock::default(),
            visible: Visible::new(visible),
            write_buffer_bytes: std::sync::atomic::AtomicU64::new(0),
            checkpoints: Checkpoints::new((header, encryption), writeback, checkpoint),
            handles: std::sync::atomic::AtomicUsize::new(1),
            poisoned,
            recovery,
            counters: crate::db::Counters::default(),
            spill_to,
            graveyard: Mutex::new(crate::db::drop::Graveyard::new()),
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
pub(super) fn open_log(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    (wal_options, keys): (
        crate::wal::WalOptions,
        Option<Arc<crate::crypt::DatabaseKeys>>,
    ),
    checkpoint: crate::wal::Lsn,
) -> Result<Wal> {
    let wal_dir = dir.join(crate::db::claim::WAL_DIR_NAME);
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
    let opened = Wal::open_keyed(
        Arc::clone(storage),
        &wal_dir,
        wal_options.clone(),
        (Some(begin), keys.clone()),
    );
    let (wal, _recovery) = match opened {
        // The consumer's log is gone: open from the checkpoint, which recovery still needs
        // (the retry checks that the log begins at or before it and reaches it).
        Err(Error::LogMissing { .. }) if begin < checkpoint => {
            let start = if crate::mutants::active("feed-reopen-without-start") {
                None
            } else {
                Some(checkpoint)
            };
            Wal::open_keyed(Arc::clone(storage), &wal_dir, wal_options, (start, keys))?
        }
        other => other?,
    };
    Ok(wal)
}
