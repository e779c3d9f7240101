//! Loom models of the local ring, the LIFO slot and the inject queue.
//!
//! Every model asserts conservation: each task pushed is popped, stolen,
//! evicted or drained exactly once. Under loom the ring has 4 slots, so a
//! handful of pushes reaches "full" and wraps around.
//!
//! Run with:
//! `RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2
//! CARGO_TARGET_DIR=target/loom cargo test -p magpie-core --release --test loom_queue`
//!
//! The tour of what each model catches (and the broken variant that shows it)
//! is `docs/loom.md`.
//!
//! Every model runs several passes (see [`explore`]): once as written, then
//! once per thread as "leader", the others yielding before their first step.
//! loom 0.7's partial-order reduction misses interleavings in which a
//! thread's store should land before a load another thread made earlier
//! (tokio-rs/loom#392: it remembers only the last access to an atomic, and a
//! thread's own load hides the other thread's). Changing who runs first puts
//! those loads on the side where loom does backtrack. Without the extra passes
//! the LIFO models explore a single execution.
#![cfg(loom)]

mod loom_support;

use loom_support::{explore, Start};

use magpie_core::queue::{self, Inject, LifoSlot, Local, LOCAL_QUEUE_CAPACITY};
use magpie_core::sync::{thread, Arc};

/// Asserts that `seen` holds each of `0..n` exactly once.
fn assert_each_once(n: u32, seen: &[u32]) {
    let mut count = vec![0u32; n as usize];
    for &task in seen {
        count[task as usize] += 1;
    }
    for (task, &times) in count.iter().enumerate() {
        assert_eq!(
            times, 1,
            "task {task} seen {times} times (all seen: {seen:?})"
        );
    }
}

/// Pops everything left in `q` into `out`.
fn drain(q: &mut Local<u32>, out: &mut Vec<u32>) {
    out.extend(core::iter::from_fn(|| q.pop()));
}

/// Thread `me` steals once from `victim` into a fresh queue and returns what
/// it got, including what landed in its own queue.
fn spawn_thief(start: Start, me: usize, victim: queue::Steal<u32>) -> thread::JoinHandle<Vec<u32>> {
    thread::spawn(move || {
        start.gate(me);
        let (mut mine, _) = queue::local();
        let mut got: Vec<u32> = victim.steal_into(&mut mine).into_iter().collect();
        drain(&mut mine, &mut got);
        got
    })
}

// protocol: queue capacity
#[test]
fn local_queue_capacity_is_4_under_loom() {
    assert_eq!(LOCAL_QUEUE_CAPACITY, 4);
}

// protocol: queue R2 R3
// broken-variant: pop_reads_before_claim; class: check-then-act; expects: seen 2 times
#[test]
fn pop_and_steal_never_duplicate() {
    explore(2, |start| {
        let inject = Inject::new();
        let (mut owner, steal) = queue::local::<u32>();
        for task in 0..3 {
            owner.push_back_or_overflow(task, &inject);
        }
        let thief = spawn_thief(start, 1, steal);
        start.gate(0);
        let mut seen = Vec::new();
        seen.extend(owner.pop());
        seen.extend(owner.pop());
        seen.extend(thief.join().unwrap());
        drain(&mut owner, &mut seen);
        seen.extend(inject.drain());
        assert_each_once(3, &seen);
    });
}

// protocol: queue R4 S2
// broken-variant: pop_skips_unclaim; class: missing rollback; expects: Model exceeded maximum number of branches
#[test]
fn pop_racing_a_steal_of_the_last_task_leaves_real_at_tail() {
    // One task: the thief's steal takes it all (half rounded up). If the
    // owner's `fetch_add` lands after the claim it overshoots `tail` and must
    // move `real` back (R4), possibly around the thief's release CAS; the
    // task pushed afterwards must still come out.
    explore(2, |start| {
        let inject = Inject::new();
        let (mut owner, steal) = queue::local::<u32>();
        owner.push_back_or_overflow(0, &inject);
        let thief = spawn_thief(start, 1, steal);
        start.gate(0);
        let mut seen: Vec<u32> = owner.pop().into_iter().collect();
        owner.push_back_or_overflow(1, &inject);
        seen.extend(owner.pop());
        seen.extend(thief.join().unwrap());
        drain(&mut owner, &mut seen);
        seen.extend(inject.drain());
        assert_each_once(2, &seen);
    });
}

// protocol: queue P1 P2 S2
// broken-variant: push_publishes_relaxed; class: missing Release/Acquire pair; expects: Causality violation
#[test]
fn stolen_tasks_are_fully_written_before_tail_is_published() {
    explore(2, |start| {
        let inject = Inject::new();
        let (mut owner, steal) = queue::local::<u32>();
        let thief = spawn_thief(start, 1, steal);
        start.gate(0);
        for task in 0..3 {
            owner.push_back_or_overflow(task, &inject);
        }
        let mut seen = thief.join().unwrap();
        drain(&mut owner, &mut seen);
        seen.extend(inject.drain());
        assert_each_once(3, &seen);
    });
}

