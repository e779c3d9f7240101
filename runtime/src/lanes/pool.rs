//! The `thread_pool` lane: bounded, priority-ordered admission onto magpie's
//! workers, with overflow policies, reentrancy limits and starvation aging.
//! `lanes/README.md` states the admission order and the aging bound.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use magpie_core::sync::atomic::{AtomicUsize, Ordering};

use super::host::{HostShared, LaneRuntime};
use super::spec::{OverflowPolicy, Priority, ThreadPoolSpec};

/// Jobs one lane runner runs back to back before it yields its worker.
const JOBS_PER_TASK: u32 = 64;
/// Spin rounds a runner with no started job waits for one before it leaves
/// (`PoolLane::linger`): about a microsecond or two, the gap between two
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

/// One unit of work for a [`PoolLane`]. `run` is called exactly once: with
/// [`Dispatch::Run`] on a worker, or with [`Dispatch::Dropped`] on the
/// thread that caused the drop. What it returns is called after the lane
/// has done its bookkeeping for the job.
pub struct Job {
    /// The component (the last admission tie-break and the reentrancy key).
    pub component: usize,
    /// The invocation's index within its component and batch (a tie-break
    /// after the component).
    pub index: usize,
    /// Its priority class.
    pub priority: Priority,
    /// May it overlap other jobs of the same component?
    pub reentrant: bool,
    /// The work.
    pub run: Box<dyn FnOnce(Dispatch) -> Then + Send>,
}

