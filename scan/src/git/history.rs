//! The history walk: which commits, in which order, and which blobs each
//! one introduced (README.md, steps 1-2).

use std::cmp::{Ordering, Reverse};
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
        /// The blob it replaced at `path`: the first parent's (`--staged`:
        /// HEAD's). Only what it adds
        /// against this one is scanned (`added.rs`); `None` with
        /// `--whole-blobs`.
        base: Option<ObjectId>,
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

/// The largest window of blobs sorted into pack order before they are
/// handed out (README.md, "Decoding"): 4096 items, a few hundred KiB of
/// paths and ids.
pub const PACK_ORDER_WINDOW: usize = 4096;

/// The first window: small, so the workers start decoding while the walk
/// goes on; each next window is twice the last, up to
/// [`PACK_ORDER_WINDOW`].
const FIRST_WINDOW: usize = 64;

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
    /// The root tree and first parent of every selected commit (read once,
    /// by the selection walk).
    trees: HashMap<ObjectId, (ObjectId, Option<ObjectId>)>,
    /// Blobs replacing their first parent's are read by what they add
    /// (`GitItem::Blob::base`); false with `--whole-blobs`.
    diff_bases: bool,
    next: usize,
    /// Blobs already handed out (each blob is scanned once).
    seen_blobs: HashSet<ObjectId>,
    /// `--state`: the blobs earlier complete runs handed out; not handed out
    /// again (each blob is scanned once across runs).
    prior_blobs: super::state::BlobSet,
    /// `--state`: where the blob set goes when the walk is exhausted.
    blob_slot: Option<super::state::BlobSlot>,
    /// Trees already walked: every blob below them was handed out then (or
    /// was its first parent's), so a tree met again is not re-read.
    seen_trees: HashSet<ObjectId>,
    /// Items found but not yet sorted into `ready`.
    pending: VecDeque<GitItem>,
    /// The window being handed out, in pack order.
    ready: VecDeque<GitItem>,
    /// How many items the next window gathers (doubles up to
    /// [`PACK_ORDER_WINDOW`]).
    window: usize,
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
    /// Pack locations, for the pack order of each window, and the packs
    /// the workers decode from: one mapping of each `.idx` for both
    /// ([`HistoryCursor::packs`]).
    packs: std::sync::Arc<super::odb::Packs>,
    /// The tree pair being compared (kept for their allocations).
    new_entries: Entries,
    old_entries: Entries,
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

/// The line that says a repository is a partial clone: a remote with
/// `promisor = true`, as `git clone --filter` leaves it, or, without one, a
/// promisor pack (`objects/pack/*.promisor`, what a partial fetch writes
/// beside its pack). The blobs it did not fetch cannot be read, and each is
/// named `unreadable`.
fn partial_clone_note(repo: &gix::Repository) -> Option<String> {
    const REST: &str = "the objects it did not fetch are named unreadable and the run exits 2; \
                        a clone without --filter reads them all";
    let config = repo.config_snapshot();
    let remote = repo.remote_names().into_iter().find_map(|name| {
        let promisor = config.boolean(format!("remote.{name}.promisor").as_str())?;
        promisor.then(|| {
            let filter = config
                .string(format!("remote.{name}.partialclonefilter").as_str())
                .map_or_else(|| "unknown".to_owned(), |f| f.to_string());
            format!("partial clone (remote {name}, filter {filter}): {REST}")
        })
    });
    remote.or_else(|| {
        let packs = std::fs::read_dir(repo.objects.store_ref().path().join("pack")).ok()?;
        packs
            .filter_map(Result::ok)
            .any(|e| e.path().extension().is_some_and(|x| x == "promisor"))
            .then(|| format!("partial clone (a promisor pack, no promisor remote): {REST}"))
    })
}

fn err(what: impl std::fmt::Display) -> String {
    what.to_string()
}

