//! The `runtime.scheduler.*` metrics (seed 004, "Metrics And Trace").

use super::pool::PoolStats;
use super::run::ns_to_ms;

/// Seed 004's scheduler metrics of a run (or of one lane). Counts are
/// totals, `max_*`/depth/width values are maxima over the run, durations are
/// milliseconds (virtual in simulated runs). Read them by field or by their
/// seed name with [`get`](Self::get).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SchedulerMetrics {
    /// `runtime.scheduler.tick_count`: fixed-rate ticks released.
    pub tick_count: u64,
    /// `runtime.scheduler.completed_count`: invocations that ran.
    pub completed_count: u64,
    /// `runtime.scheduler.tick_overrun_count`: ticks whose execution
    /// exceeded the tick budget (`tick_budget_ms`, default the period).
    pub tick_overrun_count: u64,
    /// `runtime.scheduler.skipped_tick_count`: grid ticks the overrun policy
    /// skipped.
    pub skipped_tick_count: u64,
    /// `runtime.scheduler.late_tick_count` (magpie's addition): ticks
    /// released a full period or more after their grid instant (what
    /// `time::IntervalStats::overruns` counts).
    pub late_tick_count: u64,
    /// `runtime.scheduler.max_lateness_ms`: the latest tick release against
    /// its grid instant.
    pub max_lateness_ms: f64,
    /// `runtime.scheduler.tick_jitter_ms`: the largest difference between
    /// the spacing of two consecutive tick releases and the spacing of
    /// their grid instants.
    pub tick_jitter_ms: f64,
    /// `runtime.scheduler.queue_depth`: the most invocations waiting in a
    /// thread-pool queue.
    pub queue_depth: u64,
    /// `runtime.scheduler.queue_capacity`: the configured capacity
    /// (infinite when unbounded; 0 without thread-pool lanes).
    pub queue_capacity: f64,
    /// `runtime.scheduler.worker_count`: thread-pool width (`max_threads`).
    pub worker_count: u64,
    /// `runtime.scheduler.last_callback_duration_ms`: the last invocation's
    /// duration.
    pub last_callback_duration_ms: f64,
    /// `runtime.scheduler.blocked_duration_ms`: time the runner waited for
    /// ticks and at thread-pool barriers.
    pub blocked_duration_ms: f64,
    /// `runtime.scheduler.active_count`: the most invocations running at
    /// once on a thread-pool lane.
    pub active_count: u64,
    /// `runtime.scheduler.in_flight_count`: the most admitted, unfinished
    /// invocations (waiting + running) of a thread-pool lane.
    pub in_flight_count: u64,
    /// `runtime.scheduler.rejected_count`: invocations refused or evicted.
    pub rejected_count: u64,
    /// `runtime.scheduler.priority_high_count`: completed `high` invocations.
    pub priority_high_count: u64,
    /// `runtime.scheduler.priority_normal_count`.
    pub priority_normal_count: u64,
    /// `runtime.scheduler.priority_low_count`.
    pub priority_low_count: u64,
    /// `runtime.scheduler.priority_background_count`.
    pub priority_background_count: u64,
    /// `runtime.scheduler.low_priority_rejected_count`: rejected `low` and
    /// `background` invocations.
    pub low_priority_rejected_count: u64,
    /// `runtime.scheduler.starvation_guard_count`: dispatches where aging
    /// ran an invocation ahead of one of a better class.
    pub starvation_guard_count: u64,
    /// `runtime.scheduler.trace_dropped_count` (magpie's addition): trace
    /// records the run dropped because its trace reached
    /// `RunOptions::max_trace_records` (run-wide; 0 per lane).
    pub trace_dropped_count: u64,
}

/// Every metric name, in the seed's order (plus `late_tick_count` and
/// `trace_dropped_count`).
pub const METRIC_NAMES: &[&str] = &[
    "runtime.scheduler.tick_count",
    "runtime.scheduler.completed_count",
    "runtime.scheduler.tick_overrun_count",
    "runtime.scheduler.skipped_tick_count",
    "runtime.scheduler.max_lateness_ms",
    "runtime.scheduler.queue_depth",
    "runtime.scheduler.queue_capacity",
    "runtime.scheduler.worker_count",
    "runtime.scheduler.last_callback_duration_ms",
    "runtime.scheduler.blocked_duration_ms",
    "runtime.scheduler.tick_jitter_ms",
    "runtime.scheduler.active_count",
    "runtime.scheduler.in_flight_count",
    "runtime.scheduler.rejected_count",
    "runtime.scheduler.priority_high_count",
    "runtime.scheduler.priority_normal_count",
    "runtime.scheduler.priority_low_count",
    "runtime.scheduler.priority_background_count",
    "runtime.scheduler.low_priority_rejected_count",
    "runtime.scheduler.starvation_guard_count",
    "runtime.scheduler.late_tick_count",
    "runtime.scheduler.trace_dropped_count",
];

