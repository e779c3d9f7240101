//! The speedup ceiling of this machine for the typed bench's work-bearing
//! trees, with no scheduler at all: the same `spin_work` calls (500 ns each
//! after calibration) run on one thread, then split evenly over two threads
//! started together, alternating. The ratio of the two wall times is the
//! best speedup any 2-worker scheduler can show here; issue 3's target is
//! 1.9 (docs/benchmarks.md).
//!
//! `cargo run --release -p magpie-benches --example parallel_ceiling`
//! (env `ROUNDS`, default 11; `TASKS`, default 262 143, the depth-17 tree;
//! `PIN=1` pins the two threads to cores 0 and 1, and the one thread to 0).

use std::hint::black_box;
use std::thread;
use std::time::{Duration, Instant};

use magpie_benches::report::median_of;
use magpie_benches::work::{calibration, spin_work};

fn run(tasks: u64, iters: u32, first: u64) -> u64 {
    (first..first + tasks).fold(0, |acc, id| acc ^ black_box(spin_work(iters, id)))
}

fn pin(core: usize) {
    if std::env::var_os("PIN").is_some() {
        magpie_core::affinity::pin_current_thread(core).expect("PIN: sched_setaffinity failed");
    }
}

fn one_thread(tasks: u64, iters: u32) -> Duration {
    // On a thread of its own like the two below, so that pinning never
    // narrows the main thread's CPU set (new threads inherit it).
    thread::scope(|s| {
        s.spawn(|| {
            pin(0);
            let t = Instant::now();
            black_box(run(tasks, iters, 0));
            t.elapsed()
        })
        .join()
        .unwrap()
    })
}

fn two_threads(tasks: u64, iters: u32) -> Duration {
    let half = tasks / 2;
    let t = Instant::now();
    thread::scope(|s| {
        let first = s.spawn(|| {
            pin(0);
            run(half, iters, 0)
        });
        let second = s.spawn(|| {
            pin(1);
            run(tasks - half, iters, half)
        });
        black_box(first.join().unwrap());
        black_box(second.join().unwrap());
    });
    t.elapsed()
}

/// The median of a run's samples (`report::median_of` on an owned copy).
fn median(mut v: Vec<f64>) -> f64 {
    median_of(&mut v).expect("at least one round")
}

fn main() {
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(d)
    };
    let rounds = env("ROUNDS", 11) as usize;
    let tasks = env("TASKS", (1 << 18) - 1);
    let iters = calibration().iters_per_task;
    println!("{tasks} tasks of {iters} iterations (500 ns target), {rounds} alternating rounds");
    let (mut one, mut two, mut ratio) = (vec![], vec![], vec![]);
    for round in 1..=rounds {
        let a = one_thread(tasks, iters).as_secs_f64() * 1e3;
        let b = two_threads(tasks, iters).as_secs_f64() * 1e3;
        println!(
            "round {round:>2}: one thread {a:8.2} ms, two threads {b:8.2} ms, speedup {:.3}",
            a / b
        );
        one.push(a);
        two.push(b);
        ratio.push(a / b);
    }
    println!(
        "median: one {:.2} ms, two {:.2} ms, speedup (median of rounds) {:.3}",
        median(one),
        median(two),
        median(ratio)
    );
}
