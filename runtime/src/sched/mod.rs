//! The one worker loop.
//!
//! Every kind of task magpie runs goes through the functions in this module:
//! [`step`] finds one task and runs it, [`prepare_park`] and [`after_park`]
//! bracket a worker's sleep. They never block and never read a clock on their
//! own; the caller decides how to idle (the threaded executor spins, yields
//! and parks; the simulator flips a virtual worker's state), which is what lets
//! the deterministic simulator run exactly this code.
//!
//! The protocol, with the reasons for each step, is in `README.md` beside this
//! file.

use std::any::Any;

use magpie_core::gate::Gate;
use magpie_core::idle::Idle;
use magpie_core::park::{ParkResult, Parker, Unparker};
use magpie_core::queue::{
    self, Inject, LifoSlot, Local, Steal, LOCAL_QUEUE_CAPACITY, MAX_GLOBAL_BATCH,
};
use magpie_core::rng::XorShift64;
use magpie_core::sync::atomic::{AtomicBool, Ordering};
use magpie_core::sync::{Arc, Mutex};
use magpie_core::CachePadded;

use crate::metrics::WorkerMetrics;

#[cfg(test)]
mod fast_tick_tests;
pub(crate) mod tiered;

/// At most this many tasks in a row come from the LIFO slot before the ring
/// gets a turn (seed 003): a task that keeps re-spawning itself into the slot
/// cannot starve the queue.
pub(crate) const MAX_LIFO_POLLS_PER_TICK: u32 = 3;
/// Tasks per maintenance pass (seed 003's cooperative budget per tick): every
/// this many tasks the worker re-measures task duration and adapts its global
/// queue interval.
pub(crate) const BUDGET_PER_TICK: u32 = 128;
/// A worker wakes a sibling after this many local spawns (seed 000).
pub(crate) const WAKE_ON_HOARD_THRESHOLD: u32 = 32;
/// Bounds of the adaptive global-queue interval, in ticks (seed 003).
pub(crate) const MIN_GLOBAL_INTERVAL: u32 = 8;
/// See [`MIN_GLOBAL_INTERVAL`].
pub(crate) const MAX_GLOBAL_INTERVAL: u32 = 255;
/// The interval a worker starts with, before it has measured anything.
pub(crate) const INITIAL_GLOBAL_INTERVAL: u32 = 61;
/// The interval aims to check the global queue this often. Seed 003 says
/// 1 ms; 200 µs (tokio's choice too) measured better: with 10 µs tasks in
/// the local queue, `spawn_many_remote_busy1` went from 3.0x to about 1.9x
/// tokio's time, and no other workload moved (docs/benchmarks.md).
pub(crate) const TARGET_GLOBAL_LATENCY_NS: f64 = 200_000.0;
/// Weight of a new sample in the task-duration average (seed 003).
pub(crate) const EWMA_ALPHA: f64 = 0.1;

/// Where a task came from; the simulator's trace records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// The worker's own LIFO slot.
    Lifo,
    /// The worker's own ring.
    Local,
    /// The global inject queue.
    Global,
    /// Another worker's ring or LIFO slot.
    Steal {
        /// The worker stolen from.
        victim: usize,
    },
}

/// Events the scheduler reports to its trace hooks (the simulator records them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SchedEvent {
    /// A task is about to run.
    Run {
        /// Where it came from.
        source: Source,
    },
    /// The worker is going to sleep.
    Park,
    /// The worker aborted its park: work appeared during the final check.
    ParkAborted,
    /// The worker woke.
    Wake {
        /// `true` if a notification woke it, `false` for a timeout.
        notified: bool,
    },
    /// The worker woke another worker.
    Notify {
        /// The woken worker.
        target: usize,
    },
    /// The local ring overflowed into the global queue.
    Overflow {
        /// Tasks moved.
        tasks: usize,
    },
    /// This worker's token release ended the executor.
    Terminal,
    /// The worker left its loop.
    Exit,
}

/// Receives scheduler events. Production uses [`NoopTrace`], which compiles to
/// nothing; the simulator records them.
pub trait TraceHooks {
    /// Called for every event, on the worker that caused it.
    fn event(&mut self, worker: usize, event: SchedEvent);
}

/// Discards every event.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoopTrace;

impl TraceHooks for NoopTrace {
    #[inline(always)]
    fn event(&mut self, _worker: usize, _event: SchedEvent) {}
}

/// Whether other workers may take the task in a worker's LIFO slot.
///
/// magpie measured both (docs/benchmarks.md, "LIFO slot"): the owner-only
/// slot is a plain `Option<T>` with no atomic operation at all, the
/// stealable one costs a compare-and-swap on every push and every take. The
/// executors use [`LifoMode::Owner`]; [`LifoMode::Stealable`] stays
/// selectable so the benchmark can compare the two in one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LifoMode {
    /// The slot lives in the worker's own state; only it pushes and takes.
    Owner,
    /// The slot is magpie-core's `LifoSlot`: stealers take from it when the
    /// victim's ring is empty.
    Stealable,
}

/// Where a worker keeps the tasks it spawns for itself.
///
/// magpie measured both on the typed workloads (docs/benchmarks.md, "Split
/// local queue"). The typed executor uses [`LocalMode::Split`]; the async
/// runtime uses [`LocalMode::Ring`], whose FIFO order is what makes a woken
/// or yielding future fair to the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalMode {
    /// Every task the LIFO slot evicts goes to the ring, which the owner pops
    /// FIFO and thieves steal from (tokio's design).
    Ring,
    /// The local queue has a private part and a public part. Evicted tasks go
    /// to a private stack the owner pops LIFO with no atomic operation; the
    /// ring is the public part, filled on request: a thief that finds a
    /// victim's ring empty raises the victim's `wants_work` flag, and the
    /// victim, at its next tick, moves the oldest half of its stack into its
    /// ring. A spawn tree is then explored depth first (the stack stays as
    /// deep as the tree, the ring never overflows), and thieves get the
    /// oldest, largest subtrees (README.md, "The split local queue").
    Split,
}

