//! Fork-join over borrowed data: [`join`], [`scope`] and [`JoinPool`], the
//! third face of the one worker loop (`crate::sched`), beside the typed
//! executor and the async runtime.
//!
//! ```
//! use magpie_runtime::join::{join, scope, JoinPool};
//!
//! fn sum(xs: &mut [u64]) -> u64 {
//!     if xs.len() <= 1024 {
//!         return xs.iter().sum();
//!     }
//!     let (l, r) = xs.split_at_mut(xs.len() / 2);
//!     let (a, b) = join(|| sum(l), || sum(r));
//!     a + b
//! }
//!
//! let pool = JoinPool::builder().workers(2).build().unwrap();
//! let mut xs: Vec<u64> = (1..=100_000).collect();
//! assert_eq!(pool.install(|| sum(&mut xs)), 5_000_050_000);
//!
//! // Any number of jobs that borrow from the caller's frame:
//! let mut counts = vec![0u32; 8];
//! scope(|s| {
//!     for (i, c) in counts.iter_mut().enumerate() {
//!         s.spawn(move |_| *c = i as u32 * 10);
//!     }
//! });
//! assert_eq!(counts[7], 70);
//! ```
//!
//! How it maps to the worker loop, what "work-first" means here, how a
//! worker waits, and what is not done: `README.md` beside this file. The
//! jobs, latches and the protocols that keep borrowed frames alive are
//! `magpie_core::join` (all the `unsafe` is there).

use std::cell::{Cell, RefCell};
use std::fmt;
use std::io;
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use magpie_core::join::current;
use magpie_core::join::deque::{self, Stolen};
use magpie_core::join::{self as core_join, CoreLatch, FallAsleep, JobRef, JobSink, Wake, WakeUp};
use magpie_core::park::Parker;
use magpie_core::queue::Local;
use magpie_core::rng::XorShift64;
use magpie_core::sync::Arc;

use crate::config::ExecutorConfig;
use crate::metrics::{MetricsSnapshot, WorkerMetrics};
use crate::sched::tiered::{IdleAction, TieredIdle};
use crate::sched::{
    self, Core, Found, LifoMode, LocalMode, NoopTrace, ParkPrep, Parts, Shared, SideQueues, Worker,
    WAKE_ON_HOARD_THRESHOLD,
};

/// A scope of [`scope`]: [`Scope::spawn`] runs a closure on the pool; the
/// closure may borrow anything that outlives the `scope` call.
pub type Scope<'scope> = core_join::Scope<'scope, PoolSink>;

/// State the workers of one pool share.
struct Registry {
    sched: Shared<JobRef>,
    spin_iters: u32,
    park_timeout: Duration,
}

impl Registry {
    /// Acts on a latch set: unparks a worker of this pool that sleeps on it.
    #[inline]
    fn wake(&self, wake: Wake) {
        if let Wake::Worker(i) = wake {
            self.sched.remotes[i].unparker.unpark();
        }
    }

    /// B1: a job from outside the pool goes to the global queue, counted by
    /// the gate; a parked worker is woken. `Err` once the pool shut down.
    fn inject(&self, job: JobRef) -> Result<(), JobRef> {
        let shared = &self.sched;
        if !shared.gate.try_spawn(1) {
            return Err(job);
        }
        if let Err(job) = shared.inject.push(job) {
            if shared.gate.complete(1) {
                shared.initiate_done();
            }
            return Err(job);
        }
        shared.notify_parked();
        Ok(())
    }
}

/// How many times a thief retries a victim's deque that it lost a race on
/// ([`Stolen::Retry`]) before it moves on.
const STEAL_RETRIES: u32 = 4;

/// The thieves' ends of every worker's deque: the worker loop's searching
/// step steals from them ([`SideQueues`]).
struct DequeStealers(Box<[deque::Steal]>);

