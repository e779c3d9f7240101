//! The process runtime: registry, cells, the worker loop's process runner,
//! command dispatch and shutdown. README.md beside this file has the
//! protocol as numbered steps.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant as StdInstant};

use magpie_core::affinity;
use magpie_core::park::Parker;
use magpie_core::process::{
    Mailbox, Refusal, SenderWait, Sent, Stepping, TransitionToCancelled, TransitionToClaimed,
    TransitionToNotified, TransitionToWaiting, Wait, WakeSenders, SENDER_RESUME_DEPTH,
};
use magpie_core::queue::Local;
use magpie_core::rng::XorShift64;
use magpie_core::sync::atomic::{AtomicU64, Ordering};
use magpie_core::CachePadded;

use super::{
    Command, CommandError, CompleteError, Event, ExitNotice, ExitReason, Outcome, Pid, Process,
    ProcessMetrics, RegisterError, Relation, SendError, SpawnError, SpawnOptions, Status, Tag,
};
use crate::config::DEFAULT_SEED;
use crate::metrics::WorkerMetrics;
use crate::sched::tiered::{IdleAction, TieredIdle};
use crate::sched::{
    self, Core, Found, LifoMode, LocalMode, NoopTrace, ParkPrep, Parts, Shared, Worker,
};
use crate::time::wheel::Key;
use crate::time::{Driver, Instant};
use crate::worker_id;

/// Events one step takes at most (the fairness budget); a process with more
/// queued goes to the back of its worker's ring and gets the rest later.
/// It is also the step's budget of reductions (README.md, "Back-pressure").
pub const DEFAULT_EVENT_BUDGET: usize = 64;
/// Back-pressure on a fast sender (README.md, "Back-pressure"): a send from
/// a step that leaves the receiver's mailbox holding more than this many
/// messages costs the sender `budget * depth / SEND_PUNISH_THRESHOLD`
/// reductions, so one such send spends the step's whole budget and
/// [`StepOutput::should_yield`] turns true (BEAM charges a sender
/// reductions in proportion to the receiver's queue length). 1024 messages
/// are 16 steps' worth of events for the receiver at the default budget, and
/// 32 queue blocks (24 KiB of 24-byte slots for `u64` messages).
pub const SEND_PUNISH_THRESHOLD: usize = 1024;
/// The depth a mailbox a sender was charged for must drain to before the
/// sender's steps start without the charge (README.md, "Back-pressure",
/// step 4): half the threshold, so a throttled sender then sends about
/// this many messages in one step instead of one message a step.
/// A sender throttled on a mailbox deeper than this, with no events of its
/// own, stops being scheduled until the mailbox drains to it (README.md,
/// "Back-pressure", step 6): `magpie_core::process::SENDER_RESUME_DEPTH`.
pub const SEND_RESUME_DEPTH: usize = SENDER_RESUME_DEPTH as usize;
// Not under loom, where the core's resume depth is 1 so that a model
// drains past it in two events.
#[cfg(not(loom))]
const _: () = assert!(SEND_RESUME_DEPTH == SEND_PUNISH_THRESHOLD / 2);
/// Steps between two looks at the timer wheel.
const TIMER_CHECK_INTERVAL: u32 = 61;
/// Slots of a worker's send cache (a power of two): the cell of PID `p` is
/// kept at slot `p.index & (SEND_CACHE - 1)`, so a worker sending to up to
/// this many processes with neighbouring slab indices (Savina's big: 1000)
/// never takes the registry lock after the first send to each.
const SEND_CACHE: usize = 1024;
const _: () = assert!(SEND_CACHE.is_power_of_two());
/// Consecutive hand-offs (README.md, "Hand-off") before the woken process
/// goes through the scheduler's LIFO slot instead, so `find_task` looks at
/// the global queue, shutdown and its tick budget at least this often.
const MAX_HANDOFFS: u32 = crate::sched::BUDGET_PER_TICK;

/// Messages a step sends to one process that are kept back and published
/// together, one `Mailbox::send_batch` for up to this many (README.md,
/// "Batched sends"): one admit, one claim, one ready store per block and
/// one notify for the lot instead of one of each per message.
const SEND_BATCH: usize = 32;

pub mod sim;

/// The messages a step sent to `to` after the first, not yet in its
/// mailbox (README.md, "Batched sends"). Open only for an unbounded
/// mailbox whose last send or flush was accepted; flushed when the step
/// sends to another process, cancels, links or monitors, when it holds
/// [`SEND_BATCH`] messages, and when the step returns.
struct SendBatch<M: Send + 'static> {
    to: Option<Pid>,
    msgs: Vec<Envelope<M>>,
    /// The depth of `to`'s mailbox after the last message published to it
    /// (its consumer may have taken some since: never less than the real
    /// depth while this step is the only sender). Plus `msgs.len()`, the
    /// depth the back-pressure charge uses for a message kept back.
    depth: u64,
}

impl<M: Send + 'static> Default for SendBatch<M> {
    fn default() -> Self {
        Self {
            to: None,
            msgs: Vec::new(),
            depth: 0,
        }
    }
}

/// A worker's cache of the cells its processes sent to, direct-mapped by
/// slab index: one array read and one PID compare per send, no hashing. A
/// slot holds the cell it was last filled with; a send to another PID of
/// the same slot replaces it. Empty (no allocation) until the first send.
struct SendCache<M: Send + 'static> {
    slots: Vec<Option<Arc<Cell<M>>>>,
}

impl<M: Send + 'static> Default for SendCache<M> {
    fn default() -> Self {
        Self { slots: Vec::new() }
    }
}

impl<M: Send + 'static> SendCache<M> {
    fn slot(pid: Pid) -> usize {
        pid.index as usize & (SEND_CACHE - 1)
    }

    /// The cached cell of `pid`: the slot's cell if it is `pid`'s (same
    /// index and generation).
    fn get(&self, pid: Pid) -> Option<&Arc<Cell<M>>> {
        self.slots
            .get(Self::slot(pid))?
            .as_ref()
            .filter(|c| c.pid == pid)
    }

    /// Caches `cell` in its slot, dropping what was there.
    fn insert(&mut self, cell: Arc<Cell<M>>) -> &Arc<Cell<M>> {
        if self.slots.is_empty() {
            self.slots.resize_with(SEND_CACHE, || None);
        }
        let slot = &mut self.slots[Self::slot(cell.pid)];
        slot.insert(cell)
    }

    /// Forgets `pid`'s cell (it refused as ended).
    fn remove(&mut self, pid: Pid) {
        if let Some(slot) = self.slots.get_mut(Self::slot(pid)) {
            if slot.as_ref().is_some_and(|c| c.pid == pid) {
                *slot = None;
            }
        }
    }
}

/// What a mailbox holds: a plain message inline, every other event boxed.
/// Plain messages are most of the traffic; inline they take
/// `size_of::<Envelope<u64>>()` = 24 bytes of a queue slot, where the whole
/// [`Event`] takes 64 (a call's `ReplyTo` and an exit notice are the large
/// variants), so a block of `BLOCK_CAP` slots, and the memory a flood of
/// queued messages writes, is 2.6 times smaller
/// (`plain_messages_travel_inline_in_24_bytes`).
pub(crate) enum Envelope<M: Send + 'static> {
    Message { from: Option<Pid>, msg: M },
    Other(Box<Event<M>>),
}

impl<M: Send + 'static> Envelope<M> {
    fn pack(event: Event<M>) -> Self {
        match event {
            Event::Message {
                from,
                msg,
                reply: None,
            } => Envelope::Message { from, msg },
            other => Envelope::Other(Box::new(other)),
        }
    }

    fn unpack(self) -> Event<M> {
        match self {
            Envelope::Message { from, msg } => Event::Message {
                from,
                msg,
                reply: None,
            },
            Envelope::Other(event) => *event,
        }
    }
}

/// Drops `v`, with no call when it is empty and unallocated: the step's
/// scratch `Vec`s are mostly that, and the out-of-line `drop_in_place` of
/// each was about 10-25 instructions a step (callgrind, ping-pong).
#[inline(always)]
fn drop_vec<T>(v: Vec<T>) {
    if v.capacity() == 0 {
        // No allocation and (capacity 0, so) no elements: nothing to drop.
        std::mem::forget(v);
    } else {
        drop(v);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic payload".to_string()
    }
}

// ---------------------------------------------------------------------------
// Cells and the registry
// ---------------------------------------------------------------------------

/// One process: its mailbox (core) holding its body, and its bookkeeping.
pub(crate) struct Cell<M: Send + 'static> {
    pid: Pid,
    /// The body lives in the mailbox, reached only through the `Stepping`
    /// token (core README, "The body"): a step takes no lock for it. `None`
    /// once the process ended: `end_process` moves it to `Rare::closing`
    /// for `close`.
    mailbox: Mailbox<Envelope<M>, Option<Body<M>>>,
    bound: Option<usize>,
    /// Depth in the spawn tree (0 for a process spawned from outside).
    depth: u32,
    meta: Mutex<Meta<M>>,
}

/// The token of a step (or of a forced close) of a process.
type Token<'a, M> = Stepping<'a, Envelope<M>, Option<Body<M>>>;

/// The process and what only its steps read and write.
struct Body<M: Send + 'static> {
    process: Box<dyn Process<M>>,
    /// A step has run (the first step runs even with no events).
    started: bool,
    cancel_delivered: bool,
    /// How the last step ended: `Yield` (keep running) means the next entry
    /// steps even with no events.
    last_wait: Wait,
    /// A send of an earlier step was charged for a deep mailbox, kept in
    /// `Rare::pressure`: each step starts by charging its depth again
    /// (README.md, "Back-pressure", step 4). In the body's padding.
    pressured: bool,
}

struct Meta<M: Send + 'static> {
    parent: Option<Pid>,
    live_children: usize,
    /// Ended, but a child is still open: `close` waits for the last child.
    close_pending: bool,
    /// What most processes never need, allocated on first use: an idle
    /// process that never yielded, linked, was watched or had a sender wait
    /// for room pays one pointer here (`benches/examples/process_idle_mem.rs`).
    rare: Option<Box<Rare<M>>>,
}

