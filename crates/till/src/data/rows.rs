//! Reading rows from an `import` file, one at a time (never the whole file in memory), each
//! with the line it begins on, so every error names the line: JSONL (`jsonl.rs`) or CSV
//! (`csv.rs`, the encoding of each column from the header).

use super::codec::{base64_decode, hex_decode};
use super::csv::{CsvReader, Record};
use super::jsonl::{self, Row};
use super::output::FileFormat;
use std::io::BufRead;

/// A line that does not read as a row: where, and what is wrong.
#[derive(Debug, PartialEq, Eq)]
pub struct LineError {
    pub line: u64,
    pub what: String,
}

/// Where each CSV column is, and how its field is encoded.
#[derive(Debug, Clone, Copy)]
struct Columns {
    table: Option<usize>,
    key: (usize, ColumnEncoding),
    value: (usize, ColumnEncoding),
    count: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ColumnEncoding {
    /// The field's bytes as they are.
    Text,
    Hex,
    Base64,
}

/// The rows of one file.
#[derive(Debug)]
pub struct Rows<R>(Source<R>);

#[derive(Debug)]
enum Source<R> {
    Jsonl {
        input: R,
        line: u64,
    },
    Csv {
        reader: CsvReader<R>,
        /// From the header, once read.
        columns: Option<Columns>,
    },
}

impl<R: BufRead> Rows<R> {
    pub fn new(input: R, format: FileFormat) -> Self {
        Rows(match format {
            FileFormat::Jsonl => Source::Jsonl { input, line: 0 },
            FileFormat::Csv => Source::Csv {
                reader: CsvReader::new(input),
                columns: None,
            },
        })
    }

