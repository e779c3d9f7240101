//! A strong executor on `crossbeam-deque`: what a competent engineer writes
//! on it today, with seed 000's typed API (so the typed benches drive it like
//! every other peer) but none of the seed-000 design's shared per-task costs.
//! It is the peer that answers "is magpie faster than a good crossbeam-based
//! design?", where [`crate::cb_executor`] (the seed-000 crossbeam design)
//! answers "is it faster than the design it replaced?".
//!
//! # Shape
//!
//! - A crossbeam [`Injector`] for outside spawns and `spawn_global`; one LIFO
//!   [`Worker`] deque per worker; siblings steal single tasks FIFO (the
//!   oldest task, the largest subtree), as rayon does.
//! - **No shared line per task.** Each worker owns two monotonic counters,
//!   `spawned` and `completed`, on its own cache line. Only the owner writes
//!   them, with plain stores (no read-modify-write). Outside spawns are
//!   counted in the gate word, which only outside spawns and `join` touch.
//!   The counters are summed only when a worker is about to sleep and by
//!   `join` (step 6).
//! - **Wake only when someone sleeps.** A `sleepers` bitmap (one bit per
//!   worker, so at most [`MAX_WORKERS`]) is read with a plain load after a
//!   push; a waker claims one set bit with a CAS and unparks that thread.
//! - **Park without a timeout**, after spinning and yielding rounds of
//!   searching.
//! - `steal_batch_and_pop` from the injector; `Steal::Retry` repeats the
//!   sweep instead of being read as empty.
//!
//! # Protocol (numbered as the comments and tests refer to it)
//!
//! 1. **Init.** `gate = ACCEPTING_BIT` (open, no outside spawn yet); every
//!    counter 0; `sleepers = 0`.
//! 2. **Outside spawn.** A CAS adds [`EXTERNAL_UNIT`] (or `n` of them for a
//!    batch, all or nothing) only while `ACCEPTING_BIT` is set, then the
//!    tasks are pushed to the injector, then `fence(SeqCst)` and a load of
//!    `sleepers`: if any bit is set, wake one (a batch wakes up to
//!    `min(n, workers)`). The fence pairs with the sleeper's fence in step 5,
//!    so an outside spawn can never be missed by every worker.
//! 3. **Inside spawn** (`spawn_local`, `spawn_global`): the owner stores
//!    `spawned + 1` (Relaxed, its own line), pushes, and loads `sleepers`
//!    (Relaxed); if a bit is set, wake one. This load has no fence, as in
//!    rayon: a sleeper may miss this one push, but the spawner is awake and
//!    holds the task, and it loads `sleepers` again after every later push
//!    and every pop that leaves its deque non-empty (step 4), so a sleeper
//!    stays asleep only while the spawner has no surplus to give it.
//! 4. **Pop order:** own deque (LIFO), then `steal_batch_and_pop` from the
//!    injector, then one `steal` from each sibling, starting at a random
//!    one. A `Retry` anywhere repeats the sweep. After any successful pop,
//!    if a sleeper exists and the deque still holds tasks, wake one.
//! 5. **Idle.** `spin_rounds` rounds of searching with a spin hint, then
//!    `yield_rounds` rounds with `yield_now`, then sleep: set the worker's
//!    bit (`fetch_or`, SeqCst), `fence(SeqCst)`, search once more, then run
//!    the termination check (step 6). Work found: clear the bit and run it.
//!    Otherwise park until a waker has cleared the bit or `done` is set;
//!    spurious unparks loop.
//! 6. **Termination check** (`quiescent`): `fence(SeqCst)`, then sum every
//!    worker's `completed` (Acquire), then read the gate (Acquire), then sum
//!    every `spawned` (Relaxed). Quiescent iff the gate is closed and
//!    `completed == external + spawned`. Sound: a completion seen with
//!    Acquire carries its own spawn's counter store with it, so every task
//!    counted complete was counted spawned; equal counts then mean the same
//!    set of tasks, every task spawned by a completed task is in it, and the
//!    roots are the (final, gate closed) outside spawns. Complete: every
//!    worker stores its last counts before its last idle fence, and `join`
//!    fences after closing the gate; whichever of those fences is last in
//!    the SeqCst order sees every count and the closed gate.
//! 7. **Completion:** run the task under `catch_unwind`, then store
//!    `completed + 1` (Release: pairs with the Acquire sum in step 6).
//! 8. **Join:** close the gate (`fetch_and`, SeqCst), `fence(SeqCst)`, run
//!    the check; if quiescent, finish. Then join every thread (a worker
//!    that sees quiescence in step 5 finishes), merge metrics and raise the
//!    first recorded panic. **Finish:** `done = true` (Release), unpark
//!    every worker.
//! 9. **Shutdown:** close the gate and finish at once; queued tasks are
//!    dropped, not run. **Panics:** the first payload is kept, and the
//!    executor finishes (as the seed-000 design does).

