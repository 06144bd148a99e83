//! The change feed: committed transactions, in commit order, read from the one log.
//!
//! With [`crate::Options::change_feed`] on, every commit record also carries the writes as
//! the application made them (`record.rs`), so the log that makes commits durable is also
//! the feed: no second log, no extra flush. A [`Feed`] reads it from a position, in this
//! process or any other (`till ship` runs beside the application that writes), and returns
//! only commits the writer made durable: after any crash, everything a feed returned is in
//! the database.
//!
//! ## Files: `<database>/feed/`
//!
//! ```text
//! durable            the lsn the log is durable to, published by the writing process after
//!                    its flushes (written, never flushed itself: after a crash it may be
//!                    behind, never ahead)
//! start              the first lsn whose commits carry their writes (where a new consumer
//!                    starts); made durable when the feed is first turned on
//! <name>.consumer    a named consumer's acknowledged position, made durable on acknowledge
//! <name>.dropped     the reason a consumer was dropped (it fell too far behind); present
//!                    until the consumer is removed
//! released           present once the start moved up while no consumer was registered: the
//!                    lsn the start moved to (the log before it is gone); a consumer
//!                    registering after that is refused rather than silently start late
//! ```
//!
//! `durable`, `start`, `released` and each `.consumer` file are 16 bytes: the lsn (u64 LE), the CRC32C of
//! those 8 bytes (u32 LE), 4 zero bytes. Anything else is an error naming the file and offset.
//!
//! ## Retention
//!
//! The writing process keeps the log from the oldest position a consumer that is not dropped
//! has acknowledged (with no consumer yet: from `start`), as well as what recovery needs.
//! What is kept is measured in log files on disk, not in lsns (every open starts a fresh
//! segment, so a few kilobytes of commits can span many segment files):
//!
//! - a consumer whose position would keep more than `Options::feed_retention_bytes` of log
//!   files at a checkpoint is dropped (its `.dropped` file names the lsns);
//! - with no consumer registered, the feed keeps at most the smaller of
//!   `feed_retention_bytes` and `Options::checkpoint_log_bytes` of log files (default
//!   256 MiB); past that, `start` moves up to the checkpoint's redo point and `released`
//!   says so. A consumer that registers afterwards gets [`Error::FeedUnavailable`] naming
//!   the first lsn it can have; it starts there only when told to ([`register_consumer`],
//!   after copying the database's state, as `till ship --resync` does).
//!
//! Either way the log never grows past the limit for a feed.

use crate::FlushMethod;
use crate::checksum::crc32c;
use crate::error::{Error, Result};
use crate::files::WAL_DIR_NAME;
use crate::io::{FileStorage, Storage, parent_dir};
use crate::wal::Lsn;
use crate::wal::follow::LogFollower;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::record::Change;

pub(crate) mod writer;

/// The keys the feed of the database in `dir` reads its log with, given the application's
/// key `encryption`, checked as `Db::open` checks them: none for a plain database (without a
/// key), `KeyRequired`, `WrongKey` or `NotEncrypted` otherwise.
fn feed_keys(
    storage: &dyn Storage,
    dir: &Path,
    encryption: Option<&crate::crypt::Encryption>,
) -> Result<Option<Arc<crate::crypt::DatabaseKeys>>> {
    match crate::header::HeaderFile::open(storage, dir, FlushMethod::Fdatasync)? {
        Some((_, header)) => crate::db::database_keys(dir, &header, encryption),
        None => Ok(None),
    }
}

pub(crate) use crate::files::{
    FEED_CONSUMER_SUFFIX as CONSUMER_SUFFIX, FEED_DIR_NAME, FEED_DROPPED_SUFFIX as DROPPED_SUFFIX,
    FEED_DURABLE_FILE as DURABLE_FILE, FEED_RELEASED_FILE as RELEASED_FILE,
    FEED_START_FILE as START_FILE,
};
const LSN_FILE_BYTES: usize = 16;
/// How often a named consumer looks for its dropped mark while it reads.
const DROPPED_CHECK_EVERY: Duration = Duration::from_millis(100);
/// Payload bytes a feed reads from the log at a time.
const READ_BYTES: usize = 4 << 20;