struct Rare<M: Send + 'static> {
    /// Tags yielded and not yet completed.
    pending: HashSet<Tag>,
    /// Set when the process ends; links and monitors added later are told
    /// at once.
    exited: Option<ExitReason>,
    links: Vec<Pid>,
    monitors: Vec<Pid>,
    /// Futures waiting for room in this bounded mailbox.
    send_waiters: Vec<Waker>,
    /// The body of an ended process, until its `close` runs (which takes
    /// it, so `close` runs once).
    closing: Option<Body<M>>,
    /// The mailbox a send of this process was last charged for (README.md,
    /// "Back-pressure"), while `Body::pressured`. Strong, so a throttled
    /// step reads its depth without touching its reference count (whose
    /// line the receiver's worker writes); cleared when the pressure lifts
    /// and when this process ends, so processes that flood each other leave
    /// no cycle behind.
    pressure: Option<Arc<Cell<M>>>,
    /// Throttled senders waiting for this mailbox to drain (README.md,
    /// "Back-pressure", step 6; core README, "Throttled senders", S1): each
    /// put itself here before setting `WAITERS`. Taken and woken by the
    /// step whose release drains the mailbox, and when this process ends.
    parked_senders: Vec<Arc<Cell<M>>>,
}

impl<M: Send + 'static> Default for Rare<M> {
    fn default() -> Self {
        Self {
            pending: HashSet::new(),
            exited: None,
            links: Vec::new(),
            monitors: Vec::new(),
            send_waiters: Vec::new(),
            closing: None,
            pressure: None,
            parked_senders: Vec::new(),
        }
    }
}

impl<M: Send + 'static> Meta<M> {
    fn rare(&mut self) -> &mut Rare<M> {
        self.rare.get_or_insert_with(Box::default)
    }

    fn exited(&self) -> Option<&ExitReason> {
        self.rare.as_ref()?.exited.as_ref()
    }

    /// Whether `tag` was pending; it is not any more.
    fn unpend(&mut self, tag: Tag) -> bool {
        self.rare.as_mut().is_some_and(|r| r.pending.remove(&tag))
    }

    fn take_send_waiters(&mut self) -> Vec<Waker> {
        self.rare
            .as_mut()
            .map(|r| std::mem::take(&mut r.send_waiters))
            .unwrap_or_default()
    }
}

impl<M: Send + 'static> fmt::Debug for Cell<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cell")
            .field("pid", &self.pid)
            .field("mailbox", &self.mailbox)
            .finish_non_exhaustive()
    }
}

struct Slot<M: Send + 'static> {
    generation: u32,
    /// Present from spawn until `close` ran.
    cell: Option<Arc<Cell<M>>>,
    /// The process ended: lookups fail even though `close` may not have run.
    exited: bool,
}

struct Registry<M: Send + 'static> {
    slots: Vec<Slot<M>>,
    free: Vec<u32>,
    names: HashMap<String, Pid>,
    /// Processes whose `close` has not run.
    open: usize,
    accepting: bool,
}

impl<M: Send + 'static> Registry<M> {
    fn lookup(&self, pid: Pid) -> Option<&Arc<Cell<M>>> {
        let slot = self.slots.get(pid.index as usize)?;
        if slot.generation != pid.generation || slot.exited {
            return None;
        }
        slot.cell.as_ref()
    }
}

// ---------------------------------------------------------------------------
// Shared state
// ---------------------------------------------------------------------------

/// A handler for one command kind: called on the worker right after the
/// step that yielded the command, with the [`Request`]. It must not block:
/// it completes later, from any thread, through the request's completer.
pub type Handler<M> = Arc<dyn Fn(Request<M>) + Send + Sync>;

/// A yielded custom command, as its handler receives it.
pub struct Request<M: Send + 'static> {
    /// The yielding process.
    pub pid: Pid,
    /// The tag it chose.
    pub tag: Tag,
    /// The command kind.
    pub kind: String,
    /// The command's input.
    pub input: M,
    /// Completes the command: `completer.complete(pid, tag, result)`.
    pub completer: Completer<M>,
}

impl<M: Send + 'static> fmt::Debug for Request<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("pid", &self.pid)
            .field("tag", &self.tag)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Counters {
    spawned: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
    panicked: AtomicU64,
    forced: AtomicU64,
    steps: AtomicU64,
    events: AtomicU64,
    sent: AtomicU64,
    batched: AtomicU64,
    refused: AtomicU64,
    high_water: AtomicU64,
    closed: AtomicU64,
}

impl Counters {
    // Relaxed throughout: statistics, read after the fact.
    fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// A counter of a worker's own set, on that worker: it is the only
    /// writer, so a load and a store keep the count exact without a locked
    /// read-modify-write (readers may see it a moment late).
    fn add_owned(c: &AtomicU64, n: u64) {
        c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }
}

pub(crate) struct Inner<M: Send + 'static> {
    sched: Shared<Arc<Cell<M>>>,
    registry: Mutex<Registry<M>>,
    /// Signalled when `open` reaches 0.
    all_closed: Condvar,
    handlers: HashMap<String, Handler<M>>,
    driver: Driver,
    budget: usize,
    /// One set per worker plus one (last) for every other thread, each on
    /// its own cache line: a worker's hot counters never share a line with
    /// another worker's.
    counters: Box<[CachePadded<Counters>]>,
    spin_iters: u32,
    park_timeout: Duration,
}

/// What one worker owns from the start: its ring and its parker.
type WorkerParts<M> = (Local<Arc<Cell<M>>>, Parker);

/// Where a process woken by the current operation goes: the current
/// worker's queues (`Local`, collected and pushed after the step, the first
/// into the LIFO slot), or the global queue (`Remote`).
enum Sink<'a, M: Send + 'static> {
    /// The worker's woken list and its id.
    Local(&'a mut Vec<Arc<Cell<M>>>, usize),
    Remote,
}

impl<M: Send + 'static> Inner<M> {
    /// The shared state and, per worker, the parts it owns.
    fn new(b: &Builder<M>) -> (Arc<Self>, Vec<WorkerParts<M>>) {
        let (sched, owned) = Shared::new(b.workers, 4, LifoMode::Owner, LocalMode::Ring);
        let inner = Arc::new(Inner {
            sched,
            registry: Mutex::new(Registry {
                slots: Vec::new(),
                free: Vec::new(),
                names: HashMap::new(),
                open: 0,
                accepting: true,
            }),
            all_closed: Condvar::new(),
            handlers: b.handlers.clone(),
            driver: if b.start_paused {
                Driver::new_paused()
            } else {
                Driver::new()
            },
            budget: b.budget,
            counters: (0..=b.workers)
                .map(|_| CachePadded::new(Counters::default()))
                .collect(),
            spin_iters: b.spin_iters,
            park_timeout: b.park_timeout,
        });
        // A timer that became the earliest wakes a parked worker so it
        // re-computes its sleep. Weak: the driver lives inside `inner`.
        let weak = Arc::downgrade(&inner);
        inner.driver.set_unparker(move || {
            if let Some(inner) = weak.upgrade() {
                inner.sched.notify_parked();
            }
        });
        (inner, owned)
    }

    /// The counters of the thread behind `sink`.
    #[inline(always)]
    fn ctr<'s>(&'s self, sink: &Sink<'_, M>) -> &'s Counters {
        match sink {
            Sink::Local(_, id) => &self.counters[*id],
            Sink::Remote => self.shared_ctr(),
        }
    }

    /// Adds `n` to the counter `field` of the thread behind `sink`.
    #[inline(always)]
    fn count(&self, sink: &Sink<'_, M>, field: fn(&Counters) -> &AtomicU64, n: u64) {
        match sink {
            // Only worker `id` builds a `Sink::Local` with its own id.
            Sink::Local(_, id) => Counters::add_owned(field(&self.counters[*id]), n),
            Sink::Remote => Counters::add(field(self.shared_ctr()), n),
        }
    }

    /// The counters of threads that are not workers (and of rare events).
    fn shared_ctr(&self) -> &Counters {
        &self.counters[self.counters.len() - 1]
    }

    #[inline(always)]
    fn schedule(&self, cell: Arc<Cell<M>>, sink: &mut Sink<'_, M>) {
        match sink {
            Sink::Local(v, _) => v.push(cell),
            Sink::Remote => self.schedule_remote(cell),
        }
    }

    fn schedule_remote(&self, cell: Arc<Cell<M>>) {
        let shared = &self.sched;
        if !shared.gate.try_spawn(1) {
            // The workers have stopped (after shutdown): the process is
            // closed by the forced phase; this entry is not needed.
            return;
        }
        if shared.inject.push(cell).is_err() {
            let _ = shared.gate.complete(1);
            return;
        }
        shared.notify_parked();
    }

    fn lookup(&self, pid: Pid) -> Option<Arc<Cell<M>>> {
        lock(&self.registry).lookup(pid).cloned()
    }

    /// After a send (one message or a batch) was admitted: raises the
    /// mailbox high-water mark and queues the process if the notify said
    /// so. Returns the mailbox's depth.
    #[inline(always)]
    fn sent(&self, cell: &Arc<Cell<M>>, sent: Sent, sink: &mut Sink<'_, M>) -> u64 {
        // A load first: the high-water line is written only when the mark
        // moves.
        let c = self.ctr(sink);
        if sent.depth > c.high_water.load(Ordering::Relaxed) {
            c.high_water.fetch_max(sent.depth, Ordering::Relaxed);
        }
        if sent.schedule {
            self.schedule(cell.clone(), sink);
        }
        sent.depth
    }

    /// Admits, pushes and notifies (core's producer protocol), and queues
    /// the process if the notify said so.
    #[inline(always)]
    fn deliver(
        &self,
        cell: &Arc<Cell<M>>,
        event: Envelope<M>,
        bounded: bool,
        sink: &mut Sink<'_, M>,
    ) -> Result<u64, (Envelope<M>, Refusal)> {
        let bound = if bounded { cell.bound } else { None };
        match cell.mailbox.send(event, bound) {
            Ok(sent) => Ok(self.sent(cell, sent, sink)),
            Err(r) => Err((r.value, r.reason)),
        }
    }

    fn send_message(
        &self,
        from: Option<Pid>,
        to: Pid,
        msg: M,
        sink: &mut Sink<'_, M>,
    ) -> Result<(), SendError<M>> {
        let Some(cell) = self.lookup(to) else {
            self.count(sink, |c| &c.refused, 1);
            return Err(SendError::NoProcess(msg));
        };
        self.send_to_cell(from, &cell, msg, sink).map(|_| ())
    }

    /// Sends `msg` to `cell`; `Ok` holds the mailbox's depth after it.
    #[inline(always)]
    fn send_to_cell(
        &self,
        from: Option<Pid>,
        cell: &Arc<Cell<M>>,
        msg: M,
        sink: &mut Sink<'_, M>,
    ) -> Result<u64, SendError<M>> {
        match self.deliver(cell, Envelope::Message { from, msg }, true, sink) {
            Ok(depth) => {
                self.count(sink, |c| &c.sent, 1);
                Ok(depth)
            }
            Err((ev, reason)) => {
                self.count(sink, |c| &c.refused, 1);
                let Envelope::Message { msg, .. } = ev else {
                    unreachable!("the refused event is the one sent")
                };
                Err(match reason {
                    Refusal::Full => SendError::Full(msg),
                    Refusal::Closed => SendError::NoProcess(msg),
                })
            }
        }
    }

