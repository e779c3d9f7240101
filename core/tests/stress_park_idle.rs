//! Stress: real threads park and unpark through `Idle` + `Parker` while
//! producers push tasks one at a time. Every task must be taken exactly once
//! and every thread must end (a lost wakeup hangs the `Sleep::Park` run).
//! Sized for Miri.
#![cfg(not(loom))]

mod idle_pool;

use std::time::Duration;

use idle_pool::{run_worker, Pool, Sleep, Start};
use magpie_core::sync::atomic::Ordering;
use magpie_core::sync::{thread, Arc};

const WORKERS: usize = if cfg!(miri) { 3 } else { 4 };
const PRODUCERS: usize = 2;
const TASKS_PER_PRODUCER: usize = if cfg!(miri) { 30 } else { 50_000 };
/// A producer pauses after this many pushes, so workers run dry and park.
const BURST: usize = if cfg!(miri) { 5 } else { 64 };

fn run(sleep: Sleep) {
    let total = PRODUCERS * TASKS_PER_PRODUCER;
    let (pool, parkers) = Pool::new(WORKERS, total);
    let pool = Arc::new(pool);
    let workers: Vec<_> = parkers
        .into_iter()
        .enumerate()
        .map(|(id, parker)| {
            let pool = Arc::clone(&pool);
            thread::spawn(move || run_worker(&pool, id, &parker, Start::Running, sleep))
        })
        .collect();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|_| {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                for i in 1..=TASKS_PER_PRODUCER {
                    pool.push(1);
                    if i % BURST == 0 {
                        thread::sleep(Duration::from_micros(50));
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    let took: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
    assert_eq!(took, total, "every task taken exactly once");
    assert_eq!(pool.taken.load(Ordering::Relaxed), total);
    assert_eq!(pool.queued.load(Ordering::Relaxed), 0);
    // Shutdown woke everyone: no bit is left set, no worker counted parked.
    assert!((0..WORKERS).all(|id| !pool.idle.is_parked(id)));
    assert_eq!(pool.idle.num_parked(), 0);
    eprintln!(
        "{sleep:?}: {total} tasks, {} sleeps, {} wakes as a handed-out searcher",
        pool.sleeps.load(Ordering::Relaxed),
        pool.handed_out.load(Ordering::Relaxed)
    );
}

#[test]
fn every_task_is_taken_once_by_workers_that_park() {
    run(Sleep::Park);
}

/// Short timeouts send workers through the self-unpark path (`unpark(id)`
/// racing `unpark_one` on the same worker) over and over.
#[test]
fn every_task_is_taken_once_by_workers_whose_parks_time_out() {
    run(Sleep::Timeout(Duration::from_micros(20)));
}
