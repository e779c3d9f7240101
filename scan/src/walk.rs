//! The walker: a resumable, depth-first cursor over the scan roots.
//!
//! An Enumerate task owns a [`WalkCursor`], pulls a batch of [`WalkItem`]s
//! with [`WalkCursor::next_batch`], hands them on, and re-enqueues itself with
//! the cursor when the frontier is full; no listing work is lost or repeated.
//!
//! ## Rules
//!
//! 1. Roots are walked in the order given. A root that does not exist or
//!    cannot be read yields [`WalkItem::RootError`] (the CLI turns it into
//!    exit code 2). A root that is a file is yielded as a file; a root that is
//!    a symlink is followed (it was named on the command line).
//! 2. Below a root the walk is depth-first, entries sorted by raw file name
//!    bytes, so the order is reproducible.
//! 3. Ignore files are **not** applied by default: a secret scanner must
//!    not miss `.env` because `.gitignore` lists it (that is why it is
//!    listed). With `respect_ignore` (`--respect-gitignore`), `.gitignore`,
//!    `.ignore` and `.git/info/exclude` rules apply as git and ripgrep apply
//!    them, also outside a git repository and from the directories above a
//!    root; the user's global git excludes file never does. What they leave
//!    out is counted in [`Exclusions`] (a directory counts once and is not
//!    entered). `--exclude` globs work the same way, counted apart.
//! 4. Hidden files are scanned. Directories named `.git` are never entered.
//! 5. A symlink is not followed by default: it is yielded as skipped with
//!    reason `symlink_not_followed`, or `broken_symlink` / `symlink_loop` when
//!    its target is missing or loops (one `stat`, no open). With
//!    `follow_symlinks`, links are followed and a link back to an ancestor is
//!    yielded as `symlink_loop` instead of being entered again, so the walk
//!    always ends.
//! 6. FIFOs, sockets and devices below a root are yielded as
//!    `special_file`, decided from the entry's type; they are never opened.
//!    A FIFO named as a root, and `-` (standard input), are yielded as
//!    [`WalkItem::Stream`]: the user asked for them, so they are read to
//!    their end, bounded by the size limit.
//! 7. Regular files over `max_file_size` are yielded as `too_large`, decided
//!    from metadata.
//! 8. A path is the root exactly as given joined with the names below it;
//!    names are raw `OsStr` bytes and survive exactly, UTF-8 or not.
//! 9. Ignore files are read only after a `stat` says each is a regular file
//!    of at most [`MAX_IGNORE_FILE_BYTES`] ([`IGNORE_FILES`]): a FIFO would
//!    block the walk forever and a sparse giant would exhaust memory. A
//!    directory with such a file (or a root with one in an ancestor) is
//!    walked with ignore rules off from there down, so nothing in it is
//!    hidden, and the hostile file itself is reported like any other entry
//!    (e.g. a FIFO as `special_file`).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::overrides::{Override, OverrideBuilder};
use magpie_core::sync::{Arc, Mutex};

use crate::skip::{SkipReason, SpecialKind};
use crate::source::DEFAULT_MAX_FILE_SIZE;

/// The ignore files read in a directory (with `respect_ignore`).
pub const IGNORE_FILES: [&str; 3] = [".gitignore", ".ignore", ".git/info/exclude"];

/// An ignore file larger than this makes its directory be walked without
/// ignore rules instead of being read: 1 MiB.
pub const MAX_IGNORE_FILE_BYTES: u64 = 1024 * 1024;

/// True when every ignore file in `dir` may safely be opened and read (one
/// `stat` each, following links as the open would).
fn ignore_files_are_safe(dir: &Path) -> bool {
    IGNORE_FILES
        .iter()
        .all(|name| match fs::metadata(dir.join(name)) {
            Ok(m) => m.is_dir() || (m.is_file() && m.len() <= MAX_IGNORE_FILE_BYTES),
            // A missing or unreadable file is not read.
            Err(_) => true,
        })
}

/// What the walk's filters left out: counted, never silently.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Exclusions {
    /// Files an ignore file excluded (`--respect-gitignore`).
    pub ignored_files: u64,
    /// Directories an ignore file excluded; not entered, so what is inside
    /// is not counted.
    pub ignored_dirs: u64,
    /// Files an `--exclude` glob excluded.
    pub excluded_files: u64,
    /// Directories an `--exclude` glob excluded (not entered).
    pub excluded_dirs: u64,
}

