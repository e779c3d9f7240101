//! The local run queue: a fixed ring owned by one worker and stolen from by
//! the others.
//!
//! `README.md` beside this file gives the protocol as numbered steps; the
//! comments below cite them as P1 (push), O1 (overflow), R1 (pop), S1 (steal).
//!
//! Positions are `u32` counters that only grow (wrapping); a position's slot is
//! `position & MASK`. `head` packs two positions:
//!
//! * `real`: the next position to hand out. Everything in `[real, tail)` is
//!   queued and unclaimed.
//! * `steal`: the oldest position whose slot may still be read by a stealer.
//!   During a steal the stealer's claimed run is `[steal, real_at_claim)` and
//!   `head` carries a `STEALING` mark; with no steal in progress `steal` is
//!   `real` (see [`Head`] for the bits).
//!
//! The owner may write the slot for position `p` only while
//! `p - steal < CAPACITY`, so a slot is never overwritten while a stealer
//! still has to copy it out.

use core::cell::Cell;
use core::fmt;
use core::marker::PhantomData;
use core::mem::MaybeUninit;

use super::{Inject, LOCAL_QUEUE_CAPACITY};
use crate::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use crate::sync::{Arc, UnsafeCell};
use crate::CachePadded;

/// Ring size as a position delta.
const CAP: u32 = LOCAL_QUEUE_CAPACITY as u32;
/// Slot index of a position: `position & MASK`.
const MASK: usize = LOCAL_QUEUE_CAPACITY - 1;
/// What an overflow moves to the inject queue (plus the new task), and the
/// most a steal takes.
const HALF: u32 = CAP / 2;

/// `real` sits in the high half of `head`, so adding [`ONE_REAL`] advances
/// it without touching the low half, and its wrap at 2^32 falls off the top
/// of the word.
const REAL_SHIFT: u32 = 32;
/// Added to `head` (one `fetch_add`) to advance `real` by one (R2).
const ONE_REAL: u64 = 1 << REAL_SHIFT;
/// Set in `head`'s low half while a steal is in progress.
const STEALING: u64 = 1 << 31;
/// The low bits of `steal` kept in `head` while [`STEALING`] is set.
const STEAL_MASK: u32 = (1 << 31) - 1;

/// A snapshot of the packed `head` word: `real` in the high 32 bits; in the
/// low 32, zero when no steal is in progress, else [`STEALING`] and the low 31
/// bits of `steal`.
///
/// Why not `steal` as a full `u32` beside `real`: the owner's pop advances
/// `real` alone with one `fetch_add`, whatever the low half holds, so "no
/// steal in progress" cannot be spelled `steal == real` (the next pop would
/// break the equality). 31 bits suffice to recover `steal`, since
/// `real - steal <= CAP < 2^31`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Head(u64);

impl Head {
    /// No steal in progress; next position to hand out is `real`.
    #[inline]
    const fn idle(real: u32) -> Self {
        Head((real as u64) << REAL_SHIFT)
    }

    /// A stealer has claimed `[steal, real_at_claim)` and not yet released it.
    #[inline]
    const fn stealing(steal: u32, real: u32) -> Self {
        Head(((real as u64) << REAL_SHIFT) | STEALING | (steal & STEAL_MASK) as u64)
    }

    /// Next position to hand out.
    #[inline]
    const fn real(self) -> u32 {
        (self.0 >> REAL_SHIFT) as u32
    }

    /// Whether a stealer has claimed a run and not yet released it.
    #[inline]
    const fn is_stealing(self) -> bool {
        self.0 & STEALING != 0
    }

    /// Oldest position a stealer may still be reading: `real` when no steal
    /// is in progress.
    #[inline]
    const fn steal(self) -> u32 {
        let real = self.real();
        if self.is_stealing() {
            // `real - steal` is below 2^31, so its low 31 bits are all of it;
            // the `STEALING` bit only reaches bit 31 of the difference.
            real.wrapping_sub(real.wrapping_sub(self.0 as u32) & STEAL_MASK)
        } else {
            real
        }
    }

    /// `real` advanced by one, the steal marker as it was: what the owner's
    /// `fetch_add(ONE_REAL)` (R2) makes of this value.
    #[inline]
    const fn advance_real(self) -> Self {
        Head(self.0.wrapping_add(ONE_REAL))
    }

    /// `real` moved back by one: what R4's `fetch_sub(ONE_REAL)` makes of it.
    #[inline]
    const fn retreat_real(self) -> Self {
        Head(self.0.wrapping_sub(ONE_REAL))
    }
}

