//! [`ObjPath`]: where a finding is, down through nested archives.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};

/// The separator shown between a file and the archive members inside it.
pub const MEMBER_SEPARATOR: char = '!';

/// The location of a scanned object: a file on disk, plus one member name per
/// level of archive nesting.
///
/// The file part is kept as the path to open (the command-line root joined
/// with the path below it, raw `OsStr` bytes), plus two cut points into it:
///
/// - **shown** (reports, rule path matching, sorting ties): the path below
///   the scan root (`scan ./repo` reports `src/a.env`); with several roots,
///   the root as given without leading `./` joined with the rest
///   (`repo/src/a.env`);
/// - **printed** (fingerprints): always the path below the root, or a file
///   root's own name, so a fingerprint does not depend on where the tree is
///   checked out or how the root was spelled.
///
/// Member names are the raw bytes the archive stores.
///
/// Shown with members joined by `!`: `outer.zip!dir/inner.txt`,
/// `a.tar.gz!b.zip!c.env`. Ordered by file bytes, then member by member, which
/// is the order reports are sorted in.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjPath {
    /// `segments[0]` is the file on disk; the rest are archive members,
    /// outermost first. Never empty.
    segments: Vec<Box<[u8]>>,
    /// Bytes of `segments[0]` not shown (the root, or a leading `./`).
    shown_from: u32,
    /// Bytes of `segments[0]` not hashed into fingerprints.
    print_from: u32,
}

impl ObjPath {
    /// A file on disk.
    pub fn from_path(path: &Path) -> Self {
        Self::from_file_bytes(path.as_os_str().as_encoded_bytes())
    }

    /// A file on disk, from the raw bytes of its path (on Unix, exactly the
    /// `OsStr` bytes).
    pub fn from_file_bytes(bytes: &[u8]) -> Self {
        Self {
            segments: vec![bytes.into()],
            shown_from: 0,
            print_from: 0,
        }
    }

    /// A file on disk at `path`, which the walk reached from the
    /// command-line `root`; `roots` is how many roots were given. See the
    /// type's docs for what is shown and what is hashed.
    pub fn below_root(path: &Path, root: &Path, roots: usize) -> Self {
        let mut p = Self::from_path(path);
        let bytes = path.as_os_str().as_encoded_bytes();
        let r = root.as_os_str().as_encoded_bytes();
        let dot_slashes = leading_dot_slashes(bytes);
        let below = if bytes.len() > r.len() && bytes.starts_with(r) {
            // A directory root: cut the root and its separator.
            let cut = if r.ends_with(b"/") {
                r.len()
            } else {
                r.len() + 1
            };
            Some(cut.min(bytes.len()))
        } else {
            None
        };
        let (shown, print) = match below {
            Some(cut) if roots == 1 => (cut, cut),
            Some(cut) => (dot_slashes, cut),
            // The root itself (a file): shown as given without `./`,
            // hashed by its name alone.
            None => (
                dot_slashes,
                bytes.iter().rposition(|b| *b == b'/').map_or(0, |i| i + 1),
            ),
        };
        p.shown_from = u32::try_from(shown).unwrap_or(0);
        p.print_from = u32::try_from(print).unwrap_or(0);
        p
    }

    /// The member `name` inside the object at `self`, which is an archive.
    pub fn member(&self, name: &[u8]) -> Self {
        let mut segments = Vec::with_capacity(self.segments.len() + 1);
        segments.extend(self.segments.iter().cloned());
        segments.push(name.into());
        Self {
            segments,
            shown_from: self.shown_from,
            print_from: self.print_from,
        }
    }

    /// The raw bytes of the on-disk file's path as reports show it (below
    /// the scan root; see the type's docs).
    pub fn file_bytes(&self) -> &[u8] {
        &self.segments[0][self.shown_from as usize..]
    }

    /// The on-disk file's path, to open it. Exact on Unix; lossy elsewhere
    /// for names that are not UTF-8.
    pub fn file_path(&self) -> Cow<'_, Path> {
        bytes_to_path(&self.segments[0])
    }

    /// The archive member names, outermost first (empty for a plain file).
    pub fn members(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.segments[1..].iter().map(|s| &**s)
    }

    /// Whether this is a member of an archive rather than a plain file.
    pub fn is_archive_member(&self) -> bool {
        self.segments.len() > 1
    }

    /// The path below the outermost file: the members joined by `!`
    /// (`dir/inner.txt`, `b.zip!c.env`). Empty for a plain file.
    pub fn member_bytes(&self) -> Vec<u8> {
        join(self.segments[1..].iter().map(|s| &**s))
    }

    /// All segments joined by `!`, the file as shown: the exact bytes the
    /// `json` and `jsonl` formats carry.
    pub fn to_bytes(&self) -> Vec<u8> {
        join(self.shown())
    }

    /// Every segment as hashed into fingerprints, file first (the file
    /// below its root): a caller that length-prefixes each one cannot
    /// confuse a `!` inside a name with the separator.
    pub fn segments(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        let first = &self.segments[0][self.print_from as usize..];
        std::iter::once(first)
            .chain(self.segments[1..].iter().map(|s| &**s))
            .collect::<Vec<_>>()
            .into_iter()
    }

    /// The on-disk file's whole path (root included) and the two cut
    /// points into it (shown from, hashed from): with [`Self::members`],
    /// everything an `ObjPath` is (`--shard` records carry it, so that
    /// `scan merge` rebuilds paths that compare and sort exactly as the
    /// scan's did).
    pub fn raw_parts(&self) -> (&[u8], u32, u32) {
        (&self.segments[0], self.shown_from, self.print_from)
    }

    /// The inverse of [`Self::raw_parts`] plus the members; `None` when a
    /// cut point is past the end of `file`.
    pub fn from_raw_parts<'a>(
        file: &[u8],
        shown_from: u32,
        print_from: u32,
        members: impl IntoIterator<Item = &'a [u8]>,
    ) -> Option<Self> {
        if shown_from as usize > file.len() || print_from as usize > file.len() {
            return None;
        }
        let mut segments: Vec<Box<[u8]>> = vec![file.into()];
        segments.extend(members.into_iter().map(Into::into));
        Some(Self {
            segments,
            shown_from,
            print_from,
        })
    }

    /// Every segment as shown, file first.
    fn shown(&self) -> impl Iterator<Item = &[u8]> + '_ {
        std::iter::once(self.file_bytes()).chain(self.segments[1..].iter().map(|s| &**s))
    }
}

