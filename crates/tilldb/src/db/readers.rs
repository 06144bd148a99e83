//! Read-only handles in other processes ([`super::Db::open_read_only`]), and the writer that
//! must not change the files under them.
//!
//! A read-only handle reads the header, the data file and the log as they are on disk and
//! keeps its own redo in memory (an `OverlayStorage`: nothing it does reaches the files). Its
//! snapshot is consistent only while the files it reads do not change under it. The writer's
//! log appends do not matter (a reader reads records only up to the durable lsn the writer
//! published, and the log below that is never rewritten while it is needed); what matters is
//! every other write: pages written back, the ledger, the doublewrite batch, the header, and
//! log segments released for reuse. Those the writer makes only while it holds the readers'
//! lock exclusively, and a reader holds it shared for as long as its snapshot lives.
//!
//! ```text
//! tilldb.readers   a lock file, empty. Read-only handles hold it shared from before they read
//!                  the header until they are dropped or refreshed; the writer holds it
//!                  exclusively while it writes pages, the ledger or the header, or releases
//!                  log segments (a `GateGuard`), and at no other time.
//! tilldb.durable   16 bytes, written by the writing process, never flushed:
//!                    offset 0   u64 LE  the durable lsn: every record ending at or before it
//!                                       is durable in the log
//!                    offset 8   u32 LE  flags: bit 0 = the writer waits for the readers' lock;
//!                                       bit 1 = a writer is opening (recovering): the lsn
//!                                       is its predecessor's, not yet its own
//!                    offset 12  u32 LE  CRC32C of bytes 0..12
//!                  A reader that finds the CRC wrong reads again (the writer may be writing
//!                  it); still wrong after a few tries is Error::Corruption naming the file.
//! ```
//!
//! Invariants:
//! - Published before a reader can look: every page lsn in the data file and the header's
//!   redo point are at or below the published lsn whenever a reader can take the lock. The
//!   writer publishes as it lets go of the lock (the last `GateGuard` dropped), which is what
//!   readers rely on; it also publishes as it takes the lock and before a header, so a writer
//!   killed mid-write leaves little behind the file. A reader's redo to the published lsn
//!   therefore never meets a page newer than its snapshot.
//! - While any reader holds `tilldb.readers`, no byte a reader reads changes, but for log
//!   records past the published lsn.
//! - The published lsn only moves forward within one writer's run (asserted). A new writer
//!   marks the file "opening" before it takes the database lock, holding that lock shared
//!   meanwhile (`claim.rs`: no writer can be live then), and publishes what its recovery
//!   found before it writes anything else; a reader that finds a live writer opening waits
//!   for that. So whenever the database lock is held, the file holds either the live
//!   writer's own lsn or the mark. (Without the mark a reader could take the predecessor's
//!   lsn for the live writer's after a reader had already read to the end of the log the
//!   predecessor left, and go back: found by `tests/read_only_procs.rs`, a transfer count
//!   that went from 6345 back to 6341; and from 4018 to 4017 under Wine while the mark was
//!   still written just after the lock was taken.)
//!
//! Turn-taking. Both locks are taken without waiting. A writer refused sets the "waits" flag;
//! a reader about to take its lock (opening, refreshing) first waits, up to [`READER_YIELD`],
//! for the flag to clear, so a reader refreshing every few milliseconds still lets the writer
//! in between. What a reader costs the writer while it holds a snapshot: checkpoints are
//! deferred (the log grows), and a cache miss that must evict a dirty page parks it in the
//! spill file instead of writing it to the data file (`page/buffer_pool/held.rs`; the next
//! checkpoint writes it back). Commits never wait for a reader.

