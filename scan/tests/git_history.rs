//! `scan git`: history scanning end to end, on repositories built with the
//! `git` binary (tests only: the scanner itself reads them with gix).

#[path = "e2e_common/mod.rs"]
mod common;

#[path = "git_common/mod.rs"]
mod gitc;

use std::collections::BTreeSet;
use std::path::Path;

use common::{github_token, tempdir, Run};
use gitc::{commit_file, committed_then_removed, git, init, loose_object, remove_file, scan_git};
use serde_json::Value;

fn json_findings(run: &Run) -> Vec<Value> {
    run.findings()
}

#[test]
fn a_token_committed_then_removed_is_found_and_attributed_to_the_introducing_commit() {
    let t = tempdir();
    let (token, added, _) = committed_then_removed(t.path());
    // A directory scan of the work tree alone finds nothing: the file is
    // gone (by default `scan DIR` reads the history too: git_dir_scan.rs).
    let dir_run = common::scan_in(t.path(), ["-f", "json", "--no-git-history", "."]);
    assert_eq!(dir_run.code, Some(0), "{}", dir_run.stderr);
    let run = scan_git(t.path(), &["-f", "json"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let f = json_findings(&run);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0]["secret"], token.as_str());
    assert_eq!(f[0]["path"], "config/app.env");
    assert_eq!(f[0]["commit"], added.as_str());
    assert_eq!(f[0]["subject"], "add config");
    assert_eq!(f[0]["author"], "Ada Author");
    assert_eq!(f[0]["email"], "ada@example.com");
    assert_eq!(f[0]["date"], "2024-05-01T12:00:00+02:00");
}

