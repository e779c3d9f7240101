//! The I/O driver: readiness from `mio`, integrated with the workers'
//! parking. The protocol is written out as numbered steps in `README.md`
//! beside this file; `crate::net` builds sockets on it.

pub(crate) mod driver;
#[cfg(all(feature = "io-probe", not(loom)))]
pub mod probe;
pub(crate) mod registration;
pub(crate) mod scheduled_io;
pub(crate) mod table;

use std::io;

pub(crate) use driver::IoDriver;

/// Counters of a runtime's I/O driver, from [`Handle::io_metrics`](crate::Handle::io_metrics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct IoMetrics {
    /// Times a worker went to sleep in the poller (`Parker::park_in_driver`).
    pub driver_parks: u64,
    /// Polls of the poller, sleeping ones and zero-timeout looks together.
    pub polls: u64,
    /// Events that reached a live registration.
    pub events: u64,
    /// Unparks that found a worker asleep in the poller and woke it through
    /// the poller's waker (magpie-core park, step U3).
    pub hook_wakes: u64,
    /// Workers asleep in the poller right now (0 or 1).
    pub in_driver: usize,
    /// Registered sockets right now.
    pub registrations: usize,
}

/// The driver of the runtime this thread runs in.
pub(crate) fn current_driver() -> io::Result<std::sync::Arc<IoDriver>> {
    match crate::rt::Handle::try_current() {
        Some(h) => Ok(std::sync::Arc::clone(h.io_driver())),
        None => Err(io::Error::other(
            "magpie_runtime::net: no current runtime; create sockets inside a task, \
             a worker thread or Runtime::block_on",
        )),
    }
}

impl crate::rt::Handle {
    /// Counters of this runtime's I/O driver.
    pub fn io_metrics(&self) -> IoMetrics {
        self.io_driver().metrics()
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Loom models of the registration table and the readiness word
    //! (README.md, T and R steps). The poller itself is not modelled: loom
    //! cannot run `epoll`; an event is a call of the dispatch steps.
    //!
    //! RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2 \
    //!   cargo test -p magpie-runtime --release --lib io::loom_tests
    use std::task::{Context, Poll, Wake, Waker};

    use magpie_core::sync::atomic::{AtomicUsize, Ordering};
    use magpie_core::sync::{thread, Arc};

    use super::scheduled_io::{Direction, Ready, ScheduledIo};
    use super::table::Table;

    /// Counts its wakes.
    struct CountWaker(AtomicUsize);

    impl Wake for CountWaker {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn count_waker() -> (std::sync::Arc<CountWaker>, Waker) {
        let count = std::sync::Arc::new(CountWaker(AtomicUsize::new(0)));
        let waker = Waker::from(std::sync::Arc::clone(&count));
        (count, waker)
    }

    /// A registration is dropped and its slot reused by a new one while the
    /// driver dispatches an event it polled for the old token. The event
    /// never sets the new registration's readiness nor wakes its waiter: the
    /// token's generation no longer matches the slot's.
    // protocol: io T1 T2 T3
    // broken-variant: token_without_generation; class: slot reuse; expects: stale event reached the new registration
    #[test]
    fn stale_event_after_deregister_never_reaches_the_new_registration() {
        loom::model(|| {
            let table = Arc::new(Table::new());
            let (old, _old_io) = table.insert().unwrap();
            let dispatcher = thread::spawn({
                let table = Arc::clone(&table);
                move || {
                    // P4 for an event the poller returned for `old`.
                    if let Some(io) = table.get(old) {
                        io.set_readiness_and_wake(Ready::READABLE);
                    }
                }
            });
            table.remove(old);
            let (new, new_io) = table.insert().unwrap();
            let (count, waker) = count_waker();
            let first = new_io.poll_ready(&mut Context::from_waker(&waker), Direction::Read);
            dispatcher.join().unwrap();
            assert!(
                first.is_pending()
                    && new_io.ready_event(Direction::Read).ready.is_empty()
                    && count.0.load(Ordering::Relaxed) == 0,
                "stale event reached the new registration"
            );
            table.remove(new);
        });
    }

    /// A task registers its waker (R4) while the driver sets readiness and
    /// wakes (R1, R2). Either the poll sees the readiness, or the waker is
    /// woken: the event is never lost.
    // protocol: io R1 R2 R4
    // broken-variant: poll_ready_skips_recheck; class: lost wakeup; expects: readiness lost
    #[test]
    fn readiness_racing_waker_registration_is_never_lost() {
        loom::model(|| {
            let io = Arc::new(ScheduledIo::new());
            let dispatcher = thread::spawn({
                let io = Arc::clone(&io);
                move || io.set_readiness_and_wake(Ready::READABLE)
            });
            let (count, waker) = count_waker();
            let polled = io.poll_ready(&mut Context::from_waker(&waker), Direction::Read);
            dispatcher.join().unwrap();
            let woken = count.0.load(Ordering::Relaxed);
            assert!(
                matches!(polled, Poll::Ready(_)) || woken == 1,
                "readiness lost: the poll saw nothing and nobody woke the task"
            );
        });
    }

    /// A task observed readiness at one tick and then hit `WouldBlock`
    /// (R3) while a newer event arrives (R1). The newer event survives the
    /// clear, so the next poll does not wait for an edge that already came.
    // protocol: io R1 R3
    // broken-variant: clear_ignores_tick; class: missing state check; expects: newer event erased
    #[test]
    fn clear_never_erases_a_newer_event() {
        loom::model(|| {
            let io = Arc::new(ScheduledIo::new());
            io.set_readiness_and_wake(Ready::READABLE);
            let (_count, waker) = count_waker();
            let Poll::Ready(seen) =
                io.poll_ready(&mut Context::from_waker(&waker), Direction::Read)
            else {
                panic!("readable was set before the poll");
            };
            let dispatcher = thread::spawn({
                let io = Arc::clone(&io);
                move || io.set_readiness_and_wake(Ready::READABLE)
            });
            io.clear_readiness(seen);
            dispatcher.join().unwrap();
            assert!(
                !io.ready_event(Direction::Read).ready.is_empty(),
                "newer event erased by a clear for an older tick"
            );
        });
    }
}
