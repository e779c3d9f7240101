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
//! peers live in `magpie_benches::savina`; every peer checks its answer.
//!
//! Run: `cargo run --release -p magpie-benches --example process_savina [ROUNDS [WORKLOAD [PEER]]]`
//!
//! `WORKLOAD` (`ping-pong`, `counting`, `thread-ring`, `fork-join`, `big`;
//! `all` for every one) and `PEER` (`magpie-2w`, `tokio-mpsc-2w`, ...) keep
//! only the runs named, for profiling one of them (`perf record -g`); the
//! ratio lines need `magpie-2w` and the peer in the same run.

use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use magpie_benches::report::median_of;
use magpie_runtime::process::{Event, Events, InitError, Pid, Process, ProcessRuntime, StepOutput};

use magpie_benches::report::Spread;
use magpie_benches::savina::{
    actix_peer, check, kameo_peer, ractor_peer, Neighbours, BIG, BIG_PINGS, BIG_SUM, COUNT, FORK,
    FORK_SUM, HOPS, PING, RING,
};

type Done = Arc<Mutex<std_mpsc::Sender<u64>>>;

/// How long a magpie run's shutdown waits for its processes. They ignore
/// `Event::Cancel`, so shutdown closes them by force at this deadline; it is
/// outside the measured time and only keeps the run short.
const SHUTDOWN: Duration = Duration::from_millis(100);

/// A process made of one closure.
struct P<F>(F);

impl<F> Process<u64> for P<F>
where
    F: FnMut(Events<'_, u64>, &mut StepOutput<'_, u64>) + Send + 'static,
{
    fn init(&mut self, _method: &str, _input: Option<u64>) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, events: Events<'_, u64>, out: &mut StepOutput<'_, u64>) {
        (self.0)(events, out)
    }
}

fn proc_rt(workers: usize) -> ProcessRuntime<u64> {
    ProcessRuntime::builder().workers(workers).build().unwrap()
}

fn signal(done: &Done, result: u64) {
    done.lock().unwrap().send(result).unwrap();
}

fn magpie_ping_pong(workers: usize) -> Duration {
    let rt = proc_rt(workers);
    let (tx, rx) = std_mpsc::channel();
    let done: Done = Arc::new(Mutex::new(tx));
    let pong = rt
        .spawn(
            P(|events: Events<'_, u64>, out: &mut StepOutput<'_, u64>| {
                for e in events {
                    if let Event::Message {
                        from: Some(f), msg, ..
                    } = e
                    {
                        out.send(f, msg).unwrap();
                    }
                }
                out.idle();
            }),
            "main",
            None,
        )
        .unwrap();
    let d = done.clone();
    let ping = rt
        .spawn(
            P(
                move |events: Events<'_, u64>, out: &mut StepOutput<'_, u64>| {
                    for e in events {
                        if let Event::Message { msg, .. } = e {
                            if msg == PING {
                                signal(&d, msg);
                            } else {
                                out.send(pong, msg + 1).unwrap();
                            }
                        }
                    }
                    out.idle();
                },
            ),
            "main",
            None,
        )
        .unwrap();
    let start = Instant::now();
    rt.send(ping, 0).unwrap();
    let got = rx.recv().unwrap();
    let t = start.elapsed();
    check("ping-pong", "magpie", got, PING);
    rt.shutdown(SHUTDOWN);
    t
}

