//! The timer driver: the wheel behind a lock, a lock-free next-deadline hint,
//! and the clock. This is the seam the runtime plugs into (README, "The
//! driver seam").

use std::fmt;
use std::sync::Arc as StdArc;
use std::task::{Poll, Waker};
use std::time::Duration;

use magpie_core::sync::atomic::{AtomicU64, Ordering};
use magpie_core::sync::{Arc, Mutex};

use super::wheel::{EntryState, Key, Wheel, MAX_TICK};
use super::{lock, Clock, Instant};

/// Wakers fired per lock hold in [`Driver::process`]: the lock is dropped,
/// the batch woken, and the lock taken again, so a wake never runs under the
/// lock and a large expiry does not hold other threads out for long.
pub const WAKE_BATCH: usize = 32;

/// The value of the next-deadline hint when nothing is scheduled.
const NO_DEADLINE: u64 = u64::MAX;

/// Nanoseconds in one wheel tick (the resolution: 1 ms).
const NANOS_PER_TICK: u128 = 1_000_000;

/// Called when a new timer makes the earliest deadline earlier, so that a
/// worker parked until the old deadline can re-arm its timeout.
type Unparker = StdArc<dyn Fn() + Send + Sync>;

/// The timer driver: owns the timing wheel and the clock. Cheap to clone
/// (one `Arc`); `Send + Sync`.
///
/// The runtime holds one per runtime, installs it on every thread that polls
/// futures with [`enter`](super::enter), and from its worker loop:
///
/// 1. reads [`next_expiration`](Driver::next_expiration) (lock-free) to bound
///    how long a worker may park;
/// 2. calls [`process`](Driver::process)`(driver.clock().now())` in its
///    maintenance pass and after a timed park, which wakes every expired
///    timer's task;
/// 3. when every worker is idle and nothing is runnable, calls
///    [`auto_advance_if_idle`](Driver::auto_advance_if_idle) (a no-op unless
///    the clock is paused);
/// 4. optionally registers an unparker with
///    [`set_unparker`](Driver::set_unparker), called when a new timer becomes
///    the earliest;
/// 5. calls [`shutdown`](Driver::shutdown) when the runtime shuts down.
#[derive(Clone)]
pub struct Driver {
    inner: Arc<Inner>,
}

struct Inner {
    clock: Clock,
    /// Tick 0 of the wheel: the clock's origin.
    origin: Instant,
    state: Mutex<State>,
    /// The wheel's `next_expiration()` as of the last locked operation, or
    /// `NO_DEADLINE`. Written only under `state`'s lock, after each change
    /// to the wheel, so it is never later than the earliest deadline.
    /// Relaxed everywhere: it is a hint for a park timeout and carries no
    /// data; the entries themselves are read under the lock. A worker that
    /// reads a stale (later) value and parks on it is woken by the unparker,
    /// which the inserting thread calls after lowering the hint.
    next_deadline: AtomicU64,
}

struct State {
    wheel: Wheel<Option<Waker>>,
    unparker: Option<Unparker>,
    shutdown: bool,
}

impl fmt::Debug for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The wheel's lock is released before the clock's is taken: the two
        // are never held together anywhere.
        let (wheel, shutdown) = {
            let state = lock(&self.inner.state);
            (format!("{:?}", state.wheel), state.shutdown)
        };
        f.debug_struct("Driver")
            .field("clock", &self.inner.clock)
            .field("wheel", &format_args!("{wheel}"))
            .field("shutdown", &shutdown)
            .finish()
    }
}

impl Default for Driver {
    fn default() -> Self {
        Self::new()
    }
}

impl Driver {
    /// A driver on a real-time clock.
    pub fn new() -> Driver {
        Self::with_clock(Clock::new())
    }

    /// A driver whose clock starts paused (tokio's `start_paused`).
    pub fn new_paused() -> Driver {
        Self::with_clock(Clock::new_paused())
    }

    /// A driver on the given clock; the wheel's tick 0 is the clock's origin.
    pub fn with_clock(clock: Clock) -> Driver {
        let origin = clock.origin();
        Driver {
            inner: Arc::new(Inner {
                clock,
                origin,
                state: Mutex::new(State {
                    wheel: Wheel::new(),
                    unparker: None,
                    shutdown: false,
                }),
                next_deadline: AtomicU64::new(NO_DEADLINE),
            }),
        }
    }

    /// The driver installed on this thread by [`enter`](super::enter), if any.
    pub fn try_current() -> Option<Driver> {
        super::with_current(|driver| driver.cloned())
    }

    /// The clock timers are measured against.
    pub fn clock(&self) -> &Clock {
        &self.inner.clock
    }

