//! The runner: epochs of compiled regions, each invocation run by its lane,
//! publications committed at region barriers; fixed-rate ticks; stop, drain
//! and cleanup; metrics and trace.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::{pin, Pin};
use std::sync::{Arc, Condvar, Mutex, PoisonError, TryLockError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::graph::{
    ComponentError, Graph, GraphContext, InvClock, Invocation, PortDecl, Replica, Value,
    CANCELLED_MESSAGE,
};
use super::host::{self, LaneRuntime};
use super::metrics::{LaneAcc, SchedulerMetrics};
use super::pool::{Dispatch, DropReason, LaneJob, PoolLane, Work};
use super::spec::{
    Diagnostic, FixedRateSpec, LaneKind, LaneSpec, Priority, ThreadPoolSpec,
    LANE_PLACEMENT_NOT_APPLIED,
};
use super::stop::StopToken;
use super::tracelog::{InvMarks, Key, Record, Trace, DEFAULT_MAX_TRACE_RECORDS, RUNNER_TID};
use crate::time;

/// Which clock a run uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClockMode {
    /// Simulated when the graph has fixed-rate lanes and none has
    /// `wall_clock_enabled`; real otherwise.
    #[default]
    Auto,
    /// Virtual time: it moves only to the next tick and by the costs that
    /// components declare with [`GraphContext::simulate_work`]. Runs are
    /// reproducible to the nanosecond.
    Simulated,
    /// Real time.
    Real,
}

/// How to run a graph.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Stop after this many epochs (`None`: until the fixed-rate lanes'
    /// `max_ticks` run out, or the stop).
    pub max_iterations: Option<u64>,
    /// Checked before every epoch and during wall-clock sleeps.
    pub stop: StopToken,
    /// The clock.
    pub clock: ClockMode,
    /// Record the trace (default on). Off, no trace event is built at all.
    pub trace: bool,
    /// The most trace records the run keeps (default
    /// [`DEFAULT_MAX_TRACE_RECORDS`]); past it the oldest are dropped a
    /// chunk at a time and counted (`Trace::dropped`,
    /// `runtime.scheduler.trace_dropped_count`).
    pub max_trace_records: usize,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            max_iterations: None,
            stop: StopToken::default(),
            clock: ClockMode::default(),
            trace: true,
            max_trace_records: DEFAULT_MAX_TRACE_RECORDS,
        }
    }
}

/// Why a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The stop token was triggered (`stop_requested`).
    StopRequested,
    /// A component failed or panicked, or an overflow was `fail_fast`
    /// (`error`).
    Error,
    /// The iteration or tick bound was reached (`completed`).
    Completed,
}

impl StopReason {
    /// `stop_requested`, `error` or `completed`.
    pub fn name(self) -> &'static str {
        match self {
            StopReason::StopRequested => "stop_requested",
            StopReason::Error => "error",
            StopReason::Completed => "completed",
        }
    }
}

/// What failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunErrorKind {
    /// `execute` returned an error.
    Failed(String),
    /// `execute` panicked; the payload's message.
    Panicked(String),
    /// `activate` returned an error.
    ActivateFailed(String),
    /// A thread-pool lane with `overflow = fail_fast` was full.
    QueueFull {
        /// The lane.
        lane: String,
    },
}

/// The structured error of a run that stopped with [`StopReason::Error`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunError {
    /// The component, if one failed.
    pub component: Option<String>,
    /// The epoch (0: during activation).
    pub epoch: u64,
    /// What happened.
    pub kind: RunErrorKind,
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let who = self.component.as_deref().unwrap_or("the runner");
        match &self.kind {
            RunErrorKind::Failed(m) => write!(f, "epoch {}: `{who}` failed: {m}", self.epoch),
            RunErrorKind::Panicked(m) => write!(f, "epoch {}: `{who}` panicked: {m}", self.epoch),
            RunErrorKind::ActivateFailed(m) => write!(f, "`{who}` failed to activate: {m}"),
            RunErrorKind::QueueFull { lane } => write!(
                f,
                "epoch {}: lane `{lane}` was full and its overflow is fail_fast",
                self.epoch
            ),
        }
    }
}

impl std::error::Error for RunError {}

/// Everything a run reports.
#[derive(Debug)]
pub struct RunResult {
    /// Why it ended.
    pub stop_reason: StopReason,
    /// The first error, if it ended with one.
    pub error: Option<RunError>,
    /// Epochs started.
    pub epochs: u64,
    /// The `runtime.scheduler.*` metrics over all lanes.
    pub metrics: SchedulerMetrics,
    /// The same metrics per lane.
    pub lane_metrics: BTreeMap<String, SchedulerMetrics>,
    /// The trace.
    pub trace: Trace,
    /// The graph's advisory diagnostics.
    pub diagnostics: Vec<Diagnostic>,
    /// Components activated, in startup order.
    pub activated: Vec<String>,
    /// Components deactivated, in the order it happened (the reverse).
    pub deactivated: Vec<String>,
}

/// Runs `graph` on `rt` until it completes, fails or is stopped, then drains
/// and deactivates. Thread-pool invocations run on `rt`'s workers; the rest
/// runs on the calling thread, which must not be one of `rt`'s workers.
/// Wall-clock fixed-rate lanes sleep on `rt`'s timer wheel.
pub fn run(graph: Graph, rt: &LaneRuntime, opts: RunOptions) -> RunResult {
    Runner::new(graph, rt, opts).run()
}

