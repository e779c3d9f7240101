//! Output details: SARIF rule names differ from ids, no made-up
//! informationUri, archive members named in their location; JSON and jsonl
//! carry a version and each finding's end line and column.
#![cfg(not(loom))]

use std::path::Path;

use scan::report::jsonl::REPORT_VERSION;
use scan::report::{finalize, write_report, Finding, Format, ObjPath, Summary, WriteOptions};
use serde_json::Value;

fn findings() -> Vec<Finding> {
    let file = ObjPath::from_path(Path::new("src/a.env"));
    let member = ObjPath::from_path(Path::new("pack.zip")).member(b"inner/b.env");
    let mut v = vec![
        Finding::new(
            "github-pat",
            "GitHub token",
            file,
            2,
            7,
            20,
            b"ghp_x".to_vec(),
        ),
        Finding::new(
            "private-key",
            "Private key",
            member,
            4,
            1,
            90,
            b"-----BEGIN\nAAAA\nEND".to_vec(),
        ),
    ];
    finalize(&mut v);
    v
}

fn report(format: Format) -> Vec<u8> {
    let mut out = Vec::new();
    write_report(
        &mut out,
        format,
        &findings(),
        &[],
        &Summary::default(),
        &WriteOptions::default(),
    )
    .unwrap();
    out
}

#[test]
fn sarif_rule_names_differ_from_ids_and_no_information_uri_is_made_up() {
    let v: Value = serde_json::from_slice(&report(Format::Sarif)).unwrap();
    let driver = &v["runs"][0]["tool"]["driver"];
    assert!(driver.get("informationUri").is_none(), "{driver}");
    for r in driver["rules"].as_array().unwrap() {
        assert_ne!(r["name"], r["id"], "{r}");
    }
    assert_eq!(driver["rules"][0]["name"], "GithubPat");
}

#[test]
fn sarif_names_the_archive_member_in_its_location_and_gives_end_positions() {
    let v: Value = serde_json::from_slice(&report(Format::Sarif)).unwrap();
    let results = v["runs"][0]["results"].as_array().unwrap();
    let member = results
        .iter()
        .find(|r| r["ruleId"] == "private-key")
        .unwrap();
    let loc = &member["locations"][0];
    assert_eq!(
        loc["physicalLocation"]["artifactLocation"]["uri"],
        "pack.zip"
    );
    assert_eq!(
        loc["logicalLocations"][0]["fullyQualifiedName"],
        "pack.zip!inner/b.env"
    );
    let file = results
        .iter()
        .find(|r| r["ruleId"] == "github-pat")
        .unwrap();
    let region = &file["locations"][0]["physicalLocation"]["region"];
    assert_eq!(
        (region["endLine"].as_u64(), region["endColumn"].as_u64()),
        (Some(2), Some(12))
    );
}

#[test]
fn json_and_jsonl_carry_a_version_and_end_line_and_column() {
    let doc: Value = serde_json::from_slice(&report(Format::Json)).unwrap();
    assert_eq!(doc["version"], REPORT_VERSION);
    let lines: Vec<Value> = String::from_utf8(report(Format::Jsonl))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for f in lines.iter().chain(doc["findings"].as_array().unwrap()) {
        assert_eq!(f["version"], REPORT_VERSION);
        let (l, c) = (
            f["end_line"].as_u64().unwrap(),
            f["end_column"].as_u64().unwrap(),
        );
        match f["rule"].as_str().unwrap() {
            "github-pat" => assert_eq!((l, c), (2, 12)),
            _ => assert_eq!((l, c), (6, 4), "three-line secret ends on line 6"),
        }
    }
}
