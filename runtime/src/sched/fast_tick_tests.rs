//! The fast tick (README.md, "The fast tick") skips the full search only
//! on ticks where that search would have done nothing but pop the private
//! stack. These tests run a worker whose private stack never runs dry (a
//! chain: each task spawns the next locally) in the simulator, and check
//! that what the full path does on its special ticks still happens on time.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use super::{LifoMode, LocalMode, SchedEvent, Source, BUDGET_PER_TICK, MAX_GLOBAL_INTERVAL};
use crate::executor::WorkerCtx;
use crate::sim::{simulate, ExternalAction, SimConfig, SimOutcome, TraceEntry};

#[derive(Clone, Copy, Debug)]
enum Task {
    /// Spawns `Chain(n - 1)` locally while `n > 0`.
    Chain(u32),
    /// Spawned onto the global queue by a chain task.
    Marker(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    Chain,
    MarkerSpawned(u32),
    MarkerRan(u32),
}

fn one_worker(seed: u64) -> SimConfig {
    SimConfig {
        workers: 1,
        seed,
        lifo_mode: LifoMode::Owner,
        local_mode: LocalMode::Split,
        max_steps: 1_000_000,
        ..SimConfig::default()
    }
}

#[test]
fn a_worker_busy_on_its_private_stack_looks_at_the_global_queue_every_interval() {
    const CHAIN: u32 = if cfg!(miri) { 600 } else { 5_000 };
    for seed in 0..if cfg!(miri) { 2 } else { 20 } {
        let log = Rc::new(RefCell::new(Vec::new()));
        let outstanding = Rc::new(RefCell::new(None::<u32>));
        let (l, o) = (log.clone(), outstanding.clone());
        let next_marker = Cell::new(0u32);
        let report = simulate(
            one_worker(seed),
            vec![
                ExternalAction::Spawn(Task::Chain(CHAIN)),
                ExternalAction::Join,
            ],
            move |task: Task, ctx: &mut WorkerCtx<Task, ()>| match task {
                Task::Chain(n) => {
                    l.borrow_mut().push(Seen::Chain);
                    if n > 0 {
                        ctx.spawn_local(Task::Chain(n - 1));
                    }
                    // One marker in the global queue at a time, so each is
                    // taken by the first global look after its spawn.
                    if o.borrow().is_none() {
                        let k = next_marker.get();
                        next_marker.set(k + 1);
                        *o.borrow_mut() = Some(k);
                        l.borrow_mut().push(Seen::MarkerSpawned(k));
                        ctx.spawn_global(Task::Marker(k));
                    }
                }
                Task::Marker(k) => {
                    assert_eq!(*o.borrow(), Some(k));
                    *o.borrow_mut() = None;
                    l.borrow_mut().push(Seen::MarkerRan(k));
                }
            },
        );
        assert_eq!(report.outcome, SimOutcome::Terminated, "seed {seed}");
        let log = log.borrow();
        let mut waited = None;
        let mut markers_in_time = 0;
        for seen in log.iter() {
            match *seen {
                Seen::Chain => {
                    if let Some(w) = waited.as_mut() {
                        *w += 1;
                    }
                }
                Seen::MarkerSpawned(_) => waited = Some(0u32),
                Seen::MarkerRan(k) => {
                    let w = waited.take().expect("a marker ran before its spawn");
                    // Its spawning task was running; a global look comes
                    // within `global_interval` (at most MAX_GLOBAL_INTERVAL)
                    // ticks after it, and the marker is all it finds.
                    assert!(
                        w <= MAX_GLOBAL_INTERVAL,
                        "seed {seed}: marker {k} waited {w} chain tasks"
                    );
                    markers_in_time += 1;
                }
            }
        }
        let chain_runs = log.iter().filter(|s| **s == Seen::Chain).count() as u32;
        assert_eq!(chain_runs, CHAIN + 1, "seed {seed}");
        assert!(
            markers_in_time >= CHAIN / MAX_GLOBAL_INTERVAL,
            "seed {seed}: only {markers_in_time} markers ran during the chain"
        );
        // Every task is counted once in the metrics, fast ticks included,
        // and the chain's tasks came from the local queue.
        let m = &report.metrics.total;
        assert_eq!(m.tasks_run() as usize, log.len() - markers_in_time as usize);
        let local_runs = report
            .trace
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    TraceEntry::Sched {
                        event: SchedEvent::Run {
                            source: Source::Local
                        },
                        ..
                    }
                )
            })
            .count() as u64;
        assert_eq!(m.tasks_local, local_runs, "seed {seed}");
        assert!(m.tasks_local >= u64::from(CHAIN), "seed {seed}: {m:?}");
    }
}

#[test]
fn shutdown_stops_a_worker_busy_on_its_private_stack_within_one_budget() {
    const CHAIN: u32 = if cfg!(miri) { 1_000 } else { 100_000 };
    for seed in 0..if cfg!(miri) { 2 } else { 20 } {
        let report = simulate(
            one_worker(seed),
            vec![
                ExternalAction::Spawn(Task::Chain(CHAIN)),
                ExternalAction::Shutdown,
            ],
            |task: Task, ctx: &mut WorkerCtx<Task, ()>| {
                if let Task::Chain(n @ 1..) = task {
                    ctx.spawn_local(Task::Chain(n - 1));
                }
            },
        );
        assert_eq!(report.outcome, SimOutcome::Terminated, "seed {seed}");
        let shutdown_at = report
            .trace
            .iter()
            .position(|e| matches!(e, TraceEntry::External { index: 1, .. }))
            .expect("the shutdown ran");
        let runs_after = report.trace[shutdown_at..]
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    TraceEntry::Sched {
                        event: SchedEvent::Run { .. },
                        ..
                    }
                )
            })
            .count();
        // The done flag is read at the start of every tick of
        // BUDGET_PER_TICK tasks: at most that many run after the shutdown.
        assert!(
            runs_after <= BUDGET_PER_TICK as usize,
            "seed {seed}: {runs_after} tasks ran after the shutdown"
        );
        assert!(report.metrics.tasks_run() < u64::from(CHAIN), "seed {seed}");
    }
}