impl Exclusions {
    /// Adds `o` to `self`.
    pub fn add(&mut self, o: &Exclusions) {
        self.ignored_files += o.ignored_files;
        self.ignored_dirs += o.ignored_dirs;
        self.excluded_files += o.excluded_files;
        self.excluded_dirs += o.excluded_dirs;
    }
}

/// What the walker does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalkConfig {
    /// Follow symbolic links (loop-safe). Default: false.
    pub follow_symlinks: bool,
    /// Apply `.gitignore`, `.ignore` and `.git/info/exclude` rules. Default:
    /// false (ignored files are where secrets live).
    pub respect_ignore: bool,
    /// Files larger than this are skipped as too large. Default:
    /// [`DEFAULT_MAX_FILE_SIZE`] (256 MiB).
    pub max_file_size: Option<u64>,
    /// Gitignore-style globs of paths not to scan (`--exclude`), matched
    /// against the path below each root. Never applied to a root itself.
    pub exclude: Vec<String>,
}

impl Default for WalkConfig {
    fn default() -> Self {
        WalkConfig {
            follow_symlinks: false,
            respect_ignore: false,
            max_file_size: Some(DEFAULT_MAX_FILE_SIZE),
            exclude: Vec::new(),
        }
    }
}

/// Compiles `--exclude` globs (gitignore syntax: `*.min.js`, `vendor/`,
/// `docs/**/*.md`); an error names the bad glob.
pub fn compile_excludes(globs: &[String]) -> Result<Option<Override>, String> {
    if globs.is_empty() {
        return Ok(None);
    }
    let mut b = OverrideBuilder::new(".");
    for g in globs {
        b.add(&format!("!{g}"))
            .map_err(|e| format!("--exclude {g:?}: {e}"))?;
    }
    b.build().map(Some).map_err(|e| e.to_string())
}

/// One thing the walker found.
#[derive(Debug)]
pub enum WalkItem {
    /// A regular file to scan, with its size when it was listed.
    File {
        /// Root as given joined with the path below it.
        path: PathBuf,
        /// Size from the listing's metadata (re-checked at open).
        size: u64,
    },
    /// An entry that will not be scanned, and why.
    Skipped {
        /// Root as given joined with the path below it.
        path: PathBuf,
        /// Why.
        reason: SkipReason,
    },
    /// A root to read as a stream, to its end (bounded by the size limit):
    /// `-` (standard input) or a FIFO named on the command line.
    Stream {
        /// The root as given.
        path: PathBuf,
    },
    /// A root that does not exist or cannot be read.
    RootError {
        /// The root as given.
        path: PathBuf,
        /// What went wrong.
        error: io::Error,
    },
}

impl WalkItem {
    /// The path of the item.
    pub fn path(&self) -> &Path {
        match self {
            WalkItem::File { path, .. }
            | WalkItem::Skipped { path, .. }
            | WalkItem::Stream { path }
            | WalkItem::RootError { path, .. } => path,
        }
    }
}

/// The ignore rules of one directory.
#[derive(Default)]
struct DirRules {
    dot_ignore: Option<Gitignore>,
    gitignore: Option<Gitignore>,
    git_exclude: Option<Gitignore>,
    /// The directory holds `.git` (a repository's top): `.gitignore` files
    /// above it do not apply, as in git.
    has_git: bool,
    /// A hostile ignore file here or above: no rule applies at or below.
    off: bool,
}

fn load_one(dir: &Path, name: &str) -> Option<Gitignore> {
    let file = dir.join(name);
    if !fs::metadata(&file).is_ok_and(|m| m.is_file()) {
        return None;
    }
    let mut b = GitignoreBuilder::new(dir);
    // A malformed line is dropped; the rest of the file still applies.
    let _ = b.add(&file);
    b.build().ok().filter(|g| !g.is_empty())
}