use std::any::Any;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{self, JoinHandle, Thread};

use crossbeam_deque::{Injector, Steal, Stealer, Worker};
use magpie_core::rng::XorShift64;
use magpie_core::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use magpie_core::CachePadded;

/// Lowest bit of the gate word: set while outside spawns are accepted.
pub const ACCEPTING_BIT: usize = 1;
/// One outside spawn in the gate word (the count lives in bits 1 and up).
pub const EXTERNAL_UNIT: usize = 2;
/// Workers the `sleepers` bitmap has room for.
pub const MAX_WORKERS: usize = 64;

/// The strong peer's knobs.
#[derive(Clone, Debug)]
pub struct CbStrongConfig {
    /// Worker threads (default 1).
    pub workers: usize,
    /// Seed for victim selection.
    pub seed: u64,
    /// Idle search rounds with a spin hint before yielding (default 200,
    /// magpie's `spin_iters`).
    pub spin_rounds: u32,
    /// Idle search rounds with `yield_now` before sleeping (default 16).
    pub yield_rounds: u32,
}

impl Default for CbStrongConfig {
    fn default() -> Self {
        Self {
            workers: 1,
            seed: 0x853c_49e6_748f_ea9b,
            spin_rounds: 200,
            yield_rounds: 16,
        }
    }
}

impl CbStrongConfig {
    /// The defaults with `workers` workers.
    pub fn with_workers(workers: usize) -> Self {
        Self {
            workers,
            ..Self::default()
        }
    }
}

/// Per-worker counters, kept in plain fields and merged at `join`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CbStrongWorkerMetrics {
    /// Tasks run (including ones that panicked).
    pub tasks_run: u64,
    /// Tasks popped from the worker's own deque.
    pub from_local: u64,
    /// Tasks taken from the injector.
    pub from_injector: u64,
    /// Tasks stolen from siblings.
    pub from_steal: u64,
    /// `spawn_local` + `spawn_global` calls.
    pub spawns: u64,
    /// Sleepers this worker woke (a set bit claimed).
    pub wakes: u64,
    /// Times the worker announced itself asleep (step 5).
    pub sleeps: u64,
    /// `thread::park` calls.
    pub parks: u64,
}

impl CbStrongWorkerMetrics {
    fn merge(&mut self, o: &CbStrongWorkerMetrics) {
        self.tasks_run += o.tasks_run;
        self.from_local += o.from_local;
        self.from_injector += o.from_injector;
        self.from_steal += o.from_steal;
        self.spawns += o.spawns;
        self.wakes += o.wakes;
        self.sleeps += o.sleeps;
        self.parks += o.parks;
    }
}

/// What `join` returns.
#[derive(Clone, Debug, Default)]
pub struct CbStrongMetrics {
    /// Sum over the workers.
    pub total: CbStrongWorkerMetrics,
    /// One entry per worker, by id.
    pub per_worker: Vec<CbStrongWorkerMetrics>,
}

type PanicPayload = Box<dyn Any + Send + 'static>;

/// A worker's two monotonic counters (step 3 and 7), written only by it.
#[derive(Debug, Default)]
struct Counts {
    spawned: AtomicU64,
    completed: AtomicU64,
}

struct Shared<T> {
    injector: Injector<T>,
    stealers: Vec<Stealer<T>>,
    counts: Vec<Arc<CachePadded<Counts>>>,
    /// `(outside spawns << 1) | ACCEPTING_BIT`.
    gate: CachePadded<AtomicUsize>,
    /// Bit `i` set: worker `i` is asleep or about to be (step 5).
    sleepers: CachePadded<AtomicU64>,
    /// Monotonic stop flag.
    done: AtomicBool,
    threads: Vec<OnceLock<Thread>>,
    panic: Mutex<Option<PanicPayload>>,
}

