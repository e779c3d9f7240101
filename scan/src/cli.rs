//! The command line: `scan [OPTIONS] PATH...`, parsed into a plain [`Config`].
//!
//! clap does the parsing; nothing clap-specific leaves this module except the
//! `clap::Error` that [`parse`] returns (which knows how to print itself and
//! which exit code it wants: 0 for `--help`/`--version`, 2 for a usage error).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{ArgAction, Parser, ValueEnum};

use crate::report::{Format, EXIT_FINDINGS};

/// The default `--max-file-size`: 256 MiB.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 256 << 20;
/// The default `--archive-depth`.
pub const DEFAULT_ARCHIVE_DEPTH: u32 = 3;
/// The most `--workers` accepted.
pub const MAX_WORKERS: usize = 1024;

/// What to do when an archive cannot be read completely (encrypted, corrupt,
/// or over a size, entry-count, depth or inflation budget).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum ArchivePolicy {
    /// Leave the whole archive out and count it as skipped.
    Skip,
    /// Keep what was scanned before the problem, skip the rest, and count it.
    #[default]
    Partial,
    /// Stop the whole scan with exit code 2.
    FailRun,
}

/// A manual page built into the binary (`--docs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DocTopic {
    /// `OUTPUT.md`: formats, skipped entries, paths, fingerprints, exit codes.
    Output,
    /// `ARCHIVES.md`: archive formats, limits and policies.
    Archives,
    /// `GIT.md`: `scan git`, history scanning.
    Git,
}

impl DocTopic {
    /// The page's text (Markdown).
    pub fn text(self) -> &'static str {
        match self {
            DocTopic::Output => include_str!("../OUTPUT.md"),
            DocTopic::Archives => include_str!("../ARCHIVES.md"),
            DocTopic::Git => include_str!("../GIT.md"),
        }
    }
}

/// When to colour the `text` output and the summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// Colour when writing to a terminal and NO_COLOR is not set.
    #[default]
    Auto,
    /// Always colour, even into a file or pipe (overrides NO_COLOR).
    Always,
    /// Never colour.
    Never,
}

/// The keyword prefilter of the rule engine (hidden `--prefilter`, for the
/// benchmark that compares them; see `scan/src/rules/README.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Prefilter {
    /// The hand-written bucketed shift-or filter (the default).
    #[value(name = "shiftor")]
    ShiftOr,
    /// aho-corasick's packed Teddy searchers.
    Teddy,
    /// One aho-corasick DFA.
    Dfa,
}

/// Everything a scan needs to know from the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Files and directories to scan, as given.
    pub paths: Vec<PathBuf>,
    /// Output format.
    pub format: Format,
    /// Worker threads (at least 1).
    pub workers: usize,
    /// Files larger than this many bytes are skipped; `None` = no limit.
    pub max_file_size: Option<u64>,
    /// Decodings (base64, percent, hex) applied one inside another at most
    /// before the rules run again on the result; 0 turns decoding off.
    pub max_decode_depth: u32,
    /// Honour `.gitignore`, `.ignore` and git's exclude files
    /// (`--respect-gitignore`; off by default).
    pub respect_ignore_files: bool,
    /// Gitignore-style globs of paths not to scan (`--exclude`).
    pub exclude: Vec<String>,
    /// Name every skipped file on standard error (`-v`).
    pub verbose: bool,
    /// Exit 2 when anything was skipped (`--fail-on-skip`).
    pub fail_on_skip: bool,
    /// Follow symbolic links (loop-safe).
    pub follow_symlinks: bool,
    /// Look inside archives at all.
    pub scan_archives: bool,
    /// Deepest archive nesting opened (an archive in a directory is depth 1).
    pub archive_depth: u32,
    /// What to do with an archive that cannot be read completely.
    pub archive_policy: ArchivePolicy,
    /// The gitleaks-format config (`-c/--config`); without it,
    /// `GITLEAKS_CONFIG` or a `.gitleaks.toml` at the scan root is used.
    pub config_file: Option<PathBuf>,
    /// `scan rules`: list the rules instead of scanning.
    pub list_rules: bool,
    /// Extra gitleaks-format TOML rule files, in the order given.
    pub rule_files: Vec<PathBuf>,
    /// Rule ids not to run.
    pub exclude_rules: Vec<String>,
    /// Earlier `json`/`jsonl` report whose findings are not reported again.
    pub baseline: Option<PathBuf>,
    /// Show secrets as a short prefix and `…`.
    pub redact: bool,
    /// `--redact=PERCENT`: hide this share of each secret instead.
    pub redact_percent: Option<u8>,
    /// The exit code when findings are reported (`--exit-code`, default 1).
    pub exit_code: u8,
    /// An ignore file in `.gitleaksignore` format (`--gitleaks-ignore-path`).
    pub ignore_file: Option<PathBuf>,
    /// Do not read `.gitleaksignore` at the scan root.
    pub no_ignore_file: bool,
    /// `--docs TOPIC`: print that manual page instead of scanning.
    pub docs: Option<DocTopic>,
    /// Show the scheduler and pipeline counters in the summary.
    pub metrics: bool,
    /// Write a Chrome trace of the tasks here.
    pub trace: Option<PathBuf>,
    /// `--no-progress` was not given (the bar still shows only on a terminal).
    pub progress: bool,
    /// When to colour.
    pub color: ColorChoice,
    /// Write the report here instead of standard output.
    pub output: Option<PathBuf>,
    /// Payload bytes per chunk (hidden `--chunk-size`; tests use small
    /// chunks to put secrets across chunk boundaries).
    pub chunk_size: usize,
    /// Keyword prefilter override (hidden `--prefilter`; benchmarks).
    pub prefilter: Option<Prefilter>,
    /// `scan git`: read this repository's history instead of walking
    /// `paths` (then `paths` holds the repository's work tree, or its git
    /// directory when bare: where `.gitleaksignore` and `.gitleaks.toml`
    /// are looked for).
    pub git: Option<crate::git::GitOptions>,
    /// `--no-git-history`: a directory that is a repository is scanned as
    /// files only (by default its history is scanned too; `scan/GIT.md`).
    pub no_git_history: bool,
    /// `--shard I/N` as given; [`Config::parsed_shard`] checks it (a bad
    /// value is one line and exit 2, from `run`).
    pub shard: Option<String>,
    /// `scan merge FILE...`: the `jsonl` reports of `--shard` runs to put
    /// together (then nothing is scanned).
    pub merge: Option<Vec<PathBuf>>,
}

