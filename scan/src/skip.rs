//! Why a discovered file or archive member was not scanned.
//!
//! Every entry the scanner discovers ends up either scanned or counted under
//! exactly one [`SkipReason`]. The [`SkipReason::label`] of a reason is a stable
//! snake_case key: summaries and the JSON report group skipped entries by it,
//! so a label never changes once released (add a variant instead).

use std::fmt;
use std::io;

use crate::report::ObjPath;

/// One skip, named: what was not scanned, why, and how many objects it stands
/// for (more than one only for the members of an archive that were never
/// reached after an error, which are named by their archive).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedEntry {
    /// The file, or the archive member, or the archive whose remaining
    /// members were not reached.
    pub path: ObjPath,
    /// Why.
    pub reason: SkipReason,
    /// Objects this entry stands for (1 for a file or a member).
    pub count: u64,
    /// A human detail beyond the reason (an archive error's message, or
    /// empty).
    pub detail: String,
}

impl SkippedEntry {
    /// The reason and the detail as one human line: `too large (2 GiB >
    /// 256 MiB limit)`, `corrupt or truncated archive: CRC mismatch`.
    pub fn message(&self) -> String {
        let mut m = self.reason.to_string();
        // An unsupported feature's detail usually repeats its name.
        if !self.detail.is_empty() && !m.contains(self.detail.as_str()) {
            m.push_str(": ");
            m.push_str(&self.detail);
        }
        if self.count > 1 {
            m.push_str(&format!(" ({} members not reached)", self.count));
        }
        m
    }
}

/// Sorts skipped entries by path, then label, then detail, so a report is the
/// same whatever order the workers met them in.
pub fn sort_skipped(entries: &mut [SkippedEntry]) {
    entries.sort_unstable_by(|a, b| {
        (&a.path, a.reason.label(), &a.detail, a.count).cmp(&(
            &b.path,
            b.reason.label(),
            &b.detail,
            b.count,
        ))
    });
}

/// Whether `--fail-on-skip` counts this reason: every file or member whose
/// bytes were not (all) scanned. Entries that have no bytes of their own
/// do not count: symlinks (not followed by choice, broken, or looping;
/// a target inside the tree is scanned on its own) and FIFOs, sockets and
/// devices found inside a tree.
pub fn counts_as_partial(reason: &SkipReason) -> bool {
    !matches!(
        reason,
        SkipReason::SymlinkNotFollowed
            | SkipReason::BrokenSymlink
            | SkipReason::SymlinkLoop
            | SkipReason::SpecialFile(_)
    )
}

/// [`counts_as_partial`] by the reason's label (`scan merge` has labels,
/// not reasons).
pub fn label_counts_as_partial(label: &str) -> bool {
    !matches!(
        label,
        "symlink_not_followed" | "broken_symlink" | "symlink_loop" | "special_file"
    )
}

/// What kind of non-regular file was refused (it is never opened for reading).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpecialKind {
    /// A named pipe: opening it for reading could block forever.
    Fifo,
    /// A Unix domain socket.
    Socket,
    /// A character device such as `/dev/zero` (endless) or a terminal.
    CharDevice,
    /// A block device: a whole disk.
    BlockDevice,
    /// A directory where a file was expected (the path was replaced after listing).
    Directory,
    /// Anything else that is not a regular file.
    Other,
}

impl SpecialKind {
    /// Classifies a file type that is not a regular file.
    pub fn of(ft: std::fs::FileType) -> SpecialKind {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            SpecialKind::Fifo
        } else if ft.is_socket() {
            SpecialKind::Socket
        } else if ft.is_char_device() {
            SpecialKind::CharDevice
        } else if ft.is_block_device() {
            SpecialKind::BlockDevice
        } else if ft.is_dir() {
            SpecialKind::Directory
        } else {
            SpecialKind::Other
        }
    }

    fn name(self) -> &'static str {
        match self {
            SpecialKind::Fifo => "named pipe",
            SpecialKind::Socket => "socket",
            SpecialKind::CharDevice => "character device",
            SpecialKind::BlockDevice => "block device",
            SpecialKind::Directory => "directory",
            SpecialKind::Other => "not a regular file",
        }
    }
}

/// Which archive byte budget ran out (see `ArchiveLimits` in `scan::archive`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ByteScope {
    /// `max_entry_bytes`: one member's decompressed size.
    Entry,
    /// `max_archive_bytes`: all member bytes of one archive.
    Archive,
    /// `max_root_bytes`: all member bytes under one outermost archive, nested
    /// archives included.
    Root,
}

