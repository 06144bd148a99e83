//! [`Db::open_read_only`]: a consistent snapshot of a database that another process may be
//! writing, from any process, changing nothing on disk.
//!
//! ```text
//!  1. refuse what is not a database (no header), creating nothing
//!  2. take the readers' lock shared (`readers.rs`), letting a waiting writer go first: from
//!     here until the handle is dropped or refreshed, the writer changes no page, header or
//!     log segment this handle reads
//!  3. a live writer (its lock is held): the snapshot ends at the durable lsn it published;
//!     none: at the end of the valid log, as the next writer's recovery will find it
//!  4. recovery in memory (an `OverlayStorage` over the files): the header, torn pages from
//!     the doublewrite batch, redo from the checkpoint to the snapshot's end (a live log is
//!     read as the change feed reads it, `wal/follow.rs`, never past the published lsn)
//! ```
//!
//! The handle is a [`Db`]: reads, scans, tables, lengths, checks and backups work as on the
//! writer's; [`Db::begin`] is [`Error::ReadOnly`]. [`Db::refresh`] lets go of the snapshot
//! and opens a new one at the latest durable lsn. Its cost: the redo from the writer's last
//! checkpoint, in memory (the cache, then the overlay's memory for pages beyond it).

use super as open;
use crate::Options;
use crate::db::{Db, readers};
use crate::error::{Error, Result};
use crate::header::{HEADER_FILE_NAME, HeaderFile};
use crate::io::{FileStorage, OverlayStorage, Storage};
use crate::wal::Lsn;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long an open waits for the writer to let go of the readers' lock (it holds it while
/// it writes a batch of pages or a checkpoint's header: milliseconds).
const PATIENCE: Duration = Duration::from_secs(30);

/// Tries at an open whose log a writer that opened meanwhile changed under it.
const OPEN_TRIES: u32 = 3;

/// What a read-only handle needs to refresh.
pub(in crate::db) struct ReadOnly {
    /// The storage the database's files are read from (never written).
    base: Arc<dyn Storage>,
    /// Where the handle may write what is not the database (a backup's copy).
    writable: Arc<dyn Storage>,
    options: Options,
    /// Where the snapshot ends: the end of the last record read (shared with `DataFiles`).
    end: Arc<AtomicU64>,
    /// Where the next refresh reads the log from: `end`, or the first part of a commit whose
    /// last part the snapshot did not reach (never applied, read again whole).
    resume: Lsn,
    /// The header's redo point when the snapshot was taken: a refresh that finds another
    /// (the writer checkpointed meanwhile) opens anew.
    checkpoint: Lsn,
    /// The last refresh's log follower, with its segment open: the next refresh goes on
    /// from where it stopped when that is `resume` (no listing, no open, no header read).
    /// Segments from `resume` on are released only by a checkpoint, after which a refresh
    /// opens anew.
    follower: Option<crate::wal::follow::LogFollower>,
}

impl ReadOnly {
    /// What `open/mod.rs` knows of a read-only handle it opened; [`Db::open_read_only`] says
    /// where it may write.
    pub(super) fn new(
        base: Arc<dyn Storage>,
        options: Options,
        end: Arc<AtomicU64>,
        (resume, checkpoint): (Lsn, Lsn),
    ) -> ReadOnly {
        ReadOnly {
            writable: Arc::clone(&base),
            base,
            options,
            end,
            resume,
            checkpoint,
            follower: None,
        }
    }
}

impl Db {
    /// Opens the database in `dir` read-only, at the latest durable commit, while another
    /// process may have it open and commit: see `db/open/read_only.rs`. Nothing on disk changes
    /// (the lock files `tilldb.readers` and `tilldb.lock` are made if missing and the
    /// directory is writable); on read-only media it reads the database as it is. It never
    /// blocks the writer's commits; while it is open, the writer defers its checkpoints.
    pub fn open_read_only(dir: impl AsRef<Path>, options: Options) -> Result<Db> {
        Db::open_read_only_on(
            (
                Arc::new(FileStorage::read_only()),
                Arc::new(FileStorage::new()),
            ),
            dir.as_ref(),
            options,
        )
    }

    /// [`Db::open_read_only`] on any storage (the simulated disk in tests); a backup's copy
    /// is written there too.
    pub fn open_read_only_with_storage(
        storage: Arc<dyn Storage>,
        dir: &Path,
        options: Options,
    ) -> Result<Db> {
        Db::open_read_only_on((Arc::clone(&storage), storage), dir, options)
    }

