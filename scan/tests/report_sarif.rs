//! The SARIF writer against the required fields of the SARIF 2.1.0 schema and
//! the extra requirements of GitHub code scanning (checked here by hand: no
//! network, no schema download).
#![cfg(not(loom))]

use std::path::{Path, PathBuf};

use scan::report::sarif::{FINGERPRINT_KEY, SARIF_VERSION, SRCROOT, TOOL_NAME};
use scan::report::{finalize, write_report, Finding, Format, ObjPath, Summary, WriteOptions};
use serde_json::Value;

fn sarif(findings: &[Finding], base: Option<&Path>) -> Value {
    let opts = WriteOptions {
        base_dir: base.map(Path::to_path_buf),
        ..WriteOptions::default()
    };
    let mut out = Vec::new();
    write_report(
        &mut out,
        Format::Sarif,
        findings,
        &[],
        &Summary::default(),
        &opts,
    )
    .unwrap();
    // serde_json rejects lone surrogates: this also proves SARIF has none.
    serde_json::from_slice(&out).expect("SARIF output is standard JSON")
}

fn is_uri_reference(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'%' {
            if i + 2 >= b.len() {
                return false;
            }
            if !(b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit()) {
                return false;
            }
            i += 3;
            continue;
        }
        if !(c.is_ascii_alphanumeric() || b"-._~:/?#[]@!$&'()*+,;=".contains(&c)) {
            return false;
        }
        i += 1;
    }
    true
}

fn text_of(v: &Value) -> Option<&str> {
    v.get("text")
        .and_then(Value::as_str)
        .filter(|t| !t.trim().is_empty())
}

