//! A one-shot Linux `timerfd`: a deadline with nanosecond precision that an
//! epoll set can wait on beside its sockets.
//!
//! Why it exists: epoll's timeout is whole milliseconds, and mio rounds a
//! shorter wait up, so a worker that sleeps in the I/O poller until a timer's
//! deadline wakes up to 1 ms late (runtime/src/rt/README.md, "Idle workers
//! and timers", step 5). Registered in the poller and armed for the exact
//! remaining time, this descriptor turns readable at the deadline and ends
//! the wait there.
//!
//! Re-arming replaces the previous expiry and resets the expiration count, so
//! an expiry that fired while nobody waited is not reported by the next wait
//! (epoll re-checks an item's readiness before it reports it). Nothing here
//! touches shared memory: the only `unsafe` is the two system calls and the
//! adoption of the descriptor the first one returns.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// A monotonic, one-shot, non-blocking timer descriptor.
#[derive(Debug)]
pub struct TimerFd {
    fd: OwnedFd,
}

impl TimerFd {
    /// A disarmed timer on `CLOCK_MONOTONIC` (the clock `std::time::Instant`
    /// and the parker's futex timeouts use).
    pub fn new() -> io::Result<TimerFd> {
        // SAFETY: timerfd_create takes no pointers and has no effect on
        // Rust-visible memory; it returns a new descriptor or -1.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by the kernel and is open; nothing
        // else in the process knows it, so `OwnedFd` is its only owner and
        // closes it exactly once.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(TimerFd { fd })
    }

    /// Arms the timer to expire once, `after` from now. A zero `after` is
    /// raised to 1 ns (a zero expiry would disarm it instead).
    pub fn arm(&self, after: Duration) -> io::Result<()> {
        let after = after.max(Duration::from_nanos(1));
        self.set(libc::timespec {
            // Past `time_t::MAX` seconds is as good as forever.
            tv_sec: libc::time_t::try_from(after.as_secs()).unwrap_or(libc::time_t::MAX),
            // Below 1e9: fits every `c_long`.
            tv_nsec: after.subsec_nanos() as libc::c_long,
        })
    }

    /// Disarms the timer; a pending expiry is forgotten.
    pub fn disarm(&self) -> io::Result<()> {
        self.set(libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        })
    }

    fn set(&self, value: libc::timespec) -> io::Result<()> {
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: value,
        };
        // SAFETY: the kernel reads the itimerspec behind the third argument,
        // a live borrow of `spec` on this stack for the whole call, and
        // writes nothing (the old-value pointer is null). The descriptor is
        // ours and open (`self.fd`).
        let r =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, core::ptr::null_mut()) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl AsRawFd for TimerFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// Waits for the descriptor to turn readable, at most `limit`.
    fn wait_readable(t: &TimerFd, limit: Duration) -> bool {
        let mut pfd = libc::pollfd {
            fd: t.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(limit.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: poll reads and writes the one pollfd behind the pointer, a
        // live exclusive borrow for the whole call.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        r == 1 && pfd.revents & libc::POLLIN != 0
    }

    #[test]
    #[cfg_attr(miri, ignore = "system calls Miri does not model")]
    fn an_armed_timer_turns_readable_not_before_its_expiry() {
        let t = TimerFd::new().unwrap();
        let start = Instant::now();
        t.arm(Duration::from_micros(300)).unwrap();
        assert!(wait_readable(&t, Duration::from_secs(10)));
        assert!(start.elapsed() >= Duration::from_micros(300));
    }

    #[test]
    #[cfg_attr(miri, ignore = "system calls Miri does not model")]
    fn rearming_forgets_an_expiry_nobody_read() {
        let t = TimerFd::new().unwrap();
        t.arm(Duration::from_nanos(1)).unwrap();
        assert!(wait_readable(&t, Duration::from_secs(10)));
        t.arm(Duration::from_secs(3600)).unwrap();
        assert!(!wait_readable(&t, Duration::ZERO), "the old expiry is gone");
        t.disarm().unwrap();
        assert!(!wait_readable(&t, Duration::ZERO));
    }
}
