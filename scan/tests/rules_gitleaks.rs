//! gitleaks' own default config (`tests/data/gitleaks-default.toml`, MIT,
//! licence beside it) loads whole and every one of its rules finds what it
//! describes; the parts of the config format that used to fail it.
#![cfg(not(loom))]

use regex::bytes::Regex;
use regex_syntax::hir::{Class, Hir, HirKind};
use scan::rules::template::Rng;
use scan::rules::{RegexTarget, RuleSet, RuleSpec, Scratch};

const GITLEAKS_DEFAULT: &str = include_str!("data/gitleaks-default.toml");

fn load_lenient(text: &str) -> (RuleSet, Vec<String>) {
    let file = RuleSet::parse_config(text, "test.toml").unwrap();
    let (specs, mut warnings) = RuleSet::compose_config(Some(file), Vec::new()).unwrap();
    let (rs, more) = RuleSet::from_specs_lenient(specs).unwrap();
    warnings.extend(more);
    (rs, warnings)
}

#[test]
fn gitleaks_default_config_loads_whole_without_warnings() {
    let (rs, warnings) = load_lenient(GITLEAKS_DEFAULT);
    assert!(warnings.is_empty(), "{warnings:?}");
    let rules_in_file = GITLEAKS_DEFAULT.matches("\n[[rules]]\n").count();
    assert_eq!(rs.len(), rules_in_file);
    assert!(rs.len() >= 200);
    let p12 = rs.find("pkcs12-file").expect("the path-only rule loads");
    assert!(rs.rule(p12).path_only);
    // The config replaces the built-in rules (no [extend] useDefault).
    assert!(rs.find("generic-secret-assignment").is_none());
    // The strict loader accepts it too.
    RuleSet::from_specs(RuleSet::load_toml(GITLEAKS_DEFAULT).unwrap()).unwrap();
}

#[test]
fn min_version_is_accepted() {
    let toml = "minVersion = \"v8.25.0\"\n[[rules]]\nid = \"a\"\nregex = '''abc_[0-9]{4}'''\n";
    assert_eq!(RuleSet::load_toml(toml).unwrap().len(), 1);
}

fn scan_path(rs: &RuleSet, path: &str, text: &[u8], owned: std::ops::Range<usize>) -> Vec<String> {
    let mut s = Scratch::new();
    s.set_path(Some(path));
    let mut out = Vec::new();
    rs.scan(text, owned, &mut s, &mut out);
    out.iter().map(|m| rs.rule(m.rule).id.clone()).collect()
}

#[test]
fn a_path_only_rule_reports_a_matching_file_once_at_its_start() {
    let toml = r#"
[[rules]]
id = "pkcs12-file"
path = '''(?i)(?:^|\/)[^\/]+\.p(?:12|fx)$'''
[[rules]]
id = "tok"
regex = '''tok_[0-9]{6}'''
[[allowlists]]
paths = ['''^fixtures/''']
"#;
    let (rs, warnings) = load_lenient(toml);
    assert!(warnings.is_empty());
    let data = vec![b'x'; 1000];
    assert_eq!(
        scan_path(&rs, "certs/client.p12", &data, 0..600),
        ["pkcs12-file"]
    );
    assert_eq!(
        scan_path(&rs, "certs/client.PFX", &data, 0..600),
        ["pkcs12-file"]
    );
    // A later chunk of the same file (its owned range starts after its
    // overlap prefix) does not report it again.
    assert!(scan_path(&rs, "certs/client.p12", &data, 600..1000).is_empty());
    assert!(scan_path(&rs, "certs/client.pem", &data, 0..1000).is_empty());
    // The global allowlist's paths apply to path-only rules too.
    assert!(scan_path(&rs, "fixtures/client.p12", &data, 0..1000).is_empty());
    // It comes first, before the matches of other rules in that chunk.
    assert_eq!(
        scan_path(&rs, "a.p12", b"tok_917384", 0..10),
        ["pkcs12-file", "tok"]
    );
}

