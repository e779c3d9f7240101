//! Unit and stress tests of the mailbox (the loom models are in
//! `core/tests/loom_process.rs`).

use super::*;
use crate::sync::atomic::{AtomicUsize, Ordering};
use crate::sync::{thread, Arc};

#[test]
fn events_come_out_in_push_order() {
    let m = Mailbox::new();
    for i in 0..10 {
        let _ = m.send(i, None).unwrap();
    }
    let mut s = m.transition_to_running().unwrap();
    let got: Vec<i32> = std::iter::from_fn(|| s.pop()).collect();
    assert_eq!(got, (0..10).collect::<Vec<_>>());
    assert_eq!(s.finish(Wait::Idle), TransitionToWaiting::Waiting);
}

#[test]
fn send_to_idle_schedules_and_send_to_ready_does_not() {
    let m = Mailbox::new();
    let s = m.transition_to_running().unwrap();
    assert_eq!(s.finish(Wait::Idle), TransitionToWaiting::Waiting);
    assert!(m.send(1, None).unwrap().schedule);
    assert!(!m.send(2, None).unwrap().schedule);
}

#[test]
fn bounded_send_refuses_when_full_and_gives_the_value_back() {
    let m = Mailbox::new();
    assert_eq!(m.send("a", Some(2)).unwrap().depth, 1);
    assert_eq!(m.send("b", Some(2)).unwrap().depth, 2);
    let r = m.send("c", Some(2)).unwrap_err();
    assert_eq!((r.value, r.reason), ("c", Refusal::Full));
    // Unbounded events (completions) still get in.
    assert_eq!(m.send("yield", None).unwrap().depth, 3);
    let mut s = m.transition_to_running().unwrap();
    assert_eq!(s.pop(), Some("a"));
    s.release_popped();
    assert_eq!(m.send("c", Some(3)).unwrap().depth, 3);
    let _ = s.finish(Wait::Idle);
}

#[test]
fn send_after_complete_is_refused_closed_and_leftovers_are_handed_out() {
    let m = Mailbox::new();
    let _ = m.send(1, None).unwrap();
    let _ = m.send(2, None).unwrap();
    let s = m.transition_to_running().unwrap();
    let mut left = Vec::new();
    let _ = s.complete(|v| left.push(v));
    assert_eq!(left, vec![1, 2]);
    assert!(m.is_closed());
    let r = m.send(3, None).unwrap_err();
    assert_eq!((r.value, r.reason), (3, Refusal::Closed));
    let r = m.send(4, Some(10)).unwrap_err();
    assert_eq!(r.reason, Refusal::Closed);
    assert!(m.transition_to_running().is_none());
}

#[test]
fn only_one_stepping_token_exists() {
    let m: Mailbox<u8> = Mailbox::new();
    let s = m.transition_to_running().unwrap();
    assert!(m.transition_to_running().is_none());
    assert!(matches!(
        m.claim_for_close(),
        Err(TransitionToClaimed::Running)
    ));
    let _ = s.finish(Wait::Blocked);
    let c = m.claim_for_close().unwrap();
    assert!(m.transition_to_running().is_none());
    let _ = c.complete(drop);
}

#[test]
fn queued_values_are_dropped_with_the_mailbox() {
    let token = Arc::new(());
    let m = Mailbox::new();
    for _ in 0..5 {
        let _ = m.send(token.clone(), None).unwrap();
    }
    assert_eq!(Arc::strong_count(&token), 6);
    drop(m);
    assert_eq!(Arc::strong_count(&token), 1);
}

/// Values go in and out across several block boundaries, with pops
/// interleaved so the consumer crosses blocks the producer linked while it
/// was reading.
#[test]
fn events_cross_blocks_in_order() {
    let m = Mailbox::new();
    let total = 3 * BLOCK_CAP + 5;
    let mut next_in = 0;
    let mut next_out = 0;
    let mut s = m.transition_to_running().unwrap();
    while next_out < total {
        // Push 3, pop 2: the queue grows by one each round.
        for _ in 0..3 {
            if next_in < total {
                let _ = m.send(next_in, None).unwrap();
                next_in += 1;
            }
        }
        for _ in 0..2 {
            if let Some(v) = s.pop() {
                assert_eq!(v, next_out, "FIFO across blocks");
                next_out += 1;
            }
        }
    }
    assert_eq!(s.pop(), None);
    let _ = s.finish(Wait::Idle);
}

