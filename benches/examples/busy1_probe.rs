//! Probe for `spawn_many_remote_busy1`: how many background iterations
//! (yield + 10 µs stall) each runtime runs while 10 000 outside spawns
//! complete, and how long the spawning and the awaiting take. A diagnostic,
//! not a benchmark: it prints per-iteration numbers for reading, no ratio.
//!
//! `cargo run --release -p magpie-benches --example busy1_probe`
use magpie_core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use magpie_benches::async_workloads::{stall, AsyncRuntime, MagpieRt, TokioRt, NUM_SPAWN};

fn probe<R: AsyncRuntime>(rt: &R) {
    let flag = Arc::new(AtomicBool::new(true));
    let iters = Arc::new(AtomicU64::new(0));
    let busy: Vec<_> = (0..4)
        .map(|_| {
            let (flag, iters) = (flag.clone(), iters.clone());
            rt.spawn(async move {
                while flag.load(Ordering::Relaxed) {
                    R::yield_now().await;
                    stall();
                    iters.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(20));
    for _ in 0..5 {
        let i0 = iters.load(Ordering::Relaxed);
        let t0 = Instant::now();
        let last_done = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..NUM_SPAWN)
            .map(|_| {
                let last_done = last_done.clone();
                rt.spawn(async move {
                    let at = t0.elapsed().as_nanos() as u64;
                    last_done.fetch_max(at, Ordering::Relaxed);
                })
            })
            .collect();
        let t_spawn = t0.elapsed();
        let i1 = iters.load(Ordering::Relaxed);
        rt.block_on(async {
            for h in handles {
                let _ = h.await;
            }
        });
        let t = t0.elapsed();
        let i2 = iters.load(Ordering::Relaxed);
        println!(
            "{:<7} spawn {:>6.2} ms ({} busy iters)  last task done {:>6.2} ms  total {:>6.2} ms ({} busy iters)",
            R::NAME,
            t_spawn.as_secs_f64() * 1e3,
            i1 - i0,
            last_done.load(Ordering::Relaxed) as f64 / 1e6,
            t.as_secs_f64() * 1e3,
            i2 - i0
        );
    }
    flag.store(false, Ordering::Relaxed);
    rt.block_on(async {
        for h in busy {
            let _ = h.await;
        }
    });
}

fn main() {
    let t = TokioRt::with_workers(2);
    let m = MagpieRt::with_workers(2);
    probe(&t);
    probe(&m);
    probe(&t);
    probe(&m);
}
