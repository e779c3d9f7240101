//! Tracing cost of a lanes run (issue 16: with every trace event on, at most
//! 1 µs added per event; nothing measurable when off).
//!
//! One graph, `epochs` epochs, no fixed-rate lane (epochs run back to back):
//! an `event_loop` chain `src -> a -> b -> c` and a 2-wide `thread_pool`
//! lane `p` (4 reentrant invocations per epoch) fed by `src`, on a 2-worker
//! `LaneRuntime`. Each round runs it three times in a rotating order:
//! trace **on**, trace **off**, and trace **off again**. Cost per event =
//! (on - off) / events recorded by the on run; the same difference between
//! the two off runs, (off2 - off) / events, is the noise floor of the
//! measurement: "nothing measurable when off" means the off cost is below
//! it (off records no event and builds none, `RunOptions::trace`).
//!
//! `cargo run --release -p magpie-benches --example lanes_trace_cost [rounds] [epochs] [pool]`
//!
//! `pool` = 0 leaves the pool component out: every epoch then runs on the
//! runner's thread alone, and the per-event figure is far less noisy on a
//! loaded machine (no barrier waits on the workers).
use std::time::{Duration, Instant};

use magpie_runtime::lanes::{
    self, Component, ComponentError, Execution, GraphBuilder, GraphContext, Input, Invocation,
    LaneRuntime, LaneSpec, Output, PortDecl, RunOptions, ThreadPoolSpec,
};

const OUT: Output<u64> = Output::new("out");
const IN: Input<u64> = Input::new("in");

/// Publishes the epoch.
struct Src;

impl Component for Src {
    fn ports(&self) -> Vec<PortDecl> {
        vec![OUT.decl()]
    }

    fn execute(&mut self, inv: &Invocation, ctx: &mut GraphContext) -> Result<(), ComponentError> {
        ctx.publish(OUT, inv.epoch())
    }
}

/// Adds one to what it got and publishes it.
struct Relay;

impl Component for Relay {
    fn ports(&self) -> Vec<PortDecl> {
        vec![IN.decl(), OUT.decl()]
    }

    fn execute(&mut self, _: &Invocation, ctx: &mut GraphContext) -> Result<(), ComponentError> {
        let sum: u64 = ctx.inputs(IN).copied().sum();
        ctx.publish(OUT, sum + 1)
    }
}

/// Reads its input.
struct Sink;

impl Component for Sink {
    fn ports(&self) -> Vec<PortDecl> {
        vec![IN.decl()]
    }

    fn execute(&mut self, _: &Invocation, ctx: &mut GraphContext) -> Result<(), ComponentError> {
        std::hint::black_box(ctx.inputs(IN).count());
        Ok(())
    }
}

fn graph(pool_invocations: usize) -> lanes::Graph {
    let mut g = GraphBuilder::new();
    g.lane(LaneSpec::event_loop("loop")).unwrap();
    g.lane(LaneSpec::thread_pool(
        "pool",
        ThreadPoolSpec {
            max_threads: 2,
            ..ThreadPoolSpec::default()
        },
    ))
    .unwrap();
    let exec = Execution::default;
    g.component("src", "loop", exec(), || Src).unwrap();
    g.component("a", "loop", exec(), || Relay).unwrap();
    g.component("b", "loop", exec(), || Relay).unwrap();
    g.component("c", "loop", exec(), || Sink).unwrap();
    g.connect("src.out", "a.in").unwrap();
    g.connect("a.out", "b.in").unwrap();
    g.connect("b.out", "c.in").unwrap();
    if pool_invocations > 0 {
        let pool = Execution {
            reentrant: true,
            invocations: pool_invocations,
            ..Execution::default()
        };
        g.component("p", "pool", pool, || Sink).unwrap();
        g.connect("src.out", "p.in").unwrap();
    }
    g.build().unwrap()
}

/// One run: its time and the events it recorded.
fn run(rt: &LaneRuntime, epochs: u64, pool: usize, trace: bool) -> (Duration, usize) {
    let g = graph(pool);
    let t = Instant::now();
    let r = lanes::run(
        g,
        rt,
        RunOptions {
            max_iterations: Some(epochs),
            trace,
            ..RunOptions::default()
        },
    );
    let el = t.elapsed();
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(
        r.metrics.completed_count,
        epochs * (4 + pool as u64),
        "every invocation ran"
    );
    (el, r.trace.len())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn range(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut arg = |d: u64| args.next().and_then(|a| a.parse().ok()).unwrap_or(d);
    let rounds = arg(7) as usize;
    let epochs = arg(20_000);
    let pool = arg(4) as usize;
    let rt = LaneRuntime::new(2).unwrap();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "2 workers; {epochs} epochs per run (4 event-loop components, {pool} pool invocations); \
         load average at start: {}",
        load.trim()
    );
    // Warm up (allocator, workers, page faults).
    let _ = run(&rt, epochs / 10 + 1, pool, true);
    let (mut per_event, mut floor, mut on_ns, mut off_ns) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut events_per_epoch = 0.0;
    for r in 0..rounds {
        let mut t = [Duration::ZERO; 3];
        let mut events = 0;
        for j in 0..3 {
            let which = (j + r) % 3;
            let (el, ev) = run(&rt, epochs, pool, which == 0);
            t[which] = el;
            if which == 0 {
                events = ev;
            } else {
                assert_eq!(ev, 0, "trace off records nothing");
            }
        }
        let ns = |d: Duration| d.as_nanos() as f64;
        let cost = (ns(t[0]) - ns(t[1])) / events as f64;
        let noise = (ns(t[2]) - ns(t[1])) / events as f64;
        events_per_epoch = events as f64 / epochs as f64;
        println!(
            "round {r}: on {:7.1} ns/epoch  off {:7.1}  off again {:7.1}  events/epoch {:.1}  \
             added per event {:6.1} ns  (off-vs-off {:+6.1} ns)",
            ns(t[0]) / epochs as f64,
            ns(t[1]) / epochs as f64,
            ns(t[2]) / epochs as f64,
            events_per_epoch,
            cost,
            noise
        );
        per_event.push(cost);
        floor.push(noise);
        on_ns.push(ns(t[0]) / epochs as f64);
        off_ns.push(ns(t[1]) / epochs as f64);
    }
    let (lo, hi) = range(&per_event);
    let (flo, fhi) = range(&floor);
    println!("\nover {rounds} rounds: median (min-max)");
    println!(
        "tracing on adds {:.1} ns per event ({lo:.1} - {hi:.1}); {events_per_epoch:.1} events per epoch",
        median(&mut per_event)
    );
    println!(
        "off vs off (noise floor): {:+.1} ns per event ({flo:+.1} - {fhi:+.1})",
        median(&mut floor)
    );
    println!(
        "ns per epoch: on {:.1}, off {:.1}",
        median(&mut on_ns),
        median(&mut off_ns)
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average at end: {}", load.trim());
}