fn magpie_counting(workers: usize) -> Duration {
    let rt = proc_rt(workers);
    let (tx, rx) = std_mpsc::channel();
    let done: Done = Arc::new(Mutex::new(tx));
    let mut n = 0;
    let counter = rt
        .spawn(
            P(
                move |events: Events<'_, u64>, out: &mut StepOutput<'_, u64>| {
                    for e in events {
                        if let Event::Message { from: Some(f), .. } = e {
                            n += 1;
                            if n == COUNT {
                                out.send(f, n).unwrap();
                            }
                        }
                    }
                    out.idle();
                },
            ),
            "main",
            None,
        )
        .unwrap();
    let d = done.clone();
    let mut sent = 0;
    let sender = rt
        .spawn(
            P(
                move |events: Events<'_, u64>, out: &mut StepOutput<'_, u64>| {
                    let mut go = false;
                    for e in events {
                        if let Event::Message { from, msg, .. } = e {
                            if from.is_none() {
                                go = true;
                            } else {
                                signal(&d, msg);
                            }
                        }
                    }
                    if go || (sent > 0 && sent < COUNT) {
                        // Send in slices so the counter runs meanwhile.
                        let end = (sent + 4096).min(COUNT);
                        while sent < end {
                            out.send(counter, sent).unwrap();
                            sent += 1;
                        }
                        if sent < COUNT {
                            return out.keep_running();
                        }
                    }
                    out.idle();
                },
            ),
            "main",
            None,
        )
        .unwrap();
    let start = Instant::now();
    rt.send(sender, 0).unwrap();
    let got = rx.recv().unwrap();
    let t = start.elapsed();
    check("counting", "magpie", got, COUNT);
    rt.shutdown(SHUTDOWN);
    t
}

fn magpie_ring(workers: usize) -> Duration {
    let rt = proc_rt(workers);
    let (tx, rx) = std_mpsc::channel();
    let done: Done = Arc::new(Mutex::new(tx));
    let pids: Arc<OnceLock<Vec<Pid>>> = Arc::new(OnceLock::new());
    let mut all = Vec::with_capacity(RING);
    for i in 0..RING {
        let pids = pids.clone();
        let d = done.clone();
        let pid = rt
            .spawn(
                P(
                    move |events: Events<'_, u64>, out: &mut StepOutput<'_, u64>| {
                        for e in events {
                            if let Event::Message { msg, .. } = e {
                                if msg == HOPS {
                                    signal(&d, msg);
                                } else {
                                    let next = pids.get().unwrap()[(i + 1) % RING];
                                    out.send(next, msg + 1).unwrap();
                                }
                            }
                        }
                        out.idle();
                    },
                ),
                "main",
                None,
            )
            .unwrap();
        all.push(pid);
    }
    let first = all[0];
    pids.set(all).unwrap();
    let start = Instant::now();
    rt.send(first, 0).unwrap();
    let got = rx.recv().unwrap();
    let t = start.elapsed();
    check("thread-ring", "magpie", got, HOPS);
    rt.shutdown(SHUTDOWN);
    t
}

/// Spawns a process that sums the messages of `expect` senders and signals
/// the sum.
fn spawn_collector(rt: &ProcessRuntime<u64>, expect: u64, done: Done) -> Pid {
    let (mut n, mut sum) = (0, 0);
    rt.spawn(
        P(
            move |events: Events<'_, u64>, out: &mut StepOutput<'_, u64>| {
                for e in events {
                    if let Event::Message { msg, .. } = e {
                        n += 1;
                        sum += msg;
                        if n == expect {
                            signal(&done, sum);
                        }
                    }
                }
                out.idle();
            },
        ),
        "main",
        None,
    )
    .unwrap()
}

fn magpie_fork_join(workers: usize) -> Duration {
    let rt = proc_rt(workers);
    let (tx, rx) = std_mpsc::channel();
    let collector = spawn_collector(&rt, FORK, Arc::new(Mutex::new(tx)));
    let start = Instant::now();
    let h = rt.handle();
    for i in 0..FORK {
        h.spawn(
            P(move |_e: Events<'_, u64>, out: &mut StepOutput<'_, u64>| {
                out.send(collector, i).unwrap();
                out.complete(None);
            }),
            "main",
            None,
        )
        .unwrap();
    }
    let got = rx.recv().unwrap();
    let t = start.elapsed();
    check("fork-join", "magpie", got, FORK_SUM);
    rt.shutdown(SHUTDOWN);
    t
}

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap()
}

