//! Savina-style actor workloads on magpie's processes, against plain tokio
//! tasks with mpsc channels (one of issue 15's peers), in the same run,
//! alternating, with the median and spread of each.
//!
//! Workloads (scaled down from the sizes so a run takes about a
//! minute on 2 shared cores; the scale is printed):
//! - ping-pong: two processes, `PING` round trips;
//! - counting: one process sends `COUNT` messages to another, which replies
//!   once at the end;
//! - thread ring: `RING` processes pass a token `HOPS` times;
//! - fork-join creation: spawn `FORK` processes that each send one message
//!   to a collector and end.
//!
//! Peers: magpie processes on 2 workers and on 1 worker; tokio
//! (multi-thread, 2 workers) tasks with `tokio::sync::mpsc`.
//!
//! Run: `cargo run --release -p magpie-benches --example process_savina [ROUNDS]`

use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use magpie_benches::report::median_of;
use magpie_runtime::process::{Event, Events, InitError, Pid, Process, ProcessRuntime, StepOutput};

const PING: u64 = 100_000;
const COUNT: u64 = 1_000_000;
const RING: usize = 1_000;
const HOPS: u64 = 100_000;
const FORK: u64 = 100_000;

type Done = Arc<Mutex<std_mpsc::Sender<()>>>;

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

fn signal(done: &Done) {
    done.lock().unwrap().send(()).unwrap();
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
                                signal(&d);
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
    rx.recv().unwrap();
    let t = start.elapsed();
    rt.shutdown(Duration::from_secs(5));
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
                            } else if msg == COUNT {
                                signal(&d);
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
    rx.recv().unwrap();
    let t = start.elapsed();
    rt.shutdown(Duration::from_secs(5));
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
                                    signal(&d);
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
    rx.recv().unwrap();
    let t = start.elapsed();
    rt.shutdown(Duration::from_secs(5));
    t
}

fn magpie_fork_join(workers: usize) -> Duration {
    let rt = proc_rt(workers);
    let (tx, rx) = std_mpsc::channel();
    let done: Done = Arc::new(Mutex::new(tx));
    let d = done.clone();
    let mut n = 0;
    let collector = rt
        .spawn(
            P(
                move |events: Events<'_, u64>, out: &mut StepOutput<'_, u64>| {
                    for e in events {
                        if let Event::Message { .. } = e {
                            n += 1;
                            if n == FORK {
                                signal(&d);
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
    rx.recv().unwrap();
    let t = start.elapsed();
    rt.shutdown(Duration::from_secs(5));
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
                    break;
                }
                to_pong.send(m + 1).unwrap();
            }
        });
        ping.await.unwrap();
        start.elapsed()
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
        reply_rx.recv().await.unwrap();
        start.elapsed()
    })
}

fn tokio_ring() -> Duration {
    use tokio::sync::mpsc;
    let rt = tokio_rt();
    rt.block_on(async {
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<()>();
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
                        let _ = done.send(());
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
        done_rx.recv().await.unwrap();
        let t = start.elapsed();
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
        let mut n = 0;
        while n < FORK {
            rx.recv().await.unwrap();
            n += 1;
        }
        start.elapsed()
    })
}

type Run = fn() -> Duration;

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5);
    println!(
        "scale: ping-pong {PING} round trips, counting {COUNT} messages, ring {RING} x {HOPS} hops, \
         fork-join {FORK} processes; {rounds} alternating rounds"
    );
    let workloads: Vec<(&str, Vec<(&str, Run)>)> = vec![
        (
            "ping-pong",
            vec![
                ("magpie-2w", || magpie_ping_pong(2)),
                ("magpie-1w", || magpie_ping_pong(1)),
                ("tokio-mpsc", tokio_ping_pong),
            ],
        ),
        (
            "counting",
            vec![
                ("magpie-2w", || magpie_counting(2)),
                ("magpie-1w", || magpie_counting(1)),
                ("tokio-mpsc", tokio_counting),
            ],
        ),
        (
            "thread-ring",
            vec![
                ("magpie-2w", || magpie_ring(2)),
                ("magpie-1w", || magpie_ring(1)),
                ("tokio-mpsc", tokio_ring),
            ],
        ),
        (
            "fork-join",
            vec![
                ("magpie-2w", || magpie_fork_join(2)),
                ("magpie-1w", || magpie_fork_join(1)),
                ("tokio-mpsc", tokio_fork_join),
            ],
        ),
    ];
    for (name, peers) in &workloads {
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); peers.len()];
        for round in 0..rounds {
            // Alternate the order each round.
            for k in 0..peers.len() {
                let i = (k + round) % peers.len();
                times[i].push(peers[i].1().as_secs_f64() * 1e3);
            }
        }
        let base = median_of(&mut times[peers.len() - 1].clone()).unwrap();
        for (i, (peer, _)) in peers.iter().enumerate() {
            let mut t = times[i].clone();
            let med = median_of(&mut t).unwrap();
            let lo = t.iter().cloned().fold(f64::INFINITY, f64::min);
            let hi = t.iter().cloned().fold(0.0, f64::max);
            println!(
                "{name:12} {peer:11} median {med:9.1} ms  [{lo:.1} .. {hi:.1}]  {:.2}x tokio-mpsc",
                med / base
            );
        }
    }
}
