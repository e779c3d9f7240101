//! Encoded spans: secrets hidden in base64, percent or hex encoding.
//!
//! A config file or manifest often holds a credential encoded: a Kubernetes
//! `Secret`'s `data:` values are base64, an HTTP `Authorization: Basic`
//! header is base64 of `user:password`, a connection string in a URL is
//! percent-encoded, and some tools store tokens as hex. The rules see none of
//! those as the token they are. This module finds candidate encoded spans in
//! a chunk, decodes each one, and keeps the result only when it is text; the
//! scan step (`pipeline/scanjob.rs`) runs the same rules over the decoded
//! text and reports each finding at the encoded span's place, with the
//! decoding named (`decoded: base64`). A decoded span is searched for further
//! spans, down to [`DEFAULT_MAX_DEPTH`] decodings (`--max-decode-depth`).
//!
//! The steps, as `README.md` beside this file numbers them:
//!
//! 1. Candidates ([`spans`]): maximal runs of the base64 alphabet (both the
//!    standard and the URL-safe one) at least [`MIN_BASE64_LEN`] long, with
//!    up to two `=` after them; among them, runs of hex digits of even length
//!    at least [`MIN_HEX_LEN`] are also hex candidates; and maximal runs of
//!    URL characters holding at least one `%XX` escape. A span belongs to the
//!    chunk whose owned range holds its first byte, as a match does.
//! 2. Decoding ([`decode`]): at most [`MAX_SPAN`] encoded bytes of a span.
//! 3. Keeping ([`is_text`]): the result is valid UTF-8 of at least
//!    [`MIN_DECODED_LEN`] bytes with no control character but tab, CR and
//!    LF. Random identifiers, paths and hashes decode to bytes that fail
//!    this, so they cost a decode and nothing else.
//!
//! Finding the runs does not read every byte: to find runs of at least `L`
//! bytes it probes every `L`-th byte, and only a probe that lands inside the
//! alphabet walks back and forth to the run's ends.

use std::ops::Range;

/// Decodings applied one inside another at most (`--max-decode-depth`'s
/// default): base64 of a percent-encoded URL is two.
pub const DEFAULT_MAX_DEPTH: u32 = 2;
/// Shortest base64 run decoded: 16 characters, 12 bytes.
pub const MIN_BASE64_LEN: usize = 16;
/// Shortest hex run decoded: 32 digits, 16 bytes.
pub const MIN_HEX_LEN: usize = 32;
/// Shortest decoded text kept.
pub const MIN_DECODED_LEN: usize = 8;
/// Longest encoded span decoded; the rest of a longer run is not.
pub const MAX_SPAN: usize = 64 * 1024;

/// An encoding this module decodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Encoding {
    /// RFC 4648 base64, standard or URL-safe alphabet, padding optional.
    Base64,
    /// URL percent-encoding (`%41` is `A`; `+` is left as it is).
    Percent,
    /// Hexadecimal digits, two per byte, either case.
    Hex,
}

impl Encoding {
    /// The name reports use: `base64`, `percent`, `hex`.
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Base64 => "base64",
            Encoding::Percent => "percent",
            Encoding::Hex => "hex",
        }
    }
}

/// A candidate encoded span: `buf[start..end]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub end: usize,
    pub encoding: Encoding,
}

const B64: u8 = 1;
const HEX: u8 = 2;
const URL: u8 = 4;

/// Byte classes: the base64 alphabets (`A-Za-z0-9+/-_`), hex digits, and the
/// characters a percent-encoded URL or form value is made of.
static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        let alnum = c.is_ascii_alphanumeric();
        if alnum || c == b'+' || c == b'/' || c == b'-' || c == b'_' {
            t[b] |= B64;
        }
        if c.is_ascii_hexdigit() {
            t[b] |= HEX;
        }
        if alnum
            || matches!(
                c,
                b'%' | b'-'
                    | b'.'
                    | b'_'
                    | b'~'
                    | b'+'
                    | b'!'
                    | b'*'
                    | b'('
                    | b')'
                    | b';'
                    | b':'
                    | b'@'
                    | b'&'
                    | b'='
                    | b'$'
                    | b','
                    | b'/'
                    | b'?'
            )
        {
            t[b] |= URL;
        }
        b += 1;
    }
    t
};

#[inline]
fn is(class: u8, b: u8) -> bool {
    CLASS[b as usize] & class != 0
}

