//! The current-thread flavour (`Builder::new_current_thread()`): one worker
//! and no worker thread. The worker's scheduling state (an [`AsyncWorker`],
//! the same one a worker thread owns) sits in the runtime while nobody runs
//! it; `Runtime::block_on` takes it and runs the worker loop on the calling
//! thread, between polls of its own future, until that future is ready
//! (README, "The current-thread flavour").
//!
//! Nothing here is a second scheduler: tasks are found by `sched::find_task`,
//! parking is `sched::prepare_park` / `park::park_worker` (timer role,
//! auto-advance, sleeping in the I/O poller) / `sched::after_park`, exactly as
//! on a worker thread.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use magpie_core::park::Parker;
use magpie_core::queue::Local;
use magpie_core::rng::XorShift64;
use magpie_core::sync::atomic::{AtomicBool, Ordering};
use magpie_core::task::Notified;

use super::context::ThreadWaker;
use super::{
    coop, dispatch_io, ext, fire_timers, fire_timers_counted, monotonic_ns, park, poll_io_now,
    AsyncWorker, Builder, Handle, RtShared, RuntimeThread, IN_RUNTIME, TIMER_CHECK_INTERVAL,
    WORKER,
};
use crate::config::MAX_PARK_TIMEOUT;
use crate::metrics::WorkerMetrics;
use crate::sched::{self, Core, Found, NoopTrace, ParkPrep};

/// Which runtime [`Builder::build`] makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flavor {
    /// Worker threads (the default, `Runtime::builder()`).
    MultiThread,
    /// No worker thread: tasks run inside `Runtime::block_on`.
    CurrentThread,
}

