use magpie_runtime::{Executor, ExecutorConfig, WorkerCtx};
use std::time::Instant;
fn main() {
    let depth: u32 = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(20);
    for _ in 0..5 {
        let ex = Executor::new(
            ExecutorConfig {
                workers: std::env::var("WORKERS").map_or(2, |s| s.parse().unwrap()),
                pin_threads: std::env::var("PIN").is_ok(),
                ..Default::default()
            },
            |_| (),
            |d: u32, ctx: &mut WorkerCtx<u32, ()>| {
                if d > 0 {
                    ctx.spawn_local(d - 1);
                    ctx.spawn_local(d - 1);
                }
            },
        );
        let t = Instant::now();
        ex.spawn_external(depth).unwrap();
        let m = ex.join();
        let el = t.elapsed();
        let n = m.tasks_run();
        println!("{} tasks in {:?}: {:.1} ns/task; lifo {} local {} global {} steal {} overflows {} parks {} unparks {} shares {}/{} w0 {} w1 {}", n, el, el.as_nanos() as f64 / n as f64, m.total.tasks_lifo, m.total.tasks_local, m.total.tasks_global, m.total.tasks_steal, m.total.overflows, m.total.parks, m.total.unparks, m.total.shares, m.total.share_requests, m.per_worker[0].tasks_run(), m.per_worker.last().unwrap().tasks_run());
    }
}
