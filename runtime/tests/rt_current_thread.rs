//! The current-thread flavour (`Builder::new_current_thread()`): tasks,
//! timers and I/O run on the thread inside `block_on`, and nowhere else.
#![cfg(not(loom))]

mod net_util;

use magpie_core::sync::atomic::{AtomicUsize, Ordering};
use std::future::Future;
use std::io::{Read as _, Write as _};
use std::pin::Pin;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::Duration;

use magpie_runtime::net::{TcpListener, TcpStream};
use magpie_runtime::time::{self, Instant};
use magpie_runtime::{spawn, yield_now, Builder, Handle, Runtime};
use net_util::{echo_bytes, echo_client_side, echo_server_side, watchdog};

fn ct() -> Runtime {
    Builder::new_current_thread().enable_all().build().unwrap()
}

/// A one-value channel whose receiver is a future (no runtime's own sync).
fn oneshot<T>() -> (Sender<T>, Receiver<T>) {
    let cell = Arc::new(Mutex::new((None, None)));
    (Sender(cell.clone()), Receiver(cell))
}

type Cell<T> = Arc<Mutex<(Option<T>, Option<Waker>)>>;
struct Sender<T>(Cell<T>);
struct Receiver<T>(Cell<T>);

impl<T> Sender<T> {
    fn send(self, v: T) {
        let waker = {
            let mut c = self.0.lock().unwrap();
            c.0 = Some(v);
            c.1.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Future for Receiver<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut c = self.0.lock().unwrap();
        match c.0.take() {
            Some(v) => Poll::Ready(v),
            None => {
                c.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
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
    for _ in 0..100_000 {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        thread::park_timeout(Duration::from_millis(10));
    }
    panic!("block_on_outside: not ready after 100 000 polls");
}

#[test]
fn spawned_tasks_run_on_the_thread_inside_block_on() {
    let rt = ct();
    let me = thread::current().id();
    let out = rt.block_on(async {
        // More than the 256-slot ring: the overflow goes through the global
        // queue and still runs here.
        let hs: Vec<_> = (0..1000)
            .map(|i| {
                spawn(async move {
                    yield_now().await;
                    (i, thread::current().id())
                })
            })
            .collect();
        let mut out = Vec::new();
        for h in hs {
            out.push(h.await.unwrap());
        }
        out
    });
    assert_eq!(out.len(), 1000);
    for (k, (i, id)) in out.into_iter().enumerate() {
        assert_eq!(i, k);
        assert_eq!(id, me, "task {k} ran on another thread");
    }
    assert_eq!(rt.num_workers(), 1);
    assert_eq!(rt.handle().metrics().workers, 1);
}

#[test]
fn tasks_make_progress_only_inside_block_on() {
    let rt = ct();
    let (tx, rx) = mpsc::channel();
    let h = rt.spawn(async move {
        tx.send(5).unwrap();
        5
    });
    // Nobody is in block_on: no thread runs the task.
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(50)),
        Err(RecvTimeoutError::Timeout)
    );
    assert_eq!(rt.block_on(h).unwrap(), 5);
    assert_eq!(rx.try_recv(), Ok(5));
    // A task left pending by one block_on carries on in the next.
    let (tx, rx) = oneshot::<u32>();
    let waiter = rt.spawn(async move { rx.await + 1 });
    rt.block_on(yield_now());
    tx.send(41);
    assert_eq!(rt.block_on(waiter).unwrap(), 42);
}

#[test]
fn timers_fire_on_the_block_on_thread() {
    let rt = ct();
    let me = thread::current().id();
    let (slept, ticks, task) = rt.block_on(async {
        let start = Instant::now();
        time::sleep(Duration::from_millis(5)).await;
        let slept = Instant::now() - start;
        let t = spawn(async {
            time::sleep(Duration::from_millis(3)).await;
            thread::current().id()
        });
        let mut iv = time::interval(Duration::from_millis(2));
        let mut ticks = 0;
        for _ in 0..3 {
            iv.tick().await;
            ticks += 1;
        }
        (slept, ticks, t.await.unwrap())
    });
    assert!(slept >= Duration::from_millis(5), "woke early: {slept:?}");
    assert_eq!(ticks, 3);
    assert_eq!(task, me);
}

#[test]
fn a_paused_clock_auto_advances_on_the_current_thread() {
    let rt = Builder::new_current_thread()
        .start_paused(true)
        .build()
        .unwrap();
    let (elapsed, from_task) = rt.block_on(async {
        let start = Instant::now();
        let t = spawn(async {
            let s = Instant::now();
            time::sleep(Duration::from_secs(600)).await;
            Instant::now() - s
        });
        time::sleep(Duration::from_secs(3600)).await;
        (Instant::now() - start, t.await.unwrap())
    });
    assert_eq!(elapsed, Duration::from_secs(3600));
    assert_eq!(from_task, Duration::from_secs(600));
}

/// Connections and messages of the echo test.
const CONNECTIONS: usize = 50;
const MESSAGES: usize = 10;

#[test]
fn tcp_echo_on_the_current_thread_runtime() {
    let (checked, expected) = watchdog("current-thread echo", || {
        let rt = ct();
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let server = spawn(async move {
                for _ in 0..CONNECTIONS {
                    let (s, _) = listener.accept().await.unwrap();
                    spawn(echo_server_side(s));
                }
            });
            let clients: Vec<_> = (0..CONNECTIONS)
                .map(|c| {
                    spawn(async move {
                        let s = TcpStream::connect(addr).await.unwrap();
                        echo_client_side(s, c, MESSAGES).await
                    })
                })
                .collect();
            let mut checked = 0;
            for c in clients {
                checked += c.await.unwrap();
            }
            server.await.unwrap();
            (checked, echo_bytes(CONNECTIONS, MESSAGES))
        })
    });
    assert_eq!(checked, expected);
}

