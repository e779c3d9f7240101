//! `LocalSet` and `spawn_local`: `!Send` tasks on the thread that runs the
//! set.
#![cfg(not(loom))]

mod net_util;

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread::{self, ThreadId};
use std::time::Duration;

use magpie_core::sync::atomic::{AtomicUsize, Ordering};
use magpie_runtime::task::{spawn_local, LocalSet};
use magpie_runtime::time;
use magpie_runtime::{spawn, yield_now, Builder, Runtime};
use net_util::watchdog;

fn mt(workers: usize) -> Runtime {
    Runtime::builder().worker_threads(workers).build().unwrap()
}

fn ct() -> Runtime {
    Builder::new_current_thread().build().unwrap()
}

/// A future that is ready once `flag` is set by anyone, anywhere; its waker
/// is stored for the setter.
#[derive(Clone, Default)]
struct Gate(Arc<Mutex<(bool, Option<Waker>)>>);

impl Gate {
    fn open(&self) {
        let w = {
            let mut g = self.0.lock().unwrap();
            g.0 = true;
            g.1.take()
        };
        if let Some(w) = w {
            w.wake();
        }
    }
    fn wait(&self) -> GateWait {
        GateWait(self.clone())
    }
    fn has_waiter(&self) -> bool {
        self.0.lock().unwrap().1.is_some()
    }
}

struct GateWait(Gate);