impl SideQueues<JobRef> for DequeStealers {
    fn steal(&self, victim: usize) -> Option<JobRef> {
        for _ in 0..STEAL_RETRIES {
            match self.0[victim].steal() {
                Stolen::Job(job) => return Some(job),
                Stolen::Empty => return None,
                Stolen::Retry => {}
            }
        }
        None
    }

    fn has_work(&self) -> bool {
        self.0.iter().any(|s| !s.is_empty())
    }
}

/// What a join on a worker touches, reachable without borrowing the
/// worker: its index, the owner end of its deque, its pool. It lives in
/// `worker_main`'s frame for the worker's whole life and is reached through
/// `magpie_core::join::current` (one thread-local pointer); a `join` hands
/// the reference down (`InWorker`), so the push and the take-back are calls
/// on the deque alone.
struct JoinLocal {
    id: usize,
    deque: deque::Local,
    registry: Arc<Registry>,
    /// Pushes until the next wake-on-hoard check.
    pushes_left: Cell<u32>,
    /// What the join face counts (cold paths only: waits, sleeps, a full
    /// deque, wakes on hoard).
    counts: Counts,
}

/// Counters of one worker's join face, bumped on its own thread only.
#[derive(Default)]
struct Counts {
    waits: Cell<u64>,
    wait_tasks: Cell<u64>,
    wait_idle_rounds: Cell<u64>,
    latch_sleeps: Cell<u64>,
    latch_sleeps_ended_set: Cell<u64>,
    deque_full: Cell<u64>,
    hoard_wakes: Cell<u64>,
}

fn bump(c: &Cell<u64>) {
    c.set(c.get() + 1);
}

impl Counts {
    fn snapshot(&self) -> JoinMetrics {
        JoinMetrics {
            waits: self.waits.get(),
            wait_tasks: self.wait_tasks.get(),
            wait_idle_rounds: self.wait_idle_rounds.get(),
            latch_sleeps: self.latch_sleeps.get(),
            latch_sleeps_ended_set: self.latch_sleeps_ended_set.get(),
            deque_full: self.deque_full.get(),
            hoard_wakes: self.hoard_wakes.get(),
        }
    }
}

/// What one worker's join face counted, beside the worker loop's
/// [`WorkerMetrics`] (steals, parks, unparks): [`JoinPool::shutdown`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JoinMetrics {
    /// Joins, scopes and cross-pool installs whose job was not taken back,
    /// so that the owner waited for a thief (README.md, "How a worker
    /// waits").
    pub waits: u64,
    /// Tasks the waiting owners ran meanwhile (W1).
    pub wait_tasks: u64,
    /// Rounds of a waiting owner that found nothing (W2: a spin, a yield
    /// or a sleep follows).
    pub wait_idle_rounds: u64,
    /// Times a waiting owner slept on its latch (W3, `fall_asleep`
    /// succeeded).
    pub latch_sleeps: u64,
    /// Latch sleeps after which the latch was set (its setter woke the
    /// owner, or set it while the owner slept out its timeout).
    pub latch_sleeps_ended_set: u64,
    /// Pushes into a full deque (the job ran at once, D2).
    pub deque_full: u64,
    /// Pushes that woke a parked worker (onto an empty deque, or every
    /// `WAKE_ON_HOARD_THRESHOLD` pushes).
    pub hoard_wakes: u64,
}

impl JoinMetrics {
    /// Adds `other` into `self`, field by field.
    pub fn merge(&mut self, other: &JoinMetrics) {
        let JoinMetrics {
            waits,
            wait_tasks,
            wait_idle_rounds,
            latch_sleeps,
            latch_sleeps_ended_set,
            deque_full,
            hoard_wakes,
        } = other;
        self.waits += waits;
        self.wait_tasks += wait_tasks;
        self.wait_idle_rounds += wait_idle_rounds;
        self.latch_sleeps += latch_sleeps;
        self.latch_sleeps_ended_set += latch_sleeps_ended_set;
        self.deque_full += deque_full;
        self.hoard_wakes += hoard_wakes;
    }
}