    /// The next row and its line; `None` at the end of the file.
    pub fn next_row(&mut self) -> Result<Option<(u64, Row)>, LineError> {
        match &mut self.0 {
            Source::Jsonl { input, line } => next_jsonl(input, line),
            Source::Csv { reader, columns } => next_csv(reader, columns),
        }
    }
}

fn next_jsonl(input: &mut impl BufRead, line: &mut u64) -> Result<Option<(u64, Row)>, LineError> {
    let mut bytes = Vec::new();
    loop {
        bytes.clear();
        let read = input.read_until(b'\n', &mut bytes).map_err(|e| LineError {
            line: *line + 1,
            what: format!("read: {e}"),
        })?;
        if read == 0 {
            return Ok(None);
        }
        *line += 1;
        let text = std::str::from_utf8(&bytes).map_err(|e| LineError {
            line: *line,
            what: format!("not UTF-8 (at byte {} of the line)", e.valid_up_to()),
        })?;
        let text = text.trim_ascii();
        if text.is_empty() {
            continue;
        }
        return match jsonl::decode_row(text) {
            Ok(row) => Ok(Some((*line, row))),
            Err(what) => Err(LineError { line: *line, what }),
        };
    }
}

fn next_csv(
    reader: &mut CsvReader<impl BufRead>,
    columns: &mut Option<Columns>,
) -> Result<Option<(u64, Row)>, LineError> {
    let error = |e: super::csv::CsvError| LineError {
        line: e.line,
        what: e.what,
    };
    let Some(record) = reader.next_record().map_err(error)? else {
        return Ok(None);
    };
    if let Some(columns) = columns {
        return csv_row(&record, *columns).map(Some);
    }
    // The first record is the header.
    let header = header_columns(&record)?;
    *columns = Some(header);
    let Some(record) = reader.next_record().map_err(error)? else {
        return Ok(None);
    };
    csv_row(&record, header).map(Some)
}

/// The columns a header names: `table` (optional), `key`, `value`, each of the last two
/// plain or ending in `_hex` or `_base64`, in any order.
fn header_columns(header: &Record) -> Result<Columns, LineError> {
    let error = |what: String| LineError {
        line: header.line,
        what,
    };
    let (mut table, mut key, mut value) = (None, None, None);
    for (index, name) in header.fields.iter().enumerate() {
        // A byte-order mark, which some spreadsheets write, is not part of the first name.
        let name = match index {
            0 => name.strip_prefix("\u{feff}".as_bytes()).unwrap_or(name),
            _ => name,
        };
        let (slot, found) = match name {
            b"table" => (&mut table, None),
            b"key" => (&mut key, Some(ColumnEncoding::Text)),
            b"key_hex" => (&mut key, Some(ColumnEncoding::Hex)),
            b"key_base64" => (&mut key, Some(ColumnEncoding::Base64)),
            b"value" => (&mut value, Some(ColumnEncoding::Text)),
            b"value_hex" => (&mut value, Some(ColumnEncoding::Hex)),
            b"value_base64" => (&mut value, Some(ColumnEncoding::Base64)),
            _ => {
                return Err(error(format!(
                    "the header names a column {:?}: a CSV file for import has the columns \
                     table (optional), key | key_hex | key_base64 and value | value_hex | \
                     value_base64",
                    String::from_utf8_lossy(name)
                )));
            }
        };
        if slot.is_some() {
            return Err(error(format!(
                "the header names the column {:?} twice",
                String::from_utf8_lossy(name)
            )));
        }
        *slot = Some((index, found.unwrap_or(ColumnEncoding::Text)));
    }
    let missing = |what: &str| error(format!("the header has no {what} column"));
    Ok(Columns {
        table: table.map(|(index, _)| index),
        key: key.ok_or_else(|| missing("key (key, key_hex or key_base64)"))?,
        value: value.ok_or_else(|| missing("value (value, value_hex or value_base64)"))?,
        count: header.fields.len(),
    })
}

fn csv_row(record: &Record, columns: Columns) -> Result<(u64, Row), LineError> {
    let error = |what: String| LineError {
        line: record.line,
        what,
    };
    if record.fields.len() != columns.count {
        return Err(error(format!(
            "{} fields, and the header has {}",
            record.fields.len(),
            columns.count
        )));
    }
    let field = |(index, encoding): (usize, ColumnEncoding), name: &str| {
        let bytes: &[u8] = &record.fields[index];
        let decoded = match encoding {
            ColumnEncoding::Text => return Ok(bytes.to_vec()),
            ColumnEncoding::Hex => std::str::from_utf8(bytes)
                .map_err(|_| "bad hex: not UTF-8".to_owned())
                .and_then(hex_decode),
            ColumnEncoding::Base64 => std::str::from_utf8(bytes)
                .map_err(|_| "bad base64: not UTF-8".to_owned())
                .and_then(base64_decode),
        };
        decoded.map_err(|e| error(format!("column {name}: {e}")))
    };
    let table = match columns.table {
        Some(index) => Some(
            String::from_utf8(record.fields[index].clone())
                .map_err(|_| error("the table name is not UTF-8".into()))?,
        ),
        None => None,
    };
    let row = Row {
        table,
        key: field(columns.key, "key")?,
        value: field(columns.value, "value")?,
    };
    Ok((record.line, row))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(input: &[u8], format: FileFormat) -> Result<Vec<(u64, Row)>, LineError> {
        let mut rows = Rows::new(input, format);
        let mut out = Vec::new();
        while let Some(row) = rows.next_row()? {
            out.push(row);
        }
        Ok(out)
    }

    fn row(table: Option<&str>, key: &[u8], value: &[u8]) -> Row {
        Row {
            table: table.map(str::to_owned),
            key: key.to_vec(),
            value: value.to_vec(),
        }
    }

    #[test]
    fn csv_columns_are_read_by_their_names() {
        let input = b"\xef\xbb\xbfvalue_base64,table,key_hex\r\nAP8=,t,0001\n\"\",,\n";
        assert_eq!(
            read_all(input, FileFormat::Csv),
            Ok(vec![
                (2, row(Some("t"), b"\x00\x01", b"\x00\xff")),
                (3, row(Some(""), b"", b"")),
            ])
        );
        let plain = read_all(b"key,value\n\xff,a\"b\n", FileFormat::Csv);
        assert!(plain.is_err(), "a quote in an unquoted field");
        let plain = read_all(b"key,value\n\xff,\"a\"\"b\"\n", FileFormat::Csv);
        assert_eq!(plain, Ok(vec![(2, row(None, b"\xff", b"a\"b"))]));
    }

    #[test]
    fn csv_errors_name_the_line() {
        let cases: [(&[u8], u64, &str); 5] = [
            (b"key,value\na,b\nc\n", 3, "1 fields, and the header has 2"),
            (b"key,value,extra\n", 1, "names a column \"extra\""),
            (b"key,key_hex,value\n", 1, "\"key_hex\" twice"),
            (b"table,key\n", 1, "no value"),
            (b"key_hex,value\n00,a\n0g,b\n", 3, "column key: bad hex"),
        ];
        for (input, line, what) in cases {
            let e = read_all(input, FileFormat::Csv).expect_err(what);
            assert_eq!(e.line, line, "{e:?}");
            assert!(e.what.contains(what), "{e:?}");
        }
    }

    #[test]
    fn jsonl_skips_blank_lines_and_names_bad_ones() {
        let input = b"{\"key\":\"a\",\"value\":\"1\"}\n\n  \r\n{\"key\":\"b\",\"value\":\"2\"}";
        assert_eq!(
            read_all(input, FileFormat::Jsonl),
            Ok(vec![(1, row(None, b"a", b"1")), (4, row(None, b"b", b"2"))])
        );
        let e = read_all(
            b"{\"key\":\"a\",\"value\":\"1\"}\n{\"key\":\xff}\n",
            FileFormat::Jsonl,
        )
        .expect_err("not UTF-8");
        assert_eq!(
            e,
            LineError {
                line: 2,
                what: "not UTF-8 (at byte 7 of the line)".into()
            }
        );
    }
}
