//! Typed workloads, written once, run on every peer.
//!
//! A workload is one function, [`Workload::run`], generic over a
//! [`SpawnCtx`]: it records its task in the checksum, does its work, and
//! spawns its children. Each peer supplies a context:
//!
//! | peer | context | how completion is known |
//! | --- | --- | --- |
//! | sequential baseline | [`SeqCtx`]: a `Vec` stack | the stack is empty |
//! | the seed-000 crossbeam design ([`CbSeed000Pool`], `cb_seed000`) | `CbWorkerCtx<T, TallyScratch>` | `join` (the shared in-flight count reaches 0) |
//! | the strong crossbeam peer ([`CbStrongPool`], `cb_strong`) | `CbStrongCtx<T, TallyScratch>` | `join` (per-worker counts summed when a worker goes idle) |
//! | magpie `Executor` ([`MagpiePool`]) | `WorkerCtx<T, TallyScratch>` | `join` |
//! | rayon `scope` + `spawn` ([`RayonPeer::scope_tree`]) | `Scope` | the scope returns |
//! | `rayon::join` recursion ([`RayonPeer::join_tree`]) | children collected, then joined pairwise | the recursion returns |
//! | tokio `spawn` ([`TokioTreePeer::spawn_tree`]) | `tokio::spawn` | the runtime's alive-task count reaches 0 |
//!
//! Executors of seed 000's shape (spawn from outside, join) implement
//! [`TypedPool`]; the generic drivers [`time_tree`], [`time_inject_single`]
//! and [`time_inject_batched`] run any of them: [`MagpiePool`],
//! [`CbStrongPool`] and [`CbSeed000Pool`] are each an implementation of
//! [`SpawnCtx`] for the executor's worker context and of [`TypedPool`] for a
//! wrapper around the executor.
//!
//! Timing always starts with the pool's threads already up and idle, and
//! stops when every task has run; building and dropping the pool is outside
//! the measurement.

use std::fmt;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cb_executor::{CbConfig, CbExecutor, CbWorkerCtx};
use crate::cb_strong::{CbStrongConfig, CbStrongCtx, CbStrongExecutor};
use crate::tally::{record_on_this_thread, Tally, TallyScratch, TallySink, ThreadTallies};
use crate::work::spin_work;

/// Workers for every peer.
pub const WORKERS: usize = 2;
/// Depth of the empty spawn tree: `2^21 - 1` tasks.
pub const TREE_EMPTY_DEPTH: u32 = 20;
/// Depth of the work-bearing spawn tree: `2^18 - 1` tasks.
pub const TREE_WORK_DEPTH: u32 = 17;
/// Children of the UTS root.
pub const UTS_ROOT_CHILDREN: u32 = 2000;
/// Children of a non-root UTS node that has any.
pub const UTS_M: u32 = 2;
/// Probability (percent) that a non-root UTS node has [`UTS_M`] children.
/// `m * q = 0.98`, so each root child's subtree has `1 / (1 - 0.98) = 50`
/// nodes on average and the tree about `1 + 2000 * 50 = 100_001`.
pub const UTS_Q_PERCENT: u64 = 49;
/// Tasks injected from outside by the inject workloads.
pub const INJECT_TASKS: u64 = 1_000_000;
/// Batch size of the batched inject workload.
pub const INJECT_BATCH: usize = 1024;

/// What a task may do: spawn, and record itself in the run's checksum.
pub trait SpawnCtx<T> {
    /// Spawns onto this worker's own queue.
    fn spawn_local(&mut self, task: T);
    /// Spawns onto the shared queue.
    fn spawn_global(&mut self, task: T);
    /// Counts one task with id `value` into the checksum.
    fn record(&mut self, value: u64);
}

/// A typed workload: one function, run by every peer.
pub trait Workload: Clone + Send + Sync + 'static {
    /// The task value (small and `Copy`, as seed 000 asks).
    type Task: Copy + Send + Sync + 'static;
    /// Runs one task.
    fn run<C: SpawnCtx<Self::Task>>(&self, task: Self::Task, ctx: &mut C);
}

