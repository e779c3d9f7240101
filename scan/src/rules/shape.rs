//! What start-up needs from a rule's parsed regex, and a table of it for
//! the built-in rules.
//!
//! Parsing the built-in rules' regexes (`regex_syntax`) was two thirds of
//! the scanner's start-up: about 200 M instructions for 689 rules, where a
//! scan of an empty directory costs about 317 M in all (callgrind,
//! 2026-11-28). A rule's regex is built on its first keyword hit, but the
//! keyword filter and the context length need a few facts about every
//! rule before the first file is read: its [`Shape`]. For the built-in
//! rules those facts are computed once and kept in `builtin/shapes.tsv`,
//! each row under a hash of the rule's regex and keywords; a rule whose
//! hash does not match (a rule changed and the table was not regenerated)
//! is parsed at start-up as before, so a stale table costs time, never a
//! wrong answer. `rules_builtin.rs` fails while the table is stale and
//! rewrites it with `MAGPIE_BLESS=1`.

use std::collections::HashMap;

use regex_syntax::hir::Hir;

/// The facts about a rule's regex that start-up needs (given its
/// keywords, lowercased).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Shape {
    /// Capture groups, the implicit group 0 included.
    pub groups: usize,
    /// The longest match, when the regex bounds it.
    pub max_len: Option<usize>,
    /// Every literal prefix of the regex starts with a keyword.
    pub prefix_anchored: bool,
    /// The regex is `(?:^|C)K…` ([`super::lead_form`]).
    pub lead_form: bool,
    /// Every match starts with `\b`.
    pub opens_word_boundary: bool,
}

impl Shape {
    pub(super) fn of(hir: &Hir, lower_kws: &[Vec<u8>]) -> Shape {
        Shape {
            groups: hir.properties().explicit_captures_len() + 1,
            max_len: hir.properties().maximum_len(),
            prefix_anchored: super::prefix_literals(hir).is_some_and(|lits| {
                lits.iter()
                    .all(|l| lower_kws.iter().any(|k| l.starts_with(k)))
            }),
            lead_form: super::lead_form(hir, lower_kws),
            opens_word_boundary: super::opens_with_word_boundary(hir),
        }
    }

    /// One row of the table.
    fn row(&self, id: &str, key: u64) -> String {
        let max = self.max_len.map_or("-".to_string(), |m| m.to_string());
        let flag = |b: bool| if b { '1' } else { '0' };
        format!(
            "{id}\t{key:016x}\t{}\t{max}\t{}{}{}\n",
            self.groups,
            flag(self.prefix_anchored),
            flag(self.lead_form),
            flag(self.opens_word_boundary)
        )
    }
}

/// FNV-1a over a rule's regex and keywords: a row applies to a rule only
/// while both are unchanged.
pub(super) fn key(regex: &str, keywords: &[String]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes.iter().chain(&[0xff]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    eat(regex.as_bytes());
    for k in keywords {
        eat(k.as_bytes());
    }
    h
}

/// The built-in rules' table, as shipped.
const BUILTIN_TSV: &str = include_str!("builtin/shapes.tsv");

/// Shapes by rule id, each with the key it was computed under.
pub(super) type Table = HashMap<&'static str, (u64, Shape)>;

/// Reads the shipped table. A malformed row is skipped (its rule is
/// parsed at start-up); `rules_builtin.rs` requires the table to be
/// exactly what [`table_text`] writes.
pub(super) fn builtin_table() -> Table {
    let mut t = Table::new();
    for line in BUILTIN_TSV.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let [id, key, groups, max, flags] = f[..] else {
            continue;
        };
        let (Ok(key), Ok(groups)) = (u64::from_str_radix(key, 16), groups.parse()) else {
            continue;
        };
        let max_len = match max {
            "-" => None,
            m => match m.parse() {
                Ok(m) => Some(m),
                Err(_) => continue,
            },
        };
        let b = flags.as_bytes();
        if b.len() != 3 {
            continue;
        }
        let shape = Shape {
            groups,
            max_len,
            prefix_anchored: b[0] == b'1',
            lead_form: b[1] == b'1',
            opens_word_boundary: b[2] == b'1',
        };
        t.insert(id, (key, shape));
    }
    t
}

/// The table for `specs`, computed by parsing each regex (rules with
/// keywords and a regex only: the others are always parsed).
pub(super) fn table_text(specs: &[super::RuleSpec]) -> Result<String, String> {
    let mut out = String::new();
    for s in specs {
        if s.regex.is_empty() || s.keywords.is_empty() {
            continue;
        }
        let hir = super::parse(&s.regex).map_err(|e| format!("{}: {e}", s.id))?;
        let lower: Vec<Vec<u8>> = s
            .keywords
            .iter()
            .map(|k| k.as_bytes().to_ascii_lowercase())
            .collect();
        out += &Shape::of(&hir, &lower).row(&s.id, key(&s.regex, &s.keywords));
    }
    Ok(out)
}
