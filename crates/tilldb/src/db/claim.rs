//! Claiming a database directory before anything in it is read or written: refuse what is not
//! a database, create what is missing, and take the database lock.
//!
//! One process at a time: a `Db` holds an exclusive lock on `tilldb.lock` from before its
//! first read of the directory until after its last write (the guard is the last field of
//! `Inner`, dropped after the log and the pool have closed their files). Two opens of one
//! database, from two processes or two handles of one, used to interleave two logs in one
//! directory and lose every acknowledged commit of both; now the second open fails within
//! 50 ms with [`Error::Locked`], naming the directory and, where the OS tells it, the
//! holder's pid.
//! See `io/lock.rs` for why the lock cannot go stale.
//!
//! A directory is claimed only when it is missing, empty, a database (it has `tilldb.meta`),
//! or what a crashed create left (nothing but tilldb's own names). Anything else is another
//! program's directory: [`Error::NotADatabase`], and nothing in it is touched; not even the
//! lock file is made there.

use crate::error::{Error, Result};
use crate::header::{HEADER_FILE_NAME, HEADER_TEMP_FILE_NAME};
use crate::io::{HeldLock, LockMode, MEASURE_FILE_PREFIX, Storage};
use crate::page::{DATA_FILE_NAME, DOUBLEWRITE_FILE_NAME, LEDGER_FILE_NAME};
use std::path::Path;

/// The database lock file: empty, used only for its lock (`io/lock.rs`). Never removed.
pub const LOCK_FILE_NAME: &str = "tilldb.lock";

/// The log's directory inside a database directory.
pub(crate) const WAL_DIR_NAME: &str = "wal";

/// tilldb's scratch and marker files in a database directory start with this: the creation
/// marker, the atomic-write check, the device-facts probe.
const SCRATCH_FILE_PREFIX: &str = ".tilldb-";

/// Foreign names quoted in a `NotADatabase` error; the rest are counted.
const FOREIGN_NAMED_MAX: usize = 3;

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
        crate::page::SPILL_FILE_NAME,
        LOCK_FILE_NAME,
        WAL_DIR_NAME,
        crate::feed::FEED_DIR_NAME,
    ]
    .contains(&name)
        || name.starts_with(SCRATCH_FILE_PREFIX)
        || name.starts_with(MEASURE_FILE_PREFIX)
}

/// Checks that `dir` may hold a database, creates it when missing, and locks it exclusively.
/// Nothing is written in a directory that is refused.
pub(super) fn claim(storage: &dyn Storage, dir: &Path) -> Result<Box<dyn HeldLock>> {
    if storage.exists(dir)? {
        let names = match storage.list_dir(dir) {
            Ok(names) => names,
            Err(e) if e.raw_os_error() == Some(crate::io::errno::ENOTDIR) => {
                return Err(Error::NotADatabase {
                    dir: dir.to_path_buf(),
                    reason: "it is a file, not a directory".to_owned(),
                });
            }
            Err(e) => return Err(e),
        };
        refuse_foreign(dir, &names)?;
    } else {
        storage.create_dir_all(dir)?;
    }
    if crate::mutants::active("no-db-lock") {
        return Ok(Box::new(crate::io::NoLock));
    }
    let lock = storage.lock(&dir.join(LOCK_FILE_NAME), LockMode::Exclusive)?;
    // Exclusive on real storage. An overlay that writes nothing beneath (`till check`) holds
    // the real lock shared, which still keeps every writer out, or nothing on read-only media
    // without a lock file, where no writer can be: so no assertion on the mode here.
    // `tests/db_lock.rs` and the mutant `no-db-lock` check that a second open is refused.
    Ok(lock)
}

/// The marker a backup makes first in its target and removes once the copy's header is
/// durable (`backup.rs`): a directory holding it without a header is a copy cut short.
pub(crate) const BACKUP_INCOMPLETE_FILE_NAME: &str = ".tilldb-backup-incomplete";

/// `Err(NotADatabase)` for a directory without a header that holds names tilldb never makes,
/// or the remains of a backup cut short.
fn refuse_foreign(dir: &Path, names: &[String]) -> Result<()> {
    if names.iter().any(|n| n == HEADER_FILE_NAME) {
        return Ok(());
    }
    if names.iter().any(|n| n == BACKUP_INCOMPLETE_FILE_NAME) {
        return Err(Error::NotADatabase {
            dir: dir.to_path_buf(),
            reason: format!(
                "it holds a backup that was cut short ({BACKUP_INCOMPLETE_FILE_NAME}, no \
                 {HEADER_FILE_NAME}): the copy never completed; remove the directory and back \
                 up again"
            ),
        });
    }
    let foreign: Vec<&String> = names.iter().filter(|n| !is_database_file_name(n)).collect();
    if foreign.is_empty() {
        return Ok(());
    }
    let mut listed: Vec<String> = foreign
        .iter()
        .take(FOREIGN_NAMED_MAX)
        .map(|n| format!("'{n}'"))
        .collect();
    if foreign.len() > FOREIGN_NAMED_MAX {
        listed.push(format!("{} more", foreign.len() - FOREIGN_NAMED_MAX));
    }
    Err(Error::NotADatabase {
        dir: dir.to_path_buf(),
        reason: format!(
            "it has no {HEADER_FILE_NAME} and holds files tilldb did not make ({}); open a new \
             or empty directory to create a database, nothing here was changed",
            listed.join(", ")
        ),
    })
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
            ".till-measure-1-fsync-4096",
            crate::db::open::CREATING_FILE_NAME,
            crate::page::ATOMIC_CHECK_FILE,
            ".tilldb-facts-12-0",
        ] {
            assert!(is_database_file_name(name), "{name}");
        }
        for name in ["notes.txt", "tilldb.meta.bak", "WAL", "", ".tilldbx"] {
            assert!(!is_database_file_name(name), "{name}");
        }
    }

    #[test]
    fn a_foreign_directory_is_refused_naming_three_files_and_counting_the_rest() {
        let names: Vec<String> = ["a", "b", "c", "d", "e", "wal"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let err = refuse_foreign(Path::new("/x"), &names).expect_err("foreign");
        let text = err.to_string();
        assert!(text.contains("'a', 'b', 'c', 2 more"), "{text}");
        assert!(text.starts_with("/x is not a tilldb database"), "{text}");
        // With a header it is a database, whatever else lies there.
        let mut with_header = names.clone();
        with_header.push(HEADER_FILE_NAME.to_owned());
        refuse_foreign(Path::new("/x"), &with_header).expect("a database");
        refuse_foreign(Path::new("/x"), &["wal".to_owned()]).expect("a crashed create");
    }
}