/// A binary spawn tree: node `id` (heap numbering, root 1) at depth
/// `floor(log2 id)` spawns `2 id` and `2 id + 1` locally until `depth`.
/// `depth` `d` gives `2^(d+1) - 1` tasks.
#[derive(Clone, Copy, Debug)]
pub struct BinaryTree {
    /// Depth of the leaves (the root is depth 0).
    pub depth: u32,
    /// [`spin_work`] iterations per task (0: no work).
    pub work_iters: u32,
}

impl BinaryTree {
    /// The root task.
    pub const ROOT: u64 = 1;

    /// Number of tasks.
    pub fn tasks(&self) -> u64 {
        (1u64 << (self.depth + 1)) - 1
    }

    /// The checksum every correct run produces: ids `1..=tasks`.
    pub fn expected(&self) -> Tally {
        let n = self.tasks();
        let mut t = Tally::of_range(n + 1);
        t.count -= 1; // id 0 is not a task
        t
    }
}

impl Workload for BinaryTree {
    type Task = u64;

    #[inline]
    fn run<C: SpawnCtx<u64>>(&self, id: u64, ctx: &mut C) {
        ctx.record(id);
        if self.work_iters != 0 {
            black_box(spin_work(self.work_iters, id));
        }
        if 63 - id.leading_zeros() < self.depth {
            ctx.spawn_local(2 * id);
            ctx.spawn_local(2 * id + 1);
        }
    }
}

/// A UTS node: its id (a hash of its parent's id and its index) and depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UtsNode {
    /// Hash-derived id; decides the node's child count.
    pub id: u64,
    /// Distance from the root.
    pub depth: u32,
}

/// Binomial UTS: the root has `root_children` children; every other node has
/// `m` children when the hash of its id falls below `q`, else none. The child
/// count is a pure function of the id, so the tree is the same on every peer.
#[derive(Clone, Copy, Debug)]
pub struct Uts {
    /// Children of the root.
    pub root_children: u32,
    /// Children of a non-root node that has any.
    pub m: u32,
    /// `q * 2^64`: a node has children when `mix64(id ^ salt) < q_threshold`.
    pub q_threshold: u64,
    /// [`spin_work`] iterations per node.
    pub work_iters: u32,
}

const UTS_ROOT_ID: u64 = 0x5eed_5eed_5eed;
const UTS_SALT: u64 = 0xa076_1d64_78bd_642f;
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// splitmix64's finaliser: a bijective 64-bit mix.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Uts {
    /// The tree the benches use: 2000 root children, m = 2, q = 0.49.
    pub fn standard(work_iters: u32) -> Self {
        Self {
            root_children: UTS_ROOT_CHILDREN,
            m: UTS_M,
            q_threshold: ((1u128 << 64) * u128::from(UTS_Q_PERCENT) / 100) as u64,
            work_iters,
        }
    }

    /// The root task.
    pub fn root(&self) -> UtsNode {
        UtsNode {
            id: UTS_ROOT_ID,
            depth: 0,
        }
    }

    /// How many children `node` has.
    #[inline]
    pub fn children(&self, node: UtsNode) -> u32 {
        if node.depth == 0 {
            self.root_children
        } else if mix64(node.id ^ UTS_SALT) < self.q_threshold {
            self.m
        } else {
            0
        }
    }

    /// The `i`-th child of `node`.
    #[inline]
    pub fn child(node: UtsNode, i: u32) -> UtsNode {
        UtsNode {
            id: mix64(node.id.wrapping_add(u64::from(i + 1).wrapping_mul(GOLDEN))),
            depth: node.depth + 1,
        }
    }
}

impl Workload for Uts {
    type Task = UtsNode;

    #[inline]
    fn run<C: SpawnCtx<UtsNode>>(&self, node: UtsNode, ctx: &mut C) {
        ctx.record(node.id);
        if self.work_iters != 0 {
            black_box(spin_work(self.work_iters, node.id));
        }
        for i in 0..self.children(node) {
            ctx.spawn_local(Self::child(node, i));
        }
    }
}

