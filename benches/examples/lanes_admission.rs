//! Admission throughput and dispatch latency of a thread-pool lane (issue 16).
//!
//! **Throughput**: `jobs` empty invocations submitted one at a time from one
//! outside thread through a 2-wide thread-pool lane on a 2-worker
//! `LaneRuntime`, until all have run; M jobs/s. Peers, 2 wide each: a pool
//! of 2 threads on one crossbeam-channel (`recv` loop), `rayon::ThreadPool::
//! spawn`, tokio `spawn` on 2 workers. **Dispatch latency**: an idle pool
//! gets one job every `gap_us`; the time from just before the submit to the
//! job's first instruction, p50/p99 over `samples`. All peers in one
//! process, alternating by round (the order rotates each round).
//!
//! `cargo run --release -p magpie-benches --example lanes_admission [rounds] [jobs] [samples] [gap_us] [peer]`
//!
//! With `peer` (`magpie-lane`, `cb-channel`, `rayon-spawn`, `tokio-spawn`)
//! only that peer runs, for `perf stat` (instructions per job do not depend
//! on the machine's load the way times do).
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use magpie_core::sync::atomic::{AtomicU64, Ordering};
use magpie_runtime::lanes::{Job, LaneRuntime, PoolLane, Priority, ThreadPoolSpec};

const WORKERS: usize = 2;

type Task = Box<dyn FnOnce() + Send>;

/// The peers: each runs boxed closures 2 wide.
enum Peer {
    Lane(PoolLane),
    Channel(ChannelPool),
    Rayon(rayon::ThreadPool),
    Tokio(tokio::runtime::Runtime),
}

impl Peer {
    fn name(&self) -> &'static str {
        match self {
            Peer::Lane(_) => "magpie-lane",
            Peer::Channel(_) => "cb-channel",
            Peer::Rayon(_) => "rayon-spawn",
            Peer::Tokio(_) => "tokio-spawn",
        }
    }

    fn submit(&self, f: impl FnOnce() + Send + 'static) {
        match self {
            Peer::Lane(pool) => {
                let _ = pool.submit(Job {
                    component: 0,
                    index: 0,
                    priority: Priority::Normal,
                    reentrant: true,
                    run: Box::new(move |_| {
                        f();
                        None
                    }),
                });
            }
            Peer::Channel(p) => p.tx.send(Box::new(f)).expect("pool alive"),
            Peer::Rayon(p) => p.spawn(f),
            Peer::Tokio(rt) => drop(rt.spawn(async move { f() })),
        }
    }
}

/// A crossbeam-channel pool: `WORKERS` threads looping on `recv`.
struct ChannelPool {
    tx: crossbeam_channel::Sender<Task>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl ChannelPool {
    fn new() -> ChannelPool {
        let (tx, rx) = crossbeam_channel::unbounded::<Task>();
        let threads = (0..WORKERS)
            .map(|_| {
                let rx = rx.clone();
                thread::spawn(move || {
                    while let Ok(task) = rx.recv() {
                        task();
                    }
                })
            })
            .collect();
        ChannelPool { tx, threads }
    }
}

impl Drop for ChannelPool {
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
fn throughput(peer: &Peer, n: u64) -> Duration {
    let done = Arc::new(AtomicU64::new(0));
    let t = Instant::now();
    for _ in 0..n {
        let d = done.clone();
        peer.submit(move || {
            d.fetch_add(1, Ordering::Relaxed);
        });
    }
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
        let s = started.clone();
        let before = origin.elapsed().as_nanos() as u64;
        peer.submit(move || {
            s.store(origin.elapsed().as_nanos() as u64, Ordering::Release);
        });
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
    let host = builder.build().unwrap();
    let peers = [
        Peer::Lane(PoolLane::new(
            &ThreadPoolSpec {
                max_threads: WORKERS,
                ..ThreadPoolSpec::default()
            },
            &host,
        )),
        Peer::Channel(ChannelPool::new()),
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
    ];
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
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
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average at end: {}", load.trim());
}
