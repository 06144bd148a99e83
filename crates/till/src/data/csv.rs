//! CSV as RFC 4180 has it, over bytes: a field that holds a comma, a double quote, a carriage
//! return or a newline is written in double quotes, a quote in it doubled; records end with
//! `\n` (`\r\n` is read too). The reader streams one record at a time and says on which line
//! of the file each begins, so an error names it.

use std::io::{self, BufRead, Write};

/// Writes one record: the fields, quoted where they must be, then `\n`.
pub fn write_record(out: &mut dyn Write, fields: &[&[u8]]) -> io::Result<()> {
    for (index, field) in fields.iter().enumerate() {
        if index > 0 {
            out.write_all(b",")?;
        }
        write_field(out, field)?;
    }
    out.write_all(b"\n")
}

fn write_field(out: &mut dyn Write, field: &[u8]) -> io::Result<()> {
    if !field
        .iter()
        .any(|b| matches!(b, b',' | b'"' | b'\r' | b'\n'))
    {
        return out.write_all(field);
    }
    out.write_all(b"\"")?;
    for part in field.split_inclusive(|&b| b == b'"') {
        out.write_all(part)?;
        if part.ends_with(b"\"") {
            out.write_all(b"\"")?;
        }
    }
    out.write_all(b"\"")
}

/// A record that does not parse, and the line of the file where it is wrong.
#[derive(Debug, PartialEq, Eq)]
pub struct CsvError {
    pub line: u64,
    pub what: String,
}

/// One record: the line of the file it begins on (from 1), and its fields.
#[derive(Debug, PartialEq, Eq)]
pub struct Record {
    pub line: u64,
    pub fields: Vec<Vec<u8>>,
}

/// Where the parser is within a record.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// At the start of a field.
    FieldStart,
    /// In a field without quotes.
    Unquoted,
    /// Inside quotes.
    Quoted,
    /// Just after a quote inside quotes: a second quote is a literal one, anything else
    /// closes the field.
    QuoteInQuoted,
}

/// Reads records one at a time from `input`.
#[derive(Debug)]
pub struct CsvReader<R> {
    input: R,
    /// Lines read so far.
    line: u64,
}

impl<R: BufRead> CsvReader<R> {
    pub fn new(input: R) -> Self {
        CsvReader { input, line: 0 }
    }

    /// The next record, `None` at the end of the input. Empty lines between records are
    /// skipped (no record of ours has fewer than two fields).
    pub fn next_record(&mut self) -> Result<Option<Record>, CsvError> {
        let mut buf = Vec::new();
        loop {
            buf.clear();
            if self.read_line(&mut buf)? == 0 {
                return Ok(None);
            }
            if !matches!(buf.as_slice(), b"\n" | b"\r\n") {
                break;
            }
        }
        let start = self.line;
        let mut fields = Vec::new();
        let mut field = Vec::new();
        let mut state = State::FieldStart;
        let mut index = 0;
        loop {
            let Some(&b) = buf.get(index) else {
                if state != State::Quoted {
                    // The input's last line, without a newline.
                    fields.push(field);
                    return Ok(Some(Record {
                        line: start,
                        fields,
                    }));
                }
                // A newline inside quotes is part of the field: on to the next line.
                buf.clear();
                index = 0;
                if self.read_line(&mut buf)? == 0 {
                    return Err(CsvError {
                        line: start,
                        what: "a quoted field is not closed before the end of the file".into(),
                    });
                }
                continue;
            };
            index += 1;
            let at_line_end = b == b'\n' || (b == b'\r' && buf.get(index) == Some(&b'\n'));
            match (state, b) {
                (State::Quoted, b'"') => state = State::QuoteInQuoted,
                (State::Quoted, _) => field.push(b),
                (State::QuoteInQuoted, b'"') => {
                    field.push(b'"');
                    state = State::Quoted;
                }
                (State::FieldStart, b'"') => state = State::Quoted,
                (_, b',') => {
                    fields.push(std::mem::take(&mut field));
                    state = State::FieldStart;
                }
                _ if at_line_end => {
                    fields.push(field);
                    return Ok(Some(Record {
                        line: start,
                        fields,
                    }));
                }
                (State::QuoteInQuoted, _) => {
                    return Err(self.error(format!(
                        "{:?} after a closing quote (a quote inside a quoted field is written \
                         twice)",
                        char::from(b)
                    )));
                }
                (State::Unquoted, b'"') => {
                    return Err(self.error(
                        "a quote inside a field without quotes (quote the whole field and \
                         double the quote)"
                            .into(),
                    ));
                }
                (State::FieldStart | State::Unquoted, b'\r') => {
                    return Err(
                        self.error("a carriage return outside quotes, not before a newline".into())
                    );
                }
                (State::FieldStart | State::Unquoted, _) => {
                    field.push(b);
                    state = State::Unquoted;
                }
            }
        }
    }