impl Config {
    /// The `--shard` value, parsed (`crate::shard::Shard::parse`).
    pub fn parsed_shard(&self) -> Result<Option<crate::shard::Shard>, crate::report::ScanError> {
        self.shard
            .as_deref()
            .map(crate::shard::Shard::parse)
            .transpose()
            .map_err(crate::report::ScanError::Usage)
    }
}

/// Parses a size: a whole number of bytes with an optional binary suffix,
/// `K`, `M`, `G` or `T` (also `KB`/`KiB`, ..., case-insensitive, all powers
/// of 1024). `0` means no limit. Examples: `1048576`, `256M`, `1G`, `64KiB`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(split);
    if digits.is_empty() {
        return Err(format!(
            "'{s}' is not a size: expected a whole number with an optional K, M, G or T suffix (e.g. 256M)"
        ));
    }
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => {
            return Err(format!(
                "unknown size suffix '{other}' in '{s}': use K, M, G or T (powers of 1024)"
            ))
        }
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("'{s}' is too large for a size"))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("'{s}' is too large for a size"))
}

fn parse_workers(s: &str) -> Result<usize, String> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a whole number"))?;
    if n == 0 || n > MAX_WORKERS {
        return Err(format!("must be between 1 and {MAX_WORKERS}"));
    }
    Ok(n)
}

/// Wraps `text` at [`HELP_WIDTH`] columns (clap's own wrapping needs a
/// feature we do not enable); existing newlines are kept.
fn wrap(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for (i, para) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let mut col = 0;
        for word in para.split(' ').filter(|w| !w.is_empty()) {
            let w = word.chars().count();
            if col > 0 && col + 1 + w > HELP_WIDTH {
                out.push('\n');
                col = 0;
            } else if col > 0 {
                out.push(' ');
                col += 1;
            }
            out.push_str(word);
            col += w;
        }
    }
    out
}

/// Columns of `--help` text (clap indents it by 10 more).
const HELP_WIDTH: usize = 68;

const AFTER_HELP: &str = "\
EXIT STATUS:
  0  the scan finished and reported no findings
  1  the scan finished and reported at least one finding
  2  error: bad arguments, an unreadable PATH, a bad rule file or baseline,
     an unwritable --output or --trace, or an archive problem under
     --archive-policy fail-run
  A reader that closes the pipe early (scan . | head) is not an error: exit 0.

EXAMPLES:
  scan .                                   scan the current directory
  scan --format sarif -o scan.sarif .      SARIF for GitHub code scanning
  scan --format json -o base.json .        record today's findings...
  scan --baseline base.json .              ...and later report only new ones
  scan --redact --format jsonl repo | jq   machine-readable, secrets hidden

Formats, skipped entries, paths, fingerprints, suppression and the baseline:
  scan --docs output
Archive formats, limits and policies:
  scan --docs archives
Git history (scan git [REPO]), and --shard I/N with scan merge FILE... for
runs spread over many machines:
  scan --docs git";

