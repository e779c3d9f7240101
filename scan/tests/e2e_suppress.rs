//! Suppression the way teams already do it: `gitleaks:allow` or
//! `magpie:allow` on the line, and `.gitleaksignore` entries.
#![cfg(not(loom))]

mod e2e_common;

use e2e_common::*;

fn tree() -> (tempfile::TempDir, [String; 4]) {
    let dir = tempdir();
    let t = [
        github_token(11),
        github_token(12),
        github_token(13),
        github_token(14),
    ];
    put(
        dir.path(),
        "app/config.py",
        format!(
            "A = \"{}\"  # gitleaks:allow\nB = \"{}\"\nC = \"{}\"  // magpie:allow\n",
            t[0], t[1], t[2]
        )
        .as_bytes(),
    );
    put(
        dir.path(),
        "docs/example.md",
        format!("token: {}\n", t[3]).as_bytes(),
    );
    (dir, t)
}

fn secrets(run: &Run) -> Vec<String> {
    run.findings()
        .iter()
        .map(|f| f["secret"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn allow_markers_on_the_line_suppress_that_finding_only() {
    let (dir, t) = tree();
    let run = scan_in(dir.path(), ["--format", "json", "."]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert_eq!(secrets(&run), vec![t[1].clone(), t[3].clone()]);
    assert_eq!(run.summary()["inline_allowed"], 2);
    assert!(run.stderr.contains("2 allowed inline"), "{}", run.stderr);
}

#[test]
fn gitleaksignore_at_the_root_and_given_by_flag_drops_the_findings_it_lists() {
    let (dir, t) = tree();
    put(
        dir.path(),
        ".gitleaksignore",
        b"# accepted after review\napp/config.py:github-pat:2\n",
    );
    let run = scan_in(dir.path(), ["--format", "json", "."]);
    assert_eq!(secrets(&run), vec![t[3].clone()]);
    assert_eq!(run.summary()["ignore_file_suppressed"], 1);
    assert!(
        run.stderr.contains("1 in .gitleaksignore"),
        "{}",
        run.stderr
    );
    // The same tree scanned from its parent: paths are below the root, so
    // the entry still matches.
    let parent = dir.path().parent().unwrap();
    let name = dir.path().file_name().unwrap();
    let run = scan_in(parent, ["--format".as_ref(), "json".as_ref(), name]);
    assert_eq!(secrets(&run), vec![t[3].clone()]);
    // Turned off, the finding is back.
    let run = scan_in(dir.path(), ["--no-gitleaksignore", "--format", "json", "."]);
    assert_eq!(secrets(&run).len(), 2);

    // An explicit file, with a magpie fingerprint as the entry.
    let print = run.findings()[1]["fingerprint"]
        .as_str()
        .unwrap()
        .to_owned();
    let extra = put(
        dir.path(),
        "extra-ignore",
        format!("{print} # docs example\n").as_bytes(),
    );
    let run = scan_in(
        dir.path(),
        [
            "-i".as_ref(),
            extra.as_os_str(),
            "--format".as_ref(),
            "json".as_ref(),
            ".".as_ref(),
        ],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(secrets(&run).is_empty());
    // A named file that is missing is an error.
    let run = scan_in(dir.path(), ["--gitleaks-ignore-path", "nope", "."]);
    assert_eq!(run.code, Some(2));
    assert!(run.stderr.contains("nope"), "{}", run.stderr);
}
