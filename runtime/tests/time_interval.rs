//! `interval` and the overrun policies on a paused clock. Every expected tick
//! instant below is derived from the table in `OverrunPolicy`'s docs (and
//! `time/README.md`), with `P = 10 ms` and the late tick scheduled at
//! `T = 10 ms`:
//!
//! | policy | next tick after an overrun | skipped |
//! | --- | --- | --- |
//! | DropTick | `T + (m+1)P` | `m` |
//! | SkipNext | `T + (m+2)P` | `m + 1` |
//! | CatchUpOnce | `T + mP` (at once), then `T + (m+1)P` | `m - 1` |
#![cfg(not(loom))]

mod time_util;

use std::task::{Context, Poll, Waker};

use magpie_runtime::time::{
    self, interval, interval_at, Driver, Duration, Instant, Interval, IntervalStats,
    MissedTickBehavior, OverrunPolicy,
};
use time_util::{block_on_paused, paused, Probe, WakeLog};

const P: Duration = Duration::from_millis(10);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Polls `tick` once with a probe's waker.
struct Ticker {
    interval: Interval,
    waker: Waker,
    probe: std::sync::Arc<Probe>,
}

impl Ticker {
    fn new(interval: Interval) -> Ticker {
        let probe = Probe::new(0, &WakeLog::default());
        Ticker {
            interval,
            waker: Waker::from(probe.clone()),
            probe,
        }
    }

    fn poll(&mut self) -> Poll<Instant> {
        self.interval
            .poll_tick(&mut Context::from_waker(&self.waker))
    }
}

#[test]
fn first_tick_is_immediate() {
    let (_driver, _guard, start, _log) = paused();
    let mut t = Ticker::new(interval(P));
    assert_eq!(t.poll(), Poll::Ready(start));
    assert_eq!(t.interval.next_tick(), start + P);
    assert!(t.poll().is_pending());
}

#[test]
fn interval_at_a_future_start_waits_for_it() {
    let (_driver, _guard, start, _log) = paused();
    let mut t = Ticker::new(interval_at(start + ms(25), P));
    assert!(t.poll().is_pending());
    time::advance(ms(24));
    assert!(t.poll().is_pending());
    time::advance(ms(1));
    assert_eq!(t.probe.wakes(), 1);
    assert_eq!(t.poll(), Poll::Ready(start + ms(25)));
}

#[test]
fn steady_ticks_arrive_on_the_grid_with_zero_lateness() {
    let (_driver, _guard, start, _log) = paused();
    let mut t = Ticker::new(interval(P));
    assert_eq!(t.poll(), Poll::Ready(start));
    for k in 1..=50u32 {
        assert!(t.poll().is_pending());
        time::advance(P - ms(1));
        assert!(t.poll().is_pending(), "tick {k} early");
        time::advance(ms(1));
        assert_eq!(t.probe.wakes(), k as usize, "tick {k} woke the task once");
        assert_eq!(t.poll(), Poll::Ready(start + P * k));
    }
    assert_eq!(
        t.interval.stats(),
        IntervalStats {
            ticks: 51,
            overruns: 0,
            skipped_ticks: 0,
            max_lateness: Duration::ZERO,
        }
    );
}

use OverrunPolicy::{CatchUpOnce, DropTick, SkipNext};

/// One overrun scenario per row: ticks at 0 and, late, at `T = 10`, which
/// is delivered at `10 + lateness_ms`. Columns: policy, lateness (ms), the
/// scheduled instants (ms after start) of the ticks after the late one, in
/// order, and the skipped-tick count.
type Case = (OverrunPolicy, u64, [u64; 3], u64);

#[rustfmt::skip]
const CASES: &[Case] = &[
    // Exactly 1 period late: now = 20, m = 1 (the boundary is an overrun).
    (DropTick,    10, [30, 40, 50], 1),
    (SkipNext,    10, [40, 50, 60], 2),
    (CatchUpOnce, 10, [20, 30, 40], 0),
    // 1.5 periods late: now = 25, m = 1.
    (DropTick,    15, [30, 40, 50], 1),
    (SkipNext,    15, [40, 50, 60], 2),
    (CatchUpOnce, 15, [20, 30, 40], 0),
    // 2 periods late: now = 30, m = 2.
    (DropTick,    20, [40, 50, 60], 2),
    (SkipNext,    20, [50, 60, 70], 3),
    (CatchUpOnce, 20, [30, 40, 50], 1),
    // 5 periods late: now = 60, m = 5.
    (DropTick,    50, [70, 80, 90], 5),
    (SkipNext,    50, [80, 90, 100], 6),
    (CatchUpOnce, 50, [60, 70, 80], 4),
];

