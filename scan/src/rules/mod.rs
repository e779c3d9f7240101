//! The rule engine: keyword prefilter, bounded regex confirmation, secret
//! capture group, entropy and placeholder tests, allowlists, and
//! specificity-based deduplication. See `scan/RULES.md` for the rule format
//! and `README.md` beside this file for the chunk-independence argument.

mod builtin;
mod context;
pub mod filters;
pub mod go_regex;
pub mod list;
mod precheck;
mod prefilter;
mod shape;
pub mod sources;
pub mod spec;
pub mod template;
pub mod toml_load;

use std::ops::Range;
use std::sync::Arc;

use regex::bytes::{CaptureLocations, Regex, RegexBuilder};
use regex_syntax::hir::literal::{ExtractKind, Extractor};
use regex_syntax::hir::{Class, Hir, HirKind, Look};

pub use context::{ContextSplit, LongKeyword, SHORT_REACH_MAX};
pub use prefilter::PrefilterKind;
pub use spec::{AllowlistSpec, Condition, Precision, RegexTarget, RuleError, RuleSpec};
use template::Rng;
pub use toml_load::ConfigFile;

/// Candidates whose secret starts within this many bytes of each other are
/// compared for overlap; the less specific of two overlapping ones is
/// dropped.
pub const DEDUP_RADIUS: usize = 256;
/// A `regexTarget = "line"` allowlist sees at most this many bytes of the
/// line on each side of the match (a 200 MB line must not be copied).
pub const LINE_CLIP: usize = 256;
/// Match-length bound for a regex with unbounded repetition and no
/// `maxLength`.
pub const DEFAULT_MAX_LEN: usize = 1024;
/// No rule may reach further than this (keeps `context_len` and so the chunk
/// overlap small).
pub const MAX_RULE_LEN: usize = 16 * 1024;
/// Bytes before a regex window that look-behind assertions (`\b`) may read.
const LOOK_SLACK: usize = 8;
/// A rule whose keywords need not lie inside its match
/// ([`RuleSpec::keywords_nearby`]) looks for matches starting at most this
/// many bytes before a keyword hit or after its end.
pub const KEYWORD_NEAR: usize = 512;
/// Derived keywords must be at least this long.
const MIN_DERIVED_KEYWORD: usize = 3;

/// Index of a rule in its [`RuleSet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);

/// A reported secret. All positions index the buffer given to
/// [`RuleSet::scan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Match {
    pub rule: RuleId,
    pub start: usize,
    pub end: usize,
    pub secret_start: usize,
    pub secret_end: usize,
}

/// What a rule is, for reports and generators.
#[derive(Debug, Clone)]
pub struct RuleInfo {
    pub id: String,
    pub description: String,
    pub family: String,
    pub keywords: Vec<String>,
    pub priority: i32,
    /// Secret generator template, if the rule has one.
    pub template: Option<String>,
    /// Positive examples (`{secret}` = a generated secret).
    pub examples: Vec<String>,
    /// Negative examples (templates).
    pub counter_examples: Vec<String>,
    /// Longest match the rule can produce.
    pub max_len: usize,
    /// Every match begins with one of the keywords.
    pub anchored: bool,
    /// Where the rule came from (`built-in` or a config file).
    pub source: String,
    /// A path-only rule: it reports a file whose path matches, with no
    /// regex and an empty secret.
    pub path_only: bool,
    /// SARIF `precision`.
    pub precision: Precision,
}

#[derive(Debug)]
struct Allowlist {
    condition: Condition,
    target: RegexTarget,
    regexes: Vec<Regex>,
    /// Lowercased.
    stopwords: Vec<Vec<u8>>,
    paths: Vec<Regex>,
}

#[derive(Debug)]
struct Rule {
    info: RuleInfo,
    /// The rule's regex source.
    pattern: String,
    /// The regexes scanning runs: built when the set is compiled, or, for
    /// the built-in set, the first time a keyword of the rule is hit (most
    /// of the scanner's start-up is building regexes, and a small scan
    /// needs few of them). Plain std: rules are not part of any loom model.
    compiled: std::sync::OnceLock<Compiled>,
    secret_group: Option<usize>,
    groups: usize,
    entropy: f64,
    min_classes: u8,
    placeholder: bool,
    path: Option<Regex>,
    /// Shared: a config's global allowlist is compiled once for all rules.
    allowlists: Vec<Arc<Allowlist>>,
    anchored: bool,
    /// Every match is one byte of a class with no ASCII letter (or the
    /// buffer's start) and then a keyword: the rule runs anchored one byte
    /// before each hit, and only hits not preceded by a letter can match
    /// (the service-name rules, `(?:^|[^A-Za-z])name…`). See [`lead_form`];
    /// the two anchored patterns ([`Lead`]) are written when the regexes
    /// are built.
    lead: bool,
    /// Every match starts with a `\b` assertion (an anchored rule): a hit
    /// of a keyword that starts with a word character can match only after
    /// a byte that is not one.
    word_boundary: bool,
    span: usize,
    /// [`KEYWORD_NEAR`] for a rule with `keywords_nearby`, else 0.
    near: usize,
    /// A necessary condition for a hit to be confirmed, checked before the
    /// window search of an unanchored rule (`precheck.rs`).
    precheck: Option<precheck::Precheck>,
    min_kw: usize,
    max_kw: usize,
    /// The regex's [`shape::Shape`] came from the built-in table, without
    /// parsing it at start-up.
    shape_from_table: bool,
}

/// The two anchored forms of a rule whose matches open with one non-letter
/// byte or the haystack's start, then a keyword ([`lead_form`]).
#[derive(Debug, Clone)]
struct Lead {
    /// `^` + the leading class + the rest: run on `buf[hit - 1..]`.
    at_hit: String,
    /// `^` + the rest: run on `buf[0..]` for a hit at the buffer's start.
    at_start: String,
}

/// A rule's built regexes.
#[derive(Debug)]
struct Compiled {
    /// `re` for a rule whose keyword may sit inside the match; `^(?:re)` for
    /// an anchored rule (run at a hit at the buffer start).
    regex: Regex,
    /// For anchored rules, the regex anchored at the keyword hit:
    /// `^(?s-u:.)(?:re)` run on `buf[hit - 1..]` (the first byte gives `\b`
    /// its look-behind). The search stops where a match becomes impossible
    /// instead of looking for a later start, so a run of keywords cannot
    /// make it quadratic.
    at_hit: Option<Regex>,
}

/// One owner of a prefilter pattern: a rule and, for a case-sensitive
/// keyword, the exact bytes to check.
#[derive(Debug, Clone)]
struct Owner {
    rule: u32,
    exact: Option<Vec<u8>>,
}

/// A compiled, immutable rule set shared by every worker.
#[derive(Debug)]
pub struct RuleSet {
    rules: Vec<Rule>,
    specs: Vec<RuleSpec>,
    pf: prefilter::Prefilter,
    owners: Vec<Vec<Owner>>,
    /// Rules with a path and no regex.
    path_only: Vec<u32>,
    /// Rules with a path regex (path-only or not).
    path_rules: Vec<u32>,
    context_len: usize,
    /// `context_len` split into the short rules' and the long keywords'.
    split: ContextSplit,
    max_span: usize,
    tuning: Tuning,
    /// Regexes are built on first use (the built-in set).
    lazy: bool,
}

