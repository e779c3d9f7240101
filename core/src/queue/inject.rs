//! The global inject queue: a lock-free ring for lone pushes in front of a
//! mutex-guarded backlog, with a lock-free length.
//!
//! It receives external spawns, cross-worker wakeups and local-ring
//! overflows, and hands tasks out in fair-share batches (`README.md`,
//! "Inject queue", steps I1-I5 and the ring's J1-J5). A lone push claims a
//! slot of the ring ([`inject_ring`](super::inject_ring)) without taking the
//! lock, unless the ring is full or the backlog holds tasks (then it queues
//! behind them, so the order stays FIFO). Batches go to the backlog: short
//! ones to a flat `VecDeque` tail, and a batch of `LINK_MIN` or more is
//! linked in whole, in O(1) under the lock, so a growing backlog never
//! reallocates (and copies) everything queued while the lock is held.
//! Consumers take under the lock, the ring first (its tasks are older than
//! anything in the backlog), so the ring has one consumer at a time.

use std::collections::VecDeque;

use core::fmt;

use super::inject_ring::{Refused, Ring};
use super::{Local, MAX_GLOBAL_BATCH};
use crate::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::sync::{Mutex, MutexGuard};

/// The global queue. `Send + Sync`.
pub struct Inject<T> {
    /// The backlog's length, written under the lock after every change and
    /// read without it.
    len: AtomicUsize,
    /// Set once, under the lock, by `close`.
    closed: AtomicBool,
    /// Lone pushes, lock-free; taken from under the lock, before the backlog.
    ring: Ring<T>,
    queue: Mutex<Backlog<T>>,
}

/// Batches shorter than this are copied into the flat tail; longer ones are
/// linked in whole.
const LINK_MIN: usize = 64;

/// The FIFO behind the lock, oldest first: `linked` batches (each a whole
/// `Vec` from `push_batch`, none empty), then the flat `tail`.
///
/// Lone pushes and short batches go to the flat tail, so a queue that tasks
/// stream through one at a time (the async runtime's outside spawns) runs
/// exactly the flat `VecDeque` code plus one branch per pop. A long batch is
/// linked in O(1) instead of being copied under the lock (and instead of
/// making a big backlog reallocate under the lock); if the tail holds tasks
/// it is linked first, to keep the order.
pub(super) struct Backlog<T> {
    linked: VecDeque<VecDeque<T>>,
    tail: VecDeque<T>,
    len: usize,
}

impl<T> Backlog<T> {
    const fn new() -> Self {
        Backlog {
            linked: VecDeque::new(),
            tail: VecDeque::new(),
            len: 0,
        }
    }

    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn push(&mut self, task: T) {
        self.tail.push_back(task);
        self.len += 1;
    }

    fn push_batch(&mut self, batch: Vec<T>) {
        if batch.is_empty() {
            return;
        }
        self.len += batch.len();
        if batch.len() < LINK_MIN {
            self.tail.extend(batch);
            return;
        }
        if !self.tail.is_empty() {
            let older = core::mem::take(&mut self.tail);
            self.linked.push_back(older);
        }
        self.linked.push_back(VecDeque::from(batch));
    }

    #[inline]
    fn pop_front(&mut self) -> Option<T> {
        let task = match self.linked.front_mut() {
            None => self.tail.pop_front()?,
            Some(first) => {
                let task = first.pop_front();
                debug_assert!(task.is_some(), "no linked batch is empty");
                if first.is_empty() {
                    self.linked.pop_front();
                }
                task?
            }
        };
        self.len -= 1;
        Some(task)
    }

    /// The oldest `n` tasks (`n <= len`), taken one at a time as the iterator
    /// advances (across linked batches and into the tail). Tasks not taken
    /// when it drops stay queued.
    fn take_front(&mut self, n: usize) -> Counted<impl FnMut() -> Option<T> + '_> {
        debug_assert!(n <= self.len);
        Counted {
            next: move || self.pop_front(),
            left: n,
        }
    }

    fn into_vec(self) -> Vec<T> {
        let mut all = Vec::with_capacity(self.len);
        for batch in self.linked {
            all.extend(batch);
        }
        all.extend(self.tail);
        all
    }
}

