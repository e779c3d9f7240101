//! event_loop lanes: deterministic replay, the stop token before every
//! iteration, cooperative cancellation and timeout budgets, startup and
//! reverse-order cleanup.
#![cfg(not(loom))]

mod lanes_util;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lanes_util::*;
use magpie_runtime::lanes::{
    self, ClockMode, Component, ComponentError, Execution, GraphBuilder, GraphContext, Invocation,
    LaneSpec, Priority, RunErrorKind, RunOptions, StopReason, StopToken,
};

fn iterations(n: u64) -> RunOptions {
    RunOptions {
        max_iterations: Some(n),
        ..RunOptions::default()
    }
}

fn chain(log: &Log, seen: &Seen) -> lanes::Graph {
    let mut g = GraphBuilder::new();
    g.lane(LaneSpec::event_loop("main")).unwrap();
    for (name, p) in [("a", Priority::Low), ("b", Priority::High)] {
        let l = log.clone();
        let exec = Execution {
            priority: p,
            invocations: 2,
            ..Execution::default()
        };
        g.component(name, "main", exec, move || Source {
            log: l.clone(),
            cost: Duration::ZERO,
        })
        .unwrap();
    }
    let (l, s) = (log.clone(), seen.clone());
    g.component("sum", "main", Execution::default(), move || Relay {
        add: 100,
        log: l.clone(),
        seen: s.clone(),
    })
    .unwrap();
    g.connect("a.out", "sum.in").unwrap();
    g.connect("b.out", "sum.in").unwrap();
    g.build().unwrap()
}

#[test]
fn event_loop_runs_replay_with_the_same_output_and_trace() {
    let rt = runtime(2);
    let mut runs = Vec::new();
    for _ in 0..2 {
        let (log, seen) = (log(), seen());
        let r = lanes::run(chain(&log, &seen), &rt, iterations(5));
        let log = log.lock().unwrap().clone();
        let seen = seen.lock().unwrap().clone();
        runs.push((log, seen, r.trace.shape(), r.metrics.completed_count));
    }
    assert_eq!(runs[0], runs[1]);
    // Region order: b (high) before a (low); both before their consumer.
    let names: Vec<&str> = runs[0]
        .0
        .iter()
        .take(5)
        .map(|(n, _, _)| n.as_str())
        .collect();
    assert_eq!(names, ["b", "b", "a", "a", "sum"]);
    // Fan-in commits in region order: b's values, then a's.
    assert_eq!(runs[0].1[0], (1, vec![10, 11, 10, 11]));
    assert_eq!(runs[0].3, 25);
}

struct StopAt {
    at: u64,
    stop: StopToken,
    log: Log,
}

impl Component for StopAt {
    fn execute(&mut self, inv: &Invocation, _: &mut GraphContext) -> Result<(), ComponentError> {
        self.log
            .lock()
            .unwrap()
            .push((inv.name().to_string(), inv.epoch(), inv.index()));
        if inv.epoch() == self.at {
            self.stop.request();
        }
        Ok(())
    }
}

#[test]
fn the_stop_token_is_checked_before_each_iteration() {
    let rt = runtime(1);
    let stop = StopToken::new();
    let log = log();
    let mut g = GraphBuilder::new();
    g.lane(LaneSpec::event_loop("main")).unwrap();
    let (s, l) = (stop.clone(), log.clone());
    g.component(
        "stopper",
        "main",
        Execution::with_priority(Priority::High),
        move || StopAt {
            at: 3,
            stop: s.clone(),
            log: l.clone(),
        },
    )
    .unwrap();
    let l = log.clone();
    g.component("after", "main", Execution::default(), move || Noop {
        log: l.clone(),
    })
    .unwrap();
    let r = lanes::run(
        g.build().unwrap(),
        &rt,
        RunOptions {
            stop,
            ..RunOptions::default()
        },
    );
    assert_eq!(r.stop_reason, StopReason::StopRequested);
    assert_eq!(r.stop_reason.name(), "stop_requested");
    assert_eq!(r.epochs, 3, "no iteration starts after the stop");
    // The epoch in which the stop came finishes its started work.
    assert_eq!(
        log.lock().unwrap().last().unwrap(),
        &("after".to_string(), 3, 0)
    );
    assert_eq!(r.trace.named("loop_cancellation_requested").count(), 1);
    assert_eq!(r.trace.named("loop_cancellation_observed").count(), 1);
    assert_eq!(r.deactivated, ["after", "stopper"]);
}

#[test]
fn a_stop_requested_before_the_run_starts_runs_no_iteration() {
    let rt = runtime(1);
    let stop = StopToken::new();
    stop.request();
    let log = log();
    let (s, l) = (stop.clone(), log.clone());
    let mut g = GraphBuilder::new();
    g.lane(LaneSpec::event_loop("main")).unwrap();
    g.component("x", "main", Execution::default(), move || StopAt {
        at: 0,
        stop: s.clone(),
        log: l.clone(),
    })
    .unwrap();
    let r = lanes::run(
        g.build().unwrap(),
        &rt,
        RunOptions {
            stop,
            ..RunOptions::default()
        },
    );
    assert_eq!((r.stop_reason, r.epochs), (StopReason::StopRequested, 0));
    assert!(log.lock().unwrap().is_empty());
    assert_eq!(r.activated, ["x"]);
    assert_eq!(r.deactivated, ["x"]);
}

