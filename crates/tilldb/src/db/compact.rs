//! Compaction: [`Db::compact_to`] writes a compacted copy of a database, every table's
//! entries inserted afresh in key order into a new database, so its pages are full and its
//! files hold no free pages. `till compact DIR` puts the copy in the database's place.
//!
//! ```text
//!  1. refuse a target that exists, a partial copy left by an earlier attempt, and a
//!     database whose change feed is (or was) on: the copy's log starts again at lsn 0, and
//!     feed consumers and `till ship` watermarks count in lsns of the old log
//!  2. create `<target>.tilldb-partial` as a new database with this one's page size, flush
//!     method and torn-page guard
//!  3. read one snapshot; per table (the default table first, then by name), its entries in
//!     key order, committed in transactions of at most COPY_BATCH_ENTRIES entries or
//!     COPY_BATCH_BYTES (and a quarter of the cache and of a log record) (`Lazy`: the close
//!     makes them durable)
//!  4. close the copy (a checkpoint: everything durable), then rename it to `target` and
//!     flush the parent directory
//! ```
//!
//! A copy cut short (a kill, a full disk) is only ever the `.tilldb-partial` directory, never
//! `target`; the next attempt refuses it by name until it is removed. A named table with no
//! entries is not copied (a table exists through its entries).
//!
//! [`Db::compact_to_with_progress`] reports the entries copied so far (`progress.rs`), of
//! the tables' counts at the snapshot (`counts.rs`: exact, read without a scan).

use super::Db;
use super::drop::names_upper;
use crate::error::{Error, Result};
use crate::progress::{Meter, Progress};
use crate::{Direction, Durability, Options};
use std::ops::Bound;
use std::path::{Path, PathBuf};

/// Entries one copy transaction holds at most.
const COPY_BATCH_ENTRIES: usize = 4096;
/// Key and value bytes one copy transaction holds at most (the log record holds them all),
/// and at most a quarter of the cache (which holds a transaction's pages until its record
/// is appended) and of the largest log record (split pages are logged whole besides).
const COPY_BATCH_BYTES: usize = 4 << 20;
/// Bytes counted per entry besides its key and value (cell and slot overhead).
const ENTRY_OVERHEAD_BYTES: usize = 32;
/// Entries copied between two progress reports: a copy transaction's worth at most.
const ENTRIES_PER_REPORT: u64 = 1024;

/// What a compaction copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct CompactReport {
    /// Tables copied, the default table included.
    pub tables: usize,
    /// Entries copied, over every table.
    pub entries: u64,
    /// Pages the source's allocator had handed out (page 0 included).
    pub source_pages: u64,
    /// Pages the copy's allocator handed out (page 0 included).
    pub target_pages: u64,
}

impl Db {
    /// Where [`Db::compact_to`] builds the copy of `target` before renaming it:
    /// `<target>.tilldb-partial`. Such a directory left by a compaction cut short holds an
    /// incomplete copy; remove it before compacting again.
    #[must_use]
    #[cfg(any(test, feature = "internals"))]
    pub fn compact_partial_path(target: &Path) -> PathBuf {
        partial_path(target)
    }

    /// Writes a compacted copy of this database to `target`, a directory that must not exist:
    /// every table's entries, as one snapshot sees them, inserted afresh in key order, so the
    /// copy's pages are full and its data file holds no free pages. Commits may go on
    /// meanwhile; the copy holds the snapshot taken when this began. The copy is built
    /// under `<target>.tilldb-partial` and renamed to `target` only once it is complete and
    /// durable, so `target` is never a copy cut short. Named tables without entries are not
    /// copied. Refused, changing nothing, when `target` or the partial directory exists,
    /// and when the change feed is or was on (the copy's log starts again at lsn 0, which
    /// consumers and `till ship` would take for commits already shipped).
    pub fn compact_to(&self, target: impl AsRef<Path>) -> Result<CompactReport> {
        self.compact_to_with_progress(target, &mut |_| {})
    }