impl<T: Send> Backlog<T> {
    /// Moves the oldest `n` tasks (`n <= len`) into `dst` with one
    /// `push_back`: a `drain` when one part (the tail, or the first linked
    /// batch with more than `n`) holds them all, else task by task.
    #[inline]
    fn move_front_into(&mut self, n: usize, dst: &mut Local<T>) {
        debug_assert!(n <= self.len);
        match self.linked.front_mut() {
            None => {
                dst.push_back(self.tail.drain(..n));
                self.len -= n;
            }
            Some(first) if first.len() > n => {
                dst.push_back(first.drain(..n));
                self.len -= n;
            }
            Some(_) => dst.push_back(self.take_front(n)),
        }
    }
}

/// Exactly `left` items from `next`, as the `ExactSizeIterator` that
/// `Local::push_back` takes. The caller has counted them with the lock held
/// (the backlog's length, or `Ring::ready`), so `next` yields every one.
struct Counted<F> {
    next: F,
    left: usize,
}

impl<T, F: FnMut() -> Option<T>> Iterator for Counted<F> {
    type Item = T;

    #[inline]
    fn next(&mut self) -> Option<T> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let item = (self.next)();
        debug_assert!(item.is_some(), "counted a task that is not there");
        item
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<T, F: FnMut() -> Option<T>> ExactSizeIterator for Counted<F> {}

impl<T: Send> Default for Inject<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Send> Inject<T> {
    /// An empty, open queue.
    pub fn new() -> Self {
        Inject {
            len: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            ring: Ring::new(),
            queue: Mutex::new(Backlog::new()),
        }
    }

    /// Locks the queue. A panic while the lock was held (only possible inside
    /// a caller's iterator in `push_batch`) leaves the `VecDeque` valid, so
    /// poisoning is ignored.
    #[inline]
    fn lock(&self) -> MutexGuard<'_, Backlog<T>> {
        self.queue
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// I1: records the length after a change; called with the lock held.
    #[inline]
    fn set_len(&self, queue: &Backlog<T>) {
        // Relaxed: `len` is a hint. The tasks themselves are ordered by the
        // mutex; a caller deciding whether to park brackets its read of `len`
        // with its own SeqCst fences.
        self.len.store(queue.len(), Ordering::Relaxed);
    }

    /// Whether `close` has run; read with the lock held.
    #[inline]
    fn closed_locked(&self) -> bool {
        // Relaxed: the flag is written under the same lock we hold.
        self.closed.load(Ordering::Relaxed)
    }

    /// Appends one task. `Err(task)` once the queue is closed.
    ///
    /// I5: without the lock into the ring while the backlog is empty; under
    /// the lock into the backlog when the ring is full or the backlog already
    /// holds tasks (so a task never overtakes an older one queued there).
    #[inline]
    pub fn push(&self, task: T) -> Result<(), T> {
        // Broken: decides "open" from the flag before claiming; a close and
        // its drain can run between the check and the claim.
        #[cfg(magpie_broken = "inject_ring_close_by_flag")]
        if self.is_closed() {
            return Err(task);
        }
        // Relaxed: a stale "empty" can only come from a concurrent push or
        // take, which leaves the two pushes unordered anyway.
        let task = if self.len.load(Ordering::Relaxed) == 0 {
            match self.ring.push(task) {
                Ok(()) => return Ok(()),
                Err(Refused::Closed(task)) => return Err(task),
                Err(Refused::Full(task)) => task,
            }
        } else {
            task
        };
        self.push_locked(task)
    }

