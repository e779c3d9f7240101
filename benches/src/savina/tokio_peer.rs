//! The Savina workloads on plain tokio tasks with `tokio::sync::mpsc`
//! unbounded channels (multi-thread runtime, 2 workers): the baseline with
//! no actor framework.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{
    big_pings, big_sum, check, hops, round_trips, Neighbours, BIG, COUNT, FORK, FORK_SUM, RING,
};

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap()
}

pub fn ping_pong() -> Duration {
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
                if m + 1 == round_trips() {
                    return m + 1;
                }
                to_pong.send(m + 1).unwrap();
            }
            0 // the channel closed early: the check below fails
        });
        let got = ping.await.unwrap();
        let t = start.elapsed();
        check("ping-pong", "tokio", got, round_trips());
        t
    })
}

pub fn counting() -> Duration {
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

pub fn ring() -> Duration {
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
                    if m == hops() {
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
        check("thread-ring", "tokio", got, hops());
        drop(senders);
        t
    })
}

pub fn fork_join() -> Duration {
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

pub fn big() -> Duration {
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
                            if pongs == big_pings() {
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
        check("big", "tokio", sum, big_sum());
        t
    })
}