impl<T> Shared<T> {
    /// Step 2: adds `n` outside spawns if the gate is open.
    fn try_admit(&self, n: usize) -> bool {
        let mut cur = self.gate.load(Ordering::Relaxed);
        loop {
            if cur & ACCEPTING_BIT == 0 {
                return false;
            }
            // Relaxed: the gate check and the count are one RMW on one word,
            // ordered against `close_gate` by its modification order. The
            // count reaches the termination check through the injector push
            // that follows (sequenced after this RMW) and the completion's
            // Release store (step 6).
            match self.gate.compare_exchange_weak(
                cur,
                cur + n * EXTERNAL_UNIT,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Step 8, first half.
    fn close_gate(&self) {
        // SeqCst, and the fence after it in `join`: the fence pairs with each
        // worker's idle fence (step 5), so either the worker's check sees the
        // closed gate or `join`'s check sees the worker's counts.
        self.gate.fetch_and(!ACCEPTING_BIT, Ordering::SeqCst);
    }

    /// Step 6. Call after a `fence(SeqCst)` (the caller's, see step 5/8).
    fn quiescent(&self) -> bool {
        // Cheap exit while outside spawns are still possible.
        if self.gate.load(Ordering::Relaxed) & ACCEPTING_BIT != 0 {
            return false;
        }
        let mut completed = 0u64;
        for c in &self.counts {
            // Acquire: pairs with the Release store of `completed` after a
            // task ran (step 7); it carries that task's spawn count with it.
            completed += c.completed.load(Ordering::Acquire);
        }
        // Acquire: the gate must be read after the completions, so an
        // outside spawn whose task is counted complete is counted here too.
        let gate = self.gate.load(Ordering::Acquire);
        if gate & ACCEPTING_BIT != 0 {
            return false;
        }
        let mut spawned = (gate / EXTERNAL_UNIT) as u64;
        for c in &self.counts {
            // Relaxed: ordered after the Acquire loads above, which is all
            // the argument in step 6 needs.
            spawned += c.spawned.load(Ordering::Relaxed);
        }
        debug_assert!(completed <= spawned, "{completed} > {spawned}");
        completed == spawned
    }

    /// Step 8: stop every worker.
    fn finish(&self) {
        // Release: pairs with the Acquire loads of `done` in the worker loop
        // and the park loop.
        self.done.store(true, Ordering::Release);
        for t in self.threads.iter().filter_map(OnceLock::get) {
            t.unpark();
        }
    }

    /// Claims one sleeper's bit and unparks it; false if nobody sleeps.
    #[cold]
    fn wake_one_slow(&self) -> bool {
        let mut cur = self.sleepers.load(Ordering::Relaxed);
        while cur != 0 {
            let bit = cur & cur.wrapping_neg();
            // AcqRel: Release pairs with the sleeper's Acquire load of its
            // bit in the park loop (it wakes to what was pushed before this);
            // Acquire orders this claim after the sleeper's announcement.
            match self.sleepers.compare_exchange_weak(
                cur,
                cur & !bit,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    if let Some(t) = self.threads[bit.trailing_zeros() as usize].get() {
                        t.unpark();
                    }
                    return true;
                }
                Err(actual) => cur = actual,
            }
        }
        false
    }

    /// Steps 2: after an outside push, with the fence that makes it certain.
    fn wake_after_outside_push(&self, n: usize) {
        // SeqCst fence: pairs with the sleeper's fence in step 5. Either the
        // sleeper's search after its fence sees the push, or this load sees
        // its bit.
        fence(Ordering::SeqCst);
        for _ in 0..n.min(self.threads.len()) {
            if self.sleepers.load(Ordering::Relaxed) == 0 || !self.wake_one_slow() {
                break;
            }
        }
    }

    fn record_panic(&self, payload: PanicPayload) {
        let mut slot = self.panic.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some(payload);
        }
    }
}

fn spawn_one<T>(shared: &Shared<T>, task: T) -> Result<(), T> {
    if !shared.try_admit(1) {
        return Err(task);
    }
    shared.injector.push(task);
    shared.wake_after_outside_push(1);
    Ok(())
}

fn spawn_batch<T>(shared: &Shared<T>, tasks: Vec<T>) -> Result<(), Vec<T>> {
    let n = tasks.len();
    if n == 0 {
        return Ok(());
    }
    if !shared.try_admit(n) {
        return Err(tasks);
    }
    for t in tasks {
        shared.injector.push(t);
    }
    shared.wake_after_outside_push(n);
    Ok(())
}

/// The executor: owns the worker threads.
pub struct CbStrongExecutor<T> {
    shared: Arc<Shared<T>>,
    threads: Vec<JoinHandle<CbStrongWorkerMetrics>>,
}

impl<T> fmt::Debug for CbStrongExecutor<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CbStrongExecutor")
            .field("workers", &self.shared.stealers.len())
            .field(
                "accepting",
                &(self.shared.gate.load(Ordering::Relaxed) & ACCEPTING_BIT != 0),
            )
            .finish()
    }
}

