//! Loom models of fork-join (`magpie_core::join`): the worker's latch racing
//! its owner's sleep, a stolen job finishing while its owner waits, and
//! panics crossing from one half to the joiner.
//!
//! Each model has one owner (the model's main thread, worker 0) running
//! `join::join` with a one-slot "local queue" and one thief (worker 1)
//! that takes the job from the slot if it gets there first. The owner waits
//! exactly as a pool worker does when there is nothing else to run: it
//! commits to sleeping on the latch (L2), parks on its `Parker`, and leaves
//! the sleeping state on waking (L5).
//!
//! Run: `RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2
//! CARGO_TARGET_DIR=target/loom cargo test -p magpie-core --release --test
//! loom_join`. The protocol is `core/src/join/README.md`.
#![cfg(loom)]

use std::panic::{self, AssertUnwindSafe};

use magpie_core::join::{self, CoreLatch, FallAsleep, JobRef, JobSink, JoinContext, Latch, Wake};
use magpie_core::park::{Parker, Unparker};
use magpie_core::sync::{thread, Arc, Mutex, UnsafeCell};

/// The owner's one-slot local queue, shared with the thief.
type Slot = Arc<Mutex<Option<JobRef>>>;

struct Owner {
    slot: Slot,
    parker: Parker,
}

impl JoinContext for Owner {
    fn owner(&self) -> usize {
        0
    }
    fn push(&mut self, job: JobRef) {
        let old = self.slot.lock().unwrap().replace(job);
        assert!(old.is_none());
    }
    fn pop(&mut self) -> Option<JobRef> {
        self.slot.lock().unwrap().take()
    }
    fn wake(&mut self, wake: Wake) {
        // Only the thief's set can find the owner asleep.
        assert_eq!(wake, Wake::Nobody, "the owner woke itself");
    }
    fn wait(&mut self, latch: &CoreLatch) {
        // Nothing else to run in the model: sleep until the thief sets.
        if latch.fall_asleep() == FallAsleep::Asleep {
            self.parker.park();
            let _ = latch.wake_up();
        }
    }
}

/// The thief: one look at the slot; if the job is there, run it and wake
/// the owner if the set says it sleeps.
fn spawn_thief(slot: &Slot, owner: Unparker) -> thread::JoinHandle<()> {
    let slot = slot.clone();
    thread::spawn(move || {
        let job = slot.lock().unwrap().take();
        if let Some(job) = job {
            match job.execute() {
                Wake::Worker(0) => {
                    owner.unpark();
                }
                Wake::Worker(i) => panic!("woke worker {i}, not the owner"),
                Wake::Nobody => {}
            }
        }
    })
}

fn owner() -> (Owner, Slot, Unparker) {
    let slot: Slot = Arc::new(Mutex::new(None));
    let parker = Parker::new();
    let unparker = parker.unparker();
    (
        Owner {
            slot: slot.clone(),
            parker,
        },
        slot,
        unparker,
    )
}

/// A cell one half of a join touches and the owner reads: loom reports an
/// access the join protocol does not order.
struct Cell(UnsafeCell<u32>);

// SAFETY: the models access the cell from two threads only where the join
// protocol claims an order; loom checks that claim.
unsafe impl Sync for Cell {}

/// Keeps the panic hook quiet for the models' own panics (one per explored
/// execution), and loud for everything else, loom's reports included.
fn quiet_expected_panics() {
    let default = panic::take_hook();
    panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .copied()
            .unwrap_or_default();
        if !msg.starts_with("model:") {
            default(info);
        }
    }));
}

// protocol: join L2 L3 L4 L5
// broken-variant: latch_sleep_overwrites_set; class: lost wakeup; expects: deadlock
#[test]
fn latch_set_racing_owner_sleep_never_leaves_it_asleep() {
    loom::model(|| {
        let latch = Arc::new(CoreLatch::new(0));
        let parker = Parker::new();
        let setter = {
            let latch = latch.clone();
            let unparker = parker.unparker();
            thread::spawn(move || {
                // SAFETY: the Arc keeps the latch alive past the call.
                if let Wake::Worker(0) = unsafe { CoreLatch::set(&*latch) } {
                    unparker.unpark();
                }
            })
        };
        // The owner: nothing to run, so it sleeps until the latch is set.
        while !latch.probe() {
            if latch.fall_asleep() == FallAsleep::Asleep {
                parker.park();
                let _ = latch.wake_up();
            }
        }
        setter.join().unwrap();
        assert!(latch.snapshot().is_set());
    });
}