enum LaneRun {
    EventLoop,
    FixedRate(FixedRate),
    Pool(PoolLane<PoolInv>),
}

struct FixedRate {
    spec: FixedRateSpec,
    /// When the next tick is scheduled (ns since the run's origin).
    next_ns: u64,
    ticks: u64,
    /// The tick being run this epoch: (number, scheduled, released).
    current: Option<(u64, u64, u64)>,
    /// The previous tick's (scheduled, released), for the jitter.
    previous: Option<(u64, u64)>,
}

impl FixedRate {
    fn exhausted(&self) -> bool {
        self.spec.max_ticks.is_some_and(|m| self.ticks >= m)
    }
}

enum Clock {
    Real(Instant),
    Virtual(u64),
}

/// One invocation's result, from whichever thread ran it.
struct Outcome {
    component: usize,
    index: usize,
    staged: Vec<(usize, Value)>,
    /// What the invocation traced (`None` with tracing off, or dropped).
    traced: Option<InvTrace>,
    result: Result<(), RunErrorKind>,
    sim_cost: Duration,
    dur_ns: u64,
    priority: Priority,
    worker_id: Option<usize>,
    dropped: Option<DropReason>,
}

/// An invocation's trace events, kept inline until the runner records them
/// (so the thread that ran it allocates nothing for its trace).
#[derive(Clone, Copy, Debug)]
struct InvTrace {
    tid: u64,
    begin: u64,
    end: u64,
    marks: InvMarks,
    /// The stop was requested while it ran.
    cancel_requested: bool,
    tick: Option<u64>,
}

/// An invocation's staged publications: (output port, value).
type Staged = Vec<(usize, Value)>;

/// A region whose pool work was submitted and not yet committed.
struct Pending {
    pos: usize,
    batch: Arc<Batch>,
    submitted_ns: u64,
    lanes: Vec<usize>,
}

struct Batch {
    state: Mutex<(usize, Vec<Outcome>)>,
    done: Condvar,
}

impl Batch {
    fn push(&self, outcome: Outcome) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.0 -= 1;
        s.1.push(outcome);
        if s.0 == 0 {
            self.done.notify_all();
        }
    }

    fn wait(&self) -> Vec<Outcome> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while s.0 > 0 {
            s = self.done.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
        std::mem::take(&mut s.1)
    }
}

/// One invocation on a thread-pool lane: the lane's work, held in its
/// queues as plain data (no closure, no box). What it hands on after the
/// lane's bookkeeping is its outcome, for its region's barrier.
struct PoolInv {
    inv: Invocation,
    ctx: GraphContext,
    replicas: Arc<[Replica]>,
    batch: Arc<Batch>,
}

impl Work for PoolInv {
    type Done = (Arc<Batch>, Outcome);

    fn run(self, dispatch: Dispatch) -> (Arc<Batch>, Outcome) {
        let PoolInv {
            mut inv,
            mut ctx,
            replicas,
            batch,
        } = self;
        let outcome = match dispatch {
            Dispatch::Run { worker_id } => {
                inv.worker_id = worker_id;
                ctx.tid = worker_id.map_or(RUNNER_TID, |w| w as u64);
                if let InvClock::Real { start, .. } = &mut ctx.clock {
                    *start = Instant::now();
                }
                execute(&replicas, inv, ctx)
            }
            Dispatch::Dropped(why) => Outcome {
                component: inv.component,
                index: inv.index,
                staged: Vec::new(),
                traced: None,
                result: Ok(()),
                sim_cost: Duration::ZERO,
                dur_ns: 0,
                priority: inv.priority,
                worker_id: None,
                dropped: Some(why),
            },
        };
        (batch, outcome)
    }

    /// Delivered once the lane has freed the slot.
    fn then((batch, outcome): (Arc<Batch>, Outcome)) {
        batch.push(outcome);
    }
}

struct Runner<'a> {
    graph: Graph,
    rt: &'a LaneRuntime,
    opts: RunOptions,
    clock: Clock,
    replicas: Vec<Arc<[Replica]>>,
    /// Per component, per input port: values committed, not yet consumed.
    mailboxes: Vec<Vec<Vec<Value>>>,
    /// Per component, per output port: the (component, input port) it feeds.
    routes: Vec<Vec<Vec<(usize, usize)>>>,
    /// Whether any edge feeds the component.
    fed: Vec<bool>,
    lanes: Vec<LaneRun>,
    lane_names: Vec<Arc<str>>,
    acc: Vec<LaneAcc>,
    /// Per region number: (component, its staged values) awaiting the barrier.
    staged: BTreeMap<usize, Vec<(usize, Staged)>>,
    blocked_ns: u64,
    last_callback_ns: u64,
    trace: Trace,
    /// The trace name of each set of lanes a region's pool work spanned
    /// (interned once, so a long run's names stay bounded).
    joined_lanes: BTreeMap<Vec<usize>, u32>,
    epoch: u64,
    error: Option<RunError>,
    stop_seen: bool,
    /// `lane_placement_not_applied` diagnostics found while starting lanes.
    placement: Vec<Diagnostic>,
    /// Workers of the thread-pool lanes that name or place their threads;
    /// dropped (joined) after the drain, with the runner.
    _own_runtimes: Vec<LaneRuntime>,
}

