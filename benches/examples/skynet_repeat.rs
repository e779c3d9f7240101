//! Runs the async workloads over and over on one magpie runtime and prints
//! each skynet time, to catch a runtime that slows down mid-life (a worker
//! that stops taking part). A diagnostic, not a benchmark.
//!
//! `cargo run --release -p magpie-benches --example skynet_repeat`
use std::time::Instant;

use magpie_benches::proc_stats::cpu_time_schedstat;

use magpie_benches::async_workloads::{
    chained_spawn, ping_pong, skynet, spawn_many_local, spawn_many_remote, yield_many,
    AsyncRuntime, Busy1, MagpieRt, SKYNET_LEAVES,
};

fn main() {
    let rt = MagpieRt::with_workers(2);
    let mut handles = Vec::new();
    for round in 0..12 {
        for _ in 0..20 {
            spawn_many_local(&rt);
            spawn_many_remote(&rt, &mut handles);
            let busy = Busy1::start(&rt, 2);
            spawn_many_remote(&rt, &mut handles);
            busy.stop(&rt);
            ping_pong(&rt);
            yield_many(&rt);
            chained_spawn(&rt);
        }
        for _ in 0..3 {
            let c0 = cpu_time_schedstat().unwrap_or_default();
            let t = Instant::now();
            let r = skynet(&rt, SKYNET_LEAVES);
            let wall = t.elapsed();
            let cpu = cpu_time_schedstat().unwrap_or_default() - c0;
            println!(
                "round {round}: skynet {:.1} ms, process CPU {:.1} ms ({:.2} cores) (sum {r})",
                wall.as_secs_f64() * 1e3,
                cpu.as_secs_f64() * 1e3,
                cpu.as_secs_f64() / wall.as_secs_f64()
            );
        }
    }
}
