//! JSONL rows: one JSON object a line, `{"table":…,"key":…,"value":…}`. Each of the key and
//! the value is written under the one name that holds it exactly (`key` as a JSON string
//! when printable, else `key_hex` or `key_base64`); import reads any of the three.

use super::Encoding;
use super::codec::{self, base64_decode, hex_decode, is_printable};
use std::fmt::Write as _;

/// A row read from a file: its table (`None`: the file does not say), key and value.
#[derive(Debug, PartialEq, Eq)]
pub struct Row {
    pub table: Option<String>,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

/// One row as a JSON line, without the newline. `table` is written when given (`""` is the
/// default table). A key or value that is not printable is written as `key_base64` under
/// `Encoding::Base64`, else as `key_hex`.
#[must_use]
pub fn encode_row(table: Option<&str>, key: &[u8], value: &[u8], encoding: Encoding) -> String {
    let mut line = String::with_capacity(key.len() + value.len() + 32);
    line.push('{');
    if let Some(table) = table {
        line.push_str("\"table\":");
        push_json_string(&mut line, table);
        line.push(',');
    }
    push_field(&mut line, "key", key, encoding);
    line.push(',');
    push_field(&mut line, "value", value, encoding);
    line.push('}');
    line
}

fn push_field(line: &mut String, name: &str, bytes: &[u8], encoding: Encoding) {
    match std::str::from_utf8(bytes) {
        Ok(text) if is_printable(bytes) => {
            let _ = write!(line, "\"{name}\":");
            push_json_string(line, text);
        }
        _ if encoding == Encoding::Base64 => {
            let _ = write!(
                line,
                "\"{name}_base64\":\"{}\"",
                codec::base64_encode(bytes)
            );
        }
        _ => {
            let _ = write!(line, "\"{name}_hex\":\"{}\"", codec::hex_encode(bytes));
        }
    }
}

fn push_json_string(line: &mut String, text: &str) {
    line.push_str(&serde_json::Value::from(text).to_string());
}

/// The row in one JSON line. Unknown fields are refused (a misspelt `vaule` must not import
/// rows without values), and so is a key or value given twice.
pub fn decode_row(line: &str) -> Result<Row, String> {
    let value: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let serde_json::Value::Object(fields) = value else {
        return Err("not a JSON object".into());
    };
    let mut table = None;
    let (mut key, mut value) = (None, None);
    for (name, field) in &fields {
        let text = field
            .as_str()
            .ok_or_else(|| format!("field {name:?} is not a string"))?;
        let (slot, decoded) = match name.as_str() {
            "table" => {
                table = Some(text.to_owned());
                continue;
            }
            "key" => (&mut key, Ok(text.as_bytes().to_vec())),
            "key_hex" => (&mut key, hex_decode(text)),
            "key_base64" => (&mut key, base64_decode(text)),
            "value" => (&mut value, Ok(text.as_bytes().to_vec())),
            "value_hex" => (&mut value, hex_decode(text)),
            "value_base64" => (&mut value, base64_decode(text)),
            _ => {
                return Err(format!(
                    "unknown field {name:?} (a row has table, key | key_hex | key_base64 and \
                     value | value_hex | value_base64)"
                ));
            }
        };
        if slot.is_some() {
            return Err(format!("field {name:?} gives the {} twice", kind_of(name)));
        }
        *slot = Some(decoded.map_err(|e| format!("field {name:?}: {e}"))?);
    }
    Ok(Row {
        table,
        key: key.ok_or("no key (key, key_hex or key_base64)")?,
        value: value.ok_or("no value (value, value_hex or value_base64)")?,
    })
}

fn kind_of(name: &str) -> &'static str {
    if name.starts_with("key") {
        "key"
    } else {
        "value"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_fields_are_strings_and_the_rest_hex_or_base64() {
        assert_eq!(
            encode_row(None, b"k1", b"two\nlines", Encoding::Text),
            r#"{"key":"k1","value":"two\nlines"}"#
        );
        assert_eq!(
            encode_row(
                Some(""),
                b"\x00\x01",
                "caf\u{e9}".as_bytes(),
                Encoding::Text
            ),
            r#"{"table":"","key_hex":"0001","value":"café"}"#
        );
        assert_eq!(
            encode_row(Some("t"), b"k", b"\xff\xfe", Encoding::Hex),
            r#"{"table":"t","key":"k","value_hex":"fffe"}"#
        );
        assert_eq!(
            encode_row(None, b"\x1b", b"\xff\xfe", Encoding::Base64),
            r#"{"key_base64":"Gw==","value_base64":"//4="}"#
        );
        assert_eq!(
            encode_row(None, br#"say "hi" \ "#, b"", Encoding::Text),
            r#"{"key":"say \"hi\" \\ ","value":""}"#
        );
    }

    #[test]
    fn every_spelling_reads_back_exactly() {
        let samples: [&[u8]; 5] = [b"", b"text", b"\x00\xff", b"tab\tnl\n", b"\xc3\xa9\x85"];
        for encoding in [Encoding::Text, Encoding::Hex, Encoding::Base64] {
            for key in samples {
                for value in samples {
                    let line = encode_row(Some("t"), key, value, encoding);
                    let row = decode_row(&line).expect("decode");
                    assert_eq!(row.table.as_deref(), Some("t"), "{line}");
                    assert_eq!((row.key.as_slice(), row.value.as_slice()), (key, value));
                }
            }
        }
        let row = decode_row(r#"{"value_base64":"AA==","key":"k"}"#).expect("decode");
        assert_eq!(
            row,
            Row {
                table: None,
                key: b"k".to_vec(),
                value: vec![0],
            }
        );
    }

    #[test]
    fn malformed_rows_say_what_is_wrong() {
        let cases = [
            (r#"{"key":"k","value":"v""#, "not JSON"),
            ("[1, 2]", "not a JSON object"),
            (r#"{"key":"k"}"#, "no value"),
            (r#"{"value":"v"}"#, "no key"),
            (r#"{"key":"k","vaule":"v"}"#, "unknown field \"vaule\""),
            (
                r#"{"key":"k","key_hex":"00","value":""}"#,
                "gives the key twice",
            ),
            (
                r#"{"key":"k","value_hex":"0g"}"#,
                "field \"value_hex\": bad hex",
            ),
            (
                r#"{"key_base64":"Zh==","value":""}"#,
                "field \"key_base64\": bad base64",
            ),
            (r#"{"key":1,"value":""}"#, "field \"key\" is not a string"),
        ];
        for (line, what) in cases {
            let e = decode_row(line).expect_err(line);
            assert!(e.contains(what), "{line}: {e}");
        }
    }
}
