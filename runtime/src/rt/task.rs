//! Task-level API in tokio's layout (`tokio::task`): spawning, blocking
//! work, sets of tasks, local (`!Send`) tasks and the current task's id.

pub use super::blocking::{block_in_place, spawn_blocking};
pub use super::join_set::JoinSet;
pub use super::local::{spawn_local, LocalEnterGuard, LocalJoinHandle, LocalSet, RunUntil};
pub use super::{spawn, yield_now, AbortHandle, JoinError, JoinHandle, TaskId, YieldNow};

/// The id of the task being polled on this thread (tokio's `task::id`).
///
/// # Panics
/// Outside a task (in `block_on`'s own future, say, or on a thread that is
/// not polling a task). [`try_id`] does not panic.
#[track_caller]
pub fn id() -> TaskId {
    try_id().expect(
        "magpie_runtime::task::id() called outside a task (it is not polling a spawned task)",
    )
}

/// The id of the task being polled on this thread, if any.
pub fn try_id() -> Option<TaskId> {
    // A local task runs inside the poll of the task that runs its set: its
    // own id first.
    super::local::current_local_task_id().or_else(magpie_core::task::current_task_id)
}