/// Queues a face keeps beside the loop's own, which searching workers
/// steal from too: fork-join's per-worker deques (`crate::join`, whose
/// owner end the face pops itself).
pub(crate) trait SideQueues<T>: Send + Sync {
    /// A task from `victim`'s queue, if it has one.
    fn steal(&self, victim: usize) -> Option<T>;
    /// Whether any worker's queue looks non-empty: a hint for the last
    /// searcher's re-check before it sleeps ("Parking", step 3).
    fn has_work(&self) -> bool;
}

/// State every worker shares, one per executor.
pub(crate) struct Shared<T> {
    /// Padded: outside spawns write its lock and length on every push, and
    /// the fields below are read by every worker on every tick
    /// (`spawn_many_remote_idle` 0.51 -> 0.46x tokio, docs/benchmarks.md,
    /// "Design decisions").
    pub(crate) inject: CachePadded<Inject<T>>,
    pub(crate) remotes: Box<[CachePadded<Remote<T>>]>,
    pub(crate) idle: Idle,
    /// Accepting bit + in-flight count. The count covers tasks in `inject`
    /// plus one token per awake worker; see README.md, "Termination".
    pub(crate) gate: Gate,
    done: AtomicBool,
    pub(crate) workers: usize,
    pub(crate) steal_tries: u32,
    pub(crate) lifo_mode: LifoMode,
    pub(crate) local_mode: LocalMode,
    /// The face's own per-worker queues, if it has any ([`SideQueues`]).
    pub(crate) side: Option<Box<dyn SideQueues<T>>>,
    panic: Mutex<Option<Box<dyn Any + Send + 'static>>>,
}

/// The parts of a worker that other workers touch.
pub(crate) struct Remote<T> {
    pub(crate) steal: Steal<T>,
    pub(crate) lifo: LifoSlot<T>,
    pub(crate) unparker: Unparker,
    /// [`LocalMode::Split`]: raised by a thief that found this worker's ring
    /// empty; the owner answers at its next tick by moving half of its
    /// private stack into the ring. A hint: the tasks themselves travel
    /// through the ring's Release/Acquire, and a request lost or answered
    /// late only delays a thief (the owner runs every task it keeps).
    /// Shared with the owner's [`Core`] through its own allocation, so the
    /// owner's per-tick check is one load through a pointer it holds.
    pub(crate) wants_work: Arc<CachePadded<AtomicBool>>,
}

impl<T: Send + 'static> Shared<T> {
    /// Builds the shared state and, for each worker, the parts it owns.
    pub(crate) fn new(
        workers: usize,
        steal_tries: u32,
        lifo_mode: LifoMode,
        local_mode: LocalMode,
    ) -> (Self, Vec<(Local<T>, Parker)>) {
        assert!(workers >= 1, "an executor needs at least one worker");
        let mut owned = Vec::with_capacity(workers);
        let mut remotes = Vec::with_capacity(workers);
        for _ in 0..workers {
            let (local, steal) = queue::local();
            let parker = Parker::new();
            remotes.push(CachePadded::new(Remote {
                steal,
                lifo: LifoSlot::new(),
                unparker: parker.unparker(),
                wants_work: Arc::new(CachePadded::new(AtomicBool::new(false))),
            }));
            owned.push((local, parker));
        }
        let shared = Self {
            inject: CachePadded::new(Inject::new()),
            remotes: remotes.into_boxed_slice(),
            idle: Idle::new(workers),
            gate: Gate::new(),
            done: AtomicBool::new(false),
            workers,
            steal_tries: steal_tries.max(1),
            lifo_mode,
            local_mode,
            side: None,
            panic: Mutex::new(None),
        };
        (shared, owned)
    }

    /// Whether the executor has finished (terminal gate) or been shut down.
    #[inline]
    pub(crate) fn is_done(&self) -> bool {
        // Acquire: pairs with the Release store in `initiate_done`, so a worker
        // that sees `done` also sees the closed inject queue.
        self.done.load(Ordering::Acquire)
    }

    /// Stops every worker: sets `done`, closes the inject queue and wakes all.
    pub(crate) fn initiate_done(&self) {
        // Release: pairs with the Acquire load in `is_done`.
        self.done.store(true, Ordering::Release);
        self.inject.close();
        let _ = self.idle.unpark_all();
        // Unpark everyone, parked or not: a worker between its last check and
        // its futex wait finds the notification and returns at once.
        for remote in self.remotes.iter() {
            remote.unparker.unpark();
        }
    }

    /// Wakes one parked worker if nobody is searching. Returns the woken id.
    #[inline]
    pub(crate) fn notify_parked(&self) -> Option<usize> {
        let id = self.idle.unpark_one()?;
        self.remotes[id].unparker.unpark();
        Some(id)
    }

    /// Whether any task sits where another worker could take it: the inject
    /// queue, a ring or a LIFO slot. Used by the last searcher before it sleeps.
    pub(crate) fn has_visible_work(&self) -> bool {
        !self.inject.is_empty()
            || self
                .remotes
                .iter()
                .any(|r| !r.steal.is_empty() || !r.lifo.is_empty())
            || self.side.as_ref().is_some_and(|s| s.has_work())
    }

    /// Keeps the first panic; later ones are dropped.
    pub(crate) fn record_panic(&self, payload: Box<dyn Any + Send + 'static>) {
        let mut slot = self.panic.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some(payload);
        }
    }

    /// Takes the first recorded panic, if any.
    pub(crate) fn take_panic(&self) -> Option<Box<dyn Any + Send + 'static>> {
        self.panic.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// A monotonic clock in nanoseconds. The threaded executor reads `Instant`;