const _: () = {
    assert!(Head::idle(4).advance_real().0 == Head::idle(5).0);
    assert!(Head::stealing(4, 6).advance_real().0 == Head::stealing(4, 7).0);
    assert!(Head::idle(u32::MAX).advance_real().0 == Head::idle(0).0);
    assert!(Head::idle(0).retreat_real().0 == Head::idle(u32::MAX).0);
    assert!(
        Head::stealing(u32::MAX - 1, u32::MAX).advance_real().0
            == Head::stealing(u32::MAX - 1, 0).0
    );
    let h = Head::stealing(u32::MAX - 2, 5);
    assert!(h.is_stealing() && h.steal() == u32::MAX - 2 && h.real() == 5);
    let h = Head::stealing(u32::MAX - 3, 2);
    assert!(h.steal() == u32::MAX - 3 && h.real() == 2);
    assert!(Head::stealing(1 << 31, (1 << 31) + 3).steal() == 1 << 31);
    assert!(!Head::idle(9).is_stealing() && Head::idle(9).steal() == 9);
    assert!(Head::idle(3).0 == 3 << 32);
};

type Slot<T> = UnsafeCell<MaybeUninit<T>>;

/// The state shared by a queue's [`Local`] and its [`Steal`] handles.
struct Inner<T> {
    /// `real` and the steal mark (see [`Head`]); written by the owner (pop:
    /// `fetch_add`, and `fetch_sub` to undo; overflow: CAS) and by stealers
    /// (claim, release: CAS), always with a read-modify-write.
    head: CachePadded<AtomicU64>,
    /// One past the newest task. Written only by the owner, with plain stores.
    tail: CachePadded<AtomicU32>,
    /// The ring. A slot holds a live task exactly when its position is in
    /// `[real, tail)` or in a claimed run that its claimer has not read yet.
    buffer: [Slot<T>; LOCAL_QUEUE_CAPACITY],
}

// SAFETY: the queue moves `T` values between threads (the owner pushes, a
// stealer reads), which `T: Send` permits. No `&T` is ever shared: a slot is
// accessed only by the one thread that owns its position under the claim
// protocol (README, "Why no task is lost or duplicated"), so `T: Sync` is not
// needed, and the atomics are `Sync` themselves.
unsafe impl<T: Send> Send for Inner<T> {}
// SAFETY: as for `Send` above: every slot access is exclusive by protocol.
unsafe impl<T: Send> Sync for Inner<T> {}

impl<T> Inner<T> {
    /// Writes `task` into the slot of `pos`.
    ///
    /// # Safety
    ///
    /// The caller is the owner of this ring, `pos - steal < CAP` holds for a
    /// `steal` it read with Acquire (so every earlier reader of the slot has
    /// finished), and the slot holds no live task.
    #[inline]
    unsafe fn write(&self, pos: u32, task: T) {
        self.buffer[pos as usize & MASK].with_mut(|slot| {
            // SAFETY: the caller has exclusive access to the slot (above).
            unsafe { slot.write(MaybeUninit::new(task)) }
        });
    }

    /// Moves the task out of the slot of `pos`.
    ///
    /// # Safety
    ///
    /// The caller has claimed `pos` through `head` (pop, overflow or steal),
    /// the slot's write happens-before this read (same thread, or through
    /// `tail`'s Release/Acquire), and no one reads `pos` again.
    #[inline]
    unsafe fn read(&self, pos: u32) -> T {
        self.buffer[pos as usize & MASK].with(|slot| {
            // SAFETY: the slot was initialised by a push and is claimed by the
            // caller alone (above), so reading it once moves the task out.
            unsafe { slot.read().assume_init() }
        })
    }
}

impl<T> Drop for Inner<T> {
    fn drop(&mut self) {
        if !core::mem::needs_drop::<T>() {
            return;
        }
        // Relaxed: `&mut self` means every handle is gone, and the last
        // `Arc` drop already ordered their accesses before this one.
        let head = Head(self.head.load(Ordering::Relaxed));
        let tail = self.tail.load(Ordering::Relaxed);
        // A steal runs inside `steal_into`, which holds a `Steal` handle, so
        // none can be in progress once the last handle is gone.
        debug_assert!(!head.is_stealing());
        let mut pos = head.real();
        while pos != tail {
            // SAFETY: positions in [real, tail) hold live, unclaimed tasks and
            // no other handle exists to claim them; each is read once.
            drop(unsafe { self.read(pos) });
            pos = pos.wrapping_add(1);
        }
    }
}

/// Creates a local queue: the owner's handle and a stealer handle (clone it for
/// every other worker).
pub fn local<T: Send>() -> (Local<T>, Steal<T>) {
    let inner = Arc::new(Inner {
        head: CachePadded::new(AtomicU64::new(0)),
        tail: CachePadded::new(AtomicU32::new(0)),
        buffer: core::array::from_fn(|_| UnsafeCell::new(MaybeUninit::uninit())),
    });
    let local = Local {
        inner: inner.clone(),
        tail: 0,
        head: Head::idle(0),
        _not_sync: PhantomData,
    };
    (local, Steal(inner))
}