    /// Completes `tag` of `pid` (the tag must be pending: a second
    /// completion is an error, not a second event).
    fn complete(
        &self,
        pid: Pid,
        tag: Tag,
        result: Result<Outcome<M>, CommandError>,
        sink: &mut Sink<'_, M>,
    ) -> Result<(), CompleteError> {
        let cell = self.lookup(pid).ok_or(CompleteError::NoProcess)?;
        if !lock(&cell.meta).unpend(tag) {
            return Err(CompleteError::NotPending);
        }
        let ev = Envelope::pack(Event::Completion { tag, result });
        self.deliver(&cell, ev, false, sink)
            .map(|_| ())
            .map_err(|_| CompleteError::NoProcess)
    }

    /// An immediate completion for a tag that was never made pending
    /// (a duplicate tag): delivered without touching the pending set.
    fn complete_unpending(
        &self,
        cell: &Arc<Cell<M>>,
        tag: Tag,
        err: CommandError,
        sink: &mut Sink<'_, M>,
    ) {
        let ev = Envelope::pack(Event::Completion {
            tag,
            result: Err(err),
        });
        let _ = self.deliver(cell, ev, false, sink);
    }

    fn cancel_cell(&self, cell: &Arc<Cell<M>>, sink: &mut Sink<'_, M>) {
        if cell.mailbox.cancel() == TransitionToCancelled::Schedule {
            self.schedule(cell.clone(), sink);
        }
    }

    fn spawn_cell(
        self: &Arc<Self>,
        parent: Option<&Arc<Cell<M>>>,
        mut process: Box<dyn Process<M>>,
        method: &str,
        input: Option<M>,
        opts: SpawnOptions,
        sink: &mut Sink<'_, M>,
    ) -> Result<Pid, SpawnError> {
        {
            let reg = lock(&self.registry);
            if !reg.accepting {
                return Err(SpawnError::ShuttingDown);
            }
            if let Some(name) = &opts.name {
                if reg
                    .names
                    .get(name)
                    .is_some_and(|p| reg.lookup(*p).is_some())
                {
                    return Err(SpawnError::NameTaken(name.clone()));
                }
            }
        }
        // `init` runs on the spawning thread, outside every lock.
        process.init(method, input).map_err(SpawnError::Init)?;
        let mut reg = lock(&self.registry);
        if !reg.accepting {
            drop(reg);
            // `init` succeeded, so `close` is owed.
            process.close();
            return Err(SpawnError::ShuttingDown);
        }
        let index = match reg.free.pop() {
            Some(i) => i,
            None => {
                reg.slots.push(Slot {
                    generation: 0,
                    cell: None,
                    exited: true,
                });
                (reg.slots.len() - 1) as u32
            }
        };
        let slot = &mut reg.slots[index as usize];
        let pid = Pid {
            index,
            generation: slot.generation,
        };
        let cell = Arc::new(Cell {
            pid,
            mailbox: Mailbox::with_body(Some(Body {
                process,
                started: false,
                cancel_delivered: false,
                last_wait: Wait::Idle,
                pressured: false,
            })),
            bound: opts.mailbox_bound,
            depth: parent.map_or(0, |p| p.depth + 1),
            meta: Mutex::new(Meta {
                parent: parent.map(|p| p.pid),
                live_children: 0,
                close_pending: false,
                rare: None,
            }),
        });
        slot.cell = Some(cell.clone());
        slot.exited = false;
        reg.open += 1;
        if let Some(name) = opts.name {
            reg.names.insert(name, pid);
        }
        drop(reg);
        if let Some(parent) = parent {
            lock(&parent.meta).live_children += 1;
        }
        Counters::add(&self.shared_ctr().spawned, 1);
        // A new mailbox is READY: this is its one run-queue entry.
        self.schedule(cell, sink);
        Ok(pid)
    }

    /// The process ended (its token completed it). Marks it exited in the
    /// registry, tells its parent, links and monitors, and closes it unless a
    /// child is still open.
    fn exit(
        self: &Arc<Self>,
        cell: &Arc<Cell<M>>,
        reason: ExitReason,
        value: Option<M>,
        sink: &mut Sink<'_, M>,
    ) {
        {
            let mut reg = lock(&self.registry);
            let idx = cell.pid.index as usize;
            if reg.slots[idx].generation == cell.pid.generation {
                reg.slots[idx].exited = true;
            }
            reg.names.retain(|_, p| *p != cell.pid);
        }
        let (links, monitors, parent, close_now) = {
            let mut meta = lock(&cell.meta);
            let rare = meta.rare();
            rare.exited = Some(reason.clone());
            rare.pending.clear();
            rare.pressure = None;
            let links = std::mem::take(&mut rare.links);
            let monitors = std::mem::take(&mut rare.monitors);
            let close_now = meta.live_children == 0;
            meta.close_pending = !close_now;
            (links, monitors, meta.parent, close_now)
        };
        for waker in lock(&cell.meta).take_send_waiters() {
            waker.wake();
        }
        let notify = |to: Pid, relation: Relation, value: Option<M>, sink: &mut Sink<'_, M>| {
            if let Some(target) = self.lookup(to) {
                let ev = Envelope::pack(Event::Exit(ExitNotice {
                    pid: cell.pid,
                    reason: reason.clone(),
                    relation,
                    value,
                }));
                let _ = self.deliver(&target, ev, false, sink);
            }
        };
        if let Some(p) = parent {
            notify(p, Relation::Child, value, sink);
        }
        for l in links {
            notify(l, Relation::Link, None, sink);
        }
        for m in monitors {
            notify(m, Relation::Monitor, None, sink);
        }
        if close_now {
            self.close_chain(cell.clone());
        }
    }

    /// Runs `close` for `cell`, then for every ancestor whose close was
    /// waiting for its last child.
    fn close_chain(&self, mut cell: Arc<Cell<M>>) {
        loop {
            self.run_close(&cell);
            let parent = lock(&cell.meta).parent;
            let Some(parent) = parent.and_then(|p| self.cell_for_close(p)) else {
                return;
            };
            let close_parent = {
                let mut meta = lock(&parent.meta);
                meta.live_children -= 1;
                meta.live_children == 0 && meta.close_pending
            };
            if !close_parent {
                return;
            }
            cell = parent;
        }
    }

    /// A cell by PID even if it has exited (but not been closed).
    fn cell_for_close(&self, pid: Pid) -> Option<Arc<Cell<M>>> {
        let reg = lock(&self.registry);
        let slot = reg.slots.get(pid.index as usize)?;
        if slot.generation != pid.generation {
            return None;
        }
        slot.cell.clone()
    }

    /// `close`, once (the body is taken out), then the slot is freed for
    /// reuse with the next generation.
    fn run_close(&self, cell: &Arc<Cell<M>>) {
        let body = lock(&cell.meta)
            .rare
            .as_mut()
            .and_then(|r| r.closing.take());
        let Some(mut body) = body else { return };
        let _ = panic::catch_unwind(AssertUnwindSafe(|| body.process.close()));
        drop(body);
        Counters::add(&self.shared_ctr().closed, 1);
        let mut reg = lock(&self.registry);
        let idx = cell.pid.index as usize;
        let slot = &mut reg.slots[idx];
        if slot.generation == cell.pid.generation {
            slot.cell = None;
            slot.exited = true;
            slot.generation = slot.generation.wrapping_add(1);
            reg.free.push(cell.pid.index);
        }
        reg.open -= 1;
        if reg.open == 0 {
            self.all_closed.notify_all();
        }
    }

    fn metrics(&self) -> ProcessMetrics {
        let mut m = ProcessMetrics::default();
        for c in self.counters.iter() {
            let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
            m.spawned += r(&c.spawned);
            m.completed += r(&c.completed);
            m.failed += r(&c.failed);
            m.panicked += r(&c.panicked);
            m.forced += r(&c.forced);
            m.steps += r(&c.steps);
            m.events += r(&c.events);
            m.sent += r(&c.sent);
            m.batched += r(&c.batched);
            m.refused += r(&c.refused);
            m.mailbox_high_water = m.mailbox_high_water.max(r(&c.high_water));
            m.closed += r(&c.closed);
        }
        m
    }
}

// ---------------------------------------------------------------------------
// StepOutput
// ---------------------------------------------------------------------------

/// What a step writes: commands to dispatch, and the status. It also sends
/// messages, links, monitors and cancels right away, so their errors come
/// back to the step. Processes woken by its sends run on the same worker
/// (the first one in the LIFO slot).
pub struct StepOutput<'a, M: Send + 'static> {
    cell: &'a Arc<Cell<M>>,
    inner: &'a Arc<Inner<M>>,
    woken: &'a mut Vec<Arc<Cell<M>>>,
    /// The worker's id (its counters) and its cache of PIDs it sent to.
    worker: usize,
    cache: &'a mut SendCache<M>,
    /// Messages kept back to publish together.
    batch: &'a mut SendBatch<M>,
    commands: Vec<(Tag, Command<M>)>,
    status: Status<M>,
    /// Reductions this step has used: one per event it was given, plus the
    /// back-pressure charge of its sends (README.md, "Back-pressure").
    reductions: usize,
    /// The deepest mailbox a send of this step was charged for.
    pressure: Option<(u64, Arc<Cell<M>>)>,
}

impl<M: Send + 'static> fmt::Debug for StepOutput<'_, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StepOutput")
            .field("pid", &self.cell.pid)
            .field("commands", &self.commands.len())
            .finish_non_exhaustive()
    }
}