    /// When the next timer may be due, read without the lock. Never later
    /// than the earliest pending deadline (it may be earlier: the start of
    /// the wheel slot holding it, at most one cascade away). `None` when no
    /// timer is pending. A worker may park until this instant, then call
    /// [`process`](Self::process).
    pub fn next_expiration(&self) -> Option<Instant> {
        match self.inner.next_deadline.load(Ordering::Relaxed) {
            NO_DEADLINE => None,
            tick => Some(self.tick_to_instant(tick)),
        }
    }

    /// Fires every timer due at or before `now`: marks it elapsed and wakes
    /// its task. Wakes run outside the lock, in batches of [`WAKE_BATCH`], in
    /// deadline order. Returns how many timers fired. Safe to call from any
    /// thread, concurrently; `now` should be `self.clock().now()`.
    pub fn process(&self, now: Instant) -> usize {
        let now_tick = self.instant_to_tick_floor(now);
        let mut fired = 0;
        let mut batch: Vec<Waker> = Vec::new();
        loop {
            let done = {
                let mut state = lock(&self.inner.state);
                if state.shutdown {
                    return fired;
                }
                let mut done = false;
                while batch.len() < WAKE_BATCH {
                    let Some(key) = state.wheel.pop_expired(now_tick) else {
                        done = true;
                        break;
                    };
                    fired += 1;
                    if let Some(waker) = state.wheel.get_mut(key).and_then(Option::take) {
                        batch.push(waker);
                    }
                }
                self.publish_next_deadline(&state);
                done
            };
            batch.drain(..).for_each(Waker::wake);
            if done {
                return fired;
            }
        }
    }

    /// For a paused clock with nothing runnable: moves the clock to the next
    /// timer's deadline and fires it (and everything due with it). Returns
    /// whether a timer fired; `false`, doing nothing, when the clock is
    /// running, no timer is pending, or the driver is shut down.
    ///
    /// The runtime calls this only when every worker is idle and no task is
    /// runnable (the condition under which tokio auto-advances a paused
    /// clock); a test executor calls it when it has nothing left to poll.
    /// It steps from slot start to slot start, so the clock lands exactly on
    /// the earliest deadline (to the millisecond), never past it.
    pub fn auto_advance_if_idle(&self) -> bool {
        if !self.inner.clock.is_paused() {
            return false;
        }
        loop {
            let next = {
                let state = lock(&self.inner.state);
                if state.shutdown {
                    return false;
                }
                state.wheel.next_expiration()
            };
            let Some(tick) = next else {
                return false;
            };
            if !self.inner.clock.advance_to(self.tick_to_instant(tick)) {
                return false; // resumed meanwhile
            }
            if self.process(self.inner.clock.now()) > 0 {
                return true;
            }
        }
    }

    /// Registers `unparker`, called (outside the lock) each time a new or
    /// reset timer makes [`next_expiration`](Self::next_expiration) earlier.
    /// Replaces any earlier one.
    pub fn set_unparker(&self, unparker: impl Fn() + Send + Sync + 'static) {
        lock(&self.inner.state).unparker = Some(StdArc::new(unparker));
    }

    /// Stops the driver: drops every stored waker (breaking the cycle
    /// driver → waker → task → `Sleep` → driver) and makes later timer
    /// registrations and polls panic. Timers never fire after this.
    pub fn shutdown(&self) {
        let wakers: Vec<Waker> = {
            let mut state = lock(&self.inner.state);
            state.shutdown = true;
            state.unparker = None;
            let wheel = &mut state.wheel;
            let mut taken = Vec::new();
            // Scheduled entries are reachable by expiring them all.
            while let Some(key) = wheel.pop_expired(MAX_TICK) {
                taken.extend(wheel.get_mut(key).and_then(Option::take));
            }
            self.inner
                .next_deadline
                .store(NO_DEADLINE, Ordering::Relaxed);
            taken
        };
        drop(wakers); // outside the lock: a waker's drop may free a task
    }

    /// Live timer entries (pending, or fired and not yet observed by their
    /// `Sleep`). Zero once every `Sleep` has completed or been dropped.
    pub fn active_timers(&self) -> usize {
        lock(&self.inner.state).wheel.len()
    }

    // ----- the entry protocol used by `Sleep` -----

    /// First poll of a sleep: `None` if `deadline` has passed (by the clock
    /// or the wheel), else a new entry holding `waker`.
    pub(crate) fn register(&self, deadline: Instant, waker: &Waker) -> Option<Key> {
        if deadline <= self.inner.clock.now() {
            return None;
        }
        let tick = self.instant_to_tick_ceil(deadline);
        let (key, unparker) = {
            let mut state = lock(&self.inner.state);
            assert!(!state.shutdown, "{SHUT_DOWN}");
            if tick <= state.wheel.elapsed() {
                return None;
            }
            let (key, entry) = state.wheel.insert(tick, Some(waker.clone()));
            debug_assert_eq!(entry, EntryState::Scheduled);
            (key, self.publish_next_deadline(&state))
        };
        if let Some(unpark) = unparker {
            unpark();
        }
        Some(key)
    }

