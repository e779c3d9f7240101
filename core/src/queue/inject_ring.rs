//! The inject queue's lock-free front: a bounded ring that lone pushes enter
//! without the queue's lock (README.md, "Inject queue", steps J1-J5).
//!
//! Many producers claim positions with a CAS on `tail`; the consumers take
//! from `head` one at a time *under the inject queue's lock*, so the ring has
//! a single consumer at any moment and `head` needs no CAS. Each slot carries
//! a sequence number that says whose turn it is (a producer's for lap `L` at
//! position `p` when `seq == p`; the consumer's when `seq == p + 1`), so a
//! producer never writes a slot the consumer is still reading and the
//! consumer never reads a slot a producer has claimed but not yet written.

use core::mem::MaybeUninit;

use super::inject::Backlog;
use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::UnsafeCell;
use crate::CachePadded;

/// Slots in the ring: 4096 (256 under Miri, 2 under `cfg(loom)`, so the
/// model reaches "full" and "wrapped around" in a couple of pushes). A power
/// of two (slot index = position & (capacity - 1)); pinned by
/// `inject_ring_capacity_is_4096`. Sized from measurement (README.md, "The
/// ring"): with 256 or 1024 slots an outside producer outran the workers
/// often enough that its pushes fell back to the locked backlog. Miri runs
/// the same protocol on a smaller ring because every queue test builds one
/// and Miri pays for each slot.
#[cfg(not(any(loom, miri)))]
pub const INJECT_RING_CAPACITY: usize = 4096;

/// Slots in the ring: 4096 (256 under Miri, 2 under `cfg(loom)`); see the
/// non-loom definition.
#[cfg(all(miri, not(loom)))]
pub const INJECT_RING_CAPACITY: usize = 256;

/// Slots in the ring: 4096 (256 under Miri, 2 under `cfg(loom)`); see the
/// non-loom definition.
#[cfg(loom)]
pub const INJECT_RING_CAPACITY: usize = 2;

const _: () = assert!(INJECT_RING_CAPACITY.is_power_of_two());

const CAP: u64 = INJECT_RING_CAPACITY as u64;
const MASK: u64 = CAP - 1;

/// Set in `tail` by `close`: every later claim fails. Positions use the other
/// 63 bits, which no process lives long enough to wrap.
const CLOSED: u64 = 1 << 63;

struct Slot<T> {
    /// `p` when the slot is free for the push at position `p`, `p + 1` once
    /// that push has written its task, `p + CAP` once the consumer has moved
    /// it out (free for the push one lap later).
    seq: AtomicU64,
    task: UnsafeCell<MaybeUninit<T>>,
}

/// Why [`Ring::push`] handed the task back.
pub(super) enum Refused<T> {
    /// Every slot holds a task the consumer has not taken yet (or a claimed
    /// slot of the previous lap is still being written): queue it elsewhere.
    Full(T),
    /// [`Ring::close`] ran first.
    Closed(T),
}

pub(super) struct Ring<T> {
    /// Next position to claim, plus the [`CLOSED`] bit. Producers CAS it.
    tail: CachePadded<AtomicU64>,
    /// Next position to take. Written only by the consumer, which holds the
    /// inject queue's lock; read without it by `len`.
    head: CachePadded<AtomicU64>,
    slots: Box<[Slot<T>]>,
}

// SAFETY: the ring moves `T` values from the pushing thread to the taking
// thread, so `T: Send` is required and sufficient. A slot's task is accessed
// by one thread at a time: the producer that claimed its position through
// `tail` (J1-J2) until it publishes `seq = p + 1`, then the one consumer,
// which holds the inject lock (J3-J4), until it publishes `seq = p + CAP`.
unsafe impl<T: Send> Send for Ring<T> {}
// SAFETY: as for `Send` above; shared access only ever reaches a slot's task
// through that handover.
unsafe impl<T: Send> Sync for Ring<T> {}

impl<T> Ring<T> {
    pub(super) fn new() -> Self {
        Ring {
            tail: CachePadded::new(AtomicU64::new(0)),
            head: CachePadded::new(AtomicU64::new(0)),
            slots: (0..CAP)
                .map(|p| Slot {
                    seq: AtomicU64::new(p),
                    task: UnsafeCell::new(MaybeUninit::uninit()),
                })
                .collect(),
        }
    }

    #[inline]
    fn slot(&self, pos: u64) -> &Slot<T> {
        &self.slots[(pos & MASK) as usize]
    }

