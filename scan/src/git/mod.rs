//! `scan git`: a repository's history as a source of the scan pipeline.
//!
//! [`HistoryCursor`] lists, commit by commit (parents before children), the
//! blobs each commit introduced against its first parent, each blob id once;
//! the pipeline admits them like files (`EnumCursor::Git`), decodes each blob
//! with gix in a FetchSync task and scans it with the same rules, chunking,
//! suppression and reports as a directory scan. `README.md` beside this file
//! is the design.

pub mod added;
pub mod auto;
mod history;
pub mod lfs;
pub mod odb;
pub mod state;

use std::path::{Path, PathBuf};

pub use history::{GitItem, HistoryCursor, PACK_ORDER_WINDOW};
pub use odb::Odb;
pub use state::StateUpdate;

use crate::report::ScanError;

/// What `scan git` was asked to read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GitOptions {
    /// The repository: a work tree, a bare repository or a `.git` directory.
    pub repo: PathBuf,
    /// `--branch REF`: only commits reachable from REF (instead of all refs).
    pub branch: Option<String>,
    /// `--since-commit SHA`: leave out SHA and every commit it reaches.
    pub since_commit: Option<String>,
    /// `--log-range A..B`: commits reachable from B and not from A.
    pub range: Option<String>,
    /// `--staged`: the index against HEAD (what is about to be committed).
    pub staged: bool,
    /// `--all-objects`: every commit in the object database is a tip (a
    /// dangling commit is walked like a branch), and blobs no commit
    /// reaches are scanned too.
    pub all_objects: bool,
    /// `--exclude` globs, matched against the path in each commit's tree.
    pub exclude: Vec<String>,
    /// `--state FILE`: incremental mode. The commits FILE lists (the tips
    /// of the last complete scan) and everything they reach are left out;
    /// the new tips are written back to FILE when the scan completes
    /// (`state.rs`).
    pub state: Option<PathBuf>,
    /// `--whole-blobs`: scan every blob whole, not only what it adds
    /// against its first parent's blob at its path (`added.rs`).
    pub whole_blobs: bool,
}

/// Whether a directory scan (`scan DIR`) read the history of the
/// repository it found, as the summary, `json` and SARIF say it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HistoryStatus {
    /// The history was scanned: `commits` commits walked, `blobs` blobs
    /// scanned.
    Scanned {
        /// Commits the history walk covered.
        commits: u64,
        /// Blobs whose bytes were scanned.
        blobs: u64,
    },
    /// A repository was found (or DIR is inside one) and its history was
    /// not scanned, for the reason given (`--no-git-history`, ...).
    NotScanned(String),
}

impl HistoryStatus {
    /// The summary line: `history: 12 commits scanned (30 blobs)` or
    /// `history: not scanned (--no-git-history)`.
    pub fn line(&self) -> String {
        match self {
            HistoryStatus::Scanned { commits, blobs } => format!(
                "history: {commits} {} scanned ({blobs} {})",
                if *commits == 1 { "commit" } else { "commits" },
                if *blobs == 1 { "blob" } else { "blobs" },
            ),
            HistoryStatus::NotScanned(why) => format!("history: not scanned ({why})"),
        }
    }

    /// As JSON: `{"scanned":true,"commits":12,"blobs":30}` or
    /// `{"scanned":false,"reason":"--no-git-history"}` (the `json`
    /// summary's `history` and the SARIF run's `properties.history`).
    pub fn to_json(&self) -> String {
        match self {
            HistoryStatus::Scanned { commits, blobs } => {
                format!("{{\"scanned\":true,\"commits\":{commits},\"blobs\":{blobs}}}")
            }
            HistoryStatus::NotScanned(why) => format!(
                "{{\"scanned\":false,\"reason\":{}}}",
                serde_json::Value::String(why.clone())
            ),
        }
    }
}

