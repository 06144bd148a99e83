//! `till compact DIR`: gives back to the file system the space a database no longer uses.
//!
//! ```text
//!  1. open DIR (its lock: no other process has it) with background threads off, so the
//!     database does no I/O of its own from here on
//!  2. remove what an earlier compaction cut short left beside it: DIR.tilldb-compacted
//!     (a finished copy never swapped in, or the old database after the swap) and
//!     DIR.tilldb-compacted.tilldb-partial; DIR itself is whole in every case
//!  3. Db::compact_to(DIR.tilldb-compacted): every table copied afresh, the copy durable
//!  4. open the copy and check it: trees, every page accounted for, each table's entries
//!  5. swap DIR and the copy in one step (renameat2 RENAME_EXCHANGE; Linux only so far),
//!     flush the parent directory; then remove the old database, now under the copy's name
//! ```
//!
//! The old database's handle is never closed (a close would write its header by path, into
//! the directory that now holds the copy): the process ends holding it, and its files are
//! removed. Where the swap is not available (Windows, macOS) the checked copy stays beside
//! DIR and the command says how to put it in place by hand; it exits non-zero.
//!
//! On a terminal, steps 3 and 4 show their progress on standard error (`progress.rs`):
//! entries copied, pages the copy's checks read; a spinner while a database opens.

use crate::progress::{self, Unit};
use clap::Args;
use std::path::{Path, PathBuf};
use till_bench::disk_usage::DiskUsage;
use tilldb::{Db, Error, Options};

#[derive(Args, Debug)]
pub struct CompactArgs {
    /// The database to compact. No other process may have it open.
    dir: PathBuf,
    /// Print JSON (stable for scripts): `dir`, `tables`, `entries`, `pages_before`,
    /// `pages_after`, `data_bytes_before`, `data_bytes_after`, `dir_bytes_before`,
    /// `dir_bytes_after`.
    #[arg(long)]
    json: bool,
}

/// The sibling directory the copy is built in: `DIR.tilldb-compacted`.
fn copy_path(dir: &Path) -> PathBuf {
    let mut name = dir
        .file_name()
        .map(std::ffi::OsStr::to_os_string)
        .unwrap_or_default();
    name.push(".tilldb-compacted");
    dir.with_file_name(name)
}

pub fn run(args: &CompactArgs) -> Result<(), Box<dyn std::error::Error>> {
    let dir = args.dir.as_path();
    if !dir
        .join(tilldb::internals::header::HEADER_FILE_NAME)
        .exists()
    {
        return Err(format!("{} holds no tilldb database", dir.display()).into());
    }
    let options = Options {
        background_threads: false,
        ..crate::key::options()?
    };
    let spinner = progress::spinner("opening");
    let opened = Db::open(dir, options);
    spinner.finish_and_clear();
    let db = match opened {
        Ok(db) => db,
        Err(e @ Error::Locked { .. }) => {
            return Err(format!("{e}; stop the process that has it open, then compact").into());
        }
        Err(e) => return Err(e.into()),
    };
    let copy = copy_path(dir);
    for leftover in [copy.clone(), Db::compact_partial_path(&copy)] {
        if leftover.exists() {
            eprintln!(
                "removing {}, left by a compaction cut short ({} is whole)",
                leftover.display(),
                dir.display()
            );
            std::fs::remove_dir_all(&leftover)
                .map_err(|e| format!("cannot remove {}: {e}", leftover.display()))?;
        }
    }
    let data_file = |d: &Path| {
        std::fs::metadata(d.join(tilldb::internals::page::DATA_FILE_NAME)).map_or(0, |m| m.len())
    };
    let dir_before = DiskUsage::of(dir)?.allocated_bytes;
    let data_before = data_file(dir);
    let tables = db.table_entries()?;
    let bar = progress::bar("copying", Unit::Rows, 0);
    let report = db.compact_to_with_progress(&copy, &mut progress::follow(&bar))?;
    bar.finish_and_clear();
    check_copy(&copy, &tables)?;
    let data_after = data_file(&copy);
    let dir_after = DiskUsage::of(&copy)?.allocated_bytes;
    if let Err(e) = tilldb::io::exchange_dirs(dir, &copy) {
        std::mem::forget(db);
        return Err(format!(
            "the compacted copy is complete and checked in {copy}, but it cannot be swapped \
             with {dir} here ({e}); with no process using {dir}, rename {dir} aside, rename \
             {copy} to {dir}, then remove the old one",
            copy = copy.display(),
            dir = dir.display()
        )
        .into());
    }
    // The old database now lives under the copy's name; its handle must not write (see the
    // module doc), so it is never closed, only its files removed.
    std::mem::forget(db);
    std::fs::remove_dir_all(&copy).map_err(|e| {
        format!(
            "compacted; but cannot remove the old database in {}: {e}",
            copy.display()
        )
    })?;
    if args.json {
        let json = serde_json::json!({
            "dir": dir,
            "tables": report.tables,
            "entries": report.entries,
            "pages_before": report.source_pages,
            "pages_after": report.target_pages,
            "data_bytes_before": data_before,
            "data_bytes_after": data_after,
            "dir_bytes_before": dir_before,
            "dir_bytes_after": dir_after,
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        println!(
            "compacted {}: {} tables, {} entries; data file {} -> {} KiB ({} -> {} pages), \
             directory {} -> {} KiB on disk",
            dir.display(),
            report.tables,
            report.entries,
            data_before >> 10,
            data_after >> 10,
            report.source_pages,
            report.target_pages,
            dir_before >> 10,
            dir_after >> 10
        );
    }
    Ok(())
}

/// Opens the copy and checks it: trees, every page accounted for, and each table's entries
/// as the source counted them (`tables`; empty tables are not copied).
fn check_copy(copy: &Path, tables: &[(String, u64)]) -> Result<(), Box<dyn std::error::Error>> {
    let spinner = progress::spinner("opening the copy");
    let db = Db::open(copy, crate::key::options()?)?;
    spinner.finish_and_clear();
    let bar = progress::bar("checking the copy's trees", Unit::Pages, 0);
    db.check_tables_with_progress(&mut progress::follow(&bar))?;
    bar.finish_and_clear();
    let bar = progress::bar("checking its free space", Unit::Pages, 0);
    let space = db.check_space_with_progress(&mut progress::follow(&bar))?;
    bar.finish_and_clear();
    if !space.is_clean() {
        return Err(format!(
            "the compacted copy in {} does not check clean",
            copy.display()
        )
        .into());
    }
    let expected: Vec<(String, u64)> = tables
        .iter()
        .filter(|(name, n)| name.is_empty() || *n > 0)
        .cloned()
        .collect();
    let found = db.table_entries()?;
    db.close()?;
    if found != expected {
        return Err(format!(
            "the compacted copy in {} holds {found:?}, the database {expected:?}",
            copy.display()
        )
        .into());
    }
    Ok(())
}