#[test]
fn each_overrun_policy_schedules_the_documented_next_ticks() {
    for &(policy, lateness_ms, next_ticks_ms, skipped) in CASES {
        let label = format!("{policy:?} late by {lateness_ms} ms");
        let (_driver, _guard, start, _log) = paused();
        let mut t = Ticker::new(interval(P));
        t.interval.set_overrun_policy(policy);
        assert_eq!(t.interval.overrun_policy(), Some(policy));
        assert_eq!(t.poll(), Poll::Ready(start), "{label}");
        assert!(t.poll().is_pending());

        // The consumer comes back `lateness` after the tick at T = 10.
        time::advance(ms(10 + lateness_ms));
        assert_eq!(t.poll(), Poll::Ready(start + ms(10)), "{label}: late tick");
        let mut now = 10 + lateness_ms;

        for due in next_ticks_ms {
            if due > now {
                assert!(t.poll().is_pending(), "{label}: tick {due} early");
                time::advance(ms(due - now - 1));
                assert!(t.poll().is_pending(), "{label}: tick {due} early");
                time::advance(ms(1));
                now = due;
            }
            assert_eq!(
                t.poll(),
                Poll::Ready(start + ms(due)),
                "{label}: expected tick {due} at {now}"
            );
        }
        assert_eq!(
            t.interval.stats(),
            IntervalStats {
                ticks: 2 + next_ticks_ms.len() as u64,
                overruns: 1,
                skipped_ticks: skipped,
                max_lateness: ms(lateness_ms),
            },
            "{label}"
        );
    }
}

#[test]
fn catch_up_tick_is_delivered_without_waiting() {
    let (_driver, _guard, start, _log) = paused();
    let mut t = Ticker::new(interval(P));
    t.interval.set_overrun_policy(OverrunPolicy::CatchUpOnce);
    assert_eq!(t.poll(), Poll::Ready(start));
    time::advance(ms(47)); // T = 10 late by 37: m = 3
    assert_eq!(t.poll(), Poll::Ready(start + ms(10)));
    // The catch-up tick (T + 3P = 40) is already due: no clock movement.
    assert_eq!(t.poll(), Poll::Ready(start + ms(40)));
    let stats = t.interval.stats();
    assert_eq!((stats.overruns, stats.skipped_ticks), (1, 2));
    assert_eq!(stats.max_lateness, ms(37));
    // Lateness of the catch-up tick (7 ms) is below a period: no overrun.
    assert_eq!(t.interval.next_tick(), start + ms(50));
}

#[test]
fn lateness_under_one_period_is_not_an_overrun_under_any_policy() {
    for policy in [
        OverrunPolicy::DropTick,
        OverrunPolicy::SkipNext,
        OverrunPolicy::CatchUpOnce,
    ] {
        let (_driver, _guard, start, _log) = paused();
        let mut t = Ticker::new(interval(P));
        t.interval.set_overrun_policy(policy);
        assert_eq!(t.poll(), Poll::Ready(start));
        time::advance(ms(19)); // T = 10, 9 ms late
        assert_eq!(t.poll(), Poll::Ready(start + ms(10)));
        assert_eq!(t.interval.next_tick(), start + ms(20), "{policy:?}");
        assert!(t.poll().is_pending());
        time::advance(ms(1));
        assert_eq!(t.poll(), Poll::Ready(start + ms(20)));
        assert_eq!(
            t.interval.stats(),
            IntervalStats {
                ticks: 3,
                overruns: 0,
                skipped_ticks: 0,
                max_lateness: ms(9),
            }
        );
    }
}