/// How many bytes of leading `./` (repeated) `bytes` has.
fn leading_dot_slashes(bytes: &[u8]) -> usize {
    let mut n = 0;
    while bytes[n..].starts_with(b"./") {
        n += 2;
        while bytes.get(n) == Some(&b'/') {
            n += 1;
        }
    }
    n
}

fn join<'a>(segments: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, s) in segments.enumerate() {
        if i > 0 {
            out.push(MEMBER_SEPARATOR as u8);
        }
        out.extend_from_slice(s);
    }
    out
}

#[cfg(unix)]
fn bytes_to_path(bytes: &[u8]) -> Cow<'_, Path> {
    use std::os::unix::ffi::OsStrExt;
    Cow::Borrowed(Path::new(OsStr::from_bytes(bytes)))
}

#[cfg(not(unix))]
fn bytes_to_path(bytes: &[u8]) -> Cow<'_, Path> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Cow::Borrowed(Path::new(OsStr::new(s))),
        Err(_) => Cow::Owned(PathBuf::from(String::from_utf8_lossy(bytes).into_owned())),
    }
}

impl From<&Path> for ObjPath {
    fn from(p: &Path) -> Self {
        Self::from_path(p)
    }
}

impl From<PathBuf> for ObjPath {
    fn from(p: PathBuf) -> Self {
        Self::from_path(&p)
    }
}

/// Lossy: bytes that are not UTF-8 show as U+FFFD. Reports that must be exact
/// use [`ObjPath::to_bytes`].
impl fmt::Display for ObjPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.shown().enumerate() {
            if i > 0 {
                write!(f, "{MEMBER_SEPARATOR}")?;
            }
            write!(f, "{}", String::from_utf8_lossy(s))?;
        }
        Ok(())
    }
}

impl fmt::Debug for ObjPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjPath({:?})", self.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_members_are_joined_with_bang() {
        let p = ObjPath::from_path(Path::new("a.tar.gz"))
            .member(b"b.zip")
            .member(b"c.env");
        assert_eq!(p.to_string(), "a.tar.gz!b.zip!c.env");
        assert_eq!(p.to_bytes(), b"a.tar.gz!b.zip!c.env");
        assert_eq!(p.member_bytes(), b"b.zip!c.env");
        assert_eq!(p.file_path(), Path::new("a.tar.gz"));
        assert!(p.is_archive_member());
        assert_eq!(p.members().count(), 2);
    }

    #[test]
    fn plain_file_has_no_members() {
        let p = ObjPath::from_path(Path::new("./repo/x.env"));
        assert!(!p.is_archive_member());
        assert_eq!(p.to_string(), "./repo/x.env");
        assert!(p.member_bytes().is_empty());
    }

    #[test]
    fn ordering_is_file_first_then_members() {
        let a = ObjPath::from_file_bytes(b"a");
        let a_m = a.member(b"z");
        let b = ObjPath::from_file_bytes(b"b");
        let mut v = vec![b.clone(), a_m.clone(), a.clone()];
        v.sort();
        assert_eq!(v, vec![a, a_m, b]);
    }

    #[test]
    fn paths_are_shown_below_the_root_and_hashed_without_it() {
        let one = ObjPath::below_root(Path::new("./repo/src/a.env"), Path::new("./repo"), 1);
        assert_eq!(one.to_string(), "src/a.env");
        assert_eq!(one.file_path(), Path::new("./repo/src/a.env"));
        let abs = ObjPath::below_root(
            Path::new("/ci/b1/repo/src/a.env"),
            Path::new("/ci/b1/repo/"),
            1,
        );
        assert_eq!(abs.to_string(), "src/a.env");
        assert!(one.segments().eq(abs.segments()), "hashed the same");
        let dot = ObjPath::below_root(Path::new("./src/a.env"), Path::new("."), 1);
        assert_eq!(dot.to_string(), "src/a.env");
        let two = ObjPath::below_root(Path::new("./repo/src/a.env"), Path::new("./repo"), 2);
        assert_eq!(two.to_string(), "repo/src/a.env");
        assert!(two.segments().eq(one.segments()));
        let file = ObjPath::below_root(Path::new(".//x/a.env"), Path::new(".//x/a.env"), 1);
        assert_eq!(file.to_string(), "x/a.env");
        assert_eq!(file.segments().next(), Some(&b"a.env"[..]));
        let m = one.member(b"inner.txt");
        assert_eq!(m.to_string(), "src/a.env!inner.txt");
        assert_eq!(m.file_bytes(), b"src/a.env");
    }

    #[cfg(unix)]
    #[test]
    fn non_utf8_file_names_keep_their_exact_bytes() {
        use std::os::unix::ffi::OsStrExt;
        let raw = b"dir/caf\xe9.txt";
        let p = ObjPath::from_path(Path::new(OsStr::from_bytes(raw)));
        assert_eq!(p.file_bytes(), raw);
        assert_eq!(p.file_path().as_os_str().as_bytes(), raw);
        assert_eq!(p.to_string(), "dir/caf\u{fffd}.txt");
    }
}
