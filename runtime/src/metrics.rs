//! Per-worker scheduler metrics, merged by [`Executor::join`](crate::Executor::join).
//!
//! Each worker owns its [`WorkerMetrics`] and bumps plain integers: no atomics,
//! no shared cache lines. `join` collects them from the exited threads and
//! returns a [`MetricsSnapshot`] holding the sum and the per-worker values.

use std::fmt;

/// Counters kept by one worker. Plain fields: only that worker writes them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerMetrics {
    /// Tasks run from the worker's LIFO slot.
    pub tasks_lifo: u64,
    /// Tasks run from the worker's local queue: its ring, or in the split
    /// mode its private stack too.
    pub tasks_local: u64,
    /// Tasks run straight from the global inject queue (the first of a batch).
    pub tasks_global: u64,
    /// Tasks run straight from a steal (the one `steal_into` returned).
    pub tasks_steal: u64,
    /// Steal attempts (one per victim tried).
    pub steal_attempts: u64,
    /// Steal attempts that moved at least one task.
    pub steal_successes: u64,
    /// Tasks moved by successful steals, the returned one included.
    pub tasks_stolen: u64,
    /// Batch fetches from the global queue that returned work.
    pub global_batches: u64,
    /// Tasks taken from the global queue by those fetches.
    pub global_tasks: u64,
    /// Times the local ring overflowed into the global queue.
    pub overflows: u64,
    /// Tasks moved to the global queue by overflows.
    pub overflow_tasks: u64,
    /// Split local queue: requests this worker raised on a victim whose ring
    /// it found empty.
    pub share_requests: u64,
    /// Split local queue: requests this worker answered by moving tasks from
    /// its private stack into its ring.
    pub shares: u64,
    /// Tasks those answers moved.
    pub tasks_shared: u64,
    /// Times the worker parked.
    pub parks: u64,
    /// Parked workers this worker woke (notifications that found a sleeper).
    pub unparks: u64,
    /// Futex returns that found no notification (absorbed by the parker).
    pub spurious_wakeups: u64,
    /// Wakes after which the worker found no work and parked again.
    pub idle_wakeups: u64,
    /// Wake-on-hoard events: a sibling woken after 32 local spawns.
    pub wake_on_hoard: u64,
    /// Tasks whose runner panicked.
    pub panics: u64,
}

impl WorkerMetrics {
    /// Every task the worker ran, whatever its source.
    pub fn tasks_run(&self) -> u64 {
        self.tasks_lifo + self.tasks_local + self.tasks_global + self.tasks_steal
    }

    /// Adds `other` into `self`, field by field.
    pub fn merge(&mut self, other: &WorkerMetrics) {
        let WorkerMetrics {
            tasks_lifo,
            tasks_local,
            tasks_global,
            tasks_steal,
            steal_attempts,
            steal_successes,
            tasks_stolen,
            global_batches,
            global_tasks,
            overflows,
            overflow_tasks,
            share_requests,
            shares,
            tasks_shared,
            parks,
            unparks,
            spurious_wakeups,
            idle_wakeups,
            wake_on_hoard,
            panics,
        } = other;
        self.tasks_lifo += tasks_lifo;
        self.tasks_local += tasks_local;
        self.tasks_global += tasks_global;
        self.tasks_steal += tasks_steal;
        self.steal_attempts += steal_attempts;
        self.steal_successes += steal_successes;
        self.tasks_stolen += tasks_stolen;
        self.global_batches += global_batches;
        self.global_tasks += global_tasks;
        self.overflows += overflows;
        self.overflow_tasks += overflow_tasks;
        self.share_requests += share_requests;
        self.shares += shares;
        self.tasks_shared += tasks_shared;
        self.parks += parks;
        self.unparks += unparks;
        self.spurious_wakeups += spurious_wakeups;
        self.idle_wakeups += idle_wakeups;
        self.wake_on_hoard += wake_on_hoard;
        self.panics += panics;
    }
}

/// What [`Executor::join`](crate::Executor::join) returns: the total and each worker's share.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    /// The sum over all workers.
    pub total: WorkerMetrics,
    /// One entry per worker, by worker id.
    pub per_worker: Vec<WorkerMetrics>,
}

impl MetricsSnapshot {
    pub(crate) fn from_workers(per_worker: Vec<WorkerMetrics>) -> Self {
        let mut total = WorkerMetrics::default();
        for w in &per_worker {
            total.merge(w);
        }
        Self { total, per_worker }
    }

    /// Every task run by every worker.
    pub fn tasks_run(&self) -> u64 {
        self.total.tasks_run()
    }
}

impl fmt::Display for MetricsSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.total;
        writeln!(
            f,
            "tasks run: {} (lifo {}, local {}, global {}, steal {})",
            t.tasks_run(),
            t.tasks_lifo,
            t.tasks_local,
            t.tasks_global,
            t.tasks_steal
        )?;
        writeln!(
            f,
            "steals: {} of {} attempts succeeded, {} tasks moved",
            t.steal_successes, t.steal_attempts, t.tasks_stolen
        )?;
        writeln!(
            f,
            "global: {} batches, {} tasks; overflows: {} ({} tasks)",
            t.global_batches, t.global_tasks, t.overflows, t.overflow_tasks
        )?;
        writeln!(
            f,
            "shares: {} requested, {} answered, {} tasks moved",
            t.share_requests, t.shares, t.tasks_shared
        )?;
        writeln!(
            f,
            "parks: {}, unparks: {}, spurious wakeups: {}, idle wakeups: {}, wake-on-hoard: {}",
            t.parks, t.unparks, t.spurious_wakeups, t.idle_wakeups, t.wake_on_hoard
        )?;
        write!(f, "panics: {}", t.panics)?;
        for (i, w) in self.per_worker.iter().enumerate() {
            write!(f, "\n  worker {i}: {} tasks", w.tasks_run())?;
        }
        Ok(())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn snapshot_total_is_the_sum_of_workers() {
        let a = WorkerMetrics {
            tasks_lifo: 1,
            tasks_local: 2,
            steal_attempts: 5,
            panics: 1,
            ..Default::default()
        };
        let b = WorkerMetrics {
            tasks_global: 3,
            tasks_steal: 4,
            steal_attempts: 6,
            ..Default::default()
        };
        let snap = MetricsSnapshot::from_workers(vec![a, b]);
        assert_eq!(snap.tasks_run(), 10);
        assert_eq!(snap.total.steal_attempts, 11);
        assert_eq!(snap.total.panics, 1);
        assert_eq!(snap.per_worker.len(), 2);
    }
}