impl<'a> Runner<'a> {
    fn new(mut graph: Graph, rt: &'a LaneRuntime, opts: RunOptions) -> Runner<'a> {
        let has_fixed = graph
            .lanes
            .iter()
            .any(|l| matches!(l.kind, LaneKind::FixedRate(_)));
        let wall = graph
            .lanes
            .iter()
            .any(|l| matches!(&l.kind, LaneKind::FixedRate(f) if f.wall_clock));
        let simulated = match opts.clock {
            ClockMode::Auto => has_fixed && !wall,
            ClockMode::Simulated => true,
            ClockMode::Real => false,
        };
        let clock = if simulated {
            Clock::Virtual(0)
        } else {
            Clock::Real(Instant::now())
        };
        let replicas = (0..graph.components.len())
            .map(|c| {
                let n = graph.replicas(c);
                let node = &mut graph.components[c];
                let mut list: Vec<Replica> = Vec::with_capacity(n);
                let first = node.first.take().unwrap_or_else(|| (node.factory)());
                list.push(Arc::new(Mutex::new(first)));
                for _ in 1..n {
                    list.push(Arc::new(Mutex::new((node.factory)())));
                }
                list.into()
            })
            .collect();
        let mailboxes = graph
            .components
            .iter()
            .map(|c| vec![Vec::new(); c.inputs.len()])
            .collect();
        let mut routes: Vec<Vec<Vec<(usize, usize)>>> = graph
            .components
            .iter()
            .map(|c| vec![Vec::new(); c.outputs.len()])
            .collect();
        let mut fed = vec![false; graph.components.len()];
        for &((fc, fp), to) in &graph.edges {
            routes[fc][fp].push(to);
            fed[to.0] = true;
        }
        let mut placement = Vec::new();
        let mut own_runtimes = Vec::new();
        let lanes = graph
            .lanes
            .iter()
            .map(|l| match &l.kind {
                LaneKind::EventLoop => LaneRun::EventLoop,
                LaneKind::FixedRate(spec) => LaneRun::FixedRate(FixedRate {
                    spec: spec.clone(),
                    next_ns: 0,
                    ticks: 0,
                    current: None,
                    previous: None,
                }),
                LaneKind::ThreadPool(spec) => match own_runtime(l, spec, &mut placement) {
                    Some(own) => {
                        let pool = PoolLane::typed(spec, &own);
                        own_runtimes.push(own);
                        LaneRun::Pool(pool)
                    }
                    None => LaneRun::Pool(PoolLane::typed(spec, rt)),
                },
            })
            .collect();
        let acc = graph.lanes.iter().map(|_| LaneAcc::default()).collect();
        let lane_names: Vec<Arc<str>> =
            graph.lanes.iter().map(|l| l.name.as_str().into()).collect();
        // Names the trace refers to by index: component `c` is `c`, lane
        // `l` is `components + l` (`lane_label`).
        let mut trace = Trace::with_max_records(opts.max_trace_records);
        for node in &graph.components {
            trace.intern(Arc::clone(&node.name));
        }
        for name in &lane_names {
            trace.intern(Arc::clone(name));
        }
        Runner {
            graph,
            rt,
            opts,
            clock,
            replicas,
            mailboxes,
            routes,
            fed,
            lanes,
            lane_names,
            acc,
            staged: BTreeMap::new(),
            blocked_ns: 0,
            last_callback_ns: 0,
            trace,
            joined_lanes: BTreeMap::new(),
            epoch: 0,
            error: None,
            stop_seen: false,
            placement,
            _own_runtimes: own_runtimes,
        }
    }

    fn now_ns(&self) -> u64 {
        match self.clock {
            Clock::Real(origin) => origin.elapsed().as_nanos() as u64,
            Clock::Virtual(ns) => ns,
        }
    }

    /// Records what `make` builds, if tracing is on (off, nothing is built).
    fn record(&mut self, make: impl FnOnce() -> Record) {
        if self.opts.trace {
            self.trace.push(make());
        }
    }

    fn run(mut self) -> RunResult {
        // Activate in startup (compiled) order.
        let order: Vec<usize> = self
            .graph
            .regions
            .iter()
            .flat_map(|r| r.components.iter().copied())
            .collect();
        let mut started: Vec<usize> = Vec::new();
        for &c in &order {
            match self.activate(c) {
                Ok(()) => started.push(c),
                Err(kind) => {
                    self.error = Some(RunError {
                        component: Some(self.graph.components[c].name.to_string()),
                        epoch: 0,
                        kind,
                    });
                    break;
                }
            }
        }
        let stop_reason = if self.error.is_some() {
            StopReason::Error
        } else {
            self.epochs()
        };
        // Drain: refuse new pool work; what was admitted has already been
        // waited for at the last barrier, and wait_idle confirms it.
        for lane in &self.lanes {
            if let LaneRun::Pool(pool) = lane {
                pool.close();
                pool.wait_idle();
            }
        }
        // Cleanup: reverse startup order, errors and stops included.
        let mut deactivated = Vec::new();
        for &c in started.iter().rev() {
            for replica in self.replicas[c].iter() {
                let mut comp = replica.lock().unwrap_or_else(PoisonError::into_inner);
                let _ = catch_unwind(AssertUnwindSafe(|| comp.deactivate()));
            }
            deactivated.push(self.graph.components[c].name.to_string());
        }
        let activated = started
            .iter()
            .map(|&c| self.graph.components[c].name.to_string())
            .collect();
        let (metrics, lane_metrics) = self.metrics();
        RunResult {
            stop_reason,
            error: self.error,
            epochs: self.epoch,
            metrics,
            lane_metrics,
            trace: self.trace,
            diagnostics: self
                .graph
                .diagnostics
                .iter()
                .chain(&self.placement)
                .cloned()
                .collect(),
            activated,
            deactivated,
        }
    }

    fn activate(&self, c: usize) -> Result<(), RunErrorKind> {
        for replica in self.replicas[c].iter() {
            let mut comp = replica.lock().unwrap_or_else(PoisonError::into_inner);
            match catch_unwind(AssertUnwindSafe(|| comp.activate())) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(RunErrorKind::ActivateFailed(e.message)),
                Err(p) => return Err(RunErrorKind::Panicked(panic_message(&*p))),
            }
        }
        Ok(())
    }

