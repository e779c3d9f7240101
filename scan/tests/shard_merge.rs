//! `--shard I/N` and `scan merge`: N shards merged equal one full run,
//! finding for finding (json with the timing fields removed; text and
//! SARIF byte for byte), for N = 1, 2, 3, 5, on the planted corpus, on a
//! seeded git history (`scan git`) and on a repository scanned as a
//! directory (files and history); the shards' owned items partition the
//! items; bad shard sets and bad `--shard` values are errors (exit 2).
#![cfg(not(loom))]

#[path = "e2e_common/mod.rs"]
mod common;

#[path = "git_common/mod.rs"]
mod gitc;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{github_token, put, run_guarded, tempdir, Run};
use gitc::{commit_file, git, git_present, git_with_input, init, remove_file};
use scan::report::json::{parse_stream, JsonValue};
use scan::shard::Shard;
use serde_json::Value;

const COUNTS: [u32; 4] = [1, 2, 3, 5];

/// Runs `scan ARGS` in `cwd` with two workers and no progress bar (after
/// the `git` subcommand when ARGS start with it).
fn scan(cwd: &Path, args: &[&str]) -> Run {
    let (sub, rest) = match args.split_first() {
        Some((&"git", rest)) => (&["git"][..], rest),
        _ => (&[][..], args),
    };
    let mut cmd = Command::new(common::bin());
    cmd.current_dir(cwd)
        .args(sub)
        .args(["--no-progress", "-j", "2"])
        .args(rest)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    run_guarded(cmd)
}

/// Runs `scan merge ARGS FILES` in `cwd`.
fn merge(cwd: &Path, args: &[&str], files: &[PathBuf]) -> Run {
    let mut cmd = Command::new(common::bin());
    cmd.current_dir(cwd)
        .arg("merge")
        .args(args)
        .args(files)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    run_guarded(cmd)
}

/// A json report without what differs from run to run (wall time and
/// throughput).
fn normalized(mut v: Value) -> Value {
    let s = v["summary"].as_object_mut().expect("a summary");
    s.remove("elapsed_seconds");
    s.remove("throughput_mb_per_second");
    v
}

/// One sharded run's files and what each shard said it owned.
struct Shards {
    files: Vec<PathBuf>,
    owned: Vec<u64>,
}

/// Runs `scan [git] --shard i/n -f jsonl -o OUT/...` for every i, in `cwd`
/// with `args` (the path last).
fn run_shards(cwd: &Path, out: &Path, pre: &[&str], args: &[&str], n: u32) -> Shards {
    let mut files = Vec::new();
    let mut owned = Vec::new();
    for i in 0..n {
        let file = out.join(format!("{}-{n}-{i}.jsonl", pre.join("")));
        let spec = format!("{i}/{n}");
        let mut all: Vec<&str> = pre.to_vec();
        all.extend([
            "--shard",
            &spec,
            "-f",
            "jsonl",
            "-o",
            file.to_str().unwrap(),
        ]);
        all.extend(args);
        let r = scan(cwd, &all);
        assert!(
            matches!(r.code, Some(0 | 1)),
            "shard {spec}: {:?} {}",
            r.code,
            r.stderr
        );
        let prefix = format!("shard {spec} (0-based): owned ");
        let n_owned: u64 = r
            .stderr
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("the summary names the shard: {}", r.stderr))
            .split_whitespace()
            .next()
            .unwrap()
            .replace(',', "")
            .parse()
            .unwrap();
        // The summary record carries the same count.
        let text = std::fs::read_to_string(&file).unwrap();
        let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_eq!(last["type"], "summary");
        assert_eq!(last["summary"]["shard"]["owned"], n_owned, "{spec}");
        assert_eq!(last["summary"]["shard"]["index"], i);
        assert_eq!(last["summary"]["shard"]["count"], n);
        files.push(file);
        owned.push(n_owned);
    }
    Shards { files, owned }
}

