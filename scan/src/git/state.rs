//! `scan git --state FILE`: the incremental CI mode's state file.
//!
//! The file records, per ref, the commit the last *complete* scan reached,
//! and the ids of every blob the complete scans so far have handed out:
//!
//! ```json
//! {"version":2,"refs":{"HEAD":"<40 hex>","refs/heads/main":"<40 hex>"},
//!  "blobs":"<40 hex><40 hex>..."}
//! ```
//!
//! `blobs` is one string: the blob ids, sorted ascending, each once, as 40
//! hex digits each with nothing between them (40 bytes per blob in the
//! file, 20 in memory: [`BlobSet`]).
//!
//! A run reads it before the walk ([`load`]): every commit it names that is
//! still in the repository is hidden, with everything it reaches, so only
//! the commits since are scanned; and a blob in `blobs` is not scanned
//! again, whichever new commit brings it back (a revert). The run's own
//! tips and the union of the old blob set with the blobs it handed out are
//! written back ([`StateUpdate::write`]) only after the report was written
//! and nothing was read partially: a temporary file beside FILE, flushed to
//! disk, then renamed over FILE, so a crash or an error never leaves a
//! half-written or too-new state. A missing FILE is a first run (the whole
//! history); a FILE that does not parse is an error (exit 2), never
//! silently a full rescan. A version 1 FILE (refs only, written before the
//! blob set existed) is read as refs with an empty blob set: the run works
//! as it did then, and writes version 2.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use gix::ObjectId;

/// The state file's format version (what this scan writes).
pub const STATE_VERSION: u64 = 2;

/// The older version this scan still reads: refs only, no blob set.
pub const STATE_VERSION_REFS_ONLY: u64 = 1;

/// The last complete scan's tips: ref name to commit id.
pub type Tips = BTreeMap<String, ObjectId>;

/// A state file's contents.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct State {
    /// Ref name to the commit the last complete scan started from.
    pub tips: Tips,
    /// Every blob (and gitlink) id the complete scans so far handed out.
    pub blobs: BlobSet,
}

/// A set of object ids held as one sorted array: 20 bytes per SHA-1 id
/// and no per-entry overhead, looked up by binary search.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlobSet(Vec<ObjectId>);

impl BlobSet {
    /// The set of `ids` (any order, repeats allowed).
    pub fn from_unsorted(mut ids: Vec<ObjectId>) -> Self {
        ids.sort_unstable();
        ids.dedup();
        Self(ids)
    }

    /// Whether `id` is in the set.
    pub fn contains(&self, id: &ObjectId) -> bool {
        self.0.binary_search(id).is_ok()
    }

    /// How many ids the set holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// This set and `more`, as one set (a merge of two sorted arrays).
    pub fn union(&self, more: impl IntoIterator<Item = ObjectId>) -> Self {
        let more = Self::from_unsorted(more.into_iter().collect());
        let (a, b) = (&self.0, &more.0);
        let mut out = Vec::with_capacity(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            match a[i].cmp(&b[j]) {
                std::cmp::Ordering::Less => {
                    out.push(a[i]);
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    out.push(b[j]);
                    j += 1;
                }
                std::cmp::Ordering::Equal => {
                    out.push(a[i]);
                    i += 1;
                    j += 1;
                }
            }
        }
        out.extend_from_slice(&a[i..]);
        out.extend_from_slice(&b[j..]);
        Self(out)
    }

    /// The ids, ascending.
    pub fn ids(&self) -> &[ObjectId] {
        &self.0
    }
}

/// Reads the state file at `path`: `Ok(None)` when it does not exist (a
/// first run), an error naming the file when it cannot be read or is not a
/// state file.
pub fn load(path: &Path) -> Result<Option<State>, String> {
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

/// Parses a state file's bytes (version 2, or version 1: refs only).
pub fn parse(text: &[u8]) -> Result<State, String> {
    let v: serde_json::Value =
        serde_json::from_slice(text).map_err(|e| format!("not JSON ({e})"))?;
    let version = match v.get("version").and_then(serde_json::Value::as_u64) {
        Some(n @ (STATE_VERSION | STATE_VERSION_REFS_ONLY)) => n,
        Some(n) => {
            return Err(format!(
            "version {n}, this scan reads versions {STATE_VERSION_REFS_ONLY} and {STATE_VERSION}"
        ))
        }
        None => return Err("no \"version\"".into()),
    };
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
    let blobs = if version == STATE_VERSION_REFS_ONLY {
        BlobSet::default()
    } else {
        let hex = v
            .get("blobs")
            .and_then(serde_json::Value::as_str)
            .ok_or("no \"blobs\" string")?;
        parse_blobs(hex.as_bytes())?
    };
    Ok(State { tips, blobs })
}

/// The `blobs` string: 40 hex digits per id, strictly ascending.
fn parse_blobs(hex: &[u8]) -> Result<BlobSet, String> {
    const HEX: usize = 40;
    if hex.len() % HEX != 0 {
        return Err(format!(
            "\"blobs\" is {} characters, not a multiple of {HEX}",
            hex.len()
        ));
    }
    let mut ids = Vec::with_capacity(hex.len() / HEX);
    for (i, digits) in hex.chunks_exact(HEX).enumerate() {
        if !digits.iter().all(u8::is_ascii_hexdigit) {
            return Err(format!("blob {i} of \"blobs\" is not 40 hex digits"));
        }
        let id = ObjectId::from_hex(digits).map_err(|e| format!("blob {i}: {e}"))?;
        if ids.last().is_some_and(|last: &ObjectId| *last >= id) {
            return Err(format!("\"blobs\" is not sorted at blob {i}"));
        }
        ids.push(id);
    }
    Ok(BlobSet(ids))
}

/// Renders a state file: one ref per line, sorted (diffs well), then the
/// blob set on one line.
pub fn render(state: &State) -> String {
    let mut s = format!("{{\"version\":{STATE_VERSION},\"refs\":{{");
    for (i, (name, id)) in state.tips.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str("\n  ");
        s.push_str(&serde_json::Value::String(name.clone()).to_string());
        s.push_str(&format!(":\"{id}\""));
    }
    s.push_str("\n},\n\"blobs\":\"");
    s.reserve(state.blobs.len() * 40 + 4);
    for id in state.blobs.ids() {
        let _ = write!(s, "{id}");
    }
    s.push_str("\"}\n");
    s
}

