//! Nothing is skipped silently: ignored files are scanned unless asked,
//! every skip is named with its reason in every format, an unreadable PATH
//! is an error, `--fail-on-skip` gates CI, and `-` and FIFOs named on the
//! command line are read.
#![cfg(not(loom))]

mod e2e_common;

use std::io::Write;
use std::process::{Command, Stdio};

use e2e_common::*;
use serde_json::Value;

/// A reported path without a leading `./`.
fn rel(p: &str) -> String {
    p.strip_prefix("./").unwrap_or(p).to_owned()
}

/// A tree whose `.env` (holding a token) is git-ignored, with a `.git`.
fn repo_with_ignored_env(git: bool) -> (tempfile::TempDir, String) {
    let dir = tempdir();
    let token = github_token(3);
    put(dir.path(), ".gitignore", b".env\nbuild/\n");
    put(dir.path(), ".env", format!("TOKEN={token}\n").as_bytes());
    put(dir.path(), "build/out.txt", b"x\n");
    put(dir.path(), "src/main.rs", b"fn main() {}\n");
    if git {
        put(dir.path(), ".git/HEAD", b"ref: refs/heads/main\n");
    }
    (dir, token)
}

#[test]
fn git_ignored_files_are_scanned_by_default_inside_and_outside_a_repo() {
    for git in [false, true] {
        let (dir, token) = repo_with_ignored_env(git);
        let run = scan_in(dir.path(), ["--format", "json", "."]);
        assert_eq!(run.code, Some(1), "git={git}: {}", run.stderr);
        let f = run.findings();
        assert_eq!(f.len(), 1, "git={git}");
        assert_eq!(f[0]["secret"], token.as_str());
        assert!(!run.stderr.contains("ignore files excluded"));
    }
}

#[test]
fn respect_gitignore_leaves_ignored_files_out_and_says_how_many() {
    for git in [false, true] {
        let (dir, _) = repo_with_ignored_env(git);
        let run = scan_in(dir.path(), ["--respect-gitignore", "--format", "json", "."]);
        assert_eq!(run.code, Some(0), "git={git}: {}", run.stderr);
        assert!(run.findings().is_empty());
        assert!(
            run.stderr
                .contains("ignore files excluded 1 file and 1 directory (--respect-gitignore)"),
            "{}",
            run.stderr
        );
        let x = &run.summary()["excluded"];
        assert_eq!(x["ignore_files"], 1, "{x}");
        assert_eq!(x["ignore_dirs"], 1, "{x}");
        // --no-ignore after it undoes it, as in ripgrep.
        let run = scan_in(
            dir.path(),
            [
                "--respect-gitignore",
                "--no-ignore",
                "--format",
                "json",
                ".",
            ],
        );
        assert_eq!(run.code, Some(1), "{}", run.stderr);
    }
}

/// A tree with one file over a 1 KiB limit and a zip whose one member is
/// over it too.
fn tree_with_skips() -> tempfile::TempDir {
    let dir = tempdir();
    put(dir.path(), "big.txt", &vec![b'a'; 4096]);
    put(dir.path(), "ok.txt", b"fine\n");
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    zip.start_file("inner/huge.txt", opts).unwrap();
    zip.write_all(&vec![b'b'; 8192]).unwrap();
    let bytes = zip.finish().unwrap().into_inner();
    put(dir.path(), "pack.zip", &bytes);
    dir
}

