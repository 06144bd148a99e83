//! Online backup: a consistent copy of a live database while commits go on.
//!
//! ```text
//!  1. hold the checkpoint lock for the whole copy: the header (redo point R) stays, and no
//!     log segment from R on is released or reused
//!  2. with page writes stopped (the data files' lock: write-back, eviction writes, ledger
//!     saves and cache-miss reads wait; commits that need neither go on), copy the data file,
//!     the page ledger and the doublewrite file: pages as they stand at one moment T, each
//!     no newer than the durable log at T (the write-ahead rule)
//!  3. make the log durable to E (>= the durable log at T) and copy every log segment that
//!     holds lsns in R..E: its bytes up to E (closed blocks, never rewritten), zeros after
//!  4. write the header (redo point R) last, through a temporary name
//! ```
//!
//! Opening the copy recovers it: redo from R to E over pages no newer than E, so it holds
//! exactly the commits durable at E, whole. The target gets `.tilldb-backup-incomplete`
//! first and loses it after the header: a copy cut short (the process killed, a disk full)
//! has the marker and no header, and `Db::open` refuses it (`claim.rs`), never taking it for
//! a database or creating one there.
//!
//! [`Db::backup_to_with_progress`] reports the bytes copied so far (`progress.rs`): the total
//! is the data files' bytes when step 2 begins, raised by the log's in step 3 once the
//! segments to copy are known.

use super::{Db, claim};
use crate::FlushMethod;
use crate::error::{Error, Result};
use crate::header::{HEADER_FILE_NAME, HeaderFile};
use crate::io::{AlignedBuf, Storage, StorageFile};
use crate::page::{DATA_FILE_NAME, DOUBLEWRITE_FILE_NAME, LEDGER_FILE_NAME};
use crate::progress::{Meter, Progress};
use crate::wal::{Lsn, SegmentHeader, slot};
use std::path::Path;

/// What a backup copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct BackupReport {
    /// The copy holds every commit durable up to this lsn, and none after.
    pub lsn: Lsn,
    /// Bytes copied (data files and log segments, the zeros of a segment's tail not counted).
    pub bytes: u64,
    /// Log segments copied.
    pub segments: usize,
}

/// Bytes copied at a time.
const CHUNK_BYTES: usize = 1 << 20;

impl Db {
    /// Copies this database, consistently, into `target` (a directory that does not exist
    /// or is empty) while commits go on; the copy holds every commit durable when the copy
    /// of the log began. Restoring is opening the copy. While the data files are copied,
    /// page writes and reads that miss the cache wait. A copy cut short has no header: `Db::open`
    /// refuses it, naming the missing header, and removing the directory starts afresh.
    pub fn backup_to(&self, target: impl AsRef<Path>) -> Result<BackupReport> {
        self.backup_to_with_progress(target, &mut |_| {})
    }