/// What [`JoinPool::shutdown`] returns: the worker loop's metrics and the
/// join face's, in total and per worker.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JoinPoolMetrics {
    /// The worker loop's counters (steals, parks, unparks, ...).
    pub sched: MetricsSnapshot,
    /// The join face's counters, summed over the workers.
    pub join: JoinMetrics,
    /// The join face's counters, one entry per worker, by index.
    pub join_per_worker: Vec<JoinMetrics>,
}

impl JoinLocal {
    /// J1: `job` to the bottom of this worker's deque, where thieves can
    /// take it. A full deque (`deque::DEQUE_CAPACITY` jobs not yet taken
    /// back) runs the job here at once: it was never visible to anyone, so
    /// its joiner finds its latch set (README.md, "Work-first"). On a push
    /// onto a deque that was surely empty, and every
    /// [`WAKE_ON_HOARD_THRESHOLD`] pushes, a parked worker is woken if
    /// nobody searches, as the other faces do for local spawns.
    #[inline]
    fn push(&self, job: JobRef) {
        let was_empty = self.deque.surely_empty();
        match self.deque.push(job) {
            Ok(()) => {
                let left = self.pushes_left.get() - 1;
                if was_empty || left == 0 {
                    self.wake_on_hoard();
                } else {
                    self.pushes_left.set(left);
                }
            }
            Err(job) => {
                bump(&self.counts.deque_full);
                self.registry.wake(job.execute());
            }
        }
    }

    #[cold]
    fn wake_on_hoard(&self) {
        self.pushes_left.set(WAKE_ON_HOARD_THRESHOLD);
        // A hint (as in `sched`): the jobs stay with this awake worker, so a
        // stale "nobody to wake" only delays help until the next check.
        let shared = &self.registry.sched;
        if shared.idle.would_unpark() && shared.notify_parked().is_some() {
            bump(&self.counts.hoard_wakes);
        }
    }
}

/// One worker's scheduling state. It lives in the thread-local [`WORKER`],
/// borrowed only around the worker loop's operations, never while a job
/// runs.
struct JoinWorker {
    core: Core<JobRef>,
    rng: XorShift64,
    metrics: WorkerMetrics,
    registry: Arc<Registry>,
}

impl Worker for JoinWorker {
    type Task = JobRef;

    #[inline(always)]
    fn parts(&mut self) -> Parts<'_, JobRef> {
        Parts {
            core: &mut self.core,
            shared: &self.registry.sched,
            rng: &mut self.rng,
            metrics: &mut self.metrics,
        }
    }
}

thread_local! {
    /// The pool worker running on this thread, if any: how `join` finds
    /// its worker.
    static WORKER: RefCell<Option<Box<JoinWorker>>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread's worker. Panics if the thread has none or the
/// worker is borrowed (a scheduler bug: no job runs while it is).
#[inline]
fn with_worker<R>(f: impl FnOnce(&mut JoinWorker) -> R) -> R {
    WORKER.with(|w| {
        let mut w = w.borrow_mut();
        f(w.as_mut().expect("not on a join worker"))
    })
}

/// Runs `f` with this thread's worker's [`JoinLocal`] if the thread is a
/// worker of a pool (`worker_main` sets it for the worker's whole loop
/// through `magpie_core::join::current`: one thread-local pointer, no lazy
/// initialisation, borrow flag or reference count; README.md, "Where the
/// instructions go").
#[inline(always)]
fn with_local<R>(f: impl FnOnce(Option<&JoinLocal>) -> R) -> R {
    current::with(f)
}

/// The policy half of a join or scope on a pool worker
/// ([`core_join::JoinContext`]).
struct InWorker<'a> {
    local: &'a JoinLocal,
    /// Created at the first wait: a join whose `b` is taken back never waits.
    idle: Option<TieredIdle>,
}

impl<'a> InWorker<'a> {
    #[inline]
    fn new(local: &'a JoinLocal) -> Self {
        InWorker { local, idle: None }
    }
}

