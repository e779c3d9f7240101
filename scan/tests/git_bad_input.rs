//! Issue 14's bad input that had no test of its own: a corrupt tree object
//! (valid zlib, garbage entries), a corrupt commit object (garbage where the
//! zlib stream should be) and a shallow clone. Each corrupt object is named
//! as an `unreadable` skip with its id, the rest of the history is scanned
//! and reported, and the run exits 2 (partial); a shallow clone scans
//! without error and says that it is shallow. 10^5 refs reach each commit
//! once; a repository committed to and repacked during the scan is read
//! whole. The fixtures need the `git` binary; without it each test says so
//! and checks nothing.
#![cfg(not(loom))]

#[path = "e2e_common/mod.rs"]
mod common;

#[path = "git_common/mod.rs"]
mod gitc;

use std::io::Write;

use common::{github_token, tempdir, Run};
use gitc::{
    commit_file, git, git_present, init, loose_object as loose, paths_and_secrets, scan_git,
};
use serde_json::Value;

fn skipped(run: &Run) -> Vec<Value> {
    run.json()["skipped"].as_array().unwrap().clone()
}

#[test]
fn a_corrupt_tree_object_is_named_and_the_rest_of_the_history_is_scanned() {
    if !git_present() {
        return;
    }
    let t = tempdir();
    let dir = t.path();
    init(dir);
    let hidden = github_token(501);
    commit_file(dir, "lib/inner.env", &format!("T={hidden}\n"), "lib");
    let token = github_token(502);
    commit_file(dir, "k.env", &format!("T={token}\n"), "secret");
    let tree = git(dir, &["rev-parse", "HEAD:lib"]);
    // A well-formed zlib stream of a "tree" whose entries are garbage: the
    // object decodes, its entries do not parse.
    let mut body = b"100644 a.env\0\x01\x02".to_vec();
    body.extend_from_slice(b"\xffgarbage\0");
    let mut raw = format!("tree {}\0", body.len()).into_bytes();
    raw.extend_from_slice(&body);
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(&raw).unwrap();
    std::fs::write(loose(dir, &tree), z.finish().unwrap()).unwrap();

    let run = scan_git(dir, &["-f", "json"]);
    assert_eq!(run.code, Some(2), "partial: {}", run.stderr);
    assert!(
        run.stderr.contains("scanned partially: 1 object"),
        "{}",
        run.stderr
    );
    assert_eq!(paths_and_secrets(&run), vec![("k.env".to_owned(), token)]);
    let s = skipped(&run);
    assert_eq!(s.len(), 1, "{s:?}");
    assert_eq!(s[0]["path"], "lib");
    assert_eq!(s[0]["reason"], "unreadable");
    let msg = s[0]["message"].as_str().unwrap();
    assert!(
        msg.contains(&format!("tree {tree}")),
        "names the tree: {msg}"
    );
}

#[test]
fn a_corrupt_commit_object_is_named_and_the_rest_of_the_history_is_scanned() {
    if !git_present() {
        return;
    }
    let t = tempdir();
    let dir = t.path();
    init(dir);
    commit_file(dir, "README.md", "hello\n", "root");
    let first = github_token(511);
    let broken = commit_file(dir, "a.env", &format!("T={first}\n"), "broken commit");
    let last = github_token(512);
    let tip = commit_file(dir, "b.env", &format!("T={last}\n"), "tip");
    // Garbage where the zlib stream should be.
    std::fs::write(loose(dir, &broken), b"this is not zlib at all\n").unwrap();

    let run = scan_git(dir, &["-f", "json"]);
    assert_eq!(run.code, Some(2), "partial: {}", run.stderr);
    assert!(
        run.stderr.contains("scanned partially: 1 object"),
        "{}",
        run.stderr
    );
    let s = skipped(&run);
    assert_eq!(s.len(), 1, "{s:?}");
    assert_eq!(s[0]["path"], broken.as_str(), "named by its id");
    assert_eq!(s[0]["reason"], "unreadable");
    assert!(
        s[0]["message"].as_str().unwrap().contains("commit"),
        "{s:?}"
    );
    // The tip is read against nothing (its parent is unreadable): its whole
    // tree, so both tokens are found, attributed to the tip.
    assert_eq!(
        paths_and_secrets(&run),
        vec![("a.env".to_owned(), first), ("b.env".to_owned(), last)]
    );
    assert!(run.findings().iter().all(|f| f["commit"] == tip.as_str()));
}

