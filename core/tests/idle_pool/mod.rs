//! A miniature worker pool over the real `Idle` and `Parker`, shared by the
//! loom models (`loom_idle.rs`, where the facade hands out loom types) and the
//! stress test (`stress_park_idle.rs`, std types).
//!
//! The "queue" is a count of tasks. Taking one is a load, then a CAS: a real
//! queue's emptiness check is a load too, and a load is what the lost-wakeup
//! races need in order to show up. The worker loop follows the protocol in
//! `core/src/idle/README.md`; the step names (W1.., P1.., N1..) are its.
#![allow(dead_code)] // each test file uses part of it

use magpie_core::idle::Idle;
use magpie_core::park::{Parker, Unparker};
use magpie_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// How a worker sleeps at step P4.
#[derive(Clone, Copy, Debug)]
pub enum Sleep {
    /// `park()`.
    Park,
    /// `park_timeout(d)`: a timeout that expires takes the self-unpark path.
    /// Under loom it never expires.
    Timeout(std::time::Duration),
}

pub struct Pool {
    pub idle: Idle,
    pub unparkers: Vec<Unparker>,
    /// Tasks queued.
    pub queued: AtomicUsize,
    /// Tasks taken, by anyone.
    pub taken: AtomicUsize,
    /// Tasks the pool will ever get; whoever takes the last one shuts down.
    pub total: usize,
    pub done: AtomicBool,
    /// Times a worker went to sleep (P4), for the stress test's report.
    pub sleeps: AtomicUsize,
    /// Times a wake found the worker handed out by a notifier (P5 false).
    pub handed_out: AtomicUsize,
}

impl Pool {
    /// A pool of `workers` and their parkers (parker `i` belongs to worker `i`).
    pub fn new(workers: usize, total: usize) -> (Self, Vec<Parker>) {
        let parkers: Vec<Parker> = (0..workers).map(|_| Parker::new()).collect();
        let pool = Self {
            idle: Idle::new(workers),
            unparkers: parkers.iter().map(Parker::unparker).collect(),
            queued: AtomicUsize::new(0),
            taken: AtomicUsize::new(0),
            total,
            done: AtomicBool::new(false),
            sleeps: AtomicUsize::new(0),
            handed_out: AtomicUsize::new(0),
        };
        (pool, parkers)
    }

    /// N1–N3: push `n` tasks, then wake a worker if nobody is searching.
    pub fn push(&self, n: usize) {
        // Relaxed: the Release CAS in `unpark_one` publishes the push to the
        // worker that wakes or that parks after it.
        self.queued.fetch_add(n, Ordering::Relaxed);
        self.notify();
    }

    /// N2–N3: wake one parked worker if nobody is searching.
    pub fn notify(&self) {
        if let Some(id) = self.idle.unpark_one() {
            self.unparkers[id].unpark();
        }
    }

    /// Whether a task is queued: a plain load, like a queue's `is_empty`.
    pub fn has_work(&self) -> bool {
        self.queued.load(Ordering::Relaxed) > 0
    }

    /// Takes a task if one is queued. The first look is a load.
    pub fn try_take(&self) -> bool {
        let mut n = self.queued.load(Ordering::Relaxed);
        while n > 0 {
            match self
                .queued
                .compare_exchange(n, n - 1, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(actual) => n = actual,
            }
        }
        false
    }

    /// Records a taken task; the taker of the last one shuts the pool down.
    pub fn complete(&self) {
        if self.taken.fetch_add(1, Ordering::Relaxed) + 1 == self.total {
            self.shutdown();
        }
    }

    /// Sets `done`, then wakes every parked worker.
    pub fn shutdown(&self) {
        // Relaxed: the Release CAS in `unpark_all` publishes it to workers
        // that park after it; the unpark below publishes it to the rest.
        self.done.store(true, Ordering::Relaxed);
        for id in self.idle.unpark_all() {
            self.unparkers[id].unpark();
        }
    }

    pub fn is_done(&self) -> bool {
        self.done.load(Ordering::Relaxed)
    }
}

/// Where a worker starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// Running, not searching.
    Running,
    /// Counted as a searcher already (the caller made the transition).
    Searching,
    /// Parked already (the caller called `transition_to_parked`): the worker
    /// starts at P4, asleep.
    Parked,
}

/// The worker loop. Returns how many tasks this worker took.
pub fn run_worker(pool: &Pool, id: usize, parker: &Parker, start: Start, sleep: Sleep) -> usize {
    let mut searching = start == Start::Searching;
    let mut took = 0;
    if start == Start::Parked {
        searching = sleep_and_wake(pool, id, parker, sleep);
    }
    loop {
        if pool.is_done() {
            return took;
        }
        // W1: look for work as a searcher if allowed.
        if !searching {
            searching = pool.idle.try_transition_to_searching();
        }
        // W2: the one queue.
        if pool.try_take() {
            // W3: stop searching; the last searcher wakes another.
            if searching {
                searching = false;
                if pool.idle.transition_from_searching() {
                    pool.notify();
                }
            }
            took += 1;
            pool.complete();
            continue;
        }
        // P1–P2.
        let last = pool.idle.transition_to_parked(id, searching);
        // P3: the last searcher looks once more; everyone checks shutdown.
        #[cfg(not(magpie_broken = "park_skips_last_searcher_recheck"))]
        let recheck = last && pool.has_work();
        #[cfg(magpie_broken = "park_skips_last_searcher_recheck")]
        let recheck = {
            let _ = last;
            false
        };
        if recheck || pool.is_done() {
            // Cancel the park. False: a notifier already claimed us as its
            // searcher (its unpark will end a later park early; harmless).
            searching = !pool.idle.unpark(id);
            continue;
        }
        searching = sleep_and_wake(pool, id, parker, sleep);
    }
}

/// P4–P5: sleep, then learn whether we were handed out as a searcher.
fn sleep_and_wake(pool: &Pool, id: usize, parker: &Parker, sleep: Sleep) -> bool {
    pool.sleeps.fetch_add(1, Ordering::Relaxed);
    match sleep {
        Sleep::Park => parker.park(),
        Sleep::Timeout(d) => {
            let _ = parker.park_timeout(d);
        }
    }
    // P5. False: we left the parked set ourselves (timeout, stale unpark);
    // true: a notifier claimed us as its searcher. After shutdown's
    // `unpark_all` the caller sees `done` before anything else.
    let handed_out = !pool.idle.unpark(id) && !pool.is_done();
    if handed_out {
        pool.handed_out.fetch_add(1, Ordering::Relaxed);
    }
    handed_out
}