impl core_join::JoinContext for InWorker<'_> {
    #[inline]
    fn owner(&self) -> usize {
        self.local.id
    }

    #[inline]
    fn push(&mut self, job: JobRef) {
        self.local.push(job);
    }

    #[inline]
    fn pop(&mut self) -> Option<JobRef> {
        self.local.deque.pop()
    }

    #[inline]
    fn wake(&mut self, wake: Wake) {
        self.local.registry.wake(wake);
    }

    /// W1-W3 of README.md: one task found through the worker loop, else
    /// spin, yield, then sleep on the latch (never in the idle set: this
    /// worker keeps its gate token while its job is outstanding).
    fn wait(&mut self, latch: &CoreLatch) {
        let found = with_worker(|w| sched::find_task(w, &mut NoopTrace));
        let local = self.local;
        let counts = &local.counts;
        let idle = self.idle.get_or_insert_with(|| {
            bump(&counts.waits);
            TieredIdle::new(local.registry.spin_iters, local.registry.park_timeout)
        });
        match found {
            Found::Task(job) => {
                idle.on_work();
                bump(&counts.wait_tasks);
                self.execute(job);
            }
            // `Exit` cannot come while a job of ours is outstanding (our
            // token keeps the gate open); treat it as nothing found.
            Found::Idle | Found::Exit => {
                bump(&counts.wait_idle_rounds);
                self.idle_action(latch)
            }
        }
    }
}

impl InWorker<'_> {
    /// W2-W3: nothing found; spin, yield, or sleep on the latch.
    fn idle_action(&mut self, latch: &CoreLatch) {
        let counts = &self.local.counts;
        let idle = self.idle.as_mut().expect("created by wait");
        match idle.next_action() {
            IdleAction::Spin => std::hint::spin_loop(),
            IdleAction::Yield => thread::yield_now(),
            IdleAction::Park(timeout) => {
                // W3: in the parked set (so new work wakes us too), but
                // with our token; then commit to sleeping on the latch.
                if !with_worker(sched::prepare_latch_sleep) {
                    return;
                }
                if latch.fall_asleep() == FallAsleep::Asleep {
                    bump(&counts.latch_sleeps);
                    // The borrow is held while asleep: no job runs on
                    // this thread meanwhile.
                    let _ = with_worker(|w| w.core.parker.park_timeout(timeout));
                    if latch.wake_up() == WakeUp::Set {
                        bump(&counts.latch_sleeps_ended_set);
                    }
                }
                with_worker(sched::after_latch_sleep);
            }
        }
    }
}

/// Where a [`Scope`]'s spawns go: the spawning worker's local queue, or the
/// pool's global queue from a thread outside the pool.
pub struct PoolSink {
    registry: Arc<Registry>,
}

impl JobSink for PoolSink {
    fn push(&self, job: JobRef) {
        // A spawn on a worker of this pool goes to its deque (a full deque
        // runs the job right here).
        let job = with_local(|local| match local {
            Some(local) if Arc::ptr_eq(&local.registry, &self.registry) => {
                local.push(job);
                None
            }
            _ => Some(job),
        });
        // A spawn from a thread outside the pool (a scope's closure that
        // handed the scope to another thread, or a worker of another pool).
        if let Some(job) = job {
            if let Err(job) = self.registry.inject(job) {
                // The pool is shutting down: run it here.
                self.registry.wake(job.execute());
            }
        }
    }
}

impl fmt::Debug for PoolSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolSink")
            .field("workers", &self.registry.sched.workers)
            .finish()
    }
}

/// Runs `a` and `b`, maybe in parallel, and returns both results.
///
/// On a pool worker, work-first: `b` goes to the worker's local queue where
/// idle workers can steal it, `a` runs at once, then `b` is taken back and
/// run here unless it was stolen, in which case this worker runs other work
/// until the thief is done. Outside any pool, the call runs on the global
/// pool ([`JoinPool::global`]) and the calling thread blocks.
///
/// If `a` or `b` panics, the panic is raised here after both finished
/// (`a`'s if both did): neither outlives the borrows it holds.
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    with_local(|local| match local {
        Some(local) => core_join::join(&mut InWorker::new(local), a, b),
        None => JoinPool::global().install(|| join(a, b)),
    })
}

