//! Threaded stress tests of the task-state word and the gate, sized for Miri.
//! Loom explores small cases exhaustively (`loom_task_state.rs`,
//! `loom_gate.rs`); these run the same protocols with more threads and many
//! more operations on real hardware.
#![cfg(not(loom))]

use magpie_core::gate::Gate;
use magpie_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use magpie_core::sync::{hint, thread, Arc};
use magpie_core::task::state::{
    State, TransitionToIdle, TransitionToNotified, TransitionToRunning,
};

/// Wakes per waker thread.
const WAKES: usize = if cfg!(miri) { 30 } else { 20_000 };
const WAKERS: usize = 3;
const WORKERS: usize = 2;

/// One task, woken `WAKERS * WAKES` times while `WORKERS` workers run its
/// queue entries. The future is Ready once it has seen every event.
struct Shared {
    state: State,
    events: AtomicUsize,
    /// Run-queue entries for the task (I1: never more than one).
    queue: AtomicUsize,
    polling: AtomicBool,
    polls: AtomicUsize,
    reschedules: AtomicUsize,
    completions: AtomicUsize,
    frees: AtomicUsize,
}

impl Shared {
    fn push(&self) {
        // AcqRel: the entry hands the task (and the Release of the transition
        // that created it) to the worker whose pop reads it.
        let before = self.queue.fetch_add(1, Ordering::AcqRel);
        assert_eq!(before, 0, "two run-queue entries for one task");
        self.reschedules.fetch_add(1, Ordering::Relaxed);
    }

    fn pop(&self) -> bool {
        self.queue
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
    }

    fn drop_ref(&self) {
        if self.state.ref_dec() {
            self.frees.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Run one entry (this thread owns its reference).
    fn run_entry(&self) {
        loop {
            assert_eq!(
                self.state.transition_to_running(),
                TransitionToRunning::Success
            );
            assert!(
                !self.polling.swap(true, Ordering::Acquire),
                "two polls at once"
            );
            self.polls.fetch_add(1, Ordering::Relaxed);
            let ready = self.events.load(Ordering::Acquire) == WAKERS * WAKES;
            self.polling.store(false, Ordering::Release);
            if ready {
                let _ = self.state.transition_to_complete();
                self.completions.fetch_add(1, Ordering::Relaxed);
                return self.drop_ref();
            }
            match self.state.transition_to_idle() {
                TransitionToIdle::Ok => return,
                TransitionToIdle::OkNotified => {
                    self.reschedules.fetch_add(1, Ordering::Relaxed);
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }
}

#[test]
fn many_wakes_on_many_threads_poll_once_per_reschedule_and_free_once() {
    let s = Arc::new(Shared {
        state: State::new(false),
        events: AtomicUsize::new(0),
        queue: AtomicUsize::new(0),
        polling: AtomicBool::new(false),
        polls: AtomicUsize::new(0),
        reschedules: AtomicUsize::new(0),
        completions: AtomicUsize::new(0),
        frees: AtomicUsize::new(0),
    });
    for _ in 0..WAKERS {
        s.state.ref_inc();
    }
    // The spawner's entry; `push` counts it as a reschedule, undo that.
    s.push();
    s.reschedules.fetch_sub(1, Ordering::Relaxed);

    let wakers: Vec<_> = (0..WAKERS)
        .map(|_| {
            let s = s.clone();
            thread::spawn(move || {
                for _ in 0..WAKES {
                    s.events.fetch_add(1, Ordering::Release);
                    if s.state.transition_to_notified() == TransitionToNotified::Submit {
                        s.push();
                    }
                }
                s.drop_ref();
            })
        })
        .collect();
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let s = s.clone();
            thread::spawn(move || {
                while s.completions.load(Ordering::Acquire) == 0
                    || s.queue.load(Ordering::Acquire) > 0
                {
                    if s.pop() {
                        s.run_entry();
                    } else {
                        hint::spin_loop();
                        thread::yield_now();
                    }
                }
            })
        })
        .collect();
    for t in wakers.into_iter().chain(workers) {
        t.join().unwrap();
    }

    assert_eq!(s.completions.load(Ordering::Relaxed), 1);
    assert_eq!(s.frees.load(Ordering::Relaxed), 1);
    assert_eq!(s.queue.load(Ordering::Relaxed), 0);
    let (polls, resched) = (
        s.polls.load(Ordering::Relaxed),
        s.reschedules.load(Ordering::Relaxed),
    );
    assert_eq!(
        polls,
        resched + 1,
        "a reschedule without a poll, or a poll without one"
    );
    assert!(s.state.load().is_complete());
}

/// Tasks per producer.
const SPAWNS: usize = if cfg!(miri) { 40 } else { 50_000 };
const PRODUCERS: usize = 2;
const GATE_WORKERS: usize = 2;

#[test]
fn gate_with_producers_workers_and_a_closer_ends_once_with_every_task_run() {
    struct Rt {
        gate: Gate,
        inject: AtomicUsize,
        pushed: AtomicUsize,
        executed: AtomicUsize,
        ends: AtomicUsize,
    }
    let rt = Arc::new(Rt {
        gate: Gate::new(),
        inject: AtomicUsize::new(0),
        pushed: AtomicUsize::new(0),
        executed: AtomicUsize::new(0),
        ends: AtomicUsize::new(0),
    });
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let rt = rt.clone();
            thread::spawn(move || {
                for i in 0..SPAWNS {
                    // Alternate single spawns and batches of 3.
                    let n = if (i + p) % 4 == 0 { 3 } else { 1 };
                    if !rt.gate.try_spawn(n as u64) {
                        return;
                    }
                    rt.inject.fetch_add(n, Ordering::AcqRel);
                    rt.pushed.fetch_add(n, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let workers: Vec<_> = (0..GATE_WORKERS)
        .map(|_| {
            let rt = rt.clone();
            thread::spawn(move || {
                // Awake/park cycles until the gate turns the worker away.
                while rt.gate.try_enter() {
                    let mut popped = 0;
                    while rt
                        .inject
                        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                        .is_ok()
                    {
                        popped += 1;
                    }
                    if popped > 0 {
                        rt.executed.fetch_add(popped, Ordering::Relaxed);
                        assert!(
                            !rt.gate.complete(popped as u64),
                            "end seen while holding a token"
                        );
                    }
                    if rt.gate.complete(1) {
                        assert_eq!(rt.inject.load(Ordering::Acquire), 0);
                        rt.ends.fetch_add(1, Ordering::Relaxed);
                    }
                    thread::yield_now(); // "parked"
                }
            })
        })
        .collect();
    // Close partway through.
    while rt.pushed.load(Ordering::Relaxed) < SPAWNS / 2 {
        thread::yield_now();
    }
    if rt.gate.close() {
        rt.ends.fetch_add(1, Ordering::Relaxed);
    }
    for t in producers.into_iter().chain(workers) {
        t.join().unwrap();
    }

    assert_eq!(
        rt.ends.load(Ordering::Relaxed),
        1,
        "the end seen more or less than once"
    );
    assert_eq!(
        rt.pushed.load(Ordering::Relaxed),
        rt.executed.load(Ordering::Relaxed)
    );
    assert!(rt.gate.is_terminated());
    assert!(!rt.gate.try_spawn(1) && !rt.gate.try_enter());
}