#[test]
fn a_bad_global_allowlist_is_reported_once_as_the_allowlists() {
    let toml = r#"
[[rules]]
id = "one"
regex = '''one_[0-9]{6}'''
[[rules]]
id = "two"
regex = '''two_[0-9]{6}'''
[allowlist]
regexes = ['''(?<=x)y''']
"#;
    let file = RuleSet::parse_config(toml, "t.toml").unwrap();
    let (specs, _) = RuleSet::compose_config(Some(file), Vec::new()).unwrap();
    let err = RuleSet::from_specs_lenient(specs).unwrap_err().to_string();
    assert!(err.contains("<global allowlist>"), "{err}");
    assert!(
        !err.contains("\"one\"") && !err.contains("\"two\""),
        "{err}"
    );
    assert_eq!(err.matches("bad allowlist regex").count(), 1, "{err}");
}

#[test]
fn a_rule_the_engine_cannot_run_is_skipped_with_a_warning() {
    let toml = r#"
[[rules]]
id = "no-keyword"
regex = '''[a-z]{20}[0-9]{4}'''
[[rules]]
id = "composite"
regex = '''comp_[0-9]{6}'''
[[rules.required]]
id = "no-keyword"
[[rules]]
id = "fine"
regex = '''fine_[0-9]{6}'''
"#;
    let (rs, warnings) = load_lenient(toml);
    assert_eq!(rs.len(), 1);
    assert!(rs.find("fine").is_some());
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings
        .iter()
        .any(|w| w.contains("no-keyword") && w.contains("skipped")));
    assert!(warnings
        .iter()
        .any(|w| w.contains("composite") && w.contains("required")));
    // The strict loader still refuses it.
    assert!(RuleSet::from_specs(RuleSet::load_toml(toml).unwrap()).is_err());
}

#[test]
fn go_only_regex_syntax_in_a_config_is_translated() {
    let toml = r#"
[[rules]]
id = "brace"
regex = '''tmpl{([a-f0-9]{16})}'''
keywords = ["tmpl{"]
[[rules]]
id = "bracket"
regex = '''brk_([[a-z0-9]{12})'''
keywords = ["brk_"]
"#;
    let (rs, warnings) = load_lenient(toml);
    assert!(warnings.is_empty());
    assert_eq!(
        scan_path(&rs, "a", b"tmpl{0123abcd4567ef89}", 0..22),
        ["brace"]
    );
    assert_eq!(
        scan_path(&rs, "a", b"brk_[a9z3k1m7q2x5", 0..17),
        ["bracket"]
    );
}

// ---------------------------------------------------------------------------
// Every rule of the gitleaks config finds strings generated from its own
// regex: the expectations come from the config itself, not from a binary.

/// Printable ASCII (and space): what generated text is drawn from where a
/// class allows it.
fn printable(c: u32) -> bool {
    (0x20..0x7f).contains(&c)
}

fn pick_class(class: &Class, rng: &mut Rng) -> Vec<u8> {
    let ranges: Vec<(u32, u32)> = match class {
        Class::Unicode(u) => u
            .ranges()
            .iter()
            .map(|r| (r.start() as u32, r.end() as u32))
            .collect(),
        Class::Bytes(b) => b
            .ranges()
            .iter()
            .map(|r| (u32::from(r.start()), u32::from(r.end())))
            .collect(),
    };
    let good: Vec<u32> = ranges
        .iter()
        .flat_map(|&(a, b)| (a..=b.min(0x7f)).filter(|&c| printable(c)))
        .collect();
    let c = if good.is_empty() {
        ranges[0].0
    } else if good.len() > 90 && rng.chance(1, 2) {
        // `.` in `hooks.slack.com`: mostly the dot, so the keyword appears.
        u32::from(b'.')
    } else {
        *rng.pick(&good)
    };
    char::from_u32(c).unwrap_or('x').to_string().into_bytes()
}

fn generate(h: &Hir, rng: &mut Rng, out: &mut Vec<u8>) {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => {}
        HirKind::Literal(l) => out.extend_from_slice(&l.0),
        HirKind::Class(c) => out.extend(pick_class(c, rng)),
        HirKind::Repetition(r) => {
            let max = r.max.unwrap_or(r.min + 8).min(r.min + 8);
            let n = rng.range(r.min as usize, max as usize);
            for _ in 0..n {
                generate(&r.sub, rng, out);
            }
        }
        HirKind::Capture(c) => generate(&c.sub, rng, out),
        HirKind::Concat(v) => v.iter().for_each(|h| generate(h, rng, out)),
        HirKind::Alternation(v) => generate(rng.pick(v), rng, out),
    }
}

