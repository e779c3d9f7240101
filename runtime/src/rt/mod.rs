//! The async runtime: futures on the same worker loop as typed tasks.
//!
//! A future becomes a task in one allocation (magpie-core's task cell), is
//! queued as a [`Notified`] in exactly the queues typed tasks use (LIFO slot,
//! ring, global inject queue) and is polled by the workers of
//! [`sched`](crate::sched). The protocol notes are in `README.md` beside this
//! file.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant as StdInstant};

use magpie_core::affinity;
use magpie_core::park::{ParkResult, Parker};
use magpie_core::queue::Local;
use magpie_core::rng::XorShift64;
// Plain std for the runtime's own plumbing: it is not a loom model (the
// protocols it relies on are, in magpie-core), and `Wake` needs std's `Arc`.
use magpie_core::task::{self as core_task, Notified, OwnedTasks, Schedule};
use std::sync::{Arc, Mutex};
use std::thread;

use crate::config::DEFAULT_SEED;
use crate::io::driver::PollerGuard;
use crate::io::IoDriver;
use crate::metrics::{MetricsSnapshot, WorkerMetrics};
use crate::sched::tiered::{IdleAction, TieredIdle};
use crate::sched::{self, Core, Found, LifoMode, LocalMode, ParkPrep, Parts, Shared, Worker};
use crate::time::{self, Driver};
use crate::worker_id;

mod blocking;
mod context;
pub(crate) mod coop;
mod current;
mod ext;
mod join_set;
mod local;
mod metrics;
mod park;
mod shield;
pub mod task;

pub use blocking::{block_in_place, spawn_blocking};
pub use context::EnterGuard;
pub use core_task::{AbortHandle, JoinError, TaskId};
pub use join_set::JoinSet;
pub use metrics::{RuntimeMetrics, WorkerCounters};
pub use shield::{shield, Shield};

/// How many tasks a worker polls between two looks at the timer wheel.
const TIMER_CHECK_INTERVAL: u32 = 61;

/// Builds a [`Runtime`]: `Runtime::builder().worker_threads(2).build()`.
#[derive(Clone, Debug)]
pub struct Builder {
    workers: usize,
    start_paused: bool,
    seed: u64,
    steal_tries: u32,
    spin_iters: u32,
    park_timeout: Duration,
    pin_threads: bool,
    thread_name: String,
    /// `spawn_blocking`'s pool (`blocking.rs`).
    max_blocking_threads: usize,
    thread_keep_alive: Duration,
    /// Multi-thread or current-thread (`current.rs`).
    flavor: current::Flavor,
}

impl Default for Builder {
    fn default() -> Self {
        Self {
            workers: affinity::available_cores(),
            start_paused: false,
            seed: DEFAULT_SEED,
            steal_tries: 4,
            spin_iters: 200,
            park_timeout: Duration::from_micros(200),
            pin_threads: false,
            thread_name: "magpie-rt-worker".to_string(),
            max_blocking_threads: blocking::DEFAULT_MAX_BLOCKING_THREADS,
            thread_keep_alive: blocking::DEFAULT_KEEP_ALIVE,
            flavor: current::Flavor::MultiThread,
        }
    }
}

impl Builder {
    /// Number of worker threads (default: the available cores). At least 1.
    /// Ignored by the current-thread flavour.
    pub fn worker_threads(mut self, n: usize) -> Self {
        self.workers = n;
        self
    }

    /// Start with the clock paused: time moves only through
    /// [`time::advance`](crate::time::advance). For tests.
    pub fn start_paused(mut self, paused: bool) -> Self {
        self.start_paused = paused;
        self
    }

    /// Pin worker `i` to core `i % cores` (Linux; default off).
    pub fn pin_threads(mut self, pin: bool) -> Self {
        self.pin_threads = pin;
        self
    }

    /// Prefix of the worker threads' names.
    pub fn thread_name(mut self, name: impl Into<String>) -> Self {
        self.thread_name = name.into();
        self
    }

    /// Starts the workers.
    pub fn build(self) -> io::Result<Runtime> {
        if self.workers == 0 && self.flavor == current::Flavor::MultiThread {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "worker_threads must be at least 1",
            ));
        }
        Runtime::start(self)
    }
}