impl<'a, M: Send + 'static> StepOutput<'a, M> {
    /// This process's PID.
    pub fn pid(&self) -> Pid {
        self.cell.pid
    }

    /// Yields `command` under `tag`; its completion arrives as
    /// [`Event::Completion`] with the same tag. A tag still pending gets an
    /// immediate [`CommandError::DuplicateTag`] completion.
    pub fn yield_command(&mut self, tag: Tag, command: Command<M>) {
        self.commands.push((tag, command));
    }

    /// `yield_command(tag, Command::Sleep(d))`.
    pub fn sleep(&mut self, tag: Tag, d: Duration) {
        self.yield_command(tag, Command::Sleep(d));
    }

    /// `yield_command(tag, Command::Call { to, msg })`.
    pub fn call(&mut self, tag: Tag, to: Pid, msg: M) {
        self.yield_command(tag, Command::Call { to, msg });
    }

    /// Spawns a child (a `Spawn` command): completes with its PID.
    pub fn spawn_child<P: Process<M>>(
        &mut self,
        tag: Tag,
        process: P,
        method: &str,
        input: Option<M>,
    ) {
        self.yield_command(
            tag,
            Command::Spawn {
                process: Box::new(process),
                method: method.to_string(),
                input,
                mailbox_bound: None,
            },
        );
    }

    /// Sends `msg` to `to`. Refused at once if `to` has ended or its
    /// bounded mailbox is full (a step never waits). Messages to one
    /// process in a row after the first may be kept back and published
    /// together, before the step's next send to another process, cancel,
    /// link or monitor, and before the step ends (README.md, "Batched
    /// sends"); if `to` ends meanwhile they are dropped, as messages it
    /// accepted and never read would be.
    ///
    /// A send that leaves `to`'s mailbox holding more than
    /// [`SEND_PUNISH_THRESHOLD`] messages costs this step its budget (see
    /// [`should_yield`](Self::should_yield)); the message is sent all the
    /// same.
    pub fn send(&mut self, to: Pid, msg: M) -> Result<(), SendError<M>> {
        let from = Some(self.cell.pid);
        if self.batch.to == Some(to) {
            self.batch.msgs.push(Envelope::Message { from, msg });
            let depth = self.batch.depth + self.batch.msgs.len() as u64;
            self.charge(depth, to);
            if self.batch.msgs.len() >= SEND_BATCH {
                self.flush_sends();
            }
            return Ok(());
        }
        // Another process: what was kept back for the last one goes first.
        self.end_sends();
        // The worker keeps the cells it sent to, so a conversation does not
        // take the registry lock per message. A cached cell of a process that
        // has ended refuses at its admission word (CLOSED is set before the
        // registry marks the exit), so the cache never delivers to a dead
        // process, and a cell is one process: a reused slot is a new cell.
        let cell = match self.cache.get(to) {
            Some(cell) => cell,
            None => {
                let Some(cell) = self.inner.lookup(to) else {
                    Counters::add_owned(&self.inner.counters[self.worker].refused, 1);
                    return Err(SendError::NoProcess(msg));
                };
                self.cache.insert(cell)
            }
        };
        let unbounded = cell.bound.is_none();
        let mut sink = Sink::Local(self.woken, self.worker);
        match self.inner.send_to_cell(from, cell, msg, &mut sink) {
            Ok(depth) => {
                if unbounded {
                    // Accepted by an unbounded mailbox: the next messages
                    // to `to` can wait for a batch.
                    self.batch.to = Some(to);
                    self.batch.depth = depth;
                }
                self.charge(depth, to);
                Ok(())
            }
            Err(e) => {
                if let SendError::NoProcess(_) = e {
                    self.cache.remove(to);
                }
                Err(e)
            }
        }
    }

    /// The back-pressure charge of a message that leaves its receiver's
    /// mailbox `depth` deep (README.md, "Back-pressure"): nothing up to
    /// [`SEND_PUNISH_THRESHOLD`], past it `budget * depth / threshold`
    /// reductions, so at least the step's whole budget.
    #[inline]
    fn charge(&mut self, depth: u64, to: Pid) {
        if depth > SEND_PUNISH_THRESHOLD as u64 {
            self.charge_deep(depth, to);
        }
    }

    #[cold]
    fn charge_deep(&mut self, depth: u64, to: Pid) {
        self.reductions = self
            .reductions
            .saturating_add(send_charge(self.inner.budget, depth));
        if self.pressure.as_ref().is_none_or(|(d, _)| depth > *d) {
            // `to` was just sent to, so the cache holds its cell.
            if let Some(cell) = self.cache.get(to) {
                self.pressure = Some((depth, cell.clone()));
            }
        }
    }

    /// Whether this step has used its budget of reductions: one per event
    /// it was given, and a send's back-pressure charge (a send that leaves
    /// its receiver holding more than [`SEND_PUNISH_THRESHOLD`] messages
    /// spends the whole budget). Steps are not preempted, so a step that
    /// sends in a loop asks this, stops, and calls
    /// [`keep_running`](Self::keep_running): it goes to the back of the
    /// queue and the receiver drains meanwhile, as a BEAM process that ran
    /// out of reductions is scheduled out. Sends are never refused, delayed
    /// or reordered by it.
    pub fn should_yield(&self) -> bool {
        self.reductions >= self.inner.budget
    }

    /// Reductions left in this step's budget (0 once
    /// [`should_yield`](Self::should_yield) is true).
    pub fn budget_left(&self) -> usize {
        self.inner.budget.saturating_sub(self.reductions)
    }

    /// Publishes the messages kept back (README.md, "Batched sends"). The
    /// batch stays open if its mailbox accepted them.
    #[inline]
    fn flush_sends(&mut self) {
        // Inline, so a step that kept nothing back (a conversation) pays
        // one compare.
        if !self.batch.msgs.is_empty() {
            self.flush_kept();
        }
    }

    #[inline(never)]
    fn flush_kept(&mut self) {
        // Messages are kept only while `to` is set, and `to` is cleared
        // only after a flush or a refusal, both of which empty them.
        let Some(to) = self.batch.to else {
            unreachable!("messages kept back with no target")
        };
        let mut sink = Sink::Local(self.woken, self.worker);
        match flush_batch(self.inner, self.cache, to, &mut self.batch.msgs, &mut sink) {
            Some(depth) => self.batch.depth = depth,
            None => self.batch.to = None,
        }
    }

    /// Publishes what is kept back and closes the batch: the step is over,
    /// or it turned to another process.
    #[inline]
    fn end_sends(&mut self) {
        self.flush_sends();
        self.batch.to = None;
    }

    /// Requests cancellation of `pid` (it gets [`Event::Cancel`]).
    pub fn cancel(&mut self, pid: Pid) -> bool {
        // Messages sent before the cancel arrive before it.
        self.flush_sends();
        let Some(cell) = self.inner.lookup(pid) else {
            return false;
        };
        let mut sink = Sink::Local(self.woken, self.worker);
        self.inner.cancel_cell(&cell, &mut sink);
        true
    }

    /// Links this process and `pid`: each gets an [`Event::Exit`] when the
    /// other ends. If `pid` has ended already, the notice comes at once.
    pub fn link(&mut self, pid: Pid) {
        self.watch(pid, Relation::Link);
    }

    /// Monitors `pid`: this process gets an [`Event::Exit`] when it ends.
    pub fn monitor(&mut self, pid: Pid) {
        self.watch(pid, Relation::Monitor);
    }

    fn watch(&mut self, pid: Pid, relation: Relation) {
        // Messages sent before a link arrive before any exit notice it
        // causes.
        self.flush_sends();
        let me = self.cell.pid;
        let reason = match self.inner.cell_for_close(pid) {
            Some(target) => {
                let mut meta = lock(&target.meta);
                match meta.exited() {
                    Some(r) => Some(r.clone()),
                    None => {
                        match relation {
                            Relation::Link => meta.rare().links.push(me),
                            _ => meta.rare().monitors.push(me),
                        }
                        None
                    }
                }
            }
            None => Some(ExitReason::NoProcess),
        };
        match reason {
            None => {
                if relation == Relation::Link {
                    lock(&self.cell.meta).rare().links.push(pid);
                }
            }
            Some(reason) => {
                let ev = Envelope::pack(Event::Exit(ExitNotice {
                    pid,
                    reason,
                    relation,
                    value: None,
                }));
                let mut sink = Sink::Local(self.woken, self.worker);
                let _ = self.inner.deliver(self.cell, ev, false, &mut sink);
            }
        }
    }

    /// The PID registered under `name`.
    pub fn whereis(&self, name: &str) -> Option<Pid> {
        whereis(self.inner, name)
    }

    /// A completion handle, for handing to code outside the step.
    pub fn completer(&self) -> Completer<M> {
        Completer {
            inner: Arc::downgrade(self.inner),
        }
    }

    /// Sets the status: wait for messages (the default).
    pub fn idle(&mut self) {
        self.status = Status::Idle;
    }

    /// Sets the status: wait for yield completions.
    pub fn block(&mut self) {
        self.status = Status::Blocked;
    }

    /// Sets the status: run again after the other ready processes.
    pub fn keep_running(&mut self) {
        self.status = Status::Running;
    }

    /// Sets the status: done, with `value` for the parent.
    pub fn complete(&mut self, value: Option<M>) {
        self.status = Status::Complete(value);
    }

    /// Sets the status: failed with `error`.
    pub fn fail(&mut self, error: impl Into<String>) {
        self.status = Status::Fail(error.into());
    }

    /// Sets the status.
    pub fn set_status(&mut self, status: Status<M>) {
        self.status = status;
    }
}

/// The back-pressure charge of a send that leaves its receiver `depth`
/// deep (README.md, "Back-pressure"), in reductions: 0 up to
/// [`SEND_PUNISH_THRESHOLD`], past it `budget * depth / threshold`.
fn send_charge(budget: usize, depth: u64) -> usize {
    if depth <= SEND_PUNISH_THRESHOLD as u64 {
        return 0;
    }
    let cost = (budget as u64).saturating_mul(depth) / SEND_PUNISH_THRESHOLD as u64;
    usize::try_from(cost).unwrap_or(usize::MAX)
}

/// The charge a step of `cell` starts with (README.md, "Back-pressure",
/// step 4): at least the whole budget while the mailbox an earlier step's
/// send was charged for is deeper than [`SEND_RESUME_DEPTH`] (more if it is
/// past the threshold still). A mailbox drained to that depth, or closed,
/// lifts the pressure.
#[cold]
fn carried_charge<M: Send + 'static>(cell: &Cell<M>, budget: usize, pressured: &mut bool) -> usize {
    let mut meta = lock(&cell.meta);
    let Some(rare) = meta.rare.as_mut() else {
        *pressured = false;
        return 0;
    };
    let depth = rare
        .pressure
        .as_ref()
        .filter(|t| !t.mailbox.is_closed())
        .map_or(0, |t| t.mailbox.len());
    if depth > SEND_RESUME_DEPTH {
        return budget.max(send_charge(budget, depth as u64));
    }
    rare.pressure = None;
    *pressured = false;
    0
}

/// The mailbox `cell`'s steps are charged for (`Rare::pressure`), if any.
#[cold]
fn throttled_target<M: Send + 'static>(cell: &Cell<M>) -> Option<Arc<Cell<M>>> {
    lock(&cell.meta).rare.as_ref()?.pressure.clone()
}

