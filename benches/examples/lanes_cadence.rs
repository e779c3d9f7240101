//! Cadence of a wall-clock fixed-rate lane (issue 16): release lateness of
//! each tick against the ideal grid, for a lane with an empty component, a
//! thread sleeping until each deadline, and `tokio::time::interval`.
//! Alternating rounds in one process; the magpie runtime is otherwise idle.
//!
//! `cargo run --release -p magpie-benches --example lanes_cadence [rounds] [ticks] [hz]`
use std::time::{Duration, Instant};

use magpie_runtime::lanes::{
    self, Component, ComponentError, Execution, FixedRateSpec, GraphBuilder, GraphContext,
    Invocation, LaneRuntime, LaneSpec, RunOptions,
};

struct Empty;

impl Component for Empty {
    fn execute(&mut self, _: &Invocation, _: &mut GraphContext) -> Result<(), ComponentError> {
        Ok(())
    }
}

/// Lateness of each tick, ns.
fn magpie(rt: &LaneRuntime, period: Duration, ticks: u64) -> Vec<u64> {
    let mut g = GraphBuilder::new();
    g.lane(LaneSpec::fixed_rate(
        "c",
        FixedRateSpec {
            wall_clock: true,
            max_ticks: Some(ticks),
            ..FixedRateSpec::every(period)
        },
    ))
    .unwrap();
    g.component("empty", "c", Execution::default(), || Empty)
        .unwrap();
    let r = lanes::run(g.build().unwrap(), rt, RunOptions::default());
    r.trace
        .named("fixed_rate_tick_begin")
        .map(|e| e.u64_arg("lateness_ns").unwrap())
        .collect()
}

fn sleeping_thread(period: Duration, ticks: u64) -> Vec<u64> {
    let start = Instant::now();
    (0..ticks)
        .map(|k| {
            let due = start + period * k as u32;
            if let Some(d) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            }
            Instant::now().duration_since(due).as_nanos() as u64
        })
        .collect()
}

fn tokio_interval(rt: &tokio::runtime::Runtime, period: Duration, ticks: u64) -> Vec<u64> {
    rt.block_on(async move {
        let mut iv = tokio::time::interval(period);
        let start = tokio::time::Instant::now();
        let mut out = Vec::with_capacity(ticks as usize);
        for k in 0..ticks {
            iv.tick().await;
            let due = start + period * k as u32;
            out.push(tokio::time::Instant::now().duration_since(due).as_nanos() as u64);
        }
        out
    })
}

fn pct(v: &[u64], p: f64) -> f64 {
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i] as f64 / 1e3
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3);
    let ticks: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2_000);
    let hz: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1_000.0);
    let period = Duration::from_secs_f64(1.0 / hz);
    let rt = LaneRuntime::new(2).unwrap();
    let trt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    println!(
        "cadence: {hz} Hz, {ticks} ticks per run, {rounds} rounds; lateness against the grid, µs"
    );
    println!(
        "{:<16} {:>5} {:>9} {:>9} {:>9} {:>12}",
        "peer", "round", "p50", "p99", "max", "period-late"
    );
    let names = ["magpie-lane", "sleeping-thread", "tokio-interval"];
    let mut p50s = vec![Vec::new(); 3];
    let mut p99s = vec![Vec::new(); 3];
    for r in 0..rounds {
        for k in 0..3 {
            let i = (k + r) % 3;
            let mut v = match i {
                0 => magpie(&rt, period, ticks),
                1 => sleeping_thread(period, ticks),
                _ => tokio_interval(&trt, period, ticks),
            };
            // Tokio's and the thread's first tick is at 0 by construction;
            // every peer's tick count is the same.
            v.sort_unstable();
            let late = v.iter().filter(|&&l| l >= period.as_nanos() as u64).count();
            println!(
                "{:<16} {r:>5} {:>9.1} {:>9.1} {:>9.1} {:>12}",
                names[i],
                pct(&v, 0.5),
                pct(&v, 0.99),
                pct(&v, 1.0),
                late
            );
            p50s[i].push(pct(&v, 0.5));
            p99s[i].push(pct(&v, 0.99));
        }
    }
    println!("median over rounds (p50 / p99, µs):");
    for i in 0..3 {
        let (mut a, mut b) = (p50s[i].clone(), p99s[i].clone());
        a.sort_by(f64::total_cmp);
        b.sort_by(f64::total_cmp);
        println!(
            "  {:<16} {:>9.1} / {:>9.1}",
            names[i],
            a[a.len() / 2],
            b[b.len() / 2]
        );
    }
}
