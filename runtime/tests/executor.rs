//! Behaviour of the typed executor on real threads.
#![cfg(not(loom))]

use magpie_core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use magpie_runtime::{Executor, ExecutorConfig, WorkerCtx};

fn cfg(workers: usize) -> ExecutorConfig {
    ExecutorConfig {
        workers,
        pin_threads: false,
        ..ExecutorConfig::default()
    }
}

/// A tree task: `(id, depth)`. Node `id` has children `2id+1` and `2id+2`.
type Node = (u32, u32);

fn tree_runner(
    seen: Arc<Vec<AtomicU64>>,
) -> impl Fn(Node, &mut WorkerCtx<Node, ()>) + Send + Sync + 'static {
    move |(id, depth), ctx| {
        seen[id as usize].fetch_add(1, Ordering::Relaxed);
        if depth > 0 {
            ctx.spawn_local((2 * id + 1, depth - 1));
            if id % 7 == 0 {
                ctx.spawn_global((2 * id + 2, depth - 1));
            } else {
                ctx.spawn_local((2 * id + 2, depth - 1));
            }
        }
    }
}

#[test]
fn spawn_tree_runs_every_task_exactly_once() {
    const DEPTH: u32 = if cfg!(miri) { 6 } else { 16 };
    let nodes = (1usize << (DEPTH + 1)) - 1;
    for workers in [1, 2, 3, 4] {
        let seen: Arc<Vec<AtomicU64>> = Arc::new((0..nodes).map(|_| AtomicU64::new(0)).collect());
        let ex = Executor::new(cfg(workers), |_| (), tree_runner(seen.clone()));
        ex.spawn_external((0, DEPTH)).unwrap();
        let metrics = ex.join();
        assert!(
            seen.iter().all(|c| c.load(Ordering::Relaxed) == 1),
            "workers={workers}"
        );
        assert_eq!(metrics.tasks_run(), nodes as u64);
        assert_eq!(metrics.per_worker.len(), workers);
    }
}

#[test]
fn outside_producers_and_a_spawn_tree_finish_exactly_once_under_join() {
    const PRODUCERS: usize = 3;
    const PER_PRODUCER: u32 = if cfg!(miri) { 50 } else { 20_000 };
    const DEPTH: u32 = 10;
    let tree_nodes = (1usize << (DEPTH + 1)) - 1;
    // Tasks: ids below `tree_nodes` are tree nodes; the rest are producer tasks.
    let total = tree_nodes + PRODUCERS * PER_PRODUCER as usize;
    let seen: Arc<Vec<AtomicU64>> = Arc::new((0..total).map(|_| AtomicU64::new(0)).collect());
    let s = seen.clone();
    let tree = tree_nodes as u32;
    let ex = Executor::new(
        cfg(2),
        |_| (),
        move |(id, depth): Node, ctx: &mut WorkerCtx<Node, ()>| {
            s[id as usize].fetch_add(1, Ordering::Relaxed);
            if id < tree && depth > 0 {
                ctx.spawn_local((2 * id + 1, depth - 1));
                ctx.spawn_local((2 * id + 2, depth - 1));
            }
        },
    );
    ex.spawn_external((0, DEPTH)).unwrap();
    let start = Arc::new(Barrier::new(PRODUCERS + 1));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let handle = ex.handle();
            let start = start.clone();
            thread::spawn(move || {
                start.wait();
                let base = tree + p as u32 * PER_PRODUCER;
                let mut batch = Vec::new();
                for i in 0..PER_PRODUCER {
                    if p == 0 {
                        handle.spawn((base + i, 0)).unwrap();
                    } else {
                        batch.push((base + i, 0));
                        if batch.len() == 100 {
                            handle.spawn_batch(std::mem::take(&mut batch)).unwrap();
                        }
                    }
                }
                if !batch.is_empty() {
                    handle.spawn_batch(batch).unwrap();
                }
            })
        })
        .collect();
    start.wait();
    for p in producers {
        p.join().unwrap();
    }
    let metrics = ex.join();
    assert!(seen.iter().all(|c| c.load(Ordering::Relaxed) == 1));
    assert_eq!(metrics.tasks_run(), total as u64);
}

#[test]
fn racing_shutdown_never_runs_a_task_twice_and_refuses_later_spawns() {
    const ROUNDS: usize = if cfg!(miri) { 2 } else { 50 };
    const TREE: usize = (1 << 13) - 1; // depth 12
    const SPAM: usize = 10_000;
    for round in 0..ROUNDS {
        let counts: Arc<Vec<AtomicU64>> =
            Arc::new((0..TREE + SPAM).map(|_| AtomicU64::new(0)).collect());
        let c = counts.clone();
        let ex = Executor::new(
            cfg(2),
            |_| (),
            move |(id, depth): Node, ctx: &mut WorkerCtx<Node, ()>| {
                c[id as usize].fetch_add(1, Ordering::Relaxed);
                if (id as usize) < TREE && depth > 0 {
                    ctx.spawn_local((2 * id + 1, depth - 1));
                    ctx.spawn_local((2 * id + 2, depth - 1));
                }
            },
        );
        ex.spawn_external((0, 12)).unwrap();
        let handle = ex.handle();
        let spammer = thread::spawn(move || {
            let mut refused_at = None;
            for i in 0..SPAM {
                if handle.spawn(((TREE + i) as u32, 0)).is_err() {
                    refused_at = Some(i);
                    break;
                }
            }
            refused_at
        });
        if round % 2 == 0 {
            thread::yield_now();
        }
        ex.shutdown();
        assert_eq!(
            ex.spawn_external((0, 0)),
            Err((0, 0)),
            "spawn after shutdown must fail"
        );
        let refused_at = spammer.join().unwrap();
        let _ = ex.join();
        // A shutdown may drop queued tasks; it never runs one twice, and it never
        // runs a spawn it refused.
        assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) <= 1));
        if let Some(i) = refused_at {
            assert_eq!(counts[TREE + i].load(Ordering::Relaxed), 0);
        }
    }
}

