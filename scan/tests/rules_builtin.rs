//! The built-in rules against their own examples, placeholders and each
//! other.
#![cfg(not(loom))]

use scan::rules::template::{render, Rng};
use scan::rules::{Match, RuleId, RuleInfo, RuleSet, Scratch};

fn scan_all(rs: &RuleSet, text: &str) -> Vec<Match> {
    let mut out = Vec::new();
    rs.scan(
        text.as_bytes(),
        0..text.len(),
        &mut Scratch::new(),
        &mut out,
    );
    out
}

fn describe(rs: &RuleSet, text: &str, ms: &[Match]) -> Vec<(String, String)> {
    ms.iter()
        .map(|m| {
            (
                rs.rule(m.rule).id.clone(),
                text[m.secret_start..m.secret_end].to_string(),
            )
        })
        .collect()
}

const SEEDS: u64 = 8;

#[test]
fn builtin_set_has_over_100_rules_each_with_examples_and_a_template() {
    let rs = RuleSet::builtin();
    assert!(rs.len() >= 100, "only {} rules", rs.len());
    for id in rs.ids() {
        let info = rs.rule(id);
        assert!(!info.description.is_empty(), "{}", info.id);
        assert!(
            !info.family.is_empty() && info.family != "custom",
            "{}",
            info.id
        );
        assert!(info.template.is_some(), "{} has no template", info.id);
        assert!(
            !info.examples.is_empty(),
            "{} has no positive example",
            info.id
        );
        assert!(
            !info.counter_examples.is_empty(),
            "{} has no negative example",
            info.id
        );
        assert!(!info.keywords.is_empty(), "{} has no keyword", info.id);
    }
}

