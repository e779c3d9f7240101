//! The run's trace: scheduler and component events, exported as Chrome
//! trace JSON through the shared writer ([`crate::trace`]).

use std::borrow::Cow;
use std::io::{self, Write};
use std::sync::Arc;

use crate::trace::{self as chrome, Arg, Phase};

/// Every trace event name a run can produce (seed 004's list, plus
/// `scheduler_reject` for the seed's "scheduler-reject health events").
pub const TRACE_EVENT_NAMES: &[&str] = &[
    "scheduler_iteration_begin",
    "scheduler_iteration",
    "scheduler_iteration_end",
    "component_execute_begin",
    "component_execute",
    "component_execute_end",
    "component_cancellation_requested",
    "component_cancellation_observed",
    "component_timeout_budget_exceeded",
    "thread_pool_batch",
    "fixed_rate_tick_begin",
    "fixed_rate_tick",
    "fixed_rate_tick_end",
    "fixed_rate_overrun",
    "fixed_rate_skipped_tick",
    "loop_cancellation_requested",
    "loop_cancellation_observed",
    "scheduler_reject",
];

/// The track of the runner (the thread that called `run`). Worker `w` of the
/// runtime is track `w`.
pub const RUNNER_TID: u64 = 1_000;

/// The most arguments one record carries: an invocation's event has
/// `component`, `lane`, `epoch`, `invocation`, `tick` and `worker_id`; the
/// runner's events have at most four.
pub const MAX_ARGS: usize = 6;

/// One argument value. No variant owns heap memory of its own: numbers,
/// static text, a shared name (an `Arc` the graph already holds, so
/// recording it is a reference-count increment) or a list kept in the
/// trace's side buffer. Formatting happens only at export.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Val {
    /// An unsigned integer.
    U64(u64),
    /// Fixed text (a reason, a policy name).
    Static(&'static str),
    /// A component's or lane's name.
    Name(Arc<str>),
    /// A list of integers: `len` values from `start` in [`Trace::lists`].
    List {
        /// The first index in [`Trace::lists`].
        start: u32,
        /// How many.
        len: u32,
    },
}

/// A record's arguments: at most [`MAX_ARGS`], inline (a fixed-size array,
/// so recording one allocates nothing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Args {
    len: u8,
    items: [(&'static str, Val); MAX_ARGS],
}

const NO_ARG: (&str, Val) = ("", Val::U64(0));

impl Args {
    const fn new() -> Args {
        Args {
            len: 0,
            items: [NO_ARG; MAX_ARGS],
        }
    }

    fn push(&mut self, key: &'static str, value: Val) {
        let i = usize::from(self.len);
        debug_assert!(i < MAX_ARGS, "more than MAX_ARGS arguments ({key})");
        if let Some(slot) = self.items.get_mut(i) {
            *slot = (key, value);
            self.len += 1;
        }
    }

    /// The arguments, in the order they were recorded (and are written).
    pub fn iter(&self) -> std::slice::Iter<'_, (&'static str, Val)> {
        self.items[..usize::from(self.len)].iter()
    }

    /// How many.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Val> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }
}

/// One recorded event: fixed size, no heap memory of its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// One of [`TRACE_EVENT_NAMES`].
    pub name: &'static str,
    /// Span or instant.
    pub phase: Phase,
    /// The runner's track or a worker's id.
    pub tid: u64,
    /// Nanoseconds since the run started (virtual in simulated runs).
    pub ts_ns: u64,
    /// Arguments (`component`, `epoch`, `tick`, `worker_id`, ...).
    pub args: Args,
}

impl Record {
    pub(crate) fn instant(name: &'static str, tid: u64, ts_ns: u64) -> Record {
        Record {
            name,
            phase: Phase::Instant,
            tid,
            ts_ns,
            args: Args::new(),
        }
    }

    pub(crate) fn span(name: &'static str, tid: u64, ts_ns: u64, dur_ns: u64) -> Record {
        Record {
            phase: Phase::Complete { dur_ns },
            ..Record::instant(name, tid, ts_ns)
        }
    }

    pub(crate) fn arg(mut self, key: &'static str, value: u64) -> Record {
        self.args.push(key, Val::U64(value));
        self
    }

    pub(crate) fn text(mut self, key: &'static str, value: &'static str) -> Record {
        self.args.push(key, Val::Static(value));
        self
    }

    pub(crate) fn label(mut self, key: &'static str, value: &Arc<str>) -> Record {
        self.args.push(key, Val::Name(Arc::clone(value)));
        self
    }

    pub(crate) fn list(mut self, key: &'static str, value: Val) -> Record {
        self.args.push(key, value);
        self
    }

    pub(crate) fn component(self, name: &Arc<str>) -> Record {
        self.label("component", name)
    }

