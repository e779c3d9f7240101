//! The typed executor: seed 000's API on the one worker loop.
//!
//! Tasks are plain values of one type `T` (an enum, typically), run by one
//! `runner` function; nothing is boxed or allocated per task. See the crate
//! docs for an example and `sched/README.md` for the scheduling protocol.

use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::OnceLock;
use std::time::Instant;

use magpie_core::affinity;
use magpie_core::park::Parker;
use magpie_core::queue::Local;
use magpie_core::rng::XorShift64;
use magpie_core::sync::{hint, thread, Arc};

use crate::config::ExecutorConfig;
use crate::metrics::{MetricsSnapshot, WorkerMetrics};
use crate::sched::tiered::{IdleAction, TieredIdle};
use crate::sched::{
    self, Core, LifoMode, LocalMode, NoopTrace, ParkPrep, Parts, Shared, Step, Worker,
};
use crate::worker_id;

/// A pool of worker threads running tasks of type `T` with one runner.
///
/// **Dropping** an `Executor` that was not [`join`](Executor::join)ed is a
/// [`shutdown`](Executor::shutdown) followed by joining the threads: no new
/// task is accepted, tasks still queued are **dropped without running**
/// (their destructors run, see `shutdown`), and a panic raised by a task is
/// discarded rather than raised again. To run everything that was spawned,
/// call `join`.
///
/// ```
/// use magpie_runtime::{Executor, ExecutorConfig, WorkerCtx};
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
///
/// // Count the nodes of a binary tree of depth 10, one task per node.
/// let count = Arc::new(AtomicU64::new(0));
/// let c = count.clone();
/// let ex = Executor::new(
///     ExecutorConfig { workers: 2, ..Default::default() },
///     |_worker| (),
///     move |depth: u32, ctx: &mut WorkerCtx<u32, ()>| {
///         c.fetch_add(1, Ordering::Relaxed);
///         if depth > 0 {
///             ctx.spawn_local(depth - 1);
///             ctx.spawn_local(depth - 1);
///         }
///     },
/// );
/// ex.spawn_external(10).unwrap();
/// let metrics = ex.join();
/// assert_eq!(count.load(Ordering::Relaxed), (1 << 11) - 1);
/// assert_eq!(metrics.tasks_run(), (1 << 11) - 1);
/// ```
pub struct Executor<T: Send + 'static> {
    shared: Arc<Shared<T>>,
    threads: Vec<thread::JoinHandle<WorkerMetrics>>,
}

/// A cheap, cloneable handle for spawning from outside the workers.
pub struct ExecutorHandle<T: Send + 'static> {
    shared: Arc<Shared<T>>,
}

/// What a task sees while it runs: its worker's id, scratch space, RNG and
/// metrics, and the spawn operations.
pub struct WorkerCtx<T: Send + 'static, S> {
    /// This worker's id, `0..workers`.
    pub worker_id: usize,
    /// The value `scratch_init(worker_id)` made for this worker.
    pub scratch: S,
    /// This worker's RNG (also used to pick steal victims).
    pub rng: XorShift64,
    /// This worker's scheduler counters, returned by `join`.
    pub metrics: WorkerMetrics,
    pub(crate) core: Core<T>,
    pub(crate) shared: Arc<Shared<T>>,
}

impl<T: Send + 'static, S> Worker for WorkerCtx<T, S> {
    type Task = T;
    const FAST_TICK: bool = true;

    #[inline(always)]
    fn parts(&mut self) -> Parts<'_, T> {
        Parts {
            core: &mut self.core,
            shared: &self.shared,
            rng: &mut self.rng,
            metrics: &mut self.metrics,
        }
    }
}

impl<T: Send + 'static, S> WorkerCtx<T, S> {
    pub(crate) fn from_parts(
        worker_id: usize,
        scratch: S,
        rng: XorShift64,
        core: Core<T>,
        shared: Arc<Shared<T>>,
    ) -> Self {
        Self {
            worker_id,
            scratch,
            rng,
            metrics: WorkerMetrics::default(),
            core,
            shared,
        }
    }

    /// Spawns a task onto this worker: onto its private stack (newest
    /// first, as a LIFO slot in front of it would give), whose oldest half
    /// goes to the ring, where other workers steal it, when one of them
    /// asks. Never touches a shared counter. Every 32 local spawns a parked
    /// sibling is woken (wake-on-hoard).
    #[inline(always)]
    pub fn spawn_local(&mut self, task: T) {
        // The common case needs only the core; the rest builds `Parts`.
        if let Err(task) = self.core.try_spawn_private(task) {
            self.parts().spawn_local_general(task);
        }
    }

    /// Spawns a task onto the global queue, for any worker, and wakes a
    /// parked worker.
    pub fn spawn_global(&mut self, task: T) {
        self.parts().spawn_global(task);
    }

    /// A handle for spawning from elsewhere (another thread, say).
    pub fn handle(&self) -> ExecutorHandle<T> {
        ExecutorHandle {
            shared: self.shared.clone(),
        }
    }

    /// Number of workers in this executor.
    pub fn workers(&self) -> usize {
        self.shared.workers
    }
}

