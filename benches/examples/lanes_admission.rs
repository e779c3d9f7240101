//! Admission throughput and dispatch latency of a thread-pool lane (issue 16).
//!
//! **Throughput**: `jobs` empty invocations submitted one at a time from one
//! outside thread through a 2-wide thread-pool lane on a 2-worker
//! `LaneRuntime`, until all have run; M jobs/s. Peers, 2 wide each:
//!
//! - `magpie-lane`: a `PoolLane<Probe>`: the job is data (`Probe`, what
//!   the other peers' closures capture) kept in the lane's queues, no
//!   allocation per job (how the graph runner submits invocations);
//! - `magpie-boxed`: a `PoolLane` of boxed-closure `Job`s (one `Box` per job);
//! - `cb-channel`: 2 threads on one crossbeam-channel of boxed closures
//!   (`recv` loop; one `Box` per job);
//! - `cb-typed`: the same pool on a channel of `Probe`s (no `Box`: the
//!   like-for-like peer of `magpie-lane`);
//! - `rayon::ThreadPool::spawn`, tokio `spawn` on 2 workers;
//! - `magpie-batch32`: not the one-at-a-time admission but its
//!   bound: the same plain-data lane, the producer handing its jobs over
//!   in batches of [`BATCH`] (`submit_batch`, one lock per batch on the
//!   producer's side), what a per-producer ring drained in batches would
//!   give the producer (docs/parts/lanes.md, branch `lanes4`).
//!
//! **Dispatch latency**: an idle pool gets one job every `gap_us`; the time
//! from just before the submit to the job's first instruction, p50/p99 over
//! `samples`. All peers in one process, alternating by round (the order
//! rotates each round); the summary gives each lane/channel ratio per round
//! (same round, adjacent runs), median and range.
//!
//! `cargo run --release -p magpie-benches --example lanes_admission [rounds] [jobs] [samples] [gap_us] [peer]`
//!
//! With `peer` only that peer runs, for `valgrind --tool=callgrind`
//! (instructions per job do not depend on the machine's load the way times
//! do; count two job numbers and take the difference, which removes
//! start-up).
//!
//! Experiment knobs (environment): `LANE_PARK_US`, the lane workers' first
//! park timeout; `LANE_SPIN_ITERS`, their idle spin rounds before yield and
//! park (docs/parts/lanes.md, "the idle dispatch"). The last line gives the
//! process's CPU time over its wall time (every thread: with `peer` set,
//! that peer's and the others' idle threads), the cost of a spin.
use std::cell::RefCell;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use magpie_core::sync::atomic::{AtomicU64, Ordering};
use magpie_runtime::lanes::{
    Dispatch, Job, LaneJob, LaneRuntime, PoolLane, Priority, ThreadPoolSpec, Work,
};

const WORKERS: usize = 2;

/// Jobs per `submit_batch` of the `magpie-batch32` peer.
const BATCH: usize = 32;

type Task = Box<dyn FnOnce() + Send>;

/// What every peer's job does: count itself, or stamp its start.
enum Probe {
    Count(Arc<AtomicU64>),
    Stamp(Arc<AtomicU64>, Instant),
}

impl Probe {
    fn fire(self) {
        match self {
            Probe::Count(done) => {
                done.fetch_add(1, Ordering::Relaxed);
            }
            Probe::Stamp(started, origin) => {
                // Release: pairs with the Acquire load in `dispatch`.
                started.store(origin.elapsed().as_nanos() as u64, Ordering::Release);
            }
        }
    }
}

impl Work for Probe {
    type Done = ();

    fn run(self, dispatch: Dispatch) {
        if let Dispatch::Run { .. } = dispatch {
            self.fire();
        }
    }

    fn then(_: ()) {}
}

/// The peers: each runs its jobs 2 wide.
enum Peer {
    Lane(PoolLane<Probe>),
    LaneBoxed(PoolLane),
    Channel(ChannelPool<Task>),
    ChannelTyped(ChannelPool<Probe>),
    Rayon(rayon::ThreadPool),
    Tokio(tokio::runtime::Runtime),
    LaneBatched(PoolLane<Probe>, RefCell<Vec<LaneJob<Probe>>>),
}

