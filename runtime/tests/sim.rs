//! The deterministic simulator: replay, exactly-once execution and termination
//! over many seeds, with the same worker-loop code the threads run.
#![cfg(not(loom))]

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use magpie_core::rng::XorShift64;
use magpie_runtime::sim::{simulate, ExternalAction, SimConfig, SimOutcome, SimReport};
use magpie_runtime::{LifoMode, LocalMode, WorkerCtx};

/// A task: its id and how many more generations it spawns.
#[derive(Clone, Copy, Debug)]
struct Task {
    id: u32,
    depth: u8,
}

struct Scenario {
    cfg: SimConfig,
    script: Vec<ExternalAction<Task>>,
    /// Ids the script spawns (in order), for checking refusals.
    external_ids: Vec<Vec<u32>>,
    next_id: u32,
    /// Whether spawns may come after the join (and so be refused).
    join_in_middle: bool,
}

fn scenario(seed: u64) -> Scenario {
    let mut rng = XorShift64::new(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1);
    let workers = 1 + rng.next_usize(5);
    let join_in_middle = rng.next_usize(4) == 0;
    let actions = 1 + rng.next_usize(6);
    let mut next_id = 0u32;
    let mut script = Vec::new();
    let mut external_ids = Vec::new();
    let join_at = if join_in_middle {
        rng.next_usize(actions + 1)
    } else {
        actions
    };
    for i in 0..=actions {
        if i == join_at {
            script.push(ExternalAction::Join);
            external_ids.push(Vec::new());
        }
        if i == actions {
            break;
        }
        let depth = rng.next_usize(5) as u8;
        if rng.next_usize(3) == 0 {
            let n = 1 + rng.next_usize(6);
            let ids: Vec<u32> = (0..n).map(|k| next_id + k as u32).collect();
            next_id += n as u32;
            script.push(ExternalAction::SpawnBatch(
                ids.iter().map(|&id| Task { id, depth }).collect(),
            ));
            external_ids.push(ids);
        } else {
            script.push(ExternalAction::Spawn(Task { id: next_id, depth }));
            external_ids.push(vec![next_id]);
            next_id += 1;
        }
    }
    Scenario {
        cfg: SimConfig {
            workers,
            seed,
            steal_tries: 1 + rng.next_usize(4) as u32,
            park_timeouts: rng.next_usize(3) == 0,
            max_steps: 200_000,
            lifo_mode: if seed % 2 == 0 {
                LifoMode::Owner
            } else {
                LifoMode::Stealable
            },
            local_mode: if (seed / 2) % 2 == 0 {
                LocalMode::Split
            } else {
                LocalMode::Ring
            },
        },
        script,
        external_ids,
        next_id,
        join_in_middle,
    }
}

/// What the runner saw.
#[derive(Default)]
struct Ledger {
    runs: RefCell<Vec<u32>>,
    spawned_children: RefCell<Vec<u32>>,
    next_id: Cell<u32>,
}

fn run(s: Scenario) -> (SimReport, Rc<Ledger>, Vec<Vec<u32>>, bool) {
    let ledger = Rc::new(Ledger::default());
    ledger.next_id.set(1_000_000);
    let l = ledger.clone();
    let Scenario {
        cfg,
        script,
        external_ids,
        join_in_middle,
        ..
    } = s;
    let report = simulate(
        cfg,
        script,
        move |task: Task, ctx: &mut WorkerCtx<Task, ()>| {
            l.runs.borrow_mut().push(task.id);
            if task.depth > 0 {
                let fanout = 1 + (task.id % 3);
                for k in 0..fanout {
                    let id = l.next_id.get();
                    l.next_id.set(id + 1);
                    l.spawned_children.borrow_mut().push(id);
                    let child = Task {
                        id,
                        depth: task.depth - 1,
                    };
                    if (task.id + k) % 5 == 0 {
                        ctx.spawn_global(child);
                    } else {
                        ctx.spawn_local(child);
                    }
                }
            }
        },
    );
    (report, ledger, external_ids, join_in_middle)
}

fn check(seed: u64) -> SimReport {
    let s = scenario(seed);
    let total_external = s.next_id as usize;
    let (report, ledger, _external_ids, join_in_middle) = run(s);
    assert_eq!(
        report.outcome,
        SimOutcome::Terminated,
        "seed {seed}: {report}"
    );
    let runs = ledger.runs.borrow();
    let mut counts = std::collections::HashMap::new();
    for id in runs.iter() {
        *counts.entry(*id).or_insert(0u32) += 1;
    }
    assert!(
        counts.values().all(|&c| c == 1),
        "seed {seed}: a task ran twice"
    );
    // Every child spawned ran.
    for id in ledger.spawned_children.borrow().iter() {
        assert_eq!(
            counts.get(id),
            Some(&1),
            "seed {seed}: child {id} never ran"
        );
    }
    // Every accepted outside task ran; refused ones did not.
    let external_run = counts.keys().filter(|&&id| id < 1_000_000).count();
    assert_eq!(
        external_run + report.refused,
        total_external,
        "seed {seed}: outside tasks lost"
    );
    if !join_in_middle {
        assert_eq!(report.refused, 0, "seed {seed}");
    }
    assert_eq!(report.metrics.tasks_run() as usize, runs.len());
    report
}

