//! `scan rules`: the rules a scan would run, with where each came from.

use std::io::{self, Write};

use super::RuleSet;

/// Writes one block per rule (`text`) or one JSON object per line
/// (`json`): id, description, keywords, and source (`built-in` or the
/// config file), then the warnings of loading.
pub fn write_list(rules: &RuleSet, json: bool, out: &mut dyn Write) -> io::Result<()> {
    for id in rules.ids() {
        let r = rules.rule(id);
        if json {
            let v = serde_json::json!({
                "id": r.id,
                "description": r.description,
                "keywords": r.keywords,
                "source": r.source,
                "pathOnly": r.path_only,
                "precision": r.precision.as_str(),
            });
            writeln!(out, "{v}")?;
        } else {
            writeln!(
                out,
                "{}  [{}, precision {}]",
                r.id,
                r.source,
                r.precision.as_str()
            )?;
            if !r.description.is_empty() {
                writeln!(out, "    {}", r.description)?;
            }
            if r.path_only {
                writeln!(out, "    path-only (reports files by name)")?;
            } else {
                writeln!(out, "    keywords: {}", r.keywords.join(", "))?;
            }
        }
    }
    if !json {
        writeln!(out, "{} rules", rules.len())?;
    }
    Ok(())
}
