//! Task bookkeeping for the async runtime: everything about a spawned future
//! that needs `unsafe`, behind a safe API.
//!
//! - [`state`]: the packed 64-bit task-state word (lifecycle, wake and cancel
//!   flags, join-handle flags, shield depth, reference count), every
//!   transition one atomic read-modify-write.
//! - The task cell: one allocation per task holding a header (state word,
//!   vtable, id), the scheduler handle, the future (later its output) and a
//!   trailer (registry links, the `JoinHandle`'s waker). Reached through
//!   one-pointer handles: [`Notified`] (a run-queue entry), [`JoinHandle`],
//!   [`AbortHandle`] and the task's [`Waker`](core::task::Waker)s.
//! - [`OwnedTasks`]: the sharded registry of live tasks, used to cancel them
//!   all at shutdown.
//! - [`shield_enter`] / [`shield_exit`] / [`current_task_id`]: the task being
//!   polled on this thread.
//!
//! The protocols, as numbered steps, the lifecycle diagram and the
//! reference-ownership table are in `README.md` beside this file.
//!
//! # Example
//!
//! A scheduler that keeps runnable tasks in a queue and runs them on the
//! calling thread (`no_run`: under `cfg(loom)` the registry's locks are
//! loom's and work only inside a model; `core/tests/task_cell.rs` runs the
//! same steps):
//!
//! ```no_run
//! use std::collections::VecDeque;
//! use std::sync::{Arc, Mutex};
//! use magpie_core::task::{Notified, OwnedTasks, Schedule};
//!
//! #[derive(Clone)]
//! struct Sched(Arc<Shared>);
//! struct Shared {
//!     queue: Mutex<VecDeque<Notified<Sched>>>,
//!     owned: OwnedTasks<Sched>,
//! }
//!
//! impl Schedule for Sched {
//!     fn schedule(&self, task: Notified<Self>) {
//!         self.0.queue.lock().unwrap().push_back(task);
//!     }
//!     fn owned_tasks(&self) -> &OwnedTasks<Self> {
//!         &self.0.owned
//!     }
//! }
//!
//! let sched = Sched(Arc::new(Shared {
//!     queue: Mutex::new(VecDeque::new()),
//!     owned: OwnedTasks::new(4),
//! }));
//! let (notified, mut join) = sched.0.owned.bind(async { 6 * 7 }, sched.clone());
//! sched.schedule(notified.expect("registry open"));
//! loop {
//!     let next = sched.0.queue.lock().unwrap().pop_front();
//!     match next {
//!         Some(task) => task.run(),
//!         None => break,
//!     }
//! }
//! assert!(join.is_finished());
//! let waker = std::task::Waker::noop();
//! let out = std::pin::Pin::new(&mut join).poll(&mut std::task::Context::from_waker(waker));
//! # use std::future::Future;
//! assert!(matches!(out, std::task::Poll::Ready(Ok(42))));
//! sched.0.owned.close_and_shutdown_all();
//! ```

pub mod state;

mod current;
mod harness;
mod id;
mod join;
mod list;
mod raw;
mod waker;

use core::fmt;
use core::marker::PhantomData;
use core::mem;

pub use current::{current_task_id, shield_enter, shield_exit};
pub use id::TaskId;
pub use join::{AbortHandle, JoinError, JoinHandle};
pub use list::OwnedTasks;
pub use state::{ShieldError, ShieldExit};

use raw::RawTask;

/// Implemented by the runtime: where runnable tasks go.
///
/// The scheduler value is stored in every task it owns and borrowed from
/// there when a waker fires, so it should be small (an `Arc` of the runtime's
/// shared state, typically).
pub trait Schedule: Send + Sync + 'static + Sized {
    /// A task became runnable: it was spawned, woken while idle, or aborted
    /// while idle. The runtime must eventually [`Notified::run`] it, or drop
    /// it (which cancels the task, see [`Notified`]).
    fn schedule(&self, task: Notified<Self>);

    /// The task was woken while it was being polled (its own `yield_now`, or
    /// another thread's wake during the poll): the same as
    /// [`Schedule::schedule`], but the runtime may put it behind other work.
    fn yield_now(&self, task: Notified<Self>) {
        self.schedule(task)
    }

    /// The registry the tasks of this scheduler are bound to. A completing
    /// task unlinks itself from it. It must be the `OwnedTasks` whose
    /// [`OwnedTasks::bind`] created the task; if it is not, the task stays
    /// linked in its real registry (memory-safe, but it is freed only when
    /// that registry is shut down or dropped).
    fn owned_tasks(&self) -> &OwnedTasks<Self>;
}

