//! The run's trace: scheduler and component events, exported as Chrome
//! trace JSON through the shared writer ([`crate::trace`]).

use std::borrow::Cow;
use std::io::{self, Write};

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

/// One recorded event.
#[derive(Clone, Debug, PartialEq)]
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
    pub args: Vec<(&'static str, Arg)>,
}

impl Record {
    pub(crate) fn instant(name: &'static str, tid: u64, ts_ns: u64) -> Record {
        Record {
            name,
            phase: Phase::Instant,
            tid,
            ts_ns,
            args: Vec::new(),
        }
    }

    pub(crate) fn span(name: &'static str, tid: u64, ts_ns: u64, dur_ns: u64) -> Record {
        Record {
            phase: Phase::Complete { dur_ns },
            ..Record::instant(name, tid, ts_ns)
        }
    }

    pub(crate) fn arg(mut self, key: &'static str, value: u64) -> Record {
        self.args.push((key, Arg::U64(value)));
        self
    }

    pub(crate) fn text(mut self, key: &'static str, value: &str) -> Record {
        self.args
            .push((key, Arg::Str(Cow::Owned(value.to_string()))));
        self
    }

    pub(crate) fn list(mut self, key: &'static str, values: Vec<u64>) -> Record {
        self.args.push((key, Arg::List(values)));
        self
    }

    pub(crate) fn component(self, name: &str) -> Record {
        self.text("component", name)
    }

    /// The value of argument `key`, if it is an integer.
    pub fn u64_arg(&self, key: &str) -> Option<u64> {
        self.args.iter().find_map(|(k, v)| match v {
            Arg::U64(x) if *k == key => Some(*x),
            _ => None,
        })
    }

    /// The value of argument `key`, if it is a string.
    pub fn str_arg(&self, key: &str) -> Option<&str> {
        self.args.iter().find_map(|(k, v)| match v {
            Arg::Str(s) if *k == key => Some(&**s),
            _ => None,
        })
    }
}

/// A run's trace, in the order the runner recorded it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    /// The events.
    pub records: Vec<Record>,
}

impl Trace {
    /// The events called `name`.
    pub fn named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Record> + 'a {
        self.records.iter().filter(move |r| r.name == name)
    }

    /// The trace with timestamps, durations and worker ids removed: what a
    /// deterministic replay must reproduce exactly even on real time.
    pub fn shape(&self) -> Vec<(&'static str, Vec<(&'static str, Arg)>)> {
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

    /// Writes the trace as Chrome trace JSON (opens in Perfetto).
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
        let events: Vec<chrome::Event> = self
            .records
            .iter()
            .map(|r| chrome::Event {
                name: Cow::Borrowed(r.name),
                cat: "lanes",
                phase: r.phase,
                tid: r.tid,
                ts_ns: r.ts_ns,
                args: r.args.clone(),
            })
            .collect();
        chrome::write_chrome(out, &meta, &events)
    }
}
