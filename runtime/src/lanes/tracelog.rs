//! The run's trace: scheduler and component events, exported as Chrome
//! trace JSON through the shared writer ([`crate::trace`]).

use std::borrow::Cow;
use std::collections::VecDeque;
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

/// Records per storage chunk: the trace grows by whole chunks, so a long
/// run never copies what it already recorded.
const CHUNK: usize = 4096;

/// The most records a run's trace keeps unless told otherwise
/// (`RunOptions::max_trace_records`): 262 144, 64 chunks of `CHUNK`, about
/// 27 MB of 104-byte records. Past it the oldest chunk is dropped and
/// counted (`Trace::dropped`).
pub const DEFAULT_MAX_TRACE_RECORDS: usize = 1 << 18;

/// A bounded trace holds at least this many chunks' worth of records, so
/// dropping the oldest chunk loses at most this fraction of the bound
/// (small bounds get smaller chunks).
const MIN_CHUNKS: usize = 8;

/// Bits of a list reference that hold its length (the rest: its absolute
/// start in the trace's lists).
const LIST_LEN_BITS: u32 = 24;

/// How a key's value is stored in a record's `u64` slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// The number itself.
    U64,
    /// An index into the trace's names (`Trace::names`).
    Name,
    /// An index into [`TEXTS`].
    Text,
    /// `start << 32 | len` into the trace's lists (`Trace::lists`).
    List,
}

/// Every argument key a record can carry. The key decides how its value
/// is stored, so a record keeps one byte per key and one `u64` per value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Key {
    Component,
    Lane,
    Epoch,
    Invocation,
    Tick,
    WorkerId,
    ScheduledNs,
    LatenessNs,
    Skipped,
    OverrunPolicy,
    ExecutionNs,
    BudgetNs,
    Reason,
    Admitted,
    Rejected,
    WorkerIds,
}

/// (name, kind) of each [`Key`], in its order.
const KEYS: [(&str, Kind); 16] = [
    ("component", Kind::Name),
    ("lane", Kind::Name),
    ("epoch", Kind::U64),
    ("invocation", Kind::U64),
    ("tick", Kind::U64),
    ("worker_id", Kind::U64),
    ("scheduled_ns", Kind::U64),
    ("lateness_ns", Kind::U64),
    ("skipped", Kind::U64),
    ("overrun_policy", Kind::Text),
    ("execution_ns", Kind::U64),
    ("budget_ns", Kind::U64),
    ("reason", Kind::Text),
    ("admitted", Kind::U64),
    ("rejected", Kind::U64),
    ("worker_ids", Kind::List),
];

const _: () = assert!(KEYS.len() == Key::WorkerIds as usize + 1);

/// The fixed texts a record can carry (drop reasons, overrun policies).
const TEXTS: [&str; 6] = [
    "rejected",
    "evicted",
    "closed",
    "drop_tick",
    "skip_next",
    "catch_up_once",
];

impl Key {
    fn name(self) -> &'static str {
        KEYS[self as usize].0
    }

    fn kind(self) -> Kind {
        KEYS[self as usize].1
    }
}

/// A record's arguments: at most [`MAX_ARGS`] (key, value) pairs, inline
/// and plain data (recording one allocates nothing; a record is `Copy`).
/// Read them through [`Trace::args`], [`Record::u64_arg`],
/// [`Trace::str_arg`] or [`Trace::list_arg`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Args {
    len: u8,
    keys: [Key; MAX_ARGS],
    vals: [u64; MAX_ARGS],
}

impl Args {
    const fn new() -> Args {
        Args {
            len: 0,
            keys: [Key::Component; MAX_ARGS],
            vals: [0; MAX_ARGS],
        }
    }

    fn push(&mut self, key: Key, value: u64) {
        let i = usize::from(self.len);
        debug_assert!(i < MAX_ARGS, "more than MAX_ARGS arguments ({key:?})");
        if i < MAX_ARGS {
            self.keys[i] = key;
            self.vals[i] = value;
            self.len += 1;
        }
    }

