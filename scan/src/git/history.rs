//! The history walk: which commits, in which order, and which blobs each
//! one introduced (README.md, steps 1-2).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::os::unix::ffi::OsStrExt;

use gix::objs::tree::EntryKind;
use gix::objs::{CommitRef, Find, TreeRefIter};
use gix::ObjectId;
use std::sync::Arc;

use super::{CommitMeta, GitOptions};

/// One thing the history walk found.
#[derive(Debug)]
pub enum GitItem {
    /// A blob seen for the first time, at `path` in `commit`.
    Blob {
        /// The blob's id.
        id: ObjectId,
        /// Its path in the commit's tree (`/`-separated, raw bytes).
        path: Vec<u8>,
        /// The commit that introduced it.
        commit: Arc<CommitMeta>,
    },
    /// A submodule (a gitlink: a commit of another repository) at `path`:
    /// its content is not in this repository, so it is named as skipped.
    Submodule {
        /// Its path in the commit's tree.
        path: Vec<u8>,
        /// The commit of the other repository it pins.
        id: ObjectId,
        /// The commit that introduced this gitlink.
        commit: Arc<CommitMeta>,
    },
    /// An object the walk could not read (a missing or corrupt tree or
    /// commit): named, and the rest of the history is still walked.
    Unreadable {
        /// The path of the tree (or the commit id) that could not be read.
        path: Vec<u8>,
        /// The object that could not be read (the null id for the index).
        id: ObjectId,
        /// What went wrong.
        detail: String,
    },
}

impl GitItem {
    /// The object this item is about: what `--shard` partitions by.
    pub fn object_id(&self) -> &ObjectId {
        match self {
            GitItem::Blob { id, .. }
            | GitItem::Submodule { id, .. }
            | GitItem::Unreadable { id, .. } => id,
        }
    }
}

/// What one tree entry is, as far as the walk cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A file or a symbolic link: a symlink's blob is its target path, read
    /// as text like any blob and never followed.
    Blob,
    Tree,
    /// A submodule's commit (a gitlink).
    Submodule,
}

/// The walk's resumable state. `next_batch` is called by the pipeline's
/// Enumerate task; everything here is owned by that one task at a time.
pub struct HistoryCursor {
    repo: gix::Repository,
    /// Commits to walk, parents before children.
    order: Vec<ObjectId>,
    /// The root tree of every selected commit.
    trees: HashMap<ObjectId, ObjectId>,
    next: usize,
    /// Blobs already handed out (each blob is scanned once).
    seen_blobs: HashSet<ObjectId>,
    /// Trees already walked: every blob below them was handed out then (or
    /// was its first parent's), so a tree met again is not re-read.
    seen_trees: HashSet<ObjectId>,
    /// Items found but not yet handed out.
    pending: VecDeque<GitItem>,
    /// `--staged`: the index still has to be compared with HEAD.
    staged: bool,
    /// `--all-objects`: every blob in the object database, handed out
    /// after the commits if no commit reached it.
    orphans: Vec<ObjectId>,
    /// A shallow clone's boundary commits: their parents are not in the
    /// repository, so they are walked as root commits (their whole tree).
    shallow: HashSet<ObjectId>,
    /// `--exclude`: paths (in the commit's tree) not to scan.
    exclude: Option<ignore::overrides::Override>,
    /// `--state`: the tips to write back when the scan completes.
    state: Option<super::StateUpdate>,
    /// What the selection has to tell the user (a rewritten ref, ...).
    notes: Vec<String>,
    buf: Vec<u8>,
}

impl std::fmt::Debug for HistoryCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HistoryCursor")
            .field("commits", &self.order.len())
            .field("next", &self.next)
            .field("seen_blobs", &self.seen_blobs.len())
            .finish_non_exhaustive()
    }
}

fn err(what: impl std::fmt::Display) -> String {
    what.to_string()
}

