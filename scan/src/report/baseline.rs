//! `--baseline FILE`: fingerprints from an earlier report, not reported again.

use std::collections::HashSet;
use std::path::Path;

use super::error::BaselineError;
use super::finding::Finding;
use super::json::{parse_stream, JsonValue};

/// The largest baseline file read, in bytes. A report of a million findings
/// is about 300 MB; anything bigger is not one of ours.
pub const BASELINE_MAX_BYTES: u64 = 1 << 30;

/// A set of fingerprints to leave out of a report.
#[derive(Clone, Debug, Default)]
pub struct Baseline {
    fingerprints: HashSet<String>,
}

impl Baseline {
    /// Loads the fingerprints of an earlier `json` or `jsonl` report.
    ///
    /// A missing or unreadable file, a file that is not JSON, and JSON that is
    /// not one of our reports (e.g. SARIF) are errors; an empty file is a
    /// valid `jsonl` report with no findings.
    pub fn load(path: &Path) -> Result<Self, BaselineError> {
        let err = |reason: String| BaselineError {
            path: path.to_path_buf(),
            reason,
        };
        let meta = std::fs::metadata(path).map_err(|e| err(e.to_string()))?;
        if meta.is_dir() {
            return Err(err("is a directory".into()));
        }
        if meta.len() > BASELINE_MAX_BYTES {
            return Err(err(format!(
                "{} bytes is larger than the {} byte limit",
                meta.len(),
                BASELINE_MAX_BYTES
            )));
        }
        let bytes = std::fs::read(path).map_err(|e| err(e.to_string()))?;
        Self::parse(&bytes).map_err(err)
    }

    /// Parses the bytes of a `json` or `jsonl` report.
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let values = parse_stream(bytes).map_err(|e| format!("not valid JSON: {e}"))?;
        let mut fingerprints = HashSet::new();
        for (i, v) in values.iter().enumerate() {
            if let Some(findings) = v.get("findings") {
                // A `json` report.
                let list = findings
                    .as_array()
                    .ok_or("\"findings\" is not an array".to_string())?;
                for (j, f) in list.iter().enumerate() {
                    fingerprints.insert(fingerprint_of(f).ok_or_else(|| {
                        format!("finding {} has no string \"fingerprint\"", j + 1)
                    })?);
                }
            } else if v.get("fingerprint").is_some() {
                // One line of a `jsonl` report.
                fingerprints.insert(fingerprint_of(v).ok_or_else(|| {
                    format!("value {} has a \"fingerprint\" that is not a string", i + 1)
                })?);
            } else if matches!(
                v.get("type").and_then(JsonValue::as_str),
                Some("skipped" | "summary")
            ) {
                // A skipped-entry line of a `jsonl` report, or the summary
                // record of a `--shard` run's: no finding.
            } else if v.get("runs").is_some() {
                return Err("a SARIF log cannot be a baseline".into());
            } else {
                return Err(format!(
                    "value {} is neither a json report ({{\"findings\": ...}}) nor a jsonl finding",
                    i + 1
                ));
            }
        }
        Ok(Self { fingerprints })
    }

    /// A baseline holding `fingerprints`.
    pub fn from_fingerprints(fingerprints: impl IntoIterator<Item = String>) -> Self {
        Self {
            fingerprints: fingerprints.into_iter().collect(),
        }
    }

    /// Number of distinct fingerprints.
    pub fn len(&self) -> usize {
        self.fingerprints.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.fingerprints.is_empty()
    }

    /// Whether `fingerprint` is in the baseline.
    pub fn contains(&self, fingerprint: &str) -> bool {
        self.fingerprints.contains(fingerprint)
    }

    /// Drops the findings whose fingerprint is in the baseline (run after
    /// [`super::finalize`]) and returns how many were dropped.
    pub fn filter(&self, findings: &mut Vec<Finding>) -> u64 {
        let before = findings.len();
        findings.retain(|f| !self.contains(&f.fingerprint));
        (before - findings.len()) as u64
    }
}

fn fingerprint_of(v: &JsonValue) -> Option<String> {
    v.get("fingerprint")?.as_str().map(str::to_owned)
}