/// the simulator counts steps.
pub(crate) type ClockFn = fn() -> u64;

/// The scheduling state one worker owns.
pub(crate) struct Core<T> {
    pub(crate) id: usize,
    pub(crate) local: Local<T>,
    pub(crate) parker: Parker,
    /// Counted in `Idle`'s searching number.
    is_searching: bool,
    /// Holds one count of the gate (see README.md, "Termination").
    has_token: bool,
    /// The LIFO slot in [`LifoMode::Owner`].
    lifo: Option<T>,
    /// The private part of the local queue in [`LocalMode::Split`], popped
    /// from the end (newest first); the oldest tasks are at the front.
    stack: Vec<T>,
    /// This worker's `Remote::wants_work`.
    wants_work: Arc<CachePadded<AtomicBool>>,
    /// [`LifoMode::Owner`] with [`LocalMode::Split`]: a local spawn touches
    /// only this struct (see [`Core::try_spawn_private`]).
    private_spawns: bool,
    /// [`LifoMode::Owner`]: the LIFO slot is `lifo` above.
    owner_lifo: bool,
    /// Set while parking in [`LifoMode::Owner`] (the stealable slot keeps its
    /// own flag): a task scheduled on this thread meanwhile goes to the ring.
    transitioning_to_park: bool,
    lifo_polls: u32,
    /// Ticks left until the global queue is looked at first.
    global_countdown: u32,
    global_interval: u32,
    ewma_task_ns: f64,
    budget_used: u32,
    batch_start_ns: u64,
    /// The next task starts a fresh measurement batch (the worker was idle).
    batch_fresh: bool,
    spawns_since_wake: u32,
    /// Private spawns left before the next one takes the general path and
    /// wakes a sibling (wake-on-hoard). Only in the private-spawn mode;
    /// 0 otherwise, which sends every spawn down the general path.
    private_spawns_left: u32,
    /// Ticks the fast path ([`Core::take_private_fast`]) may still serve
    /// from the private stack before the full `next_task` must run: 0
    /// outside the private-spawn mode, and granted by the full path only
    /// up to the next tick on which it has something to do (README.md,
    /// "The fast tick").
    fast_left: u32,
    /// `fast_left` when it was granted: the fast ticks taken since are
    /// `fast_granted - fast_left`, settled by [`Core::settle_fast`].
    fast_granted: u32,
    clock: ClockFn,
}

