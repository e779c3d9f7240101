//! Keyword context: a keyword hit is confirmed only when the byte before it
//! can begin one of its rules' matches (the service-name rules need a
//! non-letter there, `\b`-anchored rules a non-word byte). The gating must
//! change no finding, and must really skip the rules it gates.
#![cfg(not(loom))]

use scan::rules::template::{render, Rng};
use scan::rules::{Match, RuleSet, Scratch};

fn scan_all(rs: &RuleSet, text: &str) -> Vec<Match> {
    scan_with(rs, &mut Scratch::new(), text)
}

/// Scans with a scratch the caller keeps, as a scanner worker does across
/// files (a fresh one per text rebuilt every regex cache it touched).
fn scan_with(rs: &RuleSet, scratch: &mut Scratch, text: &str) -> Vec<Match> {
    let mut out = Vec::new();
    rs.scan(text.as_bytes(), 0..text.len(), scratch, &mut out);
    out
}

/// Bytes put right before each example: letters, word characters, other
/// punctuation, white space and a non-ASCII letter.
const BEFORE: &[&str] = &[
    "", "a", "Z", "_", "7", " ", "-", ".", "/", ":", "\"", "=", "\n", "é", "xx_",
];

#[test]
fn gating_by_the_byte_before_a_keyword_changes_no_finding_in_any_context() {
    let gated = RuleSet::from_specs(RuleSet::builtin_specs()).unwrap();
    let plain = RuleSet::from_specs(RuleSet::builtin_specs())
        .unwrap()
        .without_keyword_context();
    let (mut gated_scratch, mut plain_scratch) = (Scratch::new(), Scratch::new());
    let mut texts = 0;
    let mut found = 0;
    for id in gated.ids() {
        let info = gated.rule(id).clone();
        let mut rng = Rng::new(u64::from(id.0) * 31 + 5);
        let secret = gated.generate_secret(id, &mut rng).unwrap();
        for ex in info.examples.iter().chain(&info.counter_examples) {
            let body = render(ex, &mut rng, Some(&secret));
            for before in BEFORE {
                // The example alone, after a byte, and after a byte in the
                // middle of a longer buffer (the byte before the region is
                // not the buffer's start).
                for text in [
                    format!("{before}{body}"),
                    format!("{}{before}{body}\n", "filler text; ".repeat(40)),
                ] {
                    let want = scan_with(&plain, &mut plain_scratch, &text);
                    let got = scan_with(&gated, &mut gated_scratch, &text);
                    assert_eq!(got, want, "{}: {text:?}", info.id);
                    texts += 1;
                    found += got.len();
                }
            }
        }
    }
    // Not vacuous: about a third of the texts report something (counter-
    // examples and examples behind a letter report nothing).
    assert!(found * 4 > texts, "{found} findings in {texts} texts");
}

#[test]
fn service_names_and_word_bounded_prefixes_are_gated_and_generic_keywords_are_not() {
    let rs = RuleSet::builtin();
    // Service-name rules: `(?:^|[^A-Za-z])name…`.
    for kw in ["alchemy", "chartmogul", "jira", "technicalanalysisapi"] {
        assert_eq!(rs.keyword_context(kw), Some("not-letter"), "{kw}");
    }
    // Anchored rules opening with `\b`.
    for kw in ["aio_", "ghp_", "xoxb-"] {
        assert_eq!(rs.keyword_context(kw), Some("not-word"), "{kw}");
    }
    // Keywords of unanchored rules match after anything.
    for kw in ["token", "passw", "://"] {
        assert_eq!(rs.keyword_context(kw), Some("any"), "{kw}");
    }
    assert_eq!(rs.keyword_context("not a keyword"), None);
    let plain = RuleSet::builtin().without_keyword_context();
    assert_eq!(plain.keyword_context("alchemy"), Some("any"));
}

#[test]
fn a_gated_keyword_after_a_letter_does_not_run_its_rule() {
    // The lazy set builds a rule's regex the first time one of its
    // keywords is confirmed, so the count of built regexes shows whether
    // the hit reached the rule.
    let built_after = |rs: &RuleSet, text: &str| {
        scan_all(rs, text);
        rs.built_regex_count()
    };
    // The rule pre-check (rules_precheck.rs) would reject these short texts
    // before the regex too; it is off here so that only the gating decides.
    let gated = || RuleSet::builtin().without_precheck();
    // `sqlalchemy` holds the keyword `alchemy` after a letter.
    let text = "engine = sqlalchemy";
    assert_eq!(built_after(&gated(), text), 0);
    let plain = gated().without_keyword_context();
    assert_eq!(built_after(&plain, text), 1, "the ungated set runs it");
    // After a non-letter it runs.
    assert_eq!(built_after(&gated(), "use_alchemy"), 1);
    // `ghp_` after a word character cannot open `\bghp_…`.
    assert_eq!(built_after(&gated(), "xghp_"), 0);
    assert_eq!(built_after(&gated(), "(ghp_"), 1);
}

#[test]
fn a_service_name_match_starts_at_the_byte_before_the_name() {
    let rs = RuleSet::builtin();
    let id = rs.find("chartmogul-api-key").unwrap();
    let secret = rs.generate_secret(id, &mut Rng::new(4)).unwrap();
    for (text, start) in [
        (format!("chartmogul token: {secret}"), 0),
        (format!("x = 1\n_chartmogul token: {secret}"), 6),
        (format!("x = 1\n2chartmogul token: {secret}"), 6),
    ] {
        let found = scan_all(&rs, &text);
        let m = found
            .iter()
            .find(|m| m.rule == id)
            .unwrap_or_else(|| panic!("{text:?}: {found:?}"));
        assert_eq!(m.start, start, "{text:?}");
        assert_eq!(&text[m.secret_start..m.secret_end], secret);
        assert_eq!(m.end, text.len());
    }
}
