//! `--trace FILE`: a Chrome trace-event file of the tasks each worker ran.
//!
//! The file is the JSON-object form of the trace-event format that Perfetto
//! (ui.perfetto.dev) and chrome://tracing open:
//!
//! ```json
//! {"traceEvents": [
//!   {"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"magpie scan"}},
//!   {"name":"thread_name","ph":"M","pid":1,"tid":0,"args":{"name":"worker 0"}},
//!   {"name":"Scan","cat":"task","ph":"X","pid":1,"tid":0,"ts":12.345,"dur":80.5,
//!    "args":{"path":"src/a.env","offset":0,"bytes":262144}}
//! ], "displayTimeUnit":"ms", "otherData":{"dropped_events":0,"max_events":262144}}
//! ```
//!
//! One complete event (`"ph":"X"`) per task, `tid` = worker id, `ts` and `dur`
//! in microseconds since the sink was created.
//!
//! Recording takes no lock: each worker owns a [`TraceRecorder`] (in its
//! scratch) that pushes into its own `Vec`. The recorder hands its events to
//! the shared [`TraceSink`] once, when it is dropped (when the worker exits),
//! under a mutex that nothing else contends for. Each recorder keeps at most
//! `max_events / workers` events and counts the rest as dropped, so a long
//! scan cannot grow the trace without bound; a dropped event costs no
//! allocation.

use std::fmt::Display;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

// Plain std: the trace sink is not part of any loom model.
use std::sync::{Arc, Mutex};

use magpie_runtime::trace as chrome;

use crate::report::{OutputError, ScanError};

/// The default total number of events kept (about 100 bytes each, plus the
/// path: some tens of MB at most).
pub const DEFAULT_MAX_EVENTS: usize = 1 << 18;

/// The `pid` written in every event.
pub use magpie_runtime::trace::TRACE_PID;

/// The three kinds of task in the scanner's graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaskKind {
    /// Listing a directory or an archive.
    Enumerate,
    /// Reading a chunk of an object.
    FetchSync,
    /// Running the rules over a chunk.
    Scan,
}

impl TaskKind {
    /// The event name.
    pub fn name(self) -> &'static str {
        match self {
            TaskKind::Enumerate => "Enumerate",
            TaskKind::FetchSync => "FetchSync",
            TaskKind::Scan => "Scan",
        }
    }
}

#[derive(Clone, Debug)]
struct Event {
    kind: TaskKind,
    start_ns: u64,
    dur_ns: u64,
    path: Box<str>,
    offset: u64,
    bytes: u64,
}

#[derive(Debug, Default)]
struct Collected {
    /// (worker id, that recorder's events in start order).
    logs: Vec<(usize, Vec<Event>)>,
    dropped: u64,
}

/// Collects the recorders' events and writes the trace file.
#[derive(Debug)]
pub struct TraceSink {
    epoch: Instant,
    max_events: usize,
    per_worker_cap: usize,
    collected: Mutex<Collected>,
}

/// Counts of a written trace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TraceStats {
    /// Complete events written.
    pub events: u64,
    /// Events not kept because a recorder was full.
    pub dropped: u64,
}

impl TraceSink {
    /// A sink for `workers` workers keeping about `max_events` events in all
    /// (`max_events / workers` per recorder, at least 1). Timestamps count
    /// from now.
    pub fn new(workers: usize, max_events: usize) -> Arc<Self> {
        Arc::new(Self {
            epoch: Instant::now(),
            max_events,
            per_worker_cap: (max_events / workers.max(1)).max(1),
            collected: Mutex::new(Collected::default()),
        })
    }

    /// The recorder for worker `worker` (also usable by a non-worker thread
    /// with an id of its own, e.g. `workers` for the main thread).
    pub fn recorder(self: &Arc<Self>, worker: usize) -> TraceRecorder {
        TraceRecorder {
            sink: Some(Arc::clone(self)),
            worker,
            events: Vec::new(),
            dropped: 0,
            cap: self.per_worker_cap,
        }
    }

    fn collected(&self) -> std::sync::MutexGuard<'_, Collected> {
        // A poisoned lock only means a recorder panicked mid-push; the data
        // is still a list of whole events.
        self.collected.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Events dropped so far by recorders already handed in.
    pub fn dropped(&self) -> u64 {
        self.collected().dropped
    }

