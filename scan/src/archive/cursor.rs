//! The archive cursor: one member at a time, budgets enforced on every byte.

use std::fs::File;
use std::io::Write;

use magpie_core::sync::{Arc, Mutex, MutexGuard};

use super::budget::RootBudget;
use super::detect::{sniff, SNIFF_LEN};
use super::error::{ArchiveError, ErrorScope};
use super::stream::{over_ratio, Codec, DecLayer, GzLayer, Source, Stream, StreamBody};
use super::tar::TarReader;
use super::zip::ZipReader;
use super::{ArchiveKind, ArchiveLimits, MemberInfo};
use crate::skip::{ByteScope, SkipReason};

/// Size of the buffer used to spool a nested zip to a temp file.
const SPOOL_BUF: usize = 64 * 1024;

/// An entry as a format reader sees it, before the cursor's checks.
pub(crate) struct RawHeader {
    pub(crate) name: Vec<u8>,
    pub(crate) size_hint: Option<u64>,
    /// False for directories, links and device nodes: skipped silently.
    pub(crate) is_file: bool,
    /// A reason known from the header alone that the member cannot be read.
    pub(crate) problem: Option<ArchiveError>,
}

/// The byte budgets of one cursor.
pub(crate) struct Meter {
    pub(crate) limits: ArchiveLimits,
    pub(crate) root: RootBudget,
    /// Member bytes this archive produced: read, consumed by a nested cursor,
    /// spooled, or decompressed to skip.
    pub(crate) archive_bytes: u64,
}

impl Meter {
    fn charge(&mut self, n: u64) -> Result<(), ArchiveError> {
        self.archive_bytes += n;
        if self.archive_bytes > self.limits.max_archive_bytes {
            return Err(budget_error(ByteScope::Archive));
        }
        if !self.root.charge(n) {
            return Err(budget_error(ByteScope::Root));
        }
        Ok(())
    }

    /// Charges bytes that were decompressed only to be skipped.
    pub(crate) fn charge_discarded(&mut self, n: u64) -> Result<(), ArchiveError> {
        self.charge(n)
    }

    /// Bytes the archive and root budgets still allow, or the error of the
    /// one that is spent.
    pub(crate) fn room(&self) -> Result<u64, ArchiveError> {
        let archive = self
            .limits
            .max_archive_bytes
            .saturating_sub(self.archive_bytes);
        if archive == 0 {
            return Err(budget_error(ByteScope::Archive));
        }
        let root = self.root.remaining();
        if root == 0 {
            return Err(budget_error(ByteScope::Root));
        }
        Ok(archive.min(root))
    }
}

fn budget_error(scope: ByteScope) -> ArchiveError {
    let (err_scope, what) = match scope {
        ByteScope::Entry => (ErrorScope::Member, "member over max_entry_bytes"),
        ByteScope::Archive => (ErrorScope::Archive, "archive over max_archive_bytes"),
        ByteScope::Root => (ErrorScope::Archive, "root archive over max_root_bytes"),
    };
    ArchiveError::new(SkipReason::ArchiveBytes(scope), err_scope, what)
}

enum Body {
    Zip(ZipReader),
    Tar(TarReader),
    Gzip(GzipReader),
}

/// A gzip file holds one member: the decompressed stream.
struct GzipReader {
    stream: Stream,
    name: Vec<u8>,
    started: bool,
}

impl Body {
    fn next_header(&mut self, meter: &mut Meter) -> Result<Option<RawHeader>, ArchiveError> {
        match self {
            Body::Zip(z) => z.next_header(),
            Body::Tar(t) => t.next_header(meter),
            Body::Gzip(g) => {
                if g.started {
                    return Ok(None);
                }
                g.started = true;
                Ok(Some(RawHeader {
                    name: g.name.clone(),
                    size_hint: None,
                    is_file: true,
                    problem: None,
                }))
            }
        }
    }