/// Engine settings that change no result: benchmarks and tests compare
/// them.
#[derive(Debug, Clone, Copy)]
struct Tuning {
    /// The keyword engine, when forced.
    prefilter: Option<PrefilterKind>,
    /// Keyword hits are gated by the byte before them, and lead rules run
    /// anchored (`Rule::lead`, `Rule::word_boundary`).
    context: bool,
    /// Unanchored rules check `Rule::precheck` before their window search.
    precheck: bool,
}

const TUNED: Tuning = Tuning {
    prefilter: None,
    context: true,
    precheck: true,
};

/// The built-in set's tuning: no pre-check. Its unanchored rules have short
/// windows, where the regex search the pre-check would save costs less than
/// the pre-check's NFA: perf on the standard library (README.md, "Sixteen
/// buckets and a class for `$`") put 7.8 % of the samples in the inlined
/// pre-check of `RuleSet::scan`, against about 3.5 % for every regex search
/// of the 191-rule binary, which had no pre-check. gitleaks' generic rule
/// (1 KB windows) is what the pre-check is for.
const BUILTIN: Tuning = Tuning {
    precheck: false,
    ..TUNED
};

/// Per-worker scratch space, reused across calls to [`RuleSet::scan`].
#[derive(Debug, Default)]
pub struct Scratch {
    folded: Vec<u8>,
    hits: Vec<(u32, usize)>,
    cands: Vec<Cand>,
    locs: Vec<Option<CaptureLocations>>,
    /// Capture slots of the anchored-after-a-byte variant, per rule.
    locs_at: Vec<Option<CaptureLocations>>,
    path: Option<String>,
    /// `path_off[r]`: rule `r` does not apply to the current path.
    path_off: Vec<bool>,
    path_dirty: bool,
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            path_dirty: true,
            ..Scratch::default()
        }
    }

    /// Sets the path of the file being scanned (archive members as
    /// `outer.zip!inner/file`). Rules with a `path` regex and allowlists
    /// with `paths` consult it; while it is `None`, a rule restricted to
    /// some paths does not run and no path allowlist applies.
    pub fn set_path(&mut self, path: Option<&str>) {
        if self.path.as_deref() != path {
            self.path = path.map(str::to_owned);
            self.path_dirty = true;
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cand {
    rule: u32,
    start: usize,
    end: usize,
    ss: usize,
    se: usize,
    /// Length of the keyword hit that found it (the longest, when several
    /// hits found the same candidate): a longer keyword is more specific.
    kw: usize,
}

fn rule_err(id: &str, message: impl Into<String>) -> RuleError {
    RuleError::Rule {
        id: id.to_owned(),
        message: message.into(),
    }
}

fn unsupported(id: &str, message: impl Into<String>) -> RuleError {
    RuleError::Unsupported {
        id: id.to_owned(),
        message: message.into(),
    }
}

/// The id errors in an allowlist are reported under: the rule's, or
/// `<global allowlist>` for a config's global one.
const GLOBAL_ALLOWLIST: &str = "<global allowlist>";

impl Allowlist {
    fn compile(owner: &str, a: &AllowlistSpec) -> Result<Allowlist, RuleError> {
        let owner = if a.global { GLOBAL_ALLOWLIST } else { owner };
        if a.is_empty() {
            return Err(rule_err(
                owner,
                "an allowlist has no regexes, stopwords or paths",
            ));
        }
        Ok(Allowlist {
            condition: a.condition,
            target: a.regex_target,
            regexes: compile_list(owner, "allowlist", &a.regexes)?,
            stopwords: a
                .stopwords
                .iter()
                .map(|s| s.as_bytes().to_ascii_lowercase())
                .collect(),
            paths: compile_list(owner, "allowlist path", &a.paths)?,
        })
    }
}

/// Every distinct allowlist of `specs`, compiled once (a config's global
/// allowlist is copied into each of its 200-odd rules; compiling it per
/// rule was most of the start-up of a gitleaks config).
type AllowCache = Vec<(AllowlistSpec, Arc<Allowlist>)>;

fn compile_allowlists(specs: &[RuleSpec]) -> Result<AllowCache, RuleError> {
    let mut cache: AllowCache = Vec::new();
    for s in specs {
        for a in &s.allowlists {
            if !cache.iter().any(|(k, _)| k == a) {
                cache.push((a.clone(), Arc::new(Allowlist::compile(&s.id, a)?)));
            }
        }
    }
    Ok(cache)
}

/// Compiles `pattern` the way rule regexes are compiled: bytes, ASCII
/// classes when possible, and Unicode only when the pattern needs it.
fn compile(pattern: &str) -> Result<Regex, String> {
    let mut last = String::new();
    for unicode in [false, true] {
        match RegexBuilder::new(pattern)
            .unicode(unicode)
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_DFA_CACHE)
            .build()
        {
            Ok(re) => return Ok(re),
            Err(e) => last = e.to_string(),
        }
    }
    Err(last)
}

/// Most heap the lazy DFA of one rule regex may cache, per thread (the
/// `regex` crate's `dfa_size_limit`, default 2 MiB). gitleaks' generic rule
/// (a case-insensitive alternation between bounded repetitions) thrashed a
/// 2 MiB cache: a third of the CPU of a scan went to rebuilding states.
const REGEX_DFA_CACHE: usize = 8 << 20;

/// Most heap one compiled rule regex may take (the `regex` crate's
/// `size_limit`); a bigger one is a rule error.
const REGEX_SIZE_LIMIT: usize = 32 << 20;

/// Parses `pattern` with [`compile`]'s settings (ASCII classes when
/// possible) for the literal and length analysis, without building a
/// regex. The same function serves eager and lazy rule sets, so both
/// derive the same keywords and spans from a pattern.
fn parse(pattern: &str) -> Result<Hir, String> {
    let mut last = String::new();
    for unicode in [false, true] {
        match regex_syntax::ParserBuilder::new()
            .unicode(unicode)
            .utf8(false)
            .build()
            .parse(pattern)
        {
            Ok(hir) => return Ok(hir),
            Err(e) => last = e.to_string(),
        }
    }
    Err(last)
}

fn compile_list(id: &str, what: &str, pats: &[String]) -> Result<Vec<Regex>, RuleError> {
    pats.iter()
        .map(|p| compile(p).map_err(|e| rule_err(id, format!("bad {what} regex {p:?}: {e}"))))
        .collect()
}

fn prefix_literals(hir: &Hir) -> Option<Vec<Vec<u8>>> {
    let mut ex = Extractor::new();
    ex.kind(ExtractKind::Prefix).limit_total(64);
    let seq = ex.extract(hir);
    let lits = seq.literals()?;
    if lits.is_empty() {
        return None;
    }
    let mut out: Vec<Vec<u8>> = lits
        .iter()
        .map(|l| l.as_bytes().to_ascii_lowercase())
        .collect();
    out.sort();
    out.dedup();
    Some(out)
}

fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// True when every match of `hir` starts with a word-boundary assertion
/// (`\b`, ASCII or Unicode), possibly inside a group.
fn opens_with_word_boundary(hir: &Hir) -> bool {
    match hir.kind() {
        HirKind::Look(l) => matches!(l, Look::WordAscii | Look::WordUnicode),
        HirKind::Concat(parts) => parts.first().is_some_and(opens_with_word_boundary),
        HirKind::Capture(c) => opens_with_word_boundary(&c.sub),
        HirKind::Alternation(alts) => alts.iter().all(opens_with_word_boundary),
        _ => false,
    }
}

/// Whether a rule's regex is `(?:^|C)K…`, where `C` is a class with no
/// ASCII letter and `K` spells one of its keywords (ASCII
/// case-insensitively): every match is one byte of `C` (or the haystack's
/// start) and then a keyword. Such a rule runs anchored at the byte before
/// each hit ([`Lead`]), like an anchored rule, instead of searching a
/// window around it; and a hit preceded by a letter cannot match.
fn lead_form(hir: &Hir, kws: &[Vec<u8>]) -> bool {
    lead_parts(hir).is_some_and(|(_, rest)| kws.iter().any(|k| spells_ci(rest, k)))
}

/// `C` and the parts after it, when `hir` is `(?:^|C)…` and `C` is a class
/// with no ASCII letter.
fn lead_parts(hir: &Hir) -> Option<(&Class, &[Hir])> {
    let HirKind::Concat(parts) = hir.kind() else {
        return None;
    };
    let (first, rest) = parts.split_first()?;
    let HirKind::Alternation(alts) = first.kind() else {
        return None;
    };
    let class = match (alts.first()?.kind(), alts.get(1)?.kind()) {
        (HirKind::Look(Look::Start), HirKind::Class(c))
        | (HirKind::Class(c), HirKind::Look(Look::Start))
            if alts.len() == 2 =>
        {
            c
        }
        _ => return None,
    };
    let letter_free = match class {
        Class::Bytes(b) => b
            .ranges()
            .iter()
            .all(|r| (r.start()..=r.end()).all(|c| !c.is_ascii_alphabetic())),
        Class::Unicode(u) => u
            .ranges()
            .iter()
            .all(|r| !(r.start()..=r.end()).any(|c| c.is_ascii_alphabetic())),
    };
    letter_free.then_some((class, rest))
}

impl Lead {
    /// The anchored patterns of a rule [`lead_form`] accepted: written
    /// when its regexes are built, not at start-up (cloning and printing
    /// the parse was a quarter of the built-in set's start-up).
    fn of(pattern: &str) -> Result<Lead, String> {
        let hir = parse(pattern)?;
        let (class, rest) = lead_parts(&hir).ok_or("not of the lead form")?;
        let rest = Hir::concat(rest.to_vec());
        let start = Hir::look(Look::Start);
        Ok(Lead {
            at_hit: Hir::concat(vec![start.clone(), Hir::class(class.clone()), rest.clone()])
                .to_string(),
            at_start: Hir::concat(vec![start, rest]).to_string(),
        })
    }
}

/// True when the sequence `parts` begins with literals and classes that
/// match exactly `kw` (lowercase), ASCII case-insensitively.
fn spells_ci(parts: &[Hir], kw: &[u8]) -> bool {
    // Each class may hold only the case variants of its keyword byte.
    fn only(lo: u32, hi: u32, k: u8) -> bool {
        hi - lo < 2 && (lo..=hi).all(|c| u8::try_from(c).is_ok_and(|c| c.to_ascii_lowercase() == k))
    }
    let mut i = 0;
    for h in parts {
        if i == kw.len() {
            break;
        }
        let (ok, n) = match h.kind() {
            HirKind::Literal(lit) => {
                let n = lit.0.len().min(kw.len() - i);
                let same = lit.0[..n]
                    .iter()
                    .zip(&kw[i..])
                    .all(|(a, b)| a.to_ascii_lowercase() == *b);
                (same, n)
            }
            HirKind::Class(Class::Bytes(b)) => (
                b.ranges()
                    .iter()
                    .all(|r| only(u32::from(r.start()), u32::from(r.end()), kw[i])),
                1,
            ),
            HirKind::Class(Class::Unicode(u)) => (
                u.ranges()
                    .iter()
                    .all(|r| only(u32::from(r.start()), u32::from(r.end()), kw[i])),
                1,
            ),
            _ => (false, 0),
        };
        if !ok || n == 0 {
            return false;
        }
        i += n;
    }
    i == kw.len()
}

impl Rule {
    /// Checks and prepares `spec`; builds its regexes now unless `lazy`.
    /// Its allowlists come compiled from `cache`.
    /// `precheck`: prepare the pre-check (only a set whose tuning runs it
    /// needs it; the analysis is a tenth of the built-in set's start-up).
    /// `shapes`: the built-in table ([`shape`]); a rule found there under
    /// its current regex and keywords is not parsed.
    fn compile(
        spec: &RuleSpec,
        lazy: bool,
        precheck: bool,
        shapes: Option<&shape::Table>,
        cache: &AllowCache,
    ) -> Result<Rule, RuleError> {
        let id = spec.id.as_str();
        if id.is_empty() || id.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(rule_err(id, "id must be non-empty and have no whitespace"));
        }
        let allowlists: Vec<Arc<Allowlist>> = spec
            .allowlists
            .iter()
            .map(|a| match cache.iter().find(|(k, _)| k == a) {
                Some((_, c)) => Ok(Arc::clone(c)),
                None => Allowlist::compile(id, a).map(Arc::new),
            })
            .collect::<Result<_, _>>()?;
        if spec.regex.is_empty() {
            return Rule::path_only(spec, allowlists);
        }
        // The table serves rules with keywords and no pre-check (the
        // pre-check is built from the parse).
        let known = shapes
            .filter(|_| !precheck && !spec.keywords.is_empty())
            .and_then(|t| t.get(id))
            .filter(|(k, _)| *k == shape::key(&spec.regex, &spec.keywords))
            .map(|&(_, s)| s);
        let hir = match known {
            Some(_) => None,
            None => Some(parse(&spec.regex).map_err(|e| rule_err(id, format!("bad regex: {e}")))?),
        };
        let (keywords, case_sensitive): (Vec<Vec<u8>>, bool) = if spec.keywords.is_empty() {
            let prefixes = hir.as_ref().and_then(prefix_literals);
            match prefixes {
                Some(p) if p.iter().all(|l| l.len() >= MIN_DERIVED_KEYWORD) => (p, false),
                _ => {
                    return Err(unsupported(
                        id,
                        "no keywords, and no literal prefix of 3+ bytes can be derived from the regex; add keywords",
                    ))
                }
            }
        } else {
            let kws: Vec<Vec<u8>> = spec
                .keywords
                .iter()
                .map(|k| k.as_bytes().to_vec())
                .collect();
            if let Some(k) = spec.keywords.iter().find(|k| k.is_empty()) {
                return Err(rule_err(id, format!("empty keyword {k:?}")));
            }
            (kws, spec.keywords_case_sensitive)
        };
        let lower_kws: Vec<Vec<u8>> = keywords.iter().map(|k| k.to_ascii_lowercase()).collect();
        let shape = match (known, &hir) {
            (Some(s), _) => s,
            (None, Some(h)) => shape::Shape::of(h, &lower_kws),
            (None, None) => unreachable!("a rule without a known shape is parsed"),
        };
        // Capture groups: the implicit group 0 plus the explicit ones.
        let groups = shape.groups;
        if let Some(g) = spec.secret_group {
            if g >= groups {
                return Err(rule_err(
                    id,
                    format!(
                        "secretGroup {g} but the regex has only {} capture group(s)",
                        groups - 1
                    ),
                ));
            }
        }
        let span = match (spec.max_len, shape.max_len) {
            (Some(0), _) => return Err(rule_err(id, "maxLength must be positive")),
            (Some(m), Some(r)) => m.min(r),
            (Some(m), None) => m,
            (None, Some(r)) => r,
            (None, None) => DEFAULT_MAX_LEN,
        };
        if span > MAX_RULE_LEN {
            return Err(unsupported(
                id,
                format!(
                    "matches may be {span} bytes long; the limit is {MAX_RULE_LEN} (set maxLength)"
                ),
            ));
        }
        let min_kw = keywords.iter().map(Vec::len).min().unwrap_or(0);
        let max_kw = keywords.iter().map(Vec::len).max().unwrap_or(0);
        let near = if spec.keywords_nearby && !spec.keywords.is_empty() {
            KEYWORD_NEAR
        } else {
            0
        };
        if min_kw > span && near == 0 {
            return Err(unsupported(
                id,
                format!("a keyword is longer than the longest possible match ({span} bytes)"),
            ));
        }
        let anchored = near == 0 && shape.prefix_anchored;
        let lead = near == 0 && !anchored && shape.lead_form;
        let word_boundary = anchored && shape.opens_word_boundary;
        // Anchored rules (and lead rules, while keyword context is on) run
        // anchored at the hit and never search a window.
        let precheck = match &hir {
            Some(h) if precheck && near == 0 && !anchored => {
                precheck::Precheck::new(h, &precheck::hit_bytes(&lower_kws))
            }
            _ => None,
        };
        let path = spec
            .path
            .as_deref()
            .map(|p| compile(p).map_err(|e| rule_err(id, format!("bad path regex: {e}"))))
            .transpose()?;
        if let Some(e) = spec.entropy {
            if !(0.0..=8.0).contains(&e) {
                return Err(rule_err(
                    id,
                    format!("entropy {e} is outside 0..=8 bits per byte"),
                ));
            }
        }
        if let Some(t) = &spec.template {
            template::validate(t, false).map_err(|e| rule_err(id, e.0))?;
        }
        let info = RuleInfo {
            id: spec.id.clone(),
            description: spec.description.clone(),
            family: spec.family.clone(),
            keywords: keywords
                .iter()
                .map(|k| String::from_utf8_lossy(k).into_owned())
                .collect(),
            priority: spec.priority,
            template: spec.template.clone(),
            examples: spec.examples.clone(),
            counter_examples: spec.counter_examples.clone(),
            max_len: span,
            anchored,
            source: spec.source.clone(),
            path_only: false,
            precision: spec.precision,
        };
        let _ = case_sensitive;
        let rule = Rule {
            info,
            secret_group: spec.secret_group,
            groups,
            entropy: spec.entropy.unwrap_or(0.0),
            min_classes: spec.min_char_classes,
            placeholder: spec.placeholder_check,
            path,
            allowlists,
            anchored,
            lead,
            word_boundary,
            span,
            near,
            precheck,
            min_kw,
            max_kw,
            shape_from_table: known.is_some(),
            pattern: spec.regex.clone(),
            compiled: std::sync::OnceLock::new(),
        };
        if !lazy {
            // A user's rule must fail here, before any file is read.
            rule.build_now()?;
        }
        Ok(rule)
    }

    /// A rule with a `path` and no regex: it reports every file whose path
    /// matches (gitleaks' `pkcs12-file`), once, at the file's start.
    fn path_only(spec: &RuleSpec, allowlists: Vec<Arc<Allowlist>>) -> Result<Rule, RuleError> {
        let id = spec.id.as_str();
        let Some(p) = spec.path.as_deref() else {
            return Err(rule_err(id, "missing field regex (and no path)"));
        };
        let path = compile(p).map_err(|e| rule_err(id, format!("bad path regex: {e}")))?;
        let info = RuleInfo {
            id: spec.id.clone(),
            description: spec.description.clone(),
            family: spec.family.clone(),
            keywords: Vec::new(),
            priority: spec.priority,
            template: None,
            examples: spec.examples.clone(),
            counter_examples: spec.counter_examples.clone(),
            max_len: 0,
            anchored: false,
            source: spec.source.clone(),
            path_only: true,
            precision: spec.precision,
        };
        Ok(Rule {
            info,
            pattern: String::new(),
            compiled: std::sync::OnceLock::new(),
            secret_group: None,
            groups: 1,
            entropy: 0.0,
            min_classes: 0,
            placeholder: false,
            path: Some(path),
            allowlists,
            anchored: false,
            lead: false,
            word_boundary: false,
            span: 0,
            near: 0,
            precheck: None,
            min_kw: 0,
            max_kw: 0,
            shape_from_table: false,
        })
    }

    /// The rule's regexes, built now if this is their first use.
    ///
    /// Thread-safe: `OnceLock` runs one initialiser at a time and every
    /// caller sees the one stored value; a worker that hits the same rule
    /// while another builds it waits for that build (milliseconds, once
    /// per rule per run) instead of building a copy. Only the built-in set
    /// is lazy, and `builtin_regexes_all_build_lazily` (rules_builtin.rs)
    /// builds every one of its regexes, so the `expect` cannot fire for a
    /// tested build.
    fn compiled(&self) -> &Compiled {
        self.compiled.get_or_init(|| {
            Compiled::build(&self.pattern, self.anchored, self.lead)
                .expect("only built-in rules are built lazily, and every one builds")
        })
    }

    /// Builds the rule's regexes now if they are not built yet, reporting a
    /// failure instead of panicking.
    fn build_now(&self) -> Result<(), RuleError> {
        if self.info.path_only || self.compiled.get().is_some() {
            return Ok(());
        }
        // A regex that parses but is over the size limit stays an error: the
        // user asked for that rule and must learn before the scan that it
        // cannot run (e2e_cli's `rules_file_regex_that_only_fails_to_build_…`).
        let built = Compiled::build(&self.pattern, self.anchored, self.lead)
            .map_err(|e| rule_err(&self.info.id, format!("bad regex: {e}")))?;
        for re in std::iter::once(&built.regex).chain(built.at_hit.as_ref()) {
            if re.captures_len() != self.groups {
                return Err(rule_err(
                    &self.info.id,
                    format!(
                        "regex has {} capture groups but its parse has {}",
                        re.captures_len(),
                        self.groups
                    ),
                ));
            }
        }
        // Another thread may have stored its build first: the same value.
        let _ = self.compiled.set(built);
        Ok(())
    }

    /// Forgets the lead form and the word boundary (see
    /// [`RuleSet::without_keyword_context`]); rebuilds built regexes.
    fn drop_context(&mut self) -> Result<(), RuleError> {
        if !self.lead && !self.word_boundary {
            return Ok(());
        }
        let built = self.compiled.get().is_some();
        self.lead = false;
        self.word_boundary = false;
        self.compiled = std::sync::OnceLock::new();
        if built {
            self.build_now()?;
        }
        Ok(())
    }

    /// Bytes before and after a secret start that scanning for this rule
    /// may read (see README.md, "Reach").
    fn reach(&self) -> usize {
        let window = if self.anchored || self.lead {
            self.span
        } else if self.near > 0 {
            // The hit lies within near + span of the secret start; the
            // window reaches near + span past the hit's end.
            2 * (self.near + self.span) + self.max_kw
        } else {
            2 * self.span - self.min_kw
        };
        window.max(self.span + LINE_CLIP) + LOOK_SLACK
    }

    /// The byte classes (see `prefilter`) that may precede a hit of keyword
    /// `kw` (lowercased) for this rule to match there.
    fn after_mask(&self, kw: &[u8]) -> u32 {
        if self.lead {
            prefilter::NOT_LETTER
        } else if self.word_boundary && kw.first().is_some_and(|&c| is_word_byte(c)) {
            prefilter::NOT_WORD
        } else {
            prefilter::ANY
        }
    }

    /// Specificity: larger is more specific.
    fn rank(&self, idx: u32, kw: usize) -> (i32, bool, usize, std::cmp::Reverse<u32>) {
        (
            self.info.priority,
            self.anchored,
            kw,
            std::cmp::Reverse(idx),
        )
    }
}