impl DirRules {
    /// The rules of `dir` (an absolute path), below a directory whose rules
    /// were `off` or not.
    fn load(dir: &Path, parent_off: bool) -> DirRules {
        if parent_off || !ignore_files_are_safe(dir) {
            return DirRules {
                off: true,
                ..DirRules::default()
            };
        }
        let git = dir.join(".git");
        let has_git = fs::symlink_metadata(&git).is_ok();
        DirRules {
            dot_ignore: load_one(dir, ".ignore"),
            gitignore: load_one(dir, ".gitignore"),
            git_exclude: if git.is_dir() {
                load_one(dir, ".git/info/exclude")
            } else {
                None
            },
            has_git,
            off: false,
        }
    }
}

/// `Some(true)`: ignored; `Some(false)`: whitelisted by a `!` rule.
fn verdict(g: Option<&Gitignore>, abs: &Path, is_dir: bool) -> Option<bool> {
    let m = g?.matched(abs, is_dir);
    if m.is_ignore() {
        Some(true)
    } else if m.is_whitelist() {
        Some(false)
    } else {
        None
    }
}

/// The entry filter of one root's walk. The walk is depth-first and calls
/// the filter on each entry before descending into it, so `stack[d]` holds
/// the rules of the directory at depth `d` on the current path.
struct Filter {
    root: PathBuf,
    abs_root: PathBuf,
    respect: bool,
    exclude: Option<Override>,
    /// Rules of the root's ancestors, nearest first.
    above: Vec<DirRules>,
    stack: Vec<DirRules>,
    counts: Exclusions,
}

impl Filter {
    fn new(root: &Path, respect: bool, exclude: Option<Override>) -> Filter {
        let abs_root = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
        let mut above = Vec::new();
        let mut stack = Vec::new();
        if respect {
            // Outermost first while loading, so `off` is inherited downward.
            let ancestors: Vec<&Path> = abs_root.ancestors().skip(1).collect();
            let mut off = false;
            for dir in ancestors.iter().rev() {
                let rules = DirRules::load(dir, off);
                off = rules.off;
                above.push(rules);
            }
            above.reverse();
            stack.push(DirRules::load(&abs_root, off));
        }
        Filter {
            root: root.to_path_buf(),
            abs_root,
            respect,
            exclude,
            above,
            stack,
            counts: Exclusions::default(),
        }
    }

    /// Whether the ignore rules in force exclude `abs` (git's precedence:
    /// the deepest matching rule of a kind wins; `.ignore` over `.gitignore`
    /// over `.git/info/exclude`; `.gitignore` files above a repository's top
    /// do not apply).
    fn ignored(&self, abs: &Path, is_dir: bool) -> bool {
        if self.stack.last().is_some_and(|r| r.off) {
            return false;
        }
        let (mut dot, mut git, mut excl) = (None, None, None);
        let mut saw_git = false;
        for r in self.stack.iter().rev().chain(self.above.iter()) {
            if dot.is_none() {
                dot = verdict(r.dot_ignore.as_ref(), abs, is_dir);
            }
            if !saw_git {
                if git.is_none() {
                    git = verdict(r.gitignore.as_ref(), abs, is_dir);
                }
                if excl.is_none() {
                    excl = verdict(r.git_exclude.as_ref(), abs, is_dir);
                }
            }
            saw_git |= r.has_git;
        }
        dot.or(git).or(excl).unwrap_or(false)
    }

    /// Decides one entry below the root: false to leave it out (and not
    /// enter it).
    fn keep(&mut self, e: &ignore::DirEntry) -> bool {
        let dir = is_dir(e);
        if dir && e.file_name() == ".git" {
            return false;
        }
        let depth = e.depth();
        if self.respect {
            self.stack.truncate(depth);
        }
        let rel = e.path().strip_prefix(&self.root).unwrap_or(e.path());
        if let Some(ov) = &self.exclude {
            if ov.matched(rel, dir).is_ignore() {
                if dir {
                    self.counts.excluded_dirs += 1;
                } else {
                    self.counts.excluded_files += 1;
                }
                return false;
            }
        }
        if !self.respect {
            return true;
        }
        let abs = self.abs_root.join(rel);
        if self.ignored(&abs, dir) {
            if dir {
                self.counts.ignored_dirs += 1;
            } else {
                self.counts.ignored_files += 1;
            }
            return false;
        }
        if dir {
            let off = self.stack.last().is_some_and(|r| r.off);
            self.stack.push(DirRules::load(&abs, off));
        }
        true
    }
}