    /// Notes a stop request the first time the runner sees it.
    fn see_stop(&mut self) -> bool {
        let requested = self.opts.stop.is_requested();
        if requested && !self.stop_seen {
            self.stop_seen = true;
            let (ts, epoch) = (self.now_ns(), self.epoch);
            self.record(|| {
                Record::instant("loop_cancellation_requested", RUNNER_TID, ts)
                    .arg(Key::Epoch, epoch)
            });
        }
        requested
    }

    fn epochs(&mut self) -> StopReason {
        let has_fixed = self
            .lanes
            .iter()
            .any(|l| matches!(l, LaneRun::FixedRate(_)));
        loop {
            // The stop token, before every iteration.
            if self.see_stop() {
                let (ts, epoch) = (self.now_ns(), self.epoch);
                self.record(|| {
                    Record::instant("loop_cancellation_observed", RUNNER_TID, ts)
                        .arg(Key::Epoch, epoch)
                });
                return StopReason::StopRequested;
            }
            if self.opts.max_iterations.is_some_and(|m| self.epoch >= m) {
                return StopReason::Completed;
            }
            if has_fixed {
                let Some(next) = self.next_tick_ns() else {
                    return StopReason::Completed;
                };
                if !self.wait_until(next) {
                    continue; // stopped while waiting: the check above ends it
                }
                self.release_ticks();
            }
            self.epoch += 1;
            let (begin, epoch) = (self.now_ns(), self.epoch);
            self.record(|| {
                Record::instant("scheduler_iteration_begin", RUNNER_TID, begin)
                    .arg(Key::Epoch, epoch)
            });
            self.run_regions();
            self.end_ticks();
            let end = self.now_ns();
            self.record(|| {
                Record::instant("scheduler_iteration_end", RUNNER_TID, end).arg(Key::Epoch, epoch)
            });
            self.record(|| {
                Record::span("scheduler_iteration", RUNNER_TID, begin, end - begin)
                    .arg(Key::Epoch, epoch)
            });
            if self.error.is_some() {
                return StopReason::Error;
            }
        }
    }

    /// The earliest scheduled tick of a fixed-rate lane with ticks left.
    fn next_tick_ns(&self) -> Option<u64> {
        self.lanes
            .iter()
            .filter_map(|l| match l {
                LaneRun::FixedRate(f) if !f.exhausted() => Some(f.next_ns),
                _ => None,
            })
            .min()
    }

    /// Waits until `target` ns: simulated time jumps; real time sleeps on
    /// the runtime's timer (stoppable). False if the stop came first.
    fn wait_until(&mut self, target: u64) -> bool {
        match &mut self.clock {
            Clock::Virtual(now) => {
                if target > *now {
                    self.blocked_ns += target - *now;
                    *now = target;
                }
                true
            }
            Clock::Real(origin) => {
                let deadline = *origin + Duration::from_nanos(target);
                let before = Instant::now();
                let stopped = sleep_until(self.rt, deadline, &self.opts.stop);
                self.blocked_ns += before.elapsed().as_nanos() as u64;
                !stopped
            }
        }
    }

    /// Releases the tick of every fixed-rate lane that is due, choosing its
    /// next tick with the overrun policy `time::Interval` uses.
    fn release_ticks(&mut self) {
        let now = self.now_ns();
        for lane in 0..self.lanes.len() {
            let LaneRun::FixedRate(f) = &mut self.lanes[lane] else {
                continue;
            };
            if f.exhausted() || f.next_ns > now {
                continue;
            }
            let scheduled = f.next_ns;
            let lateness = now - scheduled;
            let period = f.spec.period;
            let plan = f
                .spec
                .overrun_policy
                .plan(Duration::from_nanos(lateness), period);
            f.next_ns =
                scheduled.saturating_add((period.as_nanos() as u64).saturating_mul(plan.steps));
            f.ticks += 1;
            let tick = f.ticks;
            let jitter = f.previous.map(|(ps, pr)| {
                let actual = now as i128 - pr as i128;
                let planned = scheduled as i128 - ps as i128;
                (actual - planned).unsigned_abs() as u64
            });
            f.current = Some((tick, scheduled, now));
            let acc = &mut self.acc[lane];
            acc.ticks += 1;
            acc.late_ticks += u64::from(plan.overrun);
            acc.skipped_ticks += plan.skipped;
            acc.max_lateness_ns = acc.max_lateness_ns.max(lateness);
            if let Some(j) = jitter {
                acc.max_jitter_ns = acc.max_jitter_ns.max(j);
            }
            let policy = f.spec.overrun_policy.name();
            let name = self.lane_label(lane);
            self.record(|| {
                Record::instant("fixed_rate_tick_begin", RUNNER_TID, now)
                    .label(Key::Lane, name)
                    .arg(Key::Tick, tick)
                    .arg(Key::ScheduledNs, scheduled)
                    .arg(Key::LatenessNs, lateness)
            });
            if plan.skipped > 0 {
                self.record(|| {
                    Record::instant("fixed_rate_skipped_tick", RUNNER_TID, now)
                        .label(Key::Lane, name)
                        .arg(Key::Tick, tick)
                        .arg(Key::Skipped, plan.skipped)
                        .text(Key::OverrunPolicy, policy)
                });
            }
        }
    }