impl<T: Send + 'static, S> fmt::Debug for WorkerCtx<T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerCtx")
            .field("worker_id", &self.worker_id)
            .field("metrics", &self.metrics)
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> Executor<T> {
    /// Starts `cfg.workers` threads. Each calls `scratch_init(worker_id)` once,
    /// on its own thread, then runs tasks with `runner` until [`join`] or
    /// [`shutdown`].
    ///
    /// [`join`]: Executor::join
    /// [`shutdown`]: Executor::shutdown
    pub fn new<S, I, R>(cfg: ExecutorConfig, scratch_init: I, runner: R) -> Self
    where
        S: 'static,
        I: Fn(usize) -> S + Send + Sync + 'static,
        R: Fn(T, &mut WorkerCtx<T, S>) + Send + Sync + 'static,
    {
        Self::with_modes(cfg, LifoMode::Owner, LocalMode::Split, scratch_init, runner)
    }

    /// [`Executor::new`] with the LIFO slot's mode and the local queue's mode
    /// chosen. Only the benchmarks that decided the defaults need this
    /// (docs/benchmarks.md, "LIFO slot" and "Split local queue").
    #[doc(hidden)]
    pub fn with_modes<S, I, R>(
        cfg: ExecutorConfig,
        lifo_mode: LifoMode,
        local_mode: LocalMode,
        scratch_init: I,
        runner: R,
    ) -> Self
    where
        S: 'static,
        I: Fn(usize) -> S + Send + Sync + 'static,
        R: Fn(T, &mut WorkerCtx<T, S>) + Send + Sync + 'static,
    {
        let workers = cfg.workers.max(1);
        let (shared, owned) = Shared::new(workers, cfg.steal_tries, lifo_mode, local_mode);
        let shared = Arc::new(shared);
        let scratch_init = Arc::new(scratch_init);
        let runner = Arc::new(runner);
        let cores = affinity::available_cores();
        let threads = owned
            .into_iter()
            .enumerate()
            .map(|(id, (local, parker))| {
                let shared = shared.clone();
                let scratch_init = scratch_init.clone();
                let runner = runner.clone();
                let cfg = cfg.clone();
                thread::Builder::new()
                    .name(format!("magpie-worker-{id}"))
                    .spawn(move || {
                        if cfg.pin_threads {
                            // Best effort: a failure (a restricted cpuset, say)
                            // leaves the thread unpinned, which is still correct.
                            let _ = affinity::pin_current_thread(id % cores);
                        }
                        worker_main(shared, id, local, parker, &*scratch_init, &cfg, &*runner)
                    })
                    .expect("failed to spawn a worker thread")
            })
            .collect();
        Self { shared, threads }
    }

    /// A handle for spawning from other threads.
    pub fn handle(&self) -> ExecutorHandle<T> {
        ExecutorHandle {
            shared: self.shared.clone(),
        }
    }

    /// Workers asleep right now (a diagnostic; racy by nature).
    pub fn parked_workers(&self) -> usize {
        self.shared.idle.num_parked()
    }

    /// Same as `self.handle().spawn(task)`.
    pub fn spawn_external(&self, task: T) -> Result<(), T> {
        spawn_one(&self.shared, task)
    }

    /// Same as `self.handle().spawn_batch(tasks)`.
    pub fn spawn_external_batch(&self, tasks: Vec<T>) -> Result<(), Vec<T>> {
        spawn_batch(&self.shared, tasks)
    }

    /// Stops the executor without draining, and returns at once (it does
    /// not wait for the workers):
    ///
    /// - spawns fail from now on (they hand the task back);
    /// - each worker notices at its next look at the shared `done` flag: at
    ///   the start of each tick of up to 128 tasks (`BUDGET_PER_TICK`) and
    ///   after each idle spell, so a busy worker may still run up to 127
    ///   queued tasks (and the task it is in) before it stops;
    /// - tasks still queued then are dropped, never run. Their destructors
    ///   run when the queues are freed: the global queue's and the rings'
    ///   when the last [`ExecutorHandle`] and the `Executor` itself are
    ///   gone, so a handle kept alive keeps them alive too.
    ///
    /// Call [`join`](Executor::join) afterwards to wait for the threads and
    /// collect the metrics (or drop the `Executor`).
    ///
    /// ```
    /// use magpie_runtime::{Executor, ExecutorConfig, WorkerCtx};
    /// use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// /// Counts its runs and its drops; the first one holds its worker.
    /// struct Job { first: bool, ran: Arc<AtomicUsize>, dropped: Arc<AtomicUsize> }
    /// impl Drop for Job {
    ///     fn drop(&mut self) { self.dropped.fetch_add(1, SeqCst); }
    /// }
    /// let (ran, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    /// let (started, release) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    /// let (s, r) = (started.clone(), release.clone());
    /// let ex = Executor::new(
    ///     ExecutorConfig { workers: 1, ..Default::default() },
    ///     |_| (),
    ///     move |job: Job, _: &mut WorkerCtx<Job, ()>| {
    ///         job.ran.fetch_add(1, SeqCst);
    ///         if job.first {
    ///             s.store(true, SeqCst);
    ///             for _ in 0..60_000 {
    ///                 if r.load(SeqCst) { break; }
    ///                 std::thread::sleep(Duration::from_millis(1));
    ///             }
    ///         }
    ///     },
    /// );
    /// let job = |first| Job { first, ran: ran.clone(), dropped: dropped.clone() };
    /// ex.spawn_external(job(true)).ok().unwrap();
    /// for _ in 0..60_000 {
    ///     if started.load(SeqCst) { break; }
    ///     std::thread::sleep(Duration::from_millis(1));
    /// }
    /// for _ in 0..999 {
    ///     ex.spawn_external(job(false)).ok().unwrap();
    /// }
    /// ex.shutdown();
    /// assert!(ex.spawn_external(job(false)).is_err(), "closed");
    /// release.store(true, SeqCst);
    /// drop(ex);
    /// // At most one tick (128 tasks) ran after the shutdown; every task was
    /// // dropped exactly once, run or not (1000 spawned, 1 refused).
    /// assert!(ran.load(SeqCst) <= 128, "{} ran", ran.load(SeqCst));
    /// assert_eq!(dropped.load(SeqCst), 1001);
    /// ```
    pub fn shutdown(&self) {
        shutdown(&self.shared);
    }

    /// Closes the gate to outside spawns, waits until every task has run
    /// (tasks may still spawn tasks until then), joins the threads and returns
    /// their metrics. If a task panicked, the first panic is raised again here,
    /// after every thread has been joined.
    pub fn join(mut self) -> MetricsSnapshot {
        if self.shared.gate.close() {
            self.shared.initiate_done();
        }
        let metrics = self.join_threads();
        if let Some(payload) = self.shared.take_panic() {
            panic::resume_unwind(payload);
        }
        metrics
    }

    fn join_threads(&mut self) -> MetricsSnapshot {
        let mut per_worker = Vec::with_capacity(self.threads.len());
        let mut worker_panic = None;
        for handle in self.threads.drain(..) {
            match handle.join() {
                Ok(m) => per_worker.push(m),
                // The scheduler itself panicked (a bug): keep joining, then raise.
                Err(payload) => {
                    per_worker.push(WorkerMetrics::default());
                    worker_panic.get_or_insert(payload);
                }
            }
        }
        if let Some(payload) = worker_panic {
            panic::resume_unwind(payload);
        }
        MetricsSnapshot::from_workers(per_worker)
    }
}

