//! Which worker, if any, the current thread is.
//!
//! Set by each worker thread at start and cleared when it exits; code that
//! keeps per-worker state outside the scheduler (a buffer pool's fast path,
//! say) routes by it. Threads that are not workers see `None`.

use std::cell::Cell;

// Plain std: the id is per OS thread and takes no part in any loom model.
std::thread_local! {
    static WORKER_ID: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The id of the worker running on this thread, or `None` off the executor.
pub fn current_worker_id() -> Option<usize> {
    WORKER_ID.with(|id| id.get())
}

/// Marks this thread as worker `id` (or as no worker) and returns the old value.
pub(crate) fn set_current_worker_id(id: Option<usize>) -> Option<usize> {
    WORKER_ID.with(|cell| cell.replace(id))
}