impl Future for GateWait {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut g = (self.0).0.lock().unwrap();
        if g.0 {
            Poll::Ready(())
        } else {
            g.1 = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}

/// Ten local tasks share an `Rc<RefCell<..>>` (not `Send`); each pushes
/// after a yield, on the runtime's two flavours.
fn rc_state_on(rt: &Runtime) {
    let local = LocalSet::new();
    let me = thread::current().id();
    let (sum, threads) = local.block_on(rt, async move {
        let state = Rc::new(RefCell::new(Vec::new()));
        let handles: Vec<_> = (1..=10u32)
            .map(|i| {
                let state = state.clone();
                spawn_local(async move {
                    yield_now().await;
                    state.borrow_mut().push(i);
                    thread::current().id()
                })
            })
            .collect();
        let mut threads = Vec::new();
        for h in handles {
            threads.push(h.await.unwrap());
        }
        let sum: u32 = state.borrow().iter().sum();
        (sum, threads)
    });
    assert_eq!(sum, 55);
    assert!(
        threads.iter().all(|t| *t == me),
        "a local task left its thread"
    );
}

#[test]
fn local_tasks_share_rc_refcell_state_on_the_multi_thread_runtime() {
    rc_state_on(&mt(2));
}

#[test]
fn local_tasks_share_rc_refcell_state_on_the_current_thread_runtime() {
    rc_state_on(&ct());
}

#[test]
#[should_panic(expected = "`spawn_local` called from outside of a `task::LocalSet`")]
fn spawn_local_outside_a_local_set_panics() {
    let rt = mt(1);
    rt.block_on(async {
        drop(spawn_local(async {}));
    });
}

/// A waker of a local task, fired on another thread, re-queues the task on
/// the set's thread.
#[test]
fn a_wake_from_another_thread_requeues_the_task_on_its_owner() {
    let (value, ran_on, owner) = watchdog("cross-thread wake", || {
        let rt = mt(2);
        let owner = thread::current().id();
        let local = LocalSet::new();
        let gate = Gate::default();
        let opener = gate.clone();
        let t = thread::spawn(move || {
            // Bounded wait until the local task is parked on the gate.
            for _ in 0..10_000 {
                if opener.has_waiter() {
                    break;
                }
                thread::sleep(Duration::from_millis(1));
            }
            opener.open();
        });
        let out = local.block_on(&rt, async move {
            let rc = Rc::new(7u32);
            let h = spawn_local(async move {
                gate.wait().await;
                (*rc * 6, thread::current().id())
            });
            h.await.unwrap()
        });
        t.join().unwrap();
        (out.0, out.1, owner)
    });
    assert_eq!(value, 42);
    assert_eq!(ran_on, owner, "the local task ran off the set's thread");
}

/// Awaiting the set itself runs every task to the end; tasks may use the
/// runtime's timers and spawn `Send` tasks.
#[test]
fn awaiting_the_set_runs_all_its_tasks() {
    let rt = mt(2);
    let local = LocalSet::new();
    let count = Rc::new(RefCell::new(0));
    for i in 0..5u64 {
        let count = count.clone();
        local.spawn_local(async move {
            time::sleep(Duration::from_millis(i)).await;
            let doubled = spawn(async move { i * 2 }).await.unwrap();
            *count.borrow_mut() += doubled;
        });
    }
    rt.block_on(local);
    assert_eq!(*count.borrow(), 20);
}

struct RecordDrop {
    thread: Arc<Mutex<Vec<ThreadId>>>,
}

impl Drop for RecordDrop {
    fn drop(&mut self) {
        self.thread.lock().unwrap().push(thread::current().id());
    }
}

/// Dropping the set drops its pending tasks right there, on its thread, and
/// their handles resolve to cancelled; a waker kept elsewhere is harmless.
#[test]
fn dropping_the_set_drops_its_tasks_on_its_own_thread() {
    let dropped_on = Arc::new(Mutex::new(Vec::new()));
    let recorded = dropped_on.clone();
    let (owner, stray_waker) = thread::spawn(move || {
        let rt = ct();
        let local = LocalSet::new();
        let gate = Gate::default();
        let mut handles = Vec::new();
        for _ in 0..4 {
            let guard = RecordDrop {
                thread: recorded.clone(),
            };
            let gate = gate.clone();
            handles.push(local.spawn_local(async move {
                let _guard = guard;
                let _not_send = Rc::new(());
                gate.wait().await;
            }));
        }
        // Run them until they wait on the gate.
        local.block_on(&rt, async {
            for _ in 0..4 {
                yield_now().await;
            }
        });
        let stray = gate.0.lock().unwrap().1.clone().expect("a task waits");
        assert_eq!(recorded.lock().unwrap().len(), 0);
        drop(local);
        // Dropped inside LocalSet's drop, not later.
        assert_eq!(recorded.lock().unwrap().len(), 4);
        let mut cx = Context::from_waker(Waker::noop());
        for mut h in handles {
            match Pin::new(&mut h).poll(&mut cx) {
                Poll::Ready(Err(e)) => assert!(e.is_cancelled()),
                other => panic!("expected a cancelled handle, got {:?}", other.is_ready()),
            }
        }
        (thread::current().id(), stray)
    })
    .join()
    .unwrap();
    // A waker of a dropped set's task, woken from here: nothing happens.
    stray_waker.wake();
    let on = dropped_on.lock().unwrap();
    assert_eq!(on.len(), 4);
    assert!(on.iter().all(|t| *t == owner));
}

#[test]
fn abort_drops_a_pending_local_task() {
    let rt = mt(1);
    let local = LocalSet::new();
    let dropped = Arc::new(AtomicUsize::new(0));
    let d = dropped.clone();
    let err = local.block_on(&rt, async move {
        struct Count(Arc<AtomicUsize>);
        impl Drop for Count {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let c = Count(d);
        let h = spawn_local(async move {
            let _c = c;
            std::future::pending::<()>().await;
        });
        yield_now().await;
        assert!(!h.is_finished());
        h.abort();
        h.await.unwrap_err()
    });
    assert!(err.is_cancelled());
    assert_eq!(dropped.load(Ordering::Relaxed), 1);
}

#[test]
fn a_panicking_local_task_becomes_a_join_error_and_the_others_go_on() {
    let rt = ct();
    let local = LocalSet::new();
    let (err, other) = local.block_on(&rt, async {
        let bad = spawn_local(async {
            yield_now().await;
            panic!("local boom");
        });
        let good = spawn_local(async {
            yield_now().await;
            Rc::new(5u8)
        });
        (bad.await.unwrap_err(), *good.await.unwrap())
    });
    assert!(err.is_panic());
    assert!(err.to_string().contains("local boom"), "{err}");
    assert_eq!(other, 5);
}

/// A local task has an id of its own, as in tokio: `task::id()` inside it,
/// its handle's `id()`, and its `JoinError`'s `id()` (panic and abort) are
/// the same, and differ from the id of the task that runs the set.
#[test]
fn a_local_task_has_its_own_id_in_task_id_its_handle_and_its_join_error() {
    use magpie_runtime::task;
    let rt = mt(1);
    let local = LocalSet::new();
    local.block_on(&rt, async {
        let outer = task::try_id();
        let h = spawn_local(async { task::id() });
        let want = h.id();
        assert_eq!(h.await.unwrap(), want);
        assert_ne!(Some(want), outer);
        // After the local task's poll, the outer id is back.
        assert_eq!(task::try_id(), outer);

        let bad = spawn_local(async {
            yield_now().await;
            panic!("local boom");
        });
        let bad_id = bad.id();
        assert_eq!(bad.await.unwrap_err().id(), bad_id);

        let pending = spawn_local(std::future::pending::<()>());
        let pending_id = pending.id();
        yield_now().await;
        pending.abort();
        let err = pending.await.unwrap_err();
        assert!(err.is_cancelled());
        assert_eq!(err.id(), pending_id);
        assert!(want != bad_id && bad_id != pending_id);
    });
}

/// More woken tasks than one tick: the set yields to the runtime between
/// ticks and still finishes them all, with its tasks spawning more.
#[test]
fn many_local_tasks_spawning_local_tasks_all_finish() {
    let rt = mt(2);
    let local = LocalSet::new();
    let total = local.block_on(&rt, async {
        let count = Rc::new(RefCell::new(0usize));
        let handles: Vec<_> = (0..500)
            .map(|_| {
                let count = count.clone();
                spawn_local(async move {
                    let inner = count.clone();
                    spawn_local(async move {
                        *inner.borrow_mut() += 1;
                    })
                    .await
                    .unwrap();
                    *count.borrow_mut() += 1;
                })
            })
            .collect();
        for h in handles {
            h.await.unwrap();
        }
        count.take()
    });
    assert_eq!(total, 1000);
}
