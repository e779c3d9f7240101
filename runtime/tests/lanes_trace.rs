//! Every seed metric is readable from the run result, every seed trace
//! event name is produced, and the trace exports as Chrome trace JSON.
#![cfg(not(loom))]

mod lanes_util;

use std::collections::BTreeSet;
use std::time::Duration;

use lanes_util::*;
use magpie_runtime::lanes::{
    self, Component, ComponentError, Execution, FixedRateSpec, GraphBuilder, GraphContext,
    Invocation, LaneSpec, OverflowPolicy, Priority, RunOptions, StopToken, ThreadPoolSpec,
    DEFAULT_MAX_TRACE_RECORDS, METRIC_NAMES, TRACE_EVENT_NAMES,
};
use magpie_runtime::time::OverrunPolicy;

/// Seed 004's lists, copied from the seed text: the code's lists must hold
/// every one of them.
const SEED_METRICS: &[&str] = &[
    "runtime.scheduler.tick_count",
    "runtime.scheduler.completed_count",
    "runtime.scheduler.tick_overrun_count",
    "runtime.scheduler.skipped_tick_count",
    "runtime.scheduler.max_lateness_ms",
    "runtime.scheduler.queue_depth",
    "runtime.scheduler.queue_capacity",
    "runtime.scheduler.worker_count",
    "runtime.scheduler.last_callback_duration_ms",
    "runtime.scheduler.blocked_duration_ms",
    "runtime.scheduler.tick_jitter_ms",
    "runtime.scheduler.active_count",
    "runtime.scheduler.in_flight_count",
    "runtime.scheduler.rejected_count",
    "runtime.scheduler.priority_high_count",
    "runtime.scheduler.priority_normal_count",
    "runtime.scheduler.priority_low_count",
    "runtime.scheduler.priority_background_count",
    "runtime.scheduler.low_priority_rejected_count",
    "runtime.scheduler.starvation_guard_count",
];

const SEED_EVENTS: &[&str] = &[
    "scheduler_iteration_begin",
    "scheduler_iteration",
    "scheduler_iteration_end",
    "component_execute_begin",
    "component_execute",
    "component_execute_end",
    "component_cancellation_requested",
    "component_cancellation_observed",
    "component_timeout_budget_exceeded",
    "thread_pool_batch",
    "fixed_rate_tick_begin",
    "fixed_rate_tick",
    "fixed_rate_tick_end",
    "fixed_rate_overrun",
    "fixed_rate_skipped_tick",
    "loop_cancellation_requested",
    "loop_cancellation_observed",
];

/// On the control lane: tick 2 stalls 2.5 periods (an overrun of the tick
/// and of its 5 ms execution budget; tick 3 comes late and drops one grid
/// tick);
/// tick 4 asks to stop and checks for it.
struct Control {
    stop: StopToken,
}

impl Component for Control {
    fn ports(&self) -> Vec<lanes::PortDecl> {
        vec![OUT.decl()]
    }

    fn execute(&mut self, inv: &Invocation, ctx: &mut GraphContext) -> Result<(), ComponentError> {
        match inv.tick() {
            Some(2) => ctx.simulate_work(Duration::from_millis(25)),
            Some(4) => {
                self.stop.request();
                ctx.checkpoint()?;
            }
            _ => ctx.simulate_work(Duration::from_millis(1)),
        }
        ctx.publish(OUT, inv.tick().unwrap_or(0))
    }
}

fn mixed_run() -> lanes::RunResult {
    let rt = runtime(2);
    let stop = StopToken::new();
    let mut g = GraphBuilder::new();
    g.lane(LaneSpec::fixed_rate(
        "control",
        FixedRateSpec {
            overrun_policy: OverrunPolicy::DropTick,
            max_ticks: Some(10),
            ..FixedRateSpec::every(Duration::from_millis(10))
        },
    ))
    .unwrap();
    g.lane(LaneSpec::thread_pool(
        "pool",
        ThreadPoolSpec {
            max_threads: 1,
            queue_capacity: Some(1),
            overflow: OverflowPolicy::RejectNew,
            ..ThreadPoolSpec::default()
        },
    ))
    .unwrap();
    let s = stop.clone();
    let exec = Execution {
        priority: Priority::High,
        budget: Some(Duration::from_millis(5)),
        ..Execution::default()
    };
    g.component("control", "control", exec, move || Control {
        stop: s.clone(),
    })
    .unwrap();
    let (l, se) = (log(), seen());
    let exec = Execution {
        priority: Priority::Background,
        invocations: 3,
        ..Execution::default()
    };
    g.component("worker", "pool", exec, move || Relay {
        add: 0,
        log: l.clone(),
        seen: se.clone(),
    })
    .unwrap();
    g.connect("control.out", "worker.in").unwrap();
    lanes::run(
        g.build().unwrap(),
        &rt,
        RunOptions {
            stop,
            ..RunOptions::default()
        },
    )
}

