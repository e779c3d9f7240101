//! Stress: an owner pushing, popping, overflowing and fetching from the
//! inject queue; several stealers stealing from the owner and from each other
//! (so steals chain); an outside thread pushing to the inject queue. Every task
//! must be seen exactly once.
//!
//! Termination does not depend on counting: once both producers are done the
//! stealers are stopped and joined, and whatever is left in any queue is
//! drained on this thread, so a lost task fails the final check rather than
//! hanging the test.
#![cfg(not(loom))]

use magpie_core::queue::{self, Inject, Local, Steal};
use magpie_core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use magpie_core::sync::{thread, Arc};

/// Tasks the owner creates (pushing through its ring, overflowing to inject).
const OWNER_TASKS: u32 = if cfg!(miri) { 1_500 } else { 8_000_000 };
/// Tasks the outside thread pushes to the inject queue.
const INJECT_TASKS: u32 = if cfg!(miri) { 500 } else { 2_000_000 };
const TOTAL: u32 = OWNER_TASKS + INJECT_TASKS;
const STEALERS: usize = if cfg!(miri) { 2 } else { 3 };
/// Owner plus stealers, for the inject fair share.
const WORKERS: usize = STEALERS + 1;

/// One bit per task.
struct Seen {
    bits: Vec<AtomicU64>,
}

impl Seen {
    fn new(n: u32) -> Self {
        Seen {
            bits: (0..n.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Records `task`, panicking if it was seen before.
    fn record(&self, task: u32) {
        let bit = 1u64 << (task % 64);
        // Relaxed: the bitset is only a tally; each bit is set by one RMW and
        // the final check runs after every thread is joined.
        let prev = self.bits[(task / 64) as usize].fetch_or(bit, Ordering::Relaxed);
        assert_eq!(prev & bit, 0, "task {task} seen twice");
    }

    /// Tasks never seen.
    fn missing(&self, n: u32) -> Vec<u32> {
        (0..n)
            .filter(|&t| {
                self.bits[(t / 64) as usize].load(Ordering::Relaxed) & (1 << (t % 64)) == 0
            })
            .collect()
    }
}

/// xorshift32, seeded per thread, to vary burst sizes and victims.
struct Rng(u32);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        self.0
    }
}

fn drain_into(q: &mut Local<u32>, seen: &Seen) {
    while let Some(task) = q.pop() {
        seen.record(task);
    }
}

#[test]
fn owner_stealers_and_injector_see_every_task_exactly_once() {
    let seen = Arc::new(Seen::new(TOTAL));
    let inject = Arc::new(Inject::new());
    let stop = Arc::new(AtomicBool::new(false));

    let (owner, owner_steal) = queue::local::<u32>();
    let mut locals = Vec::new();
    let mut steals: Vec<Steal<u32>> = vec![owner_steal];
    for _ in 0..STEALERS {
        let (local, steal) = queue::local();
        locals.push(local);
        steals.push(steal);
    }

    let owner_thread = {
        let (seen, inject) = (seen.clone(), inject.clone());
        thread::spawn(move || {
            let mut owner = owner;
            let mut rng = Rng(0x9e37_79b9);
            let mut next = 0;
            let mut overflowed = 0;
            while next < OWNER_TASKS {
                // Push a burst of 1..=4, pop 0..=2: the ring drifts up to full
                // and overflows now and then.
                let burst = (rng.next() % 4 + 1).min(OWNER_TASKS - next);
                for _ in 0..burst {
                    overflowed += owner.push_back_or_overflow(next, &inject);
                    next += 1;
                }
                for _ in 0..rng.next() % 3 {
                    if let Some(task) = owner.pop() {
                        seen.record(task);
                    }
                }
                if rng.next() % 64 == 0 {
                    if let Some(task) = inject.pop_batch_into(&mut owner, WORKERS) {
                        seen.record(task);
                    }
                }
            }
            (owner, overflowed)
        })
    };

    let injector = {
        let inject = inject.clone();
        thread::spawn(move || {
            let mut next = OWNER_TASKS;
            while next < TOTAL {
                if next % 2 == 0 {
                    inject.push(next).unwrap();
                    next += 1;
                } else {
                    let end = (next + 16).min(TOTAL);
                    inject.push_batch(next..end).unwrap();
                    next = end;
                }
            }
        })
    };

    let stealers: Vec<_> = locals
        .into_iter()
        .enumerate()
        .map(|(me, mut mine)| {
            let (seen, inject, stop) = (seen.clone(), inject.clone(), stop.clone());
            // Victims: the owner and the other stealers (index me + 1 is us).
            let victims: Vec<Steal<u32>> = steals
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != me + 1)
                .map(|(_, s)| s.clone())
                .collect();
            thread::spawn(move || {
                let mut rng = Rng(0x2545_f491 + me as u32);
                let mut steals = 0usize;
                // Relaxed: `stop` only ends the loop; the queues are drained
                // after join, which orders everything.
                while !stop.load(Ordering::Relaxed) {
                    if let Some(task) = mine.pop() {
                        seen.record(task);
                        continue;
                    }
                    let victim = &victims[rng.next() as usize % victims.len()];
                    if let Some(task) = victim.steal_into(&mut mine) {
                        seen.record(task);
                        steals += 1;
                        continue;
                    }
                    if let Some(task) = inject.pop_batch_into(&mut mine, WORKERS) {
                        seen.record(task);
                        continue;
                    }
                    thread::yield_now();
                }
                (mine, steals)
            })
        })
        .collect();

    let (mut owner, overflowed) = owner_thread.join().unwrap();
    injector.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    let mut steals = 0;
    for stealer in stealers {
        let (mut mine, stolen) = stealer.join().unwrap();
        steals += stolen;
        drain_into(&mut mine, &seen);
    }
    // For the reader of `--nocapture`: how much each path was exercised.
    eprintln!("{TOTAL} tasks, {overflowed} sent to inject by overflow, {steals} successful steals");
    drain_into(&mut owner, &seen);
    for task in inject.drain() {
        seen.record(task);
    }
    let missing = seen.missing(TOTAL);
    assert!(
        missing.is_empty(),
        "{} tasks lost, first: {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
}
