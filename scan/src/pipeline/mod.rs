//! The scanner's task graph on magpie's typed executor:
//! `Enumerate -> FetchSync -> Scan` (seed 001), end to end.
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`frontier`] | [`ObjectFrontier`] (per-level count budget), [`ObjectPermit`], [`ObjectCtx`] / [`ObjectRef`], [`WaitList`] |
//! | [`task`] | the [`Task`] enum and what its variants carry |
//! | `enumerate` | Enumerate: the directory walk and archive members, admitted to the frontier |
//! | `fetch` | FetchSync: one chunk into a pool buffer, with its overlap prefix |
//! | `scanjob` | Scan: the rules over a chunk's owned range, findings |
//! | [`run`](mod@run) | setting up a run, the executor, totals, the accounting check, [`scan`] and [`run()`] |
//!
//! `README.md` beside this file is the protocol: the graph as numbered steps,
//! the permit lifetime, chunks and overlap, archive streaming, back-pressure
//! and parking, the accounting invariant and the fail-run abort.

pub mod frontier;
pub mod run;
pub mod task;

mod enumerate;
mod fetch;
mod scanjob;

use magpie_core::sync::atomic::{AtomicBool, Ordering};
use magpie_core::sync::{Arc, Mutex};
use magpie_runtime::WorkerCtx;

pub use frontier::{
    ObjectCtx, ObjectDescriptor, ObjectEnd, ObjectFrontier, ObjectPermit, ObjectRef, WaitKey,
    WaitList,
};
pub use run::{load_rules, run, scan, Accounting, ScanReport, Tuning};
pub use task::{ChunkSpan, EnumCursor, FetchState, Task, ENUM_BATCH_SIZE};

use crate::archive::{ArchiveLimits, ArchivePolicy};
use crate::report::{Finding, ObjPath, Progress, ScanError};
use crate::rules::{Match, RuleSet, Scratch};
use crate::skip::{SkipReason, SkippedEntry};
use crate::trace::{TaskKind, TraceRecorder, TraceSink};
use frontier::SKIP_LABELS;

/// What every task reads: the run's settings and shared structures.
pub(crate) struct Shared {
    pub(crate) settings: Settings,
    pub(crate) rules: RuleSet,
    pub(crate) pool: crate::pool::BufferPool,
    pub(crate) frontier: ObjectFrontier,
    pub(crate) waiters: WaitList<Task>,
    /// Live counters for the progress bar; `None` when it is not drawn.
    pub(crate) progress: Option<Arc<Progress>>,
    /// The repository of a `scan git` run (each worker reads it through a
    /// thread-local handle of its own, `WorkerScratch::repo`, sharing one
    /// pack cache).
    pub(crate) git: Option<crate::git::Odb>,
    aborted: AtomicBool,
    abort_error: Mutex<Option<ScanError>>,
    /// Per-worker counters and findings, merged as each worker's scratch
    /// drops.
    totals: Mutex<Totals>,
}

/// The knobs a run was started with.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) chunk_size: usize,
    pub(crate) context_len: usize,
    pub(crate) follow_symlinks: bool,
    pub(crate) max_file_size: Option<u64>,
    /// Decodings applied one inside another at most (0: no decoding).
    pub(crate) max_decode_depth: u32,
    /// `None` when archives are not opened.
    pub(crate) archives: Option<ArchiveSettings>,
    /// `--shard I/N`: only the walk entries and history items this shard
    /// owns are admitted (`crate::shard`).
    pub(crate) shard: Option<crate::shard::Shard>,
}

#[derive(Clone, Debug)]
pub(crate) struct ArchiveSettings {
    pub(crate) limits: ArchiveLimits,
    pub(crate) policy: ArchivePolicy,
}

/// One worker's counters: plain integers, bumped only by that worker.
#[derive(Clone, Debug, Default)]
pub(crate) struct Counters {
    pub(crate) enumerate_count: u64,
    pub(crate) enumerate_backpressure: u64,
    pub(crate) fetch_sync_count: u64,
    pub(crate) fetch_pool_empty: u64,
    pub(crate) bytes_fetched: u64,
    pub(crate) scan_count: u64,
    pub(crate) bytes_scanned: u64,
    pub(crate) raw_findings: u64,
    /// Matches left out because their line carries `gitleaks:allow` or
    /// `magpie:allow`.
    pub(crate) inline_allowed: u64,
    /// Encoded spans that decoded to text and were scanned again.
    pub(crate) decoded_spans: u64,
    /// Objects counted as skipped when they were discovered (they never
    /// took a frontier place), by label index.
    pub(crate) skipped_at_discovery: [u64; SKIP_LABELS],
    /// What the walk's filters left out (ignore files, `--exclude`).
    pub(crate) excluded: crate::walk::Exclusions,
    /// `--shard`: walk entries and history items this shard owned.
    pub(crate) shard_owned: u64,
}

