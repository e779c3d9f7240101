//! `interval`: ticks on a fixed grid, with seed 004's overrun policies.

use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use super::{Instant, Sleep};

/// What an [`Interval`] does after an **overrun**: a tick delivered at least
/// one full period after it was scheduled, so that one or more later grid
/// ticks are already in the past.
///
/// Notation: period `P`, the late tick was scheduled at `T` and delivered at
/// `now`, lateness `L = now - T >= P`, and `m = floor(L / P) >= 1` is the
/// number of later grid instants `T + P, ..., T + mP` that are already `<=
/// now` (the *missed* ticks). The late tick itself is always delivered
/// (`tick()` returns `T`). The policies differ only in the next scheduled
/// tick; every scheduled tick stays on the grid `T + kP`:
///
/// | policy | next tick | skipped ticks |
/// | --- | --- | --- |
/// | `DropTick` | `T + (m+1)P`, the first grid instant after `now` | `m` |
/// | `SkipNext` | `T + (m+2)P`, one grid instant later still | `m + 1` |
/// | `CatchUpOnce` | `T + mP`, due at once, then `T + (m+1)P` | `m - 1` |
///
/// A tick delivered less than one period late (`0 < L < P`) is not an
/// overrun under any policy: the next tick is `T + P`, which is still in the
/// future, and nothing is skipped. `time/README.md` draws each policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OverrunPolicy {
    /// Drop every missed tick and continue on the grid: never a burst, never
    /// a phase shift. The default: a fixed-rate loop gains nothing from
    /// ticks that are already stale, keeping the phase keeps its rate
    /// exact, and ticking at once after a late tick (a burst) would only
    /// deepen the overload that made it late.
    #[default]
    DropTick,
    /// Drop every missed tick *and* the next grid tick, so that after an
    /// overrun the consumer gets more than a full period before the next
    /// tick (the next tick is more than `P` after `now`). For work that
    /// overran because it is too slow for the period: it sheds load instead
    /// of running back to back.
    SkipNext,
    /// Deliver one catch-up tick at once (the latest missed grid instant,
    /// `T + mP`), then continue on the grid. For consumers that must observe
    /// that a period passed (e.g. to flush or account for it) but need not
    /// see every missed period.
    CatchUpOnce,
}

/// What an [`OverrunPolicy`] decides for one delivered tick: the one piece
/// of overrun arithmetic that [`Interval`] and the fixed-rate lanes
/// (`crate::lanes`) share, so the two cannot drift apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "the plan says where the next tick goes"]
pub struct TickPlan {
    /// The delivered tick was at least one period late.
    pub overrun: bool,
    /// The next scheduled tick is `scheduled + steps * period` (`steps >= 1`
    /// except after an overrun under `CatchUpOnce`, where it is `m >= 1`).
    pub steps: u64,
    /// Grid instants that will never be delivered.
    pub skipped: u64,
}

impl OverrunPolicy {
    /// The plan for a tick scheduled at `T` and delivered `lateness` after
    /// `T`, on a grid of `period` (the table above). Pure arithmetic, no clock.
    ///
    /// # Panics
    /// If `period` is zero.
    pub fn plan(self, lateness: Duration, period: Duration) -> TickPlan {
        assert!(period > Duration::ZERO, "tick period must be non-zero");
        if lateness < period {
            return TickPlan {
                overrun: false,
                steps: 1,
                skipped: 0,
            };
        }
        let missed = (lateness.as_nanos() / period.as_nanos()) as u64; // m >= 1
        let (steps, skipped) = match self {
            OverrunPolicy::DropTick => (missed + 1, missed),
            OverrunPolicy::SkipNext => (missed + 2, missed + 1),
            OverrunPolicy::CatchUpOnce => (missed, missed - 1),
        };
        TickPlan {
            overrun: true,
            steps,
            skipped,
        }
    }

    /// The seed's name: `drop_tick`, `skip_next` or `catch_up_once`.
    pub fn name(self) -> &'static str {
        match self {
            OverrunPolicy::DropTick => "drop_tick",
            OverrunPolicy::SkipNext => "skip_next",
            OverrunPolicy::CatchUpOnce => "catch_up_once",
        }
    }

    /// Parses a seed name (see [`name`](Self::name)).
    pub fn from_name(name: &str) -> Option<OverrunPolicy> {
        [
            OverrunPolicy::DropTick,
            OverrunPolicy::SkipNext,
            OverrunPolicy::CatchUpOnce,
        ]
        .into_iter()
        .find(|p| p.name() == name)
    }
}

