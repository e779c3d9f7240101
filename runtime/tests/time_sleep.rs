//! `sleep`, `sleep_until`, `Sleep` and the driver, on a paused clock.
#![cfg(not(loom))]

mod time_util;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use magpie_core::sync::atomic::{AtomicUsize, Ordering};
use magpie_runtime::time::{self, sleep, sleep_until, Driver, Duration, Instant, Sleep};
use time_util::{block_on_paused, paused, pending, Probe, Rng, TestTask, WakeLog};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Whole milliseconds from `start` to `t`; panics unless `t` is a whole
/// number of milliseconds after `start` (everything is, on a paused clock
/// started at its origin).
fn ms_since(start: Instant, t: Instant) -> u64 {
    let d = t - start;
    assert_eq!(d.subsec_nanos() % 1_000_000, 0, "{d:?} is not whole ms");
    u64::try_from(d.as_millis()).unwrap()
}

#[test]
fn timer_types_can_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Driver>();
    send_sync::<Sleep>();
    send_sync::<time::Interval>();
    send_sync::<Instant>();
}

#[test]
fn sleeps_fire_exactly_at_their_deadline_once_in_one_ms_steps() {
    const N: usize = if cfg!(miri) { 40 } else { 2_000 };
    const HORIZON_MS: u64 = if cfg!(miri) { 80 } else { 3_000 };
    let (driver, _guard, start, log) = paused();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let deadlines: Vec<u64> = (0..N).map(|_| 1 + rng.below(HORIZON_MS)).collect();
    let mut tasks: Vec<_> = deadlines
        .iter()
        .enumerate()
        .map(|(id, &d)| TestTask::new(id, &log, sleep(ms(d))))
        .collect();
    for task in &mut tasks {
        assert!(task.poll().is_pending());
    }
    assert_eq!(driver.active_timers(), N);

    let mut fired_at = vec![None; N];
    for now_ms in 1..=HORIZON_MS {
        time::advance(ms(1));
        assert_eq!(Instant::now(), start + ms(now_ms));
        for id in log.drain() {
            assert_eq!(deadlines[id], now_ms, "sleep {id} fired at the wrong ms");
            assert_eq!(fired_at[id].replace(now_ms), None, "sleep {id} woke twice");
            assert_eq!(tasks[id].poll(), Poll::Ready(()));
        }
        // Nothing not yet due may be ready.
        for (id, task) in tasks.iter_mut().enumerate() {
            if deadlines[id] > now_ms {
                assert!(task.poll().is_pending(), "sleep {id} ready early");
            }
        }
    }
    for (id, task) in tasks.iter().enumerate() {
        assert_eq!(fired_at[id], Some(deadlines[id]));
        assert_eq!(task.wakes(), 1);
    }
    assert_eq!(driver.active_timers(), 0, "completed sleeps leave no entry");
}

#[test]
fn one_large_advance_wakes_in_deadline_order() {
    const N: usize = if cfg!(miri) { 50 } else { 5_000 };
    let (_driver, _guard, _start, log) = paused();
    let mut rng = Rng(77);
    // Spread over levels 0..=2 so the single advance cascades.
    let deadlines: Vec<u64> = (0..N).map(|_| 1 + rng.below(200_000)).collect();
    let mut tasks: Vec<_> = deadlines
        .iter()
        .enumerate()
        .map(|(id, &d)| TestTask::new(id, &log, sleep(ms(d))))
        .collect();
    tasks
        .iter_mut()
        .for_each(|t| assert!(t.poll().is_pending()));

    time::advance(ms(200_000));
    let order = log.drain();
    assert_eq!(order.len(), N, "every sleep woke exactly once");
    let woken: Vec<u64> = order.iter().map(|&id| deadlines[id]).collect();
    assert!(
        woken.windows(2).all(|w| w[0] <= w[1]),
        "wakes out of deadline order"
    );
    let mut ids = order.clone();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), N);
}