impl<T: Send + 'static> Core<T> {
    pub(crate) fn new(
        shared: &Shared<T>,
        id: usize,
        local: Local<T>,
        parker: Parker,
        clock: ClockFn,
    ) -> Self {
        Self {
            wants_work: shared.remotes[id].wants_work.clone(),
            owner_lifo: shared.lifo_mode == LifoMode::Owner,
            private_spawns: shared.lifo_mode == LifoMode::Owner
                && shared.local_mode == LocalMode::Split,
            id,
            local,
            parker,
            is_searching: false,
            has_token: false,
            lifo: None,
            stack: Vec::new(),
            transitioning_to_park: false,
            lifo_polls: 0,
            global_countdown: INITIAL_GLOBAL_INTERVAL,
            global_interval: INITIAL_GLOBAL_INTERVAL,
            ewma_task_ns: TARGET_GLOBAL_LATENCY_NS / f64::from(INITIAL_GLOBAL_INTERVAL),
            budget_used: 0,
            batch_start_ns: 0,
            batch_fresh: true,
            spawns_since_wake: 0,
            private_spawns_left: if shared.lifo_mode == LifoMode::Owner
                && shared.local_mode == LocalMode::Split
            {
                WAKE_ON_HOARD_THRESHOLD - 1
            } else {
                0
            },
            fast_left: 0,
            fast_granted: 0,
            clock,
        }
    }

    /// The common case of [`Parts::spawn_local`], on this struct alone: with
    /// a private LIFO slot and stack and no wake-on-hoard due, the task goes
    /// onto the stack (the slot would give the same order at the cost of a
    /// data-dependent branch per take: README.md, "spawn_local"). `Err`
    /// hands the task back for the general path.
    ///
    /// No check of `transitioning_to_park`: with the owner's slot, only a
    /// task this worker runs spawns into it, and no task runs between
    /// `prepare_park` and `end_park`.
    #[inline(always)]
    pub(crate) fn try_spawn_private(&mut self, task: T) -> Result<(), T> {
        // 0 outside the private-spawn mode, and 0 when the next spawn is
        // the 32nd since the last wake-on-hoard check: one test covers both.
        if self.private_spawns_left == 0 {
            return Err(task);
        }
        debug_assert!(self.private_spawns, "private spawns outside their mode");
        debug_assert!(!self.transitioning_to_park, "a task ran while parking");
        self.private_spawns_left -= 1;
        self.stack.push(task);
        Ok(())
    }

    /// The fast tick (README.md, "The fast tick"): the next task from the
    /// private stack, when the full [`Parts::next_task`] would have found
    /// nothing else to do first. `fast_left` is nonzero only in the
    /// private-spawn mode, after the full path found a task and granted
    /// the ticks up to its next global look, done check or maintenance
    /// pass; a raised `wants_work` sends the tick down the full path,
    /// which answers it. What the fast ticks skip (the tick counters, the
    /// `tasks_local` metric) is added up by [`Core::settle_fast`] at the
    /// start of the next full tick.
    #[inline(always)]
    pub(crate) fn take_private_fast(&mut self) -> Option<T> {
        if self.fast_left == 0 || self.wants_work.load(Ordering::Relaxed) {
            return None;
        }
        let task = self.stack.pop()?;
        debug_assert!(
            self.lifo.is_none() && !self.is_searching && !self.batch_fresh,
            "a fast tick with a LIFO task, while searching or after idling"
        );
        self.fast_left -= 1;
        Some(task)
    }

    /// Books the fast ticks taken since the last grant as the full path
    /// would have: each one a tick (`global_countdown`), a task of the
    /// budget and a task from the local queue.
    #[inline(always)]
    fn settle_fast(&mut self, metrics: &mut WorkerMetrics) {
        let taken = self.fast_granted - self.fast_left;
        self.fast_granted = 0;
        self.fast_left = 0;
        if taken != 0 {
            self.global_countdown -= taken;
            self.budget_used += taken;
            metrics.tasks_local += u64::from(taken);
        }
    }

    /// After the full path found a task and counted it: the next ticks on
    /// which the full path would do nothing but pop the private stack.
    /// It does something on the tick that brings `global_countdown` to 0
    /// (the global look), on a tick that starts with `budget_used` at 0
    /// (the done check) and on the tick whose task is the budget's last
    /// (the maintenance pass); the grant stops short of all three.
    #[inline(always)]
    fn grant_fast(&mut self) {
        if !self.private_spawns || self.budget_used == 0 {
            return;
        }
        let grant = (self.global_countdown - 1).min(BUDGET_PER_TICK - 1 - self.budget_used);
        self.fast_left = grant;
        self.fast_granted = grant;
    }

    /// Empties the owner-mode LIFO slot (a worker leaving its loop).
    pub(crate) fn take_lifo(&mut self) -> Option<T> {
        self.lifo.take()
    }

    /// Folds one batch's mean task duration into the average and derives the
    /// interval: `TARGET / avg`, clamped to `[MIN, MAX]`.
    fn record_batch(&mut self, mean_task_ns: f64) {
        self.ewma_task_ns = EWMA_ALPHA * mean_task_ns + (1.0 - EWMA_ALPHA) * self.ewma_task_ns;
        let ideal = TARGET_GLOBAL_LATENCY_NS / self.ewma_task_ns.max(1.0);
        self.global_interval = (ideal as u32).clamp(MIN_GLOBAL_INTERVAL, MAX_GLOBAL_INTERVAL);
    }

    /// One task is about to run: advance the budget and, once per
    /// [`BUDGET_PER_TICK`] tasks, run the maintenance pass.
    #[inline]
    fn account_task(&mut self) {
        if self.batch_fresh {
            self.batch_fresh = false;
            self.budget_used = 0;
            self.batch_start_ns = (self.clock)();
        }
        self.budget_used += 1;
        if self.budget_used == BUDGET_PER_TICK {
            self.maintenance();
        }
    }

    #[cold]
    fn maintenance(&mut self) {
        let now = (self.clock)();
        let mean = now.saturating_sub(self.batch_start_ns) as f64 / f64::from(BUDGET_PER_TICK);
        self.record_batch(mean);
        self.batch_start_ns = now;
        self.budget_used = 0;
    }
}

/// What a worker hands the scheduler: its core, the shared state, its RNG and
/// its metrics, borrowed at once.
pub(crate) struct Parts<'a, T> {
    pub(crate) core: &'a mut Core<T>,
    pub(crate) shared: &'a Shared<T>,
    pub(crate) rng: &'a mut XorShift64,
    pub(crate) metrics: &'a mut WorkerMetrics,
}

/// A worker as the loop sees it. The typed executor's `WorkerCtx` and the
/// async runtime's worker both implement it.
pub(crate) trait Worker {
    type Task: Send + 'static;
    /// Whether this face can take the fast tick (README.md, "The fast
    /// tick"): only the typed executor spawns privately. With it, the
    /// full search is called out of line; without it (every other face),
    /// it is inlined and the fast tick is not looked at.
    const FAST_TICK: bool = false;
    fn parts(&mut self) -> Parts<'_, Self::Task>;
}

/// What one call of [`step`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Ran a task.
    Ran,
    /// Found nothing anywhere; the caller idles (spin, yield or park).
    Idle,
    /// The executor is done; leave the loop.
    Exit,
}

impl<T: Send + 'static> Parts<'_, T> {
    /// Counts a task by where it was found (at each call site `source` is a
    /// constant, so the match folds away) and pairs the two.
    #[inline(always)]
    fn found(&mut self, task: T, source: Source) -> (T, Source) {
        match source {
            Source::Lifo => self.metrics.tasks_lifo += 1,
            Source::Local => self.metrics.tasks_local += 1,
            Source::Global => self.metrics.tasks_global += 1,
            Source::Steal { .. } => self.metrics.tasks_steal += 1,
        }
        (task, source)
    }

