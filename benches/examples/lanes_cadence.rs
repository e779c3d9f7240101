//! Cadence of wall-clock fixed-rate lanes (issue 16): a 1 kHz and a 100 Hz
//! lane side by side, each with an empty component, against the same two
//! cadences kept by `tokio::time::interval` (two tasks on a 2-worker tokio
//! runtime) and by dedicated threads that sleep until each deadline (two
//! threads). All peers in one process, alternating (the order rotates each
//! round), under three loads:
//!
//! - `idle`: nothing else runs.
//! - `busy`: the peer's own runtime is busy: two tasks that spin about
//!   100 µs and yield, over and over (magpie: two self-resubmitting jobs on
//!   a 2-wide thread-pool lane of the same `LaneRuntime`; tokio: two spawned
//!   tasks spinning and `yield_now`; the threads: two more threads spinning
//!   and `thread::yield_now`).
//! - `hog`: an outside CPU hog, one busy process per core (this binary
//!   re-run with `--hog`), started before the round and killed after it (a
//!   hog also exits by itself when its parent is gone).
//!
//! Each run lasts `ticks` milliseconds of wall time (the 1 kHz lane's ideal
//! tick count; the 100 Hz lane's is a tenth) and counts what each cadence
//! fired in that time. Per lane and peer it prints the release lateness of
//! each tick against its grid instant (p50, p99, max, µs), the ticks that
//! came a whole period or more late, and the ticks fired against the ideal
//! (`fired - ideal`; a cadence that skips or falls behind loses ticks, one
//! that bursts does not). The magpie lanes use the default overrun policy
//! (`drop_tick`) and report their lateness through
//! `Invocation::release_lateness` (trace off, so a long run does not grow a
//! trace). Tokio's interval uses its default (`Burst`).
//!
//! `cargo run --release -p magpie-benches --example lanes_cadence [rounds] [ticks] [loads]`
//!
//! - `rounds` (default 3): rounds per load.
//! - `ticks` (default 2000, i.e. 2 s per run): the long run is
//!   60000 (60 s per run, 9 runs per round). The default is smaller so a
//!   whole invocation takes about a minute.
//! - `loads` (default `idle,busy,hog`): a comma-separated subset.
//!
//! Numbers from a machine other helpers load are a first look, not a
//! result: the load average is printed at the start and end.
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use magpie_core::sync::atomic::{AtomicBool, Ordering};
use magpie_runtime::lanes::{
    self, Component, ComponentError, Dispatch, Execution, FixedRateSpec, GraphBuilder,
    GraphContext, Invocation, Job, LaneRuntime, LaneSpec, PoolLane, Priority, RunOptions,
    StopToken, ThreadPoolSpec,
};

/// The lanes' rates, Hz.
const RATES: [u64; 2] = [1_000, 100];
/// What a busy task spins before it yields.
const BUSY_SPIN: Duration = Duration::from_micros(100);
const PEERS: [&str; 3] = ["magpie-lane", "sleeping-thread", "tokio-interval"];

type Lateness = Arc<Mutex<Vec<u64>>>;

/// Records each tick's release lateness.
struct Probe(Lateness);

impl Component for Probe {
    fn execute(&mut self, inv: &Invocation, _: &mut GraphContext) -> Result<(), ComponentError> {
        let late = inv.release_lateness().unwrap_or_default();
        self.0.lock().unwrap().push(late.as_nanos() as u64);
        Ok(())
    }
}

fn period(hz: u64) -> Duration {
    Duration::from_nanos(1_000_000_000 / hz)
}

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Lateness per tick of each rate, ns, fired within `run_for`.
type PerRate = [Vec<u64>; 2];

