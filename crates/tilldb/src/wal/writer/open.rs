//! Opening the log: recovery's scan checked against what the caller needs (a checkpoint's
//! start lsn), the block size taken from the device (or the log's first segment), a fresh
//! segment for new records, and the background threads (the interval flusher and the segment
//! preparer).

use super::{
    CHUNK_BYTES_INITIAL, Chunk, Shared, State, TailSlots, Wal, new_segment_header, prepare_segment,
};
use crate::crypt::DatabaseKeys;
use crate::error::{Error, Result};
use crate::io::{AlignedVec, IoGeometry, Storage, parent_dir};
use crate::wal::group_commit::{Progress, Relay};
use crate::wal::reader::{self, Recovery};
use crate::wal::segment;
use crate::wal::{Lsn, WalOptions};
use parking_lot::{Condvar, Mutex};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

impl Wal {
    /// Opens the log in `dir` (created if missing), recovers it, and starts a fresh segment for
    /// new records. Returns what recovery found.
    pub fn open(
        storage: Arc<dyn Storage>,
        dir: &Path,
        options: WalOptions,
    ) -> Result<(Wal, Recovery)> {
        Self::open_from(storage, dir, options, None)
    }

    /// [`Wal::open_from`] for an encrypted database's log (`keys`: its segments are sealed,
    /// version 3): records are opened as recovery reads them and sealed as they are appended.
    /// `None` is [`Wal::open_from`].
    pub fn open_keyed(
        storage: Arc<dyn Storage>,
        dir: &Path,
        options: WalOptions,
        (start, keys): (Option<Lsn>, Option<Arc<DatabaseKeys>>),
    ) -> Result<(Wal, Recovery)> {
        storage.create_dir_all(dir)?;
        storage.flush_dir(&parent_dir(dir))?;
        let scan = reader::scan(&*storage, dir, start, keys.as_deref())?;
        if keys.is_none()
            && let Some(sealed) = scan.chain.iter().find(|s| s.header.seal.is_some())
        {
            return Err(Error::InvalidOptions(format!(
                "{} is sealed (an encrypted database's log): it is opened with the \
                 database's key, through Db::open",
                sealed.path.display()
            )));
        }
        check_begins(&scan, start)?;
        check_reaches(&scan.recovery, dir, start)?;
        Self::from_scan(storage, dir, (options, keys), scan)
    }

    /// Like [`Wal::open`], for a caller that needs nothing before `start` (a checkpoint):
    /// recovery reads only the segments from the one holding `start`; older ones are free.
    pub fn open_from(
        storage: Arc<dyn Storage>,
        dir: &Path,
        options: WalOptions,
        start: Option<Lsn>,
    ) -> Result<(Wal, Recovery)> {
        Self::open_keyed(storage, dir, options, (start, None))
    }

    /// A new, empty log in `dir` whose first record will be at `lsn`, with nothing read from
    /// disk: a read-only handle's log (`db/readers.rs`), kept in memory by its overlay, where
    /// `dir` is not the database's log directory. It is never committed to.
    pub fn detached(
        storage: Arc<dyn Storage>,
        dir: &Path,
        options: WalOptions,
        lsn: Lsn,
    ) -> Result<Wal> {
        storage.create_dir_all(dir)?;
        let scan = reader::Scan {
            recovery: Recovery {
                start_lsn: lsn,
                end_lsn: lsn,
                durable_mark: lsn,
                ..Recovery::default()
            },
            ..reader::Scan::default()
        };
        Ok(Self::from_scan(storage, dir, (options, None), scan)?.0)
    }

    /// The log over what a scan of `dir` found: a fresh segment where it ended.
    fn from_scan(
        storage: Arc<dyn Storage>,
        dir: &Path,
        (options, keys): (WalOptions, Option<Arc<DatabaseKeys>>),
        scan: reader::Scan,
    ) -> Result<(Wal, Recovery)> {
        let facts = storage.device_facts(dir)?;
        let stored_block = scan.chain.first().map(|s| s.header.log_block_bytes);
        let geometry = IoGeometry::resolve(
            &facts,
            options.flush_method,
            stored_block.or(options.log_block_bytes),
            16384,
        )?;
        let block = geometry.log_block_bytes;
        if options.segment_bytes < 8 * u64::from(block)
            || !options.segment_bytes.is_multiple_of(u64::from(block))
        {
            return Err(Error::InvalidOptions(format!(
                "segment size {} must be a multiple of the log block ({block}) and at least 8 blocks",
                options.segment_bytes
            )));
        }
        let recovery = scan.recovery.clone();
        let mut free = scan.free;
        let generation = next_generation(scan.max_generation, dir)?;
        let header = new_segment_header(
            (&*storage, dir),
            keys.as_deref(),
            (block, first_segment_bytes(&options, block)),
            generation,
            recovery.end_lsn.0,
        )?;
        let first = Arc::new(prepare_segment(
            &*storage,
            dir,
            (options.flush_method, keys.as_deref()),
            header,
            free.pop(),
        )?);
        let chunk = Chunk {
            file_offset: u64::from(block),
            start_lsn: header.base_lsn,
            buf: AlignedVec::with_capacity(CHUNK_BYTES_INITIAL),
            segment: first,
        };
        let progress = Progress {
            appended: header.base_lsn,
            written: header.base_lsn,
            closed: header.base_lsn,
            durable: header.base_lsn,
            ..Progress::default()
        };
        let state = State {
            progress,
            chunks: vec![chunk],
            spare: None,
            preparing: false,
            segment_need: 0,
            next_generation: header.generation + 1,
            free,
            dirty: Vec::new(),
            dirty_buffered: Vec::new(),
            buffers: Vec::new(),
            chain: scan.chain,
            waiters: Vec::new(),
            returning: 0,
            flush_ns_ewma: 0,
            parts_from: None,
            poisoned: false,
            poison_cause: None,
            closing: false,
            slots: TailSlots::default(),
            slot_buf: None,
        };
        let shared = Arc::new(Shared {
            storage,
            dir: dir.to_path_buf(),
            keys,
            method: options.flush_method,
            block_bytes: block,
            options,
            state: Mutex::new(state),
            spare_ready: Condvar::new(),
            background_wake: Condvar::new(),
            preparer_wake: Condvar::new(),
            gather_done: Condvar::new(),
            relay: Relay::default(),
            appends: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            through_writes: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            log_bytes: AtomicU64::new(0),
            written_mark: AtomicU64::new(header.base_lsn),
            durable_mark: AtomicU64::new(header.base_lsn),
        });
        let wal = Wal {
            shared,
            background: Mutex::new(Vec::new()),
        };
        wal.start_threads(dir)?;
        Ok((wal, recovery))
    }

