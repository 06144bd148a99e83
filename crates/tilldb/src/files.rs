//! Every name tilldb gives a file or directory in a database directory, in one place (as
//! `LevelDB`'s `filename.h`): the modules that read and write each file re-export its name from
//! here, and [`is_database_file_name`] is the list a directory is judged by.
//!
//! ```text
//! <database>/
//!   tilldb.meta          HEADER_FILE_NAME        the header's two slots (header.rs)
//!   tilldb.meta.tmp      HEADER_TEMP_FILE_NAME   the first header, before its rename
//!   tilldb.lock          LOCK_FILE_NAME          held while a Db has it open (db/claim.rs)
//!   tilldb.readers       READERS_LOCK_FILE_NAME  held shared by read-only handles (db/readers.rs)
//!   tilldb.durable       DURABLE_FILE_NAME       the lsn the writer published as durable (db/readers.rs)
//!   data.tdb             DATA_FILE_NAME          the pages (page/store.rs)
//!   ledger.tdb           LEDGER_FILE_NAME        the newest lsn written per page (page/ledger.rs)
//!   doublewrite.tdb      DOUBLEWRITE_FILE_NAME   the doublewrite batch (page/doublewrite.rs)
//!   txn-spill.tdb        SPILL_FILE_NAME         pages of a commit logged in parts (page/spill.rs)
//!   txn-writes-<n>.tdb   WRITE_SET_RUN_PREFIX    a large transaction's spilled writes (db/write_set/spill.rs)
//!   wal/                 WAL_DIR_NAME            the log (wal/)
//!     {generation:020}.wal   segment_name        one segment (wal/segment.rs)
//!   feed/                FEED_DIR_NAME           the change feed (feed/)
//!     durable, start, released, <name>.consumer, <name>.dropped
//!   .tilldb-creating     CREATING_FILE_NAME      a create in progress (db/open/create.rs)
//!   .tilldb-backup-incomplete  BACKUP_INCOMPLETE_FILE_NAME  a backup's target, until done
//!   .tilldb-atomic-check ATOMIC_CHECK_FILE       the atomic-write check (page/guard.rs)
//!   .tilldb-facts-*      (io/os/linux/facts.rs)  the device-facts probe's scratch
//!   .till-measure-*      MEASURE_FILE_PREFIX     a measurement's scratch (io/measure.rs)
//! ```

