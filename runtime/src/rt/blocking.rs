//! `spawn_blocking` and `block_in_place` (README, "Blocking work").
//!
//! A blocking closure becomes a task of its own scheduler
//! ([`BlockingSchedule`]): one poll runs the closure to the end, so the
//! task cell, its `JoinHandle`, `abort` and panic capture are the async
//! tasks' own. Its queue entry goes to the pool:
//!
//! 1. an idle pool thread is woken for it if there is one;
//! 2. otherwise a new thread is started, up to `max_blocking_threads`
//!    (default [`DEFAULT_MAX_BLOCKING_THREADS`]);
//! 3. otherwise it waits in the pool's queue (FIFO).
//!
//! A pool thread that finds the queue empty waits for the keep-alive
//! (default [`DEFAULT_KEEP_ALIVE`]) and exits if nothing came.
//!
//! Shutdown: queued closures are dropped (their handles resolve to a
//! cancelled `JoinError`); running ones are waited for, up to the timeout
//! of `shutdown_timeout` (forever when the runtime is dropped, as tokio),
//! then left to finish detached.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::task::{Context, Poll};
use std::thread;
use std::time::{Duration, Instant as StdInstant};

use magpie_core::task::{Notified, OwnedTasks, Schedule};

use super::ext::OwnThread;
use super::{park, Handle, JoinHandle, RtShared, IN_RUNTIME, WORKER};

/// Most threads the blocking pool starts (tokio's default too).
pub(crate) const DEFAULT_MAX_BLOCKING_THREADS: usize = 512;

/// How long an idle pool thread waits for work before it exits.
pub(crate) const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(10);

/// The runtime's blocking pool.
pub(super) struct BlockingPool {
    shared: Arc<PoolShared>,
}

struct PoolShared {
    state: Mutex<PoolState>,
    condvar: Condvar,
    max_threads: usize,
    keep_alive: Duration,
    thread_name: String,
    owned: OwnedTasks<BlockingSchedule>,
    /// The runtime, for the pool threads' context. Weak: the runtime owns
    /// the pool.
    runtime: OnceLock<Weak<RtShared>>,
}

#[derive(Default)]
struct PoolState {
    queue: VecDeque<Notified<BlockingSchedule>>,
    /// Threads alive (busy or idle).
    threads: usize,
    /// Threads waiting on the condvar and not yet claimed by a notify.
    idle: usize,
    /// Notifies sent and not yet consumed by a waiting thread.
    notified: usize,
    shutdown: bool,
    handles: HashMap<u64, thread::JoinHandle<()>>,
    next_id: u64,
}

/// The scheduler of blocking tasks: their queue entries go to the pool.
#[derive(Clone)]
pub(super) struct BlockingSchedule(Arc<PoolShared>);

impl Schedule for BlockingSchedule {
    fn schedule(&self, task: Notified<Self>) {
        self.0.submit(task);
    }

    fn owned_tasks(&self) -> &OwnedTasks<Self> {
        &self.0.owned
    }
}

/// The future a blocking task runs: the closure, called on its one poll.
/// From spawn until the closure returns (or the task is dropped unrun) it
/// holds off a paused clock's auto-advance, as in tokio: a blocking closure
/// is work in progress, even while it waits in the queue.
struct BlockingTask<F> {
    f: Option<F>,
    _inhibit: Inhibit,
}

/// One auto-advance inhibitor (`park::inhibit`), released on drop.
struct Inhibit(Handle);

impl Inhibit {
    fn new(handle: &Handle) -> Self {
        park::inhibit(&handle.inner);
        Self(handle.clone())
    }
}

impl Drop for Inhibit {
    fn drop(&mut self) {
        park::release(&self.0.inner);
    }
}

// The closure is never pinned: moving it out is fine.
impl<F> Unpin for BlockingTask<F> {}

impl<F: FnOnce() -> R, R> Future for BlockingTask<F> {
    type Output = R;

    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<R> {
        let f = self
            .f
            .take()
            .expect("a blocking task is polled once: it never returns Pending");
        Poll::Ready(f())
    }
}

