//! Creating a database: the creation marker first, the files, a probed flush method and
//! torn-page guard, the catalog and default table in a first commit, the header last, then
//! the marker removed (a directory without a header was never used). What a create cut short
//! leaves is removed by the next one (`remove_interrupted_create`).

use super::{RecoveryReport, assemble, pool_over, reason};
use crate::db::readers::ReaderGate;
use crate::db::{CATALOG_ROOT, Db, pages, record};
use crate::error::{Error, Result};
use crate::header::{Header, HeaderFile};
use crate::io::{HeldLock, IoGeometry, LockMode, Storage, choose_flush_method};
use crate::page::{
    BufferPool, DATA_FILE_NAME, DOUBLEWRITE_FILE_NAME, LEDGER_FILE_NAME, PageGuard, PageId,
    PageStore, SpillFile, TornPageGuard, check_atomic_pages, choose_guard, data_file_method,
};
use crate::wal::Wal;
use crate::{Durability, FlushMethod, Options};
use pages::TxnPages;
use record::Alloc;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Creates a new database: files, a probed flush method, the catalog and default table in a
/// first commit, then the header (last, so a database without a header was never used).
pub(super) fn create(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    options: Options,
    (started, lock): (Instant, Box<dyn HeldLock>),
) -> Result<Db> {
    let page_bytes = options.page_bytes_or_default();
    let options = Options {
        page_bytes: Some(page_bytes),
        ..options
    };
    // The key first: a provider that fails leaves the directory as it was.
    let (encryption, keys) = super::keys::new_block(&**storage, dir, &options)?.unzip();
    remove_interrupted_create(&**storage, dir)?;
    // The marker says "being created": only files made under it are ever removed as the
    // leftovers of a crashed create. Durable before any of them is made; a crashed create's
    // marker stays until this create is complete.
    let marker = dir.join(CREATING_FILE_NAME);
    if !storage.exists(&marker)? {
        drop(storage.create(&marker, FlushMethod::Fdatasync)?);
        storage.flush_dir(dir)?;
    }
    let facts = storage.device_facts(dir)?;
    let method = if let Some(m) = options.flush_method {
        m
    } else {
        // Measured at the log block size the log will write: a method that cannot write it
        // (direct I/O under a 512 B block on a 4 KiB device) is skipped, not chosen and then
        // refused (found under Wine, where direct-dsync measured fastest).
        let block = options
            .wal
            .log_block_bytes
            .unwrap_or_else(|| IoGeometry::default_log_block_bytes(&facts));
        choose_flush_method(&**storage, dir, &facts, block, Duration::from_millis(60))?.0
    };
    IoGeometry::resolve(&facts, method, options.wal.log_block_bytes, page_bytes)?;
    let options = if options.torn_page_guard == TornPageGuard::Auto {
        Options {
            torn_page_guard: choose_guard(&**storage, dir, page_bytes)?.0,
            ..options
        }
    } else {
        options
    };
    let data_method = data_file_method(options.torn_page_guard, method);
    if options.torn_page_guard == TornPageGuard::Atomic {
        IoGeometry::resolve(&facts, data_method, None, page_bytes)?;
        check_atomic_pages(&**storage, dir, page_bytes).map_err(|e| {
            Error::InvalidOptions(format!(
                "{}; create the database with the full-page-images or doublewrite guard",
                reason(&e)
            ))
        })?;
    }
    let store = PageStore::create(&**storage, dir, data_method, page_bytes)?
        .with_keys(&**storage, keys.clone())?;
    let guard = PageGuard::create(options.torn_page_guard, &**storage, dir, method, page_bytes)?;
    let wal_options = crate::wal::WalOptions {
        flush_method: method,
        background_threads: options.background_threads,
        ..options.wal.clone()
    };
    let (wal, _) = Wal::open_keyed(
        Arc::clone(storage),
        &dir.join(crate::db::claim::WAL_DIR_NAME),
        wal_options,
        (None, keys.clone()),
    )?;
    let wal = Arc::new(wal);
    let gate = Arc::new(ReaderGate::open(storage, dir, &wal)?);
    let scratch = super::keys::scratch_key(&**storage, dir, keys.as_deref())?;
    let spill = SpillFile::new(Arc::clone(storage), dir, page_bytes)?.with_key(scratch);
    let (pool, poisoned) = pool_over(
        options.cache_bytes,
        (&wal, Some(Arc::clone(&gate)), None),
        (store, guard, spill),
    );
    let alloc = first_commit(&pool, &wal, &dir.join(DATA_FILE_NAME))?;
    let header = Header {
        page_bytes,
        flush_method: method,
        torn_page_guard: options.torn_page_guard,
        generation: 0,
        checkpoint_lsn: wal.end_lsn(),
        catalog_root: CATALOG_ROOT,
        free_head: alloc.free_head,
        page_count: alloc.page_count,
        encryption,
        write_buffer: false,
        drain_chunks: false,
    };
    let (header_file, _) = HeaderFile::create(&**storage, dir, method, &header, keys)?;
    remove_creating_marker(&**storage, dir)?;
    let report = RecoveryReport {
        created: true,
        elapsed: started.elapsed(),
        ..RecoveryReport::default()
    };
    let db = assemble(
        (storage, dir),
        options,
        (wal, Some(gate)),
        (pool, poisoned),
        header_file,
        alloc,
        (report, lock),
    )?;
    crate::db::checkpoint::start_for(&db)?;
    Ok(db)
}