/// Tasks that only record themselves: the external-inject workloads.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sink;

impl Workload for Sink {
    type Task = u64;

    #[inline]
    fn run<C: SpawnCtx<u64>>(&self, id: u64, ctx: &mut C) {
        ctx.record(id);
    }
}

/// The sequential baseline's context: spawns push onto a `Vec` stack.
#[derive(Debug)]
pub struct SeqCtx<T> {
    stack: Vec<T>,
    tally: Tally,
}

impl<T> SpawnCtx<T> for SeqCtx<T> {
    #[inline]
    fn spawn_local(&mut self, task: T) {
        self.stack.push(task);
    }
    #[inline]
    fn spawn_global(&mut self, task: T) {
        self.stack.push(task);
    }
    #[inline]
    fn record(&mut self, value: u64) {
        self.tally.record(value);
    }
}

/// Runs `roots` and everything they spawn on the calling thread, LIFO.
pub fn run_sequential<W: Workload>(w: &W, roots: &[W::Task]) -> Tally {
    let mut ctx = SeqCtx {
        stack: roots.iter().rev().copied().collect(),
        tally: Tally::default(),
    };
    while let Some(t) = ctx.stack.pop() {
        w.run(t, &mut ctx);
    }
    ctx.tally
}

/// [`run_sequential`], timed.
pub fn time_sequential<W: Workload>(w: &W, roots: &[W::Task]) -> (Duration, Tally) {
    let t0 = Instant::now();
    let tally = run_sequential(w, roots);
    (t0.elapsed(), tally)
}

/// An executor of seed 000's shape: start with a runner, inject from outside,
/// join when everything has run.
pub trait TypedPool<W: Workload>: Sized {
    /// Short name for reports.
    const NAME: &'static str;
    /// Starts `workers` threads that run `workload`'s tasks.
    fn start(workers: usize, workload: W) -> Self;
    /// Injects one task from outside.
    fn inject(&self, task: W::Task) -> Result<(), W::Task>;
    /// Injects a batch from outside.
    fn inject_batch(&self, tasks: Vec<W::Task>) -> Result<(), Vec<W::Task>>;
    /// Waits until every task has run, stops the pool and returns the
    /// checksum of what ran.
    fn join(self) -> Tally;
}

impl<T: Send + 'static> SpawnCtx<T> for CbWorkerCtx<T, TallyScratch> {
    #[inline(always)]
    fn spawn_local(&mut self, task: T) {
        CbWorkerCtx::spawn_local(self, task);
    }
    #[inline(always)]
    fn spawn_global(&mut self, task: T) {
        CbWorkerCtx::spawn_global(self, task);
    }
    #[inline(always)]
    fn record(&mut self, value: u64) {
        self.scratch.record(value);
    }
}

/// The seed-000 crossbeam design (one shared in-flight counter per task) as a
/// [`TypedPool`], reported as `cb_seed000`.
pub struct CbSeed000Pool<W: Workload> {
    ex: CbExecutor<W::Task>,
    sink: Arc<TallySink>,
}

impl<W: Workload> fmt::Debug for CbSeed000Pool<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CbSeed000Pool")
            .field("ex", &self.ex)
            .finish()
    }
}

impl<W: Workload> TypedPool<W> for CbSeed000Pool<W> {
    const NAME: &'static str = "cb_seed000";

    fn start(workers: usize, workload: W) -> Self {
        let sink = TallySink::new();
        let for_workers = sink.clone();
        let ex = CbExecutor::new(
            CbConfig::with_workers(workers),
            move |_| TallyScratch::new(for_workers.clone()),
            move |t: W::Task, ctx: &mut CbWorkerCtx<W::Task, TallyScratch>| workload.run(t, ctx),
        );
        Self { ex, sink }
    }

    fn inject(&self, task: W::Task) -> Result<(), W::Task> {
        self.ex.spawn_external(task)
    }