use crate::FlushMethod;
use crate::checksum::crc32c;
use crate::error::{Error, Result};
use crate::files::{DURABLE_FILE_NAME, LOCK_FILE_NAME, READERS_LOCK_FILE_NAME};
use crate::io::{HeldLock, LockMode, Storage, StorageFile};
use crate::wal::{Lsn, Wal};
use parking_lot::{Condvar, Mutex};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes of `tilldb.durable`.
const DURABLE_BYTES: usize = 16;
/// The flag bit: the writer waits for the readers' lock.
const FLAG_WAITS: u32 = 1;
/// The flag bit: a writer is opening; the lsn is its predecessor's.
const FLAG_OPENING: u32 = 2;
/// How long a reader about to take its lock lets a waiting writer go first.
pub(crate) const READER_YIELD: Duration = Duration::from_millis(200);
/// Pause between two tries at a lock.
const RETRY: Duration = Duration::from_millis(1);
/// How long the "waits" flag stands without the writer trying again.
const WAITS_STALE: Duration = Duration::from_millis(100);
/// How long a refusal of the readers' lock stands before the OS is asked again. Evictions
/// try the lock for each dirty page while readers hold it (they park the page when refused),
/// and Wine leaks a little with every refused `LockFileEx`: about 20,000 refusals and the
/// process is out of handles ("Too many open files", found by
/// `a_writer_whose_cache_fills_with_dirty_pages_never_waits_for_a_reader` under Wine).
const REFUSED_RETRY: Duration = Duration::from_millis(5);
/// How often the publisher looks for a durable lsn that moved.
const PUBLISH_EVERY: Duration = Duration::from_millis(2);

/// `tilldb.durable`'s bytes for `lsn` and the flags.
fn encode(lsn: Lsn, waits: bool) -> [u8; DURABLE_BYTES] {
    let bytes = encode_flags(lsn, if waits { FLAG_WAITS } else { 0 });
    // The pair of a reader's check: what is written reads back as what was meant.
    debug_assert!(
        decode(&bytes, Path::new(DURABLE_FILE_NAME))
            .is_ok_and(|p| p.durable == lsn && p.writer_waits == waits),
        "the published lsn {lsn} does not read back"
    );
    bytes
}

fn encode_flags(lsn: Lsn, flags: u32) -> [u8; DURABLE_BYTES] {
    let mut bytes = [0; DURABLE_BYTES];
    bytes[..8].copy_from_slice(&lsn.0.to_le_bytes());
    bytes[8..12].copy_from_slice(&flags.to_le_bytes());
    let crc = crc32c(&bytes[..12]);
    bytes[12..].copy_from_slice(&crc.to_le_bytes());
    bytes
}

/// What a writer published: the durable lsn and whether it waits for the readers' lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Published {
    pub durable: Lsn,
    pub writer_waits: bool,
    /// A writer is opening: `durable` is its predecessor's.
    pub writer_opening: bool,
}

/// Decodes `tilldb.durable`'s bytes; the error names `path` and the offset.
fn decode(bytes: &[u8], path: &Path) -> Result<Published> {
    let corrupt = |offset: usize, what: &'static str| Error::Corruption {
        file: path.to_path_buf(),
        offset: offset as u64,
        what,
    };
    if bytes.len() < DURABLE_BYTES {
        return Err(corrupt(
            bytes.len(),
            "the durable-lsn file is shorter than 16 bytes",
        ));
    }
    let crc = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes"));
    if crc != crc32c(&bytes[..12]) {
        return Err(corrupt(
            12,
            "the durable-lsn file's checksum does not match",
        ));
    }
    let flags = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if flags & !(FLAG_WAITS | FLAG_OPENING) != 0 {
        return Err(corrupt(8, "the durable-lsn file has unknown flags"));
    }
    Ok(Published {
        durable: Lsn(u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"))),
        writer_waits: flags & FLAG_WAITS != 0,
        writer_opening: flags & FLAG_OPENING != 0,
    })
}

/// A writer about to take the database lock (holding it shared, so no writer is live): marks
/// the published lsn as its predecessor's until it publishes its own (`ReaderGate::open`).
/// Returns the file's bytes before the mark (`None`: no file, nothing marked), for
/// [`withdraw_opening`].
pub(crate) fn announce_opening(storage: &dyn Storage, dir: &Path) -> Result<Option<Vec<u8>>> {
    let path = dir.join(DURABLE_FILE_NAME);
    if !storage.exists(&path)? {
        // No reader can have read a predecessor's lsn: there is none.
        return Ok(None);
    }
    let file = storage.open(&path, FlushMethod::NoSync)?;
    let mut bytes = [0; DURABLE_BYTES];
    let n = file.read_at(&mut bytes, 0)?;
    // A damaged file is rewritten whole once the writer publishes; until then, lsn 0.
    let lsn = decode(&bytes[..n], &path).map_or(Lsn(0), |p| p.durable);
    file.write_at(&encode_flags(lsn, FLAG_OPENING), 0)?;
    Ok(Some(bytes[..n].to_vec()))
}