/// Resumable walk state over one or more roots. `Send`, so the Enumerate task
/// that owns it can move between worker threads.
pub struct WalkCursor {
    roots: std::vec::IntoIter<PathBuf>,
    cfg: WalkConfig,
    exclude: Option<Override>,
    current: Option<(ignore::Walk, Arc<Mutex<Filter>>)>,
    counts: Exclusions,
    finished: bool,
}

impl std::fmt::Debug for WalkCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalkCursor")
            .field("roots_left", &self.roots.len())
            .field("cfg", &self.cfg)
            .field("walking", &self.current.is_some())
            .field("finished", &self.finished)
            .finish()
    }
}

const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<WalkCursor>();
};

impl WalkCursor {
    /// A cursor that will walk `roots` in order. `--exclude` globs that do
    /// not compile are dropped here; check them first with
    /// [`compile_excludes`].
    pub fn new(roots: Vec<PathBuf>, cfg: WalkConfig) -> Self {
        let exclude = compile_excludes(&cfg.exclude).ok().flatten();
        WalkCursor {
            roots: roots.into_iter(),
            cfg,
            exclude,
            current: None,
            counts: Exclusions::default(),
            finished: false,
        }
    }

    /// What ignore files and `--exclude` left out so far (complete once
    /// [`WalkCursor::next_batch`] returned false).
    pub fn exclusions(&self) -> Exclusions {
        let mut c = self.counts;
        if let Some((_, f)) = &self.current {
            c.add(&lock(f).counts);
        }
        c
    }

    /// Appends up to `max` items to `out`; returns false once the walk is
    /// finished (no further call will yield anything).
    pub fn next_batch(&mut self, max: usize, out: &mut Vec<WalkItem>) -> bool {
        let mut produced = 0;
        while produced < max && !self.finished {
            if let Some((walk, filter)) = self.current.as_mut() {
                match walk.next() {
                    None => {
                        self.counts.add(&lock(filter).counts);
                        self.current = None;
                    }
                    Some(res) => {
                        if let Some(item) = classify(res, &self.cfg) {
                            out.push(item);
                            produced += 1;
                        }
                    }
                }
                continue;
            }
            let Some(root) = self.roots.next() else {
                self.finished = true;
                break;
            };
            if crate::source::is_stdin(&root) {
                out.push(WalkItem::Stream { path: root });
                produced += 1;
                continue;
            }
            match fs::metadata(&root) {
                Err(error) => {
                    out.push(WalkItem::RootError { path: root, error });
                    produced += 1;
                }
                Ok(meta) if meta.is_dir() => {
                    self.current = Some(self.build(&root));
                }
                Ok(meta) if meta.is_file() => {
                    out.push(file_item(root, meta.len(), &self.cfg));
                    produced += 1;
                }
                Ok(meta) if std::os::unix::fs::FileTypeExt::is_fifo(&meta.file_type()) => {
                    out.push(WalkItem::Stream { path: root });
                    produced += 1;
                }
                Ok(meta) => {
                    out.push(WalkItem::Skipped {
                        path: root,
                        reason: SkipReason::SpecialFile(SpecialKind::of(meta.file_type())),
                    });
                    produced += 1;
                }
            }
        }
        !self.finished
    }

    /// A walk of `root` with every rule of the `ignore` crate off: the
    /// [`Filter`] applies ignore files and `--exclude` itself, so that what
    /// they leave out is counted.
    fn build(&self, root: &Path) -> (ignore::Walk, Arc<Mutex<Filter>>) {
        let filter = Arc::new(Mutex::new(Filter::new(
            root,
            self.cfg.respect_ignore,
            self.exclude.clone(),
        )));
        let mut b = ignore::WalkBuilder::new(root);
        b.follow_links(self.cfg.follow_symlinks)
            .standard_filters(false)
            .sort_by_file_name(|a, b| a.cmp(b));
        let f = Arc::clone(&filter);
        b.filter_entry(move |e| lock(&f).keep(e));
        (b.build(), filter)
    }
}

fn is_dir(e: &ignore::DirEntry) -> bool {
    e.file_type().is_some_and(|t| t.is_dir())
}

fn lock(m: &Mutex<Filter>) -> magpie_core::sync::MutexGuard<'_, Filter> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn file_item(path: PathBuf, size: u64, cfg: &WalkConfig) -> WalkItem {
    match cfg.max_file_size {
        Some(limit) if size > limit => WalkItem::Skipped {
            path,
            reason: SkipReason::TooLarge { size, limit },
        },
        _ => WalkItem::File { path, size },
    }
}

