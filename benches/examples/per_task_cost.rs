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
//! balanced designs of the peers run; `PEERS=magpie,cb_strong` runs only
//! those; `WORKERS=1` only that worker count). With one peer and one round,
//! `valgrind --tool=cachegrind` on two depths gives instructions per task,
//! a count the machine's load does not move (docs/parts/bench-strong-peer.md).
//! Note that one peer still runs `balanced_rounds_at_least(1, 1)` = 2
//! rounds: divide a count by 2 x the tasks.
//!
//! `METRICS=1` instead runs the tree `ROUNDS` times on each worker count
//! with magpie's executor and `cb_strong` and prints their scheduler
//! counters per tree (steals, parks, wakes, shares): where the second
//! worker's cost comes from, in numbers the load moves less than time.

use std::hint::black_box;
use std::time::{Duration, Instant};

use magpie_benches::proc_stats::{cpu_time_stat, loadavg};
use magpie_benches::report::{balanced_rounds_at_least, round_order, Spread};
use magpie_benches::typed::{
    time_sequential, time_tree, BinaryTree, CbSeed000Pool, CbStrongPool, MagpiePool, RayonPeer,
};

const ALL_PEERS: [&str; 5] = ["seq", "magpie", "cb_strong", "cb_seed000", "rayon_join"];
const ALL_WORKER_COUNTS: [usize; 2] = [1, 2];

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

/// `METRICS=1`: the scheduler counters of magpie's executor and of
/// `cb_strong` on the empty tree, averaged over `rounds` trees.
fn print_metrics(depth: u32, rounds: usize, worker_counts: &[usize]) {
    use magpie_benches::cb_strong::{CbStrongConfig, CbStrongCtx, CbStrongExecutor};
    use magpie_runtime::{Executor, ExecutorConfig, WorkerCtx};
    let spawns = move |id: u64| 63 - id.leading_zeros() < depth;
    for &workers in worker_counts {
        let (mut steals, mut stolen, mut parks, mut unparks, mut shares, mut hoard) =
            (0, 0, 0, 0, 0, 0);
        let (mut attempts, mut requests, mut global) = (0, 0, 0);
        for _ in 0..rounds {
            let ex = Executor::new(
                ExecutorConfig {
                    workers,
                    pin_threads: false,
                    ..ExecutorConfig::default()
                },
                |_| (),
                move |id: u64, ctx: &mut WorkerCtx<u64, ()>| {
                    if spawns(id) {
                        ctx.spawn_local(2 * id);
                        ctx.spawn_local(2 * id + 1);
                    }
                },
            );
            assert!(ex.spawn_external(1).is_ok());
            let m = ex.join().total;
            assert_eq!(m.tasks_run(), (1u64 << (depth + 1)) - 1);
            steals += m.steal_successes;
            stolen += m.tasks_stolen;
            attempts += m.steal_attempts;
            parks += m.parks;
            unparks += m.unparks;
            shares += m.shares;
            requests += m.share_requests;
            hoard += m.wake_on_hoard;
            global += m.tasks_global;
        }
        let r = rounds as f64;
        println!(
            "magpie    {workers} w, per tree: steals {:.1} (tasks {:.1}, attempts {:.1}), \
             share requests {:.1}, shares {:.1}, parks {:.1}, unparks {:.1} \
             (wake-on-hoard {:.1}), tasks from global {:.1}",
            steals as f64 / r,
            stolen as f64 / r,
            attempts as f64 / r,
            requests as f64 / r,
            shares as f64 / r,
            parks as f64 / r,
            unparks as f64 / r,
            hoard as f64 / r,
            global as f64 / r,
        );
        let (mut from_steal, mut from_inj, mut wakes, mut sleeps, mut cparks) = (0, 0, 0, 0, 0);
        for _ in 0..rounds {
            let ex = CbStrongExecutor::new(
                CbStrongConfig::with_workers(workers),
                |_| (),
                move |id: u64, ctx: &mut CbStrongCtx<u64, ()>| {
                    if spawns(id) {
                        ctx.spawn_local(2 * id);
                        ctx.spawn_local(2 * id + 1);
                    }
                },
            );
            assert!(ex.spawn_external(1).is_ok());
            let m = ex.join().total;
            assert_eq!(m.tasks_run, (1u64 << (depth + 1)) - 1);
            from_steal += m.from_steal;
            from_inj += m.from_injector;
            wakes += m.wakes;
            sleeps += m.sleeps;
            cparks += m.parks;
        }
        println!(
            "cb_strong {workers} w, per tree: steals {:.1}, from injector {:.1}, \
             wakes {:.1}, sleeps {:.1}, parks {:.1}",
            from_steal as f64 / r,
            from_inj as f64 / r,
            wakes as f64 / r,
            sleeps as f64 / r,
            cparks as f64 / r,
        );
    }
}

