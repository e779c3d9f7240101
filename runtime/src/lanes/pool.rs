//! The `thread_pool` lane: bounded, priority-ordered admission onto magpie's
//! workers, with overflow policies, reentrancy limits and starvation aging.
//! `lanes/README.md` states the admission order and the aging bound.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use magpie_core::sync::atomic::{AtomicUsize, Ordering};
use magpie_core::CachePadded;

use super::host::{HostShared, LaneRuntime};
use super::spec::{OverflowPolicy, Priority, ThreadPoolSpec};

/// Jobs one lane runner runs back to back before it yields its worker.
const JOBS_PER_TASK: u32 = 64;
/// Spin rounds a runner with no started job waits for one before it leaves
/// (`PoolShared::linger`): about a microsecond or two, the gap between two
/// submissions of a fast outside producer; leaving instead costs the next
/// submission a trip through the workers' global queue.
const LINGER_SPINS: u32 = 64;

/// How a submitted job ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dispatch {
    /// It runs now, on this magpie worker.
    Run {
        /// The worker (`None` only if run off the workers, which the lane
        /// never does).
        worker_id: Option<usize>,
    },
    /// It never runs.
    Dropped(DropReason),
}

/// Why a job never ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// The queue was full and the policy refused it (`reject_new`,
    /// `fail_fast`).
    Rejected,
    /// The queue was full and the policy evicted it for newer work
    /// (`drop_oldest`).
    Evicted,
    /// The lane was closed.
    Closed,
}

/// Called after the lane has released a finished job's slot: whoever waits
/// for the job (a region barrier) learns of its end only when the slot is
/// free again, so the next batch never finds the lane still busy with it.
pub type Then = Option<Box<dyn FnOnce() + Send>>;

/// The work of a [`Job`] as a boxed closure: the lane's default work.
pub type RunFn = Box<dyn FnOnce(Dispatch) -> Then + Send>;

/// What a lane's jobs carry and how they run. A lane is generic over it,
/// so an invocation can be plain data held in the lane's own queues (for
/// the graph runner: the component's invocation and its context) instead
/// of a boxed closure: admitting and running it then allocates nothing.
/// [`RunFn`], a boxed closure, is the default.
pub trait Work: Send + 'static {
    /// What [`run`](Work::run) hands to [`then`](Work::then).
    type Done;

    /// Called exactly once per job: with [`Dispatch::Run`] on a worker, or
    /// with [`Dispatch::Dropped`] on the thread that caused the drop.
    fn run(self, dispatch: Dispatch) -> Self::Done;

    /// Called with what `run` returned, once the lane has done its
    /// bookkeeping for the job (its slot is free again).
    fn then(done: Self::Done);
}

impl Work for RunFn {
    type Done = Then;

    fn run(self, dispatch: Dispatch) -> Then {
        self(dispatch)
    }

    fn then(done: Then) {
        if let Some(then) = done {
            then();
        }
    }
}

/// One unit of work for a [`PoolLane`]: the keys admission orders by, and
/// the work itself (`run`, a [`Work`]).
pub struct LaneJob<W> {
    /// The component (the last admission tie-break and the reentrancy key).
    pub component: usize,
    /// The invocation's index within its component and batch (a tie-break
    /// after the component).
    pub index: usize,
    /// Its priority class.
    pub priority: Priority,
    /// May it overlap other jobs of the same component?
    pub reentrant: bool,
    /// The work: [`Work::run`] is called exactly once, with
    /// [`Dispatch::Run`] on a worker or with [`Dispatch::Dropped`] on the
    /// thread that caused the drop; [`Work::then`] gets its result after
    /// the lane has done its bookkeeping for the job.
    pub run: W,
}

/// A job whose work is a boxed closure (`run` returns the [`Then`] to call
/// after the lane's bookkeeping).
pub type Job = LaneJob<RunFn>;

impl<W> fmt::Debug for LaneJob<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Job")
            .field("component", &self.component)
            .field("index", &self.index)
            .field("priority", &self.priority)
            .field("reentrant", &self.reentrant)
            .finish_non_exhaustive()
    }
}

