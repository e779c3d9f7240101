//! Reads gitleaks-format TOML rule files (plus magpie's extension keys; see
//! RULES.md) into [`RuleSpec`]s. Regexes are written in Go's syntax, as
//! gitleaks reads them; [`go_regex::translate`] turns them into Rust's.

use toml::{Table, Value};

use super::go_regex::translate;
use super::spec::{AllowlistSpec, Condition, RegexTarget, RuleError, RuleSpec};

const RULE_KEYS: &[&str] = &[
    "id",
    "description",
    "regex",
    "secretGroup",
    "keywords",
    "entropy",
    "path",
    "tags",
    "allowlist",
    "allowlists",
    // magpie extensions
    "family",
    "priority",
    "maxLength",
    "minCharClasses",
    "placeholderCheck",
    "keywordsCaseSensitive",
    "template",
    "examples",
    "counterExamples",
    "precision",
    // gitleaks keys magpie cannot honour: the rule is skipped with a warning
    "required",
    "skipReport",
];
const ALLOWLIST_KEYS: &[&str] = &[
    "description",
    "condition",
    "regexTarget",
    "regexes",
    "stopwords",
    "paths",
    "commits",
    "targetRules",
];
const TOP_KEYS: &[&str] = &[
    "title",
    "minVersion",
    "description",
    "extend",
    "rules",
    "allowlist",
    "allowlists",
];

fn err_in(id: &str, message: impl Into<String>) -> RuleError {
    RuleError::Rule {
        id: id.to_owned(),
        message: message.into(),
    }
}

fn check_keys(t: &Table, allowed: &[&str], owner: &str) -> Result<(), RuleError> {
    for k in t.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(err_in(
                owner,
                format!("unknown key {k:?} (known: {})", allowed.join(", ")),
            ));
        }
    }
    Ok(())
}

fn string(t: &Table, key: &str, owner: &str) -> Result<Option<String>, RuleError> {
    match t.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(err_in(
            owner,
            format!("{key} must be a string, not {}", v.type_str()),
        )),
    }
}

fn strings(t: &Table, key: &str, owner: &str) -> Result<Vec<String>, RuleError> {
    match t.get(key) {
        None => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                v => Err(err_in(
                    owner,
                    format!("{key} must hold strings, found {}", v.type_str()),
                )),
            })
            .collect(),
        Some(v) => Err(err_in(
            owner,
            format!("{key} must be an array of strings, not {}", v.type_str()),
        )),
    }
}

/// A list of regexes in Go syntax, translated.
fn go_strings(t: &Table, key: &str, owner: &str) -> Result<Vec<String>, RuleError> {
    Ok(strings(t, key, owner)?
        .iter()
        .map(|p| translate(p))
        .collect())
}

fn integer(t: &Table, key: &str, owner: &str) -> Result<Option<i64>, RuleError> {
    match t.get(key) {
        None => Ok(None),
        Some(Value::Integer(i)) => Ok(Some(*i)),
        Some(v) => Err(err_in(
            owner,
            format!("{key} must be an integer, not {}", v.type_str()),
        )),
    }
}

fn non_negative(t: &Table, key: &str, owner: &str) -> Result<Option<usize>, RuleError> {
    integer(t, key, owner)?
        .map(|i| {
            usize::try_from(i).map_err(|_| err_in(owner, format!("{key} must not be negative")))
        })
        .transpose()
}

fn boolean(t: &Table, key: &str, owner: &str) -> Result<Option<bool>, RuleError> {
    match t.get(key) {
        None => Ok(None),
        Some(Value::Boolean(b)) => Ok(Some(*b)),
        Some(v) => Err(err_in(
            owner,
            format!("{key} must be a boolean, not {}", v.type_str()),
        )),
    }
}

