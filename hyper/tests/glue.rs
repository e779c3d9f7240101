//! The glue pieces on their own: `MagpieTimer` on a paused clock (no
//! runtime, so no auto-advance and no wall clock), `MagpieExecutor` from
//! inside and outside a runtime.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use futures_lite::future::{block_on, poll_once};
use hyper::rt::{Executor, Timer};
use magpie_hyper::{MagpieExecutor, MagpieTimer};
use magpie_runtime::time::{self, Driver};
use magpie_runtime::Handle;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Polls `fut` once with a waker that does nothing: `true` if it is ready.
fn ready<F: std::future::Future + Unpin>(fut: &mut F) -> bool {
    block_on(poll_once(fut)).is_some()
}

#[test]
fn timer_sleep_completes_at_its_deadline_not_before() {
    let driver = Driver::new_paused();
    let _enter = time::enter(&driver);
    let timer = MagpieTimer::with_driver(driver.clone());
    let mut sleep = timer.sleep(ms(20));
    assert!(!ready(&mut sleep));
    time::advance(ms(19));
    assert!(!ready(&mut sleep), "fired 1 ms early");
    time::advance(ms(1));
    assert!(ready(&mut sleep), "not fired at its deadline");
    assert_eq!(driver.active_timers(), 0);
}

#[test]
fn timer_reset_moves_a_sleep_later_and_earlier() {
    let driver = Driver::new_paused();
    let _enter = time::enter(&driver);
    let timer = MagpieTimer::with_driver(driver.clone());
    let now = || driver.clock().now().into_std();

    let mut later = timer.sleep(ms(20));
    assert!(!ready(&mut later));
    timer.reset(&mut later, now() + ms(50));
    time::advance(ms(20));
    assert!(
        !ready(&mut later),
        "fired at the old deadline after a reset to a later one"
    );
    time::advance(ms(30));
    assert!(ready(&mut later), "not fired at the new deadline");

    let mut earlier = timer.sleep_until(now() + ms(100));
    assert!(!ready(&mut earlier));
    timer.reset(&mut earlier, now() + ms(5));
    time::advance(ms(5));
    assert!(ready(&mut earlier), "not fired at the earlier deadline");
    // Resetting kept one wheel entry per sleep; both are gone now.
    assert_eq!(driver.active_timers(), 0);
}

#[test]
fn dropped_timer_sleeps_leave_no_wheel_entry() {
    let driver = Driver::new_paused();
    let _enter = time::enter(&driver);
    let timer = MagpieTimer::with_driver(driver.clone());
    let mut sleeps: Vec<_> = (1..=8).map(|i| timer.sleep(ms(i * 10))).collect();
    for s in &mut sleeps {
        assert!(!ready(s));
    }
    assert_eq!(driver.active_timers(), 8);
    drop(sleeps);
    assert_eq!(driver.active_timers(), 0);
}

#[test]
fn executor_spawns_onto_the_runtime_from_inside_and_from_outside() {
    let rt = common::runtime();
    let (tx, rx) = mpsc::channel::<&'static str>();
    // From a thread that is not part of any runtime: `with_handle`.
    let exec = MagpieExecutor::with_handle(rt.handle().clone());
    let outside = tx.clone();
    std::thread::spawn(move || {
        assert!(Handle::try_current().is_none());
        exec.execute(async move {
            assert!(
                Handle::try_current().is_some(),
                "not running on the runtime"
            );
            outside.send("outside").unwrap();
        });
    })
    .join()
    .unwrap();
    // From inside a task: `new` finds the current runtime.
    rt.spawn(async move {
        MagpieExecutor::new().execute(async move {
            assert!(
                Handle::try_current().is_some(),
                "not running on the runtime"
            );
            tx.send("inside").unwrap();
        });
    });
    let mut got: Vec<_> = (0..2)
        .map(|_| {
            rx.recv_timeout(common::STEP_LIMIT)
                .expect("spawned task ran")
        })
        .collect();
    got.sort_unstable();
    assert_eq!(got, ["inside", "outside"]);
}
