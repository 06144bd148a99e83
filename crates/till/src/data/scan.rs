//! `till get DIR KEY` and `till scan DIR`: one value, or the rows of one table in key order,
//! read lazily from one snapshot (`ReadTxn::range_in` / `prefix_in`: a batch of rows in
//! memory at a time, whatever the table's size), in the forms of the module doc of
//! `data/mod.rs`.
//!
//! `get` prints the value and a newline; a key that is not there is an error (exit status 1),
//! so a script can tell a missing key from an empty value. `scan` prints `key<TAB>value` a
//! line (`--format jsonl`: what `export` writes for one table, which `import` reads back).

use super::output::{Format, RowWriter};
use super::{EncodingArgs, open_to_read, require_table, table_label};
use crate::inspect::CliResult;
use clap::{Args, ValueEnum};
use std::io::Write;
use std::ops::Bound;
use std::path::PathBuf;
use tilldb::{Db, Direction};

#[derive(Args, Debug)]
pub struct GetArgs {
    /// The database directory.
    dir: PathBuf,
    /// The key (escaped text, or hex / base64 with --hex / --base64).
    key: String,
    /// The table ("": the default table).
    #[arg(long, default_value = "")]
    table: String,
    #[command(flatten)]
    encoding: EncodingArgs,
}

/// What `scan` prints.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanFormat {
    /// `key<TAB>value`, one row a line.
    Tsv,
    /// One JSON object a line, as `export` writes them.
    Jsonl,
}

#[derive(Args, Debug)]
pub struct ScanArgs {
    /// The database directory.
    dir: PathBuf,
    /// The table ("": the default table).
    #[arg(long, default_value = "")]
    table: String,
    /// Only the keys that start with this.
    #[arg(long, conflicts_with_all = ["from", "to"])]
    prefix: Option<String>,
    /// From this key on (inclusive).
    #[arg(long)]
    from: Option<String>,
    /// Up to this key (exclusive).
    #[arg(long)]
    to: Option<String>,
    /// In descending key order.
    #[arg(long)]
    reverse: bool,
    /// At most this many rows.
    #[arg(long)]
    limit: Option<u64>,
    /// How each row is printed.
    #[arg(long, value_enum, default_value = "tsv")]
    format: ScanFormat,
    #[command(flatten)]
    encoding: EncodingArgs,
}

pub fn get(args: &GetArgs) -> CliResult<()> {
    let encoding = args.encoding.encoding();
    let key = encoding.decode(&args.key, "KEY")?;
    let db = open_to_read(&args.dir)?;
    let value = db.get_in(&args.table, &key)?;
    let no_table = !args.table.is_empty() && !db.tables()?.contains(&args.table);
    db.close()?;
    let Some(value) = value else {
        let why = if no_table {
            format!(" ({} has no such table)", args.dir.display())
        } else {
            String::new()
        };
        let shown = match encoding.encode(&key) {
            empty if empty.is_empty() => "\"\" (empty)".to_owned(),
            shown => shown,
        };
        return Err(format!(
            "key {shown} not found in table {}{why}",
            table_label(&args.table)
        )
        .into());
    };
    let mut line = encoding.encode(&value);
    line.push('\n');
    let mut out = std::io::stdout().lock();
    match out.write_all(line.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(format!("write standard output: {e}").into())
        }
        _ => Ok(()),
    }
}

pub fn scan(args: &ScanArgs) -> CliResult<()> {
    let encoding = args.encoding.encoding();
    let decode = |arg: &Option<String>, what| {
        arg.as_deref()
            .map(|text| encoding.decode(text, what))
            .transpose()
    };
    let prefix = decode(&args.prefix, "--prefix")?;
    let from = decode(&args.from, "--from")?;
    let to = decode(&args.to, "--to")?;
    if let (Some(from), Some(to)) = (&from, &to)
        && from > to
    {
        return Err(format!(
            "--from {} comes after --to {}: no key is in that range",
            encoding.encode(from),
            encoding.encode(to)
        )
        .into());
    }
    let db = open_to_read(&args.dir)?;
    require_table(&db, &args.dir, &args.table)?;
    let bounds = match &prefix {
        Some(prefix) => Bounds::Prefix(prefix),
        None => Bounds::Range(from.as_deref(), to.as_deref()),
    };
    let format = match args.format {
        ScanFormat::Tsv => Format::Tsv,
        ScanFormat::Jsonl => Format::Jsonl,
    };
    let mut out = RowWriter::create(None, format, encoding, false)?;
    print_rows(&db, args, &bounds, &mut out)?;
    out.finish()?;
    db.close()?;
    Ok(())
}

/// Which keys `scan` reads.
enum Bounds<'a> {
    Prefix(&'a [u8]),
    /// From the first (inclusive) to the second (exclusive); `None`: no bound.
    Range(Option<&'a [u8]>, Option<&'a [u8]>),
}

/// Writes the rows in `bounds`, up to `--limit`, reading them lazily.
fn print_rows(db: &Db, args: &ScanArgs, bounds: &Bounds, out: &mut RowWriter) -> CliResult<()> {
    let direction = if args.reverse {
        Direction::Backward
    } else {
        Direction::Forward
    };
    let read = db.begin_read()?;
    let rows = match *bounds {
        Bounds::Prefix(prefix) => read.prefix_in(&args.table, prefix, direction)?,
        Bounds::Range(from, to) => read.range_in(
            &args.table,
            from.map_or(Bound::Unbounded, Bound::Included),
            to.map_or(Bound::Unbounded, Bound::Excluded),
            direction,
        )?,
    };
    let limit = args.limit.unwrap_or(u64::MAX);
    let mut printed = 0u64;
    for row in rows {
        if printed == limit {
            break;
        }
        let (key, value) = row?;
        if let Err(e) = out.write_row(&args.table, &key, &value) {
            return out.failed(e);
        }
        printed += 1;
    }
    assert!(
        printed <= limit,
        "scan printed {printed} rows past --limit {limit}"
    );
    Ok(())
}
