//! Latency probe of the I/O path (cargo feature `io-probe`, off by default;
//! README.md, "Where the echo tail came from"). It timestamps the steps a
//! readiness event goes through on its way to the task that waits for it and
//! keeps process-wide histograms of the gaps, for a benchmark server to print
//! at exit (`net_server`, `NET_SERVER_PROBE=1`). Not a runtime feature: one
//! set of histograms per process, and a clock read at every step.
//!
//! | histogram | from | to |
//! | --- | --- | --- |
//! | `ready_to_poll[source]` | dispatch takes a reader's waker (R2) | that task's next look at the socket's readiness (R4), by where the task was found |
//! | `look_gap[kind]` | the end of the previous poll of the poller | the start of a poll that returned at least one event, by the kind of poll |
//! | `yield_ns` | a worker's `thread::yield_now` on the idle yield tier | its return |
//! | `task_poll` | a worker starts polling a task | the poll returns (a long one: the thread was descheduled) |

use std::fmt::Write as _;
use std::sync::OnceLock;
use std::time::Instant;

use magpie_core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Sub-buckets per power of two.
const SUB_BITS: u32 = 2;
const SUB: u64 = 1 << SUB_BITS;
const BUCKETS: usize = 64 << SUB_BITS;

/// A log-linear histogram of nanoseconds: 4 buckets per power of two
/// (at most 25 % of a value's own size wide). Relaxed counters.
#[derive(Debug)]
pub struct Histogram {
    buckets: [AtomicU64; BUCKETS],
    count: AtomicU64,
    sum: AtomicU64,
}

fn bucket_of(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let sub = (v >> (msb - SUB_BITS)) & (SUB - 1);
    ((u64::from(msb - SUB_BITS + 1) << SUB_BITS) + sub) as usize
}

/// The smallest value of bucket `i`.
fn bucket_floor(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        return i;
    }
    let e = i >> SUB_BITS;
    let sub = i & (SUB - 1);
    (SUB + sub) << (e - 1)
}

impl Histogram {
    const fn new() -> Self {
        Self {
            buckets: [const { AtomicU64::new(0) }; BUCKETS],
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0),
        }
    }

    /// Adds one value (nanoseconds).
    pub fn record(&self, ns: u64) {
        self.buckets[bucket_of(ns)].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(ns, Ordering::Relaxed);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Values at or above `ns` (by bucket: counts the bucket holding `ns`
    /// when `ns` is its floor).
    pub fn count_at_least(&self, ns: u64) -> u64 {
        self.buckets[bucket_of(ns)..]
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .sum()
    }

    /// The nearest-rank quantile `q`, as the upper end of its bucket.
    pub fn quantile(&self, q: f64) -> u64 {
        let n = self.count();
        if n == 0 {
            return 0;
        }
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            seen += b.load(Ordering::Relaxed);
            if seen >= rank {
                return bucket_floor(i + 1).saturating_sub(1);
            }
        }
        u64::MAX
    }

    fn line(&self, name: &str, out: &mut String) {
        let n = self.count();
        if n == 0 {
            let _ = writeln!(out, "{name:<24} n=0");
            return;
        }
        let us = |ns: u64| ns as f64 / 1e3;
        let _ = writeln!(
            out,
            "{name:<24} n={n:<9} mean={:>8.1}us p50={:>8.1} p90={:>8.1} p99={:>8.1} p99.9={:>8.1} >=100us={:<7} >=1ms={}",
            us(self.sum.load(Ordering::Relaxed) / n),
            us(self.quantile(0.5)),
            us(self.quantile(0.9)),
            us(self.quantile(0.99)),
            us(self.quantile(0.999)),
            self.count_at_least(100_000),
            self.count_at_least(1_000_000),
        );
    }
}

/// Experiment switches of the async worker's idle path, read once from
/// `MAGPIE_IO_KNOBS` (a comma list), so that one probe build serves several
/// variants in the same alternating rounds (`benches/net/README.md`,
/// "Variants of one build"). Builds without the feature have none of this.
#[derive(Debug, Default)]
pub(crate) struct Knobs {
    /// `look_first`: look at the poller when an idle spell starts, before
    /// it spins.
    pub(crate) look_first: bool,
    /// `no_yield`: no `thread::yield_now` on the yield tier (after its look
    /// at the poller) while sockets are registered.
    pub(crate) no_yield: bool,
    /// `spin=N`: spin rounds per spell instead of the builder's.
    pub(crate) spin: Option<u32>,
}

