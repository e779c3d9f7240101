//! Loom models of a process's mailbox (`magpie_core::process`): the state
//! word, the MPSC event queue and the admission word, as a worker, senders,
//! a completer and shutdown use them.
//!
//! Each model runs a tiny scheduler made of counters. A run-queue entry is
//! a count (`entries`): whoever is told to schedule the process (a send
//! that returns `schedule`, a cancel that returns `Schedule`, a finish that
//! returns `Requeue`) increments it and runs the entry itself, as if it were
//! the worker that pops it. The counters let each model assert its
//! exactly-once property after every thread is joined.
//!
//! Run: `RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2
//! CARGO_TARGET_DIR=target/loom cargo test -p magpie-core --release --test
//! loom_process`. The tour is in `docs/loom.md`, "Processes".
#![cfg(loom)]

use magpie_core::process::{
    Lifecycle, Mailbox, Refusal, Stepping, TransitionToCancelled, TransitionToWaiting, Wait,
    BLOCK_CAP,
};
use magpie_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use magpie_core::sync::{thread, Arc, UnsafeCell};

/// A message whose payload is written by the sender before the send and
/// read by the step that pops it: loom reports the read if the queue does
/// not order it after the write. Its drop is counted.
struct Msg {
    payload: UnsafeCell<u32>,
    drops: Arc<AtomicUsize>,
}

impl Msg {
    fn new(value: u32, drops: &Arc<AtomicUsize>) -> Msg {
        let payload = UnsafeCell::new(0);
        // SAFETY: the cell is new and owned here.
        payload.with_mut(|p| unsafe { *p = value });
        Msg {
            payload,
            drops: drops.clone(),
        }
    }

    fn read(&self) -> u32 {
        // SAFETY: the sender's write happens-before this read if the
        // queue's Release/Acquire is right; loom checks exactly that.
        self.payload.with(|p| unsafe { *p })
    }
}

impl Drop for Msg {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::Relaxed);
    }
}

/// A process and the model's counters (read after the join: Relaxed).
/// Its body counts the steps that ran, written by each step through its
/// token: two holders at once, or one whose writes are not ordered after
/// the previous holder's, is a loom causality violation.
struct Proc {
    mailbox: Mailbox<Msg, u32>,
    /// Run-queue entries that exist right now (the spawn's is the first).
    entries: AtomicUsize,
    /// Most entries seen at once.
    max_entries: AtomicUsize,
    steps: AtomicUsize,
    steps_after_complete: AtomicUsize,
    popped: AtomicUsize,
    payload_sum: AtomicUsize,
    /// The last payload below 10 popped: the models send those from one
    /// thread in ascending order, so each must exceed the one before.
    last_from_a: AtomicUsize,
    drained: AtomicUsize,
    completions: AtomicUsize,
    closes: AtomicUsize,
    /// Entries whose `transition_to_running` found the process not READY.
    stale: AtomicUsize,
    saw_cancel: AtomicBool,
    complete: AtomicBool,
    drops: Arc<AtomicUsize>,
}

impl Proc {
    fn new() -> Arc<Proc> {
        Arc::new(Proc {
            mailbox: Mailbox::with_body(0),
            entries: AtomicUsize::new(1),
            max_entries: AtomicUsize::new(1),
            steps: AtomicUsize::new(0),
            steps_after_complete: AtomicUsize::new(0),
            popped: AtomicUsize::new(0),
            payload_sum: AtomicUsize::new(0),
            last_from_a: AtomicUsize::new(0),
            drained: AtomicUsize::new(0),
            completions: AtomicUsize::new(0),
            closes: AtomicUsize::new(0),
            stale: AtomicUsize::new(0),
            saw_cancel: AtomicBool::new(false),
            complete: AtomicBool::new(false),
            drops: Arc::new(AtomicUsize::new(0)),
        })
    }

    fn add_entry(&self) {
        let now = self.entries.fetch_add(1, Ordering::Relaxed) + 1;
        self.max_entries.fetch_max(now, Ordering::Relaxed);
    }

    /// Pops everything this step can see.
    fn drain_step(&self, s: &mut Stepping<'_, Msg, u32>) {
        if s.is_cancelled() {
            self.saw_cancel.store(true, Ordering::Relaxed);
        }
        while let Some(m) = s.pop() {
            let v = m.read() as usize;
            self.popped.fetch_add(1, Ordering::Relaxed);
            self.payload_sum.fetch_add(v, Ordering::Relaxed);
            if v < 10 {
                let prev = self.last_from_a.swap(v, Ordering::Relaxed);
                assert!(v > prev, "per-producer FIFO: {v} after {prev}");
            }
        }
    }