/// The owner's handle to a local queue: push at the tail, pop at the head.
///
/// `Send` (a worker may be built on one thread and run on another) but neither
/// `Clone` nor `Sync`: exactly one thread owns the tail.
///
/// ```compile_fail
/// fn assert_sync<T: Sync>() {}
/// assert_sync::<magpie_core::queue::Local<u32>>();
/// ```
pub struct Local<T> {
    inner: Arc<Inner<T>>,
    /// The owner's copy of `tail`. Only the owner writes `inner.tail`, so this
    /// is the true value; `inner.tail` may lag it by an unpublished batch.
    tail: u32,
    /// The last value of `head` the owner read (with Acquire) or wrote. Both
    /// halves are lower bounds of the live ones, since stealers only move
    /// them forward. Its `steal` bounds slot reuse: slots of positions below
    /// it have been read by whoever claimed them, and those reads
    /// happen-before our next write (P1). Its `real` tells pop, without a
    /// load, when the queue is surely empty (R1).
    head: Head,
    /// `Cell<()>` is `Send` and `!Sync`, which is what we want for `Local`.
    _not_sync: PhantomData<Cell<()>>,
}

impl<T: Send> Local<T> {
    /// Tasks in the queue that the owner can still pop.
    #[inline]
    pub fn len(&self) -> usize {
        // Relaxed: a count. Every value `real` ever takes is at most our tail.
        let head = Head(self.inner.head.load(Ordering::Relaxed));
        self.tail.wrapping_sub(head.real()) as usize
    }

    /// Whether [`Local::pop`] would return `None` right now.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Free slots the owner can fill right now. Slots a stealer is still
    /// copying out count as full.
    #[inline]
    pub fn remaining_slots(&self) -> usize {
        // Relaxed: a count; it only errs low (steal only grows), and
        // `push_back` re-reads with Acquire before writing.
        let head = Head(self.inner.head.load(Ordering::Relaxed));
        (CAP - self.tail.wrapping_sub(head.steal())) as usize
    }

    /// Whether one [`Local::push_back_or_overflow`] would stay in the ring.
    /// Decided from the owner's cached `head` when that says there is room
    /// (no shared load, the common case); otherwise from a fresh one.
    #[inline]
    pub fn has_room(&mut self) -> bool {
        if self.tail.wrapping_sub(self.reuse_bound()) < CAP {
            return true;
        }
        self.refresh_head();
        self.tail.wrapping_sub(self.reuse_bound()) < CAP
    }

    /// Reads `head` with Acquire into the owner's cached copy.
    #[inline]
    fn refresh_head(&mut self) -> Head {
        // Acquire: pairs with the Release CAS of a stealer's release step (S4),
        // reached through the release sequence of RMWs on `head`. The
        // stealer's reads of the slots below the new `steal` happen-before
        // the owner writes them again.
        self.head = Head(self.inner.head.load(Ordering::Acquire));
        self.head
    }

    /// The oldest position whose slot may still be unread, by the cached
    /// `head`: the owner may write position `p` while `p - reuse_bound < CAP`.
    #[inline]
    fn reuse_bound(&self) -> u32 {
        #[cfg(not(magpie_broken = "owner_reuses_unreleased_slots"))]
        return self.head.steal();
        // Broken: treats slots a stealer is still copying as free.
        #[cfg(magpie_broken = "owner_reuses_unreleased_slots")]
        return self.head.real();
    }

    /// Makes every slot below `tail` visible to stealers (P2).
    #[inline]
    fn publish(&mut self, tail: u32) {
        self.tail = tail;
        #[cfg(not(magpie_broken = "push_publishes_relaxed"))]
        // Release: pairs with the Acquire load of `tail` in the steal claim
        // (S2): a stealer that sees this tail sees every slot written below it.
        self.inner.tail.store(tail, Ordering::Release);
        // Broken: a stealer may see the new tail before the slot's contents.
        #[cfg(magpie_broken = "push_publishes_relaxed")]
        self.inner.tail.store(tail, Ordering::Relaxed);
    }

    /// Pushes one task. When the ring is full and no steal is in progress, it
    /// moves the oldest half of the ring ([`LOCAL_QUEUE_CAPACITY`]` / 2` tasks)
    /// plus `task` to `inject` as one batch, under one lock acquisition. When
    /// it is full and a steal is in progress, it pushes just `task` to
    /// `inject`.
    ///
    /// Returns how many tasks left the local queue for `inject` (0 when `task`
    /// stayed local), for the overflow metric. If `inject` is closed those
    /// tasks are dropped instead (shutdown); the count is the same.
    #[inline]
    pub fn push_back_or_overflow(&mut self, task: T, inject: &Inject<T>) -> usize {
        // P1: room is checked against the cached `steal`, a lower bound of
        // the live one, so a stale value can only send us to the slow path.
        if self.tail.wrapping_sub(self.reuse_bound()) < CAP {
            // SAFETY: we are the owner and `tail - steal < CAP` for a `steal`
            // read with Acquire (P1); the slot's last task was claimed and read.
            unsafe { self.inner.write(self.tail, task) };
            self.publish(self.tail.wrapping_add(1));
            0
        } else {
            self.push_overflow_slow(task, inject)
        }
    }