// protocol: join J1 J4 J5 J6 L1
// broken-variant: latch_set_relaxed; class: missing Release/Acquire pair; expects: Causality violation
#[test]
fn stolen_job_result_is_seen_by_its_waiting_owner() {
    loom::model(|| {
        let (mut ctx, slot, unparker) = owner();
        let thief = spawn_thief(&slot, unparker);
        // `b` reads what the owner wrote before the join, and returns a value
        // built from it; loom checks both cross-thread accesses.
        let input = Cell(UnsafeCell::new(0u32));
        // SAFETY: no other thread sees `input` yet.
        input.0.with_mut(|p| unsafe { *p = 20 });
        let input = &input;
        let (a, b) = join::join(
            &mut ctx,
            || 1u32,
            // SAFETY: written before the push; read-only from here on.
            move || input.0.with(|p| unsafe { *p }) + 2,
        );
        assert_eq!((a, b), (1, 22), "the stolen job's result was lost");
        thief.join().unwrap();
    });
}

// protocol: join J3 J5 J7
// broken-variant: unwind_skips_wait; class: frame left while shared; expects: a frame with a job still running elsewhere was left
#[test]
fn panic_in_a_waits_for_stolen_b_then_reaches_the_joiner() {
    quiet_expected_panics();
    loom::model(|| {
        let (mut ctx, slot, unparker) = owner();
        let thief = spawn_thief(&slot, unparker);
        // `b` writes into the owner's frame: the frame must still be there.
        let written = Cell(UnsafeCell::new(0u32));
        let w = &written;
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            join::join(
                &mut ctx,
                || panic!("model: a failed"),
                // SAFETY: only `b` writes; the owner reads after the join.
                move || w.0.with_mut(|p| unsafe { *p = 7 }),
            )
        }));
        let payload = r.expect_err("a's panic was lost");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"model: a failed"));
        // SAFETY: the join returned, so `b` finished (J6).
        assert_eq!(written.0.with(|p| unsafe { *p }), 7, "b had not run");
        thief.join().unwrap();
    });
}

// protocol: join J4 J6
// broken-variant: panic_sets_latch_before_result; class: missing Release/Acquire pair; expects: Causality violation
#[test]
fn panic_in_stolen_b_reaches_the_joiner_with_its_payload() {
    quiet_expected_panics();
    loom::model(|| {
        let (mut ctx, slot, unparker) = owner();
        let thief = spawn_thief(&slot, unparker);
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            join::join(&mut ctx, || 1u32, || -> u32 { panic!("model: b failed") })
        }));
        let payload = r.expect_err("b's panic was lost");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"model: b failed"));
        thief.join().unwrap();
    });
}

/// The scope model's sink: a shared queue the owner pops from the back and
/// each thief takes from once.
struct Queue(Arc<Mutex<Vec<JobRef>>>);

impl JobSink for Queue {
    fn push(&self, job: JobRef) {
        self.0.lock().unwrap().push(job);
    }
}

/// The scope's owner: its local queue is the shared one.
struct ScopeOwner {
    queue: Arc<Mutex<Vec<JobRef>>>,
    parker: Parker,
}

impl JoinContext for ScopeOwner {
    fn owner(&self) -> usize {
        0
    }
    fn push(&mut self, job: JobRef) {
        self.queue.lock().unwrap().push(job);
    }
    fn pop(&mut self) -> Option<JobRef> {
        self.queue.lock().unwrap().pop()
    }
    fn wake(&mut self, wake: Wake) {
        assert_eq!(wake, Wake::Nobody, "the owner woke itself");
    }
    fn wait(&mut self, latch: &CoreLatch) {
        if latch.fall_asleep() == FallAsleep::Asleep {
            self.parker.park();
            let _ = latch.wake_up();
        }
    }
}

