//! Loom models of the task-state word (`magpie_core::task::state`).
//!
//! Each model runs a tiny scheduler made of counters: a worker runs the
//! task's queue entry (polls until IDLE, COMPLETE or re-queued), a waker that
//! gets `Submit` runs the new entry itself (it plays the worker that pops it),
//! and a cancel that gets `Schedule` does the same. The future, the output,
//! the join-waker cell and the task's "allocation" are loom `UnsafeCell`s, so
//! loom reports any two accesses that the state word's orderings fail to
//! order, and the counters let each model assert its exactly-once property.
//!
//! Run: `RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2
//! CARGO_TARGET_DIR=target/loom cargo test -p magpie-core --release --test
//! loom_task_state`. The tour is in `docs/loom.md`.
#![cfg(loom)]

mod loom_support;

use magpie_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use magpie_core::sync::{thread, Arc, UnsafeCell};
use magpie_core::task::state::{
    ShieldExit, State, TransitionToCancelled, TransitionToIdle, TransitionToNotified,
    TransitionToRunning,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Output {
    Ready,
    Cancelled,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Poll {
    Ready,
    Pending,
}

/// A task and the scheduler's counters. The counters are read after every
/// thread has been joined, so Relaxed is enough for them.
struct Task {
    state: State,
    /// The future's own state: its poll count. Only the thread holding
    /// RUNNING may touch it.
    future: UnsafeCell<u32>,
    /// Written before `transition_to_complete`, taken by whoever drops it.
    output: UnsafeCell<Option<Output>>,
    /// The JoinHandle's waker (a number stands in for it).
    join_waker: UnsafeCell<Option<u32>>,
    /// The allocation: every reference holder reads it before dropping its
    /// reference; the thread that drops the last one "frees" it (writes).
    freed: UnsafeCell<bool>,
    /// The event the model's future waits for.
    event: AtomicBool,
    polls: AtomicUsize,
    pending_polls: AtomicUsize,
    reschedules: AtomicUsize,
    completions: AtomicUsize,
    frees: AtomicUsize,
    output_drops: AtomicUsize,
    future_drops: AtomicUsize,
    joiner_wakes: AtomicUsize,
    waker_drops: AtomicUsize,
    critical_steps: AtomicUsize,
    cancel_pending: AtomicUsize,
}

type PollFn = fn(&Task, u32) -> Poll;

impl Task {
    fn new(join_interest: bool) -> Arc<Task> {
        Arc::new(Task {
            state: State::new(join_interest),
            future: UnsafeCell::new(0),
            output: UnsafeCell::new(None),
            join_waker: UnsafeCell::new(None),
            freed: UnsafeCell::new(false),
            event: AtomicBool::new(false),
            polls: AtomicUsize::new(0),
            pending_polls: AtomicUsize::new(0),
            reschedules: AtomicUsize::new(0),
            completions: AtomicUsize::new(0),
            frees: AtomicUsize::new(0),
            output_drops: AtomicUsize::new(0),
            future_drops: AtomicUsize::new(0),
            joiner_wakes: AtomicUsize::new(0),
            waker_drops: AtomicUsize::new(0),
            critical_steps: AtomicUsize::new(0),
            cancel_pending: AtomicUsize::new(0),
        })
    }

    fn count(c: &AtomicUsize) -> usize {
        c.load(Ordering::Relaxed)
    }

    fn bump(c: &AtomicUsize) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// A reference holder uses the task. Loom checks that this read is
    /// ordered before the free; the assert catches a use after it.
    fn touch(&self) {
        // SAFETY: `freed` is written only by the thread that dropped the last
        // reference; the caller still holds one, so that write has not
        // happened, and loom checks the orderings that make this so.
        let freed = self.freed.with(|p| unsafe { *p });
        assert!(!freed, "task used after it was freed");
    }

    fn free(&self) {
        // SAFETY: the caller's `ref_dec` returned true: no other reference
        // exists, and the Acquire fence in `ref_dec` ordered every other
        // holder's `touch` before this write (loom checks it).
        self.freed.with_mut(|p| unsafe { *p = true });
        Task::bump(&self.frees);
    }

    /// Drop one reference, freeing the task if it was the last.
    fn drop_ref(&self) {
        self.touch();
        if self.state.ref_dec() {
            self.free();
        }
    }

    /// Drop the output in the cell (it must be there).
    fn drop_output(&self) {
        // SAFETY: called only by the one party the protocol gives the output
        // to: the worker when JOIN_INTEREST was clear at completion, or the
        // JoinHandle after it saw COMPLETE.
        let out = self.output.with_mut(|p| unsafe { (*p).take() });
        assert!(out.is_some(), "output dropped twice or never written");
        Task::bump(&self.output_drops);
    }

    /// Drop the join waker in the cell, if any.
    fn drop_join_waker(&self) {
        // SAFETY: called only by the party that owns the cell: the handle
        // when JOIN_WAKER is clear, the task side after completion when the
        // handle has gone.
        let waker = self.join_waker.with_mut(|p| unsafe { (*p).take() });
        if waker.is_some() {
            Task::bump(&self.waker_drops);
        }
    }

    /// RUNNING -> COMPLETE with `out`, then the completion duties of
    /// `transition_to_complete`'s docs, then drop the worker's reference.
    fn complete(&self, out: Output) {
        Task::bump(&self.future_drops);
        // SAFETY: the caller holds RUNNING; the JoinHandle reads the output
        // only after it sees COMPLETE, which is published after this write.
        self.output.with_mut(|p| unsafe { *p = Some(out) });
        let snap = self.state.transition_to_complete();
        Task::bump(&self.completions);
        if !snap.has_join_interest() {
            self.drop_output();
        } else if snap.has_join_waker() {
            // SAFETY: JOIN_WAKER was set when the task completed: the handle
            // wrote the waker before `set_join_waker` (Release) and the
            // Acquire of `transition_to_complete` orders it before this read;
            // the handle will not touch the cell until we hand it back.
            let w = self.join_waker.with(|p| unsafe { *p });
            assert!(w.is_some(), "JOIN_WAKER set but the cell is empty");
            Task::bump(&self.joiner_wakes);
            if !self
                .state
                .unset_join_waker_after_complete()
                .has_join_interest()
            {
                self.drop_join_waker();
            }
        }
        self.drop_ref();
    }

    /// A worker runs the queue entry it popped (it owns that reference).
    /// `OkNotified` re-queues the task; the same worker pops it again.
    fn run_entry(&self, poll: PollFn) {
        loop {
            match self.state.transition_to_running() {
                TransitionToRunning::Cancelled => return self.complete(Output::Cancelled),
                TransitionToRunning::Success => {}
            }
            Task::bump(&self.polls);
            // SAFETY: this thread holds RUNNING, the only state in which the
            // future is touched; loom checks that consecutive polls on
            // different threads are ordered by the state word.
            let n = self.future.with_mut(|p| unsafe {
                *p += 1;
                *p
            });
            if poll(self, n) == Poll::Ready {
                return self.complete(Output::Ready);
            }
            Task::bump(&self.pending_polls);
            match self.state.transition_to_idle() {
                TransitionToIdle::Ok => return,
                TransitionToIdle::OkDealloc => return self.free(),
                TransitionToIdle::OkNotified => Task::bump(&self.reschedules),
                TransitionToIdle::Cancelled => return self.complete(Output::Cancelled),
            }
        }
    }

    /// A waker fires (by reference). On `Submit` this thread runs the new
    /// queue entry.
    fn wake_by_ref(&self, poll: PollFn) {
        self.touch();
        match self.state.transition_to_notified() {
            TransitionToNotified::Submit => {
                Task::bump(&self.reschedules);
                self.run_entry(poll);
            }
            TransitionToNotified::DoNothing => {}
        }
    }

    /// The JoinHandle is dropped (task README step 8): if the task is not
    /// complete, it owns the waker cell again and the task will drop the
    /// output; if it is, the handle drops the output, and the waker unless
    /// the task side still holds the cell.
    fn drop_join_handle(&self) {
        match self.state.unset_join_interest() {
            Ok(_) => self.drop_join_waker(),
            Err(snap) => {
                self.drop_output();
                if !snap.has_join_waker() {
                    self.drop_join_waker();
                }
            }
        }
        self.drop_ref();
    }

    /// The JoinHandle after the task completed: read the output, then drop
    /// the handle.
    fn join_and_drop_handle(&self) -> Output {
        assert!(self.state.load().is_complete());
        // SAFETY: COMPLETE was loaded with Acquire, which orders the worker's
        // write of the output before this read; only the handle takes it.
        let out = self.output.with(|p| unsafe { *p }).expect("no output");
        self.drop_join_handle();
        out
    }
}

/// The model's future: Ready once `event` is set.
fn wait_for_event(t: &Task, _n: u32) -> Poll {
    if t.event.load(Ordering::Acquire) {
        Poll::Ready
    } else {
        Poll::Pending
    }
}

/// A waker thread: publish the event, then wake.
fn set_event_and_wake(t: &Task) {
    // Release: pairs with the Acquire load in `wait_for_event`.
    t.event.store(true, Ordering::Release);
    t.wake_by_ref(wait_for_event);
}

/// The common ending: the task completed once, was freed once, and every
/// reschedule produced exactly one poll.
fn assert_ran_once(t: &Task) {
    assert_eq!(
        Task::count(&t.completions),
        1,
        "task lost or completed twice"
    );
    assert_eq!(
        Task::count(&t.frees),
        1,
        "task freed {} times",
        Task::count(&t.frees)
    );
    assert_eq!(
        Task::count(&t.future_drops),
        1,
        "future dropped more than once"
    );
    // Every poll but the first came from a reschedule. A cancelled task can
    // have one reschedule that ends in `Cancelled` instead of a poll.
    let polls = Task::count(&t.polls);
    let resched = Task::count(&t.reschedules);
    assert!(
        polls == resched + 1 || polls == resched,
        "polls {polls}, reschedules {resched}"
    );
}

// protocol: task-state 3 4
// broken-variant: idle_ignores_notified; class: lost wakeup; expects: task lost or completed twice
#[test]
fn wake_during_running_reschedules_exactly_once() {
    loom::model(|| {
        let t = Task::new(false);
        t.state.ref_inc(); // the waker's reference
        let waker = {
            let t = t.clone();
            thread::spawn(move || {
                set_event_and_wake(&t);
                t.drop_ref();
            })
        };
        t.run_entry(wait_for_event); // the spawner's queue entry
        waker.join().unwrap();

        assert_ran_once(&t);
        // The future is Pending until the one event, so a Pending poll is
        // followed by exactly one reschedule (the wake that landed during or
        // after it) and a Ready poll ends the task.
        let pending = Task::count(&t.pending_polls);
        assert!(pending <= 1, "polled Pending {pending} times for one event");
        assert_eq!(Task::count(&t.reschedules), pending);
        assert_eq!(Task::count(&t.polls), pending + 1);
        assert_eq!(Task::count(&t.output_drops), 1);
    });
}

// protocol: task-state 4 5
// broken-variant: wake_skips_write_when_queued; class: store buffering; expects: task lost or completed twice
#[test]
fn wake_racing_completion() {
    loom::model(|| {
        let t = Task::new(false);
        t.state.ref_inc(); // the event waker's reference
        t.state.ref_inc(); // a stale waker's reference
        let event_waker = {
            let t = t.clone();
            thread::spawn(move || {
                set_event_and_wake(&t);
                t.drop_ref();
            })
        };
        let stale_waker = {
            let t = t.clone();
            thread::spawn(move || {
                t.wake_by_ref(wait_for_event);
                t.drop_ref();
            })
        };
        t.run_entry(wait_for_event);
        event_waker.join().unwrap();
        stale_waker.join().unwrap();

        // Never lost (completed), never both (no poll after completion: that
        // would panic in transition_to_running), every reschedule one poll.
        assert_ran_once(&t);
        assert_eq!(Task::count(&t.polls), Task::count(&t.reschedules) + 1);
        assert_eq!(Task::count(&t.pending_polls) + 1, Task::count(&t.polls));
        assert!(Task::count(&t.reschedules) <= 2);
    });
}

// protocol: task-state 9
// broken-variant: ref_dec_no_acquire_fence; class: missing fence; expects: Causality violation
#[test]
fn refcount_frees_exactly_once() {
    loom::model(|| {
        // References: the queue entry, the JoinHandle, two wakers.
        let t = Task::new(true);
        t.state.ref_inc();
        t.state.ref_inc();
        let join_handle = {
            let t = t.clone();
            thread::spawn(move || {
                t.touch();
                t.drop_join_handle();
            })
        };
        let wakers = {
            let t = t.clone();
            thread::spawn(move || {
                set_event_and_wake(&t);
                // Both waker references at once.
                t.touch();
                if t.state.ref_dec_by(2) {
                    t.free();
                }
            })
        };
        t.run_entry(wait_for_event);
        join_handle.join().unwrap();
        wakers.join().unwrap();

        assert_ran_once(&t);
        assert_eq!(
            Task::count(&t.output_drops),
            1,
            "output dropped twice or leaked"
        );
        assert_eq!(t.state.load().ref_count(), 0);
    });
}

/// Pending on the first poll after waking itself (like `yield_now`), Ready
/// on the second.
fn yield_once(t: &Task, n: u32) -> Poll {
    if n == 1 {
        let _ = t.state.transition_to_notified();
        Poll::Pending
    } else {
        Poll::Ready
    }
}

// protocol: task-state 2 3 6
// broken-variant: running_ignores_cancel; class: missing state check; expects: a task found queued by cancel was polled
#[test]
fn cancel_racing_completion() {
    loom::model(|| {
        let t = Task::new(true);
        let canceller = {
            let t = t.clone();
            thread::spawn(move || {
                t.touch(); // the JoinHandle's reference, shared for abort()
                let r = t.state.cancel();
                if r == TransitionToCancelled::Schedule {
                    t.run_entry(yield_once);
                }
                r
            })
        };
        t.run_entry(yield_once);
        let r = canceller.join().unwrap();
        let out = t.join_and_drop_handle();

        assert_ran_once(&t);
        // The task never goes IDLE, so cancel never has to schedule it.
        assert_ne!(r, TransitionToCancelled::Schedule);
        match r {
            // Too late: the task finished on its own.
            TransitionToCancelled::AlreadyComplete => assert_eq!(out, Output::Ready),
            // Found queued: the next poll must not happen.
            TransitionToCancelled::Scheduled => {
                assert_eq!(
                    out,
                    Output::Cancelled,
                    "a task found queued by cancel was polled"
                )
            }
            _ => {}
        }
        // Ready only from the second poll; a cancel stops polling at once.
        assert_eq!(out == Output::Ready, Task::count(&t.polls) == 2);
        assert!(Task::count(&t.polls) <= 2);
        assert_eq!(Task::count(&t.output_drops), 1);
    });
}

/// A future that runs a two-step critical section inside a shield, then
/// waits forever (nobody wakes it: only cancellation can end it).
fn shielded_section(t: &Task, _n: u32) -> Poll {
    t.state.shield_enter().unwrap();
    Task::bump(&t.critical_steps);
    assert!(
        !t.state.is_cancel_effective(),
        "cancel took effect inside a shield"
    );
    Task::bump(&t.critical_steps);
    if t.state.shield_exit().unwrap() == ShieldExit::CancelPending {
        assert!(t.state.is_cancel_effective());
        Task::bump(&t.cancel_pending);
    }
    Poll::Pending
}

// protocol: task-state 7
// broken-variant: cancel_ignores_shield; class: missing state check; expects: cancel took effect inside a shield
#[test]
fn shield_defers_cancel() {
    loom::model(|| {
        let t = Task::new(true);
        let canceller = {
            let t = t.clone();
            thread::spawn(move || {
                t.touch();
                if t.state.cancel() == TransitionToCancelled::Schedule {
                    t.run_entry(shielded_section);
                }
            })
        };
        t.run_entry(shielded_section);
        canceller.join().unwrap();
        let out = t.join_and_drop_handle();

        assert_eq!(Task::count(&t.completions), 1);
        assert_eq!(Task::count(&t.frees), 1);
        assert_eq!(out, Output::Cancelled);
        // A started critical section always ran both steps.
        let steps = Task::count(&t.critical_steps);
        let polls = Task::count(&t.polls);
        assert_eq!(steps, 2 * polls, "a shielded section was cut short");
        assert!(polls <= 2);
        // CancelPending is reported once at most, and only if the cancel landed
        // inside the section, in which case that poll's transition_to_idle
        // reported Cancelled: the task was polled exactly once.
        let pendings = Task::count(&t.cancel_pending);
        assert!(pendings <= 1);
        if pendings == 1 {
            assert_eq!(polls, 1);
        }
    });
}

// protocol: task-state 7 9
// broken-variant: shield_carry; class: field overflow; expects: task freed 0 times
#[test]
fn shield_overflow_racing_ref_drop_frees_once() {
    // 255 enters and 255 exits are ~500 atomic steps: above loom's default
    // branch limit of 1,000 once the other thread's steps are added.
    let raise_branches = |model: &mut loom::model::Builder| model.max_branches = 5_000;
    // Passes with each thread leading (`explore`): the overflowing enter is a
    // load that writes nothing, and the handle's drop loads before its CAS,
    // so in a single pass loom never tries the drop before the enter
    // (tokio-rs/loom#392; docs/loom.md, "explore").
    loom_support::explore_with(2, raise_branches, |start| {
        let t = Task::new(true);
        assert_eq!(
            t.state.transition_to_running(),
            TransitionToRunning::Success
        );
        for _ in 0..255 {
            t.state.shield_enter().unwrap();
        }
        // The JoinHandle is dropped while the task, 255 shields deep, tries
        // a 256th: two RMWs on the same word, one on the shield field and
        // one on the reference count right above it.
        let join_handle = {
            let t = t.clone();
            thread::spawn(move || {
                start.gate(1);
                t.touch();
                t.drop_join_handle();
            })
        };
        start.gate(0);
        let overflow = t.state.shield_enter();
        join_handle.join().unwrap();
        for _ in 0..255 {
            let _ = t.state.shield_exit();
        }
        t.complete(Output::Ready);

        // The failed enter must not have added a reference: the worker's and
        // the handle's drops free the task.
        assert_eq!(
            Task::count(&t.frees),
            1,
            "task freed {} times",
            Task::count(&t.frees)
        );
        assert_eq!(
            overflow,
            Err(magpie_core::task::state::ShieldError::Overflow)
        );
        assert_eq!(Task::count(&t.output_drops), 1);
    });
}

/// A future that is never woken.
fn never_ready(_t: &Task, _n: u32) -> Poll {
    Poll::Pending
}

// protocol: task-state 6
// broken-variant: cancel_idle_no_schedule; class: lost wakeup; expects: cancelled task stranded
#[test]
fn cancel_of_idle_task_schedules_it() {
    loom::model(|| {
        let t = Task::new(true);
        let canceller = {
            let t = t.clone();
            thread::spawn(move || {
                t.touch();
                let r = t.state.cancel();
                if r == TransitionToCancelled::Schedule {
                    t.run_entry(never_ready);
                }
                r
            })
        };
        t.run_entry(never_ready);
        let r = canceller.join().unwrap();

        // Not stranded: whatever state the cancel found, the task completed.
        assert!(
            t.state.load().is_complete(),
            "cancelled task stranded: {:?}",
            t.state.load()
        );
        assert_ne!(r, TransitionToCancelled::AlreadyComplete);
        let out = t.join_and_drop_handle();
        assert_eq!(out, Output::Cancelled);
        assert_ran_once(&t);
        assert!(Task::count(&t.polls) <= 1);
    });
}

/// The JoinHandle registers its waker and is then dropped, racing the
/// task's completion: the output and the waker are each dropped exactly once
/// and the waker cell is never accessed by both sides unordered.
// protocol: task-state 5 8
#[test]
fn join_waker_and_output_are_dropped_exactly_once() {
    loom::model(|| {
        let t = Task::new(true);
        t.state.ref_inc(); // the event waker
        let join_handle = {
            let t = t.clone();
            thread::spawn(move || {
                t.touch();
                let mut wrote = false;
                if !t.state.load().is_complete() {
                    // SAFETY: JOIN_WAKER is clear, so the handle owns the cell.
                    t.join_waker.with_mut(|p| unsafe { *p = Some(7) });
                    wrote = true;
                    if t.state.set_join_waker().is_err() {
                        // Complete meanwhile: the cell is still ours.
                        t.drop_join_waker();
                    }
                }
                t.drop_join_handle();
                wrote
            })
        };
        let waker = {
            let t = t.clone();
            thread::spawn(move || {
                set_event_and_wake(&t);
                t.drop_ref();
            })
        };
        t.run_entry(wait_for_event);
        let wrote = join_handle.join().unwrap();
        waker.join().unwrap();

        assert_ran_once(&t);
        assert_eq!(Task::count(&t.output_drops), 1);
        assert_eq!(Task::count(&t.waker_drops), usize::from(wrote));
        assert!(Task::count(&t.joiner_wakes) <= usize::from(wrote));
    });
}