fn tokio_ping_pong() -> Duration {
    use tokio::sync::mpsc;
    let rt = tokio_rt();
    rt.block_on(async {
        let (to_pong, mut pong_rx) = mpsc::unbounded_channel::<u64>();
        let (to_ping, mut ping_rx) = mpsc::unbounded_channel::<u64>();
        tokio::spawn(async move {
            while let Some(m) = pong_rx.recv().await {
                if to_ping.send(m).is_err() {
                    break;
                }
            }
        });
        let start = Instant::now();
        let ping = tokio::spawn(async move {
            to_pong.send(0).unwrap();
            while let Some(m) = ping_rx.recv().await {
                if m + 1 == PING {
                    return m + 1;
                }
                to_pong.send(m + 1).unwrap();
            }
            0 // the channel closed early: the check below fails
        });
        let got = ping.await.unwrap();
        let t = start.elapsed();
        check("ping-pong", "tokio", got, PING);
        t
    })
}

fn tokio_counting() -> Duration {
    use tokio::sync::mpsc;
    let rt = tokio_rt();
    rt.block_on(async {
        let (tx, mut rx) = mpsc::unbounded_channel::<u64>();
        let (reply_tx, mut reply_rx) = mpsc::unbounded_channel::<u64>();
        tokio::spawn(async move {
            let mut n = 0;
            while rx.recv().await.is_some() {
                n += 1;
                if n == COUNT {
                    reply_tx.send(n).unwrap();
                }
            }
        });
        let start = Instant::now();
        tokio::spawn(async move {
            for i in 0..COUNT {
                tx.send(i).unwrap();
            }
        });
        let got = reply_rx.recv().await.unwrap();
        let t = start.elapsed();
        check("counting", "tokio", got, COUNT);
        t
    })
}

fn tokio_ring() -> Duration {
    use tokio::sync::mpsc;
    let rt = tokio_rt();
    rt.block_on(async {
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<u64>();
        let mut senders = Vec::with_capacity(RING);
        let mut receivers = Vec::with_capacity(RING);
        for _ in 0..RING {
            let (tx, rx) = mpsc::unbounded_channel::<u64>();
            senders.push(tx);
            receivers.push(rx);
        }
        for (i, mut rx) in receivers.into_iter().enumerate() {
            let next = senders[(i + 1) % RING].clone();
            let done = done_tx.clone();
            tokio::spawn(async move {
                while let Some(m) = rx.recv().await {
                    if m == HOPS {
                        let _ = done.send(m);
                        break;
                    }
                    if next.send(m + 1).is_err() {
                        break;
                    }
                }
            });
        }
        let start = Instant::now();
        senders[0].send(0).unwrap();
        let got = done_rx.recv().await.unwrap();
        let t = start.elapsed();
        check("thread-ring", "tokio", got, HOPS);
        drop(senders);
        t
    })
}

fn tokio_fork_join() -> Duration {
    use tokio::sync::mpsc;
    let rt = tokio_rt();
    rt.block_on(async {
        let (tx, mut rx) = mpsc::unbounded_channel::<u64>();
        let start = Instant::now();
        for i in 0..FORK {
            let tx = tx.clone();
            tokio::spawn(async move {
                tx.send(i).unwrap();
            });
        }
        let (mut n, mut sum) = (0, 0);
        while n < FORK {
            sum += rx.recv().await.unwrap();
            n += 1;
        }
        let t = start.elapsed();
        check("fork-join", "tokio", sum, FORK_SUM);
        t
    })
}

