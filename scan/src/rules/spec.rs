//! Uncompiled rule descriptions: what the built-in table, a gitleaks TOML
//! file or a test hands to [`RuleSet::from_specs`](super::RuleSet::from_specs).

/// How the criteria of one allowlist combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Condition {
    /// Any one criterion allowlists the finding (gitleaks' default).
    #[default]
    Or,
    /// Every criterion that is given must hold.
    And,
}

/// What an allowlist's `regexes` are matched against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RegexTarget {
    /// The secret (capture group).
    #[default]
    Secret,
    /// The whole regex match.
    Match,
    /// The line holding the match, clipped to [`LINE_CLIP`](super::LINE_CLIP)
    /// bytes on each side of the match.
    Line,
    /// The bytes within [`LINE_CLIP`](super::LINE_CLIP) of the match, across
    /// line ends: the neighbouring lines of a JSON or XML block. Built-in
    /// rules only (gitleaks has no such target). It reads no byte the
    /// `Line` target could not, so chunking cannot change its verdict.
    Around,
}

/// One allowlist: a finding it covers is not reported.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AllowlistSpec {
    pub description: String,
    pub condition: Condition,
    pub regex_target: RegexTarget,
    /// Regexes on the target; one match suffices.
    pub regexes: Vec<String>,
    /// Substrings of the secret (ASCII case-insensitive).
    pub stopwords: Vec<String>,
    /// Regexes on the file path (see [`Scratch::set_path`](super::Scratch::set_path)).
    pub paths: Vec<String>,
    /// A config file's global allowlist, copied into the rules it targets:
    /// an error in it is reported once, as the global allowlist's.
    pub global: bool,
}

impl AllowlistSpec {
    /// True when the allowlist has no criterion at all.
    pub fn is_empty(&self) -> bool {
        self.regexes.is_empty() && self.stopwords.is_empty() && self.paths.is_empty()
    }
}

/// An uncompiled rule.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleSpec {
    /// Unique identifier, e.g. `github-pat`.
    pub id: String,
    pub description: String,
    /// Grouping used in reports and the corpus (`cloud`, `ai`, ...).
    pub family: String,
    /// The confirming regex (Rust `regex` syntax; ASCII `\w`, `\s`, `\b`
    /// unless the pattern needs Unicode classes).
    pub regex: String,
    /// Capture group holding the secret; `None` = the first group that
    /// matched something, or the whole match when the regex has no group.
    pub secret_group: Option<usize>,
    /// Literal keywords; the rule runs only where one occurs, and a match
    /// must contain the keyword occurrence that triggered it. Empty = derive
    /// from the regex's literal prefixes.
    pub keywords: Vec<String>,
    /// Keywords match case-sensitively (gitleaks keywords never do).
    pub keywords_case_sensitive: bool,
    /// The keywords need not lie inside the match: the regex runs within
    /// [`KEYWORD_NEAR`](super::KEYWORD_NEAR) bytes of a keyword hit. Set by
    /// the TOML loader for a gitleaks rule whose keywords do not occur in
    /// its regex (gitleaks only asks for the keyword somewhere in the file).
    pub keywords_nearby: bool,
    /// Minimum Shannon entropy (bits per byte) of the secret.
    pub entropy: Option<f64>,
    /// Only files whose path matches this regex.
    pub path: Option<String>,
    pub allowlists: Vec<AllowlistSpec>,
    /// Higher wins when rules report overlapping secrets.
    pub priority: i32,
    /// Upper bound on the match length, for regexes with unbounded
    /// repetition (and to shorten bounded ones).
    pub max_len: Option<usize>,
    /// Minimum number of character classes (lower, upper, digit, other) in
    /// the secret.
    pub min_char_classes: u8,
    /// Apply the built-in placeholder test to the secret.
    pub placeholder_check: bool,
    /// Generator template for the secret (see [`super::template`]).
    pub template: Option<String>,
    /// Positive examples; `{secret}` stands for a freshly generated secret,
    /// which must be what the rule reports.
    pub examples: Vec<String>,
    /// Negative examples (template syntax allowed): must not be reported.
    pub counter_examples: Vec<String>,
    /// Where the rule came from (`built-in`, or a config file's name), for
    /// `scan rules`.
    pub source: String,
    /// SARIF `precision`: how often a finding is a real credential
    /// (`very-high`, `high`, `medium`, `low`).
    pub precision: Precision,
}

/// SARIF's `precision` property of a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    /// A self-identifying token format with a checksum or long fixed prefix.
    VeryHigh,
    /// A distinctive prefix or structure (private keys, `ghp_`, `AKIA`).
    High,
    /// Recognised by context: a vendor name in the key it is assigned to, a
    /// password in a URL.
    #[default]
    Medium,
    /// Keyword plus randomness: often right, often not.
    Low,
}

impl Precision {
    /// The SARIF spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::VeryHigh => "very-high",
            Precision::High => "high",
            Precision::Medium => "medium",
            Precision::Low => "low",
        }
    }

    /// Parses the SARIF spelling.
    pub fn parse(s: &str) -> Option<Precision> {
        Some(match s {
            "very-high" => Precision::VeryHigh,
            "high" => Precision::High,
            "medium" => Precision::Medium,
            "low" => Precision::Low,
            _ => return None,
        })
    }
}

impl RuleSpec {
    /// A spec with the given id and regex and every other field at its
    /// gitleaks default.
    pub fn new(id: impl Into<String>, regex: impl Into<String>) -> RuleSpec {
        RuleSpec {
            id: id.into(),
            description: String::new(),
            family: "custom".into(),
            regex: regex.into(),
            secret_group: None,
            keywords: Vec::new(),
            keywords_case_sensitive: false,
            keywords_nearby: false,
            entropy: None,
            path: None,
            allowlists: Vec::new(),
            priority: 0,
            max_len: None,
            min_char_classes: 0,
            placeholder_check: true,
            template: None,
            examples: Vec::new(),
            counter_examples: Vec::new(),
            source: String::new(),
            precision: Precision::Medium,
        }
    }
}

/// Why a rule set could not be built or changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleError {
    /// The TOML text is malformed or has a field of the wrong type.
    Toml(String),
    /// A rule is invalid; the message names the rule and the field.
    Rule { id: String, message: String },
    /// A rule is valid but uses something magpie's engine cannot run (no
    /// keyword can be derived, a match longer than the limit). A config
    /// loaded for a scan warns and skips it.
    Unsupported { id: String, message: String },
    /// Two rules share an id.
    DuplicateId(String),
    /// `exclude` named a rule that does not exist.
    UnknownRule(String),
    /// The set has no rule left.
    Empty,
}

impl std::fmt::Display for RuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuleError::Toml(m) => write!(f, "rule file: {m}"),
            RuleError::Rule { id, message } | RuleError::Unsupported { id, message } => {
                write!(f, "rule {id:?}: {message}")
            }
            RuleError::DuplicateId(id) => write!(f, "rule id {id:?} is defined twice"),
            RuleError::UnknownRule(id) => write!(f, "unknown rule id {id:?}"),
            RuleError::Empty => f.write_str("the rule set is empty"),
        }
    }
}

impl std::error::Error for RuleError {}
