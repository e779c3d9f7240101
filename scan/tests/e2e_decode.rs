//! Secrets hidden in encoded text: base64, percent and hex spans are decoded
//! and scanned again (`scan/src/decode/`), and a finding there is reported at
//! the encoded span with its decodings named.
#![cfg(not(loom))]

mod e2e_common;

use e2e_common::*;
use serde_json::Value;

/// Standard base64 with padding (the tests' own encoder, so that what the
/// scanner decodes is not produced by the scanner's code).
fn b64(data: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for group in data.chunks(3) {
        let n = group.len();
        let v = u32::from(group[0]) << 16
            | u32::from(*group.get(1).unwrap_or(&0)) << 8
            | u32::from(*group.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= n {
                s.push(A[(v >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

/// Percent-encodes every byte that is not alphanumeric.
fn pct(data: &[u8]) -> String {
    data.iter()
        .map(|&b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn by_path<'a>(findings: &'a [Value], path: &str) -> Vec<&'a Value> {
    findings.iter().filter(|f| f["path"] == path).collect()
}

fn decoded(f: &Value) -> Vec<&str> {
    f["decoded"]
        .as_array()
        .map(|a| a.iter().map(|e| e.as_str().unwrap()).collect())
        .unwrap_or_default()
}

#[test]
fn a_token_in_a_base64_value_is_reported_at_the_encoded_span() {
    let dir = tempdir();
    let token = github_token(1);
    let encoded = b64(format!("GITHUB_TOKEN={token}").as_bytes());
    put(
        dir.path(),
        "k8s/secret.yaml",
        format!("kind: Secret\ndata:\n  token: {encoded}\n").as_bytes(),
    );
    let run = scan_in(dir.path(), ["--format", "json", "."]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let findings = run.findings();
    let hit: Vec<_> = by_path(&findings, "k8s/secret.yaml")
        .into_iter()
        .filter(|f| f["secret"] == token.as_str())
        .collect();
    assert_eq!(hit.len(), 1, "{findings:#?}");
    let f = hit[0];
    assert_eq!(decoded(f), ["base64"]);
    assert_eq!(f["rule"], "github-pat");
    // Line 3, after "  token: ": the encoded span, not the decoded secret.
    assert_eq!(
        (f["line"].as_u64(), f["column"].as_u64()),
        (Some(3), Some(10))
    );
    assert_eq!(f["end_line"], 3);
    assert_eq!(f["end_column"].as_u64(), Some(10 + encoded.len() as u64));
    let offset = "kind: Secret\ndata:\n  token: ".len() as u64;
    assert_eq!(f["offset"].as_u64(), Some(offset));
}

#[test]
fn hex_and_percent_spans_are_decoded_and_one_level_nests_in_another() {
    let dir = tempdir();
    let t = [github_token(2), github_token(3), github_token(4)];
    put(
        dir.path(),
        "hex.txt",
        format!("blob = {}\n", hex(t[0].as_bytes())).as_bytes(),
    );
    // A space before the token keeps the plain scan from seeing it whole.
    put(
        dir.path(),
        "url.txt",
        format!(
            "u = https://h.example/?q={}\n",
            pct(format!("x {}", t[1]).as_bytes())
        )
        .as_bytes(),
    );
    let inner = pct(format!("x {}", t[2]).as_bytes());
    put(
        dir.path(),
        "nested.txt",
        format!("v = {}\n", b64(inner.as_bytes())).as_bytes(),
    );
    let run = scan_in(dir.path(), ["--format", "json", "."]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let findings = run.findings();
    let only = |path: &str| {
        let got = by_path(&findings, path);
        assert_eq!(got.len(), 1, "{path}: {findings:#?}");
        got[0].clone()
    };
    let f = only("hex.txt");
    assert_eq!(
        (f["secret"].as_str(), decoded(&f)),
        (Some(t[0].as_str()), vec!["hex"])
    );
    let f = only("url.txt");
    assert_eq!(
        (f["secret"].as_str(), decoded(&f)),
        (Some(t[1].as_str()), vec!["percent"])
    );
    let f = only("nested.txt");
    assert_eq!(
        (f["secret"].as_str(), decoded(&f)),
        (Some(t[2].as_str()), vec!["base64", "percent"])
    );

    // One level finds the first two and not the nested one; 0 finds none.
    let run = scan_in(
        dir.path(),
        ["--format", "json", "--max-decode-depth", "1", "."],
    );
    let findings = run.findings();
    assert_eq!(by_path(&findings, "hex.txt").len(), 1);
    assert_eq!(by_path(&findings, "url.txt").len(), 1);
    assert!(by_path(&findings, "nested.txt").is_empty(), "{findings:#?}");
    let run = scan_in(
        dir.path(),
        ["--format", "json", "--max-decode-depth", "0", "."],
    );
    assert_eq!(run.code, Some(0), "{:#?}", run.findings());
}

#[test]
fn an_allow_marker_on_the_encoded_spans_line_suppresses_the_decoded_finding() {
    let dir = tempdir();
    let a = b64(format!("token={}", github_token(5)).as_bytes());
    let b = b64(format!("token={}", github_token(6)).as_bytes());
    put(
        dir.path(),
        "values.yaml",
        format!("a: {a}  # gitleaks:allow\nb: {b}\n").as_bytes(),
    );
    let run = scan_in(dir.path(), ["--format", "json", "."]);
    let findings = run.findings();
    let decoded_secrets: Vec<_> = findings
        .iter()
        .filter(|f| !decoded(f).is_empty())
        .map(|f| f["secret"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(decoded_secrets, vec![github_token(6)]);
}

#[test]
fn a_span_across_a_chunk_boundary_is_reported_once_whatever_the_chunk_size() {
    let dir = tempdir();
    let token = github_token(7);
    let encoded = b64(format!("password={token}").as_bytes());
    let mut text = String::new();
    for i in 0..40 {
        text.push_str(&format!("line {i} of filler text\n"));
    }
    text.push_str(&format!("secret: {encoded}\n"));
    for i in 0..40 {
        text.push_str(&format!("more {i}\n"));
    }
    put(dir.path(), "big.txt", text.as_bytes());
    for chunk in ["64", "100", "257", "4096"] {
        let run = scan_in(dir.path(), ["--format", "json", "--chunk-size", chunk, "."]);
        let hits: Vec<_> = run
            .findings()
            .into_iter()
            .filter(|f| f["secret"] == token.as_str())
            .collect();
        assert_eq!(hits.len(), 1, "chunk size {chunk}: {hits:#?}");
        assert_eq!(hits[0]["line"], 41);
    }
}

#[test]
fn sarif_names_the_decoding_and_covers_the_encoded_bytes() {
    let dir = tempdir();
    let encoded = b64(format!("api_token={}", github_token(8)).as_bytes());
    put(dir.path(), "a.env", format!("X={encoded}\n").as_bytes());
    let run = scan_in(dir.path(), ["--format", "sarif", "."]);
    let sarif: Value = serde_json::from_slice(&run.stdout).unwrap();
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    let r = results
        .iter()
        .find(|r| r["properties"]["decoded"] == "base64")
        .unwrap_or_else(|| panic!("{results:#?}"));
    let region = &r["locations"][0]["physicalLocation"]["region"];
    assert_eq!(region["byteLength"].as_u64(), Some(encoded.len() as u64));
    assert_eq!(region["startColumn"], 3);
    assert!(r["message"]["text"]
        .as_str()
        .unwrap()
        .contains("(decoded: base64)"));
}

#[test]
fn random_base64_and_hex_in_source_add_no_findings() {
    // Digests, UUID-less identifiers and binary base64 decode to bytes
    // that are not text: nothing to rescan, nothing reported.
    let dir = tempdir();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut text = String::new();
    for _ in 0..200 {
        let bytes: Vec<u8> = (0..24)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        text.push_str(&format!(
            "sum = \"{}\"\nblob = \"{}\"\n",
            hex(&bytes),
            b64(&bytes)
        ));
    }
    text.push_str("ThisIsAVeryLongIdentifierNameIndeed scan/src/rules/prefilter.rs\n");
    put(dir.path(), "src/data.py", text.as_bytes());
    let run = scan_in(dir.path(), ["--format", "json", "."]);
    let decoded_findings: Vec<_> = run
        .findings()
        .into_iter()
        .filter(|f| !decoded(f).is_empty())
        .collect();
    assert!(decoded_findings.is_empty(), "{decoded_findings:#?}");
}
