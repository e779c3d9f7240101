//! The parker: one sleeping worker thread and the handles that wake it.
//!
//! A [`Parker`] is owned by the thread that sleeps; [`Unparker`]s are cloned
//! out to everyone who may wake it. Their shared word holds one of four
//! states ([`UNPARKED`], [`PARKED`], [`NOTIFIED`], [`PARKED_DRIVER`]); the
//! protocol, and why an unpark that comes before the park is never lost, is
//! written out step by step in `README.md` beside this file.
//!
//! A thread may also sleep *in a driver* (an I/O poller) instead of on the
//! futex: [`Parker::park_in_driver`] runs the driver's own blocking wait, and
//! an unpark that finds the thread there calls the wake hook installed with
//! [`Parker::set_driver_wake`] (for an I/O driver, its poller's waker).
//!
//! The sleeping itself is a futex wait on that word. The backend is picked at
//! compile time:
//!
//! | build | backend |
//! | --- | --- |
//! | Linux | `atomic-wait` for wait and wake, a raw `FUTEX_WAIT` syscall when a timeout is needed |
//! | other targets | a `Mutex` + `Condvar` that emulate a futex |
//! | `cfg(loom)` | the same emulation over loom's `Mutex` + `Condvar`; `park_timeout` never times out |

use core::fmt;
use core::marker::PhantomData;
#[cfg(not(loom))]
use std::time::{Duration, Instant};

use crate::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use crate::sync::{Arc, Mutex};

// On Linux outside loom it is only built for the tests, which run the
// parker over both backends.
#[cfg(any(loom, test, not(target_os = "linux")))]
mod condvar;
#[cfg(all(target_os = "linux", not(loom)))]
mod futex;
// Two system calls and no shared memory: the same under loom.
#[cfg(target_os = "linux")]
pub mod timerfd;

cfg_if::cfg_if! {
    if #[cfg(all(target_os = "linux", not(loom)))] {
        type Backend = futex::Futex;
    } else {
        type Backend = condvar::CondvarFutex;
    }
}

/// The thread is running and no unpark is pending.
pub const UNPARKED: u32 = 0;
/// The thread is asleep, or about to be, in [`Parker::park`].
pub const PARKED: u32 = 1;
/// An unpark arrived; the next (or current) park returns and resets to
/// [`UNPARKED`].
pub const NOTIFIED: u32 = 2;
/// The thread is asleep, or about to be, in a driver's wait
/// ([`Parker::park_in_driver`]): an unpark calls the driver wake hook instead
/// of waking the futex.
pub const PARKED_DRIVER: u32 = 3;

/// The hook an unpark calls when it finds the thread [`PARKED_DRIVER`]: it
/// must make the driver's wait return, whether the wait has started yet or
/// not (a wake before the wait must be kept, as `mio::Waker`'s eventfd keeps
/// it). Installed once per parker with [`Parker::set_driver_wake`]. A std
/// `Arc`, also under loom: the hook is plain data; the lock around it and what
/// it calls are what the model checks.
pub type DriverWake = std::sync::Arc<dyn Fn() + Send + Sync>;

/// The ordering of every RMW that takes a token (steps 1, 3 and 4 of the
/// README): Acquire, pairing with [`PUBLISH`].
#[cfg(not(magpie_broken = "parker_relaxed"))]
const CONSUME: Ordering = Ordering::Acquire;
/// The ordering of the unparker's swap (step U1): Release, pairing with
/// [`CONSUME`].
#[cfg(not(magpie_broken = "parker_relaxed"))]
const PUBLISH: Ordering = Ordering::Release;
// broken: nothing orders the unparker's writes before the parker's reads.
#[cfg(magpie_broken = "parker_relaxed")]
const CONSUME: Ordering = Ordering::Relaxed;
#[cfg(magpie_broken = "parker_relaxed")]
const PUBLISH: Ordering = Ordering::Relaxed;

/// What a backend must provide: a futex, or something that behaves like one.
///
/// `wait` may return at any time (spuriously); it must not sleep if `state`
/// no longer holds `expected` when it starts, and `wake_one` called after a
/// change of `state` must wake a thread sleeping in `wait` on that state.
pub(crate) trait Sleep: Default {
    /// Sleeps while `state == expected`, until woken (or spuriously).
    fn wait(&self, state: &AtomicU32, expected: u32);
    /// As `wait`, for at most `timeout`. Returns true if the timeout expired.
    #[cfg(not(loom))]
    fn wait_timeout(&self, state: &AtomicU32, expected: u32, timeout: Duration) -> bool;
    /// Wakes one thread sleeping on `state`.
    fn wake_one(&self, state: &AtomicU32);
}