/// magpie's secret scanner: finds credentials (API keys, tokens, private
/// keys, passwords) in files and directories, including inside zip, tar and
/// gzip archives.
#[derive(Debug, Parser)]
#[command(
    name = "scan",
    version,
    about = "magpie's secret scanner: finds credentials in files, directories and archives.",
    long_about = wrap("magpie's secret scanner: finds credentials (API keys, tokens, private keys, \
                  passwords) in files and directories, including inside zip and tar archives \
                  and gzip, bzip2, xz and zstd files. Findings go to standard output; a summary (and, on a terminal, a \
                  progress bar) goes to standard error."),
    after_help = "Exit status: 0 nothing found, 1 findings, 2 error. See --help for more.",
    after_long_help = AFTER_HELP,
    max_term_width = 100
)]
struct Cli {
    /// Files and directories to scan.
    #[arg(
        value_name = "PATH",
        value_parser = clap::value_parser!(PathBuf),
        long_help = wrap("Files and directories to scan. Directories are walked recursively; \
                     hidden and git-ignored files are scanned, .git directories are not. \
                     - reads standard input, and a FIFO named here is read to its end. A \
                     PATH that is missing or unreadable is an error (exit 2). Paths in the \
                     report are below PATH (scan ./repo reports src/a.env), or start with \
                     PATH without ./ when several are given.")
    )]
    paths: Vec<PathBuf>,

    /// scan git: only commits reachable from REF.
    #[arg(
        long,
        value_name = "REF",
        hide = true,
        long_help = wrap("Scan only the commits reachable from REF (a branch, tag or commit) \
                     instead of those reachable from every ref.")
    )]
    branch: Option<String>,

    /// scan git: leave out SHA and every commit it reaches.
    #[arg(
        long,
        value_name = "SHA",
        hide = true,
        long_help = wrap("Scan only commits that are not SHA and not reachable from SHA: \
                     what came after it (for CI: the last commit already scanned).")
    )]
    since_commit: Option<String>,

    /// scan git: commits reachable from B and not from A.
    #[arg(
        long,
        visible_alias = "range",
        value_name = "A..B",
        hide = true,
        long_help = wrap("Scan the commits of a log range, as git log A..B: reachable from B \
                     and not from A. An empty side is HEAD (A.. is A..HEAD).")
    )]
    log_range: Option<String>,

    /// scan git: unreachable objects too.
    #[arg(
        long,
        hide = true,
        conflicts_with_all = ["branch", "since_commit", "log_range", "staged"],
        long_help = wrap("Also scan what no ref reaches: every commit in the object database \
                     is walked like a branch (a dangling commit, a deleted branch not yet \
                     garbage-collected), and blobs no commit reaches are scanned with the \
                     commit id `unreachable` and their blob id as path.")
    )]
    all_objects: bool,

    /// scan git: scan every blob whole, not only what it adds.
    #[arg(
        long,
        hide = true,
        long_help = wrap("Scan every blob of the history whole. By default a blob that \
                     replaces its commit's first parent's blob at the same path is diffed \
                     against it and only the lines it adds (with the rules' context around \
                     them) are scanned: a secret is reported once, for the commit that added \
                     it. With this flag it is reported again for every commit that writes a \
                     new blob still holding it.")
    )]
    whole_blobs: bool,

    /// scan git: incremental mode, the last scan's tips kept in FILE.
    #[arg(
        long,
        value_name = "FILE",
        hide = true,
        value_parser = clap::value_parser!(PathBuf),
        conflicts_with_all = ["since_commit", "log_range", "staged", "all_objects"],
        long_help = wrap("Incremental mode for CI: scan only the commits that the commits \
                     recorded in FILE do not reach, then record the tips of this scan (every \
                     ref, or --branch) in FILE. FILE is replaced atomically, and only when the \
                     scan completed and no object was unreadable. A missing FILE scans the \
                     whole history; a FILE that is not a state file is an error (exit 2). A \
                     ref rewritten since (force-pushed) is named on standard error and what \
                     the old state does not reach is scanned.")
    )]
    state: Option<PathBuf>,

    /// A repository's history is not scanned (files only).
    #[arg(
        long,
        long_help = wrap("When a PATH is a git repository (a work tree with .git, a bare \
                     repository or a .git directory), scan its files only. By default its \
                     history is scanned too: a secret committed and then deleted is still \
                     readable by anyone with a clone. The summary says which was done.")
    )]
    no_git_history: bool,

    /// Scan only shard I of N (0-based), for runs on many machines.
    #[arg(
        long,
        value_name = "I/N",
        conflicts_with = "state",
        long_help = wrap("Scan only part I of N (I counts from 0: 0/4, 1/4, 2/4, 3/4; \
                     Kubernetes' JOB_COMPLETION_INDEX is such an index). Every shard walks \
                     the whole tree or history and reads only the items it owns: files by a \
                     stable hash of their path below PATH (an archive with all its members), \
                     history blobs by their id. Every item lands in exactly one shard, and a \
                     shard run again owns the same items. Write each shard with --format jsonl \
                     (it then ends with a summary record) and put them together with \
                     `scan merge FILE...`. The summary says which shard ran and how many \
                     items it owned. An I out of range is an error (exit 2).")
    )]
    shard: Option<String>,

    /// scan git: the index against HEAD.
    #[arg(
        long,
        hide = true,
        conflicts_with_all = ["branch", "since_commit", "log_range"],
        long_help = wrap("Scan what is about to be committed: the blobs in the index that \
                     HEAD does not have at that path (for a pre-commit hook). Findings carry \
                     the commit id `staged`.")
    )]
    staged: bool,

    /// Print one of scan's manual pages and exit.
    #[arg(
        long,
        value_enum,
        value_name = "TOPIC",
        long_help = wrap("Print a manual page built into scan and exit: output (formats, \
                     skipped entries, paths, fingerprints, baseline, suppression, exit codes), \
                     archives (formats read, limits, policies) or git (scan git: history, \
                     attribution, commit fields).")
    )]
    docs: Option<DocTopic>,

    /// Output format.
    #[arg(
        short = 'f',
        long,
        visible_alias = "report-format",
        value_enum,
        value_name = "FORMAT",
        default_value_t = Format::Text,
        long_help = wrap("How findings are written. text: a few lines per finding for people. \
                     jsonl: one JSON object per finding per line. json: one document with \
                     the findings and the run summary. sarif: SARIF 2.1.0 for GitHub code \
                     scanning. json and jsonl keep paths and secrets exact: bytes that are not \
                     UTF-8 are written as \\udcXX escapes.")
    )]
    format: Format,

    /// Worker threads [default: number of CPU cores].
    #[arg(
        short = 'j',
        long,
        visible_alias = "threads",
        value_name = "N",
        value_parser = parse_workers,
        long_help = wrap("Number of worker threads that read and scan files, from 1 to 1024. \
                     [default: the number of CPU cores available to this process]")
    )]
    workers: Option<usize>,

    /// Skip files larger than SIZE (e.g. 256M, 1G, 1048576; 0 = no limit).
    #[arg(
        long,
        visible_alias = "max-filesize",
        value_name = "SIZE",
        default_value = "256M",
        value_parser = parse_size,
        long_help = wrap("Skip files (and archive members) larger than SIZE; they are counted as \
                     skipped in the summary. SIZE is a number of bytes with an optional \
                     suffix K, M, G or T, each a power of 1024: 1048576, 64K, 256M, 1G. \
                     0 means no limit.")
    )]
    max_file_size: u64,

    /// Decode base64, percent and hex spans up to N levels deep (0 = off).
    #[arg(
        long,
        value_name = "N",
        default_value_t = scan_decode_default(),
        long_help = wrap("Look inside encoded text: runs of base64 (16 characters or more, \
                     either alphabet), hex (32 digits or more) and percent-encoded values \
                     are decoded, and when the result is text the rules run on it again; a \
                     decoded span is searched for further spans, N levels deep at most. A \
                     finding in decoded text is reported at the encoded span, with the \
                     decodings named (\"decoded\" in json, jsonl and SARIF). 0 turns \
                     decoding off. [default: 2]"),
        hide_default_value = true
    )]
    max_decode_depth: u32,

    /// Skip what .gitignore, .ignore and .git/info/exclude exclude.
    #[arg(
        long,
        overrides_with = "no_ignore",
        long_help = wrap("Leave out what .gitignore, .ignore and .git/info/exclude files \
                     exclude, as git and ripgrep do (also outside a git repository, and \
                     from the directories above PATH). Off by default: ignored files such \
                     as .env are where secrets live, so they are scanned. When on, the \
                     summary says how many files and directories the rules left out. \
                     .git directories are never entered either way.")
    )]
    respect_gitignore: bool,

    /// Scan files that ignore files exclude (the default).
    #[arg(
        long,
        overrides_with = "respect_gitignore",
        long_help = wrap("Scan files that .gitignore and .ignore exclude. This is the \
                     default; the flag exists for ripgrep users and to undo an earlier \
                     --respect-gitignore.")
    )]
    no_ignore: bool,

    /// Leave out paths matching GLOB (repeatable).
    #[arg(
        long,
        value_name = "GLOB",
        action = ArgAction::Append,
        long_help = wrap("Leave out files and directories whose path below PATH matches GLOB, \
                     in .gitignore syntax: '*.min.js', 'vendor/', 'docs/**/*.md'. Repeat to \
                     give several. A PATH named on the command line is scanned even if it \
                     matches. The summary counts what was excluded.")
    )]
    exclude: Vec<String>,

    /// Name every skipped file on standard error.
    #[arg(
        short = 'v',
        long,
        long_help = wrap("Name every file and archive member that was not scanned, with its \
                     reason, on standard error before the summary (the json, jsonl and sarif \
                     reports always name them).")
    )]
    verbose: bool,

    /// Exit 2 if any file or archive member was skipped.
    #[arg(
        long,
        long_help = wrap("Exit with code 2 when anything could not be scanned (unreadable, too \
                     large, an archive limit, ...), after writing the report: for CI gates that \
                     must not pass on a partial scan. Symlinks that are not followed do not \
                     count; files left out by --exclude or --respect-gitignore do not count.")
    )]
    fail_on_skip: bool,

    /// Follow symbolic links.
    #[arg(
        long,
        long_help = wrap("Follow symbolic links to files and directories. Off by default: links \
                     are not scanned. When on, each directory is visited once, so a link \
                     loop cannot make the walk endless.")
    )]
    follow_symlinks: bool,

    /// How deep to open archives inside archives.
    #[arg(
        long,
        value_name = "N",
        default_value_t = DEFAULT_ARCHIVE_DEPTH,
        value_parser = clap::value_parser!(u32).range(0..=64),
        long_help = wrap("How many levels of archives to open: 1 opens an archive found on disk, \
                     2 also an archive inside it, and so on. 0 is the same as --no-archives. \
                     Deeper archives are counted as skipped.")
    )]
    archive_depth: u32,

    /// Do not look inside archives.
    #[arg(
        long,
        conflicts_with = "archive_depth",
        long_help = wrap("Scan archive files (zip, jar, tar, gz, bz2, xz, zst, tgz, ...) as plain \
                     bytes instead of opening them.")
    )]
    no_archives: bool,

    /// What to do with an archive that cannot be read completely.
    #[arg(
        long,
        value_enum,
        value_name = "POLICY",
        default_value_t = ArchivePolicy::Partial,
        long_help = wrap("What to do with an archive that is encrypted, corrupt, or over a size, \
                     entry-count, depth or compression-ratio limit. skip: stop reading that \
                     archive at its first problem; members read before it stay scanned, the \
                     rest is skipped. partial: skip only the member with the problem and go \
                     on when the format allows, else as skip. fail-run: stop the scan with \
                     exit code 2. Skipped archives and members are named in the report \
                     (scan --docs archives).")
    )]
    archive_policy: ArchivePolicy,

    /// Use this gitleaks-format config instead of the built-in rules.
    #[arg(
        short = 'c',
        long = "config",
        value_name = "FILE",
        value_parser = clap::value_parser!(PathBuf),
        long_help = wrap("Scan with the rules of FILE, a gitleaks config (gitleaks' own default \
                     config loads whole). As in gitleaks, the file replaces the built-in rules \
                     unless it has [extend] useDefault = true; disabledRules removes rules. \
                     Without -c, the file named by GITLEAKS_CONFIG, else a .gitleaks.toml at \
                     the root of the (single) directory scanned, is used. Unsupported parts \
                     are skipped with a warning. List the resulting rules with `scan rules`.")
    )]
    config: Option<PathBuf>,

    /// Add rules from a gitleaks-format TOML file (repeatable).
    #[arg(
        long = "rules",
        value_name = "FILE",
        action = ArgAction::Append,
        value_parser = clap::value_parser!(PathBuf),
        long_help = wrap("Load extra rules from FILE, a TOML file in gitleaks' format ([[rules]] \
                     with id, description, regex, secretGroup, keywords, entropy and \
                     allowlists). Repeat to load several; they are added to the built-in rules. \
                     A file that does not parse stops the scan with exit code 2.")
    )]
    rules: Vec<PathBuf>,

    /// Do not run the rule with this id (repeatable).
    #[arg(
        long = "exclude-rule",
        value_name = "ID",
        action = ArgAction::Append,
        long_help = wrap("Do not run the rule with this id, e.g. --exclude-rule generic-api-key. \
                     Repeat to exclude several.")
    )]
    exclude_rule: Vec<String>,

    /// Do not report findings already in this earlier json/jsonl report.
    #[arg(
        long,
        value_name = "FILE",
        value_parser = clap::value_parser!(PathBuf),
        long_help = wrap("Do not report findings whose fingerprint appears in FILE, an earlier \
                     report written with --format json or --format jsonl. Use it to accept \
                     known findings and see only new ones. A missing or unreadable FILE stops \
                     the scan with exit code 2.")
    )]
    baseline: Option<PathBuf>,

    /// Also leave out findings listed in FILE (.gitleaksignore format).
    #[arg(
        short = 'i',
        long = "gitleaks-ignore-path",
        visible_alias = "ignore-file",
        value_name = "FILE",
        value_parser = clap::value_parser!(PathBuf),
        long_help = wrap("Leave out findings listed in FILE, in gitleaks' .gitleaksignore \
                     format: one path:rule:line per line (the path as the report shows it), \
                     or a magpie fingerprint; # starts a comment. A .gitleaksignore at the \
                     root of a scanned directory is read anyway (--no-gitleaksignore turns \
                     that off). A FILE that cannot be read stops the scan with exit code 2. \
                     A line carrying gitleaks:allow or magpie:allow is never reported.")
    )]
    gitleaks_ignore_path: Option<PathBuf>,

    /// Do not read .gitleaksignore at the scan root.
    #[arg(long = "no-gitleaksignore")]
    no_gitleaksignore: bool,

    /// Hide most of each secret (or PERCENT of it).
    #[arg(
        long,
        value_name = "PERCENT",
        num_args = 0..=1,
        require_equals = true,
        value_parser = clap::value_parser!(u8).range(0..=100),
        long_help = wrap("Show each secret as its first few characters (at most 4, at most a \
                     quarter of it) followed by …, in every format. --redact=PERCENT hides \
                     that share of each secret instead, as gitleaks does: --redact=100 shows \
                     … alone, --redact=50 the first half. Fingerprints are unchanged, so a \
                     redacted report still works as a baseline.")
    )]
    redact: Option<Option<u8>>,

    /// Exit code when findings are reported [default: 1].
    #[arg(
        long,
        value_name = "N",
        default_value_t = EXIT_FINDINGS,
        long_help = wrap("The exit code when the scan finishes with findings, as gitleaks' \
                     --exit-code: 0 lets a pipeline go on and read the report. Errors still \
                     exit 2.")
    )]
    exit_code: u8,

    /// Show scheduler and pipeline counters in the summary.
    #[arg(
        long,
        long_help = wrap("Add the runtime's and the pipeline's counters (tasks run, steals, parks, \
                     bytes fetched, back-pressure, ...) to the summary on standard error and \
                     to the json summary.")
    )]
    metrics: bool,

    /// Write a Chrome trace of the scan's tasks to FILE.
    #[arg(
        long,
        value_name = "FILE",
        value_parser = clap::value_parser!(PathBuf),
        long_help = wrap("Write a Chrome trace-event JSON file of every task each worker ran \
                     (Enumerate, FetchSync, Scan) with its path, offset and size. Open it in \
                     https://ui.perfetto.dev or chrome://tracing. The number of events kept \
                     is bounded; the summary says how many were dropped.")
    )]
    trace: Option<PathBuf>,

    /// Do not draw the progress bar.
    #[arg(
        long,
        long_help = wrap("Do not draw the progress bar. It is drawn on standard error only when \
                     standard error is a terminal, so pipes and CI logs never get it anyway.")
    )]
    no_progress: bool,

    /// When to use colour.
    #[arg(
        long,
        value_enum,
        value_name = "WHEN",
        default_value_t = ColorChoice::Auto,
        long_help = wrap("When to colour the text output and the summary. auto: only on a terminal, \
                     and not when the NO_COLOR environment variable is set to a non-empty \
                     value. always: even into files and pipes. never: no colour.")
    )]
    color: ColorChoice,

    /// Write the report to FILE instead of standard output.
    #[arg(
        short = 'o',
        long,
        visible_alias = "report-path",
        value_name = "FILE",
        value_parser = clap::value_parser!(PathBuf),
        long_help = wrap("Write the report to FILE (created or truncated) instead of standard \
                     output. The summary still goes to standard error.")
    )]
    output: Option<PathBuf>,

    /// Payload bytes per chunk (testing knob).
    #[arg(long, value_name = "SIZE", hide = true, default_value = "256K", value_parser = parse_chunk_size)]
    chunk_size: usize,

    /// Keyword prefilter of the rule engine (benchmark knob).
    #[arg(long, value_enum, value_name = "ENGINE", hide = true)]
    prefilter: Option<Prefilter>,
}

