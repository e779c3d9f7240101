//! Loading gitleaks-format TOML rule files, and the errors bad rules give.
#![cfg(not(loom))]

use scan::rules::{Condition, RegexTarget, RuleError, RuleSet, Scratch};

/// A rule file in gitleaks' format, as a team might keep beside its code.
const TEAM_RULES: &str = r#"
title = "acme secret rules"

[[rules]]
id = "acme-api-key"
description = "ACME internal API key"
regex = '''\b(acme_(?:live|test)_[a-z0-9]{32})\b'''
secretGroup = 1
entropy = 3.0
keywords = ["acme_live_", "acme_test_"]
tags = ["internal"]

  [[rules.allowlists]]
  description = "the key from the onboarding guide"
  stopwords = ["0123456789abcdef"]

[[rules]]
id = "acme-db-password"
description = "ACME database password in a config assignment"
regex = '''(?i)acme_db_pass(?:word)?\s*[:=]\s*["']([^"'\s]{10,64})["']'''
keywords = ["acme_db_pass"]
path = '''(?i)\.(?:ya?ml|env|ini)$'''

  [rules.allowlist]
  condition = "AND"
  regexTarget = "line"
  regexes = ['''#\s*test-fixture''']
  paths = ['''^fixtures/''']

[[rules]]
id = "acme-session"
description = "ACME session cookie (no keywords: derived from the regex)"
regex = '''acmesess=([A-Za-z0-9]{24})'''
maxLength = 64
family = "saas"
priority = 2

[[allowlists]]
description = "global: generated docs"
regexTarget = "match"
regexes = ['''DOCS-ONLY''']
"#;

fn findings(rs: &RuleSet, path: Option<&str>, text: &str) -> Vec<(String, String)> {
    let mut s = Scratch::new();
    s.set_path(path);
    let mut out = Vec::new();
    rs.scan(text.as_bytes(), 0..text.len(), &mut s, &mut out);
    out.iter()
        .map(|m| {
            (
                rs.rule(m.rule).id.clone(),
                text[m.secret_start..m.secret_end].to_string(),
            )
        })
        .collect()
}

#[test]
fn a_gitleaks_rule_file_loads_with_its_fields() {
    let specs = RuleSet::load_toml(TEAM_RULES).unwrap();
    assert_eq!(specs.len(), 3);
    let key = &specs[0];
    assert_eq!(key.id, "acme-api-key");
    assert_eq!(key.secret_group, Some(1));
    assert_eq!(key.entropy, Some(3.0));
    assert_eq!(key.keywords, vec!["acme_live_", "acme_test_"]);
    // The global allowlist was appended to every rule.
    assert_eq!(key.allowlists.len(), 2);
    assert_eq!(key.allowlists[1].regex_target, RegexTarget::Match);
    let db = &specs[1];
    assert_eq!(db.allowlists[0].condition, Condition::And);
    assert_eq!(db.allowlists[0].regex_target, RegexTarget::Line);
    assert!(db.path.is_some());
    assert_eq!(
        (
            specs[2].max_len,
            specs[2].priority,
            specs[2].family.as_str()
        ),
        (Some(64), 2, "saas")
    );
}

#[test]
fn loaded_rules_find_secrets_and_honour_allowlists_and_paths() {
    let rs = RuleSet::from_specs(RuleSet::load_toml(TEAM_RULES).unwrap()).unwrap();
    let key = "acme_live_k3j9x0q2m8v7b1n4c6z5l0p9r8t2y7u1";
    assert_eq!(
        findings(&rs, None, &format!("k = {key}")),
        vec![("acme-api-key".into(), key.into())]
    );
    // Keywords match case-insensitively, as in gitleaks; the regex decides.
    assert!(findings(&rs, None, "k = ACME_LIVE_K3J9X0Q2M8V7B1N4C6Z5L0P9R8T2Y7U1").is_empty());
    // Rule allowlist stopword, and the global allowlist on the match.
    assert!(findings(&rs, None, "k = acme_test_0123456789abcdef0123456789abcdef").is_empty());
    // The global allowlist looks at the match only, which here is the key.
    assert_eq!(findings(&rs, None, &format!("DOCS-ONLY {key}")).len(), 1);
    // The path-restricted rule runs only on matching paths.
    let line = "ACME_DB_PASSWORD = \"Zt9!kq2Lm4Rw\"";
    assert!(findings(&rs, Some("src/app.py"), line).is_empty());
    assert!(findings(&rs, None, line).is_empty());
    assert_eq!(
        findings(&rs, Some("deploy/prod.env"), line),
        vec![("acme-db-password".into(), "Zt9!kq2Lm4Rw".into())]
    );
    // AND allowlist: needs both the fixture path and the line marker.
    let marked = format!("{line} # test-fixture");
    assert_eq!(findings(&rs, Some("deploy/prod.env"), &marked).len(), 1);
    assert_eq!(findings(&rs, Some("fixtures/db.env"), line).len(), 1);
    assert!(findings(&rs, Some("fixtures/db.env"), &marked).is_empty());
    // Keywords derived from the regex's literal prefix.
    let sess = "acmesess=Qw3rTy8uIo1pAs5dFg7hJk9L";
    assert_eq!(
        findings(&rs, None, sess),
        vec![("acme-session".into(), "Qw3rTy8uIo1pAs5dFg7hJk9L".into())]
    );
}