pub(crate) use crate::files::CREATING_FILE_NAME;

/// A new database's first commit: the catalog and the default table, durable and written
/// back. Returns the allocator state after it.
fn first_commit(pool: &BufferPool, wal: &Wal, data_path: &Path) -> Result<Alloc> {
    let first = Alloc {
        page_count: 1,
        free_head: PageId(0),
    };
    let pages = TxnPages::new(pool, data_path, first, None);
    crate::db::counts::create_first_trees(&pages)?;
    let (ops, alloc, touched) = pages.finish()?;
    let before = wal.end_lsn();
    let lsn = wal.commit(&record::encode_plain(alloc, &ops), Durability::Sync)?;
    pool.stamp(&touched, lsn.0, before.0);
    pool.flush_all()?;
    pool.save_ledger()?;
    Ok(alloc)
}

/// Removes the creation marker, if any: the header is durable, the database complete.
pub(super) fn remove_creating_marker(storage: &dyn Storage, dir: &Path) -> Result<()> {
    let marker = dir.join(CREATING_FILE_NAME);
    if storage.exists(&marker)? {
        storage.remove(&marker)?;
        storage.flush_dir(dir)?;
    }
    Ok(())
}

/// A crash during `create` leaves files but no header, and the creation marker: nothing in
/// them was ever acknowledged, so they are removed. Database files without the marker and
/// without a header are someone's data whose header is gone: refused, never removed.
fn remove_interrupted_create(storage: &dyn Storage, dir: &Path) -> Result<()> {
    if !storage.exists(&dir.join(CREATING_FILE_NAME))? {
        let wal_dir = dir.join(crate::db::claim::WAL_DIR_NAME);
        let log_files = if storage.exists(&wal_dir)? {
            storage.list_dir(&wal_dir)?.len()
        } else {
            0
        };
        for name in [DATA_FILE_NAME, DOUBLEWRITE_FILE_NAME, LEDGER_FILE_NAME] {
            let path = dir.join(name);
            if storage.exists(&path)? || log_files > 0 {
                return Err(Error::Corruption {
                    file: dir.join(crate::header::HEADER_FILE_NAME),
                    offset: 0,
                    what: "the header file is missing, but the directory holds a database's \
                           files (data file or log); refusing to create a new database over \
                           them (restore tilldb.meta, or remove the directory to start afresh)",
                });
            }
        }
    }
    for name in [
        DATA_FILE_NAME,
        DOUBLEWRITE_FILE_NAME,
        LEDGER_FILE_NAME,
        crate::header::HEADER_TEMP_FILE_NAME,
    ] {
        let path = dir.join(name);
        if storage.exists(&path)? {
            storage.remove(&path)?;
        }
    }
    let wal_dir = dir.join(crate::db::claim::WAL_DIR_NAME);
    if storage.exists(&wal_dir)? {
        for name in storage.list_dir(&wal_dir)? {
            storage.remove(&wal_dir.join(name))?;
        }
    }
    // Scratch files of a flush-method measurement that crashed. A live measurement (another
    // process's `till probe` of this directory) holds its file's lock: never removed.
    for name in storage.list_dir(dir)? {
        if name.starts_with(crate::io::MEASURE_FILE_PREFIX) {
            let path = dir.join(name);
            match storage.lock(&path, LockMode::Exclusive) {
                Ok(held) => {
                    storage.remove(&path)?;
                    drop(held);
                }
                Err(Error::Locked { .. }) => {}
                Err(e) => return Err(e),
            }
        }
    }
    // The marker stays: a crash before these removals are durable must find it again.
    storage.flush_dir(dir)
}