    fn iter(&self) -> impl Iterator<Item = (Key, u64)> + '_ {
        let n = usize::from(self.len);
        self.keys[..n]
            .iter()
            .copied()
            .zip(self.vals[..n].iter().copied())
    }

    fn get(&self, key: &str) -> Option<(Key, u64)> {
        self.iter().find(|(k, _)| k.name() == key)
    }

    /// How many.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// One recorded event: fixed size, plain data, no heap memory of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

// The size `lanes/README.md` ("Trace") states; a bigger record costs page
// faults in a long trace.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Record>() == 104);

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

    /// A number (`key` must be a number key).
    pub(crate) fn arg(mut self, key: Key, value: u64) -> Record {
        debug_assert_eq!(key.kind(), Kind::U64, "{key:?}");
        self.args.push(key, value);
        self
    }

    /// A name: its index in the trace's names ([`Trace::intern`]).
    pub(crate) fn label(mut self, key: Key, name: u32) -> Record {
        debug_assert_eq!(key.kind(), Kind::Name, "{key:?}");
        self.args.push(key, u64::from(name));
        self
    }

    /// A fixed text, one of `TEXTS`.
    pub(crate) fn text(mut self, key: Key, text: &'static str) -> Record {
        debug_assert_eq!(key.kind(), Kind::Text, "{key:?}");
        let index = TEXTS.iter().position(|t| *t == text);
        debug_assert!(index.is_some(), "`{text}` is not in TEXTS");
        self.args.push(key, index.unwrap_or(usize::MAX) as u64);
        self
    }

    /// A list stored with [`Trace::push_set`].
    pub(crate) fn list(mut self, key: Key, list: ListRef) -> Record {
        debug_assert_eq!(key.kind(), Kind::List, "{key:?}");
        self.args.push(key, list.0);
        self
    }

    /// The value of argument `key`, if it is a number.
    pub fn u64_arg(&self, key: &str) -> Option<u64> {
        match self.args.get(key)? {
            (k, v) if k.kind() == Kind::U64 => Some(v),
            _ => None,
        }
    }
}

/// Where a list argument's values are in the trace (`start << LIST_LEN_BITS
/// | len`, `start` counted from the first list the trace ever stored).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ListRef(u64);

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

/// A run's trace, in the order the runner recorded it: fixed-size records
/// in a ring of chunks, plus the names and lists they refer to. It keeps at
/// most `max_records` records: past that the oldest chunk is dropped (its
/// records are counted in [`dropped`](Trace::dropped), its lists freed), so
/// a long run's trace stays bounded.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    chunks: VecDeque<Chunk>,
    /// Records kept.
    len: usize,
    /// Records a chunk holds: `CHUNK`, or `max_records / MIN_CHUNKS` for a
    /// small bound (at least 1).
    chunk: usize,
    max_records: usize,
    /// Records dropped with their chunk.
    dropped: u64,
    /// Component and lane names, referred to by index.
    names: Vec<Arc<str>>,
    /// The values of every list argument still referred to, back to back.
    lists: Vec<u64>,
    /// The absolute position of `lists[0]` (lists freed with their chunks
    /// are removed from the front).
    lists_base: u64,
    /// Lists before this absolute position belong to dropped records.
    lists_dead: u64,
}

/// A chunk of records, and where the first list one of them refers to
/// starts (everything before it can go when this chunk is the oldest).
#[derive(Clone, Debug, PartialEq)]
struct Chunk {
    records: Vec<Record>,
    first_list: Option<u64>,
}

impl Default for Trace {
    fn default() -> Trace {
        Trace::with_max_records(DEFAULT_MAX_TRACE_RECORDS)
    }
}

impl Trace {
    /// An empty trace that keeps at most `max_records` records (at least
    /// 1).
    pub(crate) fn with_max_records(max_records: usize) -> Trace {
        let max_records = max_records.max(1);
        Trace {
            chunks: VecDeque::new(),
            len: 0,
            chunk: (max_records / MIN_CHUNKS).clamp(1, CHUNK),
            max_records,
            dropped: 0,
            names: Vec::new(),
            lists: Vec::new(),
            lists_base: 0,
            lists_dead: 0,
        }
    }