/// The switches, parsed on first use.
pub(crate) fn knobs() -> &'static Knobs {
    static KNOBS: OnceLock<Knobs> = OnceLock::new();
    KNOBS.get_or_init(|| {
        let mut k = Knobs::default();
        if let Ok(v) = std::env::var("MAGPIE_IO_KNOBS") {
            for item in v.split(',').filter(|i| !i.is_empty()) {
                let (key, val) = item.split_once('=').unwrap_or((item, ""));
                match key {
                    "look_first" => k.look_first = true,
                    "no_yield" => k.no_yield = true,
                    "spin" => k.spin = val.parse().ok(),
                    other => eprintln!("MAGPIE_IO_KNOBS: unknown switch {other:?}"),
                }
            }
        }
        k
    })
}

/// Where the task that looked at its socket was found (`sched::Source`),
/// or `Outside` (a `block_on`, the current-thread flavour).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Found {
    Lifo = 0,
    Local = 1,
    Global = 2,
    Steal = 3,
    Outside = 4,
}
const FOUND_NAMES: [&str; 5] = ["lifo", "local", "global", "steal", "outside"];

/// Which kind of poll of the poller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Look {
    /// Zero-timeout look with the timers, every `TIMER_CHECK_INTERVAL` polls (P3).
    Tick = 0,
    /// Zero-timeout look of an idle worker (P3, the yield tier or the
    /// look before spinning).
    Idle = 1,
    /// A sleep in the poller (P2).
    Park = 2,
}
const LOOK_NAMES: [&str; 3] = ["tick", "idle", "park"];

/// Every histogram and counter of the probe.
#[derive(Debug)]
pub struct Probe {
    ready_to_poll: [Histogram; 5],
    /// `ready_to_poll`, split by whether the task was polled on the worker
    /// that dispatched its event (0) or on another (1).
    ready_to_poll_worker: [Histogram; 2],
    look_gap: [Histogram; 3],
    looks: [AtomicU64; 3],
    events: [AtomicU64; 3],
    busy_poller: AtomicU64,
    /// Parks that found the poller held and slept on the futex.
    park_no_poller: AtomicU64,
    /// ... while nobody slept in the poller (the holder was looking).
    park_no_poller_looking: AtomicU64,
    yield_ns: Histogram,
    task_poll: Histogram,
    last_poll_end: AtomicU64,
}

static PROBE: Probe = Probe {
    ready_to_poll: [const { Histogram::new() }; 5],
    ready_to_poll_worker: [const { Histogram::new() }; 2],
    look_gap: [const { Histogram::new() }; 3],
    looks: [const { AtomicU64::new(0) }; 3],
    events: [const { AtomicU64::new(0) }; 3],
    busy_poller: AtomicU64::new(0),
    park_no_poller: AtomicU64::new(0),
    park_no_poller_looking: AtomicU64::new(0),
    yield_ns: Histogram::new(),
    task_poll: Histogram::new(),
    last_poll_end: AtomicU64::new(0),
};

thread_local! {
    static FOUND: std::cell::Cell<Found> = const { std::cell::Cell::new(Found::Outside) };
    static LOOK: std::cell::Cell<Look> = const { std::cell::Cell::new(Look::Idle) };
}

/// Nanoseconds since the first call in this process, plus one (0 means
/// "no stamp").
pub(crate) fn now() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64 + 1
}

/// The worker loop is about to poll a task found at `found`.
pub(crate) fn set_found(found: Found) {
    FOUND.with(|f| f.set(found));
}

/// The next poll of the poller on this thread is of kind `look`.
pub(crate) fn set_look(look: Look) {
    LOOK.with(|l| l.set(look));
}

/// A worker wanted the poller for a look and another held it.
pub(crate) fn busy_poller() {
    PROBE.busy_poller.fetch_add(1, Ordering::Relaxed);
}

/// A worker parks on its futex: the poller was held (by a worker asleep in
/// it, or by one looking: `looking`).
pub(crate) fn park_no_poller(looking: bool) {
    PROBE.park_no_poller.fetch_add(1, Ordering::Relaxed);
    if looking {
        PROBE.park_no_poller_looking.fetch_add(1, Ordering::Relaxed);
    }
}

/// A poll of the poller starts: the time since the previous one ended.
pub(crate) fn poll_start() -> (u64, u64) {
    let start = now();
    let prev = PROBE.last_poll_end.load(Ordering::Relaxed);
    (start, start.saturating_sub(prev))
}