impl Counters {
    fn add(&mut self, o: &Counters) {
        let Counters {
            enumerate_count,
            enumerate_backpressure,
            fetch_sync_count,
            fetch_pool_empty,
            bytes_fetched,
            scan_count,
            bytes_scanned,
            raw_findings,
            inline_allowed,
            decoded_spans,
            skipped_at_discovery,
            excluded,
            shard_owned,
        } = o;
        self.shard_owned += shard_owned;
        self.inline_allowed += inline_allowed;
        self.decoded_spans += decoded_spans;
        self.excluded.add(excluded);
        self.enumerate_count += enumerate_count;
        self.enumerate_backpressure += enumerate_backpressure;
        self.fetch_sync_count += fetch_sync_count;
        self.fetch_pool_empty += fetch_pool_empty;
        self.bytes_fetched += bytes_fetched;
        self.scan_count += scan_count;
        self.bytes_scanned += bytes_scanned;
        self.raw_findings += raw_findings;
        for (a, b) in self
            .skipped_at_discovery
            .iter_mut()
            .zip(skipped_at_discovery)
        {
            *a += b;
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct Totals {
    pub(crate) counters: Counters,
    pub(crate) findings: Vec<Finding>,
    pub(crate) skipped: Vec<SkippedEntry>,
    pub(crate) scratches_dropped: usize,
}

/// A worker's private state. Created on the worker thread; its drop (on the
/// same thread, before `join` returns) hands the counters and findings to
/// [`Shared`], and the trace recorder hands its events to the sink.
pub(crate) struct WorkerScratch {
    shared: Arc<Shared>,
    pub(crate) rules: Scratch,
    pub(crate) matches: Vec<Match>,
    pub(crate) decode: crate::decode::Scratch,
    pub(crate) findings: Vec<Finding>,
    /// Every skip this worker met, named.
    pub(crate) skipped: Vec<SkippedEntry>,
    pub(crate) counters: Counters,
    pub(crate) trace: TraceRecorder,
    /// This worker's handle on the `scan git` repository (object caches are
    /// per handle), made on first use.
    pub(crate) repo: Option<gix::Repository>,
    /// A decoded blob's buffer, kept for the next blob (`git::odb::give_back`).
    pub(crate) blob_buf: Vec<u8>,
    /// The base blob of a `scan git` blob read by what it adds.
    pub(crate) git_diff: crate::git::added::DiffScratch,
}

impl std::fmt::Debug for WorkerScratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerScratch")
            .field("counters", &self.counters)
            .field("findings", &self.findings.len())
            .finish_non_exhaustive()
    }
}

impl WorkerScratch {
    fn new(shared: Arc<Shared>, worker: usize, sink: Option<&std::sync::Arc<TraceSink>>) -> Self {
        Self {
            shared,
            rules: Scratch::new(),
            matches: Vec::new(),
            decode: crate::decode::Scratch::default(),
            findings: Vec::new(),
            skipped: Vec::new(),
            counters: Counters::default(),
            trace: sink.map_or_else(TraceRecorder::disabled, |s| s.recorder(worker)),
            repo: None,
            blob_buf: Vec::new(),
            git_diff: crate::git::added::DiffScratch::default(),
        }
    }
}

impl Drop for WorkerScratch {
    fn drop(&mut self) {
        let mut t = lock(&self.shared.totals);
        t.counters.add(&self.counters);
        t.findings.append(&mut self.findings);
        t.skipped.append(&mut self.skipped);
        t.scratches_dropped += 1;
    }
}

fn lock<T>(m: &Mutex<T>) -> magpie_core::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The worker context every task runs with.
pub(crate) type Ctx = WorkerCtx<Task, WorkerScratch>;

/// What a finished task tells the trace (built only when tracing).
pub(crate) struct Note {
    kind: TaskKind,
    obj: Option<ObjectRef>,
    offset: u64,
    bytes: u64,
}

impl Note {
    /// A note for `obj`, if the worker is tracing.
    pub(crate) fn of(
        ctx: &Ctx,
        kind: TaskKind,
        obj: &ObjectRef,
        offset: u64,
        bytes: u64,
    ) -> Option<Note> {
        ctx.scratch.trace.is_enabled().then(|| Note {
            kind,
            obj: Some(Arc::clone(obj)),
            offset,
            bytes,
        })
    }