impl fmt::Debug for Job {
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

/// A `thread_pool` lane over a [`LaneRuntime`]'s workers. Cloning gives
/// another handle to the same lane.
#[derive(Clone)]
pub struct PoolLane {
    shared: Arc<PoolShared>,
}

struct PoolShared {
    width: usize,
    capacity: Option<usize>,
    overflow: OverflowPolicy,
    aging_step: u64,
    host: Arc<HostShared>,
    /// `ready.len()`, stored under the lock, read without it by lingering
    /// runners.
    ready_hint: AtomicUsize,
    state: Mutex<PoolState>,
    idle: Condvar,
}

struct Waiting {
    seq: u64,
    job: Job,
}

/// (enqueue order, then worst class, largest component and index first):
/// smaller is evicted first.
type EvictionKey = (u64, std::cmp::Reverse<(u8, usize, usize)>);

#[derive(Default)]
struct PoolState {
    /// One FIFO per class, sorted by (enqueue order, component, index): a
    /// batch is pushed in that order and enqueue numbers only grow.
    classes: [VecDeque<Waiting>; 4],
    waiting: usize,
    active: usize,
    /// Per class: dispatches of a better class since this class last ran,
    /// counted while it had a runnable job waiting (the aging clock).
    passed_over: [u64; 4],
    /// Running jobs per non-reentrant component.
    running_of: HashMap<usize, u32>,
    /// Started jobs (counted in `active`) no runner has taken yet.
    ready: VecDeque<Job>,
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

impl fmt::Debug for PoolLane {
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
    /// A lane running on `host`'s workers.
    pub fn new(spec: &ThreadPoolSpec, host: &LaneRuntime) -> PoolLane {
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
                ready_hint: AtomicUsize::new(0),
                state: Mutex::new(PoolState {
                    stats,
                    ..PoolState::default()
                }),
                idle: Condvar::new(),
            }),
        }
    }

    /// Submits one job (a batch of one).
    pub fn submit(&self, job: Job) -> Admission {
        self.admit(std::iter::once(job))
    }

    /// Submits jobs that became ready together: they share one enqueue
    /// order, so among them the component id, then the index, breaks ties.
    /// They are admitted best key first, so at capacity the batch keeps its
    /// best jobs.
    pub fn submit_batch(&self, mut jobs: Vec<Job>) -> Admission {
        jobs.sort_by_key(|j| (j.priority, j.component, j.index));
        self.admit(jobs.into_iter())
    }

    /// Admits one batch, in the order given (see `submit_batch`).
    fn admit(&self, jobs: impl Iterator<Item = Job>) -> Admission {
        let mut adm = Admission::default();
        let mut dropped: Vec<(Job, DropReason)> = Vec::new();
        let runners = {
            let mut s = self.shared.lock();
            let seq = s.next_seq;
            s.next_seq += 1;
            for job in jobs {
                if s.closed {
                    dropped.push((job, DropReason::Closed));
                    continue;
                }
                if s.active < self.shared.width && !s.blocked(&job) {
                    // A free slot and nothing runnable waiting (else it
                    // would already run): it starts at once.
                    s.stats.dispatches += 1;
                    s.start(&job);
                    s.push_ready(job);
                    adm.admitted += 1;
                    continue;
                }
                let full = self.shared.capacity.is_some_and(|c| s.waiting >= c);
                if full {
                    let victim = match self.shared.overflow {
                        OverflowPolicy::DropOldest => s.evict_oldest_before(seq),
                        OverflowPolicy::RejectNew | OverflowPolicy::FailFast => None,
                    };
                    match victim {
                        Some(old) => {
                            s.count_rejected(old.priority);
                            dropped.push((old, DropReason::Evicted));
                            adm.evicted += 1;
                        }
                        None => {
                            s.count_rejected(job.priority);
                            adm.fail_fast |= self.shared.overflow == OverflowPolicy::FailFast;
                            dropped.push((job, DropReason::Rejected));
                            adm.rejected += 1;
                            continue;
                        }
                    }
                }
                let class = usize::from(job.priority.rank());
                s.classes[class].push_back(Waiting { seq, job });
                s.waiting += 1;
                s.stats.max_queue_depth = s.stats.max_queue_depth.max(s.waiting as u64);
                adm.admitted += 1;
            }
            s.note_in_flight();
            self.publish_hint(&s);
            self.new_runners(&mut s)
        };
        if !dropped.is_empty() {
            for (job, why) in dropped {
                if let Some(then) = (job.run)(Dispatch::Dropped(why)) {
                    then();
                }
            }
        }
        if !runners.is_empty() {
            self.shared.host.schedule(runners);
        }
        adm
    }

    /// Runners for the started jobs no live runner will reach: one per job
    /// beyond `runners` (the caller schedules them after the lock).
    fn new_runners(&self, s: &mut PoolState) -> Vec<LaneTask> {
        let missing = s.active.saturating_sub(s.runners);
        s.runners += missing;
        s.stats.runners_scheduled += missing as u64;
        (0..missing)
            .map(|_| LaneTask {
                lane: Some(self.clone()),
            })
            .collect()
    }

    /// A runner's first act: take a started job, or leave (no job: another
    /// runner took it).
    fn take_ready(&self) -> Option<Job> {
        let mut s = self.shared.lock();
        let job = s.pop_ready();
        if job.is_none() {
            s.runners -= 1;
        }
        self.publish_hint(&s);
        job
    }

    /// Stores `ready.len()` for lingering runners (under the lock, so the
    /// last store is the current length).
    fn publish_hint(&self, s: &PoolState) {
        self.shared
            .ready_hint
            .store(s.ready.len(), Ordering::Relaxed);
    }

    /// A runner that found no started job waits a moment for one before it
    /// leaves (it stays counted in `runners` meanwhile, so a submission in
    /// that moment pushes the job to `ready` and schedules nobody). It
    /// watches `ready_hint`, not the lock. Then it takes a job, or leaves.
    fn linger(&self) -> Option<Job> {
        for _ in 0..LINGER_SPINS {
            // Relaxed: a hint; the job itself is taken under the lock.
            if self.shared.ready_hint.load(Ordering::Relaxed) > 0 {
                break;
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
    fn finish(&self, done: Done, take_next: bool) -> Option<Job> {
        let (next, runners) = {
            let mut s = self.shared.lock();
            s.active -= 1;
            if !done.reentrant {
                if let Some(n) = s.running_of.get_mut(&done.component) {
                    *n -= 1;
                    if *n == 0 {
                        s.running_of.remove(&done.component);
                    }
                }
            }
            s.stats.completed += 1;
            s.stats.completed_by_priority[usize::from(done.priority.rank())] += 1;
            s.stats.panicked += u64::from(done.panicked);
            s.note_worker(done.worker_id);
            self.start_waiting(&mut s);
            let next = if take_next { s.pop_ready() } else { None };
            if s.active == 0 && s.waiting == 0 && s.idle_waiters > 0 {
                self.shared.idle.notify_all();
            }
            self.publish_hint(&s);
            (next, self.new_runners(&mut s))
        };
        if !runners.is_empty() {
            self.shared.host.schedule(runners);
        }
        next
    }

    /// Starts waiting jobs while slots are free (into `ready`).
    fn start_waiting(&self, s: &mut PoolState) {
        while s.active < self.shared.width {
            match s.pick(self.shared.aging_step) {
                Some(job) => {
                    s.start(&job);
                    s.push_ready(job);
                }
                None => break,
            }
        }
    }

    /// The host is gone (a runner dropped without running): no runner
    /// will come for the started jobs. Close the lane and drop every
    /// admitted job (`Dispatch::Dropped(Closed)`).
    fn abandon(&self) {
        let jobs: Vec<Job> = {
            let mut s = self.shared.lock();
            s.runners -= 1;
            s.closed = true;
            if s.runners > 0 {
                // A live runner (still finishing a job) takes what is left
                // and comes back here when it cannot be scheduled.
                return;
            }
            let started = s.ready.len();
            let mut jobs: Vec<Job> = s.ready.drain(..).collect();
            self.publish_hint(&s);
            s.active -= started;
            for class in &mut s.classes {
                jobs.extend(class.drain(..).map(|w| w.job));
            }
            s.waiting = 0;
            s.running_of.clear();
            if s.idle_waiters > 0 {
                self.shared.idle.notify_all();
            }
            jobs
        };
        for job in jobs {
            if let Some(then) = (job.run)(Dispatch::Dropped(DropReason::Closed)) {
                then();
            }
        }
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
    lane: Option<PoolLane>,
}

impl LaneTask {
    /// Runs jobs on worker `worker_id`. `Some(self)`: it yielded; requeue.
    pub(crate) fn run(mut self, worker_id: usize) -> Option<LaneTask> {
        let lane = self.lane.take().expect("a runner runs once");
        let mut job = lane.take_ready()?;
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
            let run = job.run;
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                run(Dispatch::Run {
                    worker_id: Some(worker_id),
                })
            }));
            let done = Done {
                panicked: outcome.is_err(),
                ..done
            };
            let yield_now = ran % JOBS_PER_TASK == 0;
            let next = lane.finish(done, !yield_now);
            if let Ok(Some(then)) = outcome {
                then();
            }
            if yield_now {
                // Still a live runner of the lane: requeued, it takes the
                // next started job when it runs again.
                return Some(LaneTask { lane: Some(lane) });
            }
            job = match next {
                Some(job) => job,
                None => lane.linger()?,
            };
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

impl PoolShared {
    fn lock(&self) -> MutexGuard<'_, PoolState> {
        // A job's panic is caught outside the lock; a poisoned lock would
        // mean a bug in the lane itself, whose state changes are each
        // complete before any call that could panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl PoolState {
    fn note_worker(&mut self, w: usize) {
        let bit = 1u64.checked_shl(w as u32).filter(|_| w < 64);
        if bit.is_some_and(|b| self.seen_workers & b != 0) {
            return;
        }
        self.seen_workers |= bit.unwrap_or(0);
        self.stats.worker_ids.insert(w);
    }

    fn push_ready(&mut self, job: Job) {
        self.ready.push_back(job);
    }

    fn pop_ready(&mut self) -> Option<Job> {
        self.ready.pop_front()
    }

    fn blocked(&self, job: &Job) -> bool {
        !job.reentrant && self.running_of.contains_key(&job.component)
    }

    fn start(&mut self, job: &Job) {
        self.active += 1;
        if !job.reentrant {
            *self.running_of.entry(job.component).or_insert(0) += 1;
        }
        self.stats.max_active = self.stats.max_active.max(self.active as u64);
        self.note_in_flight();
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
    fn pick(&mut self, aging_step: u64) -> Option<Job> {
        let mut candidates: [Option<usize>; 4] = [None; 4];
        for (class, queue) in self.classes.iter().enumerate() {
            candidates[class] = queue.iter().position(|w| !self.blocked(&w.job));
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
    fn evict_oldest_before(&mut self, seq: u64) -> Option<Job> {
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