    /// Later polls: `Ready` (and the entry freed) once fired; otherwise the
    /// stored waker is replaced by `waker` unless it would wake the same task.
    pub(crate) fn poll_entry(&self, key: Key, waker: &Waker) -> Poll<()> {
        let old: Option<Waker>;
        let result = {
            let mut state = lock(&self.inner.state);
            assert!(!state.shutdown, "{SHUT_DOWN}");
            match state.wheel.state(key) {
                Some(EntryState::Scheduled) => {
                    let slot = state.wheel.get_mut(key).expect("live entry");
                    old = match slot {
                        Some(stored) if stored.will_wake(waker) => None,
                        _ => slot.replace(waker.clone()),
                    };
                    Poll::Pending
                }
                Some(EntryState::Fired) | None => {
                    old = state.wheel.remove(key).flatten();
                    Poll::Ready(())
                }
            }
        };
        drop(old); // outside the lock: a waker's drop may free a task
        result
    }

    /// `Sleep::reset` of a registered entry: same slab entry, new deadline,
    /// waker kept. If the new deadline has passed the entry is fired at once
    /// and its waker woken (so the owning task re-polls and completes).
    pub(crate) fn reschedule(&self, key: Key, deadline: Instant) {
        let elapsed_by_clock = deadline <= self.inner.clock.now();
        let tick = self.instant_to_tick_ceil(deadline);
        let (wake, unparker) = {
            let mut state = lock(&self.inner.state);
            assert!(!state.shutdown, "{SHUT_DOWN}");
            let entry = if elapsed_by_clock {
                state.wheel.fire(key);
                Some(EntryState::Fired)
            } else {
                state.wheel.reschedule(key, tick)
            };
            let wake = match entry {
                Some(EntryState::Fired) => state.wheel.get_mut(key).and_then(Option::take),
                _ => None,
            };
            (wake, self.publish_next_deadline(&state))
        };
        if let Some(waker) = wake {
            waker.wake();
        }
        if let Some(unpark) = unparker {
            unpark();
        }
    }

    /// `Sleep`'s drop: frees the entry, scheduled or fired. O(1).
    pub(crate) fn cancel(&self, key: Key) {
        let old = {
            let mut state = lock(&self.inner.state);
            let old = state.wheel.remove(key).flatten();
            self.publish_next_deadline(&state);
            old
        };
        drop(old); // outside the lock: a waker's drop may free a task
    }

    // ----- ticks -----

    /// Stores the wheel's next expiration in the hint (under the lock) and
    /// returns the unparker to call if the hint moved earlier.
    fn publish_next_deadline(&self, state: &State) -> Option<Unparker> {
        let next = state.wheel.next_expiration().unwrap_or(NO_DEADLINE);
        let old = self.inner.next_deadline.swap(next, Ordering::Relaxed);
        if next < old {
            state.unparker.clone()
        } else {
            None
        }
    }

    /// The tick a deadline fires at: rounded **up** to a whole millisecond,
    /// so a timer never fires early.
    pub(crate) fn instant_to_tick_ceil(&self, t: Instant) -> u64 {
        let nanos = t.saturating_duration_since(self.inner.origin).as_nanos();
        clamp_tick(nanos.div_ceil(NANOS_PER_TICK))
    }

    /// The earliest instant at which a timer due at `deadline` can fire: the
    /// deadline rounded up to the wheel's resolution (1 ms after the origin).
    /// An interval counts its overruns from here (interval.rs, `poll_tick`).
    pub(crate) fn firing_instant(&self, deadline: Instant) -> Instant {
        self.tick_to_instant(self.instant_to_tick_ceil(deadline))
    }

    /// The last whole tick at or before `t`: what `process(t)` may fire.
    fn instant_to_tick_floor(&self, t: Instant) -> u64 {
        let nanos = t.saturating_duration_since(self.inner.origin).as_nanos();
        clamp_tick(nanos / NANOS_PER_TICK)
    }

    fn tick_to_instant(&self, tick: u64) -> Instant {
        self.inner
            .origin
            .saturating_add(Duration::from_millis(tick))
    }
}

const SHUT_DOWN: &str = "the magpie runtime's timer driver has shut down";

fn clamp_tick(ticks: u128) -> u64 {
    u64::try_from(ticks).unwrap_or(MAX_TICK).min(MAX_TICK)
}
