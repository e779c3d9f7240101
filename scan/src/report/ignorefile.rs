//! `.gitleaksignore`: findings a team has accepted, one per line, in
//! gitleaks' fingerprint format.
//!
//! A line is one of
//!
//! - `path:rule:line`, gitleaks' fingerprint of a directory-scan finding:
//!   the path as the report shows it (below the scan root, archive members
//!   joined with `!`), the rule id and the 1-based line;
//! - `commit:path:rule:line`, gitleaks' fingerprint of a git-history
//!   finding: it matches a `scan git` finding of that commit (the full
//!   40-digit id, or a prefix of at least 7 digits), path, rule and line; a
//!   directory scan's findings have no commit, so it matches none of them.
//!   A `path:rule:line` entry matches a history finding at that path in
//!   any commit, as in gitleaks;
//! - a magpie fingerprint (16 hex digits), as the reports print it.
//!
//! Blank lines and lines starting with `#` are ignored, and so is a comment
//! after the entry (` # why`). Paths may themselves contain `:`, so the rule
//! and the line are taken from the right.

use std::collections::HashSet;
use std::path::Path;

use super::finding::Finding;

/// The file gitleaks reads at the scan root, and so do we.
pub const IGNORE_FILE_NAME: &str = ".gitleaksignore";

/// The largest ignore file read: 64 MiB.
pub const IGNORE_FILE_MAX_BYTES: u64 = 64 << 20;

/// The entries of one or more ignore files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IgnoreFile {
    /// `(path, rule, line)` of `path:rule:line` entries.
    located: HashSet<(Vec<u8>, String, u64)>,
    /// magpie fingerprints.
    fingerprints: HashSet<String>,
    /// `commit:path:rule:line` entries (they match no directory finding).
    commits: Vec<(String, Vec<u8>, String, u64)>,
}

fn is_hex(s: &str, lo: usize, hi: usize) -> bool {
    (lo..=hi).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

impl IgnoreFile {
    /// Parses the text of an ignore file.
    pub fn parse(text: &str) -> Self {
        let mut f = IgnoreFile::default();
        for raw in text.lines() {
            let mut line = raw.trim();
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            if let Some(i) = line.find(" #").or_else(|| line.find("\t#")) {
                line = line[..i].trim_end();
            }
            if is_hex(line, 16, 16) {
                f.fingerprints.insert(line.to_ascii_lowercase());
                continue;
            }
            let mut parts = line.rsplitn(3, ':');
            let (Some(num), Some(rule), Some(rest)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let Ok(num) = num.parse::<u64>() else {
                continue;
            };
            // `commit:path`: a 7-40 hex digit commit before the first `:`.
            if let Some((commit, _)) = rest.split_once(':') {
                if is_hex(commit, 7, 40) {
                    let path = rest.as_bytes()[commit.len() + 1..].to_vec();
                    f.commits
                        .push((commit.to_ascii_lowercase(), path, rule.to_owned(), num));
                    continue;
                }
            }
            f.located
                .insert((rest.as_bytes().to_vec(), rule.to_owned(), num));
        }
        f
    }

    /// Reads `path`. A missing file is an empty one when `optional` (the
    /// implicit `.gitleaksignore` at the root); otherwise an error.
    pub fn load(path: &Path, optional: bool) -> Result<Self, String> {
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if optional && e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Self::default())
            }
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        if !meta.is_file() || meta.len() > IGNORE_FILE_MAX_BYTES {
            return Err(format!(
                "{}: not a regular file of at most {IGNORE_FILE_MAX_BYTES} bytes",
                path.display()
            ));
        }
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Self::parse(&String::from_utf8_lossy(&bytes)))
    }

    /// Adds the entries of `other`.
    pub fn extend(&mut self, other: IgnoreFile) {
        self.located.extend(other.located);
        self.fingerprints.extend(other.fingerprints);
        self.commits.extend(other.commits);
    }

    /// Entries read, of every form.
    pub fn len(&self) -> usize {
        self.located.len() + self.fingerprints.len() + self.commits.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `f` is listed (by `path:rule:line` or by fingerprint).
    pub fn covers(&self, f: &Finding) -> bool {
        self.fingerprints.contains(&f.fingerprint)
            || self
                .located
                .contains(&(f.path.to_bytes(), f.rule.clone(), f.line))
            || f.commit.as_ref().is_some_and(|c| {
                let path = f.path.to_bytes();
                self.commits.iter().any(|(id, p, rule, line)| {
                    c.id.starts_with(id.as_str())
                        && *p == path
                        && *rule == f.rule
                        && *line == f.line
                })
            })
    }

    /// Drops the findings listed; returns how many.
    pub fn filter(&self, findings: &mut Vec<Finding>) -> u64 {
        if self.is_empty() {
            return 0;
        }
        let before = findings.len();
        findings.retain(|f| !self.covers(f));
        (before - findings.len()) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::ObjPath;

    fn finding(path: &str, rule: &str, line: u64) -> Finding {
        let mut f = Finding::new(
            rule,
            "",
            ObjPath::from_file_bytes(path.as_bytes()),
            line,
            1,
            0,
            b"s".to_vec(),
        );
        f.fingerprint = "ffffffffffffffff".into();
        f
    }

    #[test]
    fn every_gitleaks_form_parses_and_matches_what_it_names() {
        let f = IgnoreFile::parse(
            "# accepted\n\
             \n\
             src/a.env:github-pat:3\n\
             a:b/c.txt:generic-api-key:10 # a colon in the path\n\
             0123abc:src/x.env:github-pat:1\n\
             00112233AABBCCDD\n\
             garbage without colons\n",
        );
        assert_eq!(f.len(), 4);
        assert!(f.covers(&finding("src/a.env", "github-pat", 3)));
        assert!(!f.covers(&finding("src/a.env", "github-pat", 4)));
        assert!(f.covers(&finding("a:b/c.txt", "generic-api-key", 10)));
        let mut by_print = finding("elsewhere", "r", 1);
        by_print.fingerprint = "00112233aabbccdd".into();
        assert!(f.covers(&by_print));
        let mut commit_only = finding("src/x.env", "github-pat", 1);
        commit_only.fingerprint = "ffff".into();
        assert!(
            !f.covers(&commit_only),
            "a commit entry matches no dir finding"
        );
    }
}
