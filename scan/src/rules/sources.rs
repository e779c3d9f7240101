//! Where a scan's rules come from: the built-in set, a gitleaks config
//! (`-c`, `GITLEAKS_CONFIG`, or `.gitleaks.toml` at the scan root), and extra
//! rule files (`--rules`).

use std::path::{Path, PathBuf};

use super::{RuleError, RuleSet};

/// The name of the config file picked up at the root of a scanned directory.
pub const ROOT_CONFIG: &str = ".gitleaks.toml";
/// The environment variable naming a config file (as gitleaks reads it).
pub const CONFIG_ENV: &str = "GITLEAKS_CONFIG";

/// The config file a scan uses: `explicit` (`-c`), else the file named by
/// `GITLEAKS_CONFIG`, else `.gitleaks.toml` in the scanned directory when a
/// single directory is scanned.
pub fn find_config(explicit: Option<&Path>, roots: &[PathBuf]) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os(CONFIG_ENV).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    match roots {
        [root] if root.is_dir() => {
            let p = root.join(ROOT_CONFIG);
            p.is_file().then_some(p)
        }
        _ => None,
    }
}

/// Loads the rules of a scan: the built-in set when there is neither a
/// config nor an extra file, else the files composed as gitleaks does (see
/// `RuleSet::compose_config`). Rules the engine cannot run are left out
/// with a warning each; the warnings are returned. Errors name the file.
pub fn load(config: Option<&Path>, extra: &[PathBuf]) -> Result<(RuleSet, Vec<String>), String> {
    if config.is_none() && extra.is_empty() {
        return Ok((RuleSet::builtin(), Vec::new()));
    }
    let read = |path: &Path| {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| format!("{name}: {e}"))?;
        RuleSet::parse_config(&text, &name).map_err(|e| format!("{name}: {e}"))
    };
    let primary = config.map(read).transpose()?;
    let extras = extra
        .iter()
        .map(|p| read(p))
        .collect::<Result<Vec<_>, _>>()?;
    let single = match (config, extra) {
        (Some(c), []) => Some(c.display().to_string()),
        (None, [e]) => Some(e.display().to_string()),
        _ => None,
    };
    let (specs, mut warnings) = RuleSet::compose_config(primary, extras)
        .map_err(|e| with_file(&e, None, single.as_deref()))?;
    let sources: Vec<(String, String)> = specs
        .iter()
        .map(|s| (s.id.clone(), s.source.clone()))
        .collect();
    let (rules, more) = RuleSet::from_specs_lenient(specs)
        .map_err(|e| with_file(&e, Some(&sources), single.as_deref()))?;
    warnings.extend(more);
    Ok((rules, warnings))
}

/// `e` prefixed with the file it comes from: the failing rule's source, or
/// the only file loaded.
fn with_file(e: &RuleError, sources: Option<&[(String, String)]>, single: Option<&str>) -> String {
    let id = match e {
        RuleError::Rule { id, .. } | RuleError::Unsupported { id, .. } => Some(id.as_str()),
        RuleError::DuplicateId(id) => Some(id.as_str()),
        _ => None,
    };
    let from_rule = id.and_then(|id| {
        sources?
            .iter()
            .find(|(i, s)| i == id && s != "built-in")
            .map(|(_, s)| s.as_str())
    });
    match from_rule.or(single) {
        Some(file) => format!("{file}: {e}"),
        None => e.to_string(),
    }
}