/// Long work that checks for cancellation between slices.
struct Cooperative {
    stop: StopToken,
    slices_done: Arc<Mutex<u64>>,
}

impl Component for Cooperative {
    fn execute(&mut self, _: &Invocation, ctx: &mut GraphContext) -> Result<(), ComponentError> {
        for slice in 0..1_000u64 {
            if slice == 3 {
                self.stop.request(); // e.g. another thread asks to stop
            }
            ctx.checkpoint()?;
            *self.slices_done.lock().unwrap() += 1;
        }
        Ok(())
    }
}

#[test]
fn cooperative_cancellation_is_observed_at_a_checkpoint() {
    let rt = runtime(1);
    let stop = StopToken::new();
    let slices = Arc::new(Mutex::new(0));
    let mut g = GraphBuilder::new();
    g.lane(LaneSpec::event_loop("main")).unwrap();
    let (s, sl) = (stop.clone(), slices.clone());
    g.component("long", "main", Execution::default(), move || Cooperative {
        stop: s.clone(),
        slices_done: sl.clone(),
    })
    .unwrap();
    let r = lanes::run(
        g.build().unwrap(),
        &rt,
        RunOptions {
            stop,
            max_iterations: Some(10),
            ..RunOptions::default()
        },
    );
    assert_eq!(
        *slices.lock().unwrap(),
        3,
        "left at the first checkpoint after the request"
    );
    assert_eq!(
        r.stop_reason,
        StopReason::StopRequested,
        "a cancellation is not an error"
    );
    assert!(r.error.is_none());
    assert_eq!(r.trace.named("component_cancellation_observed").count(), 1);
    assert_eq!(r.trace.named("component_cancellation_requested").count(), 1);
}

struct Slow {
    cost: Duration,
}

impl Component for Slow {
    fn execute(&mut self, _: &Invocation, ctx: &mut GraphContext) -> Result<(), ComponentError> {
        ctx.simulate_work(self.cost);
        Ok(())
    }
}

#[test]
fn exceeding_a_timeout_budget_is_reported_not_preempted() {
    let rt = runtime(1);
    let mut g = GraphBuilder::new();
    g.lane(LaneSpec::event_loop("main")).unwrap();
    for (name, cost) in [("slow", 5), ("quick", 1)] {
        let exec = Execution {
            budget: Some(Duration::from_millis(2)),
            ..Execution::default()
        };
        g.component(name, "main", exec, move || Slow {
            cost: Duration::from_millis(cost),
        })
        .unwrap();
    }
    let r = lanes::run(
        g.build().unwrap(),
        &rt,
        RunOptions {
            max_iterations: Some(3),
            clock: ClockMode::Simulated,
            ..RunOptions::default()
        },
    );
    let exceeded: Vec<&str> = r
        .trace
        .named("component_timeout_budget_exceeded")
        .map(|e| r.trace.str_arg(e, "component").unwrap())
        .collect();
    assert_eq!(exceeded, ["slow", "slow", "slow"]);
    assert_eq!(r.metrics.completed_count, 6, "it still ran to the end");
    assert_eq!(r.metrics.last_callback_duration_ms, 1.0);
}

struct Lifecycle {
    name: &'static str,
    fail_activate: bool,
    events: Arc<Mutex<Vec<String>>>,
}

impl Component for Lifecycle {
    fn activate(&mut self) -> Result<(), ComponentError> {
        self.events
            .lock()
            .unwrap()
            .push(format!("activate {}", self.name));
        if self.fail_activate {
            Err(ComponentError::new("no device"))
        } else {
            Ok(())
        }
    }
    fn execute(&mut self, _: &Invocation, _: &mut GraphContext) -> Result<(), ComponentError> {
        Ok(())
    }
    fn deactivate(&mut self) {
        self.events
            .lock()
            .unwrap()
            .push(format!("deactivate {}", self.name));
    }
}

#[test]
fn started_components_are_deactivated_in_reverse_startup_order_even_after_an_activation_error() {
    let rt = runtime(1);
    let events = Arc::new(Mutex::new(Vec::new()));
    let mut g = GraphBuilder::new();
    g.lane(LaneSpec::event_loop("main")).unwrap();
    for (name, p, fail) in [
        ("c", Priority::Low, true),
        ("a", Priority::High, false),
        ("b", Priority::Normal, false),
    ] {
        let e = events.clone();
        g.component(name, "main", Execution::with_priority(p), move || {
            Lifecycle {
                name,
                fail_activate: fail,
                events: e.clone(),
            }
        })
        .unwrap();
    }
    let r = lanes::run(g.build().unwrap(), &rt, iterations(5));
    assert_eq!(r.stop_reason, StopReason::Error);
    assert_eq!(r.epochs, 0);
    let e = r.error.unwrap();
    assert_eq!(e.kind, RunErrorKind::ActivateFailed("no device".into()));
    assert_eq!(e.component.as_deref(), Some("c"));
    assert_eq!(
        *events.lock().unwrap(),
        [
            "activate a",
            "activate b",
            "activate c",
            "deactivate b",
            "deactivate a"
        ]
    );
}