    /// Writes the trace of every recorder dropped so far. Call it after the
    /// workers have exited. The JSON is written by magpie-runtime's shared
    /// Chrome trace writer ([`magpie_runtime::trace`]).
    pub fn write_chrome(&self, out: &mut dyn Write) -> Result<TraceStats, OutputError> {
        let c = self.collected();
        let mut logs: Vec<(usize, &Event)> = c
            .logs
            .iter()
            .flat_map(|(w, evs)| evs.iter().map(move |e| (*w, e)))
            .collect();
        logs.sort_by_key(|(w, e)| (*w, e.start_ns));
        let mut workers: Vec<usize> = c.logs.iter().map(|(w, _)| *w).collect();
        workers.sort_unstable();
        workers.dedup();

        let meta = chrome::Meta {
            process_name: "magpie scan".to_string(),
            threads: workers
                .iter()
                .map(|&w| (w as u64, format!("worker {w}")))
                .collect(),
            other: vec![
                ("dropped_events", c.dropped),
                ("max_events", self.max_events as u64),
            ],
        };
        let events: Vec<chrome::Event> = logs
            .iter()
            .map(|(w, e)| chrome::Event {
                name: e.kind.name().into(),
                cat: "task",
                phase: chrome::Phase::Complete { dur_ns: e.dur_ns },
                tid: *w as u64,
                ts_ns: e.start_ns,
                args: vec![
                    ("path", chrome::Arg::Str(e.path.to_string().into())),
                    ("offset", chrome::Arg::U64(e.offset)),
                    ("bytes", chrome::Arg::U64(e.bytes)),
                ],
            })
            .collect();
        let written = chrome::write_chrome(out, &meta, &events)?;
        Ok(TraceStats {
            events: written,
            dropped: c.dropped,
        })
    }

    /// Writes the trace to `path` (created or truncated).
    pub fn write_to_file(&self, path: &Path) -> Result<TraceStats, ScanError> {
        let what = format!("trace file {}", path.display());
        let file = std::fs::File::create(path).map_err(|source| ScanError::Output {
            what: what.clone(),
            source,
        })?;
        let mut out = BufWriter::new(file);
        self.write_chrome(&mut out)
            .map_err(|e| ScanError::output(what, e))
    }
}

/// When a task started, or nothing when tracing is off.
#[derive(Clone, Copy, Debug)]
#[must_use = "pass it to TraceRecorder::finish"]
pub struct SpanStart(Option<Instant>);

/// One worker's trace buffer. Owned by the worker; not shared.
#[derive(Debug)]
pub struct TraceRecorder {
    sink: Option<Arc<TraceSink>>,
    worker: usize,
    events: Vec<Event>,
    dropped: u64,
    cap: usize,
}

impl TraceRecorder {
    /// A recorder that records nothing (no `--trace`). Its calls cost a branch.
    pub fn disabled() -> Self {
        Self {
            sink: None,
            worker: 0,
            events: Vec::new(),
            dropped: 0,
            cap: 0,
        }
    }

    /// Whether events are recorded.
    #[inline]
    pub fn is_enabled(&self) -> bool {
        self.sink.is_some()
    }

    /// Marks the start of a task.
    #[inline]
    pub fn start(&self) -> SpanStart {
        SpanStart(self.sink.as_ref().map(|_| Instant::now()))
    }

    /// Records the task begun at `start`, ending now. `path` is formatted only
    /// if the event is kept.
    #[inline]
    pub fn finish(
        &mut self,
        start: SpanStart,
        kind: TaskKind,
        path: impl Display,
        offset: u64,
        bytes: u64,
    ) {
        let (Some(sink), Some(t0)) = (&self.sink, start.0) else {
            return;
        };
        if self.events.len() >= self.cap {
            self.dropped += 1;
            return;
        }
        let end = Instant::now();
        let start_ns = t0.saturating_duration_since(sink.epoch).as_nanos() as u64;
        let dur_ns = end.saturating_duration_since(t0).as_nanos() as u64;
        self.events.push(Event {
            kind,
            start_ns,
            dur_ns,
            path: path.to_string().into_boxed_str(),
            offset,
            bytes,
        });
    }

    /// Events kept so far by this recorder.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether no event is kept.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Events dropped so far by this recorder.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

impl Drop for TraceRecorder {
    fn drop(&mut self) {
        if let Some(sink) = self.sink.take() {
            let events = std::mem::take(&mut self.events);
            let mut c = sink.collected();
            c.dropped += self.dropped;
            c.logs.push((self.worker, events));
        }
    }
}