fn lock(m: &Mutex<PoolState>) -> MutexGuard<'_, PoolState> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl BlockingPool {
    pub(super) fn new(max_threads: usize, keep_alive: Duration, thread_name: String) -> Self {
        Self {
            shared: Arc::new(PoolShared {
                state: Mutex::new(PoolState::default()),
                condvar: Condvar::new(),
                max_threads: max_threads.max(1),
                keep_alive,
                thread_name,
                owned: OwnedTasks::new(8),
                runtime: OnceLock::new(),
            }),
        }
    }

    pub(super) fn set_runtime(&self, rt: Weak<RtShared>) {
        let _ = self.shared.runtime.set(rt);
    }

    /// `(threads, idle threads, queued closures)`.
    pub(super) fn counts(&self) -> (usize, usize, usize) {
        let state = lock(&self.shared.state);
        (state.threads, state.idle, state.queue.len())
    }

    fn spawn<F, R>(&self, handle: &Handle, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let sched = BlockingSchedule(self.shared.clone());
        let task = BlockingTask {
            f: Some(f),
            _inhibit: Inhibit::new(handle),
        };
        let (notified, join) = self.shared.owned.bind(task, sched);
        if let Some(task) = notified {
            self.shared.submit(task);
        }
        JoinHandle { inner: join }
    }

    /// Stops accepting, drops the queued closures, wakes the idle threads.
    pub(super) fn begin_shutdown(&self) {
        let queued = {
            let mut state = lock(&self.shared.state);
            state.shutdown = true;
            std::mem::take(&mut state.queue)
        };
        self.shared.condvar.notify_all();
        // Outside the lock: dropping an entry cancels its task, which runs
        // the closure's destructor and wakes its joiner.
        drop(queued);
    }

    /// [`begin_shutdown`](Self::begin_shutdown), then waits for the running
    /// closures until `deadline` (forever if `None`); later ones are detached.
    pub(super) fn shutdown(&self, deadline: Option<StdInstant>) {
        self.begin_shutdown();
        let handles: Vec<_> = lock(&self.shared.state)
            .handles
            .drain()
            .map(|(_, h)| h)
            .collect();
        for h in handles {
            if let Some(deadline) = deadline {
                while !h.is_finished() && StdInstant::now() < deadline {
                    thread::sleep(Duration::from_millis(1));
                }
                if !h.is_finished() {
                    continue; // detached
                }
            }
            let _ = h.join();
        }
    }

    /// Cancels every blocking task still registered (the last step of the
    /// runtime's shutdown). Running ones are only marked; they finish.
    pub(super) fn close_and_shutdown_all(&self) {
        self.shared.owned.close_and_shutdown_all();
    }
}

impl PoolShared {
    /// Steps 1-3 of the module docs.
    fn submit(self: &Arc<Self>, task: Notified<BlockingSchedule>) {
        let mut state = lock(&self.state);
        if state.shutdown {
            drop(state);
            drop(task); // cancels it, outside the lock
            return;
        }
        state.queue.push_back(task);
        if state.idle > 0 {
            state.idle -= 1;
            state.notified += 1;
            drop(state);
            self.condvar.notify_one();
            return;
        }
        if state.threads >= self.max_threads {
            return; // queued; a busy thread takes it when it finishes
        }
        let Some(rt) = self.runtime.get().and_then(Weak::upgrade) else {
            return; // the runtime is being torn down; shutdown drops the queue
        };
        let id = state.next_id;
        state.next_id += 1;
        state.threads += 1;
        let pool = self.clone();
        let spawned = thread::Builder::new()
            .name(self.thread_name.clone())
            .spawn(move || pool.thread_main(Handle { inner: rt }, id));
        match spawned {
            Ok(h) => {
                state.handles.insert(id, h);
            }
            Err(_) => {
                // No thread: the closure waits for a busy thread, or for
                // shutdown. With no thread at all it would wait forever, so
                // surface the failure as tokio does.
                state.threads -= 1;
                if state.threads == 0 {
                    let task = state.queue.pop_back();
                    drop(state);
                    drop(task);
                    panic!("failed to start a spawn_blocking thread");
                }
            }
        }
    }

    fn thread_main(self: Arc<Self>, handle: Handle, id: u64) {
        let _enter = handle.enter();
        let _own = OwnThread::worker(&handle.inner);
        let mut state = lock(&self.state);
        'run: loop {
            while let Some(task) = state.queue.pop_front() {
                drop(state);
                task.run();
                state = lock(&self.state);
            }
            if state.shutdown {
                break;
            }
            state.idle += 1;
            let mut waited = Duration::ZERO;
            loop {
                let start = StdInstant::now();
                let (s, _) = self
                    .condvar
                    .wait_timeout(state, self.keep_alive.saturating_sub(waited))
                    .unwrap_or_else(|e| e.into_inner());
                state = s;
                waited += start.elapsed();
                if state.notified > 0 {
                    state.notified -= 1;
                    continue 'run;
                }
                if state.shutdown {
                    state.idle -= 1;
                    break 'run;
                }
                if waited >= self.keep_alive {
                    state.idle -= 1;
                    // Detach our own handle: nobody needs to join an idle exit.
                    state.handles.remove(&id);
                    break 'run;
                }
            }
        }
        state.threads -= 1;
    }
}

