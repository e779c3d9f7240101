//! `scan merge FILE...`: the `jsonl` reports of `scan --shard I/N` runs put
//! back together into one report, in any format.
//!
//! 1. **Read** each file as a stream, line by line ([`read_shard`]): what
//!    is held is one line and the records kept (findings, skipped
//!    entries), never the file's bytes or its parsed records whole. A
//!    `--shard` run's `jsonl` has its findings (with the
//!    [`SHARD_KEYS`](super::jsonl::SHARD_KEYS)), its skipped entries, and
//!    last a summary record (`jsonl::write_summary_record`). A file that
//!    does not end with a complete line, does not parse, or has no summary
//!    record last is truncated or foreign: an error naming it (exit 2).
//! 2. **Check the set** ([`combine`]): every file is a shard of the same N,
//!    and every index `0..N` is there exactly once. A missing shard is an
//!    error, not a smaller report: a merge never passes a scan off as whole
//!    when part of it is not there.
//! 3. **Combine.** Findings are de-duplicated by fingerprint and sorted with
//!    [`sort_findings`], the order of one whole run (paths are rebuilt
//!    exactly from `segments` and `cuts`). Skipped entries are sorted as a
//!    run sorts them (path, label, detail, count). Counts are added up; what every shard
//!    computes whole (the walk's exclusions, a history's commit count) is
//!    taken once; the wall time is the longest shard's.
//! 4. **Report** through the same [`Reporter`] as a scan, with the shards'
//!    findings as they are (their fingerprints were made by the shards), then
//!    the exit code of one scan: 1 with findings, 2 with `--fail-on-skip` and
//!    a skip, 2 when a shard could not read part of a git history.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::json::{parse_stream, JsonValue};
use super::{
    sort_findings, Finding, ObjPath, Outcome, Provenance, Reporter, ScanError, SkipView, Summary,
};
use crate::cli::Config;
use crate::decode::Encoding;
use crate::git::{CommitMeta, HistoryStatus};
use crate::rules::Precision;
use crate::shard::ShardSummary;
use crate::skip::SkipReason;

/// A skipped entry read back from a shard's report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergedSkip {
    /// The file or archive member.
    pub path: ObjPath,
    /// The reason label (one of `SkipReason::LABELS`).
    pub label: &'static str,
    /// The message the shard wrote.
    pub message: String,
    /// Objects it stands for.
    pub count: u64,
    /// The reason's detail (the sort order's third key).
    pub detail: String,
}

impl SkipView for MergedSkip {
    fn view_path(&self) -> &ObjPath {
        &self.path
    }
    fn view_label(&self) -> &str {
        self.label
    }
    fn view_message(&self) -> String {
        self.message.clone()
    }
    fn view_count(&self) -> u64 {
        self.count
    }
    fn view_partial(&self) -> bool {
        crate::skip::label_counts_as_partial(self.label)
    }
    fn view_detail(&self) -> &str {
        &self.detail
    }
}

/// One shard's report, read back.
#[derive(Debug)]
pub struct ShardReport {
    /// The file it came from.
    pub file: PathBuf,
    /// Which shard, and what it owned.
    pub shard: ShardSummary,
    /// Its findings, as it wrote them.
    pub findings: Vec<Finding>,
    /// Its skipped entries.
    pub skipped: Vec<MergedSkip>,
    /// Its totals (`findings` is what it reported).
    pub summary: Summary,
    /// SARIF's `%SRCROOT%` of the run.
    pub base_dir: Option<PathBuf>,
    /// SARIF's `versionControlProvenance` of the run.
    pub provenance: Option<Provenance>,
}

/// The shards put together.
#[derive(Debug)]
pub struct Merged {
    /// De-duplicated, in the order of one whole run.
    pub findings: Vec<Finding>,
    /// Every shard's skipped entries, sorted.
    pub skipped: Vec<MergedSkip>,
    /// The totals of the whole run.
    pub summary: Summary,
    /// From the first shard.
    pub base_dir: Option<PathBuf>,
    /// From the first shard.
    pub provenance: Option<Provenance>,
    /// The shards, by index: what each one owned.
    pub shards: Vec<ShardSummary>,
}

