//! The writing side of the change feed (`crate::feed` has the format and the readers): the
//! feed's start made durable when the feed is turned on, the durable lsn published after
//! flushes (by the publisher thread of `readers.rs`, which publishes it for read-only
//! handles too), and how far back the log must be kept for consumers.

use crate::error::Result;
use crate::feed::{self, DURABLE_FILE, FEED_DIR_NAME, RELEASED_FILE, START_FILE};
use crate::io::{Storage, StorageFile};
use crate::wal::{Lsn, Wal};
use crate::{FlushMethod, Options};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where the log must still begin for the feed of the database in `dir`, before it is
/// opened: the oldest position of a consumer not dropped, else the feed's start; `None` when
/// the feed was never on. (`FeedWriter::keep_from` decides, and drops, once the log is open.)
pub(crate) fn retain_hint(storage: &dyn Storage, dir: &Path) -> Result<Option<Lsn>> {
    if !storage.exists(&dir.join(FEED_DIR_NAME))? {
        return Ok(None);
    }
    let oldest = feed::consumers_with(storage, dir)?
        .into_iter()
        .filter(|c| c.dropped.is_none())
        .map(|c| c.position)
        .min();
    match oldest {
        Some(lsn) => Ok(Some(lsn)),
        None => feed::read_lsn_file(storage, &dir.join(FEED_DIR_NAME).join(START_FILE)),
    }
}

/// The feed of an open database: `None` in `Inner` when `Options::change_feed` is off.
pub(crate) struct FeedWriter {
    storage: Arc<dyn Storage>,
    /// The database directory.
    dir: PathBuf,
    durable: Mutex<Published>,
    /// Most log files kept for a consumer (`Options::feed_retention_bytes`).
    retention_bytes: u64,
    /// Most log files kept for the start while no consumer is registered: the smaller of
    /// `feed_retention_bytes` and `checkpoint_log_bytes`.
    unconsumed_bytes: u64,
}

struct Published {
    file: Box<dyn StorageFile>,
    lsn: Lsn,
}

impl std::fmt::Debug for FeedWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FeedWriter({})", self.dir.display())
    }
}

impl FeedWriter {
    /// Turns the feed on for the database in `dir`, whose log continues at `next_lsn`: the
    /// start is made durable if the feed was never on, and the durable lsn published.
    pub(crate) fn open(
        storage: &Arc<dyn Storage>,
        dir: &Path,
        options: &Options,
        next_lsn: Lsn,
        durable: Lsn,
    ) -> Result<FeedWriter> {
        let feed_dir = dir.join(FEED_DIR_NAME);
        storage.create_dir_all(&feed_dir)?;
        storage.flush_dir(dir)?;
        let start_path = feed_dir.join(START_FILE);
        if feed::read_lsn_file(&**storage, &start_path)?.is_none() {
            feed::write_lsn_file_durably(&**storage, &start_path, next_lsn)?;
        }
        let durable_path = feed_dir.join(DURABLE_FILE);
        let file = if storage.exists(&durable_path)? {
            storage.open(&durable_path, FlushMethod::NoSync)?
        } else {
            let file = storage.create(&durable_path, FlushMethod::NoSync)?;
            storage.flush_dir(&feed_dir)?;
            file
        };
        file.write_at(&feed::encode_lsn(durable), 0)?;
        Ok(FeedWriter {
            storage: Arc::clone(storage),
            dir: dir.to_path_buf(),
            durable: Mutex::new(Published { file, lsn: durable }),
            retention_bytes: options.feed_retention_bytes,
            unconsumed_bytes: options
                .feed_retention_bytes
                .min(options.checkpoint_log_bytes),
        })
    }

    /// Publishes `durable` (everything before it is durable in the log) if it moved on.
    pub(crate) fn publish(&self, durable: Lsn) -> Result<()> {
        let mut published = self.durable.lock();
        if durable > published.lsn {
            published.file.write_at(&feed::encode_lsn(durable), 0)?;
            published.lsn = durable;
        }
        Ok(())
    }

    /// The oldest lsn the log must keep for the feed, given that it ends at `end` and
    /// recovery needs it from `redo` (a record boundary): the oldest position of a consumer
    /// not dropped, else the feed's start. Measured in log files on disk (`wal`): a consumer
    /// whose position would keep more than `feed_retention_bytes` of them is dropped here
    /// (durably, with the reason); with no consumer registered, the start moves up to `redo`
    /// once it would keep more than `unconsumed_bytes`, and `feed/released` records that the
    /// log before it is gone (a consumer registering later is refused, `Feed::open_consumer`).
    pub(crate) fn keep_from(&self, end: Lsn, redo: Lsn, wal: &Wal) -> Result<Lsn> {
        let storage = &*self.storage;
        // Log files totalling exactly `feed_retention_bytes` are within it; only more is over.
        let within = if crate::mutants::active("feed-retention-exact-counts-over") {
            self.retention_bytes.saturating_sub(1)
        } else {
            self.retention_bytes
        };
        let limit = wal.lsn_kept_within(within);
        let mut oldest: Option<Lsn> = None;
        let mut any = false;
        for consumer in feed::consumers_with(storage, &self.dir)? {
            if consumer.dropped.is_some() {
                continue;
            }
            any = true;
            if consumer.position < limit && consumer.position < redo {
                let why = format!(
                    "it had acknowledged lsn {} while the log reached lsn {}: keeping the log \
                     from there would keep more than feed_retention_bytes ({}) of log files",
                    consumer.position.0, end.0, self.retention_bytes
                );
                tracing::warn!(
                    target: "tilldb",
                    consumer = %consumer.name,
                    position = consumer.position.0,
                    end_lsn = end.0,
                    "change feed consumer dropped: {why}"
                );
                feed::mark_dropped(storage, &self.dir, &consumer.name, &why)?;
                continue;
            }
            oldest = Some(oldest.map_or(consumer.position, |o| o.min(consumer.position)));
        }
        if let Some(oldest) = oldest {
            return Ok(oldest);
        }
        let feed_dir = self.dir.join(FEED_DIR_NAME);
        let start_path = feed_dir.join(START_FILE);
        let start = feed::read_lsn_file(storage, &start_path)?.unwrap_or(end);
        if !any && start < redo && start < wal.lsn_kept_within(self.unconsumed_bytes) {
            // No consumer yet: the start moves up rather than keep the log growing. The
            // released mark first: a crash between the two leaves a start that could still
            // be read but is refused to new consumers, never the other way round.
            tracing::warn!(
                target: "tilldb",
                start = start.0,
                new_start = redo.0,
                "change feed start moved: no consumer registered, and keeping the log from \
                 the start would keep more than checkpoint_log_bytes (or feed_retention_bytes) \
                 of log files"
            );
            let released_path = feed_dir.join(RELEASED_FILE);
            if crate::mutants::active("feed-start-before-released") {
                feed::write_lsn_file_durably(storage, &start_path, redo)?;
                feed::write_lsn_file_durably(storage, &released_path, redo)?;
            } else {
                feed::write_lsn_file_durably(storage, &released_path, redo)?;
                feed::write_lsn_file_durably(storage, &start_path, redo)?;
            }
            return Ok(redo);
        }
        Ok(if any { end } else { start })
    }
}
