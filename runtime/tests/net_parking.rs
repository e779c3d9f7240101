//! The I/O driver and parking: a worker asleep in the poller is woken by
//! I/O and by an ordinary unpark (through the poller's waker), and a
//! shutdown with I/O pending ends it with an error, never a hang.
#![cfg(not(loom))]

mod net_util;

use std::future::Future;
use std::io::Write as _;
use std::pin::Pin;
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures_util::io::AsyncReadExt;
use magpie_core::sync::atomic::{AtomicBool, Ordering};
use magpie_runtime::net::TcpListener;
use net_util::{rt, wait_until, watchdog};

/// One worker; a task waits in `accept` and then `read`. Once the worker is
/// asleep in the poller, a thread outside the runtime connects and writes.
/// The task gets the bytes: only the poller could have told it.
#[test]
fn io_wakes_the_only_worker_asleep_in_the_poller() {
    watchdog("io wake", || {
        let rt = rt(1);
        let handle = rt.handle().clone();
        let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let task = rt.spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).await.unwrap();
            buf
        });
        wait_until("the worker sleeps in the poller", || {
            handle.io_metrics().in_driver == 1
        });
        let events_before = handle.io_metrics().events;
        let mut peer = std::net::TcpStream::connect(addr).unwrap();
        peer.write_all(b"hello").unwrap();
        // block_on only waits for the JoinHandle: the worker drives the task.
        let got = rt.block_on(task).unwrap();
        assert_eq!(&got, b"hello");
        assert!(handle.io_metrics().events > events_before);
    });
}

/// Pending until `open` is set; keeps its waker for someone else to wake.
struct Gate {
    open: Arc<AtomicBool>,
    waker: Arc<Mutex<Option<Waker>>>,
}

impl Future for Gate {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        *self.waker.lock().unwrap() = Some(cx.waker().clone());
        if self.open.load(Ordering::Acquire) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// Attempts of the test below; each one succeeds when the wake found the
/// worker in the poller (it may have left it for a timeout just then).
const ATTEMPTS: usize = 50;

/// One worker, asleep in the poller with no I/O registered. A plain thread
/// wakes a task: the wake's `notify_parked` finds the worker PARKED_DRIVER
/// and wakes it through the poller's waker (park step U3), which the
/// driver counts in `hook_wakes`; the task then runs.
#[test]
fn outside_wake_reaches_the_worker_in_the_poller() {
    let through_hook = watchdog("outside wake", || {
        let rt = rt(1);
        let handle = rt.handle().clone();
        let mut through_hook = 0;
        for _ in 0..ATTEMPTS {
            let open = Arc::new(AtomicBool::new(false));
            let waker = Arc::new(Mutex::new(None::<Waker>));
            let (tx, rx) = mpsc::channel();
            let gate = Gate {
                open: Arc::clone(&open),
                waker: Arc::clone(&waker),
            };
            rt.spawn(async move {
                gate.await;
                tx.send(()).unwrap();
            });
            wait_until("the task waits", || waker.lock().unwrap().is_some());
            wait_until("the worker sleeps in the poller", || {
                handle.io_metrics().in_driver == 1
            });
            let before = handle.io_metrics().hook_wakes;
            open.store(true, Ordering::Release);
            waker.lock().unwrap().take().unwrap().wake();
            rx.recv_timeout(net_util::HANG).expect("the task ran");
            if handle.io_metrics().hook_wakes > before {
                through_hook += 1;
            }
        }
        through_hook
    });
    assert!(
        through_hook > 0,
        "no wake in {ATTEMPTS} went through the poller's waker"
    );
}

/// A listener registered with runtime A is awaited by a task of runtime B.
/// Dropping A (with the accept pending) ends the accept with the shutdown
/// error; a task of A blocked on I/O is cancelled. Nothing hangs.
#[test]
fn shutdown_with_io_pending_errors_instead_of_hanging() {
    watchdog("shutdown with io pending", || {
        let a = rt(1);
        let b = rt(1);
        let listener = a.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let own = a.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let a_task = a.spawn(async move {
            let _ = own.accept().await;
        });
        let b_task = b.spawn(async move { listener.accept().await.map(|_| ()) });
        // Let both accepts reach their wait.
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(a.handle().io_metrics().registrations, 2);
        drop(a);
        let err = b
            .block_on(b_task)
            .unwrap()
            .expect_err("the accept of a shut-down runtime's listener fails");
        assert!(err.to_string().contains("shut down"), "{err}");
        let joined = b.block_on(a_task).unwrap_err();
        assert!(joined.is_cancelled());
    });
}