fn u64_of(v: &JsonValue, key: &str) -> Result<u64, String> {
    v.get(key)
        .and_then(JsonValue::as_u64)
        .ok_or_else(|| format!("\"{key}\" is missing or not a whole number"))
}

fn bytes_of<'a>(v: &'a JsonValue, key: &str) -> Result<&'a [u8], String> {
    v.get(key)
        .and_then(JsonValue::as_bytes)
        .ok_or_else(|| format!("\"{key}\" is missing or not a string"))
}

fn str_of(v: &JsonValue, key: &str) -> Result<String, String> {
    std::str::from_utf8(bytes_of(v, key)?)
        .map(str::to_owned)
        .map_err(|_| format!("\"{key}\" is not UTF-8"))
}

/// The path of a finding or skipped entry from its `segments` and `cuts`.
fn raw_path(v: &JsonValue) -> Result<ObjPath, String> {
    let missing = || "no \"segments\"/\"cuts\": written without --shard".to_owned();
    let segs = v.get("segments").and_then(JsonValue::as_array);
    let cuts = v.get("cuts").and_then(JsonValue::as_array);
    let (Some(segs), Some(cuts)) = (segs, cuts) else {
        return Err(missing());
    };
    let segs: Vec<&[u8]> = segs
        .iter()
        .map(|s| s.as_bytes().ok_or("a segment is not a string"))
        .collect::<Result<_, _>>()?;
    let cut = |i: usize| -> Result<u32, String> {
        cuts.get(i)
            .and_then(JsonValue::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| "bad \"cuts\"".to_owned())
    };
    let (first, members) = segs.split_first().ok_or("empty \"segments\"")?;
    ObjPath::from_raw_parts(first, cut(0)?, cut(1)?, members.iter().copied())
        .ok_or_else(|| "\"cuts\" past the end of the path".to_owned())
}

fn finding_of(v: &JsonValue) -> Result<Finding, String> {
    let mut f = Finding::new(
        str_of(v, "rule")?,
        str_of(v, "description")?,
        raw_path(v)?,
        u64_of(v, "line")?,
        u64_of(v, "column")?,
        u64_of(v, "offset")?,
        bytes_of(v, "secret")?.to_vec(),
    );
    f.fingerprint = str_of(v, "fingerprint")?;
    let precision = str_of(v, "precision")?;
    f.precision =
        Precision::parse(&precision).ok_or_else(|| format!("unknown precision {precision:?}"))?;
    f.context = bytes_of(v, "context")?.to_vec();
    if let Some(list) = v.get("decoded") {
        let list = list.as_array().ok_or("\"decoded\" is not an array")?;
        for e in list {
            f.decoded.push(match e.as_str() {
                Some("base64") => Encoding::Base64,
                Some("percent") => Encoding::Percent,
                Some("hex") => Encoding::Hex,
                _ => return Err(format!("unknown decoding {e:?}")),
            });
        }
        // The encoded span's length: `end_column` is just past it.
        f.encoded_len = u64_of(v, "end_column")?.saturating_sub(f.column);
    }
    if v.get("commit").is_some() {
        f.commit = Some(Arc::new(CommitMeta {
            id: str_of(v, "commit")?,
            author: str_of(v, "author")?,
            email: str_of(v, "email")?,
            date: str_of(v, "date")?,
            subject: str_of(v, "subject")?,
        }));
    }
    Ok(f)
}

fn label_of(label: &str) -> Result<&'static str, String> {
    SkipReason::LABELS
        .iter()
        .copied()
        .find(|l| *l == label)
        .ok_or_else(|| format!("unknown skip reason {label:?}"))
}

