//! Enumerate: list the next objects of a source and admit each to the
//! frontier (README.md, steps 1-2 and 6-8).

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::archive::{member_path, ArchiveError, ErrorScope, PolicyAction};
use crate::chunk::ChunkCursor;
use crate::report::{ObjPath, ScanError};
use crate::trace::TaskKind;
use crate::walk::WalkItem;

use super::frontier::{ObjectCtx, ObjectDescriptor, ObjectEnd, WaitKey};
use super::task::{
    ArchiveEnum, ArchiveLevel, EnumCursor, FetchState, GitEnum, PendingMember, Task, WalkEnum,
    ENUM_BATCH_SIZE,
};
use super::{end_skipped, park, skip_at_discovery, Ctx, Note, Shared};
use crate::git::{GitBlob, GitItem};
use crate::skip::{SkipReason, SpecialKind};

pub(super) fn run(shared: &Shared, cursor: EnumCursor, ctx: &mut Ctx) -> Option<Note> {
    ctx.scratch.counters.enumerate_count += 1;
    match cursor {
        EnumCursor::Walk(w) => walk(shared, w, ctx),
        EnumCursor::Archive(a) => archive(shared, a, ctx),
        EnumCursor::Git(g) => git(shared, g, ctx),
    }
}

/// One step of the history walk (`scan git`): like the directory walk, a
/// batch of blobs admitted at level 0, then re-enqueued behind them.
fn git(shared: &Shared, mut g: Box<GitEnum>, ctx: &mut Ctx) -> Option<Note> {
    if g.batch.is_empty() {
        if g.finished {
            return Note::bare(ctx, TaskKind::Enumerate, 0);
        }
        g.finished = !g.cursor.next_batch(ENUM_BATCH_SIZE, &mut g.batch);
        g.batch.reverse();
    }
    let mut admitted = 0u64;
    while let Some(item) = g.batch.pop() {
        if let Some(shard) = shared.settings.shard {
            // `--shard`: by object id; counted once, when handled below.
            if !shard.owns_object(item.object_id().as_bytes()) {
                continue;
            }
        }
        match item {
            GitItem::Blob {
                id,
                path,
                commit,
                base,
            } => {
                let Some(permit) = shared.frontier.try_acquire(0) else {
                    g.batch.push(GitItem::Blob {
                        id,
                        path,
                        commit,
                        base,
                    });
                    return park_walk(shared, EnumCursor::Git(g), admitted, ctx);
                };
                let mut desc = ObjectDescriptor::new(ObjPath::from_file_bytes(&path), 0, 0);
                desc.git = Some(std::sync::Arc::new(GitBlob::new(id, commit, base)));
                let obj = ObjectCtx::new(desc, permit);
                admitted += 1;
                ctx.scratch.counters.shard_owned += 1;
                ctx.spawn_local(Task::FetchSync { obj, state: None });
            }
            GitItem::Submodule { path, id, commit } => {
                // Another repository's commit: nothing here to read.
                let detail = format!(
                    "submodule (gitlink to commit {id}), added in commit {}: not read",
                    commit.short_id()
                );
                let reason = SkipReason::SpecialFile(SpecialKind::Other);
                skip_git_item(shared, ctx, &path, reason, detail);
            }
            GitItem::Unreadable { path, detail, .. } => {
                let reason = SkipReason::Unreadable(std::io::ErrorKind::InvalidData);
                skip_git_item(shared, ctx, &path, reason, detail);
            }
        }
    }
    let note = Note::bare(ctx, TaskKind::Enumerate, admitted);
    if !g.finished {
        ctx.spawn_global(Task::Enumerate {
            cursor: EnumCursor::Git(g),
        });
    }
    note
}

/// Names a history entry that is not read (a submodule, an unreadable
/// tree or commit) as skipped at discovery.
fn skip_git_item(shared: &Shared, ctx: &mut Ctx, path: &[u8], reason: SkipReason, detail: String) {
    ctx.scratch.counters.shard_owned += 1;
    skip_at_discovery(
        shared,
        ctx,
        ObjPath::from_file_bytes(path),
        reason,
        1,
        detail,
    );
}