fn main() {
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(d)
    };
    let list = |k: &str| {
        std::env::var(k)
            .ok()
            .map(|v| v.split(',').map(str::to_owned).collect::<Vec<_>>())
    };
    let peers: Vec<&str> = match list("PEERS") {
        Some(want) => ALL_PEERS
            .into_iter()
            .filter(|p| want.iter().any(|w| w == p))
            .collect(),
        None => ALL_PEERS.to_vec(),
    };
    let worker_counts: Vec<usize> = match list("WORKERS") {
        Some(want) => ALL_WORKER_COUNTS
            .into_iter()
            .filter(|n| want.iter().any(|w| w == &n.to_string()))
            .collect(),
        None => ALL_WORKER_COUNTS.to_vec(),
    };
    assert!(
        !peers.is_empty() && !worker_counts.is_empty(),
        "PEERS/WORKERS select nothing"
    );
    let (peers, worker_counts) = (&peers[..], &worker_counts[..]);
    let depth = env("DEPTH", 20) as u32;
    let warm_up = env("WARMUP", 1) != 0;
    if env("METRICS", 0) != 0 {
        println!("load average before: {}", loadavg());
        print_metrics(depth, env("ROUNDS", 16), worker_counts);
        println!("load average after: {}", loadavg());
        return;
    }
    let rounds = balanced_rounds_at_least(peers.len(), env("ROUNDS", 16));
    let tree = BinaryTree {
        depth,
        work_iters: 0,
    };
    let roots = [BinaryTree::ROOT];
    let expected = tree.expected();
    let tasks = expected.count as f64;
    let rayon: Vec<RayonPeer> = worker_counts.iter().map(|&n| RayonPeer::new(n)).collect();
    println!(
        "empty spawn tree, depth {depth} ({} tasks), {rounds} rounds; load average before: {}",
        expected.count,
        loadavg()
    );

    let one = |peer: usize, wi: usize| -> Duration {
        let workers = worker_counts[wi];
        let (t, tally) = match peers[peer] {
            "seq" => time_sequential(&tree, &roots),
            "magpie" => time_tree::<MagpiePool<BinaryTree>, _>(workers, &tree, &roots),
            "cb_strong" => time_tree::<CbStrongPool<BinaryTree>, _>(workers, &tree, &roots),
            "cb_seed000" => time_tree::<CbSeed000Pool<BinaryTree>, _>(workers, &tree, &roots),
            _ => rayon[wi].join_tree(&tree, &roots),
        };
        assert_eq!(tally, expected, "{} on {workers} workers", peers[peer]);
        t
    };
    // Warm-up: every pair once, untimed (`WARMUP=0` skips it).
    for wi in 0..worker_counts.len() {
        for p in 0..peers.len() {
            if warm_up {
                one(p, wi);
            }
        }
    }
    // ns[peer][workers index] = one entry per round.
    let mut ns = vec![vec![Vec::with_capacity(rounds); worker_counts.len()]; peers.len()];
    // CPU time (all threads, /proc/self/stat) summed over the rounds: on a
    // loaded machine the wall clock counts time a worker sat descheduled,
    // the CPU time does not (10 ms resolution per read, so only the sum over
    // many rounds is meaningful).
    let mut cpu = vec![vec![Duration::ZERO; worker_counts.len()]; peers.len()];
    let cpu_now = || cpu_time_stat().expect("/proc/self/stat");
    for round in 0..rounds {
        let mut order: Vec<usize> = (0..worker_counts.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for wi in order {
            for p in round_order(peers.len(), round) {
                // `seq` ignores the worker count; it runs in both halves so
                // each half is a whole balanced row.
                let c0 = cpu_now();
                let t = one(p, wi);
                cpu[p][wi] += cpu_now().saturating_sub(c0);
                ns[p][wi].push(t.as_secs_f64() * 1e9 / tasks);
            }
        }
    }

    let mut header = format!("\n{:<11}", "ns/task");
    for n in worker_counts {
        header += &format!(" {:>8} {:>30}", format!("{n} worker"), "(min, q1-q3)");
    }
    if worker_counts.len() == 2 {
        header += &format!(" {:>8}", "2w / 1w");
    }
    println!("{header}");
    for (p, name) in peers.iter().enumerate() {
        let mut line = format!("{name:<11}");
        for runs in &ns[p] {
            let s = Spread::of(runs).expect("rounds > 0");
            line += &format!(
                " {:>8.2} {:>30}",
                s.median,
                format!("({:.2}, {:.2}-{:.2})", s.min, s.q1, s.q3)
            );
        }
        if let [one, two] = &ns[p][..] {
            let (a, b) = (Spread::of(one), Spread::of(two));
            line += &format!(
                " {:>8.3}",
                b.expect("rounds").median / a.expect("rounds").median
            );
        }
        println!("{line}");
    }
    for (p, name) in peers.iter().enumerate() {
        let per_task: Vec<String> = cpu[p]
            .iter()
            .map(|c| format!("{:.2}", c.as_secs_f64() * 1e9 / (tasks * rounds as f64)))
            .collect();
        println!(
            "CPU ns/task (all threads, summed over the rounds, incl. pool start/stop) {name:<11} {}",
            per_task.join(" | ")
        );
    }
    if let Some(magpie) = peers.iter().position(|p| *p == "magpie") {
        for (wi, workers) in worker_counts.iter().enumerate() {
            for (p, name) in peers.iter().enumerate().skip(magpie + 1) {
                let r: Vec<f64> = ns[magpie][wi]
                    .iter()
                    .zip(&ns[p][wi])
                    .map(|(m, o)| m / o)
                    .collect();
                let s = Spread::of(&r).expect("rounds > 0");
                println!("{workers} worker(s): magpie / {name} {s}");
            }
        }
    }
    if peers.len() > 1 {
        println!(
            "yardstick: crossbeam LIFO Worker push+pop, one thread: {:.2} ns/pair",
            crossbeam_lifo_pair_ns()
        );
    }
    println!("load average after: {}", loadavg());
}