/// A poll that started with [`poll_start`] dispatched `told` events.
pub(crate) fn poll_end(gap: u64, told: usize) {
    let look = LOOK.with(|l| l.get()) as usize;
    PROBE.looks[look].fetch_add(1, Ordering::Relaxed);
    PROBE.events[look].fetch_add(told as u64, Ordering::Relaxed);
    if told > 0 {
        PROBE.look_gap[look].record(gap);
    }
    PROBE.last_poll_end.store(now(), Ordering::Relaxed);
    set_look(Look::Idle);
}

/// The per-resource stamp: when R2 took the reader's waker, and on which
/// worker.
#[derive(Debug, Default)]
pub(crate) struct Stamp {
    woken: AtomicU64,
    worker: AtomicUsize,
}

impl Stamp {
    /// R2 took the reader's waker.
    pub(crate) fn woke(&self) {
        self.worker.store(
            crate::worker_id::current_worker_id().unwrap_or(usize::MAX),
            Ordering::Relaxed,
        );
        self.woken.store(now(), Ordering::Relaxed);
    }

    /// The task looks at the socket's readiness (R4).
    pub(crate) fn looked(&self) {
        let woken = self.woken.swap(0, Ordering::Relaxed);
        if woken == 0 {
            return;
        }
        let ns = now().saturating_sub(woken);
        let found = FOUND.with(|f| f.get());
        PROBE.ready_to_poll[found as usize].record(ns);
        let same = self.worker.load(Ordering::Relaxed)
            == crate::worker_id::current_worker_id().unwrap_or(usize::MAX);
        PROBE.ready_to_poll_worker[usize::from(!same)].record(ns);
    }
}

/// A worker's `thread::yield_now` took `ns`.
pub(crate) fn yielded(ns: u64) {
    PROBE.yield_ns.record(ns);
}

/// A task's poll took `ns`.
pub(crate) fn task_poll(ns: u64) {
    PROBE.task_poll.record(ns);
}

/// The probe's histograms and counters as text, one line each.
pub fn report() -> String {
    let p = &PROBE;
    let mut out = String::new();
    for (i, name) in FOUND_NAMES.iter().enumerate() {
        p.ready_to_poll[i].line(&format!("ready_to_poll.{name}"), &mut out);
    }
    p.ready_to_poll_worker[0].line("ready_to_poll.same_wkr", &mut out);
    p.ready_to_poll_worker[1].line("ready_to_poll.other_wkr", &mut out);
    for (i, name) in LOOK_NAMES.iter().enumerate() {
        p.look_gap[i].line(&format!("look_gap.{name}"), &mut out);
    }
    for (i, name) in LOOK_NAMES.iter().enumerate() {
        let _ = writeln!(
            out,
            "looks.{name:<18} polls={} events={}",
            p.looks[i].load(Ordering::Relaxed),
            p.events[i].load(Ordering::Relaxed)
        );
    }
    let _ = writeln!(
        out,
        "busy_poller              {} park_no_poller={} (holder looking: {})",
        p.busy_poller.load(Ordering::Relaxed),
        p.park_no_poller.load(Ordering::Relaxed),
        p.park_no_poller_looking.load(Ordering::Relaxed),
    );
    p.yield_ns.line("yield", &mut out);
    p.task_poll.line("task_poll", &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_hold_their_values() {
        for v in (0..5000u64).chain([1 << 20, (1 << 20) + 12345, 1 << 40]) {
            let i = bucket_of(v);
            assert!(bucket_floor(i) <= v, "{v} below its bucket {i}");
            assert!(v < bucket_floor(i + 1), "{v} above its bucket {i}");
        }
        // Up to 2^60 ns (36 years): the floors rise.
        for i in 0..bucket_of(1 << 60) {
            assert!(bucket_floor(i) < bucket_floor(i + 1), "bucket {i}");
        }
    }

    #[test]
    fn quantiles_come_from_the_recorded_values() {
        let h = Histogram::new();
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        // 500 us lies in [458 752, 524 288) ns; 990 us in [917 504, 1 048 576).
        assert_eq!(h.quantile(0.5), 524_287);
        assert_eq!(h.quantile(0.99), 1_048_575);
        // 918 us .. 1000 us share the bucket of 1 ms.
        assert_eq!(h.count_at_least(1_000_000), 83);
        assert_eq!(h.count(), 1000);
    }
}