fn skip_of(v: &JsonValue) -> Result<MergedSkip, String> {
    Ok(MergedSkip {
        path: raw_path(v)?,
        label: label_of(&str_of(v, "reason")?)?,
        message: str_of(v, "message")?,
        count: u64_of(v, "count")?,
        detail: str_of(v, "detail")?,
    })
}

fn summary_of(record: &JsonValue) -> Result<(Summary, ShardSummary), String> {
    let s = record.get("summary").ok_or("no \"summary\"")?;
    let sh = s
        .get("shard")
        .ok_or("the summary has no \"shard\": written without --shard")?;
    let shard = ShardSummary {
        index: u32::try_from(u64_of(sh, "index")?).map_err(|e| e.to_string())?,
        count: u32::try_from(u64_of(sh, "count")?).map_err(|e| e.to_string())?,
        owned: u64_of(sh, "owned")?,
    };
    if shard.count == 0 || shard.index >= shard.count {
        return Err(format!(
            "shard {}/{} is out of range",
            shard.index, shard.count
        ));
    }
    let mut skipped = BTreeMap::new();
    if let Some(JsonValue::Object(m)) = s.get("skipped") {
        for (k, n) in m {
            let label = label_of(&String::from_utf8_lossy(k))?;
            skipped.insert(label, n.as_u64().ok_or("a skipped count is not a number")?);
        }
    }
    let x = s.get("excluded").ok_or("no \"excluded\"")?;
    let excluded = crate::walk::Exclusions {
        ignored_files: u64_of(x, "ignore_files")?,
        ignored_dirs: u64_of(x, "ignore_dirs")?,
        excluded_files: u64_of(x, "exclude_glob_files")?,
        excluded_dirs: u64_of(x, "exclude_glob_dirs")?,
    };
    let elapsed = match s.get("elapsed_seconds") {
        Some(JsonValue::Number(n)) => n.parse::<f64>().unwrap_or(0.0),
        _ => 0.0,
    };
    let history = match s.get("history") {
        None => None,
        Some(h) if matches!(h.get("scanned"), Some(JsonValue::Bool(true))) => {
            Some(HistoryStatus::Scanned {
                commits: u64_of(h, "commits")?,
                blobs: u64_of(h, "blobs")?,
            })
        }
        Some(h) => Some(HistoryStatus::NotScanned(str_of(h, "reason")?)),
    };
    let summary = Summary {
        git_commits: record.get("git_commits").and_then(JsonValue::as_u64),
        history,
        files_scanned: u64_of(s, "files_scanned")?,
        bytes_scanned: u64_of(s, "bytes_scanned")?,
        skipped,
        archives: u64_of(s, "archives")?,
        archive_members: u64_of(s, "archive_members")?,
        findings: u64_of(s, "findings")?,
        baseline_suppressed: u64_of(s, "baseline_suppressed")?,
        workers: usize::try_from(u64_of(s, "workers")?).unwrap_or(1),
        elapsed: Duration::try_from_secs_f64(elapsed).unwrap_or_default(),
        trace_events_dropped: u64_of(s, "trace_events_dropped")?,
        excluded,
        respect_gitignore: matches!(record.get("respect_gitignore"), Some(JsonValue::Bool(true))),
        inline_allowed: u64_of(s, "inline_allowed")?,
        ignore_file_suppressed: u64_of(s, "ignore_file_suppressed")?,
        skip_hint: false,
        shard: None,
        history_unreadable: u64_of(record, "history_unreadable")?,
        metrics: BTreeMap::new(),
    };
    Ok((summary, shard))
}

fn provenance_of(record: &JsonValue) -> Result<Option<Provenance>, String> {
    let Some(p @ JsonValue::Object(_)) = record.get("provenance") else {
        return Ok(None);
    };
    let opt = |key: &str| p.get(key).and_then(JsonValue::as_str).map(str::to_owned);
    Ok(Some(Provenance {
        repository_uri: str_of(p, "repositoryUri")?,
        revision_id: opt("revisionId"),
        branch: opt("branch"),
    }))
}

