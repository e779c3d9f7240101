//! Findings, the four output formats, the baseline, the summary and progress.
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`path`] | [`ObjPath`]: a file plus archive members, shown `outer.zip!inner` |
//! | [`finding`] | [`Finding`], [`finalize`] (sort, dedup, fingerprint), redaction |
//! | [`json`] | JSON strings of raw bytes (`\udcXX` surrogateescape), and a reader |
//! | [`text`], [`jsonl`], [`sarif`] | the formats |
//! | [`baseline`] | `--baseline`: fingerprints of an earlier report |
//! | [`summary`] | [`Summary`]: totals on stderr and in `json` |
//! | [`progress`] | [`Progress`] counters and the stderr bar |
//! | [`error`] | [`ScanError`], [`Outcome`], exit codes |
//! | [`merge`] | `scan merge`: the `jsonl` reports of `--shard` runs as one report |
//!
//! The pipeline's end is [`Reporter`]: build it from the [`Config`] before the
//! scan (so a bad baseline or an unwritable output file fails before any work),
//! then hand it the findings and the summary.
//!
//! `scan/OUTPUT.md` documents every format for users.
//!
//! [`Config`]: crate::cli::Config

pub mod baseline;
pub mod error;
pub mod finding;
pub mod ignorefile;
pub mod json;
pub mod jsonl;
pub mod merge;
pub mod path;
pub mod progress;
pub mod sarif;
pub mod summary;
pub mod text;

use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::PathBuf;

pub use baseline::Baseline;
pub use error::{
    error_message, exit_code, BaselineError, Outcome, OutputError, ScanError, EXIT_CLEAN,
    EXIT_ERROR, EXIT_FINDINGS,
};
pub use finding::{
    finalize, fingerprint, fingerprint_in, redact, redact_percent, sort_findings, Finding,
};
pub use ignorefile::IgnoreFile;
pub use path::ObjPath;
pub use progress::{Progress, ProgressDisplay, ProgressSnapshot};
pub use summary::Summary;

use crate::cli::Config;
use crate::skip::SkippedEntry;

/// An output format (`--format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Human-readable, a few lines per finding; colour on a terminal.
    #[default]
    Text,
    /// One JSON object per finding per line (JSON Lines).
    Jsonl,
    /// One JSON document: {"findings": [...], "summary": {...}}.
    Json,
    /// SARIF 2.1.0, for GitHub code scanning and other SARIF viewers.
    Sarif,
}

/// How the formats render.
#[derive(Clone, Debug)]
pub struct WriteOptions {
    /// Show secrets as a short prefix and `…` (`--redact`).
    pub redact: bool,
    /// With `redact`: hide this percent of each secret (`--redact=PERCENT`)
    /// instead of the short form.
    pub redact_percent: Option<u8>,
    /// ANSI colour in `text` (resolved from `--color`, the terminal and
    /// `NO_COLOR`).
    pub color: bool,
    /// The directory relative paths are relative to (the working directory),
    /// for SARIF's `%SRCROOT%`; absolute and must exist to be useful.
    pub base_dir: Option<PathBuf>,
    /// `tool.driver.version` in SARIF.
    pub tool_version: &'static str,
    /// The repository a `scan git` run read, for SARIF's
    /// `versionControlProvenance`.
    pub provenance: Option<Provenance>,
    /// Whether a repository's history was scanned (SARIF run
    /// `properties.history`).
    pub history: Option<crate::git::HistoryStatus>,
    /// A `--shard` run's `jsonl`: each finding also carries `precision`,
    /// `context` and `segments`, and a summary record ends the report, so
    /// that `scan merge` can write every format from it (`jsonl.rs`).
    pub shard_records: bool,
}

/// A skipped entry as the writers see it: a [`SkippedEntry`] of this run,
/// or one read back from a shard's `jsonl` by `scan merge`.
pub trait SkipView {
    /// The file or archive member.
    fn view_path(&self) -> &ObjPath;
    /// The stable reason label (`too_large`, ...).
    fn view_label(&self) -> &str;
    /// The reason and detail, as one message.
    fn view_message(&self) -> String;
    /// Objects this entry stands for (more than 1 for an archive's rest).
    fn view_count(&self) -> u64;
    /// Whether `--fail-on-skip` counts it (`skip::counts_as_partial`).
    fn view_partial(&self) -> bool;
    /// The detail alone (what `skip::sort_skipped` orders by after the
    /// label).
    fn view_detail(&self) -> &str;
}

