//! The typed task graph: `Enumerate -> FetchSync -> Scan`, as plain values.
//!
//! A task is one of three variants, moved through the executor's queues by
//! value; nothing is boxed per task. The variants carry only what the next
//! step needs: an [`ObjectRef`] (one pointer), a boxed per-object state that
//! moves from one FetchSync to the next, or a pool buffer and its chunk plan.
//! `Task` is at most 128 bytes (`task_fits_in_two_cache_lines` in
//! `frontier_basic.rs`).

use std::fs::File;
use std::path::PathBuf;

use crate::archive::{ArchiveCursor, ArchiveKind};
use crate::chunk::{ChunkCursor, ChunkMeta, LineBase};
use crate::git::{GitItem, HistoryCursor};
use crate::pool::PooledBuf;
use crate::report::ObjPath;
use crate::walk::{WalkCursor, WalkItem};

use super::frontier::ObjectRef;

/// Walk items pulled per Enumerate step (seed 001's `ENUM_BATCH_SIZE`), and
/// so the most FetchSync tasks one Enumerate step spawns.
pub const ENUM_BATCH_SIZE: usize = 32;

/// One unit of work.
#[derive(Debug)]
pub enum Task {
    /// List the next objects of a source (the directory walk or an archive)
    /// and admit them to the frontier.
    Enumerate {
        /// Where the listing resumes.
        cursor: EnumCursor,
    },
    /// Read the next chunk of an object into a pool buffer.
    FetchSync {
        /// The object.
        obj: ObjectRef,
        /// `None` before the first chunk of a file on disk (most files are
        /// one chunk and never need more); the reader state afterwards, and
        /// for every chunk of an archive member.
        state: Option<Box<FetchState>>,
    },
    /// Run the rules over one chunk.
    Scan {
        /// The object the chunk belongs to.
        obj: ObjectRef,
        /// The chunk: an overlap prefix, then new bytes.
        buf: PooledBuf,
        /// Which part of `buf` this task reports, and where `buf` sits in
        /// the object.
        chunk: ChunkSpan,
    },
}

/// Where an Enumerate task resumes.
#[derive(Debug)]
pub enum EnumCursor {
    /// The directory walk over the command-line paths.
    Walk(Box<WalkEnum>),
    /// The members of an archive (and of archives nested in it). The same box
    /// travels to the member's FetchSync chain and back, never re-allocated.
    Archive(Box<ArchiveEnum>),
    /// The blobs of a git history (`scan git`).
    Git(Box<GitEnum>),
}

/// The history walk's resumable state (`scan git`).
#[derive(Debug)]
pub struct GitEnum {
    /// The walk.
    pub cursor: HistoryCursor,
    /// Items pulled from the walk but not yet admitted (reversed: the next
    /// one is last).
    pub batch: Vec<GitItem>,
    /// The walk said it has nothing more.
    pub finished: bool,
}

/// The walk's resumable state.
#[derive(Debug)]
pub struct WalkEnum {
    /// The walker.
    pub cursor: WalkCursor,
    /// Items pulled from the walker but not yet admitted, in walk order
    /// (reversed: the next one is last).
    pub batch: Vec<WalkItem>,
    /// The walker said it has nothing more.
    pub finished: bool,
    /// The command-line paths (a file named there is opened following a
    /// symlink, as the walker followed it).
    pub roots: Vec<PathBuf>,
}

/// One open archive on the stack of nested archives.
#[derive(Debug)]
pub struct ArchiveLevel {
    /// The archive's member cursor.
    pub cursor: ArchiveCursor,
    /// The archive as an object (its frontier place is held until every
    /// member has been listed).
    pub obj: ObjectRef,
}

/// A member listed by `next_member` that still needs a frontier place.
#[derive(Debug)]
pub struct PendingMember {
    /// Its full path (`outer.zip!inner`).
    pub path: ObjPath,
    /// The size its header declared, if any.
    pub size_hint: Option<u64>,
    /// Its first bytes announce an archive of this kind.
    pub nested: Option<ArchiveKind>,
}

/// The resumable state of an archive's enumeration: a stack of cursors,
/// outermost first. Only the innermost is read; a nested tar or gzip reads
/// through its parent's current member, so the stack is driven strictly
/// in order by one task at a time (Enumerate, then the member's FetchSync
/// chain, then Enumerate again).
#[derive(Debug)]
pub struct ArchiveEnum {
    /// Open archives, outermost first.
    pub stack: Vec<ArchiveLevel>,
    /// A member waiting for its frontier place.
    pub pending: Option<PendingMember>,
}

/// What a FetchSync carries from one chunk of an object to the next.
#[derive(Debug)]
pub enum FetchState {
    /// A file on disk, read by position.
    File {
        /// The open file (the object's one file descriptor).
        file: File,
        /// Its size when opened.
        size: u64,
        /// The chunk plan so far.
        chunks: ChunkCursor,
    },
    /// A stream root (standard input, a FIFO named on the command line),
    /// read in order to its end.
    Stream {
        /// The open stream.
        file: File,
        /// The chunk plan so far.
        chunks: ChunkCursor,
        /// The overlap carried forward (a stream cannot be re-read).
        carry: Vec<u8>,
    },
    /// A git blob, decoded whole (it is at most `--max-file-size`) and
    /// handed out chunk by chunk.
    Blob {
        /// The blob's bytes.
        data: Vec<u8>,
        /// The chunk plan so far.
        chunks: ChunkCursor,
    },
    /// A git blob read only by the windows around what it adds against its
    /// base (`git/added.rs`).
    Added {
        /// The blob's bytes.
        data: Vec<u8>,
        /// The windows still to scan.
        windows: crate::git::added::Windows,
    },
    /// An archive member, streamed.
    Member {
        /// The archive stack; its innermost cursor's current member is this
        /// object.
        archive: Box<ArchiveEnum>,
        /// The chunk plan so far.
        chunks: ChunkCursor,
        /// The last `max_prefix` bytes of the previous chunk: a stream cannot
        /// be re-read, so the overlap is copied forward.
        carry: Vec<u8>,
    },
}

/// The part of [`ChunkMeta`] a Scan task needs, packed small.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkSpan {
    /// Absolute offset of `buf[0]` in the object.
    pub base_offset: u64,
    /// Start of the owned range in `buf`.
    pub owned_start: u32,
    /// End of the owned range in `buf`.
    pub owned_end: u32,
    /// Bytes read for the first time (`bytes_scanned`).
    pub new_bytes: u32,
    /// Lines before `base_offset`.
    pub lines: LineBase,
}

impl ChunkSpan {
    /// Packs `meta`. Buffers are at most a few MiB, so offsets into them fit
    /// in 32 bits.
    pub fn from_meta(meta: &ChunkMeta) -> Self {
        let small = |n: usize| u32::try_from(n).expect("chunk buffers are far below 4 GiB");
        Self {
            base_offset: meta.base_offset,
            owned_start: small(meta.owned.start),
            owned_end: small(meta.owned.end),
            new_bytes: small(meta.new_bytes()),
            lines: meta.lines,
        }
    }

    /// The owned range as buffer indices.
    pub fn owned(&self) -> std::ops::Range<usize> {
        self.owned_start as usize..self.owned_end as usize
    }

    /// A [`ChunkMeta`] with the fields `Locator` reads.
    pub fn meta(&self, len: usize) -> ChunkMeta {
        ChunkMeta {
            index: 0,
            base_offset: self.base_offset,
            prefix_len: len - self.new_bytes as usize,
            len,
            owned: self.owned(),
            is_last: false,
            lines: self.lines,
        }
    }
}