    fn inject_batch(&self, tasks: Vec<W::Task>) -> Result<(), Vec<W::Task>> {
        self.ex.spawn_external_batch(tasks)
    }

    fn join(self) -> Tally {
        self.ex.join();
        self.sink.total()
    }
}

impl<T: Send + 'static> SpawnCtx<T> for CbStrongCtx<T, TallyScratch> {
    #[inline(always)]
    fn spawn_local(&mut self, task: T) {
        CbStrongCtx::spawn_local(self, task);
    }
    #[inline(always)]
    fn spawn_global(&mut self, task: T) {
        CbStrongCtx::spawn_global(self, task);
    }
    #[inline(always)]
    fn record(&mut self, value: u64) {
        self.scratch.record(value);
    }
}

/// The strong crossbeam-deque peer ([`crate::cb_strong`]) as a
/// [`TypedPool`], reported as `cb_strong`.
pub struct CbStrongPool<W: Workload> {
    ex: CbStrongExecutor<W::Task>,
    sink: Arc<TallySink>,
}

impl<W: Workload> fmt::Debug for CbStrongPool<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CbStrongPool")
            .field("ex", &self.ex)
            .finish()
    }
}

impl<W: Workload> TypedPool<W> for CbStrongPool<W> {
    const NAME: &'static str = "cb_strong";

    fn start(workers: usize, workload: W) -> Self {
        let sink = TallySink::new();
        let for_workers = sink.clone();
        let ex = CbStrongExecutor::new(
            CbStrongConfig::with_workers(workers),
            move |_| TallyScratch::new(for_workers.clone()),
            move |t: W::Task, ctx: &mut CbStrongCtx<W::Task, TallyScratch>| workload.run(t, ctx),
        );
        Self { ex, sink }
    }

    fn inject(&self, task: W::Task) -> Result<(), W::Task> {
        self.ex.spawn_external(task)
    }

    fn inject_batch(&self, tasks: Vec<W::Task>) -> Result<(), Vec<W::Task>> {
        self.ex.spawn_external_batch(tasks)
    }

    fn join(self) -> Tally {
        self.ex.join();
        self.sink.total()
    }
}

impl<T: Send + 'static> SpawnCtx<T> for magpie_runtime::WorkerCtx<T, TallyScratch> {
    #[inline(always)]
    fn spawn_local(&mut self, task: T) {
        magpie_runtime::WorkerCtx::spawn_local(self, task)
    }

    #[inline(always)]
    fn spawn_global(&mut self, task: T) {
        magpie_runtime::WorkerCtx::spawn_global(self, task)
    }

    #[inline(always)]
    fn record(&mut self, value: u64) {
        self.scratch.record(value)
    }
}

/// magpie's typed executor as a [`TypedPool`]. `VARIANT` picks the
/// scheduler's modes: [`MAGPIE_DEFAULT`] is the default executor, the others
/// are kept for the measurements that chose the defaults (docs/benchmarks.md,
/// "LIFO slot" and "Split local queue").
pub struct MagpiePool<W: Workload, const VARIANT: u8 = MAGPIE_DEFAULT> {
    ex: magpie_runtime::Executor<W::Task>,
    sink: Arc<TallySink>,
}

/// [`MagpiePool`] variant: the default executor (owner-only LIFO slot, split
/// local queue).
pub const MAGPIE_DEFAULT: u8 = 0;
/// [`MagpiePool`] variant: the LIFO slot stealable.
pub const MAGPIE_STEALABLE_LIFO: u8 = 1;
/// [`MagpiePool`] variant: every evicted task goes to the ring (the async
/// runtime's local queue, and the typed executor's before the split queue).
pub const MAGPIE_RING: u8 = 2;

impl<W: Workload, const VARIANT: u8> fmt::Debug for MagpiePool<W, VARIANT> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MagpiePool")
            .field("ex", &self.ex)
            .field("variant", &VARIANT)
            .finish_non_exhaustive()
    }
}

