//! The lanes' own workers: magpie's worker loop (`crate::sched`) driving
//! thread-pool lane runners, plus the timer wheel fixed-rate lanes sleep on.
//!
//! This is a face beside `rt/`, `executor.rs` and `process/`: it uses the
//! shared loop (`sched::{enter, find_task, prepare_park, after_park}`) with
//! its own [`Worker`] impl, whose task is a lane runner (`pool::LaneTask`).
//! `lanes/README.md`, "The lane workers", has the design.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant as StdInstant};

use magpie_core::affinity;
use magpie_core::park::Parker;
use magpie_core::queue::Local;
use magpie_core::rng::XorShift64;

use super::pool::LaneTask;
use crate::config::DEFAULT_SEED;
use crate::metrics::WorkerMetrics;
use crate::sched::tiered::{IdleAction, TieredIdle};
use crate::sched::{
    self, Core, Found, LifoMode, LocalMode, NoopTrace, ParkPrep, Parts, Shared, Worker,
};
use crate::time::{self, Driver};
use crate::worker_id;

/// Lane runs between two looks at the timer wheel while a worker is busy.
const TIMER_CHECK_INTERVAL: u32 = 61;

/// The first park timeout of an idle lane worker: 10 ms, where the other
/// faces use 200 µs. Timeouts are a safety net, not how work is found (a
/// submission wakes a parked worker; a due timer bounds the park). Measured
/// (`lanes_admission`, a job every 1 ms on an idle 2-worker pool, load
/// average 12-14 on 2 cores, so a first look): with 200 µs, 5 rounds of 6
/// had a dispatch p50 of 3-4 ms (about one OS scheduler tick); with 10 or
/// 50 ms, 2 rounds of 13 did, the others 30-51 µs. Why is not established. A candidate: a worker back from a
/// timeout becomes the searcher, so a submission then wakes nobody and
/// waits for that worker, which a loaded OS may not run for a tick.
pub const LANE_PARK_TIMEOUT: Duration = Duration::from_millis(10);

/// Builds a [`LaneRuntime`].
#[derive(Clone, Debug)]
pub struct LaneRuntimeBuilder {
    workers: usize,
    seed: u64,
    spin_iters: u32,
    park_timeout: Duration,
    pin_threads: bool,
    cpus: Option<Vec<usize>>,
    thread_name: String,
}

impl LaneRuntimeBuilder {
    /// Worker threads (at least 1; default: the available cores).
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n.max(1);
        self
    }

    /// Seed of the workers' victim choice.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Empty rounds a worker spins before it yields and parks (default 200).
    pub fn spin_iters(mut self, n: u32) -> Self {
        self.spin_iters = n;
        self
    }

    /// First park timeout of an idle worker (default [`LANE_PARK_TIMEOUT`];
    /// it doubles per consecutive park up to `MAX_PARK_TIMEOUT`).
    pub fn park_timeout(mut self, d: Duration) -> Self {
        self.park_timeout = d;
        self
    }

    /// Pins worker `i` to core `i % cores` (Linux; ignored elsewhere).
    pub fn pin_threads(mut self, pin: bool) -> Self {
        self.pin_threads = pin;
        self
    }

    /// Restricts every worker to the CPUs numbered in `cpus` (as `taskset`
    /// counts them; Linux). Takes precedence over `pin_threads`. A worker
    /// that cannot be restricted runs unrestricted, and
    /// [`LaneRuntime::placement_errors`] says why.
    pub fn cpu_affinity(mut self, cpus: Vec<usize>) -> Self {
        self.cpus = Some(cpus);
        self
    }

    /// Worker thread names are `{name}-{id}` (default `magpie-lane-worker`).
    /// Linux shows a thread's first 15 bytes only (`/proc/.../comm`).
    pub fn thread_name(mut self, name: impl Into<String>) -> Self {
        self.thread_name = name.into();
        self
    }

    /// Starts the workers.
    pub fn build(self) -> io::Result<LaneRuntime> {
        LaneRuntime::start(self)
    }
}

/// What every lane worker and every lane on them share.
pub(crate) struct HostShared {
    pub(crate) sched: Shared<LaneTask>,
    /// The timer wheel fixed-rate lanes sleep on; the workers fire it.
    pub(crate) driver: Driver,
    spin_iters: u32,
    park_timeout: Duration,
}

