//! `scan git --state FILE`, the incremental CI mode: the first run scans
//! everything and records the tips; the next reads only what is new; a
//! rewritten ref is named and what the old state does not reach is
//! scanned; a corrupt state is an error (exit 2) and is left as it was; a
//! run that could not read everything does not advance the state; a blob
//! an earlier run scanned is not scanned again when a later commit brings
//! it back; a version 1 state (refs only) is still read.

#[path = "e2e_common/mod.rs"]
mod common;

#[path = "git_common/mod.rs"]
mod gitc;

use common::{github_token, tempdir};
use gitc::{commit_file, git, init, loose_object, scan_git};

fn secrets(run: &common::Run) -> Vec<String> {
    run.findings()
        .iter()
        .map(|f| f["secret"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_second_run_reports_only_the_commit_since_the_first() {
    let t = tempdir();
    let dir = t.path().join("repo");
    std::fs::create_dir(&dir).unwrap();
    init(&dir);
    let old = github_token(40);
    commit_file(&dir, "a.env", &format!("T={old}\n"), "one");
    commit_file(&dir, "b.txt", "plain\n", "two");
    // The state lives outside the repository, in a directory that does not
    // exist yet (as a CI cache's path may not).
    let state = t.path().join("cache/state.json");
    let st = state.to_str().unwrap();
    let first = scan_git(&dir, &["-f", "json", "--state", st, "."]);
    assert_eq!(first.code, Some(1), "{}", first.stderr);
    assert_eq!(secrets(&first), vec![old.clone()]);
    assert_eq!(first.summary()["history"]["commits"], 2);
    assert!(
        first.stderr.contains("does not exist yet"),
        "{}",
        first.stderr
    );
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    let head = git(&dir, &["rev-parse", "HEAD"]);
    assert_eq!(written["version"], 2);
    assert_eq!(written["refs"]["refs/heads/main"], head.as_str());
    assert_eq!(written["refs"]["HEAD"], head.as_str());

    let new = github_token(41);
    let c3 = commit_file(&dir, "c.env", &format!("T={new}\n"), "three");
    let second = scan_git(&dir, &["-f", "json", "--state", st, "."]);
    assert_eq!(second.code, Some(1), "{}", second.stderr);
    let f = second.findings();
    assert_eq!(secrets(&second), vec![new.clone()], "{f:?}");
    assert_eq!(f[0]["commit"], c3.as_str());
    assert_eq!(second.summary()["history"]["commits"], 1);

    // Nothing new: nothing scanned, exit 0, and the state still names c3.
    let third = scan_git(&dir, &["-f", "json", "--state", st, "."]);
    assert_eq!(third.code, Some(0), "{}", third.stderr);
    assert_eq!(third.summary()["history"]["commits"], 0);
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    assert_eq!(written["refs"]["refs/heads/main"], c3.as_str());
}

#[test]
fn a_force_pushed_ref_is_named_and_what_the_old_state_does_not_reach_is_scanned() {
    let t = tempdir();
    let dir = t.path();
    init(dir);
    commit_file(dir, "base.txt", "base\n", "base");
    let base = git(dir, &["rev-parse", "HEAD"]);
    let gone = github_token(42);
    commit_file(dir, "x.env", &format!("T={gone}\n"), "to be rewritten");
    let state = dir.join(".git/scan-state.json");
    let st = state.to_str().unwrap();
    let first = scan_git(dir, &["-f", "json", "--state", st]);
    assert_eq!(secrets(&first), vec![gone.clone()], "{}", first.stderr);
    // Rewrite main: drop the commit, add another one with a new token.
    git(dir, &["reset", "-q", "--hard", &base]);
    let fresh = github_token(43);
    let rewritten = commit_file(dir, "y.env", &format!("T={fresh}\n"), "rewritten");
    let second = scan_git(dir, &["-f", "json", "--state", st]);
    assert_eq!(second.code, Some(1), "{}", second.stderr);
    assert!(
        second.stderr.contains("refs/heads/main was rewritten"),
        "{}",
        second.stderr
    );
    let f = second.findings();
    assert_eq!(secrets(&second), vec![fresh], "{f:?}");
    assert_eq!(f[0]["commit"], rewritten.as_str());
    // The dropped commit is still in the object database and the old state
    // hid it; the base commit it shares was not read again.
    assert_eq!(second.summary()["history"]["commits"], 1);
}

#[test]
fn a_corrupt_state_file_is_an_error_and_is_left_as_it_was() {
    let t = tempdir();
    let dir = t.path();
    init(dir);
    commit_file(dir, "a.env", &format!("T={}\n", github_token(44)), "one");
    let state = t.path().join("state.json");
    let unsorted = format!(
        "{{\"version\":2,\"refs\":{{}},\"blobs\":\"{}{}\"}}",
        "b".repeat(40),
        "a".repeat(40)
    );
    for bad in [
        &b"{\"version\":1,\"refs\":{\"HEAD\":\"xyz\"}}"[..],
        b"{\"version\":2,\"refs\":{},\"blobs\":\"xyz\"}",
        b"{\"version\":2,\"refs\":{}}",
        unsorted.as_bytes(),
        b"not json",
        b"",
    ] {
        std::fs::write(&state, bad).unwrap();
        let run = scan_git(dir, &["--state", state.to_str().unwrap()]);
        assert_eq!(run.code, Some(2), "{}", run.stderr);
        assert!(run.stderr.contains("is corrupt"), "{}", run.stderr);
        assert!(run.stdout.is_empty(), "nothing scanned");
        assert_eq!(std::fs::read(&state).unwrap(), bad);
    }
}

#[test]
fn a_run_that_could_not_read_an_object_does_not_advance_the_state() {
    let t = tempdir();
    let dir = t.path();
    init(dir);
    commit_file(dir, "victim.txt", "will vanish\n", "victim");
    let blob = git(dir, &["rev-parse", "HEAD:victim.txt"]);
    std::fs::remove_file(loose_object(dir, &blob)).unwrap();
    let state = t.path().join("state.json");
    let run = scan_git(dir, &["-f", "json", "--state", state.to_str().unwrap()]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(!state.exists(), "a partial scan writes no state");
    // No temporary file is left beside it either.
    let left: Vec<_> = std::fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().contains("state.json"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn state_is_a_scan_git_flag_and_conflicts_with_ranges() {
    let t = tempdir();
    let run = common::scan_in(t.path(), ["--state", "s.json", "."]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("scan git"), "{}", run.stderr);
    let run = scan_git(t.path(), &["--state", "s.json", "--since-commit", "HEAD"]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
}

/// The blob ids a state file records, in file order.
fn recorded_blobs(state: &std::path::Path) -> Vec<String> {
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(state).unwrap()).unwrap();
    assert_eq!(written["version"], 2);
    let hex = written["blobs"].as_str().expect("a blob set").to_owned();
    assert_eq!(hex.len() % 40, 0, "{hex}");
    (0..hex.len() / 40)
        .map(|i| hex[i * 40..(i + 1) * 40].to_owned())
        .collect()
}

#[test]
fn a_blob_an_earlier_run_scanned_is_not_scanned_again_when_a_commit_brings_it_back() {
    let t = tempdir();
    let dir = t.path().join("repo");
    std::fs::create_dir(&dir).unwrap();
    init(&dir);
    let old = github_token(45);
    let c1 = commit_file(&dir, "a.env", &format!("T={old}\n"), "one");
    let old_blob = git(&dir, &["rev-parse", "HEAD:a.env"]);
    let state = t.path().join("state.json");
    let st = state.to_str().unwrap();
    let first = scan_git(&dir, &["-f", "json", "--state", st, "."]);
    assert_eq!(first.code, Some(1), "{}", first.stderr);
    assert_eq!(secrets(&first), vec![old.clone()]);
    assert_eq!(recorded_blobs(&state), vec![old_blob.clone()]);

    // The token is removed, then the removal is reverted (the same bytes:
    // the same blob), and a new token comes in beside it.
    commit_file(&dir, "a.env", "T=none\n", "two");
    let plain_blob = git(&dir, &["rev-parse", "HEAD:a.env"]);
    git(&dir, &["revert", "--no-edit", "HEAD"]);
    assert_eq!(git(&dir, &["rev-parse", "HEAD:a.env"]), old_blob);
    let new = github_token(46);
    let c4 = commit_file(&dir, "b.env", &format!("T={new}\n"), "four");
    let second = scan_git(&dir, &["-f", "json", "--state", st, "."]);
    assert_eq!(second.code, Some(1), "{}", second.stderr);
    let f = second.findings();
    assert_eq!(secrets(&second), vec![new.clone()], "{f:?}");
    assert_eq!(f[0]["commit"], c4.as_str());
    let history = &second.summary()["history"];
    assert_eq!(history["commits"], 3, "{history}");
    // The plain blob and the new token's; not the reverted one.
    assert_eq!(history["blobs"], 2, "{history}");
    let new_blob = git(&dir, &["rev-parse", "HEAD:b.env"]);
    let mut want = vec![old_blob, plain_blob, new_blob];
    want.sort();
    assert_eq!(recorded_blobs(&state), want);
    assert_ne!(c1, c4);
}

#[test]
fn a_version_1_state_is_read_as_before_and_rewritten_as_version_2() {
    let t = tempdir();
    let dir = t.path().join("repo");
    std::fs::create_dir(&dir).unwrap();
    init(&dir);
    let old = github_token(47);
    let c1 = commit_file(&dir, "a.env", &format!("T={old}\n"), "one");
    commit_file(&dir, "a.env", "T=none\n", "two");
    git(&dir, &["revert", "--no-edit", "HEAD"]);
    let c3 = git(&dir, &["rev-parse", "HEAD"]);
    // What a scan before the blob set wrote after scanning c1.
    let state = t.path().join("state.json");
    std::fs::write(
        &state,
        format!("{{\"version\":1,\"refs\":{{\"HEAD\":\"{c1}\",\"refs/heads/main\":\"{c1}\"}}}}\n"),
    )
    .unwrap();
    let st = state.to_str().unwrap();
    let run = scan_git(&dir, &["-f", "json", "--state", st, "."]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    // A version 1 state knows no blobs: the revert is reported, as then.
    let f = run.findings();
    assert_eq!(secrets(&run), vec![old], "{f:?}");
    assert_eq!(f[0]["commit"], c3.as_str());
    assert_eq!(run.summary()["history"]["commits"], 2);
    // Written back as version 2, with the blobs this run scanned.
    assert_eq!(recorded_blobs(&state).len(), 2);
    // And the next run, with nothing new, scans nothing.
    let again = scan_git(&dir, &["-f", "json", "--state", st, "."]);
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    assert_eq!(again.summary()["history"]["blobs"], 0);
}