    /// Appends a record (amortised: a new chunk every `chunk` records, and
    /// nothing is moved). Past the bound, the oldest chunk is dropped.
    pub(crate) fn push(&mut self, r: Record) {
        let list = r
            .args
            .iter()
            .find(|(k, _)| k.kind() == Kind::List)
            .map(|(_, v)| v >> LIST_LEN_BITS);
        match self.chunks.back_mut() {
            Some(c) if c.records.len() < self.chunk => {
                c.records.push(r);
                c.first_list = c.first_list.or(list);
            }
            _ => {
                let mut records = Vec::with_capacity(self.chunk);
                records.push(r);
                self.chunks.push_back(Chunk {
                    records,
                    first_list: list,
                });
            }
        }
        self.len += 1;
        if self.len > self.max_records {
            self.drop_oldest();
        }
    }

    /// Drops the oldest chunk (never the one just written: a bound of
    /// `max_records` records in chunks of at most `max_records /
    /// MIN_CHUNKS`, or of 1, always leaves another one) and frees the
    /// lists only its records referred to.
    #[cold]
    fn drop_oldest(&mut self) {
        let Some(old) = self.chunks.pop_front() else {
            return;
        };
        self.len -= old.records.len();
        self.dropped += old.records.len() as u64;
        let end = self.lists_base + self.lists.len() as u64;
        // Lists are stored in record order: what the oldest remaining
        // record refers to, and everything after, is still needed.
        self.lists_dead = self.chunks.iter().find_map(|c| c.first_list).unwrap_or(end);
        let dead = (self.lists_dead - self.lists_base) as usize;
        // Amortised: the front is cut once half of the buffer is dead.
        if dead > 0 && dead >= self.lists.len() / 2 {
            self.lists.drain(..dead);
            self.lists_base = self.lists_dead;
        }
    }

    /// Adds a name; its index for [`Record::label`].
    pub(crate) fn intern(&mut self, name: Arc<str>) -> u32 {
        self.names.push(name);
        u32::try_from(self.names.len() - 1).unwrap_or(u32::MAX)
    }

    /// Stores `values`, sorted and without duplicates, in the side
    /// buffer; the reference for [`Record::list`] (the record must be
    /// pushed next).
    pub(crate) fn push_set(&mut self, values: impl IntoIterator<Item = u64>) -> ListRef {
        let start = self.lists.len();
        self.lists.extend(values);
        self.lists[start..].sort_unstable();
        let mut kept = start;
        for i in start..self.lists.len() {
            if kept == start || self.lists[i] != self.lists[kept - 1] {
                self.lists[kept] = self.lists[i];
                kept += 1;
            }
        }
        self.lists.truncate(kept);
        let len = ((kept - start) as u64).min((1 << LIST_LEN_BITS) - 1);
        ListRef(((self.lists_base + start as u64) << LIST_LEN_BITS) | len)
    }

    /// The most records it keeps.
    pub fn max_records(&self) -> usize {
        self.max_records
    }