/// An allowlist table, and the rules it targets (global allowlists only).
fn allowlist(t: &Table, owner: &str) -> Result<(AllowlistSpec, Vec<String>), RuleError> {
    check_keys(t, ALLOWLIST_KEYS, owner)?;
    let condition = match string(t, "condition", owner)?
        .as_deref()
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        None | Some("OR") => Condition::Or,
        Some("AND") => Condition::And,
        Some(c) => {
            return Err(err_in(
                owner,
                format!("allowlist condition {c:?} is not OR or AND"),
            ))
        }
    };
    let regex_target = match string(t, "regexTarget", owner)?.as_deref() {
        None | Some("secret") => RegexTarget::Secret,
        Some("match") => RegexTarget::Match,
        Some("line") => RegexTarget::Line,
        Some(x) => {
            return Err(err_in(
                owner,
                format!("regexTarget {x:?} is not secret, match or line"),
            ))
        }
    };
    let spec = AllowlistSpec {
        description: string(t, "description", owner)?.unwrap_or_default(),
        condition,
        regex_target,
        regexes: go_strings(t, "regexes", owner)?,
        stopwords: strings(t, "stopwords", owner)?,
        paths: go_strings(t, "paths", owner)?,
        global: false,
    };
    // `commits` only makes sense for git history; an allowlist holding only
    // commits never applies to a directory scan.
    if spec.is_empty() && strings(t, "commits", owner)?.is_empty() {
        return Err(err_in(
            owner,
            "an allowlist has no regexes, stopwords or paths",
        ));
    }
    Ok((spec, strings(t, "targetRules", owner)?))
}

/// The allowlists under `key` (a table) and `key + "s"` (an array of
/// tables), skipping commit-only ones.
fn allowlists(t: &Table, owner: &str) -> Result<Vec<(AllowlistSpec, Vec<String>)>, RuleError> {
    let mut out = Vec::new();
    match t.get("allowlist") {
        None => {}
        Some(Value::Table(a)) => out.push(allowlist(a, owner)?),
        Some(v) => {
            return Err(err_in(
                owner,
                format!("allowlist must be a table, not {}", v.type_str()),
            ))
        }
    }
    match t.get("allowlists") {
        None => {}
        Some(Value::Array(items)) => {
            for v in items {
                match v {
                    Value::Table(a) => out.push(allowlist(a, owner)?),
                    v => {
                        return Err(err_in(
                            owner,
                            format!("allowlists must hold tables, found {}", v.type_str()),
                        ))
                    }
                }
            }
        }
        Some(v) => {
            return Err(err_in(
                owner,
                format!(
                    "allowlists must be an array of tables, not {}",
                    v.type_str()
                ),
            ))
        }
    }
    out.retain(|(a, _)| !a.is_empty());
    Ok(out)
}

