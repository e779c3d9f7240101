//! The floor under a push+pop pair: what one locked read-modify-write costs
//! on this machine, back to back on one thread, against magpie's and
//! crossbeam-deque's FIFO push+pop pairs in the same run.
//!
//! A FIFO pop shares its end with the stealers, so it must claim its slot
//! with an RMW (magpie: `fetch_add`, crossbeam: `fetch_add`); a pair cannot
//! cost less than one. Issue 2's target (0.8x crossbeam's pair) is checked
//! against this floor in docs/benchmarks.md.
//!
//! `cargo run --release -p magpie-benches --example rmw_floor`
//! (env `ROUNDS`, default 7; each round times 20 million of each).

use magpie_core::sync::atomic::{AtomicU64, Ordering};
use std::hint::black_box;
use std::time::Instant;

use crossbeam_deque::Worker;
use magpie_benches::report::median_of;
use magpie_core::queue::{self, Inject};

const N: u64 = 20_000_000;

#[inline(never)]
fn xadd_loop(a: &AtomicU64) {
    for _ in 0..N {
        black_box(a.fetch_add(1, Ordering::Acquire));
    }
}

#[inline(never)]
fn cas_loop(a: &AtomicU64) {
    let mut v = a.load(Ordering::Relaxed);
    for _ in 0..N {
        match a.compare_exchange(v, v + 1, Ordering::Acquire, Ordering::Acquire) {
            Ok(_) => v += 1,
            Err(live) => v = live,
        }
    }
    black_box(v);
}

#[inline(never)]
fn magpie_pairs(local: &mut queue::Local<u64>, inject: &Inject<u64>) {
    for i in 0..N {
        local.push_back_or_overflow(black_box(i), inject);
        black_box(local.pop());
    }
}

#[inline(never)]
fn crossbeam_pairs(fifo: &Worker<u64>) {
    for i in 0..N {
        fifo.push(black_box(i));
        black_box(fifo.pop());
    }
}

fn ns(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_nanos() as f64 / N as f64
}

/// The median of a run's samples (`report::median_of` on an owned copy).
fn median(mut v: Vec<f64>) -> f64 {
    median_of(&mut v).expect("at least one round")
}

fn main() {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    let a = AtomicU64::new(0);
    let inject = Inject::new();
    let (mut local, _steal) = queue::local::<u64>();
    let fifo = Worker::<u64>::new_fifo();
    let (mut x, mut c, mut m, mut cb) = (vec![], vec![], vec![], vec![]);
    println!("ns per op, {rounds} alternating rounds of {N}");
    println!(
        "{:>6} {:>10} {:>10} {:>12} {:>14}",
        "round", "lock xadd", "lock cas", "magpie pair", "crossbeam pair"
    );
    for round in 1..=rounds {
        x.push(ns(|| xadd_loop(&a)));
        c.push(ns(|| cas_loop(&a)));
        m.push(ns(|| magpie_pairs(&mut local, &inject)));
        cb.push(ns(|| crossbeam_pairs(&fifo)));
        let i = round - 1;
        println!(
            "{round:>6} {:>10.2} {:>10.2} {:>12.2} {:>14.2}",
            x[i], c[i], m[i], cb[i]
        );
    }
    let (x, c, m, cb) = (median(x), median(c), median(m), median(cb));
    println!("median {x:>10.2} {c:>10.2} {m:>12.2} {cb:>14.2}");
    println!(
        "magpie/crossbeam {:.2}; target 0.8 x crossbeam = {:.2} ns, {:.2} ns above one lock xadd",
        m / cb,
        0.8 * cb,
        0.8 * cb - x
    );
}
