//! [`JoinSet`]: a set of tasks whose outputs are collected in completion
//! order (tokio's `JoinSet`).
//!
//! Each member's `JoinHandle` is polled with a waker of its own, which puts
//! the member's key on a shared ready list and wakes the task awaiting
//! `join_next`. `join_next` polls only the members on that list, so
//! collecting `n` outputs costs O(n) polls, not O(n^2). A member is on the
//! list once when it is spawned (its first poll registers its waker).

use std::collections::HashMap;
use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};

use super::{AbortHandle, Handle, JoinError, JoinHandle};

/// A set of spawned tasks, awaited in the order they finish.
///
/// ```
/// use magpie_runtime::{JoinSet, Runtime};
///
/// let rt = Runtime::builder().worker_threads(2).build().unwrap();
/// let sum = rt.block_on(async {
///     let mut set = JoinSet::new();
///     for i in 0..10u64 {
///         set.spawn(async move { i * i });
///     }
///     let mut sum = 0;
///     while let Some(out) = set.join_next().await {
///         sum += out.unwrap();
///     }
///     sum
/// });
/// assert_eq!(sum, 285);
/// ```
///
/// Dropping the set aborts every task still in it.
pub struct JoinSet<T> {
    members: HashMap<u64, Member<T>>,
    next_key: u64,
    ready: Arc<Ready>,
}

struct Member<T> {
    handle: JoinHandle<T>,
    waker: Waker,
}

/// Keys of members woken since the last `join_next` poll, and the waker of
/// the task awaiting it.
#[derive(Default)]
struct Ready {
    keys: Mutex<Vec<u64>>,
    parent: Mutex<Option<Waker>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

struct MemberWaker {
    key: u64,
    ready: Arc<Ready>,
}

impl Wake for MemberWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        lock(&self.ready.keys).push(self.key);
        let parent = lock(&self.ready.parent).take();
        if let Some(parent) = parent {
            parent.wake();
        }
    }
}

impl<T> Default for JoinSet<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> JoinSet<T> {
    /// An empty set.
    pub fn new() -> Self {
        Self {
            members: HashMap::new(),
            next_key: 0,
            ready: Arc::new(Ready::default()),
        }
    }

    /// Tasks in the set (running, or finished and not yet joined).
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    fn insert(&mut self, handle: JoinHandle<T>) -> AbortHandle {
        let key = self.next_key;
        self.next_key += 1;
        let abort = handle.abort_handle();
        let waker = Waker::from(Arc::new(MemberWaker {
            key,
            ready: self.ready.clone(),
        }));
        self.members.insert(key, Member { handle, waker });
        lock(&self.ready.keys).push(key);
        abort
    }

    /// Aborts every task in the set. They stay in it until joined: each
    /// then yields a cancelled [`JoinError`] (or its output, if it finished
    /// first).
    pub fn abort_all(&mut self) {
        for m in self.members.values() {
            m.handle.abort();
        }
    }

    /// Removes every task from the set without aborting it.
    pub fn detach_all(&mut self) {
        self.members.clear();
        lock(&self.ready.keys).clear();
    }

    /// Waits for the next task to finish and returns its output, or `None`
    /// once the set is empty. Cancel safe: dropping the future loses nothing.
    pub async fn join_next(&mut self) -> Option<Result<T, JoinError>> {
        poll_fn(|cx| self.poll_join_next(cx)).await
    }

    /// Aborts every task and waits for all of them to end.
    pub async fn shutdown(&mut self) {
        self.abort_all();
        while self.join_next().await.is_some() {}
    }

    /// Polls for the next finished task; see [`join_next`](Self::join_next).
    pub fn poll_join_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<T, JoinError>>> {
        if self.members.is_empty() {
            return Poll::Ready(None);
        }
        // Register first, then look: a member woken after the look finds
        // the waker and wakes us.
        *lock(&self.ready.parent) = Some(cx.waker().clone());
        let mut batch = std::mem::take(&mut *lock(&self.ready.keys));
        // One pass over the keys taken: a member that answers Pending only
        // because the task's budget ran out has woken its own waker, which
        // put its key back and woke us, so we get polled again.
        let mut found = None;
        let mut i = 0;
        while i < batch.len() {
            let key = batch[i];
            i += 1;
            let Some(member) = self.members.get_mut(&key) else {
                continue; // joined already (a duplicate wake)
            };
            let mut member_cx = Context::from_waker(&member.waker);
            if let Poll::Ready(out) = Pin::new(&mut member.handle).poll(&mut member_cx) {
                self.members.remove(&key);
                found = Some(out);
                break;
            }
        }
        if let Some(out) = found {
            // The keys not looked at go back on the list.
            if i < batch.len() {
                let rest = batch.split_off(i);
                lock(&self.ready.keys).extend(rest);
            }
            return Poll::Ready(Some(out));
        }
        Poll::Pending
    }
}

impl<T: Send + 'static> JoinSet<T> {
    /// Spawns `future` on the current runtime into the set.
    ///
    /// # Panics
    /// Outside a magpie runtime.
    pub fn spawn<F>(&mut self, future: F) -> AbortHandle
    where
        F: Future<Output = T> + Send + 'static,
    {
        self.insert(super::spawn(future))
    }

    /// Spawns `future` on `handle`'s runtime into the set.
    pub fn spawn_on<F>(&mut self, future: F, handle: &Handle) -> AbortHandle
    where
        F: Future<Output = T> + Send + 'static,
    {
        self.insert(handle.spawn(future))
    }

    /// Runs `f` on the current runtime's blocking pool, into the set.
    ///
    /// # Panics
    /// Outside a magpie runtime.
    pub fn spawn_blocking<F>(&mut self, f: F) -> AbortHandle
    where
        F: FnOnce() -> T + Send + 'static,
    {
        self.insert(super::spawn_blocking(f))
    }
}

impl<T> Drop for JoinSet<T> {
    /// Aborts every task still in the set.
    fn drop(&mut self) {
        self.abort_all();
    }
}

impl<T> fmt::Debug for JoinSet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinSet").field("len", &self.len()).finish()
    }
}
