//! Where each design's cost per task comes from: the empty spawn tree
//! (depth 20 by default, 2 097 151 tasks) on 1 worker and on 2 workers, for
//! magpie's typed executor, the strong crossbeam-deque peer (`cb_strong`),
//! the seed-000 crossbeam design (`cb_seed000`, one shared in-flight counter
//! per task) and `rayon::join`, with the sequential loop (the same tasks on a
//! `Vec` stack) as the floor of the workload itself.
//!
//! - 1 worker: the scheduler's own per-task work with no contention (its
//!   deque push and pop, its counting, its wake checks). Minus `seq`, it is
//!   the overhead a design adds on one core.
//! - 2 workers: what sharing adds. A design with a shared line per task gets
//!   slower per task than on 1 worker; one without gets faster.
//!
//! Every round runs every (peer, workers) pair once, the peers in
//! `report::round_order`'s balanced order and the two worker counts in
//! alternating order, and checks each run's checksum. The table gives the
//! median ns/task with min and quartiles over the rounds; the last lines give
//! per-round ratios magpie / peer at each worker count. Also printed, as a
//! yardstick: one LIFO crossbeam `Worker` push+pop pair on one thread.
//!
//! `cargo run --release -p magpie-benches --example per_task_cost`
//! (env `DEPTH`, default 20; `ROUNDS`, default 16, rounded up to whole
//! balanced designs of five).

use std::hint::black_box;
use std::time::{Duration, Instant};

use magpie_benches::proc_stats::loadavg;
use magpie_benches::report::{balanced_rounds_at_least, round_order, Spread};
use magpie_benches::typed::{
    time_sequential, time_tree, BinaryTree, CbSeed000Pool, CbStrongPool, MagpiePool, RayonPeer,
};

const PEERS: [&str; 5] = ["seq", "magpie", "cb_strong", "cb_seed000", "rayon_join"];
const WORKER_COUNTS: [usize; 2] = [1, 2];

/// ns per push+pop pair on a LIFO crossbeam `Worker`, two pushes then two
/// pops as a tree node does; the median of 11 runs of 2^20 pairs.
fn crossbeam_lifo_pair_ns() -> f64 {
    let w = crossbeam_deque::Worker::new_lifo();
    const PAIRS: u64 = 1 << 20;
    let mut runs: Vec<f64> = (0..11)
        .map(|_| {
            let t0 = Instant::now();
            for i in 0..PAIRS / 2 {
                w.push(black_box(i));
                w.push(black_box(i + 1));
                black_box(w.pop());
                black_box(w.pop());
            }
            t0.elapsed().as_secs_f64() * 1e9 / PAIRS as f64
        })
        .collect();
    runs.sort_by(f64::total_cmp);
    runs[runs.len() / 2]
}

fn main() {
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(d)
    };
    let depth = env("DEPTH", 20) as u32;
    let rounds = balanced_rounds_at_least(PEERS.len(), env("ROUNDS", 16));
    let tree = BinaryTree {
        depth,
        work_iters: 0,
    };
    let roots = [BinaryTree::ROOT];
    let expected = tree.expected();
    let tasks = expected.count as f64;
    let rayon: Vec<RayonPeer> = WORKER_COUNTS.iter().map(|&n| RayonPeer::new(n)).collect();
    println!(
        "empty spawn tree, depth {depth} ({} tasks), {rounds} rounds; load average before: {}",
        expected.count,
        loadavg()
    );

    let one = |peer: usize, wi: usize| -> Duration {
        let workers = WORKER_COUNTS[wi];
        let (t, tally) = match PEERS[peer] {
            "seq" => time_sequential(&tree, &roots),
            "magpie" => time_tree::<MagpiePool<BinaryTree>, _>(workers, &tree, &roots),
            "cb_strong" => time_tree::<CbStrongPool<BinaryTree>, _>(workers, &tree, &roots),
            "cb_seed000" => time_tree::<CbSeed000Pool<BinaryTree>, _>(workers, &tree, &roots),
            _ => rayon[wi].join_tree(&tree, &roots),
        };
        assert_eq!(tally, expected, "{} on {workers} workers", PEERS[peer]);
        t
    };
    // Warm-up: every pair once, untimed.
    for wi in 0..WORKER_COUNTS.len() {
        for p in 0..PEERS.len() {
            one(p, wi);
        }
    }
    // ns[peer][workers index] = one entry per round.
    let mut ns = vec![vec![Vec::with_capacity(rounds); WORKER_COUNTS.len()]; PEERS.len()];
    for round in 0..rounds {
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for wi in order {
            for p in round_order(PEERS.len(), round) {
                // `seq` ignores the worker count; it runs in both halves so
                // each half is a whole balanced row.
                let t = one(p, wi);
                ns[p][wi].push(t.as_secs_f64() * 1e9 / tasks);
            }
        }
    }

    println!(
        "\n{:<11} {:>8} {:>30} {:>8} {:>30} {:>8}",
        "ns/task", "1 worker", "(min, q1-q3)", "2 workers", "(min, q1-q3)", "2w / 1w"
    );
    for (p, name) in PEERS.iter().enumerate() {
        let s1 = Spread::of(&ns[p][0]).expect("rounds > 0");
        let s2 = Spread::of(&ns[p][1]).expect("rounds > 0");
        println!(
            "{name:<11} {:>8.2} {:>30} {:>9.2} {:>30} {:>8.3}",
            s1.median,
            format!("({:.2}, {:.2}-{:.2})", s1.min, s1.q1, s1.q3),
            s2.median,
            format!("({:.2}, {:.2}-{:.2})", s2.min, s2.q1, s2.q3),
            s2.median / s1.median
        );
    }
    let magpie = 1;
    for (wi, workers) in WORKER_COUNTS.iter().enumerate() {
        for p in 2..PEERS.len() {
            let r: Vec<f64> = ns[magpie][wi]
                .iter()
                .zip(&ns[p][wi])
                .map(|(m, o)| m / o)
                .collect();
            let s = Spread::of(&r).expect("rounds > 0");
            println!("{workers} worker(s): magpie / {} {s}", PEERS[p]);
        }
    }
    println!(
        "yardstick: crossbeam LIFO Worker push+pop, one thread: {:.2} ns/pair",
        crossbeam_lifo_pair_ns()
    );
    println!("load average after: {}", loadavg());
}