    fn end_ticks(&mut self) {
        let now = self.now_ns();
        for lane in 0..self.lanes.len() {
            let LaneRun::FixedRate(f) = &mut self.lanes[lane] else {
                continue;
            };
            let Some((tick, scheduled, released)) = f.current.take() else {
                continue;
            };
            f.previous = Some((scheduled, released));
            let exec = now - released;
            let budget = f.spec.budget().as_nanos() as u64;
            let name = self.lane_label(lane);
            if exec > budget {
                self.acc[lane].overruns += 1;
                self.record(|| {
                    Record::instant("fixed_rate_overrun", RUNNER_TID, now)
                        .label(Key::Lane, name)
                        .arg(Key::Tick, tick)
                        .arg(Key::ExecutionNs, exec)
                        .arg(Key::BudgetNs, budget)
                });
            }
            self.record(|| {
                Record::span("fixed_rate_tick", RUNNER_TID, released, exec)
                    .label(Key::Lane, name)
                    .arg(Key::Tick, tick)
            });
            self.record(|| {
                Record::instant("fixed_rate_tick_end", RUNNER_TID, now)
                    .label(Key::Lane, name)
                    .arg(Key::Tick, tick)
            });
        }
    }

    /// The tick a component's lane runs this epoch: `Some(None)` for lanes
    /// without ticks, `Some(Some((t, lateness_ns)))` for a due fixed-rate
    /// lane, `None` if its fixed-rate lane is not due.
    fn lane_tick(&self, c: usize) -> Option<Option<(u64, u64)>> {
        match &self.lanes[self.graph.components[c].lane] {
            LaneRun::FixedRate(f) => f
                .current
                .map(|(t, scheduled, released)| Some((t, released - scheduled))),
            _ => Some(None),
        }
    }

    fn run_regions(&mut self) {
        let mut pending: Vec<Pending> = Vec::new();
        for pos in 0..self.graph.regions.len() {
            if self.error.is_some() {
                break;
            }
            // Barrier: a region waits for the regions it depends on.
            let index = self.graph.regions[pos].index;
            let (needed, rest): (Vec<Pending>, Vec<Pending>) = pending
                .into_iter()
                .partition(|p| self.graph.ancestors[index][self.graph.regions[p.pos].index]);
            pending = rest;
            for p in needed {
                self.finish_pending(p);
            }
            if self.error.is_some() {
                break;
            }
            if let Some(p) = self.run_region(pos) {
                pending.push(p);
            }
            self.see_stop();
        }
        pending.sort_by_key(|p| p.pos);
        for p in pending {
            self.finish_pending(p);
        }
    }

