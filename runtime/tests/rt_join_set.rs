//! `JoinSet`, `task::id`, `Runtime::enter`, `Handle::block_on` and
//! `Handle::metrics`.
#![cfg(not(loom))]

use std::collections::HashSet;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use magpie_core::sync::atomic::{AtomicUsize, Ordering};
use magpie_runtime::time;
use magpie_runtime::{spawn, task, Handle, JoinSet, Runtime};

fn rt(workers: usize) -> Runtime {
    Runtime::builder().worker_threads(workers).build().unwrap()
}

#[test]
fn join_next_yields_every_output_once_then_none() {
    const N: u64 = 1000;
    let rt = rt(2);
    let (seen, len_before) = rt.block_on(async {
        let mut set = JoinSet::new();
        for i in 0..N {
            set.spawn(async move { i });
        }
        let len_before = set.len();
        let mut seen = HashSet::new();
        while let Some(out) = set.join_next().await {
            assert!(seen.insert(out.unwrap()), "an output came twice");
        }
        assert!(set.is_empty());
        assert!(set.join_next().await.is_none());
        (seen, len_before)
    });
    assert_eq!(len_before, N as usize);
    assert_eq!(seen, (0..N).collect::<HashSet<_>>());
}

#[test]
fn join_next_follows_completion_order() {
    let rt = Runtime::builder()
        .worker_threads(2)
        .start_paused(true)
        .build()
        .unwrap();
    let order = rt.block_on(async {
        let mut set = JoinSet::new();
        for s in [3u64, 1, 2] {
            set.spawn(async move {
                time::sleep(Duration::from_secs(s)).await;
                s
            });
        }
        let mut order = Vec::new();
        while let Some(out) = set.join_next().await {
            order.push(out.unwrap());
        }
        order
    });
    assert_eq!(order, vec![1, 2, 3]);
}

#[test]
fn abort_all_cancels_and_drop_aborts_the_tasks_left() {
    let rt = rt(2);
    let dropped = Arc::new(AtomicUsize::new(0));
    struct CountDrop(Arc<AtomicUsize>);
    impl Drop for CountDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let cancelled = rt.block_on({
        let dropped = dropped.clone();
        async move {
            let mut set = JoinSet::new();
            for _ in 0..5 {
                let guard = CountDrop(dropped.clone());
                set.spawn(async move {
                    let _guard = guard;
                    std::future::pending::<()>().await
                });
            }
            set.abort_all();
            let mut cancelled = 0;
            while let Some(out) = set.join_next().await {
                cancelled += usize::from(out.unwrap_err().is_cancelled());
            }
            // Dropping a set aborts what is still in it.
            let mut set2 = JoinSet::new();
            for _ in 0..3 {
                let guard = CountDrop(dropped.clone());
                set2.spawn(async move {
                    let _guard = guard;
                    std::future::pending::<()>().await
                });
            }
            drop(set2);
            cancelled
        }
    });
    assert_eq!(cancelled, 5);
    for _ in 0..60_000 {
        if dropped.load(Ordering::SeqCst) == 8 {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        8,
        "every future was dropped"
    );
}

#[test]
fn task_id_is_the_spawned_tasks_own() {
    let rt = rt(2);
    let (inside, handle_id) = rt.block_on(async {
        let h = spawn(async { task::id() });
        let handle_id = h.id();
        (h.await.unwrap(), handle_id)
    });
    assert_eq!(inside, handle_id);
    assert!(task::try_id().is_none(), "no task outside the runtime");
}

#[test]
fn enter_makes_spawn_and_timers_work_outside_block_on() {
    let rt = rt(1);
    let (tx, rx) = mpsc::channel();
    {
        let _guard = rt.enter();
        assert!(Handle::try_current().is_some());
        let _sleep = time::sleep(Duration::from_millis(1)); // needs the driver
        drop(spawn(async move {
            let _ = tx.send(7);
        }));
    }
    assert!(
        Handle::try_current().is_none(),
        "the guard restored nothing"
    );
    assert_eq!(rx.recv_timeout(Duration::from_secs(60)).unwrap(), 7);
}

#[test]
fn handle_block_on_runs_a_future_from_another_thread() {
    let rt = rt(2);
    let h = rt.handle().clone();
    let out = std::thread::spawn(move || h.block_on(async { spawn(async { 11 }).await.unwrap() }))
        .join()
        .unwrap();
    assert_eq!(out, 11);
}

#[test]
fn metrics_count_workers_polls_and_live_tasks() {
    const N: u64 = 500;
    let rt = rt(2);
    let h = rt.handle().clone();
    assert_eq!(h.metrics().workers, 2);
    let blocker = rt.spawn(std::future::pending::<()>());
    rt.block_on(async {
        for i in 0..N {
            spawn(async move { i }).await.unwrap();
        }
    });
    // Workers publish on their way to sleep, and a completing task unlinks
    // just after waking its joiner: wait (bounded) for both.
    for _ in 0..60_000 {
        let m = h.metrics();
        if m.polls >= N && m.live_tasks == 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let m = h.metrics();
    assert!(m.polls >= N, "{} polls for {N} tasks", m.polls);
    assert_eq!(m.polls, m.per_worker.iter().map(|w| w.polls).sum::<u64>());
    assert_eq!(m.live_tasks, 1, "only the pending task is alive");
    assert_eq!(m.io_events, 0);
    blocker.abort();
}