impl Peer {
    fn name(&self) -> &'static str {
        match self {
            Peer::Lane(_) => "magpie-lane",
            Peer::LaneBoxed(_) => "magpie-boxed",
            Peer::Channel(_) => "cb-channel",
            Peer::ChannelTyped(_) => "cb-typed",
            Peer::Rayon(_) => "rayon-spawn",
            Peer::Tokio(_) => "tokio-spawn",
            Peer::LaneBatched(..) => "magpie-batch32",
        }
    }

    fn submit(&self, p: Probe) {
        match self {
            Peer::Lane(pool) => {
                let _ = pool.submit(LaneJob {
                    component: 0,
                    index: 0,
                    priority: Priority::Normal,
                    reentrant: true,
                    run: p,
                });
            }
            Peer::LaneBoxed(pool) => {
                let _ = pool.submit(Job {
                    component: 0,
                    index: 0,
                    priority: Priority::Normal,
                    reentrant: true,
                    run: Box::new(move |_| {
                        p.fire();
                        None
                    }),
                });
            }
            Peer::Channel(c) => c.tx.send(Box::new(move || p.fire())).expect("pool alive"),
            Peer::ChannelTyped(c) => c.tx.send(p).expect("pool alive"),
            Peer::Rayon(pool) => pool.spawn(move || p.fire()),
            Peer::Tokio(rt) => drop(rt.spawn(async move { p.fire() })),
            Peer::LaneBatched(pool, buf) => {
                let mut buf = buf.borrow_mut();
                let index = buf.len();
                buf.push(LaneJob {
                    component: 0,
                    index,
                    priority: Priority::Normal,
                    reentrant: true,
                    run: p,
                });
                if buf.len() >= BATCH {
                    let _ = pool.submit_batch(std::mem::take(&mut *buf));
                }
            }
        }
    }

    /// Hands over what a batching peer holds (the others hold nothing).
    fn flush(&self) {
        if let Peer::LaneBatched(pool, buf) = self {
            let jobs = std::mem::take(&mut *buf.borrow_mut());
            if !jobs.is_empty() {
                let _ = pool.submit_batch(jobs);
            }
        }
    }
}

/// A crossbeam-channel pool: `WORKERS` threads looping on `recv`, each
/// message handed to `run`.
struct ChannelPool<T> {
    tx: crossbeam_channel::Sender<T>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl<T: Send + 'static> ChannelPool<T> {
    fn new(run: fn(T)) -> ChannelPool<T> {
        let (tx, rx) = crossbeam_channel::unbounded::<T>();
        let threads = (0..WORKERS)
            .map(|_| {
                let rx = rx.clone();
                thread::spawn(move || {
                    while let Ok(msg) = rx.recv() {
                        run(msg);
                    }
                })
            })
            .collect();
        ChannelPool { tx, threads }
    }
}

