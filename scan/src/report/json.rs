//! Hand-written JSON for byte strings that need not be UTF-8.
//!
//! Paths and secrets are raw bytes. JSON strings are Unicode, so a byte string
//! that is not valid UTF-8 needs a convention. We use PEP 383's
//! *surrogateescape*: every byte that is not part of a valid UTF-8 sequence is
//! written as the lone low surrogate `\udcXX`, where `XX` is the byte (always
//! 0x80..=0xFF, because bytes below 0x80 are valid UTF-8 on their own). Valid
//! UTF-8 can never encode a surrogate, so the mapping is one-to-one, and
//! Python's `os.fsencode(json.loads(s))` gives back the original bytes.
//!
//! `serde_json` refuses lone surrogates both ways, so this module has its own
//! writer ([`write_bytes_str`]) and its own small reader ([`parse_stream`]),
//! which the baseline loader uses. The reader is strict JSON (RFC 8259) plus
//! that one extension; it caps nesting at [`MAX_DEPTH`] so a hostile file
//! cannot overflow the stack.

use std::fmt;
use std::io::{self, Write};

/// The deepest nesting of arrays and objects [`parse_stream`] accepts.
///
/// Our reports nest three levels (`{"findings": [{...}]}`); 64 leaves room for
/// anything a person writes by hand and still bounds the recursion.
pub const MAX_DEPTH: usize = 64;

/// Writes `bytes` as a quoted JSON string, escaping invalid UTF-8 as `\udcXX`.
pub fn write_bytes_str(out: &mut dyn Write, bytes: &[u8]) -> io::Result<()> {
    let mut buf = Vec::with_capacity(bytes.len() + 2);
    push_bytes_str(&mut buf, bytes);
    out.write_all(&buf)
}

/// Writes `s` as a quoted JSON string (always valid UTF-8: no surrogates).
pub fn write_str(out: &mut dyn Write, s: &str) -> io::Result<()> {
    write_bytes_str(out, s.as_bytes())
}

/// Appends `bytes` as a quoted JSON string to `buf` (see [`write_bytes_str`]).
pub fn push_bytes_str(buf: &mut Vec<u8>, bytes: &[u8]) {
    buf.push(b'"');
    for chunk in bytes.utf8_chunks() {
        push_escaped_utf8(buf, chunk.valid());
        for &b in chunk.invalid() {
            // Every invalid byte is >= 0x80: ASCII is always valid.
            debug_assert!(b >= 0x80);
            let _ = write!(buf, "\\udc{b:02x}");
        }
    }
    buf.push(b'"');
}

fn push_escaped_utf8(buf: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f | 0x7f => {
                buf.extend_from_slice(&bytes[start..i]);
                let _ = write!(buf, "\\u{b:04x}");
                start = i + 1;
                continue;
            }
            _ => continue,
        };
        buf.extend_from_slice(&bytes[start..i]);
        buf.extend_from_slice(esc);
        start = i + 1;
    }
    buf.extend_from_slice(&bytes[start..]);
}

/// A parsed JSON value. Strings are bytes: `\udcXX` escapes decode to the raw
/// byte `XX`, everything else to its UTF-8 encoding.
#[derive(Clone, Debug, PartialEq)]
pub enum JsonValue {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, kept as its source text.
    Number(String),
    /// A string, as bytes.
    String(Vec<u8>),
    /// An array.
    Array(Vec<JsonValue>),
    /// An object, members in source order (duplicates kept).
    Object(Vec<(Vec<u8>, JsonValue)>),
}

impl JsonValue {
    /// The first member named `key`, if this is an object that has one.
    pub fn get(&self, key: &str) -> Option<&JsonValue> {
        match self {
            JsonValue::Object(members) => members
                .iter()
                .find(|(k, _)| k == key.as_bytes())
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// The bytes of a string value.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            JsonValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// A string value that is valid UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        self.as_bytes().and_then(|b| std::str::from_utf8(b).ok())
    }

    /// A number that is a non-negative integer fitting in a `u64`.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            JsonValue::Number(n) => n.parse().ok(),
            _ => None,
        }
    }

    /// The elements of an array.
    pub fn as_array(&self) -> Option<&[JsonValue]> {
        match self {
            JsonValue::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// Why a document did not parse, with the byte offset where it went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonError {
    /// Byte offset into the input.
    pub offset: usize,
    /// What was wrong there.
    pub reason: &'static str,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.reason, self.offset)
    }
}