/// A multi-threaded runtime for futures. Dropping it shuts it down: workers
/// stop, tasks that have not finished are dropped, and their `JoinHandle`s
/// resolve to a cancelled [`JoinError`].
pub struct Runtime {
    handle: Handle,
    threads: Vec<thread::JoinHandle<WorkerMetrics>>,
    /// The current-thread flavour's one worker, run by `block_on`
    /// (`current.rs`); `None` with worker threads.
    current: Option<current::CurrentCore>,
}

/// A cheap, cloneable reference to a runtime, for spawning from anywhere.
#[derive(Clone)]
pub struct Handle {
    inner: Arc<RtShared>,
}

struct RtShared {
    sched: Shared<Notified<Handle>>,
    owned: OwnedTasks<Handle>,
    driver: Driver,
    /// The I/O driver (`../io/`): its poller is where the last worker to
    /// park sleeps.
    io: Arc<IoDriver>,
    /// Tasks woken after the queues closed, dropped (cancelled) by the
    /// shutdown sequence rather than inside someone's waker.
    late: Mutex<Vec<Notified<Handle>>>,
    spin_iters: u32,
    park_timeout: Duration,
    /// The tokio-shaped additions (timer parking, auto-advance, metrics,
    /// the blocking pool, background shutdown): `ext.rs`.
    ext: ext::Ext,
}

thread_local! {
    /// The runtime whose worker (or `block_on`) this thread is running.
    static CURRENT: RefCell<Option<Handle>> = const { RefCell::new(None) };
    /// This worker's scheduling state, present only while one of its tasks is
    /// polled, so that the task's wakes and spawns reach the local queues.
    static WORKER: RefCell<Option<Box<AsyncWorker>>> = const { RefCell::new(None) };
    /// Set on worker threads and inside `block_on`: a nested `block_on` would
    /// block a thread the runtime needs.
    static IN_RUNTIME: Cell<bool> = const { Cell::new(false) };
}

impl Runtime {
    /// A [`Builder`] with the defaults.
    pub fn builder() -> Builder {
        Builder::default()
    }

