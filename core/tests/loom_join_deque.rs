//! Loom models of fork-join's Chase-Lev deque (`magpie_core::join::deque`,
//! steps D1-D8 of `core/src/join/README.md`) under the real `join::join`.
//!
//! Each model has one owner (the model's main thread, worker 0) whose
//! `JoinContext` pushes to and pops from a real deque, exactly as the
//! runtime's join worker does (a full deque runs the job inline, D2), and
//! one thief that steals from the deque's top a bounded number of times,
//! runs what it got and unparks the owner if the latch set says it sleeps.
//! Each job's closure counts its runs, and the models assert every job ran
//! exactly once; a job run twice also trips the stack job's own "ran twice"
//! check or loom's causality check on its closure cell.
//!
//! Under loom the deque has 2 slots (`DEQUE_CAPACITY`), so two pushes fill
//! it and a third after a take wraps around; the wrap-around model drives
//! the deque directly with heap jobs.
//!
//! Run: `RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2
//! CARGO_TARGET_DIR=target/loom cargo test -p magpie-core --release --test
//! loom_join_deque`.
#![cfg(loom)]

use magpie_core::join::deque::{self, Stolen, DEQUE_CAPACITY};
use magpie_core::join::{self, CoreLatch, FallAsleep, HeapJob, JobRef, JoinContext, Wake};
use magpie_core::park::{Parker, Unparker};
use magpie_core::sync::atomic::{AtomicUsize, Ordering};
use std::rc::Rc;

use magpie_core::sync::{thread, Arc, UnsafeCell};

/// The owner: its deque's owner end and its parker. Cloned into the
/// closures of nested joins (the runtime reaches the same through a
/// thread-local); every method of the owner end takes `&self`.
#[derive(Clone)]
struct Owner(Rc<OwnerState>);

struct OwnerState {
    local: deque::Local,
    parker: Parker,
}

impl JoinContext for Owner {
    fn owner(&self) -> usize {
        0
    }
    fn push(&mut self, job: JobRef) {
        // D2: a full deque runs the job here, as the runtime does.
        if let Err(job) = self.0.local.push(job) {
            let wake = job.execute();
            self.wake(wake);
        }
    }
    fn pop(&mut self) -> Option<JobRef> {
        self.0.local.pop()
    }
    fn wake(&mut self, wake: Wake) {
        // Only the thief's set can find the owner asleep.
        assert_eq!(wake, Wake::Nobody, "the owner woke itself");
    }
    fn wait(&mut self, latch: &CoreLatch) {
        // Nothing else to run in the model: sleep until the thief sets.
        if latch.fall_asleep() == FallAsleep::Asleep {
            self.0.parker.park();
            let _ = latch.wake_up();
        }
    }
}

/// A thief: up to `tries` steals from the owner's deque, each job run at
/// once, the owner unparked when the set says it sleeps.
fn spawn_thief(steal: deque::Steal, owner: Unparker, tries: usize) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        for _ in 0..tries {
            match steal.steal() {
                Stolen::Job(job) => match job.execute() {
                    Wake::Worker(0) => {
                        owner.unpark();
                    }
                    Wake::Worker(i) => panic!("woke worker {i}, not the owner"),
                    Wake::Nobody => {}
                },
                Stolen::Empty => return,
                Stolen::Retry => {}
            }
        }
    })
}

fn owner() -> (Owner, deque::Steal, Unparker) {
    let (local, steal) = deque::deque();
    let parker = Parker::new();
    let unparker = parker.unparker();
    (
        Owner(Rc::new(OwnerState { local, parker })),
        steal,
        unparker,
    )
}

/// Run counts, one per job of a model.
struct Runs(Vec<AtomicUsize>);

impl Runs {
    fn new(n: usize) -> Arc<Self> {
        Arc::new(Runs((0..n).map(|_| AtomicUsize::new(0)).collect()))
    }
    fn hit(&self, i: usize) -> usize {
        self.0[i].fetch_add(1, Ordering::Relaxed);
        i
    }
    fn assert_each_ran_once(&self) {
        for (i, r) in self.0.iter().enumerate() {
            assert_eq!(
                r.load(Ordering::Relaxed),
                1,
                "job {i} ran a wrong number of times"
            );
        }
    }
}

/// A cell the owner writes before a join and a stolen half reads: loom
/// reports the read if the push did not publish the write.
struct Cell(UnsafeCell<u32>);

// SAFETY: the models access the cell from two threads only where the deque
// protocol claims an order; loom checks that claim.
unsafe impl Sync for Cell {}

// protocol: join capacity
#[test]
fn deque_capacity_under_loom_is_2() {
    assert_eq!(DEQUE_CAPACITY, 2);
}