impl std::error::Error for JsonError {}

/// Parses a sequence of JSON values separated by whitespace: one value for a
/// `json` report, one per line for `jsonl`, none for an empty `jsonl` file.
pub fn parse_stream(input: &[u8]) -> Result<Vec<JsonValue>, JsonError> {
    let mut p = Parser { input, pos: 0 };
    let mut values = Vec::new();
    loop {
        p.skip_ws();
        if p.pos == input.len() {
            return Ok(values);
        }
        values.push(p.value(0)?);
    }
}

/// Parses exactly one JSON value (surrounding whitespace allowed).
pub fn parse_one(input: &[u8]) -> Result<JsonValue, JsonError> {
    let mut p = Parser { input, pos: 0 };
    p.skip_ws();
    let v = p.value(0)?;
    p.skip_ws();
    if p.pos != input.len() {
        return Err(p.err("trailing characters after the value"));
    }
    Ok(v)
}

struct Parser<'a> {
    input: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn err(&self, reason: &'static str) -> JsonError {
        JsonError {
            offset: self.pos,
            reason,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.input.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn expect(&mut self, b: u8, reason: &'static str) -> Result<(), JsonError> {
        if self.peek() == Some(b) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err(reason))
        }
    }

    fn value(&mut self, depth: usize) -> Result<JsonValue, JsonError> {
        match self.peek() {
            None => Err(self.err("unexpected end of input")),
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string().map(JsonValue::String),
            Some(b't') => self.literal(b"true", JsonValue::Bool(true)),
            Some(b'f') => self.literal(b"false", JsonValue::Bool(false)),
            Some(b'n') => self.literal(b"null", JsonValue::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.err("expected a JSON value")),
        }
    }

    fn literal(&mut self, word: &[u8], v: JsonValue) -> Result<JsonValue, JsonError> {
        if self.input[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(v)
        } else {
            Err(self.err("expected a JSON value"))
        }
    }

    fn number(&mut self) -> Result<JsonValue, JsonError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.err("malformed number")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.err("malformed number"));
            }
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.err("malformed number"));
            }
            self.digits();
        }
        // The slice is ASCII by construction.
        let text = String::from_utf8_lossy(&self.input[start..self.pos]).into_owned();
        Ok(JsonValue::Number(text))
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
    }

    fn array(&mut self, depth: usize) -> Result<JsonValue, JsonError> {
        if depth > MAX_DEPTH {
            return Err(self.err("nested too deeply"));
        }
        self.pos += 1; // '['
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(JsonValue::Array(items));
        }
        loop {
            self.skip_ws();
            items.push(self.value(depth)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(JsonValue::Array(items));
                }
                _ => return Err(self.err("expected ',' or ']'")),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<JsonValue, JsonError> {
        if depth > MAX_DEPTH {
            return Err(self.err("nested too deeply"));
        }
        self.pos += 1; // '{'
        let mut members = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(JsonValue::Object(members));
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.err("expected a member name"));
            }
            let key = self.string()?;
            self.skip_ws();
            self.expect(b':', "expected ':'")?;
            self.skip_ws();
            let v = self.value(depth)?;
            members.push((key, v));
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(JsonValue::Object(members));
                }
                _ => return Err(self.err("expected ',' or '}'")),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let digits = self
            .input
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.err("truncated \\u escape"))?;
        let mut v = 0u32;
        for &d in digits {
            let n = (d as char)
                .to_digit(16)
                .ok_or_else(|| self.err("bad hex digit in \\u escape"))?;
            v = v * 16 + n;
        }
        self.pos += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<Vec<u8>, JsonError> {
        self.pos += 1; // opening quote
        let mut out = Vec::new();
        loop {
            let run_start = self.pos;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            let run = &self.input[run_start..self.pos];
            if std::str::from_utf8(run).is_err() {
                return Err(JsonError {
                    offset: run_start,
                    reason: "string is not valid UTF-8",
                });
            }
            out.extend_from_slice(run);
            match self.peek() {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    self.escape(&mut out)?;
                }
                Some(_) => return Err(self.err("control character in string")),
            }
        }
    }

    fn escape(&mut self, out: &mut Vec<u8>) -> Result<(), JsonError> {
        let Some(c) = self.peek() else {
            return Err(self.err("unterminated string"));
        };
        self.pos += 1;
        let simple = match c {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => return self.unicode_escape(out),
            _ => return Err(self.err("unknown escape")),
        };
        out.push(simple);
        Ok(())
    }

    fn unicode_escape(&mut self, out: &mut Vec<u8>) -> Result<(), JsonError> {
        let at = self.pos;
        let u = self.hex4()?;
        let code = match u {
            0xD800..=0xDBFF => {
                // A high surrogate must be followed by a low one.
                if self.input[self.pos..].starts_with(b"\\u") {
                    self.pos += 2;
                    let lo = self.hex4()?;
                    if !(0xDC00..=0xDFFF).contains(&lo) {
                        return Err(self.err("unpaired high surrogate"));
                    }
                    0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00)
                } else {
                    return Err(self.err("unpaired high surrogate"));
                }
            }
            0xDC80..=0xDCFF => {
                // surrogateescape: the raw byte.
                out.push((u - 0xDC00) as u8);
                return Ok(());
            }
            0xDC00..=0xDFFF => {
                return Err(JsonError {
                    offset: at,
                    reason: "lone low surrogate outside \\udc80-\\udcff",
                })
            }
            _ => u,
        };
        let ch = char::from_u32(code).ok_or_else(|| self.err("invalid code point"))?;
        let mut tmp = [0u8; 4];
        out.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(bytes: &[u8]) -> String {
        let mut v = Vec::new();
        push_bytes_str(&mut v, bytes);
        String::from_utf8(v).expect("escaped output is always UTF-8")
    }

    #[test]
    fn invalid_utf8_bytes_become_low_surrogate_escapes() {
        assert_eq!(enc(b"a\xffb"), r#""a\udcffb""#);
        // A truncated multi-byte sequence: each byte is escaped on its own.
        assert_eq!(enc(b"\xe2\x82"), r#""\udce2\udc82""#);
        // Valid multi-byte UTF-8 passes through unescaped.
        assert_eq!(enc("é€".as_bytes()), "\"é€\"");
    }

    #[test]
    fn control_characters_quotes_and_backslashes_are_escaped() {
        assert_eq!(enc(b"\"\\\n\t\x01\x7f"), r#""\"\\\n\t\u0001\u007f""#);
    }

    #[test]
    fn surrogate_escapes_decode_back_to_the_raw_bytes() {
        let v = parse_one(br#""a\udcffb\udc80""#).unwrap();
        assert_eq!(v, JsonValue::String(b"a\xffb\x80".to_vec()));
    }

    #[test]
    fn surrogate_pairs_decode_to_the_supplementary_character() {
        let v = parse_one(br#""\ud83d\ude00""#).unwrap();
        assert_eq!(v.as_str(), Some("😀"));
    }

    #[test]
    fn reader_rejects_malformed_documents() {
        for bad in [
            &b"{"[..],
            b"[1,]",
            b"{\"a\" 1}",
            b"\"abc",
            b"\"\\ud800\"",
            b"\"\\udc10\"",
            b"01",
            b"tru",
            b"\"a\x01\"",
            b"\"\xff\"",
        ] {
            assert!(
                parse_one(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn reader_bounds_nesting_depth() {
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert_eq!(
            parse_one(deep.as_bytes()).unwrap_err().reason,
            "nested too deeply"
        );
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(parse_one(ok.as_bytes()).is_ok());
    }

    #[test]
    fn stream_reads_every_whitespace_separated_value() {
        let vs = parse_stream(b"{\"a\":1}\n{\"a\":2}\n\n").unwrap();
        assert_eq!(vs.len(), 2);
        assert_eq!(vs[1].get("a").and_then(JsonValue::as_u64), Some(2));
        assert!(parse_stream(b"  \n").unwrap().is_empty());
    }
}