/// Publishes `msgs` (messages to `to` a step kept back) with one
/// `Mailbox::send_batch`, and returns the mailbox's depth after them.
/// `None`: `to` has ended; the messages are dropped, as messages it had
/// accepted and not read are (the step was told they were sent), and the
/// cache forgets it.
fn flush_batch<M: Send + 'static>(
    inner: &Inner<M>,
    cache: &mut SendCache<M>,
    to: Pid,
    msgs: &mut Vec<Envelope<M>>,
    sink: &mut Sink<'_, M>,
) -> Option<u64> {
    let n = msgs.len() as u64;
    // The batch's cell is cached: only a send to another PID replaces it,
    // and that send flushes first. A registry lookup covers the rest.
    let cell = match cache.get(to) {
        Some(cell) => cell,
        None => match inner.lookup(to) {
            Some(cell) => cache.insert(cell),
            None => {
                msgs.clear();
                inner.count(sink, |c| &c.sent, n);
                inner.count(sink, |c| &c.batched, n);
                return None;
            }
        },
    };
    inner.count(sink, |c| &c.sent, n);
    inner.count(sink, |c| &c.batched, n);
    match cell.mailbox.send_batch(msgs) {
        Ok(sent) => Some(inner.sent(cell, sent, sink)),
        Err(_) => {
            msgs.clear();
            cache.remove(to);
            None
        }
    }
}

fn whereis<M: Send + 'static>(inner: &Inner<M>, name: &str) -> Option<Pid> {
    let reg = lock(&inner.registry);
    let pid = *reg.names.get(name)?;
    reg.lookup(pid).map(|_| pid)
}

// ---------------------------------------------------------------------------
// Completer and ReplyTo
// ---------------------------------------------------------------------------

/// A thread-safe handle that completes yielded commands:
/// `complete(pid, tag, result)`. Cheap to clone. Completing a tag that is
/// not pending (a second completion) is an error, not an event.
pub struct Completer<M: Send + 'static> {
    inner: Weak<Inner<M>>,
}

impl<M: Send + 'static> Clone for Completer<M> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<M: Send + 'static> fmt::Debug for Completer<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completer").finish_non_exhaustive()
    }
}

impl<M: Send + 'static> Completer<M> {
    /// Delivers the completion of `tag` to `pid`.
    pub fn complete(
        &self,
        pid: Pid,
        tag: Tag,
        result: Result<Outcome<M>, CommandError>,
    ) -> Result<(), CompleteError> {
        let inner = self.inner.upgrade().ok_or(CompleteError::NoProcess)?;
        inner.complete(pid, tag, result, &mut Sink::Remote)
    }
}

/// The way back to a caller ([`Command::Call`]). Reply with
/// [`ReplyTo::reply`]; dropped unanswered (also when the callee ends with the
/// request still queued), it completes the call with
/// [`CommandError::NoReply`], so a caller never waits for a callee that is
/// gone.
pub struct ReplyTo<M: Send + 'static> {
    completer: Completer<M>,
    caller: Pid,
    tag: Tag,
    answered: bool,
}

impl<M: Send + 'static> fmt::Debug for ReplyTo<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplyTo")
            .field("caller", &self.caller)
            .field("tag", &self.tag)
            .finish()
    }
}

impl<M: Send + 'static> ReplyTo<M> {
    /// The calling process.
    pub fn caller(&self) -> Pid {
        self.caller
    }

    /// Answers the call.
    pub fn reply(mut self, msg: M) -> Result<(), CompleteError> {
        self.answered = true;
        self.completer
            .complete(self.caller, self.tag, Ok(Outcome::Reply(msg)))
    }
}

impl<M: Send + 'static> Drop for ReplyTo<M> {
    fn drop(&mut self) {
        if !self.answered {
            let _ = self
                .completer
                .complete(self.caller, self.tag, Err(CommandError::NoReply));
        }
    }
}

/// Completes a `Sleep` when the timer wheel fires it, then frees its wheel
/// entry (a fired entry stays in the wheel until its owner removes it).
struct SleepWake<M: Send + 'static> {
    completer: Completer<M>,
    driver: Driver,
    pid: Pid,
    tag: Tag,
    /// The wheel entry once registered, and whether the wake came first.
    entry: Mutex<(Option<Key>, bool)>,
}

impl<M: Send + 'static> SleepWake<M> {
    /// Records the entry; frees it at once if the wake already ran.
    fn registered(&self, key: Key) {
        let mut e = lock(&self.entry);
        if e.1 {
            drop(e);
            self.driver.cancel(key);
        } else {
            e.0 = Some(key);
        }
    }
}

impl<M: Send + 'static> Wake for SleepWake<M> {
    fn wake(self: Arc<Self>) {
        let _ = self
            .completer
            .complete(self.pid, self.tag, Ok(Outcome::Done));
        let key = {
            let mut e = lock(&self.entry);
            e.1 = true;
            e.0.take()
        };
        // `Driver::process` wakes outside its lock, so this may take it.
        if let Some(key) = key {
            self.driver.cancel(key);
        }
    }
}

// ---------------------------------------------------------------------------
// The public runtime
// ---------------------------------------------------------------------------

/// Builds a [`ProcessRuntime`].
pub struct Builder<M: Send + 'static> {
    workers: usize,
    budget: usize,
    seed: u64,
    handlers: HashMap<String, Handler<M>>,
    spin_iters: u32,
    park_timeout: Duration,
    start_paused: bool,
}

impl<M: Send + 'static> fmt::Debug for Builder<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("workers", &self.workers)
            .field("budget", &self.budget)
            .field("handlers", &self.handlers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl<M: Send + 'static> Builder<M> {
    /// Worker threads (default: the available cores). At least 1.
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n;
        self
    }

    /// Events one step takes at most (default [`DEFAULT_EVENT_BUDGET`]). At
    /// least 1.
    pub fn event_budget(mut self, n: usize) -> Self {
        self.budget = n.max(1);
        self
    }

    /// Seed of the workers' victim choice.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Start the timer clock paused (tests).
    pub fn start_paused(mut self, paused: bool) -> Self {
        self.start_paused = paused;
        self
    }

    /// Registers `handler` for `Command::Custom { kind, .. }`.
    pub fn handler(
        mut self,
        kind: impl Into<String>,
        handler: impl Fn(Request<M>) + Send + Sync + 'static,
    ) -> Self {
        self.handlers.insert(kind.into(), Arc::new(handler));
        self
    }

    /// Starts the workers.
    pub fn build(self) -> io::Result<ProcessRuntime<M>> {
        if self.workers == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "workers must be at least 1",
            ));
        }
        ProcessRuntime::start(self)
    }
}

/// A runtime of processes on magpie's worker loop. Dropping it shuts it
/// down at once (timeout zero).
pub struct ProcessRuntime<M: Send + 'static> {
    handle: ProcessHandle<M>,
    threads: Vec<thread::JoinHandle<WorkerMetrics>>,
}

/// A cloneable handle for spawning, sending and registering from anywhere.
pub struct ProcessHandle<M: Send + 'static> {
    inner: Arc<Inner<M>>,
}

impl<M: Send + 'static> Clone for ProcessHandle<M> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<M: Send + 'static> fmt::Debug for ProcessHandle<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessHandle")
            .field("workers", &self.inner.sched.workers)
            .finish_non_exhaustive()
    }
}

impl<M: Send + 'static> fmt::Debug for ProcessRuntime<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessRuntime")
            .field("workers", &self.inner().sched.workers)
            .finish_non_exhaustive()
    }
}

/// What [`ProcessRuntime::shutdown`] did.
#[derive(Debug, Default)]
pub struct ShutdownReport {
    /// Processes still open at the timeout, closed by force (children
    /// before parents).
    pub forced: Vec<Pid>,
    /// Processes whose step was still running on a worker at the timeout:
    /// their `close` could not run (the worker thread was left detached).
    pub stuck: Vec<Pid>,
    /// The counters at the end.
    pub metrics: ProcessMetrics,
}