impl HistoryCursor {
    /// Selects the commits `opts` asks for (all refs, `--branch`,
    /// `--since-commit`, `--log-range`) and orders them parents first.
    /// An unknown revision is an error.
    pub fn new(repo: &gix::ThreadSafeRepository, opts: &GitOptions) -> Result<Self, String> {
        let mut repo = repo.to_thread_local();
        repo.object_cache_size_if_unset(16 << 20);
        let mut cursor = Self {
            repo,
            order: Vec::new(),
            trees: HashMap::new(),
            next: 0,
            seen_blobs: HashSet::new(),
            seen_trees: HashSet::new(),
            pending: VecDeque::new(),
            staged: opts.staged,
            orphans: Vec::new(),
            shallow: HashSet::new(),
            exclude: crate::walk::compile_excludes(&opts.exclude)?,
            state: None,
            notes: Vec::new(),
            buf: Vec::new(),
        };
        if let Ok(Some(boundary)) = cursor.repo.shallow_commits() {
            cursor.shallow = boundary.iter().copied().collect();
            if !cursor.shallow.is_empty() {
                cursor.notes.push(format!(
                    "shallow clone: the history ends at {} boundary {} (their parents \
                     are not in the repository); each is scanned whole as a root commit",
                    cursor.shallow.len(),
                    if cursor.shallow.len() == 1 {
                        "commit"
                    } else {
                        "commits"
                    },
                ));
            }
        }
        if !opts.staged {
            cursor.select(opts)?;
        }
        Ok(cursor)
    }

    /// How many commits the walk covers.
    pub fn commits(&self) -> usize {
        self.order.len()
    }

    /// `--state`: the state to write when the scan completes.
    pub fn take_state_update(&mut self) -> Option<super::StateUpdate> {
        self.state.take()
    }

    /// Lines for the user about the selection (`--state`: a first run, a
    /// rewritten ref, a commit no longer in the repository).
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    fn resolve(&self, spec: &str) -> Result<ObjectId, String> {
        let id = self
            .repo
            .rev_parse_single(spec)
            .map_err(|e| format!("unknown revision '{spec}': {e}"))?;
        let obj = id.object().map_err(|e| format!("revision '{spec}': {e}"))?;
        let commit = obj
            .peel_to_commit()
            .map_err(|e| format!("revision '{spec}' is not a commit: {e}"))?;
        Ok(commit.id)
    }

    fn select(&mut self, opts: &GitOptions) -> Result<(), String> {
        let mut tips = Vec::new();
        let mut hidden = Vec::new();
        let mut named = super::state::Tips::new();
        if let Some(range) = &opts.range {
            let (a, b) = range
                .split_once("..")
                .ok_or_else(|| format!("'{range}' is not a range A..B"))?;
            let b = if b.is_empty() { "HEAD" } else { b };
            tips.push(self.resolve(b)?);
            if !a.is_empty() {
                hidden.push(self.resolve(a)?);
            }
        } else if let Some(branch) = &opts.branch {
            let id = self.resolve(branch)?;
            named.insert(branch.clone(), id);
            tips.push(id);
        } else {
            named = self.all_ref_tips()?;
            tips = named.values().copied().collect();
            tips.sort();
            tips.dedup();
        }
        if let Some(path) = &opts.state {
            hidden.extend(self.state_hidden(path, &named)?);
            self.state = Some(super::StateUpdate {
                path: path.clone(),
                tips: named,
            });
        }
        if opts.all_objects {
            tips.extend(self.all_objects()?);
        }
        if let Some(since) = &opts.since_commit {
            hidden.push(self.resolve(since)?);
        }
        let excluded = self.ancestors(&hidden, &HashSet::new())?;
        let mut parents: HashMap<ObjectId, (Vec<ObjectId>, i64)> = HashMap::new();
        let mut queue: VecDeque<ObjectId> =
            tips.into_iter().filter(|t| !excluded.contains(t)).collect();
        while let Some(id) = queue.pop_front() {
            if parents.contains_key(&id) {
                continue;
            }
            let Some((tree, ps, time)) = self.read_commit(&id) else {
                // Unreadable commit (shallow boundary, missing object): its
                // tree is not walked; named when the walk reaches it.
                parents.insert(id, (Vec::new(), 0));
                continue;
            };
            self.trees.insert(id, tree);
            for p in &ps {
                if !excluded.contains(p) && !parents.contains_key(p) {
                    queue.push_back(*p);
                }
            }
            parents.insert(id, (ps, time));
        }
        self.order = topo_order(&parents);
        Ok(())
    }