impl SkipView for SkippedEntry {
    fn view_path(&self) -> &ObjPath {
        &self.path
    }
    fn view_label(&self) -> &str {
        self.reason.label()
    }
    fn view_message(&self) -> String {
        self.message()
    }
    fn view_count(&self) -> u64 {
        self.count
    }
    fn view_partial(&self) -> bool {
        crate::skip::counts_as_partial(&self.reason)
    }
    fn view_detail(&self) -> &str {
        &self.detail
    }
}

/// Where a history scan's findings come from (SARIF
/// `versionControlProvenance`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Provenance {
    /// The `origin` remote's URL, else a `file://` URI of the repository.
    pub repository_uri: String,
    /// The commit HEAD names, if any.
    pub revision_id: Option<String>,
    /// The branch HEAD is on, if any (`main`, not `refs/heads/main`).
    pub branch: Option<String>,
}

impl WriteOptions {
    /// `secret` as the options show it.
    pub fn shown_secret(&self, secret: &[u8]) -> Vec<u8> {
        if self.redact {
            finding::redact_percent(secret, self.redact_percent)
        } else {
            secret.to_vec()
        }
    }
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self {
            redact: false,
            redact_percent: None,
            color: false,
            base_dir: None,
            tool_version: env!("CARGO_PKG_VERSION"),
            provenance: None,
            history: None,
            shard_records: false,
        }
    }
}

/// Writes `findings` (already [`finalize`]d) in `format`. `summary` is used by
/// `json` only. Flushes `out`; EPIPE comes back as [`OutputError::BrokenPipe`].
pub fn write_report(
    out: &mut dyn Write,
    format: Format,
    findings: &[Finding],
    skipped: &[SkippedEntry],
    summary: &Summary,
    opts: &WriteOptions,
) -> Result<(), OutputError> {
    write_report_of(out, format, findings, skipped, summary, opts)
}

/// [`write_report`] for any [`SkipView`] (`scan merge`'s entries too). A
/// `jsonl` report with [`WriteOptions::shard_records`] ends with the
/// summary record.
pub fn write_report_of<S: SkipView>(
    out: &mut dyn Write,
    format: Format,
    findings: &[Finding],
    skipped: &[S],
    summary: &Summary,
    opts: &WriteOptions,
) -> Result<(), OutputError> {
    match format {
        Format::Text => text::write_text(out, findings, opts),
        Format::Jsonl => {
            jsonl::write_jsonl(out, findings, skipped, opts)?;
            if opts.shard_records {
                jsonl::write_summary_record(out, summary, opts)?;
            }
            Ok(())
        }
        Format::Json => jsonl::write_json(out, findings, skipped, summary, opts),
        Format::Sarif => sarif::write_sarif(out, findings, skipped, opts),
    }
}

/// The directory SARIF's `%SRCROOT%` stands for: the scan root when one
/// directory is scanned (reported paths are below it), else the working
/// directory.
fn sarif_base_dir(paths: &[PathBuf]) -> Option<PathBuf> {
    match paths {
        [one] if one.is_dir() => std::path::absolute(one).ok(),
        _ => std::env::current_dir().ok(),
    }
}

/// The end of the pipeline: baseline, formatting, output and the stderr
/// summary.
pub struct Reporter {
    format: Format,
    opts: WriteOptions,
    baseline: Option<Baseline>,
    out: Box<dyn Write + Send>,
    out_name: String,
    metrics: bool,
    stderr_color: bool,
    verbose: bool,
    fail_on_skip: bool,
    findings_exit: u8,
    ignore: IgnoreFile,
}

impl std::fmt::Debug for Reporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reporter")
            .field("format", &self.format)
            .field("opts", &self.opts)
            .field("baseline", &self.baseline.as_ref().map(Baseline::len))
            .field("out", &self.out_name)
            .finish()
    }
}