#[test]
fn a_shallow_clone_scans_without_error_and_says_it_is_shallow() {
    if !git_present() {
        return;
    }
    let t = tempdir();
    let origin = t.path().join("origin");
    std::fs::create_dir(&origin).unwrap();
    init(&origin);
    commit_file(
        &origin,
        "old.env",
        &format!("T={}\n", github_token(521)),
        "old",
    );
    let token = github_token(522);
    commit_file(&origin, "new.env", &format!("T={token}\n"), "new");
    let url = format!("file://{}", origin.display());
    git(t.path(), &["clone", "-q", "--depth", "1", &url, "shallow"]);
    let shallow = t.path().join("shallow");
    let run = scan_git(&shallow, &["-f", "json"]);
    assert_eq!(run.code, Some(1), "findings, no error: {}", run.stderr);
    assert!(
        run.stderr
            .contains("shallow clone: the history ends at 1 boundary commit"),
        "{}",
        run.stderr
    );
    assert!(skipped(&run).is_empty(), "{}", run.stdout_text());
    assert_eq!(run.summary()["history"]["commits"], 1, "the boundary only");
    // `scan DIR` on it: the same note, files and history scanned.
    let dir_run = common::scan_in(&shallow, ["-f", "json", "."]);
    assert_eq!(dir_run.code, Some(1), "{}", dir_run.stderr);
    assert!(
        dir_run.stderr.contains("shallow clone"),
        "{}",
        dir_run.stderr
    );
    assert_eq!(dir_run.summary()["history"]["scanned"], true);
}

/// `n` lightweight tags in `packed-refs`, spread over `commits` (what a
/// repository with a tag per CI build looks like; `git tag` would take
/// minutes for 10^5).
fn pack_many_refs(dir: &std::path::Path, commits: &[String], n: usize) {
    let mut refs = String::from("# pack-refs with: peeled fully-peeled sorted \n");
    let mut lines: Vec<String> = (0..n)
        .map(|i| format!("{} refs/tags/build-{i:06}\n", commits[i % commits.len()]))
        .collect();
    lines.sort_by(|a, b| a[41..].cmp(&b[41..]));
    refs.extend(lines);
    std::fs::write(dir.join(".git/packed-refs"), refs).unwrap();
}

