//! The monomorphized half of the task: the functions in each task type's
//! vtable. They implement the numbered steps of the task README ("The poll
//! harness", "The JoinHandle", "Shutdown"); the step numbers appear in the
//! comments.

use core::any::Any;
use core::future::Future;
use core::mem;
use core::pin::Pin;
use core::ptr;
use core::task::{Context, Poll, Waker};
use std::panic::AssertUnwindSafe;

use super::current::CurrentGuard;
use super::join::JoinError;
use super::raw::{Cell, RawTask, Stage, Trailer};
use super::state::{
    State, TransitionToIdleKeepRef, TransitionToRunningOrStale, TransitionToShutdown,
};
use super::waker::WakerRef;
use super::{Notified, Schedule};
use crate::sync::UnsafeCell;

/// The concrete types, without owning them (the cell does).
type Types<F, S> = core::marker::PhantomData<(fn() -> F, fn() -> S)>;

/// A task of concrete type `Cell<F, S>`. Like `RawTask`, it carries no
/// ownership itself: each vtable function says which reference it consumes.
struct Harness<F: Future, S: Schedule> {
    raw: RawTask,
    _types: Types<F, S>,
}

impl<F, S> Harness<F, S>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    /// # Safety
    /// `raw` is a `Cell<F, S>`, and the caller holds a reference to it for as
    /// long as it uses the harness (except after the call that drops it).
    #[inline]
    unsafe fn from_raw(raw: RawTask) -> Self {
        Self {
            raw,
            _types: core::marker::PhantomData,
        }
    }

    #[inline]
    fn state(&self) -> &State {
        self.raw.state()
    }

    #[inline]
    fn cell(&self) -> &Cell<F, S> {
        // SAFETY: `from_raw`'s contract: a live `Cell<F, S>`. Only shared
        // references to the cell are ever made; everything mutable in it is
        // behind an atomic or a `sync::UnsafeCell`.
        unsafe { self.raw.cell::<F, S>().as_ref() }
    }

    #[inline]
    fn scheduler(&self) -> &S {
        &self.cell().scheduler
    }

    #[inline]
    fn stage(&self) -> &UnsafeCell<Stage<F>> {
        &self.cell().stage
    }

    #[inline]
    fn trailer(&self) -> &Trailer {
        &self.cell().trailer
    }

    // -----------------------------------------------------------------------
    // The poll harness (README steps P1..P6)
    // -----------------------------------------------------------------------

    /// Run a queue entry. Consumes the entry's reference.
    fn poll(self) {
        // P1: SCHEDULED -> RUNNING, or release a stale entry.
        match self.state().transition_to_running_or_stale() {
            TransitionToRunningOrStale::Poll => {}
            TransitionToRunningOrStale::Cancel => {
                self.cancel_future();
                return self.complete(true);
            }
            TransitionToRunningOrStale::Stale => return,
            TransitionToRunningOrStale::StaleDealloc => return self.dealloc(),
        }
        // P2: poll, with the borrowed waker and the current-task guard.
        match self.poll_future() {
            Ok(Poll::Pending) => {}
            Ok(Poll::Ready(out)) => {
                // P4: drop the (finished) future in place, then store the
                // output. A panicking drop turns the output into a panic.
                let output = match self.drop_future() {
                    Ok(()) => Ok(out),
                    Err(payload) => {
                        drop_output_value(out);
                        Err(JoinError::panic(self.raw.id(), payload))
                    }
                };
                self.store_output(output);
                return self.complete(true);
            }
            Err(payload) => {
                // P4: the poll panicked: drop the future, keep the first
                // panic.
                if let Err(second) = self.drop_future() {
                    drop_panic_payload(second);
                }
                self.store_output(Err(JoinError::panic(self.raw.id(), payload)));
                return self.complete(true);
            }
        }
        // P3: Pending.
        match self.state().transition_to_idle_keep_ref() {
            // The worker's reference was dropped in the RMW: hands off.
            TransitionToIdleKeepRef::Ok => {}
            TransitionToIdleKeepRef::OkDealloc => self.dealloc(),
            TransitionToIdleKeepRef::OkNotified => {
                // The RMW added the new entry's reference; ours keeps the
                // task (and so the `&S` borrowed from it) alive across the
                // call, even if another worker runs the entry to completion
                // meanwhile.
                // SAFETY: the new reference goes to the entry; the task is
                // SCHEDULED for it.
                let entry = unsafe { Notified::from_raw(self.raw) };
                self.scheduler().yield_now(entry);
                if self.state().ref_dec() {
                    self.dealloc();
                }
            }
            TransitionToIdleKeepRef::Cancelled => {
                self.cancel_future();
                self.complete(true);
            }
        }
    }

    /// P2: poll the future once. The waker is borrowed from the worker's
    /// reference: no reference-count traffic unless the future clones it.
    #[inline]
    fn poll_future(&self) -> Result<Poll<F::Output>, Box<dyn Any + Send>> {
        // SAFETY: the worker's reference (the popped entry's) outlives this
        // function.
        let waker = unsafe { WakerRef::new(self.raw) };
        let mut cx = Context::from_waker(&waker);
        let _current = CurrentGuard::enter(self.raw);
        catch_unwind(AssertUnwindSafe(|| {
            self.stage().with_mut(|stage| {
                // SAFETY: this thread holds RUNNING (P1), the only state in
                // which the stage is touched by the task side, and the state
                // word's AcqRel orders the previous poll's accesses (on any
                // thread) before this one (state README, "Orderings").
                match unsafe { &mut *stage } {
                    // SAFETY: the future lives in the heap cell and is
                    // dropped in place (`drop_stage`); it never moves.
                    Stage::Running(future) => unsafe { Pin::new_unchecked(future) }.poll(&mut cx),
                    _ => unreachable!("task polled after its future was dropped"),
                }
            })
        }))
    }

    /// Drop what the stage holds, in place, leaving `Consumed` even if the
    /// drop panics (so nothing is dropped twice). The future is pinned and
    /// must be dropped where it is, never moved out first. Returns the panic
    /// of a panicking `Drop`.
    ///
    /// The caller owns the stage: RUNNING (the future), or the output's
    /// owner after COMPLETE (README "Who owns the stage").
    fn drop_stage(&self) -> Result<(), Box<dyn Any + Send>> {
        struct SetConsumed<F: Future>(*mut Stage<F>);
        impl<F: Future> Drop for SetConsumed<F> {
            fn drop(&mut self) {
                // SAFETY: the old value was just dropped in place (or its
                // drop panicked, and drop glue dropped the rest of it); the
                // slot is written without reading or dropping it.
                unsafe { ptr::write(self.0, Stage::Consumed) }
            }
        }
        catch_unwind(AssertUnwindSafe(|| {
            self.stage().with_mut(|stage| {
                let _consumed = SetConsumed(stage);
                // SAFETY: (caller) this thread owns the stage; the guard
                // rewrites the slot after the drop, on unwind too.
                unsafe { ptr::drop_in_place(stage) }
            })
        }))
    }

    /// Drop the future (RUNNING held by the caller) with this task as the
    /// current task, so a shield guard or `current_task_id` in its `Drop`
    /// still finds it.
    fn drop_future(&self) -> Result<(), Box<dyn Any + Send>> {
        let _current = CurrentGuard::enter(self.raw);
        self.drop_stage()
    }

    /// Write the output into a `Consumed` stage (the future was dropped by
    /// `drop_stage`). The caller holds RUNNING.
    fn store_output(&self, output: Result<F::Output, JoinError>) {
        #[cfg(magpie_broken = "output_written_after_complete")]
        {
            // broken: publish COMPLETE first, write the output after: the
            // JoinHandle may read the slot while it is being written.
            let _ = self.state().transition_to_complete();
        }
        self.stage().with_mut(|stage| {
            // SAFETY: RUNNING gives this thread the stage, which holds
            // `Consumed` (nothing to drop); the JoinHandle reads it only after
            // it observes COMPLETE, published after this write (P5, Release).
            unsafe { ptr::write(stage, Stage::Finished(output)) }
        });
    }

    /// P6 (cancel): drop the future and store the cancelled output (or the
    /// panic of its `Drop`). The caller holds RUNNING.
    fn cancel_future(&self) {
        let err = match self.drop_future() {
            Ok(()) => JoinError::cancelled(self.raw.id()),
            Err(payload) => JoinError::panic(self.raw.id(), payload),
        };
        self.store_output(Err(err));
    }

    /// P5: RUNNING -> COMPLETE, hand the output over, wake the joiner, unlink,
    /// drop the caller's reference (and the registry's if it was unlinked
    /// here). `linked`: the registry may still hold the task (false only for
    /// the shutdown sweep, which unlinked it already).
    fn complete(self, linked: bool) {
        #[cfg(not(magpie_broken = "output_written_after_complete"))]
        let snapshot = self.state().transition_to_complete();
        #[cfg(magpie_broken = "output_written_after_complete")]
        let snapshot = self.state().load();
        // P5.1, P5.2 run user code (the output's Drop, the join waker); a
        // panic there must not stop the worker from finishing the protocol.
        let res = catch_unwind(AssertUnwindSafe(|| {
            if !snapshot.has_join_interest() {
                // P5.1: no JoinHandle: the output is ours to drop.
                let _ = self.drop_stage().map_err(drop_panic_payload);
            } else if snapshot.has_join_waker() {
                self.wake_joiner();
            }
        }));
        if let Err(payload) = res {
            drop_panic_payload(payload);
        }
        // P5.3: unlink before the registry's reference is dropped, so the
        // shutdown sweep never finds a freed task in its list.
        let mut refs = 1;
        if linked && self.scheduler().owned_tasks().remove(self.raw) {
            refs += 1;
        }
        if self.state().ref_dec_by(refs) {
            self.dealloc();
        }
    }

    /// P5.2: wake the JoinHandle's waker, then hand the cell back.
    fn wake_joiner(&self) {
        #[cfg(magpie_broken = "join_waker_released_before_wake")]
        let snapshot = self.state().unset_join_waker_after_complete();
        self.trailer().join_waker.with(|waker| {
            // SAFETY: JOIN_WAKER was set at COMPLETE: the handle wrote the
            // waker before `set_join_waker` (Release), paired with the Acquire
            // of `transition_to_complete`, and does not write the cell again
            // until we clear JOIN_WAKER below.
            match unsafe { &*waker } {
                Some(waker) => waker.wake_by_ref(),
                None => unreachable!("JOIN_WAKER set with an empty cell"),
            }
        });
        #[cfg(not(magpie_broken = "join_waker_released_before_wake"))]
        let snapshot = self.state().unset_join_waker_after_complete();
        if !snapshot.has_join_interest() {
            // The handle was dropped while we held the cell: the waker is
            // ours to drop (step J4).
            self.trailer().join_waker.with_mut(|waker| {
                // SAFETY: JOIN_INTEREST is clear, so the handle is gone, and
                // the AcqRel of `unset_join_waker_after_complete` ordered its
                // last access to the cell before this.
                unsafe { *waker = None }
            });
        }
    }

    fn dealloc(self) {
        // SAFETY: every caller just dropped the last reference (a `true` from
        // `ref_dec*` or a `*Dealloc` transition).
        unsafe { self.raw.dealloc_cell::<F, S>() }
    }

    // -----------------------------------------------------------------------
    // The JoinHandle (README steps J1..J5)
    // -----------------------------------------------------------------------

    /// J1..J3: `true` if the output can be read now; otherwise the handle's
    /// waker is registered (or already was).
    fn can_read_output(&self, waker: &Waker) -> bool {
        let snapshot = self.state().load();
        if snapshot.is_complete() {
            return true;
        }
        if !snapshot.has_join_waker() {
            // J2: the cell is the handle's.
            return self.set_join_waker(waker.clone());
        }
        // J3: a waker is registered. The task side may be reading it, but
        // only reads: comparing is safe.
        let same = self.trailer().join_waker.with(|cell| {
            // SAFETY: the handle wrote this waker (J2) and only the handle
            // writes the cell; concurrent task-side accesses are reads.
            match unsafe { &*cell } {
                Some(registered) => registered.will_wake(waker),
                None => unreachable!("JOIN_WAKER set with an empty cell"),
            }
        });
        if same {
            return false;
        }
        // Take the cell back before writing it.
        if self.state().unset_join_waker().is_err() {
            // Completed meanwhile: the task side owns the cell until it
            // clears JOIN_WAKER; leave it and read the output.
            return true;
        }
        self.set_join_waker(waker.clone())
    }

    /// J2: write the waker into the cell, then publish it. `true` if the task
    /// completed meanwhile (the waker stays in the cell, still the handle's).
    fn set_join_waker(&self, waker: Waker) -> bool {
        #[cfg(magpie_broken = "join_waker_written_after_flag")]
        let published = self.state().set_join_waker();
        self.trailer().join_waker.with_mut(|cell| {
            // SAFETY: JOIN_WAKER is clear (just loaded or just cleared by
            // `unset_join_waker`), so the task side does not touch the cell,
            // and only the handle (this `&mut`-polled handle) writes it. The
            // old waker, if any, is the handle's own.
            unsafe { *cell = Some(waker) }
        });
        // Release (in `set_join_waker`): the write above happens before the
        // task side reads the cell after `transition_to_complete`.
        #[cfg(not(magpie_broken = "join_waker_written_after_flag"))]
        let published = self.state().set_join_waker();
        published.is_err()
    }

    /// J1: take the output. The handle observed COMPLETE (Acquire), so the
    /// worker's write of the output happens before this read, and the task
    /// side never touches the stage again while JOIN_INTEREST is set.
    fn take_output(&self) -> Result<F::Output, JoinError> {
        self.stage().with_mut(|stage| {
            // SAFETY: see above: the handle owns the finished stage.
            match unsafe { ptr::replace(stage, Stage::Consumed) } {
                Stage::Finished(output) => output,
                _ => panic!("JoinHandle polled after it returned Ready"),
            }
        })
    }

    /// J4: the handle is dropped. Consumes its reference.
    fn drop_join_handle(self) {
        let snapshot = self.state().load();
        if !snapshot.has_join_waker() {
            if snapshot.is_complete() {
                // COMPLETE without JOIN_WAKER: output and cell are the
                // handle's for good; drop both, then leave in one RMW.
                self.drop_output_and_join_waker();
            }
            if let Some(last) = self.state().drop_join_handle_fast(snapshot.is_complete()) {
                if last {
                    self.dealloc();
                }
                return;
            }
        }
        // The general path: JOIN_WAKER set, or the task completed since the
        // load.
        match self.state().unset_join_interest() {
            Ok(_) => {
                // Not complete, and JOIN_WAKER was cleared in the same RMW:
                // the cell is the handle's; the task will drop its output.
                self.drop_join_waker();
            }
            Err(next) => {
                // Complete: the output is the handle's.
                let _ = self.drop_stage().map_err(drop_panic_payload);
                if !next.has_join_waker() {
                    self.drop_join_waker();
                }
                // else the task side is waking it and drops it (P5.2).
            }
        }
        if self.state().ref_dec() {
            self.dealloc();
        }
    }

    fn drop_output_and_join_waker(&self) {
        let _ = self.drop_stage().map_err(drop_panic_payload);
        self.drop_join_waker();
    }

    /// Drop the waker in the cell; the caller owns the cell.
    fn drop_join_waker(&self) {
        let waker = self.trailer().join_waker.with_mut(|cell| {
            // SAFETY: (caller) the handle owns the cell.
            unsafe { (*cell).take() }
        });
        if let Err(payload) = catch_unwind(AssertUnwindSafe(move || drop(waker))) {
            drop_panic_payload(payload);
        }
    }

    // -----------------------------------------------------------------------
    // Shutdown (README steps S1..S4)
    // -----------------------------------------------------------------------

    /// S3: a queue entry dropped without running. Consumes its reference.
    fn drop_notified(self) {
        match self.state().transition_to_shutdown() {
            // The task was waiting for this entry: nobody else will run it.
            TransitionToShutdown::Claimed => {
                self.cancel_future();
                self.complete(true);
            }
            // Stale: the sweep claimed it while the entry was queued.
            TransitionToShutdown::Running | TransitionToShutdown::Complete => {
                if self.state().ref_dec() {
                    self.dealloc();
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The vtable entries
// ---------------------------------------------------------------------------

/// # Safety
/// `raw` is a `Cell<F, S>` and the caller passes a queue entry's reference.
pub(crate) unsafe fn poll<F, S>(raw: RawTask)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    // SAFETY: (caller) the entry's reference keeps the task alive.
    unsafe { Harness::<F, S>::from_raw(raw) }.poll()
}

/// W3: a new queue entry for `S::schedule`.
///
/// # Safety
/// `raw` is a `Cell<F, S>` that just became SCHEDULED with a new reference
/// for the entry, and the caller holds ANOTHER reference until this returns
/// (the call borrows the scheduler from the cell).
pub(crate) unsafe fn schedule<F, S>(raw: RawTask)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    // SAFETY: (caller) the caller's own reference keeps the cell alive.
    let harness = unsafe { Harness::<F, S>::from_raw(raw) };
    // SAFETY: (caller) the new reference and the SCHEDULED state are the
    // entry's.
    let entry = unsafe { Notified::from_raw(raw) };
    harness.scheduler().schedule(entry);
}

/// # Safety
/// `raw` is a `Cell<F, S>` whose last reference the caller dropped.
pub(crate) unsafe fn dealloc<F, S>(raw: RawTask)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    // SAFETY: (caller).
    unsafe { raw.dealloc_cell::<F, S>() }
}

/// # Safety
/// `raw` is a `Cell<F, S>`, the caller is its `JoinHandle` (holding its
/// reference, polled through `&mut`), and `dst` points to a
/// `Poll<Result<F::Output, JoinError>>`.
pub(crate) unsafe fn try_read_output<F, S>(raw: RawTask, dst: *mut (), waker: &Waker)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    // SAFETY: (caller) the handle's reference.
    let harness = unsafe { Harness::<F, S>::from_raw(raw) };
    if harness.can_read_output(waker) {
        let output = harness.take_output();
        let dst = dst.cast::<Poll<Result<F::Output, JoinError>>>();
        // SAFETY: (caller) `dst` is valid for this type; the old value is
        // dropped (it is `Pending`).
        unsafe { *dst = Poll::Ready(output) };
    }
}

