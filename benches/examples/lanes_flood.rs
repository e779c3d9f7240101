//! Priority under a low-priority flood (issue 16): the latency from
//! submission to start of a ~5 µs high-priority job arriving every 1 ms while
//! ~50 µs low-priority jobs keep 4 000 queued on 2 workers. The flood is fed
//! from inside the pool (each low job, when it finishes, submits the next).
//!
//! Peers, in the same process, alternating by round:
//! - `magpie-lane`: a `thread_pool` lane (`PoolLane`, `max_threads = 2`, default
//!   aging) on a 2-worker magpie `LaneRuntime`;
//! - `strict-2q`: two queues under one mutex, 2 threads; a worker always takes
//!   the high queue first (the reference);
//! - `tokio`: `Handle::spawn` on a 2-worker multi-thread runtime (FIFO).
//!
//! `cargo run --release -p magpie-benches --example lanes_flood [rounds] [highs]`
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use magpie_core::sync::atomic::{AtomicBool, Ordering};
use magpie_runtime::lanes::{Job, LaneRuntime, PoolLane, Priority, ThreadPoolSpec};

const WORKERS: usize = 2;
const BACKLOG: usize = 4_000;
const LOW_WORK: Duration = Duration::from_micros(50);
const HIGH_WORK: Duration = Duration::from_micros(5);
const HIGH_EVERY: Duration = Duration::from_millis(1);

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

type Latencies = Arc<Mutex<Vec<Duration>>>;

/// What a peer must offer: submit a low job that resubmits itself while
/// `flood` is set, and a high job.
trait Peer: Send + Sync + 'static {
    fn name(&self) -> &'static str;
    fn low(self: &Arc<Self>, flood: Arc<AtomicBool>);
    fn high(self: &Arc<Self>, submitted: Instant, lat: Latencies);
    /// Waits until everything submitted has run.
    fn drain(&self);
}

// ---- magpie ------------------------------------------------------------

struct MagpieLane {
    _rt: LaneRuntime,
    pool: PoolLane,
}

impl Peer for MagpieLane {
    fn name(&self) -> &'static str {
        "magpie-lane"
    }
    fn low(self: &Arc<Self>, flood: Arc<AtomicBool>) {
        let me = self.clone();
        let _ = self.pool.submit(Job {
            component: 1,
            index: 0,
            priority: Priority::Low,
            reentrant: true,
            run: Box::new(move |_| {
                spin(LOW_WORK);
                if flood.load(Ordering::Relaxed) {
                    me.low(flood);
                }
                None
            }),
        });
    }
    fn high(self: &Arc<Self>, submitted: Instant, lat: Latencies) {
        let _ = self.pool.submit(Job {
            component: 0,
            index: 0,
            priority: Priority::High,
            reentrant: true,
            run: Box::new(move |_| {
                lat.lock().unwrap().push(submitted.elapsed());
                spin(HIGH_WORK);
                None
            }),
        });
    }
    fn drain(&self) {
        self.pool.wait_idle();
    }
}

// ---- strict two-queue pool ----------------------------------------------

type Task = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct Queues {
    high: VecDeque<Task>,
    low: VecDeque<Task>,
    running: usize,
    closed: bool,
}

struct Strict {
    q: Arc<(Mutex<Queues>, Condvar, Condvar)>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl Strict {
    fn new() -> Strict {
        let q: Arc<(Mutex<Queues>, Condvar, Condvar)> = Arc::default();
        let threads = (0..WORKERS)
            .map(|_| {
                let q = q.clone();
                std::thread::spawn(move || loop {
                    let task = {
                        let mut s = q.0.lock().unwrap();
                        loop {
                            if let Some(t) = s.high.pop_front().or_else(|| s.low.pop_front()) {
                                s.running += 1;
                                break t;
                            }
                            if s.closed {
                                return;
                            }
                            s = q.1.wait(s).unwrap();
                        }
                    };
                    task();
                    let mut s = q.0.lock().unwrap();
                    s.running -= 1;
                    if s.running == 0 && s.high.is_empty() && s.low.is_empty() {
                        q.2.notify_all();
                    }
                })
            })
            .collect();
        Strict {
            q,
            threads: Mutex::new(threads),
        }
    }
    fn push(&self, high: bool, t: Task) {
        let mut s = self.q.0.lock().unwrap();
        if high {
            s.high.push_back(t);
        } else {
            s.low.push_back(t);
        }
        self.q.1.notify_one();
    }
}

impl Drop for Strict {
    fn drop(&mut self) {
        self.q.0.lock().unwrap().closed = true;
        self.q.1.notify_all();
        for t in self.threads.lock().unwrap().drain(..) {
            let _ = t.join();
        }
    }
}

impl Peer for Strict {
    fn name(&self) -> &'static str {
        "strict-2q"
    }
    fn low(self: &Arc<Self>, flood: Arc<AtomicBool>) {
        let me = self.clone();
        self.push(
            false,
            Box::new(move || {
                spin(LOW_WORK);
                if flood.load(Ordering::Relaxed) {
                    me.low(flood);
                }
            }),
        );
    }
    fn high(self: &Arc<Self>, submitted: Instant, lat: Latencies) {
        self.push(
            true,
            Box::new(move || {
                lat.lock().unwrap().push(submitted.elapsed());
                spin(HIGH_WORK);
            }),
        );
    }
    fn drain(&self) {
        let mut s = self.q.0.lock().unwrap();
        while s.running > 0 || !s.high.is_empty() || !s.low.is_empty() {
            s = self.q.2.wait(s).unwrap();
        }
    }
}

