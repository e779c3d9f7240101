//! The Linux backend: a real futex on the state word.
//!
//! Untimed waits and wakes go through `atomic-wait`. It has no timeout, so
//! [`Futex::wait_timeout`] makes the `FUTEX_WAIT` syscall itself with a
//! relative `timespec` (the kernel measures it on `CLOCK_MONOTONIC`).

use std::time::Duration;

use super::Sleep;
use crate::sync::atomic::AtomicU32;

/// A futex needs no state of its own: the kernel keys its wait queue on the
/// address of the word.
#[derive(Debug, Default)]
pub(crate) struct Futex;

impl Sleep for Futex {
    #[inline]
    fn wait(&self, state: &AtomicU32, expected: u32) {
        atomic_wait::wait(state.as_std(), expected);
    }

    fn wait_timeout(&self, state: &AtomicU32, expected: u32, timeout: Duration) -> bool {
        let ts = libc::timespec {
            // A timeout past `time_t::MAX` seconds is as good as forever.
            tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
            // Below 1e9, so it fits every `c_long`, 32-bit ones included.
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: FUTEX_WAIT reads the u32 at the first argument and the
        // timespec at the fourth; both are live borrows for the whole call
        // (`state` is borrowed from the parker's `Arc`, `ts` is on this stack).
        // The word is an `AtomicU32`, so the kernel's read races with nothing
        // the Rust memory model forbids. The last two arguments are ignored by
        // FUTEX_WAIT. The call has no effect on Rust-visible memory.
        let r = unsafe {
            libc::syscall(
                libc::SYS_futex,
                state.as_std() as *const _,
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                expected,
                &ts as *const libc::timespec,
                core::ptr::null::<u32>(),
                0u32,
            )
        };
        // -1 with ETIMEDOUT: the deadline passed. EAGAIN (the word had already
        // changed), EINTR (a signal) and 0 (woken) are all "look again".
        r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ETIMEDOUT)
    }

    #[inline]
    fn wake_one(&self, state: &AtomicU32) {
        atomic_wait::wake_one(state.as_std());
    }
}