#[test]
fn the_same_blob_in_many_commits_and_paths_is_scanned_once() {
    let t = tempdir();
    let dir = t.path();
    init(dir);
    let token = github_token(2);
    let body = format!("token = \"{token}\"\n");
    let first = commit_file(dir, "a/secret.txt", &body, "one");
    commit_file(dir, "other.txt", "x\n", "two");
    // The same bytes at a second path, and the file touched and restored.
    commit_file(dir, "b/copy.txt", &body, "three");
    commit_file(dir, "a/secret.txt", "gone\n", "four");
    commit_file(dir, "a/secret.txt", &body, "five");
    let run = scan_git(dir, &["-f", "json", "--metrics"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let f = json_findings(&run);
    assert_eq!(f.len(), 1, "one blob, one finding: {f:?}");
    assert_eq!(f[0]["commit"], first.as_str());
    assert_eq!(f[0]["path"], "a/secret.txt");
    let s = run.summary();
    // Blobs: the secret file, other.txt, "gone" = 3 distinct blobs.
    assert_eq!(s["files_scanned"], 3, "{s}");
    assert_eq!(common::metric(&s, "git_commits"), 5, "{s}");
    assert!(
        run.stderr.contains("scanned 3 blobs of 5 commits,"),
        "{}",
        run.stderr
    );
    common::assert_accounting(&s);
}

#[test]
fn a_bare_repository_and_a_git_dir_named_directly_are_scanned() {
    let t = tempdir();
    let work = t.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let (token, added, _) = committed_then_removed(&work);
    let bare = t.path().join("bare.git");
    git(
        t.path(),
        &[
            "clone",
            "-q",
            "--bare",
            work.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    for repo in [bare, work.join(".git")] {
        let run = scan_git(t.path(), &["-f", "json", repo.to_str().unwrap()]);
        assert_eq!(run.code, Some(1), "{}: {}", repo.display(), run.stderr);
        let f = json_findings(&run);
        assert_eq!(f.len(), 1, "{}: {f:?}", repo.display());
        assert_eq!(f[0]["secret"], token.as_str());
        assert_eq!(f[0]["commit"], added.as_str());
    }
}

#[test]
fn a_path_that_is_no_repository_exits_2_with_one_line() {
    let t = tempdir();
    let run = scan_git(t.path(), &["."]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert_eq!(run.stderr.trim().lines().count(), 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("not a git repository"),
        "{}",
        run.stderr
    );
    let missing = scan_git(t.path(), &["nope"]);
    assert_eq!(missing.code, Some(2), "{}", missing.stderr);
}

#[test]
fn a_blob_over_the_size_limit_is_named_as_skipped() {
    let t = tempdir();
    let dir = t.path();
    init(dir);
    let token = github_token(3);
    let mut big = format!("k = {token}\n");
    big.push_str(&"x".repeat(4096));
    commit_file(dir, "big.txt", &big, "big");
    commit_file(dir, "small.txt", "tiny\n", "small");
    let run = scan_git(dir, &["-f", "json", "--max-file-size", "1K"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(json_findings(&run).is_empty());
    let skipped = run.json()["skipped"].as_array().unwrap().clone();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0]["path"], "big.txt");
    assert_eq!(skipped[0]["reason"], "too_large");
    assert_eq!(common::skipped(&run.summary())["too_large"], 1);
}

#[test]
fn sarif_carries_the_commit_and_version_control_provenance() {
    let t = tempdir();
    let (_, added, head) = committed_then_removed(t.path());
    let run = scan_git(t.path(), &["-f", "sarif"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let doc: Value = serde_json::from_slice(&run.stdout).unwrap();
    let sarif_run = &doc["runs"][0];
    let prov = &sarif_run["versionControlProvenance"][0];
    assert!(
        prov["repositoryUri"]
            .as_str()
            .unwrap()
            .starts_with("file://"),
        "{prov}"
    );
    assert_eq!(prov["revisionId"], head.as_str());
    assert_eq!(prov["branch"], "main");
    let result = &sarif_run["results"][0];
    assert_eq!(result["partialFingerprints"]["commitSha"], added.as_str());
    assert!(result["partialFingerprints"]["magpie/v1"].is_string());
    assert_eq!(result["properties"]["commit"], added.as_str());
    assert_eq!(
        result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        "config/app.env"
    );
}

#[test]
fn text_output_shows_the_short_commit_and_the_path() {
    let t = tempdir();
    let (_, added, _) = committed_then_removed(t.path());
    let run = scan_git(t.path(), &["--color", "never"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let out = run.stdout_text();
    assert!(out.contains("config/app.env:1:"), "{out}");
    assert!(
        out.contains(&format!("commit      {} add config", &added[..12])),
        "{out}"
    );
}

/// The same secret at the same path: a history finding and a directory
/// finding have different fingerprints, so neither baseline hides the other.
#[test]
fn baselines_from_a_directory_scan_and_a_history_scan_do_not_collide() {
    let t = tempdir();
    let dir = t.path();
    init(dir);
    let token = github_token(4);
    commit_file(dir, "app.env", &format!("T={token}\n"), "add");
    let hist = scan_git(dir, &["-f", "json"]);
    let on_disk = common::scan_in(dir, ["-f", "json", "--exclude", ".git", "."]);
    assert_eq!((hist.code, on_disk.code), (Some(1), Some(1)));
    let hf = json_findings(&hist);
    let df = json_findings(&on_disk);
    assert_eq!((hf.len(), df.len()), (1, 1));
    assert_eq!(hf[0]["path"], df[0]["path"]);
    assert_ne!(hf[0]["fingerprint"], df[0]["fingerprint"]);
    // Each baseline suppresses its own kind of scan only.
    let hb = dir.join("hist-baseline.json");
    let db = dir.join("dir-baseline.json");
    std::fs::write(&hb, &hist.stdout).unwrap();
    std::fs::write(&db, &on_disk.stdout).unwrap();
    let outside = tempdir();
    let hb_s = hb.to_str().unwrap();
    let db_s = db.to_str().unwrap();
    assert_eq!(scan_git(dir, &["--baseline", hb_s]).code, Some(0));
    assert_eq!(scan_git(dir, &["--baseline", db_s]).code, Some(1));
    let _ = outside;
    let dir_with = |b: &str| {
        common::scan_in(
            dir,
            [
                "--baseline",
                b,
                "--exclude",
                ".git",
                "--exclude",
                "*baseline.json",
                ".",
            ],
        )
        .code
    };
    assert_eq!(dir_with(db_s), Some(0));
    assert_eq!(dir_with(hb_s), Some(1));
}

#[test]
fn gitleaks_ignore_commit_entries_suppress_that_commits_finding_only() {
    let t = tempdir();
    let dir = t.path();
    init(dir);
    let token = github_token(5);
    let c1 = commit_file(dir, "k.env", &format!("T={token}\n"), "one");
    // The secret moves to line 2 in a new blob: with `--whole-blobs`, a
    // second introducing commit (by default only the first: git_added.rs).
    let c2 = commit_file(dir, "k.env", &format!("# moved\nT={token}\n"), "two");
    let all = scan_git(dir, &["-f", "json", "--whole-blobs"]);
    let commits: BTreeSet<String> = json_findings(&all)
        .iter()
        .map(|f| f["commit"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(commits, BTreeSet::from([c1.clone(), c2.clone()]));
    let ignore = dir.join("ignore.txt");
    std::fs::write(&ignore, format!("{c1}:k.env:github-pat:1\n")).unwrap();
    let run = scan_git(
        dir,
        &[
            "-f",
            "json",
            "--whole-blobs",
            "-i",
            ignore.to_str().unwrap(),
        ],
    );
    let left = json_findings(&run);
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0]["commit"], c2.as_str());
}

#[test]
fn an_allow_marker_suppresses_a_history_finding() {
    let t = tempdir();
    let dir = t.path();
    init(dir);
    let token = github_token(6);
    commit_file(
        dir,
        "k.env",
        &format!("T={token} # gitleaks:allow\n"),
        "one",
    );
    let run = scan_git(dir, &["-f", "json"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
}

fn branchy(dir: &Path) -> (String, String, String) {
    init(dir);
    let base = commit_file(dir, "README.md", "base\n", "base");
    git(dir, &["checkout", "-q", "-b", "side"]);
    let side = commit_file(
        dir,
        "side.env",
        &format!("T={}\n", github_token(7)),
        "side secret",
    );
    git(dir, &["checkout", "-q", "main"]);
    let main2 = commit_file(
        dir,
        "main.env",
        &format!("T={}\n", github_token(8)),
        "main secret",
    );
    let _ = base;
    (side, main2, git(dir, &["rev-parse", "HEAD"]))
}

fn commits_of(run: &Run) -> BTreeSet<String> {
    json_findings(run)
        .iter()
        .map(|f| f["commit"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn every_ref_is_walked_and_branch_limits_the_walk_to_one() {
    let t = tempdir();
    let (side, main2, _) = branchy(t.path());
    let all = scan_git(t.path(), &["-f", "json"]);
    assert_eq!(
        commits_of(&all),
        BTreeSet::from([side.clone(), main2.clone()])
    );
    let only_main = scan_git(t.path(), &["-f", "json", "--branch", "main"]);
    assert_eq!(commits_of(&only_main), BTreeSet::from([main2.clone()]));
    let only_side = scan_git(t.path(), &["-f", "json", "--branch", "side"]);
    assert_eq!(commits_of(&only_side), BTreeSet::from([side]));
}

#[test]
fn since_commit_and_log_range_leave_out_the_older_history() {
    let t = tempdir();
    let dir = t.path();
    init(dir);
    let c1 = commit_file(dir, "one.env", &format!("T={}\n", github_token(9)), "one");
    let c2 = commit_file(dir, "two.env", &format!("T={}\n", github_token(10)), "two");
    let c3 = commit_file(
        dir,
        "three.env",
        &format!("T={}\n", github_token(11)),
        "three",
    );
    let since = scan_git(dir, &["-f", "json", "--since-commit", &c1]);
    assert_eq!(commits_of(&since), BTreeSet::from([c2.clone(), c3.clone()]));
    let range = scan_git(dir, &["-f", "json", "--log-range", &format!("{c1}..{c2}")]);
    assert_eq!(commits_of(&range), BTreeSet::from([c2]));
    let bad = scan_git(dir, &["--since-commit", "no-such-rev"]);
    assert_eq!(bad.code, Some(2), "{}", bad.stderr);
}

#[test]
fn staged_scans_the_index_against_head() {
    let t = tempdir();
    let dir = t.path();
    init(dir);
    commit_file(dir, "old.env", &format!("T={}\n", github_token(12)), "old");
    let token = github_token(13);
    common::put(dir, "new.env", format!("T={token}\n").as_bytes());
    git(dir, &["add", "new.env"]);
    let run = scan_git(dir, &["-f", "json", "--staged"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let f = json_findings(&run);
    assert_eq!(f.len(), 1, "only the staged blob: {f:?}");
    assert_eq!(f[0]["secret"], token.as_str());
    assert_eq!(f[0]["commit"], "staged");
}

#[test]
fn a_merge_and_an_archive_in_history_are_read() {
    let t = tempdir();
    let dir = t.path();
    init(dir);
    commit_file(dir, "README.md", "base\n", "base");
    git(dir, &["checkout", "-q", "-b", "feature"]);
    // A zip with a token in a member, committed on a branch, merged, then
    // deleted: found in the member, attributed to the branch commit.
    let token = github_token(14);
    let zip_path = dir.join("bundle.zip");
    {
        let f = std::fs::File::create(&zip_path).unwrap();
        let mut z = zip::ZipWriter::new(f);
        z.start_file("inner/creds.txt", zip::write::SimpleFileOptions::default())
            .unwrap();
        std::io::Write::write_all(&mut z, format!("token={token}\n").as_bytes()).unwrap();
        z.finish().unwrap();
    }
    git(dir, &["add", "bundle.zip"]);
    git(dir, &["commit", "-q", "-m", "add bundle"]);
    let zipped = git(dir, &["rev-parse", "HEAD"]);
    git(dir, &["checkout", "-q", "main"]);
    git(
        dir,
        &["merge", "-q", "--no-ff", "-m", "merge feature", "feature"],
    );
    git(dir, &["branch", "-q", "-D", "feature"]);
    remove_file(dir, "bundle.zip", "drop bundle");
    let run = scan_git(dir, &["-f", "json"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let f = json_findings(&run);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0]["path"], "bundle.zip!inner/creds.txt");
    assert_eq!(f[0]["commit"], zipped.as_str());
}

#[test]
fn history_flags_belong_to_scan_git_and_its_help_names_them() {
    let help = scan::cli::git_long_help();
    for flag in [
        "--branch",
        "--since-commit",
        "--log-range",
        "--staged",
        "--all-objects",
        "--state",
        "[REPO]",
    ] {
        assert!(help.contains(flag), "scan git --help lacks {flag}: {help}");
    }
    assert!(!scan::cli::long_help().contains("--since-commit"));
    assert!(!scan::cli::long_help().contains("--state"));
    assert!(scan::cli::long_help().contains("--no-git-history"));
    assert!(!help.contains("--no-git-history"), "{help}");
    let t = tempdir();
    let run = common::scan_in(t.path(), ["--branch", "main", "."]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("scan git"), "{}", run.stderr);
    let two = scan_git(t.path(), &["a", "b"]);
    assert_eq!(two.code, Some(2), "one REPO only: {}", two.stderr);
}

#[test]
fn all_objects_reads_a_deleted_branch_and_a_dangling_blob() {
    let t = tempdir();
    let dir = t.path();
    init(dir);
    commit_file(dir, "README.md", "base\n", "base");
    git(dir, &["checkout", "-q", "-b", "doomed"]);
    let lost = commit_file(
        dir,
        "lost.env",
        &format!("T={}\n", github_token(15)),
        "lost",
    );
    git(dir, &["checkout", "-q", "main"]);
    git(dir, &["branch", "-q", "-D", "doomed"]);
    let loose = dir.join("loose.txt");
    let token = github_token(16);
    std::fs::write(&loose, format!("T={token}\n")).unwrap();
    let blob = git(dir, &["hash-object", "-w", "loose.txt"]);
    std::fs::remove_file(&loose).unwrap();
    let reachable = scan_git(dir, &["-f", "json"]);
    assert_eq!(reachable.code, Some(0), "{}", reachable.stderr);
    let run = scan_git(dir, &["-f", "json", "--all-objects"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let f = json_findings(&run);
    assert_eq!(f.len(), 2, "{f:?}");
    let by_commit: BTreeSet<(String, String)> = f
        .iter()
        .map(|f| {
            (
                f["commit"].as_str().unwrap().to_owned(),
                f["path"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        by_commit,
        BTreeSet::from([
            (lost, "lost.env".to_owned()),
            ("unreachable".to_owned(), blob)
        ])
    );
}

#[test]
fn a_shallow_clone_is_scanned_from_its_boundary_without_errors() {
    let t = tempdir();
    let origin = t.path().join("origin");
    std::fs::create_dir(&origin).unwrap();
    init(&origin);
    commit_file(
        &origin,
        "old.env",
        &format!("T={}\n", github_token(17)),
        "old",
    );
    let kept = commit_file(
        &origin,
        "new.env",
        &format!("T={}\n", github_token(18)),
        "new",
    );
    let url = format!("file://{}", origin.display());
    git(t.path(), &["clone", "-q", "--depth", "1", &url, "shallow"]);
    let run = scan_git(&t.path().join("shallow"), &["-f", "json"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    // The boundary commit is walked as a root: both files are in its tree.
    let f = json_findings(&run);
    assert_eq!(f.len(), 2, "{f:?}");
    assert!(f.iter().all(|f| f["commit"] == kept.as_str()), "{f:?}");
    assert!(
        run.json()["skipped"].as_array().unwrap().is_empty(),
        "{}",
        run.stdout_text()
    );
}

#[test]
fn a_missing_blob_is_named_unreadable_and_the_rest_is_scanned() {
    let t = tempdir();
    let dir = t.path();
    init(dir);
    commit_file(dir, "victim.txt", "will vanish\n", "victim");
    let token = github_token(19);
    commit_file(dir, "k.env", &format!("T={token}\n"), "secret");
    let blob = git(dir, &["rev-parse", "HEAD~1:victim.txt"]);
    std::fs::remove_file(loose_object(dir, &blob)).unwrap();
    let run = scan_git(dir, &["-f", "json", "--metrics"]);
    // The report is complete but the history is not: exit 2, after it.
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stderr.contains("scanned partially: 1 object"),
        "{}",
        run.stderr
    );
    let f = json_findings(&run);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0]["secret"], token.as_str());
    let skipped = run.json()["skipped"].as_array().unwrap().clone();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0]["path"], "victim.txt");
    assert_eq!(skipped[0]["reason"], "unreadable");
    common::assert_accounting(&run.summary());
}

#[test]
fn exclude_globs_apply_to_paths_in_history() {
    let t = tempdir();
    let dir = t.path();
    init(dir);
    commit_file(
        dir,
        "vendor/lib.env",
        &format!("T={}\n", github_token(20)),
        "vendor",
    );
    let kept = commit_file(dir, "app.env", &format!("T={}\n", github_token(21)), "app");
    let run = scan_git(dir, &["-f", "json", "--exclude", "vendor/"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let f = json_findings(&run);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0]["path"], "app.env");
    assert_eq!(f[0]["commit"], kept.as_str());
    assert_eq!(json_findings(&scan_git(dir, &["-f", "json"])).len(), 2);
}

/// A rename keeps the blob id: the secret stays attributed to the commit
/// (and path) that introduced it, and is not reported again.
#[test]
fn a_renamed_file_keeps_its_introducing_commit() {
    let t = tempdir();
    let dir = t.path();
    init(dir);
    let added = commit_file(dir, "a.env", &format!("T={}\n", github_token(22)), "add");
    git(dir, &["mv", "a.env", "b.env"]);
    git(dir, &["commit", "-q", "-m", "rename"]);
    let run = scan_git(dir, &["-f", "json"]);
    let f = json_findings(&run);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0]["path"], "a.env");
    assert_eq!(f[0]["commit"], added.as_str());
}