fn magpie(rt: &LaneRuntime, run_for: Duration, busy: bool) -> PerRate {
    let mut g = GraphBuilder::new();
    let logs: Vec<Lateness> = RATES
        .iter()
        .map(|&hz| {
            Arc::new(Mutex::new(Vec::with_capacity(
                (run_for.as_millis() as usize * hz as usize) / 1000 + 16,
            )))
        })
        .collect();
    for (i, &hz) in RATES.iter().enumerate() {
        let lane = format!("hz{hz}");
        g.lane(LaneSpec::fixed_rate(
            lane.as_str(),
            FixedRateSpec {
                wall_clock: true,
                ..FixedRateSpec::every(period(hz))
            },
        ))
        .unwrap();
        let log = logs[i].clone();
        g.component(
            &format!("probe{hz}"),
            &lane,
            Execution::default(),
            move || Probe(log.clone()),
        )
        .unwrap();
    }
    let stop_busy = Arc::new(AtomicBool::new(false));
    let pool = busy.then(|| {
        let pool = PoolLane::new(
            &ThreadPoolSpec {
                max_threads: 2,
                ..ThreadPoolSpec::default()
            },
            rt,
        );
        for _ in 0..2 {
            let _ = pool.submit(spin_job(pool.clone(), stop_busy.clone()));
        }
        pool
    });
    let stop = StopToken::new();
    let stopper = {
        let stop = stop.clone();
        thread::spawn(move || {
            thread::sleep(run_for);
            stop.request();
        })
    };
    let r = lanes::run(
        g.build().unwrap(),
        rt,
        RunOptions {
            stop,
            trace: false,
            ..RunOptions::default()
        },
    );
    stopper.join().unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    stop_busy.store(true, Ordering::Relaxed);
    if let Some(pool) = pool {
        pool.wait_idle();
        pool.close();
    }
    [0, 1].map(|i| std::mem::take(&mut *logs[i].lock().unwrap()))
}

/// A job that spins [`BUSY_SPIN`] and submits itself again until `stop`.
fn spin_job(pool: PoolLane, stop: Arc<AtomicBool>) -> Job {
    Job {
        component: 0,
        index: 0,
        priority: Priority::Normal,
        reentrant: true,
        run: Box::new(move |d| {
            if matches!(d, Dispatch::Run { .. }) && !stop.load(Ordering::Relaxed) {
                spin(BUSY_SPIN);
                let next = spin_job(pool.clone(), stop);
                let _ = pool.submit(next);
            }
            None
        }),
    }
}

/// Two threads spinning and yielding until `stop`.
fn busy_threads(stop: &Arc<AtomicBool>) -> Vec<thread::JoinHandle<()>> {
    (0..2)
        .map(|_| {
            let stop = stop.clone();
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    spin(BUSY_SPIN);
                    thread::yield_now();
                }
            })
        })
        .collect()
}

fn sleeping_threads(run_for: Duration, busy: bool) -> PerRate {
    let stop = Arc::new(AtomicBool::new(false));
    let busy = if busy {
        busy_threads(&stop)
    } else {
        Vec::new()
    };
    let start = Instant::now();
    let end = start + run_for;
    let threads: Vec<_> = RATES
        .iter()
        .map(|&hz| {
            thread::spawn(move || {
                let p = period(hz);
                let mut out =
                    Vec::with_capacity(run_for.as_millis() as usize * hz as usize / 1000 + 16);
                for k in 0u32.. {
                    let due = start + p * k;
                    if let Some(d) = due.checked_duration_since(Instant::now()) {
                        thread::sleep(d);
                    }
                    let now = Instant::now();
                    if now >= end {
                        break;
                    }
                    out.push(now.duration_since(due).as_nanos() as u64);
                }
                out
            })
        })
        .collect();
    let mut it = threads.into_iter().map(|t| t.join().unwrap());
    let out = [it.next().unwrap(), it.next().unwrap()];
    stop.store(true, Ordering::Relaxed);
    for t in busy {
        t.join().unwrap();
    }
    out
}

