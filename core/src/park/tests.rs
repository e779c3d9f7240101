//! Parker tests that need a clock or real threads (the loom models are in
//! `core/tests/loom_park.rs`). Each runs against both backends available on
//! this target, so the condvar emulation is exercised on Linux too.

use std::time::Duration;

use super::condvar::CondvarFutex;
use super::{ParkResult, RawParker, Sleep, NOTIFIED, PARKED, PARKED_DRIVER, UNPARKED};
use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::{thread, Arc};

macro_rules! for_each_backend {
    ($($name:ident => $body:ident;)*) => {
        #[cfg(target_os = "linux")]
        mod futex_backend {
            $(#[test] fn $name() { super::$body::<super::super::futex::Futex>(); })*
        }
        mod condvar_backend {
            $(#[test] fn $name() { super::$body::<super::CondvarFutex>(); })*
        }
    };
}

for_each_backend! {
    unpark_before_park_makes_park_return_at_once => unpark_before_park;
    unpark_reports_whether_the_thread_was_asleep => unpark_reports_sleep;
    park_timeout_without_unpark_times_out_and_resets => timeout_resets;
    park_timeout_after_unpark_is_notified => timeout_after_unpark;
    spurious_wakeups_are_absorbed_and_counted => spurious_absorbed;
    each_unpark_publishes_the_writes_before_it => ping_pong;
    unpark_before_park_in_driver_skips_the_wait => driver_unpark_before;
    unpark_of_a_driver_sleeper_calls_the_hook_not_the_futex => driver_hook_wakes;
    park_in_driver_that_returns_by_itself_is_timed_out_and_resets => driver_own_return;
}

#[test]
fn parker_is_send_and_unparker_is_send_sync_clone() {
    fn owned<T: Send>() {}
    fn shared<T: Send + Sync + Clone>() {}
    owned::<super::Parker>();
    shared::<super::Unparker>();
}

fn state<B: Sleep>(p: &RawParker<B>) -> u32 {
    p.inner.state.load(Ordering::Relaxed)
}

/// Waits until the parker's thread has announced its sleep.
fn wait_until_parked<B: Sleep>(u: &super::RawUnparker<B>) {
    while u.inner.state.load(Ordering::Relaxed) != PARKED {
        thread::yield_now();
    }
}

fn unpark_before_park<B: Sleep>() {
    let p = RawParker::<B>::new();
    let u = p.unparker();
    assert!(!u.unpark(), "nobody was asleep");
    assert_eq!(state(&p), NOTIFIED);
    // Two more unparks merge into the pending one.
    assert!(!u.unpark());
    p.park();
    assert_eq!(state(&p), UNPARKED);
    assert_eq!(p.inner.spurious.load(Ordering::Relaxed), 0);
}

fn unpark_reports_sleep<B: Sleep + Send + Sync + 'static>() {
    let p = RawParker::<B>::new();
    let u = p.unparker();
    let t = thread::spawn(move || {
        p.park();
        state(&p)
    });
    wait_until_parked(&u);
    assert!(u.unpark(), "the thread was PARKED: a wake is issued");
    assert_eq!(t.join().unwrap(), UNPARKED);
}

fn timeout_resets<B: Sleep>() {
    let p = RawParker::<B>::new();
    assert_eq!(
        p.park_timeout(Duration::from_millis(1)),
        ParkResult::TimedOut
    );
    assert_eq!(state(&p), UNPARKED);
    assert_eq!(p.park_timeout(Duration::ZERO), ParkResult::TimedOut);
    // The timed-out parks left nothing behind: a later unpark still counts.
    let u = p.unparker();
    assert!(!u.unpark());
    assert_eq!(
        p.park_timeout(Duration::from_secs(3600)),
        ParkResult::Notified
    );
    assert_eq!(state(&p), UNPARKED);
}

fn timeout_after_unpark<B: Sleep>() {
    let p = RawParker::<B>::new();
    let u = p.unparker();
    u.unpark();
    assert_eq!(p.park_timeout(Duration::ZERO), ParkResult::Notified);
    u.unpark();
    // A deadline too far for `Instant` means "no deadline".
    assert_eq!(p.park_timeout(Duration::MAX), ParkResult::Notified);
}

/// Wakes the backend without setting NOTIFIED, as a signal or a stray futex
/// wake would, until the parked thread has counted one spurious return; then
/// unparks it for real. The park must not return before the real unpark.
fn spurious_absorbed<B: Sleep + Send + Sync + 'static>() {
    let p = RawParker::<B>::new();
    let u = p.unparker();
    let returned = Arc::new(AtomicU64::new(0));
    let t = thread::spawn({
        let returned = Arc::clone(&returned);
        move || {
            p.park();
            returned.store(1, Ordering::Relaxed);
            p.inner.spurious.load(Ordering::Relaxed)
        }
    });
    wait_until_parked(&u);
    while u.inner.spurious.load(Ordering::Relaxed) == 0 {
        u.inner.backend.wake_one(&u.inner.state);
        thread::yield_now();
    }
    assert_eq!(
        returned.load(Ordering::Relaxed),
        0,
        "a stray wake ended the park"
    );
    assert_eq!(u.inner.state.load(Ordering::Relaxed), PARKED);
    u.unpark();
    assert!(t.join().unwrap() >= 1);
}

