//! Timers driven by the runtime's workers: sleep and interval on a paused
//! clock (no wall-clock asserts) and on the real one (completion only).
#![cfg(not(loom))]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use magpie_runtime::time::{self, Instant, OverrunPolicy};
use magpie_runtime::{spawn, yield_now, Runtime};

fn paused(workers: usize) -> Runtime {
    Runtime::builder()
        .worker_threads(workers)
        .start_paused(true)
        .build()
        .unwrap()
}

/// Lets the workers run whatever the last `advance` woke.
async fn settle() {
    for _ in 0..50 {
        yield_now().await;
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Yields until `done` holds (bounded: a hang becomes a failure, and on a
/// loaded machine it simply takes longer; nothing is asserted on time).
async fn settle_until(done: impl Fn() -> bool) {
    for _ in 0..50_000 {
        if done() {
            return;
        }
        yield_now().await;
        std::thread::sleep(Duration::from_micros(200));
    }
    panic!("the expected sleeps never fired");
}

#[test]
fn sleeps_in_tasks_fire_when_paused_time_passes_their_deadline_in_order() {
    let rt = paused(2);
    let order = Arc::new(Mutex::new(Vec::new()));
    rt.block_on(async {
        let start = Instant::now();
        let mut handles = Vec::new();
        for ms in [30u64, 10, 20] {
            let order = order.clone();
            handles.push(spawn(async move {
                time::sleep(Duration::from_millis(ms)).await;
                let woke = Instant::now() - start;
                order.lock().unwrap().push((ms, woke));
            }));
        }
        settle().await;
        assert!(
            order.lock().unwrap().is_empty(),
            "a sleep fired before time moved"
        );
        time::advance(Duration::from_millis(10));
        settle_until(|| order.lock().unwrap().len() == 1).await;
        // One deadline per advance: two sleeps due at once may fire on two
        // workers in either order.
        time::advance(Duration::from_millis(10));
        settle_until(|| order.lock().unwrap().len() == 2).await;
        time::advance(Duration::from_millis(15));
        for h in handles {
            h.await.unwrap();
        }
    });
    let order = order.lock().unwrap();
    let firing: Vec<u64> = order.iter().map(|(ms, _)| *ms).collect();
    assert_eq!(firing, vec![10, 20, 30]);
    for (ms, woke) in order.iter() {
        assert!(
            *woke >= Duration::from_millis(*ms),
            "{ms} ms sleep woke early at {woke:?}"
        );
    }
}

#[test]
fn interval_in_a_task_ticks_on_the_paused_grid_with_each_policy() {
    for policy in [
        OverrunPolicy::DropTick,
        OverrunPolicy::SkipNext,
        OverrunPolicy::CatchUpOnce,
    ] {
        let rt = paused(1);
        let stats = rt.block_on(async move {
            let task = spawn(async move {
                let mut iv = time::interval(Duration::from_millis(10));
                iv.set_overrun_policy(policy);
                for _ in 0..5 {
                    iv.tick().await;
                }
                iv.stats()
            });
            for _ in 0..6 {
                settle().await;
                time::advance(Duration::from_millis(10));
            }
            task.await.unwrap()
        });
        assert_eq!(stats.ticks, 5, "{policy:?}");
        assert_eq!(
            stats.overruns, 0,
            "{policy:?}: a steady interval never overruns"
        );
    }
}

#[test]
fn a_real_sleep_completes() {
    let rt = Runtime::builder().worker_threads(2).build().unwrap();
    let elapsed = rt.block_on(async {
        let start = Instant::now();
        spawn(async { time::sleep(Duration::from_millis(5)).await })
            .await
            .unwrap();
        start.elapsed()
    });
    // Never early; how late depends on the machine, so no upper bound.
    assert!(elapsed >= Duration::from_millis(5));
}
