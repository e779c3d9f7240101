//! `scope`: any number of spawned jobs that borrow from the caller's frame.

use core::fmt;
use core::marker::PhantomData;
use core::ptr::NonNull;
use std::panic::{self, AssertUnwindSafe};

use super::job::{JobRef, Payload};
use super::latch::{CoreLatch, Latch, Wake};
use super::{wait_until, FrameGuard, JoinContext};
use crate::sync::atomic::{AtomicUsize, Ordering};
use crate::sync::Mutex;

/// Where a scope's spawns go: the pool's queues. The runtime implements it
/// (the current worker's local queue, or the pool's global queue from a
/// thread outside it).
pub trait JobSink: Sync {
    /// Makes `job` runnable by the pool. It must run exactly once.
    fn push(&self, job: JobRef);
}

/// A fork-join scope: [`Scope::spawn`] starts jobs that may borrow anything
/// that outlives `'scope`; [`scope`] returns only after all of them ran.
pub struct Scope<'scope, S: JobSink> {
    sink: S,
    /// S1: one count for the scope's own closure plus one per spawned job
    /// not yet finished.
    pending: AtomicUsize,
    /// S3: set by whoever drops `pending` to zero.
    latch: CoreLatch,
    /// The first panic of a spawned job.
    panic: Mutex<Option<Payload>>,
    /// Invariant in `'scope`, as a borrow of `'scope` data both read and
    /// written through spawned closures.
    _marker: PhantomData<fn(&'scope ()) -> &'scope ()>,
}

// SAFETY: shared by the spawned jobs on pool threads: `pending` and `latch`
// are atomics, `panic` a mutex, `sink` is Sync (the trait's bound), and the
// marker holds no data.
unsafe impl<S: JobSink> Sync for Scope<'_, S> {}

impl<'scope, S: JobSink> Scope<'scope, S> {
    /// Runs `body` on some pool thread before the scope ends. `body` gets the
    /// scope again, to spawn more.
    pub fn spawn<F>(&self, body: F)
    where
        F: FnOnce(&Scope<'scope, S>) + Send + 'scope,
    {
        // S2: count first, so the count can't reach zero while this job
        // exists. Relaxed: the caller holds a count already (its own job's
        // or the scope closure's), so zero is not reachable meanwhile.
        self.pending.fetch_add(1, Ordering::Relaxed);
        let job = Box::new(ScopeJob {
            scope: NonNull::from(self),
            body,
        });
        let data = NonNull::from(Box::leak(job)).cast();
        // SAFETY: J2 for scope jobs: the box is freed only by its one run,
        // and the scope it points to lives until `pending` reaches zero,
        // which needs this job's decrement (S2, S4).
        let job = unsafe { JobRef::new(data, ScopeJob::<'scope, S, F>::execute) };
        self.sink.push(job);
    }

    /// The sink this scope spawns into.
    pub fn sink(&self) -> &S {
        &self.sink
    }

    /// S4: one count is done. Whoever takes the last sets the latch; that
    /// set is its last access to the scope.
    ///
    /// # Safety
    ///
    /// `this` is live, and the caller owns one count it has not given back.
    unsafe fn complete_one(this: *const Self) -> Wake {
        // AcqRel: Release publishes this job's writes (and its panic) to the
        // owner; Acquire, on the last decrement, takes the other jobs' writes
        // along before the latch's own Release.
        #[cfg(not(magpie_broken = "scope_count_relaxed"))]
        let order = Ordering::AcqRel;
        // Broken: a job that is not the last publishes nothing; its writes
        // reach the owner only by luck.
        #[cfg(magpie_broken = "scope_count_relaxed")]
        let order = Ordering::Relaxed;
        // SAFETY: live while we hold a count (the owner can't leave before
        // the latch is set, which needs our count).
        let last = unsafe { (*this).pending.fetch_sub(1, order) } == 1;
        if last {
            // SAFETY: the last count: nobody else touches the scope, and the
            // set is our last access.
            unsafe { CoreLatch::set(core::ptr::addr_of!((*this).latch)) }
        } else {
            Wake::Nobody
        }
    }

    fn record_panic(&self, payload: Payload) {
        let mut slot = self.panic.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some(payload);
        }
    }
}

impl<S: JobSink + fmt::Debug> fmt::Debug for Scope<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope")
            .field("sink", &self.sink)
            .field("pending", &self.pending.load(Ordering::Relaxed))
            .field("latch", &self.latch)
            .finish()
    }
}

struct ScopeJob<'scope, S: JobSink, F> {
    scope: NonNull<Scope<'scope, S>>,
    body: F,
}

impl<'scope, S: JobSink, F: FnOnce(&Scope<'scope, S>) + Send + 'scope> ScopeJob<'scope, S, F> {
    unsafe fn execute(data: NonNull<()>) -> Wake {
        // SAFETY: leaked in `Scope::spawn`; this is its one run (J3).
        let job = unsafe { Box::from_raw(data.cast::<Self>().as_ptr()) };
        let ScopeJob { scope, body } = *job;
        let scope = scope.as_ptr() as *const Scope<'scope, S>;
        // SAFETY: we hold a count, so the scope is live (S2, S4); the shared
        // reference ends before `complete_one` gives the count back.
        let result = panic::catch_unwind(AssertUnwindSafe(|| body(unsafe { &*scope })));
        if let Err(payload) = result {
            // SAFETY: as above, still holding the count.
            unsafe { (*scope).record_panic(payload) };
        }
        // SAFETY: we hold one count; nothing after this touches the scope.
        unsafe { Scope::complete_one(scope) }
    }
}

/// Runs `op` with a new scope, waits (S5) until every job spawned in it ran,
/// then returns `op`'s value; or raises the first panic (`op`'s first, then
/// the spawned jobs' first) once everything finished.
///
/// `ctx` is how the calling worker waits: see [`JoinContext`]. `owner` is the
/// worker index a finishing job wakes if the caller sleeps.
pub fn scope<'scope, C, S, OP, R>(ctx: &mut C, sink: S, op: OP) -> R
where
    C: JoinContext,
    S: JobSink,
    OP: FnOnce(&Scope<'scope, S>) -> R,
{
    let scope = Scope {
        sink,
        pending: AtomicUsize::new(1),
        latch: CoreLatch::new(ctx.owner()),
        panic: Mutex::new(None),
        _marker: PhantomData,
    };
    let guard = FrameGuard::new(&scope.latch);
    let result = panic::catch_unwind(AssertUnwindSafe(|| op(&scope)));
    // S4 for the closure's own count.
    // SAFETY: the scope is live (our frame) and this is the closure's count.
    let wake = unsafe { Scope::complete_one(&scope) };
    ctx.wake(wake);
    // S5.
    wait_until(ctx, &scope.latch);
    guard.disarm();
    let panic = scope.panic.lock().unwrap_or_else(|e| e.into_inner()).take();
    match result {
        Err(p) => panic::resume_unwind(p),
        Ok(_) if panic.is_some() => panic::resume_unwind(panic.unwrap_or_else(|| unreachable!())),
        Ok(r) => r,
    }
}