    /// Runs one region: inline lanes now, pool lanes submitted. Returns the
    /// pool work to wait for, or commits at once if there is none.
    fn run_region(&mut self, pos: usize) -> Option<Pending> {
        let comps = self.graph.regions[pos].components.clone();
        let mut inline_outcomes = Vec::new();
        let mut jobs: BTreeMap<usize, Vec<LaneJob<PoolInv>>> = BTreeMap::new();
        let mut total_jobs = 0usize;
        let batch = Arc::new(Batch {
            state: Mutex::new((0, Vec::new())),
            done: Condvar::new(),
        });
        let submitted_ns = self.now_ns();
        for c in comps {
            let Some(tick_lateness) = self.lane_tick(c) else {
                continue;
            };
            // Seed 004: a stop prevents new worker submissions from the
            // next stop check on (work already admitted still drains).
            let on_pool = matches!(self.lanes[self.graph.components[c].lane], LaneRun::Pool(_));
            if on_pool && self.stop_seen {
                continue;
            }
            let node = &self.graph.components[c];
            // Trigger readiness: a component fed by no edge is a source and
            // is ready every epoch; any other is ready when a value arrived.
            let triggered = !self.fed[c] || self.mailboxes[c].iter().any(|m| !m.is_empty());
            if !triggered {
                continue;
            }
            let inputs: Arc<[(PortDecl, Vec<Value>)]> = node
                .inputs
                .iter()
                .zip(self.mailboxes[c].iter_mut())
                .map(|(d, m)| (*d, std::mem::take(m)))
                .collect();
            let count = node.exec.invocations;
            let lane = node.lane;
            for index in 0..count {
                let node = &self.graph.components[c];
                let inv = Invocation {
                    component: c,
                    name: Arc::clone(&node.name),
                    lane: Arc::clone(&self.lane_names[lane]),
                    index,
                    count,
                    epoch: self.epoch,
                    tick: tick_lateness.map(|(t, _)| t),
                    release_lateness: tick_lateness.map(|(_, l)| Duration::from_nanos(l)),
                    priority: node.exec.priority,
                    worker_id: None,
                    budget: node.exec.budget,
                    stop: self.opts.stop.clone(),
                };
                let ctx = GraphContext {
                    inputs: Arc::clone(&inputs),
                    outputs: Arc::clone(&node.outputs),
                    staged: Vec::new(),
                    clock: self.inv_clock(),
                    sim_cost: Duration::ZERO,
                    marks: InvMarks::default(),
                    cancel_observed: false,
                    budget_reported: false,
                    stop: self.opts.stop.clone(),
                    budget: node.exec.budget,
                    tid: RUNNER_TID,
                    component: Arc::clone(&node.name),
                    tracing: self.opts.trace,
                };
                let replicas = Arc::clone(&self.replicas[c]);
                match &self.lanes[lane] {
                    LaneRun::Pool(_) => {
                        let batch = Arc::clone(&batch);
                        let reentrant = node.exec.reentrant;
                        let priority = node.exec.priority;
                        total_jobs += 1;
                        jobs.entry(lane).or_default().push(LaneJob {
                            component: c,
                            index,
                            priority,
                            reentrant,
                            run: PoolInv {
                                inv,
                                ctx,
                                replicas,
                                batch,
                            },
                        });
                    }
                    LaneRun::EventLoop | LaneRun::FixedRate(_) => {
                        let outcome = execute(&replicas, inv, ctx);
                        if let Clock::Virtual(now) = &mut self.clock {
                            *now += outcome.sim_cost.as_nanos() as u64;
                        }
                        inline_outcomes.push(outcome);
                    }
                }
            }
        }
        self.absorb(inline_outcomes);
        if total_jobs == 0 {
            self.commit_region(pos);
            return None;
        }
        batch.state.lock().unwrap_or_else(PoisonError::into_inner).0 = total_jobs;
        let mut lanes = Vec::new();
        for (lane, jobs) in jobs {
            lanes.push(lane);
            let LaneRun::Pool(pool) = &self.lanes[lane] else {
                unreachable!("jobs are only made for pool lanes");
            };
            let adm = pool.submit_batch(jobs);
            if adm.fail_fast && self.error.is_none() {
                self.error = Some(RunError {
                    component: None,
                    epoch: self.epoch,
                    kind: RunErrorKind::QueueFull {
                        lane: self.graph.lanes[lane].name.clone(),
                    },
                });
            }
        }
        Some(Pending {
            pos,
            batch,
            submitted_ns,
            lanes,
        })
    }

    fn inv_clock(&self) -> InvClock {
        match self.clock {
            Clock::Real(origin) => InvClock::Real {
                origin,
                start: Instant::now(),
            },
            Clock::Virtual(ns) => InvClock::Virtual { start_ns: ns },
        }
    }

    /// Waits for a region's pool work, then commits it.
    fn finish_pending(&mut self, p: Pending) {
        let before = Instant::now();
        let mut outcomes = p.batch.wait();
        if let Clock::Real(_) = self.clock {
            self.blocked_ns += before.elapsed().as_nanos() as u64;
        }
        outcomes.sort_by_key(|o| (o.component, o.index));
        let admitted = outcomes.iter().filter(|o| o.dropped.is_none()).count() as u64;
        let rejected = outcomes.len() as u64 - admitted;
        if let Clock::Virtual(now) = &mut self.clock {
            // Simulated pool time: the batch takes its longest invocation or
            // its total spread over the lane's width, whichever is longer.
            let width = p
                .lanes
                .iter()
                .filter_map(|&l| match &self.graph.lanes[l].kind {
                    LaneKind::ThreadPool(s) => Some(s.width() as u64),
                    _ => None,
                })
                .sum::<u64>()
                .max(1);
            let total: u64 = outcomes.iter().map(|o| o.sim_cost.as_nanos() as u64).sum();
            let longest = outcomes
                .iter()
                .map(|o| o.sim_cost.as_nanos() as u64)
                .max()
                .unwrap_or(0);
            *now += longest.max(total.div_ceil(width));
        }
        for o in outcomes.iter().filter(|o| o.dropped.is_some()) {
            let name = o.component as u32;
            let reason = match o.dropped {
                Some(DropReason::Evicted) => "evicted",
                Some(DropReason::Closed) => "closed",
                _ => "rejected",
            };
            let ts = p.submitted_ns;
            let index = o.index as u64;
            self.record(|| {
                Record::instant("scheduler_reject", RUNNER_TID, ts)
                    .label(Key::Component, name)
                    .arg(Key::Invocation, index)
                    .text(Key::Reason, reason)
            });
        }
        let end = self.now_ns();
        if self.opts.trace {
            let lane = match p.lanes.as_slice() {
                [one] => self.lane_label(*one),
                // A region spanning lanes (rare): their names joined,
                // interned the first time.
                many => match self.joined_lanes.get(many) {
                    Some(&label) => label,
                    None => {
                        let joined = many
                            .iter()
                            .map(|&l| &*self.lane_names[l])
                            .collect::<Vec<_>>()
                            .join(",");
                        let label = self.trace.intern(joined.into());
                        self.joined_lanes.insert(many.to_vec(), label);
                        label
                    }
                },
            };
            let workers = self.trace.push_set(
                outcomes
                    .iter()
                    .filter_map(|o| o.worker_id.map(|w| w as u64)),
            );
            let submitted_ns = p.submitted_ns;
            let record = Record::span(
                "thread_pool_batch",
                RUNNER_TID,
                submitted_ns,
                end.saturating_sub(submitted_ns),
            )
            .label(Key::Lane, lane)
            .arg(Key::Admitted, admitted)
            .arg(Key::Rejected, rejected)
            .list(Key::WorkerIds, workers);
            self.trace.push(record);
        }
        let ran: Vec<Outcome> = outcomes
            .into_iter()
            .filter(|o| o.dropped.is_none())
            .collect();
        self.absorb(ran);
        self.commit_region(p.pos);
    }