    /// Closes the process with the token: `close()` runs here.
    fn complete(&self, s: Stepping<'_, Msg, u32>) {
        // The model's `close()`: it may touch the process's resources, so
        // two of them at once would be the bug.
        self.closes.fetch_add(1, Ordering::Relaxed);
        self.completions.fetch_add(1, Ordering::Relaxed);
        let _ = s.complete(|_| {
            self.drained.fetch_add(1, Ordering::Relaxed);
        });
        // After `complete` returned: the process has exited. Release pairs
        // with the Acquire loads of the models' senders.
        self.complete.store(true, Ordering::Release);
    }

    /// Runs the entry this thread holds, and every requeue it causes, with
    /// `decide` choosing how each step ends (`None`: complete).
    fn run_entry(&self, mut decide: impl FnMut(&Proc, bool) -> Option<Wait>) {
        loop {
            let Some(mut s) = self.mailbox.transition_to_running() else {
                // A stale entry: shutdown claimed the process (READY ->
                // RUNNING) before this entry ran. Only a claim makes one.
                self.entries.fetch_sub(1, Ordering::Relaxed);
                self.stale.fetch_add(1, Ordering::Relaxed);
                return;
            };
            self.entries.fetch_sub(1, Ordering::Relaxed);
            self.steps.fetch_add(1, Ordering::Relaxed);
            *s.body() += 1;
            if self.complete.load(Ordering::Acquire) {
                self.steps_after_complete.fetch_add(1, Ordering::Relaxed);
            }
            self.drain_step(&mut s);
            let cancelled = s.is_cancelled();
            match decide(self, cancelled) {
                None => {
                    self.complete(s);
                    return;
                }
                Some(wait) => match s.finish(wait) {
                    TransitionToWaiting::Requeue => {
                        self.add_entry();
                        continue;
                    }
                    TransitionToWaiting::Waiting => return,
                },
            }
        }
    }

    fn send(&self, value: u32, bound: Option<usize>, then: impl FnOnce(&Proc)) -> bool {
        match self.mailbox.send(Msg::new(value, &self.drops), bound) {
            Ok(sent) => {
                if sent.schedule {
                    self.add_entry();
                    then(self);
                }
                true
            }
            Err(_) => false,
        }
    }

    /// Sends `values` as one batch (`Mailbox::send_batch`).
    fn send_batch(&self, values: &[u32], then: impl FnOnce(&Proc)) -> bool {
        let mut batch: Vec<Msg> = values.iter().map(|&v| Msg::new(v, &self.drops)).collect();
        match self.mailbox.send_batch(&mut batch) {
            Ok(sent) => {
                if sent.schedule {
                    self.add_entry();
                    then(self);
                }
                true
            }
            Err(_) => false,
        }
    }

    fn n(&self, c: &AtomicUsize) -> usize {
        c.load(Ordering::Relaxed)
    }
}

fn wait_blocked(_: &Proc, _: bool) -> Option<Wait> {
    Some(Wait::Blocked)
}

fn wait_idle(_: &Proc, _: bool) -> Option<Wait> {
    Some(Wait::Idle)
}

// protocol: process P3 W4
// broken-variant: waiting_ignores_notified; class: lost wakeup; expects: the completion was lost
#[test]
fn completion_racing_end_of_step_is_never_lost() {
    loom::model(|| {
        let p = Proc::new();
        let worker = {
            let p = p.clone();
            thread::spawn(move || p.run_entry(wait_blocked))
        };
        // A handler completes the yield the first step made.
        let accepted = p.send(7, None, |p| p.run_entry(wait_blocked));
        worker.join().unwrap();
        assert_eq!(p.n(&p.stale), 0, "an entry found the process not READY");
        assert!(accepted);
        assert_eq!(p.n(&p.popped), 1, "the completion was lost");
        assert_eq!(p.n(&p.payload_sum), 7);
        assert_eq!(p.mailbox.snapshot().lifecycle(), Lifecycle::Blocked);
        assert_eq!(p.n(&p.entries), 0);
    });
}