    /// Every ref (and HEAD) peeled to a commit, by full name; refs naming a
    /// tree or a blob directly are left out.
    fn all_ref_tips(&self) -> Result<super::state::Tips, String> {
        let mut tips = super::state::Tips::new();
        let refs = self.repo.references().map_err(err)?;
        for r in refs.all().map_err(err)? {
            let Ok(mut r) = r else { continue };
            let name = r.name().as_bstr().to_string();
            if let Ok(c) = r.peel_to_commit() {
                tips.insert(name, c.id);
            }
        }
        if let Ok(head) = self.repo.head_commit() {
            tips.insert("HEAD".into(), head.id);
        }
        Ok(tips)
    }

    /// `--state FILE`: the commits of the last complete scan to hide (those
    /// still in the repository), with a note for a first run, a ref whose
    /// old commit its new one does not reach (rewritten: force-pushed or
    /// reset), and an old commit no longer in the repository.
    fn state_hidden(
        &mut self,
        path: &std::path::Path,
        now: &super::state::Tips,
    ) -> Result<Vec<ObjectId>, String> {
        let Some(before) = super::state::load(path)? else {
            self.notes.push(format!(
                "state {} does not exist yet: the whole history is scanned",
                path.display()
            ));
            return Ok(Vec::new());
        };
        let mut hidden = Vec::new();
        for (name, old) in &before {
            if self.read_commit(old).is_none() {
                self.notes.push(format!(
                    "state: {name} was at {old}, which is no longer in the repository: \
                     what it reached is scanned again"
                ));
                continue;
            }
            hidden.push(*old);
            if let Some(new) = now.get(name) {
                if new != old && !self.reaches(*new, *old) {
                    self.notes.push(format!(
                        "state: {name} was rewritten ({} is not an ancestor of {}): \
                         scanning every commit the last scan's commits do not reach",
                        &old.to_string()[..12],
                        &new.to_string()[..12]
                    ));
                }
            }
        }
        hidden.sort();
        hidden.dedup();
        Ok(hidden)
    }

    /// Whether `target` is `from` or one of its ancestors (one walk, ended
    /// when found).
    fn reaches(&mut self, from: ObjectId, target: ObjectId) -> bool {
        let mut seen = HashSet::new();
        let mut queue = VecDeque::from([from]);
        while let Some(id) = queue.pop_front() {
            if id == target {
                return true;
            }
            if !seen.insert(id) {
                continue;
            }
            if let Some((_, ps, _)) = self.read_commit(&id) {
                queue.extend(ps);
            }
        }
        false
    }

    /// `--all-objects`: every commit id in the object database (returned,
    /// to be walked as tips); every blob id is kept in `orphans`.
    fn all_objects(&mut self) -> Result<Vec<ObjectId>, String> {
        let mut commits = Vec::new();
        let mut seen = HashSet::new();
        for id in self.repo.objects.iter().map_err(err)? {
            let Ok(id) = id else { continue };
            if !seen.insert(id) {
                continue; // the same object in two packs, or packed and loose
            }
            match self.repo.find_header(id).map(|h| h.kind()) {
                Ok(gix::object::Kind::Commit) => commits.push(id),
                Ok(gix::object::Kind::Blob) => self.orphans.push(id),
                _ => {}
            }
        }
        self.orphans.sort();
        self.orphans.reverse(); // popped from the end: ascending id order
        Ok(commits)
    }

    /// Every commit reachable from `from`.
    fn ancestors(
        &mut self,
        from: &[ObjectId],
        stop: &HashSet<ObjectId>,
    ) -> Result<HashSet<ObjectId>, String> {
        let mut seen = HashSet::new();
        let mut queue: VecDeque<ObjectId> = from.iter().copied().collect();
        while let Some(id) = queue.pop_front() {
            if stop.contains(&id) || !seen.insert(id) {
                continue;
            }
            if let Some((_, ps, _)) = self.read_commit(&id) {
                queue.extend(ps);
            }
        }
        Ok(seen)
    }