/// Renders `examples(rule)` for every rule and seed (with a fresh secret for
/// `{secret}`), scans each, and lists those where `ok(rule, secret, found)`
/// is false.
fn check_examples(
    examples: impl Fn(&RuleInfo) -> &[String],
    ok: impl Fn(&RuleInfo, &str, &[(String, String)]) -> bool,
) {
    let rs = RuleSet::builtin();
    let mut failures = Vec::new();
    for id in rs.ids() {
        let info = rs.rule(id).clone();
        for seed in 0..SEEDS {
            let mut rng = Rng::new(seed * 7919 + u64::from(id.0));
            let secret = rs
                .generate_secret(id, &mut rng)
                .unwrap_or_else(|| panic!("{}: no secret", info.id));
            for ex in examples(&info) {
                let text = render(ex, &mut rng, Some(&secret));
                let found = describe(&rs, &text, &scan_all(&rs, &text));
                if !ok(&info, &secret, &found) {
                    failures.push(format!("{}: {text:?} -> {found:?}", info.id));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_positive_example_reports_its_rule_and_exact_secret() {
    check_examples(
        |i| &i.examples,
        |info, secret, found| found == [(info.id.clone(), secret.to_string())],
    );
}

#[test]
fn every_negative_example_reports_nothing() {
    check_examples(|i| &i.counter_examples, |_, _, found| found.is_empty());
}

#[test]
fn documentation_keys_and_placeholders_are_not_reported() {
    let rs = RuleSet::builtin();
    // The corpus's placeholder decoys, and a few more.
    let extra = [
        "password = \"abcdefghijklmnopqrstuvwxyz\"",
        "token = '{{ vault_token }}'",
        "Authorization: Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
        "-----BEGIN RSA PRIVATE KEY-----\n...\n-----END RSA PRIVATE KEY-----",
        "password = os.environ[\"DB_PASSWORD\"]",
        "token = self.tokenizer.next_token_value()",
    ];
    for line in scan_plant::PLACEHOLDER_DECOYS.iter().chain(&extra) {
        let found = describe(&rs, line, &scan_all(&rs, line));
        assert!(found.is_empty(), "{line:?} -> {found:?}");
    }
}

#[test]
fn a_specific_rule_wins_over_the_generic_rule_for_the_same_secret() {
    let rs = RuleSet::builtin();
    let mut rng = Rng::new(1);
    let gh = rs.find("github-pat").unwrap();
    let secret = rs.generate_secret(gh, &mut rng).unwrap();
    let text = format!("GITHUB_TOKEN = \"{secret}\"\n");
    assert_eq!(
        describe(&rs, &text, &scan_all(&rs, &text)),
        vec![("github-pat".to_string(), secret.clone())]
    );
    // Without the specific rule the generic one reports the same secret:
    // the dedup above really removed a candidate.
    let mut no_gh = RuleSet::builtin();
    no_gh.exclude(&["github-pat".to_string()]).unwrap();
    assert_eq!(
        describe(&no_gh, &text, &scan_all(&no_gh, &text)),
        vec![("generic-secret-assignment".to_string(), secret)]
    );
}

#[test]
fn explicit_priority_decides_between_two_specific_rules() {
    let rs = RuleSet::builtin();
    let id = rs.find("azure-storage-connection-string").unwrap();
    let key = rs.generate_secret(id, &mut Rng::new(3)).unwrap();
    let text = format!("DefaultEndpointsProtocol=https;AccountName=acct01;AccountKey={key};EndpointSuffix=core.windows.net");
    assert_eq!(
        describe(&rs, &text, &scan_all(&rs, &text)),
        vec![("azure-storage-connection-string".into(), key.clone())]
    );
    let mut without = RuleSet::builtin();
    without
        .exclude(&["azure-storage-connection-string".into()])
        .unwrap();
    assert_eq!(
        describe(&without, &text, &scan_all(&without, &text)),
        vec![("azure-storage-account-key".into(), key)]
    );
}

#[test]
fn two_secrets_on_one_line_are_both_reported_in_order() {
    let rs = RuleSet::builtin();
    let mut rng = Rng::new(5);
    let a = rs
        .generate_secret(rs.find("npm-token").unwrap(), &mut rng)
        .unwrap();
    let b = rs
        .generate_secret(rs.find("slack-bot-token").unwrap(), &mut rng)
        .unwrap();
    let text = format!("tokens: {a},{b}");
    assert_eq!(
        describe(&rs, &text, &scan_all(&rs, &text)),
        vec![("npm-token".into(), a), ("slack-bot-token".into(), b)]
    );
}

#[test]
fn exclude_rejects_unknown_ids_and_removes_known_ones() {
    let mut rs = RuleSet::builtin();
    let n = rs.len();
    let err = rs.exclude(&["no-such-rule".into()]).unwrap_err();
    assert_eq!(err.to_string(), "unknown rule id \"no-such-rule\"");
    assert_eq!(rs.len(), n);
    rs.exclude(&["jwt".into(), "npm-token".into()]).unwrap();
    assert_eq!(rs.len(), n - 2);
    assert!(rs.find("jwt").is_none());
    assert!(rs.ids().all(|i: RuleId| rs.rule(i).id != "npm-token"));
}

#[test]
fn context_len_covers_the_longest_rule() {
    let rs = RuleSet::builtin();
    let longest = rs.ids().map(|i| rs.rule(i).max_len).max().unwrap();
    assert!(
        rs.context_len() >= longest,
        "{} < {longest}",
        rs.context_len()
    );
    // The PGP rule is the longest: a block of 12 KiB must be findable.
    assert_eq!(longest, 12 * 1024);
}

#[test]
fn rules_md_lists_every_builtin_rule() {
    let md = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/RULES.md")).unwrap();
    let rs = RuleSet::builtin();
    for id in rs.ids() {
        let info = rs.rule(id);
        let row = format!("| `{}` | {} |", info.id, info.family);
        assert!(
            md.contains(&row),
            "RULES.md has no row for {} (regenerate with scan-plant --list-rules)",
            info.id
        );
    }
    assert!(md.contains(&format!("{} rules are built in", rs.len())));
}

#[test]
fn rule_sets_are_shared_and_scratch_moves_between_threads() {
    fn shared<T: Send + Sync>() {}
    fn movable<T: Send>() {}
    shared::<RuleSet>();
    movable::<Scratch>();
}

#[test]
fn builtin_regexes_are_built_lazily_and_every_one_builds() {
    let rs = RuleSet::builtin();
    assert_eq!(rs.built_regex_count(), 0, "the built-in set built eagerly");
    rs.build_regexes().unwrap();
    assert_eq!(rs.built_regex_count(), rs.len());
    // A set compiled from specs builds everything up front.
    let eager = RuleSet::from_specs(RuleSet::builtin_specs()).unwrap();
    assert_eq!(eager.built_regex_count(), eager.len());
}

/// Every rule's first positive example, rendered with seed 1, one per line.
fn all_examples(rs: &RuleSet) -> String {
    let mut text = String::new();
    for id in rs.ids() {
        let mut rng = Rng::new(u64::from(id.0) + 1);
        let secret = rs.generate_secret(id, &mut rng).unwrap();
        text += &render(&rs.rule(id).examples[0], &mut rng, Some(&secret));
        text.push('\n');
    }
    text
}

#[test]
fn a_lazy_set_builds_only_the_rules_whose_keywords_hit() {
    let rs = RuleSet::builtin();
    let id = rs.find("github-pat").unwrap();
    let mut rng = Rng::new(3);
    let secret = rs.generate_secret(id, &mut rng).unwrap();
    let text = render(&rs.rule(id).examples[0], &mut rng, Some(&secret));
    let found = scan_all(&rs, &text);
    assert_eq!(
        describe(&rs, &text, &found),
        [("github-pat".into(), secret)]
    );
    let built = rs.built_regex_count();
    assert!(
        built >= 1 && built < rs.len() / 4,
        "{built} of {}",
        rs.len()
    );
}

#[test]
fn lazy_set_scanned_from_many_threads_at_once_matches_the_eager_set() {
    let eager = RuleSet::from_specs(RuleSet::builtin_specs()).unwrap();
    let text = all_examples(&eager);
    let want = describe(&eager, &text, &scan_all(&eager, &text));
    assert!(want.len() >= eager.len(), "{} findings", want.len());
    for _ in 0..4 {
        // A fresh lazy set each round: the threads race to build its
        // regexes (OnceLock), and every thread must see the same matches.
        let lazy = RuleSet::builtin();
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| s.spawn(|| describe(&lazy, &text, &scan_all(&lazy, &text))))
                .collect();
            for h in handles {
                assert_eq!(h.join().unwrap(), want);
            }
        });
        assert_eq!(lazy.built_regex_count(), lazy.len());
    }
}

#[test]
fn a_service_name_inside_a_longer_word_does_not_name_the_service() {
    let rs = RuleSet::builtin();
    let id = rs.find("alchemy-api-key").expect("the Alchemy rule");
    let secret = rs.generate_secret(id, &mut Rng::new(9)).unwrap();
    let own = format!("ALCHEMY_API_KEY = \"{secret}\"");
    assert_eq!(
        describe(&rs, &own, &scan_all(&rs, &own)),
        [("alchemy-api-key".to_string(), secret.clone())]
    );
    // `sqlalchemy` holds the name but is another word: whatever reports the
    // value, it is not the Alchemy rule.
    let other = format!("SQLALCHEMY_POOL_TOKEN = \"{secret}\"");
    let found = describe(&rs, &other, &scan_all(&rs, &other));
    assert!(
        found.iter().all(|(rule, _)| rule != "alchemy-api-key"),
        "{found:?}"
    );
    assert!(!found.is_empty(), "the generic rule still sees a token");
}

#[test]
fn a_service_name_rule_needs_a_letter_and_a_digit_in_the_value() {
    let rs = RuleSet::builtin();
    for (line, reported) in [
        ("chartmogul token: Zq8rT1vW9kL2mN4pX7cBQ3sD", true),
        ("chartmogul token: ZqurTkvWmkLqmNwpXscBQasD", false),
        ("chartmogul token: 4830291047582910473829104", false),
        ("chartmogul token: chartmogul-ruby-client-v2", false),
    ] {
        let found = describe(&rs, line, &scan_all(&rs, line));
        assert_eq!(
            found.iter().any(|(r, _)| r == "chartmogul-api-key"),
            reported,
            "{line:?} -> {found:?}"
        );
    }
}

/// The service-name rules tell random tokens that happen to split into
/// camelCase-looking pieces from identifiers (`SVC_IDENTIFIERS` in
/// builtin/services.rs). The first token is the planted secret that a
/// looser form dropped in `e2e_corpus`'s seed 3; the next ones are random
/// tokens the generic rule's identifier form also reads as identifiers.
#[test]
fn service_name_rules_tell_random_tokens_from_identifiers() {
    let rs = RuleSet::builtin();
    let tokens = [
        "vkciEX8EebnzlJTEgzyb4DcmAwl51EIE",
        "Whg35WEMSJHWwgd",
        "gpweEKO2QENPLWR",
    ];
    for t in tokens {
        let text = format!("COUNTRYLAYER_API_KEY = \"{t}\"\n");
        let found = describe(&rs, &text, &scan_all(&rs, &text));
        assert_eq!(
            found,
            [("countrylayer-api-key".to_string(), t.to_string())],
            "{text:?}"
        );
    }
    let identifiers = [
        "getCountrylayerAccessToken",
        "userPasswordHash2",
        "countrylayerClientConfig2",
        "MY_COUNTRYLAYER_API_KEY",
        "httpClientForCountries",
        "sha256HmacSignature",
    ];
    for id in identifiers {
        let text = format!("COUNTRYLAYER_API_KEY = {id}\n");
        let found = describe(&rs, &text, &scan_all(&rs, &text));
        assert!(found.is_empty(), "{text:?} -> {found:?}");
    }
}

/// `scan/src/rules/builtin/shapes.tsv` holds what start-up would compute
/// by parsing every built-in regex (`scan/src/rules/shape.rs`). After a
/// rule changes, regenerate it: `MAGPIE_BLESS=1 cargo test -p scan --test
/// rules_builtin shape`.
#[test]
fn the_builtin_shape_table_is_current_and_start_up_uses_it() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/rules/builtin/shapes.tsv");
    let want = RuleSet::builtin_shapes_tsv();
    if std::env::var_os("MAGPIE_BLESS").is_some() {
        std::fs::write(path, &want).unwrap();
    }
    let have = std::fs::read_to_string(path).unwrap();
    assert!(
        have == want,
        "{path} is stale: regenerate it with MAGPIE_BLESS=1 (see this test)"
    );
    // Every rule with keywords and a regex takes its shape from the table
    // (the binary reads the file as it was compiled).
    let rs = RuleSet::builtin();
    let rows = want.lines().count();
    assert!(rows > 600, "{rows} rows");
    assert_eq!(rs.shapes_from_table(), rows);
}
