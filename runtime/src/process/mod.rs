//! Step-driven processes with mailboxes, PIDs and yields (seed 002), on the
//! same worker loop as typed tasks and futures.
//!
//! A process is a state machine ([`Process`]) that the runtime advances one
//! [`step`](Process::step) at a time with the [`Event`]s that arrived for it:
//! completions of the commands it yielded, messages, a cancellation, and exit
//! notices of the processes it links to, monitors or spawned. In the step it
//! writes to a [`StepOutput`]: commands to dispatch (each with a [`Tag`] it
//! chooses), messages to send, and its [`Status`].
//!
//! ```
//! use magpie_runtime::process::{Event, InitError, Process, ProcessRuntime, StepOutput};
//! use std::time::Duration;
//!
//! /// Counts the messages it gets and reports the total when cancelled.
//! struct Counter { n: u64, report: std::sync::mpsc::Sender<u64> }
//!
//! impl Process<u64> for Counter {
//!     fn init(&mut self, method: &str, _input: Option<u64>) -> Result<(), InitError> {
//!         match method {
//!             "count" => Ok(()),
//!             other => Err(InitError::unknown_method(other)),
//!         }
//!     }
//!     fn step(&mut self, events: magpie_runtime::process::Events<'_, u64>, out: &mut StepOutput<'_, u64>) {
//!         for event in events {
//!             match event {
//!                 Event::Message { msg, .. } => self.n += msg,
//!                 Event::Cancel => return out.complete(None),
//!                 _ => {}
//!             }
//!         }
//!         out.idle();
//!     }
//!     fn close(&mut self) {
//!         let _ = self.report.send(self.n);
//!     }
//! }
//!
//! let rt = ProcessRuntime::<u64>::builder().workers(2).build().unwrap();
//! let (tx, rx) = std::sync::mpsc::channel();
//! let pid = rt.spawn(Counter { n: 0, report: tx }, "count", None).unwrap();
//! for i in 1..=10 {
//!     rt.send(pid, i).unwrap();
//! }
//! let report = rt.shutdown(Duration::from_secs(5));
//! assert!(report.forced.is_empty());
//! assert_eq!(rx.recv().unwrap(), 55);
//! ```
//!
//! The scheduling protocol is in `README.md` beside this file; the lock-free
//! parts (state word, event queue, admission word) are
//! `magpie_core::process`.

use std::any::Any;
use std::fmt;
use std::time::Duration;

mod future_handler;
mod runtime;

pub use future_handler::future_handler;
pub use runtime::sim;
pub use runtime::{
    Builder, Completer, Handler, ProcessHandle, ProcessRuntime, ReplyTo, Request, SendWait,
    ShutdownReport, StepOutput, DEFAULT_EVENT_BUDGET, SEND_PUNISH_THRESHOLD, SEND_RESUME_DEPTH,
};

/// A correlation tag: the process picks one per yielded command and gets it
/// back with the command's completion.
pub type Tag = u64;

/// The events of one step, oldest first. Events not consumed are dropped
/// when the step returns.
pub type Events<'a, M> = std::vec::Drain<'a, Event<M>>;

/// A boxed value of any type, for the results of user command handlers.
pub type Payload = Box<dyn Any + Send>;

/// A process identifier: a registry slot and that slot's generation. A slot
/// is reused only with a new generation, so an old PID never reaches the
/// process that took its slot.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pid {
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

impl Pid {
    /// The registry slot.
    pub fn index(self) -> u32 {
        self.index
    }

    /// The slot's generation when this PID was handed out.
    pub fn generation(self) -> u32 {
        self.generation
    }
}

impl fmt::Debug for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{}.{}>", self.index, self.generation)
    }
}

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A process: a state machine advanced one step at a time.
///
/// The runtime calls [`init`](Process::init) once (on the spawning thread),
/// then [`step`](Process::step) whenever events arrived (and once at the
/// start, with no events), then [`close`](Process::close) exactly once for
/// every process whose `init` succeeded: after it completes or fails, after a
/// panicking step, and at shutdown. A process's `close` runs after the
/// `close` of every process it spawned.
pub trait Process<M: Send + 'static>: Send + 'static {
    /// Prepares the process for the entry point `method` with `input`. An
    /// entry point the process does not have should be
    /// [`InitError::unknown_method`]: `spawn` returns it to the caller.
    fn init(&mut self, method: &str, input: Option<M>) -> Result<(), InitError>;

    /// Advances the state machine with `events`; writes commands, sends and
    /// the status to `out`. A panic here is contained: the process ends
    /// with [`ExitReason::Panicked`], its links are notified, its `close`
    /// runs, and every other process runs on.
    fn step(&mut self, events: Events<'_, M>, out: &mut StepOutput<'_, M>);