/// The largest hidden `--chunk-size`: 64 MiB.
pub const MAX_CHUNK_SIZE: usize = 64 << 20;

fn parse_chunk_size(s: &str) -> Result<usize, String> {
    let n = parse_size(s)?;
    if n == 0 || n > MAX_CHUNK_SIZE as u64 {
        return Err(format!("must be between 1 and {MAX_CHUNK_SIZE} bytes"));
    }
    Ok(n as usize)
}

impl Cli {
    /// `scan git`'s flags were given to a directory scan.
    fn git_flag(&self) -> Option<&'static str> {
        if self.branch.is_some() {
            Some("--branch")
        } else if self.since_commit.is_some() {
            Some("--since-commit")
        } else if self.log_range.is_some() {
            Some("--log-range")
        } else if self.staged {
            Some("--staged")
        } else if self.all_objects {
            Some("--all-objects")
        } else if self.state.is_some() {
            Some("--state")
        } else if self.whole_blobs {
            Some("--whole-blobs")
        } else {
            None
        }
    }

    fn into_config(self) -> Config {
        let workers = self.workers.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get().min(MAX_WORKERS))
                .unwrap_or(1)
        });
        Config {
            paths: self.paths,
            format: self.format,
            workers,
            max_file_size: (self.max_file_size != 0).then_some(self.max_file_size),
            max_decode_depth: self.max_decode_depth,
            respect_ignore_files: self.respect_gitignore && !self.no_ignore,
            exclude: self.exclude,
            verbose: self.verbose,
            fail_on_skip: self.fail_on_skip,
            follow_symlinks: self.follow_symlinks,
            scan_archives: !self.no_archives && self.archive_depth > 0,
            archive_depth: if self.no_archives {
                0
            } else {
                self.archive_depth
            },
            archive_policy: self.archive_policy,
            config_file: self.config,
            list_rules: false,
            rule_files: self.rules,
            exclude_rules: self.exclude_rule,
            baseline: self.baseline,
            redact: self.redact.is_some(),
            redact_percent: self.redact.flatten(),
            exit_code: self.exit_code,
            docs: self.docs,
            ignore_file: self.gitleaks_ignore_path,
            no_ignore_file: self.no_gitleaksignore,
            metrics: self.metrics,
            trace: self.trace,
            progress: !self.no_progress,
            color: self.color,
            output: self.output,
            chunk_size: self.chunk_size,
            prefilter: self.prefilter,
            git: None,
            no_git_history: self.no_git_history,
            shard: self.shard,
            merge: None,
        }
    }
}