/// How a [`Parker::park_timeout`] ended.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParkResult {
    /// An unpark woke the thread (or had arrived before the park).
    Notified,
    /// The timeout expired with no unpark.
    TimedOut,
}

/// The state the parker and its unparkers share.
struct Inner<B> {
    state: AtomicU32,
    /// Returns from the backend's wait that found no notification, before any
    /// deadline. Only the parking thread writes it (Relaxed: a statistic).
    spurious: AtomicU64,
    backend: B,
    /// The driver wake hook, set once before the first `park_in_driver` and
    /// read by an unpark only when it finds [`PARKED_DRIVER`] (that path
    /// ends in a syscall anyway; the lock costs nothing next to it).
    driver_wake: Mutex<Option<DriverWake>>,
}

impl<B: Sleep> Inner<B> {
    fn new() -> Self {
        Self {
            state: AtomicU32::new(UNPARKED),
            spurious: AtomicU64::new(0),
            backend: B::default(),
            driver_wake: Mutex::new(None),
        }
    }
}

/// The sleeping side. Owned by one thread: `Send` but not `Sync` or `Clone`.
///
/// ```compile_fail
/// fn shared<T: Sync>() {}
/// shared::<magpie_core::park::Parker>();
/// ```
pub struct Parker {
    raw: RawParker<Backend>,
}

/// The waking side: `Clone + Send + Sync`.
#[derive(Clone)]
pub struct Unparker {
    raw: RawUnparker<Backend>,
}

impl Parker {
    /// A parker in the [`UNPARKED`] state.
    pub fn new() -> Self {
        Self {
            raw: RawParker::new(),
        }
    }

    /// A handle that wakes this parker.
    pub fn unparker(&self) -> Unparker {
        Unparker {
            raw: self.raw.unparker(),
        }
    }

    /// Sleeps until unparked. Returns at once, consuming it, if an unpark
    /// arrived since the last park returned. Spurious returns from the backend
    /// are absorbed here (and counted in [`Parker::spurious_wakeups`]).
    ///
    /// Everything the unparking thread wrote before its [`Unparker::unpark`]
    /// is visible to this thread when `park` returns.
    pub fn park(&self) {
        self.raw.park();
    }

    /// As [`Parker::park`], but gives up after `timeout`.
    ///
    /// Under `cfg(loom)` the timeout is ignored and this is exactly `park`, so a
    /// model that finishes proves no wakeup depends on a timeout.
    pub fn park_timeout(&self, timeout: core::time::Duration) -> ParkResult {
        self.raw.park_timeout(timeout)
    }

    /// Installs the hook an [`Unparker::unpark`] calls when it finds this
    /// thread asleep in a driver ([`Parker::park_in_driver`]). Replaces any
    /// earlier hook. Call it before the first `park_in_driver`.
    pub fn set_driver_wake(&self, wake: DriverWake) {
        self.raw.set_driver_wake(wake);
    }

    /// Sleeps in a driver: `wait` is the driver's own blocking wait (for an
    /// I/O driver, `poll.poll(events, timeout)`). Returns at once, without
    /// calling `wait`, if an unpark is pending (steps D1-D3 of the README).
    ///
    /// An unpark that arrives while the thread is in (or about to enter)
    /// `wait` calls the driver wake hook, which must make `wait` return.
    /// `wait` may also return on its own (a timeout, I/O events); the result
    /// is then [`ParkResult::TimedOut`] and nothing is retried. `Notified`
    /// means an unpark's token was consumed, with the unparker's writes
    /// visible as after [`Parker::park`].
    ///
    /// Panics if no hook was installed with [`Parker::set_driver_wake`]: an
    /// unpark could not reach the thread.
    pub fn park_in_driver(&self, wait: impl FnOnce()) -> ParkResult {
        self.raw.park_in_driver(wait)
    }

    /// How many times the backend's wait returned, before any deadline, without
    /// a notification (futex spurious wakeups, signals, condvar spurious wakes).
    pub fn spurious_wakeups(&self) -> u64 {
        self.raw.inner.spurious.load(Ordering::Relaxed)
    }
}

impl Default for Parker {
    fn default() -> Self {
        Self::new()
    }
}

impl Unparker {
    /// Makes the next (or current) park return.
    ///
    /// Returns true if the thread was [`PARKED`] and a wake was issued; false if
    /// it was running, in which case the unpark is remembered as [`NOTIFIED`]
    /// and the next park returns at once. Unparks that arrive while one is
    /// already pending merge into it.
    pub fn unpark(&self) -> bool {
        self.raw.unpark()
    }
}

