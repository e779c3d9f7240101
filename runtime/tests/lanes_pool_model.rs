//! Model test of thread-pool admission: for any sequence of batches
//! submitted while the lane's one slot is held, the jobs run in the seed's
//! order (class, enqueue order, component id, index) when aging is off, and
//! the overflow counts match a model queue.
#![cfg(not(loom))]

use std::sync::{Arc, Condvar, Mutex};

use magpie_runtime::lanes::{
    Dispatch, Job, LaneRuntime, OverflowPolicy, PoolLane, Priority, ThreadPoolSpec,
};
use proptest::prelude::*;

type Key = (u8, usize, usize, usize); // (rank, batch, component, index)

fn run_model(batches: &[Vec<(u8, usize)>], capacity: Option<usize>) -> (Vec<Key>, Vec<Key>, u64) {
    let rt = LaneRuntime::new(2).unwrap();
    let pool = PoolLane::new(
        &ThreadPoolSpec {
            max_threads: 1,
            queue_capacity: capacity,
            overflow: OverflowPolicy::RejectNew,
            aging_step: 0,
        },
        &rt,
    );
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let g = gate.clone();
    let _ = pool.submit(Job {
        component: usize::MAX,
        index: 0,
        priority: Priority::High,
        reentrant: false,
        run: Box::new(move |_| {
            let mut open = g.0.lock().unwrap();
            while !*open {
                open = g.1.wait(open).unwrap();
            }
            None
        }),
    });
    let ran = Arc::new(Mutex::new(Vec::new()));
    let rejected = Arc::new(Mutex::new(Vec::new()));
    for (b, batch) in batches.iter().enumerate() {
        let jobs = batch
            .iter()
            .enumerate()
            .map(|(i, &(rank, component))| {
                let (ran, rejected) = (ran.clone(), rejected.clone());
                let key = (rank, b, component, i);
                Job {
                    component,
                    index: i,
                    priority: Priority::from_rank(rank),
                    reentrant: true,
                    run: Box::new(move |d| {
                        match d {
                            Dispatch::Run { .. } => ran.lock().unwrap().push(key),
                            Dispatch::Dropped(_) => rejected.lock().unwrap().push(key),
                        }
                        None
                    }),
                }
            })
            .collect();
        let _ = pool.submit_batch(jobs);
    }
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
    pool.wait_idle();
    let ran = ran.lock().unwrap().clone();
    let rejected = rejected.lock().unwrap().clone();
    (ran, rejected, pool.stats().rejected)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 64 }))]

    #[test]
    fn jobs_run_in_class_then_enqueue_then_component_order(
        batches in prop::collection::vec(
            prop::collection::vec((0u8..4, 0usize..5), 1..5), 1..8),
        capacity in prop::option::of(0usize..12),
    ) {
        let (ran, rejected, count) = run_model(&batches, capacity);
        // The model: every batch's jobs sorted by (rank, component, index)
        // are admitted until `capacity` wait; the rest are rejected.
        let mut waiting: Vec<Key> = Vec::new();
        let mut model_rejected: Vec<Key> = Vec::new();
        for (b, batch) in batches.iter().enumerate() {
            let mut keys: Vec<Key> = batch
                .iter()
                .enumerate()
                .map(|(i, &(rank, c))| (rank, b, c, i))
                .collect();
            keys.sort_by_key(|&(r, _, c, i)| (r, c, i));
            for k in keys {
                if capacity.is_some_and(|cap| waiting.len() >= cap) {
                    model_rejected.push(k);
                } else {
                    waiting.push(k);
                }
            }
        }
        waiting.sort();
        prop_assert_eq!(&ran, &waiting);
        let mut rejected_sorted = rejected.clone();
        rejected_sorted.sort();
        model_rejected.sort();
        prop_assert_eq!(rejected_sorted, model_rejected);
        prop_assert_eq!(count as usize, rejected.len());
    }
}