/// Parses `args` (the program name first, as from `std::env::args_os()`).
///
/// On `--help`/`--version` and on bad arguments returns the `clap::Error`;
/// print it with `.print()` and exit with `.exit_code()` (0 for help and
/// version, 2 for usage errors).
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Config, clap::Error> {
    let args: Vec<OsString> = args.into_iter().collect();
    if args.get(1).is_some_and(|a| a == "rules") {
        return RulesCli::try_parse_from(&args[1..]).map(RulesCli::into_config);
    }
    if args.get(1).is_some_and(|a| a == "git") {
        return parse_git(&args[1..]);
    }
    if args.get(1).is_some_and(|a| a == "merge") {
        return MergeCli::try_parse_from(&args[1..]).map(MergeCli::into_config);
    }
    let cli = Cli::try_parse_from(args)?;
    if cli.paths.is_empty() && cli.docs.is_none() {
        use clap::CommandFactory;
        return Err(Cli::command().error(
            clap::error::ErrorKind::MissingRequiredArgument,
            "the following required arguments were not provided:\n  <PATH>...",
        ));
    }
    if let Some(flag) = cli.git_flag() {
        use clap::CommandFactory;
        return Err(Cli::command().error(
            clap::error::ErrorKind::ArgumentConflict,
            format!("{flag} reads git history: use it with `scan git`"),
        ));
    }
    Ok(cli.into_config())
}