/// [`MagpiePool`] with the stealable LIFO slot.
pub type MagpieStealableLifoPool<W> = MagpiePool<W, MAGPIE_STEALABLE_LIFO>;
/// [`MagpiePool`] with the ring-only local queue.
pub type MagpieRingPool<W> = MagpiePool<W, MAGPIE_RING>;

impl<W: Workload, const VARIANT: u8> TypedPool<W> for MagpiePool<W, VARIANT> {
    const NAME: &'static str = match VARIANT {
        MAGPIE_STEALABLE_LIFO => "magpie_stealable_lifo",
        MAGPIE_RING => "magpie_ring",
        _ => "magpie",
    };

    fn start(workers: usize, workload: W) -> Self {
        let sink = TallySink::new();
        let for_workers = sink.clone();
        let cfg = magpie_runtime::ExecutorConfig {
            workers,
            pin_threads: false,
            ..magpie_runtime::ExecutorConfig::default()
        };
        let lifo_mode = if VARIANT == MAGPIE_STEALABLE_LIFO {
            magpie_runtime::LifoMode::Stealable
        } else {
            magpie_runtime::LifoMode::Owner
        };
        let local_mode = if VARIANT == MAGPIE_RING {
            magpie_runtime::LocalMode::Ring
        } else {
            magpie_runtime::LocalMode::Split
        };
        let ex = magpie_runtime::Executor::with_modes(
            cfg,
            lifo_mode,
            local_mode,
            move |_| TallyScratch::new(for_workers.clone()),
            move |t: W::Task, ctx: &mut magpie_runtime::WorkerCtx<W::Task, TallyScratch>| {
                workload.run(t, ctx)
            },
        );
        Self { ex, sink }
    }

    fn inject(&self, task: W::Task) -> Result<(), W::Task> {
        self.ex.spawn_external(task)
    }

    fn inject_batch(&self, tasks: Vec<W::Task>) -> Result<(), Vec<W::Task>> {
        self.ex.spawn_external_batch(tasks)
    }

    fn join(self) -> Tally {
        self.ex.join();
        self.sink.total()
    }
}

/// Starts `P`, injects `roots` and waits for the tree: the time from the
/// first inject to `join` returning.
pub fn time_tree<P: TypedPool<W>, W: Workload>(
    workers: usize,
    w: &W,
    roots: &[W::Task],
) -> (Duration, Tally) {
    let pool = P::start(workers, w.clone());
    let t0 = Instant::now();
    for &r in roots {
        assert!(pool.inject(r).is_ok(), "{} refused a root", P::NAME);
    }
    let tally = pool.join();
    (t0.elapsed(), tally)
}

/// Injects `n` [`Sink`] tasks (ids `0..n`) one `inject` at a time.
pub fn time_inject_single<P: TypedPool<Sink>>(workers: usize, n: u64) -> (Duration, Tally) {
    let pool = P::start(workers, Sink);
    let t0 = Instant::now();
    for i in 0..n {
        assert!(pool.inject(i).is_ok(), "{} refused a task", P::NAME);
    }
    let tally = pool.join();
    (t0.elapsed(), tally)
}

/// Injects `n` [`Sink`] tasks in batches of `batch`; the batches are built
/// before the clock starts.
pub fn time_inject_batched<P: TypedPool<Sink>>(
    workers: usize,
    n: u64,
    batch: usize,
) -> (Duration, Tally) {
    let ids: Vec<u64> = (0..n).collect();
    let batches: Vec<Vec<u64>> = ids.chunks(batch).map(<[u64]>::to_vec).collect();
    let pool = P::start(workers, Sink);
    let t0 = Instant::now();
    for b in batches {
        assert!(pool.inject_batch(b).is_ok(), "{} refused a batch", P::NAME);
    }
    let tally = pool.join();
    (t0.elapsed(), tally)
}

/// rayon peers: one pool, reused across runs.
pub struct RayonPeer {
    pool: rayon::ThreadPool,
    tallies: Arc<ThreadTallies>,
}

impl fmt::Debug for RayonPeer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RayonPeer")
            .field("threads", &self.pool.current_num_threads())
            .finish()
    }
}