/// One `[[rules]]` table; `Ok(Err(warning))` for a rule magpie cannot run.
fn rule(t: &Table, index: usize, source: &str) -> Result<Result<RuleSpec, String>, RuleError> {
    let id = match t.get("id") {
        Some(Value::String(s)) => s.clone(),
        _ => {
            return Err(err_in(
                &format!("#{}", index + 1),
                "missing string field id",
            ))
        }
    };
    check_keys(t, RULE_KEYS, &id)?;
    if t.contains_key("required") {
        return Ok(Err(format!(
            "rule {id:?}: composite rules ([[rules.required]]) are not supported; the rule is skipped"
        )));
    }
    if boolean(t, "skipReport", &id)?.unwrap_or(false) {
        return Ok(Err(format!(
            "rule {id:?}: skipReport (a rule used only by composite rules) is not supported; the rule is skipped"
        )));
    }
    let regex = string(t, "regex", &id)?
        .map(|r| translate(&r))
        .unwrap_or_default();
    let mut spec = RuleSpec::new(id.clone(), regex);
    spec.source = source.to_owned();
    spec.description = string(t, "description", &id)?.unwrap_or_default();
    // gitleaks: secretGroup 0 (or absent) = first non-empty group.
    spec.secret_group = non_negative(t, "secretGroup", &id)?.filter(|&g| g > 0);
    spec.keywords = strings(t, "keywords", &id)?;
    spec.entropy = match t.get("entropy") {
        None => None,
        Some(Value::Float(f)) => Some(*f),
        Some(Value::Integer(i)) => Some(*i as f64),
        Some(v) => {
            return Err(err_in(
                &id,
                format!("entropy must be a number, not {}", v.type_str()),
            ))
        }
    };
    spec.path = string(t, "path", &id)?.map(|p| translate(&p));
    spec.allowlists = allowlists(t, &id)?.into_iter().map(|(a, _)| a).collect();
    if let Some(f) = string(t, "family", &id)? {
        spec.family = f;
    }
    if let Some(p) = integer(t, "priority", &id)? {
        spec.priority = i32::try_from(p).map_err(|_| err_in(&id, "priority out of range"))?;
    }
    spec.max_len = non_negative(t, "maxLength", &id)?;
    if let Some(c) = non_negative(t, "minCharClasses", &id)? {
        spec.min_char_classes = u8::try_from(c)
            .ok()
            .filter(|&c| c <= 4)
            .ok_or_else(|| err_in(&id, "minCharClasses must be 0..=4"))?;
    }
    // gitleaks has no placeholder test (its global allowlist plays that
    // part), so a config's rules run without it unless they ask.
    spec.placeholder_check = false;
    if let Some(b) = boolean(t, "placeholderCheck", &id)? {
        spec.placeholder_check = b;
    }
    if let Some(b) = boolean(t, "keywordsCaseSensitive", &id)? {
        spec.keywords_case_sensitive = b;
    }
    if let Some(p) = string(t, "precision", &id)? {
        spec.precision = super::spec::Precision::parse(&p).ok_or_else(|| {
            err_in(
                &id,
                format!("precision {p:?} is not very-high, high, medium or low"),
            )
        })?;
    }
    spec.template = string(t, "template", &id)?;
    spec.examples = strings(t, "examples", &id)?;
    spec.counter_examples = strings(t, "counterExamples", &id)?;
    spec.keywords_nearby = keywords_outside_regex(&spec.regex, &spec.keywords);
    if spec.regex.is_empty() && spec.path.is_none() {
        return Err(err_in(
            &id,
            "missing field regex (a rule needs a regex, a path or both)",
        ));
    }
    Ok(Ok(spec))
}

/// True when no keyword occurs in the regex's text (backslashes dropped,
/// case folded): `airtable` for `\b(pat[[:alnum:]]{14}\.[a-f0-9]{64})\b`.
/// gitleaks runs such a rule on any file holding the keyword; magpie runs it
/// near each keyword hit. A keyword matched only through classes
/// (`secret_key` for `secret[_-]?key`) also counts as outside, which
/// widens the search but loses nothing.
fn keywords_outside_regex(regex: &str, keywords: &[String]) -> bool {
    if regex.is_empty() || keywords.is_empty() {
        return false;
    }
    let text: String = regex
        .chars()
        .filter(|&c| c != '\\')
        .collect::<String>()
        .to_ascii_lowercase();
    !keywords
        .iter()
        .any(|k| text.contains(&k.to_ascii_lowercase()))
}

/// A parsed config file, before it is combined with other rules.
#[derive(Debug, Clone, Default)]
pub struct ConfigFile {
    /// `[extend] useDefault`: start from the built-in rules.
    pub use_default: bool,
    /// `[extend] disabledRules`.
    pub disabled: Vec<String>,
    /// The file's `[[rules]]`, in order.
    pub rules: Vec<RuleSpec>,
    /// Global allowlists and the rules they target (empty = every rule).
    pub globals: Vec<(AllowlistSpec, Vec<String>)>,
    /// Parts of the file that are not supported and were skipped.
    pub warnings: Vec<String>,
}

