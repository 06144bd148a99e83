//! `till import DIR FILE`: the rows of a JSONL or CSV file (the forms of the module doc of
//! `data/mod.rs`; the format from FILE's extension unless `--format`) put into the database,
//! read one row at a time. A row goes to `--table T` when given, else to the table it names,
//! else to the default table.
//!
//! By default the whole file is one transaction (the engine commits one of any size): all
//! of it or, at the first bad line, none of it. `--batch N` commits every N rows instead;
//! an error then says how many rows were committed before it and from which line to import
//! again. Either way, an error names FILE and the line. DIR must hold a database unless
//! `--create`.
//!
//! A progress bar (bytes of FILE read) is drawn on standard error for a file over
//! `PROGRESS_FILE_BYTES_MIN` when standard error is a terminal (`progress.rs`); one line at
//! the end says what was imported, and how fast.

use super::jsonl::Row;
use super::open_to_write;
use super::output::FileFormat;
use super::rows::{LineError, Rows};
use crate::inspect::CliResult;
use crate::progress::{self, Unit};
use clap::Args;
use indicatif::ProgressBar;
use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tilldb::Db;

/// Files smaller than this import without a progress bar: they take about a second.
const PROGRESS_FILE_BYTES_MIN: u64 = 8 << 20;

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The database directory (it must hold a database, unless --create).
    dir: PathBuf,
    /// The file of rows, JSONL or CSV.
    file: PathBuf,
    /// Put every row in this table ("": the default table), whatever the file says.
    #[arg(long)]
    table: Option<String>,
    /// The file's format; by default from its extension (.jsonl or .ndjson, .csv).
    #[arg(long, value_enum)]
    format: Option<FileFormat>,
    /// Commit every N rows, instead of the whole file as one transaction.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    batch: Option<u64>,
    /// Make a new database in DIR when it holds none.
    #[arg(long)]
    create: bool,
}

/// How far an import got.
#[derive(Debug, Default)]
struct Tally {
    /// Rows put so far (committed or not).
    rows: u64,
    /// Rows committed, and the transactions that committed them.
    committed_rows: u64,
    commits: u64,
    /// The line of the first row of the transaction open now, if it has one.
    open_from_line: Option<u64>,
    tables: BTreeSet<String>,
}

/// Why an import stopped: the line (none: at the final commit) and what went wrong.
struct Stop {
    line: Option<u64>,
    what: String,
}

pub fn run(args: &ImportArgs) -> CliResult<()> {
    let format = match args.format {
        Some(format) => format,
        None => format_of(&args.file)?,
    };
    let file = File::open(&args.file).map_err(|e| format!("open {}: {e}", args.file.display()))?;
    let file_bytes = file
        .metadata()
        .map_err(|e| format!("stat {}: {e}", args.file.display()))?
        .len();
    let bar = progress::bar_if(
        file_bytes > PROGRESS_FILE_BYTES_MIN,
        "importing",
        Unit::Bytes,
        file_bytes,
    );
    let input: Box<dyn Read> = Box::new(bar.wrap_read(file));
    let mut rows = Rows::new(BufReader::with_capacity(1 << 16, input), format);
    let db = open_to_write(&args.dir, args.create)?;
    let started = Instant::now();
    let mut tally = Tally::default();
    let outcome = import_rows(&db, args, &mut rows, &mut tally, &bar);
    bar.finish_and_clear();
    db.close()?;
    if let Err(stop) = outcome {
        return Err(failure_text(args, &tally, &stop).into());
    }
    let seconds = started.elapsed().as_secs_f64();
    #[expect(
        clippy::cast_precision_loss,
        reason = "a rate to print: rows past 2^52 may round"
    )]
    let rate = tally.rows as f64 / seconds.max(1e-6);
    println!(
        "imported {} rows into {} table(s) from {} in {seconds:.2} s ({rate:.0} rows/s, {} \
         transaction(s))",
        tally.rows,
        tally.tables.len(),
        args.file.display(),
        tally.commits
    );
    Ok(())
}