    /// Records dropped because the trace reached `max_records` (the oldest
    /// went first, a chunk at a time).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Every record, in order.
    pub fn records(&self) -> impl Iterator<Item = &Record> + '_ {
        self.chunks.iter().flat_map(|c| &c.records)
    }

    /// How many records it holds (at most `max_records`).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The events called `name`.
    pub fn named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Record> + 'a {
        self.records().filter(move |r| r.name == name)
    }

    fn value(&self, key: Key, v: u64) -> Arg {
        match key.kind() {
            Kind::U64 => Arg::U64(v),
            Kind::Name => Arg::Str(Cow::Owned(
                self.names.get(v as usize).map_or("", |n| &**n).to_string(),
            )),
            Kind::Text => Arg::Str(Cow::Borrowed(TEXTS.get(v as usize).copied().unwrap_or(""))),
            Kind::List => Arg::List(self.list(v).to_vec()),
        }
    }

    fn list(&self, v: u64) -> &[u64] {
        let (start, len) = (v >> LIST_LEN_BITS, v & ((1 << LIST_LEN_BITS) - 1));
        // A list of a dropped record may be gone (`None`): empty.
        start
            .checked_sub(self.lists_base)
            .filter(|_| start >= self.lists_dead)
            .and_then(|s| self.lists.get(s as usize..(s + len) as usize))
            .unwrap_or_default()
    }

    /// `r`'s arguments, resolved, in the order they were recorded.
    pub fn args(&self, r: &Record) -> Vec<(&'static str, Arg)> {
        r.args
            .iter()
            .map(|(k, v)| (k.name(), self.value(k, v)))
            .collect()
    }

    /// The text of `r`'s argument `key` (a name or a fixed text).
    pub fn str_arg(&self, r: &Record, key: &str) -> Option<&str> {
        match r.args.get(key)? {
            (k, v) if k.kind() == Kind::Name => self.names.get(v as usize).map(|n| &**n),
            (k, v) if k.kind() == Kind::Text => TEXTS.get(v as usize).copied(),
            _ => None,
        }
    }

    /// The values of `r`'s list argument `key` (`worker_ids`).
    pub fn list_arg(&self, r: &Record, key: &str) -> Option<&[u64]> {
        match r.args.get(key)? {
            (k, v) if k.kind() == Kind::List => Some(self.list(v)),
            _ => None,
        }
    }

    /// The trace with timestamps, durations and worker ids removed: what a
    /// deterministic replay must reproduce exactly even on real time.
    pub fn shape(&self) -> Vec<(&'static str, Vec<(&'static str, Arg)>)> {
        self.records()
            .map(|r| {
                let mut args = self.args(r);
                args.retain(|(k, _)| !matches!(*k, "worker_id" | "worker_ids"));
                (r.name, args)
            })
            .collect()
    }

    /// Writes the trace as Chrome trace JSON (opens in Perfetto). Records
    /// are turned into the writer's events one at a time, here and only
    /// here.
    pub fn write_chrome(&self, out: &mut dyn Write) -> io::Result<u64> {
        let mut tids: Vec<u64> = self.records().map(|r| r.tid).collect();
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
            other: vec![
                ("events", self.len as u64),
                ("dropped_events", self.dropped),
                ("max_events", self.max_records as u64),
            ],
        };
        let bound = [
            ("kept_events", self.len as u64),
            ("dropped_events", self.dropped),
            ("max_events", self.max_records as u64),
        ];
        let metadata = [chrome::MetaEvent {
            name: "trace_bound",
            args: &bound,
        }];
        let events = self.records().map(|r| chrome::Event {
            name: Cow::Borrowed(r.name),
            cat: "lanes",
            phase: r.phase,
            tid: r.tid,
            ts_ns: r.ts_ns,
            args: self.args(r),
        });
        chrome::write_chrome_with_metadata(out, &meta, &metadata, events)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_bounded_trace_keeps_the_newest_records_and_frees_their_lists_with_them() {
        const MAX: usize = 40;
        const PUSHED: u64 = 1_000;
        let mut t = Trace::with_max_records(MAX);
        for i in 0..PUSHED {
            let r = Record::instant("thread_pool_batch", RUNNER_TID, i);
            if i % 3 == 0 {
                let list = t.push_set([i + 1, i]);
                t.push(r.list(Key::WorkerIds, list));
            } else {
                t.push(r.arg(Key::Epoch, i));
            }
            assert!(t.len() <= MAX);
        }
        let kept = t.len() as u64;
        assert!(kept > (MAX - MAX / MIN_CHUNKS) as u64, "kept {kept}");
        assert_eq!(kept + t.dropped(), PUSHED);
        let ts: Vec<u64> = t.records().map(|r| r.ts_ns).collect();
        assert_eq!(ts, (PUSHED - kept..PUSHED).collect::<Vec<_>>());
        let mut lists = 0;
        for r in t.records().filter(|r| r.ts_ns % 3 == 0) {
            let want = [r.ts_ns, r.ts_ns + 1];
            assert_eq!(t.list_arg(r, "worker_ids"), Some(&want[..]));
            lists += want.len();
        }
        // The side buffer holds the kept records' lists and less than as
        // much again of dropped ones (it is cut when half of it is dead).
        assert!(
            t.lists.len() <= 2 * lists,
            "{} > 2 * {lists}",
            t.lists.len()
        );
    }
}
