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
//! 3. `.gitignore`, `.ignore` and `.git/info/exclude` rules apply, also
//!    outside a git repository, unless `no_ignore`. The user's global git
//!    excludes file does not: a secret scanner must not miss `.env` because a
//!    developer's `~/.config/git/ignore` hides it. Ignored entries are not
//!    "discovered" and are not counted.
//! 4. Hidden files are scanned. Directories named `.git` are never entered.
//! 5. A symlink is not followed by default: it is yielded as skipped with
//!    reason `symlink_not_followed`, or `broken_symlink` / `symlink_loop` when
//!    its target is missing or loops (one `stat`, no open). With
//!    `follow_symlinks`, links are followed and a link back to an ancestor is
//!    yielded as `symlink_loop` instead of being entered again, so the walk
//!    always ends.
//! 6. FIFOs, sockets and devices are yielded as `special_file`, decided from
//!    the entry's type; they are never opened.
//! 7. Regular files over `max_file_size` are yielded as `too_large`, decided
//!    from metadata.
//! 8. A path is the root exactly as given joined with the names below it;
//!    names are raw `OsStr` bytes and survive exactly, UTF-8 or not.
//! 9. The `ignore` crate opens ignore files with a blocking open and reads
//!    them whole. Before it enters a directory, the walker `stat`s the ignore
//!    files there ([`IGNORE_FILES`]); if one is not a regular file (a FIFO
//!    would block the walk forever) or is larger than
//!    [`MAX_IGNORE_FILE_BYTES`] (a sparse giant would exhaust memory), that
//!    directory is not entered by the current walk but queued, and walked
//!    afterwards with ignore rules off. So nothing in it is hidden, and the
//!    hostile file itself is reported like any other entry (e.g. a FIFO as
//!    `special_file`). The same check covers a root and its ancestors.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use magpie_core::sync::{Arc, Mutex};

use crate::skip::{SkipReason, SpecialKind};
use crate::source::DEFAULT_MAX_FILE_SIZE;

/// The files the `ignore` crate reads in a directory.
pub const IGNORE_FILES: [&str; 3] = [".gitignore", ".ignore", ".git/info/exclude"];

/// An ignore file larger than this makes its directory be walked without
/// ignore rules instead of being read: 1 MiB.
pub const MAX_IGNORE_FILE_BYTES: u64 = 1024 * 1024;

/// True when the `ignore` crate may safely open and read every ignore file in
/// `dir` (one `stat` each, following links as its open would).
fn ignore_files_are_safe(dir: &Path) -> bool {
    IGNORE_FILES
        .iter()
        .all(|name| match fs::metadata(dir.join(name)) {
            Ok(m) => m.is_dir() || (m.is_file() && m.len() <= MAX_IGNORE_FILE_BYTES),
            // A missing or unreadable file is not read (the crate reports a soft
            // error at worst).
            Err(_) => true,
        })
}

/// Directories the current walk refused to enter because of a hostile ignore
/// file, filled by the entry filter, drained by the cursor.
type Refused = Arc<Mutex<Vec<PathBuf>>>;

/// What the walker does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalkConfig {
    /// Follow symbolic links (loop-safe). Default: false.
    pub follow_symlinks: bool,
    /// Ignore `.gitignore` / `.ignore` rules. Default: false.
    pub no_ignore: bool,
    /// Files larger than this are skipped as too large. Default:
    /// [`DEFAULT_MAX_FILE_SIZE`] (256 MiB).
    pub max_file_size: Option<u64>,
}

impl Default for WalkConfig {
    fn default() -> Self {
        WalkConfig {
            follow_symlinks: false,
            no_ignore: false,
            max_file_size: Some(DEFAULT_MAX_FILE_SIZE),
        }
    }
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
            | WalkItem::RootError { path, .. } => path,
        }
    }
}

/// Resumable walk state over one or more roots. `Send`, so the Enumerate task
/// that owns it can move between worker threads.
pub struct WalkCursor {
    roots: std::vec::IntoIter<PathBuf>,
    cfg: WalkConfig,
    current: Option<ignore::Walk>,
    /// Directories to walk without ignore rules once the current walk ends.
    unsafe_dirs: Vec<PathBuf>,
    refused: Refused,
    finished: bool,
}