impl fmt::Debug for Parker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.raw.inner.fmt_state("Parker", f)
    }
}

impl fmt::Debug for Unparker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.raw.inner.fmt_state("Unparker", f)
    }
}

impl<B> Inner<B> {
    fn fmt_state(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state.load(Ordering::Relaxed) {
            UNPARKED => "UNPARKED",
            PARKED => "PARKED",
            NOTIFIED => "NOTIFIED",
            PARKED_DRIVER => "PARKED_DRIVER",
            _ => "?",
        };
        f.debug_struct(name).field("state", &state).finish()
    }
}

/// The parker over any [`Sleep`] backend, so tests can drive the condvar
/// emulation on Linux too.
pub(crate) struct RawParker<B> {
    inner: Arc<Inner<B>>,
    /// Whether `set_driver_wake` ran (owner-only, so a plain `Cell`).
    has_driver_wake: core::cell::Cell<bool>,
    /// `!Sync`: only the owning thread parks (two threads sleeping on one word
    /// would each need their own notification, and there is only one).
    _not_sync: PhantomData<core::cell::Cell<()>>,
}

pub(crate) struct RawUnparker<B> {
    inner: Arc<Inner<B>>,
}

impl<B> Clone for RawUnparker<B> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<B: Sleep> RawParker<B> {
    pub(crate) fn new() -> Self {
        Self {
            inner: Arc::new(Inner::new()),
            has_driver_wake: core::cell::Cell::new(false),
            _not_sync: PhantomData,
        }
    }

    pub(crate) fn unparker(&self) -> RawUnparker<B> {
        RawUnparker {
            inner: Arc::clone(&self.inner),
        }
    }

    /// Steps 1 and D1 of the README: announce the sleep (`parked` is PARKED
    /// or PARKED_DRIVER), or consume a pending unpark. Returns false if an
    /// unpark was pending (and is now consumed).
    #[inline]
    fn announce(&self, parked: u32) -> bool {
        // broken: a plain store overwrites a NOTIFIED that came first; that
        // unpark saw the thread running and did not call the hook.
        #[cfg(magpie_broken = "driver_announce_by_store")]
        if parked == PARKED_DRIVER {
            self.inner.state.store(PARKED_DRIVER, Ordering::Relaxed);
            return true;
        }
        // Relaxed on success: publishing PARKED (PARKED_DRIVER) carries no
        // data; the waker only needs to see the value to know a wake is due.
        // On failure the state was NOTIFIED (only unparkers write anything
        // but UNPARKED and the parked states, and they write only NOTIFIED).
        match self.inner.state.compare_exchange(
            UNPARKED,
            parked,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => true,
            Err(seen) => {
                debug_assert_eq!(seen, NOTIFIED);
                self.consume_pending()
            }
        }
    }

    /// The failure branch of steps 1 and D1: the word was NOTIFIED; take the
    /// token. Returns false (the park must not sleep).
    #[inline]
    fn consume_pending(&self) -> bool {
        // broken: return on the token without taking it, so it stays behind
        // and ends the next park too.
        #[cfg(magpie_broken = "park_does_not_consume")]
        return false;
        // Acquire: pairs with the Release swap in `unpark`; a swap, not a
        // store, so it reads the latest NOTIFIED and so synchronizes with
        // every unpark merged into it.
        #[cfg(not(magpie_broken = "park_does_not_consume"))]
        {
            let prev = self.inner.state.swap(UNPARKED, CONSUME);
            debug_assert_eq!(prev, NOTIFIED);
            false
        }
    }

    /// Step 3: after a return from the backend, consume NOTIFIED if it is
    /// there. Returns true if it was.
    #[inline]
    fn consume_after_wait(&self) -> bool {
        // Acquire: pairs with the Release swap in `unpark`. While we are
        // PARKED the only other write is an unparker's NOTIFIED, so the state
        // is either still PARKED (a spurious return) or NOTIFIED.
        #[cfg(magpie_broken = "park_does_not_consume")]
        return self.inner.state.load(CONSUME) == NOTIFIED;
        #[cfg(not(magpie_broken = "park_does_not_consume"))]
        match self
            .inner
            .state
            .compare_exchange(NOTIFIED, UNPARKED, CONSUME, Ordering::Relaxed)
        {
            Ok(_) => true,
            Err(seen) => {
                debug_assert_eq!(seen, PARKED);
                false
            }
        }
    }

    pub(crate) fn set_driver_wake(&self, wake: DriverWake) {
        *self
            .inner
            .driver_wake
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(wake);
        self.has_driver_wake.set(true);
    }