/// The header file (`header.rs`).
pub const HEADER_FILE_NAME: &str = "tilldb.meta";
/// Where `HeaderFile::create` writes the first header before renaming it into place.
pub const HEADER_TEMP_FILE_NAME: &str = "tilldb.meta.tmp";
/// The database lock file: empty, used only for its lock (`io/lock.rs`). Never removed.
pub const LOCK_FILE_NAME: &str = "tilldb.lock";
/// The readers' snapshot lock file: empty, used only for its lock. Read-only handles hold it
/// shared while they read; the writer takes it exclusively to change the data files, the
/// header or the log's start (`db/readers.rs`). Never removed.
pub const READERS_LOCK_FILE_NAME: &str = "tilldb.readers";
/// The durable lsn the writing process published for read-only handles, and whether it
/// waits for them (`db/readers.rs`).
pub const DURABLE_FILE_NAME: &str = "tilldb.durable";
/// The data file (`page/store.rs`).
pub const DATA_FILE_NAME: &str = "data.tdb";
/// The page ledger (`page/ledger.rs`).
pub const LEDGER_FILE_NAME: &str = "ledger.tdb";
/// The doublewrite file (`page/doublewrite.rs`).
pub const DOUBLEWRITE_FILE_NAME: &str = "doublewrite.tdb";
/// The spill file of a commit logged in parts (`page/spill.rs`).
pub const SPILL_FILE_NAME: &str = "txn-spill.tdb";
/// The start of the name of a run a large transaction's write set spilled
/// (`db/write_set/spill.rs`): `txn-writes-<n>.tdb`.
pub const WRITE_SET_RUN_PREFIX: &str = "txn-writes-";
/// The log's directory.
pub const WAL_DIR_NAME: &str = "wal";
/// The change feed's directory (`feed.rs`).
pub const FEED_DIR_NAME: &str = "feed";
/// In the feed's directory: the lsn the log is durable to, as the writing process published it.
pub const FEED_DURABLE_FILE: &str = "durable";
/// In the feed's directory: the first lsn whose commits carry their writes.
pub const FEED_START_FILE: &str = "start";
/// In the feed's directory: present once the start moved up while no consumer was registered.
pub const FEED_RELEASED_FILE: &str = "released";
/// In the feed's directory: `<name>.consumer`, a named consumer's acknowledged position.
pub const FEED_CONSUMER_SUFFIX: &str = ".consumer";
/// In the feed's directory: `<name>.dropped`, why a consumer was dropped.
pub const FEED_DROPPED_SUFFIX: &str = ".dropped";
/// The marker a create makes first and removes last (after the header is durable).
pub const CREATING_FILE_NAME: &str = ".tilldb-creating";
/// The marker a backup makes first in its target and removes once the copy's header is
/// durable (`db/backup.rs`): a directory holding it without a header is a copy cut short.
pub const BACKUP_INCOMPLETE_FILE_NAME: &str = ".tilldb-backup-incomplete";
/// The scratch file of the atomic-write check (`page/guard.rs`).
pub const ATOMIC_CHECK_FILE: &str = ".tilldb-atomic-check";
/// tilldb's scratch and marker files in a database directory start with this: the creation
/// marker, the atomic-write check, the device-facts probe.
pub const SCRATCH_FILE_PREFIX: &str = ".tilldb-";
/// Names of the scratch files a measurement makes (and removes) start with this; a crash can
/// leave one, which a database's interrupted create removes. While a measurement runs it
/// holds its file's lock (`Storage::lock`), and only a file whose lock is free is removed.
pub const MEASURE_FILE_PREFIX: &str = ".till-measure-";

/// The file name of the log segment of `generation`.
#[must_use]
pub fn segment_name(generation: u64) -> String {
    format!("{generation:020}.wal")
}

/// The generation a segment file name stands for, if it is one.
#[must_use]
pub fn parse_segment_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".wal")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// True for the names tilldb makes in a database directory (files, the log directory,
/// scratch files): a directory holding nothing else is a database or the remains of a create.
#[must_use]
pub fn is_database_file_name(name: &str) -> bool {
    [
        HEADER_FILE_NAME,
        HEADER_TEMP_FILE_NAME,
        DATA_FILE_NAME,
        DOUBLEWRITE_FILE_NAME,
        LEDGER_FILE_NAME,
        SPILL_FILE_NAME,
        LOCK_FILE_NAME,
        READERS_LOCK_FILE_NAME,
        DURABLE_FILE_NAME,
        WAL_DIR_NAME,
        FEED_DIR_NAME,
    ]
    .contains(&name)
        || name.starts_with(SCRATCH_FILE_PREFIX)
        || name.starts_with(MEASURE_FILE_PREFIX)
        || name.starts_with(WRITE_SET_RUN_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_names_are_the_database_files_and_measurement_scratch() {
        for name in [
            "tilldb.meta",
            "wal",
            "tilldb.lock",
            "tilldb.readers",
            "tilldb.durable",
            ".till-measure-1-fsync-4096",
            CREATING_FILE_NAME,
            ATOMIC_CHECK_FILE,
            ".tilldb-facts-12-0",
            "txn-writes-3.tdb",
        ] {
            assert!(is_database_file_name(name), "{name}");
        }
        for name in ["notes.txt", "tilldb.meta.bak", "WAL", "", ".tilldbx"] {
            assert!(!is_database_file_name(name), "{name}");
        }
    }

    #[test]
    fn segment_names_round_trip_and_nothing_else_parses() {
        assert_eq!(segment_name(42), "00000000000000000042.wal");
        assert_eq!(parse_segment_name(&segment_name(42)), Some(42));
        for bad in [
            "42.wal",
            "0000000000000000004x.wal",
            ".wal",
            "00000000000000000042.wa",
            "00000000000000000042.log",
        ] {
            assert_eq!(parse_segment_name(bad), None, "{bad}");
        }
    }
}