/// tokio's names for what an [`Interval`] does after missed ticks
/// (`tokio::time::MissedTickBehavior`), for
/// [`Interval::set_missed_tick_behavior`]. `time/README.md` puts them side by
/// side with [`OverrunPolicy`].
///
/// | behaviour | after a tick scheduled at `T`, delivered `L >= P` late | magpie equivalent |
/// | --- | --- | --- |
/// | `Burst` (tokio's default) | next tick at `T + P`: the missed ticks come at once, back to back, until caught up | none (added here) |
/// | `Delay` | next tick at `now + P`: the grid moves | none (added here) |
/// | `Skip` | next tick at the first grid instant after `now` | [`OverrunPolicy::DropTick`] (magpie's default) |
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MissedTickBehavior {
    /// Deliver every missed tick, as fast as they are polled, then carry on
    /// on the original grid. tokio's default.
    #[default]
    Burst,
    /// Restart the grid one period after the late tick was delivered.
    Delay,
    /// Drop the missed ticks and carry on on the grid
    /// ([`OverrunPolicy::DropTick`]).
    Skip,
}

/// Which rule an [`Interval`] follows after an overrun.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// One of seed 004's policies (the default: `DropTick`).
    Policy(OverrunPolicy),
    /// tokio's `Burst`.
    Burst,
    /// tokio's `Delay`.
    Delay,
}

/// Counters of an [`Interval`] (seed 004's `tick_count`,
/// `tick_overrun_count`, `skipped_tick_count`, `max_lateness_ms`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IntervalStats {
    /// Ticks delivered by `tick` / `poll_tick`.
    pub ticks: u64,
    /// Delivered ticks that were at least one period late.
    pub overruns: u64,
    /// Grid instants that were never delivered because of the overrun policy.
    pub skipped_ticks: u64,
    /// The largest `now - scheduled` over delivered ticks.
    pub max_lateness: Duration,
}

/// Ticks at `start`, `start + period`, `start + 2 * period`, ... on the
/// current runtime's clock. The first tick completes immediately.
///
/// # Panics
/// If `period` is zero, or outside a magpie runtime.
pub fn interval(period: Duration) -> Interval {
    let driver = super::current("interval");
    let start = driver.clock().now();
    interval_at(start, period)
}

/// Like [`interval`], with the first tick at `start`.
///
/// # Panics
/// If `period` is zero, or outside a magpie runtime.
pub fn interval_at(start: Instant, period: Duration) -> Interval {
    assert!(period > Duration::ZERO, "interval period must be non-zero");
    Interval {
        sleep: super::sleep_until(start),
        period,
        mode: Mode::Policy(OverrunPolicy::default()),
        stats: IntervalStats::default(),
    }
}

/// A stream of ticks on a fixed grid. See [`interval`] and [`OverrunPolicy`].
pub struct Interval {
    /// Sleeps until the next scheduled tick; its deadline *is* that tick.
    sleep: Sleep,
    period: Duration,
    mode: Mode,
    stats: IntervalStats,
}

impl fmt::Debug for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Interval")
            .field("next", &self.sleep.deadline())
            .field("period", &self.period)
            .field("mode", &self.mode)
            .field("stats", &self.stats)
            .finish()
    }
}

