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
//!
//! An encrypted database's copy always gets a new data key, wrapped by the key it was opened
//! with; `--rekey` says so (and refuses a plain database), and with `--new-key-file` or
//! `--cipher` the copy is wrapped by another key or seals with another cipher: what a
//! rotation cannot do, a rewrite does (docs/encryption.md, section 4). `till encrypt`
//! (`encrypt.rs`) runs these same steps from a plain database to an encrypted copy.

use crate::progress::{self, Unit};
use clap::Args;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use till_bench::disk_usage::DiskUsage;
use tilldb::{Cipher, Db, Encryption, Error, KeyProvider, Options, StaticKey};

#[derive(Args, Debug)]
pub struct CompactArgs {
    /// The database to compact. No other process may have it open.
    dir: PathBuf,
    /// Print JSON (stable for scripts): `dir`, `tables`, `entries`, `pages_before`,
    /// `pages_after`, `data_bytes_before`, `data_bytes_after`, `dir_bytes_before`,
    /// `dir_bytes_after`, and `cipher` and `key_id`: the copy's, null for a plain one.
    #[arg(long)]
    json: bool,
    /// Replace an encrypted database's data key: the copy seals everything under a new one
    /// (as every compaction of an encrypted database does; this says so, and refuses a plain
    /// database).
    #[arg(long)]
    rekey: bool,
    /// With --rekey: wrap the new data key with this key (a file of its 32 bytes, or of 64
    /// hexadecimal digits) instead of the current one; the database then opens with it only.
    #[arg(long, value_name = "FILE", requires = "rekey")]
    new_key_file: Option<PathBuf>,
    /// With --rekey: the copy's cipher [default: the database's].
    #[arg(long, value_enum, requires = "rekey")]
    cipher: Option<crate::key::CipherArg>,
}

/// What the copy of an in-place compaction is sealed with.
pub enum CopyKey {
    /// As the database: plain for a plain one; for an encrypted one, a new data key wrapped
    /// by the key it was opened with.
    AsDatabase,
    /// A new data key for an encrypted database (refused for a plain one), wrapped by
    /// `provider` (default: the key it was opened with), sealing with `cipher` (default:
    /// its own).
    Rekey {
        provider: Option<Arc<dyn KeyProvider>>,
        cipher: Option<Cipher>,
    },
    /// A plain database's encrypted copy (`till encrypt`).
    Encrypt(Encryption),
}

pub fn run(args: &CompactArgs) -> Result<(), Box<dyn std::error::Error>> {
    let copy = if args.rekey {
        let provider: Option<Arc<dyn KeyProvider>> = match &args.new_key_file {
            Some(path) => {
                let key = crate::key::read_key_file(path)?;
                Some(Arc::new(StaticKey::new(&key)))
            }
            None => None,
        };
        CopyKey::Rekey {
            provider,
            cipher: args.cipher.map(crate::key::CipherArg::cipher),
        }
    } else {
        CopyKey::AsDatabase
    };
    in_place(&args.dir, args.json, crate::key::options()?, copy)
}

/// The copy's encryption for `copy` (`None`: plain, or as the database), given the database
/// `db` in `dir` opened with `opened`.
fn copy_encryption(
    db: &Db,
    dir: &Path,
    opened: Option<&Encryption>,
    copy: CopyKey,
) -> Result<Option<Encryption>, Box<dyn std::error::Error>> {
    Ok(match copy {
        CopyKey::AsDatabase => None,
        CopyKey::Rekey { provider, cipher } => {
            let (Some(current), Some(opened)) = (db.cipher(), opened) else {
                return Err(not_encrypted(dir));
            };
            let provider = provider.unwrap_or_else(|| opened.provider.clone());
            Some(Encryption::new(provider).with_cipher(cipher.unwrap_or(current)))
        }
        CopyKey::Encrypt(encryption) => {
            if db.cipher().is_some() {
                return Err(format!(
                    "{} is already encrypted; till compact --rekey gives it a new data key",
                    dir.display()
                )
                .into());
            }
            Some(encryption)
        }
    })
}

/// Removes what an earlier run cut short left beside `dir` (step 2 of the module doc): the
/// copy, finished or not, or the old database after the swap (for `till encrypt`, the plain
/// one). `dir` is whole in every case; call it only while no other process has `dir` open.
pub fn remove_leftovers(dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let copy = copy_path(dir);
    for leftover in [copy.clone(), Db::compact_partial_path(&copy)] {
        if leftover.exists() {
            eprintln!(
                "removing {}, left by a compaction cut short (or a till encrypt; {} is whole)",
                leftover.display(),
                dir.display()
            );
            std::fs::remove_dir_all(&leftover)
                .map_err(|e| format!("cannot remove {}: {e}", leftover.display()))?;
        }
    }
    Ok(())
}

/// The refusals the files tell without opening the database, so that they change nothing (an
/// open and close would write the header): a change feed that is or was on (the copy's log
/// starts again at lsn 0), and a new data key asked of a plain database. The rest (a key too
/// long for an encrypted page, an encrypted database to encrypt) need the database open.
fn refuse_before_opening(dir: &Path, copy: &CopyKey) -> Result<(), Box<dyn std::error::Error>> {
    if dir.join(tilldb::internals::files::FEED_DIR_NAME).exists() {
        return Err(format!(
            "{} has (or had) the change feed on; a compacted or encrypted copy starts its log \
             again at lsn 0, which feed consumers and till ship would take for commits already \
             shipped: drain till ship, then register the consumer again with --resync after",
            dir.display()
        )
        .into());
    }
    let plain = crate::inspect::read_header(dir)
        .ok()
        .and_then(|read| read.chosen.ok())
        .is_some_and(|(_, header)| header.encryption.is_none());
    if plain && matches!(copy, CopyKey::Rekey { .. }) {
        return Err(not_encrypted(dir));
    }
    Ok(())
}

