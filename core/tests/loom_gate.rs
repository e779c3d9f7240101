//! Loom models of the executor gate word (`magpie_core::gate`).
//!
//! The first four are the races seed 000 names; the last two prove the gate's
//! half of the runtime's termination argument (`core/src/gate/README.md`):
//! a terminated gate cannot be re-entered, and with workers taking and
//! releasing activity tokens the end is observed exactly once, only when
//! everything has been released. Every model counts how many calls reported
//! the terminal transition and asserts it was exactly one.
//!
//! Run: `RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2
//! CARGO_TARGET_DIR=target/loom cargo test -p magpie-core --release --test
//! loom_gate`. The tour is in `docs/loom.md`.
#![cfg(loom)]

use magpie_core::gate::Gate;
use magpie_core::sync::atomic::{AtomicUsize, Ordering};
use magpie_core::sync::{thread, Arc, UnsafeCell};

/// Counts the calls that reported the terminal transition.
fn seen(terminal: bool) -> usize {
    usize::from(terminal)
}

// protocol: gate 2 5
// broken-variant: gate_split_flag; class: check-then-act; expects: close saw 0 with a spawned task in flight
#[test]
fn spawn_vs_join_gate_atomicity() {
    loom::model(|| {
        let gate = Arc::new(Gate::new());
        let spawner = {
            let gate = gate.clone();
            thread::spawn(move || gate.try_spawn(1))
        };
        let closed_terminal = gate.close();
        let spawned = spawner.join().unwrap();

        // A spawn that got in is counted before close looks: close cannot
        // have called it the end.
        if spawned {
            assert!(
                !closed_terminal,
                "close saw 0 with a spawned task in flight"
            );
            assert_eq!(gate.in_flight(), 1);
            // The spawned task completes: that is the end, once.
            assert!(
                gate.complete(1),
                "the last task's completion was not the end"
            );
        } else {
            assert!(closed_terminal, "close of an empty gate was not the end");
        }
        assert!(gate.is_terminated());
        assert!(!gate.try_spawn(1), "spawn after the end");
    });
}

// protocol: gate 4 5
// broken-variant: close_split_read; class: check-then-act; expects: the end seen true / true
#[test]
fn completion_vs_join_termination() {
    loom::model(|| {
        let gate = Arc::new(Gate::new());
        assert!(gate.try_spawn(1));
        // The task's result, published by its completion.
        let result = Arc::new(UnsafeCell::new(0u32));
        let worker = {
            let (gate, result) = (gate.clone(), result.clone());
            thread::spawn(move || {
                // SAFETY: only this thread writes; the reader below reads
                // only after observing the end, which the Release of
                // `complete` orders after this write (loom checks it).
                result.with_mut(|p| unsafe { *p = 42 });
                gate.complete(1)
            })
        };
        let by_close = gate.close();
        let by_worker = worker.join().unwrap();

        assert_eq!(
            seen(by_close) + seen(by_worker),
            1,
            "the end seen {by_close} / {by_worker}"
        );
        // Whoever saw the end can read the result. Here that is checked for
        // the closer, whose only ordering with the worker is the gate word.
        if by_close {
            // SAFETY: the worker's write happens before its `complete`
            // (Release), which `close`'s Acquire synchronized with.
            assert_eq!(result.with(|p| unsafe { *p }), 42);
        }
        assert!(gate.is_terminated());
    });
}

// protocol: gate 2
// broken-variant: try_spawn_not_atomic; class: check-then-act; expects: a concurrent spawn was lost
#[test]
fn concurrent_spawns_no_lost_count() {
    loom::model(|| {
        let gate = Arc::new(Gate::new());
        let other = {
            let gate = gate.clone();
            thread::spawn(move || gate.try_spawn(1))
        };
        assert!(gate.try_spawn(1));
        assert!(other.join().unwrap());
        assert_eq!(gate.in_flight(), 2, "a concurrent spawn was lost");

        // And the count drains to exactly one end.
        assert!(!gate.close());
        assert!(!gate.complete(1));
        assert!(gate.complete(1));
    });
}