#[test]
fn stats_accumulate_over_repeated_overruns() {
    let (_driver, _guard, start, _log) = paused();
    let mut t = Ticker::new(interval(P));
    assert_eq!(
        t.interval.overrun_policy(),
        Some(OverrunPolicy::DropTick),
        "default"
    );
    assert_eq!(t.poll(), Poll::Ready(start)); // tick 0
    time::advance(ms(35)); // now 35: T = 10 late 25, m = 2 -> next 40
    assert_eq!(t.poll(), Poll::Ready(start + ms(10)));
    time::advance(ms(5 + 63)); // now 103: T = 40 late 63, m = 6 -> next 110
    assert_eq!(t.poll(), Poll::Ready(start + ms(40)));
    t.interval.set_overrun_policy(OverrunPolicy::SkipNext);
    time::advance(ms(7 + 12)); // now 122: T = 110 late 12, m = 1 -> next 140
    assert_eq!(t.poll(), Poll::Ready(start + ms(110)));
    time::advance(ms(18)); // now 140, on time
    assert_eq!(t.poll(), Poll::Ready(start + ms(140)));
    assert_eq!(
        t.interval.stats(),
        IntervalStats {
            ticks: 5,
            overruns: 3,
            skipped_ticks: 2 + 6 + 2,
            max_lateness: ms(63),
        }
    );
}

#[test]
fn reset_restarts_the_grid_one_period_from_now() {
    let (_driver, _guard, start, _log) = paused();
    let mut t = Ticker::new(interval(P));
    assert_eq!(t.poll(), Poll::Ready(start));
    time::advance(ms(4));
    t.interval.reset();
    assert_eq!(t.interval.next_tick(), start + ms(14));
    time::advance(ms(9));
    assert!(t.poll().is_pending());
    time::advance(ms(1));
    assert_eq!(t.poll(), Poll::Ready(start + ms(14)));
    assert_eq!(t.interval.period(), P);
    assert_eq!(t.interval.stats().ticks, 2);
}

#[test]
fn dropping_a_pending_tick_future_loses_no_tick() {
    let driver = Driver::new_paused();
    let start = driver.clock().now();
    let _guard = time::enter(&driver);
    let mut iv = interval(P);
    let log = WakeLog::default();
    {
        let mut first = time_util::TestTask::new(0, &log, iv.tick());
        assert_eq!(first.poll(), Poll::Ready(start));
    }
    {
        let mut second = time_util::TestTask::new(1, &log, iv.tick());
        assert!(second.poll().is_pending());
    } // dropped while pending
    time::advance(P);
    let mut third = time_util::TestTask::new(2, &log, iv.tick());
    assert_eq!(third.poll(), Poll::Ready(start + P));
    drop(third);
    assert_eq!(iv.stats().ticks, 2);
}

#[test]
fn async_tick_loop_under_auto_advance_ends_on_the_grid() {
    let driver = Driver::new_paused();
    let start = driver.clock().now();
    let (ticks, end, stats) = block_on_paused(&driver, async {
        let mut iv = interval(P);
        let mut ticks = Vec::new();
        for _ in 0..6 {
            ticks.push(iv.tick().await);
        }
        (ticks, Instant::now(), iv.stats())
    });
    let want: Vec<Instant> = (0..6).map(|k| start + P * k).collect();
    assert_eq!(ticks, want);
    assert_eq!(end, start + P * 5);
    assert_eq!(stats.ticks, 6);
    assert_eq!(stats.overruns, 0);
}

#[test]
#[should_panic(expected = "period must be non-zero")]
fn zero_period_panics() {
    let (_driver, _guard, _start, _log) = paused();
    let _ = interval(Duration::ZERO);
}