    /// I5's second half: the backlog, under the lock.
    #[cold]
    fn push_locked(&self, task: T) -> Result<(), T> {
        let mut queue = self.lock();
        if self.closed_locked() {
            return Err(task);
        }
        queue.push(task);
        self.set_len(&queue);
        Ok(())
    }

    /// Appends every task, in order, under one lock acquisition. Once the
    /// queue is closed nothing is appended and all the tasks come back.
    ///
    /// The tasks are collected into a `Vec` before the lock is taken (a
    /// `Vec` passed in is reused as it is), and that `Vec` is linked into
    /// the queue whole, so the lock is held for O(1) work.
    pub fn push_batch(&self, tasks: impl IntoIterator<Item = T>) -> Result<(), Vec<T>> {
        let batch: Vec<T> = tasks.into_iter().collect();
        let mut queue = self.lock();
        if self.closed_locked() {
            drop(queue);
            return Err(batch);
        }
        queue.push_batch(batch);
        self.set_len(&queue);
        Ok(())
    }

    /// Takes the oldest task: the ring's, else the backlog's. `None` also
    /// when the only tasks are ring claims still being written.
    pub fn pop(&self) -> Option<T> {
        if self.is_empty() {
            return None;
        }
        let mut queue = self.lock();
        if let Some(task) = self.ring.take(&mut *queue) {
            return Some(task);
        }
        let task = queue.pop_front();
        self.set_len(&queue);
        task
    }

    /// Fair-share batch fetch (I2-I4): under one lock, takes
    /// `min(len / workers + 1, dst.remaining_slots() + 1, MAX_GLOBAL_BATCH)`
    /// tasks (never more than there are), returns the oldest and pushes the
    /// rest, in order, into `dst`. `workers == 0` counts as 1.
    pub fn pop_batch_into(&self, dst: &mut Local<T>, workers: usize) -> Option<T> {
        self.pop_batch_into_counted(dst, workers)
            .map(|(task, _)| task)
    }

    /// As [`pop_batch_into`](Self::pop_batch_into), also returning how many
    /// tasks went into `dst` (the batch minus the returned one). The runtime's
    /// gate needs the exact count; `dst.len()` before and after cannot give it
    /// while thieves take from `dst`.
    pub fn pop_batch_into_counted(&self, dst: &mut Local<T>, workers: usize) -> Option<(T, usize)> {
        // I2: skip the lock when the queue looks empty. A task pushed after
        // this load is found by the caller's next look (the runtime re-checks
        // after its pre-park fence).
        if self.is_empty() {
            return None;
        }
        #[cfg(magpie_broken = "inject_batch_from_stale_len")]
        let stale_len = self.len();
        let mut queue = self.lock();
        // I3: size the batch from the length under the lock: the backlog's is
        // exact, the ring's may count claims still being written (then fewer
        // tasks move, never more than are there).
        #[cfg(not(magpie_broken = "inject_batch_from_stale_len"))]
        let len = queue.len() + self.ring.len();
        // Broken: sizes the batch from a length read before the lock.
        #[cfg(magpie_broken = "inject_batch_from_stale_len")]
        let len = stale_len;
        if len == 0 {
            return None;
        }
        let n = (len / workers.max(1) + 1)
            .min(dst.remaining_slots() + 1)
            .min(MAX_GLOBAL_BATCH)
            .min(len);
        // I4: the oldest task is returned; the next n - 1 go to dst, the
        // ring's written tasks first (they are the older), then the
        // backlog's.
        let first = match self.ring.take(&mut *queue) {
            Some(task) => task,
            None => queue.pop_front()?,
        };
        let from_ring = self.ring.ready(&mut *queue, n - 1);
        let ring = &self.ring;
        let locked = &mut *queue;
        dst.push_back(Counted {
            next: || ring.take(locked),
            left: from_ring,
        });
        #[cfg(not(magpie_broken = "inject_batch_from_stale_len"))]
        let from_backlog = (n - 1 - from_ring).min(queue.len());
        // Broken: trusts the stale size, which may overdraw the backlog.
        #[cfg(magpie_broken = "inject_batch_from_stale_len")]
        let from_backlog = n - 1 - from_ring;
        queue.move_front_into(from_backlog, dst);
        self.set_len(&queue);
        Some((first, from_ring + from_backlog))
    }