/// Every problem with `log` as a SARIF 2.1.0 log GitHub accepts. Covers the
/// schema's `required` lists, types, enums and minimums on the objects we
/// emit, and GitHub's rules (GH1001/GH1003/GH1005/GH2012 in sarif-sdk's
/// validator): one location per result with a uri, a region with startLine,
/// relative or file: URIs, and rules with short/full descriptions and help.
fn sarif_problems(log: &Value) -> Vec<String> {
    let mut p = Vec::new();
    let mut need = |ok: bool, what: &str| {
        if !ok {
            p.push(what.to_string());
        }
    };
    need(
        log.get("version") == Some(&Value::from(SARIF_VERSION)),
        "version must be \"2.1.0\"",
    );
    need(
        log.get("$schema")
            .is_none_or(|s| s.as_str().is_some_and(|s| s.starts_with("https://"))),
        "$schema must be a URI",
    );
    let Some(runs) = log.get("runs").and_then(Value::as_array) else {
        need(false, "runs must be an array");
        return p;
    };
    for run in runs {
        let driver = &run["tool"]["driver"];
        need(driver.is_object(), "run.tool.driver is required");
        need(
            driver["name"].as_str().is_some_and(|n| !n.is_empty()),
            "driver.name is required",
        );
        need(
            driver.get("version").is_none_or(Value::is_string),
            "driver.version must be a string",
        );
        need(
            driver
                .get("informationUri")
                .is_none_or(|u| u.as_str().is_some_and(|u| u.starts_with("https://"))),
            "driver.informationUri must be an absolute URI",
        );
        let rules = driver
            .get("rules")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut ids = std::collections::HashSet::new();
        for r in &rules {
            need(
                r["id"].as_str().is_some_and(|i| !i.is_empty()),
                "rule.id is required",
            );
            need(
                ids.insert(r["id"].as_str().unwrap_or("").to_string()),
                "rule ids must be unique",
            );
            need(
                text_of(&r["shortDescription"]).is_some(),
                "rule.shortDescription.text",
            );
            need(
                text_of(&r["fullDescription"]).is_some(),
                "rule.fullDescription.text",
            );
            need(text_of(&r["help"]).is_some(), "rule.help.text");
            let level = r["defaultConfiguration"]["level"].as_str();
            need(
                level.is_none_or(|l| ["none", "note", "warning", "error"].contains(&l)),
                "rule level enum",
            );
        }
        if let Some(bases) = run.get("originalUriBaseIds") {
            for (_, b) in bases.as_object().into_iter().flatten() {
                let uri = b["uri"].as_str().unwrap_or("");
                need(
                    uri.starts_with("file:///") && uri.ends_with('/'),
                    "originalUriBaseIds uri must be absolute and end in /",
                );
            }
        }
        let Some(results) = run.get("results").and_then(Value::as_array) else {
            need(false, "run.results must be an array");
            continue;
        };
        for res in results {
            need(
                text_of(&res["message"]).is_some(),
                "result.message.text is required",
            );
            let rule_id = res["ruleId"].as_str();
            need(rule_id.is_some(), "result.ruleId");
            if let Some(i) = res.get("ruleIndex") {
                let i = i.as_u64().map(|i| i as usize);
                need(
                    i.and_then(|i| rules.get(i)).map(|r| r["id"].as_str()) == Some(rule_id),
                    "ruleIndex must point at the rule with ruleId",
                );
            }
            need(
                res["level"]
                    .as_str()
                    .is_some_and(|l| ["none", "note", "warning", "error"].contains(&l)),
                "result.level enum",
            );
            let locs = res["locations"].as_array().cloned().unwrap_or_default();
            need(locs.len() == 1, "exactly one location");
            for loc in &locs {
                let art = &loc["physicalLocation"]["artifactLocation"];
                let uri = art["uri"].as_str().unwrap_or("");
                need(
                    !uri.is_empty() && is_uri_reference(uri),
                    "artifactLocation.uri must be a URI reference",
                );
                need(!uri.contains('\\'), "uri must use forward slashes");
                let relative = !uri.contains(':');
                need(
                    relative || uri.starts_with("file:///"),
                    "uri must be relative or file:",
                );
                need(
                    !relative || !uri.starts_with('/'),
                    "relative uri must not start with /",
                );
                need(
                    !relative || art["uriBaseId"].is_string(),
                    "relative uri needs uriBaseId",
                );
                let region = &loc["physicalLocation"]["region"];
                need(
                    region["startLine"].as_u64().is_some_and(|l| l >= 1),
                    "region.startLine >= 1",
                );
                need(
                    region
                        .get("startColumn")
                        .is_none_or(|c| c.as_u64().is_some_and(|c| c >= 1)),
                    "startColumn >= 1",
                );
                need(
                    region
                        .get("byteOffset")
                        .is_none_or(|c| c.as_u64().is_some()),
                    "byteOffset >= 0",
                );
            }
            let fps = res["partialFingerprints"].as_object();
            need(
                fps.is_some_and(|m| !m.is_empty() && m.values().all(Value::is_string)),
                "partialFingerprints of strings",
            );
        }
    }
    p
}

fn sample() -> Vec<Finding> {
    let mut v = vec![
        Finding::new(
            "aws-access-key-id",
            "AWS access key ID",
            ObjPath::from_path(Path::new("./repo/src/my file.env")),
            3,
            19,
            64,
            &b"AKIAIOSFODNN7EXAMPLE"[..],
        ),
        Finding::new(
            "generic-api-key",
            "Generic API key",
            ObjPath::from_path(Path::new("repo/a.zip")).member(b"dir/inner.txt"),
            7,
            2,
            120,
            &b"k-123456789"[..],
        ),
        Finding::new(
            "generic-api-key",
            "Generic API key",
            ObjPath::from_file_bytes(b"repo/caf\xe9.txt"),
            1,
            1,
            0,
            &b"x\xffy-secret"[..],
        ),
    ];
    finalize(&mut v);
    v
}