/// A writer that announced its opening and then refused to open (a missing or wrong key):
/// puts back what [`announce_opening`] found, under the database lock still held, so that
/// the refusal leaves every file as it was.
pub(crate) fn withdraw_opening(storage: &dyn Storage, dir: &Path, before: &[u8]) -> Result<()> {
    let file = storage.open(&dir.join(DURABLE_FILE_NAME), FlushMethod::NoSync)?;
    file.write_at(before, 0)
}

/// The durable lsn a reader's snapshot of the database in `dir` ends at: `None` when no
/// writer has it open (the snapshot ends where the log's valid records end, as the next
/// writer's recovery will find it), else the lsn the live writer published, once it has
/// published its own (an opening writer is waited for, up to `patience`). A live writer of
/// a version without read-only handles (nothing published) is [`Error::Locked`]: it would not
/// wait for a reader before it writes pages.
pub(crate) fn snapshot_end(
    storage: &dyn Storage,
    dir: &Path,
    patience: Duration,
) -> Result<Option<Lsn>> {
    let started = Instant::now();
    loop {
        if !writer_is_live(storage, dir)? {
            return Ok(None);
        }
        match read_published(storage, dir)? {
            Some(p) if !p.writer_opening => return Ok(Some(p.durable)),
            Some(_) if started.elapsed() < patience => std::thread::sleep(RETRY),
            _ => {
                return Err(Error::Locked {
                    dir: dir.to_path_buf(),
                    pid: None,
                });
            }
        }
    }
}

/// What the writer of the database in `dir` last published; `None` when no writer of this
/// version ever opened it. A torn read (the writer writing the file meanwhile) is read again.
pub(crate) fn read_published(storage: &dyn Storage, dir: &Path) -> Result<Option<Published>> {
    let path = dir.join(DURABLE_FILE_NAME);
    if !storage.exists(&path)? {
        return Ok(None);
    }
    let file = storage.open(&path, FlushMethod::NoSync)?;
    let mut last = None;
    for _ in 0..20 {
        let mut bytes = [0; DURABLE_BYTES];
        let n = file.read_at(&mut bytes, 0)?;
        match decode(&bytes[..n], &path) {
            Ok(p) => return Ok(Some(p)),
            Err(e) => last = Some(e),
        }
        std::thread::sleep(RETRY);
    }
    Err(last.expect("at least one try"))
}

/// True when a writer has the database in `dir` open now (its lock is held). A moment later
/// it may be otherwise; callers use the answer only to choose where a snapshot ends.
pub(crate) fn writer_is_live(storage: &dyn Storage, dir: &Path) -> Result<bool> {
    Ok(storage
        .try_lock(&dir.join(LOCK_FILE_NAME), LockMode::Shared)?
        .is_none())
}

/// Takes the readers' lock shared for a snapshot of the database in `dir`, letting a waiting
/// writer go first (up to [`READER_YIELD`]). A writer holds the lock only while it writes a
/// batch of pages or a checkpoint's header, so this waits milliseconds; after `patience`
/// it is [`Error::Locked`].
pub(crate) fn hold_snapshot(
    storage: &dyn Storage,
    dir: &Path,
    patience: Duration,
) -> Result<Box<dyn HeldLock>> {
    let started = Instant::now();
    let path = dir.join(READERS_LOCK_FILE_NAME);
    loop {
        let writer_waits = started.elapsed() < READER_YIELD
            && read_published(storage, dir)
                .ok()
                .flatten()
                .is_some_and(|p| p.writer_waits);
        if !writer_waits && let Some(held) = storage.try_lock(&path, LockMode::Shared)? {
            return Ok(held);
        }
        if started.elapsed() >= patience {
            return Err(Error::Locked {
                dir: dir.to_path_buf(),
                pid: None,
            });
        }
        std::thread::sleep(RETRY);
    }
}

/// The writer's side: publishes the durable lsn, and holds the readers' lock exclusively
/// while the files readers read change (re-entrant within the process: the background
/// writer, a checkpoint and a miss may all be inside at once).
pub(crate) struct ReaderGate {
    storage: Arc<dyn Storage>,
    lock_path: PathBuf,
    wal: Arc<Wal>,
    published: Mutex<PublishedFile>,
    state: Mutex<GateState>,
    stop: Arc<(Mutex<bool>, Condvar)>,
    publisher: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Rounds the publisher thread finished: for tests, which must know it looked at the
    /// log after some moment, not only that time passed.
    rounds: std::sync::atomic::AtomicU64,
}