impl<M: Send + 'static> ProcessRuntime<M> {
    /// A [`Builder`] with the defaults.
    pub fn builder() -> Builder<M> {
        Builder {
            workers: affinity::available_cores(),
            budget: DEFAULT_EVENT_BUDGET,
            seed: DEFAULT_SEED,
            handlers: HashMap::new(),
            spin_iters: 200,
            park_timeout: Duration::from_micros(200),
            start_paused: false,
        }
    }

    fn inner(&self) -> &Arc<Inner<M>> {
        &self.handle.inner
    }

    fn start(b: Builder<M>) -> io::Result<Self> {
        let (inner, owned) = Inner::new(&b);
        let handle = ProcessHandle { inner };
        let mut threads = Vec::with_capacity(b.workers);
        for (id, (local, parker)) in owned.into_iter().enumerate() {
            let inner = handle.inner.clone();
            let seed = b.seed;
            let spawned = thread::Builder::new()
                .name(format!("magpie-proc-{id}"))
                .spawn(move || worker_main(inner, id, local, parker, seed));
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => {
                    let rt = ProcessRuntime { handle, threads };
                    drop(rt);
                    return Err(e);
                }
            }
        }
        Ok(ProcessRuntime { handle, threads })
    }

    /// A cloneable handle.
    pub fn handle(&self) -> &ProcessHandle<M> {
        &self.handle
    }

    /// [`ProcessHandle::spawn`].
    pub fn spawn<P: Process<M>>(
        &self,
        process: P,
        method: &str,
        input: Option<M>,
    ) -> Result<Pid, SpawnError> {
        self.handle.spawn(process, method, input)
    }

    /// [`ProcessHandle::spawn_with`].
    pub fn spawn_with<P: Process<M>>(
        &self,
        opts: SpawnOptions,
        process: P,
        method: &str,
        input: Option<M>,
    ) -> Result<Pid, SpawnError> {
        self.handle.spawn_with(opts, process, method, input)
    }

    /// [`ProcessHandle::send`].
    pub fn send(&self, to: Pid, msg: M) -> Result<(), SendError<M>> {
        self.handle.send(to, msg)
    }

    /// [`ProcessHandle::try_send`].
    pub fn try_send(&self, to: Pid, msg: M) -> Result<(), SendError<M>> {
        self.handle.try_send(to, msg)
    }

    /// The counters so far.
    pub fn metrics(&self) -> ProcessMetrics {
        self.inner().metrics()
    }

    /// Graceful shutdown: new spawns are refused; every live process gets
    /// [`Event::Cancel`]; the runtime waits up to `timeout` for all of them
    /// to end and close; then it stops the workers and closes the rest by
    /// force, deepest in the spawn tree first (children before parents),
    /// and reports them.
    pub fn shutdown(mut self, timeout: Duration) -> ShutdownReport {
        self.shutdown_inner(timeout)
    }

    fn shutdown_inner(&mut self, timeout: Duration) -> ShutdownReport {
        let inner = self.handle.inner.clone();
        let deadline = StdInstant::now() + timeout;
        // 1. No new processes; 2. cancel every live one.
        let live: Vec<Arc<Cell<M>>> = {
            let mut reg = lock(&inner.registry);
            reg.accepting = false;
            reg.slots
                .iter()
                .filter(|s| !s.exited)
                .filter_map(|s| s.cell.clone())
                .collect()
        };
        for cell in &live {
            inner.cancel_cell(cell, &mut Sink::Remote);
        }
        drop(live);
        // 3. Wait for every close, up to the deadline.
        {
            let mut reg = lock(&inner.registry);
            while reg.open > 0 {
                let now = StdInstant::now();
                if now >= deadline {
                    break;
                }
                reg = inner
                    .all_closed
                    .wait_timeout(reg, deadline - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
        // 4. Stop the workers. One still inside a step at the deadline is
        //    left detached.
        let _ = inner.sched.gate.close();
        inner.sched.initiate_done();
        let join_deadline = StdInstant::now().max(deadline) + Duration::from_millis(100);
        for t in self.threads.drain(..) {
            while !t.is_finished() && StdInstant::now() < join_deadline {
                thread::sleep(Duration::from_millis(1));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
        for cell in inner.sched.inject.drain() {
            drop(cell);
        }
        // 5. Force: close what is left, deepest first.
        let mut rest: Vec<Arc<Cell<M>>> = lock(&inner.registry)
            .slots
            .iter()
            .filter_map(|s| s.cell.clone())
            .collect();
        rest.sort_by_key(|c| std::cmp::Reverse(c.depth));
        let mut report = ShutdownReport::default();
        for cell in rest {
            match cell.mailbox.claim_for_close() {
                Ok(mut token) => {
                    let body = token.body().take();
                    // The workers are gone: senders throttled on it are
                    // forced too; only the list is dropped (no cycle left).
                    let _ = token.complete(drop);
                    {
                        let mut meta = lock(&cell.meta);
                        let rare = meta.rare();
                        rare.exited = Some(ExitReason::Forced);
                        rare.closing = body;
                        rare.pressure = None;
                        rare.parked_senders.clear();
                    }
                    Counters::add(&inner.shared_ctr().forced, 1);
                    inner.run_close(&cell);
                    report.forced.push(cell.pid);
                }
                Err(TransitionToClaimed::Complete) => {
                    // Ended, waiting for a child's close: the children came
                    // first in this order, so close it now.
                    inner.run_close(&cell);
                }
                Err(_) => report.stuck.push(cell.pid),
            }
        }
        inner.driver.shutdown();
        report.metrics = inner.metrics();
        report
    }
}

impl<M: Send + 'static> Drop for ProcessRuntime<M> {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            let _ = self.shutdown_inner(Duration::ZERO);
        }
    }
}

impl<M: Send + 'static> ProcessHandle<M> {
    /// Spawns `process` at entry point `method`. `init` runs here, on the
    /// calling thread; an unknown method is [`SpawnError::Init`].
    pub fn spawn<P: Process<M>>(
        &self,
        process: P,
        method: &str,
        input: Option<M>,
    ) -> Result<Pid, SpawnError> {
        self.spawn_with(SpawnOptions::default(), process, method, input)
    }

    /// [`spawn`](Self::spawn) with a mailbox bound and/or a name.
    pub fn spawn_with<P: Process<M>>(
        &self,
        opts: SpawnOptions,
        process: P,
        method: &str,
        input: Option<M>,
    ) -> Result<Pid, SpawnError> {
        self.inner.spawn_cell(
            None,
            Box::new(process),
            method,
            input,
            opts,
            &mut Sink::Remote,
        )
    }

    /// Sends `msg` to `to`. Fails at once (never waits) if `to` has ended, or
    /// if its bounded mailbox is full; the message is handed back. Same as
    /// [`try_send`](Self::try_send); [`send_wait`](Self::send_wait) waits for
    /// room instead.
    pub fn send(&self, to: Pid, msg: M) -> Result<(), SendError<M>> {
        self.inner.send_message(None, to, msg, &mut Sink::Remote)
    }

    /// Sends `msg` if `to`'s mailbox has room; else hands it back.
    pub fn try_send(&self, to: Pid, msg: M) -> Result<(), SendError<M>> {
        self.send(to, msg)
    }

    /// A future that sends `msg`, waiting while `to`'s bounded mailbox is
    /// full. Resolves with an error if `to` ends first.
    pub fn send_wait(&self, to: Pid, msg: M) -> SendWait<M> {
        SendWait {
            inner: self.inner.clone(),
            to,
            msg: Some(msg),
        }
    }

    /// Requests cancellation of `pid`. `false` if it has ended.
    pub fn cancel(&self, pid: Pid) -> bool {
        match self.inner.lookup(pid) {
            Some(cell) => {
                self.inner.cancel_cell(&cell, &mut Sink::Remote);
                true
            }
            None => false,
        }
    }

    /// Registers `name` for `pid`. A name held by an ended process is free.
    pub fn register(&self, name: &str, pid: Pid) -> Result<(), RegisterError> {
        let mut reg = lock(&self.inner.registry);
        if reg.lookup(pid).is_none() {
            return Err(RegisterError::NoProcess);
        }
        if let Some(old) = reg.names.get(name) {
            if reg.lookup(*old).is_some() {
                return Err(RegisterError::Taken);
            }
        }
        reg.names.insert(name.to_string(), pid);
        Ok(())
    }

    /// Removes `name`; returns the PID it named.
    pub fn unregister(&self, name: &str) -> Option<Pid> {
        lock(&self.inner.registry).names.remove(name)
    }

    /// The live process registered as `name`.
    pub fn whereis(&self, name: &str) -> Option<Pid> {
        whereis(&self.inner, name)
    }

    /// Whether `pid` is a live process.
    pub fn is_alive(&self, pid: Pid) -> bool {
        self.inner.lookup(pid).is_some()
    }

    /// A completion handle for command handlers.
    pub fn completer(&self) -> Completer<M> {
        Completer {
            inner: Arc::downgrade(&self.inner),
        }
    }

    /// The counters so far.
    pub fn metrics(&self) -> ProcessMetrics {
        self.inner.metrics()
    }
}

/// The future of [`ProcessHandle::send_wait`].
pub struct SendWait<M: Send + 'static> {
    inner: Arc<Inner<M>>,
    to: Pid,
    msg: Option<M>,
}

impl<M: Send + 'static> fmt::Debug for SendWait<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendWait").field("to", &self.to).finish()
    }
}

impl<M: Send + 'static> Unpin for SendWait<M> {}

impl<M: Send + 'static> Future for SendWait<M> {
    type Output = Result<(), SendError<M>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(msg) = self.msg.take() else {
            panic!("SendWait polled after it finished");
        };
        let Some(cell) = self.inner.lookup(self.to) else {
            Counters::add(&self.inner.shared_ctr().refused, 1);
            return Poll::Ready(Err(SendError::NoProcess(msg)));
        };
        let msg = match self
            .inner
            .send_message(None, self.to, msg, &mut Sink::Remote)
        {
            Err(SendError::Full(msg)) => msg,
            other => return Poll::Ready(other),
        };
        // Register, then try again: a step that frees room after our first
        // try takes the waiters after its release, so it sees this waker or
        // we see its room (README.md, "Bounded mailboxes").
        lock(&cell.meta)
            .rare()
            .send_waiters
            .push(cx.waker().clone());
        match self
            .inner
            .send_message(None, self.to, msg, &mut Sink::Remote)
        {
            Err(SendError::Full(msg)) => {
                self.msg = Some(msg);
                Poll::Pending
            }
            other => Poll::Ready(other),
        }
    }
}

// ---------------------------------------------------------------------------
// The worker
// ---------------------------------------------------------------------------

struct ProcWorker<M: Send + 'static> {
    core: Core<Arc<Cell<M>>>,
    rng: XorShift64,
    metrics: WorkerMetrics,
    inner: Arc<Inner<M>>,
    events: Vec<Event<M>>,
    woken: Vec<Arc<Cell<M>>>,
    cache: SendCache<M>,
    batch: SendBatch<M>,
    steps_since_timers: u32,
    /// The process the last step woke first, run next on this worker
    /// without a trip through the run queues (README.md, "Hand-off").
    next: Option<Arc<Cell<M>>>,
    /// Hand-offs since the last process `find_task` found.
    handoffs: u32,
}

impl<M: Send + 'static> ProcWorker<M> {
    fn new(
        inner: &Arc<Inner<M>>,
        id: usize,
        local: Local<Arc<Cell<M>>>,
        parker: Parker,
        seed: u64,
        clock: sched::ClockFn,
    ) -> Self {
        ProcWorker {
            core: Core::new(&inner.sched, id, local, parker, clock),
            rng: XorShift64::new(seed ^ (id as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            metrics: WorkerMetrics::default(),
            inner: inner.clone(),
            events: Vec::new(),
            woken: Vec::new(),
            cache: SendCache::default(),
            batch: SendBatch::default(),
            steps_since_timers: 0,
            next: None,
            handoffs: 0,
        }
    }

    /// The process to run next by hand-off, if there is one and the caps
    /// allow it; else the woken process goes to the scheduler's LIFO slot,
    /// where `find_task` gets it after its own checks. Always leaves `next`
    /// empty, so a worker never idles or parks holding a process.
    ///
    /// Only with an empty ring: processes waiting there get the LIFO
    /// slot's fairness (at most `MAX_LIFO_POLLS_PER_TICK` in a row), and
    /// the LIFO path's wake-on-hoard then has something to hand a thief.
    fn take_handoff(&mut self) -> Option<Arc<Cell<M>>> {
        let cell = self.next.take()?;
        if self.handoffs < MAX_HANDOFFS && self.core.local.is_empty() {
            self.handoffs += 1;
            return Some(cell);
        }
        self.parts().spawn_local(cell);
        None
    }
}

impl<M: Send + 'static> Worker for ProcWorker<M> {
    type Task = Arc<Cell<M>>;

    #[inline(always)]
    fn parts(&mut self) -> Parts<'_, Arc<Cell<M>>> {
        Parts {
            core: &mut self.core,
            shared: &self.inner.sched,
            rng: &mut self.rng,
            metrics: &mut self.metrics,
        }
    }
}

fn monotonic_ns() -> u64 {
    static EPOCH: std::sync::OnceLock<StdInstant> = std::sync::OnceLock::new();
    EPOCH.get_or_init(StdInstant::now).elapsed().as_nanos() as u64
}