/// `scan git [OPTIONS] [REPO]`: the same options as a directory scan, plus
/// the history ones, and one repository (default `.`).
fn git_command() -> clap::Command {
    use clap::CommandFactory;
    let mut cmd = Cli::command()
        .name("scan git")
        .bin_name("scan git")
        .about("Scan a git repository's history: every blob reachable from its refs, once.")
        .long_about(wrap(
            "Scan a git repository's history: every blob reachable from any ref (or from \
             --branch, after --since-commit, in --log-range), each blob once, attributed \
             to the commit that introduced it. REPO is a work tree, a bare repository or \
             a .git directory. Findings carry the commit id, author, date and subject \
             (scan --docs output).",
        ))
        .after_help("Exit status: 0 nothing found, 1 findings, 2 error (REPO is no repository).")
        .after_long_help(
            "EXAMPLES:\n  scan git                          the repository in the current directory\n  \
             scan git --since-commit abc123 .  only what came after abc123\n  \
             scan git --staged                 what is about to be committed\n  \
             scan git --state .scan-state.json .   CI: only what the last run did not see\n  \
             scan git -f sarif -o h.sarif .    SARIF with the commit of each finding",
        )
        .mut_arg("paths", |a| {
            a.value_name("REPO")
                .num_args(0..=1)
                .help("The repository [default: .]")
                .long_help(wrap(
                    "The repository to read: a work tree, a bare repository, or a .git \
                     directory named directly. [default: .]",
                ))
        });
    for id in [
        "branch",
        "since_commit",
        "log_range",
        "staged",
        "all_objects",
        "state",
        "whole_blobs",
    ] {
        cmd = cmd.mut_arg(id, |a| a.hide(false));
    }
    // A directory scan's switch for its history: refused by `scan git`.
    cmd.mut_arg("no_git_history", |a| a.hide(true))
}