struct PublishedFile {
    file: Box<dyn StorageFile>,
    now: Published,
    /// When the "waits" flag was last set.
    waits_since: Option<Instant>,
}

#[derive(Default)]
struct GateState {
    /// Guards alive in this process.
    depth: usize,
    held: Option<Box<dyn HeldLock>>,
    /// When the readers last refused the lock: tries within [`REFUSED_RETRY`] of it are
    /// refused without asking the OS again.
    refused_at: Option<Instant>,
}

impl std::fmt::Debug for ReaderGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReaderGate({})", self.lock_path.display())
    }
}

/// Proof that the readers' lock is held exclusively: the files may change.
#[must_use]
pub(crate) struct GateGuard<'a> {
    gate: &'a ReaderGate,
}

impl ReaderGate {
    /// The gate of the writer of the database in `dir`, whose log is `wal`: publishes the
    /// log's durable lsn at once (a new writer's first write, before any page or header).
    pub(crate) fn open(storage: &Arc<dyn Storage>, dir: &Path, wal: &Arc<Wal>) -> Result<Self> {
        let path = dir.join(DURABLE_FILE_NAME);
        let file = if storage.exists(&path)? {
            storage.open(&path, FlushMethod::NoSync)?
        } else {
            let file = storage.create(&path, FlushMethod::NoSync)?;
            storage.flush_dir(dir)?;
            file
        };
        let now = Published {
            durable: wal.durable_lsn(),
            writer_waits: false,
            writer_opening: false,
        };
        file.write_at(&encode(now.durable, false), 0)?;
        Ok(ReaderGate {
            storage: Arc::clone(storage),
            lock_path: dir.join(READERS_LOCK_FILE_NAME),
            wal: Arc::clone(wal),
            published: Mutex::new(PublishedFile {
                file,
                now,
                waits_since: None,
            }),
            state: Mutex::new(GateState::default()),
            stop: Arc::new((Mutex::new(false), Condvar::new())),
            publisher: Mutex::new(None),
            rounds: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Publishes the log's durable lsn, if it moved, and the flag.
    fn publish_with(&self, waits: bool) -> Result<()> {
        // The durable lsn read under the lock: publishers (the thread, and each `Sync`
        // commit) then publish in the order they read it, and it never goes back.
        let mut published = self.published.lock();
        let durable = self.wal.durable_lsn();
        assert!(
            durable >= published.now.durable,
            "the durable lsn went back from {} to {}",
            published.now.durable.0,
            durable.0
        );
        let next = Published {
            durable,
            writer_waits: waits,
            writer_opening: false,
        };
        if next != published.now {
            published.file.write_at(&encode(durable, waits), 0)?;
            if waits && !published.now.writer_waits {
                published.waits_since = Some(Instant::now());
            }
            published.now = next;
        }
        Ok(())
    }

    /// Publishes the log's durable lsn if it moved (readers see commits up to it). A
    /// "waits" flag older than [`WAITS_STALE`] is cleared: a deferred checkpoint that is not
    /// tried again (no more commits) must not keep readers yielding; a writer still waiting
    /// sets it again at its next try.
    pub(crate) fn publish(&self) -> Result<()> {
        let waits = {
            let published = self.published.lock();
            published.now.writer_waits
                && published
                    .waits_since
                    .is_none_or(|since| since.elapsed() < WAITS_STALE)
        };
        self.publish_with(waits)
    }

    /// Starts the thread that publishes the durable lsn every few milliseconds, here and
    /// for the change feed's consumers (`feed`, when the feed is on).
    pub(crate) fn start_publisher(
        self: &Arc<Self>,
        feed: Option<Arc<crate::feed::writer::FeedWriter>>,
    ) -> std::io::Result<()> {
        let gate = Arc::clone(self);
        let stop = Arc::clone(&self.stop);
        let thread = std::thread::Builder::new()
            .name("tilldb-publish".into())
            .spawn(move || {
                let (stopped, wake) = &*stop;
                let mut guard = stopped.lock();
                while !*guard {
                    // A failed publish is retried next round; readers only see less.
                    let _ = gate.publish();
                    if let Some(feed) = &feed {
                        let durable = if crate::mutants::active("feed-publishes-written") {
                            gate.wal.written_lsn()
                        } else {
                            gate.wal.durable_lsn()
                        };
                        let _ = feed.publish(durable);
                    }
                    gate.rounds
                        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    wake.wait_for(&mut guard, PUBLISH_EVERY);
                }
            })?;
        *self.publisher.lock() = Some(thread);
        Ok(())
    }

    /// Rounds the publisher thread has finished.
    pub(crate) fn publisher_rounds(&self) -> u64 {
        self.rounds.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Stops the publisher thread, if one runs.
    pub(crate) fn stop_publisher(&self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        if let Some(thread) = self.publisher.lock().take() {
            let _ = thread.join();
        }
    }

    /// Enters without waiting: `None` when readers hold their snapshots (the flag then
    /// asks them to let the writer in at their next refresh).
    pub(crate) fn try_enter(&self) -> Result<Option<GateGuard<'_>>> {
        let mut state = self.state.lock();
        if state.depth == 0 {
            if state
                .refused_at
                .is_some_and(|at| at.elapsed() < REFUSED_RETRY)
            {
                return Ok(None);
            }
            let Some(held) = self
                .storage
                .try_lock(&self.lock_path, LockMode::Exclusive)?
            else {
                state.refused_at = Some(Instant::now());
                drop(state);
                self.publish_with(true)?;
                return Ok(None);
            };
            state.held = Some(held);
            state.refused_at = None;
        }
        state.depth += 1;
        drop(state);
        if self.published.lock().now.writer_waits {
            self.publish_with(false)?;
        }
        let guard = GateGuard { gate: self };
        guard.publish()?;
        Ok(Some(guard))
    }

    /// Enters, waiting for readers to refresh or go when they hold their snapshots.
    pub(crate) fn enter(&self) -> Result<GateGuard<'_>> {
        let started = Instant::now();
        let mut warned = false;
        loop {
            if let Some(guard) = self.try_enter()? {
                return Ok(guard);
            }
            if !warned && started.elapsed() >= Duration::from_secs(1) {
                warned = true;
                tracing::warn!(
                    target: "tilldb",
                    "a write-back waits for read-only handles of this database to refresh \
                     or close (they hold their snapshots)"
                );
            }
            std::thread::sleep(RETRY);
        }
    }
}

impl GateGuard<'_> {
    /// Publishes the log's durable lsn before a write that may depend on it (pages at or
    /// below it, a header whose redo point is at or below it).
    pub(crate) fn publish(&self) -> Result<()> {
        self.gate.publish()
    }
}

impl Drop for GateGuard<'_> {
    fn drop(&mut self) {
        let mut state = self.gate.state.lock();
        assert!(state.depth > 0, "a gate guard dropped twice");
        state.depth -= 1;
        if state.depth == 0 {
            // What was written may depend on lsns published only now: publish first. (Every
            // entry publishes after it takes the lock, and every page write forces the log
            // before it enters, so this finds nothing new today: a second line, see
            // docs/testing.md. Lock order: `state`, then `published`; `try_enter` never holds
            // both.)
            let _ = self.gate.publish();
            state.held = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_durable_file_round_trips_and_damage_names_the_offset() {
        let path = Path::new("/db/tilldb.durable");
        for (lsn, waits) in [(0, false), (4096, true), (u64::MAX, false)] {
            let bytes = encode(Lsn(lsn), waits);
            assert_eq!(
                decode(&bytes, path).expect("valid"),
                Published {
                    durable: Lsn(lsn),
                    writer_waits: waits,
                    writer_opening: false,
                }
            );
        }
        let opening = decode(&encode_flags(Lsn(9), FLAG_OPENING), path).expect("valid");
        assert!(opening.writer_opening && !opening.writer_waits);
        let mut bytes = encode(Lsn(7), false);
        bytes[0] ^= 1;
        let text = decode(&bytes, path).expect_err("crc").to_string();
        assert!(
            text.contains("tilldb.durable") && text.contains("12"),
            "{text}"
        );
        let text = decode(&bytes[..5], path).expect_err("short").to_string();
        assert!(text.contains("shorter"), "{text}");
        let mut flags = encode(Lsn(7), false);
        flags[8] = 4;
        let crc = crc32c(&flags[..12]);
        flags[12..].copy_from_slice(&crc.to_le_bytes());
        assert!(decode(&flags, path).is_err(), "unknown flags are refused");
    }
}
