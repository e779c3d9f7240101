//! The `jsonl` and `json` formats.
//!
//! Both carry each finding as the same object, with exactly the keys `rule`,
//! `description`, `path`, `line`, `column`, `offset`, `secret`, `fingerprint`
//! in that order. `path` and `secret` are exact: bytes that are not UTF-8 are
//! `\udcXX` escapes (see [`super::json`]).

use std::io::Write;

use super::error::OutputError;
use super::finding::{redact, Finding};
use super::json::push_bytes_str;
use super::summary::Summary;
use super::WriteOptions;

/// The keys of a finding object, in the order they are written.
pub const FINDING_KEYS: [&str; 8] = [
    "rule",
    "description",
    "path",
    "line",
    "column",
    "offset",
    "secret",
    "fingerprint",
];

/// Appends one finding as a JSON object (no trailing newline).
pub fn push_finding(buf: &mut Vec<u8>, f: &Finding, redact_secret: bool) {
    buf.extend_from_slice(b"{\"rule\":");
    push_bytes_str(buf, f.rule.as_bytes());
    buf.extend_from_slice(b",\"description\":");
    push_bytes_str(buf, f.description.as_bytes());
    buf.extend_from_slice(b",\"path\":");
    push_bytes_str(buf, &f.path.to_bytes());
    buf.extend_from_slice(
        format!(
            ",\"line\":{},\"column\":{},\"offset\":{},\"secret\":",
            f.line, f.column, f.offset
        )
        .as_bytes(),
    );
    if redact_secret {
        push_bytes_str(buf, &redact(&f.secret));
    } else {
        push_bytes_str(buf, &f.secret);
    }
    buf.extend_from_slice(b",\"fingerprint\":");
    push_bytes_str(buf, f.fingerprint.as_bytes());
    buf.push(b'}');
}

/// Writes one object per finding, one per line. A scan with no findings
/// writes nothing.
pub fn write_jsonl(
    out: &mut dyn Write,
    findings: &[Finding],
    opts: &WriteOptions,
) -> Result<(), OutputError> {
    let mut buf = Vec::with_capacity(512);
    for f in findings {
        buf.clear();
        push_finding(&mut buf, f, opts.redact);
        buf.push(b'\n');
        out.write_all(&buf)?;
    }
    out.flush()?;
    Ok(())
}

/// Writes one document: `{"findings": [...], "summary": {...}}`, with one
/// finding per line so the file diffs well.
pub fn write_json(
    out: &mut dyn Write,
    findings: &[Finding],
    summary: &Summary,
    opts: &WriteOptions,
) -> Result<(), OutputError> {
    out.write_all(b"{\"findings\":[")?;
    let mut buf = Vec::with_capacity(512);
    for (i, f) in findings.iter().enumerate() {
        buf.clear();
        if i > 0 {
            buf.push(b',');
        }
        buf.extend_from_slice(b"\n  ");
        push_finding(&mut buf, f, opts.redact);
        out.write_all(&buf)?;
    }
    if !findings.is_empty() {
        out.write_all(b"\n")?;
    }
    out.write_all(b"],\n\"summary\":")?;
    summary.write_json(out)?;
    out.write_all(b"}\n")?;
    out.flush()?;
    Ok(())
}