    #[cold]
    #[inline(never)]
    fn push_overflow_slow(&mut self, mut task: T, inject: &Inject<T>) -> usize {
        loop {
            // P1 again with a fresh `steal`.
            let head = self.refresh_head();
            if self.tail.wrapping_sub(self.reuse_bound()) < CAP {
                // SAFETY: as in `push_back_or_overflow`, with `steal` just
                // read with Acquire.
                unsafe { self.inner.write(self.tail, task) };
                self.publish(self.tail.wrapping_add(1));
                return 0;
            }
            if head.is_stealing() {
                // O1: a stealer is copying out and will free half the ring
                // soon; the owner never waits for it, so this one task goes
                // to the global queue. `Err` (closed) drops it here.
                drop(inject.push(task));
                return 1;
            }
            match self.overflow(head, task, inject) {
                Ok(moved) => return moved,
                // A stealer's claim won the race for `head`: retry from P1.
                Err(back) => task = back,
            }
        }
    }

    /// O2-O4: claims the oldest half of a full ring with one CAS and hands it
    /// to `inject` with `task` as one batch. `Err(task)` if a stealer changed
    /// `head` first.
    fn overflow(&mut self, head: Head, task: T, inject: &Inject<T>) -> Result<usize, T> {
        debug_assert_eq!(self.tail.wrapping_sub(head.real()), CAP);
        let first = head.real();
        let end = first.wrapping_add(HALF);
        // O2. Acquire on success and failure: as in `refresh_head`, the value
        // read becomes the owner's `steal` bound.
        if self
            .inner
            .head
            .compare_exchange(
                head.0,
                Head::idle(end).0,
                Ordering::Acquire,
                Ordering::Acquire,
            )
            .is_err()
        {
            return Err(task);
        }
        self.head = Head::idle(end);
        // O3, O4: read the claimed run out under the inject lock, as one batch.
        let batch = ClaimedRun {
            inner: &self.inner,
            pos: first,
            end,
        }
        .chain(core::iter::once(task));
        // `Err` (closed) hands the tasks back: they drop here, outside the lock.
        drop(inject.push_batch(batch));
        Ok(HALF as usize + 1)
    }

    /// Pushes tasks fetched from the global queue, in order.
    ///
    /// # Panics
    ///
    /// If `tasks.len()` is more than [`Local::remaining_slots`], or the
    /// iterator yields more items than its `len()` promised room for.
    #[inline]
    pub fn push_back(&mut self, tasks: impl ExactSizeIterator<Item = T>) {
        self.refresh_head();
        let free = CAP - self.tail.wrapping_sub(self.reuse_bound());
        let n = tasks.len();
        assert!(
            n <= free as usize,
            "Local::push_back: {n} tasks for {free} free slots"
        );
        let limit = self.tail.wrapping_add(free);
        for task in tasks {
            assert!(
                self.tail != limit,
                "Local::push_back: the iterator yielded more than it had room for"
            );
            // SAFETY: owner; `tail - steal < CAP` because `tail < limit`, with
            // `steal` read with Acquire above.
            unsafe { self.inner.write(self.tail, task) };
            // Advanced one at a time so that, should the iterator panic, the
            // tasks written so far are still owned (published by `Drop`).
            self.tail = self.tail.wrapping_add(1);
        }
        self.publish(self.tail);
    }

    /// R2: advances the live `real` by one with one `fetch_add` and returns
    /// the value it had: the position claimed, unless it was `tail` (R4).
    #[inline]
    fn claim_one(&mut self) -> Head {
        // Acquire: as in `refresh_head`; the value read (advanced) becomes
        // the owner's cached `head`, whose `steal` bounds slot reuse (P1).
        let prev = Head(self.inner.head.fetch_add(ONE_REAL, Ordering::Acquire));
        self.head = prev.advance_real();
        prev
    }

    /// R4: stealers took everything since the cached `head` was read, and
    /// R2 pushed `real` one past `tail`; move it back.
    #[cold]
    #[inline(never)]
    fn unclaim_one(&mut self) {
        // Acquire: the value read becomes the cache, as in R2. A `fetch_sub`
        // rather than a store: a stealer's release (S4) may have rewritten
        // the low half meanwhile, and `head` only changes by RMW
        // (invariant 3).
        let prev = Head(self.inner.head.fetch_sub(ONE_REAL, Ordering::Acquire));
        self.head = prev.retreat_real();
        debug_assert_eq!(self.head.real(), self.tail);
    }