    /// The value of argument `key`, if it is an integer.
    pub fn u64_arg(&self, key: &str) -> Option<u64> {
        match self.args.get(key)? {
            Val::U64(x) => Some(*x),
            _ => None,
        }
    }

    /// The value of argument `key`, if it is text.
    pub fn str_arg(&self, key: &str) -> Option<&str> {
        match self.args.get(key)? {
            Val::Static(s) => Some(*s),
            Val::Name(s) => Some(&**s),
            _ => None,
        }
    }
}

/// What an invocation recorded itself (`component_cancellation_observed`,
/// `component_timeout_budget_exceeded`; each at most once), in order: the
/// worker keeps it inline, and the runner turns it into records.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct InvMarks {
    marks: [Option<(&'static str, u64)>; 2],
}

impl InvMarks {
    pub(crate) fn push(&mut self, name: &'static str, ts_ns: u64) {
        if let Some(slot) = self.marks.iter_mut().find(|m| m.is_none()) {
            *slot = Some((name, ts_ns));
        } else {
            debug_assert!(false, "an invocation marks at most two events ({name})");
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.marks.iter().flatten().copied()
    }
}

/// A run's trace, in the order the runner recorded it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    /// The events.
    pub records: Vec<Record>,
    /// The values of every [`Val::List`] argument, back to back.
    pub lists: Vec<u64>,
}

impl Trace {
    /// The events called `name`.
    pub fn named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Record> + 'a {
        self.records.iter().filter(move |r| r.name == name)
    }

    /// The values of `r`'s list argument `key` (`worker_ids`), if it has one.
    pub fn list_arg(&self, r: &Record, key: &str) -> Option<&[u64]> {
        match r.args.get(key)? {
            Val::List { start, len } => self.list(*start, *len),
            _ => None,
        }
    }

    fn list(&self, start: u32, len: u32) -> Option<&[u64]> {
        let (start, len) = (start as usize, len as usize);
        self.lists.get(start..start + len)
    }

    /// Stores `values`, sorted and without duplicates, in the side
    /// buffer; the argument that refers to them.
    pub(crate) fn push_set(&mut self, values: impl IntoIterator<Item = u64>) -> Val {
        let start = self.lists.len();
        self.lists.extend(values);
        let tail = &mut self.lists[start..];
        tail.sort_unstable();
        let mut kept = 0;
        for i in 0..tail.len() {
            if kept == 0 || tail[i] != tail[kept - 1] {
                tail[kept] = tail[i];
                kept += 1;
            }
        }
        self.lists.truncate(start + kept);
        Val::List {
            start: u32::try_from(start).unwrap_or(u32::MAX),
            len: u32::try_from(kept).unwrap_or(0),
        }
    }

    /// The trace with timestamps, durations and worker ids removed: what a
    /// deterministic replay must reproduce exactly even on real time.
    pub fn shape(&self) -> Vec<(&'static str, Vec<(&'static str, Val)>)> {
        self.records
            .iter()
            .map(|r| {
                let args = r
                    .args
                    .iter()
                    .filter(|(k, _)| !matches!(*k, "worker_id" | "worker_ids"))
                    .cloned()
                    .collect();
                (r.name, args)
            })
            .collect()
    }

    /// Writes the trace as Chrome trace JSON (opens in Perfetto). Records
    /// are turned into the writer's events one at a time, here and only
    /// here.
    pub fn write_chrome(&self, out: &mut dyn Write) -> io::Result<u64> {
        let mut tids: Vec<u64> = self.records.iter().map(|r| r.tid).collect();
        tids.sort_unstable();
        tids.dedup();
        let meta = chrome::Meta {
            process_name: "magpie lanes".to_string(),
            threads: tids
                .iter()
                .map(|&t| {
                    let name = if t == RUNNER_TID {
                        "runner".to_string()
                    } else {
                        format!("worker {t}")
                    };
                    (t, name)
                })
                .collect(),
            other: vec![("events", self.records.len() as u64)],
        };
        let events = self.records.iter().map(|r| chrome::Event {
            name: Cow::Borrowed(r.name),
            cat: "lanes",
            phase: r.phase,
            tid: r.tid,
            ts_ns: r.ts_ns,
            args: r
                .args
                .iter()
                .map(|(k, v)| {
                    let arg = match v {
                        Val::U64(x) => Arg::U64(*x),
                        Val::Static(s) => Arg::Str(Cow::Borrowed(*s)),
                        Val::Name(s) => Arg::Str(Cow::Owned(s.to_string())),
                        Val::List { start, len } => {
                            Arg::List(self.list(*start, *len).unwrap_or_default().to_vec())
                        }
                    };
                    (*k, arg)
                })
                .collect(),
        });
        chrome::write_chrome(out, &meta, events)
    }
}