    /// A commit's tree, parents and committer time; `None` if it cannot be
    /// read.
    fn read_commit(&mut self, id: &ObjectId) -> Option<(ObjectId, Vec<ObjectId>, i64)> {
        let data = self.repo.objects.try_find(id, &mut self.buf).ok()??;
        if data.kind != gix::object::Kind::Commit {
            return None;
        }
        let c = CommitRef::from_bytes(data.data, data.object_hash).ok()?;
        let time = c.committer().ok().map_or(0, |s| s.seconds());
        let parents = if self.shallow.contains(id) {
            Vec::new()
        } else {
            c.parents().collect()
        };
        Some((c.tree(), parents, time))
    }

    fn meta(&mut self, id: &ObjectId) -> CommitMeta {
        let mut m = CommitMeta {
            id: id.to_string(),
            ..CommitMeta::default()
        };
        let Ok(Some(data)) = self.repo.objects.try_find(id, &mut self.buf) else {
            return m;
        };
        let Ok(c) = CommitRef::from_bytes(data.data, data.object_hash) else {
            return m;
        };
        if let Ok(a) = c.author() {
            m.author = String::from_utf8_lossy(a.name.trim_ascii()).into_owned();
            m.email = String::from_utf8_lossy(a.email.trim_ascii()).into_owned();
            if let Ok(t) = a.time() {
                m.date = t.format_or_unix(gix::date::time::format::ISO8601_STRICT);
            }
        }
        m.subject = String::from_utf8_lossy(c.message().summary().as_ref()).into_owned();
        m
    }

    /// Appends up to `max` items to `out`; false when the history is
    /// exhausted (and `out` got everything that was left).
    pub fn next_batch(&mut self, max: usize, out: &mut Vec<GitItem>) -> bool {
        loop {
            while out.len() < max {
                match self.pending.pop_front() {
                    Some(item) => out.push(item),
                    None => break,
                }
            }
            if out.len() >= max {
                return true;
            }
            if self.staged {
                self.staged = false;
                self.walk_staged();
                continue;
            }
            let Some(&id) = self.order.get(self.next) else {
                if self.walk_orphans(max) {
                    continue;
                }
                return !self.pending.is_empty();
            };
            self.next += 1;
            self.walk_commit(id);
        }
    }

    /// Queues up to `max` blobs of `--all-objects` that no commit reached,
    /// attributed to the pseudo-commit `unreachable` and named by their id;
    /// false when there are none left.
    fn walk_orphans(&mut self, max: usize) -> bool {
        let meta = Arc::new(CommitMeta {
            id: "unreachable".into(),
            subject: "a blob no commit reaches".into(),
            ..CommitMeta::default()
        });
        let mut queued = false;
        while self.pending.len() < max {
            let Some(id) = self.orphans.pop() else { break };
            if self.seen_blobs.insert(id) {
                self.pending.push_back(GitItem::Blob {
                    id,
                    path: id.to_string().into_bytes(),
                    commit: Arc::clone(&meta),
                });
                queued = true;
            }
        }
        queued || !self.orphans.is_empty()
    }

    /// Queues the blobs `id` introduced against its first parent.
    fn walk_commit(&mut self, id: ObjectId) {
        let Some(&tree) = self.trees.get(&id) else {
            self.pending.push_back(GitItem::Unreadable {
                path: id.to_string().into_bytes(),
                id,
                detail: format!(
                    "commit {id}: the commit object could not be read (missing or corrupt)"
                ),
            });
            return;
        };
        let parent_tree = match self.read_commit(&id) {
            Some((_, ps, _)) => ps.first().and_then(|p| {
                self.trees
                    .get(p)
                    .copied()
                    .or_else(|| self.read_commit(p).map(|(t, _, _)| t))
            }),
            None => None,
        };
        let meta = Arc::new(self.meta(&id));
        self.walk_tree(tree, parent_tree, &meta);
    }

