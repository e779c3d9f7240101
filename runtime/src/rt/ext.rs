//! The runtime state behind the tokio-shaped additions, kept out of
//! `mod.rs`: the timer-parking role and auto-advance (`park.rs`), the live
//! metrics (`metrics.rs`), the blocking pool (`blocking.rs`), and shutdown
//! in the background (the runtime dropped on its own thread, or
//! [`Runtime::shutdown_background`]).

use std::cell::Cell;
use std::sync::Arc;

use magpie_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::blocking::BlockingPool;
use super::metrics::Published;
use super::park::TimerPark;
use super::{finish_shutdown, Builder, RtShared, Runtime};
use crate::metrics::WorkerMetrics;

/// One per runtime, inside its shared state.
pub(super) struct Ext {
    pub(super) timer_park: TimerPark,
    pub(super) blocking: BlockingPool,
    published: Published,
    /// Set by a shutdown that does not wait for the workers. The last of
    /// them to leave then runs the end of the shutdown (`finish_shutdown`).
    detached: AtomicBool,
    /// Workers still running plus one for the `Runtime` itself. A detached
    /// shutdown gives back the runtime's share; whoever takes it to zero
    /// finishes the shutdown (exactly one does: the count is one RMW
    /// sequence).
    owners: AtomicUsize,
}

impl Ext {
    pub(super) fn new(b: &Builder, workers: usize) -> Self {
        Self {
            timer_park: TimerPark::new(),
            blocking: BlockingPool::new(
                b.max_blocking_threads,
                b.thread_keep_alive,
                format!("{}-blocking", b.thread_name),
            ),
            published: Published::new(workers),
            detached: AtomicBool::new(false),
            owners: AtomicUsize::new(workers + 1),
        }
    }

    /// Copies a worker's counters where [`Handle::metrics`](super::Handle::metrics) reads them.
    #[inline]
    pub(super) fn publish(&self, worker: usize, m: &WorkerMetrics) {
        self.published.store(worker, m);
    }

    pub(super) fn published(&self) -> &Published {
        &self.published
    }

    pub(super) fn is_detached(&self) -> bool {
        // Relaxed: read by the `Runtime`'s own drop, on the thread that set it.
        self.detached.load(Ordering::Relaxed)
    }
}

thread_local! {
    /// The runtime (its shared state's address) this thread belongs to: one
    /// of its workers or blocking-pool threads. 0 elsewhere.
    static OWN_THREAD: Cell<usize> = const { Cell::new(0) };
}

/// Marks the current thread as one of `inner`'s own threads while it lives.
pub(super) struct OwnThread {
    previous: usize,
}

impl OwnThread {
    pub(super) fn worker(inner: &Arc<RtShared>) -> Self {
        let previous = OWN_THREAD.with(|t| t.replace(Arc::as_ptr(inner) as usize));
        Self { previous }
    }
}

impl Drop for OwnThread {
    fn drop(&mut self) {
        let _ = OWN_THREAD.try_with(|t| t.set(self.previous));
    }
}

/// Whether this thread is one of `inner`'s workers or blocking threads.
pub(super) fn on_own_thread(inner: &Arc<RtShared>) -> bool {
    OWN_THREAD.with(|t| t.get()) == Arc::as_ptr(inner) as usize
}

/// A worker thread is leaving. After a detached shutdown, the last one out
/// finishes it.
pub(super) fn worker_exited(inner: &RtShared) {
    // AcqRel: the last decrement (Acquire) sees everything every other
    // leaving worker did before its own decrement (Release).
    if inner.ext.owners.fetch_sub(1, Ordering::AcqRel) == 1 {
        finish_shutdown(inner);
    }
}

impl Runtime {
    /// Shuts the runtime down without waiting: no new task is accepted, the
    /// workers stop after the poll they are in, and the last worker to leave
    /// cancels every task left (their `JoinHandle`s resolve to a cancelled
    /// [`JoinError`](super::JoinError)). Running `spawn_blocking` closures
    /// are not waited for; queued ones are dropped. Unlike dropping the
    /// runtime, this may be called from inside one of its own tasks.
    pub fn shutdown_background(self) {
        detach(&self.handle.inner);
        // `Drop` sees the flag and returns; the worker threads' handles are
        // dropped, which detaches them.
    }

    /// Dropping (or `shutdown_timeout`) on one of the runtime's own threads
    /// would join that thread from itself: refuse, after starting a
    /// background shutdown so the other tasks are still cancelled.
    pub(super) fn refuse_on_own_thread(&mut self) {
        let inner = &self.handle.inner;
        // Already detached (`shutdown_background`, or a refusal): nothing
        // left to wait for.
        if !on_own_thread(inner) || inner.ext.is_detached() {
            return;
        }
        detach(inner);
        if !std::thread::panicking() {
            panic!(
                "a magpie Runtime cannot be dropped or shut down from one of its own threads \
                 (inside one of its tasks or spawn_blocking closures): that thread would wait \
                 for itself to stop. Drop it outside the runtime, or call \
                 Runtime::shutdown_background(). The runtime is now shutting down in the \
                 background."
            );
        }
    }
}

/// A shutdown that does not wait: close everything, wake everyone, and give
/// back the `Runtime`'s share of `owners`.
fn detach(inner: &RtShared) {
    if inner.ext.detached.swap(true, Ordering::Relaxed) {
        return;
    }
    let _ = inner.sched.gate.close();
    inner.sched.initiate_done();
    inner.ext.blocking.begin_shutdown();
    // AcqRel: as in `worker_exited`.
    if inner.ext.owners.fetch_sub(1, Ordering::AcqRel) == 1 {
        finish_shutdown(inner);
    }
}
