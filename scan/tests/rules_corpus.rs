//! The planted-secret corpus is reproducible, and the rule engine (with the
//! chunk plan the pipeline uses) finds exactly its planted secrets: 100%
//! recall, no decoy, nothing else.
#![cfg(not(loom))]

use std::collections::BTreeSet;
use std::io::Read;

use scan::chunk::{plan_in_memory, Locator, CHUNK_SIZE};
use scan::rules::{RuleSet, Scratch};
use scan_plant::build;

/// (path, line, rule, secret)
type Key = (String, u64, String, String);

fn scan_file(rs: &RuleSet, path: &str, data: &[u8], out: &mut Vec<Key>) {
    let mut scratch = Scratch::new();
    scratch.set_path(Some(path));
    let mut ms = Vec::new();
    for (buf, meta) in plan_in_memory(data, CHUNK_SIZE, rs.context_len()) {
        ms.clear();
        rs.scan(&buf, meta.owned.clone(), &mut scratch, &mut ms);
        let mut loc = Locator::new(&meta);
        for m in &ms {
            let line = loc.locate(&buf, m.secret_start).line;
            let secret = String::from_utf8_lossy(&buf[m.secret_start..m.secret_end]).into_owned();
            out.push((path.to_string(), line, rs.rule(m.rule).id.clone(), secret));
        }
    }
}

fn scan_entry(rs: &RuleSet, path: &str, data: &[u8], out: &mut Vec<Key>) {
    if path.ends_with(".zip") {
        let mut z = zip::ZipArchive::new(std::io::Cursor::new(data)).unwrap();
        for i in 0..z.len() {
            let mut f = z.by_index(i).unwrap();
            let name = f.name().unwrap().to_string();
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes).unwrap();
            scan_entry(rs, &format!("{path}!{name}"), &bytes, out);
        }
    } else if path.ends_with(".tar.gz") {
        let mut t = tar::Archive::new(flate2::read::GzDecoder::new(data));
        for e in t.entries().unwrap() {
            let mut e = e.unwrap();
            let name = e.path().unwrap().to_string_lossy().into_owned();
            let mut bytes = Vec::new();
            e.read_to_end(&mut bytes).unwrap();
            scan_entry(rs, &format!("{path}!{name}"), &bytes, out);
        }
    } else {
        scan_file(rs, path, data, out);
    }
}

#[test]
fn the_same_seed_builds_byte_identical_corpora() {
    let (a, ta) = build(11, 40).unwrap();
    let (b, tb) = build(11, 40).unwrap();
    let (c, _) = build(12, 40).unwrap();
    assert_eq!(a, b);
    assert_eq!(ta, tb);
    assert_ne!(a, c);
}

#[test]
fn every_planted_secret_is_found_and_no_decoy_or_other_text_is() {
    let rs = RuleSet::builtin();
    let (tree, truth) = build(7, scan_plant::DEFAULT_FILES).unwrap();
    // Every rule is planted, in every family, and some in each placement.
    let rules: BTreeSet<&str> = truth.secrets.iter().map(|s| s.rule.as_str()).collect();
    assert_eq!(rules.len(), rs.len());
    for placement in ["line", "chunk-boundary", "long-line", "archive", "binary"] {
        assert!(
            truth.secrets.iter().any(|s| s.placement == placement),
            "no {placement} secret"
        );
    }
    assert!(truth
        .secrets
        .iter()
        .any(|s| s.path.contains(".tar.gz!pkg/nested.zip!")));
    assert!(truth.decoys.len() > 50);
    let mut found = Vec::new();
    for (path, data) in &tree {
        scan_entry(&rs, path, data, &mut found);
    }
    let found: BTreeSet<Key> = found.into_iter().collect();
    let want: BTreeSet<Key> = truth
        .secrets
        .iter()
        .map(|s| (s.path.clone(), s.line, s.rule.clone(), s.secret.clone()))
        .collect();
    let missed: Vec<_> = want.difference(&found).collect();
    let extra: Vec<_> = found.difference(&want).collect();
    assert!(
        missed.is_empty() && extra.is_empty(),
        "missed {missed:#?}\nextra {extra:#?}"
    );
    let decoy_lines: BTreeSet<(&str, u64)> = truth
        .decoys
        .iter()
        .map(|d| (d.path.as_str(), d.line))
        .collect();
    assert!(found
        .iter()
        .all(|(p, l, _, _)| !decoy_lines.contains(&(p.as_str(), *l))));
}