    /// The blobs of `tree` not in `old` (the first parent's tree) and not
    /// seen before, with their paths.
    fn walk_tree(&mut self, tree: ObjectId, old: Option<ObjectId>, meta: &Arc<CommitMeta>) {
        let mut stack: Vec<(Vec<u8>, ObjectId, Option<ObjectId>)> = vec![(Vec::new(), tree, old)];
        while let Some((prefix, new, old)) = stack.pop() {
            if Some(new) == old || !self.seen_trees.insert(new) {
                continue;
            }
            let entries = match self.entries(&new) {
                Ok(e) => e,
                Err(detail) => {
                    self.pending.push_back(GitItem::Unreadable {
                        path: if prefix.is_empty() {
                            meta.id.clone().into_bytes()
                        } else {
                            prefix
                        },
                        id: new,
                        detail,
                    });
                    continue;
                }
            };
            let old_entries: HashMap<Vec<u8>, (Kind, ObjectId)> = old
                .and_then(|o| self.entries(&o).ok())
                .unwrap_or_default()
                .into_iter()
                .map(|(name, kind, id)| (name, (kind, id)))
                .collect();
            for (name, kind, id) in entries {
                let before = old_entries.get(&name).copied();
                let mut path = prefix.clone();
                if !path.is_empty() {
                    path.push(b'/');
                }
                path.extend_from_slice(&name);
                if self.excluded(&path, kind == Kind::Tree) {
                    continue;
                }
                match kind {
                    Kind::Blob => {
                        if before == Some((Kind::Blob, id)) || !self.seen_blobs.insert(id) {
                            continue;
                        }
                        self.pending.push_back(GitItem::Blob {
                            id,
                            path,
                            commit: Arc::clone(meta),
                        });
                    }
                    Kind::Tree => {
                        let old_sub = before.and_then(|(k, i)| (k == Kind::Tree).then_some(i));
                        stack.push((path, id, old_sub));
                    }
                    Kind::Submodule => {
                        // Named once per gitlink id, like a blob.
                        if before == Some((Kind::Submodule, id)) || !self.seen_blobs.insert(id) {
                            continue;
                        }
                        self.pending.push_back(GitItem::Submodule {
                            path,
                            id,
                            commit: Arc::clone(meta),
                        });
                    }
                }
            }
        }
    }

    /// Whether `--exclude` leaves `path` out (a blob excluded at one path is
    /// still scanned where it appears at another).
    fn excluded(&self, path: &[u8], is_dir: bool) -> bool {
        let Some(ov) = &self.exclude else {
            return false;
        };
        let p = std::path::Path::new(std::ffi::OsStr::from_bytes(path));
        ov.matched(p, is_dir).is_ignore()
    }

    /// A tree's entries: name, kind, id.
    fn entries(&mut self, id: &ObjectId) -> Result<Vec<(Vec<u8>, Kind, ObjectId)>, String> {
        tree_entries(&self.repo, id, &mut self.buf)
    }

    /// `--staged`: every index entry whose blob differs from HEAD's at that
    /// path, attributed to the pseudo-commit `staged`.
    fn walk_staged(&mut self) {
        let meta = Arc::new(CommitMeta {
            id: "staged".into(),
            subject: "changes staged in the index".into(),
            ..CommitMeta::default()
        });
        let index = match self.repo.index_or_empty() {
            Ok(i) => i,
            Err(e) => {
                self.pending.push_back(GitItem::Unreadable {
                    path: b"index".to_vec(),
                    id: ObjectId::null(self.repo.object_hash()),
                    detail: format!("the index could not be read: {e}"),
                });
                return;
            }
        };
        let mut head: HashSet<(Vec<u8>, ObjectId)> = HashSet::new();
        if let Ok(tree) = self.repo.head_tree_id() {
            let mut stack = vec![(Vec::new(), tree.detach())];
            while let Some((prefix, id)) = stack.pop() {
                let Ok(entries) = self.entries(&id) else {
                    continue;
                };
                for (name, kind, id) in entries {
                    let mut path = prefix.clone();
                    if !path.is_empty() {
                        path.push(b'/');
                    }
                    path.extend_from_slice(&name);
                    match kind {
                        Kind::Tree => stack.push((path, id)),
                        Kind::Blob => {
                            head.insert((path, id));
                        }
                        Kind::Submodule => {}
                    }
                }
            }
        }
        for e in index.entries() {
            if e.stage_raw() != 0
                || !e.mode.to_tree_entry_mode().is_some_and(|m| {
                    matches!(
                        m.kind(),
                        EntryKind::Blob | EntryKind::BlobExecutable | EntryKind::Link
                    )
                })
            {
                continue;
            }
            let path = e.path(&index).to_vec();
            if head.contains(&(path.clone(), e.id)) || !self.seen_blobs.insert(e.id) {
                continue;
            }
            self.pending.push_back(GitItem::Blob {
                id: e.id,
                path,
                commit: Arc::clone(&meta),
            });
        }
    }
}

