//! Helpers for the `scan git` tests: repositories built with the `git`
//! binary (tests only: the scanner itself reads them with gix, and never
//! runs git).
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::{self, run_guarded, Run};

/// Runs `git ARGS` in `dir` with a fixed identity and dates, so commit ids
/// are the same on every run; panics if git fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_cmd(dir, args).output().expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// `git ARGS` in `dir` with the fixed identity, not yet run.
pub fn git_cmd(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "Ada Author")
        .env("GIT_AUTHOR_EMAIL", "ada@example.com")
        .env("GIT_COMMITTER_NAME", "Ada Author")
        .env("GIT_COMMITTER_EMAIL", "ada@example.com")
        .env("GIT_AUTHOR_DATE", "2024-05-01T12:00:00+02:00")
        .env("GIT_COMMITTER_DATE", "2024-05-01T12:00:00+02:00")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .stdin(Stdio::null());
    cmd
}

/// Runs `git ARGS` with `input` on its standard input; returns stdout.
pub fn git_with_input(dir: &Path, args: &[&str], input: &[u8]) -> String {
    use std::io::Write;
    let mut child = git_cmd(dir, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("git runs");
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The loose object file of `id` in the repository at `dir`, made
/// writable (git writes loose objects read-only), so a test can corrupt
/// or remove it.
pub fn loose_object(dir: &Path, id: &str) -> std::path::PathBuf {
    let file = dir.join(".git/objects").join(&id[..2]).join(&id[2..]);
    let mut perms = std::fs::metadata(&file)
        .expect("a fresh repository keeps loose objects")
        .permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&file, perms).unwrap();
    file
}

pub fn init(dir: &Path) {
    git(dir, &["init", "-q", "-b", "main"]);
}

/// Writes `rel` and commits it with `msg`; returns the commit id.
pub fn commit_file(dir: &Path, rel: &str, data: &str, msg: &str) -> String {
    common::put(dir, rel, data.as_bytes());
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", msg]);
    git(dir, &["rev-parse", "HEAD"])
}

pub fn remove_file(dir: &Path, rel: &str, msg: &str) -> String {
    git(dir, &["rm", "-q", rel]);
    git(dir, &["commit", "-q", "-m", msg]);
    git(dir, &["rev-parse", "HEAD"])
}

/// Runs `scan git --no-progress -j 2 ARGS` in `cwd`.
pub fn scan_git(cwd: &Path, args: &[&str]) -> Run {
    let mut cmd = Command::new(common::bin());
    cmd.current_dir(cwd)
        .args(["git", "--no-progress", "-j", "2"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    run_guarded(cmd)
}

/// A repository whose token was committed, then removed in the next
/// commit: (token, the commit that added it, HEAD).
pub fn committed_then_removed(dir: &Path) -> (String, String, String) {
    init(dir);
    commit_file(dir, "README.md", "hello\n", "first");
    let token = common::github_token(1);
    let added = commit_file(
        dir,
        "config/app.env",
        &format!("GITHUB_TOKEN={token}\n"),
        "add config",
    );
    remove_file(dir, "config/app.env", "remove the token");
    (token, added, git(dir, &["rev-parse", "HEAD"]))
}

/// Whether the `git` binary is here to build fixtures. When it is not, a
/// test says so on stderr and checks nothing (`if !git_present() {
/// return; }`): a printed skip, never a quiet pass.
pub fn git_present() -> bool {
    let ok = Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIPPED: no `git` binary to build the fixture repository");
    }
    ok
}

/// The (path, secret) of every finding of a `json` run, sorted.
pub fn paths_and_secrets(run: &Run) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = run
        .findings()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_owned(),
                f["secret"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    v.sort();
    v
}