    fn read_line(&mut self, buf: &mut Vec<u8>) -> Result<usize, CsvError> {
        let read = self.input.read_until(b'\n', buf).map_err(|e| CsvError {
            line: self.line + 1,
            what: format!("read: {e}"),
        })?;
        if read > 0 {
            self.line += 1;
        }
        Ok(read)
    }

    fn error(&self, what: String) -> CsvError {
        CsvError {
            line: self.line,
            what,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(records: &[&[&[u8]]]) -> Vec<u8> {
        let mut out = Vec::new();
        for fields in records {
            write_record(&mut out, fields).expect("write to a Vec");
        }
        out
    }

    fn read_all(input: &[u8]) -> Result<Vec<Record>, CsvError> {
        let mut reader = CsvReader::new(input);
        let mut records = Vec::new();
        while let Some(record) = reader.next_record()? {
            records.push(record);
        }
        Ok(records)
    }

    #[test]
    fn quotes_only_what_needs_quotes() {
        let out = written(&[
            &[b"key", b"value"],
            &[b"a,b", b"say \"hi\""],
            &[b"two\nlines", b"cr\r"],
            &[b"", b" spaced "],
        ]);
        assert_eq!(
            String::from_utf8(out).expect("utf-8"),
            "key,value\n\"a,b\",\"say \"\"hi\"\"\"\n\"two\nlines\",\"cr\r\"\n, spaced \n"
        );
    }

    #[test]
    fn reads_back_what_it_writes_with_the_line_of_each_record() {
        let rows: Vec<[Vec<u8>; 2]> = vec![
            [b"key".to_vec(), b"value".to_vec()],
            [b"a,b".to_vec(), b"\"\"".to_vec()],
            [b"two\nlines\r\nand more".to_vec(), b"".to_vec()],
            [b"".to_vec(), b"\x00\xff,".to_vec()],
            [b"last".to_vec(), b"\"".to_vec()],
        ];
        let mut out = Vec::new();
        for [k, v] in &rows {
            write_record(&mut out, &[k, v]).expect("write to a Vec");
        }
        let records = read_all(&out).expect("parse");
        let fields: Vec<Vec<Vec<u8>>> = records.iter().map(|r| r.fields.clone()).collect();
        let expected: Vec<Vec<Vec<u8>>> = rows.iter().map(|r| r.to_vec()).collect();
        assert_eq!(fields, expected);
        let lines: Vec<u64> = records.iter().map(|r| r.line).collect();
        assert_eq!(lines, [1, 2, 3, 6, 7], "record 3 spans lines 3 to 5");
    }

    #[test]
    fn reads_crlf_a_missing_last_newline_and_skips_empty_lines() {
        let records = read_all(b"k,v\r\n\r\na,\"b\"\r\n\nc,d").expect("parse");
        let fields: Vec<_> = records.iter().map(|r| (r.line, r.fields.clone())).collect();
        assert_eq!(
            fields,
            [
                (1, vec![b"k".to_vec(), b"v".to_vec()]),
                (3, vec![b"a".to_vec(), b"b".to_vec()]),
                (5, vec![b"c".to_vec(), b"d".to_vec()]),
            ]
        );
    }

    #[test]
    fn malformed_records_name_their_line() {
        let cases: [(&[u8], u64, &str); 4] = [
            (b"k,v\na\"b,c\n", 2, "a quote inside a field"),
            (b"k,v\n\"a\"b,c\n", 2, "after a closing quote"),
            (b"k,v\nx,y\n\"open,\nstill open\n", 3, "not closed"),
            (b"k,v\na\rb,c\n", 2, "carriage return"),
        ];
        for (input, line, what) in cases {
            let e = read_all(input).expect_err(what);
            assert_eq!(e.line, line, "{e:?}");
            assert!(e.what.contains(what), "{e:?}");
        }
    }
}