#[test]
fn shutdown_gives_the_task_back() {
    let ex = Executor::new(cfg(2), |_| (), |_: u64, _: &mut WorkerCtx<u64, ()>| {});
    let handle = ex.handle();
    assert!(handle.is_accepting());
    ex.shutdown();
    assert!(!handle.is_accepting());
    assert_eq!(handle.spawn(42), Err(42));
    assert_eq!(ex.spawn_external(7), Err(7));
    assert_eq!(handle.spawn_batch(vec![1, 2, 3]), Err(vec![1, 2, 3]));
    let _ = ex.join();
}

#[test]
fn spawn_after_join_began_is_refused() {
    let ex = Executor::new(cfg(2), |_| (), |_: u64, _: &mut WorkerCtx<u64, ()>| {});
    let handle = ex.handle();
    let metrics = ex.join();
    assert_eq!(metrics.tasks_run(), 0);
    assert_eq!(handle.spawn(5), Err(5));
}

#[test]
fn join_with_no_tasks_returns() {
    for workers in [1, 2, 8] {
        let ex = Executor::new(cfg(workers), |_| (), |_: u8, _: &mut WorkerCtx<u8, ()>| {});
        let metrics = ex.join();
        assert_eq!(metrics.tasks_run(), 0);
        assert_eq!(metrics.per_worker.len(), workers);
    }
}

#[test]
fn a_panicking_task_is_raised_by_join_after_the_rest_ran() {
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let ex = Executor::new(
        cfg(2),
        |_| (),
        move |n: u32, ctx: &mut WorkerCtx<u32, ()>| {
            r.fetch_add(1, Ordering::Relaxed);
            if n == 13 {
                panic!("task 13 failed");
            }
            if n < 100 {
                ctx.spawn_local(n + 100);
            }
        },
    );
    ex.spawn_external_batch((0..100).collect()).unwrap();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ex.join()));
    let payload = result.expect_err("join must raise the task's panic");
    let msg = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(|s| s.as_str()))
        .unwrap_or("");
    assert_eq!(msg, "task 13 failed");
    // 100 roots, 99 children (task 13 panicked before spawning its child).
    assert_eq!(ran.load(Ordering::Relaxed), 199);
}

#[test]
fn only_the_first_of_several_panics_is_raised() {
    let ex = Executor::new(
        cfg(2),
        |_| (),
        |n: u32, _: &mut WorkerCtx<u32, ()>| {
            panic!("panic {n}");
        },
    );
    ex.spawn_external_batch((0..10).collect()).unwrap();
    let payload = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ex.join())).unwrap_err();
    let msg = payload
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(msg.starts_with("panic "), "{msg}");
}

#[test]
fn handles_cloned_across_many_threads_all_spawn() {
    const THREADS: usize = 16;
    const EACH: u64 = if cfg!(miri) { 10 } else { 5_000 };
    let sum = Arc::new(AtomicU64::new(0));
    let s = sum.clone();
    let ex = Executor::new(
        cfg(2),
        |_| (),
        move |n: u64, _: &mut WorkerCtx<u64, ()>| {
            s.fetch_add(n, Ordering::Relaxed);
        },
    );
    let handle = ex.handle();
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let h = handle.clone();
            thread::spawn(move || {
                let h2 = h.clone();
                for i in 0..EACH {
                    let h = if i % 2 == 0 { &h } else { &h2 };
                    h.spawn(t as u64 * EACH + i + 1).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let metrics = ex.join();
    let n = THREADS as u64 * EACH;
    assert_eq!(sum.load(Ordering::Relaxed), n * (n + 1) / 2);
    assert_eq!(metrics.tasks_run(), n);
}

#[test]
fn scratch_is_made_once_per_worker_on_its_thread() {
    let made = Arc::new(AtomicUsize::new(0));
    let m = made.clone();
    let ex = Executor::new(
        cfg(3),
        move |id| {
            m.fetch_add(1, Ordering::Relaxed);
            (id, magpie_runtime::current_worker_id())
        },
        |_: u8, ctx: &mut WorkerCtx<u8, (usize, Option<usize>)>| {
            assert_eq!(ctx.scratch.0, ctx.worker_id);
            assert_eq!(ctx.scratch.1, Some(ctx.worker_id));
            assert_eq!(magpie_runtime::current_worker_id(), Some(ctx.worker_id));
        },
    );
    ex.spawn_external_batch(vec![0; 64]).unwrap();
    let _ = ex.join();
    assert_eq!(made.load(Ordering::Relaxed), 3);
    assert_eq!(magpie_runtime::current_worker_id(), None);
}

#[test]
fn an_idle_executor_parks_its_workers() {
    let ex = Executor::new(cfg(2), |_| (), |_: u8, _: &mut WorkerCtx<u8, ()>| {});
    // Liveness, not timing: wait (generously) until both workers are parked.
    let deadline = Instant::now() + Duration::from_secs(30);
    while ex.parked_workers() < 2 {
        assert!(Instant::now() < deadline, "workers never parked");
        thread::sleep(Duration::from_millis(5));
    }
    let metrics = ex.join();
    assert!(metrics.per_worker.iter().all(|w| w.parks >= 1));
}