/// Where the history walk leaves the blob set for the state file: the old
/// set united with the blobs this run handed out, put there when the walk
/// is exhausted ([`StateUpdate::write`] reads it after the executor is
/// joined).
pub type BlobSlot = Arc<Mutex<Option<BlobSet>>>;

/// The state a run writes when it completes: where, its tips and its blob
/// set.
#[derive(Clone, Debug)]
pub struct StateUpdate {
    /// `--state FILE`.
    pub path: PathBuf,
    /// The refs the run walked, each with the commit it named when the walk
    /// started.
    pub tips: Tips,
    /// The walk's blob set (the set read united with the blobs this run
    /// handed out), put there when the walk finished; `None` until then.
    pub blobs: BlobSlot,
}

impl StateUpdate {
    /// Writes the state atomically: a temporary file in FILE's directory
    /// (created if missing), written and synced, then renamed over FILE.
    /// A walk that did not finish (only an aborted run has one, and it
    /// writes no state) is an error: no state is written.
    pub fn write(&self) -> std::io::Result<()> {
        let state = self.state().ok_or_else(|| {
            std::io::Error::other("the history walk did not finish: the state is not advanced")
        })?;
        let rendered = render(&state);
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
            f.write_all(rendered.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }

    /// What [`write`](Self::write) writes: the tips and the walk's blob
    /// set; `None` while the walk has not finished.
    pub fn state(&self) -> Option<State> {
        let blobs = self
            .blobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()?;
        Some(State {
            tips: self.tips.clone(),
            blobs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(hex: u8) -> ObjectId {
        ObjectId::from_hex(&[hex; 40]).unwrap()
    }

    #[test]
    fn a_rendered_state_parses_back_to_the_same_tips_and_blobs() {
        let mut tips = Tips::new();
        tips.insert("HEAD".into(), id(b'a'));
        tips.insert("refs/heads/\"odd\"".into(), id(b'0'));
        for blobs in [
            BlobSet::default(),
            BlobSet::from_unsorted(vec![id(b'f'), id(b'1'), id(b'9'), id(b'1')]),
        ] {
            let state = State {
                tips: tips.clone(),
                blobs,
            };
            assert_eq!(parse(render(&state).as_bytes()), Ok(state));
        }
    }

    #[test]
    fn a_version_1_state_reads_as_its_refs_with_no_blobs() {
        let hex = "a".repeat(40);
        let v1 = format!("{{\"version\":1,\"refs\":{{\"HEAD\":\"{hex}\"}}}}");
        let state = parse(v1.as_bytes()).unwrap();
        assert_eq!(state.tips["HEAD"], id(b'a'));
        assert!(state.blobs.is_empty());
    }

    #[test]
    fn the_union_of_two_blob_sets_is_sorted_and_holds_each_id_once() {
        let a = BlobSet::from_unsorted(vec![id(b'3'), id(b'1'), id(b'5')]);
        let u = a.union([id(b'4'), id(b'1'), id(b'9'), id(b'4')]);
        let want: Vec<ObjectId> = [b'1', b'3', b'4', b'5', b'9'].map(id).to_vec();
        assert_eq!(u.ids(), &want[..]);
        assert!(u.contains(&id(b'4')) && !u.contains(&id(b'2')));
        assert_eq!(BlobSet::default().union([]).len(), 0);
    }

    #[test]
    fn corrupt_states_are_errors_not_empty_states() {
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let refs = format!("\"refs\":{{\"HEAD\":\"{a}\"}}");
        let blobs = |s: &str| format!("{{\"version\":2,{refs},\"blobs\":\"{s}\"}}");
        let owned = [
            blobs(&format!("{b}{a}")),           // not sorted
            blobs(&format!("{a}{a}")),           // an id twice
            blobs(&a[..39]),                     // not a multiple of 40
            blobs(&format!("{}g", &a[..39])),    // not hex
            format!("{{\"version\":2,{refs}}}"), // no blob set
            format!("{{\"version\":2,{refs},\"blobs\":[]}}"),
        ];
        let fixed: [&[u8]; 8] = [
            b"",
            b"{",
            b"[]",
            b"{\"refs\":{}}",
            b"{\"version\":3,\"refs\":{},\"blobs\":\"\"}",
            b"{\"version\":1}",
            b"{\"version\":1,\"refs\":{\"HEAD\":\"abc\"}}",
            b"{\"version\":1,\"refs\":{\"HEAD\":7}}",
        ];
        for bad in owned.iter().map(String::as_bytes).chain(fixed) {
            assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        // The same shape with a sorted set parses: the cases above fail for
        // the reason named, not for their shape.
        assert!(parse(blobs(&format!("{a}{b}")).as_bytes()).is_ok());
    }
}
