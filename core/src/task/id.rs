//! Task ids: unique per process, cheap to hand out.

use core::fmt;
use core::num::NonZeroU64;

/// A task's id, unique among all tasks of the process (ids are never
/// reused). Obtained from [`JoinHandle::id`](super::JoinHandle::id),
/// [`Notified::id`](super::Notified::id) or
/// [`current_task_id`](super::current_task_id).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId(NonZeroU64);

impl TaskId {
    /// The id as a number (never 0).
    #[inline]
    pub fn as_u64(self) -> u64 {
        self.0.get()
    }

    /// A fresh id.
    #[inline]
    pub(crate) fn next() -> TaskId {
        TaskId(imp::next())
    }

    /// A fresh id, unique among every task's, for a task a runtime keeps
    /// outside magpie-core's task cells (magpie-runtime's `!Send` local
    /// tasks), so that its [`JoinError`](super::JoinError)s and
    /// `task::id()` name it as tokio's do.
    #[inline]
    pub fn fresh() -> TaskId {
        Self::next()
    }
}

impl fmt::Debug for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TaskId({})", self.0)
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

#[cfg(not(loom))]
mod imp {
    use core::cell::Cell;
    use core::num::NonZeroU64;

    use crate::sync::atomic::{AtomicU64, Ordering};

    /// Ids are handed to threads in blocks of this many, so a thread spawning
    /// many tasks touches the shared counter once per block instead of once
    /// per task (the counter's cache line would bounce between spawners).
    pub(super) const BLOCK: u64 = 1024;

    /// The first id of the next unclaimed block. Starts at 1: ids are never 0.
    static NEXT_BLOCK: AtomicU64 = AtomicU64::new(1);

    std::thread_local! {
        /// This thread's block: (next id, end of the block).
        static LOCAL: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    }

    fn claim_block() -> u64 {
        // Relaxed: only uniqueness matters (each fetch_add returns a distinct
        // value); the ids publish nothing.
        let first = NEXT_BLOCK.fetch_add(BLOCK, Ordering::Relaxed);
        // 2^64 / 1024 blocks: at a billion blocks per second, 570 years.
        assert!(first < u64::MAX - BLOCK, "task ids exhausted");
        first
    }

    pub(super) fn next() -> NonZeroU64 {
        let id = LOCAL
            .try_with(|local| {
                let (mut next, mut end) = local.get();
                if next == end {
                    next = claim_block();
                    end = next + BLOCK;
                }
                local.set((next + 1, end));
                next
            })
            // Thread-locals already destroyed (a spawn from a TLS
            // destructor): use a block of its own for this one id.
            .unwrap_or_else(|_| claim_block());
        NonZeroU64::new(id).expect("ids start at 1")
    }
}

#[cfg(loom)]
mod imp {
    use core::cell::Cell;
    use core::num::NonZeroU64;

    // Under loom a shared atomic counter would add a branch point to every
    // spawn in every model. Loom runs all threads of a model on the test's OS
    // thread, so a plain std thread-local counter is unique within a model;
    // nothing in the models depends on ids beyond that (they pick the
    // registry shard and are compared in tests).
    std::thread_local! {
        static NEXT: Cell<u64> = const { Cell::new(1) };
    }

    pub(super) fn next() -> NonZeroU64 {
        let id = NEXT.with(|n| {
            let id = n.get();
            n.set(id + 1);
            id
        });
        NonZeroU64::new(id).expect("ids start at 1")
    }
}