#[test]
fn sleeps_on_every_wheel_level_and_past_the_wheel_fire_exactly_on_time() {
    const RANDOM: usize = if cfg!(miri) { 30 } else { 3_000 };
    let (driver, _guard, start, log) = paused();

    // Level boundaries 64^k - 1, 64^k, 64^k + 1 for k = 1..=7 (64^6 = 2^36 is
    // the first tick past the wheel; 64^7 is far into the overflow list),
    // several spans of 2^36 ahead, and "forever".
    let mut durations: Vec<Duration> = Vec::new();
    for k in 1..=7u32 {
        let b = 64u64.pow(k);
        durations.extend([ms(b - 1), ms(b), ms(b + 1)]);
    }
    durations.extend([ms(3 << 36 | 12_345), ms(5 << 36), Duration::MAX]);
    let mut rng = Rng(0xDEAD_BEEF);
    for _ in 0..RANDOM {
        let bits = rng.below(42);
        durations.push(ms(1 + rng.below(1 << bits)));
    }

    let mut tasks = Vec::new();
    let mut due_ms = Vec::new();
    for (id, d) in durations.iter().enumerate() {
        let s = sleep(*d);
        due_ms.push(ms_since(start, s.deadline()));
        let mut task = TestTask::new(id, &log, s);
        assert!(task.poll().is_pending());
        tasks.push(task);
    }

    let mut fired = 0;
    let mut last = 0;
    while driver.auto_advance_if_idle() {
        let now = ms_since(start, Instant::now());
        assert!(now > last, "auto-advance moved the clock backwards");
        last = now;
        for id in log.drain() {
            assert_eq!(due_ms[id], now, "sleep {id} fired off its deadline");
            assert_eq!(tasks[id].poll(), Poll::Ready(()));
            fired += 1;
        }
    }
    assert_eq!(fired, durations.len());
    assert!(tasks.iter().all(|t| t.wakes() == 1));
    assert_eq!(driver.active_timers(), 0);
    assert_eq!(driver.next_expiration(), None);
}

#[test]
fn dropped_sleep_never_fires_or_wakes_and_leaves_no_entry() {
    let (driver, _guard, _start, log) = paused();
    let mut kept = Vec::new();
    let mut dropped_probes = Vec::new();
    for id in 0..200usize {
        // Deadlines on several levels, some sharing a slot with kept ones.
        let d = ms(1 + (id as u64 * 997) % 100_000);
        let task = pending(id, &log, sleep(d));
        if id % 2 == 0 {
            kept.push(task);
        } else {
            dropped_probes.push(task.probe.clone());
            drop(task);
        }
    }
    assert_eq!(driver.active_timers(), kept.len());
    time::advance(ms(100_000));
    let woken = log.drain();
    assert_eq!(woken.len(), kept.len());
    assert!(woken.iter().all(|id| id % 2 == 0), "a dropped sleep woke");
    assert!(dropped_probes.iter().all(|p| p.wakes() == 0));
    // The wheel holds no waker of a dropped sleep.
    assert!(dropped_probes.iter().all(|p| Arc::strong_count(p) == 1));
    for task in &mut kept {
        assert_eq!(task.poll(), Poll::Ready(()));
    }
    assert_eq!(driver.active_timers(), 0);
}

#[test]
fn sleep_dropped_after_firing_but_before_its_poll_frees_its_entry() {
    let (driver, _guard, _start, log) = paused();
    let task = pending(0, &log, sleep(ms(5)));
    time::advance(ms(5));
    assert_eq!(task.wakes(), 1);
    assert_eq!(driver.active_timers(), 1, "fired, not yet observed");
    drop(task);
    assert_eq!(driver.active_timers(), 0);
}

#[test]
fn reset_moves_a_registered_sleep_earlier_and_later_in_place() {
    let (driver, _guard, start, log) = paused();
    let probe = Probe::new(0, &log);

    // Earlier: 100 ms -> 50 ms.
    let mut s = sleep(ms(100));
    assert!(poll_with(&mut s, &probe).is_pending());
    s.reset(start + ms(50));
    assert_eq!(s.deadline(), start + ms(50));
    assert_eq!(driver.active_timers(), 1, "reset reuses the entry");
    time::advance(ms(49));
    assert_eq!(probe.wakes(), 0, "woke before the new deadline");
    time::advance(ms(1));
    assert_eq!(probe.wakes(), 1, "the stored waker survives reset");
    assert!(poll_with(&mut s, &probe).is_ready());

    assert_eq!(log.drain(), vec![0]);

    // Later: a registered sleep moved from 60 to 80 ms does not fire at 60,
    // and a completed sleep reset to 70 ms is pending again.
    let moved_probe = Probe::new(1, &log);
    let mut moved = sleep_until(start + ms(60));
    assert!(poll_with(&mut moved, &moved_probe).is_pending());
    moved.reset(start + ms(80));
    s.reset(start + ms(70));
    assert!(!s.is_elapsed());
    assert!(poll_with(&mut s, &probe).is_pending());
    assert_eq!(driver.active_timers(), 2);
    time::advance(ms(10)); // now 60
    assert!(log.drain().is_empty(), "nothing is due at 60 ms any more");
    time::advance(ms(10)); // now 70
    assert_eq!(log.drain(), vec![0]);
    assert!(poll_with(&mut moved, &moved_probe).is_pending());
    time::advance(ms(10)); // now 80
    assert_eq!(log.drain(), vec![1]);
    assert!(poll_with(&mut s, &probe).is_ready());
    assert!(poll_with(&mut moved, &moved_probe).is_ready());
    assert_eq!(driver.active_timers(), 0);
}