/// One committed transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedTxn {
    /// The log position just after this commit: pass it to [`Feed::acknowledge`] or to
    /// [`Feed::open`] to go on after it. Increases from one transaction to the next.
    pub lsn: Lsn,
    /// Its writes: tables in name order, keys in order within each table; a key appears once.
    pub changes: Vec<Change>,
}

/// A named consumer, as [`consumers`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerState {
    /// The name it was opened with ([`Feed::open_consumer`]).
    pub name: String,
    /// Its acknowledged position.
    pub position: Lsn,
    /// Why it was dropped, if it was.
    pub dropped: Option<String>,
}

/// A reader of the change feed of one database.
#[derive(Debug)]
pub struct Feed {
    storage: Arc<dyn Storage>,
    /// The database directory.
    dir: PathBuf,
    follower: LogFollower,
    consumer: Option<String>,
    /// Read from the log, not yet returned.
    pending: std::collections::VecDeque<FeedTxn>,
    /// The position after the last transaction returned.
    returned: Lsn,
    /// `feed/durable`, open.
    durable_file: Option<Box<dyn crate::io::StorageFile>>,
    /// When the consumer's dropped mark was last looked for.
    dropped_checked: Option<Instant>,
    /// Where the records read stand in their commits (`record.rs`, parts).
    runs: crate::record::Runs,
    /// The changes of the parts read of a commit logged in parts, until its last part.
    parts: Vec<crate::record::Change>,
}

impl Feed {
    /// Reads the feed of the database in `dir` (on the real file system, read-only) from
    /// `from`: the database's feed start ([`start`]) or the `lsn` of a transaction already
    /// read.
    pub fn open(dir: impl AsRef<Path>, from: Lsn) -> Result<Feed> {
        Feed::open_with_storage(Arc::new(FileStorage::new()), dir.as_ref(), from, None)
    }

    /// The named consumer `name` of the database in `dir`: resumes from its acknowledged
    /// position, or registers it at the feed's start. Its acknowledgements hold the log for
    /// it (see the module doc, "Retention"); a consumer that fell too far behind fails with
    /// [`Error::FeedConsumerDropped`] until [`remove_consumer`] clears it. A new consumer
    /// after the feed released log while nobody consumed it fails with
    /// [`Error::FeedUnavailable`] naming the first lsn it can have: the transactions before
    /// it are gone from the feed ([`register_consumer`] starts it there knowingly).
    pub fn open_consumer(dir: impl AsRef<Path>, name: &str) -> Result<Feed> {
        Feed::open_consumer_with_storage(Arc::new(FileStorage::new()), dir.as_ref(), name)
    }

    /// [`Feed::open_consumer`] on any storage (the simulated disk in tests).
    pub fn open_consumer_with_storage(
        storage: Arc<dyn Storage>,
        dir: &Path,
        name: &str,
    ) -> Result<Feed> {
        Feed::open_consumer_keyed(storage, dir, name, None)
    }

    /// The named consumer's feed, its log read with the keys `encryption` opens.
    fn open_consumer_keyed(
        storage: Arc<dyn Storage>,
        dir: &Path,
        name: &str,
        encryption: Option<&crate::crypt::Encryption>,
    ) -> Result<Feed> {
        check_name(dir, name)?;
        // The key first: a refused one registers nothing.
        let keys = feed_keys(&*storage, dir, encryption)?;
        let feed_dir = dir.join(FEED_DIR_NAME);
        check_not_dropped(&*storage, dir, name)?;
        let path = feed_dir.join(format!("{name}{CONSUMER_SUFFIX}"));
        let position = if let Some(lsn) = read_lsn_file(&*storage, &path)? {
            lsn
        } else {
            let from = start_with_storage(&*storage, dir)?;
            if let Some(released) = read_lsn_file(&*storage, &feed_dir.join(RELEASED_FILE))? {
                return Err(Error::FeedUnavailable {
                    dir: dir.to_path_buf(),
                    lsn: from.0,
                    reason: format!(
                        "consumer {name:?} is new, but the feed released the log before lsn \
                         {} while no consumer was registered (it keeps at most \
                         checkpoint_log_bytes of log files for nobody): the first lsn it can \
                         have is {}; copy the database's state first and register there \
                         (`till ship --resync`, or tilldb::feed::register_consumer)",
                        released.0, from.0
                    ),
                });
            }
            write_lsn_file_durably(&*storage, &path, from)?;
            from
        };
        Feed::open_keyed(storage, dir, (position, Some(name.to_owned())), keys)
    }

