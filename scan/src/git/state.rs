//! `scan git --state FILE`: the incremental CI mode's state file.
//!
//! The file records, per ref, the commit the last *complete* scan reached:
//!
//! ```json
//! {"version":1,"refs":{"HEAD":"<40 hex>","refs/heads/main":"<40 hex>"}}
//! ```
//!
//! A run reads it before the walk ([`load`]): every commit it names that is
//! still in the repository is hidden, with everything it reaches, so only
//! the commits since are scanned. The run's own tips are written back
//! ([`StateUpdate::write`]) only after the report was written and nothing
//! was read partially: a temporary file beside FILE, flushed to disk, then
//! renamed over FILE, so a crash or an error never leaves a half-written or
//! too-new state. A missing FILE is a first run (the whole history); a FILE
//! that does not parse is an error (exit 2), never silently a full rescan.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use gix::ObjectId;

/// The state file's format version.
pub const STATE_VERSION: u64 = 1;

/// The last complete scan's tips: ref name to commit id.
pub type Tips = BTreeMap<String, ObjectId>;

/// Reads the state file at `path`: `Ok(None)` when it does not exist (a
/// first run), an error naming the file when it cannot be read or is not a
/// state file.
pub fn load(path: &Path) -> Result<Option<Tips>, String> {
    let text = match std::fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("state file {}: {e}", path.display())),
    };
    parse(&text).map(Some).map_err(|why| {
        format!(
            "state file {} is corrupt: {why} (delete it to scan the whole history again)",
            path.display()
        )
    })
}

/// Parses a state file's bytes.
pub fn parse(text: &[u8]) -> Result<Tips, String> {
    let v: serde_json::Value =
        serde_json::from_slice(text).map_err(|e| format!("not JSON ({e})"))?;
    match v.get("version").and_then(serde_json::Value::as_u64) {
        Some(STATE_VERSION) => {}
        Some(n) => {
            return Err(format!(
                "version {n}, this scan reads version {STATE_VERSION}"
            ))
        }
        None => return Err("no \"version\"".into()),
    }
    let refs = v
        .get("refs")
        .and_then(serde_json::Value::as_object)
        .ok_or("no \"refs\" object")?;
    let mut tips = Tips::new();
    for (name, id) in refs {
        let hex = id
            .as_str()
            .ok_or_else(|| format!("ref {name}: not a string"))?;
        if hex.len() != 40 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("ref {name}: '{hex}' is not a 40-digit commit id"));
        }
        let id = ObjectId::from_hex(hex.as_bytes()).map_err(|e| format!("ref {name}: {e}"))?;
        tips.insert(name.clone(), id);
    }
    Ok(tips)
}

/// Renders `tips` as a state file (one ref per line, sorted: diffs well).
pub fn render(tips: &Tips) -> String {
    let mut s = format!("{{\"version\":{STATE_VERSION},\"refs\":{{");
    for (i, (name, id)) in tips.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str("\n  ");
        s.push_str(&serde_json::Value::String(name.clone()).to_string());
        s.push_str(&format!(":\"{id}\""));
    }
    s.push_str("\n}}\n");
    s
}

/// The state a run writes when it completes: where, and its tips.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateUpdate {
    /// `--state FILE`.
    pub path: PathBuf,
    /// The refs the run walked, each with the commit it named when the walk
    /// started.
    pub tips: Tips,
}

impl StateUpdate {
    /// Writes the state atomically: a temporary file in FILE's directory
    /// (created if missing), written and synced, then renamed over FILE.
    pub fn write(&self) -> std::io::Result<()> {
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&dir)?;
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "state".into());
        let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
        let result = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(render(&self.tips).as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rendered_state_parses_back_to_the_same_tips() {
        let mut tips = Tips::new();
        tips.insert("HEAD".into(), ObjectId::from_hex(&[b'a'; 40]).unwrap());
        tips.insert(
            "refs/heads/\"odd\"".into(),
            ObjectId::from_hex(&[b'0'; 40]).unwrap(),
        );
        assert_eq!(parse(render(&tips).as_bytes()), Ok(tips));
    }

    #[test]
    fn corrupt_states_are_errors_not_empty_states() {
        for bad in [
            &b""[..],
            b"{",
            b"[]",
            b"{\"refs\":{}}",
            b"{\"version\":2,\"refs\":{}}",
            b"{\"version\":1}",
            b"{\"version\":1,\"refs\":{\"HEAD\":\"abc\"}}",
            b"{\"version\":1,\"refs\":{\"HEAD\":7}}",
        ] {
            assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
