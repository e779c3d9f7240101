//! Pinning a thread to a core.
//!
//! [`pin_current_thread`]`(i)` pins the calling thread to the `i`-th CPU it is
//! allowed to run on, not to CPU number `i`: in a container or under
//! `taskset` the allowed CPUs need not start at 0, and pinning worker `i` to
//! `i % available_cores()` must work there too. Off Linux it does nothing.

use std::io;

/// How many cores this process may use: `std::thread::available_parallelism`
/// (which honours the affinity mask and cgroup CPU quotas on Linux), or 1 if
/// that is unknown.
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Pins the calling thread to the `core`-th CPU (counting from 0) of those it
/// is currently allowed to run on, with `sched_setaffinity`.
///
/// A new thread inherits its spawner's mask, so call this first thing in a
/// freshly spawned worker. Once pinned, a thread is allowed one CPU, so a
/// second call can only name core 0.
///
/// # Errors
/// `InvalidInput` if `core` is not below the number of allowed CPUs; the
/// kernel's error if either syscall fails.
#[cfg(target_os = "linux")]
pub fn pin_current_thread(core: usize) -> io::Result<()> {
    let size = core::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `cpu_set_t` is a plain array of integers; all zeros is the
    // empty set.
    let mut allowed: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; the kernel writes at most `size`
    // bytes into `allowed`, which is that large and exclusively borrowed.
    if unsafe { libc::sched_getaffinity(0, size, &mut allowed) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let cpu = (0..8 * size)
        // SAFETY: `CPU_ISSET` reads bit `c` of the set; `c < 8 * size` is in
        // bounds (the libc function also checks and panics otherwise).
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &allowed) })
        .nth(core)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("pin_current_thread: core {core} is not below the allowed CPU count"),
            )
        })?;
    // SAFETY: as above, an all-zero `cpu_set_t` is the empty set.
    let mut only: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    // SAFETY: `cpu < 8 * size`, in bounds of the set.
    unsafe { libc::CPU_SET(cpu, &mut only) };
    // SAFETY: pid 0 is the calling thread; the kernel reads `size` bytes from
    // `only`, which is that large and lives across the call.
    if unsafe { libc::sched_setaffinity(0, size, &only) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Off Linux pinning is not supported; this does nothing and succeeds.
#[cfg(not(target_os = "linux"))]
pub fn pin_current_thread(_core: usize) -> io::Result<()> {
    Ok(())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{available_cores, pin_current_thread};

    #[test]
    fn available_cores_is_at_least_one() {
        assert!(available_cores() >= 1);
    }

    /// Runs in its own thread so the test harness's threads stay unpinned.
    #[test]
    fn pinning_to_core_zero_succeeds() {
        std::thread::spawn(|| pin_current_thread(0))
            .join()
            .unwrap()
            .unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_pinned_thread_is_allowed_exactly_one_cpu() {
        let allowed_after = std::thread::spawn(|| {
            pin_current_thread(0).unwrap();
            // Now one CPU is allowed: core 0 of it still pins, core 1 does not.
            pin_current_thread(0).unwrap();
            pin_current_thread(1).unwrap_err().kind()
        })
        .join()
        .unwrap();
        assert_eq!(allowed_after, std::io::ErrorKind::InvalidInput);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn core_past_the_allowed_set_is_invalid_input() {
        let err = std::thread::spawn(|| pin_current_thread(usize::MAX))
            .join()
            .unwrap()
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    }
}