thread_local! {
    /// Set while this thread drives a current-thread runtime (`Drive::run`).
    static DRIVING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this thread is driving a current-thread runtime: there is no
/// other worker to hand its tasks to (`block_in_place` refuses, as tokio's).
pub(super) fn driving_here() -> bool {
    DRIVING.with(|d| d.get())
}

/// Tasks `block_on` runs before it looks at its own future again when that
/// future was not woken (tokio's `event_interval` for the current-thread
/// scheduler is the same 61). A wake of the future ends the run early.
pub(super) const TASKS_PER_MAIN_POLL: u32 = TIMER_CHECK_INTERVAL;

impl Builder {
    /// A builder for the current-thread flavour (tokio's
    /// `Builder::new_current_thread`): no worker threads; spawned tasks,
    /// timers and I/O are driven by the thread inside `Runtime::block_on`,
    /// and make progress only while some thread is in it. `worker_threads`
    /// is ignored.
    pub fn new_current_thread() -> Builder {
        Builder {
            flavor: Flavor::CurrentThread,
            ..Builder::default()
        }
    }

    /// A builder for the multi-thread flavour: the same as
    /// `Runtime::builder()` (tokio's `Builder::new_multi_thread`).
    pub fn new_multi_thread() -> Builder {
        Builder::default()
    }

    /// Accepted for tokio compatibility: the timer and I/O drivers are
    /// always on.
    pub fn enable_all(self) -> Self {
        self
    }

    /// Accepted for tokio compatibility: the timer driver is always on.
    pub fn enable_time(self) -> Self {
        self
    }

    /// Accepted for tokio compatibility: the I/O driver is always on.
    pub fn enable_io(self) -> Self {
        self
    }
}

/// The current-thread runtime's one worker, while no `block_on` runs it.
pub(super) struct CurrentCore {
    slot: Mutex<Option<Box<AsyncWorker>>>,
    /// `block_on` callers on other threads waiting for the worker (tokio
    /// lets one thread drive at a time; the others poll only their own
    /// future and take the worker when it is given back).
    waiters: Mutex<Vec<Waker>>,
}

impl CurrentCore {
    /// The worker for runtime `handle`, with its gate token taken: between
    /// two `block_on`s it counts as an awake worker holding its (possibly
    /// non-empty) queues, exactly as a worker thread between two ticks.
    pub(super) fn new(
        handle: &Handle,
        local: Local<Notified<Handle>>,
        parker: Parker,
        seed: u64,
    ) -> Self {
        let inner = &handle.inner;
        let mut worker = Box::new(AsyncWorker {
            core: Core::new(&inner.sched, 0, local, parker, monotonic_ns),
            rng: XorShift64::new(seed ^ 0x9e37_79b9_7f4a_7c15),
            metrics: WorkerMetrics::default(),
            handle: handle.clone(),
            polls_since_timers: 0,
        });
        let entered = sched::enter(&mut *worker);
        debug_assert!(entered, "a new runtime's gate is open");
        Self {
            slot: Mutex::new(Some(worker)),
            waiters: Mutex::new(Vec::new()),
        }
    }

    fn take(&self) -> Option<Box<AsyncWorker>> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    fn has_worker(&self) -> bool {
        self.slot
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Gives the worker back and wakes the `block_on`s waiting for it.
    fn put_back(&self, worker: Box<AsyncWorker>) {
        *self.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(worker);
        let waiters = std::mem::take(&mut *self.waiters.lock().unwrap_or_else(|e| e.into_inner()));
        for w in waiters {
            w.wake();
        }
    }

    /// The runtime shuts down (its workers are stopped): drop (cancel) the
    /// tasks in the worker's own queues and leave, as a worker thread does
    /// on its way out. Idempotent.
    pub(super) fn shutdown(&self, inner: &RtShared) {
        let Some(mut worker) = self.take() else {
            return;
        };
        while let Some(task) = worker.core.local.pop() {
            drop(task);
        }
        drop(worker.core.take_lifo());
        worker.metrics.spurious_wakeups += worker.core.parker.spurious_wakeups();
        inner.ext.publish(0, &worker.metrics);
        drop(worker);
        ext::worker_exited(inner);
    }

    /// `Runtime::block_on` of the current-thread flavour.
    pub(super) fn block_on<F: Future>(&self, handle: &Handle, future: F) -> F::Output {
        if IN_RUNTIME.with(|r| r.get()) {
            panic!(
                "block_on called from within a magpie runtime (a worker thread, a task or \
                 another block_on); a nested block_on would block a thread the runtime needs. \
                 Use .await instead."
            );
        }
        let _enter = RuntimeThread::enter(handle);
        let mut future = std::pin::pin!(future);
        loop {
            if !handle.inner.sched.is_done() {
                if let Some(worker) = self.take() {
                    let mut drive = Drive {
                        core: self,
                        worker: Some(worker),
                    };
                    if let Some(out) = drive.run(future.as_mut()) {
                        return out;
                    }
                    // Shutting down: the worker was given back; poll on.
                }
            }
            if let Some(out) = self.wait_for_core(handle, future.as_mut()) {
                return out;
            }
        }
    }

    /// Another thread drives the runtime (or it is shutting down): poll our
    /// future on this thread's own parker until it is ready (`Some`) or the
    /// worker is given back (`None`).
    fn wait_for_core<F: Future>(
        &self,
        handle: &Handle,
        mut future: Pin<&mut F>,
    ) -> Option<F::Output> {
        let inner = &handle.inner;
        let parker = Parker::new();
        let wake = Arc::new(ThreadWaker::new(parker.unparker(), inner));
        let waker = Waker::from(wake.clone());
        let mut cx = Context::from_waker(&waker);
        park::inhibit(inner);
        let out = loop {
            if let Poll::Ready(out) = coop::with_budget(|| future.as_mut().poll(&mut cx)) {
                break Some(out);
            }
            if wake.take_woken() {
                continue;
            }
            if !inner.sched.is_done() {
                let mut waiters = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
                if !waiters.iter().any(|w| w.will_wake(&waker)) {
                    waiters.push(waker.clone());
                }
                drop(waiters);
                // After registering: a worker given back before it is seen
                // here; one given back after wakes us.
                if self.has_worker() {
                    break None;
                }
            }
            if !wake.try_begin_idle() {
                wake.take_woken();
                continue;
            }
            park::release(inner);
            parker.park();
            if !wake.end_idle() {
                park::inhibit(inner);
            }
            if !inner.sched.is_done() && self.has_worker() {
                wake.take_woken();
                break None;
            }
        };
        park::release(inner);
        out
    }
}

impl Drop for CurrentCore {
    fn drop(&mut self) {
        // A runtime shut down in the background (`shutdown_background`) did
        // not run `Runtime::shutdown`: the worker leaves here, and as the
        // last owner it finishes the shutdown (`ext::worker_exited`).
        if let Some(worker) = self.slot.get_mut().ok().and_then(|s| s.as_ref()) {
            let inner = worker.handle.inner.clone();
            self.shutdown(&inner);
        }
    }
}

/// Wakes the thread inside `block_on` for its own future: a flag, then the
/// worker's unparker (which also reaches it asleep in the I/O poller).
struct MainWaker {
    woken: AtomicBool,
    handle: Handle,
}

impl Wake for MainWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Relaxed: the unpark orders the wake (the parker's state word); the
        // flag only says which of the two things to look at.
        self.woken.store(true, Ordering::Relaxed);
        self.handle.inner.sched.remotes[0].unparker.unpark();
    }
}

/// `block_on` holding the worker. Dropping it (also by a panic in the
/// future) gives the worker back.
struct Drive<'a> {
    core: &'a CurrentCore,
    worker: Option<Box<AsyncWorker>>,
}

