//! Keys and values as text: the escaped text form (the default on the command line), hex and
//! base64, each with its exact inverse, and the test for a *printable* field (JSONL's plain
//! `key`/`value`). The rules are in the module doc of `data/mod.rs`.

/// Lower-case hex digits, by nibble.
const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// The standard base64 alphabet (RFC 4648, section 4), by 6-bit group.
const BASE64_ALPHABET: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// `bytes` in the escaped text form: UTF-8 as it is, except `\` as `\\`, tab, newline and
/// carriage return as `\t`, `\n`, `\r`, every other control character (U+0000-U+001F,
/// U+007F-U+009F) and every byte that is not part of valid UTF-8 as `\xNN` per byte. No tab
/// or newline is left, so a key and a value make one line of TSV; `text_decode` inverts it.
#[must_use]
pub fn text_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                c if c.is_control() => {
                    let mut utf8 = [0u8; 4];
                    for b in c.encode_utf8(&mut utf8).bytes() {
                        push_byte_escape(&mut out, b);
                    }
                }
                c => out.push(c),
            }
        }
        for &b in chunk.invalid() {
            push_byte_escape(&mut out, b);
        }
    }
    out
}

fn push_byte_escape(out: &mut String, b: u8) {
    out.push_str("\\x");
    out.push(char::from(HEX_DIGITS[usize::from(b >> 4)]));
    out.push(char::from(HEX_DIGITS[usize::from(b & 0xF)]));
}

/// The bytes `text` stands for in the escaped text form (`text_encode`'s inverse). An
/// unknown escape is an error rather than a literal backslash, so a mistyped argument is
/// never silently read as another key.
pub fn text_decode(text: &str) -> Result<Vec<u8>, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let b = bytes[index];
        if b != b'\\' {
            out.push(b);
            index += 1;
            continue;
        }
        let escape = bytes.get(index + 1).copied();
        let (byte, len) = match escape {
            Some(b'\\') => (b'\\', 2),
            Some(b't') => (b'\t', 2),
            Some(b'n') => (b'\n', 2),
            Some(b'r') => (b'\r', 2),
            Some(b'x') => {
                let digits = bytes.get(index + 2..index + 4).unwrap_or_default();
                match (digits.first(), digits.get(1)) {
                    (Some(&high), Some(&low)) => match (nibble(high), nibble(low)) {
                        (Some(h), Some(l)) => ((h << 4) | l, 4),
                        _ => return Err(bad_escape(text, index)),
                    },
                    _ => return Err(bad_escape(text, index)),
                }
            }
            _ => return Err(bad_escape(text, index)),
        };
        out.push(byte);
        index += len;
    }
    Ok(out)
}

fn bad_escape(text: &str, index: usize) -> String {
    let shown: String = text[index..].chars().take(4).collect();
    format!(
        "bad escape {shown:?} at byte {index} of {text:?}: the escapes are \\\\ \\t \\n \\r \
         and \\xNN (a backslash itself is \\\\)"
    )
}

/// The value of one hex digit, either case.
fn nibble(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

/// `bytes` as lower-case hex, two digits a byte.
#[must_use]
pub fn hex_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(HEX_DIGITS[usize::from(b >> 4)]));
        out.push(char::from(HEX_DIGITS[usize::from(b & 0xF)]));
    }
    out
}

/// The bytes of `text` read as hex (either case, no separators).
pub fn hex_decode(text: &str) -> Result<Vec<u8>, String> {
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return Err(format!(
            "bad hex {text:?}: an odd number of digits ({})",
            digits.len()
        ));
    }
    digits
        .chunks_exact(2)
        .enumerate()
        .map(|(pair, two)| match (nibble(two[0]), nibble(two[1])) {
            (Some(high), Some(low)) => Ok((high << 4) | low),
            _ => Err(format!(
                "bad hex {text:?}: not a hex digit at byte {}",
                pair * 2 + usize::from(nibble(two[0]).is_some())
            )),
        })
        .collect()
}