    fn open_member(&mut self) -> Result<(), ArchiveError> {
        match self {
            Body::Zip(z) => z.open_member(),
            Body::Tar(_) | Body::Gzip(_) => Ok(()),
        }
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, ArchiveError> {
        match self {
            Body::Zip(z) => z.read(buf),
            Body::Tar(t) => t.read(buf),
            Body::Gzip(g) => std::io::Read::read(&mut g.stream, buf)
                .map_err(|e| ArchiveError::from_io(&e, ErrorScope::Archive)),
        }
    }

    fn skip_rest(&mut self, meter: &mut Meter) -> Result<(), ArchiveError> {
        match self {
            Body::Zip(z) => {
                z.skip_rest();
                Ok(())
            }
            Body::Tar(t) => t.skip_rest(meter),
            // The only member: nothing after it needs reaching.
            Body::Gzip(_) => Ok(()),
        }
    }

    fn compressed_in(&self) -> Option<u64> {
        match self {
            Body::Zip(z) => z.compressed_in(),
            _ => None,
        }
    }
}

struct Member {
    name: Vec<u8>,
    /// Member bytes charged (pulled from the format reader).
    pulled: u64,
    /// Member bytes handed to the caller or a nested cursor.
    handed: u64,
    peek: Vec<u8>,
    peek_pos: usize,
    /// An error met while peeking after some bytes had been read: returned
    /// once those bytes have been replayed, so they are scanned first.
    deferred: Option<ArchiveError>,
    /// The member ended or was abandoned after a member-scope error.
    ended: bool,
}

pub(crate) struct Inner {
    kind: ArchiveKind,
    depth: u32,
    meter: Meter,
    body: Body,
    entries: u64,
    /// Bumped whenever the cursor leaves a member, so a nested cursor reading
    /// through a stale [`ParentMember`] fails instead of reading the next one.
    generation: u64,
    member: Option<Member>,
    fatal: Option<ArchiveError>,
    done: bool,
}

/// A reader over the current member of a parent cursor: the byte source of a
/// nested tar or gzip cursor.
pub(crate) struct ParentMember {
    parent: Arc<Mutex<Inner>>,
    generation: u64,
}

impl std::io::Read for ParentMember {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut p = lock(&self.parent);
        if p.generation != self.generation {
            return Err(ArchiveError::new(
                SkipReason::ArchiveUnsupported("nested cursor outlived its member"),
                ErrorScope::Archive,
                "the parent cursor moved to another member",
            )
            .into_io());
        }
        p.read_member(buf).map_err(ArchiveError::into_io)
    }
}