/// Why an entry was not scanned. See the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SkipReason {
    /// Larger than `--max-file-size`.
    TooLarge {
        /// The size seen.
        size: u64,
        /// The limit in force.
        limit: u64,
    },
    /// Could not be opened or read (permission denied, I/O error, ...).
    Unreadable(io::ErrorKind),
    /// Existed when its directory was listed, gone when it was opened.
    Vanished,
    /// A symbolic link whose target does not exist.
    BrokenSymlink,
    /// A symbolic link that leads back to itself or to one of its ancestors.
    SymlinkLoop,
    /// A symbolic link, and links are not followed (the default).
    SymlinkNotFollowed,
    /// A FIFO, socket or device: never opened.
    SpecialFile(SpecialKind),
    /// A nested archive deeper than `max_depth`.
    ArchiveDepth,
    /// An archive with more entries than `max_entries`.
    ArchiveEntries,
    /// A byte budget ran out.
    ArchiveBytes(ByteScope),
    /// Decompressed bytes outgrew the compressed bytes by more than
    /// `max_inflation_ratio` (a compression bomb).
    ArchiveInflation,
    /// An encrypted archive member (no password is ever tried).
    ArchiveEncrypted,
    /// A corrupt or truncated archive.
    ArchiveCorrupt,
    /// An archive feature the reader does not implement (the detail names it).
    ArchiveUnsupported(&'static str),
    /// A Git LFS pointer in history whose object is not in the
    /// repository's local LFS store: the file's bytes are not in the
    /// repository at all (`scan::git::lfs`).
    LfsObjectMissing,
}

impl SpecialKind {
    /// Every kind, for tests that check labels.
    pub const ALL: [SpecialKind; 6] = [
        SpecialKind::Fifo,
        SpecialKind::Socket,
        SpecialKind::CharDevice,
        SpecialKind::BlockDevice,
        SpecialKind::Directory,
        SpecialKind::Other,
    ];
}

impl SkipReason {
    /// Every label [`SkipReason::label`] can return, in a fixed order: use it to
    /// print summaries with stable columns.
    pub const LABELS: [&'static str; 17] = [
        "too_large",
        "unreadable",
        "vanished",
        "broken_symlink",
        "symlink_loop",
        "symlink_not_followed",
        "special_file",
        "archive_depth_limit",
        "archive_entry_limit",
        "archive_entry_bytes_limit",
        "archive_bytes_limit",
        "archive_root_bytes_limit",
        "archive_inflation_ratio",
        "archive_encrypted",
        "archive_corrupt",
        "archive_unsupported",
        "lfs_object_missing",
    ];

    /// The stable snake_case key of this reason (one of [`SkipReason::LABELS`]).
    pub fn label(&self) -> &'static str {
        match self {
            SkipReason::TooLarge { .. } => "too_large",
            SkipReason::Unreadable(_) => "unreadable",
            SkipReason::Vanished => "vanished",
            SkipReason::BrokenSymlink => "broken_symlink",
            SkipReason::SymlinkLoop => "symlink_loop",
            SkipReason::SymlinkNotFollowed => "symlink_not_followed",
            SkipReason::SpecialFile(_) => "special_file",
            SkipReason::ArchiveDepth => "archive_depth_limit",
            SkipReason::ArchiveEntries => "archive_entry_limit",
            SkipReason::ArchiveBytes(ByteScope::Entry) => "archive_entry_bytes_limit",
            SkipReason::ArchiveBytes(ByteScope::Archive) => "archive_bytes_limit",
            SkipReason::ArchiveBytes(ByteScope::Root) => "archive_root_bytes_limit",
            SkipReason::ArchiveInflation => "archive_inflation_ratio",
            SkipReason::ArchiveEncrypted => "archive_encrypted",
            SkipReason::ArchiveCorrupt => "archive_corrupt",
            SkipReason::ArchiveUnsupported(_) => "archive_unsupported",
            SkipReason::LfsObjectMissing => "lfs_object_missing",
        }
    }

    /// Maps an error from opening or reading a path to a reason.
    ///
    /// `ENOENT` and `ENOTDIR` mean the path (or a directory above it) went away
    /// after it was listed; `ELOOP` is a symlink loop; `ENXIO` is what opening a
    /// socket (or a device with no driver) returns. Everything else is
    /// "unreadable" with its kind, so the summary still tells permission
    /// problems from I/O errors.
    pub fn from_io(err: &io::Error) -> SkipReason {
        match err.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ENOTDIR) => SkipReason::Vanished,
            Some(libc::ELOOP) => SkipReason::SymlinkLoop,
            Some(libc::ENXIO) => SkipReason::SpecialFile(SpecialKind::Other),
            _ if err.kind() == io::ErrorKind::NotFound => SkipReason::Vanished,
            _ => SkipReason::Unreadable(err.kind()),
        }
    }

    /// True for the reasons that come from archive reading.
    pub fn is_archive(&self) -> bool {
        self.label().starts_with("archive_")
    }
}

fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut unit = 0;
    let mut whole = n;
    while whole >= 1024 && unit + 1 < UNITS.len() && whole % 1024 == 0 {
        whole /= 1024;
        unit += 1;
    }
    format!("{whole} {}", UNITS[unit])
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::TooLarge { size, limit } => write!(
                f,
                "too large ({} > {} limit)",
                human_bytes(*size),
                human_bytes(*limit)
            ),
            SkipReason::Unreadable(kind) => write!(f, "unreadable ({kind})"),
            SkipReason::Vanished => f.write_str("vanished after listing"),
            SkipReason::BrokenSymlink => f.write_str("broken symlink"),
            SkipReason::SymlinkLoop => f.write_str("symlink loop"),
            SkipReason::SymlinkNotFollowed => f.write_str("symlink not followed"),
            SkipReason::SpecialFile(kind) => write!(f, "special file ({})", kind.name()),
            SkipReason::ArchiveDepth => f.write_str("archive nested too deep"),
            SkipReason::ArchiveEntries => f.write_str("archive has too many entries"),
            SkipReason::ArchiveBytes(ByteScope::Entry) => {
                f.write_str("archive member over the per-entry byte limit")
            }
            SkipReason::ArchiveBytes(ByteScope::Archive) => {
                f.write_str("archive over the per-archive byte limit")
            }
            SkipReason::ArchiveBytes(ByteScope::Root) => {
                f.write_str("archive over the per-root byte limit")
            }
            SkipReason::ArchiveInflation => f.write_str("archive inflation ratio exceeded"),
            SkipReason::ArchiveEncrypted => f.write_str("encrypted archive member"),
            SkipReason::ArchiveCorrupt => f.write_str("corrupt or truncated archive"),
            SkipReason::ArchiveUnsupported(what) => {
                write!(f, "unsupported archive feature ({what})")
            }
            SkipReason::LfsObjectMissing => f.write_str("Git LFS object not fetched"),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn every_reason() -> Vec<SkipReason> {
        let mut all = vec![
            SkipReason::TooLarge { size: 2, limit: 1 },
            SkipReason::Unreadable(io::ErrorKind::PermissionDenied),
            SkipReason::Vanished,
            SkipReason::BrokenSymlink,
            SkipReason::SymlinkLoop,
            SkipReason::SymlinkNotFollowed,
            SkipReason::ArchiveDepth,
            SkipReason::ArchiveEntries,
            SkipReason::ArchiveBytes(ByteScope::Entry),
            SkipReason::ArchiveBytes(ByteScope::Archive),
            SkipReason::ArchiveBytes(ByteScope::Root),
            SkipReason::ArchiveInflation,
            SkipReason::ArchiveEncrypted,
            SkipReason::ArchiveCorrupt,
            SkipReason::ArchiveUnsupported("x"),
            SkipReason::LfsObjectMissing,
        ];
        all.extend(SpecialKind::ALL.iter().map(|k| SkipReason::SpecialFile(*k)));
        all
    }

    #[test]
    fn partial_by_label_agrees_with_counts_as_partial() {
        for r in every_reason() {
            assert_eq!(
                label_counts_as_partial(r.label()),
                counts_as_partial(&r),
                "{r:?}"
            );
        }
    }

    #[test]
    fn every_label_is_listed_and_every_listed_label_is_reachable() {
        let labels: std::collections::BTreeSet<&str> =
            every_reason().iter().map(|r| r.label()).collect();
        let listed: std::collections::BTreeSet<&str> = SkipReason::LABELS.iter().copied().collect();
        assert_eq!(labels, listed);
        assert_eq!(listed.len(), SkipReason::LABELS.len(), "labels are unique");
        for l in listed {
            assert!(
                l.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{l}"
            );
        }
    }

    #[test]
    fn io_errors_map_to_the_documented_reasons() {
        let e = |code| io::Error::from_raw_os_error(code);
        assert_eq!(SkipReason::from_io(&e(libc::ENOENT)), SkipReason::Vanished);
        assert_eq!(SkipReason::from_io(&e(libc::ENOTDIR)), SkipReason::Vanished);
        assert_eq!(
            SkipReason::from_io(&e(libc::ELOOP)),
            SkipReason::SymlinkLoop
        );
        assert_eq!(
            SkipReason::from_io(&e(libc::EACCES)),
            SkipReason::Unreadable(io::ErrorKind::PermissionDenied)
        );
        assert_eq!(
            SkipReason::from_io(&e(libc::ENXIO)),
            SkipReason::SpecialFile(SpecialKind::Other)
        );
        assert!(matches!(
            SkipReason::from_io(&e(libc::EIO)),
            SkipReason::Unreadable(_)
        ));
    }

    #[test]
    fn a_skip_message_does_not_repeat_its_detail() {
        let e = SkippedEntry {
            path: ObjPath::from_file_bytes(b"t.tar!gnu/sparse"),
            reason: SkipReason::ArchiveUnsupported("GNU sparse tar member"),
            count: 1,
            detail: "GNU sparse tar member".into(),
        };
        assert_eq!(
            e.message(),
            "unsupported archive feature (GNU sparse tar member)"
        );
        let rest = SkippedEntry {
            reason: SkipReason::ArchiveCorrupt,
            count: 4,
            detail: "bad CRC".into(),
            ..e
        };
        assert_eq!(
            rest.message(),
            "corrupt or truncated archive: bad CRC (4 members not reached)"
        );
    }

    #[test]
    fn display_names_the_limit_for_too_large() {
        let r = SkipReason::TooLarge {
            size: 20 << 30,
            limit: 256 << 20,
        };
        assert_eq!(r.to_string(), "too large (20 GiB > 256 MiB limit)");
        assert!(r.to_string().len() > 5);
        for r in every_reason() {
            assert!(!r.to_string().is_empty());
        }
    }
}