/// The format a file's extension says.
fn format_of(file: &Path) -> CliResult<FileFormat> {
    let extension = file
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    match extension.as_deref() {
        Some("jsonl" | "ndjson") => Ok(FileFormat::Jsonl),
        Some("csv") => Ok(FileFormat::Csv),
        _ => Err(format!(
            "cannot tell the format of {} from its name: pass --format jsonl or --format csv",
            file.display()
        )
        .into()),
    }
}

/// Puts every row, committing every `--batch` rows and at the end.
fn import_rows<R: std::io::BufRead>(
    db: &Db,
    args: &ImportArgs,
    rows: &mut Rows<R>,
    tally: &mut Tally,
    bar: &ProgressBar,
) -> Result<(), Stop> {
    let stop_at = |line| move |what: String| Stop { line, what };
    let mut txn = db.begin().map_err(|e| stop_at(None)(e.to_string()))?;
    loop {
        let (line, row) = match rows.next_row() {
            Ok(Some(found)) => found,
            Ok(None) => break,
            Err(LineError { line, what }) => return Err(stop_at(Some(line))(what)),
        };
        let Row { table, key, value } = row;
        let table = args.table.clone().or(table).unwrap_or_default();
        txn.put_in(&table, &key, &value)
            .map_err(|e| stop_at(Some(line))(e.to_string()))?;
        tally.rows += 1;
        tally.open_from_line.get_or_insert(line);
        tally.tables.insert(table);
        let open_rows = tally.rows - tally.committed_rows;
        if args.batch.is_some_and(|batch| open_rows == batch) {
            txn.commit().map_err(|e| stop_at(None)(e.to_string()))?;
            tally.committed_rows = tally.rows;
            tally.commits += 1;
            tally.open_from_line = None;
            bar.set_message(format!("{} rows committed", tally.committed_rows));
            txn = db.begin().map_err(|e| stop_at(None)(e.to_string()))?;
        }
        assert!(
            args.batch
                .is_none_or(|batch| tally.rows - tally.committed_rows < batch),
            "a batch of {} rows not committed",
            tally.rows - tally.committed_rows
        );
    }
    if tally.rows > tally.committed_rows {
        bar.set_message(format!(
            "committing {} rows",
            tally.rows - tally.committed_rows
        ));
        txn.commit().map_err(|e| stop_at(None)(e.to_string()))?;
        tally.committed_rows = tally.rows;
        tally.commits += 1;
        tally.open_from_line = None;
    }
    Ok(())
}

/// The error of an import that stopped: FILE and the line, what is wrong, and what was
/// committed before it.
fn failure_text(args: &ImportArgs, tally: &Tally, stop: &Stop) -> String {
    let file = args.file.display();
    let at = match stop.line {
        Some(line) => format!("{file}: line {line}: {}", stop.what),
        None => format!(
            "{file}: the commit of the rows from line {} on failed: {}",
            tally.open_from_line.unwrap_or(1),
            stop.what
        ),
    };
    if args.batch.is_none() {
        return format!(
            "{at}; nothing was imported (the file is one transaction): the database is unchanged"
        );
    }
    if tally.committed_rows == 0 {
        return format!("{at}; no batch was committed before it: the database is unchanged");
    }
    // Import again from the first row that was not committed: the open transaction's first,
    // or the bad line itself when it was to begin a transaction.
    let resume = tally.open_from_line.or(stop.line).unwrap_or(1);
    let header = match args.format.map_or_else(|| format_of(&args.file).ok(), Some) {
        Some(FileFormat::Csv) => " (after the header)",
        _ => "",
    };
    format!(
        "{at}; {} rows were committed before it, in {} transaction(s) of {} rows; the rows \
         from line {resume} on were not: import the file again from line {resume}{header}",
        tally.committed_rows,
        tally.commits,
        args.batch.unwrap_or(0)
    )
}
