//! `sleep`, `sleep_until` and the `Sleep` future.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use super::wheel::Key;
use super::{coop_poll_proceed, Driver, Instant};

/// Waits until `duration` has elapsed on the current runtime's clock.
///
/// The deadline is `Instant::now() + duration` (about 30 years if that
/// overflows), rounded up to the next whole millisecond by the wheel, so the
/// sleep never completes early. Nothing is registered until the first poll.
///
/// # Panics
/// If called outside a magpie runtime (no [`enter`](super::enter) guard on
/// this thread).
pub fn sleep(duration: Duration) -> Sleep {
    let driver = super::current("sleep");
    let deadline = driver.clock().now().saturating_add(duration);
    Sleep::new(driver, deadline)
}

/// Waits until `deadline` on the current runtime's clock. A deadline that has
/// passed completes on the first poll.
///
/// # Panics
/// If called outside a magpie runtime.
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep::new(super::current("sleep_until"), deadline)
}

/// A future that completes at its deadline. Created by [`sleep`] and
/// [`sleep_until`].
///
/// - It registers one wheel entry on its first poll (none if the deadline has
///   already passed) and completes when the driver fires that entry.
/// - Dropping it cancels the entry in O(1): a dropped `Sleep` never fires and
///   never wakes anything, and leaves nothing behind in the wheel.
/// - [`reset`](Sleep::reset) moves the same entry to a new deadline.
/// - It is `Unpin` (the wheel refers to entries by index, not by address),
///   so it can be polled through `&mut` without pinning.
/// - Polling a completed `Sleep` returns `Ready` again.
pub struct Sleep {
    driver: Driver,
    deadline: Instant,
    state: State,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Not in the wheel: never polled, or reset after completing.
    Unregistered,
    /// In the wheel under this key (scheduled, or fired and not yet seen).
    Registered(Key),
    /// Completed; the entry has been freed.
    Elapsed,
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline)
            .field("state", &self.state)
            .finish()
    }
}

impl Sleep {
    pub(crate) fn new(driver: Driver, deadline: Instant) -> Sleep {
        Sleep {
            driver,
            deadline,
            state: State::Unregistered,
        }
    }

    /// The instant this sleep completes at (as given; the wheel rounds it up
    /// to a whole millisecond).
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether this sleep has completed (returned `Ready`).
    pub fn is_elapsed(&self) -> bool {
        self.state == State::Elapsed
    }

    /// Moves the deadline. A registered entry is moved in place (same slab
    /// entry, no allocation) and keeps its waker; if `deadline` has already
    /// passed, the entry fires at once and wakes that waker. A completed
    /// sleep becomes pending again and registers on its next poll.
    pub fn reset(&mut self, deadline: Instant) {
        self.deadline = deadline;
        match self.state {
            State::Registered(key) => self.driver.reschedule(key, deadline),
            State::Elapsed => self.state = State::Unregistered,
            State::Unregistered => {}
        }
    }

    pub(crate) fn driver(&self) -> &Driver {
        &self.driver
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.state == State::Elapsed {
            return Poll::Ready(());
        }
        ready!(coop_poll_proceed(cx));
        let ready = match this.state {
            State::Unregistered => match this.driver.register(this.deadline, cx.waker()) {
                Some(key) => {
                    this.state = State::Registered(key);
                    false
                }
                None => true,
            },
            State::Registered(key) => this.driver.poll_entry(key, cx.waker()).is_ready(),
            State::Elapsed => true,
        };
        if ready {
            this.state = State::Elapsed;
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let State::Registered(key) = self.state {
            self.driver.cancel(key);
        }
    }
}