/// Polls a `Sleep` in place (it is `Unpin`) with `probe` as the waker.
fn poll_with(s: &mut Sleep, probe: &Arc<Probe>) -> Poll<()> {
    let waker = Waker::from(probe.clone());
    Pin::new(s).poll(&mut Context::from_waker(&waker))
}

#[test]
fn reset_of_a_registered_sleep_to_the_past_wakes_it_at_once() {
    let (driver, _guard, start, _log) = paused();
    time::advance(ms(10));
    let log = WakeLog::default();
    let probe = Probe::new(0, &log);
    let mut s = sleep(ms(100));
    assert!(poll_with(&mut s, &probe).is_pending());
    s.reset(start + ms(5)); // already passed
    assert_eq!(probe.wakes(), 1);
    assert!(poll_with(&mut s, &probe).is_ready());
    assert_eq!(driver.active_timers(), 0);
}

#[test]
fn past_or_zero_deadline_completes_on_first_poll_without_an_entry() {
    let (driver, _guard, _start, log) = paused();
    time::advance(ms(20));
    let now = Instant::now();
    let mut past = TestTask::new(0, &log, sleep_until(now - ms(5)));
    let mut zero = TestTask::new(1, &log, sleep(Duration::ZERO));
    let mut exact = TestTask::new(2, &log, sleep_until(now));
    assert_eq!(past.poll(), Poll::Ready(()));
    assert_eq!(zero.poll(), Poll::Ready(()));
    assert_eq!(exact.poll(), Poll::Ready(()));
    assert_eq!(driver.active_timers(), 0);

    // Passed by the clock although the wheel has not been processed.
    let mut stale = TestTask::new(3, &log, sleep(ms(10)));
    driver.clock().advance(ms(15)); // clock only; no process
    assert_eq!(stale.poll(), Poll::Ready(()));
    assert_eq!(driver.active_timers(), 0);
}

#[test]
fn sub_millisecond_remainders_round_up_never_fire_early() {
    let (_driver, _guard, _start, log) = paused();
    let mut a = TestTask::new(0, &log, sleep(Duration::from_micros(1_500)));
    let mut b = TestTask::new(1, &log, sleep(Duration::from_micros(500)));
    assert!(a.poll().is_pending() && b.poll().is_pending());
    time::advance(Duration::from_micros(400));
    assert!(log.drain().is_empty());
    time::advance(Duration::from_micros(600)); // 1.0 ms
    assert_eq!(log.drain(), vec![1]);
    time::advance(Duration::from_micros(900)); // 1.9 ms: a's 1.5 ms rounds to 2
    assert!(log.drain().is_empty());
    assert!(a.poll().is_pending());
    time::advance(Duration::from_micros(100)); // 2.0 ms
    assert_eq!(log.drain(), vec![0]);
    assert_eq!(a.poll(), Poll::Ready(()));
    assert_eq!(b.poll(), Poll::Ready(()));
}

#[test]
fn repoll_with_a_new_waker_wakes_only_the_new_one() {
    let (_driver, _guard, _start, log) = paused();
    let mut task = pending(0, &log, sleep(ms(3)));
    let other = Probe::new(1, &log);
    assert!(task.poll_with(&other).is_pending());
    time::advance(ms(3));
    assert_eq!(log.drain(), vec![1]);
    assert_eq!(task.wakes(), 0);
    assert_eq!(Arc::strong_count(&other), 1, "the waker was consumed");
}

