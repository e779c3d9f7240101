//! FetchSync: read the next chunk of an object into a pool buffer, behind
//! its overlap prefix, then spawn the next FetchSync and a Scan (README.md,
//! steps 3-5 and 8).

use std::io;
use std::os::unix::ffi::OsStrExt;

use crate::archive::{
    detect_file, sniff, ArchiveCursor, ArchiveKind, PolicyAction, RootBudget, SNIFF_LEN,
};
use crate::chunk::{ChunkCursor, ChunkMeta};
use crate::pool::PooledBuf;
use crate::report::ScanError;
use crate::skip::SkipReason;
use crate::source::{check_size, open_regular, open_regular_nofollow, read_chunk_at};
use crate::trace::TaskKind;

use super::enumerate::on_error;
use super::frontier::{ObjectEnd, ObjectRef, WaitKey};
use super::task::{ArchiveEnum, ArchiveLevel, ChunkSpan, EnumCursor, FetchState, Task};
use super::{end_skipped, park, Ctx, Note, Shared};

pub(super) fn run(
    shared: &Shared,
    obj: ObjectRef,
    state: Option<Box<FetchState>>,
    ctx: &mut Ctx,
) -> Option<Note> {
    ctx.scratch.counters.fetch_sync_count += 1;
    let Some(buf) = shared.pool.try_get() else {
        // Every buffer is in a Scan task (queued or running): wait for one
        // to come back instead of blocking this worker.
        ctx.scratch.counters.fetch_pool_empty += 1;
        park(shared, WaitKey::Buffer, Task::FetchSync { obj, state }, ctx);
        return None;
    };
    match state {
        None if obj.desc().git.is_some() => first_blob_chunk(shared, obj, buf, ctx),
        None if obj.desc().stream => {
            let path = obj.path().file_path().into_owned();
            let path = if obj.desc().stdin {
                std::path::PathBuf::from(crate::source::STDIN_ARG)
            } else {
                path
            };
            match crate::source::open_stream(&path) {
                Ok(file) => {
                    let chunks =
                        ChunkCursor::new(shared.settings.chunk_size, shared.settings.context_len);
                    stream_chunk(shared, obj, buf, file, chunks, Vec::new(), ctx)
                }
                Err(e) => {
                    let reason = SkipReason::from_io(&e);
                    end_skipped(ctx, &obj, reason, e.to_string());
                    None
                }
            }
        }
        None => first_file_chunk(shared, obj, buf, ctx),
        Some(st) => match *st {
            FetchState::Stream {
                file,
                chunks,
                carry,
            } => stream_chunk(shared, obj, buf, file, chunks, carry, ctx),
            FetchState::File { file, size, chunks } => {
                next_file_chunk(shared, obj, buf, file, size, chunks, ctx)
            }
            FetchState::Blob { data, chunks } => blob_chunk(shared, obj, buf, data, chunks, ctx),
            FetchState::Added { data, windows } => {
                added_chunk(shared, obj, buf, data, windows, ctx)
            }
            FetchState::Member {
                archive,
                chunks,
                carry,
            } => member_chunk(shared, obj, buf, archive, chunks, carry, ctx),
        },
    }
}

/// Spawns the Scan of a planned chunk (last, so it lands in the LIFO slot and
/// runs next on this worker, while the buffer is still in cache). A chunk
/// that owns nothing (possible only with chunks smaller than the context)
/// is not scanned; its new bytes are counted here.
fn spawn_scan(obj: ObjectRef, buf: PooledBuf, meta: &ChunkMeta, ctx: &mut Ctx) {
    if meta.owned.is_empty() {
        ctx.scratch.counters.bytes_scanned += meta.new_bytes() as u64;
        return;
    }
    ctx.spawn_local(Task::Scan {
        obj,
        buf,
        chunk: ChunkSpan::from_meta(meta),
    });
}

fn finished(shared: &Shared, obj: &ObjectRef, end: ObjectEnd) {
    obj.set_end(end);
    if let (Some(p), ObjectEnd::Scanned) = (&shared.progress, end) {
        p.add_files(1);
    }
}