/// What happened to a submitted batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[must_use = "a rejection under fail_fast must stop the caller"]
pub struct Admission {
    /// Jobs of the batch admitted (running or waiting).
    pub admitted: usize,
    /// Jobs of the batch refused.
    pub rejected: usize,
    /// Older waiting jobs evicted for this batch (`drop_oldest`).
    pub evicted: usize,
    /// A job was refused under `fail_fast`.
    pub fail_fast: bool,
}

/// A lane's counters (seed 004's thread-pool metrics). Maxima are over the
/// lane's life.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// `max_threads` (at least 1).
    pub worker_count: u64,
    /// The configured capacity (`None`: unbounded).
    pub queue_capacity: Option<u64>,
    /// The most jobs waiting at once.
    pub max_queue_depth: u64,
    /// The most jobs running at once.
    pub max_active: u64,
    /// The most jobs admitted and not finished at once (waiting + running).
    pub max_in_flight: u64,
    /// Jobs that ran to the end (panicked ones included).
    pub completed: u64,
    /// Completed jobs per class, `High` first.
    pub completed_by_priority: [u64; 4],
    /// Jobs refused or evicted.
    pub rejected: u64,
    /// Of those, `low` and `background` ones.
    pub low_priority_rejected: u64,
    /// Dispatches where aging ran a job ahead of one of a better class (a
    /// class passed over `aging_step` times was promoted).
    pub starvation_guard: u64,
    /// Jobs that panicked (caught; the lane goes on).
    pub panicked: u64,
    /// Every worker id that ran a job.
    pub worker_ids: BTreeSet<usize>,
    /// Dispatches so far (the aging clock).
    pub dispatches: u64,
    /// Lane runners put on the workers. A runner goes on from one job to
    /// the next, so under a steady stream this is far below `completed`.
    pub runners_scheduled: u64,
}

/// A `thread_pool` lane over a [`LaneRuntime`]'s workers, whose jobs carry
/// work of type `W` (default: a boxed closure, [`Job`]). Cloning gives
/// another handle to the same lane.
pub struct PoolLane<W: Work = RunFn> {
    shared: Arc<PoolShared<W>>,
}

impl<W: Work> Clone for PoolLane<W> {
    fn clone(&self) -> Self {
        PoolLane {
            shared: Arc::clone(&self.shared),
        }
    }
}

struct PoolShared<W> {
    width: usize,
    capacity: Option<usize>,
    overflow: OverflowPolicy,
    aging_step: u64,
    host: Arc<HostShared>,
    /// `ready.len()`, stored under the lock, read without it by lingering
    /// runners. On a cache line of its own: the runners spinning on it
    /// must not pull the lock's line away from its holder.
    ready_hint: CachePadded<AtomicUsize>,
    state: Mutex<PoolState<W>>,
    idle: Condvar,
}

struct Waiting<W> {
    seq: u64,
    job: LaneJob<W>,
}

/// (enqueue order, then worst class, largest component and index first):
/// smaller is evicted first.
type EvictionKey = (u64, std::cmp::Reverse<(u8, usize, usize)>);

/// A component id hashed by one multiplication (the reentrancy map is
/// looked up on every dispatch of a non-reentrant job; SipHash cost more
/// than the rest of the dispatch).
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

struct PoolState<W> {
    /// One FIFO per class, sorted by (enqueue order, component, index): a
    /// batch is pushed in that order and enqueue numbers only grow.
    classes: [VecDeque<Waiting<W>>; 4],
    waiting: usize,
    active: usize,
    /// Per class: dispatches of a better class since this class last ran,
    /// counted while it had a runnable job waiting (the aging clock).
    passed_over: [u64; 4],
    /// Running jobs per non-reentrant component.
    running_of: HashMap<usize, u32, BuildHasherDefault<IdHasher>>,
    /// Started jobs (counted in `active`) no runner has taken yet.
    ready: VecDeque<LaneJob<W>>,
    /// Live runners of this lane: queued on the workers, running a job, or
    /// between two jobs. Kept `>= active`, so every started job has one.
    runners: usize,
    next_seq: u64,
    closed: bool,
    /// Threads in `wait_idle`: the idle condvar is notified only if there
    /// is one (a notify is a futex syscall even with nobody waiting, and a
    /// lane fed one job at a time goes idle after almost every job).
    idle_waiters: usize,
    /// Bit `w` set: worker `w` (< 64) is already in `stats.worker_ids`, so
    /// a finished job costs a bit test, not a `BTreeSet` insert.
    seen_workers: u64,
    stats: PoolStats,
}