/// A runnable task: a run-queue entry. It owns exactly one reference to the
/// task and is one pointer wide; the runtime's queues hold these.
///
/// Every `Notified` ends in exactly one of two ways:
///
/// - [`Notified::run`]: poll the task once (or drop its future if it was
///   aborted), then go idle, reschedule or complete.
/// - Drop without running. If the task is still waiting for this entry
///   (SCHEDULED), nothing else would ever poll it, so the drop cancels it on
///   the dropping thread: the future is dropped, the `JoinHandle` resolves to
///   a cancelled [`JoinError`] and its waker is woken. If the shutdown sweep
///   ([`OwnedTasks::close_and_shutdown_all`]) already claimed the task while
///   this entry was queued, the entry is stale and the drop only releases its
///   reference. Dropping runs the future's destructor, so drop entries where
///   that is acceptable (the runtime's shutdown, not inside a waker).
pub struct Notified<S: Schedule> {
    raw: RawTask,
    _scheduler: PhantomData<S>,
}

// SAFETY: a `Notified` lets its holder poll or drop the task's future and use
// its scheduler, from whatever thread it is sent to. `OwnedTasks::bind`, the
// only way to create a task, requires `F: Send` and `F::Output: Send`, and
// `Schedule` requires `S: Send + Sync`, so none of that is tied to a thread.
// The state word (atomic) makes the holder the only poller (task README
// invariant I2).
unsafe impl<S: Schedule> Send for Notified<S> {}

// SAFETY: `&Notified` only reads the task's immutable id.
unsafe impl<S: Schedule> Sync for Notified<S> {}

impl<S: Schedule> Notified<S> {
    /// Wraps a queue entry's reference.
    ///
    /// # Safety
    /// The caller owns one reference to a task of scheduler type `S` and
    /// passes it to the new entry; the task is SCHEDULED for this entry (or
    /// the entry is stale, task README "Shutdown").
    #[inline]
    pub(crate) unsafe fn from_raw(raw: RawTask) -> Self {
        Self {
            raw,
            _scheduler: PhantomData,
        }
    }

    /// Poll the task once (task README, "The poll harness"). A panic in the
    /// poll is caught and becomes the `JoinHandle`'s [`JoinError`]. Outcomes:
    /// `Ready` stores the output, completes the task, wakes the joiner and
    /// unlinks the task from its registry; `Pending` leaves it idle, or hands
    /// it to [`Schedule::yield_now`] if it was woken during the poll; an
    /// aborted task has its future dropped (a panicking `Drop` is caught too)
    /// and completes with a cancelled `JoinError`.
    #[inline]
    pub fn run(self) {
        let raw = self.raw;
        mem::forget(self);
        // SAFETY: `self` owned one reference and the right to run the entry;
        // both pass to the harness (forget above skips `Drop`). The vtable
        // belongs to this task's concrete type.
        unsafe { (raw.vtable().poll)(raw) }
    }

    /// The task's id.
    #[inline]
    pub fn id(&self) -> TaskId {
        self.raw.id()
    }
}

impl<S: Schedule> Drop for Notified<S> {
    fn drop(&mut self) {
        // SAFETY: the entry owns one reference, passed to `drop_notified`.
        unsafe { (self.raw.vtable().drop_notified)(self.raw) }
    }
}

impl<S: Schedule> fmt::Debug for Notified<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Notified")
            .field("id", &self.id())
            .field("state", self.raw.state())
            .finish()
    }
}