/// Parses one gitleaks-format file; `source` names it in `scan rules`.
pub fn parse(text: &str, source: &str) -> Result<ConfigFile, RuleError> {
    let top: Table =
        toml::from_str(text).map_err(|e| RuleError::Toml(e.to_string().trim_end().to_owned()))?;
    check_keys(&top, TOP_KEYS, "<file>")?;
    let mut file = ConfigFile::default();
    if let Some(ext) = top.get("extend") {
        let Value::Table(ext) = ext else {
            return Err(err_in("<file>", "extend must be a table"));
        };
        check_keys(
            ext,
            &["useDefault", "disabledRules", "path", "url"],
            "<extend>",
        )?;
        if ext.contains_key("path") || ext.contains_key("url") {
            file.warnings.push(
                "[extend] path/url (extending another file) is not supported and was ignored; \
                 pass that file with --rules"
                    .into(),
            );
        }
        file.use_default = boolean(ext, "useDefault", "<extend>")?.unwrap_or(false);
        file.disabled = strings(ext, "disabledRules", "<extend>")?;
    }
    match top.get("rules") {
        None => {}
        Some(Value::Array(items)) => {
            for (i, v) in items.iter().enumerate() {
                let Value::Table(t) = v else {
                    return Err(err_in(
                        &format!("#{}", i + 1),
                        "each [[rules]] entry must be a table",
                    ));
                };
                match rule(t, i, source)? {
                    Ok(spec) if file.rules.iter().any(|r| r.id == spec.id) => {
                        return Err(RuleError::DuplicateId(spec.id))
                    }
                    Ok(spec) => file.rules.push(spec),
                    Err(w) => file.warnings.push(w),
                }
            }
        }
        Some(v) => {
            return Err(err_in(
                "<file>",
                format!("rules must be an array of tables, not {}", v.type_str()),
            ))
        }
    }
    file.globals = allowlists(&top, "<global allowlist>")?
        .into_iter()
        .map(|(mut a, targets)| {
            a.global = true;
            (a, targets)
        })
        .collect();
    Ok(file)
}

/// Combines a scan's rule sources, the way gitleaks does: `config` (from
/// `-c` or `.gitleaks.toml`) replaces the built-in rules unless its
/// `[extend] useDefault = true`; `disabledRules` removes rules; a file rule
/// with the id of an earlier rule replaces it. Each `extra` file (`--rules`)
/// adds its rules on top. Every global allowlist applies to every rule it
/// targets, whichever file the rule came from. Returns the specs and the
/// warnings of every file.
pub fn compose(
    config: Option<ConfigFile>,
    extra: Vec<ConfigFile>,
) -> Result<(Vec<RuleSpec>, Vec<String>), RuleError> {
    let mut warnings = Vec::new();
    let mut specs = match &config {
        Some(c) if !c.use_default => Vec::new(),
        _ => super::builtin::specs(),
    };
    let mut globals = Vec::new();
    for file in config.into_iter().chain(extra) {
        for d in &file.disabled {
            if specs.iter().any(|s| &s.id == d) {
                specs.retain(|s| &s.id != d);
            } else {
                warnings.push(format!("disabledRules names unknown rule {d:?}"));
            }
        }
        for spec in file.rules {
            match specs.iter().position(|s| s.id == spec.id) {
                Some(i) => specs[i] = spec,
                None => specs.push(spec),
            }
        }
        globals.extend(file.globals);
        warnings.extend(file.warnings);
    }
    for (global, targets) in globals {
        for t in &targets {
            if !specs.iter().any(|s| &s.id == t) {
                return Err(err_in(
                    "<global allowlist>",
                    format!("targetRules names unknown rule {t:?}"),
                ));
            }
        }
        for s in specs
            .iter_mut()
            .filter(|s| targets.is_empty() || targets.contains(&s.id))
        {
            s.allowlists.push(global.clone());
        }
    }
    if specs.is_empty() {
        return Err(RuleError::Empty);
    }
    Ok((specs, warnings))
}

/// One file as the whole configuration (`RuleSet::load_toml`).
pub(super) fn load(text: &str) -> Result<Vec<RuleSpec>, RuleError> {
    let file = parse(text, "<toml>")?;
    compose(Some(file), Vec::new()).map(|(specs, _)| specs)
}