#[test]
fn every_seed_metric_is_readable_from_the_run_result() {
    let r = mixed_run();
    for name in SEED_METRICS {
        assert!(
            METRIC_NAMES.contains(name),
            "{name} missing from METRIC_NAMES"
        );
        let v = r
            .metrics
            .get(name)
            .unwrap_or_else(|| panic!("{name} not readable"));
        assert!(!v.is_nan(), "{name}");
    }
    assert_eq!(r.metrics.iter().count(), METRIC_NAMES.len());
    assert_eq!(r.metrics.get("runtime.scheduler.nope"), None);
    // Spot checks against what this run did.
    let m = &r.metrics;
    assert_eq!(m.tick_count, 4);
    assert_eq!(m.tick_overrun_count, 1);
    assert_eq!(m.skipped_tick_count, 1);
    assert_eq!(m.worker_count, 1);
    assert_eq!(m.queue_capacity, 1.0);
    assert_eq!(
        m.rejected_count, 3,
        "3 invocations per tick, width 1 + 1 waiting"
    );
    assert_eq!(m.low_priority_rejected_count, 3);
    assert_eq!(m.priority_high_count, 4);
    assert_eq!(m.priority_background_count, 6);
    assert_eq!(m.completed_count, 10);
}

#[test]
fn every_seed_trace_event_name_is_produced() {
    let r = mixed_run();
    let produced: BTreeSet<&str> = r.trace.records().map(|e| e.name).collect();
    for name in SEED_EVENTS {
        assert!(
            TRACE_EVENT_NAMES.contains(name),
            "{name} missing from TRACE_EVENT_NAMES"
        );
        assert!(produced.contains(name), "{name} never produced");
    }
    assert!(produced.iter().all(|n| TRACE_EVENT_NAMES.contains(n)));
}

#[test]
fn the_trace_exports_as_chrome_trace_json() {
    let r = mixed_run();
    let mut out = Vec::new();
    let written = r.trace.write_chrome(&mut out).unwrap();
    assert_eq!(written as usize, r.trace.len());
    let v: serde_json::Value = serde_json::from_slice(&out).expect("trace is JSON");
    let events = v["traceEvents"].as_array().unwrap();
    let mut named = BTreeSet::new();
    for e in events {
        let ph = e["ph"].as_str().unwrap();
        assert!(["M", "X", "i"].contains(&ph), "{ph}");
        assert!(e["pid"].is_u64() && e["tid"].is_u64());
        if ph != "M" {
            assert!(e["ts"].as_f64().unwrap() >= 0.0);
            named.insert(e["name"].as_str().unwrap().to_string());
        }
        if ph == "X" {
            assert!(e["dur"].as_f64().unwrap() >= 0.0);
        }
        if e["name"] == "thread_pool_batch" {
            assert!(e["args"]["worker_ids"].is_array());
        }
        if e["name"] == "component_execute" && e["args"]["component"] == "worker" {
            assert!(e["args"]["worker_id"].is_u64());
        }
    }
    for name in SEED_EVENTS {
        assert!(named.contains(*name), "{name} not in the JSON");
    }
}

#[test]
fn with_tracing_off_no_event_is_recorded_and_the_run_is_the_same() {
    let run = |trace: bool| {
        let (log, seen) = (log(), seen());
        let mut g = GraphBuilder::new();
        g.lane(LaneSpec::event_loop("main")).unwrap();
        let l = log.clone();
        g.component("src", "main", Execution::default(), move || Source {
            log: l.clone(),
            cost: Duration::ZERO,
        })
        .unwrap();
        let (l, s) = (log.clone(), seen.clone());
        g.component("relay", "main", Execution::default(), move || Relay {
            add: 1,
            log: l.clone(),
            seen: s.clone(),
        })
        .unwrap();
        g.connect("src.out", "relay.in").unwrap();
        let rt = runtime(1);
        let r = lanes::run(
            g.build().unwrap(),
            &rt,
            RunOptions {
                max_iterations: Some(4),
                trace,
                ..RunOptions::default()
            },
        );
        let seen = seen.lock().unwrap().clone();
        (r.trace.len(), r.metrics.completed_count, seen)
    };
    let (on, off) = (run(true), run(false));
    assert!(on.0 > 0);
    assert_eq!(off.0, 0);
    assert_eq!((on.1, &on.2), (off.1, &off.2));
}