impl<T: Send + 'static> CbStrongExecutor<T> {
    /// Starts `cfg.workers` threads. Worker `i` gets `scratch_init(i)` as its
    /// scratch; every task runs as `runner(task, ctx)`.
    ///
    /// # Panics
    /// If `cfg.workers` is 0 or above [`MAX_WORKERS`], or a thread cannot be
    /// spawned.
    pub fn new<S, I, R>(cfg: CbStrongConfig, scratch_init: I, runner: R) -> Self
    where
        S: Send + 'static,
        I: Fn(usize) -> S,
        R: Fn(T, &mut CbStrongCtx<T, S>) + Send + Sync + 'static,
    {
        assert!(
            (1..=MAX_WORKERS).contains(&cfg.workers),
            "the strong peer runs 1 to {MAX_WORKERS} workers"
        );
        let locals: Vec<Worker<T>> = (0..cfg.workers).map(|_| Worker::new_lifo()).collect();
        let counts: Vec<Arc<CachePadded<Counts>>> = (0..cfg.workers)
            .map(|_| Arc::new(CachePadded::new(Counts::default())))
            .collect();
        let shared = Arc::new(Shared {
            injector: Injector::new(),
            stealers: locals.iter().map(Worker::stealer).collect(),
            counts: counts.clone(),
            gate: CachePadded::new(AtomicUsize::new(ACCEPTING_BIT)),
            sleepers: CachePadded::new(AtomicU64::new(0)),
            done: AtomicBool::new(false),
            threads: (0..cfg.workers).map(|_| OnceLock::new()).collect(),
            panic: Mutex::new(None),
        });
        let runner = Arc::new(runner);
        let threads: Vec<_> = locals
            .into_iter()
            .zip(counts)
            .enumerate()
            .map(|(id, (local, counts))| {
                let ctx = CbStrongCtx {
                    worker_id: id,
                    scratch: scratch_init(id),
                    rng: XorShift64::new(
                        cfg.seed ^ (id as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
                    ),
                    metrics: CbStrongWorkerMetrics::default(),
                    local,
                    counts,
                    spawned: 0,
                    completed: 0,
                    shared: shared.clone(),
                };
                let runner = runner.clone();
                let (spin, yields) = (cfg.spin_rounds, cfg.yield_rounds);
                thread::Builder::new()
                    .name(format!("cb-strong-{id}"))
                    .spawn(move || worker_loop(ctx, &*runner, spin, yields))
                    .expect("failed to spawn a cb-strong worker")
            })
            .collect();
        // No task exists before `new` returns, so no wake can be sent before
        // these are set.
        for (slot, h) in shared.threads.iter().zip(&threads) {
            slot.set(h.thread().clone())
                .expect("each thread handle is set once");
        }
        Self { shared, threads }
    }

    /// A cloneable handle for outside producers.
    pub fn handle(&self) -> CbStrongHandle<T> {
        CbStrongHandle {
            shared: self.shared.clone(),
        }
    }

    /// Step 2; gives the task back once the gate is closed.
    pub fn spawn_external(&self, task: T) -> Result<(), T> {
        spawn_one(&self.shared, task)
    }

    /// Step 2, all or nothing.
    pub fn spawn_external_batch(&self, tasks: Vec<T>) -> Result<(), Vec<T>> {
        spawn_batch(&self.shared, tasks)
    }

    /// Step 9: refuse new spawns and stop the workers; queued tasks are
    /// dropped. `join` still has to be called to collect the threads.
    pub fn shutdown(&self) {
        self.shared.close_gate();
        self.shared.finish();
    }

    /// Step 8: waits until every accepted task has run, stops the workers and
    /// returns their metrics.
    ///
    /// # Panics
    /// Re-raises the first panic of a task, after every thread is joined.
    pub fn join(mut self) -> CbStrongMetrics {
        self.shared.close_gate();
        // SeqCst: pairs with the workers' idle fences (step 6, completeness).
        fence(Ordering::SeqCst);
        if self.shared.quiescent() {
            self.shared.finish();
        }
        let per_worker: Vec<CbStrongWorkerMetrics> = self
            .threads
            .drain(..)
            .map(|h| h.join().expect("worker loop panicked outside a task"))
            .collect();
        let mut total = CbStrongWorkerMetrics::default();
        per_worker.iter().for_each(|m| total.merge(m));
        let payload = self
            .shared
            .panic
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(p) = payload {
            panic::resume_unwind(p);
        }
        CbStrongMetrics { total, per_worker }
    }
}

impl<T> Drop for CbStrongExecutor<T> {
    fn drop(&mut self) {
        if self.threads.is_empty() {
            return;
        }
        // Dropped without `join`: stop and reap the workers, swallow panics.
        self.shared.close_gate();
        self.shared.finish();
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
    }
}

/// Cloneable, `Send + Sync` handle for outside producers.
pub struct CbStrongHandle<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for CbStrongHandle<T> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<T> fmt::Debug for CbStrongHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CbStrongHandle")
            .field("accepting", &self.is_accepting())
            .finish()
    }
}

impl<T> CbStrongHandle<T> {
    /// Step 2.
    pub fn spawn(&self, task: T) -> Result<(), T> {
        spawn_one(&self.shared, task)
    }