    /// Takes finished invocations' records, errors and staged values.
    fn absorb(&mut self, outcomes: Vec<Outcome>) {
        for o in outcomes {
            let lane = self.graph.components[o.component].lane;
            let acc = &mut self.acc[lane];
            acc.completed += 1;
            acc.by_priority[usize::from(o.priority.rank())] += 1;
            self.last_callback_ns = o.dur_ns;
            if let Some(t) = &o.traced {
                self.record_invocation(&o, t);
            }
            if let Err(kind) = o.result {
                if self.error.is_none() {
                    self.error = Some(RunError {
                        component: Some(self.graph.components[o.component].name.to_string()),
                        epoch: self.epoch,
                        kind,
                    });
                }
            }
            self.staged
                .entry(self.graph.components[o.component].region)
                .or_default()
                .push((o.component, o.staged));
        }
    }

    /// The trace events of one invocation: begin, what it recorded itself, a
    /// cancellation request that came during it, the span and the end, each
    /// tagged with component, lane, epoch, invocation, tick and worker id.
    /// Fixed-size records pushed onto the trace; nothing is formatted.
    fn record_invocation(&mut self, o: &Outcome, t: &InvTrace) {
        let lane = self.lane_label(self.graph.components[o.component].lane);
        let (component, epoch) = (o.component as u32, self.epoch);
        let tag = |r: Record| {
            let r = r
                .label(Key::Component, component)
                .label(Key::Lane, lane)
                .arg(Key::Epoch, epoch)
                .arg(Key::Invocation, o.index as u64);
            let r = match t.tick {
                Some(tick) => r.arg(Key::Tick, tick),
                None => r,
            };
            match o.worker_id {
                Some(w) => r.arg(Key::WorkerId, w as u64),
                None => r,
            }
        };
        self.trace.push(tag(Record::instant(
            "component_execute_begin",
            t.tid,
            t.begin,
        )));
        for (mark, ts) in t.marks.iter() {
            self.trace.push(tag(Record::instant(mark, t.tid, ts)));
        }
        if t.cancel_requested {
            self.trace.push(tag(Record::instant(
                "component_cancellation_requested",
                t.tid,
                t.end,
            )));
        }
        self.trace.push(tag(Record::span(
            "component_execute",
            t.tid,
            t.begin,
            t.end - t.begin,
        )));
        self.trace
            .push(tag(Record::instant("component_execute_end", t.tid, t.end)));
    }

    /// A lane's index in the trace's names.
    fn lane_label(&self, lane: usize) -> u32 {
        (self.graph.components.len() + lane) as u32
    }

    /// The region barrier: staged publications become visible downstream.
    fn commit_region(&mut self, pos: usize) {
        let index = self.graph.regions[pos].index;
        let Some(mut staged) = self.staged.remove(&index) else {
            return;
        };
        staged.sort_by_key(|(c, _)| *c);
        for (c, values) in staged {
            for (port, value) in values {
                for &(tc, tp) in &self.routes[c][port] {
                    self.mailboxes[tc][tp].push(Arc::clone(&value));
                }
            }
        }
    }

    fn metrics(&self) -> (SchedulerMetrics, BTreeMap<String, SchedulerMetrics>) {
        let mut per_lane = BTreeMap::new();
        let mut all = SchedulerMetrics::default();
        for (i, lane) in self.graph.lanes.iter().enumerate() {
            let pool = match &self.lanes[i] {
                LaneRun::Pool(p) => Some(p.stats()),
                _ => None,
            };
            let m = self.acc[i].to_metrics(pool.as_ref());
            all.merge(&m);
            per_lane.insert(lane.name.clone(), m);
        }
        all.blocked_duration_ms = ns_to_ms(self.blocked_ns);
        all.last_callback_duration_ms = ns_to_ms(self.last_callback_ns);
        all.trace_dropped_count = self.trace.dropped();
        (all, per_lane)
    }
}