impl<W: Work> fmt::Debug for PoolLane<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.shared.lock();
        f.debug_struct("PoolLane")
            .field("width", &self.shared.width)
            .field("capacity", &self.shared.capacity)
            .field("waiting", &s.waiting)
            .field("active", &s.active)
            .finish()
    }
}

impl PoolLane {
    /// A lane of boxed-closure [`Job`]s running on `host`'s workers.
    pub fn new(spec: &ThreadPoolSpec, host: &LaneRuntime) -> PoolLane {
        PoolLane::typed(spec, host)
    }
}

impl<W: Work> PoolLane<W> {
    /// A lane whose jobs carry work of type `W`, running on `host`'s
    /// workers (`PoolLane::<MyWork>::typed(&spec, &host)`).
    pub fn typed(spec: &ThreadPoolSpec, host: &LaneRuntime) -> PoolLane<W> {
        let width = spec.width();
        let stats = PoolStats {
            worker_count: width as u64,
            queue_capacity: spec.queue_capacity.map(|c| c as u64),
            ..PoolStats::default()
        };
        PoolLane {
            shared: Arc::new(PoolShared {
                width,
                capacity: spec.queue_capacity,
                overflow: spec.overflow,
                aging_step: spec.aging_step,
                host: host.shared().clone(),
                ready_hint: CachePadded::new(AtomicUsize::new(0)),
                state: Mutex::new(PoolState {
                    classes: Default::default(),
                    waiting: 0,
                    active: 0,
                    passed_over: [0; 4],
                    running_of: HashMap::default(),
                    ready: VecDeque::new(),
                    runners: 0,
                    next_seq: 0,
                    closed: false,
                    idle_waiters: 0,
                    seen_workers: 0,
                    stats,
                }),
                idle: Condvar::new(),
            }),
        }
    }

    /// Submits one job (a batch of one): one acquisition of the lane's
    /// lock, no allocation (beyond the queue's amortised growth).
    pub fn submit(&self, job: LaneJob<W>) -> Admission {
        let shared = &self.shared;
        let mut adm = Admission::default();
        let (dropped, runners) = {
            let mut s = shared.lock();
            let seq = s.next_seq;
            s.next_seq += 1;
            let dropped = shared.admit_one(&mut s, seq, job, &mut adm);
            s.note_in_flight();
            shared.publish_hint(&s);
            (dropped, s.new_runners())
        };
        if let Some((job, why)) = dropped {
            W::then(W::run(job.run, Dispatch::Dropped(why)));
        }
        if runners > 0 {
            self.schedule_runners(runners);
        }
        adm
    }

    /// Submits jobs that became ready together: they share one enqueue
    /// order, so among them the component id, then the index, breaks ties.
    /// They are admitted best key first, so at capacity the batch keeps its
    /// best jobs.
    pub fn submit_batch(&self, mut jobs: Vec<LaneJob<W>>) -> Admission {
        jobs.sort_by_key(|j| (j.priority, j.component, j.index));
        let shared = &self.shared;
        let mut adm = Admission::default();
        let mut dropped: Vec<(LaneJob<W>, DropReason)> = Vec::new();
        let runners = {
            let mut s = shared.lock();
            let seq = s.next_seq;
            s.next_seq += 1;
            for job in jobs {
                dropped.extend(shared.admit_one(&mut s, seq, job, &mut adm));
            }
            s.note_in_flight();
            shared.publish_hint(&s);
            s.new_runners()
        };
        for (job, why) in dropped {
            W::then(W::run(job.run, Dispatch::Dropped(why)));
        }
        if runners > 0 {
            self.schedule_runners(runners);
        }
        adm
    }