/// Reads one shard's `jsonl` report held in memory ([`parse_shard_from`]).
pub fn parse_shard(bytes: &[u8]) -> Result<ShardReport, String> {
    parse_shard_from(bytes, bytes.len() as u64, bytes.last().copied())
}

/// Reads one shard's `jsonl` report line by line from `input` (`len`
/// bytes, the last one `last`), holding one line and its records at a
/// time besides what it keeps (the findings and skipped entries). The
/// error names what is wrong with it (the caller adds the file name), the
/// first of: empty; the last line not complete; a line that is no JSON;
/// no summary record last, or a bad one; a bad finding or skipped entry
/// (the first); a finding count other than the summary's. Each record is
/// one line, as a shard writes it: a value spread over lines is not read.
pub fn parse_shard_from(
    mut input: impl std::io::BufRead,
    len: u64,
    last: Option<u8>,
) -> Result<ShardReport, String> {
    if len == 0 {
        return Err("empty: not the jsonl report of a --shard run".into());
    }
    if last != Some(b'\n') {
        return Err("truncated: the last line is not complete".into());
    }
    let mut findings = Vec::new();
    let mut skipped = Vec::new();
    // The first bad record: reported after the summary's checks.
    let mut bad: Option<String> = None;
    // The last value read: the summary if no other follows it.
    let mut held: Option<JsonValue> = None;
    let mut count = 0usize;
    let (mut line, mut at) = (Vec::new(), 0usize);
    loop {
        line.clear();
        let n = input
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("not a jsonl report (truncated?): {e}"))?;
        if n == 0 {
            break;
        }
        let values = parse_stream(&line).map_err(|mut e| {
            e.offset += at;
            format!("not a jsonl report (truncated?): {e}")
        })?;
        at += n;
        for v in values {
            if let Some(prev) = held.replace(v) {
                count += 1;
                if bad.is_none() {
                    if let Err(e) = record(&prev, count, &mut findings, &mut skipped) {
                        bad = Some(e);
                    }
                }
            }
        }
    }
    let last = held.ok_or("no records")?;
    if last.get("type").and_then(JsonValue::as_str) != Some("summary") {
        return Err(
            "no summary record at the end: truncated, or written without --shard or not as jsonl"
                .into(),
        );
    }
    let (summary, shard) = summary_of(&last).map_err(|e| format!("summary record: {e}"))?;
    let base_dir = last.get("base_dir").and_then(JsonValue::as_bytes).map(|b| {
        // Exact bytes on Unix.
        PathBuf::from(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b))
    });
    let provenance = provenance_of(&last).map_err(|e| format!("summary record: {e}"))?;
    if let Some(e) = bad {
        return Err(e);
    }
    if findings.len() as u64 != summary.findings {
        return Err(format!(
            "{} findings, but its summary says {}: truncated?",
            findings.len(),
            summary.findings
        ));
    }
    Ok(ShardReport {
        file: PathBuf::new(),
        shard,
        findings,
        skipped,
        summary,
        base_dir,
        provenance,
    })
}

/// Keeps the record `v` (the `line`th, counted from 1) as a finding or a
/// skipped entry.
fn record(
    v: &JsonValue,
    line: usize,
    findings: &mut Vec<Finding>,
    skipped: &mut Vec<MergedSkip>,
) -> Result<(), String> {
    match v.get("type").and_then(JsonValue::as_str) {
        None if v.get("fingerprint").is_some() => {
            findings.push(finding_of(v).map_err(|e| format!("line {line}: finding: {e}"))?);
        }
        Some("skipped") => {
            skipped.push(skip_of(v).map_err(|e| format!("line {line}: skipped: {e}"))?);
        }
        Some("summary") => {
            return Err(format!(
                "line {line}: a second summary record (two reports in one file?)"
            ))
        }
        _ => {
            return Err(format!(
                "line {line}: neither a finding nor a skipped entry"
            ))
        }
    }
    Ok(())
}

