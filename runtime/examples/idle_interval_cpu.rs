//! CPU cost of a runtime whose only work is one 1 ms interval: magpie against
//! tokio in the same process, alternating rounds.
//!
//! ```text
//! cargo run --release -p magpie-runtime --example idle_interval_cpu -- [ROUNDS] [WORKERS]
//! ```
//!
//! Each round builds the runtime, spawns one task that awaits a 1 ms interval
//! (missed ticks skipped on both: magpie's default `DropTick`, tokio's
//! `Skip`), lets it settle for 200 ms, then measures the process's CPU time
//! (user + system, every thread, from `/proc/self/task/*/schedstat` in ns, or
//! `/proc/self/stat` in clock ticks where schedstat is missing) over a 1 s
//! window of wall time, and the ticks delivered in it. The main thread sleeps
//! outside both runtimes meanwhile. Prints each round, then the median and
//! the spread (min-max) of CPU ms per second for each runtime, with the core
//! count and load average: on a shared machine the numbers are a first look,
//! never a result.

use magpie_core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const SETTLE: Duration = Duration::from_millis(200);
const WINDOW: Duration = Duration::from_secs(1);
const PERIOD: Duration = Duration::from_millis(1);

/// CPU time of every live thread of this process, by thread id.
fn thread_cpu() -> Option<HashMap<u64, Duration>> {
    let mut out = HashMap::new();
    for entry in std::fs::read_dir("/proc/self/task").ok()? {
        let entry = entry.ok()?;
        let tid: u64 = entry.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(entry.path().join("schedstat")).ok()?;
        let ns: u64 = stat.split_whitespace().next()?.parse().ok()?;
        out.insert(tid, Duration::from_nanos(ns));
    }
    Some(out)
}

/// Process CPU time from `/proc/self/stat` (utime + stime, 100 Hz ticks).
fn process_cpu_coarse() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15; after ')' they are at 11 and 12.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// CPU used by the process during `window` of sleeping on this thread.
fn cpu_over(window: Duration) -> Duration {
    if let Some(before) = thread_cpu() {
        std::thread::sleep(window);
        if let Some(after) = thread_cpu() {
            return after
                .iter()
                .map(|(tid, t)| t.saturating_sub(before.get(tid).copied().unwrap_or_default()))
                .sum();
        }
    }
    let before = process_cpu_coarse();
    std::thread::sleep(window);
    process_cpu_coarse().saturating_sub(before)
}

struct Round {
    cpu_ms_per_s: f64,
    ticks: u64,
    /// Ticks per second of the window.
    ticks_per_s: f64,
}

/// A runtime's CPU figure counts only if it delivered at least this share of
/// the ideal 1 000 ticks per second: an interval that drops ticks is cheap
/// for the wrong reason (docs/benchmarks.md, "Idle CPU with one 1 ms
/// interval").
const MIN_TICK_SHARE: f64 = 0.95;

fn measure(ticks: &AtomicU64) -> Round {
    std::thread::sleep(SETTLE);
    let t0 = ticks.load(Ordering::Relaxed);
    let start = Instant::now();
    let cpu = cpu_over(WINDOW);
    let wall = start.elapsed();
    let n = ticks.load(Ordering::Relaxed) - t0;
    Round {
        cpu_ms_per_s: cpu.as_secs_f64() * 1000.0 / wall.as_secs_f64(),
        ticks: n,
        ticks_per_s: n as f64 / wall.as_secs_f64(),
    }
}

/// Builds nothing itself: `spawn` starts the ticking task on `rt` with the
/// tick counter and the stop flag; then settle, measure, stop, drop.
fn run_round<R>(rt: R, spawn: impl FnOnce(&R, Arc<AtomicU64>, Arc<AtomicBool>)) -> Round {
    let ticks = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    spawn(&rt, ticks.clone(), stop.clone());
    let round = measure(&ticks);
    stop.store(true, Ordering::Relaxed);
    drop(rt);
    round
}

fn magpie_round(workers: usize) -> Round {
    let rt = magpie_runtime::Runtime::builder()
        .worker_threads(workers)
        .build()
        .expect("magpie runtime");
    let handle = rt.handle().clone();
    let before = handle.metrics();
    let round = run_round(rt, |rt, ticks, stop| {
        drop(rt.spawn(async move {
            let mut iv = magpie_runtime::time::interval(PERIOD);
            while !stop.load(Ordering::Relaxed) {
                iv.tick().await;
                ticks.fetch_add(1, Ordering::Relaxed);
            }
        }));
    });
    if std::env::var_os("IIC_METRICS").is_some() {
        let after = handle.metrics();
        println!(
            "    magpie: {} parks, {} polls over the round (settle, window, shutdown)",
            after.parks - before.parks,
            after.polls - before.polls
        );
    }
    round
}

fn tokio_round(workers: usize) -> Round {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_time()
        .build()
        .expect("tokio runtime");
    run_round(rt, |rt, ticks, stop| {
        drop(rt.spawn(async move {
            let mut iv = tokio::time::interval(PERIOD);
            iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            while !stop.load(Ordering::Relaxed) {
                iv.tick().await;
                ticks.fetch_add(1, Ordering::Relaxed);
            }
        }));
    })
}

fn median_and_spread(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    let mid = v.len() / 2;
    let median = if v.len() % 2 == 0 {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    };
    (median, v[0], v[v.len() - 1])
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let workers: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "idle_interval_cpu: one 1 ms interval, {workers} workers, {rounds} rounds, \
         {cores} cores, load average {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let (mut magpie, mut tokio) = (Vec::new(), Vec::new());
    let (mut magpie_tps, mut tokio_tps) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        // Alternate which runtime goes first.
        let order: [&str; 2] = if r % 2 == 0 {
            ["magpie", "tokio"]
        } else {
            ["tokio", "magpie"]
        };
        for name in order {
            let round = if name == "magpie" {
                magpie_round(workers)
            } else {
                tokio_round(workers)
            };
            println!(
                "round {r} {name:>6}: {:7.1} ms CPU per s, {} ticks in the window",
                round.cpu_ms_per_s, round.ticks
            );
            if name == "magpie" {
                magpie.push(round.cpu_ms_per_s);
                magpie_tps.push(round.ticks_per_s);
            } else {
                tokio.push(round.cpu_ms_per_s);
                tokio_tps.push(round.ticks_per_s);
            }
        }
    }
    let ideal = 1.0 / PERIOD.as_secs_f64();
    for (name, v, tps) in [("magpie", magpie, magpie_tps), ("tokio", tokio, tokio_tps)] {
        let (median, lo, hi) = median_and_spread(v);
        let (t_median, t_lo, t_hi) = median_and_spread(tps);
        let verdict = if t_lo >= MIN_TICK_SHARE * ideal {
            "valid"
        } else {
            "INVALID: ticks lost, the CPU figure is not comparable"
        };
        println!(
            "{name:>6}: median {median:.1} ms CPU per s (min {lo:.1}, max {hi:.1}); \
             ticks per s median {t_median:.0} (min {t_lo:.0}, max {t_hi:.0}) of {ideal:.0}; {verdict}"
        );
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "load average at the end: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
}