/// After a warm-up, traffic that keeps at most two blocks' worth queued
/// allocates no block: the consumer's recycled blocks are relinked ahead of
/// the producers (README, "The event queue", R4).
#[test]
fn steady_traffic_recycles_blocks_and_allocates_nothing() {
    let burst = 2 * BLOCK_CAP as u64;
    let rounds = if cfg!(miri) { 8 } else { 200 };
    assert_steady_traffic_allocates_nothing(rounds, 3, |q, next| {
        for _ in 0..burst {
            q.push(*next);
            *next += 1;
        }
    });
}

/// Runs `rounds` rounds of `push` (which pushes the values from `*next`
/// on) each followed by popping everything, checking FIFO order, and
/// requires that no block is allocated after round `warm_up`.
fn assert_steady_traffic_allocates_nothing(
    rounds: usize,
    warm_up: usize,
    mut push: impl FnMut(&mpsc::Queue<u64>, &mut u64),
) {
    let q = mpsc::Queue::<u64>::new();
    let mut next = 0u64;
    let mut expect = 0u64;
    let mut grown_after_warmup = None;
    for round in 0..rounds {
        push(&q, &mut next);
        loop {
            // SAFETY: one thread, so one consumer and ordered pops.
            match unsafe { q.pop() } {
                mpsc::Pop::Data(v) => {
                    assert_eq!(v, expect);
                    expect += 1;
                }
                mpsc::Pop::Empty => break,
                mpsc::Pop::Inconsistent => panic!("no producer is mid-push"),
            }
        }
        if round == warm_up {
            grown_after_warmup = Some(q.grown.load(Ordering::Relaxed));
        }
    }
    assert_eq!(expect, next);
    let warm = grown_after_warmup.unwrap();
    assert!(warm >= 1, "the traffic never left the first block");
    assert_eq!(
        q.grown.load(Ordering::Relaxed),
        warm,
        "a block was allocated in steady state"
    );
}

/// Values queued in several blocks, after some blocks were consumed and
/// recycled, are dropped with the mailbox, each once.
#[test]
fn values_queued_across_blocks_are_dropped_with_the_mailbox() {
    let token = Arc::new(());
    let m = Mailbox::new();
    let n = 3 * BLOCK_CAP + 3;
    for _ in 0..n {
        let _ = m.send(token.clone(), None).unwrap();
    }
    let mut s = m.transition_to_running().unwrap();
    // Read past the first block boundary and a bit beyond, so the first
    // block is recycled while values are still queued behind it.
    for _ in 0..BLOCK_CAP + 2 {
        drop(s.pop().unwrap());
    }
    let _ = s.finish(Wait::Idle);
    for _ in 0..BLOCK_CAP {
        let _ = m.send(token.clone(), None).unwrap();
    }
    assert_eq!(
        Arc::strong_count(&token),
        1 + n - (BLOCK_CAP + 2) + BLOCK_CAP
    );
    drop(m);
    assert_eq!(Arc::strong_count(&token), 1);
}

/// Producers on several threads; one consumer that steps the process as a
/// worker would (requeue means "step again"). Every event is popped exactly
/// once, in per-producer order, and the process is never scheduled while it
/// is already READY or RUNNING.
#[test]
fn stress_every_event_popped_once_in_per_sender_order() {
    const PRODUCERS: usize = 3;
    const PER: usize = if cfg!(miri) { 200 } else { 50_000 };
    let m = Arc::new(Mailbox::<(usize, usize)>::new());
    let scheduled = Arc::new(AtomicUsize::new(1)); // the spawn's entry
    let mut handles = Vec::new();
    for p in 0..PRODUCERS {
        let m = m.clone();
        let scheduled = scheduled.clone();
        handles.push(thread::spawn(move || {
            for i in 0..PER {
                let sent = m.send((p, i), None).unwrap();
                if sent.schedule {
                    // Release: pairs with the consumer's Acquire load, as a
                    // run queue's push and pop do: the entry carries the
                    // notify's READY with it. (Relaxed let Miri's weak
                    // memory hand the consumer a stale IDLE, and
                    // `transition_to_running` rightly refused it.)
                    scheduled.fetch_add(1, Ordering::Release);
                }
            }
        }));
    }
    let next = consume_as_a_worker::<PRODUCERS>(&m, &scheduled, PER);
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(next, [PER; PRODUCERS]);
}

