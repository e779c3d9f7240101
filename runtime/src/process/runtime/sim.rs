//! A deterministic simulator for processes: the real process runtime
//! (registry, mailboxes, `run_cell`, command dispatch, shutdown) on N
//! virtual workers that run `sched`'s loop on the calling thread, in an
//! order chosen by a seeded RNG, as `crate::sim` does for typed tasks.
//!
//! Actors, one move each: a virtual worker (search and step one process,
//! or idle/park/wake), the outside world (send a message to a random
//! process), and a completer (complete a random pending yield, or try a
//! second completion of one already done). The workload: `processes`
//! processes that check per-sender FIFO on every message, forward some
//! messages to random peers and yield some commands.
//!
//! Time is simulated: the runtime's timer driver runs on a paused clock
//! that only the simulator moves, by whole milliseconds (1 ms on some moves
//! while a timer is pending, and to the next deadline when every worker is
//! parked, as a parked worker's timeout would). `Sleep` commands go through
//! the real path (the timer wheel, `SleepWake`, the completer); the virtual
//! workers fire due timers where the threaded loop does (every
//! `TIMER_CHECK_INTERVAL` steps, when they find no work, and when a parked
//! one times out because a deadline has passed).
//!
//! Checked on every run ([`ProcSimReport::violations`]):
//! 1. every accepted message is delivered exactly once, in per-sender
//!    order;
//! 2. every yield is completed exactly once, and a second completion is
//!    refused;
//! 3. at quiescence (nothing left to send or complete, every worker
//!    parked) no process holds an event without being stepped: every
//!    mailbox is empty and every process IDLE or BLOCKED;
//! 4. shutdown terminates: every process is closed once and every worker
//!    leaves its loop;
//! 5. sleeps (the [`Sleeps`](SimWorkload::Sleeps) workload): a sleep is
//!    completed exactly once (property 2), never before its deadline (the
//!    step that gets it reads the clock), and by the first timer pass at or
//!    after its deadline (checked after every pass: fired exactly the
//!    sleeps due by the clock), so sleeps fire in deadline order across
//!    passes; one process's sleep completions arrive in deadline order, ties
//!    in the wheel's order, which the same seed repeats.
//!
//! The trace digest (scheduler events plus each step's process and event
//! count) is the same for the same seed.

use std::cell::Cell as StdCell;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use magpie_core::park::ParkResult;
use magpie_core::process::Lifecycle;
use magpie_core::rng::XorShift64;

use super::{fire_timers, lock, Builder, Inner, ProcWorker, Sink, TIMER_CHECK_INTERVAL};
use crate::process::{
    CompleteError, Completer, Event, Events, InitError, Outcome, Pid, Process, ProcessRuntime,
    SpawnOptions, StepOutput, Tag,
};
use crate::sched::{self, Found, ParkPrep, SchedEvent, TraceHooks};
use crate::time::Driver;

/// The longest sleep the [`Sleeps`](SimWorkload::Sleeps) workload yields,
/// in simulated milliseconds (sleeps take 0 to this many).
const MAX_SLEEP_MS: usize = 4;

/// Knobs of one simulated run.
#[derive(Clone, Debug)]
pub struct ProcSimConfig {
    /// Virtual workers.
    pub workers: usize,
    /// Seed of every decision.
    pub seed: u64,
    /// Processes spawned at the start.
    pub processes: usize,
    /// Messages the outside world sends.
    pub external_messages: u32,
    /// Messages processes may send each other in all (a budget, so the run
    /// quiesces).
    pub internal_messages: u32,
    /// Events per step (the fairness budget); small, to exercise requeues.
    pub event_budget: usize,
    /// Give up after this many moves.
    pub max_moves: u64,
    /// Who sends to whom.
    pub workload: SimWorkload,
}

