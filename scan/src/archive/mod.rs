//! Reading inside archives: zip (and jar, war, ... by magic), tar, and
//! gzip, bzip2, xz and zstd files (a tar inside any of them too), nested,
//! with limits. `scan/ARCHIVES.md` is the user-facing
//! description; this is the contract for the task graph.
//!
//! ## Shape
//!
//! An [`ArchiveCursor`] is an owned, `Send` value: an Enumerate task can call
//! [`ArchiveCursor::next_member`], stop after any member, re-enqueue itself
//! with the cursor and continue later; FetchSync tasks call
//! [`ArchiveCursor::read_member`] into pool buffers, one chunk at a time. No
//! call holds more than one member header, one decoder and a 512-byte peek.
//!
//! ## Steps
//!
//! 1. The caller sniffs the first bytes of a file ([`sniff`] /
//!    [`detect_file`]) and opens a cursor with depth 1 and a fresh
//!    [`RootBudget`] of `max_root_bytes`.
//! 2. `next_member` skips the unread rest of the current member (a seek for a
//!    tar on disk, a read through the decoder otherwise, charged to the
//!    budgets), reads the next header, checks the entry count, the declared
//!    size against `max_entry_bytes` and the encryption and method flags,
//!    then peeks at the first 512 member bytes to set
//!    [`MemberInfo::is_nested_archive`]. The peeked bytes are replayed.
//! 3. `read_member` hands out member bytes, each charged to the member
//!    (`max_entry_bytes`), the archive (`max_archive_bytes`) and the root
//!    budget (`max_root_bytes`) before it is returned; the inflation ratio is
//!    checked after every read past the first MiB. A limit stops the read
//!    exactly at the limit.
//! 4. For a nested archive the caller calls [`ArchiveCursor::open_nested`],
//!    drives the nested cursor to its end, then goes on with the parent.
//! 5. On an error the caller asks its [`ArchivePolicy`] what to do
//!    ([`ArchivePolicy::action`]) and counts skipped members with
//!    [`ArchiveError::skip_reason`].
//!
//! Member paths join with `!`: [`member_path`].

mod budget;
mod cursor;
mod detect;
mod error;
mod stream;
mod tar;
mod zip;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub use budget::RootBudget;
pub use cursor::ArchiveCursor;
pub use detect::{detect_file, kind_from_name, read_head, sniff, SNIFF_LEN, ZIP_EXTENSIONS};
pub use error::{ArchiveError, ErrorScope};
pub use stream::INFLATION_GRACE;

/// The archive formats read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArchiveKind {
    /// Zip and its family (jar, war, apk, ...): random access, needs a file.
    Zip,
    /// POSIX / GNU tar: streamed.
    Tar,
    /// A gzip-compressed single file: one member.
    Gzip,
    /// A gzip-compressed tar: streamed.
    TarGz,
    /// A bzip2-compressed single file: one member.
    Bzip2,
    /// A bzip2-compressed tar: streamed.
    TarBz2,
    /// An xz-compressed single file: one member.
    Xz,
    /// An xz-compressed tar: streamed.
    TarXz,
    /// A zstd-compressed single file: one member.
    Zstd,
    /// A zstd-compressed tar: streamed.
    TarZst,
}

impl ArchiveKind {
    /// A stable lowercase name.
    pub fn label(self) -> &'static str {
        match self {
            ArchiveKind::Zip => "zip",
            ArchiveKind::Tar => "tar",
            ArchiveKind::Gzip => "gzip",
            ArchiveKind::TarGz => "tar.gz",
            ArchiveKind::Bzip2 => "bzip2",
            ArchiveKind::TarBz2 => "tar.bz2",
            ArchiveKind::Xz => "xz",
            ArchiveKind::TarXz => "tar.xz",
            ArchiveKind::Zstd => "zstd",
            ArchiveKind::TarZst => "tar.zst",
        }
    }
}

impl std::fmt::Display for ArchiveKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// Limits on archive reading. `Default` gives the documented defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchiveLimits {
    /// Archive nesting levels opened: an archive on disk is depth 1. Default 3.
    pub max_depth: u32,
    /// Entries (files, directories, links) per archive. Default 100,000.
    pub max_entries: u64,
    /// Decompressed bytes per member. Default 256 MiB (the file size limit).
    pub max_entry_bytes: u64,
    /// Decompressed member bytes per archive. Default 1 GiB.
    pub max_archive_bytes: u64,
    /// Decompressed member bytes under one outermost archive, all nesting
    /// levels counted. Default 4 GiB.
    pub max_root_bytes: u64,
    /// Decompressed bytes per compressed byte, checked once a stream or member
    /// has produced [`INFLATION_GRACE`] bytes; 0 disables. Default 100.
    pub max_inflation_ratio: u64,
}

impl Default for ArchiveLimits {
    fn default() -> Self {
        ArchiveLimits {
            max_depth: 3,
            max_entries: 100_000,
            max_entry_bytes: 256 * 1024 * 1024,
            max_archive_bytes: 1024 * 1024 * 1024,
            max_root_bytes: 4 * 1024 * 1024 * 1024,
            max_inflation_ratio: 100,
        }
    }
}

