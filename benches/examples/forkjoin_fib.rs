//! A first look at magpie's fork-join against rayon, same run, alternating:
//!
//! - fib(N) with a sequential cutoff (default N = 30, cutoff 8) through
//!   `magpie_runtime::join::join` inside `JoinPool::install` and through
//!   `rayon::join` inside `ThreadPool::install`, both with W workers
//!   (default 2);
//! - the round trip of `install(|| join(|| 1, || 2))` from an outside thread.
//!
//! Each round runs both (the order flips every round) and records the ratio
//! magpie / rayon; the report gives the median time of each and the per-round
//! ratios' minimum, quartiles and maximum. Every result is checked.
//!
//! `cargo run --release -p magpie-benches --example forkjoin_fib -- [N] [CUTOFF] [ROUNDS] [WORKERS]`
//! (`FJ_TRIPS=0` skips the round trip, `FJ_TRIPS=n` sets its count per round)
//!
//! `FJ_WORKLOAD=NAME` runs one of rayon's workloads instead (`fib8`, `fib20`,
//! `quicksort`, `mergesort`, `nbody`; `magpie_benches::forkjoin::Workload`),
//! magpie against rayon in alternating rounds, with the arguments
//! `[ROUNDS] [WORKERS]`; `FJ_COUNTS=1` then also prints what magpie's workers
//! counted per run (steals, parks, unparks, latch waits and sleeps).

use std::hint::black_box;
use std::time::{Duration, Instant};

use magpie_benches::forkjoin::{MagpieJoin, RayonJoin, Workload};
use magpie_runtime::join::{join, JoinPool};

fn seq_fib(n: u64) -> u64 {
    if n < 2 {
        n
    } else {
        seq_fib(n - 1) + seq_fib(n - 2)
    }
}

fn magpie_fib(n: u64, cutoff: u64) -> u64 {
    if n <= cutoff {
        return seq_fib(n);
    }
    let (a, b) = join(|| magpie_fib(n - 1, cutoff), || magpie_fib(n - 2, cutoff));
    a + b
}

fn rayon_fib(n: u64, cutoff: u64) -> u64 {
    if n <= cutoff {
        return seq_fib(n);
    }
    let (a, b) = rayon::join(|| rayon_fib(n - 1, cutoff), || rayon_fib(n - 2, cutoff));
    a + b
}

/// Joins in fib(n) with the cutoff: one per node above it.
fn joins(n: u64, cutoff: u64) -> u64 {
    if n <= cutoff {
        0
    } else {
        1 + joins(n - 1, cutoff) + joins(n - 2, cutoff)
    }
}

fn quartiles(mut v: Vec<f64>) -> [f64; 5] {
    v.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    [at(0.0), at(0.25), at(0.5), at(0.75), at(1.0)]
}

fn median(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[v.len() / 2]
}

/// Runs `m` (magpie) and `r` (rayon) once per round, the order flipped
/// every round; returns their times and the per-round ratios m / r.
fn alternate(
    rounds: usize,
    mut m: impl FnMut() -> Duration,
    mut r: impl FnMut() -> Duration,
) -> (Vec<Duration>, Vec<Duration>, Vec<f64>) {
    let (mut tm, mut tr, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let (a, b) = if round % 2 == 0 {
            let a = m();
            (a, r())
        } else {
            let b = r();
            (m(), b)
        };
        tm.push(a);
        tr.push(b);
        ratios.push(a.as_secs_f64() / b.as_secs_f64());
    }
    (tm, tr, ratios)
}

/// The per-round ratios' line of every report.
fn print_ratios(ratios: Vec<f64>) {
    let [min, q1, med, q3, max] = quartiles(ratios);
    println!(
        "  magpie/rayon per round: min {min:.3}  q1 {q1:.3}  median {med:.3}  q3 {q3:.3}  max {max:.3}"
    );
}