fn first_file_chunk(
    shared: &Shared,
    obj: ObjectRef,
    buf: PooledBuf,
    ctx: &mut Ctx,
) -> Option<Note> {
    let st = &shared.settings;
    let path = obj.path().file_path();
    let opened = if st.follow_symlinks || obj.desc().follow {
        open_regular(&path)
    } else {
        open_regular_nofollow(&path)
    };
    let (file, size) =
        match opened.and_then(|(f, s)| check_size(s, st.max_file_size).map(|()| (f, s))) {
            Ok(x) => x,
            Err(reason) => {
                end_skipped(ctx, &obj, reason, String::new());
                return Note::of(ctx, TaskKind::FetchSync, &obj, 0, 0);
            }
        };
    drop(path);
    start_file(shared, obj, buf, file, size, ctx)
}

/// Reads a file's first chunk, opens it as an archive when it is one, else
/// hands the chunk to a Scan.
fn start_file(
    shared: &Shared,
    obj: ObjectRef,
    mut buf: PooledBuf,
    file: std::fs::File,
    size: u64,
    ctx: &mut Ctx,
) -> Option<Note> {
    let st = &shared.settings;
    let cs = st.chunk_size;
    let read = match read_chunk_at(&file, 0, size, &mut buf.full_mut()[..cs]) {
        Ok(r) => r,
        Err(reason) => {
            end_skipped(ctx, &obj, reason, String::new());
            return Note::of(ctx, TaskKind::FetchSync, &obj, 0, 0);
        }
    };
    buf.set_len(read.len);
    ctx.scratch.counters.bytes_fetched += read.len as u64;
    let note = Note::of(ctx, TaskKind::FetchSync, &obj, 0, read.len as u64);
    if st.archives.is_some() {
        let head = &buf[..read.len.min(SNIFF_LEN)];
        let path = obj.path().file_path();
        let name = path.file_name().map_or(&[][..], |n| n.as_bytes());
        let kind = detect_file(&file, head, name);
        drop(path);
        if let Some(kind) = kind {
            drop(buf);
            open_archive(shared, obj, file, kind, ctx);
            return note;
        }
    }
    let chunks = ChunkCursor::new(cs, st.context_len);
    emit_file_chunk(shared, obj, file, size, chunks, buf, read.done, ctx);
    note
}

/// The first FetchSync of a git blob (`scan git`): its size from the
/// object header (a blob over `--max-file-size` is skipped without being
/// decoded), then the whole blob decoded (`git::Odb::find_blob`), an archive opened as on
/// disk, else the first chunk handed to a Scan.
fn first_blob_chunk(
    shared: &Shared,
    obj: ObjectRef,
    buf: PooledBuf,
    ctx: &mut Ctx,
) -> Option<Note> {
    let st = &shared.settings;
    let id = obj.desc().git.as_ref().expect("a git blob").id;
    let repo = ctx.scratch.repo.get_or_insert_with(|| {
        shared
            .git
            .as_ref()
            .expect("a scan git run has a repository")
            .worker()
    });
    let unreadable = SkipReason::Unreadable(io::ErrorKind::InvalidData);
    let odb = shared
        .git
        .as_ref()
        .expect("a scan git run has a repository");
    let header = odb.blob_size(repo, &id, &mut ctx.scratch.git_diff.decode);
    let size = match header {
        Ok(size) => size,
        Err(e) => {
            end_skipped(ctx, &obj, unreadable, format!("blob {id}: {e}"));
            return Note::of(ctx, TaskKind::FetchSync, &obj, 0, 0);
        }
    };
    if let Err(reason) = check_size(size, st.max_file_size) {
        end_skipped(ctx, &obj, reason, format!("blob {id}"));
        return Note::of(ctx, TaskKind::FetchSync, &obj, 0, 0);
    }
    // Decoded into this worker's spare buffer (the last blob's, given back
    // by `blob_chunk`): no fresh pages for every blob.
    let mut data = std::mem::take(&mut ctx.scratch.blob_buf);
    let repo = ctx.scratch.repo.as_ref().expect("made above");
    let found = odb.find_blob(repo, &id, &mut data, &mut ctx.scratch.git_diff.decode);
    if let Err(e) = found {
        end_skipped(ctx, &obj, unreadable, format!("blob {id}: {e}"));
        return Note::of(ctx, TaskKind::FetchSync, &obj, 0, 0);
    }
    if let Some(pointer) = crate::git::lfs::parse_pointer(&data) {
        crate::git::odb::give_back(&mut ctx.scratch.blob_buf, data);
        return lfs_object(shared, obj, buf, &pointer, odb.lfs_objects(), ctx);
    }
    if st.archives.is_some() {
        if let Some(kind) = sniff(&data[..data.len().min(SNIFF_LEN)]) {
            drop(buf);
            let note = Note::of(ctx, TaskKind::FetchSync, &obj, 0, data.len() as u64);
            ctx.scratch.counters.bytes_fetched += data.len() as u64;
            // The archive readers read a file (a zip seeks to its
            // directory): the blob is spooled to an unnamed temp file.
            match spool(&data) {
                Ok(file) => open_archive(shared, obj, file, kind, ctx),
                Err(e) => end_skipped(ctx, &obj, SkipReason::from_io(&e), e.to_string()),
            }
            return note;
        }
    }
    // Only what the blob adds against its base, when it has one (README.md
    // of `git`, "Scanning only what a blob adds").
    let git = obj.desc().git.as_ref().expect("a git blob");
    let reading = crate::git::added::reading(
        odb,
        ctx.scratch.repo.as_ref().expect("made above"),
        git.base.as_ref(),
        &data,
        st.max_file_size,
        &shared.rules,
        st.chunk_size,
        &mut ctx.scratch.git_diff,
    );
    if let crate::git::added::Reading::Added(added, windows) = reading {
        git.added
            .set(added)
            .expect("set once, by the blob's first FetchSync");
        return added_chunk(shared, obj, buf, data, windows, ctx);
    }
    let chunks = ChunkCursor::new(st.chunk_size, st.context_len);
    blob_chunk(shared, obj, buf, data, chunks, ctx)
}