// protocol: process P3 W4
// broken-variant: notify_leaves_idle_asleep; class: lost wakeup; expects: the message was lost
#[test]
fn message_racing_idle_transition_is_never_lost() {
    loom::model(|| {
        let p = Proc::new();
        let worker = {
            let p = p.clone();
            thread::spawn(move || p.run_entry(wait_idle))
        };
        let accepted = p.send(5, None, |p| p.run_entry(wait_idle));
        worker.join().unwrap();
        assert_eq!(p.n(&p.stale), 0, "an entry found the process not READY");
        assert!(accepted);
        assert_eq!(p.n(&p.popped), 1, "the message was lost");
        assert_eq!(p.mailbox.snapshot().lifecycle(), Lifecycle::Idle);
        assert_eq!(p.n(&p.entries), 0);
    });
}

// protocol: process P3 W1 W4
// broken-variant: notify_schedules_ready; class: missing state check; expects: an entry found the process not READY
#[test]
fn process_is_never_queued_twice() {
    loom::model(|| {
        let p = Proc::new();
        let worker = {
            let p = p.clone();
            thread::spawn(move || p.run_entry(wait_idle))
        };
        let a = p.send(1, None, |p| p.run_entry(wait_idle));
        let b = p.send(2, None, |p| p.run_entry(wait_idle));
        worker.join().unwrap();
        assert_eq!(p.n(&p.stale), 0, "an entry found the process not READY");
        assert!(a && b);
        assert_eq!(p.n(&p.max_entries), 1, "queued twice");
        assert_eq!(p.n(&p.popped), 2);
        assert_eq!(p.n(&p.payload_sum), 3);
    });
}

// protocol: process X1 C2
// broken-variant: cancel_revives_complete; class: missing state check; expects: a cancel revived it
#[test]
fn cancel_racing_completion() {
    loom::model(|| {
        let p = Proc::new();
        let worker = {
            let p = p.clone();
            // The process completes in its first step, cancelled or not.
            thread::spawn(move || p.run_entry(|_, _| None))
        };
        let r = p.mailbox.cancel();
        if r == TransitionToCancelled::Schedule {
            p.add_entry();
            p.run_entry(|_, _| None);
        }
        worker.join().unwrap();
        assert_eq!(p.n(&p.stale), 0, "an entry found the process not READY");
        assert_eq!(
            p.n(&p.steps),
            1,
            "stepped more than once: a cancel revived it"
        );
        assert_eq!(p.n(&p.steps_after_complete), 0, "stepped after complete");
        assert_eq!(p.n(&p.completions), 1);
        // A cancel the step saw was requested before it began.
        if p.saw_cancel.load(Ordering::Relaxed) {
            assert_eq!(r, TransitionToCancelled::Noted);
        }
    });
}

// protocol: process P2 W2 Q4 C2 L1 L2
// broken-variant: mpsc_ready_relaxed; class: missing Release/Acquire pair; expects: Causality violation
// broken-variant: lazy_queue_relaxed; class: missing Release/Acquire pair; expects: Causality violation
#[test]
fn mpsc_push_racing_pop_conserves_events() {
    loom::model(|| {
        // A fresh mailbox: the two sends also race to build its queue (L1)
        // while the worker may look for it (L2).
        let p = Proc::new();
        let worker = {
            let p = p.clone();
            thread::spawn(move || p.run_entry(wait_idle))
        };
        let producer = {
            let p = p.clone();
            thread::spawn(move || p.send(10, None, |p| p.run_entry(wait_idle)))
        };
        let a = p.send(1, None, |p| p.run_entry(wait_idle));
        let b = producer.join().unwrap();
        worker.join().unwrap();
        assert_eq!(p.n(&p.stale), 0, "an entry found the process not READY");
        assert!(a && b);
        // pushed == popped, each payload read after its write.
        assert_eq!(p.n(&p.popped), 2);
        assert_eq!(p.n(&p.payload_sum), 11);
        assert_eq!(p.mailbox.len(), 0);
    });
}

// protocol: process C2 X2
// broken-variant: claim_takes_running; class: missing state check; expects: only the token holder completes
#[test]
fn close_runs_exactly_once() {
    loom::model(|| {
        let p = Proc::new();
        let worker = {
            let p = p.clone();
            // A step that completes the process if it was cancelled, else
            // waits for messages.
            thread::spawn(move || p.run_entry(|_, c| if c { None } else { Some(Wait::Idle) }))
        };
        // Shutdown: cancel, then force-close whatever is not stepping.
        if p.mailbox.cancel() == TransitionToCancelled::Schedule {
            p.add_entry();
            p.run_entry(|_, c| if c { None } else { Some(Wait::Idle) });
        }
        loop {
            match p.mailbox.claim_for_close() {
                Ok(s) => {
                    p.complete(s);
                    break;
                }
                Err(magpie_core::process::TransitionToClaimed::Running) => thread::yield_now(),
                Err(_) => break,
            }
        }
        worker.join().unwrap();
        assert_eq!(p.n(&p.closes), 1, "close must run exactly once");
        assert!(p.mailbox.snapshot().is_complete());
    });
}

