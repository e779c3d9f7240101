//! The docs' command-line examples are run as written, so they cannot
//! drift from the program: every ```console block of `OUTPUT.md`,
//! `ARCHIVES.md` and `GIT.md` is a shell session in a fresh directory, `$ ` lines are
//! commands (run in one bash script, `scan` being the binary under test)
//! and the lines after each are its exact standard output. Also: every
//! skip label the program has is documented, and `--help` says what the
//! docs say about defaults.
#![cfg(not(loom))]

use std::path::Path;
use std::process::Command;

const MARK: &str = "@@magpie-docs-example-end@@";

/// The console blocks of `doc`: for each, the commands and their expected
/// output lines.
fn blocks(doc: &str) -> Vec<Vec<(String, Vec<String>)>> {
    let mut out = Vec::new();
    let mut lines = doc.lines();
    while let Some(l) = lines.next() {
        if l.trim() != "```console" {
            continue;
        }
        let mut steps: Vec<(String, Vec<String>)> = Vec::new();
        for l in lines.by_ref() {
            if l.trim() == "```" {
                break;
            }
            match l.strip_prefix("$ ") {
                Some(cmd) => steps.push((cmd.to_owned(), Vec::new())),
                None => steps
                    .last_mut()
                    .expect("a console block starts with a command")
                    .1
                    .push(l.to_owned()),
            }
        }
        out.push(steps);
    }
    out
}

fn run_block(steps: &[(String, Vec<String>)]) -> Vec<Vec<String>> {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join(".bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_scan"), bin.join("scan")).unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let mut script = String::new();
    for (cmd, _) in steps {
        script.push_str(cmd);
        script.push_str(&format!("\necho {MARK}\n"));
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(&work)
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut got: Vec<Vec<String>> = text
        .split(&format!("{MARK}\n"))
        .map(|chunk| chunk.lines().map(str::to_owned).collect())
        .collect();
    got.truncate(steps.len());
    got
}

fn check_doc(name: &str) {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(name)).unwrap();
    let all = blocks(&doc);
    assert!(!all.is_empty(), "{name} has no console example");
    for steps in all {
        let got = run_block(&steps);
        for ((cmd, want), got) in steps.iter().zip(got) {
            assert_eq!(&got, want, "{name}: `$ {cmd}` printed something else");
        }
    }
}

#[test]
fn output_md_examples_print_what_they_show() {
    check_doc("OUTPUT.md");
}

#[test]
fn archives_md_examples_print_what_they_show() {
    check_doc("ARCHIVES.md");
}

#[test]
fn git_md_examples_print_what_they_show() {
    check_doc("GIT.md");
}

#[test]
fn every_skip_label_is_documented_in_output_md() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("OUTPUT.md")).unwrap();
    let archives =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHIVES.md")).unwrap();
    for label in scan::skip::SkipReason::LABELS {
        assert!(
            doc.contains(&format!("`{label}`")) || archives.contains(&format!("`{label}`")),
            "skip label {label} is not documented"
        );
    }
}

#[test]
fn help_and_archives_md_agree_on_the_default_archive_policy() {
    let help = scan::cli::long_help();
    assert!(help.contains("[default: partial]"), "{help}");
    let archives =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHIVES.md")).unwrap();
    assert!(archives.contains("| `partial` (default) |"));
    assert!(!archives.contains("| `skip` (default) |"));
}
