//! Calibrated CPU work: a dependent xorshift chain the optimiser cannot fold.
//!
//! The work-bearing workloads give every task about [`TARGET_WORK_NS`] of CPU
//! time. [`calibration`] measures, once per process, how many iterations of
//! [`spin_work`] take that long on this machine, and every peer (and the
//! sequential baseline) then runs the same iteration count, so the work per
//! task is identical across peers even if the machine is slower or faster than
//! the calibration moment suggested.

use std::hint::black_box;
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

/// The CPU time each work-bearing task should take.
pub const TARGET_WORK_NS: f64 = 500.0;

/// Iterations timed per calibration run.
const CALIBRATION_ITERS: u32 = 2_000_000;

/// Calibration runs; the fastest one counts (the others lost the CPU to a
/// neighbour or a frequency change).
const CALIBRATION_RUNS: usize = 7;

/// Runs `iters` steps of a xorshift64 chain seeded with `seed` and returns the
/// final state. Each step depends on the previous one, so the loop cannot be
/// vectorised or shortened; `black_box` on the count keeps the compiler from
/// specialising for a known count, and callers `black_box` the result.
#[inline(never)]
pub fn spin_work(iters: u32, seed: u64) -> u64 {
    let mut x = seed | 1;
    for _ in 0..black_box(iters) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

/// What the calibration measured.
#[derive(Clone, Copy, Debug)]
pub struct Calibration {
    /// Nanoseconds per iteration of [`spin_work`] (fastest run).
    pub ns_per_iter: f64,
    /// Iterations that take [`TARGET_WORK_NS`].
    pub iters_per_task: u32,
    /// The fastest run's duration for [`CALIBRATION_ITERS`] iterations.
    pub best_run: Duration,
}

impl Calibration {
    /// One line for logs and reports.
    pub fn describe(&self) -> String {
        format!(
            "work calibration: {:.3} ns/iter (best of {} runs of {} iters, {:.2} ms), \
             {} iters per task = {:.0} ns target",
            self.ns_per_iter,
            CALIBRATION_RUNS,
            CALIBRATION_ITERS,
            self.best_run.as_secs_f64() * 1e3,
            self.iters_per_task,
            TARGET_WORK_NS
        )
    }
}

fn measure() -> Calibration {
    // One untimed run to fault in the code and settle the frequency governor.
    black_box(spin_work(CALIBRATION_ITERS, 0x1234));
    let best_run = (0..CALIBRATION_RUNS)
        .map(|i| {
            let t0 = Instant::now();
            black_box(spin_work(CALIBRATION_ITERS, i as u64 + 7));
            t0.elapsed()
        })
        .min()
        .expect("CALIBRATION_RUNS > 0");
    let ns_per_iter = best_run.as_nanos() as f64 / f64::from(CALIBRATION_ITERS);
    let iters_per_task = (TARGET_WORK_NS / ns_per_iter).round().max(1.0) as u32;
    Calibration {
        ns_per_iter,
        iters_per_task,
        best_run,
    }
}

/// The process-wide calibration, measured on first use and printed to stderr
/// once.
pub fn calibration() -> Calibration {
    static CAL: OnceLock<Calibration> = OnceLock::new();
    *CAL.get_or_init(|| {
        let cal = measure();
        eprintln!("{}", cal.describe());
        cal
    })
}

/// Calibration runs one spot check spans: about 30 ms, longer than a
/// scheduler time slice, so a busy machine shows in it (one 4 ms run
/// usually fits in a single slice and reads full speed even at a load of
/// 10 on 2 cores).
const SPOT_RUNS: u32 = 8;

/// [`SPOT_RUNS`] back-to-back runs of the calibration loop, timed: ns per
/// iteration right now. Compared with [`calibration`]'s idle figure it says
/// how much of a core this thread is getting at this moment (`benches/run`
/// takes one after every round).
pub fn spot_ns_per_iter() -> f64 {
    let t0 = Instant::now();
    for i in 0..SPOT_RUNS {
        black_box(spin_work(CALIBRATION_ITERS, 0x5bd1 + u64::from(i)));
    }
    t0.elapsed().as_nanos() as f64 / f64::from(CALIBRATION_ITERS * SPOT_RUNS)
}

/// The machine's ceiling for a 2-worker schedule of `tasks` calls of
/// [`spin_work`]: the same calls with no scheduler, on one thread and then
/// split evenly over two threads started together. Returns the two wall
/// times; their ratio is the best speedup any 2-worker scheduler can show on
/// this machine at this moment. `pin` (a core index per thread) is called
/// first thing on each thread, so a caller can pin them; the one-thread run
/// also runs on a thread of its own so that pinning never narrows the
/// caller's CPU set (new threads inherit it).
pub fn ceiling_pair(tasks: u64, iters: u32, pin: impl Fn(usize) + Sync) -> (Duration, Duration) {
    let run = |first: u64, n: u64| {
        (first..first + n).fold(0, |acc, id| acc ^ black_box(spin_work(iters, id)))
    };
    let one = thread::scope(|s| {
        s.spawn(|| {
            pin(0);
            let t = Instant::now();
            black_box(run(0, tasks));
            t.elapsed()
        })
        .join()
        .expect("ceiling thread panicked")
    });
    let half = tasks / 2;
    let t = Instant::now();
    thread::scope(|s| {
        let first = s.spawn(|| {
            pin(0);
            run(0, half)
        });
        let second = s.spawn(|| {
            pin(1);
            run(half, tasks - half)
        });
        black_box(first.join().expect("ceiling thread panicked"));
        black_box(second.join().expect("ceiling thread panicked"));
    });
    (one, t.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_work_depends_on_seed_and_count() {
        assert_ne!(spin_work(100, 1), spin_work(100, 2));
        assert_ne!(spin_work(100, 1), spin_work(101, 1));
        assert_eq!(spin_work(100, 1), spin_work(100, 1));
    }

    #[test]
    fn ceiling_pair_runs_one_thread_then_two() {
        let pinned = std::sync::Mutex::new(vec![]);
        let (one, two) = ceiling_pair(64, 10, |core| pinned.lock().unwrap().push(core));
        assert!(one > Duration::ZERO && two > Duration::ZERO);
        let mut cores = pinned.into_inner().unwrap();
        cores.sort_unstable();
        assert_eq!(cores, [0, 0, 1], "one thread, then two");
    }

    #[test]
    fn calibration_yields_a_positive_iteration_count() {
        let cal = calibration();
        assert!(cal.iters_per_task >= 1);
        assert!(cal.ns_per_iter > 0.0);
    }
}