    /// Pops the oldest task (FIFO), from the end stealers take from.
    #[cfg(not(magpie_broken = "pop_reads_before_claim"))]
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        // R1: the cached `real` is a lower bound of the live one, which never
        // passes our tail: if the cache says empty, it is.
        if self.head.real() == self.tail {
            return None;
        }
        let real = self.claim_one().real();
        if real == self.tail {
            #[cfg(not(magpie_broken = "pop_skips_unclaim"))]
            self.unclaim_one();
            // Broken: leaves `real` one past `tail`; the next task pushed is
            // never handed out.
            return None;
        }
        // R3. SAFETY: R2 moved `real` past this position for us alone (a
        // stealer's claim is a CAS from a `real` at or below it, which now
        // fails); we wrote the slot ourselves (P1), so it is initialised.
        Some(unsafe { self.inner.read(real) })
    }

    /// Broken: reads the slot at the cached `real`, then claims whatever
    /// position the `fetch_add` lands on.
    #[cfg(magpie_broken = "pop_reads_before_claim")]
    pub fn pop(&mut self) -> Option<T> {
        let cached = self.head.real();
        if cached == self.tail {
            return None;
        }
        // SAFETY: none; this is the bug. A stealer may claim `cached` first.
        let task = unsafe { self.inner.read(cached) };
        if self.claim_one().real() == self.tail {
            self.unclaim_one();
        }
        Some(task)
    }

    /// A new stealer handle for this queue.
    pub fn stealer(&self) -> Steal<T> {
        Steal(self.inner.clone())
    }
}

impl<T> Drop for Local<T> {
    fn drop(&mut self) {
        // Publish tasks written by a `push_back` whose iterator panicked, so
        // the ring's `Drop` sees and drops them. Release: pairs with the
        // Acquire claim load of `tail` (S2) like every other publish.
        self.inner.tail.store(self.tail, Ordering::Release);
    }
}

impl<T> fmt::Debug for Local<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let head = Head(self.inner.head.load(Ordering::Relaxed));
        f.debug_struct("Local")
            .field("steal", &head.steal())
            .field("real", &head.real())
            .field("tail", &self.tail)
            .finish()
    }
}

/// Tasks at positions `[pos, end)` that the owner claimed with the overflow
/// CAS (O2), read out one at a time as the inject queue takes them.
struct ClaimedRun<'a, T> {
    inner: &'a Inner<T>,
    pos: u32,
    end: u32,
}

impl<T> Iterator for ClaimedRun<'_, T> {
    type Item = T;

    #[inline]
    fn next(&mut self) -> Option<T> {
        if self.pos == self.end {
            return None;
        }
        // SAFETY: the overflow CAS moved `real` and `steal` past this run, so
        // no stealer can claim it and the owner (us) reads each position once.
        let task = unsafe { self.inner.read(self.pos) };
        self.pos = self.pos.wrapping_add(1);
        Some(task)
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.end.wrapping_sub(self.pos) as usize;
        (n, Some(n))
    }
}

impl<T> ExactSizeIterator for ClaimedRun<'_, T> {}

impl<T> Drop for ClaimedRun<'_, T> {
    fn drop(&mut self) {
        // Tasks not taken (a panic mid-batch) are still ours to drop.
        self.for_each(drop);
    }
}

/// A handle for other workers: steal half of the queue. `Clone + Send + Sync`.
pub struct Steal<T>(Arc<Inner<T>>);

impl<T> Clone for Steal<T> {
    fn clone(&self) -> Self {
        Steal(self.0.clone())
    }
}

impl<T: Send> Steal<T> {
    /// Moves half (rounded up) of the victim's tasks into `dst` and returns the
    /// oldest of them to run now; the rest land at `dst`'s tail in order.
    ///
    /// Returns `None` when the victim is empty, when another stealer is
    /// mid-steal on this victim (one stealer per victim at a time), or when
    /// `dst` has fewer than [`LOCAL_QUEUE_CAPACITY`]` / 2` free slots.
    pub fn steal_into(&self, dst: &mut Local<T>) -> Option<T> {
        self.steal_into_counted(dst).map(|(task, _)| task)
    }

    /// As [`steal_into`](Self::steal_into), also returning how many tasks went
    /// into `dst` besides the returned one (for metrics).
    pub fn steal_into_counted(&self, dst: &mut Local<T>) -> Option<(T, usize)> {
        // S1: room in dst, against its `steal` (slots a thief of `dst` is
        // still copying out are not free).
        let dst_head = dst.refresh_head();
        let dst_tail = dst.tail;
        #[cfg(not(magpie_broken = "steal_checks_dst_real"))]
        let dst_used = dst_tail.wrapping_sub(dst_head.steal());
        // Broken: ignores a steal in progress on `dst`.
        #[cfg(magpie_broken = "steal_checks_dst_real")]
        let dst_used = dst_tail.wrapping_sub(dst_head.real());
        if dst_used > HALF {
            return None;
        }

        // S2: claim.
        let (first, n) = self.claim()?;

        // S3: copy. The oldest stolen task is returned; the other n - 1 go to
        // dst's tail in order.
        // SAFETY: S2 claimed [first, first + n) for us alone, and its Acquire
        // load of `tail` made the owner's writes of those slots visible.
        let ret = unsafe { self.0.read(first) };
        for i in 1..n {
            // SAFETY: as above, for position first + i.
            let task = unsafe { self.0.read(first.wrapping_add(i)) };
            // SAFETY: we own `dst` (`&mut Local`), and
            // dst_tail + i - 1 - dst.steal < dst_used + HALF <= CAP (S1, and
            // n <= HALF), with dst.steal read with Acquire in S1.
            unsafe { dst.inner.write(dst_tail.wrapping_add(i - 1), task) };
        }

        // S4: release.
        self.release(first, first.wrapping_add(n));

        // S5: publish what landed in dst.
        if n > 1 {
            dst.publish(dst_tail.wrapping_add(n - 1));
        }
        Some((ret, n as usize - 1))
    }