fn parse_git(args: &[OsString]) -> Result<Config, clap::Error> {
    use clap::FromArgMatches;
    let mut cmd = git_command();
    let matches = cmd.try_get_matches_from_mut(args)?;
    let cli = Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut cmd))?;
    if cli.no_git_history {
        return Err(cmd.error(
            clap::error::ErrorKind::ArgumentConflict,
            "--no-git-history is for directory scans: `scan git` reads history",
        ));
    }
    let repo = cli
        .paths
        .first()
        .cloned()
        .unwrap_or_else(|| PathBuf::from("."));
    let git = crate::git::GitOptions {
        repo: repo.clone(),
        branch: cli.branch.clone(),
        since_commit: cli.since_commit.clone(),
        range: cli.log_range.clone(),
        staged: cli.staged,
        all_objects: cli.all_objects,
        exclude: cli.exclude.clone(),
        state: cli.state.clone(),
        whole_blobs: cli.whole_blobs,
    };
    let mut config = cli.into_config();
    config.paths = vec![repo];
    config.git = Some(git);
    Ok(config)
}

/// The full `scan git --help` text (for tests and documentation).
pub fn git_long_help() -> String {
    git_command().render_long_help().to_string()
}

/// `scan merge FILE...`: the `jsonl` reports of `--shard` runs as one
/// report (a directory named `merge` is scanned as `scan ./merge`).
#[derive(Debug, Parser)]
#[command(
    name = "scan merge",
    bin_name = "scan merge",
    about = "Put the jsonl reports of `scan --shard I/N` runs together into one report.",
    long_about = wrap("Put the jsonl reports of `scan --shard I/N --format jsonl` runs \
                  together into one report, in any format: findings de-duplicated by \
                  fingerprint and in the order one whole run gives them, skipped entries \
                  and counts added up. Every shard 0..N-1 must be given exactly once; a \
                  missing, repeated, truncated or foreign file is an error that names it \
                  (exit 2). The exit code then follows the rules of one scan: 1 with \
                  findings, 2 when a shard could not read part of a git history, or with \
                  --fail-on-skip when anything was skipped."),
    after_long_help = "EXAMPLES:\n  \
        scan --shard 0/2 --exit-code 0 -f jsonl -o s0.jsonl .     on one machine\n  \
        scan --shard 1/2 --exit-code 0 -f jsonl -o s1.jsonl .     on another\n  \
        scan merge -f sarif -o scan.sarif s0.jsonl s1.jsonl    one report, one exit code\n\n\
        Kubernetes and GitHub Actions examples: scan --docs git",
    max_term_width = 100
)]
struct MergeCli {
    /// The shards' jsonl reports.
    #[arg(value_name = "FILE", required = true, value_parser = clap::value_parser!(PathBuf))]
    files: Vec<PathBuf>,
    /// Output format.
    #[arg(short = 'f', long, visible_alias = "report-format", value_enum, value_name = "FORMAT", default_value_t = Format::Text)]
    format: Format,
    /// Write the report to FILE instead of standard output.
    #[arg(short = 'o', long, visible_alias = "report-path", value_name = "FILE", value_parser = clap::value_parser!(PathBuf))]
    output: Option<PathBuf>,
    /// Hide most of each secret (or PERCENT of it), as for a scan.
    #[arg(long, value_name = "PERCENT", num_args = 0..=1, require_equals = true, value_parser = clap::value_parser!(u8).range(0..=100))]
    redact: Option<Option<u8>>,
    /// Do not report findings already in this earlier json/jsonl report.
    #[arg(long, value_name = "FILE", value_parser = clap::value_parser!(PathBuf))]
    baseline: Option<PathBuf>,
    /// Exit code when findings are reported [default: 1].
    #[arg(long, value_name = "N", default_value_t = EXIT_FINDINGS)]
    exit_code: u8,
    /// Exit 2 if any shard skipped a file, blob or archive member.
    #[arg(long)]
    fail_on_skip: bool,
    /// Name every skipped entry on standard error.
    #[arg(short = 'v', long)]
    verbose: bool,
    /// When to use colour.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = ColorChoice::Auto)]
    color: ColorChoice,
}