/// The owner takes back its only job while the thief steals it: exactly
/// one of them gets it.
// protocol: join D4 D5 D6 D8
// broken-variant: deque_pop_skips_last_cas; class: check-then-act; expects: Causality violation
#[test]
fn pop_racing_steal_of_the_last_job_gives_it_to_exactly_one() {
    loom::model(|| {
        let (mut ctx, steal, unparker) = owner();
        let thief = spawn_thief(steal, unparker, 2);
        let runs = Runs::new(2);
        let (a, b) = join::join(&mut ctx, || runs.hit(0), || runs.hit(1));
        assert_eq!((a, b), (0, 1));
        thief.join().unwrap();
        runs.assert_each_ran_once();
        assert!(ctx.0.local.is_empty());
    });
}

/// Two jobs in the deque, the owner taking back the newer one while the
/// thief steals the older and then the newer: no job is taken twice. The
/// owner's take of the newer job is not the last one when it starts, so
/// only the `SeqCst` fences (D4, D6) keep it from racing the second steal.
// protocol: join D4 D5 D6
// broken-variant: deque_pop_no_fence; class: store buffering; expects: Causality violation
// broken-variant: deque_steal_no_fence; class: store buffering; expects: Causality violation
#[test]
fn pop_and_steal_never_take_one_job_twice() {
    loom::model(|| {
        let (mut ctx, steal, unparker) = owner();
        let thief = spawn_thief(steal, unparker, 3);
        let runs = Runs::new(3);
        let mut inner = ctx.clone();
        let ((a, b), c) = join::join(
            &mut ctx,
            || join::join(&mut inner, || runs.hit(0), || runs.hit(1)),
            || runs.hit(2),
        );
        assert_eq!((a, b, c), (0, 1, 2));
        thief.join().unwrap();
        runs.assert_each_ran_once();
    });
}

/// A stolen job sees what the owner wrote before it pushed the job: its
/// closure (the stack job) and the data the closure reads.
// protocol: join D3 D6
// broken-variant: deque_push_relaxed; class: missing Release/Acquire pair; expects: stole a slot the push had not published
#[test]
fn steal_sees_the_job_the_owner_pushed() {
    loom::model(|| {
        let (mut ctx, steal, unparker) = owner();
        let thief = spawn_thief(steal, unparker, 1);
        let input = Cell(UnsafeCell::new(0));
        // SAFETY: no other thread sees `input` yet.
        input.0.with_mut(|p| unsafe { *p = 40 });
        let input = &input;
        // SAFETY: written before the push; read-only from here on.
        let (a, b) = join::join(&mut ctx, || 1, move || input.0.with(|p| unsafe { *p }) + 2);
        assert_eq!((a, b), (1, 42));
        thief.join().unwrap();
    });
}

/// A heap job that counts its runs in `runs[i]`.
fn counted_job(runs: &Arc<Runs>, i: usize) -> JobRef {
    let runs = runs.clone();
    HeapJob::new(move || {
        runs.hit(i);
    })
    .into_job_ref()
}

/// Runs the jobs taken, after checking that none was taken twice (by data
/// address, from `JobRef`'s `Debug`). The check comes first: every job is
/// still unrun, so no two share an address, and a heap job run twice would
/// free its box twice.
fn run_taken(taken: Vec<JobRef>) {
    let mut ids: Vec<String> = taken.iter().map(|j| format!("{j:?}")).collect();
    ids.sort();
    let n = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), n, "a job was taken twice");
    for job in taken {
        assert_eq!(job.execute(), Wake::Nobody);
    }
}

/// On a two-slot deque the owner pushes two jobs, takes both back, pushes
/// three more (the second reuses the first slot: wrap-around; the third
/// finds the deque full and is handed back) and takes back what is left,
/// while the thief steals twice: its read of a slot may race the owner
/// rewriting it (D7), and its swap then fails. Every job is taken exactly
/// once.
// protocol: join D2 D3 D6 D7
// broken-variant: deque_push_skips_full_check; class: slot reuse; expects: a job was taken twice
#[test]
fn wrap_around_reuses_only_taken_slots() {
    loom::model(|| {
        let (local, steal) = deque::deque();
        let runs = Runs::new(5);
        let thief = thread::spawn(move || {
            let mut got = Vec::new();
            for _ in 0..2 {
                if let Stolen::Job(job) = steal.steal() {
                    got.push(job);
                }
            }
            got
        });
        let mut taken = Vec::new();
        let push = |i, taken: &mut Vec<JobRef>| {
            if let Err(job) = local.push(counted_job(&runs, i)) {
                taken.push(job);
            }
        };
        push(0, &mut taken);
        push(1, &mut taken);
        while let Some(job) = local.pop() {
            taken.push(job);
        }
        push(2, &mut taken);
        push(3, &mut taken);
        push(4, &mut taken);
        while let Some(job) = local.pop() {
            taken.push(job);
        }
        assert!(local.is_empty());
        taken.extend(thief.join().unwrap());
        run_taken(taken);
        runs.assert_each_ran_once();
    });
}
