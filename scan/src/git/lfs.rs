//! Git LFS pointers in history: a blob that is an LFS pointer stands for a
//! file whose bytes live outside the object database. When the object is
//! in the repository's local LFS store (`<common dir>/lfs/objects/ab/cd/
//! <oid>`, what `git lfs fetch` fills), its bytes are scanned in the
//! pointer's place, attributed to the commit that introduced the pointer;
//! when it is not, the file is named as skipped (`lfs_object_missing`),
//! since no byte of it was read (README.md, "Git LFS").
//!
//! The pointer format is git-lfs' specification v1 (`docs/spec.md` in the
//! git-lfs repository): at most [`MAX_POINTER_BYTES`], `key value` lines
//! ending in `\n`, `version` first, then the other keys sorted; `oid` is
//! `sha256:` and 64 lowercase hex digits, `size` a decimal byte count.

use std::path::{Path, PathBuf};

/// git-lfs never writes a pointer of this size or more, and does not read
/// a larger file as one (the specification's limit).
pub const MAX_POINTER_BYTES: usize = 1024;

/// The `version` lines git-lfs reads: the current one and the pre-1.0
/// ("hawser") one.
const VERSIONS: [&[u8]; 2] = [
    b"version https://git-lfs.github.com/spec/v1",
    b"version https://hawser.github.com/spec/v1",
];

/// The repository's local LFS store, `<common dir>/lfs/objects` (shared by
/// linked worktrees, like the objects; git-lfs' `LocalMediaDir`). An
/// `lfs.storage` setting that moves it is not read.
pub fn store(repo: &gix::Repository) -> PathBuf {
    repo.common_dir().join("lfs").join("objects")
}

/// What a pointer names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pointer {
    /// The object's SHA-256, 64 lowercase hex digits.
    pub oid: String,
    /// The object's size in bytes.
    pub size: u64,
}

impl Pointer {
    /// Where `git lfs fetch` stores the object under `lfs_objects`
    /// (`<common dir>/lfs/objects`): `ab/cd/abcd...`.
    pub fn path_in(&self, lfs_objects: &Path) -> PathBuf {
        lfs_objects
            .join(&self.oid[0..2])
            .join(&self.oid[2..4])
            .join(&self.oid)
    }
}

/// `data` read as an LFS pointer, or `None` when it is not one (any other
/// blob, including one that only looks a little like a pointer: a file
/// that merely quotes the version line is scanned as itself).
pub fn parse_pointer(data: &[u8]) -> Option<Pointer> {
    if data.len() >= MAX_POINTER_BYTES || !data.ends_with(b"\n") {
        return None;
    }
    let mut lines = data[..data.len() - 1].split(|&b| b == b'\n');
    let version = lines.next()?;
    if !VERSIONS.contains(&version) {
        return None;
    }
    let (mut oid, mut size) = (None, None);
    let mut last_key: &[u8] = b"";
    for line in lines {
        let space = line.iter().position(|&b| b == b' ')?;
        let (key, value) = (&line[..space], &line[space + 1..]);
        // Keys after `version` are sorted and unique (the specification).
        if key <= last_key || key.is_empty() {
            return None;
        }
        last_key = key;
        match key {
            b"oid" => {
                let hex = value.strip_prefix(b"sha256:")?;
                let ok = hex.len() == 64
                    && hex
                        .iter()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b));
                if !ok {
                    return None;
                }
                oid = Some(String::from_utf8(hex.to_vec()).ok()?);
            }
            b"size" => {
                if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
                    return None;
                }
                size = Some(std::str::from_utf8(value).ok()?.parse().ok()?);
            }
            // Extension keys (`ext-0-name`) and future ones: allowed.
            _ => {}
        }
    }
    Some(Pointer {
        oid: oid?,
        size: size?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OID: &str = "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393";

    fn pointer(size: &str) -> String {
        format!("version https://git-lfs.github.com/spec/v1\noid sha256:{OID}\nsize {size}\n")
    }

    #[test]
    fn a_pointer_as_git_lfs_writes_it_is_read() {
        let p = parse_pointer(pointer("12345").as_bytes()).unwrap();
        assert_eq!(p.oid, OID);
        assert_eq!(p.size, 12345);
        assert_eq!(
            p.path_in(Path::new("/r/.git/lfs/objects")),
            Path::new("/r/.git/lfs/objects/4d/7a").join(OID)
        );
        // The old version line, and an extension key before `oid`.
        let old = format!(
            "version https://hawser.github.com/spec/v1\next-0-foo sha256:{OID}\noid sha256:{OID}\nsize 1\n"
        );
        assert_eq!(parse_pointer(old.as_bytes()).unwrap().size, 1);
    }

    #[test]
    fn near_misses_are_not_pointers() {
        let good = pointer("7");
        let cases = [
            good.trim_end().to_string(),                          // no final newline
            good.replace("sha256:", "sha1:"),                     // another hash
            good.replace(&OID[..2], "AB"),                        // upper-case hex
            good.replace(OID, &OID[1..]),                         // 63 digits
            good.replace("size 7", "size -7"),                    // not a count
            good.replace("size 7", "size "),                      // empty
            format!("{good}size 8\n"),                            // a key twice
            good.replace("spec/v1", "spec/v2"),                   // unknown version
            format!("x\n{good}"),                                 // version not first
            format!("{}{}", good, "x".repeat(MAX_POINTER_BYTES)), // too long
            format!("version https://git-lfs.github.com/spec/v1\nsize 7\noid sha256:{OID}\n"), // keys out of order
            "version https://git-lfs.github.com/spec/v1\nsize 7\n".to_string(), // no oid
        ];
        for case in cases {
            assert_eq!(parse_pointer(case.as_bytes()), None, "{case:?}");
        }
    }
}