/// The client is a plain blocking socket on another thread: only the I/O
/// driver, polled by the parked `block_on` thread, can wake the server.
#[test]
fn io_readiness_from_outside_wakes_a_parked_block_on() {
    let echoed = watchdog("outside client", || {
        let rt = ct();
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = std_listener.local_addr().unwrap();
        let client = thread::spawn(move || {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            let mut total = 0;
            for m in 0..20u8 {
                thread::sleep(Duration::from_millis(1));
                let msg = [m; 33];
                s.write_all(&msg).unwrap();
                let mut back = [0u8; 33];
                s.read_exact(&mut back).unwrap();
                assert_eq!(back, msg);
                total += back.len();
            }
            total
        });
        rt.block_on(async move {
            std_listener.set_nonblocking(true).unwrap();
            let listener = TcpListener::from_std(std_listener).unwrap();
            let (s, _) = listener.accept().await.unwrap();
            echo_server_side(s).await;
        });
        client.join().unwrap()
    });
    assert_eq!(echoed, 20 * 33);
}

#[test]
fn a_spawn_from_another_thread_wakes_a_blocked_block_on() {
    let sum = watchdog("cross-thread spawn", || {
        let rt = ct();
        let mut sum = 0;
        for round in 0..20u32 {
            let (tx, rx) = oneshot();
            let handle = rt.handle().clone();
            // The other thread only spawns: the task (which completes our
            // future) runs only if the spawn wakes the parked block_on.
            let t = thread::spawn(move || {
                thread::sleep(Duration::from_millis(1));
                drop(handle.spawn(async move { tx.send(round * 2) }));
            });
            sum += rt.block_on(rx);
            t.join().unwrap();
        }
        sum
    });
    assert_eq!(sum, (0..20).map(|r| r * 2).sum::<u32>());
}

