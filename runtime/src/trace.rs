//! The Chrome trace-event writer shared by the scanner's `--trace` and the
//! lanes' run traces.
//!
//! The output is the JSON-object form of the trace-event format that Perfetto
//! (ui.perfetto.dev) and chrome://tracing open:
//!
//! ```json
//! {"traceEvents":[
//! {"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"magpie scan"}},
//! {"name":"thread_name","ph":"M","pid":1,"tid":0,"args":{"name":"worker 0"}},
//! {"name":"thread_sort_index","ph":"M","pid":1,"tid":0,"args":{"sort_index":0}},
//! {"name":"Scan","cat":"task","ph":"X","pid":1,"tid":0,"ts":12.345,"dur":80.500,
//!  "args":{"path":"src/a.env","offset":0,"bytes":262144}},
//! {"name":"fixed_rate_tick_begin","cat":"lanes","ph":"i","s":"t","pid":1,"tid":2,
//!  "ts":10000.000,"args":{"tick":1}}
//! ],"displayTimeUnit":"ms","otherData":{"dropped_events":0}}
//! ```
//!
//! `ts` and `dur` are microseconds with three decimals (nanosecond
//! resolution). The writer takes events already collected; how they are
//! collected (per-worker buffers in the scanner, one log per run in the lanes)
//! is the caller's business; `events` may be borrowed or built one at a time
//! as they are written (the lanes turn their fixed-size records into events
//! only here, at export).

use std::borrow::{Borrow, Cow};
use std::fmt::Write as _;
use std::io::{self, Write};

/// The `pid` written in every event.
pub const TRACE_PID: u32 = 1;

/// The shape of one event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// A span (`"ph":"X"`) lasting `dur_ns` nanoseconds from `ts`.
    Complete {
        /// The span's length.
        dur_ns: u64,
    },
    /// A point in time on one thread (`"ph":"i"`, `"s":"t"`).
    Instant,
}

/// One argument value of an event.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    /// An unsigned integer.
    U64(u64),
    /// A float (non-finite values are written as `null`).
    F64(f64),
    /// A string, escaped on output.
    Str(Cow<'static, str>),
    /// A list of unsigned integers (e.g. `worker_ids`).
    List(Vec<u64>),
}

/// One trace event.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// What happened (`"name"`).
    pub name: Cow<'static, str>,
    /// The category (`"cat"`).
    pub cat: &'static str,
    /// Span or instant.
    pub phase: Phase,
    /// The track: a worker id, or any number the caller gives a thread name.
    pub tid: u64,
    /// Nanoseconds since the trace's origin.
    pub ts_ns: u64,
    /// Arguments, written in this order.
    pub args: Vec<(&'static str, Arg)>,
}

/// What the file says besides its events.
#[derive(Clone, Debug, Default)]
pub struct Meta {
    /// The process track's name.
    pub process_name: String,
    /// `(tid, name)` of each track, in display order.
    pub threads: Vec<(u64, String)>,
    /// Counters written under `"otherData"` (e.g. `dropped_events`).
    pub other: Vec<(&'static str, u64)>,
}

/// A process-level metadata event with numeric arguments, written after the
/// thread names: `{"name":NAME,"ph":"M","pid":1,"tid":0,"args":{...}}`
/// (viewers skip metadata names they do not know; the lanes write their
/// trace bound and dropped-event count this way).
#[derive(Clone, Copy, Debug)]
pub struct MetaEvent<'a> {
    /// The event's name.
    pub name: &'a str,
    /// Its arguments, in this order.
    pub args: &'a [(&'a str, u64)],
}

/// Writes `events` (in the given order) as a Chrome trace. Returns the number
/// of events written (metadata records not counted).
pub fn write_chrome<E: Borrow<Event>>(
    out: &mut dyn Write,
    meta: &Meta,
    events: impl IntoIterator<Item = E>,
) -> io::Result<u64> {
    write_chrome_with_metadata(out, meta, &[], events)
}

