//! Loom models of the parker (`core/src/park/README.md`). Under loom the
//! parker sleeps on loom's `Mutex` + `Condvar` and `park_timeout` never times
//! out, so every model that finishes proves its wakeup came from an unpark.
//!
//! RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2 \
//!   CARGO_TARGET_DIR=target/loom cargo test -p magpie-core --release --test loom_park
#![cfg(loom)]

use std::time::Duration;

use magpie_core::park::{DriverWake, ParkResult, Parker};
use magpie_core::sync::atomic::{AtomicBool, Ordering};
use magpie_core::sync::{thread, Arc, Condvar, Mutex, UnsafeCell};

/// Unpark runs to completion (the unparking thread is joined) before park
/// starts. The park must return: the unpark was remembered as NOTIFIED.
// protocol: park U1 1
// broken-variant: unpark_forgets_when_running; class: lost wakeup; expects: deadlock; threads
#[test]
fn unpark_before_park_is_not_lost() {
    loom::model(|| {
        let parker = Parker::new();
        let unparker = parker.unparker();
        let t = thread::spawn(move || unparker.unpark());
        assert!(!t.join().unwrap(), "nobody was asleep yet");
        parker.park();
    });
}

/// A model where an unpark races `park` (any variant of it, run by `park`,
/// which gets the parker's driver stand-in for `park_in_driver`),
/// and the unparker writes a plain cell before it unparks. The parker reads
/// the cell after the park returns: loom reports a data race unless the
/// orderings put the write before the read.
fn unpark_races(park: fn(&Parker, &DriverStandIn)) {
    loom::model(move || {
        let parker = Parker::new();
        let driver = DriverStandIn::install(&parker);
        let unparker = parker.unparker();
        let cell = Arc::new(UnsafeCell::new(0u32));
        let t = thread::spawn({
            let cell = Arc::clone(&cell);
            move || {
                // SAFETY: the parker thread reads the cell only after its park
                // returned, which the unpark below orders after this write.
                cell.with_mut(|p| unsafe { *p = 1 });
                unparker.unpark();
            }
        });
        park(&parker, &driver);
        // SAFETY: see the writer.
        let seen = cell.with(|p| unsafe { *p });
        assert_eq!(seen, 1);
        t.join().unwrap();
    });
}

/// Unpark races park. The park returns in every interleaving and sees what
/// the unparker wrote before it unparked.
// protocol: park U1 1 3
// broken-variant: parker_relaxed; class: missing Release/Acquire pair; expects: Causality violation
#[test]
fn unpark_during_park_wakes() {
    unpark_races(|parker, _| parker.park());
}

/// `park_timeout` racing an unpark returns `Notified`. Under loom the timeout
/// never fires, so this also shows the wakeup does not depend on it.
// protocol: park U1 1 3
// broken-variant: parker_relaxed; class: missing Release/Acquire pair; expects: Causality violation
#[test]
fn park_timeout_is_woken_by_unpark() {
    unpark_races(|parker, _| {
        assert_eq!(
            parker.park_timeout(Duration::from_millis(10)),
            ParkResult::Notified
        );
    });
}

/// Two parks, two unparks, the second sent only after the first park
/// returned. The second park must wait for the second unpark: the first
/// park consumed its notification instead of leaving it behind.
// protocol: park 1 3
// broken-variant: park_does_not_consume; class: stale token; expects: assertion failed: second_sent
#[test]
fn each_park_consumes_its_unpark() {
    loom::model(|| {
        let parker = Parker::new();
        let unparker = parker.unparker();
        let first_returned = Arc::new(AtomicBool::new(false));
        let second_sent = Arc::new(AtomicBool::new(false));
        let t = thread::spawn({
            let (first_returned, second_sent) =
                (Arc::clone(&first_returned), Arc::clone(&second_sent));
            move || {
                unparker.unpark();
                while !first_returned.load(Ordering::Acquire) {
                    thread::yield_now();
                }
                second_sent.store(true, Ordering::Relaxed);
                unparker.unpark();
            }
        });
        parker.park();
        first_returned.store(true, Ordering::Release);
        parker.park();
        // Ordered by the unpark's Release and the park's Acquire.
        assert!(second_sent.load(Ordering::Relaxed));
        t.join().unwrap();
    });
}

/// The stand-in for a driver's wait and its waker (`mio::Poll::poll` and
/// `mio::Waker`, which loom cannot run): a flag under a loom mutex. A wake
/// sets it and is kept until a wait consumes it, as mio's eventfd is.
struct DriverStandIn {
    woken: Mutex<bool>,
    cvar: Condvar,
}

impl DriverStandIn {
    /// A stand-in, installed as `parker`'s driver wake hook.
    fn install(parker: &Parker) -> Arc<DriverStandIn> {
        let driver = Arc::new(DriverStandIn {
            woken: Mutex::new(false),
            cvar: Condvar::new(),
        });
        let hook_side = Arc::clone(&driver);
        let hook: DriverWake = std::sync::Arc::new(move || hook_side.wake());
        parker.set_driver_wake(hook);
        driver
    }

    /// The driver's blocking wait: returns once a wake was made.
    fn wait(&self) {
        let mut woken = self.woken.lock().unwrap();
        while !*woken {
            woken = self.cvar.wait(woken).unwrap();
        }
        *woken = false;
    }

    fn wake(&self) {
        *self.woken.lock().unwrap() = true;
        self.cvar.notify_one();
    }
}

/// An unpark from another thread races a park in the driver, whose wait
/// returns only when the driver's waker is called (no timeout). The park
/// returns in every interleaving: the unpark either leaves its token before
/// D1, or finds PARKED_DRIVER and calls the hook.
// protocol: park U1 U3 D1 D2 D3
// broken-variant: unpark_ignores_driver; class: lost wakeup; expects: deadlock
#[test]
fn unpark_racing_park_in_driver_is_never_lost() {
    loom::model(|| {
        let parker = Parker::new();
        let driver = DriverStandIn::install(&parker);
        let unparker = parker.unparker();
        let t = thread::spawn(move || unparker.unpark());
        assert_eq!(
            parker.park_in_driver(|| driver.wait()),
            ParkResult::Notified
        );
        t.join().unwrap();
    });
}

/// The unpark completes (its thread joined) before the park in the driver
/// starts. The park returns `Notified` without calling the driver's wait,
/// which here would never return: the token left by U1 is consumed in D1.
// protocol: park U1 D1
// broken-variant: driver_announce_by_store; class: check-then-act; expects: deadlock
#[test]
fn notification_before_park_in_driver_returns_at_once() {
    loom::model(|| {
        let parker = Parker::new();
        let driver = DriverStandIn::install(&parker);
        let unparker = parker.unparker();
        let t = thread::spawn(move || unparker.unpark());
        assert!(!t.join().unwrap(), "nobody was asleep yet");
        assert_eq!(
            parker.park_in_driver(|| driver.wait()),
            ParkResult::Notified
        );
    });
}

/// A park in the driver racing an unpark sees what the unparker wrote before
/// it unparked: D1's and D3's consumption are Acquire RMWs pairing with U1.
// protocol: park U1 D1 D3
// broken-variant: parker_relaxed; class: missing Release/Acquire pair; expects: Causality violation
#[test]
fn park_in_driver_sees_the_unparkers_writes() {
    unpark_races(|parker, driver| {
        assert_eq!(
            parker.park_in_driver(|| driver.wait()),
            ParkResult::Notified
        );
    });
}