    /// Opens read-only, the files read from `base`, anything else written to `writable`.
    #[expect(
        clippy::needless_pass_by_value,
        reason = "the handle keeps the options (to refresh); taken by value as Db::open takes them"
    )]
    fn open_read_only_on(
        (base, writable): (Arc<dyn Storage>, Arc<dyn Storage>),
        dir: &Path,
        options: Options,
    ) -> Result<Db> {
        let started = std::time::Instant::now();
        let _span = tracing::info_span!("tilldb.open_read_only", dir = %dir.display()).entered();
        options.validate()?;
        let header_path = dir.join(HEADER_FILE_NAME);
        if !base.exists(&header_path)? {
            let reason = if base.exists(dir)? {
                format!("it has no {HEADER_FILE_NAME}: there is no database to read")
            } else {
                "no such directory: there is no database to read".to_owned()
            };
            return Err(Error::NotADatabase {
                dir: dir.to_path_buf(),
                reason,
            });
        }
        let mut tries = 0;
        loop {
            tries += 1;
            let (mut db, followed) = match Db::open_snapshot(&base, dir, &options, started) {
                Ok(opened) => opened,
                // A writer that opened while the log was read as nobody's (its first segment
                // made where this open's recovery, in memory, made one too: found under Wine)
                // changes the log under that read: again, at what the writer publishes.
                Err(_) if tries < OPEN_TRIES && readers::writer_is_live(&*base, dir)? => continue,
                Err(e) => return Err(e),
            };
            if !followed && readers::writer_is_live(&*base, dir)? {
                // A writer opened while the log was read to its end as no writer held it:
                // what it appended meanwhile may not be durable. Again, at what it publishes.
                drop(db);
                continue;
            }
            // A database written before table counts is counted (in memory) as at any open.
            db.count_after_open()?;
            Arc::get_mut(&mut db.inner)
                .expect("a handle just opened has no clone")
                .read_only
                .as_mut()
                .expect("opened read-only")
                .writable = writable;
            return Ok(db);
        }
    }

    /// One try of [`Db::open_read_only`]: the snapshot lock, where the snapshot ends, the
    /// recovery in memory. Returns the handle and whether it followed a live writer's log.
    fn open_snapshot(
        base: &Arc<dyn Storage>,
        dir: &Path,
        options: &Options,
        started: std::time::Instant,
    ) -> Result<(Db, bool)> {
        let header_path = dir.join(HEADER_FILE_NAME);
        let lock = readers::hold_snapshot(&**base, dir, PATIENCE)?;
        let follow = readers::snapshot_end(&**base, dir, PATIENCE)?;
        let overlay: Arc<dyn Storage> = Arc::new(OverlayStorage::new(Arc::clone(base)));
        let Some(mut existing) = HeaderFile::open(&*overlay, dir, crate::FlushMethod::Fdatasync)?
        else {
            return Err(Error::Corruption {
                file: header_path,
                offset: 0,
                what: "the header file holds no header (empty or all zeros); the database's \
                       other files are left as they are",
            });
        };
        if let Some(keys) = open::keys::check(dir, &existing.1, options)? {
            existing.0.authenticate(keys)?;
        }
        let db = open::open_existing(
            &overlay,
            dir,
            (
                options.clone(),
                open::Opener::Reader {
                    base: Arc::clone(base),
                    follow,
                },
            ),
            existing,
            (started, lock),
        )?;
        Ok((db, follow.is_some()))
    }

    /// Holds the files of the database in `dir` still, for a tool that reads them itself
    /// (`till stats`, `till dump-log`), whether a writer has the database open or not: the
    /// readers' lock, shared (`db/readers.rs`). While it is held, the writer (live now, or
    /// opening later) changes no page, no header and no log segment, and appends to the log
    /// only past what it published as durable; its commits go on. Nothing is written (on
    /// read-only media nothing is locked, and no writer can be there).
    #[cfg(any(test, feature = "internals"))]
    pub fn hold_files(dir: impl AsRef<Path>) -> Result<Box<dyn crate::io::HeldLock>> {
        readers::hold_snapshot(&FileStorage::read_only(), dir.as_ref(), PATIENCE)
    }

    /// True when a writer has the database in `dir` open now (its lock is held), in this
    /// process or another. A moment later it may have closed, or one opened.
    pub fn is_open_for_writing(dir: impl AsRef<Path>) -> Result<bool> {
        readers::writer_is_live(&FileStorage::read_only(), dir.as_ref())
    }

    /// True for a handle from [`Db::open_read_only`].
    #[must_use]
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only.is_some()
    }

    /// Moves a read-only handle to the latest durable commit: lets go of its snapshot (the
    /// writer may be waiting for it), then takes the next. When the writer has not
    /// checkpointed since, that is the log records since the last refresh, replayed onto this
    /// snapshot's pages; otherwise the database is opened anew (a redo from the new
    /// checkpoint). On a read-write handle, which sees every commit already, it does nothing.
    /// Clones of this handle keep the old snapshot. On failure the handle is unusable (every
    /// call fails); open a new one.
    pub fn refresh(&mut self) -> Result<()> {
        let Some(read_only) = &self.inner.read_only else {
            return Ok(());
        };
        let storages = (Arc::clone(&read_only.base), Arc::clone(&read_only.writable));
        let options = read_only.options.clone();
        let dir = self.inner.dir.clone();
        if Arc::get_mut(&mut self.inner).is_some() {
            // No clone and (through `&mut self`) no transaction reads through this handle:
            // its snapshot lock can go before the next is taken, so a writer waiting for it
            // gets in between.
            self.let_go();
            match self.refresh_in_place() {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => {
                    // Without its lock the old snapshot's files may change: never read them
                    // again.
                    self.inner.poisoned.set(&e);
                    return Err(e);
                }
            }
        }
        match Db::open_read_only_on(storages, &dir, options) {
            Ok(fresh) => {
                *self = fresh;
                Ok(())
            }
            Err(e) => {
                self.inner.poisoned.set(&e);
                Err(e)
            }
        }
    }

    /// Lets go of the snapshot lock. Requires: no clone of this handle.
    fn let_go(&mut self) {
        let inner = Arc::get_mut(&mut self.inner).expect("no clone");
        #[expect(
            clippy::used_underscore_binding,
            reason = "the lock is only held, never read; here it is let go early"
        )]
        let held = &mut inner._lock;
        *held = Box::new(crate::io::NoLock);
    }

    /// Takes the snapshot lock again and, when the writer's checkpoint has not moved and a
    /// writer is live, replays the log it published since onto this snapshot: `Ok(false)`
    /// when the handle must be opened anew instead. Requires: no clone of this handle, and
    /// its lock let go.
    fn refresh_in_place(&mut self) -> Result<bool> {
        let inner = Arc::get_mut(&mut self.inner).expect("no clone");
        let read_only = inner.read_only.as_mut().expect("a read-only handle");
        let base = Arc::clone(&read_only.base);
        let lock = readers::hold_snapshot(&*base, &inner.dir, PATIENCE)?;
        // From here the files hold still again.
        let Some((mut header_file, header)) =
            HeaderFile::open(&*base, &inner.dir, crate::FlushMethod::Fdatasync)?
        else {
            return Ok(false);
        };
        if let Some(keys) = inner.checkpoints.keys() {
            header_file.authenticate(keys)?;
        }
        if header.checkpoint_lsn != read_only.checkpoint
            && !crate::mutants::active("refresh-in-place-past-checkpoint")
        {
            return Ok(false);
        }
        let Some(durable) = readers::snapshot_end(&*base, &inner.dir, PATIENCE)? else {
            // No writer: the log's valid end is found by a recovery's scan.
            return Ok(false);
        };
        let mut follower = match read_only.follower.take() {
            Some(kept) if kept.position() == read_only.resume => kept,
            _ => open::replay::log_follower(
                &base,
                &inner.dir,
                read_only.resume,
                inner.checkpoints.keys(),
            ),
        };
        let records = open::replay::follow_log(&mut follower, durable.max(read_only.resume))?;
        let mut buffered = open::BufferedLog::allowing(header.write_buffer, header.drain_chunks);
        if let Some(last) = records.last() {
            let end = last.end_lsn;
            // Pages the writer wrote since are at most this new: read, they are no error.
            crate::db::advance_mark(&read_only.end, end.0, "a refresh's end");
            let mut report = open::RecoveryReport::default();
            let before = *inner.writer.get_mut();
            let (alloc, pending) = open::replay(
                open::Records::Read(&records),
                &inner.pool,
                &inner.dir,
                before,
                (&mut report, &mut buffered),
            )?;
            *inner.writer.get_mut() = alloc;
            read_only.resume = pending.unwrap_or(end);
            inner.visible.restart_at(end.0);
        }
        read_only.follower = Some(follower);
        #[expect(
            clippy::used_underscore_binding,
            reason = "the lock is only held, never read; here the next snapshot's is kept"
        )]
        let held = &mut inner._lock;
        *held = lock;
        // The buffered commits read, over the handle's own buffer (`commit/buffer.rs`).
        crate::db::commit::rebuild_buffer(self, buffered)?;
        Ok(true)
    }

    /// The log is durable to here: a writer's log made durable now, or a read-only handle's
    /// snapshot end (its own log is empty and knows nothing of the records it read).
    pub(in crate::db) fn durable_end(&self) -> Result<Lsn> {
        if let Some(read_only) = &self.inner.read_only {
            return Ok(Lsn(read_only.end.load(Ordering::Acquire)));
        }
        self.inner.wal.sync()?;
        Ok(self.inner.wal.durable_lsn())
    }

    /// Where this handle may write files that are not the database's (a backup's copy).
    pub(in crate::db) fn writable_storage(&self) -> Arc<dyn Storage> {
        self.inner.read_only.as_ref().map_or_else(
            || Arc::clone(&self.inner.storage),
            |r| Arc::clone(&r.writable),
        )
    }

    /// `Err(ReadOnly)` on a read-only handle.
    pub(in crate::db) fn refuse_read_only(&self) -> Result<()> {
        if self.is_read_only() {
            return Err(Error::ReadOnly {
                dir: self.inner.dir.clone(),
                what: "a read-write transaction",
            });
        }
        Ok(())
    }
}
