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
/// The file part is the path as given on the command line joined with the
/// file's path below it, as raw `OsStr` bytes (so `./repo/a.env` stays
/// `./repo/a.env`). Member names are the raw bytes the archive stores.
///
/// Shown with members joined by `!`: `outer.zip!dir/inner.txt`,
/// `a.tar.gz!b.zip!c.env`. Ordered by file bytes, then member by member, which
/// is the order reports are sorted in.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjPath {
    /// `segments[0]` is the file on disk; the rest are archive members,
    /// outermost first. Never empty.
    segments: Vec<Box<[u8]>>,
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
        }
    }

    /// The member `name` inside the object at `self`, which is an archive.
    pub fn member(&self, name: &[u8]) -> Self {
        let mut segments = Vec::with_capacity(self.segments.len() + 1);
        segments.extend(self.segments.iter().cloned());
        segments.push(name.into());
        Self { segments }
    }

    /// The raw bytes of the on-disk file's path.
    pub fn file_bytes(&self) -> &[u8] {
        &self.segments[0]
    }

    /// The on-disk file's path. Exact on Unix; lossy elsewhere for names that
    /// are not UTF-8.
    pub fn file_path(&self) -> Cow<'_, Path> {
        bytes_to_path(self.file_bytes())
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
        join(&self.segments[1..])
    }

    /// All segments joined by `!`: the exact bytes the `json` and `jsonl`
    /// formats carry.
    pub fn to_bytes(&self) -> Vec<u8> {
        join(&self.segments)
    }

    /// Every segment, file first, for hashing: a caller that length-prefixes
    /// each one cannot confuse a `!` inside a name with the separator.
    pub fn segments(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.segments.iter().map(|s| &**s)
    }
}

fn join(segments: &[Box<[u8]>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, s) in segments.iter().enumerate() {
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
        for (i, s) in self.segments.iter().enumerate() {
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
