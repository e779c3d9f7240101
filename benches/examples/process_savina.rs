//! Savina-style actor workloads on magpie's processes, against plain tokio
//! tasks with mpsc channels and the actor frameworks ractor, kameo and actix
//! (issue 15's peers), in the same run, peer order rotated each round, with
//! the median of each and the spread of the per-round ratio.
//!
//! Workloads (scaled down from the sizes so a run takes about a
//! minute on 2 shared cores; the scale is printed):
//! - ping-pong: two processes, `PING` round trips;
//! - counting: one process sends `COUNT` messages to another, which replies
//!   once at the end;
//! - thread ring: `RING` processes pass a token `HOPS` times;
//! - fork-join creation: spawn `FORK` processes that each send one message
//!   to a collector and end;
//! - big: `BIG` processes each ping random neighbours `BIG_PINGS` times, one
//!   ping at a time, and answer the pings they get.
//!
//! Peers: magpie processes on 2 workers and on 1 worker; tokio
//! (multi-thread, 2 workers) tasks with `tokio::sync::mpsc`; ractor and
//! kameo actors (tokio multi-thread, 2 workers); actix actors on one
//! `System` thread (actix runs an arbiter's actors on one thread) and spread
//! round-robin over 2 arbiters. The framework
//! peers live in `magpie_benches::savina` (magpie's and tokio's versions
//! in `magpie_peer` and `tokio_peer`, shared with the criterion bench
//! `benches/process_savina.rs`); every peer checks its answer.
//!
//! Run: `cargo run --release -p magpie-benches --example process_savina [ROUNDS [WORKLOAD [PEER]]]`
//!
//! `WORKLOAD` (`ping-pong`, `counting`, `thread-ring`, `fork-join`, `big`;
//! `all` for every one) and `PEER` (`magpie-2w`, `tokio-mpsc-2w`, ...) keep
//! only the runs named, for profiling one of them (`perf record -g`); the
//! ratio lines need `magpie-2w` and the peer in the same run.

use std::time::Duration;

use magpie_benches::report::{median_of, Spread};
use magpie_benches::savina::{
    actix_peer, kameo_peer, magpie_peer, ractor_peer, tokio_peer, BIG, BIG_PINGS, COUNT, FORK,
    HOPS, PING, RING,
};

type Run = fn() -> Duration;

/// A named peer and the function that runs its version of a workload once.
type Peer = (&'static str, Box<dyn Fn() -> Duration>);

/// The 1-minute load average, from `/proc/loadavg`.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

/// The peers of one workload, each with the function that runs it once.
fn peers(
    magpie: fn(usize) -> Duration,
    tokio: Run,
    ractor: Run,
    kameo: Run,
    actix: fn(usize) -> Duration,
) -> Vec<Peer> {
    vec![
        ("magpie-2w", Box::new(move || magpie(2))),
        ("magpie-1w", Box::new(move || magpie(1))),
        ("tokio-mpsc-2w", Box::new(tokio)),
        ("ractor-2w", Box::new(ractor)),
        ("kameo-2w", Box::new(kameo)),
        ("actix-1t", Box::new(move || actix(0))),
        ("actix-2a", Box::new(move || actix(2))),
    ]
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5);
    let only: Option<String> = std::env::args().nth(2).filter(|w| w != "all");
    let only_peer: Option<String> = std::env::args().nth(3);
    println!(
        "scale: ping-pong {PING} round trips, counting {COUNT} messages, ring {RING} x {HOPS} hops, \
         fork-join {FORK} processes, big {BIG} processes x {BIG_PINGS} pings; {rounds} rounds, peer order rotated each round"
    );
    println!("threads: magpie-2w/-1w 2/1 workers; tokio, ractor, kameo: tokio multi-thread, 2 workers; actix-1t: one System thread; actix-2a: actors round-robin on 2 arbiters");
    println!("load average (1 min) at start: {}", load_average());
    let workloads: Vec<(&str, Vec<Peer>)> = vec![
        (
            "ping-pong",
            peers(
                magpie_peer::ping_pong,
                tokio_peer::ping_pong,
                ractor_peer::ping_pong,
                kameo_peer::ping_pong,
                actix_peer::ping_pong,
            ),
        ),
        (
            "counting",
            peers(
                magpie_peer::counting,
                tokio_peer::counting,
                ractor_peer::counting,
                kameo_peer::counting,
                actix_peer::counting,
            ),
        ),
        (
            "thread-ring",
            peers(
                magpie_peer::ring,
                tokio_peer::ring,
                ractor_peer::ring,
                kameo_peer::ring,
                actix_peer::ring,
            ),
        ),
        (
            "fork-join",
            peers(
                magpie_peer::fork_join,
                tokio_peer::fork_join,
                ractor_peer::fork_join,
                kameo_peer::fork_join,
                actix_peer::fork_join,
            ),
        ),
        (
            "big",
            peers(
                magpie_peer::big,
                tokio_peer::big,
                ractor_peer::big,
                kameo_peer::big,
                actix_peer::big,
            ),
        ),
    ];
    for (name, peers) in &workloads {
        if only.as_deref().is_some_and(|o| o != *name) {
            continue;
        }
        if let Some(peer) = &only_peer {
            // One peer alone (profiling): its times, no ratios.
            let Some((_, run)) = peers.iter().find(|(p, _)| p == peer) else {
                panic!("no peer named {peer:?}");
            };
            let mut t: Vec<f64> = (0..rounds).map(|_| run().as_secs_f64() * 1e3).collect();
            let lo = t.iter().cloned().fold(f64::INFINITY, f64::min);
            let hi = t.iter().cloned().fold(0.0, f64::max);
            let median = median_of(&mut t).unwrap();
            println!("{name:12} {peer:14} median {median:9.1} ms  [{lo:.1} .. {hi:.1}]");
            continue;
        }
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); peers.len()];
        for round in 0..rounds {
            // Rotate the order each round so no peer always runs first.
            for k in 0..peers.len() {
                let i = (k + round) % peers.len();
                times[i].push(peers[i].1().as_secs_f64() * 1e3);
            }
        }
        let medians: Vec<f64> = times
            .iter()
            .map(|t| median_of(&mut t.clone()).unwrap())
            .collect();
        for (i, (peer, _)) in peers.iter().enumerate() {
            let t = &times[i];
            let lo = t.iter().cloned().fold(f64::INFINITY, f64::min);
            let hi = t.iter().cloned().fold(0.0, f64::max);
            print!(
                "{name:12} {peer:14} median {:9.1} ms  [{lo:.1} .. {hi:.1}]",
                medians[i]
            );
            if i >= 2 {
                // Per-round ratio magpie-2w / peer (below 1: magpie faster).
                let ratios: Vec<f64> = times[0].iter().zip(t).map(|(m, p)| m / p).collect();
                print!("  magpie-2w/peer {}", Spread::of(&ratios).unwrap());
            }
            println!();
        }
        let best = (2..peers.len())
            .min_by(|&a, &b| medians[a].total_cmp(&medians[b]))
            .unwrap();
        let ratios: Vec<f64> = times[1].iter().zip(&times[5]).map(|(m, p)| m / p).collect();
        println!(
            "{name:12} best peer: {} ({:.1} ms); magpie-1w/actix-1t {}",
            peers[best].0,
            medians[best],
            Spread::of(&ratios).unwrap()
        );
    }
    println!("load average (1 min) at end: {}", load_average());
}