#[test]
fn same_seed_gives_the_same_trace() {
    for seed in [1u64, 7, 42, 1234, 99_999] {
        let a = run(scenario(seed)).0;
        let b = run(scenario(seed)).0;
        assert_eq!(a.trace, b.trace, "seed {seed}");
        assert_eq!(a.trace_digest(), b.trace_digest());
    }
    // And different seeds explore different schedules.
    let digests: std::collections::HashSet<u64> = (0..20)
        .map(|seed| run(scenario(seed)).0.trace_digest())
        .collect();
    assert!(digests.len() > 10);
}

#[test]
fn ten_thousand_seeds_run_every_task_exactly_once_and_terminate() {
    const SEEDS: u64 = if cfg!(miri) { 20 } else { 10_000 };
    let mut steps = 0;
    let (mut split_shares, mut ring_requests) = (0, 0);
    for seed in 0..SEEDS {
        let report = check(seed);
        steps += report.steps;
        match scenario(seed).cfg.local_mode {
            LocalMode::Split => split_shares += report.metrics.total.shares,
            LocalMode::Ring => ring_requests += report.metrics.total.share_requests,
        }
    }
    assert!(steps > SEEDS, "the simulator did real work");
    if !cfg!(miri) {
        assert!(
            split_shares > 0,
            "the property run reached the split queue's share path"
        );
    }
    assert_eq!(ring_requests, 0, "the ring mode never asks for shares");
}

#[test]
fn split_queue_shares_a_spawn_tree_with_idle_workers() {
    // A binary tree of local spawns from one root: it grows on one worker's
    // private stack, so the others can get work only by asking for it.
    const DEPTH: u8 = 9;
    for seed in 0..50u64 {
        let cfg = SimConfig {
            workers: 3,
            seed,
            local_mode: LocalMode::Split,
            ..SimConfig::default()
        };
        let runs = Rc::new(Cell::new(0u32));
        let r = runs.clone();
        let report = simulate(
            cfg,
            vec![
                ExternalAction::Spawn(Task {
                    id: 0,
                    depth: DEPTH,
                }),
                ExternalAction::Join,
            ],
            move |task: Task, ctx: &mut WorkerCtx<Task, ()>| {
                r.set(r.get() + 1);
                if task.depth > 0 {
                    for _ in 0..2 {
                        ctx.spawn_local(Task {
                            id: 0,
                            depth: task.depth - 1,
                        });
                    }
                }
            },
        );
        assert_eq!(
            report.outcome,
            SimOutcome::Terminated,
            "seed {seed}: {report}"
        );
        assert_eq!(runs.get(), (1 << (DEPTH + 1)) - 1, "seed {seed}");
        let m = &report.metrics;
        assert!(m.total.shares > 0, "seed {seed}: no share\n{m}");
        assert_eq!(
            m.total.overflows, 0,
            "seed {seed}: the ring overflowed\n{m}"
        );
        let busy = m.per_worker.iter().filter(|w| w.tasks_run() > 0).count();
        assert!(busy >= 2, "seed {seed}: one worker ran the whole tree\n{m}");
    }
}

#[test]
fn many_workers_past_one_bitmap_word_terminate() {
    // 70 workers: the parked bitmap spans two words.
    let mut s = scenario(5);
    s.cfg.workers = 70;
    s.cfg.park_timeouts = false;
    s.script = vec![
        ExternalAction::SpawnBatch((0..200).map(|id| Task { id, depth: 2 }).collect()),
        ExternalAction::Join,
    ];
    s.next_id = 200;
    s.external_ids = vec![(0..200).collect(), vec![]];
    s.join_in_middle = false;
    let (report, ledger, _, _) = run(s);
    assert_eq!(report.outcome, SimOutcome::Terminated, "{report}");
    assert!(ledger.runs.borrow().len() >= 200);
}

#[test]
fn shutdown_in_the_simulator_stops_without_running_anything_twice() {
    for seed in 0..200u64 {
        let mut s = scenario(seed);
        let pos = (seed as usize) % (s.script.len() + 1);
        s.script.insert(pos, ExternalAction::Shutdown);
        let (report, ledger, _, _) = run(s);
        assert_eq!(
            report.outcome,
            SimOutcome::Terminated,
            "seed {seed}: {report}"
        );
        let runs = ledger.runs.borrow();
        let mut seen = std::collections::HashSet::new();
        assert!(runs.iter().all(|id| seen.insert(*id)), "seed {seed}");
    }
}

#[test]
#[ignore]
fn debug_seed() {
    let seed: u64 = std::env::var("SEED").unwrap().parse().unwrap();
    let s = scenario(seed);
    eprintln!("cfg {:?}\nscript {:?}", s.cfg, s.script);
    let (report, _, _, _) = run(s);
    for e in &report.trace {
        eprintln!("{e:?}");
    }
    eprintln!("{report}");
}