    /// Closes the queue: every later push fails. `true` if this call closed it.
    pub fn close(&self) -> bool {
        let _queue = self.lock();
        if self.closed_locked() {
            return false;
        }
        // J5: no ring claim succeeds after this; claims made before it are
        // taken or drained like any queued task.
        self.ring.close();
        // Release: pairs with the Acquire load in `is_closed`: a thread that
        // sees the flag sees every push that happened before the close.
        self.closed.store(true, Ordering::Release);
        true
    }

    /// Whether the queue has been closed.
    #[inline]
    pub fn is_closed(&self) -> bool {
        // Acquire: pairs with the Release store in `close`.
        self.closed.load(Ordering::Acquire)
    }

    /// Removes every task (for shutdown). The caller drops them, outside the
    /// lock.
    ///
    /// The ring's tasks come first (the older), including claims still being
    /// written when `drain` starts: it waits for those (a producer between
    /// its claim and its write holds no lock, so the wait is short).
    pub fn drain(&self) -> Vec<T> {
        let mut queue = self.lock();
        let mut tasks = Vec::new();
        self.ring.drain_into(&mut *queue, &mut tasks);
        let backlog = core::mem::replace(&mut *queue, Backlog::new());
        self.set_len(&queue);
        drop(queue);
        tasks.extend(backlog.into_vec());
        tasks
    }
}

impl<T> Inject<T> {
    /// Tasks queued, read without the lock (a snapshot).
    #[inline]
    pub fn len(&self) -> usize {
        // Relaxed: a hint (see `set_len`). The ring's part counts claims
        // whose tasks are still being written.
        self.len.load(Ordering::Relaxed) + self.ring.len()
    }

    /// Whether the queue looks empty (a snapshot; see [`Inject::len`]).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> fmt::Debug for Inject<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inject")
            .field("len", &self.len())
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::queue::{local, INJECT_RING_CAPACITY, LOCAL_QUEUE_CAPACITY};

    fn filled(n: u32) -> Inject<u32> {
        let inject = Inject::new();
        inject.push_batch(0..n).unwrap();
        inject
    }

    #[test]
    fn push_and_push_batch_keep_fifo_order() {
        let inject = Inject::new();
        inject.push(0u32).unwrap();
        inject.push_batch(1..5).unwrap();
        inject.push(5).unwrap();
        assert_eq!(inject.len(), 6);
        let all: Vec<u32> = core::iter::from_fn(|| inject.pop()).collect();
        assert_eq!(all, (0..6).collect::<Vec<_>>());
        assert!(inject.is_empty());
    }

    #[test]
    fn closed_queue_refuses_pushes_and_hands_tasks_back() {
        let inject = filled(3);
        assert!(!inject.is_closed());
        assert!(inject.close());
        assert!(!inject.close(), "only the first close reports true");
        assert!(inject.is_closed());
        assert_eq!(inject.push(7), Err(7));
        assert_eq!(inject.push_batch([8, 9]), Err(vec![8, 9]));
        assert_eq!(inject.drain(), vec![0, 1, 2]);
        assert_eq!(inject.len(), 0);
    }

    #[test]
    fn pop_batch_into_takes_a_fair_share() {
        let inject = filled(100);
        let (mut dst, _) = local();
        // 100 / 4 + 1 = 26: one returned, 25 pushed.
        assert_eq!(inject.pop_batch_into(&mut dst, 4), Some(0));
        assert_eq!(dst.len(), 25);
        assert_eq!(inject.len(), 74);
        let got: Vec<u32> = core::iter::from_fn(|| dst.pop()).collect();
        assert_eq!(got, (1..26).collect::<Vec<_>>());
    }

