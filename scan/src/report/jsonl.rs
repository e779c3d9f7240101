//! The `jsonl` and `json` formats.
//!
//! Both carry each finding as the same object, with exactly the keys `rule`,
//! `description`, `path`, `line`, `column`, `offset`, `secret`, `fingerprint`
//! in that order. `path` and `secret` are exact: bytes that are not UTF-8 are
//! `\udcXX` escapes (see [`super::json`]).

use std::io::Write;

use super::error::OutputError;
use super::finding::Finding;
use super::json::push_bytes_str;
use super::summary::Summary;
use super::{SkipView, WriteOptions};

/// The keys of a finding object, in the order they are written. A finding
/// made in decoded text (`base64`, `percent`, `hex`; `scan/src/decode/`) also
/// has `decoded`, an array of the decodings applied, outermost first, between
/// `fingerprint` and `version`; its position fields are the encoded span's.
pub const FINDING_KEYS: [&str; 11] = [
    "rule",
    "description",
    "path",
    "line",
    "column",
    "end_line",
    "end_column",
    "offset",
    "secret",
    "fingerprint",
    "version",
];

/// The keys a finding from git history (`scan git`) has in addition, written
/// after `fingerprint`: the commit that introduced the blob (40 hex digits,
/// or `staged` for `--staged`), its author's name and email, the author date
/// (RFC 3339) and the first line of its message.
pub const GIT_KEYS: [&str; 5] = ["commit", "author", "email", "date", "subject"];

/// The report format's version, written as `version` in every finding and
/// skipped-entry object and at the top of a `json` document: the scanner's
/// version (the keys above are stable within a major version).
pub const REPORT_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Appends one finding as a JSON object (no trailing newline).
pub fn push_finding(buf: &mut Vec<u8>, f: &Finding, opts: &WriteOptions) {
    buf.extend_from_slice(b"{\"rule\":");
    push_bytes_str(buf, f.rule.as_bytes());
    buf.extend_from_slice(b",\"description\":");
    push_bytes_str(buf, f.description.as_bytes());
    buf.extend_from_slice(b",\"path\":");
    push_bytes_str(buf, &f.path.to_bytes());
    buf.extend_from_slice(
        format!(
            ",\"line\":{},\"column\":{},\"end_line\":{},\"end_column\":{},\"offset\":{},\"secret\":",
            f.line,
            f.column,
            f.end_line(),
            f.end_column(),
            f.offset
        )
        .as_bytes(),
    );
    push_bytes_str(buf, &opts.shown_secret(&f.secret));
    buf.extend_from_slice(b",\"fingerprint\":");
    push_bytes_str(buf, f.fingerprint.as_bytes());
    if !f.decoded.is_empty() {
        // Only on findings made in decoded text (FINDING_KEYS' doc).
        buf.extend_from_slice(b",\"decoded\":[");
        for (i, e) in f.decoded.iter().enumerate() {
            if i > 0 {
                buf.push(b',');
            }
            push_bytes_str(buf, e.as_str().as_bytes());
        }
        buf.push(b']');
    }
    if let Some(c) = &f.commit {
        let values = [&c.id, &c.author, &c.email, &c.date, &c.subject];
        for (key, value) in GIT_KEYS.iter().zip(values) {
            buf.extend_from_slice(format!(",\"{key}\":").as_bytes());
            push_bytes_str(buf, value.as_bytes());
        }
    }
    if opts.shard_records {
        // SHARD_KEYS: what `scan merge` needs to write text and SARIF.
        buf.extend_from_slice(b",\"precision\":");
        push_bytes_str(buf, f.precision.as_str().as_bytes());
        buf.extend_from_slice(b",\"context\":");
        let context = if opts.redact {
            super::finding::redact_in_percent(&f.context, &f.secret, opts.redact_percent)
        } else {
            f.context.clone()
        };
        push_bytes_str(buf, &context);
        push_raw_path(buf, &f.path);
    }
    buf.extend_from_slice(b",\"version\":");
    push_bytes_str(buf, REPORT_VERSION.as_bytes());
    buf.push(b'}');
}

