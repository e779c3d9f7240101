//! `OwnedTasks`: the registry of live tasks (task README, steps O1..O4 and
//! S1..S4).
//!
//! Sharded by task id over a power-of-two number of shards; each shard is a
//! `Mutex` over an intrusive doubly-linked list threaded through the tasks'
//! trailers. A linked task holds one reference for the registry, so a task in
//! a list is always alive while the shard is locked.

use core::fmt;
use core::future::Future;
use core::marker::PhantomData;

use super::id::TaskId;
use super::join::JoinHandle;
use super::raw::{Links, RawTask};
use super::state::TransitionToShutdown;
use super::{Notified, Schedule};
use crate::cache_padded::CachePadded;
use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::{Mutex, MutexGuard};

/// The registry of a runtime's live tasks. Holds one reference per linked
/// task; a task unlinks itself when it completes.
pub struct OwnedTasks<S: Schedule> {
    /// Boxed so that its address, the registry's identity (`owner_key`),
    /// stays put when the `OwnedTasks` moves.
    shards: Box<[CachePadded<Mutex<Shard>>]>,
    mask: usize,
    /// Set once by `close_and_shutdown_all`; `bind` reads it under the shard
    /// lock (O2).
    closed: AtomicBool,
    _scheduler: PhantomData<fn(S) -> S>,
}

/// One shard: the head of an intrusive list and its length.
struct Shard {
    head: Option<RawTask>,
    len: usize,
}

// SAFETY: the list's tasks are `Send` (see `Notified`), and the pointers are
// followed only under the shard's lock, which the `Mutex` around every
// `Shard` provides.
unsafe impl Send for Shard {}

impl<S: Schedule> OwnedTasks<S> {
    /// An empty, open registry with `shards` shards, rounded up to a power of
    /// two (at least 1). The runtime passes about four per worker.
    pub fn new(shards: usize) -> Self {
        let n = shards.max(1).next_power_of_two();
        Self {
            shards: (0..n)
                .map(|_| CachePadded::new(Mutex::new(Shard { head: None, len: 0 })))
                .collect(),
            mask: n - 1,
            closed: AtomicBool::new(false),
            _scheduler: PhantomData,
        }
    }

    /// O1: allocate a task for `future` bound to `scheduler`, link it, and
    /// return its first queue entry plus its `JoinHandle`. The caller must
    /// hand the entry to its run queue (or run it).
    ///
    /// If the registry is closed, the task is cancelled at once: the future
    /// is dropped (on this thread), the handle resolves to a cancelled
    /// `JoinError`, and there is no entry.
    pub fn bind<F>(&self, future: F, scheduler: S) -> (Option<Notified<S>>, JoinHandle<F::Output>)
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let raw = RawTask::new(future, scheduler, TaskId::next(), self.owner_key());
        // SAFETY: the new task's three references go to the entry, the
        // handle and (if linked) the registry; `F::Output` is the handle's
        // `T`.
        let (entry, join) = unsafe { (Notified::from_raw(raw), JoinHandle::from_raw(raw)) };
        if self.link(raw) {
            return (Some(entry), join);
        }
        // Closed: the registry's reference is not taken. The entry and the
        // handle hold two more, so this is never the last.
        let last = raw.state().ref_dec();
        assert!(!last, "a new task lost its entry's or handle's reference");
        // Dropping the entry cancels the SCHEDULED task (README step S3).
        drop(entry);
        (None, join)
    }

    /// O2: link a new task unless the registry is closed.
    fn link(&self, raw: RawTask) -> bool {
        #[cfg(magpie_broken = "bind_checks_closed_outside_lock")]
        if self.closed.load(Ordering::Relaxed) {
            return false;
        }
        let mut shard = self.lock_shard(raw.id());
        // Relaxed: the shard lock orders this load against the closer, which
        // stores `closed` before it locks each shard (S1): if our critical
        // section comes after the closer's on this shard, the unlock/lock pair
        // makes the store visible; if before, the sweep finds the task.
        #[cfg(not(magpie_broken = "bind_checks_closed_outside_lock"))]
        if self.closed.load(Ordering::Relaxed) {
            return false;
        }
        // SAFETY: the shard is locked, the task is new and unlinked, and its
        // registry reference goes to the list.
        unsafe { shard.push_front(raw) };
        true
    }

    /// O3: unlink a completing task. `true` if it was linked here: its
    /// registry reference now belongs to the caller.
    ///
    /// Safe for any task: one bound to another registry (`owner` differs) or
    /// already unlinked by the sweep is left alone and reported `false`.
    pub(crate) fn remove(&self, raw: RawTask) -> bool {
        if raw.trailer().owner != self.owner_key() {
            return false;
        }
        let mut shard = self.lock_shard(raw.id());
        // SAFETY: the task was bound to this registry, so if it is linked it
        // is in this shard (the shard is a function of its id), which we
        // hold locked.
        unsafe { shard.remove(raw) }
    }

    /// S1, S2: close the registry to new tasks (`bind` cancels them) and
    /// cancel every linked task that is IDLE or SCHEDULED: drop its future
    /// (on this thread), complete it as cancelled, wake its joiner. A task
    /// that is RUNNING is only marked CANCELLED; the worker polling it
    /// completes it (call this after the workers stopped, then every task is
    /// gone when this returns, except those whose queue entries are still
    /// being pushed by a racing waker, which are cancelled but still
    /// unlinking). Queue entries of claimed tasks become stale: running or
    /// dropping them only releases their reference. Idempotent.
    pub fn close_and_shutdown_all(&self) {
        // Relaxed: published to `bind` by each shard's lock (see `link`).
        self.closed.store(true, Ordering::Relaxed);
        for i in 0..self.shards.len() {
            // Claim under the lock, cancel outside it: cancelling runs the
            // future's Drop and the joiner's waker, which may spawn or
            // complete other tasks (and so lock this shard).
            let claimed = lock(&self.shards[i]).claim_all();
            for raw in claimed {
                // SAFETY: `claim_all` claimed and unlinked the task; the
                // registry's reference passes to `shutdown`.
                unsafe { (raw.vtable().shutdown)(raw) }
            }
        }
    }

    /// Tasks currently linked: not yet completed (plus completing ones that
    /// have not unlinked yet).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).len).sum()
    }

    /// No task is linked.
    pub fn is_empty(&self) -> bool {
        self.shards.iter().all(|s| lock(s).len == 0)
    }

    /// The registry's identity, stored in every task it binds: the address
    /// of the shard array. Unique among live registries, and a task is
    /// linked only while its registry is alive (`Drop` unlinks the rest).
    fn owner_key(&self) -> usize {
        self.shards.as_ptr() as usize
    }

    fn lock_shard(&self, id: TaskId) -> MutexGuard<'_, Shard> {
        lock(&self.shards[id.as_u64() as usize & self.mask])
    }
}

