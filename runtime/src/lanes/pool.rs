//! The `thread_pool` lane: bounded, priority-ordered admission onto magpie's
//! workers, with overflow policies, reentrancy limits and starvation aging.
//! `lanes/README.md` states the admission order and the aging bound.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use super::spec::{OverflowPolicy, Priority, ThreadPoolSpec};
use crate::rt::Handle;
use crate::worker_id::current_worker_id;

/// Jobs one lane task runs back to back before it yields its worker.
const JOBS_PER_TASK: u32 = 64;

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
}

/// A `thread_pool` lane over a runtime's workers. Cloning gives another
/// handle to the same lane.
#[derive(Clone)]
pub struct PoolLane {
    shared: Arc<PoolShared>,
}

struct PoolShared {
    width: usize,
    capacity: Option<usize>,
    overflow: OverflowPolicy,
    aging_step: u64,
    handle: Handle,
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
    next_seq: u64,
    closed: bool,
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
    /// A lane running on `handle`'s workers.
    pub fn new(spec: &ThreadPoolSpec, handle: Handle) -> PoolLane {
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
                handle,
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
        self.submit_batch(vec![job])
    }

    /// Submits jobs that became ready together: they share one enqueue
    /// order, so among them the component id, then the index, breaks ties.
    /// They are admitted best key first, so at capacity the batch keeps its
    /// best jobs.
    pub fn submit_batch(&self, mut jobs: Vec<Job>) -> Admission {
        jobs.sort_by_key(|j| (j.priority, j.component, j.index));
        let mut adm = Admission::default();
        let mut dropped: Vec<(Job, DropReason)> = Vec::new();
        let mut start: Vec<Job> = Vec::new();
        {
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
                    start.push(job);
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
        }
        for (job, why) in dropped {
            if let Some(then) = (job.run)(Dispatch::Dropped(why)) {
                then();
            }
        }
        for job in start {
            self.spawn(job);
        }
        adm
    }

    /// Runs `job` in a runtime task that keeps its slot: when a job ends and
    /// another is ready, the same task runs it (no spawn per job), yielding
    /// its worker every `JOBS_PER_TASK` jobs so other tasks get a turn.
    fn spawn(&self, job: Job) {
        let lane = self.clone();
        // Detached: the lane's own counters say when it has finished.
        drop(self.shared.handle.spawn(async move {
            let mut job = job;
            let mut ran = 0u32;
            loop {
                let worker_id = current_worker_id();
                let (component, reentrant, priority) = (job.component, job.reentrant, job.priority);
                let run = job.run;
                let outcome = catch_unwind(AssertUnwindSafe(|| run(Dispatch::Run { worker_id })));
                let next = lane.finish(component, reentrant, priority, worker_id, outcome.is_err());
                if let Ok(Some(then)) = outcome {
                    then();
                }
                let Some(next) = next else {
                    return;
                };
                job = next;
                ran += 1;
                if ran % JOBS_PER_TASK == 0 {
                    crate::rt::yield_now().await;
                }
            }
        }));
    }

    /// The bookkeeping of a finished job. Returns the next job for the
    /// finishing task to run, if one was started; spawns any others.
    fn finish(
        &self,
        component: usize,
        reentrant: bool,
        priority: Priority,
        worker_id: Option<usize>,
        panicked: bool,
    ) -> Option<Job> {
        let mut next = {
            let mut s = self.shared.lock();
            s.active -= 1;
            if !reentrant {
                if let Some(n) = s.running_of.get_mut(&component) {
                    *n -= 1;
                    if *n == 0 {
                        s.running_of.remove(&component);
                    }
                }
            }
            s.stats.completed += 1;
            s.stats.completed_by_priority[usize::from(priority.rank())] += 1;
            s.stats.panicked += u64::from(panicked);
            if let Some(w) = worker_id {
                s.stats.worker_ids.insert(w);
            }
            let next = self.pick_all(&mut s);
            if s.active == 0 && s.waiting == 0 {
                self.shared.idle.notify_all();
            }
            next
        }
        .into_iter();
        let mine = next.next();
        for job in next {
            self.spawn(job);
        }
        mine
    }

    /// Starts waiting jobs while slots are free; returns them to spawn.
    fn pick_all(&self, s: &mut PoolState) -> Vec<Job> {
        let mut out = Vec::new();
        while s.active < self.shared.width {
            match s.pick(self.shared.aging_step) {
                Some(job) => {
                    s.start(&job);
                    out.push(job);
                }
                None => break,
            }
        }
        out
    }

    /// Blocks until nothing is waiting or running (the region barrier and
    /// the drain).
    pub fn wait_idle(&self) {
        let mut s = self.shared.lock();
        while s.active > 0 || s.waiting > 0 {
            s = self
                .shared
                .idle
                .wait(s)
                .unwrap_or_else(PoisonError::into_inner);
        }
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

impl PoolShared {
    fn lock(&self) -> MutexGuard<'_, PoolState> {
        // A job's panic is caught outside the lock; a poisoned lock would
        // mean a bug in the lane itself, whose state changes are each
        // complete before any call that could panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl PoolState {
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