/// Every regular file below `dir` (not entering `.git`), as the report
/// shows it for `scan .` in `dir`.
fn walk_entries(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                if e.file_name() != ".git" {
                    stack.push(e.path());
                }
            } else {
                let rel = e.path().strip_prefix(dir).unwrap().to_owned();
                out.push(rel.to_str().unwrap().to_owned());
            }
        }
    }
    out.sort();
    out
}

/// Checks that the owned counts are the sizes of the sets `of_path` (or
/// `of_object`) assigns, which partition the items by construction: each
/// shard owned exactly its own, none was in two, none missing.
fn assert_partition(owned: &[u64], owners: &[u32], what: &str) {
    let n = owned.len() as u32;
    let mut want = vec![0u64; owned.len()];
    for &o in owners {
        assert!(o < n);
        want[o as usize] += 1;
    }
    assert_eq!(owned, want.as_slice(), "{what}: owned per shard");
    assert_eq!(owned.iter().sum::<u64>(), owners.len() as u64, "{what}");
}

/// The records of a shard's jsonl file, read with scan's own reader
/// (context lines may hold bytes that are not UTF-8: `\udcXX`, which
/// serde_json refuses).
fn records(file: &Path) -> Vec<JsonValue> {
    parse_stream(&std::fs::read(file).unwrap()).unwrap()
}

/// The findings' fingerprints of a shard's jsonl file.
fn fingerprints(file: &Path) -> BTreeSet<String> {
    records(file)
        .iter()
        .filter_map(|v| v.get("fingerprint").and_then(JsonValue::as_str))
        .map(str::to_owned)
        .collect()
}

/// The fingerprints of shards are pairwise disjoint and their union is
/// `want`.
fn assert_findings_partition(shards: &Shards, want: &BTreeSet<String>) {
    let mut union = BTreeSet::new();
    for f in &shards.files {
        for p in fingerprints(f) {
            assert!(union.insert(p.clone()), "{p} in two shards");
        }
    }
    assert_eq!(&union, want, "the shards' findings are the full run's");
}

