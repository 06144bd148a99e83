//! Where rows go and how they are written: standard output or a file, as TSV, JSONL or CSV
//! (the forms in the module doc of `data/mod.rs`). Output is buffered; a reader that goes
//! away (`till scan DIR | head`) ends it quietly, as `cat` ends.

use super::{Encoding, codec, csv, jsonl, table_label};
use crate::inspect::CliResult;
use clap::ValueEnum;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// How rows are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `key<TAB>value`, one row a line (`scan` only).
    Tsv,
    /// One JSON object a line.
    Jsonl,
    /// A header row, then one record a row.
    Csv,
}

/// The formats of `export` and `import` files.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    /// One JSON object a line.
    Jsonl,
    /// A header row, then one record a row (RFC 4180).
    Csv,
}

impl From<FileFormat> for Format {
    fn from(format: FileFormat) -> Format {
        match format {
            FileFormat::Jsonl => Format::Jsonl,
            FileFormat::Csv => Format::Csv,
        }
    }
}

/// Why a row was not written.
#[derive(Debug)]
pub enum WriteError {
    /// The output failed (or its reader went away).
    Io(io::Error),
    /// The row cannot be written in this format: what is wrong.
    Data(String),
}

impl From<io::Error> for WriteError {
    fn from(e: io::Error) -> Self {
        WriteError::Io(e)
    }
}

/// Rows, written in one format to standard output or a file.
pub struct RowWriter {
    out: BufWriter<Box<dyn Write>>,
    /// The file, or `None` for standard output.
    path: Option<PathBuf>,
    /// A second handle of the file, to flush it to the device at the end.
    file: Option<File>,
    format: Format,
    encoding: Encoding,
    /// Whether each row carries its table (export of every table).
    with_table: bool,
}

impl std::fmt::Debug for RowWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RowWriter({:?}, {:?})", self.path, self.format)
    }
}

impl RowWriter {
    /// A writer to `path` (created, or emptied) or, without one, to standard output. A CSV
    /// writer writes its header now.
    pub fn create(
        path: Option<&Path>,
        format: Format,
        encoding: Encoding,
        with_table: bool,
    ) -> CliResult<RowWriter> {
        let (sink, file): (Box<dyn Write>, _) = match path {
            Some(path) => {
                let opened = File::create(path)
                    .and_then(|f| Ok((f.try_clone()?, f)))
                    .map_err(|e| format!("create {}: {e}", path.display()))?;
                (Box::new(opened.0), Some(opened.1))
            }
            None => (Box::new(io::stdout().lock()), None),
        };
        let mut writer = RowWriter {
            out: BufWriter::with_capacity(1 << 16, sink),
            path: path.map(Path::to_path_buf),
            file,
            format,
            encoding,
            with_table,
        };
        if format == Format::Csv {
            let suffix = encoding.suffix();
            let key = format!("key{suffix}");
            let value = format!("value{suffix}");
            let mut header: Vec<&[u8]> = vec![key.as_bytes(), value.as_bytes()];
            if with_table {
                header.insert(0, b"table");
            }
            if let Err(e) = csv::write_record(&mut writer.out, &header) {
                writer.failed(WriteError::Io(e))?;
            }
        }
        Ok(writer)
    }

    /// Writes one row of `table`.
    pub fn write_row(&mut self, table: &str, key: &[u8], value: &[u8]) -> Result<(), WriteError> {
        match self.format {
            Format::Tsv => {
                let encode = |bytes| self.encoding.encode(bytes);
                let line = format!("{}\t{}\n", encode(key), encode(value));
                self.out.write_all(line.as_bytes())?;
            }
            Format::Jsonl => {
                let table = self.with_table.then_some(table);
                let mut line = jsonl::encode_row(table, key, value, self.encoding);
                line.push('\n');
                self.out.write_all(line.as_bytes())?;
            }
            Format::Csv => {
                let key_field = self.csv_field(table, key, key, "key")?;
                let value_field = self.csv_field(table, key, value, "value")?;
                let mut fields: Vec<&[u8]> = vec![&key_field, &value_field];
                if self.with_table {
                    fields.insert(0, table.as_bytes());
                }
                csv::write_record(&mut self.out, &fields)?;
            }
        }
        Ok(())
    }

    /// `bytes` (the key or the value, `what`, of the row with `key`) as a CSV field.
    fn csv_field(
        &self,
        table: &str,
        key: &[u8],
        bytes: &[u8],
        what: &str,
    ) -> Result<Vec<u8>, WriteError> {
        match self.encoding {
            Encoding::Text if std::str::from_utf8(bytes).is_err() => {
                Err(WriteError::Data(format!(
                    "table {}, key {} (hex): the {what} is not UTF-8, and CSV without --hex or \
                     --base64 holds text only; pass --hex or --base64",
                    table_label(table),
                    codec::hex_encode(key)
                )))
            }
            Encoding::Text => Ok(bytes.to_vec()),
            encoding => Ok(encoding.encode(bytes).into_bytes()),
        }
    }

    /// What a failed write means: an error naming the output, or the quiet end of a pipe
    /// whose reader went away (`Ok`, and nothing more is written).
    pub fn failed(&self, e: WriteError) -> CliResult<()> {
        match e {
            WriteError::Io(e) if e.kind() == io::ErrorKind::BrokenPipe && self.path.is_none() => {
                Ok(())
            }
            WriteError::Io(e) => Err(format!("write {}: {e}", self.name()).into()),
            WriteError::Data(what) => Err(what.into()),
        }
    }

    /// Flushes what is buffered (to the device too, for a file).
    pub fn finish(self) -> CliResult<()> {
        let name = self.name();
        match self.out.into_inner() {
            Ok(_) => {}
            Err(e) if e.error().kind() == io::ErrorKind::BrokenPipe && self.file.is_none() => {}
            Err(e) => return Err(format!("write {name}: {}", e.error()).into()),
        }
        if let Some(file) = self.file {
            file.sync_all().map_err(|e| format!("flush {name}: {e}"))?;
        }
        Ok(())
    }

    fn name(&self) -> String {
        self.path
            .as_ref()
            .map_or_else(|| "standard output".to_owned(), |p| p.display().to_string())
    }
}
