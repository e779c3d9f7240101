//! Process CPU time and peak memory, read from `/proc` (Linux only) with no
//! `libc` call, since this crate forbids `unsafe`.

use std::fs;
use std::io;
use std::time::Duration;

/// Clock ticks per second of `/proc/*/stat` times. Linux fixes `USER_HZ` at
/// 100 on every architecture it exposes to user space; reading it properly
/// needs `sysconf(_SC_CLK_TCK)`, which is `unsafe` to call.
pub const USER_HZ: u64 = 100;

fn bad(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

/// `utime + stime` of this process from `/proc/self/stat` (all threads,
/// living and exited), at [`USER_HZ`] resolution (10 ms).
pub fn cpu_time_stat() -> io::Result<Duration> {
    parse_stat_cpu(&fs::read_to_string("/proc/self/stat")?)
}

/// Parses `utime` and `stime` (fields 14 and 15) out of a `stat` line. The
/// command name (field 2) sits in parentheses and may contain spaces, so
/// fields are counted from the last `)`.
pub fn parse_stat_cpu(stat: &str) -> io::Result<Duration> {
    let after = stat
        .rfind(')')
        .map(|i| &stat[i + 1..])
        .ok_or_else(|| bad("no ')' in stat"))?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // `after` starts at field 3 (state); field n is at index n - 3.
    let tick = |n: usize| -> io::Result<u64> {
        fields
            .get(n - 3)
            .ok_or_else(|| bad("stat too short"))?
            .parse()
            .map_err(|_| bad("stat field not a number"))
    };
    let ticks = tick(14)? + tick(15)?;
    Ok(Duration::from_nanos(ticks * (1_000_000_000 / USER_HZ)))
}

/// Time on CPU of this process's living threads, summed from
/// `/proc/self/task/*/schedstat` (nanosecond resolution). Threads that have
/// exited are not included.
pub fn cpu_time_schedstat() -> io::Result<Duration> {
    let mut total = 0u64;
    for entry in fs::read_dir("/proc/self/task")? {
        let path = entry?.path().join("schedstat");
        // A thread may exit between listing and reading.
        let Ok(s) = fs::read_to_string(path) else {
            continue;
        };
        total += parse_schedstat(&s)?;
    }
    Ok(Duration::from_nanos(total))
}

/// The first field of a `schedstat` line: nanoseconds on CPU.
pub fn parse_schedstat(s: &str) -> io::Result<u64> {
    s.split_whitespace()
        .next()
        .ok_or_else(|| bad("empty schedstat"))?
        .parse()
        .map_err(|_| bad("schedstat field not a number"))
}

/// Peak resident set size (`VmHWM`) in KiB, from `/proc/self/status`.
pub fn vm_hwm_kib() -> io::Result<u64> {
    parse_status_kib(&fs::read_to_string("/proc/self/status")?, "VmHWM:")
}

/// The value of a `Key:   1234 kB` line of `/proc/*/status`.
pub fn parse_status_kib(status: &str, key: &str) -> io::Result<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next())
        .ok_or_else(|| bad("key missing from status"))?
        .parse()
        .map_err(|_| bad("status value not a number"))
}

/// The first three fields of `/proc/loadavg` (1, 5 and 15 minute load), or
/// `"?"` where it cannot be read.
pub fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_cpu_is_counted_after_a_command_with_spaces() {
        let line = "42 (my (odd) cmd) S 1 2 3 4 5 6 7 8 9 10 250 17 0 0 20 0 3 0";
        // utime 250 + stime 17 ticks
        assert_eq!(parse_stat_cpu(line).unwrap(), Duration::from_millis(2670));
        assert!(parse_stat_cpu("42 (x) S 1").is_err());
    }

    #[test]
    fn schedstat_first_field_is_nanoseconds() {
        assert_eq!(parse_schedstat("123456 789 10\n").unwrap(), 123_456);
        assert!(parse_schedstat("").is_err());
    }

    #[test]
    fn status_value_is_read_by_key() {
        let s = "Name:\tx\nVmPeak:\t  9999 kB\nVmHWM:\t   1234 kB\nVmRSS:\t 1000 kB\n";
        assert_eq!(parse_status_kib(s, "VmHWM:").unwrap(), 1234);
        assert!(parse_status_kib(s, "VmSwap:").is_err());
    }

    #[test]
    #[cfg_attr(miri, ignore)] // Miri cannot read /proc
    fn this_process_reports_cpu_time_and_peak_rss() {
        // Burn a little CPU so the schedstat counter is non-zero.
        std::hint::black_box(crate::work::spin_work(1_000_000, 3));
        assert!(cpu_time_schedstat().unwrap() > Duration::ZERO);
        cpu_time_stat().unwrap();
        assert!(vm_hwm_kib().unwrap() > 0);
    }
}
