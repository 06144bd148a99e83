//! `till check DIR`: opens the database (running recovery), checks every table's tree, then
//! reads every page of the data file and verifies its checksum and id. Problems are reported
//! with the file and offset; the exit status is non-zero when any is found.

use clap::Args;
use std::path::PathBuf;
use tilldb::header::HeaderFile;
use tilldb::io::{FileStorage, Storage};
use tilldb::page::{PageId, PageSlot, PageStore};
use tilldb::{Db, Options};

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The database directory.
    dir: PathBuf,
}

pub fn run(args: &CheckArgs) -> Result<(), Box<dyn std::error::Error>> {
    let storage = FileStorage::new();
    if !storage.exists(&args.dir.join(tilldb::header::HEADER_FILE_NAME))? {
        return Err(format!(
            "{} holds no tilldb database (no tilldb.meta)",
            args.dir.display()
        )
        .into());
    }
    let (_, header) = HeaderFile::open(&storage, &args.dir, tilldb::FlushMethod::Fdatasync)?
        .ok_or("tilldb.meta holds no header")?;
    let before = scan_pages(storage, args, header.page_bytes)?;
    for (path, offset, what) in &before {
        println!(
            "  before recovery: bad page in {} at offset {offset}: {what}",
            path.display()
        );
    }
    let db = Db::open(&args.dir, Options::default())?;
    println!("recovered and opened {}", args.dir.display());
    let tables = db.check_tables()?;
    for (name, stats) in &tables {
        let name = if name.is_empty() {
            "(default)"
        } else {
            name.as_str()
        };
        println!(
            "  table {name:<20} {} keys, depth {}, {} leaf + {} branch + {} overflow pages: ok",
            stats.keys, stats.depth, stats.leaf_pages, stats.branch_pages, stats.overflow_pages
        );
    }
    db.close()?;
    let after = scan_pages(storage, args, header.page_bytes)?;
    for (path, offset, what) in &after {
        println!(
            "  BAD page in {} at offset {offset}: {what}",
            path.display()
        );
    }
    if !after.is_empty() {
        return Err(format!("{} bad pages after recovery", after.len()).into());
    }
    if !before.is_empty() {
        println!(
            "  recovery repaired {} bad pages (torn-page guard and log)",
            before.len()
        );
    }
    println!("check ok");
    Ok(())
}

/// A page that does not validate: its file, offset, and what is wrong.
type BadPage = (PathBuf, u64, &'static str);

/// Every page of the data file that does not validate.
fn scan_pages(
    storage: FileStorage,
    args: &CheckArgs,
    page_bytes: u32,
) -> Result<Vec<BadPage>, Box<dyn std::error::Error>> {
    let store = PageStore::open(
        &storage,
        &args.dir,
        tilldb::FlushMethod::Fdatasync,
        page_bytes,
    )?;
    let (mut valid, mut unwritten, mut bad) = (0u64, 0u64, Vec::new());
    for id in 1..store.page_count() {
        match store.inspect(PageId(id))? {
            PageSlot::Valid(_) => valid += 1,
            PageSlot::Unwritten | PageSlot::Missing => unwritten += 1,
            PageSlot::Invalid(fault) => {
                bad.push((
                    store.path().to_path_buf(),
                    PageId(id).offset(page_bytes),
                    fault.what(),
                ));
            }
        }
    }
    println!(
        "  data file: {valid} valid pages, {unwritten} never written, {} bad ({page_bytes} B pages)",
        bad.len()
    );
    Ok(bad)
}