/// Runs `op` with a [`Scope`] in which it may spawn any number of closures
/// that borrow from the caller; returns once all of them finished. The
/// first panic (`op`'s, else a spawned closure's) is raised here after
/// everything finished. Outside any pool, runs on the global pool.
pub fn scope<'scope, OP, R>(op: OP) -> R
where
    OP: FnOnce(&Scope<'scope>) -> R + Send,
    R: Send,
{
    with_local(|local| match local {
        Some(local) => {
            let registry = local.registry.clone();
            core_join::scope(&mut InWorker::new(local), PoolSink { registry }, op)
        }
        None => JoinPool::global().install(|| scope(op)),
    })
}

/// Configures a [`JoinPool`].
pub struct Builder {
    workers: usize,
    thread_name: Option<Box<dyn Fn(usize) -> String + Send + Sync>>,
    stack_size: Option<usize>,
    cfg: ExecutorConfig,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("workers", &self.workers)
            .field("stack_size", &self.stack_size)
            .finish()
    }
}

impl Builder {
    /// Worker threads (default: the available cores). At least 1.
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n.max(1);
        self
    }

    /// Names worker `i`'s thread (default: `magpie-join-{i}`).
    pub fn thread_name(mut self, name: impl Fn(usize) -> String + Send + Sync + 'static) -> Self {
        self.thread_name = Some(Box::new(name));
        self
    }

    /// Stack size of each worker thread, in bytes (default: std's).
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Starts the workers.
    pub fn build(self) -> io::Result<JoinPool> {
        let (mut sched, owned) = Shared::new(
            self.workers,
            self.cfg.steal_tries,
            // Joins and scope spawns go to the worker's deque, not to the
            // loop's LIFO slot or private stack: those stay empty, and the
            // ring holds only batches from the global queue (README.md).
            LifoMode::Owner,
            LocalMode::Ring,
        );
        let (deques, stealers): (Vec<_>, Vec<_>) =
            (0..self.workers).map(|_| deque::deque()).unzip();
        sched.side = Some(Box::new(DequeStealers(stealers.into_boxed_slice())));
        let registry = Arc::new(Registry {
            sched,
            spin_iters: self.cfg.spin_iters,
            park_timeout: self.cfg.park_timeout,
        });
        let mut threads = Vec::with_capacity(self.workers);
        let mut pool = JoinPool {
            registry: registry.clone(),
            threads: Vec::new(),
        };
        for (id, ((local, parker), deque)) in owned.into_iter().zip(deques).enumerate() {
            let name = match &self.thread_name {
                Some(f) => f(id),
                None => format!("magpie-join-{id}"),
            };
            let mut b = thread::Builder::new().name(name);
            if let Some(size) = self.stack_size {
                b = b.stack_size(size);
            }
            let registry = registry.clone();
            let seed = self.cfg.seed;
            match b.spawn(move || worker_main(registry, id, local, parker, deque, seed)) {
                Ok(h) => threads.push(h),
                Err(e) => {
                    // Stop the ones already running (the pool's drop).
                    pool.threads = threads;
                    drop(pool);
                    return Err(e);
                }
            }
        }
        pool.threads = threads;
        Ok(pool)
    }
}

/// A pool of worker threads for [`join`] and [`scope`].
///
/// `join` and `scope` called on one of its workers stay on it; from any
/// other thread, [`JoinPool::install`] runs a closure on it and blocks.
/// Dropping the pool stops its workers and joins their threads.
pub struct JoinPool {
    registry: Arc<Registry>,
    threads: Vec<thread::JoinHandle<(WorkerMetrics, JoinMetrics)>>,
}

impl fmt::Debug for JoinPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinPool")
            .field("workers", &self.registry.sched.workers)
            .finish()
    }
}

