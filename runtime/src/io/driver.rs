//! The I/O driver: one `mio::Poll`, its `mio::Waker`, and the registration
//! table (README.md, steps P1-P5 and S1-S2).

use std::io;
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use magpie_core::park::DriverWake;
use magpie_core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use magpie_core::sync::Arc;
use mio::event::Source;
use mio::{Events, Interest, Poll, Registry, Token, Waker};

#[cfg(target_os = "linux")]
use std::os::fd::AsRawFd;

#[cfg(target_os = "linux")]
use magpie_core::park::timerfd::TimerFd;
#[cfg(target_os = "linux")]
use mio::unix::SourceFd;

use super::scheduled_io::{Ready, ScheduledIo};
use super::table::Table;

/// The token of the driver's own waker; no registration has it (table.rs).
pub(crate) const WAKE_TOKEN: Token = Token(usize::MAX);
/// The token of the poller's precise timer: the all-ones index with
/// generation 0, an index the table never hands out (table.rs).
#[cfg(target_os = "linux")]
const TIMER_TOKEN: Token = Token((1 << super::table::INDEX_BITS) - 1);
/// Events taken from the poller per poll.
pub(crate) const EVENTS_CAPACITY: usize = 1024;

/// The poller and its event buffer: owned by one worker at a time.
pub(crate) struct Poller {
    poll: Poll,
    events: Events,
    /// Ends a poll at a deadline finer than epoll's millisecond timeout
    /// (`PollerGuard::poll_precise`); `None` off Linux, or when the kernel
    /// refused one.
    #[cfg(target_os = "linux")]
    timer: Option<TimerFd>,
    /// Feature `io-probe`: the time between the previous poll's end and the
    /// last poll's start.
    #[cfg(all(feature = "io-probe", not(loom)))]
    probe_gap: u64,
}

/// The driver, shared by the runtime (`RtShared`) and every registration.
pub(crate) struct IoDriver {
    /// Taken with `try_lock` only (P1): a worker that finds it held sleeps on
    /// its futex instead.
    poller: Mutex<Poller>,
    registry: Registry,
    waker: std::sync::Arc<Waker>,
    table: Table,
    metrics: IoCounters,
}

/// Counters behind [`IoMetrics`](super::IoMetrics). Relaxed: statistics.
struct IoCounters {
    driver_parks: AtomicU64,
    polls: AtomicU64,
    events: AtomicU64,
    hook_wakes: std::sync::Arc<AtomicU64>,
    in_driver: AtomicUsize,
}

impl IoDriver {
    pub(crate) fn new() -> io::Result<Self> {
        let poll = Poll::new()?;
        let registry = poll.registry().try_clone()?;
        let waker = std::sync::Arc::new(Waker::new(poll.registry(), WAKE_TOKEN)?);
        #[cfg(target_os = "linux")]
        let timer = TimerFd::new().ok().filter(|t| {
            let fd = t.as_raw_fd();
            poll.registry()
                .register(&mut SourceFd(&fd), TIMER_TOKEN, Interest::READABLE)
                .is_ok()
        });
        Ok(Self {
            poller: Mutex::new(Poller {
                poll,
                events: Events::with_capacity(EVENTS_CAPACITY),
                #[cfg(target_os = "linux")]
                timer,
                #[cfg(all(feature = "io-probe", not(loom)))]
                probe_gap: 0,
            }),
            registry,
            waker,
            table: Table::new(),
            metrics: IoCounters {
                driver_parks: AtomicU64::new(0),
                polls: AtomicU64::new(0),
                events: AtomicU64::new(0),
                hook_wakes: std::sync::Arc::new(AtomicU64::new(0)),
                in_driver: AtomicUsize::new(0),
            },
        })
    }

    /// The hook every worker's parker calls when it finds its thread asleep
    /// in the poller (magpie-core park U3): `mio::Waker::wake`, sticky until
    /// the next poll returns.
    pub(crate) fn wake_hook(&self) -> DriverWake {
        let waker = std::sync::Arc::clone(&self.waker);
        let wakes = std::sync::Arc::clone(&self.metrics.hook_wakes);
        std::sync::Arc::new(move || {
            wakes.fetch_add(1, Ordering::Relaxed);
            // An error here (the eventfd gone) leaves nothing to wake.
            let _ = waker.wake();
        })
    }