    /// Puts `n` new runners of this lane on the workers.
    fn schedule_runners(&self, n: usize) {
        let me: Arc<dyn RunLane> = self.shared.clone();
        schedule_runners(&me, &self.shared.host, n);
    }

    /// Blocks until nothing is waiting or running (the region barrier and
    /// the drain).
    pub fn wait_idle(&self) {
        let mut s = self.shared.lock();
        s.idle_waiters += 1;
        while s.active > 0 || s.waiting > 0 {
            s = self
                .shared
                .idle
                .wait(s)
                .unwrap_or_else(PoisonError::into_inner);
        }
        s.idle_waiters -= 1;
    }

    /// Refuses new jobs from now on; admitted ones still run.
    pub fn close(&self) {
        self.shared.lock().closed = true;
    }

    /// The counters so far.
    pub fn stats(&self) -> PoolStats {
        self.shared.lock().stats.clone()
    }

    /// Jobs waiting now.
    pub fn waiting(&self) -> usize {
        self.shared.lock().waiting
    }
}

/// Puts `n` runners of `lane` on `host`'s workers (after the lane's lock).
fn schedule_runners(lane: &Arc<dyn RunLane>, host: &HostShared, n: usize) {
    let tasks: Vec<LaneTask> = (0..n)
        .map(|_| LaneTask {
            lane: Some(Arc::clone(lane)),
        })
        .collect();
    host.schedule(tasks);
}

impl<W: Work> PoolShared<W> {
    fn lock(&self) -> MutexGuard<'_, PoolState<W>> {
        // A job's panic is caught outside the lock; a poisoned lock would
        // mean a bug in the lane itself, whose state changes are each
        // complete before any call that could panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits one job of batch `seq` (under the lock). Returns the job the
    /// lane will not run, if any (this one, refused or closed, or an older
    /// one evicted for it); the caller calls it after the lock.
    fn admit_one(
        &self,
        s: &mut PoolState<W>,
        seq: u64,
        job: LaneJob<W>,
        adm: &mut Admission,
    ) -> Option<(LaneJob<W>, DropReason)> {
        if s.closed {
            return Some((job, DropReason::Closed));
        }
        if s.active < self.width && !s.blocked(job.component, job.reentrant) {
            // A free slot and nothing runnable waiting (else it would
            // already run): it starts at once.
            s.stats.dispatches += 1;
            s.start(job.component, job.reentrant);
            s.ready.push_back(job);
            adm.admitted += 1;
            return None;
        }
        let mut evicted = None;
        if self.capacity.is_some_and(|c| s.waiting >= c) {
            let victim = match self.overflow {
                OverflowPolicy::DropOldest => s.evict_oldest_before(seq),
                OverflowPolicy::RejectNew | OverflowPolicy::FailFast => None,
            };
            match victim {
                Some(old) => {
                    s.count_rejected(old.priority);
                    adm.evicted += 1;
                    evicted = Some((old, DropReason::Evicted));
                }
                None => {
                    s.count_rejected(job.priority);
                    adm.fail_fast |= self.overflow == OverflowPolicy::FailFast;
                    adm.rejected += 1;
                    return Some((job, DropReason::Rejected));
                }
            }
        }
        let class = usize::from(job.priority.rank());
        s.classes[class].push_back(Waiting { seq, job });
        s.waiting += 1;
        s.stats.max_queue_depth = s.stats.max_queue_depth.max(s.waiting as u64);
        adm.admitted += 1;
        evicted
    }

    /// A runner's first act: take a started job, or leave (no job: another
    /// runner took it).
    fn take_ready(&self) -> Option<LaneJob<W>> {
        let mut s = self.lock();
        let job = s.ready.pop_front();
        if job.is_none() {
            s.runners -= 1;
        }
        self.publish_hint(&s);
        job
    }

