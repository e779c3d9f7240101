//! Jobs: a type-erased reference ([`JobRef`]), a job on its owner's stack
//! ([`StackJob`]) and a boxed one ([`HeapJob`]).

use core::fmt;
use core::ptr::NonNull;
use std::any::Any;
use std::panic::{self, AssertUnwindSafe};

use super::latch::{Latch, Wake};
use crate::sync::UnsafeCell;

/// A panic payload carried from the thread that ran a job to its joiner.
pub type Payload = Box<dyn Any + Send + 'static>;

/// The function half of a [`JobRef`]: runs the job its data points to.
pub(crate) type ExecuteFn = unsafe fn(NonNull<()>) -> Wake;

/// A job to run, with its type erased: a data pointer and the function that
/// knows its type. Not `Clone`: a `JobRef` runs at most once (J3), because
/// running consumes it and the queues move each value exactly once.
pub struct JobRef {
    data: NonNull<()>,
    execute: unsafe fn(NonNull<()>) -> Wake,
}

// SAFETY: a JobRef is built only from jobs whose closure and result are `Send`
// (`StackJob::as_job_ref`, `HeapJob::into_job_ref`, `Scope::spawn`), and the
// data it points to stays valid until it runs (J2).
unsafe impl Send for JobRef {}

impl JobRef {
    /// # Safety
    ///
    /// `execute(data)` is sound to call once, from any thread, until it runs
    /// (the builder's invariants, J2).
    pub(crate) unsafe fn new(data: NonNull<()>, execute: unsafe fn(NonNull<()>) -> Wake) -> Self {
        JobRef { data, execute }
    }

    /// Runs the job (J4): its closure, under `catch_unwind`, then its latch.
    /// The result says whether a sleeping owner must be unparked.
    #[inline]
    pub fn execute(self) -> Wake {
        // SAFETY: J2, the builder kept the data valid until this one call,
        // and `self` is consumed so there is no second.
        unsafe { (self.execute)(self.data) }
    }

    /// The two words, for a queue that stores them apart (`deque`, D3).
    #[inline(always)]
    pub(crate) fn into_raw(self) -> (NonNull<()>, ExecuteFn) {
        (self.data, self.execute)
    }

    /// A job from the words [`JobRef::into_raw`] gave.
    ///
    /// # Safety
    ///
    /// They are the words of one `JobRef` that was not run, and the caller
    /// now owns that job (it is the one `JobRef` of it, J3).
    #[inline(always)]
    pub(crate) unsafe fn from_raw(data: NonNull<()>, execute: ExecuteFn) -> Self {
        JobRef { data, execute }
    }

    /// Whether `self` is the same job as `other` (same data, same code).
    #[inline]
    pub(crate) fn same_job(&self, data: NonNull<()>) -> bool {
        self.data == data
    }
}

impl fmt::Debug for JobRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobRef").field("data", &self.data).finish()
    }
}

/// The result slot of a [`StackJob`].
#[derive(Debug)]
pub enum JobResult<R> {
    /// Not run yet.
    None,
    /// The closure returned.
    Ok(R),
    /// The closure panicked; the payload.
    Panic(Payload),
}

impl<R> JobResult<R> {
    /// The value, or the panic raised again on this thread.
    pub fn into_return_value(self) -> R {
        match self {
            JobResult::Ok(r) => r,
            JobResult::Panic(p) => panic::resume_unwind(p),
            JobResult::None => unreachable!("a job's result was read before it ran"),
        }
    }

    fn catch(f: impl FnOnce() -> R) -> Self {
        match panic::catch_unwind(AssertUnwindSafe(f)) {
            Ok(r) => JobResult::Ok(r),
            Err(p) => JobResult::Panic(p),
        }
    }
}

/// A job on its owner's stack: the closure (taken once), the result slot and
/// the latch the runner sets after writing the result.
///
/// Only this crate turns it into a [`JobRef`], and only inside functions
/// that do not return before the job has run or been taken back (J2):
/// [`join`](super::join), [`install`](super::install).
pub(crate) struct StackJob<L, F, R> {
    pub(crate) latch: L,
    func: UnsafeCell<Option<F>>,
    result: UnsafeCell<JobResult<R>>,
}

impl<L: Latch, F: FnOnce() -> R + Send, R: Send> StackJob<L, F, R> {
    pub(crate) fn new(func: F, latch: L) -> Self {
        StackJob {
            latch,
            func: UnsafeCell::new(Some(func)),
            result: UnsafeCell::new(JobResult::None),
        }
    }

    fn data(&self) -> NonNull<()> {
        NonNull::from(self).cast()
    }