/// One step of the walk: admit the pending batch (pulling one if there is
/// none), then re-enqueue behind other work, or park when level 0 is full.
fn walk(shared: &Shared, mut w: Box<WalkEnum>, ctx: &mut Ctx) -> Option<Note> {
    if w.batch.is_empty() {
        if w.finished {
            return Note::bare(ctx, TaskKind::Enumerate, 0);
        }
        w.finished = !w.cursor.next_batch(ENUM_BATCH_SIZE, &mut w.batch);
        if w.finished {
            ctx.scratch.counters.excluded.add(&w.cursor.exclusions());
        }
        // Admit in walk order: the next item is popped from the end.
        w.batch.reverse();
    }
    let mut admitted = 0u64;
    while let Some(item) = w.batch.pop() {
        if let Some(shard) = shared.settings.shard {
            // `--shard`: by the path the report shows; counted once, when
            // admitted or skipped below.
            let shown = walk_item_path(&item, &w.roots);
            if shown.is_some_and(|p| !shard.owns_path(&p.to_bytes())) {
                continue;
            }
        }
        match item {
            WalkItem::File { path, size } => {
                let Some(permit) = shared.frontier.try_acquire(0) else {
                    // Level 0 is full: keep the item, wait for places.
                    w.batch.push(WalkItem::File { path, size });
                    return park_walk(shared, EnumCursor::Walk(w), admitted, ctx);
                };
                let follow = shared.settings.follow_symlinks
                    || w.roots.iter().any(|r| r.as_os_str() == path.as_os_str());
                let shown = ObjPath::below_root(&path, root_of(&path, &w.roots), w.roots.len());
                let mut desc = ObjectDescriptor::new(shown, size, 0);
                desc.follow = follow;
                let obj = ObjectCtx::new(desc, permit);
                admitted += 1;
                ctx.scratch.counters.shard_owned += 1;
                ctx.spawn_local(Task::FetchSync { obj, state: None });
            }
            WalkItem::Stream { path } => {
                let Some(permit) = shared.frontier.try_acquire(0) else {
                    w.batch.push(WalkItem::Stream { path });
                    return park_walk(shared, EnumCursor::Walk(w), admitted, ctx);
                };
                let stdin = crate::source::is_stdin(&path);
                let shown = if stdin {
                    ObjPath::from_file_bytes(crate::source::STDIN_NAME.as_bytes())
                } else {
                    ObjPath::below_root(&path, &path, w.roots.len())
                };
                let mut desc = ObjectDescriptor::new(shown, 0, 0);
                desc.stream = true;
                desc.stdin = stdin;
                let obj = ObjectCtx::new(desc, permit);
                admitted += 1;
                ctx.scratch.counters.shard_owned += 1;
                ctx.spawn_local(Task::FetchSync { obj, state: None });
            }
            WalkItem::Skipped { path, reason } => {
                let path = ObjPath::below_root(&path, root_of(&path, &w.roots), w.roots.len());
                ctx.scratch.counters.shard_owned += 1;
                skip_at_discovery(shared, ctx, path, reason, 1, String::new());
            }
            WalkItem::RootError { path, error } => {
                shared.abort(ScanError::Root {
                    path,
                    source: error,
                });
                return None;
            }
        }
    }
    let note = Note::bare(ctx, TaskKind::Enumerate, admitted);
    if !w.finished {
        // Behind the work just spawned: the global queue, where any worker
        // (an idle one first) picks it up.
        ctx.spawn_global(Task::Enumerate {
            cursor: EnumCursor::Walk(w),
        });
    }
    note
}

/// The path the report shows for a walk entry (what `--shard` hashes).
/// `None` for a root error: it belongs to every shard (each one stops).
fn walk_item_path(item: &WalkItem, roots: &[std::path::PathBuf]) -> Option<ObjPath> {
    Some(match item {
        WalkItem::File { path, .. } | WalkItem::Skipped { path, .. } => {
            ObjPath::below_root(path, root_of(path, roots), roots.len())
        }
        WalkItem::Stream { path } if crate::source::is_stdin(path) => {
            ObjPath::from_file_bytes(crate::source::STDIN_NAME.as_bytes())
        }
        WalkItem::Stream { path } => ObjPath::below_root(path, path, roots.len()),
        WalkItem::RootError { .. } => return None,
    })
}

/// Level 0 is full: count the back-pressure and park the walk (of the
/// tree or of the history), its batch inside it, until places come back.
fn park_walk(shared: &Shared, cursor: EnumCursor, admitted: u64, ctx: &mut Ctx) -> Option<Note> {
    ctx.scratch.counters.enumerate_backpressure += 1;
    let note = Note::bare(ctx, TaskKind::Enumerate, admitted);
    park(shared, WaitKey::Level(0), Task::Enumerate { cursor }, ctx);
    note
}

/// The command-line root a walked `path` came from: the longest root that
/// is the path itself or a directory above it.
fn root_of<'a>(path: &'a Path, roots: &'a [std::path::PathBuf]) -> &'a Path {
    let p = path.as_os_str().as_bytes();
    roots
        .iter()
        .map(|r| r.as_os_str().as_bytes())
        .filter(|r| {
            p == *r || (p.starts_with(r) && (r.ends_with(b"/") || p.get(r.len()) == Some(&b'/')))
        })
        .max_by_key(|r| r.len())
        .map_or(path, |r| Path::new(std::ffi::OsStr::from_bytes(r)))
}

/// The path of member `name` of the archive at `archive`. A gzip member
/// without a stored name is named after the archive (`x.gz` gives `x`), as
/// `archive::member_path` does.
fn member_obj_path(archive: &ObjPath, name: &[u8]) -> ObjPath {
    if !name.is_empty() {
        return archive.member(name);
    }
    let last = archive
        .segments()
        .last()
        .expect("an ObjPath has at least one segment");
    let joined = member_path(Path::new(std::ffi::OsStr::from_bytes(last)), b"");
    let derived = &joined.as_os_str().as_bytes()[last.len() + 1..];
    archive.member(derived)
}