/// `FJ_WORKLOAD`: one workload, magpie against rayon, alternating rounds;
/// with `FJ_COUNTS=1`, magpie's counters per run.
fn run_workload(w: Workload, rounds: usize, workers: usize) {
    let magpie = MagpieJoin::new(workers);
    let rayon = RayonJoin::new(workers);
    // Warm-up: threads started, pages touched.
    w.run(&magpie, w.input());
    w.run(&rayon, w.input());
    let (tm, tr, ratios) = alternate(
        rounds,
        || w.run(&magpie, w.input()),
        || w.run(&rayon, w.input()),
    );
    println!("{}, {workers} workers, {rounds} rounds", w.name());
    println!(
        "  magpie join : median {:>9.3} ms",
        median(&tm).as_secs_f64() * 1e3
    );
    println!(
        "  rayon::join : median {:>9.3} ms",
        median(&tr).as_secs_f64() * 1e3
    );
    print_ratios(ratios);
    if std::env::var("FJ_COUNTS").is_ok_and(|v| v == "1") {
        let runs = (rounds + 1) as f64;
        let m = magpie.shutdown();
        let (s, j) = (&m.sched.total, &m.join);
        let per = |x: u64| x as f64 / runs;
        println!(
            "  magpie per run ({runs} runs): steals {:.1} (attempts {:.1}), parks {:.1}, unparks {:.1}, \
             waits {:.1} (tasks meanwhile {:.1}, idle rounds {:.1}), latch sleeps {:.1} \
             (ended set {:.1}), hoard wakes {:.1}, full deque {:.1}",
            per(s.steal_successes),
            per(s.steal_attempts),
            per(s.parks),
            per(s.unparks),
            per(j.waits),
            per(j.wait_tasks),
            per(j.wait_idle_rounds),
            per(j.latch_sleeps),
            per(j.latch_sleeps_ended_set),
            per(j.hoard_wakes),
            per(j.deque_full),
        );
    }
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numbers only"))
        .collect();
    if let Ok(name) = std::env::var("FJ_WORKLOAD") {
        let w = Workload::from_name(&name).unwrap_or_else(|| {
            panic!("FJ_WORKLOAD: one of fib8, fib20, quicksort, mergesort, nbody")
        });
        let rounds = args.first().copied().unwrap_or(11) as usize;
        let workers = args.get(1).copied().unwrap_or(2) as usize;
        run_workload(w, rounds, workers);
        return;
    }
    let n = args.first().copied().unwrap_or(30);
    let cutoff = args.get(1).copied().unwrap_or(8);
    let rounds = args.get(2).copied().unwrap_or(21) as usize;
    let workers = args.get(3).copied().unwrap_or(2) as usize;

    let magpie = JoinPool::builder().workers(workers).build().unwrap();
    let rayon = rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build()
        .unwrap();
    let expect = seq_fib(n);
    let jn = joins(n, cutoff);

    // Warm-up: threads started, caches and page tables touched.
    for _ in 0..2 {
        assert_eq!(magpie.install(|| magpie_fib(n, cutoff)), expect);
        assert_eq!(rayon.install(|| rayon_fib(n, cutoff)), expect);
    }

    let run_m = || {
        let t = Instant::now();
        let r = magpie.install(|| magpie_fib(black_box(n), cutoff));
        let d = t.elapsed();
        assert_eq!(r, expect);
        d
    };
    let run_r = || {
        let t = Instant::now();
        let r = rayon.install(|| rayon_fib(black_box(n), cutoff));
        let d = t.elapsed();
        assert_eq!(r, expect);
        d
    };
    let (tm, tr, ratios) = alternate(rounds, run_m, run_r);
    let (mm, mr) = (median(&tm), median(&tr));
    println!("fib({n}) cutoff {cutoff}, {workers} workers, {rounds} rounds, {jn} joins per run");
    println!(
        "  magpie join : median {:>9.3} ms  {:>6.2} ns/join",
        mm.as_secs_f64() * 1e3,
        mm.as_nanos() as f64 / jn as f64
    );
    println!(
        "  rayon::join : median {:>9.3} ms  {:>6.2} ns/join",
        mr.as_secs_f64() * 1e3,
        mr.as_nanos() as f64 / jn as f64
    );
    print_ratios(ratios);

    // Outside round trip: install + a trivial join, from this thread.
    // `FJ_TRIPS=0` skips it (for profiling the fib part alone).
    let trips: u32 = std::env::var("FJ_TRIPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    if trips == 0 {
        return;
    }
    let trip_m = || {
        let t = Instant::now();
        for _ in 0..trips {
            let (a, b) = magpie.install(|| join(|| black_box(1), || black_box(2)));
            assert_eq!(a + b, 3);
        }
        t.elapsed() / trips
    };
    let trip_r = || {
        let t = Instant::now();
        for _ in 0..trips {
            let (a, b) = rayon.install(|| rayon::join(|| black_box(1), || black_box(2)));
            assert_eq!(a + b, 3);
        }
        t.elapsed() / trips
    };
    let (lm, lr, lratios) = alternate(rounds, trip_m, trip_r);
    println!("outside install + join round trip, {trips} per round");
    println!(
        "  magpie : median {:>8.2} us",
        median(&lm).as_secs_f64() * 1e6
    );
    println!(
        "  rayon  : median {:>8.2} us",
        median(&lr).as_secs_f64() * 1e6
    );
    print_ratios(lratios);
}