impl SchedulerMetrics {
    /// The metric called `name` (`runtime.scheduler.*`), as a number.
    pub fn get(&self, name: &str) -> Option<f64> {
        let short = name.strip_prefix("runtime.scheduler.")?;
        let v = match short {
            "tick_count" => self.tick_count as f64,
            "completed_count" => self.completed_count as f64,
            "tick_overrun_count" => self.tick_overrun_count as f64,
            "skipped_tick_count" => self.skipped_tick_count as f64,
            "late_tick_count" => self.late_tick_count as f64,
            "max_lateness_ms" => self.max_lateness_ms,
            "queue_depth" => self.queue_depth as f64,
            "queue_capacity" => self.queue_capacity,
            "worker_count" => self.worker_count as f64,
            "last_callback_duration_ms" => self.last_callback_duration_ms,
            "blocked_duration_ms" => self.blocked_duration_ms,
            "tick_jitter_ms" => self.tick_jitter_ms,
            "active_count" => self.active_count as f64,
            "in_flight_count" => self.in_flight_count as f64,
            "rejected_count" => self.rejected_count as f64,
            "priority_high_count" => self.priority_high_count as f64,
            "priority_normal_count" => self.priority_normal_count as f64,
            "priority_low_count" => self.priority_low_count as f64,
            "priority_background_count" => self.priority_background_count as f64,
            "low_priority_rejected_count" => self.low_priority_rejected_count as f64,
            "starvation_guard_count" => self.starvation_guard_count as f64,
            "trace_dropped_count" => self.trace_dropped_count as f64,
            _ => return None,
        };
        Some(v)
    }

    /// `(name, value)` of every metric.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, f64)> + '_ {
        METRIC_NAMES
            .iter()
            .map(|&n| (n, self.get(n).unwrap_or_default()))
    }

    /// Adds `other` (a lane's) into `self` (the run's): counts add up,
    /// maxima take the larger.
    pub(crate) fn merge(&mut self, o: &SchedulerMetrics) {
        self.tick_count += o.tick_count;
        self.completed_count += o.completed_count;
        self.tick_overrun_count += o.tick_overrun_count;
        self.skipped_tick_count += o.skipped_tick_count;
        self.late_tick_count += o.late_tick_count;
        self.max_lateness_ms = self.max_lateness_ms.max(o.max_lateness_ms);
        self.tick_jitter_ms = self.tick_jitter_ms.max(o.tick_jitter_ms);
        self.queue_depth = self.queue_depth.max(o.queue_depth);
        self.queue_capacity = self.queue_capacity.max(o.queue_capacity);
        self.worker_count = self.worker_count.max(o.worker_count);
        self.active_count = self.active_count.max(o.active_count);
        self.in_flight_count = self.in_flight_count.max(o.in_flight_count);
        self.rejected_count += o.rejected_count;
        self.priority_high_count += o.priority_high_count;
        self.priority_normal_count += o.priority_normal_count;
        self.priority_low_count += o.priority_low_count;
        self.priority_background_count += o.priority_background_count;
        self.low_priority_rejected_count += o.low_priority_rejected_count;
        self.starvation_guard_count += o.starvation_guard_count;
    }
}

/// What the runner counts per lane.
#[derive(Clone, Debug, Default)]
pub(crate) struct LaneAcc {
    pub(crate) ticks: u64,
    pub(crate) overruns: u64,
    pub(crate) late_ticks: u64,
    pub(crate) skipped_ticks: u64,
    pub(crate) max_lateness_ns: u64,
    pub(crate) max_jitter_ns: u64,
    pub(crate) completed: u64,
    pub(crate) by_priority: [u64; 4],
}

impl LaneAcc {
    pub(crate) fn to_metrics(&self, pool: Option<&PoolStats>) -> SchedulerMetrics {
        let mut m = SchedulerMetrics {
            tick_count: self.ticks,
            completed_count: self.completed,
            tick_overrun_count: self.overruns,
            skipped_tick_count: self.skipped_ticks,
            late_tick_count: self.late_ticks,
            max_lateness_ms: ns_to_ms(self.max_lateness_ns),
            tick_jitter_ms: ns_to_ms(self.max_jitter_ns),
            priority_high_count: self.by_priority[0],
            priority_normal_count: self.by_priority[1],
            priority_low_count: self.by_priority[2],
            priority_background_count: self.by_priority[3],
            ..SchedulerMetrics::default()
        };
        if let Some(p) = pool {
            m.queue_depth = p.max_queue_depth;
            m.queue_capacity = p.queue_capacity.map_or(f64::INFINITY, |c| c as f64);
            m.worker_count = p.worker_count;
            m.active_count = p.max_active;
            m.in_flight_count = p.max_in_flight;
            m.rejected_count = p.rejected;
            m.low_priority_rejected_count = p.low_priority_rejected;
            m.starvation_guard_count = p.starvation_guard;
        }
        m
    }
}