impl Compiled {
    /// An anchored rule only ever runs anchored at a keyword hit, so its
    /// plain regex is never built: two regexes, not three. A rule with a
    /// [`Lead`] runs its two anchored forms.
    fn build(pattern: &str, anchored: bool, lead: bool) -> Result<Compiled, String> {
        if lead {
            let l = Lead::of(pattern)?;
            Ok(Compiled {
                regex: compile(&l.at_start)?,
                at_hit: Some(compile(&l.at_hit)?),
            })
        } else if anchored {
            Ok(Compiled {
                regex: compile(&format!("^(?:{pattern})"))?,
                at_hit: Some(compile(&format!("^(?s-u:.)(?:{pattern})"))?),
            })
        } else {
            Ok(Compiled {
                regex: compile(pattern)?,
                at_hit: None,
            })
        }
    }
}

/// Compiles every spec, on up to [`COMPILE_THREADS`] threads (building
/// regexes is most of the scanner's start-up). The first error in spec
/// order wins, as if compiled one by one.
fn compile_all(
    specs: &[RuleSpec],
    lazy: bool,
    precheck: bool,
    shapes: Option<&shape::Table>,
    cache: &AllowCache,
) -> Vec<Result<Rule, RuleError>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(COMPILE_THREADS);
    if threads < 2 || specs.len() < 2 * COMPILE_CHUNK_MIN {
        return specs
            .iter()
            .map(|s| Rule::compile(s, lazy, precheck, shapes, cache))
            .collect();
    }
    let chunk = specs.len().div_ceil(threads).max(COMPILE_CHUNK_MIN);
    std::thread::scope(|s| {
        let parts: Vec<_> = specs
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|s| Rule::compile(s, lazy, precheck, shapes, cache))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut out = Vec::with_capacity(specs.len());
        for p in parts {
            out.extend(p.join().expect("compiling a rule panicked"));
        }
        out
    })
}