    /// Releases the process's resources. Runs exactly once if `init`
    /// succeeded.
    fn close(&mut self) {}
}

/// What `init` can fail with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitError {
    /// The process has no entry point of that name.
    UnknownMethod(String),
    /// Anything else, as text.
    Failed(String),
}

impl InitError {
    /// [`InitError::UnknownMethod`] for `method`.
    pub fn unknown_method(method: &str) -> Self {
        InitError::UnknownMethod(method.to_string())
    }
}

impl fmt::Display for InitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InitError::UnknownMethod(m) => write!(f, "unknown entry point {m:?}"),
            InitError::Failed(e) => write!(f, "init failed: {e}"),
        }
    }
}

impl std::error::Error for InitError {}

/// One thing that happened to a process, delivered to its next step.
pub enum Event<M: Send + 'static> {
    /// A command this process yielded finished.
    Completion {
        /// The tag the process gave the command.
        tag: Tag,
        /// Its result.
        result: Result<Outcome<M>, CommandError>,
    },
    /// A message.
    Message {
        /// The sending process, if a process sent it.
        from: Option<Pid>,
        /// The message.
        msg: M,
        /// Present when the sender made a [`Command::Call`]: answer with
        /// [`ReplyTo::reply`]. Dropping it unanswered completes the call
        /// with [`CommandError::NoReply`].
        reply: Option<ReplyTo<M>>,
    },
    /// Shutdown or another process asked this one to stop. Delivered once.
    Cancel,
    /// A process this one spawned, links to or monitors has ended.
    Exit(ExitNotice<M>),
}

impl<M: Send + 'static> fmt::Debug for Event<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Completion { tag, result } => f
                .debug_struct("Completion")
                .field("tag", tag)
                .field("ok", &result.is_ok())
                .finish(),
            Event::Message { from, reply, .. } => f
                .debug_struct("Message")
                .field("from", from)
                .field("call", &reply.is_some())
                .finish_non_exhaustive(),
            Event::Cancel => f.write_str("Cancel"),
            Event::Exit(n) => n.fmt(f),
        }
    }
}

/// How the process in an [`Event::Exit`] relates to the receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Relation {
    /// The receiver spawned it (it also gets the completion value).
    Child,
    /// The two are linked (both get each other's exit).
    Link,
    /// The receiver monitors it.
    Monitor,
}

/// The end of a process, as told to its parent, links and monitors.
pub struct ExitNotice<M> {
    /// The process that ended.
    pub pid: Pid,
    /// Why.
    pub reason: ExitReason,
    /// How it relates to the receiver.
    pub relation: Relation,
    /// The value it completed with (parent only).
    pub value: Option<M>,
}

impl<M> fmt::Debug for ExitNotice<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExitNotice")
            .field("pid", &self.pid)
            .field("reason", &self.reason)
            .field("relation", &self.relation)
            .field("value", &self.value.is_some())
            .finish()
    }
}

/// Why a process ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExitReason {
    /// Its step set [`Status::Complete`].
    Completed,
    /// Its step set [`Status::Fail`].
    Failed(String),
    /// Its step panicked; the payload's text.
    Panicked(String),
    /// Shutdown closed it after the timeout.
    Forced,
    /// It did not exist (a link or monitor to an ended PID).
    NoProcess,
}

/// The successful result of a command.
pub enum Outcome<M> {
    /// The command finished with nothing to report (`Sleep`).
    Done,
    /// `Spawn`: the child's PID.
    Spawned(Pid),
    /// `Call`: the callee's reply.
    Reply(M),
    /// A user handler's value.
    Value(Payload),
}

impl<M> fmt::Debug for Outcome<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Done => f.write_str("Done"),
            Outcome::Spawned(p) => write!(f, "Spawned({p})"),
            Outcome::Reply(_) => f.write_str("Reply(..)"),
            Outcome::Value(_) => f.write_str("Value(..)"),
        }
    }
}

/// Why a command failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommandError {
    /// The target PID has ended (or never existed).
    NoProcess,
    /// The callee ended, or dropped the [`ReplyTo`], without replying.
    NoReply,
    /// The callee's bounded mailbox was full.
    MailboxFull,
    /// No handler is registered for this command kind.
    UnknownKind(String),
    /// `Spawn`: the child's `init` failed, or the runtime is shutting down.
    Spawn(String),
    /// The tag is already pending for another command of this process.
    DuplicateTag,
    /// A user handler's error.
    Failed(String),
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for CommandError {}