/// The traffic of a simulated run. [`Mixed`](SimWorkload::Mixed) is the
/// general workload (random forwards and yields); the others are small
/// versions of the Savina workloads that `process_savina` times, with the
/// same message pattern, checked by the same properties and replayable by
/// seed (issue 15: "the same simulator seed gives the same trace for a small
/// version of each workload"). In each, `internal_messages` is the number of
/// messages processes send each other in all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SimWorkload {
    /// Outside messages to random processes; a process forwards some to
    /// random peers and yields some commands.
    #[default]
    Mixed,
    /// Two processes; one outside message to process 0 starts a ball that
    /// each passes back to the other.
    PingPong,
    /// The processes in a ring; one outside message to process 0 starts a
    /// token that each passes to the next.
    Ring,
    /// One outside message to process 0, which then sends every internal
    /// message to process 1 at once (the counter).
    Counting,
    /// One outside message to each process but 0; each answers process 0
    /// (the collector) once.
    ForkJoin,
    /// One outside message to each process; each message received makes its
    /// receiver send one to a random peer.
    Big,
    /// Sleeps mixed with messages: outside messages to random processes;
    /// each message makes its receiver sleep 0 to `MAX_SLEEP_MS` simulated
    /// milliseconds (some of them 0: completed at once) and sometimes pass a
    /// message on; each sleep that ends makes it send one to a random peer.
    /// Not in [`ALL`](SimWorkload::ALL): it has its own test.
    Sleeps,
}

impl SimWorkload {
    /// The general workload and the five Savina shapes, for tests that run
    /// them all ([`Sleeps`](SimWorkload::Sleeps) is tested on its own).
    pub const ALL: [SimWorkload; 6] = [
        SimWorkload::Mixed,
        SimWorkload::PingPong,
        SimWorkload::Ring,
        SimWorkload::Counting,
        SimWorkload::ForkJoin,
        SimWorkload::Big,
    ];

    /// The configuration of a small run of this workload.
    pub fn small(self, seed: u64, workers: usize) -> ProcSimConfig {
        let base = ProcSimConfig {
            seed,
            workers,
            workload: self,
            ..ProcSimConfig::default()
        };
        match self {
            SimWorkload::Mixed => base,
            SimWorkload::PingPong => ProcSimConfig {
                processes: 2,
                external_messages: 1,
                internal_messages: 40,
                ..base
            },
            SimWorkload::Ring => ProcSimConfig {
                processes: 6,
                external_messages: 1,
                internal_messages: 40,
                ..base
            },
            SimWorkload::Counting => ProcSimConfig {
                processes: 2,
                external_messages: 1,
                internal_messages: 40,
                ..base
            },
            SimWorkload::ForkJoin => ProcSimConfig {
                processes: 9,
                external_messages: 8,
                internal_messages: 8,
                ..base
            },
            SimWorkload::Big => ProcSimConfig {
                processes: 6,
                external_messages: 6,
                internal_messages: 30,
                ..base
            },
            SimWorkload::Sleeps => ProcSimConfig {
                processes: 4,
                external_messages: 12,
                internal_messages: 16,
                ..base
            },
        }
    }

    /// The process the `k`-th outside message goes to, or `None` for a
    /// random one.
    fn outside_target(self, k: u32) -> Option<u32> {
        match self {
            SimWorkload::Mixed | SimWorkload::Sleeps => None,
            SimWorkload::PingPong | SimWorkload::Ring | SimWorkload::Counting => Some(0),
            SimWorkload::ForkJoin => Some(k + 1),
            SimWorkload::Big => Some(k),
        }
    }
}

impl Default for ProcSimConfig {
    fn default() -> Self {
        Self {
            workers: 2,
            seed: 1,
            processes: 4,
            external_messages: 24,
            internal_messages: 24,
            event_budget: 3,
            max_moves: 200_000,
            workload: SimWorkload::Mixed,
        }
    }
}

/// The result of [`simulate_processes`].
#[derive(Clone, Debug)]
pub struct ProcSimReport {
    /// Moves made.
    pub moves: u64,
    /// FNV-1a digest of the trace.
    pub digest: u64,
    /// Messages accepted by a mailbox.
    pub sent: u64,
    /// Messages delivered to a step.
    pub delivered: u64,
    /// Yields made.
    pub yields: u64,
    /// Yield completions delivered to a step.
    pub completions: u64,
    /// Sleep completions delivered to a step (part of `completions`).
    pub sleeps: u64,
    /// Sleeps that waited for the clock (a deadline after the yield).
    pub timed_sleeps: u64,
    /// Simulated milliseconds the clock moved.
    pub clock_ms: u64,
    /// Steps run.
    pub steps: u64,
    /// Properties that failed (empty on a good run).
    pub violations: Vec<String>,
}

