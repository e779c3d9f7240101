//! Errors of a scan, what a finished scan returns, and the exit codes.

use std::fmt;
use std::io;
use std::path::PathBuf;

use super::summary::Summary;

/// Exit code: the scan finished and reported nothing.
pub const EXIT_CLEAN: u8 = 0;
/// Exit code: the scan finished and reported at least one finding.
pub const EXIT_FINDINGS: u8 = 1;
/// Exit code: the scan could not be done (bad arguments, unreadable root, bad
/// rules or baseline, an archive under `--archive-policy fail-run`, ...).
pub const EXIT_ERROR: u8 = 2;

/// Writing a report failed.
#[derive(Debug)]
pub enum OutputError {
    /// The reader went away (EPIPE), e.g. `scan . | head`. Not a failure of
    /// the scan: the binary exits 0 without a message.
    BrokenPipe,
    /// Any other I/O error.
    Io(io::Error),
}

impl From<io::Error> for OutputError {
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::BrokenPipe {
            OutputError::BrokenPipe
        } else {
            OutputError::Io(e)
        }
    }
}

impl fmt::Display for OutputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutputError::BrokenPipe => f.write_str("broken pipe"),
            OutputError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for OutputError {}

/// A baseline file could not be used.
#[derive(Debug)]
pub struct BaselineError {
    /// The file given to `--baseline`.
    pub path: PathBuf,
    /// What was wrong with it.
    pub reason: String,
}

impl fmt::Display for BaselineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "baseline {}: {} (a baseline is an earlier report written with --format json or jsonl)",
            self.path.display(),
            self.reason
        )
    }
}

impl std::error::Error for BaselineError {}

/// Why a scan did not finish. Every variant but [`ScanError::BrokenPipe`]
/// exits 2 with its message on stderr.
#[derive(Debug)]
pub enum ScanError {
    /// The output reader went away: exit 0, no message.
    BrokenPipe,
    /// A path given on the command line could not be read.
    Root {
        /// The path as given.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A rule file could not be loaded or a rule is invalid.
    Rules(String),
    /// The baseline could not be loaded.
    Baseline(BaselineError),
    /// An archive problem under `--archive-policy fail-run`.
    FailRun(String),
    /// A file the scan had to write (report, trace) could not be written.
    Output {
        /// What was being written, e.g. `output file out.json`.
        what: String,
        /// Why.
        source: io::Error,
    },
    /// A command-line value that could not be used (a bad `--exclude`
    /// glob, ...).
    Usage(String),
    /// Anything else.
    Other(String),
}

impl ScanError {
    /// Wraps an error writing `what`, mapping EPIPE to [`ScanError::BrokenPipe`].
    pub fn output(what: impl Into<String>, e: OutputError) -> Self {
        match e {
            OutputError::BrokenPipe => ScanError::BrokenPipe,
            OutputError::Io(source) => ScanError::Output {
                what: what.into(),
                source,
            },
        }
    }
}

impl From<BaselineError> for ScanError {
    fn from(e: BaselineError) -> Self {
        ScanError::Baseline(e)
    }
}

impl fmt::Display for ScanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScanError::BrokenPipe => f.write_str("broken pipe"),
            ScanError::Root { path, source } => {
                // As ripgrep says it: `PATH: Permission denied (os error 13)`.
                write!(f, "{}: {source}", path.display())
            }
            ScanError::Rules(m) => write!(f, "rules: {m}"),
            ScanError::Baseline(e) => write!(f, "{e}"),
            ScanError::FailRun(m) => write!(f, "stopped by --archive-policy fail-run: {m}"),
            ScanError::Output { what, source } => write!(f, "cannot write {what}: {source}"),
            ScanError::Usage(m) | ScanError::Other(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ScanError {}

/// What a finished scan reports back to `main`.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Findings reported (after the baseline filter).
    pub reported: u64,
    /// The run's totals.
    pub summary: Summary,
    /// Objects not scanned that `--fail-on-skip` counts, when it was given
    /// (0 otherwise): any makes the exit code 2.
    pub fail_on_skip: u64,
    /// The exit code for findings (`--exit-code`); `None` is
    /// [`EXIT_FINDINGS`].
    pub findings_exit: Option<u8>,
}

/// The process exit code for a scan's result: 0 nothing reported, 1 findings
/// reported, 2 error. A broken pipe counts as success.
pub fn exit_code(result: &Result<Outcome, ScanError>) -> u8 {
    match result {
        Ok(o) if o.fail_on_skip > 0 => EXIT_ERROR,
        Ok(o) if o.reported > 0 => o.findings_exit.unwrap_or(EXIT_FINDINGS),
        Ok(_) | Err(ScanError::BrokenPipe) => EXIT_CLEAN,
        Err(_) => EXIT_ERROR,
    }
}

/// The message `main` prints on stderr for `result`, if any (none for success
/// and for a broken pipe).
pub fn error_message(result: &Result<Outcome, ScanError>) -> Option<String> {
    match result {
        Ok(o) if o.fail_on_skip > 0 => Some(format!(
            "scan: error: {} not scanned and --fail-on-skip was given (the report names them)",
            match o.fail_on_skip {
                1 => "1 file or archive member was".to_owned(),
                n => format!("{n} files or archive members were"),
            }
        )),
        Ok(_) | Err(ScanError::BrokenPipe) => None,
        Err(e) => Some(format!("scan: error: {e}")),
    }
}