    /// Steps D1-D3 of the README.
    pub(crate) fn park_in_driver(&self, wait: impl FnOnce()) -> ParkResult {
        assert!(
            self.has_driver_wake.get(),
            "park_in_driver needs a wake hook (Parker::set_driver_wake)"
        );
        // D1: announce the driver sleep, or consume a pending unpark.
        if !self.announce(PARKED_DRIVER) {
            return ParkResult::Notified;
        }
        // D2: the driver's wait. An unpark from here on finds PARKED_DRIVER
        // and calls the hook, which makes this return (or keeps the wake for
        // it, if it has not started yet).
        wait();
        // D3: leave. A swap, so an unpark that landed meanwhile is consumed
        // here rather than left to end the next park early. Acquire: pairs
        // with the Release swap in `unpark`, as in step 1.
        match self.inner.state.swap(UNPARKED, CONSUME) {
            NOTIFIED => ParkResult::Notified,
            seen => {
                debug_assert_eq!(seen, PARKED_DRIVER);
                ParkResult::TimedOut
            }
        }
    }

    pub(crate) fn park(&self) {
        if !self.announce(PARKED) {
            return;
        }
        loop {
            // Step 2: sleep while PARKED.
            self.inner.backend.wait(&self.inner.state, PARKED);
            if self.consume_after_wait() {
                return;
            }
            self.inner.spurious.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[cfg(loom)]
    pub(crate) fn park_timeout(&self, _timeout: core::time::Duration) -> ParkResult {
        // Loom has no clock: a model must never rely on the timeout.
        self.park();
        ParkResult::Notified
    }

    #[cfg(not(loom))]
    pub(crate) fn park_timeout(&self, timeout: Duration) -> ParkResult {
        // None: the deadline is past what `Instant` can hold; wait untimed.
        let Some(deadline) = Instant::now().checked_add(timeout) else {
            self.park();
            return ParkResult::Notified;
        };
        if !self.announce(PARKED) {
            return ParkResult::Notified;
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let timed_out = self
                .inner
                .backend
                .wait_timeout(&self.inner.state, PARKED, left);
            if self.consume_after_wait() {
                return ParkResult::Notified;
            }
            if !timed_out {
                self.inner.spurious.fetch_add(1, Ordering::Relaxed);
            }
        }
        // Step 4: the deadline passed. Leave PARKED; an unpark that lands
        // first is consumed here, so it is neither lost nor left behind to end
        // the next park early. Acquire: pairs with the Release swap in
        // `unpark`, as in step 1.
        match self.inner.state.swap(UNPARKED, CONSUME) {
            NOTIFIED => ParkResult::Notified,
            seen => {
                debug_assert_eq!(seen, PARKED);
                ParkResult::TimedOut
            }
        }
    }
}

impl<B: Sleep> RawUnparker<B> {
    #[cold]
    fn wake_driver(&self) {
        // Clone out of the lock so the hook (a syscall) runs unlocked. The
        // hook is always there: `park_in_driver` refuses to run without one,
        // and only it writes PARKED_DRIVER.
        let wake = self
            .inner
            .driver_wake
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match wake {
            Some(wake) => wake(),
            None => unreachable!("PARKED_DRIVER without a driver wake hook"),
        }
    }

    pub(crate) fn unpark(&self) -> bool {
        // Release: pairs with the Acquire consumption of NOTIFIED in `park`
        // (steps 1, 3 and 4), so what this thread wrote before unparking is
        // visible when the park returns. A swap, not a CAS from PARKED: an
        // unpark of a running thread must be remembered.
        #[cfg(not(magpie_broken = "unpark_forgets_when_running"))]
        let prev = self.inner.state.swap(NOTIFIED, PUBLISH);
        // broken: only a sleeping thread is notified; an unpark that comes
        // before the park is dropped.
        #[cfg(magpie_broken = "unpark_forgets_when_running")]
        let prev =
            match self
                .inner
                .state
                .compare_exchange(PARKED, NOTIFIED, PUBLISH, Ordering::Relaxed)
            {
                Ok(p) | Err(p) => p,
            };
        match prev {
            PARKED => {
                self.inner.backend.wake_one(&self.inner.state);
                true
            }
            // U3: asleep in a driver's wait (D2), or about to be: the futex
            // would not reach it; the driver's hook does.
            #[cfg(not(magpie_broken = "unpark_ignores_driver"))]
            PARKED_DRIVER => {
                self.wake_driver();
                true
            }
            // broken: the driver sleeper is treated as a futex sleeper.
            #[cfg(magpie_broken = "unpark_ignores_driver")]
            PARKED_DRIVER => {
                self.inner.backend.wake_one(&self.inner.state);
                true
            }
            _ => false,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