/// Reads the shard report in `file` as a stream ([`parse_shard_from`]);
/// errors name the file.
pub fn read_shard(file: &Path) -> Result<ShardReport, String> {
    use std::io::{Read, Seek, SeekFrom};
    let named = |e: &dyn std::fmt::Display| format!("{}: {e}", file.display());
    let mut f = std::fs::File::open(file).map_err(|e| named(&e))?;
    let len = f.metadata().map_err(|e| named(&e))?.len();
    let mut last = None;
    if len > 0 {
        let mut b = [0u8];
        f.seek(SeekFrom::End(-1)).map_err(|e| named(&e))?;
        f.read_exact(&mut b).map_err(|e| named(&e))?;
        f.seek(SeekFrom::Start(0)).map_err(|e| named(&e))?;
        last = Some(b[0]);
    }
    let input = std::io::BufReader::with_capacity(READ_BUF_BYTES, f);
    let mut r = parse_shard_from(input, len, last).map_err(|e| named(&e))?;
    r.file = file.to_path_buf();
    Ok(r)
}

/// The read buffer of [`read_shard`]: 64 KiB (a line longer than it is
/// gathered in the line buffer, which grows to the longest line).
pub const READ_BUF_BYTES: usize = 64 << 10;

/// Checks that `reports` are the shards `0..N` of one N, each once, and
/// puts them together (steps 2 and 3 of the module docs).
pub fn combine(mut reports: Vec<ShardReport>) -> Result<Merged, String> {
    let first = reports.first().ok_or("no shard reports given")?;
    let count = first.shard.count;
    let first_file = first.file.display().to_string();
    for r in &reports {
        if r.shard.count != count {
            return Err(format!(
                "{}: shard {}/{} does not belong with {first_file} (a shard of {count})",
                r.file.display(),
                r.shard.index,
                r.shard.count
            ));
        }
    }
    reports.sort_by_key(|r| r.shard.index);
    for w in reports.windows(2) {
        if w[0].shard.index == w[1].shard.index {
            return Err(format!(
                "shard {}/{count} is given twice: {} and {} (keep one: a shard run again \
                 writes the same report)",
                w[0].shard.index,
                w[0].file.display(),
                w[1].file.display()
            ));
        }
    }
    let have: HashSet<u32> = reports.iter().map(|r| r.shard.index).collect();
    let missing: Vec<String> = (0..count)
        .filter(|i| !have.contains(i))
        .map(|i| format!("{i}/{count}"))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "{} of {count} shards missing: {} (rerun {} and merge again)",
            missing.len(),
            missing.join(", "),
            if missing.len() == 1 { "it" } else { "them" }
        ));
    }
    let mut sum = Summary {
        excluded: reports[0].summary.excluded,
        respect_gitignore: reports[0].summary.respect_gitignore,
        git_commits: reports[0].summary.git_commits,
        ..Summary::default()
    };
    let mut findings = Vec::new();
    let mut skipped = Vec::new();
    let mut shards = Vec::new();
    let base_dir = reports[0].base_dir.clone();
    let provenance = reports[0].provenance.clone();
    for r in reports {
        let s = r.summary;
        sum.files_scanned += s.files_scanned;
        sum.bytes_scanned += s.bytes_scanned;
        for (k, v) in s.skipped {
            *sum.skipped.entry(k).or_insert(0) += v;
        }
        sum.archives += s.archives;
        sum.archive_members += s.archive_members;
        sum.baseline_suppressed += s.baseline_suppressed;
        sum.inline_allowed += s.inline_allowed;
        sum.ignore_file_suppressed += s.ignore_file_suppressed;
        sum.trace_events_dropped += s.trace_events_dropped;
        sum.history_unreadable += s.history_unreadable;
        sum.workers = sum.workers.max(s.workers);
        sum.elapsed = sum.elapsed.max(s.elapsed);
        sum.history = match (sum.history.take(), s.history) {
            (
                Some(HistoryStatus::Scanned { commits, blobs }),
                Some(HistoryStatus::Scanned { blobs: b, .. }),
            ) => Some(HistoryStatus::Scanned {
                commits,
                blobs: blobs + b,
            }),
            (None, h) => h,
            (h, _) => h,
        };
        findings.extend(r.findings);
        skipped.extend(r.skipped);
        shards.push(r.shard);
    }
    sort_findings(&mut findings);
    // By fingerprint, and place: one run can report two findings with one
    // fingerprint (the same secret in `a/x.env` below two roots both hash
    // `x.env`), and the merge keeps both as the run does.
    let mut seen = HashSet::new();
    findings.retain(|f| seen.insert((f.fingerprint.clone(), f.path.clone(), f.offset)));
    // `skip::sort_skipped`'s order.
    skipped.sort_by(|a, b| {
        (&a.path, a.label, &a.detail, a.count).cmp(&(&b.path, b.label, &b.detail, b.count))
    });
    Ok(Merged {
        findings,
        skipped,
        summary: sum,
        base_dir,
        provenance,
        shards,
    })
}