/// tokio's behaviours, late by 25 ms after the tick at T = 10 (now = 35,
/// m = 2), as `MissedTickBehavior`'s table says: `Burst` delivers 20 and 30
/// at once and stays on the grid, `Delay` restarts the grid at now + P = 45,
/// `Skip` is `DropTick` (next tick 40).
#[test]
fn tokio_missed_tick_behaviors_schedule_the_documented_next_ticks() {
    use MissedTickBehavior::{Burst, Delay, Skip};
    #[rustfmt::skip]
    let cases: [(MissedTickBehavior, [u64; 3], u64); 3] = [
        (Burst, [20, 30, 40], 0),
        (Delay, [45, 55, 65], 2),
        (Skip,  [40, 50, 60], 2),
    ];
    for (behavior, next_ticks_ms, skipped) in cases {
        let label = format!("{behavior:?}");
        let (_driver, _guard, start, _log) = paused();
        let mut t = Ticker::new(interval(P));
        t.interval.set_missed_tick_behavior(behavior);
        let policy = t.interval.overrun_policy();
        assert_eq!(
            policy,
            (behavior == Skip).then_some(OverrunPolicy::DropTick)
        );
        assert_eq!(t.poll(), Poll::Ready(start), "{label}");
        time::advance(ms(35));
        assert_eq!(t.poll(), Poll::Ready(start + ms(10)), "{label}: late tick");
        let mut now = 35;
        for due in next_ticks_ms {
            if due > now {
                assert!(t.poll().is_pending(), "{label}: tick {due} early");
                time::advance(ms(due - now));
                now = due;
            }
            assert_eq!(
                t.poll(),
                Poll::Ready(start + ms(due)),
                "{label}: expected tick {due} at {now}"
            );
        }
        let stats = t.interval.stats();
        assert_eq!(stats.skipped_ticks, skipped, "{label}");
        assert_eq!(stats.max_lateness, ms(25), "{label}");
    }
}

#[test]
fn interval_as_a_stream_yields_the_scheduled_ticks() {
    use futures_core::Stream;
    use std::pin::Pin;
    let (_driver, _guard, start, _log) = paused();
    let mut iv = interval(P);
    let probe = Probe::new(0, &WakeLog::default());
    let waker = Waker::from(probe.clone());
    let mut cx = Context::from_waker(&waker);
    assert_eq!(
        Pin::new(&mut iv).poll_next(&mut cx),
        Poll::Ready(Some(start))
    );
    assert!(Pin::new(&mut iv).poll_next(&mut cx).is_pending());
    time::advance(P);
    assert_eq!(probe.wakes(), 1, "the stream's waker is woken by the tick");
    assert_eq!(
        Pin::new(&mut iv).poll_next(&mut cx),
        Poll::Ready(Some(start + P))
    );
    assert_eq!(iv.size_hint(), (usize::MAX, None));
}

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

/// The wheel fires a deadline at the next whole millisecond (README, "Ticks,
/// resolution and rounding"); an interval counts its overruns from that
/// instant, not from the deadline, so the rounding alone never makes a tick
/// "missed". Grid at 0.3 ms + k ms, so each tick fires 0.7 ms after its
/// deadline; the second is delivered 1.3 ms after its deadline but 0.6 ms
/// after the wheel fired it. Counted from the deadline (as before), that
/// was an overrun and `DropTick` skipped the tick at 2.3 ms; now it is
/// delivered at once, still less than a period after its deadline.
#[test]
fn the_wheels_rounding_is_not_an_overrun() {
    let (_driver, _guard, start, _log) = paused();
    let mut t = Ticker::new(interval_at(start + us(300), ms(1)));
    assert_eq!(t.interval.overrun_policy(), Some(DropTick));
    assert!(t.poll().is_pending());
    time::advance(ms(1));
    assert_eq!(t.poll(), Poll::Ready(start + us(300)));
    assert!(t.poll().is_pending());
    time::advance(us(1600)); // now = 2.6 ms; the tick at 1.3 fired at 2.0
    assert_eq!(t.poll(), Poll::Ready(start + us(1300)));
    assert_eq!(t.interval.next_tick(), start + us(2300), "the grid holds");
    // 2.3 is already past, by less than a period: delivered at once.
    assert_eq!(t.poll(), Poll::Ready(start + us(2300)));
    let stats = t.interval.stats();
    assert_eq!(
        (stats.ticks, stats.overruns, stats.skipped_ticks),
        (3, 0, 0)
    );
    assert_eq!(
        stats.max_lateness,
        us(1300),
        "lateness still counts from the deadline"
    );
    // A tick delivered a whole period after the wheel fired it is missed.
    assert!(t.poll().is_pending());
    time::advance(us(2400)); // now = 5.0; the tick at 3.3 fired at 4.0
    assert_eq!(t.poll(), Poll::Ready(start + us(3300)));
    let stats = t.interval.stats();
    assert_eq!((stats.overruns, stats.skipped_ticks), (1, 1));
    assert_eq!(t.interval.next_tick(), start + us(5300));
}
