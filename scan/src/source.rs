//! Opening files safely and reading them in positional chunks.
//!
//! ## Opening
//!
//! The walker decides from the directory entry's type, without opening it,
//! that a path is a regular file. Between that listing and the open the path
//! can change: a file can be deleted, or swapped for a FIFO, a device or a
//! symlink. [`open_regular`] therefore:
//!
//! 1. opens with `O_NONBLOCK | O_NOCTTY | O_CLOEXEC`: opening a FIFO with
//!    `O_NONBLOCK` for reading returns at once instead of waiting for a writer,
//!    and a terminal never becomes our controlling terminal;
//! 2. `fstat`s the *opened handle* (not the path, which could change again)
//!    and refuses anything that is not a regular file;
//! 3. maps errors to a [`SkipReason`]: `ENOENT` is "vanished", `EACCES`
//!    "unreadable", `ELOOP` "symlink loop", `ENXIO` (a socket) "special file".
//!
//! `O_NONBLOCK` stays set on the returned handle; it has no effect on reads of
//! a regular file.
//!
//! ## Reading
//!
//! FetchSync tasks read with [`read_chunk_at`], which uses positional reads
//! (`pread`): there is no shared seek offset, so several tasks may hold the
//! same `File` without a lock. The size taken at open is a snapshot. A chunk
//! read stops at the end of the file as it is *now* (a file that shrank gives a
//! short chunk and ends the object), and never reads more than
//! [`GROWTH_ALLOWANCE`] bytes past the snapshot (a file that is being appended
//! to cannot keep the scan busy forever). Every read loop either makes
//! progress or returns, so a read can neither hang nor spin.
//!
//! ## Size limit
//!
//! [`DEFAULT_MAX_FILE_SIZE`] is 256 MiB: a 200 MB minified bundle or
//! single-line JSON dump is still scanned, while a sparse 20 GiB disk image is
//! skipped as "too large" from its metadata alone, without reading a byte.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use crate::skip::{SkipReason, SpecialKind};
use crate::walk::WalkConfig;

/// The payload size of one FetchSync chunk: 256 KiB.
pub const CHUNK_SIZE: usize = 256 * 1024;

/// The default `--max-file-size`: 256 MiB. Chosen so that a 200 MB
/// single-line file is scanned (tested in `source_chunks.rs`).
pub const DEFAULT_MAX_FILE_SIZE: u64 = 256 * 1024 * 1024;

/// How far past the size snapshot a read may go when the file grows while it
/// is read: one chunk.
pub const GROWTH_ALLOWANCE: u64 = CHUNK_SIZE as u64;

/// The command-line path that means standard input.
pub const STDIN_ARG: &str = "-";

/// The name standard input has in reports.
pub const STDIN_NAME: &str = "<stdin>";

/// Whether a command-line path means standard input (`-`).
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == STDIN_ARG
}

/// Opens a stream root for reading: standard input (a duplicate of fd 0)
/// for `-`, else the path with a blocking open (a FIFO waits for its
/// writer, as `cat` does: the user named it).
pub fn open_stream(path: &Path) -> io::Result<File> {
    if is_stdin(path) {
        use std::os::fd::AsFd;
        let fd = io::stdin().as_fd().try_clone_to_owned()?;
        return Ok(File::from(fd));
    }
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
}

/// How many times one read retries after `EINTR` before giving up.
const MAX_EINTR_RETRIES: u32 = 64;

const OPEN_FLAGS: i32 = libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;

/// Opens `path` for reading if, once opened, it is a regular file; returns the
/// handle and its size. A symlink in the last component is followed (the
/// walker only hands out symlinks when following them was asked for).
pub fn open_regular(path: &Path) -> Result<(File, u64), SkipReason> {
    open_with(path, OPEN_FLAGS, false)
}

/// Like [`open_regular`], but refuses a symlink in the last component
/// (`O_NOFOLLOW`), reporting it as [`SkipReason::SymlinkNotFollowed`]. Use it
/// for paths listed below a root when links are not followed, so a file
/// swapped for a symlink after listing is not read through the link.
pub fn open_regular_nofollow(path: &Path) -> Result<(File, u64), SkipReason> {
    open_with(path, OPEN_FLAGS | libc::O_NOFOLLOW, true)
}