/// What the caller does when an archive is encrypted, corrupt or over budget.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ArchivePolicy {
    /// Stop reading the archive at the first problem; count the problem and
    /// the members not reached as skipped.
    #[default]
    Skip,
    /// Keep going where the format allows: skip just the bad member; stop only
    /// when the rest of the archive is unreadable. What was read is kept.
    Partial,
    /// Abort the whole run (exit code 2).
    FailRun,
}

/// What [`ArchivePolicy::action`] tells the caller to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PolicyAction {
    /// Count this member as skipped and call `next_member` again.
    SkipMember,
    /// Count this member and the rest of the archive as skipped; drop the
    /// cursor (and, for a nested one, go on with its parent).
    StopArchive,
    /// Abort the run cleanly.
    AbortRun,
}

impl ArchivePolicy {
    /// The action for `err` under this policy.
    pub fn action(self, err: &ArchiveError) -> PolicyAction {
        match (self, err.scope()) {
            (ArchivePolicy::FailRun, _) => PolicyAction::AbortRun,
            (ArchivePolicy::Skip, _) => PolicyAction::StopArchive,
            (ArchivePolicy::Partial, ErrorScope::Member) => PolicyAction::SkipMember,
            (ArchivePolicy::Partial, ErrorScope::Archive) => PolicyAction::StopArchive,
        }
    }
}

/// One archive member, as `next_member` found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberInfo {
    /// The name as stored: raw bytes, not necessarily UTF-8. For a gzip file,
    /// the original name from its header, or empty when it has none.
    pub name: Vec<u8>,
    /// Decompressed size declared by the header (`None` for gzip).
    pub size_hint: Option<u64>,
    /// The member's first bytes announce an archive of this kind.
    pub is_nested_archive: Option<ArchiveKind>,
}

/// The separator between an archive's path and a member's name.
pub const MEMBER_SEPARATOR: u8 = b'!';

/// `archive!member`, bytes kept as they are. An empty member name (a gzip
/// without a stored name) becomes the archive's own last name minus its
/// `.gz` / `.gzip` suffix, or with `.tgz` turned into `.tar`.
pub fn member_path(archive: &Path, member: &[u8]) -> PathBuf {
    let outer = archive.as_os_str().as_bytes();
    let mut out = Vec::with_capacity(outer.len() + 1 + member.len());
    out.extend_from_slice(outer);
    out.push(MEMBER_SEPARATOR);
    if member.is_empty() {
        let last = outer
            .rsplit(|b| *b == b'/' || *b == MEMBER_SEPARATOR)
            .next()
            .unwrap_or(outer);
        out.extend_from_slice(&gunzipped_name(last));
    } else {
        out.extend_from_slice(member);
    }
    PathBuf::from(OsStr::from_bytes(&out))
}

fn gunzipped_name(name: &[u8]) -> Vec<u8> {
    let lower: Vec<u8> = name.iter().map(u8::to_ascii_lowercase).collect();
    for (suffix, replacement) in [
        (&b".tgz"[..], &b".tar"[..]),
        (b".tbz2", b".tar"),
        (b".tbz", b".tar"),
        (b".txz", b".tar"),
        (b".tzst", b".tar"),
        (b".gzip", b""),
        (b".gz", b""),
        (b".bz2", b""),
        (b".xz", b""),
        (b".zstd", b""),
        (b".zst", b""),
    ] {
        if lower.ends_with(suffix) && name.len() > suffix.len() {
            let mut v = name[..name.len() - suffix.len()].to_vec();
            v.extend_from_slice(replacement);
            return v;
        }
    }
    name.to_vec()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn member_paths_join_with_bang_and_keep_raw_bytes() {
        let p = member_path(Path::new("dir/outer.zip"), b"a/inner.txt");
        assert_eq!(p, Path::new("dir/outer.zip!a/inner.txt"));
        let nested = member_path(&member_path(Path::new("a.tar.gz"), b"b.zip"), b"c.env");
        assert_eq!(nested, Path::new("a.tar.gz!b.zip!c.env"));
        let raw = member_path(Path::new("x.tar"), b"bad\xff.txt");
        assert_eq!(raw.as_os_str().as_bytes(), b"x.tar!bad\xff.txt");
    }

    #[test]
    fn unnamed_gzip_members_take_the_archive_name() {
        assert_eq!(
            member_path(Path::new("d/notes.txt.gz"), b""),
            Path::new("d/notes.txt.gz!notes.txt")
        );
        assert_eq!(
            member_path(Path::new("a.zip!x.TGZ"), b""),
            Path::new("a.zip!x.TGZ!x.tar")
        );
        assert_eq!(
            member_path(Path::new("plain"), b""),
            Path::new("plain!plain")
        );
    }

    #[test]
    fn policies_map_scopes_to_actions() {
        let member = ArchiveError::corrupt(ErrorScope::Member, "m");
        let archive = ArchiveError::corrupt(ErrorScope::Archive, "a");
        assert_eq!(
            ArchivePolicy::Skip.action(&member),
            PolicyAction::StopArchive
        );
        assert_eq!(
            ArchivePolicy::Partial.action(&member),
            PolicyAction::SkipMember
        );
        assert_eq!(
            ArchivePolicy::Partial.action(&archive),
            PolicyAction::StopArchive
        );
        assert_eq!(
            ArchivePolicy::FailRun.action(&member),
            PolicyAction::AbortRun
        );
    }
}