/// A blob that is a Git LFS pointer (`git::lfs`): the object's bytes from
/// the local LFS store, read like a file on disk (whole: the pointer it
/// replaced says nothing about which bytes are new), or the file named as
/// skipped, `lfs_object_missing`, when the object was never fetched.
fn lfs_object(
    shared: &Shared,
    obj: ObjectRef,
    buf: PooledBuf,
    pointer: &crate::git::lfs::Pointer,
    store: &std::path::Path,
    ctx: &mut Ctx,
) -> Option<Note> {
    let id = obj.desc().git.as_ref().expect("a git blob").id;
    let oid = &pointer.oid;
    let skip = |ctx: &mut Ctx, reason: SkipReason, detail: String| {
        end_skipped(ctx, &obj, reason, detail);
        Note::of(ctx, TaskKind::FetchSync, &obj, 0, 0)
    };
    if let Err(reason) = check_size(pointer.size, shared.settings.max_file_size) {
        return skip(
            ctx,
            reason,
            format!("Git LFS object sha256:{oid} (blob {id})"),
        );
    }
    let path = pointer.path_in(store);
    let (file, size) = match open_regular_nofollow(&path) {
        Ok(opened) => opened,
        Err(SkipReason::Vanished) => {
            let detail = format!(
                "blob {id} is a Git LFS pointer to sha256:{oid} ({} B), which is not in {} \
                 (`git lfs fetch --all` brings it)",
                pointer.size,
                store.display()
            );
            return skip(ctx, SkipReason::LfsObjectMissing, detail);
        }
        Err(reason) => return skip(ctx, reason, format!("{}", path.display())),
    };
    if size != pointer.size {
        let detail = format!(
            "{} holds {size} B, its pointer (blob {id}) says {} B",
            path.display(),
            pointer.size
        );
        return skip(
            ctx,
            SkipReason::Unreadable(io::ErrorKind::InvalidData),
            detail,
        );
    }
    start_file(shared, obj, buf, file, size, ctx)
}

