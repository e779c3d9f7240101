//! `--baseline`: an earlier json or jsonl report suppresses exactly its own
//! findings; anything else is a clear error.
#![cfg(not(loom))]

use std::path::Path;

use scan::report::{
    finalize, write_report, Baseline, Finding, Format, ObjPath, Reporter, ScanError, Summary,
    WriteOptions,
};

fn scan_result(extra: bool) -> Vec<Finding> {
    let env = ObjPath::from_path(Path::new("repo/.env"));
    let odd = ObjPath::from_file_bytes(b"repo/\xff.bin").member(b"m\xfe.txt");
    let mut v = vec![
        Finding::new("r1", "one", env.clone(), 2, 1, 10, &b"tok-aaaa"[..]),
        Finding::new("r1", "one", env.clone(), 9, 1, 90, &b"tok-aaaa"[..]),
        Finding::new("r2", "two", odd, 1, 1, 0, &b"\xc3\x28-secret"[..]),
    ];
    if extra {
        // A new copy of a known secret, and a new secret.
        v.push(Finding::new(
            "r1",
            "one",
            env.clone(),
            20,
            1,
            300,
            &b"tok-aaaa"[..],
        ));
        v.push(Finding::new(
            "r3",
            "three",
            env,
            4,
            1,
            40,
            &b"brand-new"[..],
        ));
    }
    v
}

fn report(format: Format, mut v: Vec<Finding>, redact: bool) -> Vec<u8> {
    finalize(&mut v);
    let opts = WriteOptions {
        redact,
        ..WriteOptions::default()
    };
    let mut out = Vec::new();
    write_report(&mut out, format, &v, &[], &Summary::default(), &opts).unwrap();
    out
}

fn run_with(baseline: Baseline, findings: Vec<Finding>) -> (u64, u64) {
    let r = Reporter::with_writer(
        Format::Jsonl,
        WriteOptions::default(),
        Some(baseline),
        Box::new(std::io::sink()),
    );
    let o = r
        .finish(findings, &[], Summary::default(), &mut std::io::sink())
        .unwrap();
    (o.reported, o.summary.baseline_suppressed)
}

#[test]
fn json_and_jsonl_reports_suppress_their_own_findings() {
    for format in [Format::Json, Format::Jsonl] {
        for redact in [false, true] {
            let b = Baseline::parse(&report(format, scan_result(false), redact)).unwrap();
            assert_eq!(b.len(), 3, "{format:?} redact={redact}");
            assert_eq!(run_with(b, scan_result(false)), (0, 3));
        }
    }
}

#[test]
fn only_new_findings_are_reported_after_a_baseline() {
    let b = Baseline::parse(&report(Format::Jsonl, scan_result(false), false)).unwrap();
    let mut all = scan_result(true);
    finalize(&mut all);
    let mut kept = all.clone();
    assert_eq!(b.filter(&mut kept), 3);
    let kept: Vec<(&str, u64)> = kept.iter().map(|f| (f.rule.as_str(), f.offset)).collect();
    // The third copy of tok-aaaa (occurrence 2) and the new secret.
    assert_eq!(kept, vec![("r3", 40), ("r1", 300)]);
}

#[test]
fn empty_jsonl_is_an_empty_baseline() {
    let b = Baseline::parse(b"").unwrap();
    assert!(b.is_empty());
    assert_eq!(run_with(b, scan_result(false)), (3, 0));
}

#[test]
fn baseline_file_is_loaded_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("base.json");
    std::fs::write(&path, report(Format::Json, scan_result(false), false)).unwrap();
    assert_eq!(Baseline::load(&path).unwrap().len(), 3);
}

#[test]
fn missing_or_corrupt_baselines_are_errors_that_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, Option<&[u8]>)> = vec![
        ("missing.json", None),
        (
            "truncated.json",
            Some(b"{\"findings\":[{\"fingerprint\":\"ab"),
        ),
        ("garbage.json", Some(b"not json at all")),
        ("wrong-shape.json", Some(b"{\"results\": []}")),
        ("number-fp.jsonl", Some(b"{\"fingerprint\": 12}\n")),
        ("no-fp.json", Some(b"{\"findings\":[{\"rule\":\"x\"}]}")),
        ("array.json", Some(b"[1,2,3]")),
    ];
    for (name, content) in cases {
        let path = dir.path().join(name);
        if let Some(c) = content {
            std::fs::write(&path, c).unwrap();
        }
        let err = ScanError::from(Baseline::load(&path).expect_err(name));
        let msg = err.to_string();
        assert!(msg.contains(name), "{msg}");
        assert!(msg.contains("--format json or jsonl"), "{msg}");
        assert_eq!(scan::report::exit_code(&Err(err)), 2);
    }
}

#[test]
fn a_sarif_log_is_refused_with_a_reason() {
    let sarif = report(Format::Sarif, scan_result(false), false);
    let e = Baseline::parse(&sarif).unwrap_err();
    assert!(e.contains("SARIF"), "{e}");
}

#[test]
fn a_directory_is_not_a_baseline() {
    let dir = tempfile::tempdir().unwrap();
    assert!(Baseline::load(dir.path()).is_err());
}