    /// P1: the poller, if no other worker holds it.
    pub(crate) fn try_lock_poller(&self) -> Option<PollerGuard<'_>> {
        match self.poller.try_lock() {
            Ok(guard) => Some(PollerGuard {
                guard,
                driver: self,
            }),
            // A panic while polling leaves a usable poller.
            Err(TryLockError::Poisoned(e)) => Some(PollerGuard {
                guard: e.into_inner(),
                driver: self,
            }),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Whether any socket is registered. The zero-timeout polls (P3) are
    /// skipped when none is: a runtime without I/O pays no syscall for them.
    #[inline]
    pub(crate) fn has_registrations(&self) -> bool {
        self.table.len() > 0
    }

    /// Registers `source` for `interest`: a table slot (T1), then mio.
    pub(crate) fn register(
        &self,
        source: &mut impl Source,
        interest: Interest,
    ) -> io::Result<(usize, Arc<ScheduledIo>)> {
        let (token, io) = self.table.insert()?;
        if let Err(e) = self.registry.register(source, Token(token), interest) {
            self.table.remove(token);
            return Err(e);
        }
        Ok((token, io))
    }

    /// Deregisters `source` from mio, then frees its slot (T3): an event
    /// already taken from the poller for it names nobody once the slot moves
    /// on.
    pub(crate) fn deregister(&self, source: &mut impl Source, token: usize) -> io::Result<()> {
        let r = self.registry.deregister(source);
        self.table.remove(token);
        r
    }

    /// S1-S2: refuse new registrations, mark every live one shut down and
    /// wake its waiters, who then get the "runtime shut down" error.
    pub(crate) fn shutdown(&self) {
        for io in self.table.shutdown() {
            io.shutdown();
        }
    }

    pub(crate) fn metrics(&self) -> super::IoMetrics {
        let m = &self.metrics;
        super::IoMetrics {
            driver_parks: m.driver_parks.load(Ordering::Relaxed),
            polls: m.polls.load(Ordering::Relaxed),
            events: m.events.load(Ordering::Relaxed),
            hook_wakes: m.hook_wakes.load(Ordering::Relaxed),
            in_driver: m.in_driver.load(Ordering::Relaxed),
            registrations: self.table.len(),
        }
    }
}

/// Held by the one worker that owns the poller (P1). Dropping it lets
/// another worker take it.
pub(crate) struct PollerGuard<'a> {
    guard: MutexGuard<'a, Poller>,
    driver: &'a IoDriver,
}

impl PollerGuard<'_> {
    /// P2/P3: one `mio::Poll::poll` into the buffer (`None`: no timeout).
    /// The caller sleeps here through `Parker::park_in_driver` when it parks,
    /// or passes a zero timeout for a look without sleeping. Interruption by
    /// a signal counts as an empty poll.
    pub(crate) fn poll(&mut self, timeout: Option<Duration>) {
        let m = &self.driver.metrics;
        m.polls.fetch_add(1, Ordering::Relaxed);
        let parking = timeout != Some(Duration::ZERO);
        if parking {
            m.driver_parks.fetch_add(1, Ordering::Relaxed);
            m.in_driver.fetch_add(1, Ordering::Relaxed);
        }
        #[cfg(all(feature = "io-probe", not(loom)))]
        {
            self.guard.probe_gap = super::probe::poll_start().1;
        }
        let Poller { poll, events, .. } = &mut *self.guard;
        if let Err(e) = poll.poll(events, timeout) {
            events.clear();
            debug_assert_eq!(e.kind(), io::ErrorKind::Interrupted, "mio poll: {e}");
        }
        if parking {
            m.in_driver.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Whether [`poll_precise`](Self::poll_precise) can end a sleep finer
    /// than a millisecond: the poller has a timer descriptor (Linux).
    pub(crate) fn has_precise_timer(&self) -> bool {
        #[cfg(target_os = "linux")]
        return self.guard.timer.is_some();
        #[cfg(not(target_os = "linux"))]
        false
    }

    /// P2 for a sleep that must end at `timeout` exactly, not at the next
    /// whole millisecond after it (epoll's resolution, rounded up by mio):
    /// arms the poller's timer descriptor for `timeout`, then polls with
    /// `timeout` as the backstop (alone, if arming failed or there is no
    /// descriptor). An expiry left behind by an earlier wake is replaced by
    /// the next arm and not reported (core's `TimerFd`); a poll that does
    /// not arm may see it once: a spurious wake.
    pub(crate) fn poll_precise(&mut self, timeout: Duration) {
        #[cfg(target_os = "linux")]
        if let Some(timer) = &self.guard.timer {
            let _ = timer.arm(timeout);
        }
        self.poll(Some(timeout));
    }

    /// P4: for each event of the last poll whose token still names a live
    /// registration (T2), set its readiness and wake its waiters. Returns how
    /// many registrations were told. The wakes schedule tasks through the
    /// runtime's normal path (the caller lends its worker, so they land in
    /// its own queues).
    pub(crate) fn dispatch(&mut self) -> usize {
        let mut told = 0;
        for event in self.guard.events.iter() {
            let token = event.token();
            if token == WAKE_TOKEN {
                continue;
            }
            #[cfg(target_os = "linux")]
            if token == TIMER_TOKEN {
                continue;
            }
            let Some(io) = self.driver.table.get(token.0) else {
                continue; // stale: deregistered, maybe reused (T2)
            };
            let ready = Ready::from_mio(event);
            if !ready.is_empty() {
                io.set_readiness_and_wake(ready);
                told += 1;
            }
        }
        self.guard.events.clear();
        #[cfg(all(feature = "io-probe", not(loom)))]
        super::probe::poll_end(self.guard.probe_gap, told);
        self.driver
            .metrics
            .events
            .fetch_add(told as u64, Ordering::Relaxed);
        told
    }
}