/// # Safety
/// `raw` is a `Cell<F, S>` and the caller is its `JoinHandle`, giving up its
/// reference.
pub(crate) unsafe fn drop_join_handle<F, S>(raw: RawTask)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    // SAFETY: (caller) the handle's reference.
    unsafe { Harness::<F, S>::from_raw(raw) }.drop_join_handle()
}

/// # Safety
/// `raw` is a `Cell<F, S>` and the caller is a queue entry that was not run,
/// giving up its reference.
pub(crate) unsafe fn drop_notified<F, S>(raw: RawTask)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    // SAFETY: (caller) the entry's reference.
    unsafe { Harness::<F, S>::from_raw(raw) }.drop_notified()
}

/// S2: cancel a task the shutdown sweep claimed (IDLE/SCHEDULED -> RUNNING)
/// and unlinked.
///
/// # Safety
/// `raw` is a `Cell<F, S>`, `transition_to_shutdown` returned `Claimed` to the
/// caller, and the caller passes the registry's reference (the task is no
/// longer linked).
pub(crate) unsafe fn shutdown<F, S>(raw: RawTask)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    // SAFETY: (caller) the registry's reference.
    let harness = unsafe { Harness::<F, S>::from_raw(raw) };
    harness.cancel_future();
    harness.complete(false);
}

/// `std::panic::catch_unwind`, except under loom: loom reports a race it
/// finds (an unordered `UnsafeCell` access, a leak) by panicking on the
/// thread that hit it, and catching that here would hide it. The models have
/// no panicking futures, so under loom nothing is caught.
#[inline(always)]
pub(crate) fn catch_unwind<R>(
    f: impl FnOnce() -> R + std::panic::UnwindSafe,
) -> std::thread::Result<R> {
    #[cfg(not(loom))]
    return std::panic::catch_unwind(f);
    #[cfg(loom)]
    return Ok(f());
}

/// Drop a panic payload whose own `Drop` might panic again (then leak it: a
/// second unwind here would abort).
pub(crate) fn drop_panic_payload(payload: Box<dyn Any + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        mem::forget(again);
    }
}

/// Drop an output value whose `Drop` may panic.
fn drop_output_value<T>(value: T) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(move || drop(value))) {
        drop_panic_payload(payload);
    }
}