/// The stress tests' consumer: steps the process as a worker would
/// whenever an entry is outstanding (`scheduled`; a requeue means "step
/// again"), 64 events a step, until `per` events of each of `N` producers
/// `(producer, i)` have arrived. Checks per-producer FIFO order and that
/// the process is never scheduled while READY or RUNNING; returns the
/// count per producer.
fn consume_as_a_worker<const N: usize>(
    m: &Mailbox<(usize, usize)>,
    scheduled: &AtomicUsize,
    per: usize,
) -> [usize; N] {
    let mut next = [0usize; N];
    let mut total = 0;
    while total < N * per {
        // Acquire: pairs with the producers' Release when they schedule.
        if scheduled.load(Ordering::Acquire) == 0 {
            thread::yield_now();
            continue;
        }
        let mut s = m.transition_to_running().expect("an entry means READY");
        scheduled.fetch_sub(1, Ordering::Relaxed);
        let mut budget = 64;
        while budget > 0 {
            let Some((p, i)) = s.pop() else { break };
            assert_eq!(i, next[p], "per-producer FIFO");
            next[p] += 1;
            total += 1;
            budget -= 1;
        }
        let wait = if budget == 0 { Wait::Yield } else { Wait::Idle };
        if s.finish(wait) == TransitionToWaiting::Requeue {
            scheduled.fetch_add(1, Ordering::Relaxed);
        }
        assert!(scheduled.load(Ordering::Relaxed) <= 1, "queued twice");
    }
    next
}

/// A batch starting mid-block runs across several blocks; singles before
/// and after it keep their places (README, "Batches", B1-B4).
#[test]
fn a_batch_crosses_blocks_in_order_between_single_sends() {
    let m = Mailbox::new();
    let mut next = 0usize;
    for _ in 0..3 {
        let _ = m.send(next, None).unwrap();
        next += 1;
    }
    let mut batch: Vec<usize> = (next..next + 2 * BLOCK_CAP + 5).collect();
    next += batch.len();
    let sent = m.send_batch(&mut batch).unwrap();
    assert!(batch.is_empty(), "the batch is taken");
    assert!(
        !sent.schedule,
        "a new mailbox is READY: nothing to schedule"
    );
    assert_eq!(sent.depth, next as u64);
    let _ = m.send(next, None).unwrap();
    next += 1;
    let mut s = m.transition_to_running().unwrap();
    let got: Vec<usize> = std::iter::from_fn(|| s.pop()).collect();
    assert_eq!(got, (0..next).collect::<Vec<_>>());
    assert_eq!(s.finish(Wait::Idle), TransitionToWaiting::Waiting);
    assert_eq!(m.len(), 0);
}

#[test]
fn a_batch_to_an_idle_process_schedules_it_once() {
    let m = Mailbox::new();
    let s = m.transition_to_running().unwrap();
    assert_eq!(s.finish(Wait::Idle), TransitionToWaiting::Waiting);
    assert!(m.send_batch(&mut vec![1, 2, 3]).unwrap().schedule);
    assert!(!m.send_batch(&mut vec![4, 5]).unwrap().schedule);
    assert!(!m.send(6, None).unwrap().schedule);
    let mut s = m.transition_to_running().unwrap();
    let got: Vec<i32> = std::iter::from_fn(|| s.pop()).collect();
    assert_eq!(got, vec![1, 2, 3, 4, 5, 6]);
    let _ = s.finish(Wait::Idle);
}

#[test]
fn a_batch_to_a_completed_process_is_refused_and_left_with_the_caller() {
    let m = Mailbox::new();
    let _ = m.transition_to_running().unwrap().complete(drop);
    let mut batch = vec![7, 8];
    assert_eq!(m.send_batch(&mut batch), Err(Refusal::Closed));
    assert_eq!(batch, vec![7, 8]);
}

/// Batches from one producer move `block_tail` on as they go, so the
/// consumer can recycle the blocks it passed: after a warm-up, no block is
/// allocated (README, "Batches", B2).
#[test]
fn steady_batches_recycle_blocks_and_allocate_nothing() {
    // Not a multiple of BLOCK_CAP: batch `k` starts at offset 3k mod 32,
    // so the first 32 batches start at every offset, and the widest span
    // (four blocks) comes up among them; the warm-up ends there.
    let size = 2 * BLOCK_CAP as u64 + 3;
    let warm_up = BLOCK_CAP;
    let rounds = if cfg!(miri) { 2 * warm_up } else { 200 };
    let mut batch = Vec::new();
    assert_steady_traffic_allocates_nothing(rounds, warm_up, |q, next| {
        batch.extend(*next..*next + size);
        *next += size;
        q.push_batch(&mut batch);
    });
}