    /// S2: claims half (rounded up) of `[real, tail)` by moving `real` and
    /// leaving `steal` behind. Returns the run's first position and length.
    fn claim(&self) -> Option<(u32, u32)> {
        // Relaxed (load and CAS): the CAS only succeeds on the latest `head`,
        // and the slots' contents are ordered by `tail`'s Acquire, not by
        // `head`.
        let mut head = Head(self.0.head.load(Ordering::Relaxed));
        loop {
            #[cfg(not(magpie_broken = "steal_skips_busy_check"))]
            if head.is_stealing() {
                // Another stealer is mid-steal: one at a time per victim.
                return None;
            }
            // Acquire: pairs with the Release store of `tail` in `publish`
            // (P2): every slot below this tail has been written.
            let tail = self.0.tail.load(Ordering::Acquire);
            let avail = tail.wrapping_sub(head.real());
            if avail as i32 <= 0 {
                return None;
            }
            if avail > CAP {
                // `head` is older than `tail` (the owner popped and pushed
                // since); the CAS would fail anyway. Take a fresh one.
                head = Head(self.0.head.load(Ordering::Relaxed));
                continue;
            }
            let n = avail - avail / 2;
            let next = Head::stealing(head.real(), head.real().wrapping_add(n));
            match self
                .0
                .head
                .compare_exchange(head.0, next.0, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Some((head.real(), n)),
                Err(actual) => head = Head(actual),
            }
        }
    }

    /// S4: sets `steal` to the current `real`, ending the steal. Retries if
    /// the owner popped meanwhile (that moves `real` only).
    fn release(&self, first: u32, claimed_end: u32) {
        let mut head = Head::stealing(first, claimed_end);
        loop {
            debug_assert_eq!(
                head.steal(),
                first,
                "steal moved while a steal was in progress"
            );
            let next = Head::idle(head.real());
            #[cfg(not(magpie_broken = "steal_release_relaxed"))]
            // Release: pairs with the owner's Acquire reads of `head`
            // (`refresh_head`, pop, overflow): our reads of the claimed slots
            // happen-before the owner writes them again.
            let release = Ordering::Release;
            // Broken: the owner may overwrite a slot we are still reading.
            #[cfg(magpie_broken = "steal_release_relaxed")]
            let release = Ordering::Relaxed;
            match self
                .0
                .head
                .compare_exchange(head.0, next.0, release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(actual) => head = Head(actual),
            }
        }
    }

    /// Tasks in the victim (a racy snapshot, for heuristics).
    pub fn len(&self) -> usize {
        // Relaxed: a snapshot; the two loads may come from different moments,
        // hence the clamp to [0, CAP].
        let head = Head(self.0.head.load(Ordering::Relaxed));
        let tail = self.0.tail.load(Ordering::Relaxed);
        let d = tail.wrapping_sub(head.real()) as i32;
        d.clamp(0, CAP as i32) as usize
    }

    /// Whether the victim looks empty (a racy snapshot, for heuristics).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> fmt::Debug for Steal<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let head = Head(self.0.head.load(Ordering::Relaxed));
        f.debug_struct("Steal")
            .field("steal", &head.steal())
            .field("real", &head.real())
            .field("tail", &self.0.tail.load(Ordering::Relaxed))
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::queue::counted::Drops;

    /// A queue whose positions start at `pos` (to exercise u32 wrap-around).
    fn local_at<T: Send>(pos: u32) -> (Local<T>, Steal<T>) {
        let (mut local, steal) = local();
        local.inner.head.store(Head::idle(pos).0, Ordering::Relaxed);
        local.inner.tail.store(pos, Ordering::Relaxed);
        local.tail = pos;
        local.head = Head::idle(pos);
        (local, steal)
    }

    #[test]
    fn pop_returns_tasks_in_push_order() {
        let inject = Inject::new();
        let (mut q, _) = local();
        for i in 0..10u32 {
            assert_eq!(q.push_back_or_overflow(i, &inject), 0);
        }
        assert_eq!(q.len(), 10);
        assert_eq!(q.remaining_slots(), LOCAL_QUEUE_CAPACITY - 10);
        let popped: Vec<u32> = core::iter::from_fn(|| q.pop()).collect();
        assert_eq!(popped, (0..10).collect::<Vec<_>>());
        assert!(q.is_empty());
        assert!(inject.is_empty());
    }