// protocol: process P1 C1
// broken-variant: admit_ignores_closed; class: missing state check; expects: a send after the exit was accepted
#[test]
fn send_racing_exit_is_refused_or_accepted_never_lost_unseen() {
    loom::model(|| {
        let p = Proc::new();
        let worker = {
            let p = p.clone();
            thread::spawn(move || p.run_entry(|_, _| None))
        };
        let saw_exit = p.complete.load(Ordering::Acquire);
        let r = p.mailbox.send(Msg::new(3, &p.drops), None);
        let accepted = match r {
            Ok(sent) => {
                // The process completes in its first step and never waits,
                // so no send can wake it.
                assert!(!sent.schedule);
                true
            }
            Err(refused) => {
                assert_eq!(refused.reason, Refusal::Closed);
                drop(refused.value);
                false
            }
        };
        if saw_exit {
            assert!(!accepted, "a send after the exit was accepted");
        }
        worker.join().unwrap();
        // A send after the exit (ordered by the join) is refused and hands
        // the message back.
        let late = p.mailbox.send(Msg::new(4, &p.drops), None);
        match late {
            Err(refused) => assert_eq!(refused.reason, Refusal::Closed),
            Ok(_) => panic!("a send after the exit was accepted"),
        }
        // The worker's clone went with its thread: this is the last one.
        let (popped, drained, drops) = (p.n(&p.popped), p.n(&p.drained), p.drops.clone());
        drop(p);
        // Accepted: popped by the step, drained at completion, or dropped
        // with the mailbox; refused: handed back and dropped here. Either
        // way exactly one drop per message (the racing one and the late one).
        assert_eq!(drops.load(Ordering::Relaxed), 2);
        assert!(popped + drained <= usize::from(accepted));
    });
}

/// Under loom a block has 2 slots, so three sends cross a block boundary.
// protocol: process BLOCK_CAP
#[test]
fn block_capacity_is_2_under_loom() {
    assert_eq!(BLOCK_CAP, 2);
}

/// Two producers race the consumer across a block boundary (3 events, 2
/// slots a block): the one that claims the third slot links the second
/// block while the consumer may be reaching the end of the first. Every
/// event is popped once, one producer's events in its order, each payload
/// read after its write.
// protocol: process Q1 Q2 Q3 Q4 C1 C2 C3
// broken-variant: grow_writes_start_after_link; class: publish before write; expects: Causality violation
#[test]
fn mpsc_push_racing_pop_across_a_block_boundary_conserves_per_producer_order() {
    loom::model(|| {
        let p = Proc::new();
        let worker = {
            let p = p.clone();
            thread::spawn(move || p.run_entry(wait_idle))
        };
        let producer = {
            let p = p.clone();
            thread::spawn(move || p.send(20, None, |p| p.run_entry(wait_idle)))
        };
        // Producer A: two events, in this order.
        let a1 = p.send(1, None, |p| p.run_entry(wait_idle));
        let a2 = p.send(2, None, |p| p.run_entry(wait_idle));
        let b = producer.join().unwrap();
        worker.join().unwrap();
        assert_eq!(p.n(&p.stale), 0, "an entry found the process not READY");
        assert!(a1 && a2 && b);
        assert_eq!(p.n(&p.popped), 3, "an event was lost");
        assert_eq!(p.n(&p.payload_sum), 23);
        assert_eq!(p.n(&p.last_from_a), 2);
        assert_eq!(p.mailbox.len(), 0);
    });
}