fn lock(m: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Inner {
    fn new(
        source: Source,
        kind: ArchiveKind,
        depth: u32,
        limits: &ArchiveLimits,
        root: RootBudget,
    ) -> Result<Inner, ArchiveError> {
        if depth > limits.max_depth {
            return Err(ArchiveError::new(
                SkipReason::ArchiveDepth,
                ErrorScope::Archive,
                format!("depth {depth} over max_depth {}", limits.max_depth),
            ));
        }
        let (kind, body) = match kind {
            ArchiveKind::Zip => match source {
                Source::File { file, .. } => (ArchiveKind::Zip, Body::Zip(ZipReader::open(file)?)),
                Source::Parent(_) => {
                    return Err(ArchiveError::new(
                        SkipReason::ArchiveUnsupported("streamed zip"),
                        ErrorScope::Archive,
                        "a zip needs random access: spool it first",
                    ))
                }
            },
            ArchiveKind::Tar => (
                ArchiveKind::Tar,
                Body::Tar(TarReader::new(Stream::new(
                    Vec::new(),
                    StreamBody::Plain(source),
                ))),
            ),
            ArchiveKind::Bzip2
            | ArchiveKind::TarBz2
            | ArchiveKind::Xz
            | ArchiveKind::TarXz
            | ArchiveKind::Zstd
            | ArchiveKind::TarZst => {
                let (codec, single, tarred) = match kind {
                    ArchiveKind::Bzip2 | ArchiveKind::TarBz2 => {
                        (Codec::Bzip2, ArchiveKind::Bzip2, ArchiveKind::TarBz2)
                    }
                    ArchiveKind::Xz | ArchiveKind::TarXz => {
                        (Codec::Xz, ArchiveKind::Xz, ArchiveKind::TarXz)
                    }
                    _ => (Codec::Zstd, ArchiveKind::Zstd, ArchiveKind::TarZst),
                };
                let mut dec = DecLayer::new(source, codec, limits.max_inflation_ratio)
                    .map_err(|e| ArchiveError::from_io(&e, ErrorScope::Archive))?;
                let mut head = vec![0u8; SNIFF_LEN];
                // A stream that fails within its first 512 bytes is read as
                // a single file: the bytes before the failure are scanned,
                // then the member reports the error.
                let got = dec.read_head(&mut head);
                head.truncate(got);
                let is_tar = got == SNIFF_LEN && super::detect::is_tar_header(&head);
                let stream = Stream::new(head, StreamBody::Dec(Box::new(dec)));
                if is_tar {
                    (tarred, Body::Tar(TarReader::new(stream)))
                } else {
                    (
                        single,
                        Body::Gzip(GzipReader {
                            name: Vec::new(),
                            stream,
                            started: false,
                        }),
                    )
                }
            }
            ArchiveKind::Gzip | ArchiveKind::TarGz => {
                let mut gz = GzLayer::new(source, limits.max_inflation_ratio);
                let mut head = vec![0u8; SNIFF_LEN];
                // As above: the bytes before an early failure are scanned.
                let got = gz.read_head(&mut head);
                head.truncate(got);
                let is_tar = got == SNIFF_LEN && super::detect::is_tar_header(&head);
                let name = gz.file_name().unwrap_or_default();
                let stream = Stream::new(head, StreamBody::Gz(Box::new(gz)));
                if is_tar {
                    (ArchiveKind::TarGz, Body::Tar(TarReader::new(stream)))
                } else {
                    (
                        ArchiveKind::Gzip,
                        Body::Gzip(GzipReader {
                            name: stream.gz_file_name().unwrap_or(name),
                            stream,
                            started: false,
                        }),
                    )
                }
            }
        };
        Ok(Inner {
            kind,
            depth,
            meter: Meter {
                limits: limits.clone(),
                root,
                archive_bytes: 0,
            },
            body,
            entries: 0,
            generation: 0,
            member: None,
            fatal: None,
            done: false,
        })
    }

    /// Records an error: fatal for the archive, or the end of this member.
    fn fail(&mut self, err: ArchiveError) -> ArchiveError {
        let err = match &self.member {
            Some(m) => err.with_member(&m.name),
            None => err,
        };
        match err.scope() {
            ErrorScope::Archive => {
                self.fatal = Some(err.clone());
                self.member = None;
            }
            ErrorScope::Member => {
                if let Some(m) = self.member.as_mut() {
                    m.ended = true;
                }
            }
        }
        err
    }

    /// Pulls member bytes from the format reader, enforcing every budget.
    fn pull(&mut self, buf: &mut [u8]) -> Result<usize, ArchiveError> {
        let Some(m) = self.member.as_ref() else {
            return Ok(0);
        };
        if m.ended || buf.is_empty() {
            return Ok(0);
        }
        let limits = &self.meter.limits;
        let entry_left = limits.max_entry_bytes.saturating_sub(m.pulled);
        let archive_left = limits
            .max_archive_bytes
            .saturating_sub(self.meter.archive_bytes);
        let root_left = self.meter.root.remaining();
        let (room, binding) = [
            (entry_left, ByteScope::Entry),
            (archive_left, ByteScope::Archive),
            (root_left, ByteScope::Root),
        ]
        .into_iter()
        .min_by_key(|(left, _)| *left)
        .expect("three budgets");
        let want = usize::try_from(room).map_or(buf.len(), |r| r.min(buf.len()));
        if want == 0 {
            // Out of budget: the member may still end exactly here.
            let mut probe = [0u8; 1];
            return match self.body.read(&mut probe) {
                Err(e) => Err(self.fail(e)),
                Ok(0) => {
                    self.end_member();
                    Ok(0)
                }
                Ok(_) => Err(self.fail(budget_error(binding))),
            };
        }
        let n = match self.body.read(&mut buf[..want]) {
            Err(e) => return Err(self.fail(e)),
            Ok(0) => {
                self.end_member();
                return Ok(0);
            }
            Ok(n) => n,
        };
        if let Some(m) = self.member.as_mut() {
            m.pulled += n as u64;
        }
        if let Err(e) = self.meter.charge(n as u64) {
            return Err(self.fail(e));
        }
        let pulled = self.member.as_ref().map_or(0, |m| m.pulled);
        if let Some(cin) = self.body.compressed_in() {
            if over_ratio(pulled, cin, self.meter.limits.max_inflation_ratio) {
                let e = ArchiveError::new(
                    SkipReason::ArchiveInflation,
                    ErrorScope::Member,
                    format!("member inflated {pulled} bytes from {cin}"),
                );
                return Err(self.fail(e));
            }
        }
        Ok(n)
    }

    fn end_member(&mut self) {
        if let Some(m) = self.member.as_mut() {
            m.ended = true;
        }
    }

    pub(crate) fn read_member(&mut self, buf: &mut [u8]) -> Result<usize, ArchiveError> {
        // The peeked bytes first, even after an error met while peeking
        // (that error comes next).
        if let Some(m) = self.member.as_mut() {
            if m.peek_pos < m.peek.len() {
                let n = (m.peek.len() - m.peek_pos).min(buf.len());
                buf[..n].copy_from_slice(&m.peek[m.peek_pos..m.peek_pos + n]);
                m.peek_pos += n;
                m.handed += n as u64;
                return Ok(n);
            }
            if let Some(e) = m.deferred.take() {
                return Err(e);
            }
        }
        if let Some(e) = &self.fatal {
            return Err(e.clone());
        }
        if self.member.is_none() {
            return Ok(0);
        }
        let n = self.pull(buf)?;
        if let Some(m) = self.member.as_mut() {
            m.handed += n as u64;
        }
        Ok(n)
    }

    fn next_member(&mut self) -> Result<Option<MemberInfo>, ArchiveError> {
        if let Some(e) = &self.fatal {
            return Err(e.clone());
        }
        if self.done {
            return Ok(None);
        }
        if self.member.take().is_some() {
            self.generation += 1;
            if let Err(e) = self.body.skip_rest(&mut self.meter) {
                return Err(self.fail(e));
            }
        }
        loop {
            let h = match self.body.next_header(&mut self.meter) {
                Err(e) => return Err(self.fail(e)),
                Ok(None) => {
                    self.done = true;
                    return Ok(None);
                }
                Ok(Some(h)) => h,
            };
            self.entries += 1;
            if self.entries > self.meter.limits.max_entries {
                let e = ArchiveError::new(
                    SkipReason::ArchiveEntries,
                    ErrorScope::Archive,
                    format!("more than {} entries", self.meter.limits.max_entries),
                );
                return Err(self.fail(e));
            }
            let member_error = if !h.is_file {
                None
            } else if let Some(p) = h.problem {
                Some(p)
            } else if h
                .size_hint
                .is_some_and(|s| s > self.meter.limits.max_entry_bytes)
            {
                Some(budget_error(ByteScope::Entry))
            } else {
                self.body.open_member().err()
            };
            if !h.is_file {
                if let Err(e) = self.body.skip_rest(&mut self.meter) {
                    return Err(self.fail(e.with_member(&h.name)));
                }
                continue;
            }
            self.member = Some(Member {
                name: h.name.clone(),
                pulled: 0,
                handed: 0,
                peek: Vec::new(),
                peek_pos: 0,
                deferred: None,
                ended: member_error.is_some(),
            });
            if let Some(e) = member_error {
                // The member stays current, ended: the next call skips it, so
                // the caller learns about this member before any cost of
                // getting past it.
                return Err(self.fail(e));
            }
            // Peek at the first bytes to tell a nested archive; they are
            // replayed by read_member.
            let mut peek = vec![0u8; SNIFF_LEN];
            let mut got = 0;
            let mut deferred = None;
            while got < peek.len() {
                match self.pull(&mut peek[got..]) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    // Keep what was read: the member's reader gets these
                    // bytes, then the error.
                    Err(e) if got > 0 => {
                        deferred = Some(e);
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
            peek.truncate(got);
            let nested = if deferred.is_some() {
                None
            } else {
                sniff(&peek)
            };
            match self.member.as_mut() {
                Some(m) => {
                    m.peek = peek;
                    m.deferred = deferred;
                }
                // An archive-wide error dropped the member (`fail`): it is
                // kept, ended, for its peeked bytes and then the error.
                None if deferred.is_some() => {
                    self.member = Some(Member {
                        name: h.name.clone(),
                        pulled: got as u64,
                        handed: 0,
                        peek,
                        peek_pos: 0,
                        deferred,
                        ended: true,
                    });
                }
                None => {}
            }
            return Ok(Some(MemberInfo {
                name: h.name,
                size_hint: h.size_hint,
                is_nested_archive: nested,
            }));
        }
    }
}

/// An owned, `Send` cursor over the members of one archive. See the module
/// docs of [`crate::archive`].
pub struct ArchiveCursor {
    inner: Arc<Mutex<Inner>>,
}

impl std::fmt::Debug for ArchiveCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let g = lock(&self.inner);
        f.debug_struct("ArchiveCursor")
            .field("kind", &g.kind)
            .field("depth", &g.depth)
            .field("entries", &g.entries)
            .field("archive_bytes", &g.meter.archive_bytes)
            .finish()
    }
}

const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<ArchiveCursor>();
};