    #[test]
    fn positions_wrap_around_u32_max() {
        let inject = Inject::new();
        let (mut q, steal) = local_at::<u32>(u32::MAX - 5);
        let (mut thief, _) = local_at::<u32>(u32::MAX - 1);
        for i in 0..20 {
            q.push_back_or_overflow(i, &inject);
        }
        assert_eq!(q.len(), 20);
        assert_eq!(steal.len(), 20);
        assert_eq!(steal.steal_into(&mut thief), Some(0));
        assert_eq!(thief.len(), 9);
        let stolen: Vec<u32> = core::iter::from_fn(|| thief.pop()).collect();
        assert_eq!(stolen, (1..10).collect::<Vec<_>>());
        let rest: Vec<u32> = core::iter::from_fn(|| q.pop()).collect();
        assert_eq!(rest, (10..20).collect::<Vec<_>>());
    }

    #[test]
    fn has_room_agrees_with_push_back_or_overflow() {
        let inject = Inject::new();
        let (mut q, steal) = local::<u32>();
        let (mut thief, _) = local();
        for i in 0..CAP {
            assert!(q.has_room());
            assert_eq!(q.push_back_or_overflow(i, &inject), 0);
        }
        assert!(!q.has_room(), "full ring");
        // A steal frees slots the cached `head` does not know about yet.
        assert_eq!(steal.steal_into(&mut thief), Some(0));
        assert!(q.has_room(), "has_room refreshes a stale cache");
        assert_eq!(q.push_back_or_overflow(CAP, &inject), 0);
        assert!(inject.is_empty());
    }

