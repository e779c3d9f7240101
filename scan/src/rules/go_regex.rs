//! Translates the Go (RE2) regex syntax that gitleaks configs are written in
//! into the syntax of Rust's `regex` crate.
//!
//! The two dialects agree on almost everything. The differences handled
//! here, each with a test below:
//!
//! 1. **A `{` that does not start a repetition is a literal in Go**
//!    (`^\$(?:\d+|{\d+})$`, `\${`, `x{,3}`); Rust rejects it. It becomes `\{`,
//!    and the `}` that closes it `\}`.
//! 2. **`[` inside a character class is a literal in Go** (`[[]`, `[a[]`),
//!    except where it opens a POSIX class `[:alpha:]`. Rust reads it as a
//!    nested class. It becomes `\[`.
//! 3. **`&&`, `--` and `~~` inside a class are literals in Go**; Rust reads
//!    them as class intersection, difference and symmetric difference. The
//!    second character is escaped.
//! 4. **`\Q...\E` quotes literal text in Go**; Rust has no such form. The
//!    quoted text is escaped character by character.
//! 5. **`\z` is Go's end of text**; Rust spells it the same way, but Go has
//!    no `\Z`, so nothing to do. `\C` (any byte) in Go becomes `(?s-u:.)`.
//!
//! Everything else is copied as is. A pattern that is still not valid Rust
//! after translation is reported by the caller with the rule's id.

/// Returns `pattern` with the Go-only syntax rewritten for Rust's `regex`.
pub fn translate(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut i = 0;
    // Inside a class: where the class began (to tell a leading `]` from a
    // closing one).
    let mut class_start: Option<usize> = None;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' {
            match chars.get(i + 1) {
                Some('Q') => {
                    i += 2;
                    while i < chars.len() && !(chars[i] == '\\' && chars.get(i + 1) == Some(&'E')) {
                        push_literal(&mut out, chars[i], class_start.is_some());
                        i += 1;
                    }
                    i += 2;
                    continue;
                }
                Some('C') if class_start.is_none() => {
                    out.push_str("(?s-u:.)");
                    i += 2;
                    continue;
                }
                Some(&n) => {
                    out.push('\\');
                    out.push(n);
                    i += 2;
                    continue;
                }
                None => {
                    out.push('\\');
                    i += 1;
                    continue;
                }
            }
        }
        match class_start {
            Some(start) => {
                let leading = i == start || (i == start + 1 && chars[start] == '^');
                match c {
                    ']' if !leading => {
                        class_start = None;
                        out.push(']');
                    }
                    '[' => {
                        if chars.get(i + 1) == Some(&':') {
                            if let Some(end) = posix_class_end(&chars, i) {
                                out.extend(&chars[i..end]);
                                i = end;
                                continue;
                            }
                        }
                        out.push_str("\\[");
                    }
                    '&' | '-' | '~' if chars.get(i + 1) == Some(&c) => {
                        out.push(c);
                        out.push('\\');
                        out.push(c);
                        i += 2;
                        continue;
                    }
                    _ => out.push(c),
                }
            }
            None => match c {
                '[' => {
                    out.push('[');
                    class_start = Some(i + 1);
                }
                '{' => match repetition_end(&chars, i) {
                    Some(end) if !out.is_empty() => {
                        out.extend(&chars[i..end]);
                        i = end;
                        continue;
                    }
                    _ => out.push_str("\\{"),
                },
                // Not the end of a repetition (those are copied whole above).
                '}' => out.push_str("\\}"),
                _ => out.push(c),
            },
        }
        i += 1;
    }
    out
}

/// Appends `c` as a literal (inside a class when `in_class`).
fn push_literal(out: &mut String, c: char, in_class: bool) {
    let special = if in_class {
        matches!(c, '\\' | ']' | '[' | '^' | '-' | '&' | '~')
    } else {
        regex_syntax::is_meta_character(c)
    };
    if special {
        out.push('\\');
    }
    out.push(c);
}