    /// [`Db::compact_to`], reporting to `progress` the entries copied so far (the rules of
    /// [`Progress`]) of every table's count at the snapshot the copy reads. The last report's
    /// `done` is the report's `entries`.
    pub fn compact_to_with_progress(
        &self,
        target: impl AsRef<Path>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<CompactReport> {
        // The key that wraps the data key now: a rotation may have replaced the one opened
        // with. An encrypted copy gets a data key of its own all the same.
        let encryption = self.inner.checkpoints.encryption();
        self.compact_into(target.as_ref(), encryption, progress)
    }

    /// [`Db::compact_to_with_progress`] into an encrypted copy under `encryption`: a new
    /// data key, wrapped by `encryption`'s key, sealing with its cipher. This is how a
    /// plain database becomes an encrypted one (`till encrypt`), and how an encrypted one
    /// gets a new data key under a new application key or cipher (`till compact --rekey`).
    /// The copy opens with `encryption` only; this database is unchanged.
    ///
    /// # Errors
    ///
    /// As [`Db::compact_to`]; and `InvalidArgument` naming the table when a key this
    /// database holds is longer than an encrypted page allows (its pages keep 40 bytes for
    /// the seal): nothing is at `target` then, and the partial copy is left to remove.
    pub fn compact_encrypted_to(
        &self,
        target: impl AsRef<Path>,
        encryption: crate::crypt::Encryption,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<CompactReport> {
        self.compact_into(target.as_ref(), Some(encryption), progress)
    }

    /// The compaction of [`Db::compact_to_with_progress`], the copy under `encryption`.
    fn compact_into(
        &self,
        target: &Path,
        encryption: Option<crate::crypt::Encryption>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<CompactReport> {
        self.check_poison()?;
        let storage = &self.inner.storage;
        if self.inner.feed.is_some() {
            return Err(Error::InvalidArgument(format!(
                "{} has (or had) the change feed on; a compacted copy starts its log again at \
                 lsn 0, which feed consumers and till ship would take for commits already \
                 shipped",
                self.inner.dir.display()
            )));
        }
        let partial = partial_path(target);
        for path in [target, partial.as_path()] {
            if storage.exists(path)? {
                return Err(Error::InvalidArgument(format!(
                    "{} exists; compaction writes a new directory (remove it, if it is the \
                     remains of a compaction cut short)",
                    path.display()
                )));
            }
        }
        let header = self.inner.checkpoints.newest_header();
        let options = Options {
            page_bytes: Some(header.page_bytes),
            flush_method: Some(header.flush_method),
            torn_page_guard: header.torn_page_guard,
            change_feed: false,
            ..self.inner.options.clone()
        }
        .with_encryption(encryption);
        let source_pages = self.inner.writer.lock().page_count;
        let copy = Db::open_with_storage(storage.clone(), &partial, options)?;
        let mut report = CompactReport {
            source_pages,
            ..CompactReport::default()
        };
        {
            let read = self.begin_read()?;
            let names = self.scan_at(
                super::CATALOG_ROOT,
                super::counts::names_lower(),
                names_upper(),
                Direction::Forward,
                read.snapshot(),
            )?;
            let tables: Vec<String> = std::iter::once(String::new())
                .chain(
                    names
                        .into_iter()
                        .map(|(name, _)| String::from_utf8_lossy(&name).into_owned()),
                )
                .collect();
            // The total only sizes the progress: a count that does not read (a damaged
            // catalog entry) counts 0 rather than fail a copy that reads the trees, not the
            // counts, so the copy succeeds or fails as it did before it reported progress.
            let entries = tables
                .iter()
                .map(|table| read.len_in(table).unwrap_or(0))
                .sum();
            let mut meter = Meter::new(progress, entries, ENTRIES_PER_REPORT);
            for table in &tables {
                report.entries += copy_table(&read, &copy, table, &mut meter)?;
                report.tables += 1;
            }
            meter.finish();
        }
        report.target_pages = copy.inner.writer.lock().page_count;
        copy.close()?;
        storage.rename(&partial, target)?;
        storage.flush_dir(&crate::io::parent_dir(target))?;
        tracing::info!(
            target: "tilldb",
            source_pages = report.source_pages,
            target_pages = report.target_pages,
            entries = report.entries,
            "compacted copy written"
        );
        Ok(report)
    }
}

/// Copies `table` as `read` sees it into `copy`, counting each entry into `meter`; returns
/// the entries copied.
fn copy_table(
    read: &super::ReadTxn<'_>,
    copy: &Db,
    table: &str,
    meter: &mut Meter<'_>,
) -> Result<u64> {
    let mut copied = 0u64;
    let cache_bytes = copy.inner.pool.capacity() * copy.inner.pool.page_bytes() as usize;
    let batch_bytes = COPY_BATCH_BYTES
        .min(cache_bytes / 4)
        .min(copy.inner.wal.max_payload_bytes() / 4);
    let mut txn = copy.begin()?;
    let (mut entries, mut bytes) = (0usize, 0usize);
    for entry in read.range_in(
        table,
        Bound::Unbounded,
        Bound::Unbounded,
        Direction::Forward,
    )? {
        let (key, value) = entry?;
        match txn.put_in(table, &key, &value) {
            Err(Error::TooLarge {
                what: "key",
                bytes,
                max,
            }) => {
                return Err(Error::InvalidArgument(format!(
                    "table {table:?} holds a key of {bytes} bytes, and the copy's pages hold \
                     keys of at most {max} (an encrypted page keeps 40 bytes for its seal); \
                     this database cannot be copied encrypted at its page size"
                )));
            }
            result => result?,
        }
        entries += 1;
        bytes += key.len() + value.len() + ENTRY_OVERHEAD_BYTES;
        copied += 1;
        meter.advance(1);
        if entries >= COPY_BATCH_ENTRIES || bytes >= batch_bytes {
            txn.commit_with(Durability::Lazy)?;
            txn = copy.begin()?;
            (entries, bytes) = (0, 0);
        }
    }
    txn.commit_with(Durability::Lazy)?;
    Ok(copied)
}

/// `<target>.tilldb-partial`: where a compaction builds its copy (`Db::compact_partial_path`).
fn partial_path(target: &Path) -> PathBuf {
    let mut name = target
        .file_name()
        .map(std::ffi::OsStr::to_os_string)
        .unwrap_or_default();
    name.push(".tilldb-partial");
    target.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::assert_rules;

    /// On the real file system: the simulated disk renames files, not the directory the copy
    /// is built in.
    #[test]
    fn a_compaction_reports_entries_copied_of_the_tables_counts() {
        let options = Options {
            background_threads: false,
            ..Options::for_tests()
        };
        let tmp = tempfile::tempdir().expect("tempdir");
        let db = Db::open(tmp.path().join("db"), options).expect("create");
        for (table, rows) in [("", 2500u32), ("b", 1700), ("c", 10)] {
            let mut txn = db.begin().expect("begin");
            for i in 0..rows {
                txn.put_in(table, format!("key-{i:06}").as_bytes(), &[5; 50])
                    .expect("put");
            }
            txn.commit().expect("commit");
        }
        let mut reports = Vec::new();
        let report = db
            .compact_to_with_progress(tmp.path().join("copy"), &mut |p| reports.push(p))
            .expect("compact");
        assert_rules(&reports);
        assert_eq!(report.entries, 4210);
        // The counts are exact: the first total is the entries the copy then copies.
        assert_eq!(reports[0].total, report.entries, "{reports:?}");
        assert_eq!(reports.last().map(|p| p.done), Some(report.entries));
        // Reported along the way: every ENTRIES_PER_REPORT entries, then at the end.
        let along: Vec<u64> = reports.iter().map(|p| p.done).collect();
        assert_eq!(along, vec![0, 1024, 2048, 3072, 4096, 4210], "{reports:?}");
        db.close().expect("close");
    }
}
