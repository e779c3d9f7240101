//! `finalize`: deterministic order, dedup, and fingerprints that are stable,
//! position-independent and unique per occurrence.
#![cfg(not(loom))]

use std::collections::HashSet;
use std::path::Path;

use proptest::prelude::*;
use scan::report::{finalize, fingerprint, Finding, ObjPath};

fn at(path: &ObjPath, offset: u64, rule: &str, secret: &[u8]) -> Finding {
    Finding::new(
        rule,
        format!("{rule} description"),
        path.clone(),
        offset / 10 + 1,
        offset % 10 + 1,
        offset,
        secret,
    )
}

/// FNV-1a 64 written out again, independently of the library, following the
/// recipe documented in OUTPUT.md.
fn reference_fingerprint(rule: &str, segments: &[&[u8]], secret: &[u8], occ: u64) -> String {
    let mut stream = Vec::new();
    let mut field = |b: &[u8]| {
        stream.extend_from_slice(&(b.len() as u64).to_le_bytes());
        stream.extend_from_slice(b);
    };
    field(b"magpie-fingerprint-v1");
    field(rule.as_bytes());
    stream.extend_from_slice(&(segments.len() as u64).to_le_bytes());
    for s in segments {
        stream.extend_from_slice(&(s.len() as u64).to_le_bytes());
        stream.extend_from_slice(s);
    }
    stream.extend_from_slice(&(secret.len() as u64).to_le_bytes());
    stream.extend_from_slice(secret);
    stream.extend_from_slice(&occ.to_le_bytes());
    let mut h: u64 = 14695981039346656037;
    for b in stream {
        h = (h ^ u64::from(b)).wrapping_mul(1099511628211);
    }
    format!("{h:016x}")
}

#[test]
fn fingerprint_follows_the_documented_recipe() {
    let p = ObjPath::from_path(Path::new("repo/a.zip")).member(b"conf/.env");
    for occ in [0, 1, 7] {
        assert_eq!(
            fingerprint("aws-access-key-id", &p, b"AKIAIOSFODNN7EXAMPLE", occ),
            reference_fingerprint(
                "aws-access-key-id",
                &[b"repo/a.zip", b"conf/.env"],
                b"AKIAIOSFODNN7EXAMPLE",
                occ
            )
        );
    }
}

#[test]
fn output_is_sorted_by_path_then_offset_then_rule() {
    let a = ObjPath::from_path(Path::new("a"));
    let b = ObjPath::from_path(Path::new("b"));
    let mut v = vec![
        at(&b, 5, "r1", b"s"),
        at(&a, 9, "r1", b"s"),
        at(&a, 2, "r2", b"t"),
        at(&a, 2, "r1", b"u"),
        at(&a.member(b"m"), 0, "r1", b"s"),
    ];
    finalize(&mut v);
    let keys: Vec<(String, u64, &str)> = v
        .iter()
        .map(|f| (f.path.to_string(), f.offset, f.rule.as_str()))
        .collect();
    assert_eq!(
        keys,
        vec![
            ("a".into(), 2, "r1"),
            ("a".into(), 2, "r2"),
            ("a".into(), 9, "r1"),
            ("a!m".into(), 0, "r1"),
            ("b".into(), 5, "r1"),
        ]
    );
}

#[test]
fn exact_duplicates_are_reported_once() {
    let p = ObjPath::from_path(Path::new("x.env"));
    let mut v = vec![
        at(&p, 40, "r", b"secret"),
        at(&p, 40, "r", b"secret"),
        at(&p, 40, "other-rule", b"secret"),
    ];
    finalize(&mut v);
    assert_eq!(v.len(), 2);
}

#[test]
fn repeated_secret_in_one_file_gets_one_fingerprint_per_occurrence() {
    let p = ObjPath::from_path(Path::new("x.env"));
    let mut v: Vec<Finding> = (0..50).map(|i| at(&p, i * 100, "r", b"same")).collect();
    finalize(&mut v);
    let prints: HashSet<&str> = v.iter().map(|f| f.fingerprint.as_str()).collect();
    assert_eq!(prints.len(), 50);
    // Occurrence k is the k-th in offset order.
    for (k, f) in v.iter().enumerate() {
        assert_eq!(f.fingerprint, fingerprint("r", &p, b"same", k as u64));
    }
}

#[test]
fn fingerprint_survives_an_edit_that_moves_the_secret() {
    let p = ObjPath::from_path(Path::new("x.env"));
    let mut before = vec![at(&p, 100, "r", b"tok"), at(&p, 500, "r2", b"key")];
    // Lines inserted above: every offset and line moves.
    let mut after = vec![at(&p, 1100, "r", b"tok"), at(&p, 1900, "r2", b"key")];
    after[0].line += 40;
    finalize(&mut before);
    finalize(&mut after);
    assert_eq!(before[0].fingerprint, after[0].fingerprint);
    assert_eq!(before[1].fingerprint, after[1].fingerprint);
}

fn arb_finding() -> impl Strategy<Value = Finding> {
    (
        prop::sample::select(vec!["a", "b", "c.zip"]),
        prop::option::of(prop::sample::select(vec!["m1", "m2"])),
        0u64..20,
        prop::sample::select(vec!["r1", "r2"]),
        prop::sample::select(vec![&b"s1"[..], b"s2"]),
    )
        .prop_map(|(file, member, offset, rule, secret)| {
            let mut p = ObjPath::from_path(Path::new(file));
            if let Some(m) = member {
                p = p.member(m.as_bytes());
            }
            at(&p, offset, rule, secret)
        })
}

proptest! {
    #[test]
    fn finalize_result_does_not_depend_on_input_order(
        v in prop::collection::vec(arb_finding(), 0..40),
        seed in any::<u64>(),
    ) {
        let mut a = v.clone();
        // A deterministic shuffle of the same multiset.
        let mut b = v;
        let mut s = seed | 1;
        for i in (1..b.len()).rev() {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            b.swap(i, (s % (i as u64 + 1)) as usize);
        }
        finalize(&mut a);
        finalize(&mut b);
        prop_assert_eq!(&a, &b);
        // And the fingerprints of one run are all distinct.
        let prints: HashSet<&str> = a.iter().map(|f| f.fingerprint.as_str()).collect();
        prop_assert_eq!(prints.len(), a.len());
    }
}
