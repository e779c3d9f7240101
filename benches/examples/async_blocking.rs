//! `spawn_blocking` round trip and `timeout` overhead, magpie against tokio
//! (issue 13, target: magpie at most 0.7x tokio's time).
//!
//! Both runtimes get 2 workers ([`WORKERS`]) and run the same loops inside a
//! spawned task (so the task runs on a worker, as in a service):
//!
//! - `spawn_blocking`: spawn a closure returning a value, await it;
//!   [`BLOCKING_OPS`] times in a row. Per op: mean, and p50/p99 of each
//!   round trip's own latency.
//! - `timeout_ready`: await a ready future under `timeout(1 s, ..)`, and the
//!   same future without it; [`TIMEOUT_OPS`] times.
//! - `timeout_yield`: the same with a future that completes after one
//!   `yield_now`; [`YIELD_OPS`] times.
//!
//! Rounds alternate between the peers in a balanced order
//! (`report::alternate`); ratios are per round (magpie / tokio in the same
//! round), printed as median with spread. The machine's cores and load
//! average are printed with the numbers: on a loaded machine they are a
//! first look, not a result.
//!
//! `cargo run --release -p magpie-benches --example async_blocking [ROUNDS]`
//!
//! For instruction counts (callgrind, deterministic on a loaded machine):
//! `async_blocking once {tokio,magpie} {ready,plain,yield,yield_plain} OPS`
//! runs only that loop once, after building the runtime. Instructions per
//! timeout = (I(ready, N) - I(plain, N)) / N, e.g.
//! `valgrind --tool=callgrind --callgrind-out-file=/dev/null
//!  target/release/examples/async_blocking once magpie ready 100000`.
use std::cell::RefCell;
use std::hint::black_box;
use std::time::{Duration, Instant};

use magpie_benches::proc_stats::loadavg;
use magpie_benches::report::{alternate, balanced_rounds_at_least, ratio_spreads, Recorder};

/// Worker threads for both runtimes.
const WORKERS: usize = 2;
/// Round trips per `spawn_blocking` run.
const BLOCKING_OPS: usize = 20_000;
/// Awaits per `timeout_ready` run.
const TIMEOUT_OPS: usize = 200_000;
/// Awaits per `timeout_yield` run.
const YIELD_OPS: usize = 50_000;
/// A deadline no op comes near.
const DEADLINE: Duration = Duration::from_secs(1);

/// The loops, written once; `$spawn_blocking`, `$timeout` and `$yield_now`
/// are the peer's own.
macro_rules! workloads {
    ($name:ident, $rt:ty, $spawn_blocking:path, $timeout:path, $yield_now:path) => {
        struct $name($rt);

        impl $name {
            /// Total time, and each round trip's latency in ns.
            fn blocking(&self) -> (Duration, Vec<u64>) {
                self.0
                    .block_on(self.0.spawn(async {
                        let mut lat = Vec::with_capacity(BLOCKING_OPS);
                        let start = Instant::now();
                        for i in 0..BLOCKING_OPS {
                            let t0 = Instant::now();
                            let v = $spawn_blocking(move || i ^ 0x5a).await.unwrap();
                            black_box(v);
                            lat.push(t0.elapsed().as_nanos() as u64);
                        }
                        (start.elapsed(), lat)
                    }))
                    .unwrap()
            }

            /// Awaits `make(i)` for `i` in `0..ops` inside one task.
            fn timed<Fut>(
                &self,
                ops: usize,
                make: impl Fn(usize) -> Fut + Send + 'static,
            ) -> Duration
            where
                Fut: std::future::Future + Send + 'static,
                Fut::Output: Send,
            {
                self.0
                    .block_on(self.0.spawn(async move {
                        let start = Instant::now();
                        for i in 0..ops {
                            black_box(make(i).await);
                        }
                        start.elapsed()
                    }))
                    .unwrap()
            }

            /// `once`'s loops.
            fn run_once(&self, what: &str, ops: usize) -> Duration {
                match what {
                    "ready" => self.ready_n(ops, true),
                    "plain" => self.ready_n(ops, false),
                    "yield" => self.after_yield_n(ops, true),
                    "yield_plain" => self.after_yield_n(ops, false),
                    _ => panic!("unknown loop {what}"),
                }
            }

            fn ready(&self, with_timeout: bool) -> Duration {
                self.ready_n(TIMEOUT_OPS, with_timeout)
            }

            fn ready_n(&self, ops: usize, with_timeout: bool) -> Duration {
                self.timed(ops, move |i| async move {
                    if with_timeout {
                        $timeout(DEADLINE, std::future::ready(i)).await.unwrap()
                    } else {
                        std::future::ready(i).await
                    }
                })
            }

            fn after_yield(&self, with_timeout: bool) -> Duration {
                self.after_yield_n(YIELD_OPS, with_timeout)
            }

            fn after_yield_n(&self, ops: usize, with_timeout: bool) -> Duration {
                self.timed(ops, move |i| async move {
                    let fut = async move {
                        $yield_now().await;
                        i
                    };
                    if with_timeout {
                        $timeout(DEADLINE, fut).await.unwrap()
                    } else {
                        fut.await
                    }
                })
            }
        }
    };
}

