//! `till backup SRC DST`: a consistent copy of the database in SRC, checked. SRC may be open
//! in another process, whose commits go on: the copy is taken through a read-only handle
//! (`Db::open_read_only`) and holds every commit durable when it opened. The copy is then
//! opened, its trees and free space checked, and what it holds printed.
//!
//! On a terminal, each step shows its progress on standard error (`progress.rs`): bytes
//! copied, pages the copy's checks read; a spinner while a database opens (recovery).

use crate::progress::{self, Unit};
use clap::Args;
use std::path::PathBuf;
use tilldb::Db;

#[derive(Args, Debug)]
pub struct BackupArgs {
    /// The database to copy.
    src: PathBuf,
    /// Where the copy goes: a directory that does not exist or is empty.
    dst: PathBuf,
}

pub fn run(args: &BackupArgs) -> Result<(), Box<dyn std::error::Error>> {
    if !args
        .src
        .join(tilldb::internals::header::HEADER_FILE_NAME)
        .exists()
    {
        return Err(format!("{} holds no tilldb database", args.src.display()).into());
    }
    // Live or closed alike: a read-only handle's snapshot, at the writer's durable lsn.
    let spinner = progress::spinner("opening");
    // An encrypted database's copy keeps its wrapped data key: it opens with the same key.
    let options = crate::key::options()?;
    let db = Db::open_read_only(&args.src, options.clone())?;
    spinner.finish_and_clear();
    let bar = progress::bar("copying", Unit::Bytes, 0);
    let report = db.backup_to_with_progress(&args.dst, &mut progress::follow(&bar))?;
    bar.finish_and_clear();
    db.close()?;
    let spinner = progress::spinner("opening the copy");
    let copy = Db::open(&args.dst, options)?;
    spinner.finish_and_clear();
    let bar = progress::bar("checking the copy's trees", Unit::Pages, 0);
    let trees = copy.check_tables_with_progress(&mut progress::follow(&bar))?;
    bar.finish_and_clear();
    let bar = progress::bar("checking its free space", Unit::Pages, 0);
    let space = copy.check_space_with_progress(&mut progress::follow(&bar))?;
    bar.finish_and_clear();
    if !space.is_clean() {
        return Err(format!("the copy in {} does not check clean", args.dst.display()).into());
    }
    copy.close()?;
    println!(
        "copied {} to {}: {} MiB, {} log segment(s), every commit up to lsn {}; the copy \
         opens and checks clean ({} tables)",
        args.src.display(),
        args.dst.display(),
        report.bytes >> 20,
        report.segments,
        report.lsn.0,
        trees.len()
    );
    Ok(())
}