/// The owner starts with `prefill` tasks, a thief steals once, and meanwhile
/// the owner pushes `pushes` more (overflowing when full) and pops `pops`.
fn steal_while_owner_pushes(prefill: u32, pushes: u32, pops: usize) {
    explore(2, move |start| {
        let inject = Inject::new();
        let (mut owner, steal) = queue::local::<u32>();
        for task in 0..prefill {
            owner.push_back_or_overflow(task, &inject);
        }
        let thief = spawn_thief(start, 1, steal);
        start.gate(0);
        let mut seen = Vec::new();
        for task in prefill..prefill + pushes {
            owner.push_back_or_overflow(task, &inject);
        }
        for _ in 0..pops {
            seen.extend(owner.pop());
        }
        seen.extend(thief.join().unwrap());
        drain(&mut owner, &mut seen);
        seen.extend(inject.drain());
        assert_each_once(prefill + pushes, &seen);
    });
}

// protocol: queue P1 O1 O2 O4 S4
// broken-variant: owner_reuses_unreleased_slots; class: slot reuse; expects: Causality violation
#[test]
fn steal_racing_overflow_never_loses_or_duplicates() {
    // Full ring; the next two pushes overflow, or go to inject alone while the
    // steal is in progress, or land in slots the steal has released.
    steal_while_owner_pushes(4, 2, 0);
}

// protocol: queue S4 P1 R2
// broken-variant: steal_release_relaxed; class: missing Release/Acquire pair; expects: Causality violation
#[test]
fn owner_reuses_stolen_slots_only_after_release() {
    // The owner pops and pushes around the thief, wrapping past the slots the
    // thief copies out.
    steal_while_owner_pushes(3, 3, 2);
}

// protocol: queue S2 S4
// broken-variant: steal_skips_busy_check; class: check-then-act; expects: steal moved while a steal was in progress
#[test]
fn two_stealers_racing_the_owner_never_duplicate() {
    explore(3, |start| {
        let inject = Inject::new();
        let (mut owner, steal) = queue::local::<u32>();
        for task in 0..4 {
            owner.push_back_or_overflow(task, &inject);
        }
        let first = spawn_thief(start, 1, steal.clone());
        let second = spawn_thief(start, 2, steal);
        start.gate(0);
        let mut seen: Vec<u32> = owner.pop().into_iter().collect();
        seen.extend(first.join().unwrap());
        seen.extend(second.join().unwrap());
        drain(&mut owner, &mut seen);
        assert_each_once(4, &seen);
    });
}

// protocol: queue S1
// broken-variant: steal_checks_dst_real; class: slot reuse; expects: Causality violation
#[test]
fn chained_steal_never_overwrites_a_slot_being_stolen() {
    explore(3, |start| {
        let inject = Inject::new();
        // `victim` holds 0..4; `middle` holds 4..8 and is itself a victim.
        let (mut victim, steal_victim) = queue::local::<u32>();
        let (mut middle, steal_middle) = queue::local::<u32>();
        for task in 0..4 {
            victim.push_back_or_overflow(task, &inject);
            middle.push_back_or_overflow(task + 4, &inject);
        }
        // Thread 1 owns `middle` and steals into it from `victim`...
        let owner = thread::spawn(move || {
            start.gate(1);
            let got: Vec<u32> = steal_victim.steal_into(&mut middle).into_iter().collect();
            (got, middle)
        });
        // ...while thread 2 steals from `middle`.
        let thief = spawn_thief(start, 2, steal_middle);
        start.gate(0);
        let (mut seen, mut middle) = owner.join().unwrap();
        seen.extend(thief.join().unwrap());
        drain(&mut middle, &mut seen);
        drain(&mut victim, &mut seen);
        seen.extend(inject.drain());
        assert_each_once(8, &seen);
    });
}

// protocol: queue L1 L3
// broken-variant: lifo_steal_without_busy; class: slot reuse; expects: Causality violation
#[test]
fn lifo_push_and_steal_never_lose_or_duplicate() {
    explore(2, |start| {
        let slot = Arc::new(LifoSlot::new());
        let pusher = {
            let slot = slot.clone();
            thread::spawn(move || {
                start.gate(1);
                let mut evicted = Vec::new();
                for task in 0..2 {
                    match slot.push(task) {
                        Ok(old) => evicted.extend(old),
                        Err(_) => unreachable!("the owner is not parking"),
                    }
                }
                evicted
            })
        };
        start.gate(0);
        let mut seen: Vec<u32> = slot.steal().into_iter().collect();
        seen.extend(pusher.join().unwrap());
        seen.extend(slot.take());
        assert_each_once(2, &seen);
    });
}