    fn start(b: Builder) -> io::Result<Runtime> {
        let current_thread = b.flavor == current::Flavor::CurrentThread;
        let workers = if current_thread { 1 } else { b.workers };
        let (sched, owned_parts) =
            Shared::new(workers, b.steal_tries, LifoMode::Owner, LocalMode::Ring);
        let driver = if b.start_paused {
            Driver::new_paused()
        } else {
            Driver::new()
        };
        let io = Arc::new(IoDriver::new()?);
        let inner = Arc::new(RtShared {
            sched,
            owned: OwnedTasks::new((workers * 4).next_power_of_two()),
            driver,
            io,
            late: Mutex::new(Vec::new()),
            spin_iters: b.spin_iters,
            park_timeout: b.park_timeout,
            ext: ext::Ext::new(&b, workers),
        });
        // A timer that became the earliest wakes a parked worker so it
        // re-computes its sleep. Weak: the driver lives inside `inner`.
        let weak = Arc::downgrade(&inner);
        inner.driver.set_unparker(move || {
            if let Some(inner) = weak.upgrade() {
                park::on_earlier_timer(&inner);
            }
        });
        inner.ext.blocking.set_runtime(Arc::downgrade(&inner));
        let handle = Handle { inner };
        if current_thread {
            let (local, parker) = owned_parts.into_iter().next().expect("one worker");
            parker.set_driver_wake(handle.inner.io.wake_hook());
            let core = current::CurrentCore::new(&handle, local, parker, b.seed);
            return Ok(Runtime {
                handle,
                threads: Vec::new(),
                current: Some(core),
            });
        }
        let cores = affinity::available_cores();
        let mut threads = Vec::with_capacity(workers);
        for (id, (local, parker)) in owned_parts.into_iter().enumerate() {
            // io/README.md, P2: an unpark reaches a worker asleep in the
            // poller through the poller's waker.
            parker.set_driver_wake(handle.inner.io.wake_hook());
            let worker_handle = handle.clone();
            let seed = b.seed;
            let pin = b.pin_threads;
            let spawned = thread::Builder::new()
                .name(format!("{}-{id}", b.thread_name))
                .spawn(move || {
                    if pin {
                        let _ = affinity::pin_current_thread(id % cores);
                    }
                    worker_main(worker_handle, id, local, parker, seed)
                });
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => {
                    let rt = Runtime {
                        handle,
                        threads,
                        current: None,
                    };
                    drop(rt);
                    return Err(e);
                }
            }
        }
        Ok(Runtime {
            handle,
            threads,
            current: None,
        })
    }

    /// A handle for spawning from other threads.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Spawns `future` onto the workers.
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn(future)
    }

    /// Runs `future` to completion on the calling thread, with this runtime
    /// as the context for `spawn`, `sleep` and friends. Panics if called from
    /// a worker of any magpie runtime or from inside another `block_on`: that
    /// would block a thread the runtime itself needs.
    ///
    /// On the current-thread flavour this thread also runs the spawned
    /// tasks, the timers and the I/O driver while it waits (README, "The
    /// current-thread flavour").
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        match &self.current {
            Some(core) => core.block_on(&self.handle, future),
            None => self.handle.block_on(future),
        }
    }

    /// Shuts the runtime down, waiting at most `timeout` for the workers to
    /// finish the polls they are in. Tasks not yet finished are dropped and
    /// their joiners see a cancelled [`JoinError`]. Workers still busy when
    /// the timeout expires are left to finish on their own (detached).
    ///
    /// # Panics
    /// On one of this runtime's own threads (see [`Drop`](#impl-Drop-for-Runtime)).
    pub fn shutdown_timeout(mut self, timeout: Duration) {
        self.refuse_on_own_thread();
        if !self.handle.inner.ext.is_detached() {
            self.shutdown(Some(timeout));
        }
    }

    /// Number of worker threads.
    pub fn num_workers(&self) -> usize {
        self.handle.inner.sched.workers
    }

    fn shutdown(&mut self, timeout: Option<Duration>) -> MetricsSnapshot {
        let inner = &self.handle.inner;
        let _ = inner.sched.gate.close();
        inner.sched.initiate_done();
        let deadline = timeout.map(|t| StdInstant::now() + t);
        let mut per_worker = Vec::new();
        for t in self.threads.drain(..) {
            if let Some(deadline) = deadline {
                while !t.is_finished() && StdInstant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(1));
                }
                if !t.is_finished() {
                    continue; // detached
                }
            }
            per_worker.push(t.join().unwrap_or_default());
        }
        if let Some(core) = &self.current {
            core.shutdown(inner);
        }
        inner.ext.blocking.shutdown(deadline);
        finish_shutdown(inner);
        MetricsSnapshot::from_workers(per_worker)
    }
}

/// The end of every shutdown, once the workers stopped (or were detached):
/// workers dropped what was in their own queues on the way out; drop
/// (cancel) what is left in the shared places, then every live task.
fn finish_shutdown(inner: &RtShared) {
    for task in inner.sched.inject.drain() {
        drop(task);
    }
    drain_late(inner);
    inner.owned.close_and_shutdown_all();
    drain_late(inner);
    inner.ext.blocking.close_and_shutdown_all();
    inner.driver.shutdown();
    // io/README.md, S2: sockets still registered (held outside the
    // cancelled tasks) get the shutdown error instead of a hang.
    inner.io.shutdown();
}

fn drain_late(inner: &RtShared) {
    loop {
        let batch = std::mem::take(&mut *inner.late.lock().unwrap_or_else(|e| e.into_inner()));
        if batch.is_empty() {
            return;
        }
        drop(batch);
    }
}

