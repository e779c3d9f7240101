//! A futex emulated with a `Mutex` and a `Condvar`: the backend on targets
//! without a futex, and under `cfg(loom)`, where it is built from loom's own
//! primitives so the model checker sees every sleep and wake.
//!
//! Why no wake is missed: `wait` checks the state with the mutex held and
//! releases it only inside `Condvar::wait`, atomically with starting to sleep.
//! `wake_one` is called after the state changed, and takes the mutex before it
//! notifies. Either the waker's lock comes before the waiter's, so the waiter's
//! check happens after the change and sees it; or it comes after the waiter
//! went to sleep, so the notify reaches a sleeping waiter.

#[cfg(not(loom))]
use std::time::Duration;

use super::Sleep;
use crate::sync::atomic::{AtomicU32, Ordering};
use crate::sync::{Condvar, Mutex};

#[derive(Debug, Default)]
pub(crate) struct CondvarFutex {
    lock: Mutex<()>,
    cvar: Condvar,
}

impl Sleep for CondvarFutex {
    fn wait(&self, state: &AtomicU32, expected: u32) {
        // The mutex guards no data, so a poisoned lock is still usable.
        let guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        // Relaxed: the mutex orders this load after any waker whose
        // lock came first (see the module docs); the caller re-reads the
        // state with Acquire after we return.
        if state.load(Ordering::Relaxed) != expected {
            return;
        }
        drop(self.cvar.wait(guard).unwrap_or_else(|e| e.into_inner()));
    }

    #[cfg(not(loom))]
    fn wait_timeout(&self, state: &AtomicU32, expected: u32, timeout: Duration) -> bool {
        let guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        // Relaxed: as in `wait`.
        if state.load(Ordering::Relaxed) != expected {
            return false;
        }
        let (guard, result) = self
            .cvar
            .wait_timeout(guard, timeout)
            .unwrap_or_else(|e| e.into_inner());
        drop(guard);
        result.timed_out()
    }

    fn wake_one(&self, _state: &AtomicU32) {
        // Taking the lock orders this wake after any waiter's check-then-sleep
        // that began before it (see the module docs).
        drop(self.lock.lock().unwrap_or_else(|e| e.into_inner()));
        self.cvar.notify_one();
    }
}