fn worker_main<M: Send + 'static>(
    inner: Arc<Inner<M>>,
    id: usize,
    local: Local<Arc<Cell<M>>>,
    parker: Parker,
    seed: u64,
) -> WorkerMetrics {
    let _time = crate::time::enter(&inner.driver);
    let previous_id = worker_id::set_current_worker_id(Some(id));
    let mut w = ProcWorker::new(&inner, id, local, parker, seed, monotonic_ns);
    if sched::enter(&mut w) {
        run_loop(&mut w);
    }
    drop(w.next.take());
    while let Some(cell) = w.core.local.pop() {
        drop(cell);
    }
    drop(w.core.take_lifo());
    worker_id::set_current_worker_id(previous_id);
    w.metrics.clone()
}

fn run_loop<M: Send + 'static>(w: &mut ProcWorker<M>) {
    // One clone for the loop, not one per step: both workers bumping the
    // shared count each step would bounce its cache line between them.
    let inner = w.inner.clone();
    // The fixed spin, not `TieredIdle::adaptive`: a first look (under load
    // 12-14) had Savina's counting 1.3-1.5x slower with the adaptive
    // policy, whose parked second worker stops stealing the consumer
    // (sched/README.md, "Adaptive spinning").
    let mut idle = TieredIdle::new(w.inner.spin_iters, w.inner.park_timeout);
    let mut trace = NoopTrace;
    loop {
        if let Some(cell) = w.take_handoff() {
            w.steps_since_timers += 1;
            if w.steps_since_timers >= TIMER_CHECK_INTERVAL {
                fire_timers(w);
            }
            run_cell(w, &inner, cell);
            continue;
        }
        match sched::find_task(w, &mut trace) {
            Found::Task(cell) => {
                idle.on_work();
                w.handoffs = 0;
                w.steps_since_timers += 1;
                if w.steps_since_timers >= TIMER_CHECK_INTERVAL {
                    fire_timers(w);
                }
                run_cell(w, &inner, cell);
            }
            Found::Exit => return,
            Found::Idle => {
                if fire_timers(w) > 0 {
                    idle.on_work();
                    continue;
                }
                match idle.next_action() {
                    IdleAction::Spin => std::hint::spin_loop(),
                    IdleAction::Yield => thread::yield_now(),
                    IdleAction::Park(timeout) => match sched::prepare_park(w, &mut trace) {
                        ParkPrep::Resume => idle.on_work(),
                        ParkPrep::Exit => return,
                        ParkPrep::Sleep => {
                            let timeout = until_next_timer(&w.inner.driver)
                                .map_or(timeout, |t| t.min(timeout));
                            let result = w.core.parker.park_timeout(timeout);
                            if !sched::after_park(w, result, &mut trace) {
                                return;
                            }
                        }
                    },
                }
            }
        }
    }
}

fn fire_timers<M: Send + 'static>(w: &mut ProcWorker<M>) -> usize {
    w.steps_since_timers = 0;
    let driver = &w.inner.driver;
    let Some(next) = driver.next_expiration() else {
        return 0;
    };
    let now = driver.clock().now();
    if next > now {
        return 0;
    }
    driver.process(now)
}

fn until_next_timer(driver: &Driver) -> Option<Duration> {
    let next = driver.next_expiration()?;
    Some(next.saturating_duration_since(driver.clock().now()))
}

/// Runs one process entry: one step (README.md, "Worker").
fn run_cell<M: Send + 'static>(w: &mut ProcWorker<M>, inner: &Arc<Inner<M>>, cell: Arc<Cell<M>>) {
    let id = w.core.id;
    // 1. READY -> RUNNING, or a stale entry.
    let Some(mut token) = cell.mailbox.transition_to_running() else {
        return;
    };
    let mut events = std::mem::take(&mut w.events);
    events.clear();
    // The body and the step's own flags live in the mailbox, reached only
    // through the token (core README, "The body"): no lock.
    let cancelled = token.is_cancelled();
    let flags = token.body().as_mut().map(|body| {
        let first = !body.started;
        body.started = true;
        (first, cancelled && !body.cancel_delivered, body.last_wait)
    });
    let Some((first, cancel_new, last_wait)) = flags else {
        // Ended already (not reachable: the body leaves at COMPLETE, and a
        // COMPLETE process has no token); leave it as it was.
        drop_vec(std::mem::replace(&mut w.events, events));
        finish(w, &cell, token, Wait::Idle);
        return;
    };
    // 2. Take at most the budget of events: as many as were admitted when
    // the step began (`Mailbox::len`), so the step does not pay for a pop
    // that finds the queue empty. Every event whose notify came before
    // `transition_to_running` is counted (its admit happens before that
    // notify, which the transition acquired); later ones set NOTIFIED and
    // re-queue the process (core README, "Why no event is lost").
    let take = cell.mailbox.len().min(inner.budget);
    while events.len() < take {
        match token.pop() {
            Some(ev) => events.push(ev.unpack()),
            None => break,
        }
    }
    let budget_hit = events.len() >= inner.budget;
    // The cancel comes after the events queued before it, once the queue
    // has been drained: with the budget used up it waits for the next step.
    let cancel_now = cancel_new && !budget_hit;
    if cancel_now {
        events.push(Event::Cancel);
    }
    let waiters = if cell.bound.is_some() {
        token.release_popped();
        lock(&cell.meta).take_send_waiters()
    } else {
        Vec::new()
    };
    if events.is_empty() && !first && last_wait != Wait::Yield {
        // A spare wake (the event was taken by the step before): back to
        // sleep as it was, unless the last step asked to keep running.
        waiters.into_iter().for_each(Waker::wake);
        drop_vec(std::mem::replace(&mut w.events, events));
        finish(w, &cell, token, last_wait);
        return;
    }
    Counters::add_owned(&inner.counters[id].steps, 1);
    Counters::add_owned(&inner.counters[id].events, events.len() as u64);
    // 3. Step.
    // The send cache and batch are borrowed in place (no take and put
    // back: about 40 instructions a step by callgrind); `woken` is taken,
    // as the sink below needs it while `finish` needs the worker.
    let mut woken = std::mem::take(&mut w.woken);
    let (cache, batch) = (&mut w.cache, &mut w.batch);
    let mut out = StepOutput {
        cell: &cell,
        inner,
        woken: &mut woken,
        worker: id,
        cache,
        batch,
        commands: Vec::new(),
        status: Status::Idle,
        reductions: events.len(),
        pressure: None,
    };
    let body = token
        .body()
        .as_mut()
        .expect("the body was there at the start of the step");
    if cancel_now {
        body.cancel_delivered = true;
    }
    if body.pressured {
        let carried = carried_charge(&cell, inner.budget, &mut body.pressured);
        out.reductions = out.reductions.saturating_add(carried);
    }
    let process = &mut body.process;
    let result = panic::catch_unwind(AssertUnwindSafe(|| {
        process.step(events.drain(..), &mut out)
    }));
    // Messages the step kept back go out before anything else it caused
    // (its commands, its exit), also after a panic: they were sent.
    out.end_sends();
    if let Some((_, target)) = out.pressure.take() {
        // Cold: only a step charged for a deep mailbox gets here.
        lock(&cell.meta).rare().pressure = Some(target);
        body.pressured = true;
    }
    // Back-pressure step 6: a throttled step that asks to keep running
    // with every event it was given taken waits for the drain instead.
    let park = body.pressured
        && !budget_hit
        && matches!((&result, &out.status), (Ok(()), Status::Running))
        && throttled_target(&cell).is_some_and(|t| park_throttled(&cell, &t));
    // Moved out whole: no drop of an emptied `commands` left behind.
    let StepOutput {
        commands, status, ..
    } = out;
    let wait = match (&result, &status) {
        (Ok(()), Status::Blocked) => Some(Wait::Blocked),
        (Ok(()), Status::Running) => Some(Wait::Yield),
        (Ok(()), Status::Idle) => Some(Wait::Idle),
        _ => None,
    };
    if let Some(wait) = wait {
        body.last_wait = wait;
    }
    waiters.into_iter().for_each(Waker::wake);
    events.clear();
    drop_vec(std::mem::replace(&mut w.events, events));
    // 4. Dispatch, then end the step.
    let mut sink = Sink::Local(&mut woken, id);
    match result {
        Err(payload) => {
            Counters::add_owned(&inner.counters[id].failed, 1);
            Counters::add_owned(&inner.counters[id].panicked, 1);
            drop(commands);
            end_process(
                inner,
                &cell,
                token,
                ExitReason::Panicked(panic_text(&*payload)),
                None,
                &mut sink,
            );
        }
        Ok(()) => match status {
            Status::Complete(value) => {
                Counters::add_owned(&inner.counters[id].completed, 1);
                dispatch(inner, &cell, commands, &mut sink);
                end_process(inner, &cell, token, ExitReason::Completed, value, &mut sink);
            }
            Status::Fail(e) => {
                Counters::add_owned(&inner.counters[id].failed, 1);
                end_process(inner, &cell, token, ExitReason::Failed(e), None, &mut sink);
            }
            _ => {
                dispatch(inner, &cell, commands, &mut sink);
                let wait = if budget_hit {
                    Wait::Yield
                } else if park {
                    // `last_wait` stays Yield: the wake without an event
                    // steps it.
                    Wait::Idle
                } else {
                    wait.unwrap_or(Wait::Idle)
                };
                finish(w, &cell, token, wait);
            }
        },
    }
    // 5. The first process this step woke runs next on this worker, handed
    //    over directly (README.md, "Hand-off"); the others go to the ring
    //    behind it, where an idle worker can steal them.
    // A conversation wakes exactly one process a step: no drain for it.
    if woken.len() <= 1 {
        if let Some(first) = woken.pop() {
            debug_assert!(w.next.is_none(), "the hand-off was taken before the step");
            w.next = Some(first);
        }
    } else {
        let mut woken_now = woken.drain(..);
        if let Some(first) = woken_now.next() {
            debug_assert!(w.next.is_none(), "the hand-off was taken before the step");
            w.next = Some(first);
        }
        let mut parts = w.parts();
        for c in woken_now {
            parts.push_local(c);
        }
    }
    // Back into the worker; the empty `Vec` `mem::take` left there goes
    // without a drop call.
    drop_vec(std::mem::replace(&mut w.woken, woken));
    // Work left in the ring while this worker keeps a process to run next:
    // wake a parked worker to steal it (tokio's rule: notify when more than
    // one task waits locally). The load first: a busy pair of workers never
    // writes the idle word here.
    if w.next.is_some()
        && !w.core.local.is_empty()
        && inner.sched.idle.would_unpark()
        && inner.sched.notify_parked().is_some()
    {
        w.metrics.unparks += 1;
    }
}

