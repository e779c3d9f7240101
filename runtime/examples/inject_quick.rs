//! Quick look at batch inject: 10^6 tasks in batches of 1024 from outside,
//! 2 workers, with the executor's metrics (a profiling aid, not a benchmark).
//!
//! `cargo run --release -p magpie-runtime --example inject_quick`
use magpie_runtime::{Executor, ExecutorConfig, WorkerCtx};
use std::time::Instant;

fn main() {
    for _ in 0..5 {
        let ex = Executor::new(
            ExecutorConfig {
                workers: 2,
                spin_iters: std::env::var("SPIN").map_or(200, |s| s.parse().unwrap()),
                ..Default::default()
            },
            |_| 0u64,
            |t: u64, ctx: &mut WorkerCtx<u64, u64>| {
                ctx.scratch = ctx.scratch.wrapping_add(t);
            },
        );
        let t = Instant::now();
        let mut next = 0u64;
        while next < 1_000_000 {
            let batch: Vec<u64> = (next..next + 1024).collect();
            next += 1024;
            ex.spawn_external_batch(batch).unwrap();
        }
        let m = ex.join();
        let el = t.elapsed();
        let n = m.tasks_run();
        println!(
            "{n} tasks in {el:?}: {:.1} ns/task; global {} local {} steal {} batches {} parks {} unparks {} spurious {}",
            el.as_nanos() as f64 / n as f64,
            m.total.tasks_global,
            m.total.tasks_local,
            m.total.tasks_steal,
            m.total.global_batches,
            m.total.parks,
            m.total.unparks,
            m.total.spurious_wakeups,
        );
    }
}