#[test]
fn sarif_log_has_every_required_field() {
    let log = sarif(&sample(), Some(Path::new("/work/checkout")));
    assert_eq!(sarif_problems(&log), Vec::<String>::new());
    let run = &log["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], TOOL_NAME);
    assert_eq!(run["results"].as_array().unwrap().len(), 3);
    assert_eq!(run["tool"]["driver"]["rules"].as_array().unwrap().len(), 2);
    assert_eq!(
        run["originalUriBaseIds"][SRCROOT]["uri"],
        "file:///work/checkout/"
    );
}

/// Damages one required part of a log.
type Breakage = fn(&mut Value);

#[test]
fn the_checker_catches_broken_logs() {
    let good = sarif(&sample(), None);
    let breakages: [(&str, Breakage); 6] = [
        ("version", |v| v["version"] = "2.0.0".into()),
        ("driver.name", |v| {
            v["runs"][0]["tool"]["driver"]
                .as_object_mut()
                .unwrap()
                .remove("name");
        }),
        ("message", |v| {
            v["runs"][0]["results"][0]["message"] = serde_json::json!({})
        }),
        ("startLine", |v| {
            v["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] =
                0.into()
        }),
        ("uri", |v| {
            v["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
                ["uri"] = "a b\\c".into()
        }),
        ("ruleIndex", |v| {
            v["runs"][0]["results"][0]["ruleIndex"] = 9.into()
        }),
    ];
    for (what, breaks) in breakages {
        let mut bad = good.clone();
        breaks(&mut bad);
        assert!(
            !sarif_problems(&bad).is_empty(),
            "checker missed a broken {what}"
        );
    }
}

#[test]
fn locations_are_relative_percent_encoded_uris() {
    let log = sarif(&sample(), None);
    let uris: Vec<&str> = log["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert!(uris.contains(&"repo/src/my%20file.env"), "{uris:?}");
    assert!(uris.contains(&"repo/caf%E9.txt"), "{uris:?}"); // the exact byte, not U+FFFD
    assert!(uris.contains(&"repo/a.zip"), "{uris:?}");
}

#[test]
fn absolute_paths_outside_the_base_use_file_uris() {
    let mut v = vec![Finding::new(
        "r",
        "d",
        ObjPath::from_path(Path::new("/elsewhere/k.env")),
        1,
        1,
        0,
        &b"secret-x"[..],
    )];
    finalize(&mut v);
    let base = PathBuf::from("/work/checkout");
    let log = sarif(&v, Some(&base));
    assert_eq!(sarif_problems(&log), Vec::<String>::new());
    let art = &log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"];
    assert_eq!(art["uri"], "file:///elsewhere/k.env");
    assert!(art.get("uriBaseId").is_none());
}

#[test]
fn archive_member_is_located_at_the_archive_and_named_in_the_message() {
    let v = sample();
    let log = sarif(&v, None);
    let res = log["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| {
            r["message"]["text"]
                .as_str()
                .unwrap()
                .contains("dir/inner.txt")
        })
        .expect("member result");
    let loc = &res["locations"][0]["physicalLocation"];
    assert_eq!(loc["artifactLocation"]["uri"], "repo/a.zip");
    assert_eq!(loc["region"]["startLine"], 1);
    let msg = res["message"]["text"].as_str().unwrap();
    assert!(msg.contains("line 7, column 2"), "{msg}");
}

#[test]
fn results_carry_region_and_our_fingerprint() {
    let v = sample();
    let log = sarif(&v, None);
    let f = v.iter().find(|f| f.rule == "aws-access-key-id").unwrap();
    let res = log["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["ruleId"] == "aws-access-key-id")
        .unwrap();
    let region = &res["locations"][0]["physicalLocation"]["region"];
    assert_eq!(region["startLine"], 3);
    assert_eq!(region["startColumn"], 19);
    assert_eq!(region["byteOffset"], 64);
    assert_eq!(region["byteLength"], 20);
    assert_eq!(
        res["partialFingerprints"][FINGERPRINT_KEY],
        f.fingerprint.as_str()
    );
}

#[test]
fn empty_scan_is_a_valid_log_with_no_results() {
    let log = sarif(&[], None);
    assert_eq!(sarif_problems(&log), Vec::<String>::new());
    assert_eq!(log["runs"][0]["results"].as_array().unwrap().len(), 0);
}