    #[test]
    fn pop_batch_into_is_capped_by_max_global_batch() {
        let inject = filled(1000);
        let (mut dst, _) = local();
        assert_eq!(inject.pop_batch_into(&mut dst, 1), Some(0));
        assert_eq!(dst.len(), MAX_GLOBAL_BATCH - 1);
        assert_eq!(inject.len(), 1000 - MAX_GLOBAL_BATCH);
    }

    #[test]
    fn pop_batch_into_is_capped_by_room_in_dst() {
        let inject = filled(1000);
        let (mut dst, _) = local();
        dst.push_back(0..LOCAL_QUEUE_CAPACITY as u32 - 6);
        assert_eq!(dst.remaining_slots(), 6);
        assert_eq!(inject.pop_batch_into(&mut dst, 1), Some(0));
        assert_eq!(dst.remaining_slots(), 0);
        assert_eq!(inject.len(), 1000 - 7);
        // A full dst still gets one task to run.
        assert_eq!(inject.pop_batch_into(&mut dst, 1), Some(7));
    }

    #[test]
    fn pop_batch_into_takes_the_last_task_and_treats_zero_workers_as_one() {
        let inject = filled(1);
        let (mut dst, _) = local();
        assert_eq!(inject.pop_batch_into(&mut dst, 0), Some(0));
        assert!(dst.is_empty());
        assert_eq!(inject.pop_batch_into(&mut dst, 0), None);
    }

    #[test]
    fn backlog_keeps_fifo_order_across_pushes_batches_and_pops() {
        let inject = Inject::new();
        let mut next = 0u32;
        let mut expected = VecDeque::new();
        let mut got = Vec::new();
        let (mut dst, _) = local();
        // Lone pushes and short batches go to the flat tail, long ones are
        // linked (after the tail); batch pops cross from one part to the
        // next. Under Miri 20 rounds (every batch size four times) keep the
        // test at a few seconds.
        let rounds = if cfg!(miri) { 20 } else { 40 };
        for round in 0..rounds {
            for _ in 0..(round % 7) * 20 {
                inject.push(next).unwrap();
                expected.push_back(next);
                next += 1;
            }
            let size = [0usize, 3, 64, 100, 1024][round as usize % 5];
            let batch: Vec<u32> = (next..next + size as u32).collect();
            next += size as u32;
            expected.extend(batch.iter().copied());
            inject.push_batch(batch).unwrap();
            assert_eq!(inject.len() + got.len(), expected.len());
            for _ in 0..round % 4 {
                if let Some(task) = inject.pop_batch_into(&mut dst, 3) {
                    got.push(task);
                    got.extend(core::iter::from_fn(|| dst.pop()));
                }
            }
            if round % 5 == 0 {
                got.extend(inject.pop());
            }
            assert_eq!(inject.len() + got.len(), expected.len());
        }
        got.extend(inject.drain());
        assert_eq!(got, Vec::from(expected));
        assert!(inject.is_empty());
    }

    #[test]
    fn lone_pushes_and_short_batches_stay_flat_and_long_batches_are_linked() {
        let inject = Inject::new();
        for i in 0..100u32 {
            inject.push(i).unwrap();
        }
        inject.push_batch(100..110).unwrap();
        assert!(inject.lock().linked.is_empty(), "short batch copied");
        // A long batch links the tail first, then itself, without copying.
        let batch: Vec<u32> = (110..110 + LINK_MIN as u32).collect();
        let ptr = batch.as_ptr();
        inject.push_batch(batch).unwrap();
        {
            let q = inject.lock();
            assert_eq!(q.linked.len(), 2);
            assert!(q.tail.is_empty());
            assert_eq!(
                q.linked[1].as_slices().0.as_ptr(),
                ptr,
                "linked, not copied"
            );
        }
        inject.push(999).unwrap();
        let mut expected: Vec<u32> = (0..110 + LINK_MIN as u32).collect();
        expected.push(999);
        assert_eq!(inject.drain(), expected);
    }

