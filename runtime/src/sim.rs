//! A deterministic simulator for the worker loop.
//!
//! It runs N virtual workers on the calling thread, through exactly the
//! functions the threaded executor uses (`sched::step`, the park
//! sequence, the gate, the idle state, the real queues), but it decides who
//! moves next with a seeded RNG. A virtual worker never blocks: where a thread
//! would sleep, the simulator marks it parked and only moves it again once its
//! parker holds a notification (or, if enabled, when it "times out").
//!
//! Every scheduling decision and scheduler event goes into a trace. The same
//! seed gives the same trace, so a failing seed is a reproducible bug report.
//!
//! With park timeouts disabled, a lost wakeup cannot hide: all workers end up
//! parked with work left, and [`SimReport::outcome`] says
//! [`SimOutcome::Deadlock`].

use std::cell::Cell;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::time::Duration;

use magpie_core::park::ParkResult;
use magpie_core::rng::XorShift64;
use magpie_core::sync::Arc;

use crate::executor::WorkerCtx;
use crate::metrics::{MetricsSnapshot, WorkerMetrics};
use crate::sched::{
    self, Core, LifoMode, LocalMode, ParkPrep, SchedEvent, Shared, Step, TraceHooks,
};

/// One thing that happens from outside the workers, in script order.
#[derive(Debug)]
pub enum ExternalAction<T> {
    /// `ExecutorHandle::spawn`.
    Spawn(T),
    /// `ExecutorHandle::spawn_batch`.
    SpawnBatch(Vec<T>),
    /// `Executor::join`'s first half: close the gate (then wait for the end).
    Join,
    /// `Executor::shutdown`.
    Shutdown,
}

/// Knobs of one simulated run.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Virtual workers.
    pub workers: usize,
    /// Seed for every decision (and for the workers' RNGs).
    pub seed: u64,
    /// Steal attempts per search, as in [`ExecutorConfig`](crate::ExecutorConfig).
    pub steal_tries: u32,
    /// Let parked workers wake by "timeout" now and then. Off, a lost wakeup
    /// shows up as a deadlock instead of a delay.
    pub park_timeouts: bool,
    /// Give up (outcome [`SimOutcome::StepLimit`]) after this many moves.
    pub max_steps: u64,
    /// Which LIFO slot the workers use.
    pub lifo_mode: LifoMode,
    /// Which local queue the workers use.
    pub local_mode: LocalMode,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            workers: 2,
            seed: 1,
            steal_tries: 4,
            park_timeouts: false,
            max_steps: 1_000_000,
            lifo_mode: LifoMode::Owner,
            local_mode: LocalMode::Split,
        }
    }
}

/// One line of the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceEntry {
    /// A scheduler event on a worker.
    Sched {
        /// The worker.
        worker: usize,
        /// What happened.
        event: SchedEvent,
    },
    /// The script's action number `index` ran.
    External {
        /// Position in the script.
        index: usize,
        /// Whether the executor accepted it (spawns), or 1 (join, shutdown).
        accepted: bool,
    },
    /// A parked worker was picked but had no notification.
    StillParked {
        /// The worker.
        worker: usize,
    },
}

/// How a simulated run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimOutcome {
    /// Every worker left its loop.
    Terminated,
    /// Every live worker is parked with no notification pending, the script is
    /// exhausted and timeouts are off: nobody can ever move again.
    Deadlock,
    /// `max_steps` ran out first.
    StepLimit,
}

/// The result of [`simulate`].
#[derive(Clone, Debug)]
pub struct SimReport {
    /// How it ended.
    pub outcome: SimOutcome,
    /// Moves made.
    pub steps: u64,
    /// Everything that happened, in order.
    pub trace: Vec<TraceEntry>,
    /// The workers' metrics.
    pub metrics: MetricsSnapshot,
    /// Tasks the script tried to spawn that the executor refused (gate closed).
    pub refused: usize,
}