    /// Stores `ready.len()` for lingering runners (under the lock, so the
    /// last store is the current length). Only a change is stored: a store
    /// takes the line from every spinning runner.
    fn publish_hint(&self, s: &PoolState<W>) {
        let n = s.ready.len();
        // Relaxed: a hint (see `linger`); only lock holders store it.
        if self.ready_hint.load(Ordering::Relaxed) != n {
            self.ready_hint.store(n, Ordering::Relaxed);
        }
    }

    /// A runner that found no started job waits a moment for one before it
    /// leaves (it stays counted in `runners` meanwhile, so a submission in
    /// that moment pushes the job to `ready` and schedules nobody). It
    /// watches `ready_hint`, not the lock; when the hint shows a job it
    /// takes the lock, and if another runner was quicker it goes on
    /// watching. Then it takes a job, or leaves.
    fn linger(&self) -> Option<LaneJob<W>> {
        for _ in 0..LINGER_SPINS {
            // Relaxed: a hint; the job itself is taken under the lock.
            if self.ready_hint.load(Ordering::Relaxed) > 0 {
                let mut s = self.lock();
                if let Some(job) = s.ready.pop_front() {
                    self.publish_hint(&s);
                    return Some(job);
                }
            }
            std::hint::spin_loop();
        }
        self.take_ready()
    }

    /// The bookkeeping of a finished job, under one lock: free its slot,
    /// count it, start waiting jobs while slots are free. Then, if
    /// `take_next`, hand the runner the next started job, if there is one
    /// (the runner stays counted either way). Runners for started jobs
    /// beyond the live ones are scheduled here.
    fn finish(&self, me: &Arc<dyn RunLane>, done: Done, take_next: bool) -> Option<LaneJob<W>> {
        let (next, runners) = {
            let mut s = self.lock();
            s.active -= 1;
            if !done.reentrant {
                s.release(done.component);
            }
            s.stats.completed += 1;
            s.stats.completed_by_priority[usize::from(done.priority.rank())] += 1;
            s.stats.panicked += u64::from(done.panicked);
            s.note_worker(done.worker_id);
            if s.waiting > 0 {
                self.start_waiting(&mut s);
            }
            let next = if take_next { s.ready.pop_front() } else { None };
            if s.idle_waiters > 0 && s.active == 0 && s.waiting == 0 {
                self.idle.notify_all();
            }
            self.publish_hint(&s);
            (next, s.new_runners())
        };
        if runners > 0 {
            schedule_runners(me, &self.host, runners);
        }
        next
    }

    /// Starts waiting jobs while slots are free (into `ready`).
    fn start_waiting(&self, s: &mut PoolState<W>) {
        while s.active < self.width {
            match s.pick(self.aging_step) {
                Some(job) => {
                    s.start(job.component, job.reentrant);
                    s.ready.push_back(job);
                }
                None => break,
            }
        }
    }
}

/// A lane as its runners see it, whatever its work type.
trait RunLane: Send + Sync {
    /// Runs started jobs on worker `worker_id` (`me` is this lane, to put
    /// new runners on the workers). `true`: it yielded its worker and is
    /// still a live runner of the lane (requeue it).
    fn run_jobs(&self, me: &Arc<dyn RunLane>, worker_id: usize) -> bool;

    /// A runner dropped without running (the host is gone).
    fn abandon(&self);
}