#[test]
fn every_skipped_file_and_member_is_named_with_its_reason_in_every_format() {
    let dir = tree_with_skips();
    let args = |f: &'static str| ["--max-file-size", "1K", "--format", f, "."];

    let json = scan_in(dir.path(), args("json"));
    assert_eq!(json.code, Some(0), "{}", json.stderr);
    let entries = json.json()["skipped"].as_array().unwrap().clone();
    let named: Vec<(String, String)> = entries
        .iter()
        .map(|s| {
            (
                rel(s["path"].as_str().unwrap()),
                s["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        named.contains(&("big.txt".into(), "too_large".into())),
        "{named:?}"
    );
    assert!(
        named
            .iter()
            .any(|(p, r)| p == "pack.zip!inner/huge.txt" && r.starts_with("archive_")),
        "{named:?}"
    );
    let total: u64 = skipped(&json.summary()).values().sum();
    assert_eq!(total as usize, entries.len(), "{entries:?}");

    let jsonl = scan_in(dir.path(), args("jsonl"));
    let lines: Vec<Value> = jsonl
        .stdout_text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.iter().any(|l| l["type"] == "skipped"
        && rel(l["path"].as_str().unwrap()) == "big.txt"
        && l["reason"] == "too_large"));

    let sarif = scan_in(dir.path(), args("sarif"));
    let v: Value = serde_json::from_slice(&sarif.stdout).unwrap();
    let notes = v["runs"][0]["invocations"][0]["toolExecutionNotifications"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(notes.len(), entries.len());
    assert!(notes.iter().any(|n| n["descriptor"]["id"] == "too_large"
        && n["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "big.txt"));
    assert!(notes
        .iter()
        .any(|n| n["properties"]["archiveMember"] == "inner/huge.txt"));

    let quiet = scan_in(dir.path(), ["--max-file-size", "1K", "."]);
    assert!(!quiet.stderr.contains("big.txt"), "{}", quiet.stderr);
    assert!(quiet.stderr.contains("-v names them"), "{}", quiet.stderr);
    let verbose = scan_in(dir.path(), ["-v", "--max-file-size", "1K", "."]);
    assert!(
        verbose
            .stderr
            .contains("big.txt: too large (4 KiB > 1 KiB limit) [too_large]"),
        "{}",
        verbose.stderr
    );
    assert!(
        verbose.stderr.contains("pack.zip!inner/huge.txt: "),
        "{}",
        verbose.stderr
    );
}

#[test]
fn fail_on_skip_exits_2_after_writing_the_report() {
    let dir = tree_with_skips();
    let plain = scan_in(
        dir.path(),
        ["--max-file-size", "1K", "--format", "json", "."],
    );
    assert_eq!(plain.code, Some(0), "{}", plain.stderr);
    let gated = scan_in(
        dir.path(),
        [
            "--fail-on-skip",
            "--max-file-size",
            "1K",
            "--format",
            "json",
            ".",
        ],
    );
    assert_eq!(gated.code, Some(2), "{}", gated.stderr);
    assert!(gated.stderr.contains("--fail-on-skip"), "{}", gated.stderr);
    assert!(!gated.json()["skipped"].as_array().unwrap().is_empty());
    // Nothing skipped: the gate passes.
    let clean = scan_in(dir.path(), ["--fail-on-skip", "ok.txt"]);
    assert_eq!(clean.code, Some(0), "{}", clean.stderr);
}

#[test]
fn a_missing_or_unreadable_path_on_the_command_line_is_an_error_naming_it() {
    let dir = tempdir();
    let run = scan_in(dir.path(), ["nope.txt"]);
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr
            .contains("scan: error: nope.txt: No such file or directory"),
        "{}",
        run.stderr
    );
    if is_root() {
        // Permissions do not stop root: nothing more to check here.
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let f = put(dir.path(), "locked.txt", b"x");
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o000)).unwrap();
    let run = scan_in(dir.path(), ["locked.txt"]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stderr.contains("locked.txt: Permission denied"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty());
}

#[test]
fn dash_reads_standard_input() {
    let token = github_token(9);
    let mut child = Command::new(bin())
        .args(["--no-progress", "--format", "jsonl", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let body = format!("first line\nTOKEN={token}\n");
    let writer = std::thread::spawn(move || stdin.write_all(body.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line: Value =
        serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(line["path"], "<stdin>");
    assert_eq!(line["line"], 2);
    assert_eq!(line["secret"], token.as_str());
}

#[test]
fn a_fifo_named_on_the_command_line_is_read_to_its_end() {
    let dir = tempdir();
    let fifo = dir.path().join("pipe");
    let status = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(status.success());
    let token = github_token(4);
    let body = format!("{}\nK={token}\n", "x".repeat(300_000));
    let path = fifo.clone();
    let writer = std::thread::spawn(move || {
        let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        f.write_all(body.as_bytes()).unwrap();
    });
    let run = scan_in(dir.path(), ["--format", "json", "pipe"]);
    writer.join().unwrap();
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let f = run.findings();
    assert_eq!(f[0]["path"], "pipe");
    assert_eq!(f[0]["line"], 2);
    assert_eq!(
        run.summary()["bytes_scanned"],
        300_000 + 3 + token.len() as u64 + 1
    );
}

#[test]
fn a_stream_past_the_size_limit_is_scanned_up_to_it_and_named_too_large() {
    let token = github_token(5);
    let mut child = Command::new(bin())
        .args([
            "--no-progress",
            "--max-file-size",
            "1K",
            "--format",
            "json",
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let body = format!("K={token}\n{}", "y".repeat(5000));
    // The scanner stops reading at the limit: a write error after that is
    // expected.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(body.as_bytes());
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["findings"][0]["secret"], token.as_str());
    assert_eq!(v["skipped"][0]["reason"], "too_large");
    assert_eq!(v["summary"]["bytes_scanned"], 1024);
}