struct RayonScopeCtx<'a, 's, W> {
    scope: &'a rayon::Scope<'s>,
    w: &'s W,
}

impl<W: Workload> SpawnCtx<W::Task> for RayonScopeCtx<'_, '_, W> {
    #[inline]
    fn spawn_local(&mut self, task: W::Task) {
        let w = self.w;
        self.scope.spawn(move |s| scope_task(w, task, s));
    }
    #[inline]
    fn spawn_global(&mut self, task: W::Task) {
        // rayon's scope has one spawn; from a worker it pushes locally.
        self.spawn_local(task);
    }
    #[inline]
    fn record(&mut self, value: u64) {
        record_on_this_thread(value);
    }
}

fn scope_task<'s, W: Workload>(w: &'s W, task: W::Task, scope: &rayon::Scope<'s>) {
    w.run(task, &mut RayonScopeCtx { scope, w });
}

/// Collects a task's children so `rayon::join` can recurse over them.
struct CollectCtx<T> {
    first: Option<T>,
    second: Option<T>,
    more: Vec<T>,
    tally: Tally,
}

impl<T> SpawnCtx<T> for CollectCtx<T> {
    #[inline]
    fn spawn_local(&mut self, task: T) {
        if self.first.is_none() {
            self.first = Some(task);
        } else if self.second.is_none() {
            self.second = Some(task);
        } else {
            self.more.push(task);
        }
    }
    #[inline]
    fn spawn_global(&mut self, task: T) {
        self.spawn_local(task);
    }
    #[inline]
    fn record(&mut self, value: u64) {
        self.tally.record(value);
    }
}

fn join_task<W: Workload>(w: &W, task: W::Task) -> Tally {
    let mut ctx = CollectCtx {
        first: None,
        second: None,
        more: Vec::new(),
        tally: Tally::default(),
    };
    w.run(task, &mut ctx);
    let mut tally = ctx.tally;
    if ctx.more.is_empty() {
        match (ctx.first, ctx.second) {
            (Some(a), Some(b)) => {
                let (x, y) = rayon::join(|| join_task(w, a), || join_task(w, b));
                tally.merge(x);
                tally.merge(y);
            }
            (Some(a), None) => tally.merge(join_task(w, a)),
            _ => {}
        }
    } else {
        let mut all = Vec::with_capacity(ctx.more.len() + 2);
        all.extend(ctx.first);
        all.extend(ctx.second);
        all.append(&mut ctx.more);
        tally.merge(join_slice(w, &all));
    }
    tally
}

fn join_slice<W: Workload>(w: &W, tasks: &[W::Task]) -> Tally {
    match tasks {
        [] => Tally::default(),
        [t] => join_task(w, *t),
        _ => {
            let (a, b) = tasks.split_at(tasks.len() / 2);
            let (mut x, y) = rayon::join(|| join_slice(w, a), || join_slice(w, b));
            x.merge(y);
            x
        }
    }
}

impl RayonPeer {
    /// A pool of `workers` threads, each with a tally cell.
    pub fn new(workers: usize) -> Self {
        let tallies = ThreadTallies::new();
        let reg = tallies.clone();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(workers)
            .thread_name(|i| format!("rayon-peer-{i}"))
            .start_handler(move |_| reg.register_current_thread())
            .build()
            .expect("failed to build the rayon pool");
        Self { pool, tallies }
    }

    /// `scope` + `spawn`: the roots are spawned into one scope, every task
    /// spawns its children into it, and the scope returns when all are done.
    pub fn scope_tree<W: Workload>(&self, w: &W, roots: &[W::Task]) -> (Duration, Tally) {
        let before = self.tallies.total();
        let t0 = Instant::now();
        self.pool.scope(|s| {
            for &r in roots {
                s.spawn(move |s| scope_task(w, r, s));
            }
        });
        let elapsed = t0.elapsed();
        (elapsed, self.tallies.total().since(before))
    }