impl ArchiveCursor {
    /// Opens the archive in `file` as `kind` (from [`super::sniff`]). `depth`
    /// is 1 for an archive found on disk; nested cursors get their parent's
    /// depth + 1. `Gzip` and `TarGz` are told apart from the content: either
    /// may come back as the other (see [`ArchiveCursor::kind`]).
    pub fn open(
        file: File,
        kind: ArchiveKind,
        depth: u32,
        limits: &ArchiveLimits,
        root_budget: RootBudget,
    ) -> Result<Self, ArchiveError> {
        let source = Source::file(file)?;
        Self::from_source(source, kind, depth, limits, root_budget)
    }

    fn from_source(
        source: Source,
        kind: ArchiveKind,
        depth: u32,
        limits: &ArchiveLimits,
        root: RootBudget,
    ) -> Result<Self, ArchiveError> {
        let inner = Inner::new(source, kind, depth, limits, root)?;
        Ok(ArchiveCursor {
            inner: Arc::new(Mutex::new(inner)),
        })
    }

    /// The kind as read (a gzip holding a tar is `TarGz`).
    pub fn kind(&self) -> ArchiveKind {
        lock(&self.inner).kind
    }

    /// Nesting depth: 1 for an archive on disk.
    pub fn depth(&self) -> u32 {
        lock(&self.inner).depth
    }