workloads!(
    Tokio,
    tokio::runtime::Runtime,
    tokio::task::spawn_blocking,
    tokio::time::timeout,
    tokio::task::yield_now
);
workloads!(
    Magpie,
    magpie_runtime::Runtime,
    magpie_runtime::spawn_blocking,
    magpie_runtime::time::timeout,
    magpie_runtime::yield_now
);

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let k = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[k]
}

fn ns_per(d: Duration, ops: usize) -> f64 {
    d.as_nanos() as f64 / ops as f64
}

/// Median ns/op of `peer` in `group`.
fn median_ns(rec: &Recorder, group: &str, peer: &str, ops: usize) -> f64 {
    rec.median(group, peer, usize::MAX)
        .map(|d| ns_per(d, ops))
        .unwrap_or(f64::NAN)
}

/// `once PEER LOOP OPS`: one run of one loop, for callgrind.
fn once(args: &[String]) {
    let [peer, what, ops] = args else {
        panic!("usage: async_blocking once {{tokio,magpie}} {{ready,plain,yield,yield_plain}} OPS");
    };
    let ops: usize = ops.parse().expect("OPS");
    let t = match peer.as_str() {
        "tokio" => Tokio(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(WORKERS)
                .enable_all()
                .build()
                .unwrap(),
        )
        .run_once(what, ops),
        "magpie" => Magpie(
            magpie_runtime::Runtime::builder()
                .worker_threads(WORKERS)
                .build()
                .unwrap(),
        )
        .run_once(what, ops),
        _ => panic!("unknown peer {peer}"),
    };
    println!("{peer} {what} {ops}: {:.1} ns/op", ns_per(t, ops));
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("once") {
        return once(&args[2..]);
    }
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10);
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load_before = loadavg();
    let tokio_rt = Tokio(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .enable_all()
            .build()
            .unwrap(),
    );
    let magpie_rt = Magpie(
        magpie_runtime::Runtime::builder()
            .worker_threads(WORKERS)
            .build()
            .unwrap(),
    );
    // Warm up both (blocking pools spawn their first thread, code paged in).
    let _ = tokio_rt.blocking();
    let _ = magpie_rt.blocking();
    let _ = (tokio_rt.ready(true), magpie_rt.ready(true));

    let rec = Recorder::new();
    let rounds2 = balanced_rounds_at_least(2, rounds);
    let rounds4 = balanced_rounds_at_least(4, rounds);

    let tokio_lat = RefCell::new(Vec::new());
    let magpie_lat = RefCell::new(Vec::new());
    alternate(
        &rec,
        "spawn_blocking",
        rounds2,
        &mut [
            ("tokio", &mut || {
                let (t, lat) = tokio_rt.blocking();
                tokio_lat.borrow_mut().extend(lat);
                t
            }),
            ("magpie", &mut || {
                let (t, lat) = magpie_rt.blocking();
                magpie_lat.borrow_mut().extend(lat);
                t
            }),
        ],
    );
    alternate(
        &rec,
        "timeout_ready",
        rounds4,
        &mut [
            ("tokio", &mut || tokio_rt.ready(true)),
            ("magpie", &mut || magpie_rt.ready(true)),
            ("tokio_plain", &mut || tokio_rt.ready(false)),
            ("magpie_plain", &mut || magpie_rt.ready(false)),
        ],
    );
    alternate(
        &rec,
        "timeout_yield",
        rounds4,
        &mut [
            ("tokio", &mut || tokio_rt.after_yield(true)),
            ("magpie", &mut || magpie_rt.after_yield(true)),
            ("tokio_plain", &mut || tokio_rt.after_yield(false)),
            ("magpie_plain", &mut || magpie_rt.after_yield(false)),
        ],
    );
    let load_after = loadavg();

    println!(
        "async_blocking: {cores} cores, {WORKERS} workers each; load average before {load_before}, after {load_after}"
    );
    println!("spawn_blocking round trip ({BLOCKING_OPS} per run, {rounds2} rounds alternating):");
    for (name, lat) in [("tokio", &tokio_lat), ("magpie", &magpie_lat)] {
        let mut l = lat.borrow_mut();
        l.sort_unstable();
        println!(
            "  {name:<7} mean {:>8.0} ns/op (median of runs)  p50 {:>7} ns  p99 {:>8} ns",
            median_ns(&rec, "spawn_blocking", name, BLOCKING_OPS),
            percentile(&l, 0.50),
            percentile(&l, 0.99),
        );
    }
    print!(
        "{}",
        ratio_spreads(&rec, "spawn_blocking", "magpie", &["tokio"])
    );
    for (group, ops, what) in [
        ("timeout_ready", TIMEOUT_OPS, "a ready future"),
        ("timeout_yield", YIELD_OPS, "a future ready after one yield"),
    ] {
        println!("timeout around {what} ({ops} per run, {rounds4} rounds alternating):");
        for peer in ["tokio", "magpie"] {
            let with = median_ns(&rec, group, peer, ops);
            let plain = median_ns(&rec, group, &format!("{peer}_plain"), ops);
            println!(
                "  {peer:<7} with timeout {with:>7.1} ns/op, without {plain:>7.1} ns/op, overhead {:>7.1} ns/op",
                with - plain
            );
        }
        print!("{}", ratio_spreads(&rec, group, "magpie", &["tokio"]));
        print!(
            "{}",
            ratio_spreads(&rec, group, "magpie_plain", &["tokio_plain"])
        );
    }
}