    /// Steps 1-3 of the search: global first every `global_interval` ticks,
    /// then the LIFO slot (capped), the ring, and a global batch fetch.
    #[inline]
    fn next_task(&mut self) -> Option<(T, Source)> {
        // The stack is checked first: a worker with nothing private never
        // reads the flag, and one that has nothing to give leaves it raised
        // (clearing it would only invite the thief to write it again).
        if !self.core.stack.is_empty() && self.core.wants_work.load(Ordering::Relaxed) {
            self.share();
        }
        let core = &mut *self.core;
        core.global_countdown -= 1;
        if core.global_countdown == 0 {
            core.global_countdown = core.global_interval;
            if let Some(task) = self.pop_global() {
                return Some(self.found(task, Source::Global));
            }
        }
        if self.core.lifo_polls < MAX_LIFO_POLLS_PER_TICK {
            if let Some(task) = self.lifo_take() {
                self.core.lifo_polls += 1;
                return Some(self.found(task, Source::Lifo));
            }
        }
        if let Some(task) = self.core.stack.pop() {
            self.core.lifo_polls = 0;
            return Some(self.found(task, Source::Local));
        }
        if let Some(task) = self.core.local.pop() {
            self.core.lifo_polls = 0;
            return Some(self.found(task, Source::Local));
        }
        // The ring is empty: the LIFO cap has nothing left to protect.
        if let Some(task) = self.lifo_take() {
            self.core.lifo_polls = 1;
            return Some(self.found(task, Source::Lifo));
        }
        self.pop_global()
            .map(|task| self.found(task, Source::Global))
    }

    /// Answers a thief's request ([`LocalMode::Split`]): the oldest half of
    /// the private stack (rounded down) moves into the ring, as many as fit.
    /// Then a parked worker is woken if nobody is searching, as for any new
    /// visible work.
    #[cold]
    fn share(&mut self) {
        let shared = self.shared;
        let core = &mut *self.core;
        let n = (core.stack.len() / 2).min(core.local.remaining_slots());
        if n == 0 {
            // One task (which we are about to run) or a full ring (the thief
            // can steal from it as it is): nothing to give yet; the request
            // stays raised.
            return;
        }
        // Relaxed: a hint (see `Remote::wants_work`). Cleared before the
        // tasks move, so a request raised meanwhile is answered later.
        core.wants_work.store(false, Ordering::Relaxed);
        core.local.push_back(core.stack.drain(..n));
        self.metrics.shares += 1;
        self.metrics.tasks_shared += n as u64;
        // A hint check first: the shared tasks are still ours and we are
        // awake, so a stale "nobody to wake" costs parallelism, never a task.
        if shared.idle.would_unpark() && shared.notify_parked().is_some() {
            self.metrics.unparks += 1;
        }
    }

    /// A task the LIFO slot pushed out: to the private stack in
    /// [`LocalMode::Split`], else to the ring.
    #[inline(always)]
    fn evict(&mut self, task: T) {
        match self.shared.local_mode {
            LocalMode::Split => self.core.stack.push(task),
            LocalMode::Ring => self.push_local(task),
        }
    }

    #[inline(always)]
    fn lifo_take(&mut self) -> Option<T> {
        // `owner_lifo` is `shared.lifo_mode == Owner`, kept in the core to
        // save a load per tick.
        if self.core.owner_lifo {
            self.core.lifo.take()
        } else {
            self.shared.remotes[self.core.id].lifo.take()
        }
    }

    /// A fair-share batch from the global queue: one task to run, the rest
    /// into the ring (in both local modes: measured, a batch on the private
    /// stack made outside spawns slower, docs/benchmarks.md).
    #[inline(always)]
    fn pop_global(&mut self) -> Option<T> {
        // The empty check inline: an async worker whose tasks yield looks at
        // the global queue on every tick (`push_yielded`), and a call per
        // look was 19 instructions of a 437-instruction `yield_many` poll.
        if self.shared.inject.is_empty() {
            return None;
        }
        self.take_global()
    }

    /// [`Parts::pop_global`] once the queue looked non-empty. The batch's
    /// counts move from the gate to our token.
    #[inline(never)]
    fn take_global(&mut self) -> Option<T> {
        let shared = self.shared;
        let (task, moved) = shared
            .inject
            .pop_batch_into_counted(&mut self.core.local, shared.workers)?;
        let taken = moved + 1;
        self.core.lifo_polls = 0;
        // A full batch means a backlog: look again soon (after the minimum
        // interval) instead of after the EWMA's interval, so tasks waiting in
        // the global queue are not held back by long local tasks.
        if taken >= MAX_GLOBAL_BATCH {
            self.core.global_countdown = self.core.global_countdown.min(MIN_GLOBAL_INTERVAL);
        }
        self.metrics.global_batches += 1;
        self.metrics.global_tasks += taken as u64;
        debug_assert!(
            self.core.has_token,
            "only a token holder takes from the global queue"
        );
        // The tasks are now covered by this worker's token, so the count cannot
        // reach zero here.
        let terminal = shared.gate.complete(taken as u64);
        debug_assert!(!terminal, "a worker holding a token ended the gate");
        Some(task)
    }

