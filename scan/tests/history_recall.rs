//! Recall on planted histories (issue 14): `scan_plant::history` writes a
//! seeded repository in which each round adds, changes, renames, merges,
//! branches off, orphans, zips, keeps through several commits, and leaves
//! unreachable secrets, and says which commit and path each finding must
//! name (scan/GIT.md's attribution rules). `scan git --all-objects` must
//! report exactly that set: every planted secret at the commit that added
//! it, nothing else, nothing twice; with `--whole-blobs` also once more for
//! every later blob that still holds it (`Expected::whole_blobs_only`).

#[path = "e2e_common/mod.rs"]
mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{run_guarded, tempdir};
use scan_plant::history::{generate_history, HistoryTruth, MANY_COMMITS, SCENARIOS};
use serde_json::Value;

type Key = (String, String, String, String);

fn scan_history(repo: &Path, extra: &[&str]) -> Vec<Key> {
    let mut cmd = Command::new(common::bin());
    cmd.args(["git", "--no-progress", "-j", "2", "-f", "json"])
        .args(extra)
        .arg(repo)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let run = run_guarded(cmd);
    assert_eq!(run.code, Some(1), "findings exit 1: {}", run.stderr);
    run.findings()
        .iter()
        .map(|f: &Value| {
            let s = |k: &str| f[k].as_str().unwrap_or_default().to_owned();
            (s("commit"), s("path"), s("rule"), s("secret"))
        })
        .collect()
}

fn expected(truth: &HistoryTruth, whole: bool, keep: impl Fn(&str) -> bool) -> BTreeSet<Key> {
    truth
        .expected
        .iter()
        .filter(|e| keep(&e.scenario) && (whole || !e.whole_blobs_only))
        .map(|e| {
            (
                e.commit.clone(),
                e.path.clone(),
                e.rule.clone(),
                e.secret.clone(),
            )
        })
        .collect()
}

fn check(seed: u64, rounds: usize) {
    let t = tempdir();
    let repo = t.path().join("repo");
    let truth = generate_history(&repo, seed, rounds).unwrap();
    assert_eq!(
        truth.expected.len(),
        rounds * (SCENARIOS.len() + 1 + MANY_COMMITS - 1),
        "one finding per scenario, two for `changed`, {MANY_COMMITS} for `many-commits`"
    );
    assert_eq!(
        truth.expected.iter().filter(|e| e.whole_blobs_only).count(),
        rounds * (MANY_COMMITS - 1),
        "`many-commits` adds its secret once, then keeps it in {} more blobs",
        MANY_COMMITS - 1
    );
    // The first half of the rounds is packed, the rest loose: check that
    // the repository really has both, so both readers are exercised.
    let objects = repo.join(".git/objects");
    let packs = std::fs::read_dir(objects.join("pack"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension() == Some("pack".as_ref()))
        .count();
    let loose_dirs = std::fs::read_dir(&objects)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().len() == 2)
        .count();
    assert!(
        packs >= 1 && loose_dirs >= 1,
        "{packs} packs, {loose_dirs} loose dirs"
    );

    for whole in [false, true] {
        let args: &[&str] = if whole {
            &["--all-objects", "--whole-blobs"]
        } else {
            &["--all-objects"]
        };
        let got = scan_history(&repo, args);
        let got_set: BTreeSet<Key> = got.iter().cloned().collect();
        assert_eq!(
            got.len(),
            got_set.len(),
            "seed {seed} {args:?}: a finding reported twice"
        );
        let want = expected(&truth, whole, |_| true);
        let missed: Vec<_> = want.difference(&got_set).collect();
        let extra: Vec<_> = got_set.difference(&want).collect();
        assert!(
            missed.is_empty() && extra.is_empty(),
            "seed {seed} {args:?}:\nmissed {missed:#?}\nextra {extra:#?}"
        );
    }

    // Without --all-objects, what no ref reaches is left out, and nothing
    // else changes.
    let reachable: BTreeSet<Key> = scan_history(&repo, &[]).into_iter().collect();
    let want = expected(&truth, false, |s| {
        s != "dangling-commit" && s != "unreachable-blob"
    });
    assert_eq!(reachable, want, "seed {seed}: refs only");
}

#[test]
fn every_planted_secret_in_history_is_found_once_at_its_introducing_commit() {
    for seed in [1, 2, 3] {
        check(seed, 4);
    }
}

#[test]
fn the_same_seed_writes_the_same_history() {
    let (a, b) = (tempdir(), tempdir());
    let ta = generate_history(&a.path().join("repo"), 9, 2).unwrap();
    let tb = generate_history(&b.path().join("repo"), 9, 2).unwrap();
    assert_eq!(ta, tb);
    let tc = generate_history(&tempdir().path().join("repo"), 10, 2).unwrap();
    assert_ne!(ta.expected, tc.expected, "another seed, other secrets");
}
