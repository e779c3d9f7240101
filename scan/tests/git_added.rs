//! `scan git` reads a blob that replaces its first parent's blob at the
//! same path only by what it adds (scan/src/git/added.rs): a secret is
//! reported at the commit that added it, with the line and column a
//! whole-blob scan gives it; `--whole-blobs` reports it again for every new
//! blob that still holds it. Each test runs both modes.

#[path = "e2e_common/mod.rs"]
mod common;

#[path = "git_common/mod.rs"]
mod gitc;

use std::collections::BTreeSet;
use std::path::Path;

use common::{github_token, tempdir};
use gitc::{commit_file, git_present, init, scan_git};

/// (commit, secret, line, column) of every finding.
type Seen = BTreeSet<(String, String, u64, u64)>;

fn findings(dir: &Path, whole: bool) -> Seen {
    let mut args = vec!["-f", "json"];
    if whole {
        args.push("--whole-blobs");
    }
    args.push(".");
    let run = scan_git(dir, &args);
    assert!(
        matches!(run.code, Some(0 | 1)),
        "exit {:?}: {}",
        run.code,
        run.stderr
    );
    if run.code == Some(0) {
        return Seen::new();
    }
    run.findings()
        .iter()
        .map(|f| {
            (
                f["commit"].as_str().unwrap().to_owned(),
                f["secret"].as_str().unwrap().to_owned(),
                f["line"].as_u64().unwrap(),
                f["column"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn seen(rows: &[(&String, &String, u64, u64)]) -> Seen {
    rows.iter()
        .map(|&(c, s, l, k)| (c.clone(), s.clone(), l, k))
        .collect()
}

/// `n` harmless lines, numbered from `from`.
fn filler(from: usize, n: usize) -> String {
    (from..from + n)
        .map(|i| format!("setting_{i} = \"value number {i}\"\n"))
        .collect()
}

/// An RSA private key in PEM, its body `lines` lines of 64 pseudo-random
/// base64 characters (seeded, so the same on every run).
fn pem_body(seed: u64, lines: usize) -> Vec<String> {
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..lines)
        .map(|_| {
            (0..64)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    B64[(x % 64) as usize] as char
                })
                .collect()
        })
        .collect()
}

/// Standard base64 with padding.
fn b64(s: &str) -> String {
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in s.as_bytes().chunks(3) {
        let n = c
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (u32::from(b) << (16 - 8 * i)));
        for k in 0..4 {
            if k <= c.len() {
                out.push(B64[((n >> (18 - 6 * k)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn pem(body: &[String]) -> String {
    format!(
        "-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----",
        body.join("\n")
    )
}

#[test]
fn a_secret_added_next_to_an_unchanged_secret_is_the_only_new_finding() {
    if !git_present() {
        return;
    }
    let t = tempdir();
    let d = t.path();
    init(d);
    let (a, b) = (github_token(1), github_token(2));
    let c1 = commit_file(d, "app.env", &format!("A_TOKEN={a}\n"), "add a");
    let c2 = commit_file(
        d,
        "app.env",
        &format!("A_TOKEN={a}\nB_TOKEN={b}\n"),
        "add b",
    );
    let added = findings(d, false);
    assert_eq!(added, seen(&[(&c1, &a, 1, 9), (&c2, &b, 2, 9)]));
    let whole = findings(d, true);
    assert_eq!(
        whole,
        seen(&[(&c1, &a, 1, 9), (&c2, &a, 1, 9), (&c2, &b, 2, 9)])
    );
}

#[test]
fn a_secret_far_into_a_long_file_keeps_its_exact_line_and_column() {
    if !git_present() {
        return;
    }
    // Far more than the rules' context (tens of KiB) before and after the
    // change, so the scan skips bytes on both sides and still counts
    // their lines.
    let t = tempdir();
    let d = t.path();
    init(d);
    let (a, b) = (github_token(3), github_token(4));
    let head = format!("{}token = \"{a}\"\n{}", filler(0, 10), filler(10, 2000));
    let tail = filler(3000, 1000);
    let c1 = commit_file(d, "big.py", &format!("{head}{tail}"), "big file");
    let c2 = commit_file(
        d,
        "big.py",
        &format!("{head}    gh = \"{b}\"\n{tail}"),
        "one line in the middle",
    );
    let added = findings(d, false);
    assert_eq!(added, seen(&[(&c1, &a, 11, 10), (&c2, &b, 2012, 11)]));
    let whole = findings(d, true);
    assert_eq!(
        whole,
        seen(&[(&c1, &a, 11, 10), (&c2, &a, 11, 10), (&c2, &b, 2012, 11)])
    );
}

#[test]
fn a_secret_split_across_an_edit_boundary_is_found_at_the_commit_that_completes_it() {
    if !git_present() {
        return;
    }
    // The key's first half (no END line: no match) is committed first; the
    // next commit adds the rest. The match starts in bytes the second
    // commit did not change: the window reaches back for it.
    let t = tempdir();
    let d = t.path();
    init(d);
    let body = pem_body(7, 26);
    let key = pem(&body);
    let (first, rest) = key.split_at(key.find(&body[13]).unwrap());
    let pre = filler(0, 5);
    commit_file(d, "id_rsa", &format!("{pre}{first}"), "half a key");
    let c2 = commit_file(d, "id_rsa", &format!("{pre}{key}\n"), "the rest");
    assert!(!rest.is_empty());
    for whole in [false, true] {
        assert_eq!(
            findings(d, whole),
            seen(&[(&c2, &key, 6, 1)]),
            "whole blobs: {whole}"
        );
    }
}

#[test]
fn a_secret_removed_and_re_added_is_reported_where_it_comes_back() {
    if !git_present() {
        return;
    }
    let t = tempdir();
    let d = t.path();
    init(d);
    let a = github_token(5);
    let c1 = commit_file(d, "x.env", &format!("one\nT={a}\ntwo\n"), "add");
    commit_file(d, "x.env", "one\ntwo\n", "remove");
    let c3 = commit_file(d, "x.env", &format!("one\nT={a}\ntwo\nthree\n"), "again");
    for whole in [false, true] {
        assert_eq!(
            findings(d, whole),
            seen(&[(&c1, &a, 2, 3), (&c3, &a, 2, 3)]),
            "whole blobs: {whole}"
        );
    }
}

#[test]
fn a_private_key_whose_middle_lines_change_is_reported_with_its_new_text() {
    if !git_present() {
        return;
    }
    // A token far above the key stays unchanged: the default reports it
    // once, `--whole-blobs` again for the second blob.
    let t = tempdir();
    let d = t.path();
    init(d);
    let token = github_token(6);
    let top = format!("T={token}\n{}", filler(0, 1000));
    let mut body = pem_body(11, 26);
    let k1 = pem(&body);
    let c1 = commit_file(d, "keys.txt", &format!("{top}{k1}\nend\n"), "key");
    for (i, line) in pem_body(12, 3).into_iter().enumerate() {
        body[10 + i] = line;
    }
    let k2 = pem(&body);
    let c2 = commit_file(d, "keys.txt", &format!("{top}{k2}\nend\n"), "rotate");
    let added = findings(d, false);
    assert_eq!(
        added,
        seen(&[
            (&c1, &token, 1, 3),
            (&c1, &k1, 1002, 1),
            (&c2, &k2, 1002, 1)
        ])
    );
    let whole = findings(d, true);
    assert_eq!(
        whole,
        seen(&[
            (&c1, &token, 1, 3),
            (&c1, &k1, 1002, 1),
            (&c2, &token, 1, 3),
            (&c2, &k2, 1002, 1)
        ])
    );
}

#[test]
fn an_encoded_secret_added_beside_an_unchanged_one_is_decoded_and_reported_alone() {
    if !git_present() {
        return;
    }
    let t = tempdir();
    let d = t.path();
    init(d);
    let (a, b) = (github_token(8), github_token(9));
    let one = format!("data:\n  a: {}\n", b64(&format!("token={a}")));
    let c1 = commit_file(d, "secret.yaml", &one, "a");
    let two = format!("{one}  b: {}\n", b64(&format!("token={b}")));
    let c2 = commit_file(d, "secret.yaml", &two, "b");
    assert_eq!(
        findings(d, false),
        seen(&[(&c1, &a, 2, 6), (&c2, &b, 3, 6)])
    );
    assert_eq!(
        findings(d, true),
        seen(&[(&c1, &a, 2, 6), (&c2, &a, 2, 6), (&c2, &b, 3, 6)])
    );
}

#[test]
fn a_blob_whose_base_was_too_large_to_scan_is_scanned_whole() {
    if !git_present() {
        return;
    }
    // The base was skipped (`too_large`), so its lines were never scanned:
    // the new blob is read whole, and the unchanged token is found.
    let t = tempdir();
    let d = t.path();
    init(d);
    let a = github_token(10);
    let big = format!("T={a}\n{}", filler(0, 100));
    commit_file(d, "conf.txt", &big, "big");
    let c2 = commit_file(d, "conf.txt", &format!("T={a}\nsmall\n"), "small");
    let run = scan_git(d, &["-f", "json", "--max-file-size", "1K", "."]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let got: Vec<_> = run
        .findings()
        .iter()
        .map(|f| (f["commit"].as_str().unwrap().to_owned(), f["line"].clone()))
        .collect();
    assert_eq!(got, vec![(c2, serde_json::json!(1))]);
}

#[test]
fn a_key_whose_lines_change_far_below_its_begin_line_is_reported_with_its_new_text() {
    if !git_present() {
        return;
    }
    // 100 body lines: the changed lines are about 5 KB below BEGIN,
    // beyond the short rules' context (scan/tests/git_context.rs), so the
    // window is widened because BEGIN is within the long rules' reach.
    let t = tempdir();
    let d = t.path();
    init(d);
    let mut body = pem_body(21, 100);
    let k1 = pem(&body);
    let c1 = commit_file(d, "id_rsa", &format!("{}{k1}\n", filler(0, 3)), "key");
    for (i, line) in pem_body(22, 2).into_iter().enumerate() {
        body[85 + i] = line;
    }
    let k2 = pem(&body);
    let c2 = commit_file(d, "id_rsa", &format!("{}{k2}\n", filler(0, 3)), "edit");
    for whole in [false, true] {
        assert_eq!(
            findings(d, whole),
            seen(&[(&c1, &k1, 4, 1), (&c2, &k2, 4, 1)]),
            "whole blobs: {whole}"
        );
    }
}

#[test]
fn a_begin_line_added_above_an_existing_body_reports_the_key() {
    if !git_present() {
        return;
    }
    // The body and END line were committed first (no BEGIN: no match); the
    // second commit adds only the BEGIN line, about 6.5 KB above END.
    let t = tempdir();
    let d = t.path();
    init(d);
    let body = pem_body(23, 100);
    let k = pem(&body);
    let begin_len = k.find('\n').unwrap() + 1;
    let pre = filler(0, 3);
    commit_file(d, "id_rsa", &format!("{pre}{}\n", &k[begin_len..]), "body");
    let c2 = commit_file(d, "id_rsa", &format!("{pre}{k}\n"), "begin");
    for whole in [false, true] {
        assert_eq!(
            findings(d, whole),
            seen(&[(&c2, &k, 4, 1)]),
            "whole blobs: {whole}"
        );
    }
}