// protocol: join S2 S4 S5
// broken-variant: scope_count_relaxed; class: missing Release/Acquire pair; expects: Causality violation
#[test]
fn scope_returns_after_every_spawn_and_sees_all_their_writes() {
    loom::model(|| {
        let queue: Arc<Mutex<Vec<JobRef>>> = Arc::new(Mutex::new(Vec::new()));
        let parker = Parker::new();
        // Two thieves, one look each: the spawns may run on either, on
        // both, or come back to the owner.
        let thieves: Vec<_> = (0..2)
            .map(|_| {
                let queue = queue.clone();
                let owner = parker.unparker();
                thread::spawn(move || {
                    let job = queue.lock().unwrap().pop();
                    if let Some(job) = job {
                        if let Wake::Worker(0) = job.execute() {
                            owner.unpark();
                        }
                    }
                })
            })
            .collect();
        let mut ctx = ScopeOwner {
            queue: queue.clone(),
            parker,
        };
        let cells = [Cell(UnsafeCell::new(0u32)), Cell(UnsafeCell::new(0u32))];
        let cells_ref = &cells;
        join::scope(&mut ctx, Queue(queue.clone()), |s| {
            for (i, cell) in cells_ref.iter().enumerate() {
                // SAFETY: each spawn writes its own cell; the owner reads
                // them after the scope.
                s.spawn(move |_| cell.0.with_mut(|p| unsafe { *p = i as u32 + 1 }));
            }
        });
        for (i, cell) in cells.iter().enumerate() {
            // SAFETY: the scope returned, so every spawn finished (S5).
            let v = cell.0.with(|p| unsafe { *p });
            assert_eq!(
                v,
                i as u32 + 1,
                "a spawn had not run when the scope returned"
            );
        }
        for t in thieves {
            t.join().unwrap();
        }
    });
}

// protocol: join B1 B2 B3
// broken-variant: lock_latch_skips_notify; class: lost wakeup; expects: deadlock
#[test]
fn install_from_outside_returns_the_value_once_a_worker_ran_it() {
    loom::model(|| {
        let slot: Slot = Arc::new(Mutex::new(None));
        // The worker polls the pool's queue (the slot) until the job is
        // there, runs it, and is done.
        let worker = {
            let slot = slot.clone();
            thread::spawn(move || loop {
                let job = slot.lock().unwrap().take();
                if let Some(job) = job {
                    assert_eq!(job.execute(), Wake::Nobody);
                    return;
                }
                thread::yield_now();
            })
        };
        let input = Cell(UnsafeCell::new(0u32));
        // SAFETY: not shared yet.
        input.0.with_mut(|p| unsafe { *p = 40 });
        let input = &input;
        let v = join::install(
            // SAFETY: written before the inject, read-only from here on.
            move || input.0.with(|p| unsafe { *p }) + 2,
            |job| {
                *slot.lock().unwrap() = Some(job);
                Ok(())
            },
        );
        assert_eq!(v, 42, "the installed job's value was lost");
        worker.join().unwrap();
    });
}

// protocol: join X1 X2 X3 L2 L5
// broken-variant: cross_latch_returns_wake; class: lost wakeup; expects: deadlock
#[test]
fn cross_pool_install_wakes_its_owner_with_the_value() {
    loom::model(|| {
        // Pool A's worker 0 (the model's main thread, with an empty local
        // queue) installs into pool B, whose worker 0 polls B's queue (the
        // slot), runs the job and acts on the set's `Wake` as B's registry
        // does: by unparking B's worker with that index. B has one worker,
        // the thread itself, so that unpark reaches nobody A needs.
        let (mut a_worker, _a_slot, a_unparker) = owner();
        let b_queue: Slot = Arc::new(Mutex::new(None));
        let b_worker = {
            let b_queue = b_queue.clone();
            thread::spawn(move || {
                let b_parker = Parker::new();
                loop {
                    let job = b_queue.lock().unwrap().take();
                    if let Some(job) = job {
                        if let Wake::Worker(0) = job.execute() {
                            b_parker.unparker().unpark();
                        }
                        return;
                    }
                    thread::yield_now();
                }
            })
        };
        let input = Cell(UnsafeCell::new(0u32));
        // SAFETY: not shared yet.
        input.0.with_mut(|p| unsafe { *p = 40 });
        let input = &input;
        let v = join::install_cross(
            &mut a_worker,
            a_unparker,
            // SAFETY: written before the inject, read-only from here on.
            move || input.0.with(|p| unsafe { *p }) + 2,
            |job| {
                *b_queue.lock().unwrap() = Some(job);
                Ok(())
            },
        );
        assert_eq!(v, 42, "the installed job's value was lost");
        b_worker.join().unwrap();
    });
}