/// `bytes` in standard base64 with padding (RFC 4648, section 4).
#[must_use]
pub fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let b = [
            group[0],
            group.get(1).copied().unwrap_or(0),
            group.get(2).copied().unwrap_or(0),
        ];
        let bits = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        // A group of n bytes gives n + 1 characters, padded with `=` to four.
        for position in 0..4 {
            if position <= group.len() {
                let sextet = (bits >> (18 - 6 * position)) & 0x3F;
                out.push(char::from(BASE64_ALPHABET[sextet as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The value of one base64 character.
fn sextet(c: u8) -> Option<u32> {
    let value = match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    };
    Some(u32::from(value))
}

/// The bytes of `text` read as standard base64. Padding may be left out; when present it
/// must be right. Unused low bits of the last character must be zero, so every byte string
/// has exactly one spelling (the one `base64_encode` writes, or it without padding).
pub fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    let all = text.as_bytes();
    let unpadded = all.strip_suffix(b"==").or_else(|| all.strip_suffix(b"="));
    let (data, padding) = match unpadded {
        Some(rest) => (rest, all.len() - rest.len()),
        None => (all, 0),
    };
    if padding > 0 && !all.len().is_multiple_of(4) {
        return Err(format!(
            "bad base64 {text:?}: wrong padding for {} characters",
            data.len()
        ));
    }
    if data.len() % 4 == 1 {
        return Err(format!(
            "bad base64 {text:?}: its length ({}) is not a length base64 has",
            all.len()
        ));
    }
    let mut out = Vec::with_capacity(data.len() / 4 * 3 + 2);
    for (group_index, group) in data.chunks(4).enumerate() {
        let mut bits = 0u32;
        for (i, &c) in group.iter().enumerate() {
            let value = sextet(c).ok_or_else(|| {
                format!(
                    "bad base64 {text:?}: {:?} at byte {} is not in the base64 alphabet",
                    char::from(c),
                    group_index * 4 + i
                )
            })?;
            bits |= value << (18 - 6 * i);
        }
        // A group of n characters holds n - 1 bytes (n = 2, 3 or 4).
        let byte_count = group.len() - 1;
        let [b2, b1, b0, _] = bits.to_le_bytes();
        let decoded = [b0, b1, b2];
        let unused = match byte_count {
            1 => u32::from(b1) | u32::from(b2),
            2 => u32::from(b2),
            _ => 0,
        };
        if unused != 0 {
            return Err(format!(
                "bad base64 {text:?}: the last character has bits set that hold no byte"
            ));
        }
        out.extend_from_slice(&decoded[..byte_count]);
    }
    Ok(out)
}

/// True when `bytes` is valid UTF-8 with no control character other than tab, newline and
/// carriage return: what JSONL writes as a plain `key` or `value` string.
#[must_use]
pub fn is_printable(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes).is_ok_and(|text| {
        !text
            .chars()
            .any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Byte strings every encoding must give back exactly: empty, every byte value, invalid
    /// UTF-8, controls (C0, DEL, C1), backslashes, multi-byte characters.
    fn samples() -> Vec<Vec<u8>> {
        let mut samples = vec![
            Vec::new(),
            b"plain text".to_vec(),
            b"tab\there\nnewline\r\\back\\slash".to_vec(),
            b"\x00\x01\x7f\xff\xfe".to_vec(),
            "caf\u{e9} \u{85} \u{1F600} \u{2028}".as_bytes().to_vec(),
            vec![0xC3],
            vec![0xE2, 0x82],
            b"\\x41".to_vec(),
        ];
        samples.push((0..=255).collect());
        for len in 1..=7 {
            samples.push((0..len).map(|i| 0xF0 ^ (i * 37)).collect());
        }
        samples
    }

    #[test]
    fn text_escapes_exactly_what_is_not_plain() {
        assert_eq!(text_encode(b"abc"), "abc");
        assert_eq!(text_encode("café".as_bytes()), "café");
        assert_eq!(text_encode(b"a\tb\nc\rd\\e"), "a\\tb\\nc\\rd\\\\e");
        assert_eq!(text_encode(b"\x00\x1b\x7f"), "\\x00\\x1b\\x7f");
        assert_eq!(text_encode(b"\xff\xc3"), "\\xff\\xc3");
        assert_eq!(
            text_encode("\u{85}".as_bytes()),
            "\\xc2\\x85",
            "a C1 control"
        );
        assert_eq!(text_encode(b"\\x41"), "\\\\x41");
    }

    #[test]
    fn every_encoding_round_trips() {
        for bytes in samples() {
            assert_eq!(text_decode(&text_encode(&bytes)), Ok(bytes.clone()));
            assert_eq!(hex_decode(&hex_encode(&bytes)), Ok(bytes.clone()));
            assert_eq!(base64_decode(&base64_encode(&bytes)), Ok(bytes.clone()));
            let encoded = text_encode(&bytes);
            assert!(!encoded.contains(['\t', '\n', '\r']), "{encoded:?}");
        }
    }

    #[test]
    fn text_decode_refuses_unknown_escapes() {
        assert_eq!(text_decode("a\\x4A"), Ok(b"aJ".to_vec()));
        for bad in ["\\", "a\\q", "\\x4", "\\xg0", "C:\\path"] {
            let e = text_decode(bad).expect_err(bad);
            assert!(e.contains("bad escape"), "{e}");
        }
    }

    #[test]
    fn hex_known_answers_and_errors() {
        assert_eq!(hex_encode(b"\x00\xab\xff"), "00abff");
        assert_eq!(hex_decode("00ABff"), Ok(b"\x00\xab\xff".to_vec()));
        assert!(hex_decode("abc").expect_err("odd").contains("odd number"));
        assert!(hex_decode("0g").expect_err("g").contains("at byte 1"));
        assert!(hex_decode("g0").expect_err("g").contains("at byte 0"));
    }

    /// RFC 4648, section 10.
    #[test]
    fn base64_known_answers() {
        let vectors = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in vectors {
            assert_eq!(base64_encode(plain.as_bytes()), encoded);
            assert_eq!(base64_decode(encoded), Ok(plain.as_bytes().to_vec()));
            let unpadded = encoded.trim_end_matches('=');
            assert_eq!(base64_decode(unpadded), Ok(plain.as_bytes().to_vec()));
        }
        assert_eq!(base64_encode(b"\xff\xfe"), "//4=");
    }

    #[test]
    fn base64_refuses_what_is_not_canonical() {
        for bad in ["Z", "Zg=", "Zh==", "Zm9v!", "Zm9vY===", "Zm=9"] {
            assert!(base64_decode(bad).is_err(), "{bad} decoded");
        }
    }

    #[test]
    fn printable_allows_text_whitespace_only() {
        assert!(is_printable(b""));
        assert!(is_printable("line one\nline\ttwo\r\ncaf\u{e9}".as_bytes()));
        assert!(!is_printable(b"\x00"));
        assert!(!is_printable(b"\x1b[0m"));
        assert!(!is_printable("\u{85}".as_bytes()));
        assert!(!is_printable(b"\xff"));
        assert!(
            !is_printable(&[0, 0, 0, 0, 0, 0, 0, 42]),
            "a big-endian integer"
        );
    }
}