/// The next window of a blob read by what it adds: the piece's bytes
/// copied into the pool buffer, its owned range and the lines before it
/// (counted over the bytes skipped too).
fn added_chunk(
    shared: &Shared,
    obj: ObjectRef,
    mut buf: PooledBuf,
    data: Vec<u8>,
    mut windows: crate::git::added::Windows,
    ctx: &mut Ctx,
) -> Option<Note> {
    let Some((piece, lines)) = windows.next(&data) else {
        // Nothing added (lines removed only): nothing to scan.
        drop(buf);
        finished(shared, &obj, ObjectEnd::Scanned);
        crate::git::odb::give_back(&mut ctx.scratch.blob_buf, data);
        return Note::of(ctx, TaskKind::FetchSync, &obj, 0, 0);
    };
    let bytes = &data[piece.buf.clone()];
    buf.full_mut()[..bytes.len()].copy_from_slice(bytes);
    buf.set_len(bytes.len());
    ctx.scratch.counters.bytes_fetched += bytes.len() as u64;
    let owned = piece.owned.start - piece.buf.start..piece.owned.end - piece.buf.start;
    let note = Note::of(
        ctx,
        TaskKind::FetchSync,
        &obj,
        piece.owned.start as u64,
        owned.len() as u64,
    );
    let meta = ChunkMeta {
        index: 0,
        base_offset: piece.buf.start as u64,
        prefix_len: bytes.len() - owned.len(),
        len: bytes.len(),
        owned,
        is_last: windows.is_done(),
        lines,
    };
    if windows.is_done() {
        finished(shared, &obj, ObjectEnd::Scanned);
        crate::git::odb::give_back(&mut ctx.scratch.blob_buf, data);
    } else {
        ctx.spawn_local(Task::FetchSync {
            obj: ObjectRef::clone(&obj),
            state: Some(Box::new(FetchState::Added { data, windows })),
        });
    }
    spawn_scan(obj, buf, &meta, ctx);
    note
}

fn spool(data: &[u8]) -> io::Result<std::fs::File> {
    use std::io::Write;
    let mut f = tempfile::tempfile()?;
    f.write_all(data)?;
    Ok(f)
}

/// Copies a stream (its first bytes already read into `head`) into an
/// unnamed temp file, at most `limit` bytes in all; `None` when the stream
/// holds more. Memory stays at `io::copy`'s buffer.
fn spool_stream(
    head: &[u8],
    stream: &mut std::fs::File,
    limit: u64,
) -> io::Result<Option<std::fs::File>> {
    use std::io::{Read, Seek, Write};
    let mut f = tempfile::tempfile()?;
    f.write_all(head)?;
    let room = limit.saturating_sub(head.len() as u64);
    let copied = io::copy(&mut stream.take(room.saturating_add(1)), &mut f)?;
    if copied > room {
        return Ok(None);
    }
    f.rewind()?;
    Ok(Some(f))
}

/// The next chunk of a decoded blob: the overlap prefix and up to a chunk
/// of new bytes, copied from the blob into the pool buffer.
fn blob_chunk(
    shared: &Shared,
    obj: ObjectRef,
    mut buf: PooledBuf,
    data: Vec<u8>,
    mut chunks: ChunkCursor,
    ctx: &mut Ctx,
) -> Option<Note> {
    let cs = shared.settings.chunk_size;
    let prefix = chunks.next_prefix_len();
    let offset = chunks.next_offset();
    let start = usize::try_from(offset).expect("a blob fits in memory") - prefix;
    let end = (start + prefix + cs).min(data.len());
    buf.full_mut()[..end - start].copy_from_slice(&data[start..end]);
    buf.set_len(end - start);
    ctx.scratch.counters.bytes_fetched += (end - start) as u64;
    let note = Note::of(
        ctx,
        TaskKind::FetchSync,
        &obj,
        offset,
        (end - start - prefix) as u64,
    );
    let done = end == data.len();
    let meta = chunks.advance(&buf, done);
    if done {
        finished(shared, &obj, ObjectEnd::Scanned);
        crate::git::odb::give_back(&mut ctx.scratch.blob_buf, data);
    } else {
        ctx.spawn_local(Task::FetchSync {
            obj: ObjectRef::clone(&obj),
            state: Some(Box::new(FetchState::Blob { data, chunks })),
        });
    }
    spawn_scan(obj, buf, &meta, ctx);
    note
}

/// A file on disk turned out to be an archive: open it and hand it to an
/// archive Enumerate (README.md, step 6).
fn open_archive(
    shared: &Shared,
    obj: ObjectRef,
    file: std::fs::File,
    kind: ArchiveKind,
    ctx: &mut Ctx,
) {
    let arch = shared.settings.archives.as_ref().expect("archives are on");
    let root = RootBudget::new(arch.limits.max_root_bytes);
    match ArchiveCursor::open(file, kind, 1, &arch.limits, root) {
        Ok(cursor) => {
            finished(shared, &obj, ObjectEnd::Expanded);
            let ae = ArchiveEnum {
                stack: vec![ArchiveLevel { cursor, obj }],
                pending: None,
            };
            ctx.spawn_local(Task::Enumerate {
                cursor: EnumCursor::Archive(Box::new(ae)),
            });
        }
        Err(e) => {
            end_skipped(ctx, &obj, e.skip_reason(), e.detail().to_owned());
            if arch.policy.action(&e) == PolicyAction::AbortRun {
                shared.abort(ScanError::FailRun(format!("{}: {e}", obj.path())));
            }
        }
    }
}