fn classify(res: Result<ignore::DirEntry, ignore::Error>, cfg: &WalkConfig) -> Option<WalkItem> {
    let ent = match res {
        Ok(ent) => ent,
        Err(err) => return classify_error(err),
    };
    let ft = ent.file_type()?; // None only for stdin, which we never add.
    if ft.is_dir() {
        return None;
    }
    if ft.is_symlink() {
        // Only seen when links are not followed.
        let reason = symlink_reason(ent.path());
        return Some(WalkItem::Skipped {
            path: ent.into_path(),
            reason,
        });
    }
    if ft.is_file() {
        return Some(match ent.metadata() {
            Ok(meta) => file_item(ent.into_path(), meta.len(), cfg),
            Err(err) => {
                let reason = err
                    .io_error()
                    .map_or(SkipReason::Vanished, SkipReason::from_io);
                WalkItem::Skipped {
                    path: ent.into_path(),
                    reason,
                }
            }
        });
    }
    Some(WalkItem::Skipped {
        path: ent.into_path(),
        reason: SkipReason::SpecialFile(SpecialKind::of(ft)),
    })
}

/// Why a symlink that is not followed is skipped: one `stat` of the target
/// tells a dangling link and a loop from a plain "not followed".
fn symlink_reason(path: &Path) -> SkipReason {
    match fs::metadata(path) {
        Ok(_) => SkipReason::SymlinkNotFollowed,
        Err(e) if is_loop(&e) => SkipReason::SymlinkLoop,
        Err(e) if e.kind() == io::ErrorKind::NotFound => SkipReason::BrokenSymlink,
        Err(_) => SkipReason::SymlinkNotFollowed,
    }
}

fn is_loop(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ELOOP)
}

/// The parts of an `ignore::Error` that matter here.
struct ErrorParts {
    path: Option<PathBuf>,
    depth: Option<usize>,
    loop_child: Option<PathBuf>,
    io: Option<io::Error>,
}

fn flatten(err: ignore::Error, parts: &mut ErrorParts) {
    match err {
        ignore::Error::WithPath { path, err } => {
            parts.path.get_or_insert(path);
            flatten(*err, parts);
        }
        ignore::Error::WithDepth { depth, err } => {
            parts.depth.get_or_insert(depth);
            flatten(*err, parts);
        }
        ignore::Error::WithLineNumber { err, .. } => flatten(*err, parts),
        ignore::Error::Loop { child, .. } => parts.loop_child = Some(child),
        ignore::Error::Io(e) => parts.io = Some(e),
        ignore::Error::Partial(mut errs) if errs.len() == 1 => flatten(errs.remove(0), parts),
        _ => {}
    }
}

fn classify_error(err: ignore::Error) -> Option<WalkItem> {
    let mut parts = ErrorParts {
        path: None,
        depth: None,
        loop_child: None,
        io: None,
    };
    flatten(err, &mut parts);
    if let Some(child) = parts.loop_child {
        return Some(WalkItem::Skipped {
            path: child,
            reason: SkipReason::SymlinkLoop,
        });
    }
    // Errors without a path come from parsing ignore files: not entries.
    let path = parts.path?;
    let io = parts
        .io
        .unwrap_or_else(|| io::Error::other("walk error without an I/O cause"));
    if parts.depth == Some(0) {
        return Some(WalkItem::RootError { path, error: io });
    }
    // walkdir wraps the OS error, so look at the path again to classify it.
    let reason = match fs::symlink_metadata(&path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => SkipReason::Vanished,
        Ok(m) if m.file_type().is_symlink() => match fs::metadata(&path) {
            Err(e) if is_loop(&e) => SkipReason::SymlinkLoop,
            Err(e) if e.kind() == io::ErrorKind::NotFound => SkipReason::BrokenSymlink,
            Err(e) => SkipReason::from_io(&e),
            Ok(_) => SkipReason::Unreadable(io.kind()),
        },
        _ if io.kind() == io::ErrorKind::NotFound => SkipReason::Vanished,
        _ => SkipReason::Unreadable(io.kind()),
    };
    Some(WalkItem::Skipped { path, reason })
}