/// The keys a finding of a `--shard` run's `jsonl` has in addition, before
/// `version`: the rule's precision (SARIF), the line the secret is on
/// (`text`), and the path's segments (file, then archive members), so that
/// `scan merge` rebuilds each finding exactly: `segments` is the file's
/// whole path as opened (root included) then the archive members, `cuts`
/// where the shown and the fingerprinted path start in it
/// (`ObjPath::raw_parts`). A skipped entry gets `segments`, `cuts` and
/// `detail` (the reason's detail alone, which its sort order uses) after
/// `version`.
pub const SHARD_KEYS: [&str; 4] = ["precision", "context", "segments", "cuts"];

/// `,"segments":[...],"cuts":[shown,hashed]` ([`SHARD_KEYS`]).
fn push_raw_path(buf: &mut Vec<u8>, path: &super::ObjPath) {
    let (file, shown_from, print_from) = path.raw_parts();
    buf.extend_from_slice(b",\"segments\":[");
    push_bytes_str(buf, file);
    for seg in path.members() {
        buf.push(b',');
        push_bytes_str(buf, seg);
    }
    buf.extend_from_slice(format!("],\"cuts\":[{shown_from},{print_from}]").as_bytes());
}

/// The keys of a skipped-entry object, in the order they are written.
pub const SKIPPED_KEYS: [&str; 6] = ["type", "path", "reason", "message", "count", "version"];

/// Appends one skipped entry as a JSON object: `{"type":"skipped","path":
/// ...,"reason":"too_large","message":"...","count":1}`. `reason` is the
/// stable label; `count` is more than 1 only for the unread rest of an
/// archive, named by the archive.
pub fn push_skipped(buf: &mut Vec<u8>, e: &impl SkipView) {
    buf.extend_from_slice(b"{\"type\":\"skipped\",\"path\":");
    push_bytes_str(buf, &e.view_path().to_bytes());
    buf.extend_from_slice(b",\"reason\":");
    push_bytes_str(buf, e.view_label().as_bytes());
    buf.extend_from_slice(b",\"message\":");
    push_bytes_str(buf, e.view_message().as_bytes());
    buf.extend_from_slice(format!(",\"count\":{},\"version\":", e.view_count()).as_bytes());
    push_bytes_str(buf, REPORT_VERSION.as_bytes());
    buf.push(b'}');
}

/// Writes one object per finding, one per line, then one line per skipped
/// entry (`"type":"skipped"`). A clean scan that skipped nothing writes
/// nothing.
pub fn write_jsonl<S: SkipView>(
    out: &mut dyn Write,
    findings: &[Finding],
    skipped: &[S],
    opts: &WriteOptions,
) -> Result<(), OutputError> {
    let mut buf = Vec::with_capacity(512);
    for f in findings {
        buf.clear();
        push_finding(&mut buf, f, opts);
        buf.push(b'\n');
        out.write_all(&buf)?;
    }
    for e in skipped {
        buf.clear();
        push_skipped(&mut buf, e);
        if opts.shard_records {
            // `segments` and `cuts` after the documented keys.
            buf.pop();
            push_raw_path(&mut buf, e.view_path());
            buf.extend_from_slice(b",\"detail\":");
            push_bytes_str(&mut buf, e.view_detail().as_bytes());
            buf.push(b'}');
        }
        buf.push(b'\n');
        out.write_all(&buf)?;
    }
    out.flush()?;
    Ok(())
}

