//! gitleaks configs from the command line: `-c/--config`, `.gitleaks.toml` at
//! the scan root, `[extend]` semantics, path-only rules and `scan rules`.
#![cfg(not(loom))]

mod e2e_common;

use e2e_common::{bin, github_token, put, run_guarded, scan_in, tempdir};

/// `scan rules ARGS` in `cwd`.
fn rules_in(cwd: &std::path::Path, args: &[&str]) -> e2e_common::Run {
    let mut cmd = std::process::Command::new(bin());
    cmd.current_dir(cwd)
        .arg("rules")
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    run_guarded(cmd)
}

const ACME_TOKEN: &str = "acme_live_q8r3t1v9k2l7m4n6p0x5c3b8z1w9y2a4";

fn acme_config(extend: &str) -> String {
    format!(
        "title = \"acme\"\nminVersion = \"v8.25.0\"\n{extend}\n[[rules]]\nid = \"acme-key\"\n\
         description = \"ACME key\"\nregex = '''\\b(acme_live_[a-z0-9]{{32}})\\b'''\n\
         keywords = [\"acme_live_\"]\n"
    )
}

/// `--format json -c CONFIG .`
fn args(config: &std::path::Path) -> Vec<std::ffi::OsString> {
    vec![
        "--format".into(),
        "json".into(),
        "-c".into(),
        config.as_os_str().to_owned(),
        ".".into(),
    ]
}

/// The rule ids reported by a `json` run, sorted.
fn rule_ids(run: &e2e_common::Run) -> Vec<String> {
    let mut v: Vec<String> = run
        .findings()
        .iter()
        .map(|f| f["rule"].as_str().unwrap().to_owned())
        .collect();
    v.sort();
    v
}

fn tree() -> tempfile::TempDir {
    let dir = tempdir();
    put(
        dir.path(),
        "src/settings.env",
        format!("GH={}\nACME={ACME_TOKEN}\n", github_token(3)).as_bytes(),
    );
    dir
}

#[test]
fn a_config_replaces_the_builtin_rules_unless_it_extends_them() {
    let dir = tree();
    let cfg = tempdir();
    let only = put(cfg.path(), "only.toml", acme_config("").as_bytes());
    let run = scan_in(dir.path(), args(&only));
    assert_eq!(rule_ids(&run), ["acme-key"], "{}", run.stderr);

    let ext = put(
        cfg.path(),
        "ext.toml",
        acme_config("[extend]\nuseDefault = true\n").as_bytes(),
    );
    let run = scan_in(dir.path(), args(&ext));
    assert_eq!(rule_ids(&run), ["acme-key", "github-pat"], "{}", run.stderr);

    let dis = put(
        cfg.path(),
        "dis.toml",
        acme_config("[extend]\nuseDefault = true\ndisabledRules = [\"github-pat\"]\n").as_bytes(),
    );
    let run = scan_in(dir.path(), args(&dis));
    assert_eq!(rule_ids(&run), ["acme-key"], "{}", run.stderr);
    // Without a config: the built-in rules only.
    let run = scan_in(dir.path(), ["--format", "json", "."]);
    assert_eq!(rule_ids(&run), ["github-pat"]);
}

#[test]
fn a_gitleaks_toml_at_the_scan_root_is_picked_up_and_c_overrides_it() {
    let dir = tree();
    put(dir.path(), ".gitleaks.toml", acme_config("").as_bytes());
    let run = scan_in(dir.path(), ["--format", "json", "."]);
    assert_eq!(rule_ids(&run), ["acme-key"], "{}", run.stderr);
    let cfg = tempdir();
    let other = put(
        cfg.path(),
        "gh.toml",
        b"[extend]\nuseDefault = true\ndisabledRules = [\"jwt\"]\n",
    );
    let run = scan_in(dir.path(), args(&other));
    assert_eq!(rule_ids(&run), ["github-pat"], "{}", run.stderr);
}

#[test]
fn a_path_only_rule_reports_the_file_by_its_path() {
    let dir = tempdir();
    put(dir.path(), "certs/client.p12", b"\x30\x82\x0a\x01binary");
    put(dir.path(), "certs/client.pem", b"not a p12");
    put(
        dir.path(),
        ".gitleaks.toml",
        b"[[rules]]\nid = \"pkcs12-file\"\ndescription = \"PKCS #12 file\"\npath = '''(?i)(?:^|\\/)[^\\/]+\\.p(?:12|fx)$'''\n",
    );
    let run = scan_in(dir.path(), ["--format", "json", "."]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let f = run.findings();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["rule"], "pkcs12-file");
    assert!(f[0]["path"].as_str().unwrap().ends_with("certs/client.p12"));
    assert_eq!(f[0]["line"], 1);
}

#[test]
fn unsupported_rules_are_skipped_with_a_warning_and_the_scan_goes_on() {
    let dir = tree();
    let cfg = tempdir();
    let text = format!(
        "{}\n[[rules]]\nid = \"no-keyword\"\nregex = '''[a-z]{{20}}[0-9]{{4}}'''\n",
        acme_config("")
    );
    let c = put(cfg.path(), "c.toml", text.as_bytes());
    let run = scan_in(dir.path(), args(&c));
    assert_eq!(run.code, Some(1));
    assert_eq!(rule_ids(&run), ["acme-key"]);
    assert!(
        run.stderr.contains("warning") && run.stderr.contains("no-keyword"),
        "{}",
        run.stderr
    );
}

#[test]
fn scan_rules_lists_each_rule_with_its_keywords_and_source() {
    let dir = tree();
    put(
        dir.path(),
        ".gitleaks.toml",
        acme_config("[extend]\nuseDefault = true\n").as_bytes(),
    );
    let run = rules_in(dir.path(), &["--json"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let rows: Vec<serde_json::Value> = run
        .stdout_text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let acme = rows.iter().find(|r| r["id"] == "acme-key").unwrap();
    assert_eq!(acme["source"], "./.gitleaks.toml");
    assert_eq!(acme["keywords"][0], "acme_live_");
    let gh = rows.iter().find(|r| r["id"] == "github-pat").unwrap();
    assert_eq!(gh["source"], "built-in");
    assert!(rows.len() > 100);
    let text = rules_in(dir.path(), &[]).stdout_text();
    assert!(
        text.contains("acme-key  [./.gitleaks.toml, precision medium]"),
        "{text}"
    );
}

/// SARIF carries each rule's own precision: `low` for the generic
/// keyword-plus-randomness rule, `high` for a token with its own format.
#[test]
fn sarif_precision_is_each_rules_own() {
    let dir = tempdir();
    std::fs::write(
        dir.path().join("settings.py"),
        "GITHUB_TOKEN = \"ghp_Q7mZk2Lr9XwT4vNc8bHs1YdFp6JgAe3UuRiO\"\n\
         db_password = \"kT9#vQ2!mXp7Lz4@Rw8s\"\n",
    )
    .unwrap();
    let run = scan_in(dir.path(), ["--format", "sarif", "."]);
    let log: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let rules = log["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .unwrap();
    let precision = |id: &str| {
        rules
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("no rule {id} in {rules:?}"))["properties"]["precision"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(precision("github-pat"), "high");
    assert_eq!(precision("generic-secret-assignment"), "low");
}
