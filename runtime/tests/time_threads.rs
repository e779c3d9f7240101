//! Timers fired on one thread wake futures polled on others.
#![cfg(not(loom))]

mod time_util;

use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::task::Poll;
use std::thread;

use magpie_core::sync::atomic::{AtomicBool, Ordering};
use magpie_runtime::time::{self, sleep, Driver, Duration, Instant};
use time_util::{Probe, Rng, TestTask, WakeLog};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn timer_processed_on_one_thread_wakes_a_future_on_another() {
    let driver = Driver::new_paused();
    let start = driver.clock().now();
    let (registered_tx, registered_rx) = mpsc::channel();
    let sleeper = {
        let driver = driver.clone();
        thread::spawn(move || {
            let _guard = time::enter(&driver);
            let log = WakeLog::default();
            let mut task = TestTask::with_probe(Probe::for_this_thread(0, &log), sleep(ms(10)));
            assert!(task.poll().is_pending());
            registered_tx.send(()).unwrap();
            // Park until woken (park may also return spuriously: re-poll).
            while task.poll().is_pending() {
                thread::park();
            }
            (Instant::now(), task.wakes())
        })
    };
    registered_rx.recv().unwrap();
    driver.clock().advance(ms(9));
    assert_eq!(driver.process(driver.clock().now()), 0);
    driver.clock().advance(ms(1));
    assert_eq!(driver.process(driver.clock().now()), 1);
    let (woke_at, wakes) = sleeper.join().unwrap();
    assert_eq!(woke_at, start + ms(10));
    assert_eq!(wakes, 1);
    assert_eq!(driver.active_timers(), 0);
}

/// Sleepers on several threads register, cancel and poll while one thread
/// advances the clock and processes. Each surviving sleep completes exactly
/// once, never before its deadline; no cancelled sleep ever wakes.
#[test]
fn concurrent_sleepers_fire_exactly_once_and_never_early() {
    const THREADS: usize = 3;
    const PER_THREAD: usize = if cfg!(miri) { 20 } else { 800 };
    const HORIZON_MS: u64 = if cfg!(miri) { 40 } else { 1_500 };
    let driver = Driver::new_paused();
    let start = driver.clock().now();
    let registered = Arc::new(Barrier::new(THREADS + 1));
    let stop = Arc::new(AtomicBool::new(false));

    let sleepers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (driver, registered, stop) = (driver.clone(), registered.clone(), stop.clone());
            thread::spawn(move || {
                let _guard = time::enter(&driver);
                let log = WakeLog::default();
                let mut rng = Rng(0x1234_5678 + t as u64);
                // Indexed by probe id; `None` once cancelled or completed.
                let mut live = Vec::new();
                let mut cancelled = Vec::new();
                for id in 0..PER_THREAD {
                    let s = sleep(ms(1 + rng.below(HORIZON_MS)));
                    let deadline = s.deadline();
                    let mut task = TestTask::with_probe(Probe::for_this_thread(id, &log), s);
                    assert!(task.poll().is_pending());
                    if rng.below(4) == 0 {
                        cancelled.push(task.probe.clone());
                        live.push(None); // dropped here: cancelled
                    } else {
                        live.push(Some((deadline, task)));
                    }
                }
                registered.wait();
                let expected = live.iter().flatten().count();
                let mut completed = 0;
                loop {
                    // Acquire: pairs with the Release store after the last
                    // `process`, so once `stopped` is seen, every wake (and
                    // its log entry) is visible to the drain below.
                    let stopped = stop.load(Ordering::Acquire);
                    for id in log.drain() {
                        let (deadline, mut task) =
                            live[id].take().expect("woke twice or after cancel");
                        assert_eq!(task.poll(), Poll::Ready(()));
                        let now = driver.clock().now();
                        assert!(now >= deadline, "fired early: {now:?} < {deadline:?}");
                        assert_eq!(task.wakes(), 1);
                        completed += 1;
                    }
                    if completed == expected {
                        break;
                    }
                    assert!(!stopped, "a live sleep was never woken");
                    thread::park_timeout(Duration::from_millis(1));
                }
                assert!(
                    cancelled.iter().all(|p| p.wakes() == 0),
                    "a cancelled sleep woke"
                );
                completed
            })
        })
        .collect();

    registered.wait();
    for _ in 0..HORIZON_MS {
        driver.clock().advance(ms(1));
        driver.process(driver.clock().now());
    }
    // Release: pairs with the sleepers' Acquire load of `stop`.
    stop.store(true, Ordering::Release);
    let completed: usize = sleepers.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(completed > THREADS * PER_THREAD / 2);
    assert_eq!(driver.active_timers(), 0);
    assert_eq!(driver.clock().now(), start + ms(HORIZON_MS));
}

/// Registration and cancellation race with processing on a real clock: every
/// sleep that is kept completes, none before its deadline. Nothing here
/// asserts how long anything took.
#[test]
fn real_clock_sleeps_complete_while_another_thread_processes() {
    const SLEEPS: usize = if cfg!(miri) { 5 } else { 200 };
    let driver = Driver::new();
    let done = Arc::new(AtomicBool::new(false));
    let processor = {
        let (driver, done) = (driver.clone(), done.clone());
        thread::spawn(move || {
            while !done.load(Ordering::Acquire) {
                // Acquire: pairs with the Release store after the last sleep
                // completed (nothing is read through it; it only ends the loop).
                driver.process(driver.clock().now());
                thread::yield_now();
            }
        })
    };
    {
        let _guard = time::enter(&driver);
        let log = WakeLog::default();
        for id in 0..SLEEPS {
            let s = sleep(Duration::from_micros(200 * (id as u64 % 7)));
            let deadline = s.deadline();
            let mut task = TestTask::with_probe(Probe::for_this_thread(id, &log), s);
            while task.poll().is_pending() {
                thread::park_timeout(Duration::from_millis(5));
            }
            assert!(Instant::now() >= deadline, "completed before its deadline");
        }
    }
    done.store(true, Ordering::Release);
    processor.join().unwrap();
    assert_eq!(driver.active_timers(), 0);
}