#[test]
fn a_hundred_thousand_refs_reach_each_commit_once() {
    if !git_present() {
        return;
    }
    let t = tempdir();
    let dir = t.path();
    init(dir);
    let tokens: Vec<String> = (0..3).map(|i| github_token(530 + i)).collect();
    let commits: Vec<String> = tokens
        .iter()
        .enumerate()
        .map(|(i, tok)| commit_file(dir, &format!("k{i}.env"), &format!("T={tok}\n"), "k"))
        .collect();
    pack_many_refs(dir, &commits, 100_000);
    let run = scan_git(dir, &["-f", "json"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let want: Vec<(String, String)> = tokens
        .iter()
        .enumerate()
        .map(|(i, tok)| (format!("k{i}.env"), tok.clone()))
        .collect();
    assert_eq!(paths_and_secrets(&run), want, "each secret once");
    assert_eq!(run.summary()["history"]["commits"], 3);
    assert!(skipped(&run).is_empty(), "{}", run.stdout_text());
}

#[test]
fn a_repository_committed_to_and_repacked_during_the_scan_is_read_whole() {
    if !git_present() {
        return;
    }
    let t = tempdir();
    let dir = t.path();
    init(dir);
    let tokens: Vec<String> = (0..12).map(|i| github_token(540 + i)).collect();
    for (i, tok) in tokens.iter().enumerate() {
        commit_file(dir, &format!("k{i}.env"), &format!("T={tok}\n"), "k");
    }
    // Another writer: commits (new loose objects, a moved ref) and repacks
    // (loose objects deleted, the old pack replaced) while the scan reads.
    // The scan sees the refs it read at its start; every object those reach
    // must still be found, in whichever pack or loose file it is by then.
    // It runs until the scan is done (at most 200 rounds).
    let writer_dir = dir.to_path_buf();
    let (done, stop) = std::sync::mpsc::channel::<()>();
    let (started_tx, started) = std::sync::mpsc::channel();
    let writer = std::thread::spawn(move || {
        let mut rounds = 0;
        while rounds < 200 && stop.try_recv().is_err() {
            let i = rounds;
            commit_file(&writer_dir, &format!("w{i}.txt"), &format!("{i}\n"), "w");
            git(&writer_dir, &["repack", "-a", "-d", "-q"]);
            if rounds == 0 {
                started_tx.send(()).unwrap();
            }
            rounds += 1;
        }
        rounds
    });
    started.recv().unwrap();
    let run = scan_git(dir, &["-f", "json"]);
    done.send(()).unwrap();
    let rounds = writer.join().unwrap();
    eprintln!("the writer committed and repacked {rounds} times");
    assert_eq!(run.code, Some(1), "not partial: {}", run.stderr);
    let mut found: Vec<String> = paths_and_secrets(&run)
        .into_iter()
        .map(|(_, s)| s)
        .collect();
    found.sort();
    // Its refs are read at its start: the writer's first commit, maybe
    // more, but never a token lost or doubled.
    let mut want = tokens.clone();
    want.sort();
    assert_eq!(found, want, "every secret the starting refs reach, once");
    assert!(skipped(&run).is_empty(), "{}", run.stdout_text());
}

#[test]
fn a_partial_clone_names_the_blobs_it_did_not_fetch_and_says_why() {
    if !git_present() {
        return;
    }
    let t = tempdir();
    let origin = t.path().join("origin");
    std::fs::create_dir(&origin).unwrap();
    init(&origin);
    git(&origin, &["config", "uploadpack.allowFilter", "true"]);
    let (old, new) = (github_token(560), github_token(561));
    commit_file(&origin, "old.env", &format!("T={old}\n"), "old");
    commit_file(&origin, "new.env", &format!("T={new}\n"), "new");
    let url = format!("file://{}", origin.display());
    // A blob-less clone fetches the blobs its checkout needs: remove
    // `old.env` at the tip, so that its blob stays on the remote.
    git(&origin, &["rm", "-q", "old.env"]);
    git(&origin, &["commit", "-q", "-m", "rm"]);
    git(
        t.path(),
        &["clone", "-q", "--filter=blob:none", &url, "part"],
    );
    let part = t.path().join("part");
    let run = scan_git(&part, &["-f", "json"]);
    assert_eq!(run.code, Some(2), "partial: {}", run.stderr);
    assert!(
        run.stderr
            .contains("partial clone (remote origin, filter blob:none)"),
        "{}",
        run.stderr
    );
    assert_eq!(paths_and_secrets(&run), vec![("new.env".to_owned(), new)]);
    let s = skipped(&run);
    assert_eq!(s.len(), 1, "{s:?}");
    assert_eq!(
        (&s[0]["path"], &s[0]["reason"]),
        (&"old.env".into(), &"unreadable".into())
    );
    // A copy that kept the promisor pack but not the remote's settings (a
    // mirror made by copying `.git`): the pack says it is partial.
    git(&part, &["config", "--unset", "remote.origin.promisor"]);
    let run = scan_git(&part, &["-f", "json"]);
    assert_eq!(run.code, Some(2), "partial: {}", run.stderr);
    assert!(
        run.stderr
            .contains("partial clone (a promisor pack, no promisor remote)"),
        "{}",
        run.stderr
    );
}
