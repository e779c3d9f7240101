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

/// The CPU numbers the calling thread may run on now, ascending.
///
/// # Errors
/// The kernel's error if `sched_getaffinity` fails; `Unsupported` off Linux.
#[cfg(target_os = "linux")]
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    let size = core::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `cpu_set_t` is a plain array of integers; all zeros is the
    // empty set.
    let mut allowed: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; the kernel writes at most `size`
    // bytes into `allowed`, which is that large and exclusively borrowed.
    if unsafe { libc::sched_getaffinity(0, size, &mut allowed) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((0..8 * size)
        // SAFETY: `c < 8 * size` is in bounds of the set.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &allowed) })
        .collect())
}

/// Off Linux the allowed CPUs are not known.
#[cfg(not(target_os = "linux"))]
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "CPU affinity is only supported on Linux",
    ))
}

/// Restricts the calling thread to the CPUs numbered in `cpus` (CPU
/// numbers as `taskset` and `/proc/cpuinfo` count them, not indices into
/// the allowed set as [`pin_current_thread`] takes), with
/// `sched_setaffinity`. Every one of them must be among the CPUs the thread
/// may use now ([`allowed_cpus`]), so the mask is applied exactly as asked
/// or not at all.
///
/// # Errors
/// `InvalidInput` if `cpus` is empty or names a CPU the thread may not use
/// (the message lists the allowed ones); the kernel's error if a syscall
/// fails.
#[cfg(target_os = "linux")]
pub fn pin_current_thread_to_cpus(cpus: &[usize]) -> io::Result<()> {
    let allowed = allowed_cpus()?;
    if cpus.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "pin_current_thread_to_cpus: no CPU given",
        ));
    }
    if let Some(bad) = cpus.iter().find(|&&c| allowed.binary_search(&c).is_err()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU {bad} is not among the CPUs this thread may use ({allowed:?})"),
        ));
    }
    let size = core::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: as above, an all-zero `cpu_set_t` is the empty set.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    for &cpu in cpus {
        // SAFETY: `cpu` is one of `allowed_cpus`, all below `8 * size`: in
        // bounds of the set.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: pid 0 is the calling thread; the kernel reads `size` bytes from
    // `set`, which is that large and lives across the call.
    if unsafe { libc::sched_setaffinity(0, size, &set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Off Linux a thread cannot be restricted to CPUs: `Unsupported`.
#[cfg(not(target_os = "linux"))]
pub fn pin_current_thread_to_cpus(_cpus: &[usize]) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "CPU affinity is only supported on Linux",
    ))
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

    #[cfg(target_os = "linux")]
    #[test]
    fn a_thread_restricted_to_cpus_is_allowed_exactly_those() {
        let (asked, after) = std::thread::spawn(|| {
            let allowed = super::allowed_cpus().unwrap();
            let asked = vec![*allowed.last().unwrap()];
            super::pin_current_thread_to_cpus(&asked).unwrap();
            (asked, super::allowed_cpus().unwrap())
        })
        .join()
        .unwrap();
        assert_eq!(asked, after);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_cpu_outside_the_allowed_set_is_refused_and_changes_nothing() {
        let (err, before, after) = std::thread::spawn(|| {
            let before = super::allowed_cpus().unwrap();
            let err = super::pin_current_thread_to_cpus(&[before[0], 1 << 20]).unwrap_err();
            (err, before, super::allowed_cpus().unwrap())
        })
        .join()
        .unwrap();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("1048576"), "{err}");
        assert_eq!(before, after);
    }
}