/// Why a plain database has no data key to replace.
fn not_encrypted(dir: &Path) -> Box<dyn std::error::Error> {
    format!(
        "{} is not encrypted, so it has no data key to replace; till encrypt makes an \
         encrypted copy of it",
        dir.display()
    )
    .into()
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

/// Compacts the database in `dir`, opened with `open`, into a copy sealed as `copy` says,
/// checks the copy and swaps it in (the module doc's steps); prints the report, as JSON
/// with `json`.
pub fn in_place(
    dir: &Path,
    json: bool,
    open: Options,
    copy: CopyKey,
) -> Result<(), Box<dyn std::error::Error>> {
    if !dir
        .join(tilldb::internals::header::HEADER_FILE_NAME)
        .exists()
    {
        return Err(format!("{} holds no tilldb database", dir.display()).into());
    }
    refuse_before_opening(dir, &copy)?;
    let options = Options {
        background_threads: false,
        ..open.clone()
    };
    let spinner = progress::spinner("opening");
    let opened = Db::open(dir, options);
    spinner.finish_and_clear();
    let db = match opened {
        Ok(db) => db,
        Err(e @ Error::Locked { .. }) => {
            return Err(format!("{e}; stop the process that has it open, then try again").into());
        }
        Err(e) => return Err(e.into()),
    };
    let done = if matches!(copy, CopyKey::Encrypt(_)) {
        "encrypted"
    } else {
        "compacted"
    };
    let encryption = copy_encryption(&db, dir, open.encryption.as_ref(), copy)?;
    let copy = copy_path(dir);
    remove_leftovers(dir)?;
    let data_file = |d: &Path| {
        std::fs::metadata(d.join(tilldb::internals::page::DATA_FILE_NAME)).map_or(0, |m| m.len())
    };
    let dir_before = DiskUsage::of(dir)?.allocated_bytes;
    let data_before = data_file(dir);
    let tables = db.table_entries()?;
    let bar = progress::bar("copying", Unit::Rows, 0);
    let report = match &encryption {
        None => db.compact_to_with_progress(&copy, &mut progress::follow(&bar)),
        Some(e) => db.compact_encrypted_to(&copy, e.clone(), &mut progress::follow(&bar)),
    };
    let report = match report {
        Ok(report) => report,
        Err(e) => {
            // The copy cut short is never used: remove it now rather than at the next run.
            let partial = Db::compact_partial_path(&copy);
            drop(std::fs::remove_dir_all(&partial));
            return Err(format!("{e}; {} is unchanged", dir.display()).into());
        }
    };
    bar.finish_and_clear();
    // The copy opens with its own key when it has one, else with the database's.
    let copy_key = encryption.or(open.encryption);
    check_copy(&copy, &tables, copy_key.clone())?;
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
        let old = if done == "encrypted" {
            "the old database, every row of it in plaintext,"
        } else {
            "the old database"
        };
        format!(
            "{done}; but cannot remove {old} in {}: {e}; remove it by hand",
            copy.display()
        )
    })?;
    let sizes = Sizes {
        data: (data_before, data_after),
        dir: (dir_before, dir_after),
    };
    print_report(dir, json, done, (&report, sizes), copy_key.as_ref())
}

/// Bytes before and after a compaction: of the data file, and of the directory on disk.
struct Sizes {
    data: (u64, u64),
    dir: (u64, u64),
}

/// Prints what the compaction `done` ("compacted", "encrypted") of `dir` did, as JSON with
/// `json`; `copy_key` is the copy's encryption.
fn print_report(
    dir: &Path,
    json: bool,
    done: &str,
    (report, sizes): (&tilldb::CompactReport, Sizes),
    copy_key: Option<&Encryption>,
) -> Result<(), Box<dyn std::error::Error>> {
    let Sizes {
        data: (data_before, data_after),
        dir: (dir_before, dir_after),
    } = sizes;
    let (cipher, key_id) = match copy_key {
        Some(e) => (Some(e.cipher.name()), Some(e.provider.key_id())),
        None => (None, None),
    };
    if json {
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
            "cipher": cipher,
            "key_id": key_id,
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        println!(
            "{done} {}: {} tables, {} entries; data file {} -> {} KiB ({} -> {} pages), \
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
        if let (Some(cipher), Some(key_id)) = (cipher, key_id) {
            println!(
                "its pages, log and header are sealed with {cipher} under a new data key, \
                 wrapped by the key \"{key_id}\": open it with that key"
            );
        }
    }
    Ok(())
}

/// Opens the copy and checks it: trees, every page accounted for, and each table's entries
/// as the source counted them (`tables`; empty tables are not copied).
fn check_copy(
    copy: &Path,
    tables: &[(String, u64)],
    encryption: Option<Encryption>,
) -> Result<(), Box<dyn std::error::Error>> {
    let spinner = progress::spinner("opening the copy");
    let options = Options {
        encryption,
        ..Options::default()
    };
    let db = Db::open(copy, options)?;
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