fn tokio_intervals(rt: &tokio::runtime::Runtime, run_for: Duration, busy: bool) -> PerRate {
    rt.block_on(async move {
        let stop = Arc::new(AtomicBool::new(false));
        let spinners: Vec<_> = (0..if busy { 2 } else { 0 })
            .map(|_| {
                let stop = stop.clone();
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        spin(BUSY_SPIN);
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        let start = tokio::time::Instant::now();
        let end = start + run_for;
        let tasks: Vec<_> = RATES
            .iter()
            .map(|&hz| {
                tokio::spawn(async move {
                    let p = period(hz);
                    let mut iv = tokio::time::interval_at(start, p);
                    let mut out =
                        Vec::with_capacity(run_for.as_millis() as usize * hz as usize / 1000 + 16);
                    for k in 0u32.. {
                        iv.tick().await;
                        let now = tokio::time::Instant::now();
                        if now >= end {
                            break;
                        }
                        out.push(now.duration_since(start + p * k).as_nanos() as u64);
                    }
                    out
                })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        stop.store(true, Ordering::Relaxed);
        for s in spinners {
            s.await.unwrap();
        }
        let mut it = out.into_iter();
        [it.next().unwrap(), it.next().unwrap()]
    })
}

/// One busy process per core; killed on drop.
struct Hog(Vec<Child>);

impl Hog {
    fn start() -> Hog {
        let exe = std::env::current_exe().expect("own path");
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        Hog((0..cores)
            .map(|_| Command::new(&exe).arg("--hog").spawn().expect("spawn hog"))
            .collect())
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The hog's body: spin, and leave when the parent is gone (checked every
/// ~10 ms), so a killed bench leaves no hog behind.
fn hog_main() {
    let parent = std::os::unix::process::parent_id();
    loop {
        spin(Duration::from_millis(10));
        if std::os::unix::process::parent_id() != parent {
            return;
        }
    }
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1e3
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

#[derive(Default, Clone)]
struct Summary {
    p50: Vec<f64>,
    p99: Vec<f64>,
    max: Vec<f64>,
    period_late: u64,
    fired: u64,
    ideal: u64,
}

fn main() {
    let mut args = std::env::args().skip(1);
    let first = args.next();
    if first.as_deref() == Some("--hog") {
        hog_main();
        return;
    }
    let rounds: usize = first.and_then(|a| a.parse().ok()).unwrap_or(3);
    let ticks: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2_000);
    let loads: Vec<String> = args
        .next()
        .unwrap_or_else(|| "idle,busy,hog".to_string())
        .split(',')
        .map(str::to_string)
        .collect();
    let run_for = Duration::from_millis(ticks);
    let rt = LaneRuntime::new(2).unwrap();
    let trt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    println!(
        "cadence: lanes at {RATES:?} Hz side by side, {} ms per run, {rounds} rounds per load; \
         2 workers each; {} cores; load average at start: {}",
        run_for.as_millis(),
        thread::available_parallelism().map_or(1, |n| n.get()),
        loadavg()
    );
    println!(
        "{:<5} {:>5} {:<16} {:>5} {:>9} {:>9} {:>9} {:>11} {:>7} {:>6}",
        "load",
        "Hz",
        "peer",
        "round",
        "p50 µs",
        "p99 µs",
        "max µs",
        "period-late",
        "fired",
        "-ideal"
    );
    for load in &loads {
        let busy = load == "busy";
        let mut sum = vec![vec![Summary::default(); PEERS.len()]; RATES.len()];
        for r in 0..rounds {
            let hog = (load == "hog").then(Hog::start);
            for k in 0..PEERS.len() {
                let peer = (k + r) % PEERS.len();
                let res = match peer {
                    0 => magpie(&rt, run_for, busy),
                    1 => sleeping_threads(run_for, busy),
                    _ => tokio_intervals(&trt, run_for, busy),
                };
                for (i, mut v) in res.into_iter().enumerate() {
                    let hz = RATES[i];
                    let p = period(hz).as_nanos() as u64;
                    let ideal = (run_for.as_nanos() as u64).div_ceil(p);
                    v.sort_unstable();
                    let late = v.iter().filter(|&&l| l >= p).count() as u64;
                    let fired = v.len() as u64;
                    println!(
                        "{load:<5} {hz:>5} {:<16} {r:>5} {:>9.1} {:>9.1} {:>9.1} {late:>11} {fired:>7} {:>+6}",
                        PEERS[peer],
                        pct(&v, 0.5),
                        pct(&v, 0.99),
                        pct(&v, 1.0),
                        fired as i64 - ideal as i64
                    );
                    let s = &mut sum[i][peer];
                    s.p50.push(pct(&v, 0.5));
                    s.p99.push(pct(&v, 0.99));
                    s.max.push(pct(&v, 1.0));
                    s.period_late += late;
                    s.fired += fired;
                    s.ideal += ideal;
                }
            }
            drop(hog);
        }
        println!("{load}: median over rounds of p50 / p99 (min-max of p99), max, period-late ticks in all, fired - ideal in all");
        for (i, hz) in RATES.iter().enumerate() {
            for (peer, name) in PEERS.iter().enumerate() {
                let s = &sum[i][peer];
                let (lo, hi) = s
                    .p99
                    .iter()
                    .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
                println!(
                    "  {hz:>5} Hz {name:<16} {:>8.1} / {:>8.1} ({lo:.1}-{hi:.1})  max {:>9.1}  period-late {:>5} of {:>6}  fired-ideal {:+}",
                    median(s.p50.clone()),
                    median(s.p99.clone()),
                    s.max.iter().copied().fold(0.0, f64::max),
                    s.period_late,
                    s.fired,
                    s.fired as i64 - s.ideal as i64
                );
            }
        }
    }
    println!("load average at end: {}", loadavg());
}
