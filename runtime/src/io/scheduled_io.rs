//! One registered I/O resource's shared state: a readiness word and the
//! wakers of the task waiting to read and the task waiting to write
//! (README.md, steps R1-R4).

use std::task::{Context, Poll, Waker};

use magpie_core::sync::atomic::{AtomicUsize, Ordering};
use magpie_core::sync::Mutex;

/// A set of readiness bits, as the poller reported them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ready(usize);

impl Ready {
    pub(crate) const EMPTY: Ready = Ready(0);
    pub(crate) const READABLE: Ready = Ready(1 << 0);
    pub(crate) const WRITABLE: Ready = Ready(1 << 1);
    pub(crate) const READ_CLOSED: Ready = Ready(1 << 2);
    pub(crate) const WRITE_CLOSED: Ready = Ready(1 << 3);
    pub(crate) const ERROR: Ready = Ready(1 << 4);
    /// Not from the poller: the driver shut down; every poll ends in an error.
    pub(crate) const SHUTDOWN: Ready = Ready(1 << 5);

    /// The bits `clear_readiness` may take away: closed, error and shutdown
    /// are final and stay.
    const CLEARABLE: Ready = Ready(Self::READABLE.0 | Self::WRITABLE.0);

    #[inline]
    pub(crate) const fn union(self, other: Ready) -> Ready {
        Ready(self.0 | other.0)
    }

    #[inline]
    pub(crate) const fn intersects(self, other: Ready) -> bool {
        self.0 & other.0 != 0
    }

    #[inline]
    pub(crate) const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The readiness an `mio` event reports.
    pub(crate) fn from_mio(event: &mio::event::Event) -> Ready {
        let mut ready = Ready::EMPTY;
        if event.is_readable() {
            ready = ready.union(Ready::READABLE);
        }
        if event.is_writable() {
            ready = ready.union(Ready::WRITABLE);
        }
        if event.is_read_closed() {
            ready = ready.union(Ready::READ_CLOSED);
        }
        if event.is_write_closed() {
            ready = ready.union(Ready::WRITE_CLOSED);
        }
        if event.is_error() {
            ready = ready.union(Ready::ERROR);
        }
        ready
    }
}

/// Which side of a resource a task waits on. Each has its own waker slot, so
/// a reader and a writer (the two halves of a split stream) wait at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Read,
    Write,
}

impl Direction {
    /// The bits that end a wait in this direction. An error or a shutdown
    /// ends both: the operation then reports it.
    #[inline]
    pub(crate) const fn mask(self) -> Ready {
        match self {
            Direction::Read => {
                Ready(Ready::READABLE.0 | Ready::READ_CLOSED.0 | Ready::ERROR.0 | Ready::SHUTDOWN.0)
            }
            Direction::Write => Ready(
                Ready::WRITABLE.0 | Ready::WRITE_CLOSED.0 | Ready::ERROR.0 | Ready::SHUTDOWN.0,
            ),
        }
    }
}

/// The readiness a poll observed, with the tick it was observed at: clearing
/// it later takes effect only if no newer event arrived in between (R3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub(crate) struct ReadyEvent {
    pub(crate) ready: Ready,
    tick: usize,
}

/// Layout of the readiness word: the `Ready` bits low, the tick above them.
const READY_BITS: u32 = 8;
const READY_MASK: usize = (1 << READY_BITS) - 1;
/// The tick counts events modulo 2^(usize bits - 8); a clear is skipped when
/// the tick moved, so a wrap-around would have to fit 2^24 (32-bit) events
/// between one poll's observation and its clear.
const TICK_ONE: usize = 1 << READY_BITS;
const _: () = assert!(Ready::SHUTDOWN.0 <= READY_MASK);

#[derive(Default)]
struct Waiters {
    reader: Option<Waker>,
    writer: Option<Waker>,
}

/// Shared by the registration (the socket's side) and the driver's table
/// (the dispatch side).
pub(crate) struct ScheduledIo {
    /// `Ready` bits | tick << READY_BITS.
    readiness: AtomicUsize,
    waiters: Mutex<Waiters>,
    /// When R2 last took the reader's waker (feature `io-probe`).
    #[cfg(all(feature = "io-probe", not(loom)))]
    probe: super::probe::Stamp,
}

impl ScheduledIo {
    pub(crate) fn new() -> Self {
        Self {
            readiness: AtomicUsize::new(0),
            waiters: Mutex::new(Waiters::default()),
            #[cfg(all(feature = "io-probe", not(loom)))]
            probe: super::probe::Stamp::default(),
        }
    }

