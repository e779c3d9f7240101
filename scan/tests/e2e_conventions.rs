//! The command-line conventions gitleaks and ripgrep users expect: flag
//! aliases, `--exit-code`, `--redact=PERCENT`, `--exclude`, `--docs`, paths
//! below the scan root, and fingerprints that do not depend on where the
//! tree is checked out.
#![cfg(not(loom))]

mod e2e_common;

use std::path::Path;

use e2e_common::*;

fn tree(at: &Path) -> String {
    let token = github_token(7);
    put(at, "docs/example.env", format!("T={token}\n").as_bytes());
    put(at, "src/app/.env", format!("GITHUB={token}\n").as_bytes());
    put(at, "vendor/lib/key.txt", format!("K={token}\n").as_bytes());
    token
}

fn prints(run: &Run) -> Vec<(String, String)> {
    run.findings()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_owned(),
                f["fingerprint"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn paths_are_below_the_scan_root_without_a_dot_slash_however_the_root_is_spelled() {
    let dir = tempdir();
    let repo = dir.path().join("repo");
    tree(&repo);
    let want = ["docs/example.env", "src/app/.env", "vendor/lib/key.txt"];
    for (cwd, root) in [
        (repo.clone(), ".".to_owned()),
        (repo.clone(), "./".to_owned()),
        (dir.path().to_path_buf(), "repo".to_owned()),
        (dir.path().to_path_buf(), "./repo/".to_owned()),
        (dir.path().to_path_buf(), repo.display().to_string()),
    ] {
        let run = scan_in(&cwd, ["--format", "json", root.as_str()]);
        let paths: Vec<String> = prints(&run).into_iter().map(|(p, _)| p).collect();
        assert_eq!(paths, want, "root {root:?}");
    }
    // Several roots: each path starts with its root as given, without ./.
    let run = scan_in(dir.path(), ["--format", "json", "./repo/docs", "repo/src"]);
    let paths: Vec<String> = prints(&run).into_iter().map(|(p, _)| p).collect();
    assert_eq!(paths, ["repo/docs/example.env", "repo/src/app/.env"]);
}

#[test]
fn a_baseline_made_in_one_checkout_works_in_another() {
    let a = tempdir();
    let b = tempdir();
    let first = a.path().join("ci-build-1/checkout");
    let second = b.path().join("elsewhere/clone");
    tree(&first);
    tree(&second);
    let base = a.path().join("baseline.json");
    let run = scan_in(
        a.path(),
        [
            "--format".as_ref(),
            "json".as_ref(),
            "-o".as_ref(),
            base.as_os_str(),
            first.as_os_str(),
        ],
    );
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    // The other checkout, scanned from inside with `.`: nothing new.
    let again = scan_in(
        &second,
        [
            "--baseline".as_ref(),
            base.as_os_str(),
            "--format".as_ref(),
            "json".as_ref(),
            ".".as_ref(),
        ],
    );
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    assert_eq!(again.summary()["baseline_suppressed"], 3);
    // And the fingerprints are the same, file for file.
    let x = prints(&scan_in(&first, ["--format", "json", "."]));
    let y = prints(&scan_in(b.path(), ["--format", "json", "elsewhere/clone"]));
    assert_eq!(x, y);
}

#[test]
fn exclude_globs_leave_paths_out_and_the_summary_counts_them() {
    let dir = tempdir();
    tree(dir.path());
    let run = scan_in(
        dir.path(),
        [
            "--exclude",
            "vendor/",
            "--exclude",
            "*.env",
            "--format",
            "json",
            ".",
        ],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(run.findings().is_empty());
    let x = &run.summary()["excluded"];
    assert_eq!(x["exclude_glob_dirs"], 1, "{x}");
    assert_eq!(x["exclude_glob_files"], 2, "{x}");
    assert!(
        run.stderr
            .contains("--exclude left out 2 files and 1 directory"),
        "{}",
        run.stderr
    );
    // A path named on the command line is scanned even if it matches.
    let run = scan_in(
        dir.path(),
        ["--exclude", "*.env", "--format", "json", "docs/example.env"],
    );
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    // A glob that does not compile is a usage error.
    let run = scan_in(dir.path(), ["--exclude", "a[", "."]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("--exclude"), "{}", run.stderr);
}

#[test]
fn gitleaks_and_ripgrep_spellings_are_accepted() {
    let dir = tempdir();
    let token = tree(dir.path());
    let out = dir.path().join("r.json");
    let run = scan_in(
        dir.path(),
        [
            "--threads".as_ref(),
            "2".as_ref(),
            "--max-filesize".as_ref(),
            "1M".as_ref(),
            "--report-format".as_ref(),
            "json".as_ref(),
            "--report-path".as_ref(),
            out.as_os_str(),
            "--exit-code".as_ref(),
            "7".as_ref(),
            "--redact=50".as_ref(),
            "--verbose".as_ref(),
            ".".as_ref(),
        ],
    );
    assert_eq!(run.code, Some(7), "{}", run.stderr);
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let secret = report["findings"][0]["secret"].as_str().unwrap();
    assert_eq!(secret, format!("{}…", &token[..token.len() / 2]));
    assert_eq!(report["summary"]["workers"], 2);
    // --exit-code 0 lets a pipeline go on; errors still exit 2.
    let run = scan_in(dir.path(), ["-j", "1", "-v", "--exit-code", "0", "."]);
    assert_eq!(run.code, Some(0));
    let run = scan_in(dir.path(), ["--exit-code", "0", "missing"]);
    assert_eq!(run.code, Some(2));
    // --redact alone keeps the short form.
    let run = scan_in(dir.path(), ["--redact", "-f", "jsonl", "docs"]);
    assert!(run
        .stdout_text()
        .contains(&format!("\"secret\":\"{}…\"", &token[..4])));
}

#[test]
fn help_names_docs_the_binary_itself_prints() {
    let dir = tempdir();
    let help = scan_in(dir.path(), ["--help"]);
    assert_eq!(help.code, Some(0));
    let h = help.stdout_text();
    assert!(h.contains("scan --docs output"), "{h}");
    assert!(
        !h.contains("scan/OUTPUT.md"),
        "a source-tree path is not a doc: {h}"
    );
    for (topic, heading) in [
        ("output", "# What `scan` writes"),
        ("archives", "# Archives in `scan`"),
    ] {
        let run = scan_in(dir.path(), ["--docs", topic]);
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        assert!(run.stdout_text().starts_with(heading), "{topic}");
    }
}