/// Appends the candidate spans of `buf` whose first byte lies in `owned`
/// (step 1), in order of their start. A run that reaches back to `buf[0]`
/// while `owned` starts later began in an earlier chunk, which owns it.
pub fn spans(buf: &[u8], owned: Range<usize>, out: &mut Vec<Span>) {
    let first = out.len();
    base64_and_hex_runs(buf, &owned, out);
    percent_runs(buf, &owned, out);
    out[first..].sort_by_key(|s| (s.start, s.encoding));
}

fn base64_and_hex_runs(buf: &[u8], owned: &Range<usize>, out: &mut Vec<Span>) {
    let owns = |start: usize| owned.contains(&start) && (start > 0 || owned.start == 0);
    let mut i = owned.start;
    while i < owned.end {
        let probe = i + MIN_BASE64_LEN - 1;
        if probe >= buf.len() {
            break;
        }
        if !is(B64, buf[probe]) {
            i = probe + 1;
            continue;
        }
        let mut start = probe;
        while start > 0 && is(B64, buf[start - 1]) {
            start -= 1;
        }
        // A run of the minimum length starting at or after `start` and no
        // later than `last` covers `last`: when that byte is outside the
        // alphabet there is none, and the search goes on past it without
        // walking the rest of the run.
        let last = start + MIN_BASE64_LEN - 1;
        if last >= buf.len() {
            break;
        }
        if !is(B64, buf[last]) {
            i = last + 1;
            continue;
        }
        let mut end = probe + 1;
        while end < buf.len() && is(B64, buf[end]) {
            end += 1;
        }
        if end - start >= MIN_BASE64_LEN && owns(start) && plausible_base64(&buf[start..end]) {
            let run = &buf[start..end];
            let hex =
                run.len() >= MIN_HEX_LEN && run.len() % 2 == 0 && run.iter().all(|&b| is(HEX, b));
            if hex {
                out.push(Span {
                    start,
                    end,
                    encoding: Encoding::Hex,
                });
            }
            let mut padded = end;
            while padded < buf.len() && padded - end < 2 && buf[padded] == b'=' {
                padded += 1;
            }
            out.push(Span {
                start,
                end: padded,
                encoding: Encoding::Base64,
            });
        }
        i = end + 1;
    }
}

/// Base64 of text nearly always holds a digit, and otherwise both cases:
/// `snake_case_names` and `kebab-case-words` have neither and are not tried.
fn plausible_base64(run: &[u8]) -> bool {
    let (mut upper, mut lower) = (false, false);
    for &b in run {
        match b {
            b'0'..=b'9' => return true,
            b'A'..=b'Z' => upper = true,
            b'a'..=b'z' => lower = true,
            _ => {}
        }
    }
    upper && lower
}

fn percent_runs(buf: &[u8], owned: &Range<usize>, out: &mut Vec<Span>) {
    let owns = |start: usize| owned.contains(&start) && (start > 0 || owned.start == 0);
    let mut from = owned.start;
    while let Some(k) = memchr::memchr(b'%', &buf[from..owned.end]) {
        let pct = from + k;
        let escape = buf.len() > pct + 2 && is(HEX, buf[pct + 1]) && is(HEX, buf[pct + 2]);
        if !escape {
            from = pct + 1;
            continue;
        }
        let mut start = pct;
        while start > 0 && is(URL, buf[start - 1]) {
            start -= 1;
        }
        let mut end = pct + 3;
        while end < buf.len() && is(URL, buf[end]) {
            end += 1;
        }
        if end - start >= MIN_DECODED_LEN && owns(start) {
            out.push(Span {
                start,
                end,
                encoding: Encoding::Percent,
            });
        }
        if end >= owned.end {
            break;
        }
        from = end;
    }
}

/// Decodes `text` as `encoding` into `out` (cleared first) and returns
/// whether the result is text worth scanning (steps 2 and 3). Only the first
/// [`MAX_SPAN`] bytes of `text` are read.
pub fn decode(encoding: Encoding, text: &[u8], out: &mut Vec<u8>) -> bool {
    out.clear();
    let text = &text[..text.len().min(MAX_SPAN)];
    match encoding {
        Encoding::Base64 => {
            if !base64(text, out) || !is_text(out) {
                // A run that starts with `/` or `+` is often a path or a URL
                // with base64 after its last separator: try that tail.
                let Some(slash) = text.iter().rposition(|&b| b == b'/' || b == b'+') else {
                    return false;
                };
                let tail = &text[slash + 1..];
                out.clear();
                return tail.len() >= MIN_BASE64_LEN && base64(tail, out) && is_text(out);
            }
            true
        }
        Encoding::Hex => hex(text, out) && is_text(out),
        Encoding::Percent => percent(text, out) && is_text(out),
    }
}