fn entropy(s: &[u8]) -> f64 {
    let mut counts = [0u32; 256];
    s.iter().for_each(|&b| counts[b as usize] += 1);
    let n = s.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

/// A file name the rule's `path` accepts.
fn file_for(spec: &RuleSpec) -> Option<&'static str> {
    const NAMES: &[&str] = &[
        "config/settings.txt",
        "src/app.php",
        "infra/main.tf",
        "NuGet.Config",
        "k8s/secret.yaml",
        "certs/client.p12",
    ];
    match &spec.path {
        None => Some(NAMES[0]),
        Some(p) => {
            let re = Regex::new(p).unwrap();
            NAMES.iter().copied().find(|n| re.is_match(n.as_bytes()))
        }
    }
}

/// The secret span of a regex match, with gitleaks' rule: `secretGroup`, else
/// the first group that matched something, else the whole match.
fn secret_span(re: &Regex, spec: &RuleSpec, hay: &[u8]) -> Option<(usize, usize, usize, usize)> {
    let caps = re.captures(hay)?;
    let m = caps.get(0)?;
    let s = match spec.secret_group {
        Some(g) => caps.get(g)?,
        None => (1..caps.len())
            .find_map(|g| caps.get(g).filter(|c| !c.is_empty()))
            .unwrap_or(m),
    };
    Some((m.start(), m.end(), s.start(), s.end()))
}

fn build(p: &str) -> Regex {
    regex::bytes::RegexBuilder::new(p)
        .unicode(false)
        .size_limit(64 << 20)
        .build()
        .or_else(|_| {
            regex::bytes::RegexBuilder::new(p)
                .size_limit(64 << 20)
                .build()
        })
        .unwrap()
}

/// A rule's regex and allowlists, compiled once for the test.
struct Compiled {
    hir: Hir,
    re: Regex,
    allow: Vec<(RegexTarget, Vec<Regex>, Vec<String>)>,
}

fn compiled(spec: &RuleSpec, cache: &mut Vec<(Vec<String>, Regex)>) -> Compiled {
    let parse = |unicode| {
        regex_syntax::ParserBuilder::new()
            .unicode(unicode)
            .utf8(false)
            .build()
            .parse(&spec.regex)
            .ok()
    };
    let hir = parse(false)
        .or_else(|| parse(true))
        .expect("the rule parses");
    let mut one = |pats: &[String]| -> Vec<Regex> {
        if let Some((_, r)) = cache.iter().find(|(k, _)| k == pats) {
            return vec![r.clone()];
        }
        let r = build(&format!("(?:{})", pats.join(")|(?:")));
        cache.push((pats.to_vec(), r.clone()));
        vec![r]
    };
    let allow = spec
        .allowlists
        .iter()
        .map(|a| {
            let res = if a.regexes.is_empty() {
                Vec::new()
            } else {
                one(&a.regexes)
            };
            let words = a.stopwords.iter().map(|w| w.to_ascii_lowercase()).collect();
            (a.regex_target, res, words)
        })
        .collect();
    Compiled {
        hir,
        re: build(&spec.regex),
        allow,
    }
}

/// Whether one of the rule's allowlists (global ones included, as copied into
/// the spec) covers this candidate: the generated sample is then not a
/// finding gitleaks would report either. (Path criteria are left out: the
/// sample paths are chosen outside every allowlisted path.)
fn allowlisted(c: &Compiled, hay: &[u8], span: (usize, usize, usize, usize)) -> bool {
    let (ms, me, ss, se) = span;
    let lower = String::from_utf8_lossy(&hay[ss..se]).to_ascii_lowercase();
    c.allow.iter().any(|(target, res, words)| {
        let target = match target {
            RegexTarget::Secret => &hay[ss..se],
            RegexTarget::Match => &hay[ms..me],
            RegexTarget::Line | RegexTarget::Around => hay,
        };
        res.iter().any(|r| r.is_match(target)) || words.iter().any(|w| lower.contains(w.as_str()))
    })
}