impl HostShared {
    /// Puts `n` runners of one lane on the workers from any thread (the
    /// global queue, counted by the gate first, then one parked worker
    /// woken). Refused once the runtime is shutting down: the runners are
    /// dropped, which abandons their lane's admitted jobs
    /// (`LaneTask`'s `Drop`).
    pub(crate) fn schedule(&self, tasks: Vec<LaneTask>) {
        let n = tasks.len() as u64;
        if n == 0 {
            return;
        }
        let sched = &self.sched;
        if !sched.gate.try_spawn(n) {
            drop(tasks);
            return;
        }
        let pushed = if n == 1 {
            let mut tasks = tasks;
            let task = tasks.pop().expect("one task");
            sched.inject.push(task).map_err(|t| vec![t])
        } else {
            sched.inject.push_batch(tasks)
        };
        match pushed {
            Ok(()) => {
                sched.notify_parked();
            }
            Err(back) => {
                let _ = sched.gate.complete(back.len() as u64);
                drop(back);
            }
        }
    }
}

/// The workers thread-pool lanes run on: magpie's worker loop with a lane
/// runner as its task, and the timer wheel of wall-clock fixed-rate lanes.
/// Any number of lanes share one `LaneRuntime`; each keeps its own
/// `max_threads` bound. Dropping it stops and joins the workers.
pub struct LaneRuntime {
    shared: Arc<HostShared>,
    threads: Vec<JoinHandle<()>>,
    /// (worker, why) for each worker whose pinning or CPU set failed.
    placement_errors: Vec<(usize, String)>,
}

impl fmt::Debug for LaneRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LaneRuntime")
            .field("workers", &self.shared.sched.workers)
            .finish_non_exhaustive()
    }
}

impl LaneRuntime {
    /// A builder with the defaults.
    pub fn builder() -> LaneRuntimeBuilder {
        LaneRuntimeBuilder {
            workers: affinity::available_cores(),
            seed: DEFAULT_SEED,
            spin_iters: 200,
            park_timeout: LANE_PARK_TIMEOUT,
            pin_threads: false,
            cpus: None,
            thread_name: "magpie-lane-worker".to_string(),
        }
    }

    /// `n` workers, the other settings default.
    pub fn new(n: usize) -> io::Result<LaneRuntime> {
        Self::builder().workers(n).build()
    }

    /// The number of workers.
    pub fn workers(&self) -> usize {
        self.shared.sched.workers
    }

    /// The workers whose requested placement (`pin_threads` or
    /// `cpu_affinity`) could not be applied, with the reason (the OS's
    /// error, or `Unsupported` off Linux). Empty when all were applied or
    /// none was asked for.
    pub fn placement_errors(&self) -> &[(usize, String)] {
        &self.placement_errors
    }

    pub(crate) fn shared(&self) -> &Arc<HostShared> {
        &self.shared
    }

    fn start(b: LaneRuntimeBuilder) -> io::Result<LaneRuntime> {
        let (sched, owned) = Shared::new(b.workers, 4, LifoMode::Owner, LocalMode::Ring);
        let shared = Arc::new(HostShared {
            sched,
            driver: Driver::new(),
            spin_iters: b.spin_iters,
            park_timeout: b.park_timeout,
        });
        // A timer that became the earliest wakes a parked worker so it
        // re-computes its sleep. Weak: the driver lives inside `shared`.
        let weak = Arc::downgrade(&shared);
        shared.driver.set_unparker(move || {
            if let Some(shared) = weak.upgrade() {
                shared.sched.notify_parked();
            }
        });
        let mut rt = LaneRuntime {
            shared,
            threads: Vec::with_capacity(b.workers),
            placement_errors: Vec::new(),
        };
        let cores = affinity::available_cores();
        // Each worker reports how its placement went before it enters the
        // loop, so `build` returns with every result known.
        let (placed_tx, placed_rx) = std::sync::mpsc::channel::<(usize, Option<String>)>();
        let cpus: Option<Arc<[usize]>> = b.cpus.map(Into::into);
        for (id, (local, parker)) in owned.into_iter().enumerate() {
            let shared = rt.shared.clone();
            let (seed, pin) = (b.seed, b.pin_threads);
            let (cpus, placed) = (cpus.clone(), placed_tx.clone());
            let spawned = thread::Builder::new()
                .name(format!("{}-{id}", b.thread_name))
                .spawn(move || {
                    let result = match (&cpus, pin) {
                        (Some(cpus), _) => Some(affinity::pin_current_thread_to_cpus(cpus)),
                        (None, true) => Some(affinity::pin_current_thread(id % cores)),
                        (None, false) => None,
                    };
                    let _ = placed.send((id, result.and_then(|r| r.err()).map(|e| e.to_string())));
                    drop(placed);
                    worker_main(&shared, id, local, parker, seed);
                });
            match spawned {
                Ok(t) => rt.threads.push(t),
                // Dropping `rt` stops the workers already started.
                Err(e) => return Err(e),
            }
        }
        drop(placed_tx);
        // Ends when every worker has reported (each sender is dropped).
        rt.placement_errors = placed_rx
            .iter()
            .filter_map(|(id, err)| err.map(|e| (id, e)))
            .collect();
        rt.placement_errors.sort();
        Ok(rt)
    }
}