    /// Step 2, all or nothing.
    pub fn spawn_batch(&self, tasks: Vec<T>) -> Result<(), Vec<T>> {
        spawn_batch(&self.shared, tasks)
    }

    /// Whether outside spawns are still accepted.
    pub fn is_accepting(&self) -> bool {
        self.shared.gate.load(Ordering::Relaxed) & ACCEPTING_BIT != 0
    }
}

/// What a task sees: its worker's id, scratch, rng and metrics, and the
/// spawn methods.
pub struct CbStrongCtx<T, S> {
    /// This worker's index, `0..workers`.
    pub worker_id: usize,
    /// The worker's scratch from `scratch_init`.
    pub scratch: S,
    /// The worker's generator (also used for victim selection).
    pub rng: XorShift64,
    /// The worker's counters.
    pub metrics: CbStrongWorkerMetrics,
    local: Worker<T>,
    counts: Arc<CachePadded<Counts>>,
    /// Plain copies of `counts`, so a store needs no load.
    spawned: u64,
    completed: u64,
    shared: Arc<Shared<T>>,
}

impl<T, S> fmt::Debug for CbStrongCtx<T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CbStrongCtx")
            .field("worker_id", &self.worker_id)
            .field("metrics", &self.metrics)
            .finish_non_exhaustive()
    }
}

impl<T, S> CbStrongCtx<T, S> {
    /// Step 3 onto this worker's own deque.
    #[inline]
    pub fn spawn_local(&mut self, task: T) {
        self.count_spawn();
        self.local.push(task);
        self.wake_if_sleeper();
    }

    /// Step 3 onto the injector.
    pub fn spawn_global(&mut self, task: T) {
        self.count_spawn();
        self.shared.injector.push(task);
        self.wake_if_sleeper();
    }

    /// A handle for spawning from elsewhere (an outside spawn: subject to the
    /// gate).
    pub fn handle(&self) -> CbStrongHandle<T> {
        CbStrongHandle {
            shared: self.shared.clone(),
        }
    }

    #[inline]
    fn count_spawn(&mut self) {
        self.spawned += 1;
        self.metrics.spawns += 1;
        // Relaxed: only this worker writes it; the push that follows
        // publishes it to whoever runs the task (step 6).
        self.counts.spawned.store(self.spawned, Ordering::Relaxed);
    }

    /// Step 3's plain check: wake one sleeper if any bit is set.
    #[inline]
    fn wake_if_sleeper(&mut self) {
        // Relaxed: a hint (step 3 says why a missed bit costs no task).
        if self.shared.sleepers.load(Ordering::Relaxed) != 0 && self.shared.wake_one_slow() {
            self.metrics.wakes += 1;
        }
    }

    /// Step 4.
    #[inline]
    fn find_task(&mut self) -> Option<T> {
        let task = match self.local.pop() {
            Some(t) => {
                self.metrics.from_local += 1;
                t
            }
            None => self.steal_task()?,
        };
        // Surplus left behind and someone asleep: hand it on.
        // Relaxed: a hint, as in step 3.
        if self.shared.sleepers.load(Ordering::Relaxed) != 0 && !self.local.is_empty() {
            self.wake_if_sleeper();
        }
        Some(task)
    }

    /// Step 4 past the own deque: the injector, then every sibling once from
    /// a random start; repeated while any of them said `Retry`.
    #[cold]
    fn steal_task(&mut self) -> Option<T> {
        let n = self.shared.stealers.len();
        loop {
            let mut retry = false;
            match self.shared.injector.steal_batch_and_pop(&self.local) {
                Steal::Success(t) => {
                    self.metrics.from_injector += 1;
                    return Some(t);
                }
                Steal::Retry => retry = true,
                Steal::Empty => {}
            }
            if n > 1 {
                let start = self.rng.next_usize(n);
                for i in 0..n {
                    let victim = (start + i) % n;
                    if victim == self.worker_id {
                        continue;
                    }
                    match self.shared.stealers[victim].steal() {
                        Steal::Success(t) => {
                            self.metrics.from_steal += 1;
                            return Some(t);
                        }
                        Steal::Retry => retry = true,
                        Steal::Empty => {}
                    }
                }
            }
            if !retry {
                return None;
            }
        }
    }

