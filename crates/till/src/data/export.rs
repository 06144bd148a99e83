//! `till export DIR --format jsonl|csv`: every row of one table (`--table T`) or of every
//! table, the default table first, in key order, read lazily from one snapshot (a batch of
//! rows in memory at a time), in the forms of the module doc of `data/mod.rs`. Without
//! `--table` each row carries its table (JSONL `"table"`, CSV's first column `table`), so
//! `import` puts every row back where it was. To standard output, or `--output FILE`.
//!
//! A progress bar (rows written, of the tables' counts) is drawn on standard error when it
//! is a terminal and the rows go elsewhere (`--output`, or standard output piped or
//! redirected): rows written to the terminal are their own progress, and a bar drawn among
//! them would garble both.

use super::output::{FileFormat, RowWriter};
use super::{EncodingArgs, open_to_read, require_table};
use crate::inspect::CliResult;
use crate::progress::{self, Unit};
use clap::Args;
use indicatif::ProgressBar;
use std::io::IsTerminal;
use std::ops::Bound;
use std::path::PathBuf;
use tilldb::{Db, Direction};

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The database directory.
    dir: PathBuf,
    /// Only this table ("": the default table). Without it, every table, each row with its
    /// table.
    #[arg(long)]
    table: Option<String>,
    /// The file format.
    #[arg(long, value_enum)]
    format: FileFormat,
    /// Write to this file (created, or emptied) instead of standard output.
    #[arg(long)]
    output: Option<PathBuf>,
    #[command(flatten)]
    encoding: EncodingArgs,
}

pub fn run(args: &ExportArgs) -> CliResult<()> {
    let db = open_to_read(&args.dir)?;
    let tables = match &args.table {
        Some(table) => {
            require_table(&db, &args.dir, table)?;
            vec![table.clone()]
        }
        None => std::iter::once(String::new()).chain(db.tables()?).collect(),
    };
    let mut out = RowWriter::create(
        args.output.as_deref(),
        args.format.into(),
        args.encoding.encoding(),
        args.table.is_none(),
    )?;
    let rows_elsewhere = args.output.is_some() || !std::io::stdout().is_terminal();
    let bar = progress::bar_if(rows_elsewhere, "exporting", Unit::Rows, 0);
    let written = write_tables(&db, &tables, &mut out, &bar).map_err(|e| match &args.output {
        Some(path) => format!("{e}; {} holds only the rows before it", path.display()).into(),
        None => e,
    })?;
    bar.finish_and_clear();
    out.finish()?;
    db.close()?;
    if let Some(path) = &args.output {
        println!(
            "exported {written} rows of {} table(s) from {} to {}",
            tables.len(),
            args.dir.display(),
            path.display()
        );
    }
    Ok(())
}

/// Writes every row of `tables` from one snapshot, each counted on `bar`; returns how many
/// rows were written.
fn write_tables(
    db: &Db,
    tables: &[String],
    out: &mut RowWriter,
    bar: &ProgressBar,
) -> CliResult<u64> {
    let read = db.begin_read()?;
    // Only the bar's length: a count that does not read (a damaged catalog entry) counts 0
    // rather than fail an export that reads the rows, not the counts.
    bar.set_length(
        tables
            .iter()
            .map(|table| read.len_in(table).unwrap_or(0))
            .sum(),
    );
    let mut written = 0u64;
    for table in tables {
        let rows = read.range_in(
            table,
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
        )?;
        for row in rows {
            let (key, value) = row?;
            if let Err(e) = out.write_row(table, &key, &value) {
                out.failed(e)?;
                // The reader of standard output went away: nothing more to write.
                return Ok(written);
            }
            written += 1;
            bar.inc(1);
        }
    }
    Ok(written)
}
