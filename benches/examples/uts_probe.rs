//! UTS (500 ns per node) on magpie's typed executor with its metrics: how
//! often the workers ask for work, share, park and wake (a profiling aid
//! for the speedup target, not a benchmark). `MODE=ring` for the ring-only
//! local queue; `TREE=d17` for the depth-17 binary tree instead.
//!
//! `cargo run --release -p magpie-benches --example uts_probe`
use std::time::Instant;

use magpie_benches::tally::{TallyScratch, TallySink};
use magpie_benches::typed::{BinaryTree, Uts, Workload};
use magpie_benches::work::calibration;
use magpie_runtime::{Executor, ExecutorConfig, LifoMode, LocalMode, WorkerCtx};

fn run<W: Workload>(w: W, root: W::Task, mode: LocalMode) {
    let sink = TallySink::new();
    let for_workers = sink.clone();
    let ex = Executor::with_modes(
        ExecutorConfig {
            workers: 2,
            spin_iters: std::env::var("SPIN")
                .map_or(ExecutorConfig::default().spin_iters, |s| s.parse().unwrap()),
            ..ExecutorConfig::default()
        },
        LifoMode::Owner,
        mode,
        move |_| TallyScratch::new(for_workers.clone()),
        move |t: W::Task, ctx: &mut WorkerCtx<W::Task, TallyScratch>| w.run(t, ctx),
    );
    let start = Instant::now();
    assert!(ex.spawn_external(root).is_ok());
    let m = ex.join();
    let elapsed = start.elapsed();
    let t = &m.total;
    println!(
        "{:?} {:.1} ms: {} tasks, requests {} shares {} ({} tasks) steals {}/{} parks {} unparks {} idle wakeups {} split {:?}",
        mode,
        elapsed.as_secs_f64() * 1e3,
        m.tasks_run(),
        t.share_requests,
        t.shares,
        t.tasks_shared,
        t.steal_successes,
        t.steal_attempts,
        t.parks,
        t.unparks,
        t.idle_wakeups,
        m.per_worker.iter().map(|w| w.tasks_run()).collect::<Vec<_>>()
    );
}

fn main() {
    let cal = calibration();
    let mode = if std::env::var("MODE").as_deref() == Ok("ring") {
        LocalMode::Ring
    } else {
        LocalMode::Split
    };
    for _ in 0..5 {
        if std::env::var("TREE").as_deref() == Ok("d17") {
            let w = BinaryTree {
                depth: 17,
                work_iters: cal.iters_per_task,
            };
            run(w, BinaryTree::ROOT, mode);
        } else {
            let w = Uts::standard(cal.iters_per_task);
            run(w, w.root(), mode);
        }
    }
}
