//! The async runtime's behaviour, on real threads.
#![cfg(not(loom))]

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::Duration;

use magpie_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use magpie_runtime::{shield, spawn, yield_now, JoinHandle, Runtime};

fn rt(workers: usize) -> Runtime {
    Runtime::builder().worker_threads(workers).build().unwrap()
}

/// Polls `fut` to completion on this thread, outside any runtime.
fn block_on_outside<F: Future>(fut: F) -> F::Output {
    struct ThreadWake(thread::Thread);
    impl Wake for ThreadWake {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(ThreadWake(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        thread::park_timeout(Duration::from_millis(10));
    }
}

/// A future that is pending until `flag` is set, then ready; it stores its
/// waker in `slot` for someone else to wake.
struct Gate {
    flag: Arc<AtomicBool>,
    slot: Arc<Mutex<Option<Waker>>>,
}

impl Future for Gate {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        *self.slot.lock().unwrap() = Some(cx.waker().clone());
        if self.flag.load(Ordering::Acquire) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

#[test]
fn block_on_spawn_and_join_return_outputs() {
    let rt = rt(2);
    let out = rt.block_on(async {
        let handles: Vec<JoinHandle<u64>> =
            (0..100u64).map(|i| spawn(async move { i * 2 })).collect();
        let mut sum = 0;
        for h in handles {
            sum += h.await.unwrap();
        }
        sum
    });
    assert_eq!(out, 9900);
    let h = rt.spawn(async { "from outside" });
    assert_eq!(rt.block_on(h).unwrap(), "from outside");
}

#[test]
fn nested_spawns_and_yields_all_finish() {
    let rt = rt(2);
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    rt.block_on(async move {
        let mut handles = Vec::new();
        for _ in 0..50 {
            let c = c.clone();
            handles.push(spawn(async move {
                for _ in 0..20 {
                    yield_now().await;
                }
                let inner = spawn(async move {
                    c.fetch_add(1, Ordering::Relaxed);
                });
                inner.await.unwrap();
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
    });
    assert_eq!(count.load(Ordering::Relaxed), 50);
}

#[test]
fn a_wake_from_another_thread_resumes_the_task() {
    let rt = rt(2);
    let flag = Arc::new(AtomicBool::new(false));
    let slot = Arc::new(Mutex::new(None::<Waker>));
    let task = rt.spawn(Gate {
        flag: flag.clone(),
        slot: slot.clone(),
    });
    // Wait until the task has polled once and parked its waker.
    while slot.lock().unwrap().is_none() {
        thread::yield_now();
    }
    let waker_thread = {
        let flag = flag.clone();
        let slot = slot.clone();
        thread::spawn(move || {
            flag.store(true, Ordering::Release);
            let w = slot.lock().unwrap().take().unwrap();
            w.wake();
        })
    };
    waker_thread.join().unwrap();
    rt.block_on(task).unwrap();
}

#[test]
fn a_waker_that_outlives_its_task_is_harmless() {
    let rt = rt(1);
    let slot = Arc::new(Mutex::new(None::<Waker>));
    let s = slot.clone();
    rt.block_on(rt.spawn(async move {
        std::future::poll_fn(|cx| {
            *s.lock().unwrap() = Some(cx.waker().clone());
            Poll::Ready(())
        })
        .await;
    }))
    .unwrap();
    let waker = slot.lock().unwrap().take().unwrap();
    let clone = waker.clone();
    waker.wake_by_ref();
    waker.wake();
    drop(rt);
    clone.wake();
}

#[test]
fn a_panic_becomes_a_join_error() {
    let rt = rt(2);
    let err = rt
        .block_on(rt.spawn(async {
            panic!("boom");
        }))
        .unwrap_err();
    assert!(err.is_panic());
    assert!(!err.is_cancelled());
    let payload = err.into_panic();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));
    // The runtime is still fine.
    assert_eq!(rt.block_on(rt.spawn(async { 7 })).unwrap(), 7);
}

#[test]
fn abort_while_idle_cancels_the_task() {
    let rt = rt(2);
    let flag = Arc::new(AtomicBool::new(false));
    let slot = Arc::new(Mutex::new(None::<Waker>));
    let task = rt.spawn(Gate {
        flag,
        slot: slot.clone(),
    });
    while slot.lock().unwrap().is_none() {
        thread::yield_now();
    }
    task.abort();
    let err = rt.block_on(task).unwrap_err();
    assert!(err.is_cancelled());
}

#[test]
fn abort_while_scheduled_cancels_before_it_runs() {
    // One worker, kept busy, so the second task stays queued.
    let rt = rt(1);
    let release = Arc::new(AtomicBool::new(false));
    let r = release.clone();
    let ran = Arc::new(AtomicBool::new(false));
    let rn = ran.clone();
    let blocker = rt.spawn(async move {
        while !r.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
    });
    let queued = rt.spawn(async move {
        rn.store(true, Ordering::Release);
    });
    queued.abort();
    release.store(true, Ordering::Release);
    rt.block_on(blocker).unwrap();
    let err = rt.block_on(queued).unwrap_err();
    assert!(err.is_cancelled());
    assert!(!ran.load(Ordering::Acquire));
}

#[test]
fn abort_while_running_takes_effect_at_the_next_pending() {
    let rt = rt(2);
    let started = Arc::new(AtomicBool::new(false));
    let s = started.clone();
    let go = Arc::new(AtomicBool::new(false));
    let g = go.clone();
    let after = Arc::new(AtomicBool::new(false));
    let a = after.clone();
    let task = rt.spawn(async move {
        s.store(true, Ordering::Release);
        while !g.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        yield_now().await;
        a.store(true, Ordering::Release);
    });
    while !started.load(Ordering::Acquire) {
        thread::yield_now();
    }
    task.abort();
    go.store(true, Ordering::Release);
    let err = rt.block_on(task).unwrap_err();
    assert!(err.is_cancelled());
    assert!(
        !after.load(Ordering::Acquire),
        "ran past the yield after abort"
    );
}

#[test]
fn a_shield_defers_an_abort_until_it_ends() {
    let rt = rt(2);
    let inside = Arc::new(AtomicBool::new(false));
    let i = inside.clone();
    let go = Arc::new(AtomicBool::new(false));
    let g = go.clone();
    let finished_shield = Arc::new(AtomicBool::new(false));
    let f = finished_shield.clone();
    let after = Arc::new(AtomicBool::new(false));
    let a = after.clone();
    let task = rt.spawn(async move {
        shield(async {
            i.store(true, Ordering::Release);
            while !g.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
            // Several yields inside the shield: the abort must not cut in.
            for _ in 0..5 {
                yield_now().await;
            }
            f.store(true, Ordering::Release);
        })
        .await;
        yield_now().await;
        a.store(true, Ordering::Release);
    });
    while !inside.load(Ordering::Acquire) {
        thread::yield_now();
    }
    task.abort();
    go.store(true, Ordering::Release);
    let err = rt.block_on(task).unwrap_err();
    assert!(err.is_cancelled());
    assert!(
        finished_shield.load(Ordering::Acquire),
        "the shielded section was cut short"
    );
    assert!(
        !after.load(Ordering::Acquire),
        "the abort did not take effect after the shield"
    );
}

#[test]
fn shutdown_drops_pending_tasks_and_wakes_their_joiners() {
    let rt = rt(2);
    let dropped = Arc::new(AtomicUsize::new(0));
    struct CountDrop(Arc<AtomicUsize>);
    impl Drop for CountDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
    let (tx, rx) = mpsc::channel::<JoinHandle<()>>();
    for _ in 0..10 {
        let guard = CountDrop(dropped.clone());
        let h = rt.spawn(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        });
        tx.send(h).unwrap();
    }
    drop(tx);
    // Joiners waiting on another thread, outside the runtime.
    let joiners = thread::spawn(move || {
        rx.into_iter()
            .map(|h| block_on_outside(h).unwrap_err().is_cancelled())
            .filter(|c| *c)
            .count()
    });
    thread::sleep(Duration::from_millis(20));
    drop(rt);
    assert_eq!(joiners.join().unwrap(), 10);
    assert_eq!(dropped.load(Ordering::Relaxed), 10);
}

#[test]
fn spawning_after_shutdown_gives_a_cancelled_handle() {
    let rt = rt(1);
    let handle = rt.handle().clone();
    drop(rt);
    let h = handle.spawn(async { 1 });
    assert!(block_on_outside(h).unwrap_err().is_cancelled());
}

#[test]
#[should_panic(expected = "from within a magpie runtime")]
fn nested_block_on_is_refused() {
    let rt = rt(1);
    let rt2 = Runtime::builder().worker_threads(1).build().unwrap();
    rt.block_on(async move {
        rt2.block_on(async {});
    });
}

#[test]
fn block_on_inside_a_task_is_refused_with_a_clear_message() {
    let rt = rt(1);
    let rt2 = Arc::new(Runtime::builder().worker_threads(1).build().unwrap());
    let r2 = rt2.clone();
    let err = rt
        .block_on(rt.spawn(async move {
            r2.block_on(async {});
        }))
        .unwrap_err();
    let msg = err.into_panic();
    let msg = msg.downcast_ref::<&str>().copied().unwrap_or_default();
    assert!(
        msg.contains("block_on called from within a magpie runtime"),
        "{msg}"
    );
}

#[test]
#[should_panic(expected = "must be called from within a magpie runtime")]
fn spawn_outside_a_runtime_panics_clearly() {
    drop(spawn(async {}));
}

#[test]
fn shutdown_timeout_returns_even_with_a_busy_task() {
    let rt = rt(1);
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let _busy = rt.spawn(async move {
        while !s.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
    });
    thread::sleep(Duration::from_millis(10));
    rt.shutdown_timeout(Duration::from_millis(50));
    stop.store(true, Ordering::Release);
}

/// A yield lets the global queue go next: with one worker busy yielding, a
/// task spawned from outside runs within two yields of its spawn returning,
/// not after a whole global-queue interval (61 ticks at start, up to 255).
#[test]
fn a_yield_lets_a_task_waiting_in_the_global_queue_run_next() {
    let rt = rt(1);
    let spawned = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let (s, d) = (spawned.clone(), done.clone());
    let yielder = rt.spawn(async move {
        let mut yields_after_spawn = 0u32;
        while !d.load(Ordering::Acquire) {
            let seen = s.load(Ordering::Acquire);
            yield_now().await;
            if seen {
                yields_after_spawn += 1;
            }
        }
        yields_after_spawn
    });
    let d = done.clone();
    // Let the yielder get going, so the outside spawn lands while it loops.
    thread::sleep(Duration::from_millis(20));
    let waiting = rt.spawn(async move { d.store(true, Ordering::Release) });
    spawned.store(true, Ordering::Release);
    let yields = rt.block_on(async {
        waiting.await.unwrap();
        yielder.await.unwrap()
    });
    assert!(
        yields <= 2,
        "the outside task waited {yields} yields after its spawn returned"
    );
}