/// Writes one document: `{"findings": [...], "skipped": [...], "summary":
/// {...}}`, with one finding or skipped entry per line so the file diffs
/// well.
pub fn write_json<S: SkipView>(
    out: &mut dyn Write,
    findings: &[Finding],
    skipped: &[S],
    summary: &Summary,
    opts: &WriteOptions,
) -> Result<(), OutputError> {
    out.write_all(b"{\"version\":")?;
    let mut v = Vec::new();
    push_bytes_str(&mut v, REPORT_VERSION.as_bytes());
    out.write_all(&v)?;
    out.write_all(b",\"findings\":[")?;
    let mut buf = Vec::with_capacity(512);
    for (i, f) in findings.iter().enumerate() {
        buf.clear();
        if i > 0 {
            buf.push(b',');
        }
        buf.extend_from_slice(b"\n  ");
        push_finding(&mut buf, f, opts);
        out.write_all(&buf)?;
    }
    if !findings.is_empty() {
        out.write_all(b"\n")?;
    }
    out.write_all(b"],\n\"skipped\":[")?;
    for (i, e) in skipped.iter().enumerate() {
        buf.clear();
        if i > 0 {
            buf.push(b',');
        }
        buf.extend_from_slice(b"\n  ");
        push_skipped(&mut buf, e);
        out.write_all(&buf)?;
    }
    if !skipped.is_empty() {
        out.write_all(b"\n")?;
    }
    out.write_all(b"],\n\"summary\":")?;
    summary.write_json(out)?;
    out.write_all(b"}\n")?;
    out.flush()?;
    Ok(())
}

/// The last line of a `--shard` run's `jsonl` report (`scan merge` reads
/// it; a file without it is incomplete):
///
/// ```json
/// {"type":"summary","summary":{...the json summary, with "shard"...},
///  "git_commits":12,"history_unreadable":0,"respect_gitignore":false,
///  "base_dir":"/abs/root",
///  "provenance":{"repositoryUri":...,"revisionId":...,"branch":...},
///  "version":"0.1.0"}
/// ```
///
/// `git_commits` (a `scan git` run's commit count), `base_dir` (SARIF's
/// `%SRCROOT%`) and `provenance` are `null` when the run had none;
/// `history_unreadable` counts history objects that could not be read (the
/// run exits 2 for them, and so does the merge).
pub fn write_summary_record(
    out: &mut dyn Write,
    summary: &Summary,
    opts: &WriteOptions,
) -> Result<(), OutputError> {
    let mut buf = Vec::with_capacity(1024);
    buf.extend_from_slice(b"{\"type\":\"summary\",\"summary\":");
    summary.write_json(&mut buf)?;
    match summary.git_commits {
        Some(n) => buf.extend_from_slice(format!(",\"git_commits\":{n}").as_bytes()),
        None => buf.extend_from_slice(b",\"git_commits\":null"),
    }
    buf.extend_from_slice(
        format!(
            ",\"history_unreadable\":{},\"respect_gitignore\":{}",
            summary.history_unreadable, summary.respect_gitignore
        )
        .as_bytes(),
    );
    buf.extend_from_slice(b",\"base_dir\":");
    match &opts.base_dir {
        Some(d) => push_bytes_str(
            &mut buf,
            std::os::unix::ffi::OsStrExt::as_bytes(d.as_os_str()),
        ),
        None => buf.extend_from_slice(b"null"),
    }
    buf.extend_from_slice(b",\"provenance\":");
    match &opts.provenance {
        Some(p) => {
            buf.extend_from_slice(b"{\"repositoryUri\":");
            push_bytes_str(&mut buf, p.repository_uri.as_bytes());
            for (key, v) in [("revisionId", &p.revision_id), ("branch", &p.branch)] {
                buf.extend_from_slice(format!(",\"{key}\":").as_bytes());
                match v {
                    Some(v) => push_bytes_str(&mut buf, v.as_bytes()),
                    None => buf.extend_from_slice(b"null"),
                }
            }
            buf.push(b'}');
        }
        None => buf.extend_from_slice(b"null"),
    }
    buf.extend_from_slice(b",\"version\":");
    push_bytes_str(&mut buf, REPORT_VERSION.as_bytes());
    buf.extend_from_slice(b"}\n");
    out.write_all(&buf)?;
    out.flush()?;
    Ok(())
}