// protocol: queue L2 L4
// broken-variant: begin_park_two_steps; class: lost wakeup; expects: a task was stranded in a parking worker's slot
#[test]
fn lifo_push_during_begin_park_is_taken_or_refused_never_stranded() {
    explore(2, |start| {
        let slot = Arc::new(LifoSlot::new());
        let inject = Arc::new(Inject::new());
        slot.push(0u32).unwrap();
        let pusher = {
            let (slot, inject) = (slot.clone(), inject.clone());
            thread::spawn(move || {
                start.gate(1);
                match slot.push(1) {
                    Ok(evicted) => evicted.into_iter().collect::<Vec<u32>>(),
                    // Refused: the owner is parking, so route to the inject
                    // queue (the runtime would also notify a worker here).
                    Err(task) => {
                        inject.push(task).unwrap();
                        Vec::new()
                    }
                }
            })
        };
        start.gate(0);
        let mut seen: Vec<u32> = slot.begin_park().into_iter().collect();
        seen.extend(pusher.join().unwrap());
        // The owner is about to sleep: nothing may be left in its slot.
        let stranded = slot.steal();
        assert_eq!(
            stranded, None,
            "a task was stranded in a parking worker's slot"
        );
        seen.extend(inject.drain());
        assert_each_once(2, &seen);
    });
}

/// Fetches one fair-share batch into a fresh queue; returns all it got.
fn fetch(inject: &Inject<u32>) -> Vec<u32> {
    let (mut dst, _) = queue::local();
    let mut got: Vec<u32> = inject.pop_batch_into(&mut dst, 2).into_iter().collect();
    drain(&mut dst, &mut got);
    got
}

// protocol: queue I2 I3 I4
// broken-variant: inject_batch_from_stale_len; class: check-then-act; expects: assertion failed: n <= self.len
#[test]
fn inject_push_batch_and_pop_batch_into_never_lose_or_duplicate() {
    explore(3, |start| {
        let inject = Arc::new(Inject::new());
        let pusher = {
            let inject = inject.clone();
            thread::spawn(move || {
                start.gate(1);
                inject.push_batch(0..3u32).unwrap()
            })
        };
        let consumer = {
            let inject = inject.clone();
            thread::spawn(move || {
                start.gate(2);
                fetch(&inject)
            })
        };
        start.gate(0);
        let mut seen = fetch(&inject);
        pusher.join().unwrap();
        seen.extend(consumer.join().unwrap());
        seen.extend(inject.drain());
        assert_each_once(3, &seen);
    });
}

/// Pushes `tasks` one at a time, handing back the ones the queue refused.
fn push_each(inject: &Inject<u32>, tasks: impl IntoIterator<Item = u32>) -> Vec<u32> {
    tasks
        .into_iter()
        .filter_map(|task| inject.push(task).err())
        .collect()
}

// protocol: queue J2 J3
// broken-variant: inject_ring_publish_before_write; class: publish before write; expects: Causality violation
#[test]
fn inject_ring_pushes_from_two_threads_are_taken_exactly_once() {
    // Two producers push two lone tasks each into a 2-slot ring (so one of
    // them at least finds it full and queues in the backlog) while a
    // consumer fetches a fair-share batch: the ring's claim (J1), publish
    // (J2) and take (J3-J4) against each other and against the backlog.
    assert_eq!(queue::INJECT_RING_CAPACITY, 2);
    explore(3, |start| {
        let inject = Arc::new(Inject::new());
        let producer = |me: usize, tasks: [u32; 2]| {
            let inject = inject.clone();
            thread::spawn(move || {
                start.gate(me);
                assert!(push_each(&inject, tasks).is_empty(), "open queue refused");
            })
        };
        let (first, second) = (producer(1, [0, 1]), producer(2, [2, 3]));
        start.gate(0);
        let mut seen = fetch(&inject);
        first.join().unwrap();
        second.join().unwrap();
        seen.extend(inject.drain());
        assert_each_once(4, &seen);
        assert!(inject.is_empty());
    });
}

// protocol: queue J1 J5
// broken-variant: inject_ring_close_by_flag; class: check-then-act; expects: a push accepted after close's drain was stranded
#[test]
fn inject_ring_push_racing_close_is_refused_or_drained_never_stranded() {
    // J5: a lone push racing `close` either fails (the task comes back) or
    // lands before the close, and then the closer's `drain` returns it, even
    // if the push is still writing the slot when the drain starts.
    explore(2, |start| {
        let inject = Arc::new(Inject::new());
        let producer = {
            let inject = inject.clone();
            thread::spawn(move || {
                start.gate(1);
                push_each(&inject, [0, 1])
            })
        };
        start.gate(0);
        assert!(inject.close());
        let mut seen = inject.drain();
        let refused = producer.join().unwrap();
        assert!(
            inject.drain().is_empty(),
            "a push accepted after close's drain was stranded"
        );
        assert!(inject.push(9).is_err(), "closed queue accepted a push");
        seen.extend(refused);
        assert_each_once(2, &seen);
    });
}