impl Drop for LaneRuntime {
    fn drop(&mut self) {
        let sched = &self.shared.sched;
        let _ = sched.gate.close();
        sched.initiate_done();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // Runners still queued are dropped: each abandons its lane's
        // admitted jobs (they see `Dispatch::Dropped(Closed)`).
        drop(sched.inject.drain());
        self.shared.driver.shutdown();
    }
}

struct LaneWorker {
    core: Core<LaneTask>,
    rng: XorShift64,
    metrics: WorkerMetrics,
    shared: Arc<HostShared>,
    runs_since_timers: u32,
}

impl Worker for LaneWorker {
    type Task = LaneTask;

    #[inline(always)]
    fn parts(&mut self) -> Parts<'_, LaneTask> {
        Parts {
            core: &mut self.core,
            shared: &self.shared.sched,
            rng: &mut self.rng,
            metrics: &mut self.metrics,
        }
    }
}

fn monotonic_ns() -> u64 {
    static EPOCH: std::sync::OnceLock<StdInstant> = std::sync::OnceLock::new();
    EPOCH.get_or_init(StdInstant::now).elapsed().as_nanos() as u64
}

fn worker_main(
    shared: &Arc<HostShared>,
    id: usize,
    local: Local<LaneTask>,
    parker: Parker,
    seed: u64,
) {
    let _time = time::enter(&shared.driver);
    let previous_id = worker_id::set_current_worker_id(Some(id));
    let mut w = LaneWorker {
        core: Core::new(&shared.sched, id, local, parker, monotonic_ns),
        rng: XorShift64::new(seed ^ (id as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        metrics: WorkerMetrics::default(),
        shared: shared.clone(),
        runs_since_timers: 0,
    };
    if sched::enter(&mut w) {
        run_loop(&mut w);
    }
    // Leaving: runners still in our own queues are dropped (abandoning
    // their lanes' admitted jobs).
    while let Some(task) = w.core.local.pop() {
        drop(task);
    }
    drop(w.core.take_lifo());
    worker_id::set_current_worker_id(previous_id);
}

fn run_loop(w: &mut LaneWorker) {
    let mut idle = TieredIdle::new(w.shared.spin_iters, w.shared.park_timeout);
    let mut trace = NoopTrace;
    loop {
        match sched::find_task(w, &mut trace) {
            Found::Task(task) => {
                idle.on_work();
                w.runs_since_timers += 1;
                if w.runs_since_timers >= TIMER_CHECK_INTERVAL {
                    fire_timers(w);
                }
                if let Some(again) = task.run(w.core.id) {
                    // It ran its share of jobs and yields: behind the
                    // others, and the global queue gets a look first.
                    w.parts().push_yielded(again);
                }
            }
            Found::Exit => return,
            Found::Idle => {
                if fire_timers(w) > 0 {
                    idle.on_work();
                    continue;
                }
                match idle.next_action() {
                    IdleAction::Spin => std::hint::spin_loop(),
                    IdleAction::Yield => thread::yield_now(),
                    IdleAction::Park(timeout) => match sched::prepare_park(w, &mut trace) {
                        ParkPrep::Resume => idle.on_work(),
                        ParkPrep::Exit => return,
                        ParkPrep::Sleep => {
                            let timeout = until_next_timer(&w.shared.driver)
                                .map_or(timeout, |t| t.min(timeout));
                            let result = w.core.parker.park_timeout(timeout);
                            if !sched::after_park(w, result, &mut trace) {
                                return;
                            }
                        }
                    },
                }
            }
        }
    }
}

/// Fires the timers that are due; how many.
fn fire_timers(w: &mut LaneWorker) -> usize {
    w.runs_since_timers = 0;
    let driver = &w.shared.driver;
    let Some(next) = driver.next_expiration() else {
        return 0;
    };
    let now = driver.clock().now();
    if next > now {
        return 0;
    }
    driver.process(now)
}

fn until_next_timer(driver: &Driver) -> Option<Duration> {
    let next = driver.next_expiration()?;
    Some(next.saturating_duration_since(driver.clock().now()))
}

/// Wakes a thread blocked in [`block_on`].
struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `fut` to completion on the calling thread (the runner's), parking
/// it between polls, with `driver` as its timer. The runner uses it for
/// the wall-clock sleep of fixed-rate lanes; the lane workers fire the
/// timer. Not for a lane worker: it would block that worker.
pub(crate) fn block_on<F: Future>(driver: &Driver, fut: F) -> F::Output {
    let _time = time::enter(driver);
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        // A wake between the poll and here leaves the token set: `park`
        // returns at once. Spurious returns just poll again.
        thread::park();
    }
}
