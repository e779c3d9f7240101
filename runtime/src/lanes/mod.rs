//! # Lanes: how a component graph's ready invocations run (seed 004)
//!
//! A [`Graph`] of [`Component`]s joined by typed edges runs in epochs. Each
//! epoch walks the compiled regions in topological order (independent
//! regions by their highest [`Priority`]); each ready invocation runs on its
//! component's lane; what it publishes is staged and committed at its
//! region's barrier, so it is visible downstream only after that.
//!
//! - `event_loop`: in process, on the runner's thread, in region order.
//! - `fixed_rate`: ticks on a period, simulated by default (reproducible,
//!   no sleeping) or on the [`LaneRuntime`]'s timer (`wall_clock_enabled`), with the
//!   overrun policies of [`crate::time::Interval`] (shared code).
//! - `thread_pool`: a [`PoolLane`] on a [`LaneRuntime`]'s workers (magpie's
//!   worker loop, `crate::sched`, with a lane runner as its task): at most
//!   `max_threads` in flight, a bounded priority queue with overflow
//!   policies, reentrancy limits and starvation aging.
//!
//! Build a graph in code with [`GraphBuilder`] or load one with
//! [`load_toml`] or [`load_yaml`] ([`load_file`] picks by extension); run it with [`run`]. `lanes/README.md` has the design.

mod graph;
mod host;
mod load;
mod metrics;
mod pool;
mod run;
mod spec;
mod stop;
mod tracelog;

pub use graph::{
    Cancelled, Component, ComponentError, ComponentId, Direction, Factory, Graph, GraphBuilder,
    GraphContext, Input, Invocation, Output, PortDecl,
};
pub use host::{LaneRuntime, LaneRuntimeBuilder, LANE_PARK_TIMEOUT};
pub use load::{load_file, load_toml, load_yaml, Registry};
pub use metrics::{SchedulerMetrics, METRIC_NAMES};
pub use pool::{
    Admission, Dispatch, DropReason, Job, LaneJob, PoolLane, PoolStats, RunFn, Then, Work,
};
pub use run::{run, ClockMode, RunError, RunErrorKind, RunOptions, RunResult, StopReason};
pub use spec::{
    AdvisoryFields, Diagnostic, Execution, FixedRateSpec, LaneKind, LaneSpec, OverflowPolicy,
    Priority, SpecError, ThreadPoolSpec, ADVISORY_LANE_FIELD_IGNORED, DEFAULT_AGING_STEP,
    LANE_PLACEMENT_NOT_APPLIED,
};
pub use stop::StopToken;
pub use tracelog::{
    Args, Record, Trace, DEFAULT_MAX_TRACE_RECORDS, MAX_ARGS, RUNNER_TID, TRACE_EVENT_NAMES,
};