    /// Step 5's last part: announce, search once more, check for the end,
    /// park. Returns a task found after announcing.
    #[cold]
    fn sleep(&mut self) -> Option<T> {
        let bit = 1u64 << self.worker_id;
        self.metrics.sleeps += 1;
        // SeqCst: this announcement and the fence below pair with the fence
        // an outside spawn takes after its push (step 2).
        self.shared.sleepers.fetch_or(bit, Ordering::SeqCst);
        // SeqCst: pairs with step 2's fence (no lost outside wake) and with
        // the other workers' and `join`'s fences (step 6, completeness).
        fence(Ordering::SeqCst);
        if let Some(t) = self.steal_task() {
            // Withdraw. If a waker cleared the bit first, its unpark leaves a
            // token that makes one later `park` return at once: harmless.
            self.shared.sleepers.fetch_and(!bit, Ordering::Relaxed);
            return Some(t);
        }
        if self.shared.quiescent() {
            self.shared.finish();
            return None;
        }
        loop {
            // Acquire: pairs with the Release in `finish`.
            if self.shared.done.load(Ordering::Acquire) {
                return None;
            }
            // Acquire: pairs with the waker's AcqRel claim of the bit.
            if self.shared.sleepers.load(Ordering::Acquire) & bit == 0 {
                return None;
            }
            self.metrics.parks += 1;
            thread::park();
        }
    }

    /// Step 7: runs one task; false if it panicked (the executor finishes).
    #[inline]
    fn run<R: Fn(T, &mut Self)>(&mut self, task: T, runner: &R) -> bool {
        let result = panic::catch_unwind(AssertUnwindSafe(|| runner(task, &mut *self)));
        self.metrics.tasks_run += 1;
        self.completed += 1;
        // Release: pairs with the Acquire sum in `quiescent` (step 6); it
        // publishes the spawns this task made before its completion.
        self.counts
            .completed
            .store(self.completed, Ordering::Release);
        match result {
            Ok(()) => true,
            Err(payload) => {
                self.shared.record_panic(payload);
                self.shared.finish();
                false
            }
        }
    }
}