/// Most threads [`compile_all`] uses.
const COMPILE_THREADS: usize = 4;
/// Fewest rules per compile thread (fewer are not worth a thread).
const COMPILE_CHUNK_MIN: usize = 16;

impl RuleSet {
    /// The built-in rules (see RULES.md). Their regexes are built on first
    /// use ([`RuleSet::from_specs`] builds every regex up front; the tests
    /// check every built-in that way).
    pub fn builtin() -> RuleSet {
        RuleSet::build(builtin::specs(), BUILTIN, true).expect("built-in rules compile")
    }

    /// Compiles `specs` as a scan does with a config file: a rule that uses
    /// something the engine cannot run ([`RuleError::Unsupported`]) is left
    /// out and named in the returned warnings; any other error fails.
    pub fn from_specs_lenient(specs: Vec<RuleSpec>) -> Result<(RuleSet, Vec<String>), RuleError> {
        RuleSet::build_with(specs, TUNED, false, true)
    }

    /// The built-in rules as specs (to extend or edit before compiling).
    pub fn builtin_specs() -> Vec<RuleSpec> {
        builtin::specs()
    }

    /// Compiles `specs`. Ids must be unique.
    pub fn from_specs(specs: Vec<RuleSpec>) -> Result<RuleSet, RuleError> {
        RuleSet::build(specs, TUNED, false)
    }