impl<S: Schedule> Drop for OwnedTasks<S> {
    /// Shuts down what is left, then drops the registry's references to tasks
    /// that are still RUNNING or completing (they finish on their own: their
    /// `remove` will not find them).
    fn drop(&mut self) {
        self.close_and_shutdown_all();
        for shard in self.shards.iter() {
            let rest = lock(shard).unlink_all();
            for raw in rest {
                if raw.state().ref_dec() {
                    // SAFETY: that was the last reference.
                    unsafe { (raw.vtable().dealloc)(raw) }
                }
            }
        }
    }
}

impl<S: Schedule> fmt::Debug for OwnedTasks<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedTasks")
            .field("shards", &self.shards.len())
            .field("len", &self.len())
            // Relaxed: a diagnostic read.
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .finish()
    }
}

/// Lock a shard. A panic while a shard is locked can only come from an
/// assertion in this file (no user code runs under the lock), after which
/// the list is still consistent, so poisoning is ignored.
fn lock(shard: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    shard
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Read a task's links. The caller holds the lock of the shard the task is
/// in (or is about to be pushed into).
fn links(raw: RawTask) -> (Option<RawTask>, Option<RawTask>) {
    raw.trailer().links.with(|l| {
        // SAFETY: (caller) the shard lock guards the links.
        let l = unsafe { &*l };
        (l.prev, l.next)
    })
}

/// Write a task's links. Same rule as `links`.
fn set_links(raw: RawTask, f: impl FnOnce(&mut Links)) {
    raw.trailer().links.with_mut(|l| {
        // SAFETY: (caller) the shard lock guards the links.
        f(unsafe { &mut *l })
    })
}

impl Shard {
    /// # Safety
    /// The shard is locked and `raw` is linked in no list.
    unsafe fn push_front(&mut self, raw: RawTask) {
        let old = self.head;
        set_links(raw, |l| {
            l.prev = None;
            l.next = old;
        });
        if let Some(old) = old {
            set_links(old, |l| l.prev = Some(raw));
        }
        self.head = Some(raw);
        self.len += 1;
    }

    /// Unlink `raw` if it is in this list. A task with no `prev` is in the
    /// list only if it is the head: an unlinked task has both links `None`.
    ///
    /// # Safety
    /// The shard is locked, and `raw` is either in this list or in none.
    unsafe fn remove(&mut self, raw: RawTask) -> bool {
        let (prev, next) = links(raw);
        match prev {
            None if self.head != Some(raw) => return false,
            None => self.head = next,
            Some(prev) => set_links(prev, |l| l.next = next),
        }
        if let Some(next) = next {
            set_links(next, |l| l.prev = prev);
        }
        set_links(raw, |l| *l = Links::default());
        self.len -= 1;
        true
    }

    /// S2: claim every IDLE or SCHEDULED task (`transition_to_shutdown`) and
    /// unlink it; mark the others CANCELLED and leave them linked.
    fn claim_all(&mut self) -> Vec<RawTask> {
        let mut claimed = Vec::new();
        let mut cursor = self.head;
        while let Some(raw) = cursor {
            cursor = links(raw).1;
            match raw.state().transition_to_shutdown() {
                TransitionToShutdown::Claimed => {
                    // SAFETY: locked, and `raw` is in this list.
                    let was_linked = unsafe { self.remove(raw) };
                    debug_assert!(was_linked);
                    claimed.push(raw);
                }
                TransitionToShutdown::Running | TransitionToShutdown::Complete => {}
            }
        }
        claimed
    }

    /// Unlink every task (for `Drop`); their registry references pass to the
    /// caller.
    fn unlink_all(&mut self) -> Vec<RawTask> {
        let mut all = Vec::with_capacity(self.len);
        while let Some(raw) = self.head {
            // SAFETY: locked, and `raw` is this list's head.
            let was_linked = unsafe { self.remove(raw) };
            debug_assert!(was_linked);
            all.push(raw);
        }
        all
    }
}
