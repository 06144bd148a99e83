//! `till tables DIR`: every table and its rows, the default table first (shown as
//! `(default)`), counted in one snapshot (`Db::table_entries`, which reads every row).
//!
//! # JSON (`--json`): an array, one object a table
//!
//! ```text
//! field  type    meaning
//! name   string  "" is the default table
//! rows   u64     its rows
//! ```

use super::open_to_read;
use crate::inspect::CliResult;
use clap::Args;
use serde_json::json;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct TablesArgs {
    /// The database directory.
    dir: PathBuf,
    /// Print a JSON array (fields in the module doc) instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: &TablesArgs) -> CliResult<()> {
    let db = open_to_read(&args.dir)?;
    let tables = db.table_entries()?;
    db.close()?;
    if args.json {
        let rows: Vec<_> = tables
            .iter()
            .map(|(name, rows)| json!({"name": name, "rows": rows}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    let width = tables
        .iter()
        .map(|(name, _)| name.chars().count())
        .chain([9, 5])
        .max()
        .unwrap_or(9);
    println!("{:<width$} {:>12}", "table", "rows");
    for (name, rows) in &tables {
        let name = if name.is_empty() { "(default)" } else { name };
        println!("{name:<width$} {rows:>12}");
    }
    Ok(())
}