/// A generated line the rule must report, and where its secret lies.
struct Sample {
    rule: String,
    path: &'static str,
    text: Vec<u8>,
    secret: (usize, usize),
}

fn samples(specs: &[(RuleSpec, Compiled)], seed: u64) -> (Vec<Sample>, Vec<String>) {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    let mut failed = Vec::new();
    for (spec, c) in specs {
        let (hir, re) = (&c.hir, &c.re);
        let path = file_for(spec).expect("a file name for the rule's path");
        let kws: Vec<String> = spec
            .keywords
            .iter()
            .map(|k| k.to_ascii_lowercase())
            .collect();
        let found = (0..200).find_map(|_| {
            let mut body = Vec::new();
            generate(hir, &mut rng, &mut body);
            let mut text = b"\n".to_vec();
            let lower = String::from_utf8_lossy(&body).to_ascii_lowercase();
            if !kws.is_empty() && !kws.iter().any(|k| lower.contains(k.as_str())) {
                if !spec.keywords_nearby {
                    return None;
                }
                // The keyword on the line before: gitleaks only asks for it
                // somewhere in the file.
                text.extend(format!("# {} settings\n", kws[0]).as_bytes());
            }
            text.extend(&body);
            text.extend(b"\n");
            let span = secret_span(re, spec, &text)?;
            let secret = &text[span.2..span.3];
            if entropy(secret) < spec.entropy.unwrap_or(0.0) || allowlisted(c, &text, span) {
                return None;
            }
            Some(Sample {
                rule: spec.id.clone(),
                path,
                text,
                secret: (span.2, span.3),
            })
        });
        match found {
            Some(s) => out.push(s),
            None => failed.push(spec.id.clone()),
        }
    }
    (out, failed)
}

#[test]
fn every_gitleaks_rule_finds_strings_generated_from_its_own_regex() {
    let specs = RuleSet::load_toml(GITLEAKS_DEFAULT).unwrap();
    let rs = RuleSet::from_specs(specs.clone()).unwrap();
    let mut cache = Vec::new();
    let specs: Vec<(RuleSpec, Compiled)> = specs
        .into_iter()
        .filter(|s| !s.regex.is_empty())
        .map(|s| {
            let c = compiled(&s, &mut cache);
            (s, c)
        })
        .collect();
    let mut missed = Vec::new();
    let mut by_other = 0;
    let mut total = 0;
    for seed in [1, 2, 3] {
        let (samples, no_sample) = samples(&specs, seed);
        assert!(
            no_sample.is_empty(),
            "no valid sample generated for {no_sample:?}"
        );
        if let Some(dir) = std::env::var_os("MAGPIE_DUMP_GITLEAKS_SAMPLES") {
            // For the comparison with the gitleaks binary by hand (docs).
            for (i, s) in samples.iter().enumerate() {
                let p = std::path::Path::new(&dir)
                    .join(format!("seed{seed}/{i:03}-{}", s.rule))
                    .join(s.path);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(&p, &s.text).unwrap();
            }
        }
        for s in &samples {
            total += 1;
            let mut scratch = Scratch::new();
            scratch.set_path(Some(s.path));
            let mut out = Vec::new();
            rs.scan(&s.text, 0..s.text.len(), &mut scratch, &mut out);
            let hit = out
                .iter()
                .find(|m| m.secret_start < s.secret.1 && s.secret.0 < m.secret_end);
            match hit {
                Some(m) if rs.rule(m.rule).id == s.rule => {}
                Some(_) => by_other += 1,
                None => missed.push(format!(
                    "{} ({}): {:?}",
                    s.rule,
                    s.path,
                    String::from_utf8_lossy(&s.text)
                )),
            }
        }
    }
    assert!(
        missed.is_empty(),
        "{} of {total} missed:\n{}",
        missed.len(),
        missed.join("\n")
    );
    assert!(total >= 3 * 220, "{total} samples");
    // Another rule may win an overlapping secret (one finding per secret),
    // but the rule's own finding is the rule, not the exception.
    assert!(
        by_other * 10 <= total,
        "{by_other} of {total} reported by another rule"
    );
}
