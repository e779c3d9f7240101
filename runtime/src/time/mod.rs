//! # Time: sleeps, intervals and the timer driver
//!
//! ```text
//! sleep / sleep_until ──► Sleep ──┐            ┌── Clock (real or paused)
//! interval / interval_at ► Interval (owns a Sleep)
//!                                 ▼            │
//!            thread-local current Driver ──────┘
//!                 │  Mutex<Wheel<Option<Waker>>> + lock-free next_deadline
//!                 ▼
//!     the runtime: next_expiration(), process(now), auto_advance_if_idle()
//! ```
//!
//! - [`Instant`] is read from the current runtime's [`Clock`], so a paused
//!   clock is seen by every `Instant::now()` inside the runtime.
//! - [`sleep`] / [`sleep_until`] return a [`Sleep`] future backed by one entry
//!   in a hierarchical timing [`wheel`] (6 levels × 64 slots, 1 ms ticks,
//!   deadlines rounded up, O(1) insert and cancel, no `unsafe`).
//! - [`interval`] / [`interval_at`] tick on a fixed grid; after an overrun the
//!   [`OverrunPolicy`] (seed 004's `drop_tick`, `skip_next`,
//!   `catch_up_once`) picks the next tick, and [`IntervalStats`] counts
//!   ticks, overruns, skipped ticks and the maximum lateness.
//! - [`timeout`] / [`timeout_at`] bound a future by a deadline
//!   ([`error::Elapsed`] when it passes first), with tokio's semantics.
//! - [`pause`], [`resume`] and [`advance`] control the current runtime's
//!   clock for tests; a runtime built with `start_paused(true)` also
//!   auto-advances it to the next deadline whenever it is idle.
//! - [`Driver`] and [`enter`] are the seam the runtime plugs into.
//!
//! `time/README.md` describes the wheel, rounding, cancellation, the driver
//! seam, the paused clock and the overrun policies, with diagrams.

mod clock;
mod driver;
pub mod error;
mod instant;
mod interval;
mod sleep;
mod timeout;
pub mod wheel;

use std::cell::RefCell;
use std::fmt;
use std::marker::PhantomData;
use std::sync::PoisonError;
use std::task::{Context, Poll};

use magpie_core::sync::{Mutex, MutexGuard};

pub use std::time::Duration;

pub use clock::Clock;
pub use driver::{Driver, WAKE_BATCH};
pub use error::Elapsed;
pub use instant::Instant;
pub use interval::{
    interval, interval_at, Interval, IntervalStats, MissedTickBehavior, OverrunPolicy, TickPlan,
};
pub use sleep::{sleep, sleep_until, Sleep};
pub use timeout::{timeout, timeout_at, Timeout};

magpie_core::sync::thread_local! {
    /// The driver `sleep`, `interval` and `Instant::now` use on this thread.
    // Not `const { .. }`: loom's `thread_local!` (edition 2018) cannot parse
    // an inline const block, and this line must compile under `cfg(loom)`.
    #[allow(clippy::missing_const_for_thread_local)]
    static CURRENT: RefCell<Option<Driver>> = RefCell::new(None);
}

/// Installs `driver` as this thread's current time driver until the guard is
/// dropped (which restores the previous one, so guards nest; drop them in
/// reverse order). The runtime holds one on each worker thread and inside
/// `block_on`; a test executor holds one around the code it drives.
pub fn enter(driver: &Driver) -> EnterGuard {
    let prev = CURRENT.with(|current| current.borrow_mut().replace(driver.clone()));
    EnterGuard {
        prev,
        _not_send: PhantomData,
    }
}

/// Restores the previous current driver when dropped. Not `Send`: it belongs
/// to the thread that entered.
#[must_use = "the driver is current only while the guard lives"]
pub struct EnterGuard {
    prev: Option<Driver>,
    _not_send: PhantomData<*const ()>,
}

impl fmt::Debug for EnterGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnterGuard").finish_non_exhaustive()
    }
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        let prev = self.prev.take();
        // `try_with`: the guard may be dropped while the thread's locals are
        // being torn down; then there is nothing left to restore.
        // The replaced driver is dropped after the borrow ends, in case its
        // drop is the last one and frees tasks whose drops read the clock.
        let replaced = CURRENT.try_with(|current| current.replace(prev));
        drop(replaced);
    }
}

/// Runs `f` with this thread's current driver, if any.
pub(crate) fn with_current<R>(f: impl FnOnce(Option<&Driver>) -> R) -> R {
    CURRENT.with(|current| f(current.borrow().as_ref()))
}

/// This thread's current driver, or a panic naming `what`.
#[track_caller]
pub(crate) fn current(what: &str) -> Driver {
    match Driver::try_current() {
        Some(driver) => driver,
        None => panic!(
            "`magpie_runtime::time::{what}` must be called from within a magpie runtime \
             (no timer driver is installed on this thread; see `time::enter`)"
        ),
    }
}

/// Pauses the current runtime's clock: from now on it moves only through
/// [`advance`] (or the runtime's auto-advance when idle). The reading is
/// rounded up to a whole millisecond after the clock's origin so that whole
/// millisecond sleeps and advances line up with the wheel's ticks.
///
/// # Panics
/// Outside a magpie runtime, or if the clock is already paused.
#[track_caller]
pub fn pause() {
    current("pause").clock().pause();
}

/// Lets the current runtime's clock run again from where it stands.
///
/// # Panics
/// Outside a magpie runtime, or if the clock is not paused.
#[track_caller]
pub fn resume() {
    current("resume").clock().resume();
}

/// Moves the current runtime's paused clock forward by `d` and fires every
/// timer now due, waking their tasks.
///
/// **Synchronous**: it returns once the wakes have been issued. The woken
/// tasks run when the runtime (or test executor) next polls them; an async
/// caller that wants to observe them should yield afterwards.
///
/// # Panics
/// Outside a magpie runtime, or if the clock is not paused.
#[track_caller]
pub fn advance(d: Duration) {
    let driver = current("advance");
    driver.clock().advance(d);
    driver.process(driver.clock().now());
}

/// **The cooperative-budget hook.** Every timer future (`Sleep`, and
/// `Interval` through it) calls this first on each poll and returns
/// `Pending` when it does: it spends one unit of the task's budget (128 per
/// poll, seed 003), or, when the budget is spent, wakes `cx`'s waker and
/// returns `Pending` so the task yields. Outside a task poll there is no
/// budget and it always proceeds.
#[inline]
pub(crate) fn coop_poll_proceed(cx: &mut Context<'_>) -> Poll<()> {
    crate::rt::coop::poll_proceed(cx).map(drop)
}

/// Locks a time mutex, ignoring poisoning. No wake and no waker drop runs
/// under these locks (the one piece of outside code that does is
/// `Waker::clone`, when a `Sleep` stores its waker). The panics that can
/// happen under them are the API assertions (shut-down driver, pause of a
/// paused clock), which fire before anything is changed, and internal
/// invariant checks; so the state behind a poisoned lock is consistent.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
