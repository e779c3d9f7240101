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
    /// How raw `CLOCK_MONOTONIC_COARSE` readings become instants, for
    /// [`timeout`](super::timeout)'s cheap start mark; `None` off Linux.
    coarse: Option<CoarseMap>,
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
        let (origin, coarse) = CoarseMap::new();
        Self {
            origin,
            coarse,
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

    /// A mark of "now" for [`timeout`](super::timeout), cheap on the ready
    /// path: on a clock that has never been paused, the raw coarse clock (a
    /// few ns, against about 30 for a precise read); otherwise (paused time,
    /// or no coarse clock on this OS) the exact reading.
    #[inline]
    pub(crate) fn start_mark(&self) -> StartMark {
        if !self.skewed.load(Ordering::Relaxed) && self.coarse.is_some() {
            if let Some(raw) = magpie_core::clock::coarse_ns() {
                return StartMark::Coarse(raw);
            }
        }
        StartMark::Exact(self.now())
    }

    /// An instant no earlier than the moment `mark` was taken, and at most
    /// [`timeout_lateness_bound`](Self::timeout_lateness_bound) after it:
    /// the start a lazily started timeout counts its duration from
    /// (time/README.md, "Timeouts", steps T1-T3). Reads the precise clock
    /// and the coarse one once each.
    pub(crate) fn resolve(&self, mark: StartMark) -> Instant {
        match mark {
            StartMark::Exact(at) => at,
            StartMark::Coarse(c0) => {
                let now1 = self.now();
                let Some(map) = self.coarse else {
                    return now1;
                };
                let c1 = magpie_core::clock::coarse_ns();
                coarse_start(map.upper_bound(c0), c0, c1, now1)
            }
        }
    }

    /// The latest instant [`resolve`](Self::resolve) can return for `mark`
    /// (what `Timeout::deadline` reports before its first `Pending`).
    pub(crate) fn mark_upper_bound(&self, mark: StartMark) -> Instant {
        match (mark, self.coarse) {
            (StartMark::Exact(at), _) => at,
            (StartMark::Coarse(c0), Some(map)) => map.upper_bound(c0),
            (StartMark::Coarse(_), None) => self.now(),
        }
    }

    /// How much later than its creation a [`timeout`](super::timeout)'s
    /// deadline may start counting: [`COARSE_LAG_RESOLUTIONS`] × the
    /// coarse clock's resolution, plus the error of mapping coarse readings
    /// onto instants (two raw reads around one `Instant::now()` when the
    /// clock was made). Zero where there is no coarse clock (the start is
    /// then read exactly).
    pub fn timeout_lateness_bound(&self) -> Duration {
        self.coarse.map_or(Duration::ZERO, |map| map.lag + map.err)
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

/// How many coarse-clock resolutions a coarse reading may lag the precise
/// clock by, as far as a timeout's start is concerned: the time since the
/// kernel's last tick (under one resolution) plus the remainder that tick
/// left in its accumulation (under one more). Test:
/// `coarse_start_is_never_before_the_mark_and_at_most_the_bound_after`.
pub const COARSE_LAG_RESOLUTIONS: u32 = 2;

/// The start mark of a [`timeout`](super::timeout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StartMark {
    /// The clock's exact reading (paused time, or no coarse clock).
    Exact(Instant),
    /// A raw `CLOCK_MONOTONIC_COARSE` reading, in ns.
    Coarse(u64),
}

/// The start of a timeout marked with coarse reading `c0`, resolved at its
/// first `Pending`, when the precise clock reads `now1` and the coarse clock
/// `c1`. `bound` is `c0` mapped to an instant plus the allowed lag.
///
/// - The coarse clock has not moved since the mark (`c1 == c0`): no tick
///   came between, so `now1` is at most the coarse clock's lag after the
///   mark, and it is never before it. This also covers a kernel whose
///   timekeeping stalls across both reads (`bound` could be early then).
/// - It has moved: `min(bound, now1)`. `now1` is after the mark; `bound` is
///   after it while the coarse clock lags by less than the allowed lag.
pub(crate) fn coarse_start(bound: Instant, c0: u64, c1: Option<u64>, now1: Instant) -> Instant {
    match c1 {
        Some(c1) if c1 != c0 => bound.min(now1),
        _ => now1,
    }
}

/// Raw `CLOCK_MONOTONIC` ns to `std::time::Instant`, made once per clock.
#[derive(Clone, Copy, Debug)]
struct CoarseMap {
    /// A raw reading taken just before `at`.
    raw: u64,
    at: std::time::Instant,
    /// The gap between the raw reads around `at`: a mapped instant is late
    /// by at most this much (never early: `raw` was read first).
    err: Duration,
    /// `COARSE_LAG_RESOLUTIONS` × the coarse clock's resolution.
    lag: Duration,
}

impl CoarseMap {
    /// Tries to bracket an `Instant::now()` this tightly between two raw
    /// reads; keeps the tightest of `MAP_TRIES`.
    const TIGHT: Duration = Duration::from_micros(20);
    const MAP_TRIES: usize = 8;

    /// The clock's origin, and the map (none without a coarse clock).
    fn new() -> (std::time::Instant, Option<CoarseMap>) {
        use magpie_core::clock::{coarse_resolution, monotonic_ns};
        let Some(res) = coarse_resolution() else {
            return (std::time::Instant::now(), None);
        };
        let mut best: Option<CoarseMap> = None;
        for _ in 0..Self::MAP_TRIES {
            let (Some(before), at, Some(after)) =
                (monotonic_ns(), std::time::Instant::now(), monotonic_ns())
            else {
                return (std::time::Instant::now(), None);
            };
            let err = Duration::from_nanos(after.saturating_sub(before));
            if best.is_none_or(|b| err < b.err) {
                best = Some(CoarseMap {
                    raw: before,
                    at,
                    err,
                    lag: res.saturating_mul(COARSE_LAG_RESOLUTIONS),
                });
            }
            if err <= Self::TIGHT {
                break;
            }
        }
        let map = best.expect("MAP_TRIES > 0");
        (map.at, Some(map))
    }

    /// `raw` as an instant (late by at most `err`), plus `lag`.
    fn upper_bound(&self, raw: u64) -> Instant {
        let at = if raw >= self.raw {
            self.at.checked_add(Duration::from_nanos(raw - self.raw))
        } else {
            self.at.checked_sub(Duration::from_nanos(self.raw - raw))
        };
        Instant::from_std(at.unwrap_or(self.at)).saturating_add(self.lag)
    }
}

fn read(state: &ClockState) -> std::time::Instant {
    if state.paused {
        state.anchor_virtual
    } else {
        state.anchor_virtual + state.anchor_real.elapsed()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_std(std::time::Instant::now()) + Duration::from_millis(ms)
    }

    #[test]
    fn coarse_start_takes_the_first_poll_when_no_tick_came_between() {
        let base = at(0);
        // No tick since the mark: the first poll's time, even past the bound
        // (a stalled coarse clock: the bound could be early then).
        assert_eq!(
            coarse_start(
                base + Duration::from_millis(8),
                5,
                Some(5),
                base + Duration::from_millis(20)
            ),
            base + Duration::from_millis(20)
        );
        assert_eq!(
            coarse_start(base, 5, None, base + Duration::from_millis(3)),
            base + Duration::from_millis(3)
        );
        // A tick came: the earlier of the bound and the first poll.
        assert_eq!(
            coarse_start(
                base + Duration::from_millis(8),
                5,
                Some(9),
                base + Duration::from_millis(20)
            ),
            base + Duration::from_millis(8)
        );
        assert_eq!(
            coarse_start(
                base + Duration::from_millis(8),
                5,
                Some(9),
                base + Duration::from_millis(2)
            ),
            base + Duration::from_millis(2)
        );
    }

    /// Real clock: the settled start is never before the mark was taken and
    /// at most `timeout_lateness_bound` after it, whether the settling comes
    /// at once or later than the bound. Compares instants only.
    #[test]
    fn coarse_start_is_never_before_the_mark_and_at_most_the_bound_after() {
        if cfg!(miri) {
            return;
        }
        let clock = Clock::new();
        let bound = clock.timeout_lateness_bound();
        if magpie_core::clock::coarse_resolution().is_none() {
            assert_eq!(bound, Duration::ZERO);
            return;
        }
        assert!(bound >= magpie_core::clock::coarse_resolution().unwrap() * COARSE_LAG_RESOLUTIONS);
        let late = bound + Duration::from_millis(1);
        for delay in [Duration::ZERO, late, Duration::from_micros(300), late] {
            let before = clock.now();
            let mark = clock.start_mark();
            let after = clock.now();
            assert!(matches!(mark, StartMark::Coarse(_)));
            std::thread::sleep(delay);
            let start = clock.resolve(mark);
            assert!(start >= before, "early by {:?}", before - start);
            assert!(
                start <= after + bound,
                "late by {:?}",
                start - (after + bound)
            );
            assert!(clock.mark_upper_bound(mark) >= start);
        }
    }

    #[test]
    fn a_paused_clock_marks_the_exact_paused_time() {
        let clock = Clock::new_paused();
        let mark = clock.start_mark();
        assert_eq!(mark, StartMark::Exact(clock.origin()));
        clock.advance(Duration::from_millis(7));
        assert_eq!(clock.resolve(mark), clock.origin());
    }
}