/// `src` on an event loop feeding `worker` (2 reentrant invocations per
/// epoch) on a 2-wide pool lane, for `epochs` epochs, keeping at most
/// `max_trace_records`.
fn bounded_run(epochs: u64, max_trace_records: usize) -> lanes::RunResult {
    let (log, seen) = (log(), seen());
    let mut g = GraphBuilder::new();
    g.lane(LaneSpec::event_loop("main")).unwrap();
    g.lane(LaneSpec::thread_pool(
        "pool",
        ThreadPoolSpec {
            max_threads: 2,
            ..ThreadPoolSpec::default()
        },
    ))
    .unwrap();
    let l = log.clone();
    g.component("src", "main", Execution::default(), move || Source {
        log: l.clone(),
        cost: Duration::ZERO,
    })
    .unwrap();
    let exec = Execution {
        reentrant: true,
        invocations: 2,
        ..Execution::default()
    };
    g.component("worker", "pool", exec, move || Relay {
        add: 1,
        log: log.clone(),
        seen: seen.clone(),
    })
    .unwrap();
    g.connect("src.out", "worker.in").unwrap();
    let rt = runtime(2);
    lanes::run(
        g.build().unwrap(),
        &rt,
        RunOptions {
            max_iterations: Some(epochs),
            max_trace_records,
            ..RunOptions::default()
        },
    )
}

#[test]
fn a_run_past_its_trace_bound_keeps_the_newest_records_and_reports_the_dropped_ones() {
    const EPOCHS: u64 = 40;
    const MAX: usize = 64;
    let full = bounded_run(EPOCHS, DEFAULT_MAX_TRACE_RECORDS);
    assert_eq!(full.trace.dropped(), 0);
    let total = full.trace.len();
    assert!(
        total > 4 * MAX,
        "the run must go well past the bound ({total})"
    );

    let r = bounded_run(EPOCHS, MAX);
    let (kept, dropped) = (r.trace.len(), r.trace.dropped());
    assert_eq!(r.trace.max_records(), MAX);
    // At most the bound, and at most one chunk (an eighth) below it.
    assert!(kept <= MAX, "kept {kept}");
    assert!(kept >= MAX - MAX / 8, "kept {kept}");
    assert_eq!(
        kept as u64 + dropped,
        total as u64,
        "every record kept or counted"
    );
    assert_eq!(r.metrics.trace_dropped_count, dropped);
    assert_eq!(
        r.metrics.get("runtime.scheduler.trace_dropped_count"),
        Some(dropped as f64)
    );
    assert_eq!(full.metrics.trace_dropped_count, 0);
    // The newest records are the ones kept, in order.
    let (full_shape, shape) = (full.trace.shape(), r.trace.shape());
    assert_eq!(shape[..], full_shape[total - kept..]);
    // The worker-id lists of the kept batches survived the drops.
    let batches: Vec<_> = r.trace.named("thread_pool_batch").collect();
    assert!(!batches.is_empty());
    for b in batches {
        let ids = r.trace.list_arg(b, "worker_ids").expect("worker_ids");
        assert!(!ids.is_empty() && ids.iter().all(|&w| w < 2), "{ids:?}");
    }

    // The export is valid JSON, holds the kept events, and says how many
    // were dropped (a metadata event and `otherData`).
    let mut out = Vec::new();
    let written = r.trace.write_chrome(&mut out).unwrap();
    assert_eq!(written as usize, kept);
    let v: serde_json::Value = serde_json::from_slice(&out).expect("trace is JSON");
    let events = v["traceEvents"].as_array().unwrap();
    let not_meta = events.iter().filter(|e| e["ph"] != "M").count();
    assert_eq!(not_meta, kept);
    let bound: Vec<_> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "trace_bound")
        .collect();
    assert_eq!(bound.len(), 1);
    assert_eq!(bound[0]["args"]["dropped_events"].as_u64(), Some(dropped));
    assert_eq!(bound[0]["args"]["kept_events"].as_u64(), Some(kept as u64));
    assert_eq!(bound[0]["args"]["max_events"].as_u64(), Some(MAX as u64));
    assert_eq!(v["otherData"]["dropped_events"].as_u64(), Some(dropped));
}