/// Not joined: shut down (queued tasks dropped without running), then wait
/// for the threads. A task's panic is not raised again here.
impl<T: Send + 'static> Drop for Executor<T> {
    fn drop(&mut self) {
        if self.threads.is_empty() {
            return;
        }
        shutdown(&self.shared);
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
    }
}

impl<T: Send + 'static> fmt::Debug for Executor<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Executor")
            .field("workers", &self.shared.workers)
            .field("in_flight", &self.shared.gate.in_flight())
            .field("accepting", &self.shared.gate.is_accepting())
            .finish()
    }
}

impl<T: Send + 'static> Clone for ExecutorHandle<T> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<T: Send + 'static> fmt::Debug for ExecutorHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecutorHandle")
            .field("accepting", &self.shared.gate.is_accepting())
            .finish()
    }
}

impl<T: Send + 'static> ExecutorHandle<T> {
    /// Queues `task` for any worker. Gives it back once the executor stopped
    /// accepting (after `join` began or `shutdown`).
    pub fn spawn(&self, task: T) -> Result<(), T> {
        spawn_one(&self.shared, task)
    }

    /// Queues all of `tasks` or none of them, under one lock, then wakes at
    /// most one parked worker per task and never more than the worker count.
    pub fn spawn_batch(&self, tasks: Vec<T>) -> Result<(), Vec<T>> {
        spawn_batch(&self.shared, tasks)
    }

    /// Whether spawns are still accepted.
    pub fn is_accepting(&self) -> bool {
        self.shared.gate.is_accepting()
    }

    /// Same as [`Executor::shutdown`]: stops the executor and returns at once;
    /// queued tasks are dropped, never run.
    pub fn shutdown(&self) {
        shutdown(&self.shared);
    }
}