/// Whether decoded bytes are text (step 3).
pub fn is_text(bytes: &[u8]) -> bool {
    bytes.len() >= MIN_DECODED_LEN
        && std::str::from_utf8(bytes).is_ok()
        && bytes.iter().all(|&b| text_byte(b))
}

fn sextet(b: u8) -> Option<u8> {
    Some(match b {
        b'A'..=b'Z' => b - b'A',
        b'a'..=b'z' => b - b'a' + 26,
        b'0'..=b'9' => b - b'0' + 52,
        b'+' | b'-' => 62,
        b'/' | b'_' => 63,
        _ => return None,
    })
}

/// Base64 with either alphabet; `=` padding ends it. A final group of one
/// character (6 bits, no whole byte) is dropped. Stops, false, at the first
/// byte that text cannot hold: most candidates (identifiers, paths, binary
/// data) fail within a few bytes, so rejecting them costs little.
fn base64(text: &[u8], out: &mut Vec<u8>) -> bool {
    let mut acc: u32 = 0;
    let mut bits = 0;
    for &b in text {
        if b == b'=' {
            break;
        }
        let Some(v) = sextet(b) else {
            return false;
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            let byte = (acc >> bits) as u8;
            if !text_byte(byte) {
                return false;
            }
            out.push(byte);
            acc &= (1 << bits) - 1;
        }
    }
    true
}

/// A byte decoded text may hold: no control character but tab, CR and LF.
/// (Bytes from 0x80 are judged by the UTF-8 check in [`is_text`].)
#[inline]
fn text_byte(b: u8) -> bool {
    b >= 0x20 && b != 0x7f || matches!(b, b'\t' | b'\n' | b'\r')
}

fn hex(text: &[u8], out: &mut Vec<u8>) -> bool {
    if text.len() % 2 != 0 {
        return false;
    }
    for pair in text.chunks_exact(2) {
        let (Some(hi), Some(lo)) = (nibble(pair[0]), nibble(pair[1])) else {
            return false;
        };
        let byte = hi << 4 | lo;
        if !text_byte(byte) {
            return false;
        }
        out.push(byte);
    }
    true
}