    /// [`Feed::open`] on any storage (the simulated disk in tests); `consumer` names the
    /// consumer whose position it is.
    pub fn open_with_storage(
        storage: Arc<dyn Storage>,
        dir: &Path,
        from: Lsn,
        consumer: Option<String>,
    ) -> Result<Feed> {
        let keys = feed_keys(&*storage, dir, None)?;
        Feed::open_keyed(storage, dir, (from, consumer), keys)
    }

    /// [`Feed::open_with_storage`] of an encrypted database, whose log is read with the keys
    /// `encryption` (the application's key) opens, checked as `Db::open` checks them: a plain
    /// database with a key is `NotEncrypted`, an encrypted one without `KeyRequired`, another
    /// key `WrongKey`.
    pub fn open_encrypted(
        storage: Arc<dyn Storage>,
        dir: &Path,
        from: Lsn,
        consumer: Option<String>,
        encryption: Option<&crate::crypt::Encryption>,
    ) -> Result<Feed> {
        let keys = feed_keys(&*storage, dir, encryption)?;
        Feed::open_keyed(storage, dir, (from, consumer), keys)
    }

    /// [`Feed::open_consumer_with_storage`] of an encrypted database (see
    /// [`Feed::open_encrypted`]).
    pub fn open_consumer_encrypted(
        storage: Arc<dyn Storage>,
        dir: &Path,
        name: &str,
        encryption: Option<&crate::crypt::Encryption>,
    ) -> Result<Feed> {
        Feed::open_consumer_keyed(storage, dir, name, encryption)
    }

    /// The feed of the database in `dir` from `from`, its log read with `keys` (an encrypted
    /// database's, from [`feed_keys`]).
    fn open_keyed(
        storage: Arc<dyn Storage>,
        dir: &Path,
        (from, consumer): (Lsn, Option<String>),
        keys: Option<Arc<crate::crypt::DatabaseKeys>>,
    ) -> Result<Feed> {
        if read_lsn_file(&*storage, &dir.join(FEED_DIR_NAME).join(START_FILE))?.is_none() {
            return Err(not_on(dir, from));
        }
        let follower =
            LogFollower::new(Arc::clone(&storage), &dir.join(WAL_DIR_NAME), from).with_keys(keys);
        Ok(Feed {
            storage,
            dir: dir.to_path_buf(),
            follower,
            consumer,
            pending: std::collections::VecDeque::new(),
            runs: crate::record::Runs::default(),
            parts: Vec::new(),
            returned: from,
            durable_file: None,
            dropped_checked: None,
        })
    }

    /// The position after the last transaction returned (where the feed was opened, before
    /// the first).
    #[must_use]
    pub fn position(&self) -> Lsn {
        self.returned
    }