impl Interval {
    /// Waits for the next tick and returns the instant it was **scheduled**
    /// for (not the instant it was delivered). Cancel safe: dropping the
    /// future before it completes loses no tick.
    pub async fn tick(&mut self) -> Instant {
        poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Polls for the next tick; see [`tick`](Self::tick).
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        ready!(Pin::new(&mut self.sleep).poll(cx));
        let scheduled = self.sleep.deadline();
        let now = self.sleep.driver().clock().now();
        let lateness = now.saturating_duration_since(scheduled);
        // The overrun test counts from the instant the wheel could first
        // fire the tick, its deadline rounded up to the 1 ms resolution:
        // that rounding alone (up to 1 ms, whatever the period) never makes
        // a tick count as missed. Counted from `scheduled`, a 1 ms interval
        // whose grid sits 0.9 ms before the wheel's ticks dropped a tick
        // whenever its task ran 0.1 ms late. `max_lateness` still counts
        // from `scheduled`.
        let fires_at = self.sleep.driver().firing_instant(scheduled);
        let late = now.saturating_duration_since(fires_at);

        let (plan, next) = match self.mode {
            Mode::Policy(policy) => {
                let plan = policy.plan(late, self.period);
                (plan, grid_point(scheduled, self.period, plan.steps))
            }
            Mode::Burst | Mode::Delay => {
                // Same overrun test as the policies; nothing is skipped by
                // a burst, and the grid instants a delay jumps over are.
                let drop_plan = OverrunPolicy::DropTick.plan(late, self.period);
                let (skipped, next) = if self.mode == Mode::Burst {
                    (0, grid_point(scheduled, self.period, 1))
                } else if drop_plan.overrun {
                    (drop_plan.skipped, now.saturating_add(self.period))
                } else {
                    // Less than a period late: the grid holds.
                    (0, grid_point(scheduled, self.period, 1))
                };
                let plan = TickPlan {
                    overrun: drop_plan.overrun,
                    steps: 1,
                    skipped,
                };
                (plan, next)
            }
        };
        self.stats.ticks += 1;
        self.stats.max_lateness = self.stats.max_lateness.max(lateness);
        self.stats.overruns += u64::from(plan.overrun);
        self.stats.skipped_ticks += plan.skipped;
        self.sleep.reset(next);
        Poll::Ready(scheduled)
    }

    /// Restarts the grid one period from now: the next tick is at
    /// `now + period`. The counters are kept.
    pub fn reset(&mut self) {
        let now = self.sleep.driver().clock().now();
        self.sleep.reset(now.saturating_add(self.period));
    }

    /// When the next tick is scheduled.
    pub fn next_tick(&self) -> Instant {
        self.sleep.deadline()
    }

    /// Sets what happens after an overrun; applies from the next overrun on.
    pub fn set_overrun_policy(&mut self, policy: OverrunPolicy) {
        self.mode = Mode::Policy(policy);
    }

    /// The current overrun policy ([`OverrunPolicy::DropTick`] by default),
    /// or `None` after [`set_missed_tick_behavior`](Self::set_missed_tick_behavior)
    /// chose `Burst` or `Delay`, which no policy expresses.
    pub fn overrun_policy(&self) -> Option<OverrunPolicy> {
        match self.mode {
            Mode::Policy(p) => Some(p),
            Mode::Burst | Mode::Delay => None,
        }
    }

    /// tokio's `set_missed_tick_behavior`: `Skip` is
    /// [`OverrunPolicy::DropTick`]; `Burst` and `Delay` are the two tokio
    /// behaviours seed 004's policies lack. Applies from the next overrun.
    /// Note the defaults differ: tokio's is `Burst`, magpie's `DropTick`
    /// (`Skip`).
    pub fn set_missed_tick_behavior(&mut self, behavior: MissedTickBehavior) {
        self.mode = match behavior {
            MissedTickBehavior::Burst => Mode::Burst,
            MissedTickBehavior::Delay => Mode::Delay,
            MissedTickBehavior::Skip => Mode::Policy(OverrunPolicy::DropTick),
        };
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// The counters so far.
    pub fn stats(&self) -> IntervalStats {
        self.stats
    }
}

/// The ticks as a stream (`futures_core::Stream`): each item is the
/// scheduled instant of the tick, as [`Interval::tick`] returns. Never ends.
impl futures_core::Stream for Interval {
    type Item = Instant;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Instant>> {
        self.get_mut().poll_tick(cx).map(Some)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (usize::MAX, None)
    }
}

/// `start + steps * period`, saturating to the far future.
fn grid_point(start: Instant, period: Duration, steps: u64) -> Instant {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    let nanos = period.as_nanos().saturating_mul(u128::from(steps));
    let offset = u64::try_from(nanos / NANOS_PER_SEC)
        .map(|secs| Duration::new(secs, (nanos % NANOS_PER_SEC) as u32))
        .unwrap_or(Duration::MAX);
    start.saturating_add(offset)
}
