//! The task being polled on this thread: what [`shield_enter`],
//! [`shield_exit`] and [`current_task_id`] act on.
//!
//! The poll harness sets a thread-local pointer to the task around each poll
//! and each drop of the future (`CurrentGuard`), and restores the previous
//! value afterwards, so a task polled from inside another task's poll (a
//! nested executor) is handled. The pointer is valid while it is set: the
//! polling thread holds RUNNING and a reference for the whole time.

use core::cell::Cell;

use super::id::TaskId;
use super::raw::RawTask;
use super::state::{ShieldError, ShieldExit};

#[cfg(not(loom))]
std::thread_local! {
    static CURRENT: Cell<Option<RawTask>> = const { Cell::new(None) };
}

#[cfg(loom)]
loom::thread_local! {
    static CURRENT: Cell<Option<RawTask>> = Cell::new(None);
}

/// Marks `raw` as this thread's current task until dropped.
pub(crate) struct CurrentGuard {
    prev: Option<RawTask>,
    set: bool,
}

impl CurrentGuard {
    #[inline]
    pub(crate) fn enter(raw: RawTask) -> Self {
        // A thread whose thread-locals are being destroyed can still poll a
        // task (from a TLS destructor); it just has no current task.
        match CURRENT.try_with(|c| c.replace(Some(raw))) {
            Ok(prev) => Self { prev, set: true },
            Err(_) => Self {
                prev: None,
                set: false,
            },
        }
    }
}

impl Drop for CurrentGuard {
    #[inline]
    fn drop(&mut self) {
        if self.set {
            let _ = CURRENT.try_with(|c| c.set(self.prev));
        }
    }
}

/// Run `f` on the current task, if this thread is polling one.
fn with_current<R>(f: impl FnOnce(RawTask) -> R) -> Option<R> {
    CURRENT.try_with(|c| c.get()).ok().flatten().map(f)
}

/// Enter a cancellation shield in the task being polled on this thread: until
/// the matching [`shield_exit`], an `abort()` (or a `JoinHandle`'s abort)
/// does not take effect. Shields nest up to 255 deep.
///
/// # Errors
/// [`ShieldError::NotInTask`] if this thread is not polling (or dropping) a
/// task; [`ShieldError::Overflow`] at 255 nested shields (the depth is
/// unchanged: it never carries into the reference count).
pub fn shield_enter() -> Result<(), ShieldError> {
    with_current(|raw| raw.state().shield_enter()).unwrap_or(Err(ShieldError::NotInTask))
}

/// Leave the innermost cancellation shield of the task being polled on this
/// thread. [`ShieldExit::CancelPending`] means this was the last shield and an
/// abort arrived meanwhile: the task should return from its poll soon, and it
/// completes as cancelled when it does (unless it returns `Ready`).
///
/// # Errors
/// [`ShieldError::NotInTask`] outside a task; [`ShieldError::Underflow`] if no
/// shield is open.
pub fn shield_exit() -> Result<ShieldExit, ShieldError> {
    with_current(|raw| raw.state().shield_exit()).unwrap_or(Err(ShieldError::NotInTask))
}

/// The id of the task being polled (or dropped) on this thread, if any.
pub fn current_task_id() -> Option<TaskId> {
    with_current(|raw| raw.id())
}