/// Who and what a commit is, as the reports show it.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommitMeta {
    /// The full commit id, 40 lowercase hex digits (for `--staged`, the
    /// literal `staged`).
    pub id: String,
    /// The author's name.
    pub author: String,
    /// The author's email.
    pub email: String,
    /// The author date, RFC 3339 with the author's offset
    /// (`2024-05-01T12:00:00+02:00`).
    pub date: String,
    /// The first line of the message.
    pub subject: String,
}

impl CommitMeta {
    /// The first 12 hex digits of the id (what the text format shows).
    pub fn short_id(&self) -> &str {
        &self.id[..self.id.len().min(12)]
    }
}

/// A blob admitted to the pipeline: its id (to decode it), the commit
/// that introduced it (for the findings), and the blob it replaced.
#[derive(Debug)]
pub struct GitBlob {
    /// The blob's object id.
    pub id: gix::ObjectId,
    /// The commit that introduced the blob at its path.
    pub commit: std::sync::Arc<CommitMeta>,
    /// The first parent's blob at the same path, if it had one there:
    /// only what this blob adds against it is scanned (`added.rs`).
    pub base: Option<gix::ObjectId>,
    /// What the blob adds against `base`, set by its first FetchSync
    /// before any of its Scans run when it is read by windows; unset when
    /// it is scanned whole. A Scan keeps only findings that touch it.
    pub added: std::sync::OnceLock<added::AddedRanges>,
}

/// Two blobs are the same item when id, commit and base are (what it adds
/// follows from those).
impl PartialEq for GitBlob {
    fn eq(&self, other: &Self) -> bool {
        (self.id, &self.commit, self.base) == (other.id, &other.commit, other.base)
    }
}

impl Eq for GitBlob {}

impl GitBlob {
    /// A blob not yet decoded.
    pub fn new(
        id: gix::ObjectId,
        commit: std::sync::Arc<CommitMeta>,
        base: Option<gix::ObjectId>,
    ) -> Self {
        Self {
            id,
            commit,
            base,
            added: std::sync::OnceLock::new(),
        }
    }

    /// Whether a finding at `[start, end)` of the blob (its secret, or its
    /// encoded span) is reported: always when the blob is scanned whole,
    /// else when it touches a byte the blob adds.
    pub fn reports(&self, start: u64, end: u64) -> bool {
        self.added
            .get()
            .is_none_or(|added| added::touches(added, start, end))
    }
}

/// Opens the repository at `path`: a work tree (or a directory inside
/// one is NOT searched upward: the path must be the repository), a bare
/// repository, or a `.git` directory named directly. A path that is no
/// repository is an error (exit 2).
pub fn open(path: &Path) -> Result<gix::ThreadSafeRepository, ScanError> {
    if let Err(source) = std::fs::metadata(path) {
        return Err(ScanError::Root {
            path: path.to_path_buf(),
            source,
        });
    }
    gix::ThreadSafeRepository::open(path)
        .map_err(|e| ScanError::Usage(format!("{}: not a git repository ({e})", path.display())))
}

/// The work tree of `repo` if it has one, else its git directory: where a
/// `.gitleaksignore` or `.gitleaks.toml` of the repository is looked for.
pub fn root_dir(repo: &gix::ThreadSafeRepository) -> PathBuf {
    repo.work_dir()
        .unwrap_or_else(|| repo.git_dir())
        .to_path_buf()
}

/// SARIF's `versionControlProvenance` for `repo`: the `origin` remote's URL
/// (else a `file://` URI of the git directory), HEAD's commit and branch.
pub fn provenance(repo: &gix::ThreadSafeRepository) -> crate::report::Provenance {
    let repo = repo.to_thread_local();
    let repository_uri = repo
        .config_snapshot()
        .string("remote.origin.url")
        .map(|u| u.to_string())
        .unwrap_or_else(|| {
            let dir = std::path::absolute(repo.git_dir()).unwrap_or_else(|_| repo.git_dir().into());
            format!("file://{}", dir.display())
        });
    let revision_id = repo.head_id().ok().map(|id| id.to_string());
    let branch = repo
        .head_name()
        .ok()
        .flatten()
        .map(|n| n.shorten().to_string());
    crate::report::Provenance {
        repository_uri,
        revision_id,
        branch,
    }
}