    /// Steps 4-5: become a searcher (refused when half the workers already
    /// search), steal half from random victims, then look at the global queue
    /// one last time.
    fn steal_work(&mut self) -> Option<(T, Source)> {
        let shared = self.shared;
        let workers = shared.workers;
        // Even a lone worker becomes a searcher: a worker may park without
        // the final re-check only while someone else is searching (README,
        // "Parking", step 3), and with one worker there is nobody else.
        if !self.core.is_searching {
            if !shared.idle.try_transition_to_searching() {
                return None;
            }
            self.core.is_searching = true;
        }
        if workers > 1 {
            let me = self.core.id;
            for _ in 0..shared.steal_tries {
                let mut victim = self.rng.next_usize(workers - 1);
                if victim >= me {
                    victim += 1;
                }
                self.metrics.steal_attempts += 1;
                let remote = &shared.remotes[victim];
                if let Some(task) = shared.side.as_ref().and_then(|s| s.steal(victim)) {
                    self.metrics.steal_successes += 1;
                    self.metrics.tasks_stolen += 1;
                    self.core.lifo_polls = 0;
                    return Some(self.found(task, Source::Steal { victim }));
                }
                if let Some((task, moved)) = remote.steal.steal_into_counted(&mut self.core.local) {
                    self.metrics.steal_successes += 1;
                    self.metrics.tasks_stolen += moved as u64 + 1;
                    self.core.lifo_polls = 0;
                    return Some(self.found(task, Source::Steal { victim }));
                }
                // Relaxed, and a load first: a hint, and a searcher that
                // keeps finding nothing should not keep writing the victim's
                // cache line.
                if shared.local_mode == LocalMode::Split
                    && !remote.wants_work.load(Ordering::Relaxed)
                {
                    remote.wants_work.store(true, Ordering::Relaxed);
                    self.metrics.share_requests += 1;
                }
                if shared.lifo_mode == LifoMode::Owner {
                    continue;
                }
                if let Some(task) = remote.lifo.steal() {
                    self.metrics.steal_successes += 1;
                    self.metrics.tasks_stolen += 1;
                    self.core.lifo_polls = 0;
                    return Some(self.found(task, Source::Steal { victim }));
                }
            }
        }
        self.pop_global()
            .map(|task| self.found(task, Source::Global))
    }

    /// Puts a task in this worker's ring; when the ring is full, half of it
    /// plus the task go to the global queue, and the gate counts them first.
    #[inline]
    pub(crate) fn push_local(&mut self, task: T) {
        let shared = self.shared;
        if self.core.local.has_room() {
            // Only this thread pushes, and stealers only free slots: it fits.
            let moved = self.core.local.push_back_or_overflow(task, &shared.inject);
            debug_assert_eq!(moved, 0);
            return;
        }
        self.push_overflow(task);
    }

    /// A task that yielded (woken while it was polled): to the back of the
    /// ring, and the next tick looks at the global queue first. A yield says
    /// "let others run"; without this, a worker whose ring holds only
    /// yielding tasks would cycle through them for a whole global interval
    /// (up to `MAX_GLOBAL_INTERVAL` ticks) while tasks wait in the global
    /// queue. The check costs one load when the global queue is empty.
    pub(crate) fn push_yielded(&mut self, task: T) {
        self.push_local(task);
        self.core.global_countdown = 1;
    }

    #[cold]
    fn push_overflow(&mut self, task: T) {
        let shared = self.shared;
        // Count the most an overflow can move before any of it is visible in
        // the global queue, so a worker popping it can never drive the count
        // below the tokens still held; give back what did not move.
        let reserve = (LOCAL_QUEUE_CAPACITY / 2 + 1) as u64;
        shared.gate.spawn_internal(reserve);
        let moved = self.core.local.push_back_or_overflow(task, &shared.inject) as u64;
        debug_assert!(moved <= reserve);
        if moved < reserve {
            let terminal = shared.gate.complete(reserve - moved);
            debug_assert!(!terminal, "a worker holding a token ended the gate");
        }
        if moved > 0 {
            self.metrics.overflows += 1;
            self.metrics.overflow_tasks += moved;
            if let Some(target) = shared.notify_parked() {
                let _ = target;
                self.metrics.unparks += 1;
            }
        }
    }

    /// A task spawned by the running task: with the owner's slot and the
    /// split queue, onto the private stack; otherwise into the LIFO slot,
    /// evicting the previous occupant to the private stack
    /// ([`LocalMode::Split`]) or the ring ([`LocalMode::Ring`]). Wakes a sibling every
    /// [`WAKE_ON_HOARD_THRESHOLD`] spawns so one worker cannot hoard work while
    /// others sleep.
    #[inline(always)]
    pub(crate) fn spawn_local(&mut self, task: T) {
        let Err(task) = self.core.try_spawn_private(task) else {
            return;
        };
        self.spawn_local_general(task);
    }

    /// [`Parts::spawn_local`] when [`Core::try_spawn_private`] declines.
    #[inline]
    pub(crate) fn spawn_local_general(&mut self, task: T) {
        if self.core.private_spawns {
            // The 32nd private spawn: the wake-on-hoard check, then the
            // stack, as every private spawn (the LIFO slot stays empty in
            // this mode, which is what lets the fast tick skip it).
            self.core.private_spawns_left = WAKE_ON_HOARD_THRESHOLD - 1;
            self.wake_on_hoard();
            if self.core.transitioning_to_park {
                self.push_local(task);
            } else {
                self.core.stack.push(task);
            }
            return;
        }
        self.core.spawns_since_wake += 1;
        if self.core.spawns_since_wake >= WAKE_ON_HOARD_THRESHOLD {
            self.wake_on_hoard();
        }
        match self.shared.lifo_mode {
            LifoMode::Owner => {
                if self.core.transitioning_to_park {
                    self.push_local(task);
                } else if let Some(evicted) = self.core.lifo.replace(task) {
                    self.evict(evicted);
                }
            }
            LifoMode::Stealable => match self.shared.remotes[self.core.id].lifo.push(task) {
                Ok(None) => {}
                Ok(Some(evicted)) => self.evict(evicted),
                // Refused while parking: the ring takes it.
                Err(task) => self.push_local(task),
            },
        }
    }