fn worker_loop<T, S, R>(
    mut ctx: CbStrongCtx<T, S>,
    runner: &R,
    spin_rounds: u32,
    yield_rounds: u32,
) -> CbStrongWorkerMetrics
where
    R: Fn(T, &mut CbStrongCtx<T, S>),
{
    let mut idle_rounds = 0u32;
    loop {
        // Acquire: pairs with the Release store in `finish`.
        if ctx.shared.done.load(Ordering::Acquire) {
            break;
        }
        let task = match ctx.find_task() {
            Some(t) => Some(t),
            None => {
                idle_rounds += 1;
                if idle_rounds <= spin_rounds {
                    std::hint::spin_loop();
                    continue;
                }
                if idle_rounds <= spin_rounds + yield_rounds {
                    thread::yield_now();
                    continue;
                }
                ctx.sleep()
            }
        };
        idle_rounds = 0;
        if let Some(t) = task {
            if !ctx.run(t, runner) {
                break;
            }
        }
    }
    // `ctx` (and its scratch) drops here, before the thread ends and so
    // before `join` returns.
    ctx.metrics
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tally::{Tally, TallyScratch, TallySink};
    use magpie_core::sync::atomic::AtomicU8;

    /// A hit counter per task id; `assert_each_once` proves exactly-once.
    struct Hits(Vec<AtomicU8>);

    impl Hits {
        fn new(n: usize) -> Arc<Self> {
            Arc::new(Self((0..n).map(|_| AtomicU8::new(0)).collect()))
        }
        fn hit(&self, i: usize) {
            self.0[i].fetch_add(1, Ordering::Relaxed);
        }
        fn assert_each_once(&self) {
            for (i, h) in self.0.iter().enumerate() {
                assert_eq!(h.load(Ordering::Relaxed), 1, "task {i}");
            }
        }
    }

    const DEPTH: u32 = if cfg!(miri) { 6 } else { 15 };

    /// A binary spawn tree over heap ids; every `global_every`-th child goes
    /// through `spawn_global`.
    fn tree_executor(workers: usize, hits: Arc<Hits>, global_every: u64) -> CbStrongExecutor<u64> {
        CbStrongExecutor::new(
            CbStrongConfig::with_workers(workers),
            |_| (),
            move |id: u64, ctx: &mut CbStrongCtx<u64, ()>| {
                hits.hit(id as usize);
                if 63 - id.leading_zeros() < DEPTH {
                    for child in [2 * id, 2 * id + 1] {
                        if global_every != 0 && child % global_every == 0 {
                            ctx.spawn_global(child);
                        } else {
                            ctx.spawn_local(child);
                        }
                    }
                }
            },
        )
    }

    #[test]
    fn every_task_of_a_spawn_tree_runs_exactly_once_on_1_2_and_4_workers() {
        for workers in [1, 2, 4] {
            let n = 1usize << (DEPTH + 1);
            let hits = Hits::new(n);
            hits.hit(0); // heap ids start at 1
            let ex = tree_executor(workers, hits.clone(), 0);
            ex.spawn_external(1).unwrap();
            let m = ex.join();
            hits.assert_each_once();
            assert_eq!(m.total.tasks_run, n as u64 - 1, "{workers} workers");
            assert_eq!(m.total.spawns, n as u64 - 2);
            assert_eq!(
                m.total.from_local + m.total.from_injector + m.total.from_steal,
                m.total.tasks_run
            );
        }
    }

    #[test]
    fn global_spawns_from_workers_run_exactly_once() {
        for workers in [1, 2, 4] {
            let n = 1usize << (DEPTH + 1);
            let hits = Hits::new(n);
            hits.hit(0);
            let ex = tree_executor(workers, hits.clone(), 3);
            ex.spawn_external(1).unwrap();
            ex.join();
            hits.assert_each_once();
        }
    }

    #[test]
    fn join_terminates_with_1_2_and_4_workers_whatever_the_timing() {
        // Trees of every small size, joined at once (join's own check) and
        // after the workers fell asleep (a worker's check or join's), and an
        // executor that never got a task.
        for workers in [1, 2, 4] {
            let ex = CbStrongExecutor::new(
                CbStrongConfig::with_workers(workers),
                |_| (),
                |_: u8, _: &mut CbStrongCtx<u8, ()>| {},
            );
            assert_eq!(ex.join().total.tasks_run, 0);
            for depth in 0..if cfg!(miri) { 3 } else { 8 } {
                for wait in [false, true] {
                    let sink = TallySink::new();
                    let s2 = sink.clone();
                    let ex = CbStrongExecutor::new(
                        CbStrongConfig::with_workers(workers),
                        move |_| TallyScratch::new(s2.clone()),
                        move |id: u64, ctx: &mut CbStrongCtx<u64, TallyScratch>| {
                            ctx.scratch.record(id);
                            if 63 - id.leading_zeros() < depth {
                                ctx.spawn_local(2 * id);
                                ctx.spawn_local(2 * id + 1);
                            }
                        },
                    );
                    ex.spawn_external(1).unwrap();
                    if wait {
                        thread::sleep(std::time::Duration::from_millis(2));
                    }
                    ex.join();
                    let n = (1u64 << (depth + 1)) - 1;
                    let mut want = Tally::of_range(n + 1);
                    want.count -= 1;
                    assert_eq!(sink.total(), want, "{workers} workers, depth {depth}");
                }
            }
        }
    }

    #[test]
    fn outside_spawns_while_running_each_run_once() {
        const N: usize = if cfg!(miri) { 200 } else { 50_000 };
        const PRODUCERS: usize = 3;
        const M: usize = N * PRODUCERS;
        for workers in [1, 2, 4] {
            // Ids below M come from outside; each even one spawns `M + id`
            // from inside, so outside and inside spawns interleave. The odd
            // follow-up ids never run: pre-hit them once.
            let hits = Hits::new(2 * M);
            (1..M).step_by(2).for_each(|i| hits.hit(M + i));
            let h2 = hits.clone();
            let ex = CbStrongExecutor::new(
                CbStrongConfig::with_workers(workers),
                |_| (),
                move |i: usize, ctx: &mut CbStrongCtx<usize, ()>| {
                    h2.hit(i);
                    if i < M && i % 2 == 0 {
                        ctx.spawn_local(M + i);
                    }
                },
            );
            let producers: Vec<_> = (0..PRODUCERS)
                .map(|p| {
                    let h = ex.handle();
                    thread::spawn(move || {
                        let base = p * N;
                        let mut i = 0;
                        while i < N {
                            if i % 3 == 0 && i + 8 <= N {
                                h.spawn_batch((base + i..base + i + 8).collect()).unwrap();
                                i += 8;
                            } else {
                                h.spawn(base + i).unwrap();
                                i += 1;
                            }
                            if i % 1024 == 0 {
                                thread::yield_now(); // let workers fall asleep
                            }
                        }
                    })
                })
                .collect();
            for p in producers {
                p.join().unwrap();
            }
            ex.join();
            hits.assert_each_once();
        }
    }

    #[test]
    fn spawns_racing_join_either_run_once_or_come_back() {
        const N: usize = if cfg!(miri) { 200 } else { 50_000 };
        let hits = Hits::new(N);
        let h2 = hits.clone();
        let ex = CbStrongExecutor::new(
            CbStrongConfig::with_workers(2),
            |_| (),
            move |i: usize, _: &mut CbStrongCtx<usize, ()>| h2.hit(i),
        );
        let handle = ex.handle();
        let producer = thread::spawn(move || {
            let mut refused = Vec::new();
            for i in 0..N {
                if let Err(i) = handle.spawn(i) {
                    refused.push(i);
                }
            }
            refused
        });
        while hits.0[0].load(Ordering::Relaxed) == 0 {
            thread::yield_now();
        }
        ex.join();
        let refused = producer.join().unwrap();
        for (i, h) in hits.0.iter().enumerate() {
            let ran = h.load(Ordering::Relaxed);
            let came_back = refused.binary_search(&i).is_ok();
            assert_eq!(u32::from(ran) + u32::from(came_back), 1, "task {i}");
        }
    }

    #[test]
    fn checksum_over_a_uts_tree_matches_the_sequential_run() {
        use crate::typed::{run_sequential, Uts, Workload};
        let uts = Uts {
            root_children: if cfg!(miri) { 5 } else { 500 },
            ..Uts::standard(0)
        };
        let expected = run_sequential(&uts, &[uts.root()]);
        for workers in [1, 2, 4] {
            let sink = TallySink::new();
            let s2 = sink.clone();
            let ex = CbStrongExecutor::new(
                CbStrongConfig::with_workers(workers),
                move |_| TallyScratch::new(s2.clone()),
                move |t, ctx: &mut CbStrongCtx<_, TallyScratch>| uts.run(t, &mut StrongTally(ctx)),
            );
            ex.spawn_external(uts.root()).unwrap();
            ex.join();
            assert_eq!(sink.total(), expected, "{workers} workers");
        }
    }

    /// `SpawnCtx` over the context, local to this test (the bench's own
    /// impl lives in `typed`).
    struct StrongTally<'a, T>(&'a mut CbStrongCtx<T, TallyScratch>);

    impl<T> crate::typed::SpawnCtx<T> for StrongTally<'_, T> {
        fn spawn_local(&mut self, task: T) {
            self.0.spawn_local(task);
        }
        fn spawn_global(&mut self, task: T) {
            self.0.spawn_global(task);
        }
        fn record(&mut self, value: u64) {
            self.0.scratch.record(value);
        }
    }

    #[test]
    fn an_idle_pool_sleeps_and_an_outside_spawn_wakes_it() {
        let hits = Hits::new(2);
        let h2 = hits.clone();
        let ex = CbStrongExecutor::new(
            CbStrongConfig::with_workers(2),
            |_| (),
            move |i: usize, _: &mut CbStrongCtx<usize, ()>| h2.hit(i),
        );
        // Both workers announce themselves asleep (hang detector: generous).
        let t0 = std::time::Instant::now();
        while ex.shared.sleepers.load(Ordering::Relaxed) != 0b11 {
            assert!(t0.elapsed().as_secs() < 60, "workers never slept");
            thread::sleep(std::time::Duration::from_millis(1));
        }
        ex.spawn_external(0).unwrap();
        while hits.0[0].load(Ordering::Relaxed) == 0 {
            assert!(t0.elapsed().as_secs() < 60, "the outside spawn was lost");
            thread::yield_now();
        }
        ex.spawn_external(1).unwrap();
        let m = ex.join();
        hits.assert_each_once();
        assert!(m.total.parks > 0, "{m:?}");
    }

    #[test]
    fn spawns_after_shutdown_or_join_are_returned() {
        let ex = CbStrongExecutor::new(
            CbStrongConfig::with_workers(2),
            |_| (),
            |_: u32, _: &mut CbStrongCtx<u32, ()>| {},
        );
        let handle = ex.handle();
        assert!(handle.is_accepting());
        ex.shutdown();
        assert!(!handle.is_accepting());
        assert_eq!(ex.spawn_external(1), Err(1));
        assert_eq!(handle.spawn_batch(vec![2, 3]), Err(vec![2, 3]));
        ex.join();
        let ex = CbStrongExecutor::new(
            CbStrongConfig::with_workers(1),
            |_| (),
            |_: u32, _: &mut CbStrongCtx<u32, ()>| {},
        );
        let handle = ex.handle();
        ex.join();
        assert_eq!(handle.spawn(7), Err(7));
    }

    #[test]
    fn first_panic_is_raised_by_join_after_the_workers_stop() {
        let ex = CbStrongExecutor::new(
            CbStrongConfig::with_workers(2),
            |_| (),
            |i: u32, _: &mut CbStrongCtx<u32, ()>| {
                if i == 3 {
                    panic!("task three failed");
                }
            },
        );
        ex.spawn_external_batch((0..8).collect()).unwrap();
        let err = panic::catch_unwind(AssertUnwindSafe(|| ex.join())).unwrap_err();
        assert_eq!(err.downcast_ref::<&str>(), Some(&"task three failed"));
    }

    #[test]
    fn dropping_without_join_stops_the_workers() {
        let ex = CbStrongExecutor::new(
            CbStrongConfig::with_workers(2),
            |_| (),
            |_: u8, _: &mut CbStrongCtx<u8, ()>| {},
        );
        ex.spawn_external(1).unwrap();
        drop(ex); // must not hang
    }
}