/// Two threads hand a counter back and forth, each round through an unpark.
/// Each side must see the other's last write when its park returns.
fn ping_pong<B: Sleep + Send + Sync + 'static>() {
    const ROUNDS: u64 = if cfg!(miri) { 50 } else { 20_000 };
    let (pa, pb) = (RawParker::<B>::new(), RawParker::<B>::new());
    let (ua, ub) = (pa.unparker(), pb.unparker());
    // Relaxed on purpose: only the parker's Release/Acquire orders these.
    let counter = Arc::new(AtomicU64::new(0));
    let t = thread::spawn({
        let counter = Arc::clone(&counter);
        move || {
            for i in 0..ROUNDS {
                pb.park();
                assert_eq!(counter.load(Ordering::Relaxed), 2 * i + 1);
                counter.store(2 * i + 2, Ordering::Relaxed);
                ua.unpark();
            }
        }
    });
    for i in 0..ROUNDS {
        counter.store(2 * i + 1, Ordering::Relaxed);
        ub.unpark();
        pa.park();
        assert_eq!(counter.load(Ordering::Relaxed), 2 * i + 2);
    }
    t.join().unwrap();
}

/// A stand-in for a driver's wait and waker (what `mio::Poll::poll` and
/// `mio::Waker` are to the runtime): a sticky flag under a mutex.
#[derive(Default)]
struct DriverStandIn {
    woken: std::sync::Mutex<bool>,
    cvar: std::sync::Condvar,
    wakes: AtomicU64,
}

impl DriverStandIn {
    fn wait(&self) {
        let mut woken = self.woken.lock().unwrap();
        while !*woken {
            woken = self.cvar.wait(woken).unwrap();
        }
        *woken = false;
    }

    fn wake(&self) {
        self.wakes.fetch_add(1, Ordering::Relaxed);
        *self.woken.lock().unwrap() = true;
        self.cvar.notify_one();
    }

    fn hook(self: &std::sync::Arc<Self>) -> super::DriverWake {
        let me = std::sync::Arc::clone(self);
        std::sync::Arc::new(move || me.wake())
    }
}

fn driver_unpark_before<B: Sleep>() {
    let p = RawParker::<B>::new();
    let driver = std::sync::Arc::new(DriverStandIn::default());
    p.set_driver_wake(driver.hook());
    let u = p.unparker();
    assert!(!u.unpark(), "nobody was asleep");
    let mut waited = false;
    assert_eq!(p.park_in_driver(|| waited = true), ParkResult::Notified);
    assert!(!waited, "a pending unpark skips the driver's wait");
    assert_eq!(state(&p), UNPARKED);
    assert_eq!(driver.wakes.load(Ordering::Relaxed), 0);
}

fn driver_hook_wakes<B: Sleep + Send + Sync + 'static>() {
    let p = RawParker::<B>::new();
    let driver = std::sync::Arc::new(DriverStandIn::default());
    p.set_driver_wake(driver.hook());
    let u = p.unparker();
    let t = thread::spawn({
        let driver = std::sync::Arc::clone(&driver);
        move || {
            let r = p.park_in_driver(|| driver.wait());
            (r, state(&p))
        }
    });
    while u.inner.state.load(Ordering::Relaxed) != PARKED_DRIVER {
        thread::yield_now();
    }
    assert!(u.unpark(), "the thread was in the driver: a wake is issued");
    assert_eq!(t.join().unwrap(), (ParkResult::Notified, UNPARKED));
    assert_eq!(driver.wakes.load(Ordering::Relaxed), 1);
}

fn driver_own_return<B: Sleep>() {
    let p = RawParker::<B>::new();
    let driver = std::sync::Arc::new(DriverStandIn::default());
    p.set_driver_wake(driver.hook());
    // The wait returns on its own (an I/O event, a timeout).
    assert_eq!(p.park_in_driver(|| ()), ParkResult::TimedOut);
    assert_eq!(state(&p), UNPARKED);
    // Nothing was left behind: a later futex park still needs an unpark.
    assert_eq!(p.park_timeout(Duration::ZERO), ParkResult::TimedOut);
    let u = p.unparker();
    assert!(!u.unpark());
    assert_eq!(p.park_in_driver(|| ()), ParkResult::Notified);
    assert_eq!(driver.wakes.load(Ordering::Relaxed), 0);
}

#[test]
#[should_panic(expected = "needs a wake hook")]
fn park_in_driver_without_a_hook_is_refused() {
    let p = super::Parker::new();
    let _ = p.park_in_driver(|| ());
}