impl MergeCli {
    fn into_config(self) -> Config {
        let mut c = Cli::try_parse_from([OsString::from("scan"), OsString::from(".")])
            .expect("a single path parses")
            .into_config();
        c.paths = Vec::new();
        c.merge = Some(self.files);
        c.format = self.format;
        c.output = self.output;
        c.redact = self.redact.is_some();
        c.redact_percent = self.redact.flatten();
        c.baseline = self.baseline;
        c.exit_code = self.exit_code;
        c.fail_on_skip = self.fail_on_skip;
        c.verbose = self.verbose;
        c.color = self.color;
        // The shards applied their own .gitleaksignore.
        c.no_ignore_file = true;
        c
    }
}

/// The full `scan merge --help` text (for tests and documentation).
pub fn merge_long_help() -> String {
    use clap::CommandFactory;
    MergeCli::command().render_long_help().to_string()
}

/// `scan rules`: list the rules a scan would run (a directory named `rules`
/// is scanned as `scan ./rules`).
#[derive(Debug, Parser)]
#[command(
    name = "scan rules",
    about = "List the rules a scan would run: id, description, keywords, and where each came from."
)]
struct RulesCli {
    /// The directory whose .gitleaks.toml would be picked up.
    #[arg(value_name = "PATH", default_value = ".")]
    path: PathBuf,
    /// A gitleaks-format config, as for a scan.
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Extra rule files, as for a scan.
    #[arg(long = "rules", value_name = "FILE", action = ArgAction::Append)]
    rules: Vec<PathBuf>,
    /// Rule ids left out, as for a scan.
    #[arg(long = "exclude-rule", value_name = "ID", action = ArgAction::Append)]
    exclude_rule: Vec<String>,
    /// One JSON object per rule and line.
    #[arg(long)]
    json: bool,
}

impl RulesCli {
    fn into_config(self) -> Config {
        let mut c = Cli::try_parse_from([OsString::from("scan"), self.path.into_os_string()])
            .expect("a single path parses")
            .into_config();
        c.list_rules = true;
        c.config_file = self.config;
        c.rule_files = self.rules;
        c.exclude_rules = self.exclude_rule;
        c.format = if self.json {
            Format::Jsonl
        } else {
            Format::Text
        };
        c
    }
}

const fn scan_decode_default() -> u32 {
    crate::decode::DEFAULT_MAX_DEPTH
}

/// The full `--help` text (for tests and documentation).
pub fn long_help() -> String {
    use clap::CommandFactory;
    Cli::command().render_long_help().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn sizes_accept_plain_bytes_and_binary_suffixes() {
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("64kib"), Ok(64 << 10));
        assert_eq!(parse_size("2TB"), Ok(2 << 40));
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("7b"), Ok(7));
    }

    #[test]
    fn sizes_reject_garbage_and_overflow() {
        for bad in [
            "",
            "M",
            "1.5G",
            "-1",
            "12X",
            "99999999999999999999",
            "20000000T",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }
}
