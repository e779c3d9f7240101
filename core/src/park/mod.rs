//! The parker: one sleeping worker thread and the handles that wake it.
//!
//! A [`Parker`] is owned by the thread that sleeps; [`Unparker`]s are cloned
//! out to everyone who may wake it. Their shared word holds one of three
//! states ([`UNPARKED`], [`PARKED`], [`NOTIFIED`]); the protocol, and why an
//! unpark that comes before the park is never lost, is written out step by step
//! in `README.md` beside this file.
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
use crate::sync::Arc;

// On Linux outside loom it is only built for the tests, which run the
// parker over both backends.
#[cfg(any(loom, test, not(target_os = "linux")))]
mod condvar;
#[cfg(all(target_os = "linux", not(loom)))]
mod futex;

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
}

impl<B: Sleep> Inner<B> {
    fn new() -> Self {
        Self {
            state: AtomicU32::new(UNPARKED),
            spurious: AtomicU64::new(0),
            backend: B::default(),
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
            _ => "?",
        };
        f.debug_struct(name).field("state", &state).finish()
    }
}

/// The parker over any [`Sleep`] backend, so tests can drive the condvar
/// emulation on Linux too.
pub(crate) struct RawParker<B> {
    inner: Arc<Inner<B>>,
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
            _not_sync: PhantomData,
        }
    }

    pub(crate) fn unparker(&self) -> RawUnparker<B> {
        RawUnparker {
            inner: Arc::clone(&self.inner),
        }
    }

    /// Step 1 of the README: announce the sleep, or consume a pending unpark.
    /// Returns false if an unpark was pending (and is now consumed).
    #[inline]
    fn announce(&self) -> bool {
        // Relaxed on success: publishing PARKED carries no data; the waker
        // only needs to see the value to know a wake is due. On failure the
        // state was NOTIFIED (only unparkers write anything but UNPARKED and
        // PARKED, and they write only NOTIFIED).
        match self.inner.state.compare_exchange(
            UNPARKED,
            PARKED,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => true,
            Err(seen) => {
                debug_assert_eq!(seen, NOTIFIED);
                // broken: return on the token without taking it, so it
                // stays behind and ends the next park too.
                #[cfg(magpie_broken = "park_does_not_consume")]
                return false;
                // Acquire: pairs with the Release swap in `unpark`; a swap,
                // not a store, so it reads the latest NOTIFIED and so
                // synchronizes with every unpark merged into it.
                let prev = self.inner.state.swap(UNPARKED, CONSUME);
                debug_assert_eq!(prev, NOTIFIED);
                false
            }
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

    pub(crate) fn park(&self) {
        if !self.announce() {
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
        if !self.announce() {
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
        if prev == PARKED {
            self.inner.backend.wake_one(&self.inner.state);
            true
        } else {
            false
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