/// Runs the archive stack until a member is handed to its FetchSync chain,
/// the stack is empty, the run aborts, or a level is full (then parks).
fn archive(shared: &Shared, mut ae: Box<ArchiveEnum>, ctx: &mut Ctx) -> Option<Note> {
    let note = ae
        .stack
        .last()
        .and_then(|top| Note::of(ctx, TaskKind::Enumerate, &top.obj, 0, 0));
    loop {
        if let Some(p) = ae.pending.take() {
            let level = u8::try_from(ae.stack.len()).expect("depth is at most 64");
            let Some(permit) = shared.frontier.try_acquire(level) else {
                ae.pending = Some(p);
                ctx.scratch.counters.enumerate_backpressure += 1;
                let task = Task::Enumerate {
                    cursor: EnumCursor::Archive(ae),
                };
                park(shared, WaitKey::Level(level), task, ctx);
                return note;
            };
            let mut desc = ObjectDescriptor::new(p.path, p.size_hint.unwrap_or(0), level);
            desc.git = ae.stack.first().and_then(|l| l.obj.desc().git.clone());
            let obj = ObjectCtx::new(desc, permit);
            let top = ae
                .stack
                .last_mut()
                .expect("a pending member has an archive");
            match p.nested {
                Some(kind) => match top.cursor.open_nested(kind) {
                    Ok(cursor) => {
                        obj.set_end(ObjectEnd::Expanded);
                        ae.stack.push(ArchiveLevel { cursor, obj });
                    }
                    Err(e) => {
                        end_skipped(ctx, &obj, e.skip_reason(), e.detail().to_owned());
                        let path = obj.path().clone();
                        drop(obj);
                        if !on_error(shared, &mut ae, &path, &e, true, ctx) {
                            return note;
                        }
                    }
                },
                None => {
                    let state = FetchState::Member {
                        archive: ae,
                        chunks: ChunkCursor::new(
                            shared.settings.chunk_size,
                            shared.settings.context_len,
                        ),
                        carry: Vec::new(),
                    };
                    ctx.spawn_local(Task::FetchSync {
                        obj,
                        state: Some(Box::new(state)),
                    });
                    return note;
                }
            }
            continue;
        }
        let Some(top) = ae.stack.last_mut() else {
            return note;
        };
        match top.cursor.next_member() {
            Ok(Some(info)) => {
                ae.pending = Some(PendingMember {
                    path: member_obj_path(top.obj.path(), &info.name),
                    size_hint: info.size_hint,
                    nested: info.is_nested_archive,
                });
            }
            Ok(None) => {
                // The archive is finished; its object (ended Expanded) is
                // released once this level is dropped.
                ae.stack.pop();
            }
            Err(e) => {
                let path = match e.member() {
                    Some(m) => member_obj_path(top.obj.path(), m),
                    None => top.obj.path().clone(),
                };
                if !on_error(shared, &mut ae, &path, &e, false, ctx) {
                    return note;
                }
            }
        }
    }
}

/// Applies the archive policy to `err`, met at `path` in the innermost
/// archive of `ae`. `member_counted`: the error belongs to a member that is
/// an object of its own (it has a frontier place and already ended
/// skipped); otherwise the skipped member or rest is counted here.
///
/// Returns false when the run was aborted (the caller drops `ae`).
pub(super) fn on_error(
    shared: &Shared,
    ae: &mut ArchiveEnum,
    path: &ObjPath,
    err: &ArchiveError,
    member_counted: bool,
    ctx: &mut Ctx,
) -> bool {
    let policy = shared
        .settings
        .archives
        .as_ref()
        .expect("archives are on when an archive is open")
        .policy;
    let reason = err.skip_reason();
    let action = policy.action(err);
    if action == PolicyAction::AbortRun {
        shared.abort(ScanError::FailRun(format!("{path}: {err}")));
        return false;
    }
    let remaining = ae.stack.last().and_then(|l| l.cursor.members_remaining());
    if !member_counted {
        // The member or the rest of the archive this error stands for.
        let n = match err.scope() {
            ErrorScope::Member => 1,
            ErrorScope::Archive => remaining.unwrap_or(1).max(1),
        };
        skip_at_discovery(
            shared,
            ctx,
            path.clone(),
            reason,
            n,
            err.detail().to_owned(),
        );
    }
    if action == PolicyAction::StopArchive {
        // The members not reached: known for a zip; for a streamed archive
        // the rest counts as one skip, unless the member already stands for
        // it (an archive-wide error inside a member's data).
        let rest = match (err.scope(), member_counted, remaining) {
            (ErrorScope::Archive, false, _) => 0, // counted above
            (_, _, Some(n)) => n,
            (ErrorScope::Archive, true, None) => 0,
            (ErrorScope::Member, _, None) => 1,
        };
        if rest > 0 {
            let archive = ae
                .stack
                .last()
                .map_or_else(|| path.clone(), |l| l.obj.path().clone());
            let detail = format!("{}; the rest of the archive was not read", err.detail());
            skip_at_discovery(shared, ctx, archive, reason, rest, detail);
        }
        ae.stack.pop();
    }
    true
}