/// Opens a file the walker listed, applying the scan's configuration: the size
/// limit is checked again on the opened handle (the file may have grown since
/// it was listed).
pub fn open_for_scan(path: &Path, cfg: &WalkConfig) -> Result<(File, u64), SkipReason> {
    let (file, size) = open_regular(path)?;
    check_size(size, cfg.max_file_size)?;
    Ok((file, size))
}

/// `Err(TooLarge)` when `size` is over `limit`.
pub fn check_size(size: u64, limit: Option<u64>) -> Result<(), SkipReason> {
    match limit {
        Some(limit) if size > limit => Err(SkipReason::TooLarge { size, limit }),
        _ => Ok(()),
    }
}

fn open_with(path: &Path, flags: i32, nofollow: bool) -> Result<(File, u64), SkipReason> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| open_error(path, &e, nofollow))?;
    // fstat on the handle: the path may have changed again since the open.
    let meta = file.metadata().map_err(|e| SkipReason::from_io(&e))?;
    if !meta.file_type().is_file() {
        return Err(SkipReason::SpecialFile(SpecialKind::of(meta.file_type())));
    }
    Ok((file, meta.len()))
}

fn open_error(path: &Path, err: &io::Error, nofollow: bool) -> SkipReason {
    match err.raw_os_error() {
        // With O_NOFOLLOW, ELOOP means "the last component is a symlink".
        Some(libc::ELOOP) if nofollow => SkipReason::SymlinkNotFollowed,
        // A dangling symlink also says ENOENT: tell it from a vanished file.
        Some(libc::ENOENT) => match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => SkipReason::BrokenSymlink,
            _ => SkipReason::Vanished,
        },
        // Opening a socket says ENXIO: name what the path is.
        Some(libc::ENXIO) => match std::fs::metadata(path) {
            Ok(m) if !m.file_type().is_file() => {
                SkipReason::SpecialFile(SpecialKind::of(m.file_type()))
            }
            _ => SkipReason::from_io(err),
        },
        _ => SkipReason::from_io(err),
    }
}

/// The furthest offset a read of a file whose size snapshot is `size` may
/// reach: `size + GROWTH_ALLOWANCE`.
pub fn read_limit(size: u64) -> u64 {
    size.saturating_add(GROWTH_ALLOWANCE)
}

/// What one [`read_chunk_at`] call produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkRead {
    /// Bytes written at the start of the buffer.
    pub len: usize,
    /// True when no further chunk should be read: the file ended (it may have
    /// shrunk), the snapshot size was reached, or the growth bound was hit.
    pub done: bool,
}

/// Reads the chunk at `offset` of a file whose size snapshot is `size` into
/// `buf`, filling it unless the file ends first.
///
/// Short reads are retried until the buffer is full or the file ends; `EINTR`
/// is retried a bounded number of times. Never reads at or beyond
/// [`read_limit`]`(size)`. An error mid-file maps to a [`SkipReason`]; the
/// caller keeps what earlier chunks delivered.
pub fn read_chunk_at(
    file: &File,
    offset: u64,
    size: u64,
    buf: &mut [u8],
) -> Result<ChunkRead, SkipReason> {
    let limit = read_limit(size);
    let room = limit.saturating_sub(offset);
    let want = usize::try_from(room).map_or(buf.len(), |r| r.min(buf.len()));
    let mut filled = 0usize;
    let mut eof = false;
    let mut interrupts = 0u32;
    while filled < want {
        match file.read_at(&mut buf[filled..want], offset + filled as u64) {
            Ok(0) => {
                eof = true;
                break;
            }
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                interrupts += 1;
                if interrupts > MAX_EINTR_RETRIES {
                    return Err(SkipReason::Unreadable(io::ErrorKind::Interrupted));
                }
            }
            Err(e) => return Err(SkipReason::from_io(&e)),
        }
    }
    let end = offset + filled as u64;
    Ok(ChunkRead {
        len: filled,
        done: eof || end >= size || end >= limit,
    })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn check_size_allows_the_limit_and_refuses_one_more() {
        assert_eq!(check_size(10, Some(10)), Ok(()));
        assert_eq!(
            check_size(11, Some(10)),
            Err(SkipReason::TooLarge {
                size: 11,
                limit: 10
            })
        );
        assert_eq!(check_size(u64::MAX, None), Ok(()));
    }

    #[test]
    fn read_limit_saturates() {
        assert_eq!(read_limit(u64::MAX), u64::MAX);
        assert_eq!(read_limit(1), 1 + GROWTH_ALLOWANCE);
    }
}