// ---- tokio ----------------------------------------------------------------

struct Tokio {
    rt: tokio::runtime::Runtime,
    live: Arc<(Mutex<usize>, Condvar)>,
}

impl Tokio {
    fn spawn(self: &Arc<Self>, f: impl FnOnce() + Send + 'static) {
        *self.live.0.lock().unwrap() += 1;
        let live = self.live.clone();
        self.rt.spawn(async move {
            f();
            let mut n = live.0.lock().unwrap();
            *n -= 1;
            if *n == 0 {
                live.1.notify_all();
            }
        });
    }
}

impl Peer for Tokio {
    fn name(&self) -> &'static str {
        "tokio"
    }
    fn low(self: &Arc<Self>, flood: Arc<AtomicBool>) {
        let me = self.clone();
        self.spawn(move || {
            spin(LOW_WORK);
            if flood.load(Ordering::Relaxed) {
                me.low(flood);
            }
        });
    }
    fn high(self: &Arc<Self>, submitted: Instant, lat: Latencies) {
        self.spawn(move || {
            lat.lock().unwrap().push(submitted.elapsed());
            spin(HIGH_WORK);
        });
    }
    fn drain(&self) {
        let mut n = self.live.0.lock().unwrap();
        while *n > 0 {
            n = self.live.1.wait(n).unwrap();
        }
    }
}

// ---- the measurement ----------------------------------------------------

fn round<P: Peer>(peer: &Arc<P>, highs: usize) -> Vec<Duration> {
    let flood = Arc::new(AtomicBool::new(true));
    for _ in 0..BACKLOG + WORKERS {
        peer.low(flood.clone());
    }
    let lat: Latencies = Arc::default();
    let start = Instant::now();
    for k in 0..highs {
        // On a grid, so a late submitter does not thin the high stream.
        let due = start + HIGH_EVERY * (k as u32 + 1);
        if let Some(d) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
        peer.high(Instant::now(), lat.clone());
    }
    // Give the last high jobs the time the slowest peer needs, then stop.
    let deadline = Instant::now() + Duration::from_secs(5);
    while lat.lock().unwrap().len() < highs && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    flood.store(false, Ordering::Relaxed);
    peer.drain();
    let mut v = lat.lock().unwrap().clone();
    v.sort_unstable();
    v
}

fn pct(v: &[Duration], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i].as_secs_f64() * 1e6
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3);
    let highs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1_000);
    let rt = LaneRuntime::new(WORKERS).unwrap();
    let spec = ThreadPoolSpec {
        max_threads: WORKERS,
        ..ThreadPoolSpec::default()
    };
    let pool = PoolLane::new(&spec, &rt);
    let magpie = Arc::new(MagpieLane { _rt: rt, pool });
    let strict = Arc::new(Strict::new());
    let tokio = Arc::new(Tokio {
        rt: tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .build()
            .unwrap(),
        live: Arc::default(),
    });
    println!(
        "priority under flood: {WORKERS} workers, {BACKLOG} queued low jobs of {LOW_WORK:?}, \
         a {HIGH_WORK:?} high job every {HIGH_EVERY:?}, {highs} high jobs per round, {rounds} rounds"
    );
    println!("latency from submission to start, µs");
    println!(
        "{:<12} {:>5} {:>9} {:>9} {:>9} {:>6}",
        "peer", "round", "p50", "p99", "max", "n"
    );
    let mut p99: Vec<(&str, Vec<f64>)> = vec![
        ("magpie-lane", vec![]),
        ("strict-2q", vec![]),
        ("tokio", vec![]),
    ];
    let mut p50: Vec<Vec<f64>> = vec![vec![]; 3];
    for r in 0..rounds {
        // Rotate the order each round.
        for k in 0..3 {
            let i = (k + r) % 3;
            let (name, v) = match i {
                0 => (magpie.name(), round(&magpie, highs)),
                1 => (strict.name(), round(&strict, highs)),
                _ => (tokio.name(), round(&tokio, highs)),
            };
            println!(
                "{name:<12} {r:>5} {:>9.1} {:>9.1} {:>9.1} {:>6}",
                pct(&v, 0.5),
                pct(&v, 0.99),
                pct(&v, 1.0),
                v.len()
            );
            p99[i].1.push(pct(&v, 0.99));
            p50[i].push(pct(&v, 0.5));
        }
    }
    println!("median over rounds (p50 / p99, µs):");
    for (i, (name, v)) in p99.iter().enumerate() {
        println!(
            "  {name:<12} {:>9.1} / {:>9.1}",
            median(p50[i].clone()),
            median(v.clone())
        );
    }
    let ratios: Vec<f64> = p99[0].1.iter().zip(&p99[1].1).map(|(m, s)| m / s).collect();
    println!(
        "magpie-lane p99 / strict-2q p99 per round: {:?}, median {:.2} (target <= 2)",
        ratios
            .iter()
            .map(|r| (r * 100.0).round() / 100.0)
            .collect::<Vec<_>>(),
        median(ratios.clone())
    );
}