pub(crate) fn handle_from_shared<T: Send + 'static>(shared: Arc<Shared<T>>) -> ExecutorHandle<T> {
    ExecutorHandle { shared }
}

fn spawn_one<T: Send + 'static>(shared: &Shared<T>, task: T) -> Result<(), T> {
    // The gate's CAS checks "accepting" and counts the task in one step, so a
    // spawn can never slip in after `join` closed the gate.
    if !shared.gate.try_spawn(1) {
        return Err(task);
    }
    if let Err(task) = shared.inject.push(task) {
        // Closed by `shutdown` between the gate and the push.
        if shared.gate.complete(1) {
            shared.initiate_done();
        }
        return Err(task);
    }
    shared.notify_parked();
    Ok(())
}

fn spawn_batch<T: Send + 'static>(shared: &Shared<T>, tasks: Vec<T>) -> Result<(), Vec<T>> {
    let n = tasks.len();
    if n == 0 {
        return Ok(());
    }
    if !shared.gate.try_spawn(n as u64) {
        return Err(tasks);
    }
    if let Err(tasks) = shared.inject.push_batch(tasks) {
        if shared.gate.complete(n as u64) {
            shared.initiate_done();
        }
        return Err(tasks);
    }
    // `unpark_one` refuses while a worker searches, and a woken worker counts
    // as searching, so this wakes one worker; the searcher chain wakes the
    // rest as they find work. The bound makes the promise explicit.
    for _ in 0..n.min(shared.workers) {
        if shared.notify_parked().is_none() {
            break;
        }
    }
    Ok(())
}

fn shutdown<T: Send + 'static>(shared: &Shared<T>) {
    let _ = shared.gate.close();
    shared.initiate_done();
}

/// Nanoseconds since the first call in this process.
fn monotonic_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    epoch.elapsed().as_nanos() as u64
}

fn worker_main<T, S, I, R>(
    shared: Arc<Shared<T>>,
    id: usize,
    local: Local<T>,
    parker: Parker,
    scratch_init: &I,
    cfg: &ExecutorConfig,
    runner: &R,
) -> WorkerMetrics
where
    T: Send + 'static,
    I: Fn(usize) -> S,
    R: Fn(T, &mut WorkerCtx<T, S>),
{
    let previous_id = worker_id::set_current_worker_id(Some(id));
    let mut ctx = WorkerCtx {
        worker_id: id,
        scratch: scratch_init(id),
        rng: XorShift64::new(cfg.seed ^ (id as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        metrics: WorkerMetrics::default(),
        core: Core::new(&shared, id, local, parker, monotonic_ns),
        shared,
    };
    let mut trace = NoopTrace;
    if sched::enter(&mut ctx) {
        run_loop(&mut ctx, cfg, runner, &mut trace);
    }
    worker_id::set_current_worker_id(previous_id);
    ctx.metrics.spurious_wakeups += ctx.core.parker.spurious_wakeups();
    ctx.metrics
}

fn run_loop<T, S, R>(
    ctx: &mut WorkerCtx<T, S>,
    cfg: &ExecutorConfig,
    runner: &R,
    trace: &mut NoopTrace,
) where
    T: Send + 'static,
    R: Fn(T, &mut WorkerCtx<T, S>),
{
    let mut idle = TieredIdle::new(cfg.spin_iters, cfg.park_timeout);
    let mut just_woke = false;
    loop {
        match sched::step(ctx, trace, |ctx, task| run_task(ctx, runner, task)) {
            Step::Ran => {
                idle.on_work();
                just_woke = false;
            }
            Step::Exit => return,
            Step::Idle => {
                if just_woke {
                    ctx.metrics.idle_wakeups += 1;
                    just_woke = false;
                }
                match idle.next_action() {
                    IdleAction::Spin => hint::spin_loop(),
                    IdleAction::Yield => thread::yield_now(),
                    IdleAction::Park(timeout) => match sched::prepare_park(ctx, trace) {
                        ParkPrep::Resume => idle.on_work(),
                        ParkPrep::Exit => return,
                        ParkPrep::Sleep => {
                            let result = ctx.core.parker.park_timeout(timeout);
                            if !sched::after_park(ctx, result, trace) {
                                return;
                            }
                            just_woke = true;
                        }
                    },
                }
            }
        }
    }
}

/// Runs one task, catching its panic: the first is kept for `join`, and the
/// worker carries on (no count is touched per task, so nothing needs fixing).
#[inline]
fn run_task<T, S, R>(ctx: &mut WorkerCtx<T, S>, runner: &R, task: T)
where
    T: Send + 'static,
    R: Fn(T, &mut WorkerCtx<T, S>),
{
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| runner(task, ctx))) {
        ctx.metrics.panics += 1;
        ctx.shared.record_panic(payload);
    }
}