impl<W: Work> RunLane for PoolShared<W> {
    fn run_jobs(&self, me: &Arc<dyn RunLane>, worker_id: usize) -> bool {
        let Some(mut job) = self.take_ready() else {
            return false;
        };
        let mut ran = 0u32;
        loop {
            ran += 1;
            let done = Done {
                component: job.component,
                reentrant: job.reentrant,
                priority: job.priority,
                worker_id,
                panicked: false,
            };
            let work = job.run;
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                W::run(
                    work,
                    Dispatch::Run {
                        worker_id: Some(worker_id),
                    },
                )
            }));
            let done = Done {
                panicked: outcome.is_err(),
                ..done
            };
            let yield_now = ran % JOBS_PER_TASK == 0;
            let next = self.finish(me, done, !yield_now);
            if let Ok(done) = outcome {
                W::then(done);
            }
            if yield_now {
                // Still a live runner of the lane: requeued, it takes the
                // next started job when it runs again.
                return true;
            }
            job = match next {
                Some(job) => job,
                None => match self.linger() {
                    Some(job) => job,
                    None => return false,
                },
            };
        }
    }

    /// The host is gone (a runner dropped without running): no runner
    /// will come for the started jobs. Close the lane and drop every
    /// admitted job (`Dispatch::Dropped(Closed)`).
    fn abandon(&self) {
        let jobs: Vec<LaneJob<W>> = {
            let mut s = self.lock();
            s.runners -= 1;
            s.closed = true;
            if s.runners > 0 {
                // A live runner (still finishing a job) takes what is left
                // and comes back here when it cannot be scheduled.
                return;
            }
            let started = s.ready.len();
            let mut jobs: Vec<LaneJob<W>> = s.ready.drain(..).collect();
            self.publish_hint(&s);
            s.active -= started;
            for class in &mut s.classes {
                jobs.extend(class.drain(..).map(|w| w.job));
            }
            s.waiting = 0;
            s.running_of.clear();
            if s.idle_waiters > 0 {
                self.idle.notify_all();
            }
            jobs
        };
        for job in jobs {
            W::then(W::run(job.run, Dispatch::Dropped(DropReason::Closed)));
        }
    }
}

/// What `finish` needs of a job that ran.
struct Done {
    component: usize,
    reentrant: bool,
    priority: Priority,
    worker_id: usize,
    panicked: bool,
}

/// The task of the lane workers: a runner of one lane. It takes a started
/// job from the lane, runs it, does the lane's bookkeeping, and goes on
/// with the next started job, so a backlog costs no scheduling per job;
/// every `JOBS_PER_TASK` jobs it yields its worker. Dropped without running
/// (the `LaneRuntime` shut down), it abandons its lane.
pub(crate) struct LaneTask {
    lane: Option<Arc<dyn RunLane>>,
}

impl LaneTask {
    /// Runs jobs on worker `worker_id`. `Some(self)`: it yielded; requeue.
    pub(crate) fn run(mut self, worker_id: usize) -> Option<LaneTask> {
        let lane = self.lane.take().expect("a runner runs once");
        if lane.run_jobs(&lane, worker_id) {
            Some(LaneTask { lane: Some(lane) })
        } else {
            None
        }
    }
}

impl Drop for LaneTask {
    fn drop(&mut self) {
        if let Some(lane) = self.lane.take() {
            lane.abandon();
        }
    }
}

impl<W> PoolState<W> {
    fn note_worker(&mut self, w: usize) {
        let bit = 1u64.checked_shl(w as u32).filter(|_| w < 64);
        if bit.is_some_and(|b| self.seen_workers & b != 0) {
            return;
        }
        self.seen_workers |= bit.unwrap_or(0);
        self.stats.worker_ids.insert(w);
    }

    /// Runners for the started jobs no live runner will reach: one per job
    /// beyond `runners`, counted here (the caller schedules them after the
    /// lock).
    fn new_runners(&mut self) -> usize {
        let missing = self.active.saturating_sub(self.runners);
        self.runners += missing;
        self.stats.runners_scheduled += missing as u64;
        missing
    }

    fn blocked(&self, component: usize, reentrant: bool) -> bool {
        !reentrant && !self.running_of.is_empty() && self.running_of.contains_key(&component)
    }

    fn start(&mut self, component: usize, reentrant: bool) {
        self.active += 1;
        if !reentrant {
            *self.running_of.entry(component).or_insert(0) += 1;
        }
        self.stats.max_active = self.stats.max_active.max(self.active as u64);
        self.note_in_flight();
    }