#[test]
fn sleep_outside_a_runtime_panics_with_a_clear_message() {
    let err = std::panic::catch_unwind(|| sleep(ms(1))).unwrap_err();
    let msg = err
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_else(|| err.downcast_ref::<&str>().unwrap().to_string());
    assert!(
        msg.contains("must be called from within a magpie runtime"),
        "{msg}"
    );
    assert!(std::panic::catch_unwind(time::pause).is_err());
    assert!(std::panic::catch_unwind(|| time::interval(ms(1))).is_err());
}

#[test]
fn enter_guards_nest_and_restore_the_previous_driver() {
    let outer = Driver::new_paused();
    let inner = Driver::new_paused();
    let g1 = time::enter(&outer);
    outer.clock().advance(ms(7));
    {
        let _g2 = time::enter(&inner);
        assert_eq!(Instant::now(), inner.clock().now());
        let s = sleep(ms(1));
        assert_eq!(s.deadline(), inner.clock().now() + ms(1));
    }
    assert_eq!(Instant::now(), outer.clock().now());
    drop(g1);
    assert!(Driver::try_current().is_none());
}

#[test]
fn auto_advance_lands_exactly_on_the_next_deadline() {
    let (driver, _guard, start, log) = paused();
    let mut hour = TestTask::new(0, &log, sleep(Duration::from_secs(3_600)));
    let mut day = TestTask::new(1, &log, sleep(Duration::from_secs(86_400)));
    assert!(hour.poll().is_pending() && day.poll().is_pending());
    assert!(driver.auto_advance_if_idle());
    assert_eq!(Instant::now(), start + Duration::from_secs(3_600));
    assert_eq!(log.drain(), vec![0]);
    assert!(driver.auto_advance_if_idle());
    assert_eq!(Instant::now(), start + Duration::from_secs(86_400));
    assert_eq!(log.drain(), vec![1]);
    assert!(!driver.auto_advance_if_idle(), "nothing left");
    assert_eq!(hour.poll(), Poll::Ready(()));
    assert_eq!(day.poll(), Poll::Ready(()));
}

#[test]
fn auto_advance_does_nothing_on_a_running_clock() {
    let driver = Driver::new();
    let _guard = time::enter(&driver);
    let log = WakeLog::default();
    let task = pending(0, &log, sleep(Duration::from_secs(3_600)));
    assert!(!driver.auto_advance_if_idle());
    assert_eq!(task.wakes(), 0);
}

#[test]
fn block_on_paused_runs_nested_sleeps_to_their_total() {
    let driver = Driver::new_paused();
    let start = driver.clock().now();
    let end = block_on_paused(&driver, async {
        sleep(ms(10)).await;
        sleep(ms(250)).await;
        sleep(Duration::from_secs(2)).await;
        Instant::now()
    });
    assert_eq!(end, start + ms(2_260));
}

#[test]
fn next_expiration_is_never_after_the_earliest_deadline() {
    let (driver, _guard, start, log) = paused();
    assert_eq!(driver.next_expiration(), None);
    let far = pending(0, &log, sleep(ms(5_000)));
    let hint = driver.next_expiration().unwrap();
    assert!(hint > start && hint <= start + ms(5_000), "{hint:?}");
    let near = pending(1, &log, sleep(ms(40)));
    assert_eq!(
        driver.next_expiration(),
        Some(start + ms(40)),
        "level 0 is exact"
    );
    drop(near);
    assert_eq!(
        driver.next_expiration(),
        Some(hint),
        "cancel updates the hint"
    );
    // Processing at each hint walks down to the exact deadline.
    let mut steps = 0;
    while far.wakes() == 0 {
        let next = driver.next_expiration().unwrap();
        assert!(next <= start + ms(5_000));
        driver.clock().advance(next - Instant::now());
        driver.process(Instant::now());
        steps += 1;
        assert!(steps <= 7, "one cascade per level at most");
    }
    assert_eq!(Instant::now(), start + ms(5_000));
    drop(far);
    assert_eq!(driver.next_expiration(), None);
}

#[test]
fn unparker_runs_when_a_new_timer_becomes_the_earliest() {
    let (driver, _guard, _start, _log) = paused();
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    driver.set_unparker(move || {
        counter.fetch_add(1, Ordering::Relaxed);
    });
    let log = WakeLog::default();
    let mut tasks = Vec::new();
    for (id, d) in [100, 200, 50, 50, 3_000, 20].into_iter().enumerate() {
        let task = pending(id, &log, sleep(ms(d)));
        tasks.push(task);
    }
    // 100 (first), 50 (earlier), 20 (earlier).
    assert_eq!(calls.load(Ordering::Relaxed), 3);
}