    /// Starts the interval flusher and the segment preparer. On failure the threads already
    /// started are stopped when the caller drops the log.
    fn start_threads(&self, dir: &Path) -> Result<()> {
        if !self.shared.options.background_threads {
            return Ok(());
        }
        for (name, body) in [
            ("tilldb-wal-flush", Shared::background as fn(&Shared)),
            ("tilldb-wal-prep", Shared::preparer),
        ] {
            let worker = Arc::clone(&self.shared);
            let handle = std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    // A panic here (a failed assertion: a bug) stops the log, as a failed
                    // write would, instead of leaving committers waiting for it forever.
                    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        body(&worker);
                    }));
                    if let Err(panic) = run {
                        let what = panic
                            .downcast_ref::<&str>()
                            .map(|s| (*s).to_owned())
                            .or_else(|| panic.downcast_ref::<String>().cloned())
                            .unwrap_or_default();
                        let source = std::io::Error::other(format!(
                            "the log's background thread {name} panicked (a bug in tilldb): \
                             {what}"
                        ));
                        let error = Error::Io {
                            op: crate::IoOp::Write,
                            path: worker.dir.clone(),
                            source,
                        };
                        worker.state.lock().poison(error);
                    }
                })
                .map_err(|source| Error::Io {
                    op: crate::IoOp::Create,
                    path: dir.to_path_buf(),
                    source,
                })?;
            self.background.lock().push(handle);
        }
        Ok(())
    }
}

/// `Err(Corruption)` unless the recovered log reaches `start`: the caller (a checkpoint)
/// promises it does, and a log that ends before it lost records the data file already depends
/// on. Checked before any write, so nothing is appended at an lsn the data file has passed.
fn check_reaches(recovery: &Recovery, dir: &Path, start: Option<Lsn>) -> Result<()> {
    match start {
        Some(start) if recovery.end_lsn < start => {
            let (file, offset) = recovery
                .stop
                .as_ref()
                .map_or((dir.to_path_buf(), 0), |s| (s.path.clone(), s.offset));
            Err(Error::Corruption {
                file,
                offset,
                what: "the log ends before the checkpoint lsn its header names (damaged or \
                       missing log records the data file depends on)",
            })
        }
        _ => Ok(()),
    }
}

/// `Err(LogMissing)` when the log begins after `start`: the caller (a checkpoint) promises
/// that redo from `start` rebuilds the data file, and the segments holding the records from
/// there to the first one present are gone (removed by hand, lost with a directory entry).
/// Starting redo later would drop those records' commits without a word. Checked before any
/// write.
fn check_begins(scan: &reader::Scan, start: Option<Lsn>) -> Result<()> {
    let (Some(start), Some(first)) = (start, scan.chain.first()) else {
        return Ok(());
    };
    assert_eq!(
        scan.recovery.start_lsn.0, first.header.base_lsn,
        "the log starts at its first segment's base"
    );
    if first.header.base_lsn > start.0 {
        return Err(Error::LogMissing {
            file: first.path.clone(),
            from_lsn: start.0,
            to_lsn: first.header.base_lsn,
        });
    }
    Ok(())
}

/// The generation after `max` (the highest a segment name in `dir` claims).
fn next_generation(max: u64, dir: &Path) -> Result<u64> {
    max.checked_add(1)
        .filter(|&g| g <= segment::GENERATION_MAX)
        .ok_or_else(|| Error::Corruption {
            file: dir.to_path_buf(),
            offset: 0,
            what: "a log segment's name claims a generation no log reaches (found by fuzzing)",
        })
}

/// The size of the segment every open starts with (a reopened log too: a till switched off
/// every night with few sales then spends a small segment a day, and the next open reads a
/// small tail): `first_segment_bytes`, never above `segment_bytes`, a multiple of the log
/// block and at least 8 blocks.
pub(super) fn first_segment_bytes(options: &WalOptions, block: u32) -> u64 {
    let block = u64::from(block);
    let bytes = options
        .first_segment_bytes
        .next_multiple_of(block)
        .clamp(8 * block, options.segment_bytes);
    debug_assert!(bytes.is_multiple_of(block) && bytes <= options.segment_bytes);
    bytes
}
