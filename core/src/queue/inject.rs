//! The global inject queue: a mutex-guarded FIFO with a lock-free length.
//!
//! It receives external spawns, cross-worker wakeups and local-ring
//! overflows, and hands tasks out in fair-share batches (`README.md`,
//! "Inject queue", steps I1-I4).

use std::collections::VecDeque;

use core::fmt;

use super::{Local, MAX_GLOBAL_BATCH};
use crate::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::sync::{Mutex, MutexGuard};

/// The global queue. `Send + Sync`.
pub struct Inject<T> {
    /// The queue's length, written under the lock after every change and read
    /// without it.
    len: AtomicUsize,
    /// Set once, under the lock, by `close`.
    closed: AtomicBool,
    queue: Mutex<VecDeque<T>>,
}

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
            queue: Mutex::new(VecDeque::new()),
        }
    }

    /// Locks the queue. A panic while the lock was held (only possible inside
    /// a caller's iterator in `push_batch`) leaves the `VecDeque` valid, so
    /// poisoning is ignored.
    #[inline]
    fn lock(&self) -> MutexGuard<'_, VecDeque<T>> {
        self.queue
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// I1: records the length after a change; called with the lock held.
    #[inline]
    fn set_len(&self, queue: &VecDeque<T>) {
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
    pub fn push(&self, task: T) -> Result<(), T> {
        let mut queue = self.lock();
        if self.closed_locked() {
            return Err(task);
        }
        queue.push_back(task);
        self.set_len(&queue);
        Ok(())
    }

    /// Appends every task, in order, under one lock acquisition. Once the
    /// queue is closed nothing is appended and all the tasks come back.
    pub fn push_batch(&self, tasks: impl IntoIterator<Item = T>) -> Result<(), Vec<T>> {
        let mut queue = self.lock();
        if self.closed_locked() {
            drop(queue);
            return Err(tasks.into_iter().collect());
        }
        queue.extend(tasks);
        self.set_len(&queue);
        Ok(())
    }

    /// Takes the oldest task.
    pub fn pop(&self) -> Option<T> {
        if self.is_empty() {
            return None;
        }
        let mut queue = self.lock();
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
        // I3: size the batch from the length under the lock.
        #[cfg(not(magpie_broken = "inject_batch_from_stale_len"))]
        let len = queue.len();
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
        // I4: the oldest task is returned; the next n - 1 go to dst.
        let first = queue.pop_front()?;
        dst.push_back(queue.drain(..n - 1));
        self.set_len(&queue);
        Some((first, n - 1))
    }

    /// Tasks queued, read without the lock (a snapshot).
    #[inline]
    pub fn len(&self) -> usize {
        // Relaxed: a hint (see `set_len`).
        self.len.load(Ordering::Relaxed)
    }

    /// Whether the queue looks empty (a snapshot; see [`Inject::len`]).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Closes the queue: every later push fails. `true` if this call closed it.
    pub fn close(&self) -> bool {
        let _queue = self.lock();
        if self.closed_locked() {
            return false;
        }
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
    pub fn drain(&self) -> Vec<T> {
        let mut queue = self.lock();
        let tasks = core::mem::take(&mut *queue);
        self.set_len(&queue);
        drop(queue);
        tasks.into()
    }
}

impl<T> fmt::Debug for Inject<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inject")
            .field("len", &self.len.load(Ordering::Relaxed))
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::queue::{local, LOCAL_QUEUE_CAPACITY};

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
    fn inject_is_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Inject<Vec<u8>>>();
    }
}
