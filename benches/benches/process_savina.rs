//! The Savina actor workloads at issue 15's full sizes (ping-pong 10^6 round
//! trips, thread ring 10^3 processes x 10^6 hops, counting 10^6 messages,
//! fork-join 10^5 processes, big 1000 processes x 10^3 pings): magpie's
//! processes on 2 workers against plain tokio tasks + mpsc, actix on one
//! arbiter, ractor and kameo (each on 2 tokio workers), one criterion group
//! per workload; and ping-pong on magpie with 1 worker against 2 (the
//! issue's target: 2 workers at most 1.1x the 1-worker time).
//!
//! ```text
//! cargo bench -p magpie-benches --bench process_savina
//! cargo bench -p magpie-benches --bench process_savina -- --sample-size 10 --measurement-time 3
//! ```
//!
//! An iteration is one whole run (a fresh runtime, the workload, its answer
//! checked; the time is from the first message or spawn to the answer), so
//! iterations take 0.1-4 s and criterion's minimum of 10 samples sets the
//! length: about 10 minutes for everything on 2 cores. Criterion runs one
//! peer's samples after another's, not alternating: a change of background
//! load between peers shows up as a ratio. The summary after criterion's
//! output prints each peer's median and its ratio to magpie-2w; take it as a
//! first look, and `examples/process_savina.rs` (alternating, rotated order)
//! for ratios.
//!
//! Not run by CI (`cargo test` does not build bench targets).

use std::time::Duration;

use criterion::{Criterion, SamplingMode};
use magpie_benches::proc_stats::loadavg;
use magpie_benches::report::{summary, GroupSpec, Recorder};
use magpie_benches::savina::{
    actix_peer, kameo_peer, magpie_peer, ractor_peer, set_scale, tokio_peer, Scale,
};

static REC: Recorder = Recorder::new();

/// Criterion's minimum; one iteration is a whole run of 0.1-4 s.
const SAMPLES: usize = 10;

/// A peer's name and the function that runs the workload once on it.
type Run = (&'static str, fn() -> Duration);

/// One workload's runs, one per peer.
struct Workload {
    name: &'static str,
    runs: [Run; 5],
}

const WORKLOADS: [Workload; 5] = [
    Workload {
        name: "ping-pong",
        runs: [
            ("magpie-2w", || magpie_peer::ping_pong(2)),
            ("tokio-mpsc-2w", tokio_peer::ping_pong),
            ("actix-1t", || actix_peer::ping_pong(0)),
            ("ractor-2w", ractor_peer::ping_pong),
            ("kameo-2w", kameo_peer::ping_pong),
        ],
    },
    Workload {
        name: "thread-ring",
        runs: [
            ("magpie-2w", || magpie_peer::ring(2)),
            ("tokio-mpsc-2w", tokio_peer::ring),
            ("actix-1t", || actix_peer::ring(0)),
            ("ractor-2w", ractor_peer::ring),
            ("kameo-2w", kameo_peer::ring),
        ],
    },
    Workload {
        name: "counting",
        runs: [
            ("magpie-2w", || magpie_peer::counting(2)),
            ("tokio-mpsc-2w", tokio_peer::counting),
            ("actix-1t", || actix_peer::counting(0)),
            ("ractor-2w", ractor_peer::counting),
            ("kameo-2w", kameo_peer::counting),
        ],
    },
    Workload {
        name: "fork-join",
        runs: [
            ("magpie-2w", || magpie_peer::fork_join(2)),
            ("tokio-mpsc-2w", tokio_peer::fork_join),
            ("actix-1t", || actix_peer::fork_join(0)),
            ("ractor-2w", ractor_peer::fork_join),
            ("kameo-2w", kameo_peer::fork_join),
        ],
    },
    Workload {
        name: "big",
        runs: [
            ("magpie-2w", || magpie_peer::big(2)),
            ("tokio-mpsc-2w", tokio_peer::big),
            ("actix-1t", || actix_peer::big(0)),
            ("ractor-2w", ractor_peer::big),
            ("kameo-2w", kameo_peer::big),
        ],
    },
];

/// The group comparing magpie's ping-pong on 1 and 2 workers.
const WORKERS_GROUP: &str = "ping-pong-workers";

/// `iters` runs of `run`, their measured times summed (setup and shutdown
/// of each run are outside), recorded for the summary.
fn runs(group: &str, peer: &str, iters: u64, run: impl Fn() -> Duration) -> Duration {
    let total: Duration = (0..iters).map(|_| run()).sum();
    REC.record(group, peer, iters, total);
    total
}

fn main() {
    set_scale(Scale::Issue);
    let load_before = loadavg();
    let mut c = Criterion::default()
        .sample_size(SAMPLES)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(10))
        .configure_from_args();
    for w in &WORKLOADS {
        let mut g = c.benchmark_group(w.name);
        g.sampling_mode(SamplingMode::Flat);
        for &(peer, run) in &w.runs {
            g.bench_function(peer, |b| {
                b.iter_custom(|iters| runs(w.name, peer, iters, run))
            });
        }
        g.finish();
    }
    let mut g = c.benchmark_group(WORKERS_GROUP);
    g.sampling_mode(SamplingMode::Flat);
    for (peer, workers) in [("magpie-1w", 1), ("magpie-2w", 2)] {
        g.bench_function(peer, |b| {
            b.iter_custom(|iters| {
                runs(WORKERS_GROUP, peer, iters, || {
                    magpie_peer::ping_pong(workers)
                })
            })
        });
    }
    g.finish();
    c.final_summary();

    let specs: Vec<GroupSpec> = WORKLOADS
        .iter()
        .map(|w| w.name)
        .chain([WORKERS_GROUP])
        .map(|name| GroupSpec {
            name,
            tasks: 0,
            samples: SAMPLES,
            ratio_to: Some(if name == WORKERS_GROUP {
                "magpie-1w"
            } else {
                "magpie-2w"
            }),
            speedup_over: None,
        })
        .collect();
    println!("\n== process_savina summary: medians of the last {SAMPLES} samples (criterion, not alternating) ==");
    println!("load average before: {load_before}; after: {}", loadavg());
    print!("{}", summary(&REC, &specs));
}