impl Reporter {
    /// Loads the baseline and opens the output (creating or truncating
    /// `--output`), so that both fail before the scan starts.
    pub fn from_config(cfg: &Config) -> Result<Self, ScanError> {
        let baseline = cfg.baseline.as_deref().map(Baseline::load).transpose()?;
        let mut ignore = IgnoreFile::default();
        if !cfg.no_ignore_file {
            for root in cfg.paths.iter().filter(|p| p.is_dir()) {
                let implicit = root.join(ignorefile::IGNORE_FILE_NAME);
                ignore.extend(IgnoreFile::load(&implicit, true).map_err(ScanError::Usage)?);
            }
        }
        if let Some(path) = &cfg.ignore_file {
            ignore.extend(IgnoreFile::load(path, false).map_err(ScanError::Usage)?);
        }
        let no_color = std::env::var_os("NO_COLOR");
        let (out, out_name, is_tty): (Box<dyn Write + Send>, String, bool) = match &cfg.output {
            Some(path) => {
                let what = format!("output file {}", path.display());
                let file = File::create(path).map_err(|source| ScanError::Output {
                    what: what.clone(),
                    source,
                })?;
                (Box::new(BufWriter::new(file)), what, false)
            }
            None => {
                let stdout = io::stdout();
                let tty = stdout.is_terminal();
                (
                    Box::new(BufWriter::with_capacity(64 * 1024, stdout)),
                    "standard output".into(),
                    tty,
                )
            }
        };
        let opts = WriteOptions {
            redact: cfg.redact,
            redact_percent: cfg.redact_percent,
            color: text::color_enabled(cfg.color, is_tty, no_color.as_deref()),
            base_dir: sarif_base_dir(&cfg.paths),
            shard_records: cfg.shard.is_some() && cfg.format == Format::Jsonl,
            ..WriteOptions::default()
        };
        let stderr_color =
            text::color_enabled(cfg.color, io::stderr().is_terminal(), no_color.as_deref());
        Ok(Self {
            format: cfg.format,
            opts,
            baseline,
            out,
            out_name,
            metrics: cfg.metrics,
            stderr_color,
            verbose: cfg.verbose,
            fail_on_skip: cfg.fail_on_skip,
            findings_exit: cfg.exit_code,
            ignore,
        })
    }

    /// Sets SARIF's `versionControlProvenance` (a `scan git` run).
    pub fn set_provenance(&mut self, p: Provenance) {
        self.opts.provenance = Some(p);
    }

    /// Sets the directory SARIF's `%SRCROOT%` stands for (`scan merge`:
    /// the shards' scan root).
    pub fn set_base_dir(&mut self, dir: Option<PathBuf>) {
        self.opts.base_dir = dir;
    }

    /// A reporter writing to `out` (tests, embedding).
    pub fn with_writer(
        format: Format,
        opts: WriteOptions,
        baseline: Option<Baseline>,
        out: Box<dyn Write + Send>,
    ) -> Self {
        Self {
            format,
            opts,
            baseline,
            out,
            out_name: "output".into(),
            metrics: false,
            stderr_color: false,
            verbose: false,
            fail_on_skip: false,
            findings_exit: EXIT_FINDINGS,
            ignore: IgnoreFile::default(),
        }
    }

    /// Finalizes `findings`, drops those in the baseline, writes the report,
    /// then the summary on `stderr` (errors writing the summary are ignored:
    /// stderr is best effort). A broken output pipe is
    /// [`ScanError::BrokenPipe`].
    ///
    /// Finish the [`ProgressDisplay`] first, so the summary does not land in
    /// the middle of the bar.
    pub fn finish(
        self,
        mut findings: Vec<Finding>,
        skipped: &[SkippedEntry],
        summary: Summary,
        stderr: &mut dyn Write,
    ) -> Result<Outcome, ScanError> {
        finalize(&mut findings);
        self.finish_finalized(findings, skipped, summary, stderr)
    }

    /// [`Reporter::finish`] for findings already sorted, de-duplicated and
    /// fingerprinted (`scan merge`: the shards did it). The summary's
    /// baseline and ignore-file counts are added to, not replaced.
    pub fn finish_finalized<S: SkipView>(
        mut self,
        mut findings: Vec<Finding>,
        skipped: &[S],
        mut summary: Summary,
        stderr: &mut dyn Write,
    ) -> Result<Outcome, ScanError> {
        summary.baseline_suppressed += match &self.baseline {
            Some(b) => b.filter(&mut findings),
            None => 0,
        };
        summary.ignore_file_suppressed += self.ignore.filter(&mut findings);
        summary.findings = findings.len() as u64;
        self.opts.history = summary.history.clone();
        if !self.metrics {
            // The counters are shown (on stderr and in json) only with --metrics.
            summary.metrics.clear();
        }
        write_report_of(
            &mut *self.out,
            self.format,
            &findings,
            skipped,
            &summary,
            &self.opts,
        )
        .map_err(|e| ScanError::output(self.out_name.clone(), e))?;
        if self.verbose {
            let _ = text::write_skipped(stderr, skipped);
        }
        summary.skip_hint = !self.verbose && self.format == Format::Text;
        let _ = summary.write_text(stderr, self.stderr_color, self.metrics);
        summary.skip_hint = false;
        let fail_on_skip = if self.fail_on_skip {
            skipped
                .iter()
                .filter(|s| s.view_partial())
                .map(|s| s.view_count())
                .sum()
        } else {
            0
        };
        Ok(Outcome {
            reported: findings.len() as u64,
            summary,
            fail_on_skip,
            findings_exit: Some(self.findings_exit),
        })
    }
}