    /// A note with no object (the walk).
    pub(crate) fn bare(ctx: &Ctx, kind: TaskKind, bytes: u64) -> Option<Note> {
        ctx.scratch.trace.is_enabled().then_some(Note {
            kind,
            obj: None,
            offset: 0,
            bytes,
        })
    }
}

impl Shared {
    /// Whether the run was aborted (`--archive-policy fail-run`, an
    /// unreadable root). Relaxed: a task that misses a fresh abort does one
    /// more step of harmless work; the abort's drain of the wait list is
    /// ordered by the list's lock.
    pub(crate) fn aborted(&self) -> bool {
        self.aborted.load(Ordering::Relaxed)
    }

    /// Stops the run: the first error is kept; every later task drops its
    /// work unstarted, and parked tasks are dropped now, so every object's
    /// frontier place is released and the executor drains.
    pub(crate) fn abort(&self, err: ScanError) {
        {
            let mut slot = lock(&self.abort_error);
            if slot.is_none() {
                *slot = Some(err);
            }
        }
        // Relaxed: see `aborted`.
        self.aborted.store(true, Ordering::Relaxed);
        drop(self.waiters.drain());
    }

    /// Whether a task parked on `key` could go on now.
    pub(crate) fn ready(&self, key: WaitKey) -> bool {
        match key {
            WaitKey::Level(l) => {
                let l = usize::from(l);
                self.frontier.available(l) >= self.low_water(l)
            }
            WaitKey::Buffer => self.pool.available() > 0,
        }
    }

    /// How many places must be free before a task parked on a full level is
    /// woken: a batch's worth for the walk (so it is not woken for every
    /// single release), one for an archive (it admits one member at a time).
    fn low_water(&self, level: usize) -> usize {
        if level == 0 {
            (self.frontier.capacity(0) / 4).clamp(1, ENUM_BATCH_SIZE)
        } else {
            1
        }
    }
}

/// Records that `n` objects at `path` were skipped for `reason` at the
/// moment they were discovered (they never took a frontier place): counted
/// by label, and named in the report.
pub(crate) fn skip_at_discovery(
    shared: &Shared,
    ctx: &mut Ctx,
    path: ObjPath,
    reason: SkipReason,
    n: u64,
    detail: String,
) {
    ctx.scratch.counters.skipped_at_discovery[frontier::label_index(&reason)] += n;
    if let Some(p) = &shared.progress {
        p.add_skipped(n);
    }
    ctx.scratch.skipped.push(SkippedEntry {
        path,
        reason,
        count: n,
        detail,
    });
}

/// Ends `obj` skipped for `reason` (its frontier place counts it) and names
/// it in the report.
pub(crate) fn end_skipped(ctx: &mut Ctx, obj: &ObjectRef, reason: SkipReason, detail: String) {
    obj.set_end(ObjectEnd::Skipped(reason));
    ctx.scratch.skipped.push(SkippedEntry {
        path: obj.path().clone(),
        reason,
        count: 1,
        detail,
    });
}

/// Parks `task` on `key` (README.md, "Parking"); spawns whatever the
/// re-check finds ready, itself included.
pub(crate) fn park(shared: &Shared, key: WaitKey, task: Task, ctx: &mut Ctx) {
    let ready = shared.waiters.park(key, task, |k| shared.ready(k));
    for t in ready {
        ctx.spawn_local(t);
    }
    if shared.aborted() {
        drop(shared.waiters.drain());
    }
}

/// The executor's runner: one task, then the wake check.
pub(crate) fn run_task(shared: &Shared, task: Task, ctx: &mut Ctx) {
    if shared.aborted() {
        // Drop the work unstarted: its objects release their places.
        drop(task);
        return;
    }
    let span = ctx.scratch.trace.start();
    let note = match task {
        Task::Enumerate { cursor } => enumerate::run(shared, cursor, ctx),
        Task::FetchSync { obj, state } => fetch::run(shared, obj, state, ctx),
        Task::Scan { obj, buf, chunk } => scanjob::run(shared, obj, buf, chunk, ctx),
    };
    if let Some(n) = note {
        match &n.obj {
            Some(obj) => ctx
                .scratch
                .trace
                .finish(span, n.kind, obj.path(), n.offset, n.bytes),
            None => ctx.scratch.trace.finish(span, n.kind, "walk", 0, n.bytes),
        }
    }
    // Step 4 of "Parking": this task may have released places or a buffer.
    for t in shared.waiters.wake(|k| shared.ready(k)) {
        ctx.spawn_local(t);
    }
}