impl Drop for Drive<'_> {
    fn drop(&mut self) {
        // A panic in the future while the worker was lent: it is still in
        // the thread-local.
        let worker = self
            .worker
            .take()
            .or_else(|| WORKER.with(|w| w.try_borrow_mut().ok().and_then(|mut s| s.take())));
        if let Some(worker) = worker {
            self.core.put_back(worker);
        }
    }
}

impl Drive<'_> {
    /// The worker loop (`run_loop`'s steps, one worker) with the future
    /// polled whenever it was woken. `None`: the runtime is shutting down.
    fn run<F: Future>(&mut self, mut future: Pin<&mut F>) -> Option<F::Output> {
        struct Driving(bool);
        impl Drop for Driving {
            fn drop(&mut self) {
                DRIVING.with(|d| d.set(self.0));
            }
        }
        let _driving = Driving(DRIVING.with(|d| d.replace(true)));
        let mut worker = self.worker.take().expect("Drive holds the worker");
        let handle = worker.handle.clone();
        let inner: &RtShared = &handle.inner;
        let main = Arc::new(MainWaker {
            woken: AtomicBool::new(true),
            handle: handle.clone(),
        });
        let waker = Waker::from(main.clone());
        let mut cx = Context::from_waker(&waker);
        let mut trace = NoopTrace;
        loop {
            // 1. Our own future, if woken (at first: always). The worker is
            //    lent so that its spawns land in the LIFO slot.
            // Relaxed: see MainWaker.
            if main.woken.swap(false, Ordering::Relaxed) {
                WORKER.with(|w| *w.borrow_mut() = Some(worker));
                let polled = coop::with_budget(|| future.as_mut().poll(&mut cx));
                worker = WORKER
                    .with(|w| w.borrow_mut().take())
                    .expect("the worker's context is back after block_on's poll");
                if let Poll::Ready(out) = polled {
                    self.worker = Some(worker);
                    return Some(out);
                }
            }
            // 2. Up to TASKS_PER_MAIN_POLL tasks, as a worker thread runs
            //    them (timers and a poller look every 61 polls).
            let mut idle = false;
            for _ in 0..TASKS_PER_MAIN_POLL {
                match sched::find_task(&mut *worker, &mut trace) {
                    Found::Task(task) => {
                        worker.polls_since_timers += 1;
                        if worker.polls_since_timers >= TIMER_CHECK_INTERVAL {
                            worker = fire_timers(worker, inner);
                        }
                        WORKER.with(|w| *w.borrow_mut() = Some(worker));
                        coop::with_budget(|| task.run());
                        worker = WORKER
                            .with(|w| w.borrow_mut().take())
                            .expect("the worker's context is back after the poll");
                        if main.woken.load(Ordering::Relaxed) {
                            break;
                        }
                    }
                    Found::Idle => {
                        idle = true;
                        break;
                    }
                    Found::Exit => {
                        self.worker = Some(worker);
                        return None;
                    }
                }
            }
            if !idle {
                continue;
            }
            // 3. Nothing queued: due timers. If our future was woken (it
            //    yields, say), look at the poller too and go back to it:
            //    without this a future that keeps yielding while it waits
            //    for a timer or a socket would never let them fire.
            let (w, fired) = fire_timers_counted(worker, inner);
            worker = w;
            if main.woken.load(Ordering::Relaxed) {
                worker = poll_io_now(worker, inner).0;
                continue;
            }
            if fired > 0 {
                continue;
            }
            // 4. The park sequence. No spin tier: work for this thread
            //    comes through the unparker, which ends the sleep anyway.
            match sched::prepare_park(&mut *worker, &mut trace) {
                ParkPrep::Resume => {}
                ParkPrep::Exit => {
                    self.worker = Some(worker);
                    return None;
                }
                ParkPrep::Sleep => {
                    // io/README.md, P2: nobody else takes the poller (there
                    // is no other worker), so this thread sleeps in it.
                    let mut poller = inner.io.try_lock_poller();
                    let result =
                        park::park_worker(&mut worker, inner, MAX_PARK_TIMEOUT, poller.as_mut());
                    if !sched::after_park(&mut *worker, result, &mut trace) {
                        self.worker = Some(worker);
                        return None;
                    }
                    if let Some(mut poller) = poller {
                        worker = dispatch_io(worker, inner, &mut poller).0;
                    }
                    worker = fire_timers_counted(worker, inner).0;
                }
            }
        }
    }
}