/// Big: `BIG` processes each ping random neighbours `BIG_PINGS` times, one
/// ping at a time; a message from outside starts a process, `BIG_PING` from
/// a process is a ping, `BIG_PONG` its answer.
fn magpie_big(workers: usize) -> Duration {
    const BIG_PING: u64 = 0;
    const BIG_PONG: u64 = 1;
    let rt = proc_rt(workers);
    let (tx, rx) = std_mpsc::channel();
    let sink = spawn_collector(&rt, BIG as u64, Arc::new(Mutex::new(tx)));
    let pids: Arc<OnceLock<Vec<Pid>>> = Arc::new(OnceLock::new());
    let mut all = Vec::with_capacity(BIG);
    for me in 0..BIG {
        let pids = pids.clone();
        let mut rng = Neighbours::new(me);
        let mut pongs = 0;
        let pid = rt
            .spawn(
                P(
                    move |events: Events<'_, u64>, out: &mut StepOutput<'_, u64>| {
                        // Set before the first message is sent (a process
                        // may step once before that, with no events).
                        let pids = || pids.get().expect("pids set before the start");
                        for e in events {
                            if let Event::Message { from, msg, .. } = e {
                                match (from, msg) {
                                    (Some(f), BIG_PING) => out.send(f, BIG_PONG).unwrap(),
                                    (Some(_), _) => {
                                        pongs += 1;
                                        if pongs == BIG_PINGS {
                                            out.send(sink, pongs).unwrap();
                                        } else {
                                            out.send(pids()[rng.pick()], BIG_PING).unwrap();
                                        }
                                    }
                                    (None, _) => out.send(pids()[rng.pick()], BIG_PING).unwrap(),
                                }
                            }
                        }
                        out.idle();
                    },
                ),
                "main",
                None,
            )
            .unwrap();
        all.push(pid);
    }
    pids.set(all.clone()).unwrap();
    let start = Instant::now();
    for pid in all {
        rt.send(pid, 0).unwrap();
    }
    let got = rx.recv().unwrap();
    let t = start.elapsed();
    check("big", "magpie", got, BIG_SUM);
    rt.shutdown(SHUTDOWN);
    t
}

fn tokio_big() -> Duration {
    use tokio::sync::mpsc;
    enum M {
        Start,
        Ping(usize),
        Pong,
    }
    let rt = tokio_rt();
    rt.block_on(async {
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<u64>();
        let mut senders = Vec::with_capacity(BIG);
        let mut receivers = Vec::with_capacity(BIG);
        for _ in 0..BIG {
            let (tx, rx) = mpsc::unbounded_channel::<M>();
            senders.push(tx);
            receivers.push(rx);
        }
        let senders = Arc::new(senders);
        for (me, mut rx) in receivers.into_iter().enumerate() {
            let peers = senders.clone();
            let done = done_tx.clone();
            tokio::spawn(async move {
                let mut rng = Neighbours::new(me);
                let mut pongs = 0;
                while let Some(m) = rx.recv().await {
                    let sent = match m {
                        M::Start => peers[rng.pick()].send(M::Ping(me)),
                        M::Ping(from) => peers[from].send(M::Pong),
                        M::Pong => {
                            pongs += 1;
                            if pongs == BIG_PINGS {
                                let _ = done.send(pongs);
                                Ok(())
                            } else {
                                peers[rng.pick()].send(M::Ping(me))
                            }
                        }
                    };
                    if sent.is_err() {
                        break;
                    }
                }
            });
        }
        let start = Instant::now();
        for s in senders.iter() {
            s.send(M::Start)
                .unwrap_or_else(|_| panic!("tokio big: a task ended early"));
        }
        let mut sum = 0;
        for _ in 0..BIG {
            sum += done_rx.recv().await.unwrap();
        }
        let t = start.elapsed();
        check("big", "tokio", sum, BIG_SUM);
        t
    })
}

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
                magpie_ping_pong,
                tokio_ping_pong,
                ractor_peer::ping_pong,
                kameo_peer::ping_pong,
                actix_peer::ping_pong,
            ),
        ),
        (
            "counting",
            peers(
                magpie_counting,
                tokio_counting,
                ractor_peer::counting,
                kameo_peer::counting,
                actix_peer::counting,
            ),
        ),
        (
            "thread-ring",
            peers(
                magpie_ring,
                tokio_ring,
                ractor_peer::ring,
                kameo_peer::ring,
                actix_peer::ring,
            ),
        ),
        (
            "fork-join",
            peers(
                magpie_fork_join,
                tokio_fork_join,
                ractor_peer::fork_join,
                kameo_peer::fork_join,
                actix_peer::fork_join,
            ),
        ),
        (
            "big",
            peers(
                magpie_big,
                tokio_big,
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
