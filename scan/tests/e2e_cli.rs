//! The binary as a user meets it: exit codes (0 clean, 1 findings, 2
//! errors), every format, `--redact`, `--output`, `--trace`, a reader that
//! closes the pipe early, and a baseline round trip.
#![cfg(not(loom))]

mod e2e_common;

use std::io::Write;
use std::process::{Command, Stdio};

use e2e_common::*;

fn repo_with_one_secret() -> (tempfile::TempDir, String) {
    let dir = tempdir();
    let token = github_token(1);
    put(
        dir.path(),
        "src/.env",
        format!("A=1\nGITHUB_TOKEN={token}\n").as_bytes(),
    );
    put(dir.path(), "README.md", b"nothing to see\n");
    (dir, token)
}

#[test]
fn clean_tree_exits_0_with_an_empty_report() {
    let dir = tempdir();
    put(dir.path(), "a.txt", b"hello\n");
    let run = scan_in(dir.path(), ["--format", "jsonl", "."]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(run.stdout.is_empty());
    assert!(run.stderr.contains("scanned 1 files"), "{}", run.stderr);
    assert!(run.stderr.contains("0 findings"), "{}", run.stderr);
}

#[test]
fn empty_directory_exits_0() {
    let dir = tempdir();
    let run = scan_in(dir.path(), ["--format", "json", "--metrics", "."]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let s = run.summary();
    assert_eq!(s["files_scanned"], 0);
    assert_accounting(&s);
}

#[test]
fn findings_exit_1_and_every_format_carries_them() {
    let (dir, token) = repo_with_one_secret();
    let text = scan_in(dir.path(), ["--color", "never", "."]);
    assert_eq!(text.code, Some(1), "{}", text.stderr);
    let t = text.stdout_text();
    assert!(t.contains("github-pat"), "{t}");
    assert!(t.contains("src/.env:2:14 (offset 17)"), "{t}");
    assert!(t.contains(&token));

    let jsonl = scan_in(dir.path(), ["--format", "jsonl", "."]);
    assert_eq!(jsonl.code, Some(1));
    let lines: Vec<serde_json::Value> = jsonl
        .stdout_text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    let f = &lines[0];
    assert_eq!(f["path"], "src/.env");
    assert_eq!(
        (
            f["line"].as_u64(),
            f["column"].as_u64(),
            f["offset"].as_u64()
        ),
        (Some(2), Some(14), Some(17))
    );
    assert_eq!(f["secret"], token.as_str());
    assert_eq!(f["fingerprint"].as_str().unwrap().len(), 16);

    let json = scan_in(dir.path(), ["--format", "json", "--metrics", "."]);
    assert_eq!(json.code, Some(1));
    assert_eq!(json.findings().len(), 1);
    assert_eq!(json.findings()[0]["fingerprint"], f["fingerprint"]);
    let s = json.summary();
    assert_eq!(s["files_scanned"], 2);
    assert_eq!(s["findings"], 1);
    assert_accounting(&s);
    for key in [
        "enumerate_count",
        "objects_discovered",
        "enumerate_backpressure",
        "fetch_sync_count",
        "bytes_fetched",
        "scan_count",
        "bytes_scanned",
        "objects_completed",
        "rt_tasks_run",
        "rt_steal_attempts",
    ] {
        metric(&s, key);
    }
    assert_eq!(
        metric(&s, "bytes_scanned"),
        s["bytes_scanned"].as_u64().unwrap()
    );

    let sarif = scan_in(dir.path(), ["--format", "sarif", "."]);
    assert_eq!(sarif.code, Some(1));
    let v = sarif.json();
    assert_eq!(v["version"], "2.1.0");
    let results = v["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["ruleId"], "github-pat");
}

#[test]
fn redact_hides_the_secret_in_every_format() {
    let (dir, token) = repo_with_one_secret();
    for format in ["text", "jsonl", "json", "sarif"] {
        let run = scan_in(dir.path(), ["--redact", "--format", format, "."]);
        assert_eq!(run.code, Some(1));
        let out = run.stdout_text();
        assert!(!out.contains(&token), "{format} shows the secret: {out}");
        assert!(
            out.contains("ghp_…") || out.contains("ghp_\\u2026"),
            "{format}: {out}"
        );
    }
}

#[test]
fn output_file_and_trace_file_are_written() {
    let (dir, _) = repo_with_one_secret();
    let out = dir.path().join("report.jsonl");
    let trace = dir.path().join("trace.json");
    let run = scan_in(
        dir.path(),
        [
            "--format".as_ref(),
            "jsonl".as_ref(),
            "-o".as_ref(),
            out.as_os_str(),
            "--trace".as_ref(),
            trace.as_os_str(),
            "src".as_ref(),
        ],
    );
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(run.stdout.is_empty());
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 1);
    let t: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    let events = t["traceEvents"].as_array().unwrap();
    for name in ["Enumerate", "FetchSync", "Scan"] {
        assert!(
            events.iter().any(|e| e["name"] == name && e["ph"] == "X"),
            "no {name} event in {t}"
        );
    }
    assert!(events
        .iter()
        .any(|e| e["name"] == "Scan" && e["args"]["path"] == ".env"));
}

#[test]
fn missing_root_exits_2_naming_it() {
    let dir = tempdir();
    let run = scan_in(dir.path(), ["no-such-dir"]);
    assert_eq!(run.code, Some(2));
    assert!(run.stderr.contains("no-such-dir"), "{}", run.stderr);
    assert!(run.stdout.is_empty());
}

#[test]
fn bad_rules_file_exits_2() {
    let (dir, _) = repo_with_one_secret();
    put(
        dir.path(),
        "bad.toml",
        b"[[rules]]\nid = \"x\"\nregex = '''(unclosed'''\n",
    );
    let run = scan_in(dir.path(), ["--rules", "bad.toml", "."]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("bad.toml"), "{}", run.stderr);
    let missing = scan_in(dir.path(), ["--rules", "nope.toml", "."]);
    assert_eq!(missing.code, Some(2));
}

#[test]
fn rules_file_regex_that_only_fails_to_build_is_reported_before_the_scan() {
    // The regex parses but its program is over the size limit. No file in
    // the tree holds its keyword, so a rule built on first use would never
    // be built and the run would pass: the error must come up front.
    let (dir, _) = repo_with_one_secret();
    put(
        dir.path(),
        "big.toml",
        b"[[rules]]\nid = \"too-big\"\nregex = '''zqxj(?u:\\w){1000}'''\nkeywords = [\"zqxj\"]\n",
    );
    let run = scan_in(dir.path(), ["--rules", "big.toml", "src"]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("big.toml"), "{}", run.stderr);
    assert!(run.stderr.contains("too-big"), "{}", run.stderr);
    assert!(!run.stderr.contains("scanned"), "{}", run.stderr);
    assert!(run.stdout.is_empty());
}

#[test]
fn extra_rules_file_finds_its_own_secrets() {
    let dir = tempdir();
    put(
        dir.path(),
        "acme.toml",
        b"[[rules]]\nid = \"acme-key\"\ndescription = \"ACME key\"\nregex = '''\\b(acme_[a-z0-9]{24})\\b'''\nsecretGroup = 1\nkeywords = [\"acme_\"]\n",
    );
    put(
        dir.path(),
        "cfg/app.ini",
        b"key = acme_q8w7e6r5t4y3u2i1o9p8a7s6\n",
    );
    let run = scan_in(
        dir.path(),
        ["--rules", "acme.toml", "--format", "jsonl", "cfg"],
    );
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(run.stdout_text().contains("\"rule\":\"acme-key\""));
    let excluded = scan_in(
        dir.path(),
        ["--rules", "acme.toml", "--exclude-rule", "acme-key", "cfg"],
    );
    assert_eq!(excluded.code, Some(0), "{}", excluded.stderr);
}

#[test]
fn bad_baseline_exits_2_before_scanning() {
    let (dir, _) = repo_with_one_secret();
    put(dir.path(), "base.json", b"{not json");
    let run = scan_in(dir.path(), ["--baseline", "base.json", "src"]);
    assert_eq!(run.code, Some(2));
    assert!(run.stderr.contains("base.json"), "{}", run.stderr);
    assert!(
        !run.stderr.contains("scanned"),
        "no scan ran: {}",
        run.stderr
    );
    let missing = scan_in(dir.path(), ["--baseline", "missing.json", "src"]);
    assert_eq!(missing.code, Some(2));
}

#[test]
fn baseline_round_trip_hides_known_findings_and_shows_new_ones() {
    let (dir, _) = repo_with_one_secret();
    let base = dir.path().join("base.json");
    let first = scan_in(
        dir.path(),
        [
            "--format".as_ref(),
            "json".as_ref(),
            "-o".as_ref(),
            base.as_os_str(),
            "src".as_ref(),
        ],
    );
    assert_eq!(first.code, Some(1));
    let again = scan_in(
        dir.path(),
        [
            "--baseline".as_ref(),
            base.as_os_str(),
            "--format".as_ref(),
            "json".as_ref(),
            "src".as_ref(),
        ],
    );
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    assert_eq!(again.summary()["baseline_suppressed"], 1);
    assert!(again.findings().is_empty());
    // A new secret is still reported.
    put(
        dir.path(),
        "src/new.env",
        format!("T={}\n", github_token(2)).as_bytes(),
    );
    let third = scan_in(
        dir.path(),
        [
            "--baseline".as_ref(),
            base.as_os_str(),
            "--format".as_ref(),
            "json".as_ref(),
            "src".as_ref(),
        ],
    );
    assert_eq!(third.code, Some(1));
    assert_eq!(third.findings().len(), 1);
    // Paths are below the scan root `src`.
    assert_eq!(third.findings()[0]["path"], "new.env");
}

#[test]
fn fail_run_policy_exits_2_on_a_corrupt_archive() {
    let dir = tempdir();
    put(
        dir.path(),
        "ok.env",
        format!("T={}\n", github_token(3)).as_bytes(),
    );
    // A zip local header, then garbage and no central directory.
    let mut zip = b"PK\x03\x04".to_vec();
    zip.extend(std::iter::repeat_n(0x5a, 300));
    put(dir.path(), "broken.zip", &zip);
    let partial = scan_in(dir.path(), ["--format", "json", "--metrics", "."]);
    assert_eq!(partial.code, Some(1), "{}", partial.stderr);
    let s = partial.summary();
    assert_eq!(skipped(&s).get("archive_corrupt"), Some(&1), "{s}");
    assert_accounting(&s);
    let fail = scan_in(dir.path(), ["--archive-policy", "fail-run", "."]);
    assert_eq!(fail.code, Some(2), "{}", fail.stderr);
    assert!(fail.stderr.contains("fail-run"), "{}", fail.stderr);
    assert!(fail.stderr.contains("broken.zip"), "{}", fail.stderr);
    assert!(fail.stdout.is_empty(), "no report after an abort");
}

/// The shell waits until the test has closed the only read end of its
/// stdout, then execs the scan, whose report (a few hundred KB, more than a
/// pipe holds) must hit EPIPE: exit 0, no message.
#[test]
fn reader_closing_the_pipe_early_is_not_an_error() {
    let dir = tempdir();
    let mut body = String::new();
    for i in 0..3000 {
        body.push_str(&format!("token{i} = {}\n", github_token(i)));
    }
    put(dir.path(), "many.env", body.as_bytes());
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#"read _ && exec "$0" --no-progress --format jsonl ."#)
        .arg(bin())
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("error"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn single_file_root_and_several_roots_are_scanned() {
    let (dir, token) = repo_with_one_secret();
    put(
        dir.path(),
        "other/x.env",
        format!("K={}\n", github_token(4)).as_bytes(),
    );
    let run = scan_in(
        dir.path(),
        ["--format", "json", "--metrics", "src/.env", "other"],
    );
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let paths: Vec<String> = run
        .findings()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(paths, vec!["other/x.env", "src/.env"]);
    assert!(run.stdout_text().contains(&token));
    assert_accounting(&run.summary());
}