// protocol: gate 4
// broken-variant: complete_ignores_accepting; class: missing state check; expects: the end seen more or less than once
#[test]
fn three_way_spawn_complete_join() {
    loom::model(|| {
        let gate = Arc::new(Gate::new());
        assert!(gate.try_spawn(1)); // a task already in flight
        let ends = Arc::new(AtomicUsize::new(0));
        let spawner = {
            let (gate, ends) = (gate.clone(), ends.clone());
            thread::spawn(move || {
                let spawned = gate.try_spawn(1);
                if spawned && gate.complete(1) {
                    ends.fetch_add(1, Ordering::Relaxed);
                }
                spawned
            })
        };
        let completer = {
            let (gate, ends) = (gate.clone(), ends.clone());
            thread::spawn(move || {
                if gate.complete(1) {
                    ends.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        if gate.close() {
            ends.fetch_add(1, Ordering::Relaxed);
        }
        let _spawned = spawner.join().unwrap();
        completer.join().unwrap();

        // Whatever the order, everything drained and the end was seen once.
        assert_eq!(
            ends.load(Ordering::Relaxed),
            1,
            "the end seen more or less than once"
        );
        assert!(gate.is_terminated());
        assert_eq!(gate.in_flight(), 0);
    });
}

// protocol: gate 6
// broken-variant: try_enter_no_terminal_check; class: missing state check; expects: the end seen twice or never
#[test]
fn terminated_gate_cannot_be_reentered() {
    loom::model(|| {
        let gate = Arc::new(Gate::new());
        // An idle worker waking up: take the token, search, release it.
        let worker = {
            let gate = gate.clone();
            thread::spawn(move || {
                if gate.try_enter() {
                    (true, gate.complete(1))
                } else {
                    (false, false)
                }
            })
        };
        let by_close = gate.close();
        let (entered, by_worker) = worker.join().unwrap();

        // Three orders. The worker's whole visit before the close: it
        // releases with the gate open and the close reports the end. The
        // close while the worker holds its token: the worker's release
        // reports it. The close first, on a count of 0: the gate is terminal,
        // `try_enter` must refuse, or the worker's release would report a
        // second end.
        assert_eq!(
            seen(by_close) + seen(by_worker),
            1,
            "the end seen twice or never"
        );
        if !entered {
            assert!(by_close, "a worker was turned away from a live gate");
        }
        assert!(gate.is_terminated());
        assert!(!gate.try_enter());
    });
}

/// The termination protocol with the gate in its runtime role: the count is
/// (tasks in the inject queue) + (awake workers' tokens).
struct Runtime {
    gate: Gate,
    /// The inject queue, as a length.
    inject: AtomicUsize,
    /// Workers between a successful `try_enter` and the `complete(1)` that
    /// releases their token (bookkeeping for the assertion, not protocol).
    awake: AtomicUsize,
    pushed: AtomicUsize,
    executed: AtomicUsize,
    ends: AtomicUsize,
}

impl Runtime {
    /// The observer of the end checks that nothing is left anywhere.
    fn end_seen(&self) {
        // Acquire: pairs with the AcqRel updates below; they all happen
        // before the gate's terminal observation anyway (its Release/Acquire),
        // so these loads see the final values.
        assert_eq!(
            self.inject.load(Ordering::Acquire),
            0,
            "ended with tasks in the inject queue"
        );
        assert_eq!(
            self.awake.load(Ordering::Acquire),
            0,
            "ended with a worker awake"
        );
        self.ends.fetch_add(1, Ordering::Relaxed);
    }

    /// External producer: count the task, then push it.
    fn produce(&self) {
        if self.gate.try_spawn(1) {
            self.inject.fetch_add(1, Ordering::AcqRel);
            self.pushed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// One activity round of a worker: take the token (or exit if the
    /// executor ended), pop and run what is in the inject queue (each pop
    /// releases that task's count, the token keeps the gate open meanwhile),
    /// then release the token just before parking.
    fn worker_round(&self) {
        if !self.gate.try_enter() {
            return; // ended: exit
        }
        self.awake.fetch_add(1, Ordering::AcqRel);
        while self
            .inject
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
        {
            self.executed.fetch_add(1, Ordering::Relaxed);
            // The popped task is no longer in a shared place: release its
            // count. Our token keeps the count above 0.
            assert!(!self.gate.complete(1), "the end seen while holding a token");
        }
        self.awake.fetch_sub(1, Ordering::AcqRel);
        if self.gate.complete(1) {
            self.end_seen();
        }
    }
}

// protocol: gate 2 4 5 6
// broken-variant: try_enter_requires_accepting; class: lost wakeup; expects: the end seen more or less than once
#[test]
fn worker_tokens_terminate_exactly_once() {
    loom::model(|| {
        let rt = Arc::new(Runtime {
            gate: Gate::new(),
            inject: AtomicUsize::new(0),
            awake: AtomicUsize::new(0),
            pushed: AtomicUsize::new(0),
            executed: AtomicUsize::new(0),
            ends: AtomicUsize::new(0),
        });
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let rt = rt.clone();
                thread::spawn(move || rt.worker_round())
            })
            .collect();
        let producer = {
            let rt = rt.clone();
            thread::spawn(move || rt.produce())
        };
        if rt.gate.close() {
            rt.end_seen();
        }
        producer.join().unwrap();
        for w in workers {
            w.join().unwrap();
        }
        // The producer's unpark wakes a worker for a task the rounds above
        // missed: it takes its token and drains. On a gate that already ended
        // it is turned away.
        rt.worker_round();

        assert_eq!(
            rt.ends.load(Ordering::Relaxed),
            1,
            "the end seen more or less than once"
        );
        assert_eq!(
            rt.pushed.load(Ordering::Relaxed),
            rt.executed.load(Ordering::Relaxed),
            "a pushed task was not executed"
        );
        assert!(rt.gate.is_terminated());
        assert!(!rt.gate.try_enter());
    });
}
