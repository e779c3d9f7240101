//! Live runtime metrics: [`Handle::metrics`](super::Handle::metrics).
//!
//! Each worker keeps its counters in plain fields ([`WorkerMetrics`]) and
//! copies the few that `RuntimeMetrics` reports into its own padded slot of
//! Relaxed atomics: every `TIMER_CHECK_INTERVAL` (61) polls, on every idle
//! round and when it leaves. So a reading is at most 61 polls behind a busy
//! worker and exact for an idle one.

use magpie_core::sync::atomic::{AtomicU64, Ordering};
use magpie_core::CachePadded;

use crate::metrics::WorkerMetrics;

/// A snapshot of a runtime's counters, from [`Handle::metrics`](super::Handle::metrics).
/// The counters are totals since the runtime started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RuntimeMetrics {
    /// Worker threads.
    pub workers: usize,
    /// Tasks spawned and not yet completed (blocking tasks not included).
    pub live_tasks: usize,
    /// Task polls, over all workers.
    pub polls: u64,
    /// Successful steals (attempts that moved at least one task).
    pub steals: u64,
    /// Times a worker went to sleep.
    pub parks: u64,
    /// Tasks waiting in the global (inject) queue.
    pub global_queue_depth: usize,
    /// I/O readiness events that reached a live registration
    /// ([`Handle::io_metrics`](super::Handle::io_metrics) has the driver's
    /// other counters).
    pub io_events: u64,
    /// Threads in the `spawn_blocking` pool, busy or idle.
    pub blocking_threads: usize,
    /// Idle threads in the pool, waiting for work or their keep-alive.
    pub blocking_idle_threads: usize,
    /// `spawn_blocking` closures queued because every pool thread was busy
    /// and the pool was at its maximum.
    pub blocking_queue_depth: usize,
    /// Per worker, by worker id: polls, steals, parks.
    pub per_worker: Vec<WorkerCounters>,
}

/// One worker's share of [`RuntimeMetrics`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerCounters {
    /// Task polls.
    pub polls: u64,
    /// Successful steals.
    pub steals: u64,
    /// Times it went to sleep.
    pub parks: u64,
}

/// The workers' published counters.
pub(super) struct Published {
    slots: Box<[CachePadded<Slot>]>,
}

#[derive(Default)]
struct Slot {
    polls: AtomicU64,
    steals: AtomicU64,
    parks: AtomicU64,
}

impl Published {
    pub(super) fn new(workers: usize) -> Self {
        Self {
            slots: (0..workers)
                .map(|_| CachePadded::new(Slot::default()))
                .collect(),
        }
    }

    /// Worker `id` publishes. Relaxed: each slot has one writer, and a reader
    /// wants recent totals, not a consistent cut across workers.
    #[inline]
    pub(super) fn store(&self, id: usize, m: &WorkerMetrics) {
        let slot = &self.slots[id];
        slot.polls.store(m.tasks_run(), Ordering::Relaxed);
        slot.steals.store(m.steal_successes, Ordering::Relaxed);
        slot.parks.store(m.parks, Ordering::Relaxed);
    }

    pub(super) fn read(&self) -> Vec<WorkerCounters> {
        self.slots
            .iter()
            .map(|s| WorkerCounters {
                polls: s.polls.load(Ordering::Relaxed),
                steals: s.steals.load(Ordering::Relaxed),
                parks: s.parks.load(Ordering::Relaxed),
            })
            .collect()
    }
}

impl super::Handle {
    /// The runtime's counters now. Cheap enough to call often: one pass over
    /// the workers' slots and the task registry's shard lengths.
    pub fn metrics(&self) -> RuntimeMetrics {
        let inner = &self.inner;
        let per_worker = inner.ext.published().read();
        let (blocking_threads, blocking_idle_threads, blocking_queue_depth) =
            inner.ext.blocking.counts();
        RuntimeMetrics {
            workers: inner.sched.workers,
            live_tasks: inner.owned.len(),
            polls: per_worker.iter().map(|w| w.polls).sum(),
            steals: per_worker.iter().map(|w| w.steals).sum(),
            parks: per_worker.iter().map(|w| w.parks).sum(),
            global_queue_depth: inner.sched.inject.len(),
            io_events: self.io_metrics().events,
            blocking_threads,
            blocking_idle_threads,
            blocking_queue_depth,
            per_worker,
        }
    }
}
