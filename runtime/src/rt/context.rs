//! Entering a runtime from outside: [`Runtime::enter`] / [`Handle::enter`]
//! and [`Handle::block_on`].

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Wake, Waker};

use magpie_core::park::{Parker, Unparker};
use magpie_core::sync::atomic::{AtomicU8, Ordering};

use super::{coop, park, Handle, Runtime, RuntimeThread, CURRENT, IN_RUNTIME};
use crate::time;

/// The runtime is this thread's context while the guard lives: `spawn`,
/// `Handle::current`, `sleep`, `interval` and `Instant::now` use it. From
/// [`Runtime::enter`] or [`Handle::enter`]. Guards nest; drop them in
/// reverse order. Not `Send`: it belongs to the thread that entered.
#[must_use = "the runtime is the context only while the guard lives"]
pub struct EnterGuard<'a> {
    previous: Option<Handle>,
    _time: time::EnterGuard,
    _handle: PhantomData<&'a Handle>,
}

impl fmt::Debug for EnterGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnterGuard").finish_non_exhaustive()
    }
}

impl Drop for EnterGuard<'_> {
    fn drop(&mut self) {
        let previous = self.previous.take();
        let replaced = CURRENT.try_with(|c| c.replace(previous));
        drop(replaced);
    }
}

impl Runtime {
    /// Makes this runtime the thread's context until the guard is dropped,
    /// so that [`spawn`](crate::spawn), [`Handle::current`] and the timers
    /// work outside `block_on` (tokio's `Runtime::enter`).
    pub fn enter(&self) -> EnterGuard<'_> {
        self.handle.enter()
    }
}

impl Handle {
    /// See [`Runtime::enter`].
    pub fn enter(&self) -> EnterGuard<'_> {
        let previous = CURRENT.with(|c| c.replace(Some(self.clone())));
        EnterGuard {
            previous,
            _time: time::enter(&self.inner.driver),
            _handle: PhantomData,
        }
    }

    /// Runs `future` to completion on the calling thread, with this runtime
    /// as the context for `spawn`, `sleep` and friends (tokio's
    /// `Handle::block_on`). The future is polled on this thread; tasks it
    /// spawns run on the workers.
    ///
    /// With a paused clock, a `block_on` that is polling counts as busy: the
    /// clock auto-advances only while it waits (README, "Paused time").
    ///
    /// # Panics
    /// On a worker of any magpie runtime or inside another `block_on` (it
    /// would block a thread the runtime needs; use `.await`, or wrap the
    /// call in [`block_in_place`](crate::task::block_in_place)).
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        if IN_RUNTIME.with(|r| r.get()) {
            panic!(
                "block_on called from within a magpie runtime (a worker thread or \
                 another block_on); a nested block_on would block a thread the runtime needs. \
                 Use .await instead, or wrap it in magpie_runtime::task::block_in_place."
            );
        }
        let _enter = RuntimeThread::enter(self);
        let inner = &self.inner;
        let parker = Parker::new();
        let wake = Arc::new(ThreadWaker::new(parker.unparker(), inner));
        let waker = Waker::from(wake.clone());
        let mut cx = Context::from_waker(&waker);
        let mut future = std::pin::pin!(future);
        let _busy = Busy::new(inner);
        loop {
            if let Poll::Ready(out) = coop::with_budget(|| future.as_mut().poll(&mut cx)) {
                return out;
            }
            // Woken during the poll (a yield, say): poll again without
            // counting as idle, so a paused clock does not move under a
            // future that is still running.
            if !wake.try_begin_idle() {
                wake.take_woken();
                continue;
            }
            park::release(inner);
            parker.park();
            if !wake.end_idle() {
                park::inhibit(inner);
            }
            wake.take_woken();
        }
    }
}

/// Counts a `block_on` as an auto-advance inhibitor while it polls.
struct Busy<'a> {
    inner: &'a super::RtShared,
}

impl<'a> Busy<'a> {
    fn new(inner: &'a super::RtShared) -> Self {
        park::inhibit(inner);
        Self { inner }
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        park::release(self.inner);
    }
}

/// Wakes a thread blocked in `block_on`, and notes that it did.
///
/// With a paused clock a `block_on` that is polling holds off auto-advance
/// (`park::inhibit`); while it waits it does not. Between a wake and the
/// woken thread's own `inhibit` the runtime would look idle, and a worker
/// could move the clock past the deadlines the woken future is about to
/// read. So a wake that finds the thread waiting (`IDLE`) inhibits on its
/// behalf and hands that count over (`HANDED`); the thread, on waking, takes
/// it instead of inhibiting again.
pub(super) struct ThreadWaker {
    unparker: Unparker,
    rt: Weak<super::RtShared>,
    state: AtomicU8,
}

/// A wake came since the poll began (cleared by `take_woken`).
const WOKEN: u8 = 1;
/// The thread is waiting, its own inhibitor released (`try_begin_idle` to
/// `end_idle`).
const IDLE: u8 = 2;
/// A waker inhibited for the waiting thread; `end_idle` takes the count.
const HANDED: u8 = 4;

impl ThreadWaker {
    pub(super) fn new(unparker: Unparker, rt: &Arc<super::RtShared>) -> Self {
        Self {
            unparker,
            rt: Arc::downgrade(rt),
            state: AtomicU8::new(0),
        }
    }

    /// Whether a wake came since the last call (and clears the note).
    pub(super) fn take_woken(&self) -> bool {
        // Relaxed: only a hint about idleness; the parker orders the wake.
        self.state.fetch_and(!WOKEN, Ordering::Relaxed) & WOKEN != 0
    }

    /// The polling thread is about to release its inhibitor and park: marks
    /// it waiting, unless a wake came since the poll began (`false`: poll
    /// again, still inhibiting).
    pub(super) fn try_begin_idle(&self) -> bool {
        // AcqRel: pairs with the waker's CAS (a wake that lost this race is
        // seen as WOKEN here; one after it sees IDLE).
        self.state
            .compare_exchange(0, IDLE, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// The thread woke from its wait. Returns whether a waker inhibited for
    /// it (then it must not inhibit again: the count is its own now).
    pub(super) fn end_idle(&self) -> bool {
        // AcqRel: pairs with the waker's CAS that set HANDED.
        self.state.fetch_and(!(IDLE | HANDED), Ordering::AcqRel) & HANDED != 0
    }
}

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Inhibit first, then look: the count is never missing between the
        // hand-over and the woken thread's poll. Not handed over (the thread
        // is polling, or a wake already handed one): give it back.
        let rt = self.rt.upgrade();
        if let Some(rt) = &rt {
            park::inhibit(rt);
        }
        let mut cur = self.state.load(Ordering::Relaxed);
        let handed = loop {
            let hand = rt.is_some() && cur & IDLE != 0 && cur & HANDED == 0;
            let next = cur | WOKEN | if hand { HANDED } else { 0 };
            // AcqRel: pairs with `try_begin_idle` and `end_idle`.
            match self
                .state
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => break hand,
                Err(actual) => cur = actual,
            }
        };
        self.unparker.unpark();
        if let (Some(rt), false) = (&rt, handed) {
            park::release(rt);
        }
    }
}