/// Dropping the runtime shuts it down and waits for its workers (and its
/// running blocking tasks) to stop.
///
/// # Panics
/// When dropped on one of its own threads (inside one of its tasks, or a
/// `spawn_blocking` closure): that thread would wait for itself. The runtime
/// is then shut down in the background (as by
/// [`shutdown_background`](Runtime::shutdown_background)) before the panic,
/// so its other tasks are still cancelled and their joiners woken.
impl Drop for Runtime {
    fn drop(&mut self) {
        self.refuse_on_own_thread();
        if !self.handle.inner.ext.is_detached() {
            let _ = self.shutdown(None);
        }
    }
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("workers", &self.handle.inner.sched.workers)
            .field("live_tasks", &self.handle.inner.owned.len())
            .finish()
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("workers", &self.inner.sched.workers)
            .finish_non_exhaustive()
    }
}

impl Handle {
    /// Spawns `future` onto the runtime's workers. Spawned from one of its
    /// workers, the task goes to that worker's LIFO slot; from elsewhere, to
    /// the global queue.
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let (notified, join) = self.inner.owned.bind(future, self.clone());
        if let Some(task) = notified {
            self.schedule_task(task, false);
        }
        JoinHandle { inner: join }
    }

    /// The runtime's I/O driver.
    pub(crate) fn io_driver(&self) -> &Arc<IoDriver> {
        &self.inner.io
    }

    /// The handle of the runtime this thread is running in, if any.
    pub fn try_current() -> Option<Handle> {
        CURRENT.with(|c| c.borrow().clone())
    }

    /// The handle of the current runtime; panics outside one.
    pub fn current() -> Handle {
        Self::try_current().expect(
            "magpie_runtime::Handle::current() must be called from within a magpie runtime \
             (a task, a worker thread or Runtime::block_on)",
        )
    }

    fn schedule_task(&self, task: Notified<Handle>, is_yield: bool) {
        // A wake or spawn on one of our own workers, while it polls a task,
        // goes to that worker's queues; `try_borrow_mut` fails only if the
        // worker is inside its own queue code (a destructor run there), and
        // then the global queue is the safe choice.
        let task = WORKER.with(|w| match w.try_borrow_mut() {
            Ok(mut slot) => match slot.as_mut() {
                Some(worker) if Arc::ptr_eq(&worker.handle.inner, &self.inner) => {
                    let mut parts = worker.parts();
                    if is_yield {
                        parts.push_yielded(task);
                    } else {
                        parts.spawn_local(task);
                    }
                    None
                }
                _ => Some(task),
            },
            Err(_) => Some(task),
        });
        if let Some(task) = task {
            self.schedule_remote(task);
        }
    }

    fn schedule_remote(&self, task: Notified<Handle>) {
        let shared = &self.inner.sched;
        if !shared.gate.try_spawn(1) {
            self.bury(task);
            return;
        }
        if let Err(task) = shared.inject.push(task) {
            let _ = shared.gate.complete(1);
            self.bury(task);
            return;
        }
        shared.notify_parked();
    }

    /// The runtime is shutting down: keep the task for the shutdown sequence
    /// to drop, rather than running its destructor inside a waker.
    fn bury(&self, task: Notified<Handle>) {
        self.inner
            .late
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(task);
    }
}

impl Schedule for Handle {
    #[inline]
    fn schedule(&self, task: Notified<Self>) {
        self.schedule_task(task, false);
    }

    /// Woken while it was polled (`yield_now`, or another wake): to the back
    /// of the ring, behind the work already queued, never the LIFO slot.
    #[inline]
    fn yield_now(&self, task: Notified<Self>) {
        self.schedule_task(task, true);
    }

    fn owned_tasks(&self) -> &OwnedTasks<Self> {
        &self.inner.owned
    }
}

/// Spawns `future` onto the current runtime. Panics outside a runtime.
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match Handle::try_current() {
        Some(h) => h.spawn(future),
        None => panic!(
            "magpie_runtime::spawn must be called from within a magpie runtime \
             (a task, a worker thread or Runtime::block_on)"
        ),
    }
}

/// Yields to the scheduler once: the task goes behind the work already
/// queued on its worker, then runs again.
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

/// The future [`yield_now`] returns.
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        // A wake during the poll marks the task NOTIFIED; the poll harness
        // then hands it to `Schedule::yield_now`, the back of the ring.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// A task's handle: a future of its output, or a [`JoinError`] if it was