#[test]
fn shutdown_drops_every_waker_and_fires_nothing() {
    let (driver, _guard, _start, log) = paused();
    let mut task = pending(0, &log, sleep(ms(10)));
    let probe = task.probe.clone();
    let before = Arc::strong_count(&probe);
    driver.shutdown();
    assert_eq!(Arc::strong_count(&probe), before - 1, "waker dropped");
    time::advance(ms(10));
    assert_eq!(probe.wakes(), 0);
    assert_eq!(driver.next_expiration(), None);
    let poll = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task.poll()));
    assert!(
        poll.is_err(),
        "polling a timer of a shut-down driver panics"
    );
    drop(task);
    assert_eq!(driver.active_timers(), 0);
}

#[test]
fn pause_aligns_to_whole_ms_and_resume_never_goes_back() {
    let driver = Driver::new();
    let _guard = time::enter(&driver);
    time::pause();
    let paused_at = Instant::now();
    let since_origin = paused_at - driver.clock().origin();
    assert_eq!(since_origin.subsec_nanos() % 1_000_000, 0);
    assert_eq!(Instant::now(), paused_at, "a paused clock stands still");
    time::advance(ms(10));
    assert_eq!(Instant::now(), paused_at + ms(10));
    time::resume();
    assert!(Instant::now() >= paused_at + ms(10));
    assert!(!driver.clock().is_paused());
    let twice = std::panic::catch_unwind(time::resume);
    assert!(twice.is_err(), "resume of a running clock panics");
}

/// A waker that, when woken, drops (cancels) other sleeps. Its wake runs
/// inside `Driver::process`; since wakes run outside the driver's lock, the
/// cancels inside it can take that lock.
struct Canceller {
    victims: std::sync::Mutex<Vec<Sleep>>,
    woken: AtomicUsize,
}

impl std::task::Wake for Canceller {
    fn wake(self: Arc<Self>) {
        self.woken.fetch_add(1, Ordering::Relaxed);
        self.victims.lock().unwrap().clear();
    }
}

#[test]
fn sleeps_cancelled_by_a_wake_during_processing_never_fire() {
    let (driver, _guard, start, log) = paused();
    // All in one level-1 slot (64..128 ms): opening it at 64 ms fires the
    // 64 ms sleeps in batches of WAKE_BATCH while the 100 ms victims wait
    // in the half-drained cascade, where the canceller's wake removes them.
    let mut victims = Vec::new();
    let victim_probes: Vec<_> = (0..10).map(|id| Probe::new(1_000 + id, &log)).collect();
    for probe in &victim_probes {
        let mut s = sleep(ms(100));
        assert!(poll_with(&mut s, probe).is_pending());
        victims.push(s);
    }
    let canceller = Arc::new(Canceller {
        victims: std::sync::Mutex::new(victims),
        woken: AtomicUsize::new(0),
    });
    let mut fillers: Vec<_> = (0..2 * time::WAKE_BATCH)
        .map(|id| TestTask::new(id, &log, sleep(ms(64))))
        .collect();
    fillers
        .iter_mut()
        .for_each(|t| assert!(t.poll().is_pending()));
    let mut trigger = sleep(ms(64));
    let waker = Waker::from(canceller.clone());
    assert!(Pin::new(&mut trigger)
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    assert_eq!(driver.active_timers(), 10 + 2 * time::WAKE_BATCH + 1);

    assert_eq!(driver.process(start + ms(64)), 2 * time::WAKE_BATCH + 1);
    assert_eq!(canceller.woken.load(Ordering::Relaxed), 1);
    assert!(canceller.victims.lock().unwrap().is_empty());
    time::advance(ms(200));
    assert!(
        victim_probes.iter().all(|p| p.wakes() == 0),
        "a cancelled sleep woke"
    );
    assert!(log.drain().iter().all(|&id| id < 2 * time::WAKE_BATCH));
    fillers
        .iter_mut()
        .for_each(|t| assert!(t.poll().is_ready()));
    drop(trigger);
    assert_eq!(driver.active_timers(), 0);
}