/// A command a process yields; its completion comes back as an
/// [`Event::Completion`] with the tag the process gave it.
pub enum Command<M> {
    /// Complete after this long, on the runtime's timer wheel.
    Sleep(Duration),
    /// Spawn a child process; completes with [`Outcome::Spawned`]. The child
    /// is closed before its parent, and its exit is told to the parent.
    Spawn {
        /// The child.
        process: Box<dyn Process<M>>,
        /// Its entry point.
        method: String,
        /// Its input.
        input: Option<M>,
        /// Mailbox bound (`None`: unbounded).
        mailbox_bound: Option<usize>,
    },
    /// Send `msg` to `to` as a call; completes with [`Outcome::Reply`] when
    /// the callee answers, or fails at once if `to` has ended.
    Call {
        /// The callee.
        to: Pid,
        /// The request.
        msg: M,
    },
    /// A command for the handler registered under `kind`.
    Custom {
        /// The handler's name.
        kind: String,
        /// Its input.
        input: M,
    },
}

impl<M> fmt::Debug for Command<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Command::Sleep(d) => write!(f, "Sleep({d:?})"),
            Command::Spawn { method, .. } => write!(f, "Spawn({method:?})"),
            Command::Call { to, .. } => write!(f, "Call({to})"),
            Command::Custom { kind, .. } => write!(f, "Custom({kind:?})"),
        }
    }
}

/// What the process wants after its step.
#[derive(Debug)]
pub enum Status<M> {
    /// Run again after the other ready processes (a long computation in
    /// slices).
    Running,
    /// Wait for the completions of yielded commands (any event wakes it).
    Blocked,
    /// Wait for messages (any event wakes it). The default.
    Idle,
    /// Done, with an optional value for the parent.
    Complete(Option<M>),
    /// Done, with an error.
    Fail(String),
}

/// Why a send was refused; the message is handed back where there is one.
pub enum SendError<M> {
    /// The PID has ended, or never existed.
    NoProcess(M),
    /// The bounded mailbox is full.
    Full(M),
}

impl<M> SendError<M> {
    /// The message that was not sent.
    pub fn into_inner(self) -> M {
        match self {
            SendError::NoProcess(m) | SendError::Full(m) => m,
        }
    }
}

impl<M> fmt::Debug for SendError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::NoProcess(_) => f.write_str("NoProcess(..)"),
            SendError::Full(_) => f.write_str("Full(..)"),
        }
    }
}

impl<M> fmt::Display for SendError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::NoProcess(_) => f.write_str("no such process"),
            SendError::Full(_) => f.write_str("mailbox full"),
        }
    }
}

impl<M> std::error::Error for SendError<M> {}

/// Why [`ProcessRuntime::spawn`] failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpawnError {
    /// The process's `init` refused (its `close` is not called).
    Init(InitError),
    /// The runtime is shutting down.
    ShuttingDown,
    /// The requested name is registered to a live process.
    NameTaken(String),
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpawnError::Init(e) => e.fmt(f),
            SpawnError::ShuttingDown => f.write_str("the runtime is shutting down"),
            SpawnError::NameTaken(n) => write!(f, "name {n:?} is taken"),
        }
    }
}

impl std::error::Error for SpawnError {}

/// Why a completion through a [`Completer`] was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompleteError {
    /// The process has ended (or the runtime is gone).
    NoProcess,
    /// The tag is not pending: it was completed already, or never yielded.
    NotPending,
}

impl fmt::Display for CompleteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for CompleteError {}

/// Why a name could not be registered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegisterError {
    /// The name belongs to a live process.
    Taken,
    /// The PID has ended.
    NoProcess,
}

/// Options for [`ProcessRuntime::spawn_with`].
#[derive(Clone, Debug, Default)]
pub struct SpawnOptions {
    /// Mailbox bound: messages beyond it are refused (`try_send`) or wait
    /// (`send_wait`). `None` (the default): unbounded. Completions, cancel
    /// and exit notices are never refused.
    pub mailbox_bound: Option<usize>,
    /// Register the process under this name.
    pub name: Option<String>,
}

/// Counters of a process runtime.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessMetrics {
    /// Processes whose `init` succeeded.
    pub spawned: u64,
    /// Processes that completed ([`Status::Complete`]).
    pub completed: u64,
    /// Processes that failed ([`Status::Fail`]) or panicked.
    pub failed: u64,
    /// Of `failed`, those that panicked.
    pub panicked: u64,
    /// Processes closed by shutdown after its timeout.
    pub forced: u64,
    /// Steps run.
    pub steps: u64,
    /// Events delivered to steps.
    pub events: u64,
    /// Messages accepted by a mailbox.
    pub sent: u64,
    /// Of `sent`, messages a step kept back and published in a batch with
    /// others to the same process (README.md, "Batched sends").
    pub batched: u64,
    /// Messages refused (no such process, or full).
    pub refused: u64,
    /// Most events queued in one mailbox at once.
    pub mailbox_high_water: u64,
    /// `close` calls (one per spawned process, eventually).
    pub closed: u64,
}