impl SimReport {
    /// A 64-bit digest of the trace (FNV-1a over its debug form), handy for
    /// comparing replays.
    pub fn trace_digest(&self) -> u64 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for entry in &self.trace {
            for byte in format!("{entry:?}").bytes() {
                hash ^= u64::from(byte);
                hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        hash
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum VState {
    Running,
    /// Found nothing; its next move spins (steps again) or parks. A separate
    /// move, so other actors can act between the failed search and the park
    /// sequence: that window is where lost wakeups live.
    Idle,
    Parked,
    Exited,
}

struct Recorder<'a> {
    trace: &'a mut Vec<TraceEntry>,
}

impl TraceHooks for Recorder<'_> {
    fn event(&mut self, worker: usize, event: SchedEvent) {
        self.trace.push(TraceEntry::Sched { worker, event });
    }
}

thread_local! {
    static SIM_CLOCK: Cell<u64> = const { Cell::new(0) };
}

/// The simulator's clock: 100 virtual nanoseconds per move.
fn sim_clock() -> u64 {
    SIM_CLOCK.with(|c| c.get())
}

/// Runs `script` against `cfg.workers` virtual workers that run tasks with
/// `runner`, deterministically for `cfg.seed`.
pub fn simulate<T, R>(cfg: SimConfig, script: Vec<ExternalAction<T>>, runner: R) -> SimReport
where
    T: Send + 'static,
    R: Fn(T, &mut WorkerCtx<T, ()>),
{
    let workers = cfg.workers.max(1);
    let (shared, owned) = Shared::new(workers, cfg.steal_tries, cfg.lifo_mode, cfg.local_mode);
    let shared = Arc::new(shared);
    let mut rng = XorShift64::new(cfg.seed);
    let mut ctxs: Vec<WorkerCtx<T, ()>> = owned
        .into_iter()
        .enumerate()
        .map(|(id, (local, parker))| {
            WorkerCtx::from_parts(
                id,
                (),
                XorShift64::new(cfg.seed ^ (id as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                Core::new(&shared, id, local, parker, sim_clock),
                shared.clone(),
            )
        })
        .collect();
    let mut state = vec![VState::Running; workers];
    let mut trace = Vec::new();
    let mut script = script.into_iter().enumerate().peekable();
    let mut refused = 0;
    let mut steps = 0u64;
    SIM_CLOCK.with(|c| c.set(0));

    // Every worker takes its token first, as the threads do.
    for (id, ctx) in ctxs.iter_mut().enumerate() {
        if !sched::enter(ctx) {
            state[id] = VState::Exited;
        }
    }

    let outcome = loop {
        if state.iter().all(|s| *s == VState::Exited) {
            // Whatever the script still holds happens after the end: spawns
            // are refused, as a real `spawn` after `join` would be.
            for (index, action) in script.by_ref() {
                let accepted = run_external(&shared, action, &mut refused);
                trace.push(TraceEntry::External { index, accepted });
            }
            break SimOutcome::Terminated;
        }
        if steps >= cfg.max_steps {
            break SimOutcome::StepLimit;
        }
        steps += 1;
        SIM_CLOCK.with(|c| c.set(steps * 100));

        // Choose an actor: a live worker, or the script (if anything is left).
        let live: Vec<usize> = (0..workers)
            .filter(|&i| state[i] != VState::Exited)
            .collect();
        let script_left = script.peek().is_some();
        let choices = live.len() + usize::from(script_left);
        let pick = rng.next_usize(choices);
        if pick == live.len() {
            let (index, action) = script.next().expect("peeked");
            let accepted = run_external(&shared, action, &mut refused);
            trace.push(TraceEntry::External { index, accepted });
            continue;
        }
        let id = live[pick];
        match state[id] {
            VState::Running => {
                let ctx = &mut ctxs[id];
                let mut rec = Recorder { trace: &mut trace };
                let step = sched::step(ctx, &mut rec, |ctx, task| run_task(ctx, &runner, task));
                match step {
                    Step::Ran => {}
                    Step::Exit => {
                        rec.event(id, SchedEvent::Exit);
                        state[id] = VState::Exited;
                    }
                    Step::Idle => state[id] = VState::Idle,
                }
            }
            // An idle worker spins (searches again) or starts parking.
            VState::Idle => {
                if rng.next_usize(4) == 0 {
                    state[id] = VState::Running;
                    continue;
                }
                let ctx = &mut ctxs[id];
                let mut rec = Recorder { trace: &mut trace };
                state[id] = match sched::prepare_park(ctx, &mut rec) {
                    ParkPrep::Sleep => VState::Parked,
                    ParkPrep::Resume => VState::Running,
                    ParkPrep::Exit => {
                        rec.event(id, SchedEvent::Exit);
                        VState::Exited
                    }
                };
            }
            VState::Parked => {
                let wake = match ctxs[id].core.parker.park_timeout(POLL) {
                    ParkResult::Notified => Some((id, ParkResult::Notified)),
                    ParkResult::TimedOut if cfg.park_timeouts && rng.next_usize(8) == 0 => {
                        Some((id, ParkResult::TimedOut))
                    }
                    ParkResult::TimedOut => {
                        trace.push(TraceEntry::StillParked { worker: id });
                        let stuck = !cfg.park_timeouts
                            && !script_left
                            && live.iter().all(|&w| state[w] == VState::Parked);
                        if !stuck {
                            None
                        } else {
                            // Everyone live is parked and nothing outside can
                            // act: sweep the parkers in id order; if none holds a
                            // notification, nobody can ever move again.
                            let found = live.iter().copied().find(|&w| {
                                matches!(
                                    ctxs[w].core.parker.park_timeout(POLL),
                                    ParkResult::Notified
                                )
                            });
                            match found {
                                Some(w) => Some((w, ParkResult::Notified)),
                                None => break SimOutcome::Deadlock,
                            }
                        }
                    }
                };
                if let Some((w, result)) = wake {
                    let mut rec = Recorder { trace: &mut trace };
                    state[w] = if sched::after_park(&mut ctxs[w], result, &mut rec) {
                        VState::Running
                    } else {
                        VState::Exited
                    };
                }
            }
            VState::Exited => unreachable!("exited workers are never picked"),
        }
    };

    let per_worker: Vec<WorkerMetrics> = ctxs.iter().map(|c| c.metrics.clone()).collect();
    SimReport {
        outcome,
        steps,
        trace,
        metrics: MetricsSnapshot::from_workers(per_worker),
        refused,
    }
}

fn run_external<T: Send + 'static>(
    shared: &Arc<Shared<T>>,
    action: ExternalAction<T>,
    refused: &mut usize,
) -> bool {
    let handle = crate::executor::handle_from_shared(shared.clone());
    match action {
        ExternalAction::Spawn(task) => match handle.spawn(task) {
            Ok(()) => true,
            Err(_) => {
                *refused += 1;
                false
            }
        },
        ExternalAction::SpawnBatch(tasks) => match handle.spawn_batch(tasks) {
            Ok(()) => true,
            Err(tasks) => {
                *refused += tasks.len();
                false
            }
        },
        ExternalAction::Join => {
            if shared.gate.close() {
                shared.initiate_done();
            }
            true
        }
        ExternalAction::Shutdown => {
            handle.shutdown();
            true
        }
    }
}

fn run_task<T, R>(ctx: &mut WorkerCtx<T, ()>, runner: &R, task: T)
where
    T: Send + 'static,
    R: Fn(T, &mut WorkerCtx<T, ()>),
{
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| runner(task, ctx))) {
        ctx.metrics.panics += 1;
        ctx.shared.record_panic(payload);
    }
}

impl fmt::Display for SimReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} after {} steps, {} trace entries, digest {:016x}",
            self.outcome,
            self.steps,
            self.trace.len(),
            self.trace_digest()
        )
    }
}

/// A zero timeout: how the simulator asks a parker "were you notified?".
pub(crate) const POLL: Duration = Duration::ZERO;