fn nibble(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// `%XX` becomes its byte; everything else is copied. False when no escape
/// was decoded.
fn percent(text: &[u8], out: &mut Vec<u8>) -> bool {
    let mut decoded = false;
    let mut i = 0;
    while i < text.len() {
        if text[i] == b'%' && i + 2 < text.len() {
            if let (Some(hi), Some(lo)) = (nibble(text[i + 1]), nibble(text[i + 2])) {
                out.push(hi << 4 | lo);
                decoded = true;
                i += 3;
                continue;
            }
        }
        out.push(text[i]);
        i += 1;
    }
    decoded
}

/// Reusable buffers for one worker's decoding.
#[derive(Debug, Default)]
pub struct Scratch {
    /// Candidate spans, one list per depth.
    pub spans: Vec<Vec<Span>>,
    /// Decoded text, one buffer per depth.
    pub decoded: Vec<Vec<u8>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_spans(buf: &[u8]) -> Vec<(String, Encoding)> {
        let mut out = Vec::new();
        spans(buf, 0..buf.len(), &mut out);
        out.iter()
            .map(|s| {
                (
                    String::from_utf8_lossy(&buf[s.start..s.end]).into_owned(),
                    s.encoding,
                )
            })
            .collect()
    }

    fn decoded(e: Encoding, text: &str) -> Option<String> {
        let mut out = Vec::new();
        decode(e, text.as_bytes(), &mut out).then(|| String::from_utf8(out).unwrap())
    }

    #[test]
    fn base64_of_text_decodes_in_both_alphabets_with_or_without_padding() {
        // "user:correct horse battery" in the standard alphabet, padded.
        assert_eq!(
            decoded(Encoding::Base64, "dXNlcjpjb3JyZWN0IGhvcnNlIGJhdHRlcnk="),
            Some("user:correct horse battery".into())
        );
        assert_eq!(
            decoded(Encoding::Base64, "dXNlcjpjb3JyZWN0IGhvcnNlIGJhdHRlcnk"),
            Some("user:correct horse battery".into())
        );
        // "??>>??>>??>>" uses `+` and `/` (standard) or `-` and `_` (URL-safe).
        assert_eq!(
            decoded(Encoding::Base64, "Pz8+Pj8/Pj4/Pz4+"),
            Some("??>>??>>??>>".into())
        );
        assert_eq!(
            decoded(Encoding::Base64, "Pz8-Pj8_Pj4_Pz4-"),
            Some("??>>??>>??>>".into())
        );
    }

    #[test]
    fn identifiers_paths_and_hashes_are_candidates_but_not_text() {
        for run in [
            "ThisIsAVeryLongIdentifierName",
            "scan/src/rules/prefilter",
            "d41d8cd98f00b204e9800998ecf8427e",
        ] {
            assert_eq!(decoded(Encoding::Base64, run), None, "{run}");
        }
        // A hex digest is bytes, not text.
        assert_eq!(
            decoded(Encoding::Hex, "d41d8cd98f00b204e9800998ecf8427e"),
            None
        );
    }

    #[test]
    fn base64_after_a_path_separator_is_found_in_the_runs_tail() {
        let run = "/api/v1/dXNlcjpjb3JyZWN0IGhvcnNlIGJhdHRlcnk";
        assert_eq!(
            decoded(Encoding::Base64, run),
            Some("user:correct horse battery".into())
        );
    }

    #[test]
    fn hex_and_percent_decode_to_text() {
        assert_eq!(
            decoded(Encoding::Hex, "746f6b656e3d616263313233646566343536"),
            Some("token=abc123def456".into())
        );
        assert_eq!(
            decoded(Encoding::Percent, "pass%3Dp%40ss%21word"),
            Some("pass=p@ss!word".into())
        );
        // No escape decoded: nothing to rescan.
        assert_eq!(decoded(Encoding::Percent, "plain-text-here"), None);
        // A `%` at the end, or with one digit, is copied as it is.
        assert_eq!(
            decoded(Encoding::Percent, "a%41bcdefgh%4"),
            Some("aAbcdefgh%4".into())
        );
    }

    #[test]
    fn spans_are_maximal_runs_of_the_minimum_length_or_more() {
        let buf = b"short: abc123 key: c2VjcmV0LXZhbHVlLTEyMzQ1Ng== url: a%20b%2Fc.d/e";
        let got = all_spans(buf);
        assert_eq!(
            got,
            vec![
                ("c2VjcmV0LXZhbHVlLTEyMzQ1Ng==".to_string(), Encoding::Base64),
                ("a%20b%2Fc.d/e".to_string(), Encoding::Percent),
            ]
        );
        let hex = b"id=746f6b656e3d616263313233646566343536;";
        let got = all_spans(hex);
        // A hex run is a base64 run too: both are tried, base64 first.
        let hex_run = "746f6b656e3d616263313233646566343536".to_string();
        assert_eq!(
            got,
            vec![
                (hex_run.clone(), Encoding::Base64),
                (hex_run, Encoding::Hex)
            ]
        );
    }

    #[test]
    fn a_span_belongs_to_the_chunk_that_owns_its_first_byte() {
        let buf = b"xx c2VjcmV0LXZhbHVlLTEyMzQ1Ng yy";
        let start = 3;
        for cut in 0..buf.len() {
            let mut a = Vec::new();
            let mut b = Vec::new();
            spans(buf, 0..cut, &mut a);
            spans(buf, cut..buf.len(), &mut b);
            let owners = a.iter().chain(&b).filter(|s| s.start == start).count();
            assert_eq!(owners, 1, "cut at {cut}");
        }
        // A run reaching back to buf[0] in a later chunk began before it.
        let mut c = Vec::new();
        spans(&buf[5..], 1..20, &mut c);
        assert!(c.is_empty(), "{c:?}");
    }

    #[test]
    fn decoding_is_bounded_by_max_span() {
        let long = "QUFB".repeat(MAX_SPAN); // "AAA" over and over
        let mut out = Vec::new();
        assert!(decode(Encoding::Base64, long.as_bytes(), &mut out));
        assert_eq!(out.len(), MAX_SPAN / 4 * 3);
    }
}