impl HistoryCursor {
    /// Selects the commits `opts` asks for (all refs, `--branch`,
    /// `--since-commit`, `--log-range`) and orders them parents first.
    /// An unknown revision is an error.
    pub fn new(repo: &gix::ThreadSafeRepository, opts: &GitOptions) -> Result<Self, String> {
        let packs = std::sync::Arc::new(super::odb::Packs::new(repo));
        let repo = super::odb::walk_handle(repo);
        let mut cursor = Self {
            packs,
            repo,
            order: Vec::new(),
            trees: HashMap::new(),
            diff_bases: !opts.whole_blobs,
            next: 0,
            seen_blobs: HashSet::new(),
            prior_blobs: super::state::BlobSet::default(),
            blob_slot: None,
            seen_trees: HashSet::new(),
            pending: VecDeque::new(),
            ready: VecDeque::new(),
            window: FIRST_WINDOW,
            staged: opts.staged,
            orphans: Vec::new(),
            shallow: HashSet::new(),
            exclude: crate::walk::compile_excludes(&opts.exclude)?,
            state: None,
            notes: Vec::new(),
            buf: Vec::new(),
            new_entries: Entries::default(),
            old_entries: Entries::default(),
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
        if let Some(note) = partial_clone_note(&cursor.repo) {
            cursor.notes.push(note);
        }
        if !opts.staged {
            cursor.select(opts)?;
        }
        Ok(cursor)
    }

    /// The packs this walk locates blobs in, opened with their data: give
    /// them to [`super::Odb::with_packs`], so that each `.idx` is mapped
    /// once for the walk and the workers (its pages are resident once).
    pub fn packs(&self) -> std::sync::Arc<super::odb::Packs> {
        std::sync::Arc::clone(&self.packs)
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
            let slot = super::state::BlobSlot::default();
            self.blob_slot = Some(std::sync::Arc::clone(&slot));
            self.state = Some(super::StateUpdate {
                path: path.clone(),
                tips: named,
                blobs: slot,
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
            self.trees.insert(id, (tree, ps.first().copied()));
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
    /// reset), and an old commit no longer in the repository. The blob set
    /// it records becomes `prior_blobs`.
    fn state_hidden(
        &mut self,
        path: &std::path::Path,
        now: &super::state::Tips,
    ) -> Result<Vec<ObjectId>, String> {
        let Some(super::state::State {
            tips: before,
            blobs,
        }) = super::state::load(path)?
        else {
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
        self.prior_blobs = blobs;
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
                match self.ready.pop_front() {
                    Some(item) => out.push(item),
                    None => break,
                }
            }
            if out.len() >= max {
                return true;
            }
            if !self.fill_window() {
                self.publish_blobs();
                return false;
            }
        }
    }

    /// Walks on until `window` items are found (or the history ends), then
    /// moves them to `ready` in pack order (README.md, "Decoding"): blobs
    /// by (pack, offset), loose blobs after the packed ones, and the other
    /// items first; equal keys keep the walk's order. False when nothing
    /// was left. Attribution was decided by the walk; the order only
    /// changes when each blob is decoded.
    fn fill_window(&mut self) -> bool {
        let want = self.window;
        self.window = (self.window * 2).min(PACK_ORDER_WINDOW);
        while self.pending.len() < want {
            if self.staged {
                self.staged = false;
                self.walk_staged();
            } else if let Some(&id) = self.order.get(self.next) {
                self.next += 1;
                self.walk_commit(id);
            } else if !self.walk_orphans(want) {
                break;
            }
        }
        let packs = &self.packs;
        let mut keyed: Vec<((u32, u64), GitItem)> = self
            .pending
            .drain(..)
            .map(|item| {
                let key = match &item {
                    GitItem::Blob { id, .. } => packs.locate(id).unwrap_or((u32::MAX, u64::MAX)),
                    GitItem::Submodule { .. } | GitItem::Unreadable { .. } => (0, 0),
                };
                (key, item)
            })
            .collect();
        keyed.sort_by_key(|(key, _)| *key);
        self.ready.extend(keyed.into_iter().map(|(_, item)| item));
        !self.ready.is_empty()
    }

    /// `--state`: the walk is exhausted; the blob set for the state file is
    /// the one read united with every blob handed out.
    fn publish_blobs(&mut self) {
        let Some(slot) = self.blob_slot.take() else {
            return;
        };
        let prior = std::mem::take(&mut self.prior_blobs);
        let all = prior.union(self.seen_blobs.iter().copied());
        *slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(all);
    }

    /// Whether `id` (a blob or a gitlink) is met for the first time, in
    /// this run and (`--state`) in the earlier ones; it is then marked seen.
    fn first_sighting(&mut self, id: ObjectId) -> bool {
        !self.prior_blobs.contains(&id) && self.seen_blobs.insert(id)
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
            if self.first_sighting(id) {
                self.pending.push_back(GitItem::Blob {
                    id,
                    path: id.to_string().into_bytes(),
                    commit: Arc::clone(&meta),
                    base: None,
                });
                queued = true;
            }
        }
        queued || !self.orphans.is_empty()
    }

    /// Queues the blobs `id` introduced against its first parent.
    fn walk_commit(&mut self, id: ObjectId) {
        let Some(&(tree, first_parent)) = self.trees.get(&id) else {
            self.pending.push_back(GitItem::Unreadable {
                path: id.to_string().into_bytes(),
                id,
                detail: format!(
                    "commit {id}: the commit object could not be read (missing or corrupt)"
                ),
            });
            return;
        };
        // A parent outside the selection (hidden by `--since-commit`,
        // `--state` or a range) is read here: its tree is the baseline.
        let parent_tree = first_parent.and_then(|p| match self.trees.get(&p) {
            Some(&(t, _)) => Some(t),
            None => self.read_commit(&p).map(|(t, _, _)| t),
        });
        let meta = Arc::new(self.meta(&id));
        self.walk_tree(tree, parent_tree, &meta);
    }

    /// The blobs of `tree` not in `old` (the first parent's tree) and not
    /// seen before, with their paths. The two trees' entries are matched by
    /// a merge of the two sorted lists (git sorts a tree's entries by name,
    /// a subtree's name compared as if it ended in `/`); a tree that is not
    /// sorted (only a hand-made one) is matched by a name lookup instead.
    /// Only a changed entry gets a path. A blob that replaces a blob of the
    /// old tree at its name carries that one as its base (unless
    /// `--whole-blobs`).
    fn walk_tree(&mut self, tree: ObjectId, old: Option<ObjectId>, meta: &Arc<CommitMeta>) {
        let mut new_e = std::mem::take(&mut self.new_entries);
        let mut old_e = std::mem::take(&mut self.old_entries);
        let mut stack: Vec<(Vec<u8>, ObjectId, Option<ObjectId>)> = vec![(Vec::new(), tree, old)];
        while let Some((prefix, new, old)) = stack.pop() {
            if Some(new) == old || !self.seen_trees.insert(new) {
                continue;
            }
            if let Err(detail) = new_e.read(&self.repo, &new, &mut self.buf) {
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
            let old_read = old.map(|o| old_e.read(&self.repo, &o, &mut self.buf));
            if !matches!(old_read, Some(Ok(()))) {
                old_e.clear();
            }
            let by_name: Option<HashMap<&[u8], usize>> = (!(new_e.sorted && old_e.sorted))
                .then(|| (0..old_e.len()).map(|k| (old_e.name(k), k)).collect());
            let mut k = 0;
            for i in 0..new_e.len() {
                let (name, kind, id) = (new_e.name(i), new_e.kind(i), new_e.id(i));
                let before = match &by_name {
                    Some(map) => map.get(name).map(|&k| (old_e.kind(k), old_e.id(k))),
                    None => {
                        while k < old_e.len()
                            && git_order(old_e.name(k), old_e.kind(k), name, kind) == Ordering::Less
                        {
                            k += 1;
                        }
                        (k < old_e.len()
                            && git_order(old_e.name(k), old_e.kind(k), name, kind)
                                == Ordering::Equal)
                            .then(|| (old_e.kind(k), old_e.id(k)))
                    }
                };
                if before == Some((kind, id)) {
                    continue; // unchanged against the first parent
                }
                let seen = match kind {
                    Kind::Tree => self.seen_trees.contains(&id),
                    Kind::Blob | Kind::Submodule => {
                        self.seen_blobs.contains(&id) || self.prior_blobs.contains(&id)
                    }
                };
                if seen {
                    continue;
                }
                let mut path = Vec::with_capacity(prefix.len() + 1 + name.len());
                path.extend_from_slice(&prefix);
                if !path.is_empty() {
                    path.push(b'/');
                }
                path.extend_from_slice(name);
                if self.excluded(&path, kind == Kind::Tree) {
                    continue;
                }
                match kind {
                    Kind::Blob => {
                        self.seen_blobs.insert(id);
                        let base = before
                            .and_then(|(k, i)| (self.diff_bases && k == Kind::Blob).then_some(i));
                        self.pending.push_back(GitItem::Blob {
                            id,
                            path,
                            commit: Arc::clone(meta),
                            base,
                        });
                    }
                    Kind::Tree => {
                        let old_sub = before.and_then(|(k, i)| (k == Kind::Tree).then_some(i));
                        stack.push((path, id, old_sub));
                    }
                    Kind::Submodule => {
                        // Named once per gitlink id, like a blob.
                        self.seen_blobs.insert(id);
                        self.pending.push_back(GitItem::Submodule {
                            path,
                            id,
                            commit: Arc::clone(meta),
                        });
                    }
                }
            }
        }
        self.new_entries = new_e;
        self.old_entries = old_e;
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
        let mut head: HashMap<Vec<u8>, ObjectId> = HashMap::new();
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
                            head.insert(path, id);
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
            let before = head.get(&path).copied();
            if before == Some(e.id) || !self.first_sighting(e.id) {
                continue;
            }
            self.pending.push_back(GitItem::Blob {
                id: e.id,
                path,
                commit: Arc::clone(&meta),
                base: before.filter(|_| self.diff_bases),
            });
        }
    }
}

/// A decoded tree's entries, in the tree's order: the names in one
/// buffer, nothing allocated per entry (the buffers are reused from tree
/// to tree).
#[derive(Default)]
struct Entries {
    names: Vec<u8>,
    /// Where each name ends in `names`, its kind and id.
    list: Vec<(usize, Kind, ObjectId)>,
    /// Strictly ascending in git's order (every tree git writes is).
    sorted: bool,
}

impl Entries {
    /// Replaces the entries with those of the tree `id`; an error (named
    /// as in [`tree_entries`]) leaves them empty.
    fn read(
        &mut self,
        repo: &gix::Repository,
        id: &ObjectId,
        buf: &mut Vec<u8>,
    ) -> Result<(), String> {
        self.clear();
        let result = for_each_entry(repo, id, buf, |name, kind, oid| {
            if let Some(last) = self.len().checked_sub(1) {
                if git_order(self.name(last), self.kind(last), name, kind) != Ordering::Less {
                    self.sorted = false;
                }
            }
            self.names.extend_from_slice(name);
            self.list.push((self.names.len(), kind, oid));
        });
        if result.is_err() {
            self.clear();
        }
        result
    }

    fn clear(&mut self) {
        self.names.clear();
        self.list.clear();
        self.sorted = true;
    }

    fn len(&self) -> usize {
        self.list.len()
    }

    fn name(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.list[i - 1].0 };
        &self.names[start..self.list[i].0]
    }

    fn kind(&self, i: usize) -> Kind {
        self.list[i].1
    }

    fn id(&self, i: usize) -> ObjectId {
        self.list[i].2
    }
}

/// git's order of tree entries: by name bytes, a subtree's name compared
/// as if it ended in `/` (`base_name_compare` in git).
fn git_order(a: &[u8], a_kind: Kind, b: &[u8], b_kind: Kind) -> Ordering {
    let n = a.len().min(b.len());
    a[..n].cmp(&b[..n]).then_with(|| {
        let end = |name: &[u8], kind: Kind| {
            name.get(n)
                .copied()
                .or((kind == Kind::Tree).then_some(b'/'))
        };
        end(a, a_kind).cmp(&end(b, b_kind))
    })
}

/// Calls `f` with each entry of the tree `id` (name, kind, id), in order.
/// A missing, unreadable or corrupt tree is an error naming its id.
fn for_each_entry(
    repo: &gix::Repository,
    id: &ObjectId,
    buf: &mut Vec<u8>,
    mut f: impl FnMut(&[u8], Kind, ObjectId),
) -> Result<(), String> {
    let data = match repo.objects.try_find(id, buf) {
        Ok(Some(d)) => d,
        Ok(None) => return Err(format!("tree {id} is missing (partial clone?)")),
        Err(e) => return Err(format!("tree {id} could not be read: {e}")),
    };
    if data.kind != gix::object::Kind::Tree {
        return Err(format!("tree {id} is a {:?} object", data.kind));
    }
    for e in TreeRefIter::from_bytes(data.data, data.object_hash) {
        let e = e.map_err(|e| format!("tree {id} is corrupt: {e}"))?;
        let kind = match e.mode.kind() {
            EntryKind::Tree => Kind::Tree,
            EntryKind::Commit => Kind::Submodule,
            EntryKind::Blob | EntryKind::BlobExecutable | EntryKind::Link => Kind::Blob,
        };
        f(e.filename, kind, e.oid.to_owned());
    }
    Ok(())
}

/// A tree's entries: name, kind, id. A missing, unreadable or corrupt tree
/// is an error naming its id.
fn tree_entries(
    repo: &gix::Repository,
    id: &ObjectId,
    buf: &mut Vec<u8>,
) -> Result<Vec<(Vec<u8>, Kind, ObjectId)>, String> {
    let mut out = Vec::new();
    for_each_entry(repo, id, buf, |name, kind, oid| {
        out.push((name.to_vec(), kind, oid));
    })?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_order_compares_a_subtree_as_if_its_name_ended_in_a_slash() {
        // As `git mktree` sorts them: '-' (0x2d) < '/' (0x2f) < '0' (0x30),
        // and a file "a" (name end) before the directory "a" ("a/").
        let mut entries = vec![
            (&b"a0"[..], Kind::Blob),
            (b"a", Kind::Tree),
            (b"a-b", Kind::Blob),
            (b"a", Kind::Blob),
            (b"b", Kind::Submodule),
            (b"B", Kind::Tree),
        ];
        entries.sort_by(|x, y| git_order(x.0, x.1, y.0, y.1));
        let want = vec![
            (&b"B"[..], Kind::Tree),
            (b"a", Kind::Blob),
            (b"a-b", Kind::Blob),
            (b"a", Kind::Tree),
            (b"a0", Kind::Blob),
            (b"b", Kind::Submodule),
        ];
        assert_eq!(entries, want);
        // A file and a submodule of one name are the same entry (neither
        // is a tree), so the merge matches them as the name lookup did.
        assert_eq!(
            git_order(b"x", Kind::Blob, b"x", Kind::Submodule),
            Ordering::Equal
        );
    }
}