/// cancelled or panicked. Dropping it detaches the task.
pub struct JoinHandle<T> {
    inner: core_task::JoinHandle<T>,
}

impl<T> JoinHandle<T> {
    /// Cancels the task. A task inside a [`shield`] is cancelled when the
    /// shield ends.
    pub fn abort(&self) {
        self.inner.abort();
    }

    /// Whether the task has finished (output ready, cancelled or panicked).
    pub fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }

    /// The task's id.
    pub fn id(&self) -> TaskId {
        self.inner.id()
    }

    /// A handle that can abort the task without owning its output.
    pub fn abort_handle(&self) -> AbortHandle {
        self.inner.abort_handle()
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let spent = std::task::ready!(coop::poll_proceed(cx));
        let out = Pin::new(&mut self.inner).poll(cx);
        if out.is_pending() {
            spent.refund();
        }
        out
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("id", &self.id())
            .finish()
    }
}

/// Makes a thread part of a runtime (worker or `block_on`) for its lifetime.
struct RuntimeThread {
    previous: Option<Handle>,
    _time: time::EnterGuard,
}

impl RuntimeThread {
    fn enter(handle: &Handle) -> Self {
        IN_RUNTIME.with(|r| r.set(true));
        let previous = CURRENT.with(|c| c.replace(Some(handle.clone())));
        Self {
            previous,
            _time: time::enter(&handle.inner.driver),
        }
    }
}

impl Drop for RuntimeThread {
    fn drop(&mut self) {
        CURRENT.with(|c| *c.borrow_mut() = self.previous.take());
        IN_RUNTIME.with(|r| r.set(false));
    }
}

/// An async worker's scheduling state: what the loop owns between polls and
/// lends to the thread-local [`WORKER`] during them.
struct AsyncWorker {
    core: Core<Notified<Handle>>,
    rng: XorShift64,
    metrics: WorkerMetrics,
    handle: Handle,
    polls_since_timers: u32,
}

impl Worker for AsyncWorker {
    type Task = Notified<Handle>;

    #[inline(always)]
    fn parts(&mut self) -> Parts<'_, Notified<Handle>> {
        Parts {
            core: &mut self.core,
            shared: &self.handle.inner.sched,
            rng: &mut self.rng,
            metrics: &mut self.metrics,
        }
    }
}

/// Nanoseconds since the first call in this process.
fn monotonic_ns() -> u64 {
    static EPOCH: std::sync::OnceLock<StdInstant> = std::sync::OnceLock::new();
    EPOCH.get_or_init(StdInstant::now).elapsed().as_nanos() as u64
}

