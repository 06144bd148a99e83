//! `till tables | get | scan | export | import`: the rows of a database, as `sqlite3`,
//! `mdb_dump` and the `ldb` of `RocksDB` show theirs. `tables.rs`, `scan.rs` (`get` and `scan`),
//! `export.rs` and `import.rs` hold one command each; `codec.rs` (escaped text, hex, base64),
//! `jsonl.rs`, `csv.rs`, `output.rs` and `rows.rs` the encodings, the output and the input
//! they share.
//!
//! # Keys and values on the command line
//!
//! Keys and values are bytes. `get` and `scan` print them, and KEY, `--prefix`, `--from` and
//! `--to` are read, in one of three forms, each with exactly one reading:
//!
//! ```text
//! flag      form                                                      bytes 61 09 ff
//! (none)    escaped text: UTF-8 as it is, except \ as \\, tab,        a\t\xff
//!           newline and carriage return as \t \n \r, and every other
//!           control character (U+0000-U+001F, U+007F-U+009F) and
//!           every byte that is not valid UTF-8 as \xNN, one per byte
//! --hex     lower-case hex (either case is read)                      6109ff
//! --base64  standard base64, padded (read without padding too)        YQn/
//! ```
//!
//! No form leaves a tab or a newline, so `scan`'s `key<TAB>value` lines split one way, and what
//! `scan` prints is what `get` takes. In escaped text an unknown escape (`\q`) is an error,
//! never a literal backslash: a backslash is typed `\\`.
//!
//! # Files (`export`, `import`, `scan --format jsonl`)
//!
//! ```text
//! format  a row                                    a field that is not text
//! jsonl   {"table":"t","key":"k","value":"v"}      key_hex / value_hex (key_base64 /
//!         ("table" only for every table;           value_base64 under --base64); text is
//!         "" is the default table)                 valid UTF-8 with no control character
//!                                                  but tab, newline and carriage return
//! csv     header table,key,value (table only for   an error naming the table and the key
//!         every table), then one record a row,     (in hex): pass --hex (header
//!         RFC 4180 quoting, records end with \n    key_hex,value_hex) or --base64
//!                                                  (key_base64,value_base64)
//! ```
//!
//! Import reads each JSONL field under any of its three names, and a CSV file's encoding from
//! its header. Every form gives the bytes back exactly, so export then import copies any
//! database.
//!
//! # Opening
//!
//! Every command opens the database through `open_to_read` or `open_to_write`: a directory
//! that holds no database is refused before anything is made in it (only `import --create`
//! makes one), so a mistyped DIR never becomes a stray database.

mod codec;
mod csv;
mod export;
mod import;
mod jsonl;
mod output;
mod rows;
mod scan;
mod tables;

pub use export::{ExportArgs, run as export};
pub use import::{ImportArgs, run as import};
pub use scan::{GetArgs, ScanArgs, get, scan};
pub use tables::{TablesArgs, run as tables};

use crate::inspect::{self, CliResult};
use clap::Args;
use std::path::Path;
use tilldb::{Db, Error};

/// How keys and values are written: the flags `--hex` and `--base64`.
#[derive(Args, Debug, Clone, Copy)]
pub struct EncodingArgs {
    /// Keys and values in hex: arguments, TSV and CSV (JSONL writes printable ones as text,
    /// the rest as `key_hex` / `value_hex`, as without the flag).
    #[arg(long, conflicts_with = "base64")]
    hex: bool,
    /// Keys and values in standard base64: arguments, TSV and CSV (JSONL writes printable
    /// ones as text, the rest as `key_base64` / `value_base64`).
    #[arg(long)]
    base64: bool,
}

impl EncodingArgs {
    pub fn encoding(self) -> Encoding {
        match (self.hex, self.base64) {
            (true, _) => Encoding::Hex,
            (_, true) => Encoding::Base64,
            _ => Encoding::Text,
        }
    }
}

/// The form keys and values take on the command line (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Escaped text.
    Text,
    Hex,
    Base64,
}

impl Encoding {
    pub fn encode(self, bytes: &[u8]) -> String {
        match self {
            Encoding::Text => codec::text_encode(bytes),
            Encoding::Hex => codec::hex_encode(bytes),
            Encoding::Base64 => codec::base64_encode(bytes),
        }
    }

    /// The bytes an argument stands for; the error names the argument (`what`).
    pub fn decode(self, text: &str, what: &str) -> CliResult<Vec<u8>> {
        let decoded = match self {
            Encoding::Text => codec::text_decode(text),
            Encoding::Hex => codec::hex_decode(text),
            Encoding::Base64 => codec::base64_decode(text),
        };
        Ok(decoded.map_err(|e| format!("{what}: {e}"))?)
    }

    /// What a CSV column name or JSONL field name ends with in this form.
    pub fn suffix(self) -> &'static str {
        match self {
            Encoding::Text => "",
            Encoding::Hex => "_hex",
            Encoding::Base64 => "_base64",
        }
    }
}

/// A table's name as people read it: `(default)` for the default table (`""`).
pub fn table_label(table: &str) -> String {
    if table.is_empty() {
        "(default)".to_owned()
    } else {
        format!("{table:?}")
    }
}

/// Opens the database in `dir` for `get`, `scan`, `tables` and `export`, refusing (before
/// anything on disk changes) a directory that holds no database, as `till stats` and `till
/// check` do.
///
/// A read-only handle (`Db::open_read_only`): the database may be open in another process,
/// whose commits go on; what is read is the snapshot of its durable commits at open. Nothing
/// on disk changes (a database a crash left is recovered in memory only).
pub fn open_to_read(dir: &Path) -> CliResult<Db> {
    inspect::require_database(dir)?;
    Ok(Db::open_read_only(dir, crate::key::options()?)?)
}

/// Opens the database in `dir` for `import`: a directory that holds none is refused unless
/// `create`, so a typo does not make a stray database.
pub fn open_to_write(dir: &Path, create: bool) -> CliResult<Db> {
    if !create {
        inspect::require_database(dir).map_err(|e| {
            format!("{e}; nothing was imported (--create makes a new database there)")
        })?;
    }
    open(dir)
}

fn open(dir: &Path) -> CliResult<Db> {
    match Db::open(dir, crate::key::options()?) {
        Ok(db) => Ok(db),
        Err(e @ Error::Locked { .. }) => Err(format!(
            "{e}; till imports into a database only while no other process has it open (reading it works live)"
        )
        .into()),
        Err(e) => Err(e.into()),
    }
}

/// Refuses `table` when the database has no such table (the default table always exists),
/// so a mistyped `--table` is an error rather than an empty result.
pub fn require_table(db: &Db, dir: &Path, table: &str) -> CliResult<()> {
    if table.is_empty() {
        return Ok(());
    }
    let tables = db.tables()?;
    if tables.iter().any(|t| t == table) {
        return Ok(());
    }
    let names: Vec<String> = tables.iter().map(|t| table_label(t)).collect();
    Err(format!(
        "{} has no table {} (its named tables: {})",
        dir.display(),
        table_label(table),
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    )
    .into())
}
