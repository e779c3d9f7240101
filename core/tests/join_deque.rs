//! fork-join's Chase-Lev deque (`magpie_core::join::deque`) on real
//! threads, sized for Miri: an owner pushing and popping while thieves
//! steal, every job run exactly once; and `join::join` through the deque
//! with a thief, deeper than the deque's capacity (the overflow runs inline).
//!
//! Run under Miri: `cargo +nightly miri test -p magpie-core --test join_deque`.
#![cfg(not(loom))]

use std::rc::Rc;

use magpie_core::join::deque::{self, Stolen, DEQUE_CAPACITY};
use magpie_core::join::{self, CoreLatch, FallAsleep, HeapJob, JobRef, JoinContext, Wake};
use magpie_core::park::{Parker, Unparker};
use magpie_core::rng::XorShift64;
use magpie_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use magpie_core::sync::{thread, Arc};

/// Jobs the stress test pushes.
const JOBS: usize = if cfg!(miri) { 300 } else { 200_000 };
/// Thieves in the stress test.
const THIEVES: usize = 2;
/// A bound on a thief's steal attempts (every test loop is bounded).
const MAX_STEAL_TRIES: usize = JOBS * 200;

/// Jobs that each count their runs in their own cell.
fn job(runs: &Arc<Vec<AtomicUsize>>, i: usize) -> JobRef {
    let runs = runs.clone();
    HeapJob::new(move || {
        runs[i].fetch_add(1, Ordering::Relaxed);
    })
    .into_job_ref()
}

#[test]
fn steals_and_pops_run_every_job_exactly_once() {
    let (local, steal) = deque::deque();
    let steal = Arc::new(steal);
    let runs: Arc<Vec<AtomicUsize>> = Arc::new((0..JOBS).map(|_| AtomicUsize::new(0)).collect());
    let done = Arc::new(AtomicBool::new(false));
    let stolen = Arc::new(AtomicUsize::new(0));
    let thieves: Vec<_> = (0..THIEVES)
        .map(|_| {
            let (steal, done, stolen) = (steal.clone(), done.clone(), stolen.clone());
            thread::spawn(move || {
                for _ in 0..MAX_STEAL_TRIES {
                    match steal.steal() {
                        Stolen::Job(j) => {
                            let _ = j.execute();
                            stolen.fetch_add(1, Ordering::Relaxed);
                        }
                        Stolen::Retry => {}
                        Stolen::Empty => {
                            // Acquire: pairs with the owner's Release store:
                            // every push came before it.
                            if done.load(Ordering::Acquire) && steal.is_empty() {
                                return;
                            }
                            thread::yield_now();
                        }
                    }
                }
                panic!("a thief never saw the end");
            })
        })
        .collect();
    // The owner: bursts of pushes, some pops in between (a random mix),
    // full-deque pushes handed back and run here.
    let mut rng = XorShift64::new(0x5eed);
    let mut popped = 0usize;
    let mut inline = 0usize;
    let mut i = 0;
    while i < JOBS {
        let burst = 1 + rng.next_usize(DEQUE_CAPACITY + 2);
        for _ in 0..burst.min(JOBS - i) {
            if let Err(j) = local.push(job(&runs, i)) {
                let _ = j.execute();
                inline += 1;
            }
            i += 1;
        }
        for _ in 0..rng.next_usize(burst + 1) {
            match local.pop() {
                Some(j) => {
                    let _ = j.execute();
                    popped += 1;
                }
                None => break,
            }
        }
    }
    while let Some(j) = local.pop() {
        let _ = j.execute();
        popped += 1;
    }
    // Release: pairs with the thieves' Acquire load.
    done.store(true, Ordering::Release);
    for t in thieves {
        t.join().unwrap();
    }
    assert_eq!(popped + inline + stolen.load(Ordering::Relaxed), JOBS);
    for (i, r) in runs.iter().enumerate() {
        assert_eq!(
            r.load(Ordering::Relaxed),
            1,
            "job {i} ran a wrong number of times"
        );
    }
}

/// A pool worker's context over the deque: what the runtime's join face does
/// (a full deque runs the job inline), without the runtime.
#[derive(Clone)]
struct Owner(Rc<(deque::Local, Parker)>);

impl JoinContext for Owner {
    fn owner(&self) -> usize {
        0
    }
    fn push(&mut self, job: JobRef) {
        if let Err(job) = self.0 .0.push(job) {
            let wake = job.execute();
            self.wake(wake);
        }
    }
    fn pop(&mut self) -> Option<JobRef> {
        self.0 .0.pop()
    }
    fn wake(&mut self, wake: Wake) {
        assert_eq!(wake, Wake::Nobody, "the owner woke itself");
    }
    fn wait(&mut self, latch: &CoreLatch) {
        if latch.fall_asleep() == FallAsleep::Asleep {
            self.0 .1.park();
            let _ = latch.wake_up();
        }
    }
}

/// Sums `depth + (depth - 1) + ... + 1` as a chain of nested joins, each
/// `b` borrowing from its joiner's frame.
fn chain(ctx: &Owner, depth: u64) -> u64 {
    if depth == 0 {
        return 0;
    }
    let mine = depth;
    let mine = &mine;
    let (rest, me) = join::join(&mut ctx.clone(), || chain(ctx, depth - 1), move || *mine);
    rest + me
}

fn spawn_thief(
    steal: deque::Steal,
    owner: Unparker,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<usize> {
    thread::spawn(move || {
        let mut ran = 0;
        for _ in 0..MAX_STEAL_TRIES {
            match steal.steal() {
                Stolen::Job(j) => {
                    ran += 1;
                    if let Wake::Worker(0) = j.execute() {
                        owner.unpark();
                    }
                }
                Stolen::Retry => {}
                Stolen::Empty => {
                    if stop.load(Ordering::Relaxed) {
                        return ran;
                    }
                    thread::yield_now();
                }
            }
        }
        panic!("the thief never saw the end");
    })
}

#[test]
fn joins_deeper_than_the_deque_return_every_result_with_a_thief_stealing() {
    // A deep recursion of joins in a debug build: a roomy stack.
    let owner = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(|| {
            let (local, steal) = deque::deque();
            let parker = Parker::new();
            let stop = Arc::new(AtomicBool::new(false));
            let thief = spawn_thief(steal, parker.unparker(), stop.clone());
            let owner = Owner(Rc::new((local, parker)));
            // Past the capacity: the deepest pushes find the deque full.
            let depth = DEQUE_CAPACITY as u64 + 8;
            let rounds = if cfg!(miri) { 2 } else { 50 };
            for _ in 0..rounds {
                assert_eq!(chain(&owner, depth), depth * (depth + 1) / 2);
                assert!(owner.0 .0.is_empty());
            }
            stop.store(true, Ordering::Relaxed);
            thief.join().unwrap()
        })
        .unwrap();
    let _stolen = owner.join().unwrap();
}