/// [`write_chrome`] with extra process-level metadata events.
pub fn write_chrome_with_metadata<E: Borrow<Event>>(
    out: &mut dyn Write,
    meta: &Meta,
    metadata: &[MetaEvent<'_>],
    events: impl IntoIterator<Item = E>,
) -> io::Result<u64> {
    let mut line = String::with_capacity(256);
    out.write_all(b"{\"traceEvents\":[\n")?;
    line.push_str("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":");
    let _ = write!(line, "{TRACE_PID},\"tid\":0,\"args\":{{\"name\":");
    push_json_str(&mut line, &meta.process_name);
    line.push_str("}}");
    out.write_all(line.as_bytes())?;
    for (tid, name) in &meta.threads {
        line.clear();
        let _ = write!(
            line,
            ",\n{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{TRACE_PID},\"tid\":{tid},\
             \"args\":{{\"name\":"
        );
        push_json_str(&mut line, name);
        let _ = write!(
            line,
            "}}}},\n{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":{TRACE_PID},\
             \"tid\":{tid},\"args\":{{\"sort_index\":{tid}}}}}"
        );
        out.write_all(line.as_bytes())?;
    }
    for m in metadata {
        line.clear();
        line.push_str(",\n{\"name\":");
        push_json_str(&mut line, m.name);
        let _ = write!(
            line,
            ",\"ph\":\"M\",\"pid\":{TRACE_PID},\"tid\":0,\"args\":{{"
        );
        push_u64_fields(&mut line, m.args);
        line.push_str("}}");
        out.write_all(line.as_bytes())?;
    }
    let mut written = 0u64;
    for e in events {
        let e = e.borrow();
        line.clear();
        line.push_str(",\n{\"name\":");
        push_json_str(&mut line, &e.name);
        line.push_str(",\"cat\":");
        push_json_str(&mut line, e.cat);
        match e.phase {
            Phase::Complete { .. } => line.push_str(",\"ph\":\"X\""),
            Phase::Instant => line.push_str(",\"ph\":\"i\",\"s\":\"t\""),
        }
        let _ = write!(
            line,
            ",\"pid\":{TRACE_PID},\"tid\":{},\"ts\":{}",
            e.tid,
            Micros(e.ts_ns)
        );
        if let Phase::Complete { dur_ns } = e.phase {
            let _ = write!(line, ",\"dur\":{}", Micros(dur_ns));
        }
        line.push_str(",\"args\":{");
        for (i, (key, value)) in e.args.iter().enumerate() {
            if i > 0 {
                line.push(',');
            }
            push_json_str(&mut line, key);
            line.push(':');
            push_arg(&mut line, value);
        }
        line.push_str("}}");
        out.write_all(line.as_bytes())?;
        written += 1;
    }
    line.clear();
    line.push_str("\n],\"displayTimeUnit\":\"ms\",\"otherData\":{");
    push_u64_fields(&mut line, &meta.other);
    line.push_str("}}\n");
    out.write_all(line.as_bytes())?;
    out.flush()?;
    Ok(written)
}

/// Appends `"key":value` pairs, comma-separated.
fn push_u64_fields(line: &mut String, fields: &[(&str, u64)]) {
    for (i, (key, value)) in fields.iter().enumerate() {
        if i > 0 {
            line.push(',');
        }
        push_json_str(line, key);
        let _ = write!(line, ":{value}");
    }
}

fn push_arg(line: &mut String, value: &Arg) {
    match value {
        Arg::U64(v) => {
            let _ = write!(line, "{v}");
        }
        Arg::F64(v) if v.is_finite() => {
            let _ = write!(line, "{v}");
        }
        Arg::F64(_) => line.push_str("null"),
        Arg::Str(s) => push_json_str(line, s),
        Arg::List(vs) => {
            line.push('[');
            for (i, v) in vs.iter().enumerate() {
                if i > 0 {
                    line.push(',');
                }
                let _ = write!(line, "{v}");
            }
            line.push(']');
        }
    }
}

/// Nanoseconds shown as microseconds with three decimals.
struct Micros(u64);

impl std::fmt::Display for Micros {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

/// Appends `s` as a quoted JSON string.
pub fn push_json_str(line: &mut String, s: &str) {
    line.push('"');
    for c in s.chars() {
        match c {
            '"' => line.push_str("\\\""),
            '\\' => line.push_str("\\\\"),
            '\n' => line.push_str("\\n"),
            '\r' => line.push_str("\\r"),
            '\t' => line.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(line, "\\u{:04x}", c as u32);
            }
            c => line.push(c),
        }
    }
    line.push('"');
}