/// If `chars[at]` opens a Go repetition `{n}`, `{n,}` or `{n,m}`, the index
/// just past its `}`.
fn repetition_end(chars: &[char], at: usize) -> Option<usize> {
    let mut i = at + 1;
    let digits = |i: &mut usize| {
        let s = *i;
        while chars.get(*i).is_some_and(char::is_ascii_digit) {
            *i += 1;
        }
        *i > s
    };
    if !digits(&mut i) {
        return None;
    }
    if chars.get(i) == Some(&',') {
        i += 1;
        digits(&mut i);
    }
    (chars.get(i) == Some(&'}')).then_some(i + 1)
}

/// If `chars[at..]` is a POSIX class `[:name:]` (or `[:^name:]`), the index
/// just past it.
fn posix_class_end(chars: &[char], at: usize) -> Option<usize> {
    let mut i = at + 2;
    if chars.get(i) == Some(&'^') {
        i += 1;
    }
    let s = i;
    while chars.get(i).is_some_and(char::is_ascii_alphabetic) {
        i += 1;
    }
    (i > s && chars.get(i) == Some(&':') && chars.get(i + 1) == Some(&']')).then_some(i + 2)
}

#[cfg(test)]
mod tests {
    use super::translate;

    fn ok(go: &str, rust: &str) {
        let t = translate(go);
        assert_eq!(t, rust, "translating {go:?}");
        regex::Regex::new(&t).unwrap_or_else(|e| panic!("{t:?} does not compile: {e}"));
    }

    #[test]
    fn a_brace_that_is_not_a_repetition_becomes_a_literal() {
        ok(r"^\$(?:\d+|{\d+})$", r"^\$(?:\d+|\{\d+\})$");
        ok(r"\${[A-Z_]+}", r"\$\{[A-Z_]+\}");
        ok(r"x{,3}", r"x\{,3\}");
        ok(r"{", r"\{");
        let re = regex::Regex::new(&translate(r"^\$(?:\d+|{\d+})$")).unwrap();
        assert!(re.is_match("${12}") && re.is_match("$7") && !re.is_match("${x}"));
    }

    #[test]
    fn repetitions_are_kept() {
        ok(r"a{3}b{2,}c{1,4}", r"a{3}b{2,}c{1,4}");
        ok(r"[a-z]{32}", r"[a-z]{32}");
    }

    #[test]
    fn an_open_bracket_inside_a_class_is_a_literal_but_posix_classes_stay() {
        ok(r"[[]", r"[\[]");
        ok(r"[a[:digit:]]", r"[a[:digit:]]");
        ok(r"[[:alnum:]]{14}", r"[[:alnum:]]{14}");
        ok(r"[]a]", r"[]a]");
        ok(r"[^]a]", r"[^]a]");
        let re = regex::Regex::new(&translate(r"^[[x]+$")).unwrap();
        assert!(re.is_match("[x[") && !re.is_match("y"));
    }

    #[test]
    fn class_set_operators_of_rust_are_literals() {
        ok(r"[a&&b]", r"[a&\&b]");
        ok(r"[+--]", r"[+-\-]");
        ok(r"[~~]", r"[~\~]");
        let re = regex::Regex::new(&translate(r"^[a&&b]+$")).unwrap();
        assert!(re.is_match("a&b"));
    }

    #[test]
    fn quoted_text_is_escaped() {
        ok(r"\Qa.b{c}\E+", r"a\.b\{c\}+");
        let re = regex::Regex::new(&translate(r"^\Q$x*\E$")).unwrap();
        assert!(re.is_match("$x*") && !re.is_match("$xx"));
    }

    #[test]
    fn any_byte_escape_becomes_a_bytewise_dot() {
        assert_eq!(translate(r"a\Cb"), r"a(?s-u:.)b");
        regex::bytes::Regex::new(&translate(r"a\Cb")).unwrap();
    }

    #[test]
    fn escapes_are_copied_untouched() {
        ok(r#"value=\"(.{8,})\"\s*/>"#, r#"value=\"(.{8,})\"\s*/>"#);
        ok(r"\{\}\[", r"\{\}\[");
        ok(r"[\]\[]", r"[\]\[]");
    }
}