    /// R1 (dispatch): add `ready` to the word and advance the tick, then (R2)
    /// wake the waiters whose direction it ends.
    pub(crate) fn set_readiness_and_wake(&self, ready: Ready) {
        // AcqRel: an RMW in the word's single modification order; the
        // Release half pairs with the Acquire loads in `poll_ready` and
        // `clear_readiness`. The wake below goes through the waiters' mutex,
        // which is what orders it against a waiter registering (R2).
        let _ = self
            .readiness
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
                let tick = (cur & !READY_MASK).wrapping_add(TICK_ONE);
                Some(tick | (cur & READY_MASK) | ready.0)
            });
        self.wake(ready);
    }

    /// R2: take and wake the wakers whose direction `ready` ends.
    pub(crate) fn wake(&self, ready: Ready) {
        let (reader, writer) = {
            let mut w = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
            let reader = if ready.intersects(Direction::Read.mask()) {
                w.reader.take()
            } else {
                None
            };
            let writer = if ready.intersects(Direction::Write.mask()) {
                w.writer.take()
            } else {
                None
            };
            (reader, writer)
        };
        // Woken outside the lock: a wake schedules a task, and may run code
        // that polls this resource again.
        #[cfg(all(feature = "io-probe", not(loom)))]
        if reader.is_some() {
            self.probe.woke();
        }
        if let Some(w) = reader {
            w.wake();
        }
        if let Some(w) = writer {
            w.wake();
        }
    }

    /// The readiness now, for `dir`, with its tick (possibly empty).
    #[inline]
    pub(crate) fn ready_event(&self, dir: Direction) -> ReadyEvent {
        // Acquire: pairs with the Release half of R1's RMW.
        let cur = self.readiness.load(Ordering::Acquire);
        ReadyEvent {
            ready: Ready(cur & dir.mask().0),
            tick: cur >> READY_BITS,
        }
    }

    /// R4 (waiter): ready in `dir` now, or the task's waker is stored and
    /// the word is checked again *under the waiters' lock*, so an R1 that
    /// landed between the first look and the store is seen here, and one
    /// that lands after it finds the waker in R2.
    pub(crate) fn poll_ready(&self, cx: &mut Context<'_>, dir: Direction) -> Poll<ReadyEvent> {
        #[cfg(all(feature = "io-probe", not(loom)))]
        if dir == Direction::Read {
            self.probe.looked();
        }
        let ev = self.ready_event(dir);
        if !ev.ready.is_empty() {
            return Poll::Ready(ev);
        }
        let mut w = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
        let slot = match dir {
            Direction::Read => &mut w.reader,
            Direction::Write => &mut w.writer,
        };
        if !matches!(slot, Some(old) if old.will_wake(cx.waker())) {
            *slot = Some(cx.waker().clone());
        }
        // broken: no second look; an event dispatched between the first
        // look and the store found no waker, and this one waits forever.
        #[cfg(magpie_broken = "poll_ready_skips_recheck")]
        return Poll::Pending;
        #[cfg(not(magpie_broken = "poll_ready_skips_recheck"))]
        {
            let ev = self.ready_event(dir);
            if ev.ready.is_empty() {
                Poll::Pending
            } else {
                Poll::Ready(ev)
            }
        }
    }

    /// R3: the operation hit `WouldBlock` after `ev` was observed: clear
    /// the bits of `ev`, unless the tick moved (a newer event arrived, which
    /// must not be erased). Closed, error and shutdown bits are never cleared.
    pub(crate) fn clear_readiness(&self, ev: ReadyEvent) {
        let clear = ev.ready.0 & Ready::CLEARABLE.0;
        // AcqRel: an RMW on the word; it must read the latest tick.
        let _ = self
            .readiness
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
                #[cfg(not(magpie_broken = "clear_ignores_tick"))]
                if cur >> READY_BITS != ev.tick {
                    return None;
                }
                Some(cur & !clear)
            });
    }

    /// The driver shut down: mark the resource so every poll fails, and
    /// wake both waiters.
    pub(crate) fn shutdown(&self) {
        // AcqRel: as in R1.
        self.readiness.fetch_or(Ready::SHUTDOWN.0, Ordering::AcqRel);
        self.wake(Ready::SHUTDOWN);
    }

    /// Whether `ev` carries the shutdown mark.
    #[inline]
    pub(crate) fn is_shutdown(ev: &ReadyEvent) -> bool {
        ev.ready.intersects(Ready::SHUTDOWN)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};

    use magpie_core::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn waker() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count(AtomicUsize::new(0)));
        (Arc::clone(&c), Waker::from(c))
    }

    #[test]
    fn clear_takes_the_observed_bits_only_while_the_tick_stands() {
        let io = ScheduledIo::new();
        let (_c, w) = waker();
        let mut cx = Context::from_waker(&w);
        io.set_readiness_and_wake(Ready::READABLE.union(Ready::WRITABLE));
        let Poll::Ready(read) = io.poll_ready(&mut cx, Direction::Read) else {
            panic!("readable was set");
        };
        io.clear_readiness(read);
        assert!(io.ready_event(Direction::Read).ready.is_empty());
        assert!(
            !io.ready_event(Direction::Write).ready.is_empty(),
            "only the read bits go"
        );
        let Poll::Ready(write) = io.poll_ready(&mut cx, Direction::Write) else {
            panic!("writable is still set");
        };
        io.set_readiness_and_wake(Ready::WRITABLE);
        io.clear_readiness(write);
        assert!(
            !io.ready_event(Direction::Write).ready.is_empty(),
            "an event after the observation survives the clear"
        );
    }

    #[test]
    fn closed_and_shutdown_are_never_cleared_and_wake_both_sides() {
        let io = ScheduledIo::new();
        let (reader, rw) = waker();
        let (writer, ww) = waker();
        assert!(io
            .poll_ready(&mut Context::from_waker(&rw), Direction::Read)
            .is_pending());
        assert!(io
            .poll_ready(&mut Context::from_waker(&ww), Direction::Write)
            .is_pending());
        io.set_readiness_and_wake(Ready::READ_CLOSED);
        assert_eq!(reader.0.load(Ordering::Relaxed), 1);
        assert_eq!(
            writer.0.load(Ordering::Relaxed),
            0,
            "read-closed ends reads only"
        );
        let ev = io.ready_event(Direction::Read);
        io.clear_readiness(ev);
        assert!(!io.ready_event(Direction::Read).ready.is_empty());
        io.shutdown();
        assert_eq!(writer.0.load(Ordering::Relaxed), 1);
        assert!(ScheduledIo::is_shutdown(&io.ready_event(Direction::Write)));
    }
}