    #[test]
    fn pop_after_everything_was_stolen_undoes_its_claim() {
        let inject = Inject::new();
        let (mut q, steal) = local_at::<u32>(u32::MAX);
        let (mut thief, _) = local();
        q.push_back_or_overflow(0, &inject);
        // The owner's cached `head` still says one task is queued.
        assert_eq!(steal.steal_into(&mut thief), Some(0));
        assert_eq!(q.pop(), None, "R2 lands on `tail`; R4 moves it back");
        assert_eq!(q.len(), 0);
        assert_eq!(steal.len(), 0);
        q.push_back_or_overflow(1, &inject);
        assert_eq!(q.pop(), Some(1));
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn pop_racing_an_unreleased_steal_of_everything_keeps_the_steal_mark() {
        let inject = Inject::new();
        let (mut q, steal) = local_at::<u32>(u32::MAX - 1);
        q.push_back_or_overflow(0, &inject);
        q.push_back_or_overflow(1, &inject);
        assert_eq!(q.pop(), Some(0));
        // A stealer claims the last task and stops before its release (S4).
        let (first, n) = steal.claim().unwrap();
        assert_eq!((first, n), (u32::MAX, 1));
        assert_eq!(q.pop(), None);
        assert_eq!(
            q.remaining_slots(),
            CAP as usize - 1,
            "the claimed slot is not free"
        );
        // SAFETY: `claim` gave this test [first, first + n).
        assert_eq!(unsafe { steal.0.read(first) }, 1);
        steal.release(first, first.wrapping_add(n));
        assert_eq!(q.remaining_slots(), CAP as usize);
        for i in 2..2 + CAP {
            assert_eq!(q.push_back_or_overflow(i, &inject), 0);
        }
        let rest: Vec<u32> = core::iter::from_fn(|| q.pop()).collect();
        assert_eq!(rest, (2..2 + CAP).collect::<Vec<_>>());
        assert!(inject.is_empty());
    }

    #[test]
    fn overflow_moves_oldest_half_and_new_task_in_order() {
        let inject = Inject::new();
        let (mut q, _) = local();
        let cap = LOCAL_QUEUE_CAPACITY as u32;
        for i in 0..cap {
            assert_eq!(q.push_back_or_overflow(i, &inject), 0);
        }
        assert_eq!(q.remaining_slots(), 0);
        assert_eq!(q.push_back_or_overflow(cap, &inject), HALF as usize + 1);
        let mut expected: Vec<u32> = (0..HALF).collect();
        expected.push(cap);
        assert_eq!(inject.drain(), expected);
        let local: Vec<u32> = core::iter::from_fn(|| q.pop()).collect();
        assert_eq!(local, (HALF..cap).collect::<Vec<_>>());
    }

    #[test]
    fn full_ring_during_a_steal_sends_only_the_new_task() {
        let inject = Inject::new();
        let (mut q, steal) = local();
        let cap = LOCAL_QUEUE_CAPACITY as u32;
        for i in 0..cap {
            q.push_back_or_overflow(i, &inject);
        }
        // A stealer stopped between claim (S2) and release (S4).
        let (first, n) = steal.claim().unwrap();
        assert_eq!((first, n), (0, HALF));
        assert_eq!(q.len(), HALF as usize);
        assert_eq!(q.remaining_slots(), 0, "claimed slots are not free yet");
        assert_eq!(q.push_back_or_overflow(cap, &inject), 1);
        assert_eq!(inject.drain(), vec![cap]);
        // A second stealer is turned away while the first is in progress.
        let (mut thief, _) = local();
        assert_eq!(steal.steal_into(&mut thief), None);
        // Finish the first steal by hand: read the run, then release.
        let stolen: Vec<u32> = (0..n)
            // SAFETY: `claim` gave this test [first, first + n).
            .map(|i| unsafe { steal.0.read(first + i) })
            .collect();
        steal.release(first, first + n);
        assert_eq!(stolen, (0..HALF).collect::<Vec<_>>());
        assert_eq!(q.remaining_slots(), HALF as usize);
        assert_eq!(q.push_back_or_overflow(cap + 1, &inject), 0);
    }

    #[test]
    fn closed_inject_drops_overflowed_tasks_exactly_once() {
        let drops = Drops::default();
        let inject = Inject::new();
        assert!(inject.close());
        let (mut q, _) = local();
        for i in 0..=LOCAL_QUEUE_CAPACITY as u32 {
            q.push_back_or_overflow(drops.task(i), &inject);
        }
        assert_eq!(drops.count(), HALF as usize + 1);
        assert!(inject.is_empty());
        drop(q);
        assert_eq!(drops.count(), LOCAL_QUEUE_CAPACITY + 1);
    }

    #[test]
    fn steal_takes_half_rounded_up_and_returns_the_oldest() {
        let inject = Inject::new();
        let (mut q, steal) = local();
        let (mut thief, _) = local();
        for i in 0..7u32 {
            q.push_back_or_overflow(i, &inject);
        }
        assert_eq!(steal.steal_into(&mut thief), Some(0));
        assert_eq!(thief.len(), 3);
        assert_eq!(q.len(), 3);
        assert_eq!(
            core::iter::from_fn(|| thief.pop()).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        assert_eq!(
            core::iter::from_fn(|| q.pop()).collect::<Vec<_>>(),
            [4, 5, 6]
        );
        assert_eq!(steal.steal_into(&mut thief), None, "empty victim");
        q.push_back_or_overflow(9, &inject);
        assert_eq!(steal.steal_into(&mut thief), Some(9), "one task: take it");
        assert!(thief.is_empty());
    }

    #[test]
    fn steal_refuses_when_dst_has_less_than_half_free() {
        let inject = Inject::new();
        let (mut q, steal) = local();
        let (mut thief, _) = local();
        for i in 0..10u32 {
            q.push_back_or_overflow(i, &inject);
        }
        for i in 0..=HALF {
            thief.push_back_or_overflow(100 + i, &inject);
        }
        assert_eq!(thief.remaining_slots(), HALF as usize - 1);
        assert_eq!(steal.steal_into(&mut thief), None);
        assert_eq!(q.len(), 10);
        thief.pop();
        assert_eq!(steal.steal_into(&mut thief), Some(0));
    }

    #[test]
    fn push_back_appends_in_order_up_to_remaining_slots() {
        let inject = Inject::new();
        let (mut q, _) = local();
        q.push_back_or_overflow(0u32, &inject);
        let room = q.remaining_slots();
        q.push_back(1..room as u32 + 1);
        assert_eq!(q.remaining_slots(), 0);
        let all: Vec<u32> = core::iter::from_fn(|| q.pop()).collect();
        assert_eq!(all, (0..=room as u32).collect::<Vec<_>>());
    }

    #[test]
    #[should_panic(expected = "free slots")]
    fn push_back_panics_past_remaining_slots() {
        let (mut q, _) = local::<u32>();
        q.push_back(0..LOCAL_QUEUE_CAPACITY as u32 + 1);
    }

    #[test]
    fn dropping_the_queue_drops_each_remaining_task_once() {
        let drops = Drops::default();
        let inject = Inject::new();
        {
            let (mut q, steal) = local_at(u32::MAX - 3);
            let (mut thief, _) = local();
            for i in 0..100 {
                q.push_back_or_overflow(drops.task(i), &inject);
            }
            for _ in 0..10 {
                assert!(q.pop().is_some());
            }
            assert_eq!(drops.count(), 10);
            let got = steal.steal_into(&mut thief).unwrap();
            assert_eq!(got.id, 10);
            drop(got);
            assert_eq!(thief.len(), 44);
            assert_eq!(q.len(), 45);
            drop(q);
            // The ring lives on through `steal`: nothing dropped yet.
            assert_eq!(drops.count(), 11);
            assert_eq!(steal.len(), 45);
        }
        assert_eq!(drops.count(), 100);
        assert!(inject.is_empty());
    }

    #[test]
    fn handles_are_send_and_steal_is_sync_and_clone() {
        fn send<T: Send>() {}
        fn sync_clone<T: Send + Sync + Clone>() {}
        send::<Local<Vec<u8>>>();
        sync_clone::<Steal<Vec<u8>>>();
    }
}