impl fmt::Debug for BlockingPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (threads, idle, queued) = self.counts();
        f.debug_struct("BlockingPool")
            .field("threads", &threads)
            .field("idle", &idle)
            .field("queued", &queued)
            .finish()
    }
}

impl super::Builder {
    /// Most threads the `spawn_blocking` pool starts (default 512). Past
    /// that, closures wait in a queue for a busy thread. At least 1.
    pub fn max_blocking_threads(mut self, n: usize) -> Self {
        self.max_blocking_threads = n.max(1);
        self
    }

    /// How long an idle `spawn_blocking` thread waits for work before it
    /// exits (default 10 s).
    pub fn thread_keep_alive(mut self, keep_alive: Duration) -> Self {
        self.thread_keep_alive = keep_alive;
        self
    }
}

impl Handle {
    /// Runs `f` on the runtime's blocking pool and returns a handle to its
    /// result (tokio's `spawn_blocking`). For code that blocks: file I/O,
    /// blocking libraries, long computations. `abort` cancels it only while
    /// it is still queued; once running it runs to the end.
    pub fn spawn_blocking<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.inner.ext.blocking.spawn(self, f)
    }
}

/// [`Handle::spawn_blocking`] on the current runtime.
///
/// # Panics
/// Outside a magpie runtime.
pub fn spawn_blocking<F, R>(f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    match Handle::try_current() {
        Some(h) => h.spawn_blocking(f),
        None => panic!(
            "magpie_runtime::spawn_blocking must be called from within a magpie runtime \
             (a task, a worker thread, Runtime::block_on or Runtime::enter)"
        ),
    }
}

/// Runs `f`, which may block, on this thread (tokio's `block_in_place`).
///
/// On a runtime worker, inside a task: the worker first hands every task
/// queued on it (its LIFO slot and its ring) to the global queue and wakes
/// a parked worker, so that the other workers run them while `f` blocks;
/// tasks spawned during `f` go to the global queue too. `f` may call
/// [`Handle::block_on`]. Afterwards the worker carries on with the task that
/// called this. With a single worker, those tasks wait until `f` returns.
///
/// Anywhere else (outside a runtime, in `block_on`, on a blocking thread):
/// just runs `f`.
///
/// # Panics
/// On the thread driving a current-thread runtime (its `block_on`, or one of
/// its tasks), as tokio's does: no other worker could take its tasks.
pub fn block_in_place<F, R>(f: F) -> R
where
    F: FnOnce() -> R,
{
    if super::current::driving_here() {
        panic!(
            "block_in_place on a current-thread runtime: there is no other worker to take \
             its tasks (tokio: \"can call blocking only when running on the multi-threaded \
             runtime\"); use spawn_blocking"
        );
    }
    let taken = WORKER.with(|w| w.try_borrow_mut().ok().and_then(|mut slot| slot.take()));
    let Some(mut worker) = taken else {
        return f();
    };
    let handle = worker.handle.clone();
    let mut handed = Vec::new();
    handed.extend(worker.core.take_lifo());
    while let Some(task) = worker.core.local.pop() {
        handed.push(task);
    }
    for task in handed {
        handle.schedule_remote(task);
    }
    /// Puts the worker back (even if `f` panics) and ends the section.
    struct Restore {
        worker: Option<Box<super::AsyncWorker>>,
        handle: Handle,
        was_in_runtime: bool,
    }
    impl Drop for Restore {
        fn drop(&mut self) {
            IN_RUNTIME.with(|r| r.set(self.was_in_runtime));
            park::release(&self.handle.inner);
            let worker = self.worker.take();
            WORKER.with(|w| *w.borrow_mut() = worker);
        }
    }
    park::inhibit(&handle.inner);
    let _restore = Restore {
        worker: Some(worker),
        handle: handle.clone(),
        was_in_runtime: IN_RUNTIME.with(|r| r.replace(false)),
    };
    // While `f` runs this thread may `block_on` (IN_RUNTIME is off), and its
    // spawns go to the global queue (the worker is not lent).
    f()
}
