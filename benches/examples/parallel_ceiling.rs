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

use magpie_benches::report::median_of;
use magpie_benches::work::{calibration, ceiling_pair};

fn pin(core: usize) {
    if std::env::var_os("PIN").is_some() {
        magpie_core::affinity::pin_current_thread(core).expect("PIN: sched_setaffinity failed");
    }
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
        let (one_t, two_t) = ceiling_pair(tasks, iters, pin);
        let (a, b) = (one_t.as_secs_f64() * 1e3, two_t.as_secs_f64() * 1e3);
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
