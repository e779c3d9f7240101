//! `scan DIR` and the repository it may hold: whether DIR is a
//! repository, and the rule that keeps a secret from being reported twice,
//! once from the work tree and once from history (`scan/GIT.md`, "A
//! directory that is a repository").

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use gix::objs::Find;

use crate::report::{Finding, ObjPath};

/// What `scan DIR` found at DIR.
pub enum DirRepo {
    /// DIR is a repository: a work tree with `.git` (a directory, or a
    /// file as in a linked worktree or a submodule), a bare repository, or
    /// a `.git` directory named directly.
    Found(Box<gix::ThreadSafeRepository>),
    /// DIR looks like a repository (`DIR/.git` exists) but could not be
    /// opened: the history is not scanned and the summary says why.
    Broken(String),
    /// DIR is below the work tree of the repository at this path (not its
    /// root): its history is not scanned (it is the whole repository's).
    Inside(PathBuf),
    /// No repository at or above DIR.
    None,
}

impl std::fmt::Debug for DirRepo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DirRepo::Found(repo) => write!(f, "Found({})", repo.git_dir().display()),
            DirRepo::Broken(e) => write!(f, "Broken({e})"),
            DirRepo::Inside(top) => write!(f, "Inside({})", top.display()),
            DirRepo::None => f.write_str("None"),
        }
    }
}

/// Looks at `dir` (a path named on the command line). Never searches
/// upward for the repository to scan: only for the summary's note that
/// DIR is inside one.
pub fn repository_at(dir: &Path) -> DirRepo {
    if !dir.is_dir() {
        return DirRepo::None;
    }
    let dot_git = dir.join(".git");
    let git_dir_itself =
        dir.join("HEAD").is_file() && dir.join("objects").is_dir() && dir.join("refs").is_dir();
    if dot_git.symlink_metadata().is_ok() || git_dir_itself {
        return match gix::ThreadSafeRepository::open(dir) {
            Ok(repo) => DirRepo::Found(Box::new(repo)),
            Err(e) => DirRepo::Broken(format!("{} could not be opened: {e}", dir.display())),
        };
    }
    let Ok(abs) = std::path::absolute(dir) else {
        return DirRepo::None;
    };
    for up in abs.ancestors().skip(1) {
        if up.join(".git").symlink_metadata().is_ok() {
            return DirRepo::Inside(up.to_path_buf());
        }
    }
    DirRepo::None
}

/// Drops the history findings (those with a commit) whose blob is byte for
/// byte the file at the same path in the work tree of `repo`: the work
/// tree's own finding reports that secret. Returns how many were dropped.
///
/// A finding in a blob that differs from the work tree file (an older
/// version, a deleted file, a file edited since) stays: that content is
/// only in history. Each (commit, path) is compared once.
pub fn drop_work_tree_copies(repo: &gix::ThreadSafeRepository, findings: &mut Vec<Finding>) -> u64 {
    let Some(work) = repo.work_dir().map(Path::to_path_buf) else {
        return 0;
    };
    let repo = repo.to_thread_local();
    let mut same: HashMap<(String, Vec<u8>), bool> = HashMap::new();
    let before = findings.len();
    findings.retain(|f| {
        let Some(commit) = &f.commit else {
            return true;
        };
        let path = f.path.file_bytes().to_vec();
        let key = (commit.id.clone(), path);
        let identical = *same
            .entry(key)
            .or_insert_with_key(|(c, p)| identical_in_work_tree(&repo, &work, c, p));
        !identical
    });
    (before - findings.len()) as u64
}

/// Whether the blob at `path` in `commit` has the same bytes as the
/// regular file `work/path`, which the walk scanned (for an LFS pointer,
/// the LFS object's bytes). A work tree symlink is
/// never the same (the walk does not read a link's text), and a path that
/// could lead out of the work tree (absolute, `..`, `.`, empty or `.git`
/// components: a hostile tree can hold such names) is never opened.
fn identical_in_work_tree(repo: &gix::Repository, work: &Path, commit: &str, path: &[u8]) -> bool {
    let Ok(commit) = gix::ObjectId::from_hex(commit.as_bytes()) else {
        return false; // `staged`, `unreachable`: no commit to compare
    };
    if !is_plain_relative(path) {
        return false;
    }
    let Some(blob) = super::history::blob_at(repo, &commit, path) else {
        return false;
    };
    let file = work.join(std::ffi::OsStr::from_bytes(path));
    match file.symlink_metadata() {
        Ok(meta) if meta.is_file() => {}
        _ => return false,
    }
    let Ok(on_disk) = std::fs::read(&file) else {
        return false;
    };
    let mut buf = Vec::new();
    match repo.objects.try_find(&blob, &mut buf) {
        // A Git LFS pointer: history read the LFS object in its place
        // (`lfs.rs`), so that is what the work tree file must equal; a work
        // tree holding the pointer text itself read nothing of it.
        Ok(Some(data)) => match super::lfs::parse_pointer(data.data) {
            Some(pointer) => std::fs::read(pointer.path_in(&super::lfs::store(repo)))
                .is_ok_and(|object| object == on_disk),
            None => data.data == on_disk.as_slice(),
        },
        _ => false,
    }
}

/// A `/`-separated path whose every component is a plain name: not empty,
/// not `.` or `..`, not `.git`, and no NUL.
pub fn is_plain_relative(path: &[u8]) -> bool {
    !path.is_empty()
        && !path.contains(&0)
        && path
            .split(|b| *b == b'/')
            .all(|c| !matches!(c, b"" | b"." | b".." | b".git"))
}

/// A history path shown as the walk shows the files of `root` when
/// `roots` paths were named (`scan a b`: `a/x.env`), members kept.
pub fn below_root(path: &ObjPath, root: &Path, roots: usize) -> ObjPath {
    if roots <= 1 {
        return path.clone();
    }
    let file = root.join(std::ffi::OsStr::from_bytes(path.file_bytes()));
    let mut p = ObjPath::below_root(&file, root, roots);
    for m in path.members() {
        p = p.member(m);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_paths_are_opened_in_the_work_tree() {
        for ok in [&b"a"[..], b"a/b.env", b".env", b"dir/.gitignore", b"..x/y"] {
            assert!(is_plain_relative(ok), "{}", String::from_utf8_lossy(ok));
        }
        for bad in [
            &b""[..],
            b"/etc/passwd",
            b"../x",
            b"a/../../x",
            b"./a",
            b"a//b",
            b"a/",
            b".git/config",
            b"sub/.git/hooks/x",
            b"a\0b",
        ] {
            assert!(!is_plain_relative(bad), "{}", String::from_utf8_lossy(bad));
        }
    }
}
