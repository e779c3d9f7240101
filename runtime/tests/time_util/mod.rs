//! A tiny test executor for the time tests: futures polled by hand with
//! wakers that count and log their wakes. No runtime, no wall clock.
#![allow(dead_code)] // each test binary uses a different part

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use magpie_core::sync::atomic::{AtomicUsize, Ordering};
use magpie_core::sync::Mutex;
use magpie_runtime::time::{self, Driver, EnterGuard, Instant, Sleep};

/// An append-only log of probe ids in wake order, shared by many probes.
#[derive(Clone, Default)]
pub struct WakeLog(Arc<Mutex<Vec<usize>>>);

impl WakeLog {
    /// Takes everything logged so far.
    pub fn drain(&self) -> Vec<usize> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// A waker that counts its wakes and logs its id, and unparks a thread if
/// asked to.
pub struct Probe {
    id: usize,
    wakes: AtomicUsize,
    log: WakeLog,
    thread: Option<std::thread::Thread>,
}

impl Probe {
    pub fn new(id: usize, log: &WakeLog) -> Arc<Probe> {
        Arc::new(Probe {
            id,
            wakes: AtomicUsize::new(0),
            log: log.clone(),
            thread: None,
        })
    }

    /// A probe that also unparks the calling thread when woken.
    pub fn for_this_thread(id: usize, log: &WakeLog) -> Arc<Probe> {
        Arc::new(Probe {
            id,
            wakes: AtomicUsize::new(0),
            log: log.clone(),
            thread: Some(std::thread::current()),
        })
    }

    pub fn id(&self) -> usize {
        self.id
    }

    pub fn wakes(&self) -> usize {
        // Relaxed: read after the waking thread has been synchronised with
        // (same thread, a join, or the log's mutex).
        self.wakes.load(Ordering::Relaxed)
    }
}

impl Wake for Probe {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::Relaxed);
        self.log.0.lock().unwrap().push(self.id);
        if let Some(thread) = &self.thread {
            thread.unpark();
        }
    }
}

/// A future under test with its own probe.
pub struct TestTask<F: Future> {
    future: Pin<Box<F>>,
    pub probe: Arc<Probe>,
    waker: Waker,
}

impl<F: Future> TestTask<F> {
    pub fn new(id: usize, log: &WakeLog, future: F) -> Self {
        Self::with_probe(Probe::new(id, log), future)
    }

    pub fn with_probe(probe: Arc<Probe>, future: F) -> Self {
        TestTask {
            future: Box::pin(future),
            waker: Waker::from(probe.clone()),
            probe,
        }
    }

    pub fn poll(&mut self) -> Poll<F::Output> {
        let mut cx = Context::from_waker(&self.waker);
        self.future.as_mut().poll(&mut cx)
    }

    pub fn wakes(&self) -> usize {
        self.probe.wakes()
    }

    /// Polls with a different waker (a clone of `other`'s).
    pub fn poll_with(&mut self, other: &Arc<Probe>) -> Poll<F::Output> {
        let waker = Waker::from(other.clone());
        let mut cx = Context::from_waker(&waker);
        self.future.as_mut().poll(&mut cx)
    }
}

/// A paused driver entered on this thread, its start instant (the clock's
/// origin, so every whole-ms sleep lands on a tick), and a wake log.
pub fn paused() -> (Driver, EnterGuard, Instant, WakeLog) {
    let driver = Driver::new_paused();
    let guard = time::enter(&driver);
    let start = Instant::now();
    (driver, guard, start, WakeLog::default())
}

/// `sleep` wrapped as task `id` and polled once, which must register it.
pub fn pending(id: usize, log: &WakeLog, sleep: Sleep) -> TestTask<Sleep> {
    let mut task = TestTask::new(id, log, sleep);
    assert!(task.poll().is_pending(), "sleep {id} is not pending");
    task
}

/// Runs `future` to completion on this thread with `driver` entered: polls
/// while woken, and when nothing is woken, lets the paused clock jump to the
/// next timer. Panics if the future can never complete.
pub fn block_on_paused<F: Future>(driver: &Driver, future: F) -> F::Output {
    let _guard = magpie_runtime::time::enter(driver);
    let log = WakeLog::default();
    let mut task = TestTask::new(0, &log, future);
    loop {
        if let Poll::Ready(out) = task.poll() {
            return out;
        }
        if log.drain().is_empty() {
            assert!(
                driver.auto_advance_if_idle(),
                "the future is pending, unwoken, with no timer left to fire"
            );
        }
    }
}

/// xorshift64, for reproducible pseudo-random deadlines.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform-ish in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