impl<T> Drop for ChannelPool<T> {
    fn drop(&mut self) {
        // Disconnect: each worker's `recv` fails once the queue is empty.
        let (tx, _) = crossbeam_channel::unbounded();
        drop(std::mem::replace(&mut self.tx, tx));
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// `n` empty jobs from this thread; the clock stops when the last has run.
#[inline(never)]
fn throughput(peer: &Peer, n: u64) -> Duration {
    let done = Arc::new(AtomicU64::new(0));
    let t = Instant::now();
    for _ in 0..n {
        peer.submit(Probe::Count(done.clone()));
    }
    peer.flush();
    while done.load(Ordering::Relaxed) < n {
        std::hint::spin_loop();
    }
    t.elapsed()
}

/// Submit-to-start latency of single jobs on an idle pool, in ns.
fn dispatch(peer: &Peer, samples: usize, gap: Duration) -> Vec<u64> {
    let origin = Instant::now();
    let started = Arc::new(AtomicU64::new(u64::MAX));
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples {
        thread::sleep(gap);
        started.store(u64::MAX, Ordering::Relaxed);
        let before = origin.elapsed().as_nanos() as u64;
        peer.submit(Probe::Stamp(started.clone(), origin));
        peer.flush();
        let at = loop {
            let v = started.load(Ordering::Acquire);
            if v != u64::MAX {
                break v;
            }
            std::hint::spin_loop();
        };
        out.push(at.saturating_sub(before));
    }
    out
}

fn pct(sorted: &[u64], p: f64) -> u64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut arg = |d: u64| args.next().and_then(|a| a.parse().ok()).unwrap_or(d);
    let rounds = arg(5) as usize;
    let n = arg(1_000_000);
    let samples = arg(2_000) as usize;
    let gap = Duration::from_micros(arg(1_000));
    let only = std::env::args().nth(5);
    // `LANE_PARK_US`: the lane workers' first park timeout (an experiment
    // knob; default the builder's).
    let mut builder = LaneRuntime::builder().workers(WORKERS);
    if let Some(us) = std::env::var("LANE_PARK_US")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        builder = builder.park_timeout(Duration::from_micros(us));
    }
    // `LANE_SPIN_ITERS`: empty rounds an idle lane worker spins before it
    // yields and parks (an experiment knob for the idle-pool dispatch
    // latency; default the builder's).
    if let Some(n) = std::env::var("LANE_SPIN_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        builder = builder.spin_iters(n);
    }
    let host = builder.build().unwrap();
    let spec = ThreadPoolSpec {
        max_threads: WORKERS,
        ..ThreadPoolSpec::default()
    };
    let peers = [
        Peer::Lane(PoolLane::typed(&spec, &host)),
        Peer::LaneBoxed(PoolLane::new(&spec, &host)),
        Peer::Channel(ChannelPool::new(|t: Task| t())),
        Peer::ChannelTyped(ChannelPool::new(Probe::fire)),
        Peer::Rayon(
            rayon::ThreadPoolBuilder::new()
                .num_threads(WORKERS)
                .build()
                .unwrap(),
        ),
        Peer::Tokio(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(WORKERS)
                .build()
                .unwrap(),
        ),
        Peer::LaneBatched(
            PoolLane::typed(&spec, &host),
            RefCell::new(Vec::with_capacity(BATCH)),
        ),
    ];
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let cpu0 = magpie_benches::proc_stats::cpu_time_schedstat().ok();
    let wall0 = Instant::now();
    println!(
        "{WORKERS} wide; throughput: {n} empty jobs from one outside thread; dispatch: \
         {samples} single jobs, {gap:?} apart; load average at start: {}",
        load.trim()
    );
    let k = peers.len();
    let mut rates = vec![Vec::new(); k];
    let mut p50s = vec![Vec::new(); k];
    let mut p99s = vec![Vec::new(); k];
    for r in 0..rounds {
        for j in 0..k {
            let i = (j + r) % k;
            let peer = &peers[i];
            if only.as_deref().is_some_and(|o| o != peer.name()) {
                continue;
            }
            let el = throughput(peer, n);
            let rate = n as f64 / el.as_secs_f64() / 1e6;
            let mut d = dispatch(peer, samples.max(1), gap);
            d.sort_unstable();
            let (p50, p99) = (pct(&d, 0.5) as f64 / 1e3, pct(&d, 0.99) as f64 / 1e3);
            println!(
                "round {r} {:<12} {rate:6.2} M/s   dispatch p50 {p50:8.1} µs  p99 {p99:8.1} µs",
                peer.name()
            );
            rates[i].push(rate);
            p50s[i].push(p50);
            p99s[i].push(p99);
        }
    }
    // Per-round ratios (the two peers ran in the same round, one after
    // the other), before the medians below sort the rates.
    println!("\nper-round throughput ratios (median, min-max):");
    for (a, b) in [(0, 3), (0, 2), (1, 2), (0, 1), (6, 3)] {
        if rates[a].len() != rates[b].len() || rates[a].is_empty() {
            continue;
        }
        let mut ratio: Vec<f64> = rates[a].iter().zip(&rates[b]).map(|(x, y)| x / y).collect();
        let (lo, hi) = ratio
            .iter()
            .fold((f64::MAX, 0f64), |(l, h), &x| (l.min(x), h.max(x)));
        let listed: Vec<String> = ratio.iter().map(|x| format!("{x:.2}")).collect();
        println!(
            "{} / {}: {:.2}x ({lo:.2}-{hi:.2}) [{}]",
            peers[a].name(),
            peers[b].name(),
            median(&mut ratio),
            listed.join(", ")
        );
    }
    let lane_rate = if rates[0].is_empty() {
        f64::NAN
    } else {
        median(&mut rates[0].clone())
    };
    println!("\nmedians over {rounds} rounds (min-max):");
    for i in 0..k {
        if rates[i].is_empty() {
            continue;
        }
        let (lo, hi) = rates[i]
            .iter()
            .fold((f64::MAX, 0f64), |(a, b), &x| (a.min(x), b.max(x)));
        let m = median(&mut rates[i]);
        println!(
            "{:<12} {m:6.2} M/s ({lo:.2}-{hi:.2})  lane/peer {:5.2}x   dispatch p50 {:8.1} µs  p99 {:8.1} µs",
            peers[i].name(),
            lane_rate / m,
            median(&mut p50s[i]),
            median(&mut p99s[i]),
        );
    }
    if let Peer::Lane(pool) = &peers[0] {
        let st = pool.stats();
        println!(
            "lane: {} jobs completed, {} runners scheduled ({:.3} per job)",
            st.completed,
            st.runners_scheduled,
            st.runners_scheduled as f64 / st.completed.max(1) as f64
        );
    }
    if let (Some(c0), Ok(c1)) = (cpu0, magpie_benches::proc_stats::cpu_time_schedstat()) {
        // The whole process: producer, every peer's threads, spinning
        // included (with `peer` set, that peer's and the others' idle ones).
        println!(
            "process CPU {:.2} s over {:.2} s of wall time",
            c1.saturating_sub(c0).as_secs_f64(),
            wall0.elapsed().as_secs_f64()
        );
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average at end: {}", load.trim());
}
