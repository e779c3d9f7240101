//! Quick look at outside spawns: 10^6 tasks from one producer thread, in
//! batches of `BATCH` (default 1024; 1 = one `spawn_external` each), on 2
//! workers, with the executor's metrics (a profiling aid, not a benchmark).
//! `MODE=ring` selects the ring-only local queue instead of the split one.
//!
//! `BATCH=1 MODE=ring cargo run --release -p magpie-runtime --example inject_quick`
use magpie_runtime::{Executor, ExecutorConfig, LifoMode, LocalMode, WorkerCtx};
use std::time::Instant;

fn main() {
    let mode = if std::env::var("MODE").as_deref() == Ok("ring") {
        LocalMode::Ring
    } else {
        LocalMode::Split
    };
    let batch: u64 = std::env::var("BATCH").map_or(1024, |s| s.parse().unwrap());
    for _ in 0..4 {
        let ex = Executor::with_modes(
            ExecutorConfig {
                workers: 2,
                ..Default::default()
            },
            LifoMode::Owner,
            mode,
            |_| 0u64,
            |t: u64, ctx: &mut WorkerCtx<u64, u64>| {
                ctx.scratch = ctx.scratch.wrapping_add(t);
            },
        );
        let t = Instant::now();
        let mut next = 0u64;
        while next < 1_000_000 {
            if batch == 1 {
                ex.spawn_external(next).unwrap();
            } else {
                let b: Vec<u64> = (next..next + batch).collect();
                ex.spawn_external_batch(b).unwrap();
            }
            next += batch;
        }
        let m = ex.join();
        let el = t.elapsed();
        println!(
            "{:?}: {:.1} ns/task\n{m}",
            mode,
            el.as_nanos() as f64 / m.tasks_run() as f64
        );
    }
}