impl JoinPool {
    /// A builder with the defaults (one worker per available core).
    pub fn builder() -> Builder {
        Builder {
            workers: thread::available_parallelism().map_or(1, |n| n.get()),
            thread_name: None,
            stack_size: None,
            cfg: ExecutorConfig::default(),
        }
    }

    /// The global pool that [`join`] and [`scope`] use outside any pool,
    /// created at first use with one worker per available core.
    pub fn global() -> &'static JoinPool {
        static GLOBAL: OnceLock<JoinPool> = OnceLock::new();
        GLOBAL.get_or_init(|| {
            JoinPool::builder()
                .thread_name(|i| format!("magpie-join-global-{i}"))
                .build()
                .expect("failed to start the global join pool")
        })
    }

    /// Worker threads.
    pub fn workers(&self) -> usize {
        self.registry.sched.workers
    }

    /// Runs `op` on this pool and returns its value (or raises its panic).
    /// On one of this pool's workers, `op` runs right here. From a worker
    /// of another pool, it is injected into this pool's global queue and
    /// the calling worker keeps running its own pool's work until `op`
    /// finished (so installs that cross back and forth between two pools do
    /// not deadlock). From any other thread, it is injected and the calling
    /// thread blocks until it finished.
    pub fn install<OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce() -> R + Send,
        R: Send,
    {
        with_local(|local| match local {
            Some(local) if Arc::ptr_eq(&local.registry, &self.registry) => op(),
            Some(local) => {
                // X1-X3 of core's join README: this worker waits as a joiner
                // does, in its own pool, and the other pool's worker wakes
                // it through its own unparker.
                let unparker = local.registry.sched.remotes[local.id].unparker.clone();
                core_join::install_cross(&mut InWorker::new(local), unparker, op, |job| {
                    self.registry.inject(job)
                })
            }
            None => core_join::install(op, |job| self.registry.inject(job)),
        })
    }
}

impl JoinPool {
    /// Stops the workers, joins their threads and returns what they
    /// counted: the worker loop's metrics and the join face's
    /// ([`JoinMetrics`]). Dropping the pool does the same and discards them.
    ///
    /// # Panics
    ///
    /// If a worker thread panicked (a scheduler bug: jobs catch their own
    /// panics).
    pub fn shutdown(mut self) -> JoinPoolMetrics {
        let per_worker = self.stop();
        let mut join = JoinMetrics::default();
        let mut sched = Vec::with_capacity(per_worker.len());
        let mut join_per_worker = Vec::with_capacity(per_worker.len());
        for r in per_worker {
            let (w, j) = r.expect("a join worker thread panicked");
            join.merge(&j);
            sched.push(w);
            join_per_worker.push(j);
        }
        JoinPoolMetrics {
            sched: MetricsSnapshot::from_workers(sched),
            join,
            join_per_worker,
        }
    }

    /// Closes the gate and joins every worker thread.
    fn stop(&mut self) -> Vec<thread::Result<(WorkerMetrics, JoinMetrics)>> {
        // Nothing is in flight: `install` borrows the pool, and every job of
        // a `join` or `scope` finished before it returned. Closing the gate
        // ends it once every worker parks.
        if self.registry.sched.gate.close() {
            self.registry.sched.initiate_done();
        }
        self.threads.drain(..).map(|h| h.join()).collect()
    }
}