    #[test]
    fn lone_pushes_past_the_ring_spill_to_the_backlog_and_stay_fifo() {
        let inject = Inject::new();
        let n = INJECT_RING_CAPACITY as u32 + 10;
        for i in 0..n {
            inject.push(i).unwrap();
        }
        assert_eq!(inject.ring.len(), INJECT_RING_CAPACITY);
        assert_eq!(inject.lock().len(), 10, "the overflow went to the backlog");
        assert_eq!(inject.len(), n as usize);
        // While the backlog holds tasks, a lone push queues behind them even
        // though the ring has room again.
        assert_eq!(inject.pop(), Some(0));
        inject.push(n).unwrap();
        assert_eq!(inject.lock().len(), 11);
        let (mut dst, _) = local();
        let mut got = vec![0];
        while let Some(task) = inject.pop_batch_into(&mut dst, 1) {
            got.push(task);
            got.extend(core::iter::from_fn(|| dst.pop()));
        }
        assert_eq!(got, (0..=n).collect::<Vec<_>>());
        assert!(inject.is_empty());
        // Empty again: lone pushes use the ring.
        inject.push(7).unwrap();
        assert_eq!(inject.ring.len(), 1);
        assert_eq!(inject.lock().len(), 0);
    }

    #[test]
    fn the_ring_wraps_around_many_laps_in_order() {
        let laps: u32 = if cfg!(miri) { 2 } else { 10 };
        let cap = INJECT_RING_CAPACITY as u32;
        let inject = Inject::new();
        let (mut dst, _) = local();
        let mut next_in = 0u32;
        let mut next_out = 0u32;
        let mut round = 0u32;
        while next_in < laps * cap {
            // Bursts from 1 to a little under the capacity: no spill, so
            // every task goes through the ring.
            for _ in 0..(round % 5) * (cap / 5) + 1 {
                inject.push(next_in).unwrap();
                next_in += 1;
            }
            assert_eq!(inject.lock().len(), 0, "nothing spilled");
            while let Some(task) = inject.pop_batch_into(&mut dst, 2) {
                for t in core::iter::once(task).chain(core::iter::from_fn(|| dst.pop())) {
                    assert_eq!(t, next_out);
                    next_out += 1;
                }
            }
            round += 1;
        }
        assert_eq!(next_out, next_in);
    }

    #[test]
    fn close_refuses_ring_pushes_and_drain_returns_ring_then_backlog() {
        let inject = Inject::new();
        inject.push(0u32).unwrap();
        inject.push(1).unwrap();
        inject.push_batch([2, 3]).unwrap();
        inject.push(4).unwrap(); // behind the backlog
        assert!(inject.close());
        assert_eq!(inject.push(5), Err(5));
        assert_eq!(inject.len(), 5);
        assert_eq!(inject.drain(), vec![0, 1, 2, 3, 4]);
        assert!(inject.is_empty());
        assert_eq!(inject.push(6), Err(6), "still closed after a drain");
    }

    #[test]
    fn dropping_the_queue_drops_ring_and_backlog_tasks_once() {
        use crate::queue::counted::Drops;
        let drops = Drops::default();
        {
            let inject = Inject::new();
            for i in 0..INJECT_RING_CAPACITY as u32 + 3 {
                inject.push(drops.task(i)).unwrap();
            }
            let (mut dst, _) = local();
            // Take a few so the ring's live region starts mid-way.
            let first = inject.pop_batch_into(&mut dst, 64).expect("queued");
            assert_eq!(first.id, 0);
            drop(first);
            while dst.pop().is_some() {}
            assert!(drops.count() > 1);
        }
        assert_eq!(drops.count(), INJECT_RING_CAPACITY + 3);
    }

    #[test]
    fn inject_is_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Inject<Vec<u8>>>();
    }
}