/// The first block is full before the race (events 1 and 2). Then two
/// producers claim slots 2 and 3, in the second block: the one that walks
/// from the first block to link or reach the second may be slow, while the
/// consumer reads past the first block and recycles it. The consumer
/// recycles a block only after every producer that could have loaded it
/// from `block_tail` has made its slot ready (README, R2-R3): no producer
/// touches a recycled block (loom would report the consumer's reset of its
/// start racing the producer's read), and every event arrives. The
/// consumer's snapshot of the full first block's ready bits is forgotten
/// when it moves to the second (C1), so it reads slot 2 only after its own
/// Acquire load saw that slot's bit (C2).
// protocol: process R1 R2 R3 R4 Q1 Q2 C1 C2
// broken-variant: recycle_ignores_observed_tail; class: slot reuse; expects: Causality violation
// broken-variant: observed_tail_by_load; class: store buffering; expects: Causality violation
// broken-variant: ready_snapshot_kept_across_blocks; class: stale snapshot; expects: index out of bounds
#[test]
fn block_recycling_racing_a_slow_producer_never_reuses_a_held_block() {
    loom::model(|| {
        let p = Proc::new();
        // Before any thread: the process is READY (the spawn's entry), so
        // these sends schedule nothing.
        assert!(p.send(1, None, |_| unreachable!("READY: no schedule")));
        assert!(p.send(2, None, |_| unreachable!("READY: no schedule")));
        let worker = {
            let p = p.clone();
            thread::spawn(move || p.run_entry(wait_idle))
        };
        let producer = {
            let p = p.clone();
            thread::spawn(move || p.send(20, None, |p| p.run_entry(wait_idle)))
        };
        let a3 = p.send(3, None, |p| p.run_entry(wait_idle));
        let b = producer.join().unwrap();
        worker.join().unwrap();
        assert_eq!(p.n(&p.stale), 0, "an entry found the process not READY");
        assert!(a3 && b);
        assert_eq!(p.n(&p.popped), 4, "an event was lost");
        assert_eq!(p.n(&p.payload_sum), 26);
        assert_eq!(p.n(&p.last_from_a), 3);
        assert_eq!(p.mailbox.len(), 0);
    });
}

/// A batch of two events races a single send and the consumer. One event
/// is queued before the race (so the queue is built, and the model spends
/// its preemptions on the batch, not on L1). Blocks have 2 slots: if the
/// batch claims first it takes slots 1 and 2, crossing the block boundary
/// (it links the second block), and the single send's slot 3 shares the
/// batch's last block and its ready word; if the single send claims
/// first, the batch fills the second block from its start. Every event is
/// popped once, the batch's in its order, each payload read after its
/// write.
// protocol: process B1 B2 B3 B4 C1 C2
// broken-variant: batch_ready_relaxed; class: missing Release/Acquire pair; expects: Causality violation
#[test]
fn batch_push_racing_a_single_send_and_pop_conserves_per_producer_order() {
    loom::model(|| {
        let p = Proc::new();
        // READY (the spawn's entry): no schedule. Not below 10, so not one
        // of A's.
        assert!(p.send(10, None, |_| unreachable!("READY: no schedule")));
        let worker = {
            let p = p.clone();
            thread::spawn(move || p.run_entry(wait_idle))
        };
        let producer = {
            let p = p.clone();
            thread::spawn(move || p.send(20, None, |p| p.run_entry(wait_idle)))
        };
        // Producer A: one batch, in this order.
        let a = p.send_batch(&[1, 2], |p| p.run_entry(wait_idle));
        let b = producer.join().unwrap();
        worker.join().unwrap();
        assert_eq!(p.n(&p.stale), 0, "an entry found the process not READY");
        assert!(a && b);
        assert_eq!(p.n(&p.popped), 4, "an event was lost");
        assert_eq!(p.n(&p.payload_sum), 33);
        assert_eq!(p.n(&p.last_from_a), 2);
        assert_eq!(p.n(&p.max_entries), 1, "queued twice");
        assert_eq!(p.mailbox.len(), 0);
    });
}

/// A step on the worker and a step on the sender's thread (woken by its
/// message after the worker's step went IDLE, or re-queued by it): each
/// writes the process's body through its token, with no lock. The token's
/// transitions hand the body over: the first step's `finish` (Release)
/// heads a release sequence on the state word that the sender's notify
/// continues and the second step's `transition_to_running` (Acquire) reads.
/// After the join, the body counts every step.
// protocol: process BODY W1 W4 P3
// broken-variant: finish_without_release; class: missing Release/Acquire pair; expects: Causality violation
#[test]
fn body_is_handed_from_one_token_holder_to_the_next() {
    loom::model(|| {
        let p = Proc::new();
        let worker = {
            let p = p.clone();
            thread::spawn(move || p.run_entry(wait_idle))
        };
        let accepted = p.send(5, None, |p| p.run_entry(wait_idle));
        worker.join().unwrap();
        assert!(accepted);
        assert_eq!(p.n(&p.popped), 1, "the message was lost");
        let mut s = p
            .mailbox
            .claim_for_close()
            .expect("IDLE after the join: claimable");
        assert_eq!(
            *s.body() as usize,
            p.n(&p.steps),
            "a step's body write was lost"
        );
        let _ = s.complete(drop);
    });
}