    /// # Safety
    ///
    /// J2: `self` stays where it is and alive until the returned `JobRef`
    /// has run (its latch is set) or was taken back with [`Self::is_mine`].
    pub(crate) unsafe fn as_job_ref(&self) -> JobRef {
        // SAFETY: `execute::<L, F, R>` matches the data's type; the caller
        // keeps it valid (J2).
        unsafe { JobRef::new(self.data(), Self::execute) }
    }

    /// Whether `job` is this job's `JobRef` (taken back unrun, J5).
    pub(crate) fn is_mine(&self, job: &JobRef) -> bool {
        job.same_job(self.data())
    }

    /// J4 on another thread (or this one, through the queue).
    unsafe fn execute(data: NonNull<()>) -> Wake {
        let this = data.cast::<Self>().as_ptr();
        // SAFETY: J2, `this` is live until the latch is set below; only this
        // call touches `func` (J3: one JobRef, run once; the owner runs the
        // closure itself only after taking the JobRef back, J5).
        let func = unsafe { (*this).func.with_mut(|f| (*f).take()) };
        let func = func.expect("a stack job ran twice");
        let result = JobResult::catch(func);
        #[cfg(not(magpie_broken = "panic_sets_latch_before_result"))]
        {
            // SAFETY: the owner reads `result` only after it sees the latch
            // set (Acquire), which happens after this write.
            unsafe { (*this).result.with_mut(|r| *r = result) };
            // SAFETY: live until this call; we touch nothing after it (J4).
            unsafe { L::set(core::ptr::addr_of!((*this).latch)) }
        }
        #[cfg(magpie_broken = "panic_sets_latch_before_result")]
        {
            // Broken: a panic's payload is stored after the latch is set, so
            // the owner may read the slot (and leave the frame) while it is
            // being written.
            match result {
                JobResult::Panic(_) => {
                    // SAFETY: (broken on purpose) the owner may already be reading.
                    let wake = unsafe { L::set(core::ptr::addr_of!((*this).latch)) };
                    // SAFETY: (broken on purpose).
                    unsafe { (*this).result.with_mut(|r| *r = result) };
                    wake
                }
                ok => {
                    // SAFETY: as in the correct variant.
                    unsafe { (*this).result.with_mut(|r| *r = ok) };
                    // SAFETY: as in the correct variant.
                    unsafe { L::set(core::ptr::addr_of!((*this).latch)) }
                }
            }
        }
    }

    /// J5: the owner took its JobRef back unrun and runs the closure itself,
    /// here and now: a panic of the closure unwinds from this call.
    #[inline]
    pub(crate) fn run_inline(&self) -> R {
        // SAFETY: the JobRef was taken back, so no other thread can reach
        // this job; we are the only accessor.
        let func = unsafe { self.func.with_mut(|f| (*f).take()) };
        func.expect("a stack job ran twice")()
    }

    /// [`Self::run_inline`] with the closure's panic caught (the joiner's
    /// own closure panicked first and that panic wins, J3).
    #[cfg_attr(magpie_broken = "unwind_skips_wait", allow(dead_code))]
    pub(crate) fn run_inline_caught(&self) -> JobResult<R> {
        JobResult::catch(|| self.run_inline())
    }

    /// The result, after the latch was seen set (J6).
    pub(crate) fn take_result(&self) -> JobResult<R> {
        debug_assert!(self.latch.probe(), "result taken before the latch was set");
        // SAFETY: the latch is set (the caller probed it with Acquire), so
        // the runner's write happened-before and it touches the job no more.
        unsafe {
            self.result
                .with_mut(|r| core::mem::replace(&mut *r, JobResult::None))
        }
    }
}

/// A boxed job that owns everything it needs (`'static`): the runner frees
/// it. The building block of fire-and-forget spawns.
pub struct HeapJob<F> {
    func: F,
}

impl<F: FnOnce() + Send + 'static> HeapJob<F> {
    /// Boxes `func`.
    pub fn new(func: F) -> Box<Self> {
        Box::new(HeapJob { func })
    }

    /// The box, as a job. Running it runs `func` (a panic is caught and
    /// dropped: the caller's closure reports its own panics) and frees the
    /// box. A `JobRef` that is never run leaks the box.
    pub fn into_job_ref(self: Box<Self>) -> JobRef {
        let data = NonNull::from(Box::leak(self)).cast();
        // SAFETY: the data is a leaked box of this type, freed only by
        // `execute`, which runs once (J3).
        unsafe { JobRef::new(data, Self::execute) }
    }

    unsafe fn execute(data: NonNull<()>) -> Wake {
        // SAFETY: `data` came from `Box::leak` in `into_job_ref` and this is
        // the one run of its JobRef (J3).
        let this = unsafe { Box::from_raw(data.cast::<Self>().as_ptr()) };
        let _ = panic::catch_unwind(AssertUnwindSafe(this.func));
        Wake::Nobody
    }
}

impl<F> fmt::Debug for HeapJob<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HeapJob")
    }
}
