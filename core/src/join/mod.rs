//! Fork-join over borrowed data: the jobs, latches and protocols behind
//! `magpie_runtime::join::{join, scope}` and `JoinPool::install`.
//!
//! Everything here that is `unsafe` exists for one reason: a job on the
//! caller's stack (a [`StackJob`](job) or a [`Scope`]) is reached from other
//! threads through a raw pointer ([`JobRef`]), so the caller's frame must not
//! be left while another thread may still touch it. The functions here own
//! that rule: [`join`], [`scope`] and [`install`] do not return, and do not
//! unwind, before every job they handed out has run or been taken back. A
//! bug that would break it aborts the process instead (the frame guard, J7).
//!
//! What stays with the caller (the runtime) is policy, behind
//! [`JoinContext`]: where a job is pushed, how a waiting worker finds other
//! work, how it sleeps, whom it wakes.
//!
//! The protocol, as numbered steps (J1-J7, L1-L5, B1-B3, S1-S5), is in
//! `README.md` beside this file. Loom models: `core/tests/loom_join.rs`;
//! Miri: `core/tests/join_miri.rs`.

use std::panic::{self, AssertUnwindSafe};

pub mod current;
pub mod deque;
mod job;
mod latch;
mod scope;

pub use job::{HeapJob, JobRef, JobResult, Payload};
pub use latch::{
    CoreLatch, CrossLatch, FallAsleep, Latch, LockLatch, Snapshot, Wake, WakeUp, SET, SLEEPING,
    STATE_MASK, UNSET,
};
pub use scope::{scope, JobSink, Scope};

use job::StackJob;

use crate::park::Unparker;

/// How a worker of a pool takes part in a fork-join: the policy half of
/// [`join`] and [`scope`]. The runtime implements it for a pool worker.
pub trait JoinContext {
    /// This worker's index in its pool: a job that finishes while this
    /// worker sleeps on a latch returns [`Wake::Worker`] with it.
    fn owner(&self) -> usize;

    /// J1: makes `job` runnable by this worker and by thieves (the worker's
    /// local queue).
    fn push(&mut self, job: JobRef);

    /// J5: the newest job of this worker's local queue, if any. While a
    /// `join` waits, the top of the queue is its own job or a job pushed
    /// after it.
    fn pop(&mut self) -> Option<JobRef>;

    /// Acts on what a latch set returned (unparks a sleeping owner).
    fn wake(&mut self, wake: Wake);

    /// Runs a job this worker found (J4), then acts on its [`Wake`].
    fn execute(&mut self, job: JobRef) {
        let wake = job.execute();
        self.wake(wake);
    }

    /// Nothing local to run and `latch` is not set yet: run one task found
    /// elsewhere, or spin, or sleep on the worker's parker after
    /// [`CoreLatch::fall_asleep`] (L2). Returns when the latch may be set.
    /// It must not give up the worker's place in the pool (its tokens):
    /// a job of this frame is outstanding.
    fn wait(&mut self, latch: &CoreLatch);
}

/// J7: aborts the process if the frame that owns a handed-out job is left
/// before the job's latch is set. Correct code disarms it on every path.
struct FrameGuard<'a, L: Latch> {
    latch: &'a L,
}

impl<'a, L: Latch> FrameGuard<'a, L> {
    fn new(latch: &'a L) -> Self {
        FrameGuard { latch }
    }

    /// The job ran (latch set) or was taken back.
    fn disarm(self) {
        core::mem::forget(self);
    }
}

impl<L: Latch> Drop for FrameGuard<'_, L> {
    fn drop(&mut self) {
        if !self.latch.probe() {
            eprintln!("magpie join: a frame with a job still running elsewhere was left; aborting");
            std::process::abort();
        }
    }
}

/// S5 and the waiting half of J5: until `latch` is set, run local jobs, and
/// when there are none let `ctx` find other work or sleep.
fn wait_until<C: JoinContext>(ctx: &mut C, latch: &CoreLatch) {
    while !latch.probe() {
        match ctx.pop() {
            Some(job) => ctx.execute(job),
            None => ctx.wait(latch),
        }
    }
}