fn full_fingerprints(run: &Run) -> BTreeSet<String> {
    run.findings()
        .iter()
        .map(|f| f["fingerprint"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn merged_shards_of_the_planted_corpus_equal_one_full_run() {
    let t = tempdir();
    let tree = t.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    scan_plant::generate(&tree, 11, 120).unwrap();
    // A too-large file: a skip, so skips are merged and --fail-on-skip
    // decides the exit code as it does for one run.
    put(&tree, "big/blob.bin", &vec![b'x'; 5 << 20]);
    let out = t.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let shard_args = ["--max-file-size", "4M", "."];
    let full = scan(&tree, &["-f", "json", "--max-file-size", "4M", "."]);
    assert_eq!(full.code, Some(1), "{}", full.stderr);
    let want = normalized(full.json());
    assert!(want["findings"].as_array().unwrap().len() > 20, "{want}");
    assert_eq!(want["summary"]["skipped"]["too_large"], 1);
    let full_text = scan(
        &tree,
        &[
            "-f",
            "text",
            "--color",
            "never",
            "--max-file-size",
            "4M",
            ".",
        ],
    );
    let full_sarif = scan(&tree, &["-f", "sarif", "--max-file-size", "4M", "."]);
    let full_strict = scan(
        &tree,
        &["-f", "json", "--fail-on-skip", "--max-file-size", "4M", "."],
    );
    assert_eq!(full_strict.code, Some(2));
    let entries = walk_entries(&tree);
    for n in COUNTS {
        let shards = run_shards(&tree, &out, &[], &shard_args, n);
        let owners: Vec<u32> = entries
            .iter()
            .map(|p| Shard::of_path(p.as_bytes(), n))
            .collect();
        assert_partition(&shards.owned, &owners, &format!("{n} shards of the tree"));
        assert_findings_partition(&shards, &full_fingerprints(&full));
        // Every finding of shard i is in a file shard i owns (an archive
        // member goes with its archive).
        for (i, f) in shards.files.iter().enumerate() {
            for v in records(f) {
                if let Some(p) = v.get("path").and_then(JsonValue::as_bytes) {
                    let file = p.split(|b| *b == b'!').next().unwrap();
                    assert_eq!(Shard::of_path(file, n), i as u32, "{p:?}");
                }
            }
        }
        let m = merge(&tree, &["-f", "json"], &shards.files);
        assert_eq!(m.code, full.code, "{n} shards: {}", m.stderr);
        assert_eq!(normalized(m.json()), want, "{n} shards, json");
        assert!(
            m.stderr.contains(&format!("merged {n} shards")),
            "{}",
            m.stderr
        );
        let strict = merge(&tree, &["-f", "json", "--fail-on-skip"], &shards.files);
        assert_eq!(strict.code, full_strict.code, "{}", strict.stderr);
        if n == 3 {
            let text = merge(&tree, &["-f", "text", "--color", "never"], &shards.files);
            assert_eq!(text.stdout_text(), full_text.stdout_text(), "text");
            let sarif = merge(&tree, &["-f", "sarif"], &shards.files);
            assert_eq!(sarif.stdout_text(), full_sarif.stdout_text(), "sarif");
            // jsonl out of a merge: the full run's jsonl (no shard keys).
            let jsonl = merge(&tree, &["-f", "jsonl"], &shards.files);
            let full_jsonl = scan(&tree, &["-f", "jsonl", "--max-file-size", "4M", "."]);
            assert_eq!(jsonl.stdout_text(), full_jsonl.stdout_text(), "jsonl");
        }
    }
}

/// A small seeded generator of git histories: `commits` commits on `main`
/// and a side branch merged back, tokens added, edited, renamed, removed,
/// copied to other paths and left only on a deleted branch's merge.
/// Returns the number of tokens planted.
fn seeded_history(dir: &Path, seed: u64, commits: u32) -> u32 {
    init(dir);
    let mut x = seed | 1;
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut planted = 0u32;
    let mut live: Vec<String> = Vec::new();
    commit_file(dir, "README.md", "seeded history\n", "root");
    for c in 0..commits {
        match rnd(5) {
            0 | 1 => {
                planted += 1;
                let path = format!("d{}/f{c}.env", rnd(4));
                let body = format!("# {c}\nTOKEN={}\n", github_token(1000 + planted));
                commit_file(dir, &path, &body, &format!("add {path}"));
                live.push(path);
            }
            2 if !live.is_empty() => {
                let path = live.remove(rnd(live.len() as u64) as usize);
                remove_file(dir, &path, &format!("remove {path}"));
            }
            3 if !live.is_empty() => {
                let from = live[rnd(live.len() as u64) as usize].clone();
                let to = format!("moved/{c}.env");
                std::fs::create_dir_all(dir.join("moved")).unwrap();
                git(dir, &["mv", &from, &to]);
                git(dir, &["commit", "-q", "-m", &format!("move {from}")]);
                live.retain(|p| p != &from);
                live.push(to);
            }
            _ => {
                // A side branch with its own token, merged back.
                planted += 1;
                let branch = format!("side{c}");
                git(dir, &["checkout", "-q", "-b", &branch]);
                let body = format!("SIDE={}\n", github_token(2000 + planted));
                commit_file(dir, &format!("side/{c}.env"), &body, "side work");
                git(dir, &["checkout", "-q", "main"]);
                commit_file(dir, &format!("main{c}.txt"), "plain\n", "main work");
                git(dir, &["merge", "-q", "--no-ff", "-m", "merge", &branch]);
            }
        }
    }
    planted
}

/// Every blob reachable from every ref, by id (what `scan git` reads).
fn reachable_blobs(dir: &Path) -> Vec<Vec<u8>> {
    let listing = git(dir, &["rev-list", "--objects", "--all"]);
    let ids: String = listing
        .lines()
        .map(|l| l.split_whitespace().next().unwrap().to_owned() + "\n")
        .collect();
    let typed = git_with_input(
        dir,
        &["cat-file", "--batch-check=%(objecttype) %(objectname)"],
        ids.as_bytes(),
    );
    let mut blobs: Vec<Vec<u8>> = typed
        .lines()
        .filter_map(|l| l.strip_prefix("blob "))
        .map(|hex| {
            (0..hex.len() / 2)
                .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
                .collect()
        })
        .collect();
    blobs.sort();
    blobs.dedup();
    blobs
}

#[test]
fn merged_shards_of_a_git_history_equal_one_full_run() {
    if !git_present() {
        return;
    }
    let t = tempdir();
    let repo = t.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let planted = seeded_history(&repo, 0x5eed_0014, 24);
    assert!(planted >= 5, "the generator planted {planted}");
    let out = t.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let full = scan(&repo, &["git", "-f", "json", "."]);
    assert_eq!(full.code, Some(1), "{}", full.stderr);
    let want = normalized(full.json());
    let blobs = reachable_blobs(&repo);
    assert_eq!(
        want["summary"]["files_scanned"],
        blobs.len(),
        "every reachable blob once"
    );
    let full_sarif = scan(&repo, &["git", "-f", "sarif", "."]);
    for n in COUNTS {
        let shards = run_shards(&repo, &out, &["git"], &["."], n);
        let owners: Vec<u32> = blobs.iter().map(|id| Shard::of_object(id, n)).collect();
        assert_partition(
            &shards.owned,
            &owners,
            &format!("{n} shards of the history"),
        );
        assert_findings_partition(&shards, &full_fingerprints(&full));
        let m = merge(&repo, &["-f", "json"], &shards.files);
        assert_eq!(m.code, full.code, "{}", m.stderr);
        assert_eq!(normalized(m.json()), want, "{n} shards");
        if n == 5 {
            let sarif = merge(&repo, &["-f", "sarif"], &shards.files);
            assert_eq!(sarif.stdout_text(), full_sarif.stdout_text(), "sarif");
        }
    }
}

#[test]
fn merged_shards_of_a_directory_with_its_history_equal_one_full_run() {
    if !git_present() {
        return;
    }
    let t = tempdir();
    let repo = t.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    seeded_history(&repo, 0x0d1c_0014, 16);
    // Work-tree files that are not committed: read by the walk only.
    put(
        &repo,
        "local/.env",
        format!("T={}\n", github_token(77)).as_bytes(),
    );
    let out = t.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let full = scan(&repo, &["-f", "json", "."]);
    assert_eq!(full.code, Some(1), "{}", full.stderr);
    let want = normalized(full.json());
    assert_eq!(want["summary"]["history"]["scanned"], true, "{want}");
    let files = walk_entries(&repo);
    let blobs = reachable_blobs(&repo);
    for n in [2, 3] {
        let shards = run_shards(&repo, &out, &[], &["."], n);
        let owners: Vec<u32> = files
            .iter()
            .map(|p| Shard::of_path(p.as_bytes(), n))
            .chain(blobs.iter().map(|id| Shard::of_object(id, n)))
            .collect();
        assert_partition(&shards.owned, &owners, "files and blobs");
        let m = merge(&repo, &["-f", "json"], &shards.files);
        assert_eq!(m.code, full.code, "{}", m.stderr);
        assert_eq!(normalized(m.json()), want, "{n} shards");
    }
}

#[test]
fn a_missing_repeated_truncated_or_foreign_shard_file_is_an_error_naming_it() {
    let t = tempdir();
    let tree = t.path().join("tree");
    for k in 0..12 {
        put(
            &tree,
            &format!("f{k}.env"),
            format!("T={}\n", github_token(k)).as_bytes(),
        );
    }
    let out = t.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let s = run_shards(&tree, &out, &[], &["."], 3);
    let report = out.join("merged.json");
    let bad = |files: &[PathBuf], needle: &str| {
        let r = merge(
            &tree,
            &["-f", "json", "-o", report.to_str().unwrap()],
            files,
        );
        assert_eq!(r.code, Some(2), "{}", r.stderr);
        assert_eq!(r.stderr.lines().count(), 1, "one line: {}", r.stderr);
        assert!(r.stderr.contains(needle), "{needle:?} in {}", r.stderr);
        assert!(!report.exists(), "no report from a bad set");
    };
    bad(&s.files[..2], "1 of 3 shards missing: 2/3");
    let twice = [s.files.clone(), vec![s.files[1].clone()]].concat();
    bad(&twice, "given twice");
    // Truncated mid-line, and cut at a line boundary before the summary
    // (the shard with the most findings: it has lines before its summary).
    let k = (0..3)
        .max_by_key(|&i| std::fs::read(&s.files[i]).unwrap().len())
        .unwrap();
    let text = std::fs::read(&s.files[k]).unwrap();
    let cut = out.join("cut.jsonl");
    std::fs::write(&cut, &text[..text.len() / 2]).unwrap();
    let mut files = s.files.clone();
    files[k] = cut.clone();
    bad(&files, cut.to_str().unwrap());
    let lines: Vec<&[u8]> = text.split_inclusive(|b| *b == b'\n').collect();
    std::fs::write(&cut, lines[..lines.len() - 1].concat()).unwrap();
    bad(&files, "no summary record");
    // A report written without --shard, and a shard of another split.
    let plain = scan(&tree, &["-f", "jsonl", "."]);
    std::fs::write(&cut, &plain.stdout).unwrap();
    bad(&files, "no summary record");
    let other = run_shards(&tree, &out, &[], &["."], 2);
    let mixed = [
        s.files[0].clone(),
        s.files[1].clone(),
        other.files[0].clone(),
    ];
    bad(&mixed, "does not belong with");
    let missing = out.join("nope.jsonl");
    bad(std::slice::from_ref(&missing), missing.to_str().unwrap());
    // The complete set merges.
    let r = merge(
        &tree,
        &["-f", "json", "-o", report.to_str().unwrap()],
        &s.files,
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let v: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(v["findings"].as_array().unwrap().len(), 12);
}

#[test]
fn a_shard_index_out_of_range_exits_2_with_one_line() {
    let t = tempdir();
    put(t.path(), "a.env", b"x=1\n");
    for args in [
        &["--shard", "3/3", "."][..],
        &["--shard", "0/0", "."],
        &["--shard", "two/3", "."],
        &["git", "--shard", "5/2", "."],
    ] {
        let r = scan(t.path(), args);
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.stderr);
        assert_eq!(r.stderr.lines().count(), 1, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains("--shard"), "{}", r.stderr);
    }
    let r = scan(t.path(), &["--shard", "3/3", "."]);
    assert!(r.stderr.contains("out of range"), "{}", r.stderr);
    // --shard with --state is refused (every shard would write the state).
    let r = scan(
        t.path(),
        &["git", "--shard", "0/2", "--state", "s.json", "."],
    );
    assert_eq!(r.code, Some(2), "{}", r.stderr);
}

#[test]
fn a_shard_run_again_writes_the_same_report() {
    let t = tempdir();
    let tree = t.path().join("tree");
    scan_plant::generate(&tree, 3, 60).unwrap();
    let out = t.path().join("out");
    std::fs::create_dir(&out).unwrap();
    // Every line but the summary record byte for byte; the record without
    // its timing fields.
    let strip = |p: &Path| -> (String, Value) {
        let text = std::fs::read_to_string(p).unwrap();
        let (body, last) = text
            .trim_end()
            .rsplit_once('\n')
            .unwrap_or(("", text.trim_end()));
        let mut v: Value = serde_json::from_str(last).unwrap();
        let s = v["summary"].as_object_mut().unwrap();
        s.remove("elapsed_seconds");
        s.remove("throughput_mb_per_second");
        (body.to_owned(), v)
    };
    let a = run_shards(&tree, &out, &[], &["."], 3);
    let first: Vec<(String, Value)> = a.files.iter().map(|f| strip(f)).collect();
    let b = run_shards(&tree, &out, &[], &["."], 3);
    let again: Vec<(String, Value)> = b.files.iter().map(|f| strip(f)).collect();
    assert_eq!(first, again);
    assert_eq!(a.owned, b.owned);
}