    /// `lazy`: check every spec now but build its regexes on first use
    /// (only for specs known to compile: the built-ins).
    fn build(specs: Vec<RuleSpec>, tuning: Tuning, lazy: bool) -> Result<RuleSet, RuleError> {
        RuleSet::build_with(specs, tuning, lazy, false).map(|(rs, _)| rs)
    }

    /// [`build`](Self::build); `lenient` leaves out unsupported rules with
    /// a warning each instead of failing.
    fn build_with(
        specs: Vec<RuleSpec>,
        tuning: Tuning,
        lazy: bool,
        lenient: bool,
    ) -> Result<(RuleSet, Vec<String>), RuleError> {
        if specs.is_empty() {
            return Err(RuleError::Empty);
        }
        let mut seen = std::collections::HashSet::new();
        for s in &specs {
            if !seen.insert(s.id.as_str()) {
                return Err(RuleError::DuplicateId(s.id.clone()));
            }
        }
        let cache = compile_allowlists(&specs)?;
        // Only the built-in set is lazy, and only it has a shape table.
        let shapes = lazy.then(shape::builtin_table);
        let results = compile_all(&specs, lazy, tuning.precheck, shapes.as_ref(), &cache);
        let mut warnings = Vec::new();
        let mut rules = Vec::with_capacity(specs.len());
        let mut kept = Vec::with_capacity(specs.len());
        for (spec, r) in specs.into_iter().zip(results) {
            match r {
                Ok(mut rule) => {
                    if !tuning.context {
                        rule.drop_context()?;
                    }
                    rules.push(rule);
                    kept.push(spec);
                }
                Err(e @ RuleError::Unsupported { .. }) if lenient => {
                    warnings.push(format!("{e}; the rule is skipped"));
                }
                Err(e) => return Err(e),
            }
        }
        let specs = kept;
        if rules.is_empty() {
            return Err(RuleError::Empty);
        }
        let mut patterns: Vec<Vec<u8>> = Vec::new();
        // The byte classes that may precede a hit: the union over the
        // pattern's owners (a class one owner rules out may suit another).
        let mut after: Vec<u32> = Vec::new();
        let mut index = std::collections::HashMap::new();
        let mut owners: Vec<Vec<Owner>> = Vec::new();
        for (r, (rule, spec)) in rules.iter().zip(&specs).enumerate() {
            let cs = spec.keywords_case_sensitive && !spec.keywords.is_empty();
            for kw in &rule.info.keywords {
                let lower = kw.as_bytes().to_ascii_lowercase();
                let id = *index.entry(lower.clone()).or_insert_with(|| {
                    patterns.push(lower.clone());
                    after.push(0);
                    owners.push(Vec::new());
                    patterns.len() - 1
                });
                after[id] |= rule.after_mask(&lower);
                let owner = Owner {
                    rule: r as u32,
                    exact: cs.then(|| kw.as_bytes().to_vec()),
                };
                let list = &mut owners[id];
                // A rule listed twice for one pattern (keywords differing
                // only in case) must still run once per hit.
                if let Some(o) = list.iter_mut().find(|o| o.rule == owner.rule) {
                    if o.exact.is_some() && owner.exact.is_none() {
                        *o = owner;
                    }
                } else {
                    list.push(owner);
                }
            }
        }
        let pf = prefilter::Prefilter::new(patterns, after, tuning.prefilter);
        // How far a keyword hit may lie from a candidate's secret start.
        let max_span = rules
            .iter()
            .map(|r| {
                if r.near > 0 {
                    r.span + r.near + r.max_kw
                } else {
                    r.span
                }
            })
            .max()
            .unwrap_or(0);
        let context_len = DEDUP_RADIUS + rules.iter().map(Rule::reach).max().unwrap_or(0);
        let split = ContextSplit::new(&rules, context_len);
        let path_only = (0..rules.len() as u32)
            .filter(|&r| rules[r as usize].info.path_only)
            .collect();
        let path_rules = (0..rules.len() as u32)
            .filter(|&r| rules[r as usize].path.is_some())
            .collect();
        Ok((
            RuleSet {
                rules,
                specs,
                pf,
                owners,
                path_only,
                path_rules,
                context_len,
                split,
                max_span,
                tuning,
                lazy,
            },
            warnings,
        ))
    }