    #[cold]
    fn wake_on_hoard(&mut self) {
        self.core.spawns_since_wake = 0;
        // A hint, not a publication: the hoarded tasks stay with this awake
        // worker, so a stale "nobody to wake" only delays help until the
        // next hoard check. The load keeps two busy workers from trading
        // the idle word's cache line every 32 spawns.
        if !self.shared.idle.would_unpark() {
            return;
        }
        if self.shared.notify_parked().is_some() {
            self.metrics.wake_on_hoard += 1;
            self.metrics.unparks += 1;
        }
    }

    /// A task for any worker: counted by the gate, pushed to the global queue,
    /// and a parked worker woken. Dropped if the executor was shut down.
    pub(crate) fn spawn_global(&mut self, task: T) {
        let shared = self.shared;
        debug_assert!(self.core.has_token);
        shared.gate.spawn_internal(1);
        match shared.inject.push(task) {
            Ok(()) => {
                if shared.notify_parked().is_some() {
                    self.metrics.unparks += 1;
                }
            }
            Err(task) => {
                // Shut down: the task is dropped, as in-flight tasks are.
                drop(task);
                let _ = shared.gate.complete(1);
            }
        }
    }
}

/// What [`find_task`] found.
pub(crate) enum Found<T> {
    /// A task to run now.
    Task(T),
    /// Nothing anywhere; the caller idles (spin, yield or park).
    Idle,
    /// The executor is done; leave the loop.
    Exit,
}

/// Finds one task, doing the bookkeeping that goes with starting it (leaving
/// the searching state, the maintenance budget). Never blocks. The caller
/// runs the task; splitting the two lets the async worker release its core
/// while a future polls.
#[inline]
pub(crate) fn find_task<W, Tr>(worker: &mut W, trace: &mut Tr) -> Found<W::Task>
where
    W: Worker,
    Tr: TraceHooks,
{
    if W::FAST_TICK {
        let core = &mut *worker.parts().core;
        if let Some(task) = core.take_private_fast() {
            trace.event(
                core.id,
                SchedEvent::Run {
                    source: Source::Local,
                },
            );
            return Found::Task(task);
        }
        return find_task_full_apart(worker, trace);
    }
    find_task_full(worker, trace)
}

/// The full search of a worker that has the fast tick, out of line: it
/// runs once per grant (at most every `BUDGET_PER_TICK` tasks while the
/// private stack keeps the worker busy), and inlined it made the fast
/// tick's loop build its `Parts` in memory on every task.
#[inline(never)]
fn find_task_full_apart<W, Tr>(worker: &mut W, trace: &mut Tr) -> Found<W::Task>
where
    W: Worker,
    Tr: TraceHooks,
{
    find_task_full(worker, trace)
}

/// [`find_task`] past the fast tick: settle the fast ticks, then steps 1-9.
#[inline(always)]
fn find_task_full<W, Tr>(worker: &mut W, trace: &mut Tr) -> Found<W::Task>
where
    W: Worker,
    Tr: TraceHooks,
{
    let mut parts = worker.parts();
    // Both compile away for the faces without the fast tick.
    if W::FAST_TICK {
        parts.core.settle_fast(parts.metrics);
    }
    // `done` is read at the start of every tick of BUDGET_PER_TICK tasks and
    // after every idle spell, not per task: a worker notices a shutdown
    // within one tick, and a busy worker does not load a shared line per
    // task.
    if parts.core.budget_used == 0 && parts.shared.is_done() {
        return Found::Exit;
    }
    let found = match parts.next_task() {
        Some(found) => Some(found),
        None => steal_work_apart(worker),
    };
    let parts = worker.parts();
    let Some((task, source)) = found else {
        parts.core.batch_fresh = true;
        parts.core.budget_used = 0;
        return Found::Idle;
    };
    let id = parts.core.id;
    if parts.core.is_searching {
        parts.core.is_searching = false;
        // The last searcher to find work wakes another, so one searcher stays
        // awake for as long as work keeps appearing.
        if parts.shared.idle.transition_from_searching() {
            if let Some(target) = parts.shared.notify_parked() {
                parts.metrics.unparks += 1;
                trace.event(id, SchedEvent::Notify { target });
            }
        }
    }
    parts.core.account_task();
    if W::FAST_TICK {
        parts.core.grant_fast();
    }
    trace.event(id, SchedEvent::Run { source });
    Found::Task(task)
}

/// Steps 7-9 of the search (searching, stealing, the last global look),
/// out of line on a `Parts` of its own: the tree's hot path then runs 2.4 %
/// fewer instructions per task than with this call inlined on the caller's
/// `Parts` (cachegrind, docs/benchmarks.md).
#[inline(never)]
fn steal_work_apart<W: Worker>(worker: &mut W) -> Option<(W::Task, Source)> {
    worker.parts().steal_work()
}

/// Finds one task and runs it with `run`. Never blocks.
#[inline]
pub(crate) fn step<W, Tr, R>(worker: &mut W, trace: &mut Tr, run: R) -> Step
where
    W: Worker,
    Tr: TraceHooks,
    R: FnOnce(&mut W, W::Task),
{
    match find_task(worker, trace) {
        Found::Task(task) => {
            run(worker, task);
            Step::Ran
        }
        Found::Idle => Step::Idle,
        Found::Exit => Step::Exit,
    }
}

/// What [`prepare_park`] decided.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ParkPrep {
    /// Go to sleep; call [`after_park`] on waking.
    Sleep,
    /// Work turned up during the final checks; go back to [`step`].
    Resume,
    /// This worker ended the executor, or it is done; leave the loop.
    Exit,
}

