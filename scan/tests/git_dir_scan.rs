//! `scan DIR` where DIR is a git repository: its history is scanned by
//! default (`--no-git-history` turns it off), the summary, `json` and
//! SARIF say which, and a secret that is both in the work tree and, with
//! the same bytes at the same path, in history is reported once.

#[path = "e2e_common/mod.rs"]
mod common;

#[path = "git_common/mod.rs"]
mod gitc;

use common::{github_token, tempdir};
use gitc::{commit_file, committed_then_removed, git, init};
use serde_json::Value;

#[test]
fn a_repository_named_as_a_directory_has_its_history_scanned_by_default() {
    let t = tempdir();
    let (token, added, _) = committed_then_removed(t.path());
    let run = common::scan_in(t.path(), ["-f", "json", "."]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let f = run.findings();
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0]["secret"], token.as_str());
    assert_eq!(f[0]["path"], "config/app.env");
    assert_eq!(f[0]["commit"], added.as_str());
    // 3 commits; blobs: README.md and the config file.
    assert!(
        run.stderr.contains("history: 3 commits scanned (2 blobs)"),
        "{}",
        run.stderr
    );
    let h = &run.summary()["history"];
    assert_eq!(h["scanned"], true, "{h}");
    assert_eq!(h["commits"], 3, "{h}");
    assert_eq!(h["blobs"], 2, "{h}");
}

#[test]
fn no_git_history_scans_the_files_only_and_says_so() {
    let t = tempdir();
    committed_then_removed(t.path());
    let run = common::scan_in(t.path(), ["-f", "json", "--no-git-history", "."]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(run.findings().is_empty());
    assert!(
        run.stderr
            .contains("history: not scanned (--no-git-history)"),
        "{}",
        run.stderr
    );
    let h = &run.summary()["history"];
    assert_eq!(h["scanned"], false, "{h}");
    assert_eq!(h["reason"], "--no-git-history", "{h}");
    // `scan git` reads history: the flag is refused there.
    let refused = gitc::scan_git(t.path(), &["--no-git-history"]);
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
}

#[test]
fn a_secret_in_the_work_tree_with_the_same_bytes_in_history_is_reported_once() {
    let t = tempdir();
    let dir = t.path();
    init(dir);
    let token = github_token(30);
    commit_file(dir, "app.env", &format!("T={token}\n"), "add");
    let run = common::scan_in(dir, ["-f", "json", "."]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let f = run.findings();
    assert_eq!(f.len(), 1, "the work tree's finding only: {f:?}");
    assert!(f[0].get("commit").is_none(), "{f:?}");
    assert!(
        run.stderr.contains("history: 1 commit scanned"),
        "{}",
        run.stderr
    );
    // Edited since the commit: the committed bytes are only in history,
    // so both are reported (the history one names the commit).
    common::put(dir, "app.env", format!("# edited\nT={token}\n").as_bytes());
    let run = common::scan_in(dir, ["-f", "json", "."]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let f = run.findings();
    assert_eq!(f.len(), 2, "{f:?}");
    assert_eq!(f.iter().filter(|f| f.get("commit").is_some()).count(), 1);
    assert!(f.iter().all(|f| f["path"] == "app.env"), "{f:?}");
}

#[test]
fn sarif_says_whether_history_was_scanned() {
    let t = tempdir();
    let (_, added, _) = committed_then_removed(t.path());
    for (flag, scanned) in [(None, true), (Some("--no-git-history"), false)] {
        let mut args = vec!["-f", "sarif"];
        args.extend(flag);
        args.push(".");
        let run = common::scan_in(t.path(), &args);
        let sarif: Value = serde_json::from_slice(&run.stdout).expect("SARIF");
        let run0 = &sarif["runs"][0];
        assert_eq!(run0["properties"]["history"]["scanned"], scanned, "{run0}");
        let results = run0["results"].as_array().unwrap();
        assert_eq!(results.len(), usize::from(scanned), "{results:?}");
        if scanned {
            assert_eq!(
                results[0]["partialFingerprints"]["commitSha"],
                added.as_str()
            );
        }
    }
}

#[test]
fn a_directory_inside_a_work_tree_is_scanned_as_files_and_the_summary_says_why() {
    let t = tempdir();
    let dir = t.path();
    init(dir);
    commit_file(
        dir,
        "sub/old.env",
        &format!("T={}\n", github_token(31)),
        "add",
    );
    git(dir, &["rm", "-q", "sub/old.env"]);
    git(dir, &["commit", "-q", "-m", "rm"]);
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    common::put(dir, "sub/keep.txt", b"nothing here\n");
    let run = common::scan_in(dir, ["-f", "json", "sub"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("history: not scanned (sub is inside the repository at"),
        "{}",
        run.stderr
    );
    assert_eq!(run.summary()["history"]["scanned"], false);
}

#[test]
fn a_directory_that_is_no_repository_has_no_history_line() {
    let t = tempdir();
    common::put(t.path(), "a.txt", b"hello\n");
    let run = common::scan_in(t.path(), ["-f", "json", "."]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(!run.stderr.contains("history:"), "{}", run.stderr);
    assert!(run.summary().get("history").is_none());
}

#[test]
fn several_repositories_named_have_their_history_findings_under_each_path() {
    let t = tempdir();
    for name in ["a", "b"] {
        let dir = t.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        committed_then_removed(&dir);
    }
    let run = common::scan_in(t.path(), ["-f", "json", "a", "b"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let mut paths: Vec<String> = run
        .findings()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_owned())
        .collect();
    paths.sort();
    assert_eq!(paths, ["a/config/app.env", "b/config/app.env"]);
    assert!(
        run.stderr.contains("history: 6 commits scanned (4 blobs)"),
        "{}",
        run.stderr
    );
}