/// A tree's entries: name, kind, id. A missing, unreadable or corrupt tree
/// is an error naming its id.
fn tree_entries(
    repo: &gix::Repository,
    id: &ObjectId,
    buf: &mut Vec<u8>,
) -> Result<Vec<(Vec<u8>, Kind, ObjectId)>, String> {
    let data = match repo.objects.try_find(id, buf) {
        Ok(Some(d)) => d,
        Ok(None) => return Err(format!("tree {id} is missing (partial clone?)")),
        Err(e) => return Err(format!("tree {id} could not be read: {e}")),
    };
    if data.kind != gix::object::Kind::Tree {
        return Err(format!("tree {id} is a {:?} object", data.kind));
    }
    let mut out = Vec::new();
    for e in TreeRefIter::from_bytes(data.data, data.object_hash) {
        let e = e.map_err(|e| format!("tree {id} is corrupt: {e}"))?;
        let kind = match e.mode.kind() {
            EntryKind::Tree => Kind::Tree,
            EntryKind::Commit => Kind::Submodule,
            EntryKind::Blob | EntryKind::BlobExecutable | EntryKind::Link => Kind::Blob,
        };
        out.push((e.filename.to_vec(), kind, e.oid.to_owned()));
    }
    Ok(out)
}

/// The blob at `path` (`/`-separated) in the tree of `commit`, if there is
/// one: the history finding at `path` is then compared with the work tree
/// (`auto.rs`).
pub(super) fn blob_at(repo: &gix::Repository, commit: &ObjectId, path: &[u8]) -> Option<ObjectId> {
    let mut buf = Vec::new();
    let data = repo.objects.try_find(commit, &mut buf).ok()??;
    let mut tree = CommitRef::from_bytes(data.data, data.object_hash)
        .ok()?
        .tree();
    let mut parts = path.split(|b| *b == b'/').peekable();
    while let Some(name) = parts.next() {
        let entries = tree_entries(repo, &tree, &mut buf).ok()?;
        let (_, kind, id) = entries.into_iter().find(|(n, _, _)| n == name)?;
        match (kind, parts.peek()) {
            (Kind::Blob, None) => return Some(id),
            (Kind::Tree, Some(_)) => tree = id,
            _ => return None,
        }
    }
    None
}

/// Kahn's algorithm over the selected commits: a commit comes after all of
/// its selected parents; among the ready ones, the oldest committer time
/// first (then the id), so the order is deterministic.
fn topo_order(parents: &HashMap<ObjectId, (Vec<ObjectId>, i64)>) -> Vec<ObjectId> {
    let mut waiting: HashMap<ObjectId, usize> = HashMap::new();
    let mut children: HashMap<ObjectId, Vec<ObjectId>> = HashMap::new();
    for (id, (ps, _)) in parents {
        let mut n = 0;
        let mut uniq: Vec<ObjectId> = ps.clone();
        uniq.sort();
        uniq.dedup();
        for p in uniq {
            if parents.contains_key(&p) {
                n += 1;
                children.entry(p).or_default().push(*id);
            }
        }
        waiting.insert(*id, n);
    }
    let mut ready: BinaryHeap<Reverse<(i64, ObjectId)>> = waiting
        .iter()
        .filter(|(_, &n)| n == 0)
        .map(|(id, _)| Reverse((parents[id].1, *id)))
        .collect();
    let mut order = Vec::with_capacity(parents.len());
    while let Some(Reverse((_, id))) = ready.pop() {
        order.push(id);
        for c in children.get(&id).map_or(&[][..], Vec::as_slice) {
            let n = waiting.get_mut(c).expect("every child is selected");
            *n -= 1;
            if *n == 0 {
                ready.push(Reverse((parents[c].1, *c)));
            }
        }
    }
    order
}