#[test]
fn the_global_allowlist_on_the_match_suppresses_a_finding() {
    let toml = r#"
[[rules]]
id = "tok"
regex = '''(DOCS-ONLY )?(tok_[a-z0-9]{20})'''
secretGroup = 2
keywords = ["tok_"]
[[allowlists]]
regexTarget = "match"
regexes = ['''^DOCS-ONLY''']
"#;
    let rs = RuleSet::from_specs(RuleSet::load_toml(toml).unwrap()).unwrap();
    assert_eq!(findings(&rs, None, "x tok_a1b2c3d4e5f6g7h8i9j0").len(), 1);
    // The match includes the optional prefix (the keyword only has to lie
    // inside the match), so the allowlist on the match applies.
    assert!(findings(&rs, None, "DOCS-ONLY tok_a1b2c3d4e5f6g7h8i9j0").is_empty());
}

#[test]
fn use_default_extends_the_builtin_rules() {
    let toml = r#"
[extend]
useDefault = true
disabledRules = ["jwt", "generic-secret-assignment"]
[[rules]]
id = "github-pat"
description = "stricter override"
regex = '''\b(ghp_[A-Za-z0-9]{36})\b'''
keywords = ["ghp_"]
entropy = 4.5
"#;
    let specs = RuleSet::load_toml(toml).unwrap();
    let builtin = RuleSet::builtin();
    assert_eq!(specs.len(), builtin.len() - 2);
    assert_eq!(specs.iter().filter(|s| s.id == "github-pat").count(), 1);
    assert_eq!(
        specs.iter().find(|s| s.id == "github-pat").unwrap().entropy,
        Some(4.5)
    );
    assert!(specs.iter().all(|s| s.id != "jwt"));
    RuleSet::from_specs(specs).unwrap();
}

fn load_err(toml: &str) -> String {
    match RuleSet::load_toml(toml).and_then(RuleSet::from_specs) {
        Ok(_) => panic!("loaded: {toml}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_rules_give_messages_that_name_the_rule_and_the_problem() {
    let cases: &[(&str, &str)] = &[
        ("[[rules]]\nid = \"a\"\nregex = '''(unclosed'''\nkeywords=[\"x\"]", "rule \"a\": bad regex"),
        ("[[rules]]\nid = \"a\"\nregex = '''x(y)'''\nsecretGroup = 3\nkeywords=[\"x\"]", "secretGroup 3 but the regex has only 1 capture group"),
        ("[[rules]]\nid = \"a\"\nregex = '''[a-z]+'''", "no keywords, and no literal prefix"),
        ("[[rules]]\nid = \"a\"\ndescription = \"no regex, no path\"", "missing field regex"),
        ("[[rules]]\nid = \"a\"\nregex = 'x'\nkeywords = \"x\"", "keywords must be an array of strings"),
        ("[[rules]]\nid = \"a\"\nregex = 'abc'\nkeyword = [\"abc\"]", "unknown key \"keyword\""),
        ("[[rules]]\nid = \"a\"\nregex = 'abc'\n[[rules]]\nid = \"a\"\nregex = 'abd'", "rule id \"a\" is defined twice"),
        ("[[rules]]\nid = \"a\"\nregex = 'abc'\nentropy = 9.5", "entropy 9.5 is outside 0..=8"),
        ("[[rules]]\nid = \"a\"\nregex = 'abc'\n[rules.allowlist]\ncondition = \"XOR\"\nregexes=['x']", "condition \"XOR\" is not OR or AND"),
        ("[[rules]]\nid = \"a\"\nregex = 'abc'\n[[allowlists]]\ntargetRules = [\"b\"]\nregexes = ['x']", "targetRules names unknown rule \"b\""),
        ("[[rules]]\nid = \"a\"\nregex = '''abc[\\s\\S]*'''\nmaxLength = 100000", "the limit is 16384"),
        // Parses, but its compiled program is over the size limit: found
        // when the set is compiled, not when a keyword first hits.
        ("[[rules]]\nid = \"a\"\nregex = '''abc(?u:\\w){1000}'''\nkeywords=[\"abc\"]", "rule \"a\": bad regex"),
        ("rules = 3", "rules must be an array of tables"),
        ("[[rules]\nid = 'a'", "rule file:"),
        ("title = \"nothing\"", "the rule set is empty"),
    ];
    for (toml, want) in cases {
        let got = load_err(toml);
        assert!(got.contains(want), "{toml:?}: got {got:?}, want {want:?}");
    }
    assert_eq!(
        RuleSet::from_specs(Vec::new()).unwrap_err(),
        RuleError::Empty
    );
}