    /// Reads a gitleaks-format TOML rule file (see RULES.md) as the whole
    /// configuration: its rules, plus the built-in ones under
    /// `[extend] useDefault = true`.
    pub fn load_toml(text: &str) -> Result<Vec<RuleSpec>, RuleError> {
        toml_load::load(text)
    }

    /// Parses one gitleaks-format file; `source` names it in `scan rules`.
    pub fn parse_config(text: &str, source: &str) -> Result<ConfigFile, RuleError> {
        toml_load::parse(text, source)
    }

    /// Combines the rule sources of a scan (see [`toml_load::compose`]):
    /// the built-in rules unless `config` replaces them, then `extra`.
    /// Returns the specs and the warnings (unsupported parts skipped).
    pub fn compose_config(
        config: Option<ConfigFile>,
        extra: Vec<ConfigFile>,
    ) -> Result<(Vec<RuleSpec>, Vec<String>), RuleError> {
        toml_load::compose(config, extra)
    }

    /// Removes the rules with these ids (`--exclude-rule`). Rule ids of the
    /// remaining rules are renumbered.
    pub fn exclude(&mut self, ids: &[String]) -> Result<(), RuleError> {
        for id in ids {
            if !self.specs.iter().any(|s| &s.id == id) {
                return Err(RuleError::UnknownRule(id.clone()));
            }
        }
        let specs: Vec<RuleSpec> = self
            .specs
            .iter()
            .filter(|s| !ids.contains(&s.id))
            .cloned()
            .collect();
        *self = RuleSet::build(specs, self.tuning, self.lazy)?;
        Ok(())
    }

    /// Rebuilds the keyword prefilter with the given engine (benchmarks).
    #[doc(hidden)]
    pub fn with_prefilter(self, kind: PrefilterKind) -> RuleSet {
        let tuning = Tuning {
            prefilter: Some(kind),
            ..self.tuning
        };
        RuleSet::build(self.specs, tuning, self.lazy).expect("rules compiled before")
    }

    /// Rebuilds the set without keyword context: every keyword hit is
    /// confirmed whatever byte precedes it, and rules with a [`Lead`]
    /// search a window around the hit like other unanchored rules. Its
    /// findings must be the same (tests compare the two).
    #[doc(hidden)]
    pub fn without_keyword_context(self) -> RuleSet {
        let tuning = Tuning {
            context: false,
            ..self.tuning
        };
        RuleSet::build(self.specs, tuning, self.lazy).expect("rules compiled before")
    }

    /// Rebuilds the set without the pre-check of unanchored rules: every
    /// hit runs the rule's window search. Its findings must be the same
    /// (tests compare the two).
    #[doc(hidden)]
    pub fn without_precheck(self) -> RuleSet {
        let tuning = Tuning {
            precheck: false,
            ..self.tuning
        };
        RuleSet::build(self.specs, tuning, self.lazy).expect("rules compiled before")
    }

    /// Number of rules whose regex start-up did not parse, their shape
    /// read from the built-in table (tests).
    #[doc(hidden)]
    pub fn shapes_from_table(&self) -> usize {
        self.rules.iter().filter(|r| r.shape_from_table).count()
    }

    /// The built-in rules' shape table as `builtin/shapes.tsv` should hold
    /// it, computed by parsing every regex (tests).
    #[doc(hidden)]
    pub fn builtin_shapes_tsv() -> String {
        shape::table_text(&builtin::specs()).expect("built-in rules parse")
    }

    /// Number of rules with a pre-check before their window search
    /// (diagnostics and tests).
    #[doc(hidden)]
    pub fn prechecked_rules(&self) -> usize {
        self.rules.iter().filter(|r| r.precheck.is_some()).count()
    }