    /// `rayon::join` recursion: each task runs, then its children are joined
    /// pairwise; the checksum travels back up the recursion.
    pub fn join_tree<W: Workload>(&self, w: &W, roots: &[W::Task]) -> (Duration, Tally) {
        let t0 = Instant::now();
        let tally = self.pool.install(|| join_slice(w, roots));
        (t0.elapsed(), tally)
    }
}

/// tokio's multi-thread runtime running a spawn tree with `tokio::spawn`.
pub struct TokioTreePeer {
    rt: tokio::runtime::Runtime,
    tallies: Arc<ThreadTallies>,
}

impl fmt::Debug for TokioTreePeer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokioTreePeer")
            .field("workers", &self.rt.metrics().num_workers())
            .finish()
    }
}

struct TokioCtx<'a, W> {
    w: &'a W,
}

impl<W: Workload> SpawnCtx<W::Task> for TokioCtx<'_, W> {
    #[inline]
    fn spawn_local(&mut self, task: W::Task) {
        let w = self.w.clone();
        drop(tokio::spawn(
            async move { w.run(task, &mut TokioCtx { w: &w }) },
        ));
    }
    #[inline]
    fn spawn_global(&mut self, task: W::Task) {
        self.spawn_local(task);
    }
    #[inline]
    fn record(&mut self, value: u64) {
        record_on_this_thread(value);
    }
}

/// How often the waiting thread checks tokio for quiescence. The real sleep
/// is longer (timer slack), which bounds the error per run to well under a
/// millisecond on runs of tens of milliseconds.
const TOKIO_POLL: Duration = Duration::from_micros(20);

impl TokioTreePeer {
    /// A multi-thread runtime with `workers` workers (`enable_all`, as
    /// `#[tokio::main]` would build it), each with a tally cell.
    pub fn new(workers: usize) -> Self {
        let tallies = ThreadTallies::new();
        let reg = tallies.clone();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .on_thread_start(move || reg.register_current_thread())
            .build()
            .expect("failed to build the tokio runtime");
        Self { rt, tallies }
    }