/// The workers of a thread-pool lane that sets `thread_name` or
/// `cpu_affinity`: a [`LaneRuntime`] of its own, `max_threads` wide, named
/// and restricted as asked. What the OS did not apply becomes a
/// `lane_placement_not_applied` diagnostic. `None`: the lane asks for
/// neither (it shares the run's runtime), or its workers could not start.
fn own_runtime(
    lane: &LaneSpec,
    spec: &ThreadPoolSpec,
    diags: &mut Vec<Diagnostic>,
) -> Option<LaneRuntime> {
    let a = &lane.advisory;
    let name = a.thread_name.as_deref().filter(|n| !n.is_empty());
    let cpus = a.cpu_affinity.as_deref().filter(|c| !c.is_empty());
    if name.is_none() && cpus.is_none() {
        return None;
    }
    let mut note = |field: &'static str, why: String| {
        diags.push(Diagnostic {
            code: LANE_PLACEMENT_NOT_APPLIED,
            lane: lane.name.clone(),
            field,
            message: format!(
                "lane `{}`: `{field}` not applied as asked: {why}",
                lane.name
            ),
        });
    };
    let mut b = LaneRuntime::builder().workers(spec.width());
    if let Some(name) = name {
        // Linux keeps 15 bytes of a thread's name; `-{i}` is added.
        let longest = format!("{name}-{}", spec.width() - 1);
        if cfg!(target_os = "linux") && longest.len() > 15 {
            note(
                "thread_name",
                format!("the OS shows only the first 15 bytes of `{longest}`"),
            );
        }
        b = b.thread_name(name);
    }
    if let Some(cpus) = cpus {
        match cpus
            .iter()
            .map(|&c| usize::try_from(c))
            .collect::<Result<Vec<usize>, _>>()
        {
            Ok(cpus) => b = b.cpu_affinity(cpus),
            Err(_) => note(
                "cpu_affinity",
                format!("a CPU number is negative: {cpus:?}"),
            ),
        }
    }
    match b.build() {
        Ok(own) => {
            for (worker, why) in own.placement_errors() {
                note("cpu_affinity", format!("worker {worker}: {why}"));
            }
            Some(own)
        }
        Err(e) => {
            note(
                if name.is_some() {
                    "thread_name"
                } else {
                    "cpu_affinity"
                },
                format!("its workers could not start ({e}); it runs on the shared workers"),
            );
            None
        }
    }
}

pub(crate) fn ns_to_ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Runs one invocation on a free replica of its component.
fn execute(replicas: &[Replica], inv: Invocation, mut ctx: GraphContext) -> Outcome {
    let begin = ctx.now_ns();
    let stop_before = inv.stop.is_requested();
    let mut guard = lock_free_replica(replicas, inv.index);
    let result = catch_unwind(AssertUnwindSafe(|| guard.execute(&inv, &mut ctx)));
    drop(guard);
    ctx.check_budget();
    let end = ctx.now_ns();
    let result = match result {
        Ok(Ok(())) => Ok(()),
        Ok(Err(ComponentError { message })) if message == CANCELLED_MESSAGE => Ok(()),
        Ok(Err(e)) => Err(RunErrorKind::Failed(e.message)),
        Err(p) => Err(RunErrorKind::Panicked(panic_message(&*p))),
    };
    let dur = end - begin;
    let traced = ctx.tracing.then(|| InvTrace {
        tid: ctx.tid,
        begin,
        end,
        marks: ctx.marks,
        cancel_requested: !stop_before && inv.stop.is_requested(),
        tick: inv.tick,
    });
    Outcome {
        component: inv.component,
        index: inv.index,
        staged: std::mem::take(&mut ctx.staged),
        traced,
        result,
        sim_cost: ctx.sim_cost,
        dur_ns: dur,
        priority: inv.priority,
        worker_id: inv.worker_id,
        dropped: None,
    }
}

fn lock_free_replica(
    replicas: &[Replica],
    index: usize,
) -> std::sync::MutexGuard<'_, Box<dyn super::Component>> {
    // The lane keeps at most `replicas.len()` invocations of a component in
    // flight, so one is free; start at the invocation's own to spread them.
    let n = replicas.len();
    for k in 0..n {
        match replicas[(index + k) % n].try_lock() {
            Ok(g) => return g,
            Err(TryLockError::Poisoned(p)) => return p.into_inner(),
            Err(TryLockError::WouldBlock) => {}
        }
    }
    replicas[index % n]
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic payload".to_string()
    }
}

/// Sleeps until `deadline` on the lane runtime's timer (its workers fire
/// it; this thread parks), waking at once if `stop` is requested. The timer wheel has 1 ms ticks and rounds deadlines up, so
/// the timer is asked for `deadline - 1 ms` and the last stretch (under
/// about a millisecond) is an OS sleep. Returns whether the stop came.
fn sleep_until(rt: &LaneRuntime, deadline: Instant, stop: &StopToken) -> bool {
    let coarse = deadline.checked_sub(Duration::from_millis(1));
    if let Some(coarse) = coarse.filter(|c| *c > Instant::now()) {
        host::block_on(&rt.shared().driver, async {
            let sleep = pin!(time::sleep_until(time::Instant::from_std(coarse)));
            let stopped = pin!(stop.requested());
            FirstOf(sleep, stopped).await;
        });
    }
    if stop.is_requested() {
        return true;
    }
    let now = Instant::now();
    if deadline > now {
        std::thread::sleep(deadline - now);
    }
    stop.is_requested()
}

/// Completes when either future does.
struct FirstOf<A, B>(A, B);

impl<A, B> Future for FirstOf<Pin<&mut A>, Pin<&mut B>>
where
    A: Future,
    B: Future,
{
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.as_mut().poll(cx).is_ready() || self.1.as_mut().poll(cx).is_ready() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}
