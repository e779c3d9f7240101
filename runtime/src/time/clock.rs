//! The runtime's clock: real time, or a paused clock that moves only when told.

use std::fmt;
use std::time::Duration;

use magpie_core::sync::atomic::{AtomicBool, Ordering};
use magpie_core::sync::Mutex;

use super::{lock, Instant};

/// A clock that reads real time until it is paused, then stands still except
/// for [`advance`](Clock::advance).
///
/// The clock reads `anchor_virtual + (real_now - anchor_real)` while running
/// and `anchor_virtual` while paused:
///
/// - [`pause`](Clock::pause) sets `anchor_virtual` to the current reading,
///   rounded **up** to a whole millisecond after the clock's origin (the
///   driver's tick 0), so that whole-millisecond sleeps and `advance`s line up
///   exactly with the wheel's 1 ms ticks;
/// - [`advance`](Clock::advance) adds to `anchor_virtual`;
/// - [`resume`](Clock::resume) sets `anchor_real` to real now, so time goes
///   on from where it stood.
///
/// The reading never goes backwards. A clock that has never been paused reads
/// `std::time::Instant::now()` with no lock (one Relaxed load of a flag); once
/// paused, every reading takes the clock's mutex. Pausing is for tests, so
/// the slow path only ever costs tests.
pub struct Clock {
    origin: std::time::Instant,
    /// Set (forever) by the first pause. Relaxed: it only routes a reading to
    /// the locked path, and the mutex orders everything behind it. A reader
    /// that races the first `pause` and misses the flag returns real time,
    /// which is what it would have read a moment earlier; pause the clock
    /// before timers are in use (as tests do) and this never matters.
    skewed: AtomicBool,
    state: Mutex<ClockState>,
}

#[derive(Debug)]
struct ClockState {
    paused: bool,
    anchor_real: std::time::Instant,
    anchor_virtual: std::time::Instant,
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Clock")
            .field("paused", &self.is_paused())
            .field("now", &self.now())
            .finish()
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// A running clock that reads real time; its origin is now.
    pub fn new() -> Self {
        let origin = std::time::Instant::now();
        Self {
            origin,
            skewed: AtomicBool::new(false),
            state: Mutex::new(ClockState {
                paused: false,
                anchor_real: origin,
                anchor_virtual: origin,
            }),
        }
    }

    /// A clock paused at its origin (tokio's `start_paused`): it reads the
    /// same instant until advanced or resumed.
    pub fn new_paused() -> Self {
        let clock = Self::new();
        clock.skewed.store(true, Ordering::Relaxed);
        lock(&clock.state).paused = true;
        clock
    }

    /// The instant the driver calls tick 0.
    pub fn origin(&self) -> Instant {
        Instant::from_std(self.origin)
    }

    /// The current reading.
    pub fn now(&self) -> Instant {
        if !self.skewed.load(Ordering::Relaxed) {
            return Instant::from_std(std::time::Instant::now());
        }
        Instant::from_std(read(&lock(&self.state)))
    }

    /// Whether the clock is paused.
    pub fn is_paused(&self) -> bool {
        self.skewed.load(Ordering::Relaxed) && lock(&self.state).paused
    }

    /// Freezes the clock at its current reading, rounded up to a whole
    /// millisecond after [`origin`](Self::origin).
    ///
    /// # Panics
    /// If the clock is already paused.
    pub fn pause(&self) {
        let mut state = lock(&self.state);
        assert!(!state.paused, "time is already paused");
        let now = read(&state);
        let since_origin = now.saturating_duration_since(self.origin);
        let whole_ms = since_origin.as_nanos().div_ceil(1_000_000);
        let aligned = u64::try_from(whole_ms)
            .ok()
            .and_then(|ms| self.origin.checked_add(Duration::from_millis(ms)))
            .unwrap_or(now);
        state.anchor_virtual = aligned.max(now);
        state.paused = true;
        self.skewed.store(true, Ordering::Relaxed);
    }

    /// Lets the clock run again from where it stands.
    ///
    /// # Panics
    /// If the clock is not paused.
    pub fn resume(&self) {
        let mut state = lock(&self.state);
        assert!(state.paused, "time is not paused");
        state.anchor_real = std::time::Instant::now();
        state.paused = false;
    }

    /// Moves a paused clock forward by `d`. This only moves the clock: no
    /// timer fires until the driver processes (the free function
    /// [`time::advance`](super::advance) does both).
    ///
    /// # Panics
    /// If the clock is not paused, or the new reading overflows `Instant`.
    pub fn advance(&self, d: Duration) {
        let mut state = lock(&self.state);
        assert!(state.paused, "time can only be advanced while paused");
        state.anchor_virtual = state
            .anchor_virtual
            .checked_add(d)
            .expect("advancing the paused clock overflows Instant");
    }

    /// Moves a paused clock forward to `target` if it reads earlier. Returns
    /// `false`, doing nothing, if the clock is running.
    pub(crate) fn advance_to(&self, target: Instant) -> bool {
        let mut state = lock(&self.state);
        if !state.paused {
            return false;
        }
        state.anchor_virtual = state.anchor_virtual.max(target.into_std());
        true
    }
}

fn read(state: &ClockState) -> std::time::Instant {
    if state.paused {
        state.anchor_virtual
    } else {
        state.anchor_virtual + state.anchor_real.elapsed()
    }
}
