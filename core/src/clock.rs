//! Raw reads of the kernel's monotonic clocks, for the runtime's timeouts.
//!
//! `std::time::Instant::now()` reads `CLOCK_MONOTONIC` precisely (about 30 ns
//! on this project's VM, most of what a `timeout` around a ready future
//! costs). `CLOCK_MONOTONIC_COARSE` is the same clock as the kernel last
//! stored it at a timer tick: a few ns to read, never ahead of the precise
//! clock, behind it by less than two [`coarse_resolution`]s in normal
//! operation (the time since the last tick plus the remainder that tick left)
//! and by more while the kernel's timekeeping stalls (a VM exit; the kernel
//! forces an update after five stalled ticks). `runtime/src/time/README.md`,
//! "Timeouts", says how the runtime turns such a lower bound into a deadline
//! that is never early.
//!
//! Both are read with `clock_gettime`, which writes a `timespec` through a
//! pointer: the only `unsafe` here. Linux and Android only; elsewhere every
//! function returns `None` and the runtime reads `Instant::now()` instead.

use std::time::Duration;

/// `CLOCK_MONOTONIC_COARSE` now, in nanoseconds since the clock's (boot-time)
/// origin. Never later than what [`monotonic_ns`] returns after it.
#[inline]
pub fn coarse_ns() -> Option<u64> {
    read(CLOCK_COARSE)
}

/// `CLOCK_MONOTONIC` now, in nanoseconds: the clock under
/// `std::time::Instant` on Linux, read precisely.
#[inline]
pub fn monotonic_ns() -> Option<u64> {
    read(CLOCK_PRECISE)
}

/// The resolution of `CLOCK_MONOTONIC_COARSE` (`clock_getres`): the kernel's
/// tick, 4 ms at `HZ=250`.
pub fn coarse_resolution() -> Option<Duration> {
    imp::resolution()
}

#[cfg(any(target_os = "linux", target_os = "android"))]
const CLOCK_COARSE: libc::clockid_t = libc::CLOCK_MONOTONIC_COARSE;
#[cfg(any(target_os = "linux", target_os = "android"))]
const CLOCK_PRECISE: libc::clockid_t = libc::CLOCK_MONOTONIC;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const CLOCK_COARSE: i32 = 0;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const CLOCK_PRECISE: i32 = 0;

#[cfg(any(target_os = "linux", target_os = "android"))]
#[inline]
fn read(clock: libc::clockid_t) -> Option<u64> {
    imp::read(clock)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
#[inline]
fn read(_clock: i32) -> Option<u64> {
    None
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod imp {
    use std::time::Duration;

    fn to_ns(ts: &libc::timespec) -> Option<u64> {
        let secs = u64::try_from(ts.tv_sec).ok()?;
        let nanos = u64::try_from(ts.tv_nsec).ok()?;
        secs.checked_mul(1_000_000_000)?.checked_add(nanos)
    }

    #[inline]
    pub(super) fn read(clock: libc::clockid_t) -> Option<u64> {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `clock_gettime` writes one `timespec` through its second
        // argument, a live exclusive borrow of `ts` on this stack for the
        // whole call; it reads nothing else of ours. `clock` is one of the
        // two constant clock ids above, which every supported kernel has
        // (coarse since 2.6.32); on an error it returns -1 and we say `None`.
        let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
        if rc != 0 {
            return None;
        }
        to_ns(&ts)
    }

    pub(super) fn resolution() -> Option<Duration> {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: as in `read`: the kernel writes one `timespec` into `ts`,
        // exclusively borrowed for the call, and touches nothing else.
        let rc = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
        if rc != 0 {
            return None;
        }
        to_ns(&ts).filter(|&ns| ns > 0).map(Duration::from_nanos)
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod imp {
    pub(super) fn resolution() -> Option<std::time::Duration> {
        None
    }
}

#[cfg(all(test, not(loom), any(target_os = "linux", target_os = "android")))]
mod tests {
    use super::*;

    #[test]
    fn coarse_clock_is_never_ahead_of_the_precise_clock_read_after_it() {
        let rounds = if cfg!(miri) { 0 } else { 10_000 };
        for _ in 0..rounds {
            let coarse = coarse_ns().expect("CLOCK_MONOTONIC_COARSE");
            let precise = monotonic_ns().expect("CLOCK_MONOTONIC");
            assert!(coarse <= precise, "coarse {coarse} > precise {precise}");
        }
    }

    #[test]
    fn coarse_resolution_is_positive_and_coarse_reads_never_go_back() {
        if cfg!(miri) {
            return;
        }
        let res = coarse_resolution().expect("clock_getres");
        assert!(res > Duration::ZERO);
        let mut last = coarse_ns().unwrap();
        for _ in 0..1_000 {
            let now = coarse_ns().unwrap();
            assert!(now >= last);
            last = now;
        }
    }

    #[test]
    fn precise_clock_runs_with_std_instant() {
        if cfg!(miri) {
            return;
        }
        // Raw reads bracket each std read on one clock, so std's interval
        // lies between the inner and the outer raw intervals.
        let m1 = monotonic_ns().unwrap();
        let s1 = std::time::Instant::now();
        let m2 = monotonic_ns().unwrap();
        std::thread::sleep(Duration::from_millis(1));
        let m3 = monotonic_ns().unwrap();
        let s2 = std::time::Instant::now();
        let m4 = monotonic_ns().unwrap();
        let std_gap = u64::try_from(s2.duration_since(s1).as_nanos()).unwrap();
        assert!(std_gap <= m4 - m1, "std {std_gap} > outer {}", m4 - m1);
        assert!(std_gap >= m3 - m2, "std {std_gap} < inner {}", m3 - m2);
    }
}