/// The park sequence up to the sleep itself (README.md, "Parking"):
/// close the LIFO slot, register as parked, re-check every queue if this was
/// the last searcher, then give back the gate token.
pub(crate) fn prepare_park<W: Worker, Tr: TraceHooks>(worker: &mut W, trace: &mut Tr) -> ParkPrep {
    let parts = worker.parts();
    let shared = parts.shared;
    let core = parts.core;
    let id = core.id;
    if shared.is_done() {
        return ParkPrep::Exit;
    }
    // 1. From here on no push can land in our LIFO slot unseen: the flag and
    //    the take are one step (one atomic step for the stealable slot).
    let leftover = match shared.lifo_mode {
        LifoMode::Owner => {
            core.transitioning_to_park = true;
            core.lifo.take()
        }
        LifoMode::Stealable => shared.remotes[id].lifo.begin_park(),
    };
    if let Some(task) = leftover {
        end_park(core, shared);
        let mut parts = worker.parts();
        parts.push_local(task);
        trace.event(id, SchedEvent::ParkAborted);
        return ParkPrep::Resume;
    }
    debug_assert!(
        core.local.is_empty() && core.stack.is_empty(),
        "a worker parks only with an empty ring and an empty private stack"
    );
    // 2. Register as parked. Notifiers that come after this see us.
    let was_last_searcher = shared.idle.transition_to_parked(id, core.is_searching);
    core.is_searching = false;
    // 3. The last searcher re-checks everything: a task pushed while it was
    //    deciding to park found a searcher and woke nobody. Everyone checks
    //    `done`: a shutdown's wake-all may have run before we were parked.
    if shared.is_done() {
        end_park(core, shared);
        return ParkPrep::Exit;
    }
    if was_last_searcher && shared.has_visible_work() {
        if !shared.idle.unpark(id) {
            // A notifier already took us out of the parked set and counted us
            // as searching; its unpark is pending on our parker.
            core.is_searching = true;
        }
        end_park(core, shared);
        trace.event(id, SchedEvent::ParkAborted);
        return ParkPrep::Resume;
    }
    // 4. Give back the token. If that ends the gate, this worker is the one
    //    that observes termination and stops everybody.
    debug_assert!(core.has_token);
    core.has_token = false;
    parts.metrics.parks += 1;
    if shared.gate.complete(1) {
        trace.event(id, SchedEvent::Terminal);
        shared.initiate_done();
        return ParkPrep::Exit;
    }
    trace.event(id, SchedEvent::Park);
    ParkPrep::Sleep
}

/// The worker woke (`result` says why). Reopens the LIFO slot, leaves the
/// parked set, and takes a gate token back. `false`: leave the loop.
pub(crate) fn after_park<W: Worker, Tr: TraceHooks>(
    worker: &mut W,
    result: ParkResult,
    trace: &mut Tr,
) -> bool {
    let parts = worker.parts();
    let shared = parts.shared;
    let core = parts.core;
    let id = core.id;
    trace.event(
        id,
        SchedEvent::Wake {
            notified: matches!(result, ParkResult::Notified),
        },
    );
    end_park(core, shared);
    if !shared.idle.unpark(id) {
        // Woken by `unpark_one`, which counted us as a searcher.
        core.is_searching = true;
    }
    if shared.is_done() || !shared.gate.try_enter() {
        // `try_enter` fails only on a terminal gate, whose observer is setting
        // `done` and waking everyone.
        trace.event(id, SchedEvent::Exit);
        return false;
    }
    core.has_token = true;
    true
}

/// Reopens the LIFO slot after a park (or an aborted one).
fn end_park<T: Send + 'static>(core: &mut Core<T>, shared: &Shared<T>) {
    match shared.lifo_mode {
        LifoMode::Owner => core.transitioning_to_park = false,
        LifoMode::Stealable => shared.remotes[core.id].lifo.end_park(),
    }
}

/// Fork-join's owner is about to sleep on a latch (`crate::join`, W3)
/// while a job of its frame is outstanding: steps 2-3 of the park sequence
/// (README.md, "Parking") without steps 1 and 4. It joins the parked set,
/// so notifiers wake it for new work as they wake any parked worker, but
/// keeps its gate token (it holds a job) and its LIFO slot open (no task
/// runs on this thread while it sleeps, so nothing is pushed there).
/// `false`: it was the last searcher and work is visible; do not sleep.
pub(crate) fn prepare_latch_sleep<W: Worker>(worker: &mut W) -> bool {
    let parts = worker.parts();
    let shared = parts.shared;
    let core = parts.core;
    let id = core.id;
    debug_assert!(core.has_token, "a latch sleeper keeps its token");
    let was_last_searcher = shared.idle.transition_to_parked(id, core.is_searching);
    core.is_searching = false;
    if was_last_searcher && shared.has_visible_work() {
        if !shared.idle.unpark(id) {
            // A notifier took us out and counted us as searching.
            core.is_searching = true;
        }
        return false;
    }
    true
}

/// The latch sleeper woke (or did not sleep): leave the parked set, or,
/// if a notifier already took it out, count as the searcher it made us.
pub(crate) fn after_latch_sleep<W: Worker>(worker: &mut W) {
    let parts = worker.parts();
    if !parts.shared.idle.unpark(parts.core.id) {
        parts.core.is_searching = true;
    }
}

/// A worker's first act: take a gate token. `false` if the executor already
/// ended (joined before this thread started).
pub(crate) fn enter<W: Worker>(worker: &mut W) -> bool {
    let parts = worker.parts();
    if parts.shared.gate.try_enter() {
        parts.core.has_token = true;
        true
    } else {
        false
    }
}