fn next_file_chunk(
    shared: &Shared,
    obj: ObjectRef,
    mut buf: PooledBuf,
    file: std::fs::File,
    size: u64,
    chunks: ChunkCursor,
    ctx: &mut Ctx,
) -> Option<Note> {
    let st = &shared.settings;
    let prefix = chunks.next_prefix_len();
    let start = chunks.next_offset() - prefix as u64;
    let want = prefix + st.chunk_size;
    let read = match read_chunk_at(&file, start, size, &mut buf.full_mut()[..want]) {
        Ok(r) => r,
        Err(reason) => {
            end_skipped(ctx, &obj, reason, String::new());
            return Note::of(ctx, TaskKind::FetchSync, &obj, start, 0);
        }
    };
    ctx.scratch.counters.bytes_fetched += read.len as u64;
    let note = Note::of(ctx, TaskKind::FetchSync, &obj, start, read.len as u64);
    if read.len < prefix {
        // The file shrank below bytes already read: its tail cannot be
        // scanned consistently any more.
        let reason = SkipReason::Unreadable(io::ErrorKind::UnexpectedEof);
        end_skipped(ctx, &obj, reason, String::new());
        return note;
    }
    buf.set_len(read.len);
    emit_file_chunk(shared, obj, file, size, chunks, buf, read.done, ctx);
    note
}

/// A chunk of a file is in `buf`: end the object if this was the last one,
/// else queue the FetchSync for the next, then hand the chunk to a Scan.
#[allow(clippy::too_many_arguments)]
fn emit_file_chunk(
    shared: &Shared,
    obj: ObjectRef,
    file: std::fs::File,
    size: u64,
    mut chunks: ChunkCursor,
    buf: PooledBuf,
    done: bool,
    ctx: &mut Ctx,
) {
    let meta = chunks.advance(&buf, done);
    if done {
        finished(shared, &obj, ObjectEnd::Scanned);
    } else {
        let next = FetchState::File { file, size, chunks };
        ctx.spawn_local(Task::FetchSync {
            obj: ObjectRef::clone(&obj),
            state: Some(Box::new(next)),
        });
    }
    spawn_scan(obj, buf, &meta, ctx);
}

