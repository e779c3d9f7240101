//! Loom models of a throttled sender waiting for its receiver's mailbox to
//! drain (`magpie_core::process`, README.md "Throttled senders", steps
//! S1-S3 and D1-D3): the sender puts itself on the receiver's list (a
//! mutex-guarded `Vec`, as the runtime's `Rare::parked_senders`), sets
//! `WAITERS` with one RMW that also reads the depth, and ends its step
//! IDLE; the receiver's step whose release leaves the mailbox at most
//! `SENDER_RESUME_DEPTH` deep (1 under loom), or its end, clears the bit,
//! takes the list and wakes each sender without an event.
//!
//! Run: `RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2
//! CARGO_TARGET_DIR=target/loom cargo test -p magpie-core --release --test
//! loom_process_senders`. The tour is in `docs/loom.md`, "Processes".
#![cfg(loom)]

use magpie_core::process::{
    Lifecycle, Mailbox, SenderWait, TransitionToNotified, TransitionToWaiting, Wait, WakeSenders,
    SENDER_RESUME_DEPTH,
};
use magpie_core::sync::atomic::{AtomicUsize, Ordering};
use magpie_core::sync::{thread, Arc, Mutex};

/// A receiver with `SENDER_RESUME_DEPTH + 1` events queued (so a sender
/// that registers now must wait), the list its senders put themselves on,
/// and `k` senders each in the middle of a throttled step (RUNNING).
struct World {
    receiver: Mailbox<u32>,
    list: Mutex<Vec<usize>>,
    senders: Vec<Mailbox<u32>>,
    /// Run-queue entries each sender got from a wake (Schedule) or from
    /// its own finish (Requeue).
    entries: Vec<AtomicUsize>,
}

impl World {
    fn new(k: usize) -> Arc<World> {
        let receiver = Mailbox::new();
        for i in 0..=SENDER_RESUME_DEPTH {
            let _ = receiver.send(i as u32, None).unwrap();
        }
        let senders: Vec<Mailbox<u32>> = (0..k).map(|_| Mailbox::new()).collect();
        for s in &senders {
            // Each sender is in its throttled step; its token is made again
            // in `throttled_step` (RUNNING -> the finish there).
            let t = s.transition_to_running().expect("a new mailbox is READY");
            assert_eq!(t.finish(Wait::Yield), TransitionToWaiting::Requeue);
        }
        Arc::new(World {
            receiver,
            list: Mutex::new(Vec::new()),
            senders,
            entries: (0..k).map(|_| AtomicUsize::new(0)).collect(),
        })
    }

    /// Sender `i`'s throttled step ends: S1, S2, and S3 (finish IDLE when
    /// told to wait, else keep running).
    fn throttled_step(&self, i: usize) {
        let token = self.senders[i].transition_to_running().expect("READY");
        // S1.
        self.list.lock().unwrap().push(i);
        // S2, S3.
        let wait = match self.receiver.register_sender_wait() {
            SenderWait::Wait => Wait::Idle,
            SenderWait::Drained | SenderWait::Closed => Wait::Yield,
        };
        if token.finish(wait) == TransitionToWaiting::Requeue {
            self.entries[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// D3: take the list and wake each sender without an event.
    fn wake_list(&self, WakeSenders(wake): WakeSenders) {
        if !wake {
            return;
        }
        let taken = std::mem::take(&mut *self.list.lock().unwrap());
        for i in taken {
            if self.senders[i].wake() == TransitionToNotified::Schedule {
                self.entries[i].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// After every thread is joined: each sender is READY with exactly
    /// one run-queue entry (woken, or never stopped), none left IDLE.
    fn assert_every_sender_woken(&self) {
        for (i, s) in self.senders.iter().enumerate() {
            assert_eq!(
                s.snapshot().lifecycle(),
                Lifecycle::Ready,
                "the throttled sender {i} was never woken"
            );
            assert_eq!(
                self.entries[i].load(Ordering::Relaxed),
                1,
                "sender {i}: one run-queue entry"
            );
        }
    }
}

/// A throttled sender registers while its receiver's step drains the
/// mailbox to the resume depth: the sender keeps running or is woken,
/// never left IDLE.
// protocol: process S1 S2 S3 D1 D2 D3
// broken-variant: sender_wait_checks_before_registering; class: check-then-act; expects: was never woken
#[test]
fn throttled_sender_is_woken_when_its_receiver_drains() {
    loom::model(|| {
        let w = World::new(1);
        let receiver = {
            let w = w.clone();
            thread::spawn(move || {
                let mut t = w.receiver.transition_to_running().expect("READY");
                while t.pop().is_some() {}
                let (_, wake) = t.finish_waking(Wait::Idle);
                w.wake_list(wake);
            })
        };
        w.throttled_step(0);
        receiver.join().unwrap();
        w.assert_every_sender_woken();
    });
}

/// A throttled sender registers while its receiver ends (a failed or
/// panicking step): the end wakes it, or the sender sees CLOSED.
// protocol: process S1 S2 S3 C1
// broken-variant: complete_ignores_waiters; class: lost wakeup; expects: was never woken
#[test]
fn throttled_sender_is_woken_when_its_receiver_ends() {
    loom::model(|| {
        let w = World::new(1);
        let receiver = {
            let w = w.clone();
            thread::spawn(move || {
                let t = w.receiver.transition_to_running().expect("READY");
                let wake = t.complete(drop);
                w.wake_list(wake);
            })
        };
        w.throttled_step(0);
        receiver.join().unwrap();
        w.assert_every_sender_woken();
    });
}

/// Two senders throttled on one receiver, racing its drain: one drain
/// wakes both (no lost wake for the second on the list).
// protocol: process S1 S2 S3 D1 D2 D3
// broken-variant: sender_wait_checks_before_registering; class: check-then-act; expects: was never woken
#[test]
fn every_sender_throttled_on_one_receiver_is_woken_by_its_drain() {
    loom::model(|| {
        let w = World::new(2);
        let receiver = {
            let w = w.clone();
            thread::spawn(move || {
                let mut t = w.receiver.transition_to_running().expect("READY");
                while t.pop().is_some() {}
                let (_, wake) = t.finish_waking(Wait::Idle);
                w.wake_list(wake);
            })
        };
        let other = {
            let w = w.clone();
            thread::spawn(move || w.throttled_step(1))
        };
        w.throttled_step(0);
        receiver.join().unwrap();
        other.join().unwrap();
        w.assert_every_sender_woken();
    });
}