/// As the stress test above, with one of the producers sending batches of
/// 1 to 70 events (so batches start at every offset and cross blocks)
/// while the others send one at a time.
#[test]
fn stress_batches_and_single_sends_popped_once_in_per_sender_order() {
    const PRODUCERS: usize = 3;
    const PER: usize = if cfg!(miri) { 200 } else { 50_000 };
    let m = Arc::new(Mailbox::<(usize, usize)>::new());
    let scheduled = Arc::new(AtomicUsize::new(1)); // the spawn's entry
    let mut handles = Vec::new();
    for p in 0..PRODUCERS {
        let m = m.clone();
        let scheduled = scheduled.clone();
        handles.push(thread::spawn(move || {
            let mut i = 0;
            let mut size = 1;
            let mut batch = Vec::new();
            while i < PER {
                let schedule = if p == 0 {
                    let end = (i + size).min(PER);
                    batch.extend((i..end).map(|k| (p, k)));
                    i = end;
                    size = size % 70 + 1;
                    m.send_batch(&mut batch).unwrap().schedule
                } else {
                    i += 1;
                    m.send((p, i - 1), None).unwrap().schedule
                };
                if schedule {
                    // Release: pairs with the consumer's Acquire load (as in
                    // the stress test above).
                    scheduled.fetch_add(1, Ordering::Release);
                }
            }
        }));
    }
    let next = consume_as_a_worker::<PRODUCERS>(&m, &scheduled, PER);
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(next, [PER; PRODUCERS]);
}

/// `SENDER_RESUME_DEPTH + 2` events queued, for the throttled-sender tests.
fn deep_mailbox() -> Mailbox<u64> {
    let m = Mailbox::new();
    for i in 0..SENDER_RESUME_DEPTH + 2 {
        let _ = m.send(i, None).unwrap();
    }
    m
}

#[test]
fn a_sender_waits_only_on_a_deep_open_mailbox_and_the_drain_owes_it_a_wake() {
    let m = deep_mailbox();
    assert_eq!(m.register_sender_wait(), SenderWait::Wait);
    let mut s = m.transition_to_running().unwrap();
    // Popping down to one above the depth owes no wake.
    s.pop().unwrap();
    s.release_popped();
    assert_eq!(s.take_wake_senders(), WakeSenders(false));
    // One more: at the depth, the release owes the wake, once.
    s.pop().unwrap();
    s.release_popped();
    assert_eq!(s.take_wake_senders(), WakeSenders(true));
    assert_eq!(s.take_wake_senders(), WakeSenders(false));
    // WAITERS was cleared (D2): a later release owes nothing.
    s.pop().unwrap();
    let (t, wake) = s.finish_waking(Wait::Yield);
    assert_eq!(
        (t, wake),
        (TransitionToWaiting::Requeue, WakeSenders(false))
    );
    // Drained now: a sender does not wait, but its bit makes the next
    // release at the depth owe a wake (the spare wake of a left entry).
    assert_eq!(m.register_sender_wait(), SenderWait::Drained);
    let mut s = m.transition_to_running().unwrap();
    s.pop().unwrap();
    assert_eq!(s.finish_waking(Wait::Idle).1, WakeSenders(true));
}

#[test]
fn a_receiver_s_end_owes_its_waiting_senders_a_wake() {
    let m = deep_mailbox();
    assert_eq!(m.register_sender_wait(), SenderWait::Wait);
    let s = m.transition_to_running().unwrap();
    let mut left = 0;
    assert_eq!(s.complete(|_| left += 1), WakeSenders(true));
    assert_eq!(left, SENDER_RESUME_DEPTH + 2);
    assert_eq!(m.register_sender_wait(), SenderWait::Closed);
    // Without a waiting sender the end owes nothing.
    let m = deep_mailbox();
    let s = m.transition_to_running().unwrap();
    assert_eq!(s.complete(drop), WakeSenders(false));
}

#[test]
fn a_wake_without_an_event_schedules_an_idle_process_once() {
    let m: Mailbox<u64> = Mailbox::new();
    let s = m.transition_to_running().unwrap();
    assert_eq!(s.finish(Wait::Idle), TransitionToWaiting::Waiting);
    assert_eq!(m.wake(), TransitionToNotified::Schedule);
    assert_eq!(m.wake(), TransitionToNotified::Noted, "one entry only");
    let mut s = m.transition_to_running().unwrap();
    assert!(s.pop().is_none(), "nothing was pushed");
    // A wake during the step (D3 racing the sender's S3) re-queues it.
    assert_eq!(m.wake(), TransitionToNotified::Noted);
    assert_eq!(s.finish(Wait::Idle), TransitionToWaiting::Requeue);
}
