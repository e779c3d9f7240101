//! magpie's `Instant`: a `std::time::Instant` read from the runtime's clock.

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::time::Duration;

/// A point in time, read from the current runtime's [`Clock`](super::Clock)
/// so that paused time is seen by everything that asks for "now".
///
/// Outside a runtime (no [`enter`](super::enter) guard on this thread),
/// [`Instant::now`] reads `std::time::Instant::now()`. Arithmetic follows
/// std's: `+ Duration` panics on overflow, `Instant - Instant` saturates at
/// zero.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(std::time::Instant);

impl Instant {
    /// The current instant of the current runtime's clock (real time outside
    /// a runtime).
    pub fn now() -> Instant {
        super::with_current(|driver| match driver {
            Some(driver) => driver.clock().now(),
            None => Instant(std::time::Instant::now()),
        })
    }

    /// Wraps a std instant.
    pub fn from_std(std: std::time::Instant) -> Instant {
        Instant(std)
    }

    /// The std instant underneath.
    pub fn into_std(self) -> std::time::Instant {
        self.0
    }

    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub fn duration_since(&self, earlier: Instant) -> Duration {
        self.0.saturating_duration_since(earlier.0)
    }

    /// Time from `earlier` to `self`, `None` if `earlier` is later.
    pub fn checked_duration_since(&self, earlier: Instant) -> Option<Duration> {
        self.0.checked_duration_since(earlier.0)
    }

    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_duration_since(&self, earlier: Instant) -> Duration {
        self.0.saturating_duration_since(earlier.0)
    }

    /// Time since `self` by the current runtime's clock (zero if `self` is
    /// in the future).
    pub fn elapsed(&self) -> Duration {
        Instant::now().saturating_duration_since(*self)
    }

    /// `self + d`, `None` on overflow.
    pub fn checked_add(&self, d: Duration) -> Option<Instant> {
        self.0.checked_add(d).map(Instant)
    }

    /// `self - d`, `None` on underflow.
    pub fn checked_sub(&self, d: Duration) -> Option<Instant> {
        self.0.checked_sub(d).map(Instant)
    }

    /// `self + d`, or about 30 years after `self` if that overflows: the
    /// deadline of a sleep "forever".
    pub(crate) fn saturating_add(&self, d: Duration) -> Instant {
        const FAR: Duration = Duration::from_secs(30 * 365 * 86_400);
        self.checked_add(d)
            .or_else(|| self.checked_add(FAR))
            .unwrap_or(*self)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl From<std::time::Instant> for Instant {
    fn from(std: std::time::Instant) -> Instant {
        Instant(std)
    }
}

impl From<Instant> for std::time::Instant {
    fn from(instant: Instant) -> std::time::Instant {
        instant.0
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0 + d)
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        self.0 += d;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0 - d)
    }
}

impl SubAssign<Duration> for Instant {
    fn sub_assign(&mut self, d: Duration) {
        self.0 -= d;
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}