    /// J1-J2: appends `task`, or hands it back if the ring is full or closed.
    /// Never blocks: a failed CAS means another producer claimed the position,
    /// and this one moves on to the next.
    #[inline]
    pub(super) fn push(&self, task: T) -> Result<(), Refused<T>> {
        let mut pos = self.tail.load(Ordering::Relaxed);
        loop {
            if pos & CLOSED != 0 {
                return Err(Refused::Closed(task));
            }
            let slot = self.slot(pos);
            // J1. Acquire: pairs with the consumer's Release store of
            // `seq = pos` in J4 a lap earlier, so its read of the old task
            // happens before the write below.
            let seq = slot.seq.load(Ordering::Acquire);
            let lag = seq.wrapping_sub(pos) as i64;
            if lag < 0 {
                // The slot still holds (or is still receiving) the task of a
                // lap ago: the ring is full.
                return Err(Refused::Full(task));
            }
            if lag > 0 {
                // Another producer took `pos` after we read `tail`.
                pos = self.tail.load(Ordering::Relaxed);
                continue;
            }
            // Claim `pos`. Relaxed: the CAS only decides who owns the slot;
            // the task is published by the Release store of `seq` below, and
            // `close`'s RMW on the same word orders claims against closing.
            match self.tail.compare_exchange_weak(
                pos,
                pos.wrapping_add(1),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    #[cfg(not(magpie_broken = "inject_ring_publish_before_write"))]
                    {
                        // SAFETY: the CAS gave us position `pos` alone, and
                        // `seq == pos` (J1, Acquire) says the consumer is done
                        // with the slot's previous task.
                        slot.task
                            .with_mut(|p| unsafe { p.write(MaybeUninit::new(task)) });
                        // J2. Release: pairs with the consumer's Acquire load
                        // of `seq` in J3: the task is written before it reads.
                        slot.seq.store(pos.wrapping_add(1), Ordering::Release);
                    }
                    #[cfg(magpie_broken = "inject_ring_publish_before_write")]
                    {
                        // Broken: publishes the slot before writing it, so
                        // the consumer can read it while (or before) it is
                        // written.
                        slot.seq.store(pos.wrapping_add(1), Ordering::Release);
                        // SAFETY: none; this is the bug.
                        slot.task
                            .with_mut(|p| unsafe { p.write(MaybeUninit::new(task)) });
                    }
                    return Ok(());
                }
                Err(actual) => pos = actual,
            }
        }
    }

    /// J3-J4: takes the oldest task if its push has finished writing it.
    /// `None` when the ring is empty *or* its oldest claim is still being
    /// written (the caller looks elsewhere and comes back).
    ///
    /// The caller must hold the inject queue's lock: it makes this the ring's
    /// only consumer. `_locked`, the lock's contents, is the proof.
    #[inline]
    pub(super) fn take(&self, _locked: &mut Backlog<T>) -> Option<T> {
        // Relaxed: only lock holders write `head`, and the lock orders them.
        let pos = self.head.load(Ordering::Relaxed);
        let slot = self.slot(pos);
        // J3. Acquire: pairs with the producer's Release store in J2.
        if slot.seq.load(Ordering::Acquire) != pos.wrapping_add(1) {
            return None;
        }
        // SAFETY: `seq == pos + 1` says the push at `pos` wrote the task and
        // handed the slot over (J2); we are the only consumer (lock), and the
        // next producer of this slot waits for J4.
        let task = slot.task.with(|p| unsafe { p.read().assume_init() });
        // J4. Release: pairs with J1's Acquire a lap later: our read of the
        // task happens before that producer overwrites it.
        slot.seq.store(pos.wrapping_add(CAP), Ordering::Release);
        // Relaxed: a hint for `len` (the consumer side is ordered by the lock).
        self.head.store(pos.wrapping_add(1), Ordering::Relaxed);
        Some(task)
    }

    /// How many of the oldest tasks, up to `max`, are written and can be
    /// taken now. With the lock held the answer cannot shrink: only the
    /// lock holder takes.
    pub(super) fn ready(&self, _locked: &mut Backlog<T>, max: usize) -> usize {
        let head = self.head.load(Ordering::Relaxed);
        (0..max as u64)
            .take_while(|&i| {
                let pos = head.wrapping_add(i);
                // Acquire: as in J3.
                self.slot(pos).seq.load(Ordering::Acquire) == pos.wrapping_add(1)
            })
            .count()
    }

    /// Claimed positions not yet taken (a snapshot: claims still being
    /// written count).
    #[inline]
    pub(super) fn len(&self) -> usize {
        // `head` first: `tail` only grows and never falls behind `head`, so a
        // later read of it is at least as far along. Relaxed: a hint, like
        // the backlog's length.
        let head = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Relaxed) & !CLOSED;
        tail.saturating_sub(head) as usize
    }

    /// J5: refuses every later claim. Called with the inject lock held, by
    /// `Inject::close`.
    pub(super) fn close(&self) {
        // Relaxed: an RMW on `tail`, so in its modification order every
        // claim's CAS is either before it (and the claimed task will be taken
        // or drained) or after it (and fails on the bit).
        #[cfg(not(magpie_broken = "inject_ring_close_by_flag"))]
        self.tail.fetch_or(CLOSED, Ordering::Relaxed);
        // Broken: leaves `tail` alone; `Inject::push` checks the closed flag
        // before its claim instead, a check-then-act race.
        #[cfg(magpie_broken = "inject_ring_close_by_flag")]
        let _ = CLOSED;
    }

    /// Claimed positions up to now (for `drain`), without the closed bit.
    fn claimed(&self) -> u64 {
        self.tail.load(Ordering::Relaxed) & !CLOSED
    }

    /// Takes every task claimed so far, waiting for claims still being
    /// written (a producer between J1's CAS and J2 finishes without any lock,
    /// so the wait is short). Lock held, as for `take`.
    pub(super) fn drain_into(&self, locked: &mut Backlog<T>, out: &mut Vec<T>) {
        let end = self.claimed();
        let mut backoff = super::Backoff::default();
        while self.head.load(Ordering::Relaxed) != end {
            match self.take(locked) {
                Some(task) => out.push(task),
                None => backoff.snooze(),
            }
        }
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // `&mut self`: no producer is between its claim and its write.
        let (head, end) = (self.head.load(Ordering::Relaxed), self.claimed());
        let mut pos = head;
        while pos != end {
            let slot = self.slot(pos);
            if slot.seq.load(Ordering::Relaxed) == pos.wrapping_add(1) {
                // SAFETY: written (seq) and never taken (pos >= head); we
                // have the ring to ourselves.
                slot.task
                    .with_mut(|p| unsafe { core::ptr::drop_in_place(p.cast::<T>()) });
            }
            pos = pos.wrapping_add(1);
        }
    }
}