    /// How hits of `keyword` (lowercased) are gated by the byte before
    /// them: `any`, `not-letter` or `not-word`; `None` if it is no keyword.
    #[doc(hidden)]
    pub fn keyword_context(&self, keyword: &str) -> Option<&'static str> {
        let id = self
            .pf
            .patterns
            .iter()
            .position(|p| p == keyword.as_bytes())?;
        Some(match self.pf.after(id) {
            prefilter::NOT_LETTER => "not-letter",
            prefilter::NOT_WORD => "not-word",
            _ => "any",
        })
    }

    /// Builds every regex not built yet (a lazy set builds them on first
    /// use), reporting the first that fails. Tests use it to prove that the
    /// built-in set's lazy builds cannot fail.
    #[doc(hidden)]
    pub fn build_regexes(&self) -> Result<(), RuleError> {
        self.rules.iter().try_for_each(Rule::build_now)
    }

    /// Regexes built so far (diagnostics and tests of the lazy set).
    #[doc(hidden)]
    pub fn built_regex_count(&self) -> usize {
        self.rules
            .iter()
            .filter(|r| r.compiled.get().is_some())
            .count()
    }

    /// Number of distinct (lowercased) keywords the prefilter searches for.
    pub fn keyword_count(&self) -> usize {
        self.pf.patterns.len()
    }

    /// The distinct lowercased keywords (diagnostics).
    #[doc(hidden)]
    pub fn keyword_list(&self) -> Vec<String> {
        self.pf
            .patterns
            .iter()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect()
    }

    /// The keyword engine in use.
    pub fn prefilter_kind(&self) -> PrefilterKind {
        self.pf.kind()
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn rule(&self, id: RuleId) -> &RuleInfo {
        &self.rules[id.0 as usize].info
    }

    /// The rule with this id string.
    pub fn find(&self, id: &str) -> Option<RuleId> {
        self.rules
            .iter()
            .position(|r| r.info.id == id)
            .map(|i| RuleId(i as u32))
    }

    /// Every rule id, in order.
    pub fn ids(&self) -> impl Iterator<Item = RuleId> {
        (0..self.rules.len() as u32).map(RuleId)
    }

    /// How far (bytes) scanning may read before `owned.start` and after
    /// `owned.end`; the chunk overlap is derived from it. Covers the longest
    /// match of every rule (private keys included), the window searched
    /// around a keyword, the overlap-dedup radius and the clipped line.
    pub fn context_len(&self) -> usize {
        self.context_len
    }

    /// `context_len` split by rule (README.md, "Short and long context"):
    /// an owned range with no hit of a long rule's keyword within
    /// `context_len()` of it needs only the short context.
    pub fn context_split(&self) -> &ContextSplit {
        &self.split
    }

    /// A fresh secret for rule `id` from its template that passes the rule's
    /// own secret checks (entropy, placeholder, classes); `None` if the rule
    /// has no template or 1000 draws all failed.
    pub fn generate_secret(&self, id: RuleId, rng: &mut Rng) -> Option<String> {
        let rule = &self.rules[id.0 as usize];
        let t = rule.info.template.as_deref()?;
        (0..1000)
            .map(|_| template::render(t, rng, None))
            .find(|s| rule.secret_passes(s.as_bytes()))
    }

    /// Reports every match whose secret starts in `owned` (see the trait
    /// of chunk independence in README.md). The caller guarantees
    /// `context_len()` bytes of `buf` before `owned.start` and after
    /// `owned.end`, except where `buf` starts or ends with the file. One
    /// match per secret occurrence: of candidates whose secrets overlap, the
    /// most specific wins (priority, then anchored prefix, then longest
    /// keyword, then earlier rule). Matches are appended sorted by secret
    /// start.
    pub fn scan(
        &self,
        buf: &[u8],
        owned: Range<usize>,
        scratch: &mut Scratch,
        out: &mut Vec<Match>,
    ) {
        assert!(
            owned.start <= owned.end && owned.end <= buf.len(),
            "owned range outside the buffer"
        );
        if owned.is_empty() {
            return;
        }
        // Path-only rules are reported at offset 0 (see `report_paths`).
        self.refresh_path(scratch);
        let reach = DEDUP_RADIUS + self.max_span;
        let rs = owned.start.saturating_sub(reach);
        let re = (owned.end + reach).min(buf.len());
        scratch.hits.clear();
        let prev = rs.checked_sub(1).map(|p| buf[p]);
        if self.pf.needs_folding() {
            prefilter::fold_into(&buf[rs..re], &mut scratch.folded);
            self.pf.find_all(&scratch.folded, prev, &mut scratch.hits);
        } else {
            self.pf.find_all(&buf[rs..re], prev, &mut scratch.hits);
        }
        scratch.cands.clear();
        if scratch.locs.len() != self.rules.len() {
            scratch.locs = (0..self.rules.len()).map(|_| None).collect();
            scratch.locs_at = (0..self.rules.len()).map(|_| None).collect();
        }
        let hits = std::mem::take(&mut scratch.hits);
        for &(pid, pos) in &hits {
            let hs = rs + pos;
            let he = hs + self.pf.patterns[pid as usize].len();
            for owner in &self.owners[pid as usize] {
                if let Some(exact) = &owner.exact {
                    if &buf[hs..he] != exact.as_slice() {
                        continue;
                    }
                }
                self.confirm(owner.rule, hs, he, buf, &owned, scratch);
            }
        }
        scratch.hits = hits;
        if owned.start == 0 && !self.path_only.is_empty() {
            self.report_paths(buf, scratch, out);
        }
        self.resolve(buf, &owned, scratch, out);
    }

    /// Path-only rules report a matching file once: in the chunk that owns
    /// its first byte (no other chunk's owned range starts at 0, since every
    /// later chunk carries an overlap before its owned bytes). The match is
    /// empty, at offset 0, and sorts before every other match of the chunk.
    fn report_paths(&self, buf: &[u8], scratch: &Scratch, out: &mut Vec<Match>) {
        for &r in &self.path_only {
            if scratch.path_off[r as usize] {
                continue;
            }
            let c = Cand {
                rule: r,
                start: 0,
                end: 0,
                ss: 0,
                se: 0,
                kw: 0,
            };
            let rule = &self.rules[r as usize];
            if !rule
                .allowlists
                .iter()
                .any(|a| a.covers(buf, &c, scratch.path.as_deref()))
            {
                out.push(Match {
                    rule: RuleId(r),
                    start: 0,
                    end: 0,
                    secret_start: 0,
                    secret_end: 0,
                });
            }
        }
    }

    fn refresh_path(&self, scratch: &mut Scratch) {
        if scratch.path_off.len() != self.rules.len() {
            // Rules without a path regex stay on for good.
            scratch.path_off = vec![false; self.rules.len()];
            scratch.path_dirty = true;
        }
        if !scratch.path_dirty {
            return;
        }
        for &r in &self.path_rules {
            scratch.path_off[r as usize] = match (&self.rules[r as usize].path, &scratch.path) {
                (None, _) => false,
                (Some(re), Some(p)) => !re.is_match(p.as_bytes()),
                (Some(_), None) => true,
            };
        }
        scratch.path_dirty = false;
    }

    /// Runs rule `r`'s regex in the window around the keyword hit
    /// `hs..he` and records the matches that contain the hit.
    fn confirm(
        &self,
        r: u32,
        hs: usize,
        he: usize,
        buf: &[u8],
        owned: &Range<usize>,
        scratch: &mut Scratch,
    ) {
        let rule = &self.rules[r as usize];
        if scratch.path_off[r as usize] {
            return;
        }
        // A candidate with its secret start in owned ± DEDUP_RADIUS contains
        // its hit (or lies within `near` of it) and is at most `span` long.
        let lim = DEDUP_RADIUS + rule.span + rule.near;
        if he + lim < owned.start || hs > owned.end + lim {
            return;
        }
        if let Some(pc) = &rule.precheck {
            // Only the window search below is pre-checked (a lead rule with
            // keyword context runs anchored instead).
            // The haystack the window search below gets.
            let side = rule.span - (he - hs).min(rule.span);
            let hay_end = ((he + side).min(buf.len()) + LOOK_SLACK).min(buf.len());
            if self.tuning.precheck && !rule.lead && !pc.may_match(buf, hay_end, hs, he, rule.span)
            {
                return;
            }
        }
        let compiled = rule.compiled();
        if let Some(after) = &compiled.at_hit {
            // A lead rule's match starts at the byte before the hit.
            let ms = if rule.lead && hs > 0 { hs - 1 } else { hs };
            let we = (ms + rule.span + LOOK_SLACK).min(buf.len());
            let (re, base, locs) = if hs > 0 {
                let locs =
                    scratch.locs_at[r as usize].get_or_insert_with(|| after.capture_locations());
                (after, hs - 1, locs)
            } else {
                let locs = scratch.locs[r as usize]
                    .get_or_insert_with(|| compiled.regex.capture_locations());
                (&compiled.regex, hs, locs)
            };
            if let Some(m) = re.captures_read_at(locs, &buf[base..we], 0) {
                let me = base + m.end();
                if me >= he && me - ms <= rule.span {
                    if let Some((ss, se)) = rule.secret_span(locs, base, ms, me) {
                        scratch.cands.push(Cand {
                            rule: r,
                            start: ms,
                            end: me,
                            ss,
                            se,
                            kw: he - hs,
                        });
                    }
                }
            }
            return;
        }
        let klen = he - hs;
        let near = rule.near;
        let (ws, we) = if rule.anchored {
            (hs, (hs + rule.span).min(buf.len()))
        } else if near > 0 {
            (
                hs.saturating_sub(near + rule.span),
                (he + near + rule.span).min(buf.len()),
            )
        } else {
            let side = rule.span - klen.min(rule.span);
            (hs.saturating_sub(side), (he + side).min(buf.len()))
        };
        let hay = &buf[..(we + LOOK_SLACK).min(buf.len())];
        let locs =
            scratch.locs[r as usize].get_or_insert_with(|| compiled.regex.capture_locations());
        let mut at = ws;
        while at <= we {
            let Some(m) = compiled.regex.captures_read_at(locs, hay, at) else {
                break;
            };
            let (ms, me) = (m.start(), m.end());
            // Matches start at or before the hit (after its end + near for
            // a nearby-keyword rule).
            if ms > if near > 0 { he + near } else { hs } {
                break;
            }
            let near_hit = if near > 0 { me + near >= hs } else { me >= he };
            if near_hit && me - ms <= rule.span && (!rule.anchored || ms == hs) {
                if let Some((ss, se)) = rule.secret_span(locs, 0, ms, me) {
                    scratch.cands.push(Cand {
                        rule: r,
                        start: ms,
                        end: me,
                        ss,
                        se,
                        kw: klen,
                    });
                }
            }
            if rule.anchored {
                break;
            }
            at = if me > ms { me } else { me + 1 };
        }
    }

    fn resolve(
        &self,
        buf: &[u8],
        owned: &Range<usize>,
        scratch: &mut Scratch,
        out: &mut Vec<Match>,
    ) {
        let cands = &mut scratch.cands;
        // Of the copies of one (rule, secret) found from several hits, the
        // one from the longest keyword is kept.
        cands.sort_unstable_by_key(|c| {
            (c.ss, c.se, c.rule, std::cmp::Reverse(c.kw), c.start, c.end)
        });
        cands.dedup_by(|b, a| (a.ss, a.se, a.rule) == (b.ss, b.se, b.rule));
        let rank = |c: &Cand| {
            let rule = &self.rules[c.rule as usize];
            (
                rule.rank(c.rule, c.kw),
                std::cmp::Reverse(c.ss),
                c.se - c.ss,
            )
        };
        let overlap = |a: &Cand, b: &Cand| a.ss < b.se && b.ss < a.se;
        for i in 0..cands.len() {
            let a = cands[i];
            if !owned.contains(&a.ss) {
                continue;
            }
            let ra = rank(&a);
            let beaten = cands[..i]
                .iter()
                .rev()
                .take_while(|b| b.ss + DEDUP_RADIUS >= a.ss)
                .chain(
                    cands[i + 1..]
                        .iter()
                        .take_while(|b| b.ss <= a.ss + DEDUP_RADIUS),
                )
                .any(|b| overlap(&a, b) && rank(b) > ra);
            if beaten {
                continue;
            }
            let rule = &self.rules[a.rule as usize];
            if rule.accepts(buf, &a, scratch.path.as_deref()) {
                out.push(Match {
                    rule: RuleId(a.rule),
                    start: a.start,
                    end: a.end,
                    secret_start: a.ss,
                    secret_end: a.se,
                });
            }
        }
    }
}