/// Runs `a` and `b`, maybe in parallel, and returns both results (J1-J7).
///
/// Work-first: `b` is pushed to this worker's local queue where thieves can
/// take it, `a` runs here at once; then `b` is taken back and run here if no
/// thief took it, else this worker waits for the thief while running other
/// work. A panic in either closure is raised again here once both halves
/// finished (`a`'s first if both panicked).
#[inline(always)]
pub fn join<C, A, B, RA, RB>(ctx: &mut C, a: A, b: B) -> (RA, RB)
where
    C: JoinContext,
    A: FnOnce() -> RA,
    B: FnOnce() -> RB + Send,
    RB: Send,
{
    let job_b = StackJob::new(b, CoreLatch::new(ctx.owner()));
    let guard = FrameGuard::new(&job_b.latch);
    // J1.
    // SAFETY: J2, this frame is not left before the job ran or was taken
    // back: the loop below ends only then, and any unwind before that hits
    // the guard, which aborts.
    let job_ref = unsafe { job_b.as_job_ref() };
    ctx.push(job_ref);
    // J3: `a` here, with its panic caught so that `b` is still waited for.
    let ra = match panic::catch_unwind(AssertUnwindSafe(a)) {
        Ok(ra) => ra,
        #[cfg(magpie_broken = "unwind_skips_wait")]
        // Broken: leaves the frame at once, while a thief may run `b`.
        Err(p) => panic::resume_unwind(p),
        #[cfg(not(magpie_broken = "unwind_skips_wait"))]
        Err(p) => join_recover_from_panic(ctx, &job_b, guard, p),
    };
    // J5-J6. The probe first: a push into a full deque ran `b` at once (D2).
    while !job_b.latch.probe() {
        match ctx.pop() {
            Some(job) if job_b.is_mine(&job) => {
                // J5: taken back, so no other thread can reach `b`: the
                // frame may be left from here on, by an unwind too. `b`
                // runs without a `catch_unwind` of its own: `a` finished,
                // so a panic of `b` is raised as it comes, as it would be
                // after both halves (J6).
                guard.disarm();
                let rb = job_b.run_inline();
                return (ra, rb);
            }
            Some(job) => ctx.execute(job),
            None => ctx.wait(&job_b.latch),
        }
    }
    guard.disarm();
    (ra, job_b.take_result().into_return_value())
}

/// J3's cold half: `a` panicked. `b` still runs (here, if it is taken back,
/// with its own panic caught and dropped) or is waited for (J5), and only
/// then is `a`'s panic raised again: `a`'s first if both panicked.
#[cold]
#[inline(never)]
#[cfg_attr(magpie_broken = "unwind_skips_wait", allow(dead_code))]
fn join_recover_from_panic<C, B, RB>(
    ctx: &mut C,
    job_b: &StackJob<CoreLatch, B, RB>,
    guard: FrameGuard<'_, CoreLatch>,
    p: Payload,
) -> !
where
    C: JoinContext,
    B: FnOnce() -> RB + Send,
    RB: Send,
{
    while !job_b.latch.probe() {
        match ctx.pop() {
            Some(job) if job_b.is_mine(&job) => {
                guard.disarm();
                drop(job_b.run_inline_caught());
                panic::resume_unwind(p);
            }
            Some(job) => ctx.execute(job),
            None => ctx.wait(&job_b.latch),
        }
    }
    guard.disarm();
    drop(job_b.take_result());
    panic::resume_unwind(p)
}

/// Runs `f` on a pool from a thread outside it (B1-B3): `inject` puts the
/// job in the pool's global queue, and this thread blocks on a
/// [`LockLatch`] until a worker ran it. `f`'s panic is raised again here.
///
/// # Panics
///
/// If `inject` refuses the job (a pool that shut down).
pub fn install<F, R, P>(f: F, inject: P) -> R
where
    F: FnOnce() -> R + Send,
    R: Send,
    P: FnOnce(JobRef) -> Result<(), JobRef>,
{
    inject_and_wait(StackJob::new(f, LockLatch::new()), inject, LockLatch::wait)
}

/// Runs `f` on another pool from a worker of this one (X1-X3): `inject` puts
/// the job in the other pool's global queue, and this worker keeps running
/// its own pool's work through `ctx` until a worker of the other pool ran it
/// (rayon's cross-pool install). `unparker` wakes this worker; the other
/// pool's worker uses it when it sets the latch while this one sleeps.
/// `f`'s panic is raised again here.
///
/// # Panics
///
/// If `inject` refuses the job (a pool that shut down).
pub fn install_cross<C, F, R, P>(ctx: &mut C, unparker: Unparker, f: F, inject: P) -> R
where
    C: JoinContext,
    F: FnOnce() -> R + Send,
    R: Send,
    P: FnOnce(JobRef) -> Result<(), JobRef>,
{
    let latch = CrossLatch::new(ctx.owner(), unparker);
    // X3: J5's waiting loop on the latch's state word.
    inject_and_wait(StackJob::new(f, latch), inject, |l: &CrossLatch| {
        wait_until(ctx, l.core())
    })
}

/// B1/X1 and what follows, shared by [`install`] and [`install_cross`]:
/// hands `job` to `inject`, then `wait`s on its latch (which must return only
/// once the latch is set) and returns the result; a refused job comes back
/// unrun and is a panic.
fn inject_and_wait<L, F, R, P>(job: StackJob<L, F, R>, inject: P, wait: impl FnOnce(&L)) -> R
where
    L: Latch,
    F: FnOnce() -> R + Send,
    R: Send,
    P: FnOnce(JobRef) -> Result<(), JobRef>,
{
    let guard = FrameGuard::new(&job.latch);
    // SAFETY: J2, `job` stays in this frame, which is not left before `wait`
    // saw the latch set or the job came back unrun; an unwind before either
    // hits the guard.
    let job_ref = unsafe { job.as_job_ref() };
    match inject(job_ref) {
        Ok(()) => {
            wait(&job.latch);
            guard.disarm();
            job.take_result().into_return_value()
        }
        Err(back) => {
            assert!(job.is_mine(&back), "install got another job back");
            guard.disarm();
            panic!("the pool refused the job: it was shut down");
        }
    }
}