    /// A non-reentrant job of `component` finished.
    fn release(&mut self, component: usize) {
        if let Some(n) = self.running_of.get_mut(&component) {
            *n -= 1;
            if *n == 0 {
                self.running_of.remove(&component);
            }
        }
    }

    fn note_in_flight(&mut self) {
        let n = (self.active + self.waiting) as u64;
        self.stats.max_in_flight = self.stats.max_in_flight.max(n);
    }

    fn count_rejected(&mut self, priority: Priority) {
        self.stats.rejected += 1;
        self.stats.low_priority_rejected += u64::from(priority.is_low());
    }

    /// The next job to run. Of each class the candidate is its oldest job
    /// not blocked by its component's reentrancy limit (the FIFO is in
    /// (enqueue order, component, index) order, so that is also its smallest
    /// key). Normally the best class's candidate runs: class, then enqueue
    /// order, then component id. **Aging**: each class counts how often its
    /// candidate was passed over for a better class since the class last
    /// ran; a candidate passed over `aging_step` times is promoted above
    /// every class (of several, the most passed over, then the better
    /// class). That promotion is a starvation-guard intervention.
    fn pick(&mut self, aging_step: u64) -> Option<LaneJob<W>> {
        if self.waiting == 0 {
            return None;
        }
        // Fast path, the same outcome as the general one below: when one
        // class holds every waiting job and its oldest is runnable, it is
        // the only candidate, so it runs, nothing is promoted, and every
        // class's pass-over count becomes 0 (no candidate, or the one that
        // ran).
        let mut only = None;
        let mut nonempty = 0;
        for (c, q) in self.classes.iter().enumerate() {
            if !q.is_empty() {
                nonempty += 1;
                only = Some(c);
            }
        }
        if let (1, Some(c)) = (nonempty, only) {
            let runnable = self.classes[c]
                .front()
                .is_some_and(|w| !self.blocked(w.job.component, w.job.reentrant));
            if runnable {
                let w = self.classes[c].pop_front()?;
                self.passed_over = [0; 4];
                self.waiting -= 1;
                self.stats.dispatches += 1;
                return Some(w.job);
            }
        }
        let mut candidates: [Option<usize>; 4] = [None; 4];
        for (class, queue) in self.classes.iter().enumerate() {
            candidates[class] = queue
                .iter()
                .position(|w| !self.blocked(w.job.component, w.job.reentrant));
        }
        let best = candidates.iter().position(Option::is_some)?;
        let starving = (aging_step > 0)
            .then(|| {
                (0..4)
                    .filter(|&c| candidates[c].is_some() && self.passed_over[c] >= aging_step)
                    .max_by_key(|&c| (self.passed_over[c], std::cmp::Reverse(c)))
            })
            .flatten();
        let class = match starving {
            Some(c) if c != best => {
                self.stats.starvation_guard += 1;
                c
            }
            _ => best,
        };
        for (c, (candidate, passed)) in candidates.iter().zip(&mut self.passed_over).enumerate() {
            if candidate.is_none() || c == class {
                *passed = 0;
            } else if c > class {
                *passed += 1;
            }
        }
        let pos = candidates[class]?;
        let w = self.classes[class].remove(pos)?;
        self.waiting -= 1;
        self.stats.dispatches += 1;
        Some(w.job)
    }

    /// Evicts the oldest waiting job admitted before batch `seq` (of equal
    /// age, the worst class, then the largest component and index).
    fn evict_oldest_before(&mut self, seq: u64) -> Option<LaneJob<W>> {
        let mut victim: Option<(EvictionKey, usize)> = None;
        for (class, queue) in self.classes.iter().enumerate() {
            if let Some(w) = queue.front().filter(|w| w.seq < seq) {
                let key = (
                    w.seq,
                    std::cmp::Reverse((class as u8, w.job.component, w.job.index)),
                );
                if victim.as_ref().is_none_or(|(k, _)| key < *k) {
                    victim = Some((key, class));
                }
            }
        }
        let (_, class) = victim?;
        let w = self.classes[class].pop_front()?;
        self.waiting -= 1;
        Some(w.job)
    }
}