impl Rule {
    /// The secret of a match `ms..me` whose capture slots are relative to
    /// `off`.
    fn secret_span(
        &self,
        locs: &CaptureLocations,
        off: usize,
        ms: usize,
        me: usize,
    ) -> Option<(usize, usize)> {
        let span = match self.secret_group {
            Some(g) => locs.get(g).map(|(s, e)| (off + s, off + e))?,
            None if self.groups > 1 => (1..self.groups)
                .filter_map(|g| locs.get(g))
                .find(|(s, e)| e > s)
                .map(|(s, e)| (off + s, off + e))?,
            None => (ms, me),
        };
        (span.1 > span.0).then_some(span)
    }

    /// The checks on the secret alone.
    fn secret_passes(&self, secret: &[u8]) -> bool {
        filters::shannon_entropy(secret) >= self.entropy
            && filters::char_classes(secret) >= self.min_classes
            && !(self.placeholder && filters::is_placeholder(secret))
    }

    fn accepts(&self, buf: &[u8], c: &Cand, path: Option<&str>) -> bool {
        let secret = &buf[c.ss..c.se];
        if !self.secret_passes(secret) {
            return false;
        }
        !self.allowlists.iter().any(|a| a.covers(buf, c, path))
    }
}

impl Allowlist {
    fn covers(&self, buf: &[u8], c: &Cand, path: Option<&str>) -> bool {
        let mut verdicts = Vec::with_capacity(3);
        if !self.regexes.is_empty() {
            let target = match self.target {
                RegexTarget::Secret => &buf[c.ss..c.se],
                RegexTarget::Match => &buf[c.start..c.end],
                RegexTarget::Line => {
                    let lo = c.start.saturating_sub(LINE_CLIP);
                    let hi = (c.end + LINE_CLIP).min(buf.len());
                    let s = memchr::memrchr(b'\n', &buf[lo..c.start]).map_or(lo, |p| lo + p + 1);
                    let e = memchr::memchr(b'\n', &buf[c.end..hi]).map_or(hi, |p| c.end + p);
                    &buf[s..e]
                }
                RegexTarget::Around => {
                    &buf[c.start.saturating_sub(LINE_CLIP)..(c.end + LINE_CLIP).min(buf.len())]
                }
            };
            verdicts.push(self.regexes.iter().any(|r| r.is_match(target)));
        }
        if !self.stopwords.is_empty() {
            let lower = buf[c.ss..c.se].to_ascii_lowercase();
            verdicts.push(
                self.stopwords
                    .iter()
                    .any(|w| memchr::memmem::find(&lower, w).is_some()),
            );
        }
        if !self.paths.is_empty() {
            verdicts
                .push(path.is_some_and(|p| self.paths.iter().any(|r| r.is_match(p.as_bytes()))));
        }
        match self.condition {
            Condition::Or => verdicts.iter().any(|&v| v),
            Condition::And => verdicts.iter().all(|&v| v),
        }
    }
}