fn finish<M: Send + 'static>(
    w: &mut ProcWorker<M>,
    cell: &Arc<Cell<M>>,
    token: Token<'_, M>,
    wait: Wait,
) {
    let (transition, WakeSenders(wake)) = token.finish_waking(wait);
    if transition == TransitionToWaiting::Requeue {
        let mut parts = w.parts();
        if wait == Wait::Yield {
            // Used its budget or asked to keep running: behind the others,
            // and the global queue gets a look first.
            parts.push_yielded(cell.clone());
        } else {
            parts.push_local(cell.clone());
        }
    }
    if wake {
        wake_drained_senders(w, cell);
    }
}

/// D3: `cell`'s mailbox drained; its throttled senders go to the ring,
/// where an idle worker can steal them.
#[cold]
#[inline(never)]
fn wake_drained_senders<M: Send + 'static>(w: &mut ProcWorker<M>, cell: &Cell<M>) {
    let mut parts = w.parts();
    for sender in take_parked_senders(cell) {
        if sender.mailbox.wake() == TransitionToNotified::Schedule {
            parts.push_local(sender);
        }
    }
}

/// The throttled senders waiting on `cell` (core README, "Throttled
/// senders", D3; or "Completion"), taken off its list.
#[cold]
fn take_parked_senders<M: Send + 'static>(cell: &Cell<M>) -> Vec<Arc<Cell<M>>> {
    lock(&cell.meta)
        .rare
        .as_mut()
        .map(|r| std::mem::take(&mut r.parked_senders))
        .unwrap_or_default()
}

/// Wakes the senders throttled on `cell` without an event (D3).
#[cold]
fn wake_parked_senders<M: Send + 'static>(
    inner: &Inner<M>,
    cell: &Cell<M>,
    sink: &mut Sink<'_, M>,
) {
    for sender in take_parked_senders(cell) {
        if sender.mailbox.wake() == TransitionToNotified::Schedule {
            inner.schedule(sender, sink);
        }
    }
}

/// Back-pressure step 6 (README.md): a step that asked to keep running
/// while charged for `target`'s deep mailbox, with none of its own events
/// left, waits for `target` to drain instead of running empty steps (core
/// README, "Throttled senders", S1-S2). `true`: end the step IDLE; the
/// drain (or `target`'s end, or any event for this process) wakes it.
#[cold]
fn park_throttled<M: Send + 'static>(cell: &Arc<Cell<M>>, target: &Cell<M>) -> bool {
    if std::ptr::eq(cell.as_ref(), target) {
        // Flooding itself: its own events keep it running.
        return false;
    }
    // S1: on the receiver's list first, then S2.
    lock(&target.meta).rare().parked_senders.push(cell.clone());
    match target.mailbox.register_sender_wait() {
        SenderWait::Wait => true,
        // Drained or closed meanwhile: keep running (the entry left on the
        // list costs at most one spare wake later).
        SenderWait::Drained | SenderWait::Closed => false,
    }
}

fn end_process<M: Send + 'static>(
    inner: &Arc<Inner<M>>,
    cell: &Arc<Cell<M>>,
    mut token: Token<'_, M>,
    reason: ExitReason,
    value: Option<M>,
    sink: &mut Sink<'_, M>,
) {
    // The body leaves the mailbox for `close`, which runs later (after the
    // children's) and takes it from `Rare::closing`.
    let body = token.body().take();
    // Queued events are dropped: a call's ReplyTo answers NoReply as it goes.
    let mut leftovers = Vec::new();
    let WakeSenders(wake) = token.complete(|ev| leftovers.push(ev));
    drop(leftovers);
    lock(&cell.meta).rare().closing = body;
    if wake {
        // Senders throttled on this mailbox: it will never drain now.
        wake_parked_senders(inner, cell, sink);
    }
    inner.exit(cell, reason, value, sink);
}

#[inline]
fn dispatch<M: Send + 'static>(
    inner: &Arc<Inner<M>>,
    cell: &Arc<Cell<M>>,
    commands: Vec<(Tag, Command<M>)>,
    sink: &mut Sink<'_, M>,
) {
    // Most steps yield nothing: skip the loop's set-up and the Vec's drop.
    if commands.is_empty() {
        drop_vec(commands);
        return;
    }
    dispatch_commands(inner, cell, commands, sink);
}

#[inline(never)]
fn dispatch_commands<M: Send + 'static>(
    inner: &Arc<Inner<M>>,
    cell: &Arc<Cell<M>>,
    commands: Vec<(Tag, Command<M>)>,
    sink: &mut Sink<'_, M>,
) {
    for (tag, command) in commands {
        if !lock(&cell.meta).rare().pending.insert(tag) {
            inner.complete_unpending(cell, tag, CommandError::DuplicateTag, sink);
            continue;
        }
        let pid = cell.pid;
        match command {
            Command::Sleep(d) => {
                let deadline: Instant = inner.driver.clock().now() + d;
                let wake = Arc::new(SleepWake {
                    completer: Completer {
                        inner: Arc::downgrade(inner),
                    },
                    driver: inner.driver.clone(),
                    pid,
                    tag,
                    entry: Mutex::new((None, false)),
                });
                let waker = Waker::from(wake.clone());
                match inner.driver.register(deadline, &waker) {
                    Some(key) => wake.registered(key),
                    None => {
                        // Due already (a zero sleep). The sleeps due at or
                        // before it that no timer pass has fired yet go
                        // first, so a process's sleeps complete in deadline
                        // order (the simulator's property 5).
                        inner.driver.process(deadline);
                        let _ = inner.complete(pid, tag, Ok(Outcome::Done), sink);
                    }
                }
            }
            Command::Spawn {
                process,
                method,
                input,
                mailbox_bound,
            } => {
                let opts = SpawnOptions {
                    mailbox_bound,
                    name: None,
                };
                let r = inner.spawn_cell(Some(cell), process, &method, input, opts, sink);
                let result = r
                    .map(Outcome::Spawned)
                    .map_err(|e| CommandError::Spawn(e.to_string()));
                let _ = inner.complete(pid, tag, result, sink);
            }
            Command::Call { to, msg } => {
                let Some(target) = inner.lookup(to) else {
                    let _ = inner.complete(pid, tag, Err(CommandError::NoProcess), sink);
                    continue;
                };
                let ev = Envelope::pack(Event::Message {
                    from: Some(pid),
                    msg,
                    reply: Some(ReplyTo {
                        completer: Completer {
                            inner: Arc::downgrade(inner),
                        },
                        caller: pid,
                        tag,
                        answered: false,
                    }),
                });
                match inner.deliver(&target, ev, true, sink) {
                    Ok(_) => inner.count(sink, |c| &c.sent, 1),
                    Err((ev, reason)) => {
                        inner.count(sink, |c| &c.refused, 1);
                        // Disarm the ReplyTo: the error below is the answer.
                        if let Event::Message {
                            reply: Some(mut r), ..
                        } = ev.unpack()
                        {
                            r.answered = true;
                        }
                        let err = match reason {
                            Refusal::Full => CommandError::MailboxFull,
                            Refusal::Closed => CommandError::NoProcess,
                        };
                        let _ = inner.complete(pid, tag, Err(err), sink);
                    }
                }
            }
            Command::Custom { kind, input } => match inner.handlers.get(&kind) {
                Some(h) => {
                    let h = h.clone();
                    let req = Request {
                        pid,
                        tag,
                        kind,
                        input,
                        completer: Completer {
                            inner: Arc::downgrade(inner),
                        },
                    };
                    if let Err(p) = panic::catch_unwind(AssertUnwindSafe(|| h(req))) {
                        let _ = inner.complete(
                            pid,
                            tag,
                            Err(CommandError::Failed(panic_text(&*p))),
                            sink,
                        );
                    }
                }
                None => {
                    let _ = inner.complete(pid, tag, Err(CommandError::UnknownKind(kind)), sink);
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(index: u32, generation: u32) -> Arc<Cell<u64>> {
        Arc::new(Cell {
            pid: Pid { index, generation },
            mailbox: Mailbox::with_body(None),
            bound: None,
            depth: 0,
            meta: Mutex::new(Meta {
                parent: None,
                live_children: 0,
                close_pending: false,
                rare: None,
            }),
        })
    }

    #[test]
    fn drop_vec_drops_what_a_vec_holds_and_skips_only_the_unallocated() {
        let c = cell(1, 0);
        // Elements: dropped, as a plain drop would.
        drop_vec(vec![c.clone(), c.clone()]);
        assert_eq!(Arc::strong_count(&c), 1);
        // Emptied but allocated: freed through the plain drop (Miri and
        // leak checkers see it); unallocated: forgotten, nothing to free.
        let mut v = Vec::with_capacity(4);
        v.push(c.clone());
        v.clear();
        assert!(v.capacity() > 0);
        drop_vec(v);
        drop_vec(Vec::<Arc<Cell<u64>>>::new());
        assert_eq!(Arc::strong_count(&c), 1);
    }

    #[test]
    fn plain_messages_travel_inline_in_24_bytes() {
        // The sizes README.md's "Mailbox slots" quotes.
        assert_eq!(std::mem::size_of::<Envelope<u64>>(), 24);
        assert_eq!(std::mem::size_of::<Event<u64>>(), 64);
        let from = Some(Pid {
            index: 1,
            generation: 2,
        });
        let plain = Envelope::pack(Event::Message {
            from,
            msg: 7u64,
            reply: None,
        });
        assert!(matches!(plain, Envelope::Message { msg: 7, .. }));
        match plain.unpack() {
            Event::Message {
                from: f,
                msg: 7,
                reply: None,
            } => assert_eq!(f, from),
            other => panic!("unpacked into {other:?}"),
        }
        // Anything else is boxed and comes back as it went in.
        let exit = Envelope::<u64>::pack(Event::Cancel);
        assert!(matches!(exit, Envelope::Other(_)));
        assert!(matches!(exit.unpack(), Event::Cancel));
    }

    #[test]
    fn send_cache_hits_only_the_pid_it_holds() {
        let pid = |index, generation| Pid { index, generation };
        let mut c = SendCache::<u64>::default();
        assert!(c.get(pid(3, 0)).is_none());
        c.insert(cell(3, 0));
        assert_eq!(c.get(pid(3, 0)).map(|c| c.pid), Some(pid(3, 0)));
        // The same slab slot reused (next generation): a miss.
        assert!(c.get(pid(3, 1)).is_none());
        // Another index in the same cache slot: a miss, and it replaces.
        let far = pid(3 + SEND_CACHE as u32, 0);
        assert!(c.get(far).is_none());
        c.insert(cell(far.index, 0));
        assert!(c.get(far).is_some());
        assert!(c.get(pid(3, 0)).is_none());
        // Removing a PID the slot does not hold leaves the slot alone.
        c.remove(pid(3, 0));
        assert!(c.get(far).is_some());
        c.remove(far);
        assert!(c.get(far).is_none());
    }
}