#[test]
fn two_threads_in_block_on_share_the_one_worker() {
    let done = watchdog("two block_ons", || {
        let rt = Arc::new(ct());
        let count = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (rt, count) = (rt.clone(), count.clone());
                thread::spawn(move || {
                    for i in 0..100usize {
                        let v = rt.block_on(async move {
                            let h = spawn(async move {
                                yield_now().await;
                                i
                            });
                            h.await.unwrap()
                        });
                        assert_eq!(v, i);
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        count.load(Ordering::Relaxed)
    });
    assert_eq!(done, 200);
}

#[test]
fn spawning_after_the_runtime_is_dropped_gives_a_cancelled_handle() {
    let rt = ct();
    let handle = rt.handle().clone();
    drop(rt);
    let h = handle.spawn(async { 1 });
    assert!(block_on_outside(h).unwrap_err().is_cancelled());
}

struct CountDrop(Arc<AtomicUsize>);
impl Drop for CountDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn dropping_the_runtime_cancels_queued_and_waiting_tasks() {
    let rt = ct();
    let dropped = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    // Five that waited once (idle), five never run (queued).
    for _ in 0..5 {
        let guard = CountDrop(dropped.clone());
        handles.push(rt.spawn(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        }));
    }
    rt.block_on(async {
        for _ in 0..3 {
            yield_now().await;
        }
    });
    for _ in 0..5 {
        let guard = CountDrop(dropped.clone());
        handles.push(rt.spawn(async move {
            let _guard = guard;
        }));
    }
    drop(rt);
    assert_eq!(dropped.load(Ordering::Relaxed), 10);
    for h in handles {
        assert!(block_on_outside(h).unwrap_err().is_cancelled());
    }
}

#[test]
fn shutdown_background_cancels_the_tasks() {
    let rt = ct();
    let dropped = Arc::new(AtomicUsize::new(0));
    let guard = CountDrop(dropped.clone());
    let h = rt.spawn(async move {
        let _guard = guard;
        std::future::pending::<()>().await;
    });
    rt.block_on(yield_now());
    rt.shutdown_background();
    assert!(block_on_outside(h).unwrap_err().is_cancelled());
    assert_eq!(dropped.load(Ordering::Relaxed), 1);
}

#[test]
fn handle_current_inside_block_on_spawns_onto_this_runtime() {
    let rt = ct();
    let me = thread::current().id();
    let id = rt.block_on(async {
        let h = Handle::current();
        h.spawn(async { thread::current().id() }).await.unwrap()
    });
    assert_eq!(id, me);
}

#[test]
#[should_panic(expected = "from within a magpie runtime")]
fn block_on_inside_a_task_is_refused() {
    let rt = Arc::new(ct());
    let inner = rt.clone();
    rt.block_on(async move {
        // The task runs on this thread, inside block_on.
        let h = spawn(async move { inner.block_on(async {}) });
        if let Err(e) = h.await {
            std::panic::resume_unwind(e.into_panic());
        }
    });
}

#[test]
#[should_panic(expected = "block_in_place on a current-thread runtime")]
fn block_in_place_is_refused_on_the_current_thread() {
    let rt = ct();
    rt.block_on(async { magpie_runtime::block_in_place(|| ()) });
}

/// A `block_on` future that keeps yielding while it waits for a timer: the
/// thread must still fire the timer between its polls.
#[test]
fn a_yielding_block_on_future_still_lets_timers_fire() {
    let rt = ct();
    let polls = rt.block_on(async {
        let fired = Arc::new(AtomicUsize::new(0));
        let f = fired.clone();
        let _t = spawn(async move {
            time::sleep(Duration::from_millis(2)).await;
            f.store(1, Ordering::Relaxed);
        });
        let mut polls = 0u64;
        while fired.load(Ordering::Relaxed) == 0 {
            polls += 1;
            assert!(polls < 100_000_000, "the timer never fired");
            yield_now().await;
        }
        polls
    });
    assert!(polls > 0);
}