    /// Spawns the roots from outside; every task `tokio::spawn`s its
    /// children. tokio has no quiescence signal, so the caller thread sleeps
    /// in [`TOKIO_POLL`] steps until the runtime's alive-task count is 0
    /// (a child is counted alive from inside its parent's `spawn`, so the
    /// count cannot touch 0 early). Adding our own shared countdown instead
    /// would put an extra contended RMW on every task.
    ///
    /// The final tally read relies on the workers' cell stores being visible
    /// once tokio's task count (decremented after them) reads 0: true on
    /// x86's total store order, and the checksum comparison would catch it
    /// otherwise.
    pub fn spawn_tree<W: Workload>(&self, w: &W, roots: &[W::Task]) -> (Duration, Tally) {
        let before = self.tallies.total();
        let t0 = Instant::now();
        for &r in roots {
            let w = w.clone();
            drop(
                self.rt
                    .spawn(async move { w.run(r, &mut TokioCtx { w: &w }) }),
            );
        }
        while self.rt.metrics().num_alive_tasks() != 0 {
            std::thread::sleep(TOKIO_POLL);
        }
        let elapsed = t0.elapsed();
        (elapsed, self.tallies.total().since(before))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEPTH: u32 = if cfg!(miri) { 5 } else { 12 };

    fn small_uts() -> Uts {
        Uts {
            root_children: if cfg!(miri) { 5 } else { 200 },
            ..Uts::standard(0)
        }
    }

    #[test]
    fn sequential_tree_matches_the_closed_form() {
        let t = BinaryTree {
            depth: DEPTH,
            work_iters: 3,
        };
        assert_eq!(run_sequential(&t, &[BinaryTree::ROOT]), t.expected());
        assert_eq!(t.expected().count, (1 << (DEPTH + 1)) - 1);
    }

    #[test]
    fn uts_tree_is_a_pure_function_of_its_parameters() {
        let u = small_uts();
        let a = run_sequential(&u, &[u.root()]);
        let b = run_sequential(&u, &[u.root()]);
        assert_eq!(a, b);
        // More root children means a strictly larger tree.
        let bigger = Uts {
            root_children: u.root_children + 1,
            ..u
        };
        assert!(run_sequential(&bigger, &[u.root()]).count > a.count);
    }

    #[test]
    #[cfg_attr(miri, ignore)] // 10^5 nodes
    fn standard_uts_has_about_a_hundred_thousand_nodes() {
        let u = Uts::standard(0);
        let n = run_sequential(&u, &[u.root()]).count;
        assert!((50_000..200_000).contains(&n), "{n} nodes");
    }

    #[test]
    fn cb_strong_pool_runs_each_task_once_on_trees_and_injects() {
        let t = BinaryTree {
            depth: DEPTH,
            work_iters: 0,
        };
        let (_, tally) = time_tree::<CbStrongPool<BinaryTree>, _>(WORKERS, &t, &[BinaryTree::ROOT]);
        assert_eq!(tally, t.expected());
        let u = small_uts();
        let (_, tally) = time_tree::<CbStrongPool<Uts>, _>(WORKERS, &u, &[u.root()]);
        assert_eq!(tally, run_sequential(&u, &[u.root()]));
        const N: u64 = if cfg!(miri) { 200 } else { 20_000 };
        let (_, single) = time_inject_single::<CbStrongPool<Sink>>(WORKERS, N);
        assert_eq!(single, Tally::of_range(N));
        let (_, batched) = time_inject_batched::<CbStrongPool<Sink>>(WORKERS, N, 64);
        assert_eq!(batched, Tally::of_range(N));
    }

    #[test]
    fn cb_seed000_pool_runs_each_tree_task_once() {
        let t = BinaryTree {
            depth: DEPTH,
            work_iters: 0,
        };
        let (_, tally) =
            time_tree::<CbSeed000Pool<BinaryTree>, _>(WORKERS, &t, &[BinaryTree::ROOT]);
        assert_eq!(tally, t.expected());
        let u = small_uts();
        let (_, tally) = time_tree::<CbSeed000Pool<Uts>, _>(WORKERS, &u, &[u.root()]);
        assert_eq!(tally, run_sequential(&u, &[u.root()]));
    }

    #[test]
    fn cb_seed000_pool_inject_paths_run_each_task_once() {
        const N: u64 = if cfg!(miri) { 200 } else { 20_000 };
        let (_, single) = time_inject_single::<CbSeed000Pool<Sink>>(WORKERS, N);
        assert_eq!(single, Tally::of_range(N));
        let (_, batched) = time_inject_batched::<CbSeed000Pool<Sink>>(WORKERS, N, 64);
        assert_eq!(batched, Tally::of_range(N));
    }

    #[test]
    #[cfg_attr(miri, ignore)] // rayon/tokio internals are out of scope for Miri
    fn rayon_peers_run_each_tree_task_once() {
        let peer = RayonPeer::new(WORKERS);
        let t = BinaryTree {
            depth: DEPTH,
            work_iters: 0,
        };
        let u = small_uts();
        let u_expected = run_sequential(&u, &[u.root()]);
        for _ in 0..2 {
            assert_eq!(peer.scope_tree(&t, &[BinaryTree::ROOT]).1, t.expected());
            assert_eq!(peer.join_tree(&t, &[BinaryTree::ROOT]).1, t.expected());
            assert_eq!(peer.scope_tree(&u, &[u.root()]).1, u_expected);
            assert_eq!(peer.join_tree(&u, &[u.root()]).1, u_expected);
        }
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn tokio_peer_runs_each_tree_task_once() {
        let peer = TokioTreePeer::new(WORKERS);
        let t = BinaryTree {
            depth: DEPTH,
            work_iters: 0,
        };
        let u = small_uts();
        for _ in 0..2 {
            assert_eq!(peer.spawn_tree(&t, &[BinaryTree::ROOT]).1, t.expected());
            assert_eq!(
                peer.spawn_tree(&u, &[u.root()]).1,
                run_sequential(&u, &[u.root()])
            );
        }
    }
}