fn worker_main(
    handle: Handle,
    id: usize,
    local: Local<Notified<Handle>>,
    parker: Parker,
    seed: u64,
) -> WorkerMetrics {
    let _enter = RuntimeThread::enter(&handle);
    let _own = ext::OwnThread::worker(&handle.inner);
    let previous_id = worker_id::set_current_worker_id(Some(id));
    let inner = handle.inner.clone();
    let mut worker = Box::new(AsyncWorker {
        core: Core::new(&inner.sched, id, local, parker, monotonic_ns),
        rng: XorShift64::new(seed ^ (id as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        metrics: WorkerMetrics::default(),
        handle,
        polls_since_timers: 0,
    });
    if sched::enter(&mut *worker) {
        worker = run_loop(worker, &inner);
    }
    // Leaving: drop (cancel) whatever is still in our own queues.
    while let Some(task) = worker.core.local.pop() {
        drop(task);
    }
    drop(worker.core.take_lifo());
    worker.metrics.spurious_wakeups += worker.core.parker.spurious_wakeups();
    worker_id::set_current_worker_id(previous_id);
    let metrics = worker.metrics.clone();
    inner.ext.publish(id, &metrics);
    drop(worker);
    ext::worker_exited(&inner);
    metrics
}

/// Feature `io-probe`: tells the probe where each task was found.
#[cfg(all(feature = "io-probe", not(loom)))]
struct ProbeTrace;

#[cfg(all(feature = "io-probe", not(loom)))]
impl sched::TraceHooks for ProbeTrace {
    #[inline]
    fn event(&mut self, _worker: usize, event: sched::SchedEvent) {
        use crate::io::probe::{set_found, Found as F};
        if let sched::SchedEvent::Run { source } = event {
            set_found(match source {
                sched::Source::Lifo => F::Lifo,
                sched::Source::Local => F::Local,
                sched::Source::Global => F::Global,
                sched::Source::Steal { .. } => F::Steal,
            });
        }
    }
}

fn run_loop(mut worker: Box<AsyncWorker>, inner: &RtShared) -> Box<AsyncWorker> {
    #[cfg(all(feature = "io-probe", not(loom)))]
    let knobs = crate::io::probe::knobs();
    #[cfg(all(feature = "io-probe", not(loom)))]
    let spin_iters = knobs.spin.unwrap_or(inner.spin_iters);
    #[cfg(not(all(feature = "io-probe", not(loom))))]
    let spin_iters = inner.spin_iters;
    let mut idle = TieredIdle::adaptive(spin_iters, inner.park_timeout);
    #[cfg(not(all(feature = "io-probe", not(loom))))]
    let mut trace = sched::NoopTrace;
    #[cfg(all(feature = "io-probe", not(loom)))]
    let mut trace = ProbeTrace;
    loop {
        match sched::find_task(&mut *worker, &mut trace) {
            Found::Task(task) => {
                idle.on_work();
                worker.polls_since_timers += 1;
                if worker.polls_since_timers >= TIMER_CHECK_INTERVAL {
                    worker = fire_timers(worker, inner);
                }
                WORKER.with(|w| *w.borrow_mut() = Some(worker));
                #[cfg(all(feature = "io-probe", not(loom)))]
                let t0 = crate::io::probe::now();
                coop::with_budget(|| task.run());
                #[cfg(all(feature = "io-probe", not(loom)))]
                crate::io::probe::task_poll(crate::io::probe::now() - t0);
                worker = WORKER
                    .with(|w| w.borrow_mut().take())
                    .expect("the worker's context is back after the poll");
            }
            Found::Exit => return worker,
            Found::Idle => {
                let (w, fired) = fire_timers_counted(worker, inner);
                worker = w;
                if fired > 0 {
                    idle.on_work();
                    continue;
                }
                // Feature `io-probe`'s switch `look_first` (io/README.md,
                // "Where the echo tail came from"): look at the poller when
                // an idle spell starts, before its spin.
                #[cfg(all(feature = "io-probe", not(loom)))]
                if knobs.look_first && idle.spell_rounds() == 0 {
                    let (w, told) = poll_io_now(worker, inner);
                    worker = w;
                    if told > 0 {
                        idle.on_work();
                        continue;
                    }
                }
                match idle.next_action() {
                    IdleAction::Spin => std::hint::spin_loop(),
                    IdleAction::Yield => {
                        // io/README.md, P3: look at the poller on the yield tier.
                        let (w, told) = poll_io_now(worker, inner);
                        worker = w;
                        if told > 0 {
                            idle.on_work();
                            continue;
                        }
                        // Feature `io-probe`'s switch `no_yield`: keep the core
                        // (go on to the park) while sockets are registered.
                        #[cfg(all(feature = "io-probe", not(loom)))]
                        if knobs.no_yield && inner.io.has_registrations() {
                            continue;
                        }
                        #[cfg(all(feature = "io-probe", not(loom)))]
                        let t0 = crate::io::probe::now();
                        thread::yield_now();
                        #[cfg(all(feature = "io-probe", not(loom)))]
                        crate::io::probe::yielded(crate::io::probe::now() - t0);
                    }
                    IdleAction::Park(timeout) => {
                        match sched::prepare_park(&mut *worker, &mut trace) {
                            ParkPrep::Resume => idle.on_work(),
                            ParkPrep::Exit => return worker,
                            ParkPrep::Sleep => {
                                // io/README.md, P1-P2: the worker that gets
                                // the poller sleeps in it; the others on
                                // their futex.
                                let mut poller = inner.io.try_lock_poller();
                                #[cfg(all(feature = "io-probe", not(loom)))]
                                if poller.is_some() {
                                    crate::io::probe::set_look(crate::io::probe::Look::Park);
                                } else {
                                    crate::io::probe::park_no_poller(
                                        inner.io.metrics().in_driver == 0,
                                    );
                                }
                                let result =
                                    park::park_worker(&mut worker, inner, timeout, poller.as_mut());
                                if !sched::after_park(&mut *worker, result, &mut trace) {
                                    return worker;
                                }
                                let mut told = 0;
                                if let Some(mut poller) = poller {
                                    // P4-P5: dispatch, then let the poller go.
                                    let (w, n) = dispatch_io(worker, inner, &mut poller);
                                    worker = w;
                                    told = n;
                                    drop(poller);
                                    if told > 0 {
                                        idle.on_work();
                                    }
                                }
                                // Timers first: a woken timer's task lands in
                                // our LIFO slot before we search (as a searcher
                                // that finds work, we would wake a sibling).
                                let (w, fired) = fire_timers_counted(worker, inner);
                                worker = w;
                                idle.set_quiet(
                                    result == ParkResult::TimedOut && fired > 0 && told == 0,
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

fn fire_timers(worker: Box<AsyncWorker>, inner: &RtShared) -> Box<AsyncWorker> {
    let worker = fire_timers_counted(worker, inner).0;
    #[cfg(all(feature = "io-probe", not(loom)))]
    crate::io::probe::set_look(crate::io::probe::Look::Tick);
    // io/README.md, P3: a busy worker looks at the poller with the timers.
    poll_io_now(worker, inner).0
}

/// io/README.md, P3: a zero-timeout poll, if this worker gets the poller.
fn poll_io_now(worker: Box<AsyncWorker>, inner: &RtShared) -> (Box<AsyncWorker>, usize) {
    if !inner.io.has_registrations() {
        return (worker, 0);
    }
    match inner.io.try_lock_poller() {
        Some(mut poller) => {
            poller.poll(Some(Duration::ZERO));
            dispatch_io(worker, inner, &mut poller)
        }
        None => {
            #[cfg(all(feature = "io-probe", not(loom)))]
            {
                crate::io::probe::busy_poller();
                crate::io::probe::set_look(crate::io::probe::Look::Idle);
            }
            (worker, 0)
        }
    }
}

/// io/README.md, P4: wakes the tasks of the last poll's events with the
/// worker lent to the thread-local context, so they land in its own queues;
/// if more than one registration was told, one more worker is woken to
/// share them.
fn dispatch_io(
    worker: Box<AsyncWorker>,
    inner: &RtShared,
    poller: &mut PollerGuard<'_>,
) -> (Box<AsyncWorker>, usize) {
    WORKER.with(|w| *w.borrow_mut() = Some(worker));
    let told = poller.dispatch();
    let worker = WORKER
        .with(|w| w.borrow_mut().take())
        .expect("the worker's context is back after the I/O dispatch");
    if told > 1 {
        inner.sched.notify_parked();
    }
    (worker, told)
}

/// Fires due timers with the worker lent to the thread-local context, so the
/// wakes land in this worker's own queues.
fn fire_timers_counted(
    mut worker: Box<AsyncWorker>,
    inner: &RtShared,
) -> (Box<AsyncWorker>, usize) {
    worker.polls_since_timers = 0;
    inner.ext.publish(worker.core.id, &worker.metrics);
    let Some(next) = inner.driver.next_expiration() else {
        return (worker, 0);
    };
    let now = inner.driver.clock().now();
    if next > now {
        return (worker, 0);
    }
    WORKER.with(|w| *w.borrow_mut() = Some(worker));
    let fired = inner.driver.process(now);
    let worker = WORKER
        .with(|w| w.borrow_mut().take())
        .expect("the worker's context is back after the timers");
    (worker, fired)
}

/// How long until the earliest timer, if there is one.
fn until_next_timer(inner: &RtShared) -> Option<Duration> {
    let next = inner.driver.next_expiration()?;
    let now = inner.driver.clock().now();
    Some(next.saturating_duration_since(now))
}