/// `scan merge`: read, check, combine, report (the module docs' steps).
pub fn run(config: &Config, files: &[PathBuf]) -> Result<Outcome, ScanError> {
    let reports = files
        .iter()
        .map(|f| read_shard(f))
        .collect::<Result<Vec<_>, _>>()
        .map_err(ScanError::Usage)?;
    let merged = combine(reports).map_err(ScanError::Usage)?;
    // Only now is `--output` created: a bad set of shards leaves it alone.
    let mut reporter = Reporter::from_config(config)?;
    reporter.set_base_dir(merged.base_dir);
    if let Some(p) = merged.provenance {
        reporter.set_provenance(p);
    }
    let unreadable = merged.summary.history_unreadable;
    let owned: Vec<String> = merged.shards.iter().map(|s| s.owned.to_string()).collect();
    let mut err = std::io::stderr().lock();
    let outcome =
        reporter.finish_finalized(merged.findings, &merged.skipped, merged.summary, &mut err)?;
    let _ = writeln!(
        err,
        "merged {} shards; items owned: {} (one full run's items)",
        merged.shards.len(),
        owned.join(" + ")
    );
    if unreadable > 0 {
        return Err(crate::pipeline::run::partial_history_error(unreadable));
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_a_cut_and_a_summaryless_file_are_refused() {
        assert!(parse_shard(b"").unwrap_err().contains("empty"));
        assert!(parse_shard(b"{\"a\":1}").unwrap_err().contains("truncated"));
        assert!(parse_shard(b"{\"type\":\"skipped\"\n")
            .unwrap_err()
            .contains("not a jsonl report"));
        assert!(parse_shard(b"{\"rule\":\"r\",\"fingerprint\":\"f\"}\n")
            .unwrap_err()
            .contains("no summary record"));
    }

    #[test]
    fn a_streamed_read_refuses_in_the_order_of_a_whole_read() {
        // A bad record first, then a line that is no JSON: the syntax
        // error wins, at its byte offset in the whole file.
        let text = b"{\"type\":\"other\"}\n{\"a\":1}\n{\"a\" 1}\n";
        let whole = parse_stream(text).unwrap_err();
        let err = parse_shard(text).unwrap_err();
        assert!(err.ends_with(&whole.to_string()), "{err} vs {whole}");
        // A bad record and no summary: the summary is checked first.
        let err = parse_shard(b"{\"type\":\"other\"}\n{\"a\":1}\n").unwrap_err();
        assert!(err.contains("no summary record"), "{err}");
        // Records only read line by line from a reader give the same
        // answer as from memory.
        let text = b"{\"type\":\"other\"}\n\n  \n{\"type\":\"summary\"}\n";
        let from_reader = parse_shard_from(&text[..], text.len() as u64, Some(b'\n'));
        assert_eq!(from_reader.unwrap_err(), parse_shard(text).unwrap_err());
        assert!(parse_shard(b"\n\n").unwrap_err().contains("no records"));
    }
}
