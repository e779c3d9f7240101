//! `spawn_blocking` on the bounded, growing pool, and `block_in_place`.
#![cfg(not(loom))]

use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use magpie_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use magpie_runtime::task::{block_in_place, spawn_blocking};
use magpie_runtime::{spawn, Handle, Runtime};

const GUARD: Duration = Duration::from_secs(60);

/// Polls `cond` every millisecond, at most 60 000 times.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..60_000 {
        if cond() {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("timed out waiting until {what}");
}

#[test]
fn spawn_blocking_returns_the_closures_value_and_its_panic_as_a_join_error() {
    let rt = Runtime::builder().worker_threads(1).build().unwrap();
    let (v, err) = rt.block_on(async {
        let v = spawn_blocking(|| 6 * 7).await.unwrap();
        let err = spawn_blocking(|| panic!("boom")).await.unwrap_err();
        (v, err)
    });
    assert_eq!(v, 42);
    assert!(err.is_panic());
}

#[test]
fn the_pool_grows_to_its_maximum_then_queues() {
    const MAX: usize = 3;
    const TASKS: usize = 7;
    let rt = Runtime::builder()
        .worker_threads(1)
        .max_blocking_threads(MAX)
        .build()
        .unwrap();
    let release = Arc::new(AtomicBool::new(false));
    let running = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..TASKS)
        .map(|i| {
            let release = release.clone();
            let running = running.clone();
            rt.handle().spawn_blocking(move || {
                running.fetch_add(1, Ordering::SeqCst);
                for _ in 0..60_000 {
                    if release.load(Ordering::SeqCst) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                i
            })
        })
        .collect();
    wait_until("MAX closures run", || running.load(Ordering::SeqCst) == MAX);
    let m = rt.handle().metrics();
    assert_eq!(m.blocking_threads, MAX, "never more than the maximum");
    assert_eq!(
        m.blocking_queue_depth,
        TASKS - MAX,
        "the rest wait in the queue"
    );
    assert_eq!(running.load(Ordering::SeqCst), MAX);
    release.store(true, Ordering::SeqCst);
    let outs = rt.block_on(async move {
        let mut outs = Vec::new();
        for h in handles {
            outs.push(h.await.unwrap());
        }
        outs
    });
    assert_eq!(outs, (0..TASKS).collect::<Vec<_>>());
}

#[test]
fn idle_pool_threads_exit_after_the_keep_alive() {
    let rt = Runtime::builder()
        .worker_threads(1)
        .thread_keep_alive(Duration::from_millis(20))
        .build()
        .unwrap();
    let barrier = Arc::new(Barrier::new(3));
    let hs: Vec<_> = (0..2)
        .map(|_| {
            let b = barrier.clone();
            rt.handle().spawn_blocking(move || {
                b.wait();
            })
        })
        .collect();
    barrier.wait(); // both closures run at once: two threads
    assert_eq!(rt.handle().metrics().blocking_threads, 2);
    rt.block_on(async move {
        for h in hs {
            h.await.unwrap();
        }
    });
    wait_until("the idle threads exit", || {
        rt.handle().metrics().blocking_threads == 0
    });
}

#[test]
fn shutdown_drops_queued_closures_and_waits_for_running_ones() {
    let rt = Runtime::builder()
        .worker_threads(1)
        .max_blocking_threads(1)
        .build()
        .unwrap();
    let started = Arc::new(AtomicBool::new(false));
    let finished = Arc::new(AtomicBool::new(false));
    let queued_ran = Arc::new(AtomicBool::new(false));
    let (s, f, q) = (started.clone(), finished.clone(), queued_ran.clone());
    let running = rt.handle().spawn_blocking(move || {
        s.store(true, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(30));
        f.store(true, Ordering::SeqCst);
    });
    let queued = rt
        .handle()
        .spawn_blocking(move || q.store(true, Ordering::SeqCst));
    wait_until("the first closure starts", || {
        started.load(Ordering::SeqCst)
    });
    rt.shutdown_timeout(GUARD);
    assert!(
        finished.load(Ordering::SeqCst),
        "shutdown waited for the running closure"
    );
    assert!(
        !queued_ran.load(Ordering::SeqCst),
        "the queued closure never ran"
    );
    assert!(running.is_finished() && queued.is_finished());
}

#[test]
fn block_in_place_lets_another_worker_run_the_tasks_queued_on_this_one() {
    let rt = Runtime::builder().worker_threads(2).build().unwrap();
    let (tx, rx) = mpsc::channel();
    let h = rt.handle().clone();
    std::thread::spawn(move || {
        let out = h.block_on(async {
            spawn(async {
                let flag = Arc::new(AtomicBool::new(false));
                let f2 = flag.clone();
                // Spawned from this worker: it lands in this worker's LIFO
                // slot, which no other worker can take. Without the hand-off
                // it would wait for us while we wait for it.
                let child = spawn(async move { f2.store(true, Ordering::SeqCst) });
                let seen = block_in_place(|| {
                    for _ in 0..60_000 {
                        if flag.load(Ordering::SeqCst) {
                            return true;
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    false
                });
                child.await.unwrap();
                seen
            })
            .await
            .unwrap()
        });
        let _ = tx.send(out);
    });
    assert!(rx.recv_timeout(GUARD).expect("no hang"));
}

#[test]
fn block_in_place_may_block_on_a_future_and_just_runs_outside_a_runtime() {
    assert_eq!(block_in_place(|| 5), 5);
    let rt = Runtime::builder().worker_threads(2).build().unwrap();
    let v = rt.block_on(async {
        spawn(async {
            block_in_place(|| Handle::current().block_on(async { spawn(async { 9 }).await }))
        })
        .await
        .unwrap()
    });
    assert_eq!(v.unwrap(), 9);
}

#[test]
fn blocking_closures_see_the_runtime_as_their_context() {
    let rt = Runtime::builder().worker_threads(1).build().unwrap();
    let v = rt.block_on(async {
        spawn_blocking(|| {
            let h = Handle::current();
            h.block_on(async { spawn(async { 3 }).await.unwrap() })
        })
        .await
        .unwrap()
    });
    assert_eq!(v, 3);
}