    /// Entries (members, directories, links) met so far.
    pub fn entries_seen(&self) -> u64 {
        lock(&self.inner).entries
    }

    /// Member bytes charged to this archive so far.
    pub fn archive_bytes(&self) -> u64 {
        lock(&self.inner).meter.archive_bytes
    }

    /// Entries not yet reached, when the format says so up front (zip);
    /// `None` for streamed formats. Use it to count what a stop skips.
    pub fn members_remaining(&self) -> Option<u64> {
        match &lock(&self.inner).body {
            Body::Zip(z) => Some(z.remaining()),
            _ => None,
        }
    }

    /// Advances to the next member, skipping whatever of the current one was
    /// not read. Directories, links and device nodes are passed over.
    ///
    /// `Ok(None)`: the archive is finished. `Err` with
    /// [`ErrorScope::Member`]: this member cannot be read (encrypted,
    /// unsupported method, over `max_entry_bytes`); the cursor is past it, so
    /// call again to go on. `Err` with [`ErrorScope::Archive`]: nothing more
    /// can be read; every later call returns the same error.
    pub fn next_member(&mut self) -> Result<Option<MemberInfo>, ArchiveError> {
        lock(&self.inner).next_member()
    }

    /// Reads the next bytes of the current member into `buf`; 0 means the
    /// member is finished (for zip, its size and CRC were checked). Enforces
    /// `max_entry_bytes`, `max_archive_bytes`, the root budget and the
    /// inflation ratio on every call: a bomb stops at the limit, having
    /// produced no more than the limit, without holding it in memory.
    pub fn read_member(&mut self, buf: &mut [u8]) -> Result<usize, ArchiveError> {
        lock(&self.inner).read_member(buf)
    }