/// Reads the next chunk of a stream root behind the carried overlap. The
/// stream is bounded like a file: past `--max-file-size` bytes it ends
/// skipped as too large, what was read before still scanned.
fn stream_chunk(
    shared: &Shared,
    obj: ObjectRef,
    mut buf: PooledBuf,
    mut file: std::fs::File,
    mut chunks: ChunkCursor,
    mut carry: Vec<u8>,
    ctx: &mut Ctx,
) -> Option<Note> {
    use std::io::Read;
    let cs = shared.settings.chunk_size;
    let prefix = chunks.next_prefix_len();
    let offset = chunks.next_offset();
    let limit = shared.settings.max_file_size.unwrap_or(u64::MAX);
    let room = usize::try_from(limit.saturating_sub(offset)).map_or(cs, |r| r.min(cs));
    let full = buf.full_mut();
    full[..prefix].copy_from_slice(&carry[carry.len() - prefix..]);
    let mut n = 0;
    let mut eof = false;
    let mut error = None;
    while n < room {
        match file.read(&mut full[prefix + n..prefix + room]) {
            Ok(0) => {
                eof = true;
                break;
            }
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    // At the limit with bytes still coming: the stream is too large.
    let mut probe = [0u8; 1];
    let over = !eof
        && error.is_none()
        && n == room
        && room < cs
        && matches!(file.read(&mut probe), Ok(k) if k > 0);
    let at_limit_end = !eof && error.is_none() && n == room && room < cs && !over;
    buf.set_len(prefix + n);
    ctx.scratch.counters.bytes_fetched += (prefix + n) as u64;
    let note = Note::of(ctx, TaskKind::FetchSync, &obj, offset, n as u64);
    if offset == 0 && error.is_none() && shared.settings.archives.is_some() {
        if let Some(kind) = sniff(&buf[..n.min(SNIFF_LEN)]) {
            // An archive on standard input or a FIFO: the archive readers
            // want a file (a zip seeks to its directory), so the stream is
            // spooled to an unnamed temp file, bounded like any file.
            let head = buf[..n].to_vec();
            drop(buf);
            match spool_stream(&head, &mut file, limit) {
                Ok(Some(spooled)) => open_archive(shared, obj, spooled, kind, ctx),
                Ok(None) => {
                    let reason = SkipReason::TooLarge {
                        size: limit.saturating_add(1),
                        limit,
                    };
                    let detail = format!("a {kind} archive on a stream, not read");
                    end_skipped(ctx, &obj, reason, detail);
                }
                Err(e) => end_skipped(ctx, &obj, SkipReason::from_io(&e), e.to_string()),
            }
            return note;
        }
    }
    let last = eof || error.is_some() || over || at_limit_end;
    let meta = chunks.advance(&buf, last);
    if let Some(e) = error {
        end_skipped(ctx, &obj, SkipReason::from_io(&e), e.to_string());
    } else if over {
        let reason = SkipReason::TooLarge {
            size: limit.saturating_add(1),
            limit,
        };
        let detail = format!("the first {limit} bytes were scanned");
        end_skipped(ctx, &obj, reason, detail);
    } else if last {
        finished(shared, &obj, ObjectEnd::Scanned);
    } else {
        let keep = chunks.next_prefix_len();
        carry.clear();
        carry.extend_from_slice(&buf[buf.len() - keep..]);
        ctx.spawn_local(Task::FetchSync {
            obj: ObjectRef::clone(&obj),
            state: Some(Box::new(FetchState::Stream {
                file,
                chunks,
                carry,
            })),
        });
    }
    spawn_scan(obj, buf, &meta, ctx);
    note
}

/// Streams the next chunk of an archive member: the carried overlap, then
/// up to a chunk of new member bytes (README.md, step 7).
fn member_chunk(
    shared: &Shared,
    obj: ObjectRef,
    mut buf: PooledBuf,
    mut archive: Box<ArchiveEnum>,
    mut chunks: ChunkCursor,
    mut carry: Vec<u8>,
    ctx: &mut Ctx,
) -> Option<Note> {
    let cs = shared.settings.chunk_size;
    let prefix = chunks.next_prefix_len();
    let offset = chunks.next_offset();
    let full = buf.full_mut();
    full[..prefix].copy_from_slice(&carry[carry.len() - prefix..]);
    let top = archive
        .stack
        .last_mut()
        .expect("a member's archive is open");
    let mut n = 0;
    let mut eof = false;
    let mut error = None;
    while n < cs {
        match top.cursor.read_member(&mut full[prefix + n..prefix + cs]) {
            Ok(0) => {
                eof = true;
                break;
            }
            Ok(k) => n += k,
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    buf.set_len(prefix + n);
    ctx.scratch.counters.bytes_fetched += (prefix + n) as u64;
    let note = Note::of(ctx, TaskKind::FetchSync, &obj, offset, n as u64);
    if let Some(e) = error {
        // Keep what was read: scan it as the member's last chunk.
        let meta = chunks.advance(&buf, true);
        end_skipped(ctx, &obj, e.skip_reason(), e.detail().to_owned());
        let path = obj.path().clone();
        if on_error(shared, &mut archive, &path, &e, true, ctx) {
            ctx.spawn_local(Task::Enumerate {
                cursor: EnumCursor::Archive(archive),
            });
            spawn_scan(obj, buf, &meta, ctx);
        }
        return note;
    }
    let meta = chunks.advance(&buf, eof);
    if eof {
        finished(shared, &obj, ObjectEnd::Scanned);
        // The member is done: list the next one.
        ctx.spawn_local(Task::Enumerate {
            cursor: EnumCursor::Archive(archive),
        });
    } else {
        let keep = chunks.next_prefix_len();
        carry.clear();
        carry.extend_from_slice(&buf[buf.len() - keep..]);
        ctx.spawn_local(Task::FetchSync {
            obj: ObjectRef::clone(&obj),
            state: Some(Box::new(FetchState::Member {
                archive,
                chunks,
                carry,
            })),
        });
    }
    spawn_scan(obj, buf, &meta, ctx);
    note
}