    /// [`Db::backup_to`], reporting to `progress` the bytes copied so far (the rules of
    /// [`Progress`]; the total grows once, when the log segments to copy are known). The
    /// last report's `done` is the report's `bytes`.
    pub fn backup_to_with_progress(
        &self,
        target: impl AsRef<Path>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<BackupReport> {
        self.check_poison()?;
        let target = target.as_ref();
        let inner = &self.inner;
        // The database's files are read through its own storage (a read-only handle's
        // overlay: the files as its snapshot sees them); the copy is written where the
        // handle may write.
        let source = inner.storage.clone();
        let storage = self.writable_storage();
        refuse_non_empty(&*storage, target)?;
        storage.create_dir_all(target)?;
        storage.flush_dir(&crate::io::parent_dir(target))?;
        // First, durably: this directory is a copy in progress (never opened as a database).
        let marker = target.join(claim::BACKUP_INCOMPLETE_FILE_NAME);
        drop(storage.create(&marker, FlushMethod::Fdatasync)?);
        storage.flush_dir(target)?;
        storage.create_dir_all(&target.join(claim::WAL_DIR_NAME))?;
        storage.flush_dir(target)?;
        // 1. No checkpoint while copying: the header and the log from its redo point stay.
        let _checkpoint = inner.checkpoints.hold();
        let header = inner.checkpoints.newest_header();
        let mut report = BackupReport::default();
        let mut meter = Meter::new(progress, 0, 0);
        // 2. The data files, at one moment: their lengths stay while page writes wait.
        inner.pool.with_writes_stopped(&mut || {
            let mut files = Vec::new();
            for name in [DATA_FILE_NAME, LEDGER_FILE_NAME, DOUBLEWRITE_FILE_NAME] {
                let from = inner.dir.join(name);
                if source.exists(&from)? {
                    let file = source.open(&from, FlushMethod::Fdatasync)?;
                    let bytes = file.len()?;
                    files.push((name, from, file, bytes));
                }
            }
            meter.add_total(files.iter().map(|(.., bytes)| bytes).sum());
            for (name, from, file, bytes) in files {
                report.bytes += copy_file(
                    (&*file, &from),
                    (&*storage, &target.join(name)),
                    (bytes, None),
                    &mut meter,
                )?;
            }
            Ok(())
        })?;
        // 3. The log from the redo point to what is durable now: first which segments and
        // how much of each (so the total is known before the copy), then the copy.
        let end = self.durable_end()?;
        let wal_dir = inner.dir.join(claim::WAL_DIR_NAME);
        let mut segments = Vec::new();
        for name in source.list_dir(&wal_dir)? {
            let from = wal_dir.join(&name);
            let Some(segment) = read_segment_header(&*source, &from)? else {
                continue;
            };
            let seg_end = segment.base_lsn + segment.capacity();
            // A segment beginning exactly at the end is copied too (its header only): the
            // one before may close with `SegmentEnd`, which recovery follows into it.
            if seg_end <= header.checkpoint_lsn.0 || segment.base_lsn > end.0 {
                continue;
            }
            let keep = u64::from(segment.log_block_bytes) + (end.0.min(seg_end) - segment.base_lsn);
            segments.push((name, from, segment, keep));
        }
        meter.add_total(segments.iter().map(|(.., keep)| keep).sum());
        for (name, from, segment, keep) in segments {
            let file = source.open(&from, FlushMethod::Fdatasync)?;
            report.bytes += copy_file(
                (&*file, &from),
                (&*storage, &target.join(claim::WAL_DIR_NAME).join(&name)),
                (keep, Some((segment.segment_bytes, segment))),
                &mut meter,
            )?;
            report.segments += 1;
        }
        storage.flush_dir(&target.join(claim::WAL_DIR_NAME))?;
        // 4. The header last: until it is there, the copy is no database.
        // The copy keeps the data key's wrap, so it opens with the same key; its MAC is made
        // with the same keys.
        let keys = inner.checkpoints.keys();
        HeaderFile::create(&*storage, target, header.flush_method, &header, keys)?;
        storage.remove(&marker)?;
        storage.flush_dir(target)?;
        report.lsn = end;
        // Every byte counted into the total was copied: `copy_file` copies exactly `keep`.
        meter.finish();
        tracing::info!(
            target: "tilldb",
            to = %target.display(),
            lsn = end.0,
            bytes = report.bytes,
            "backup"
        );
        Ok(report)
    }
}

/// Refuses a target that exists with anything in it.
fn refuse_non_empty(storage: &dyn Storage, target: &Path) -> Result<()> {
    if storage.exists(target)? {
        let names = storage.list_dir(target)?;
        if !names.is_empty() {
            return Err(Error::InvalidOptions(format!(
                "backup target {} is not empty ({} entries, {}{}); give a new directory",
                target.display(),
                names.len(),
                names.first().map_or("", String::as_str),
                if names.iter().any(|n| n == HEADER_FILE_NAME) {
                    ": it holds a database"
                } else {
                    ""
                }
            )));
        }
    }
    Ok(())
}

/// The header of a log segment file, if it has a valid one naming its own generation.
fn read_segment_header(storage: &dyn Storage, path: &Path) -> Result<Option<SegmentHeader>> {
    let Some(generation) = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(crate::wal::parse_segment_name)
    else {
        return Ok(None);
    };
    let file = storage.open(path, FlushMethod::Fdatasync)?;
    let mut bytes = vec![0; 4096];
    let n = file.read_at(&mut bytes, 0)?;
    bytes.truncate(n);
    Ok(match SegmentHeader::decode(&bytes, path) {
        Ok(crate::wal::HeaderState::Valid(h)) if h.generation == generation => Some(h),
        _ => None,
    })
}

/// Copies the first `keep` bytes of `from` (the file at `source`) to a new file `target` and
/// makes it durable; a log segment (`tail`: its length and header) gets zeros after them up
/// to its length. Returns the bytes copied, `keep`, each chunk counted into `meter` as it
/// is written.
fn copy_file(
    (from, source): (&dyn StorageFile, &Path),
    (to_storage, target): (&dyn Storage, &Path),
    (keep, tail): (u64, Option<(u64, SegmentHeader)>),
    meter: &mut Meter<'_>,
) -> Result<u64> {
    let to = to_storage.create(target, FlushMethod::Fdatasync)?;
    let (len, segment) = match tail {
        Some((len, segment)) => (len, Some(segment)),
        None => (0, None),
    };
    let mut buf = AlignedBuf::zeroed(CHUNK_BYTES);
    let mut done = 0u64;
    while done < keep {
        let want = usize::try_from((keep - done).min(CHUNK_BYTES as u64)).expect("a chunk");
        // A log segment's tail slots first, then its home bytes (`slot::read_from`).
        let copies = match &segment {
            Some(header) => slot::read_from(from, header)?,
            None => slot::Copies::default(),
        };
        let n = from.read_at(&mut buf[..want], done)?;
        if n == 0 {
            return Err(Error::Corruption {
                file: source.to_path_buf(),
                offset: done,
                what: "the file ended while it was copied for a backup",
            });
        }
        // A tail block's bytes are in a slot until its home is written full (and a block torn
        // while it was rewritten is whole there): copy them home (only bytes before `keep`;
        // the slots themselves are not copied).
        if let Some(header) = &segment {
            copies.lay(&mut buf[..n], done, header);
        }
        to.write_at(&buf[..n], done)?;
        done += n as u64;
        meter.advance(n as u64);
    }
    assert_eq!(done, keep, "a copy of {} stopped short", source.display());
    if len > keep {
        to.allocate_zeroed(keep, len - keep)?;
    }
    to.flush()?;
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Options;
    use crate::io::{SimConfig, SimDisk};
    use crate::progress::assert_rules;
    use std::sync::Arc;

    #[test]
    fn a_backup_reports_every_byte_it_copies_and_raises_the_total_once_for_the_log() {
        let options = Options {
            background_threads: false,
            ..Options::for_tests()
        };
        let disk = Arc::new(SimDisk::new(SimConfig::default()));
        let db = Db::open_with_storage(disk, Path::new("/db"), options.clone()).expect("create");
        // Pages checkpointed into the data file (over a chunk of it), then commits only in
        // the log, so both parts of the copy have bytes.
        for round in 0..2u32 {
            for i in 0..20u32 {
                let mut txn = db.begin().expect("begin");
                for j in 0..100u32 {
                    txn.put(format!("k{round}-{i:03}-{j:03}").as_bytes(), &[3; 400])
                        .expect("put");
                }
                txn.commit().expect("commit");
            }
            if round == 0 {
                db.checkpoint().expect("checkpoint");
            }
        }
        let mut reports = Vec::new();
        let report = db
            .backup_to_with_progress("/copy", &mut |p| reports.push(p))
            .expect("backup");
        assert_rules(&reports);
        assert_eq!(reports.last().map(|p| p.done), Some(report.bytes));
        assert!(report.bytes > 2 * CHUNK_BYTES as u64, "{report:?}");
        assert!(report.segments >= 1, "{report:?}");
        // The first total is the data files' bytes; raised once, by the log's.
        let mut totals: Vec<u64> = reports.iter().map(|p| p.total).collect();
        totals.dedup();
        assert_eq!(
            totals.len(),
            3,
            "0, the data files, then the log too: {reports:?}"
        );
        // A report per chunk copied (each file and segment ends in a short one).
        let chunks = report.bytes / CHUNK_BYTES as u64;
        assert!(reports.len() as u64 > chunks, "{reports:?}");
        let copy = Db::open_with_storage(db.inner.storage.clone(), Path::new("/copy"), options)
            .expect("the copy opens");
        assert_eq!(copy.len().expect("len"), 4000);
        copy.close().expect("close");
        db.close().expect("close");
    }
}