impl Drop for JoinPool {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

fn monotonic_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

fn worker_main(
    registry: Arc<Registry>,
    id: usize,
    local: Local<JobRef>,
    parker: Parker,
    deque: deque::Local,
    seed: u64,
) -> (WorkerMetrics, JoinMetrics) {
    let join_local = JoinLocal {
        id,
        deque,
        registry: registry.clone(),
        pushes_left: Cell::new(WAKE_ON_HOARD_THRESHOLD),
        counts: Counts::default(),
    };
    let worker = Box::new(JoinWorker {
        core: Core::new(&registry.sched, id, local, parker, monotonic_ns),
        rng: XorShift64::new(seed ^ (id as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        metrics: WorkerMetrics::default(),
        registry: registry.clone(),
    });
    WORKER.with(|w| *w.borrow_mut() = Some(worker));
    current::enter(&join_local, || {
        if with_worker(sched::enter) {
            run_loop(&registry, &join_local);
        }
    });
    let worker = WORKER.with(|w| w.borrow_mut().take());
    debug_assert!(join_local.deque.is_empty(), "a job was left in a deque");
    let metrics = match worker {
        Some(mut w) => {
            debug_assert!(w.core.local.pop().is_none(), "a job was left in a ring");
            debug_assert!(w.core.take_lifo().is_none());
            std::mem::take(&mut w.metrics)
        }
        None => WorkerMetrics::default(),
    };
    (metrics, join_local.counts.snapshot())
}

/// The worker's own loop: the same shape as the other faces' (find a task,
/// run it, idle in tiers, park through `sched::prepare_park`), with the
/// worker's own deque looked at first (a scope's spawn may leave a job
/// there after the job that spawned it returned).
fn run_loop(registry: &Registry, local: &JoinLocal) {
    let mut idle = TieredIdle::new(registry.spin_iters, registry.park_timeout);
    let mut trace = NoopTrace;
    loop {
        if let Some(job) = local.deque.pop() {
            idle.on_work();
            registry.wake(job.execute());
            continue;
        }
        match with_worker(|w| sched::find_task(w, &mut trace)) {
            Found::Task(job) => {
                idle.on_work();
                // The worker is not borrowed while the job runs: its joins
                // and scopes borrow it around their own queue operations.
                registry.wake(job.execute());
            }
            Found::Exit => return,
            Found::Idle => match idle.next_action() {
                IdleAction::Spin => std::hint::spin_loop(),
                IdleAction::Yield => thread::yield_now(),
                IdleAction::Park(timeout) => {
                    match with_worker(|w| sched::prepare_park(w, &mut trace)) {
                        ParkPrep::Resume => idle.on_work(),
                        ParkPrep::Exit => return,
                        ParkPrep::Sleep => {
                            let result = with_worker(|w| w.core.parker.park_timeout(timeout));
                            if !with_worker(|w| sched::after_park(w, result, &mut trace)) {
                                return;
                            }
                        }
                    }
                }
            },
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use magpie_core::sync::atomic::{AtomicBool, Ordering};

    /// The join face's counters reach `JoinPool::shutdown`: every `b` below
    /// is stolen (its `a` spins until `b` started) and finishes only once an
    /// outside install ran, which only the waiting owner is free to run, so
    /// each join waits and runs one task meanwhile.
    #[test]
    fn shutdown_counts_each_stolen_b_and_the_owners_wait() {
        const JOINS: u64 = 5;
        let p = JoinPool::builder().workers(2).build().unwrap();
        for _ in 0..JOINS {
            let started = AtomicBool::new(false);
            let released = AtomicBool::new(false);
            std::thread::scope(|ts| {
                ts.spawn(|| {
                    while !started.load(Ordering::Acquire) {
                        thread::yield_now();
                    }
                    p.install(|| released.store(true, Ordering::Release));
                });
                let r = p.install(|| {
                    join(
                        || {
                            while !started.load(Ordering::Acquire) {
                                std::hint::spin_loop();
                            }
                            1
                        },
                        || {
                            started.store(true, Ordering::Release);
                            while !released.load(Ordering::Acquire) {
                                thread::yield_now();
                            }
                            2
                        },
                    )
                });
                assert_eq!(r, (1, 2));
            });
        }
        let m = p.shutdown();
        assert_eq!(m.sched.per_worker.len(), 2);
        assert_eq!(m.join_per_worker.len(), 2);
        assert!(m.sched.total.steal_successes >= JOINS, "{m:?}");
        assert!(m.join.waits >= JOINS, "{m:?}");
        assert!(m.join.wait_tasks >= JOINS, "{m:?}");
        assert_eq!(m.join.deque_full, 0);
    }
}