    /// The next committed transaction: at once if one is durable, else after waiting up to
    /// `wait` for one; `None` once caught up and nothing came.
    pub fn next(&mut self, wait: Duration) -> Result<Option<FeedTxn>> {
        let deadline = Instant::now() + wait;
        let mut nap = Duration::from_millis(1);
        loop {
            if let Some(txn) = self.pending.pop_front() {
                assert!(txn.lsn > self.returned, "the feed went backwards");
                self.returned = txn.lsn;
                return Ok(Some(txn));
            }
            // Records read but no transaction yet (the parts of a large commit): read on
            // before waiting.
            if self.fill()? || !self.pending.is_empty() {
                continue;
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            std::thread::sleep(nap.min(deadline - now));
            nap = (nap * 2).min(Duration::from_millis(10));
        }
    }

    /// Reads what the writer published as durable since the last read. Returns whether it
    /// read any record.
    fn fill(&mut self) -> Result<bool> {
        use crate::record::Step;
        if let Some(name) = &self.consumer
            && self
                .dropped_checked
                .is_none_or(|t| t.elapsed() >= DROPPED_CHECK_EVERY)
        {
            check_not_dropped(&*self.storage, &self.dir, name)?;
            self.dropped_checked = Some(Instant::now());
        }
        let Some(durable) = self.published_durable()? else {
            return Ok(false);
        };
        let records = self.follower.read(durable, READ_BYTES)?;
        let read_any = !records.is_empty();
        for rec in records {
            let commit =
                crate::record::decode(&rec.payload).map_err(|what| Error::FeedUnavailable {
                    dir: self.dir.clone(),
                    lsn: rec.lsn.0,
                    reason: format!("the commit record does not decode: {what}"),
                })?;
            // A drain of the write buffer, or a chunk of one: its writes were delivered from
            // their buffered records (`record.rs`); its parts follow the runs, and it delivers
            // nothing.
            let drain = matches!(
                commit.role,
                crate::record::Role::Drain | crate::record::Role::Chunk
            );
            let changes = match commit.changes {
                Some(changes) => changes,
                None if drain => Vec::new(),
                None => {
                    return Err(Error::FeedUnavailable {
                        dir: self.dir.clone(),
                        lsn: rec.lsn.0,
                        reason: "this commit was made with Options::change_feed off, so the log \
                                 does not hold its writes"
                            .to_owned(),
                    });
                }
            };
            // A commit logged in parts is returned whole, at its last part; one whose last
            // part never came (a crash) is never returned.
            let step = match self.runs.step(commit.part) {
                Ok((step, _abandoned)) => step,
                // The tail of a commit whose first parts are before where this feed began
                // (its start moved past them when nobody consumed): not a commit it can have.
                Err(_) if !self.runs.is_open() => continue,
                Err(what) => {
                    return Err(Error::FeedUnavailable {
                        dir: self.dir.clone(),
                        lsn: rec.lsn.0,
                        reason: format!("the log's commit records are out of place: {what}"),
                    });
                }
            };
            let changes = match step {
                Step::Whole => changes,
                Step::Begins => {
                    self.parts = changes;
                    continue;
                }
                Step::Continues => {
                    self.parts.extend(changes);
                    continue;
                }
                Step::Ends => {
                    let mut whole = std::mem::take(&mut self.parts);
                    whole.extend(changes);
                    whole
                }
            };
            if drain {
                continue;
            }
            self.pending.push_back(FeedTxn {
                lsn: rec.end_lsn,
                changes,
            });
        }
        Ok(read_any)
    }

    /// The durable lsn the writer published, read through a handle kept open.
    fn published_durable(&mut self) -> Result<Option<Lsn>> {
        let path = self.dir.join(FEED_DIR_NAME).join(DURABLE_FILE);
        if self.durable_file.is_none() {
            if !self.storage.exists(&path)? {
                return Ok(None);
            }
            self.durable_file = Some(self.storage.open(&path, FlushMethod::Fdatasync)?);
        }
        let file = self.durable_file.as_ref().expect("opened above");
        // The writer rewrites these 16 bytes in place while this reads them: a read that
        // caught half a write fails its checksum, and the next one does not.
        let mut tries = 0;
        loop {
            let mut bytes = [0; LSN_FILE_BYTES];
            let n = file.read_at(&mut bytes, 0)?;
            match decode_lsn(&bytes[..n], &path) {
                Ok(lsn) => return Ok(Some(lsn)),
                Err(e) if tries >= 3 => return Err(e),
                Err(_) => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    }

    /// Records, durably, that this named consumer has processed every transaction up to
    /// `lsn` (a [`FeedTxn::lsn`]): the writer may reuse the log before it, and a reopened
    /// consumer resumes after it.
    pub fn acknowledge(&mut self, lsn: Lsn) -> Result<()> {
        let name = self.consumer.clone().ok_or_else(|| {
            Error::InvalidOptions("acknowledge needs a named consumer (Feed::open_consumer)".into())
        })?;
        check_not_dropped(&*self.storage, &self.dir, &name)?;
        let path = self
            .dir
            .join(FEED_DIR_NAME)
            .join(format!("{name}{CONSUMER_SUFFIX}"));
        write_lsn_file_durably(&*self.storage, &path, lsn)
    }
}

/// The feed's start of the database in `dir`: where a new consumer begins.
pub fn start(dir: impl AsRef<Path>) -> Result<Lsn> {
    start_with_storage(&FileStorage::read_only(), dir.as_ref())
}

/// [`start`] on any storage.
pub fn start_with_storage(storage: &dyn Storage, dir: &Path) -> Result<Lsn> {
    read_lsn_file(storage, &dir.join(FEED_DIR_NAME).join(START_FILE))?
        .ok_or_else(|| not_on(dir, Lsn(0)))
}

fn not_on(dir: &Path, lsn: Lsn) -> Error {
    Error::FeedUnavailable {
        dir: dir.to_path_buf(),
        lsn: lsn.0,
        reason: "the database has never been opened with Options::change_feed on".to_owned(),
    }
}

/// The durable lsn the writer of the database in `dir` last published (`feed/durable`);
/// `None` when the feed was never on.
pub fn published_durable(dir: impl AsRef<Path>) -> Result<Option<Lsn>> {
    published_durable_with_storage(&FileStorage::read_only(), dir.as_ref())
}

/// [`published_durable`] on any storage.
pub fn published_durable_with_storage(storage: &dyn Storage, dir: &Path) -> Result<Option<Lsn>> {
    read_lsn_file(storage, &dir.join(FEED_DIR_NAME).join(DURABLE_FILE))
}

/// Where the feed of the database in `dir` released log while no consumer was registered
/// (`feed/released`): the first lsn still held then. `None` when it never did.
pub fn released(dir: impl AsRef<Path>) -> Result<Option<Lsn>> {
    read_lsn_file(
        &FileStorage::read_only(),
        &dir.as_ref().join(FEED_DIR_NAME).join(RELEASED_FILE),
    )
}

/// The named consumers of the database in `dir`.
pub fn consumers(dir: impl AsRef<Path>) -> Result<Vec<ConsumerState>> {
    consumers_with(&FileStorage::read_only(), dir.as_ref())
}

/// [`consumers`] on any storage.
pub fn consumers_with_storage(storage: &dyn Storage, dir: &Path) -> Result<Vec<ConsumerState>> {
    consumers_with(storage, dir)
}

pub(crate) fn consumers_with(storage: &dyn Storage, dir: &Path) -> Result<Vec<ConsumerState>> {
    let feed_dir = dir.join(FEED_DIR_NAME);
    if !storage.exists(&feed_dir)? {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for file in storage.list_dir(&feed_dir)? {
        let Some(name) = file.strip_suffix(CONSUMER_SUFFIX) else {
            continue;
        };
        let Some(position) = read_lsn_file(storage, &feed_dir.join(&file))? else {
            continue;
        };
        out.push(ConsumerState {
            name: name.to_owned(),
            position,
            dropped: read_dropped(storage, dir, name)?,
        });
    }
    Ok(out)
}

/// Registers the named consumer of the database in `dir` at `at`, or moves it there: from
/// now on the log is kept for it from `at`, and [`Feed::open_consumer`] resumes there. For a
/// consumer that copied the database's state as of `at` by other means (`till ship
/// --resync`). Fails with [`Error::FeedUnavailable`] when `at` is before the feed's start (the
/// log there is gone), and clears a dropped mark (the consumer starts afresh).
pub fn register_consumer(dir: impl AsRef<Path>, name: &str, at: Lsn) -> Result<()> {
    register_consumer_with_storage(&FileStorage::new(), dir.as_ref(), name, at)
}

/// [`register_consumer`] on any storage.
pub fn register_consumer_with_storage(
    storage: &dyn Storage,
    dir: &Path,
    name: &str,
    at: Lsn,
) -> Result<()> {
    check_name(dir, name)?;
    let start = start_with_storage(storage, dir)?;
    if at < start {
        return Err(Error::FeedUnavailable {
            dir: dir.to_path_buf(),
            lsn: at.0,
            reason: format!(
                "the feed starts at lsn {}: the log before it is gone",
                start.0
            ),
        });
    }
    let feed_dir = dir.join(FEED_DIR_NAME);
    write_lsn_file_durably(
        storage,
        &feed_dir.join(format!("{name}{CONSUMER_SUFFIX}")),
        at,
    )?;
    let dropped = feed_dir.join(format!("{name}{DROPPED_SUFFIX}"));
    if storage.exists(&dropped)? {
        storage.remove(&dropped)?;
        storage.flush_dir(&feed_dir)?;
    }
    Ok(())
}

/// Removes the named consumer (and its dropped mark): the log is no longer kept for it.
pub fn remove_consumer(dir: impl AsRef<Path>, name: &str) -> Result<()> {
    let storage = FileStorage::new();
    let dir = dir.as_ref();
    check_name(dir, name)?;
    let feed_dir = dir.join(FEED_DIR_NAME);
    for suffix in [CONSUMER_SUFFIX, DROPPED_SUFFIX] {
        let path = feed_dir.join(format!("{name}{suffix}"));
        if storage.exists(&path)? {
            storage.remove(&path)?;
        }
    }
    storage.flush_dir(&feed_dir)
}

/// Marks consumer `name` dropped, durably, saying why (the writing process, at a checkpoint).
pub(crate) fn mark_dropped(storage: &dyn Storage, dir: &Path, name: &str, why: &str) -> Result<()> {
    let path = dir
        .join(FEED_DIR_NAME)
        .join(format!("{name}{DROPPED_SUFFIX}"));
    write_durably(storage, &path, why.as_bytes())
}

fn read_dropped(storage: &dyn Storage, dir: &Path, name: &str) -> Result<Option<String>> {
    let path = dir
        .join(FEED_DIR_NAME)
        .join(format!("{name}{DROPPED_SUFFIX}"));
    if !storage.exists(&path)? {
        return Ok(None);
    }
    let file = storage.open(&path, FlushMethod::Fdatasync)?;
    let mut bytes = vec![0; usize::try_from(file.len()?).unwrap_or(0).min(4096)];
    let n = file.read_at(&mut bytes, 0)?;
    bytes.truncate(n);
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

fn check_not_dropped(storage: &dyn Storage, dir: &Path, name: &str) -> Result<()> {
    match read_dropped(storage, dir, name)? {
        Some(reason) => Err(Error::FeedConsumerDropped {
            dir: dir.to_path_buf(),
            name: name.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

fn check_name(dir: &Path, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidOptions(format!(
            "{}: consumer name {name:?}: use 1 to 64 letters, digits, '-' or '_'",
            dir.display()
        )))
    }
}

/// The 16 bytes of an lsn file.
pub(crate) fn encode_lsn(lsn: Lsn) -> [u8; LSN_FILE_BYTES] {
    let mut bytes = [0; LSN_FILE_BYTES];
    bytes[..8].copy_from_slice(&lsn.0.to_le_bytes());
    let crc = crc32c(&bytes[..8]);
    bytes[8..12].copy_from_slice(&crc.to_le_bytes());
    // The pair of a reader's check: what is written reads back as what was meant.
    debug_assert!(
        decode_lsn(&bytes, Path::new("feed position")).is_ok_and(|read| read == lsn),
        "feed position {lsn} does not read back"
    );
    bytes
}

/// Reads an lsn file: `None` when it does not exist.
pub(crate) fn read_lsn_file(storage: &dyn Storage, path: &Path) -> Result<Option<Lsn>> {
    if !storage.exists(path)? {
        return Ok(None);
    }
    let file = storage.open(path, FlushMethod::Fdatasync)?;
    let mut bytes = [0; LSN_FILE_BYTES];
    let n = file.read_at(&mut bytes, 0)?;
    decode_lsn(&bytes[..n], path).map(Some)
}

/// Decodes the bytes of the lsn file `path`.
fn decode_lsn(bytes: &[u8], path: &Path) -> Result<Lsn> {
    let corrupt = |offset: u64, what: &'static str| Error::Corruption {
        file: path.to_path_buf(),
        offset,
        what,
    };
    if bytes.len() < LSN_FILE_BYTES {
        return Err(corrupt(
            bytes.len() as u64,
            "feed position file shorter than 16 bytes",
        ));
    }
    let lsn = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
    let crc = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if crc != crc32c(&bytes[..8]) {
        return Err(corrupt(8, "feed position file checksum does not match"));
    }
    if bytes[12..16] != [0; 4] {
        return Err(corrupt(12, "feed position file has nonzero reserved bytes"));
    }
    Ok(Lsn(lsn))
}

/// Writes an lsn file through a temporary name, flushed, renamed, directory flushed.
pub(crate) fn write_lsn_file_durably(storage: &dyn Storage, path: &Path, lsn: Lsn) -> Result<()> {
    write_durably(storage, path, &encode_lsn(lsn))
}

fn write_durably(storage: &dyn Storage, path: &Path, bytes: &[u8]) -> Result<()> {
    storage.create_dir_all(&parent_dir(path))?;
    crate::io::write_file_durably(storage, path, bytes)
}
