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
use crate::header::HEADER_FILE_NAME;
use crate::io::{HeldLock, LockMode, Storage};
use std::path::Path;

pub(crate) use crate::files::{BACKUP_INCOMPLETE_FILE_NAME, WAL_DIR_NAME};
pub use crate::files::{LOCK_FILE_NAME, is_database_file_name};

/// Foreign names quoted in a `NotADatabase` error; the rest are counted.
const FOREIGN_NAMED_MAX: usize = 3;

/// Checks that `dir` may hold a database, creates it when missing, and locks it exclusively.
/// Nothing is written in a directory that is refused.
/// Returns the lock and what `tilldb.durable` held before the opening mark.
pub(super) fn claim(storage: &dyn Storage, dir: &Path) -> Result<Claimed> {
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
        return Ok(Claimed {
            lock: Box::new(crate::io::NoLock),
            durable_before: None,
        });
    }
    let lock_path = dir.join(LOCK_FILE_NAME);
    // Read-only handles must not take a predecessor's published durable lsn for this
    // writer's (`readers.rs`). The mark "a writer is opening" goes on before the lock is
    // taken, under it held shared: no writer holds it then, so no live writer's lsn is
    // overwritten, and a writer that takes it first finds the mark there and publishes over
    // it. Marked after the lock, a reader between the two read the dead writer's lsn as the
    // live one's (`tests/read_only.rs`,
    // `a_reader_never_takes_a_dead_writers_lsn_for_a_writer_that_just_took_the_lock`).
    // A mark that cannot be written (read-only media) is written again once the lock is
    // held, so that the lock's own error, naming its file, comes first.
    let mark = !crate::mutants::active("reader-takes-predecessor-lsn");
    let mut marked = !mark;
    let mut before = None;
    if mark && let Some(shared) = storage.try_lock(&lock_path, LockMode::Shared)? {
        if let Ok(found) = super::readers::announce_opening(storage, dir) {
            (marked, before) = (true, found);
        }
        drop(shared);
    }
    let lock = storage.lock(&lock_path, LockMode::Exclusive)?;
    if !marked {
        before = super::readers::announce_opening(storage, dir)?;
    }
    // Exclusive on real storage. An overlay that writes nothing beneath (`till check`) holds
    // the real lock shared, which still keeps every writer out, or nothing on read-only media
    // without a lock file, where no writer can be: so no assertion on the mode here.
    // `tests/db_lock.rs` and the mutant `no-db-lock` check that a second open is refused.
    Ok(Claimed {
        lock,
        durable_before: before,
    })
}

/// A directory claimed by [`claim`].
pub(super) struct Claimed {
    /// The database lock, held exclusively.
    pub(super) lock: Box<dyn HeldLock>,
    /// What `tilldb.durable` held before the opening mark (`None`: no file), which
    /// `readers::withdraw_opening` puts back if the open is refused after all.
    pub(super) durable_before: Option<Vec<u8>>,
}

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
