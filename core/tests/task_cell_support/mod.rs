//! Shared by the non-loom task-cell tests: a scheduler that queues tasks in a
//! `Mutex<VecDeque>`, counting wakers, drop counters and small futures.
#![allow(dead_code)] // each test file uses a different subset

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use magpie_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use magpie_core::task::{JoinError, JoinHandle, Notified, OwnedTasks, Schedule};

/// The test scheduler: a FIFO of entries and the registry. Counters are read
/// after the threads that bump them are joined, so Relaxed is enough.
#[derive(Clone)]
pub struct Sched(pub Arc<Inner>);

pub struct Inner {
    pub queue: Mutex<VecDeque<Notified<Sched>>>,
    pub owned: OwnedTasks<Sched>,
    pub schedules: AtomicUsize,
    pub yields: AtomicUsize,
    /// When set, `schedule` drops the entry instead of queueing it (a
    /// runtime whose queues are closed).
    pub drop_entries: AtomicBool,
}

impl Schedule for Sched {
    fn schedule(&self, task: Notified<Self>) {
        self.0.schedules.fetch_add(1, Ordering::Relaxed);
        if self.0.drop_entries.load(Ordering::Relaxed) {
            drop(task);
            return;
        }
        self.0.queue.lock().unwrap().push_back(task);
    }

    fn yield_now(&self, task: Notified<Self>) {
        self.0.yields.fetch_add(1, Ordering::Relaxed);
        self.0.queue.lock().unwrap().push_back(task);
    }

    fn owned_tasks(&self) -> &OwnedTasks<Self> {
        &self.0.owned
    }
}

impl Sched {
    pub fn new(shards: usize) -> Sched {
        Sched(Arc::new(Inner {
            queue: Mutex::new(VecDeque::new()),
            owned: OwnedTasks::new(shards),
            schedules: AtomicUsize::new(0),
            yields: AtomicUsize::new(0),
            drop_entries: AtomicBool::new(false),
        }))
    }

    /// Bind and queue.
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let (entry, join) = self.0.owned.bind(future, self.clone());
        if let Some(entry) = entry {
            self.0.queue.lock().unwrap().push_back(entry);
        }
        join
    }

    pub fn pop(&self) -> Option<Notified<Sched>> {
        self.0.queue.lock().unwrap().pop_front()
    }

    /// Run entries until the queue is empty; returns how many ran.
    pub fn run_all(&self) -> usize {
        let mut n = 0;
        while let Some(task) = self.pop() {
            task.run();
            n += 1;
        }
        n
    }

    pub fn queued(&self) -> usize {
        self.0.queue.lock().unwrap().len()
    }

    pub fn schedules(&self) -> usize {
        self.0.schedules.load(Ordering::Relaxed)
    }

    pub fn yields(&self) -> usize {
        self.0.yields.load(Ordering::Relaxed)
    }

    /// Shut down: close the registry, then drop what is still queued. Every
    /// task must then be gone: checked by the strong count (each task holds
    /// a clone of the scheduler until it is freed).
    pub fn shutdown_and_check_all_freed(self) {
        self.0.owned.close_and_shutdown_all();
        let rest: Vec<_> = self.0.queue.lock().unwrap().drain(..).collect();
        drop(rest);
        assert!(self.0.owned.is_empty(), "tasks still linked after shutdown");
        assert_eq!(
            Arc::strong_count(&self.0),
            1,
            "a task was not freed (it still holds the scheduler)"
        );
    }
}

/// A waker that counts its wakes.
#[derive(Default)]
pub struct CountingWaker {
    pub wakes: AtomicUsize,
}

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::Relaxed);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::Relaxed);
    }
}

pub fn counting_waker() -> (Arc<CountingWaker>, Waker) {
    let c = Arc::new(CountingWaker::default());
    (c.clone(), Waker::from(c))
}

impl CountingWaker {
    pub fn count(&self) -> usize {
        self.wakes.load(Ordering::Relaxed)
    }
}

/// Poll a JoinHandle once with `waker`.
pub fn poll_join<T>(join: &mut JoinHandle<T>, waker: &Waker) -> Poll<Result<T, JoinError>> {
    Pin::new(join).poll(&mut Context::from_waker(waker))
}

/// Poll a JoinHandle that must be ready.
pub fn join_now<T>(mut join: JoinHandle<T>) -> Result<T, JoinError> {
    match poll_join(&mut join, Waker::noop()) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("JoinHandle not ready"),
    }
}

/// Bumps its counter when dropped.
#[derive(Debug)]
pub struct DropCounter(pub Arc<AtomicUsize>);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

pub fn counter() -> Arc<AtomicUsize> {
    Arc::new(AtomicUsize::new(0))
}

pub fn count(c: &AtomicUsize) -> usize {
    c.load(Ordering::Relaxed)
}

/// Pending until `flag` is set; stores its current waker in `slot` at every
/// Pending poll.
pub struct WaitFlag {
    pub flag: Arc<AtomicBool>,
    pub slot: Arc<Mutex<Option<Waker>>>,
    pub polls: Arc<AtomicUsize>,
}

impl Future for WaitFlag {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.polls.fetch_add(1, Ordering::Relaxed);
        // Acquire: pairs with the Release store of whoever sets the flag.
        if self.flag.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        *self.slot.lock().unwrap() = Some(cx.waker().clone());
        // Check again: a setter that took the slot before we filled it would
        // have found it empty.
        if self.flag.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

/// Wakes itself and returns Pending `n` times, then Ready (a `yield_now`).
pub struct YieldTimes(pub usize);

impl Future for YieldTimes {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 == 0 {
            return Poll::Ready(());
        }
        self.0 -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Pending forever, never keeps a waker.
pub struct Never;

impl Future for Never {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        Poll::Pending
    }
}

/// The far end of a `WaitFlag`: opens it and wakes the task.
pub struct Gate {
    pub flag: Arc<AtomicBool>,
    pub slot: Arc<Mutex<Option<Waker>>>,
    pub polls: Arc<AtomicUsize>,
}

impl Gate {
    /// A `WaitFlag` future and its gate.
    pub fn new() -> (WaitFlag, Gate) {
        let gate = Gate {
            flag: Arc::new(AtomicBool::new(false)),
            slot: Arc::new(Mutex::new(None)),
            polls: counter(),
        };
        let f = WaitFlag {
            flag: gate.flag.clone(),
            slot: gate.slot.clone(),
            polls: gate.polls.clone(),
        };
        (f, gate)
    }

    /// Set the flag (Release: pairs with the future's Acquire load), then
    /// wake the stored waker by value.
    pub fn open(&self) {
        self.flag.store(true, Ordering::Release);
        self.take_waker().wake();
    }

    /// The waker the last Pending poll stored.
    pub fn take_waker(&self) -> Waker {
        self.slot.lock().unwrap().take().expect("no waker stored")
    }

    pub fn polls(&self) -> usize {
        count(&self.polls)
    }
}