impl std::fmt::Debug for WalkCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalkCursor")
            .field("roots_left", &self.roots.len())
            .field("cfg", &self.cfg)
            .field("walking", &self.current.is_some())
            .field("queued_without_ignore_rules", &self.unsafe_dirs.len())
            .field("finished", &self.finished)
            .finish()
    }
}

const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<WalkCursor>();
};

impl WalkCursor {
    /// A cursor that will walk `roots` in order.
    pub fn new(roots: Vec<PathBuf>, cfg: WalkConfig) -> Self {
        WalkCursor {
            roots: roots.into_iter(),
            cfg,
            current: None,
            unsafe_dirs: Vec::new(),
            refused: Arc::new(Mutex::new(Vec::new())),
            finished: false,
        }
    }

    /// Appends up to `max` items to `out`; returns false once the walk is
    /// finished (no further call will yield anything).
    pub fn next_batch(&mut self, max: usize, out: &mut Vec<WalkItem>) -> bool {
        let mut produced = 0;
        while produced < max && !self.finished {
            if let Some(walk) = self.current.as_mut() {
                let next = walk.next();
                self.unsafe_dirs.append(&mut lock(&self.refused));
                match next {
                    None => self.current = None,
                    Some(res) => {
                        if let Some(item) = classify(res, &self.cfg) {
                            out.push(item);
                            produced += 1;
                        }
                    }
                }
                continue;
            }
            if let Some(dir) = self.unsafe_dirs.pop() {
                self.current = Some(self.build(&dir, false));
                continue;
            }
            let Some(root) = self.roots.next() else {
                self.finished = true;
                break;
            };
            match fs::metadata(&root) {
                Err(error) => {
                    out.push(WalkItem::RootError { path: root, error });
                    produced += 1;
                }
                Ok(meta) if meta.is_dir() => {
                    let safe = !self.cfg.no_ignore
                        && root_ancestors(&root).all(|d| ignore_files_are_safe(&d));
                    self.current = Some(self.build(&root, safe));
                }
                Ok(meta) if meta.is_file() => {
                    out.push(file_item(root, meta.len(), &self.cfg));
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

    /// A walk of `root`; ignore rules apply only when `use_ignore_files` (the
    /// caller checked that the root's and its ancestors' ignore files are safe
    /// to read).
    fn build(&self, root: &Path, use_ignore_files: bool) -> ignore::Walk {
        let mut b = ignore::WalkBuilder::new(root);
        b.follow_links(self.cfg.follow_symlinks)
            .hidden(false)
            .git_global(false)
            .require_git(false)
            .sort_by_file_name(|a, b| a.cmp(b));
        if use_ignore_files {
            let refused = Arc::clone(&self.refused);
            b.filter_entry(move |e| {
                if !is_dir(e) {
                    return true;
                }
                if e.file_name() == ".git" {
                    return false;
                }
                if ignore_files_are_safe(e.path()) {
                    return true;
                }
                lock(&refused).push(e.path().to_path_buf());
                false
            });
        } else {
            b.ignore(false)
                .git_ignore(false)
                .git_exclude(false)
                .parents(false)
                .filter_entry(|e| !(is_dir(e) && e.file_name() == ".git"));
        }
        b.build()
    }
}

fn is_dir(e: &ignore::DirEntry) -> bool {
    e.file_type().is_some_and(|t| t.is_dir())
}

fn lock(m: &Mutex<Vec<PathBuf>>) -> magpie_core::sync::MutexGuard<'_, Vec<PathBuf>> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `root` and every directory above it (the `ignore` crate reads their ignore
/// files too).
fn root_ancestors(root: &Path) -> impl Iterator<Item = PathBuf> {
    let abs = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
    abs.ancestors()
        .map(Path::to_path_buf)
        .collect::<Vec<_>>()
        .into_iter()
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