/// A sim message: who sent it (0 = outside, `i + 1` = process `i`) and its
/// number in that sender's stream to this receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimMsg {
    sender: u32,
    seq: u64,
}

#[derive(Default)]
struct Log {
    pids: Vec<Pid>,
    /// (receiver, sender) -> next expected seq.
    expected: HashMap<(u32, u32), u64>,
    sent: u64,
    delivered: u64,
    internal_left: u32,
    yielded: HashSet<(u32, Tag)>,
    yields: u64,
    completions: u64,
    /// Sleeps yielded and not yet delivered: (process, tag) -> deadline in
    /// simulated ms since the clock's origin.
    sleeps: HashMap<(u32, Tag), u64>,
    /// Per process, the deadline of the last sleep completion it got.
    last_sleep: HashMap<u32, u64>,
    sleeps_done: u64,
    timed_sleeps: u64,
    closes: HashMap<u32, u32>,
    steps: u64,
    digest: u64,
    violations: Vec<String>,
}

impl Log {
    fn hash(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.digest ^= u64::from(*b);
            self.digest = self.digest.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

type Shared = Arc<Mutex<Log>>;

struct SimProc {
    id: u32,
    log: Shared,
    rng: XorShift64,
    /// target -> next seq.
    out_seq: HashMap<u32, u64>,
    next_tag: Tag,
    workload: SimWorkload,
    /// The runtime's timer driver: its (paused) clock is the simulated time.
    driver: Driver,
}

/// Simulated milliseconds since the clock's origin (the wheel's tick 0).
fn now_ms(driver: &Driver) -> u64 {
    let clock = driver.clock();
    clock
        .now()
        .saturating_duration_since(clock.origin())
        .as_millis() as u64
}

impl SimProc {
    /// Sends the next message of this process's stream to process `to`, if
    /// the internal budget allows.
    fn send_to(&mut self, to: u32, log: &mut Log, out: &mut StepOutput<'_, SimMsg>) {
        if log.internal_left == 0 {
            return;
        }
        let seq = *self.out_seq.get(&to).unwrap_or(&0);
        let m = SimMsg {
            sender: self.id + 1,
            seq,
        };
        if out.send(log.pids[to as usize], m).is_ok() {
            self.out_seq.insert(to, seq + 1);
            log.internal_left -= 1;
            log.sent += 1;
        }
    }
}

impl Process<SimMsg> for SimProc {
    fn init(&mut self, method: &str, _input: Option<SimMsg>) -> Result<(), InitError> {
        if method == "sim" {
            Ok(())
        } else {
            Err(InitError::unknown_method(method))
        }
    }

    fn step(&mut self, events: Events<'_, SimMsg>, out: &mut StepOutput<'_, SimMsg>) {
        let log = self.log.clone();
        let mut log = lock(&log);
        log.steps += 1;
        let n = events.len() as u64;
        log.hash(&[0xAA]);
        log.hash(&self.id.to_le_bytes());
        log.hash(&n.to_le_bytes());
        for ev in events {
            match ev {
                Event::Message { msg, .. } => {
                    let key = (self.id, msg.sender);
                    let want = log.expected.get(&key).copied().unwrap_or(0);
                    if msg.seq != want {
                        let v = format!(
                            "process {} got seq {} from sender {}, expected {want}",
                            self.id, msg.seq, msg.sender
                        );
                        log.violations.push(v);
                    }
                    log.expected.insert(key, msg.seq + 1);
                    log.delivered += 1;
                    let peers = log.pids.len() as u32;
                    match self.workload {
                        SimWorkload::Mixed => {
                            // Sometimes pass one on to a peer.
                            if self.rng.next_usize(2) == 0 {
                                let to = self.rng.next_usize(peers as usize) as u32;
                                self.send_to(to, &mut log, out);
                            }
                        }
                        SimWorkload::PingPong | SimWorkload::Ring => {
                            self.send_to((self.id + 1) % peers, &mut log, out);
                        }
                        SimWorkload::Counting => {
                            if self.id == 0 {
                                for _ in 0..log.internal_left {
                                    self.send_to(1, &mut log, out);
                                }
                            }
                        }
                        SimWorkload::ForkJoin => {
                            if self.id != 0 {
                                self.send_to(0, &mut log, out);
                            }
                        }
                        SimWorkload::Big => {
                            let to = self.rng.next_usize(peers as usize) as u32;
                            self.send_to(to, &mut log, out);
                        }
                        SimWorkload::Sleeps => {
                            if self.rng.next_usize(3) == 0 {
                                let to = self.rng.next_usize(peers as usize) as u32;
                                self.send_to(to, &mut log, out);
                            }
                            let d = self.rng.next_usize(MAX_SLEEP_MS + 1) as u64;
                            let tag = self.next_tag;
                            self.next_tag += 1;
                            let deadline = now_ms(&self.driver) + d;
                            log.yielded.insert((self.id, tag));
                            log.sleeps.insert((self.id, tag), deadline);
                            log.yields += 1;
                            if d > 0 {
                                log.timed_sleeps += 1;
                            }
                            out.sleep(tag, Duration::from_millis(d));
                        }
                    }
                    // Sometimes yield a command (the mixed workload only).
                    if self.workload == SimWorkload::Mixed && self.rng.next_usize(3) == 0 {
                        let tag = self.next_tag;
                        self.next_tag += 1;
                        log.yielded.insert((self.id, tag));
                        log.yields += 1;
                        out.yield_command(
                            tag,
                            crate::process::Command::Custom {
                                kind: "ext".into(),
                                input: msg,
                            },
                        );
                    }
                }
                Event::Completion { tag, result } => {
                    if !log.yielded.remove(&(self.id, tag)) {
                        let v = format!("process {} got an unexpected completion {tag}", self.id);
                        log.violations.push(v);
                    }
                    if result.is_err() {
                        log.violations
                            .push(format!("process {} tag {tag} failed", self.id));
                    }
                    log.completions += 1;
                    if let Some(deadline) = log.sleeps.remove(&(self.id, tag)) {
                        let now = now_ms(&self.driver);
                        if now < deadline {
                            let v = format!(
                                "process {} got sleep {tag} at {now} ms, before its deadline {deadline} ms",
                                self.id
                            );
                            log.violations.push(v);
                        }
                        let last = log.last_sleep.get(&self.id).copied().unwrap_or(0);
                        if deadline < last {
                            let v = format!(
                                "process {} got sleep {tag} (deadline {deadline} ms) after one due at {last} ms",
                                self.id
                            );
                            log.violations.push(v);
                        }
                        log.last_sleep.insert(self.id, deadline);
                        log.sleeps_done += 1;
                        log.hash(&[0x5E]);
                        log.hash(&tag.to_le_bytes());
                        log.hash(&now.to_le_bytes());
                        // A sleep that ends sends a message on.
                        let to = self.rng.next_usize(log.pids.len()) as u32;
                        self.send_to(to, &mut log, out);
                    }
                }
                Event::Cancel => {
                    out.complete(None);
                    return;
                }
                Event::Exit(_) => {}
            }
        }
        out.idle();
    }

    fn close(&mut self) {
        *lock(&self.log).closes.entry(self.id).or_insert(0) += 1;
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum VState {
    Running,
    Idle,
    Parked,
    Exited,
}

struct Recorder<'a> {
    log: &'a Shared,
}

impl TraceHooks for Recorder<'_> {
    fn event(&mut self, worker: usize, event: SchedEvent) {
        let text = format!("{worker}:{event:?}");
        lock(self.log).hash(text.as_bytes());
    }
}

thread_local! {
    static CLOCK: StdCell<u64> = const { StdCell::new(0) };
}

fn clock() -> u64 {
    CLOCK.with(|c| c.get())
}

type Pending = Arc<Mutex<Vec<(Completer<SimMsg>, Pid, Tag)>>>;

/// Runs one seeded simulation and checks its properties.
pub fn simulate_processes(cfg: ProcSimConfig) -> ProcSimReport {
    let workers = cfg.workers.max(1);
    let pending: Pending = Arc::default();
    let p2 = pending.clone();
    let builder = ProcessRuntime::<SimMsg>::builder()
        .workers(workers)
        .event_budget(cfg.event_budget)
        // Simulated time: the clock moves only when the simulator moves it.
        .start_paused(true)
        .handler("ext", move |req| {
            lock(&p2).push((req.completer, req.pid, req.tag));
        });
    let b: Builder<SimMsg> = builder;
    let (inner, owned) = Inner::new(&b);
    let log: Shared = Arc::new(Mutex::new(Log {
        internal_left: cfg.internal_messages,
        digest: 0xcbf2_9ce4_8422_2325,
        ..Log::default()
    }));
    let mut rng = XorShift64::new(cfg.seed.max(1));
    CLOCK.with(|c| c.set(0));
    let mut ws: Vec<ProcWorker<SimMsg>> = owned
        .into_iter()
        .enumerate()
        .map(|(id, (local, parker))| ProcWorker::new(&inner, id, local, parker, cfg.seed, clock))
        .collect();
    let mut state = vec![VState::Running; workers];
    for (id, w) in ws.iter_mut().enumerate() {
        if !sched::enter(w) {
            state[id] = VState::Exited;
        }
    }
    let handle = crate::process::ProcessHandle {
        inner: inner.clone(),
    };
    for i in 0..cfg.processes {
        let p = SimProc {
            id: i as u32,
            log: log.clone(),
            rng: XorShift64::new(cfg.seed.wrapping_mul(31).wrapping_add(i as u64 + 1)),
            out_seq: HashMap::new(),
            next_tag: 0,
            workload: cfg.workload,
            driver: inner.driver.clone(),
        };
        let pid = handle
            .spawn_with(SpawnOptions::default(), p, "sim", None)
            .expect("spawn");
        lock(&log).pids.push(pid);
    }
    let mut external_left = cfg.external_messages;
    let mut external_seq: HashMap<u32, u64> = HashMap::new();
    let mut done_tags: Vec<(Completer<SimMsg>, Pid, Tag)> = Vec::new();
    let mut violations = Vec::new();
    let mut moves = 0u64;
    let driver = inner.driver.clone();
    let start_ms = now_ms(&driver);
    // 0: running the workload; 1: shutting down (cancelled, waiting for
    // every close); 2: stopping the workers.
    let mut phase = 0;
    loop {
        if moves >= cfg.max_moves {
            violations.push(format!("step limit in phase {phase}"));
            break;
        }
        moves += 1;
        CLOCK.with(|c| c.set(moves * 100));
        let live: Vec<usize> = (0..workers)
            .filter(|&i| state[i] != VState::Exited)
            .collect();
        if live.is_empty() {
            break;
        }
        let completions_left = !lock(&pending).is_empty();
        let timers = driver.active_timers() > 0;
        // Simulated time: 1 ms on one move in four while a timer is pending
        // (no draw otherwise, so workloads without sleeps keep their
        // schedules).
        if timers && rng.next_usize(4) == 0 {
            driver.clock().advance(Duration::from_millis(1));
            lock(&log).hash(&[0xC1]);
        }
        let mut quiet = external_left == 0
            && !completions_left
            && live.iter().all(|&w| state[w] == VState::Parked);
        if quiet {
            // Everyone is parked and nothing outside can act: sweep the
            // parkers in id order; one holding a notification moves.
            for &w in &live {
                if let ParkResult::Notified = ws[w].core.parker.park_timeout(Duration::ZERO) {
                    let mut rec = Recorder { log: &log };
                    state[w] = if sched::after_park(&mut ws[w], ParkResult::Notified, &mut rec) {
                        VState::Running
                    } else {
                        VState::Exited
                    };
                    quiet = false;
                    break;
                }
            }
            if !quiet {
                continue;
            }
            // Nothing can move but time: the clock goes to the next timer,
            // and the first parked worker's timed park ends (the threaded
            // loop parks until the next timer).
            if let Some(next) = driver.next_expiration().filter(|_| timers) {
                driver.clock().advance_to(next);
                lock(&log).hash(&[0xC2]);
                let w = live[0];
                let mut rec = Recorder { log: &log };
                state[w] = if sched::after_park(&mut ws[w], ParkResult::TimedOut, &mut rec) {
                    VState::Running
                } else {
                    VState::Exited
                };
                continue;
            }
        }
        if quiet {
            match phase {
                0 => {
                    check_quiescent(&inner, &log, &mut violations);
                    // Shutdown, as `ProcessRuntime::shutdown` does it.
                    let cells: Vec<_> = {
                        let mut reg = lock(&inner.registry);
                        reg.accepting = false;
                        reg.slots.iter().filter_map(|s| s.cell.clone()).collect()
                    };
                    for c in &cells {
                        inner.cancel_cell(c, &mut Sink::Remote);
                    }
                    phase = 1;
                    continue;
                }
                1 => {
                    if lock(&inner.registry).open != 0 {
                        violations.push("shutdown: every worker parked with processes open".into());
                    }
                    let _ = inner.sched.gate.close();
                    inner.sched.initiate_done();
                    phase = 2;
                    continue;
                }
                _ => {
                    violations.push("workers parked after done".into());
                    break;
                }
            }
        }
        // Pick an actor: a live worker, the outside world, the completer.
        let outside = usize::from(external_left > 0 && phase == 0);
        let completer = usize::from(completions_left || !done_tags.is_empty());
        let pick = rng.next_usize(live.len() + outside + completer);
        if pick >= live.len() {
            if outside == 1 && pick == live.len() {
                let k = cfg.external_messages - external_left;
                let to = cfg
                    .workload
                    .outside_target(k)
                    .unwrap_or_else(|| rng.next_usize(cfg.processes) as u32);
                let seq = *external_seq.get(&to).unwrap_or(&0);
                let pid = lock(&log).pids[to as usize];
                if handle.send(pid, SimMsg { sender: 0, seq }).is_ok() {
                    external_seq.insert(to, seq + 1);
                    lock(&log).sent += 1;
                }
                external_left -= 1;
                lock(&log).hash(&[0xEE, to as u8]);
            } else {
                complete_one(&pending, &mut done_tags, &mut rng, &log, &mut violations);
            }
            continue;
        }
        let id = live[pick];
        let mut rec = Recorder { log: &log };
        match state[id] {
            VState::Running => {
                // A process handed over by the last step runs first, as in
                // the threaded loop; `take_handoff` always empties the slot,
                // so a worker never idles holding one.
                if let Some(cell) = ws[id].take_handoff() {
                    lock(&log).hash(&[0xAA, id as u8]);
                    tick_timers(&mut ws[id], &inner, &log, &mut violations);
                    super::run_cell(&mut ws[id], &inner, cell);
                    continue;
                }
                match sched::find_task(&mut ws[id], &mut rec) {
                    Found::Task(cell) => {
                        ws[id].handoffs = 0;
                        tick_timers(&mut ws[id], &inner, &log, &mut violations);
                        super::run_cell(&mut ws[id], &inner, cell)
                    }
                    // As the threaded loop: no work, so look at the timers.
                    Found::Idle => {
                        if fire_and_check(&mut ws[id], &inner, &log, &mut violations) == 0 {
                            state[id] = VState::Idle;
                        }
                    }
                    Found::Exit => state[id] = VState::Exited,
                }
            }
            VState::Idle => {
                if rng.next_usize(4) == 0 {
                    state[id] = VState::Running;
                    continue;
                }
                state[id] = match sched::prepare_park(&mut ws[id], &mut rec) {
                    ParkPrep::Sleep => VState::Parked,
                    ParkPrep::Resume => VState::Running,
                    ParkPrep::Exit => VState::Exited,
                };
            }
            VState::Parked => {
                let result = ws[id].core.parker.park_timeout(Duration::ZERO);
                // A parked worker sleeps until the next timer at most: one
                // that is due ends the park as a timeout would.
                let due = driver
                    .next_expiration()
                    .is_some_and(|next| next <= driver.clock().now());
                if matches!(result, ParkResult::Notified) || due {
                    state[id] = if sched::after_park(&mut ws[id], result, &mut rec) {
                        VState::Running
                    } else {
                        VState::Exited
                    };
                }
            }
            VState::Exited => unreachable!(),
        }
    }
    // 4. Shutdown terminated: every process closed exactly once.
    {
        let reg = lock(&inner.registry);
        if reg.open != 0 {
            violations.push(format!("{} processes never closed", reg.open));
        }
    }
    let log_now = lock(&log);
    for i in 0..cfg.processes as u32 {
        let n = log_now.closes.get(&i).copied().unwrap_or(0);
        if n != 1 {
            violations.push(format!("process {i} closed {n} times"));
        }
    }
    violations.extend(log_now.violations.iter().cloned());
    let report = ProcSimReport {
        moves,
        digest: log_now.digest,
        sent: log_now.sent,
        delivered: log_now.delivered,
        yields: log_now.yields,
        completions: log_now.completions,
        sleeps: log_now.sleeps_done,
        timed_sleeps: log_now.timed_sleeps,
        clock_ms: now_ms(&driver) - start_ms,
        steps: log_now.steps,
        violations,
    };
    drop(log_now);
    drop(ws);
    inner.driver.shutdown();
    report
}

/// A virtual worker's step count towards its next look at the timers, as
/// in the threaded loop: every `TIMER_CHECK_INTERVAL` steps.
fn tick_timers(
    w: &mut ProcWorker<SimMsg>,
    inner: &Inner<SimMsg>,
    log: &Shared,
    violations: &mut Vec<String>,
) {
    w.steps_since_timers += 1;
    if w.steps_since_timers >= TIMER_CHECK_INTERVAL {
        fire_and_check(w, inner, log, violations);
    }
}

/// Fires the due timers (the threaded loop's `fire_timers`), then checks
/// property 5 against the clock: every sleep yielded and not yet delivered
/// has fired (its tag is no longer pending) exactly when its deadline is
/// not after now.
fn fire_and_check(
    w: &mut ProcWorker<SimMsg>,
    inner: &Inner<SimMsg>,
    log: &Shared,
    violations: &mut Vec<String>,
) -> usize {
    let fired = fire_timers(w);
    let now = now_ms(&inner.driver);
    let log = lock(log);
    for (&(id, tag), &deadline) in &log.sleeps {
        let Some(cell) = inner.lookup(log.pids[id as usize]) else {
            continue;
        };
        let pending = lock(&cell.meta)
            .rare
            .as_ref()
            .is_some_and(|r| r.pending.contains(&tag));
        if pending && deadline <= now {
            violations.push(format!(
                "process {id} sleep {tag} due at {deadline} ms not fired by the timer pass at {now} ms"
            ));
        } else if !pending && deadline > now {
            violations.push(format!(
                "process {id} sleep {tag} due at {deadline} ms fired at {now} ms"
            ));
        }
    }
    fired
}

/// The completer's move: complete a random pending yield, or (1 in 4, if
/// any are done) try to complete a done one again, which must be refused.
fn complete_one(
    pending: &Pending,
    done: &mut Vec<(Completer<SimMsg>, Pid, Tag)>,
    rng: &mut XorShift64,
    log: &Shared,
    violations: &mut Vec<String>,
) {
    let mut p = lock(pending);
    if !done.is_empty() && (p.is_empty() || rng.next_usize(4) == 0) {
        let (c, pid, tag) = &done[rng.next_usize(done.len())];
        match c.complete(*pid, *tag, Ok(Outcome::Done)) {
            Err(CompleteError::NotPending) | Err(CompleteError::NoProcess) => {}
            Ok(()) => violations.push(format!(
                "a second completion of {pid} tag {tag} was accepted"
            )),
        }
        return;
    }
    if p.is_empty() {
        return;
    }
    let i = rng.next_usize(p.len());
    let (c, pid, tag) = p.swap_remove(i);
    drop(p);
    if let Err(e) = c.complete(pid, tag, Ok(Outcome::Done)) {
        violations.push(format!("completion of {pid} tag {tag} refused: {e}"));
    }
    lock(log).hash(&tag.to_le_bytes());
    done.push((c, pid, tag));
}

/// Property 1 and 3 at quiescence.
fn check_quiescent(inner: &Inner<SimMsg>, log: &Shared, violations: &mut Vec<String>) {
    let log = lock(log);
    if log.delivered != log.sent {
        violations.push(format!(
            "delivered {} of {} accepted messages",
            log.delivered, log.sent
        ));
    }
    if !log.yielded.is_empty() {
        violations.push(format!("{} yields never completed", log.yielded.len()));
    }
    drop(log);
    if inner.driver.active_timers() != 0 {
        violations.push(format!(
            "{} timers left in the wheel",
            inner.driver.active_timers()
        ));
    }
    let reg = lock(&inner.registry);
    for slot in &reg.slots {
        if let Some(cell) = &slot.cell {
            let life = cell.mailbox.snapshot().lifecycle();
            if !cell.mailbox.is_empty() || !matches!(life, Lifecycle::Idle | Lifecycle::Blocked) {
                violations.push(format!(
                    "{} holds {} events in {life:?} with every worker parked",
                    cell.pid,
                    cell.mailbox.len()
                ));
            }
        }
    }
}
