//! `MagpieTimer`: hyper's `Timer` on magpie's timing wheel.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant as StdInstant};

use magpie_runtime::time::{self, Driver, Instant};

/// hyper's timer on magpie's time driver (`magpie_runtime::time`): 1 ms
/// ticks, deadlines rounded up, so a hyper timeout never fires early and
/// fires at most about 1 ms late (plus scheduling delay).
///
/// It captures a [`Driver`] when made, so the sleeps it creates belong to
/// that runtime wherever hyper calls `sleep` from.
/// [`reset`](hyper::rt::Timer::reset) moves the existing wheel entry in place
/// (no allocation) when the sleep is one of ours.
#[derive(Clone, Debug)]
pub struct MagpieTimer {
    driver: Driver,
}

impl MagpieTimer {
    /// A timer on the current runtime's driver.
    ///
    /// # Panics
    /// Outside a magpie runtime (a task, a worker or `Runtime::block_on`).
    // No `Default`: a default that panics outside a runtime would surprise.
    #[allow(clippy::new_without_default)]
    #[track_caller]
    pub fn new() -> MagpieTimer {
        match MagpieTimer::try_new() {
            Some(timer) => timer,
            None => panic!(
                "MagpieTimer::new must be called from within a magpie runtime \
                 (no time driver is installed on this thread)"
            ),
        }
    }

    /// A timer on the current runtime's driver, or `None` outside a runtime.
    pub fn try_new() -> Option<MagpieTimer> {
        Driver::try_current().map(MagpieTimer::with_driver)
    }

    /// A timer on `driver` (a runtime's, or a paused one in a test).
    pub fn with_driver(driver: Driver) -> MagpieTimer {
        MagpieTimer { driver }
    }

    /// A sleep until `deadline` on this timer's driver, as the concrete type.
    pub fn sleep_until_magpie(&self, deadline: StdInstant) -> MagpieSleep {
        let _enter = time::enter(&self.driver);
        MagpieSleep {
            inner: time::sleep_until(Instant::from_std(deadline)),
        }
    }
}

impl hyper::rt::Timer for MagpieTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        let _enter = time::enter(&self.driver);
        Box::pin(MagpieSleep {
            inner: time::sleep(duration),
        })
    }

    fn sleep_until(&self, deadline: StdInstant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(self.sleep_until_magpie(deadline))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: StdInstant) {
        match sleep.as_mut().downcast_mut_pin::<MagpieSleep>() {
            Some(ours) => ours.get_mut().inner.reset(Instant::from_std(new_deadline)),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}

/// The sleep [`MagpieTimer`] hands hyper: a `magpie_runtime::time::Sleep`
/// (one wheel entry, cancelled in O(1) when dropped).
#[derive(Debug)]
pub struct MagpieSleep {
    inner: time::Sleep,
}

impl MagpieSleep {
    /// The deadline this sleep completes at.
    pub fn deadline(&self) -> Instant {
        self.inner.deadline()
    }
}

impl Future for MagpieSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.get_mut().inner).poll(cx)
    }
}

impl hyper::rt::Sleep for MagpieSleep {}