    /// Opens the current member as an archive of `kind` (depth + 1). Call it
    /// before reading any of the member.
    ///
    /// Tar and gzip stream: the nested cursor reads this cursor's member as it
    /// goes, through its budgets. Use the nested cursor to the end (or drop
    /// it) before calling `next_member` here: after that, the nested cursor's
    /// reads fail. A zip needs random access, so the member is first spooled
    /// to an anonymous temp file (deleted when the cursor drops), never
    /// beyond `max_entry_bytes` and never to memory beyond a 64 KiB buffer.
    pub fn open_nested(&mut self, kind: ArchiveKind) -> Result<ArchiveCursor, ArchiveError> {
        let (generation, depth, limits, root) = {
            let mut g = lock(&self.inner);
            if let Some(e) = &g.fatal {
                return Err(e.clone());
            }
            let misuse = match &g.member {
                None => Some("open_nested without a current member"),
                Some(m) if m.handed > 0 => Some("open_nested after the member was partly read"),
                Some(_) => None,
            };
            if let Some(what) = misuse {
                return Err(ArchiveError::new(
                    SkipReason::ArchiveUnsupported(what),
                    ErrorScope::Member,
                    what,
                ));
            }
            if g.depth >= g.meter.limits.max_depth {
                let e = ArchiveError::new(
                    SkipReason::ArchiveDepth,
                    ErrorScope::Member,
                    format!("nested archive past max_depth {}", g.meter.limits.max_depth),
                );
                return Err(g.fail(e));
            }
            (
                g.generation,
                g.depth + 1,
                g.meter.limits.clone(),
                g.meter.root.clone(),
            )
        };
        match kind {
            ArchiveKind::Zip => {
                let spool = self.spool()?;
                ArchiveCursor::open(spool, ArchiveKind::Zip, depth, &limits, root)
            }
            _ => {
                let source = Source::Parent(ParentMember {
                    parent: Arc::clone(&self.inner),
                    generation,
                });
                Self::from_source(source, kind, depth, &limits, root)
            }
        }
    }

    /// Copies the rest of the current member to an anonymous temp file.
    fn spool(&mut self) -> Result<File, ArchiveError> {
        let io_err = |e: std::io::Error| {
            ArchiveError::new(
                SkipReason::Unreadable(e.kind()),
                ErrorScope::Member,
                format!("spooling a nested zip: {e}"),
            )
        };
        let mut file = tempfile::tempfile().map_err(io_err)?;
        let mut buf = vec![0u8; SPOOL_BUF];
        loop {
            let n = self.read_member(&mut buf)?;
            if n == 0 {
                break;
            }
            file.write_all(&buf[..n]).map_err(io_err)?;
        }
        Ok(file)
    }
}
