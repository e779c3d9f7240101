//! The Savina workloads on ractor: one `Actor` per process, messages by
//! `cast!`, on a tokio multi-thread runtime with 2 workers.

use std::time::{Duration, Instant};

use ractor::{cast, Actor, ActorProcessingErr, ActorRef};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};

use std::sync::Arc;

use super::{
    big_pings, big_sum, check, hops, round_trips, tokio_rt, Neighbours, BIG, COUNT, FORK, FORK_SUM,
    RING,
};

const PEER: &str = "ractor";

type Reply = Result<(), ActorProcessingErr>;

/// Echoes every ball back to its sender.
struct Pong;

impl Actor for Pong {
    type Msg = (u64, ActorRef<u64>);
    type State = ();
    type Arguments = ();
    async fn pre_start(
        &self,
        _me: ActorRef<Self::Msg>,
        _args: (),
    ) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
    async fn handle(&self, _me: ActorRef<Self::Msg>, (n, from): Self::Msg, _s: &mut ()) -> Reply {
        cast!(from, n)?;
        Ok(())
    }
}

/// Serves the ball until `PING` round trips are done.
struct Ping;

struct PingState {
    pong: ActorRef<(u64, ActorRef<u64>)>,
    done: UnboundedSender<u64>,
}

impl Actor for Ping {
    type Msg = u64;
    type State = PingState;
    type Arguments = PingState;
    async fn pre_start(
        &self,
        _me: ActorRef<u64>,
        args: PingState,
    ) -> Result<PingState, ActorProcessingErr> {
        Ok(args)
    }
    async fn handle(&self, me: ActorRef<u64>, n: u64, s: &mut PingState) -> Reply {
        if n == round_trips() {
            s.done.send(n)?;
        } else {
            cast!(s.pong, (n + 1, me))?;
        }
        Ok(())
    }
}

/// Ping-pong: `PING` round trips.
pub fn ping_pong() -> Duration {
    tokio_rt().block_on(async {
        let (tx, mut rx) = unbounded_channel();
        let (pong, _) = Actor::spawn(None, Pong, ()).await.unwrap();
        let state = PingState {
            pong: pong.clone(),
            done: tx,
        };
        let (ping, _) = Actor::spawn(None, Ping, state).await.unwrap();
        let start = Instant::now();
        cast!(ping, 0).unwrap();
        let got = rx.recv().await.unwrap();
        let t = start.elapsed();
        check("ping-pong", PEER, got, round_trips());
        ping.stop(None);
        pong.stop(None);
        t
    })
}

/// Counts messages and answers once it has `COUNT`.
struct Counter;

impl Actor for Counter {
    type Msg = u64;
    type State = (u64, UnboundedSender<u64>);
    type Arguments = UnboundedSender<u64>;
    async fn pre_start(
        &self,
        _me: ActorRef<u64>,
        done: UnboundedSender<u64>,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok((0, done))
    }
    async fn handle(&self, _me: ActorRef<u64>, _n: u64, s: &mut Self::State) -> Reply {
        s.0 += 1;
        if s.0 == COUNT {
            s.1.send(s.0)?;
        }
        Ok(())
    }
}

/// Sends `COUNT` messages to the counter when told to start.
struct Sender;

impl Actor for Sender {
    type Msg = ();
    type State = ActorRef<u64>;
    type Arguments = ActorRef<u64>;
    async fn pre_start(
        &self,
        _me: ActorRef<()>,
        counter: ActorRef<u64>,
    ) -> Result<ActorRef<u64>, ActorProcessingErr> {
        Ok(counter)
    }
    async fn handle(&self, _me: ActorRef<()>, _go: (), counter: &mut ActorRef<u64>) -> Reply {
        for i in 0..COUNT {
            cast!(counter, i)?;
        }
        Ok(())
    }
}

/// Counting: `COUNT` messages one way, one answer.
pub fn counting() -> Duration {
    tokio_rt().block_on(async {
        let (tx, mut rx) = unbounded_channel();
        let (counter, _) = Actor::spawn(None, Counter, tx).await.unwrap();
        let (sender, _) = Actor::spawn(None, Sender, counter.clone()).await.unwrap();
        let start = Instant::now();
        cast!(sender, ()).unwrap();
        let got = rx.recv().await.unwrap();
        let t = start.elapsed();
        check("counting", PEER, got, COUNT);
        sender.stop(None);
        counter.stop(None);
        t
    })
}

/// A ring member learns its successor, then passes the token on.
enum RingMsg {
    Next(ActorRef<RingMsg>),
    Token(u64),
}

struct Node;

struct NodeState {
    next: Option<ActorRef<RingMsg>>,
    done: UnboundedSender<u64>,
}

impl Actor for Node {
    type Msg = RingMsg;
    type State = NodeState;
    type Arguments = UnboundedSender<u64>;
    async fn pre_start(
        &self,
        _me: ActorRef<RingMsg>,
        done: UnboundedSender<u64>,
    ) -> Result<NodeState, ActorProcessingErr> {
        Ok(NodeState { next: None, done })
    }
    async fn handle(&self, _me: ActorRef<RingMsg>, msg: RingMsg, s: &mut NodeState) -> Reply {
        match msg {
            RingMsg::Next(next) => s.next = Some(next),
            RingMsg::Token(m) if m == hops() => s.done.send(m)?,
            RingMsg::Token(m) => cast!(
                s.next.as_ref().expect("successor set first"),
                RingMsg::Token(m + 1)
            )?,
        }
        Ok(())
    }
}

/// Thread ring: `RING` actors pass a token `HOPS` times.
pub fn ring() -> Duration {
    tokio_rt().block_on(async {
        let (tx, mut rx) = unbounded_channel();
        let mut nodes = Vec::with_capacity(RING);
        for _ in 0..RING {
            nodes.push(Actor::spawn(None, Node, tx.clone()).await.unwrap().0);
        }
        for (i, node) in nodes.iter().enumerate() {
            cast!(node, RingMsg::Next(nodes[(i + 1) % RING].clone())).unwrap();
        }
        let start = Instant::now();
        cast!(nodes[0], RingMsg::Token(0)).unwrap();
        let got = rx.recv().await.unwrap();
        let t = start.elapsed();
        check("thread-ring", PEER, got, hops());
        for node in &nodes {
            node.stop(None);
        }
        t
    })
}

/// Collects a number from each of `expect` actors; answers with their sum.
struct Collector;

struct CollectorState {
    expect: u64,
    n: u64,
    sum: u64,
    done: UnboundedSender<u64>,
}

impl Actor for Collector {
    type Msg = u64;
    type State = CollectorState;
    type Arguments = (u64, UnboundedSender<u64>);
    async fn pre_start(
        &self,
        _me: ActorRef<u64>,
        (expect, done): Self::Arguments,
    ) -> Result<CollectorState, ActorProcessingErr> {
        Ok(CollectorState {
            expect,
            n: 0,
            sum: 0,
            done,
        })
    }
    async fn handle(&self, _me: ActorRef<u64>, x: u64, s: &mut CollectorState) -> Reply {
        s.n += 1;
        s.sum += x;
        if s.n == s.expect {
            s.done.send(s.sum)?;
        }
        Ok(())
    }
}

/// Sends its id to the collector once started, then stops.
struct Forked;

impl Actor for Forked {
    type Msg = ();
    type State = (ActorRef<u64>, u64);
    type Arguments = (ActorRef<u64>, u64);
    async fn pre_start(
        &self,
        _me: ActorRef<()>,
        args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(args)
    }
    async fn post_start(&self, me: ActorRef<()>, (collector, id): &mut Self::State) -> Reply {
        cast!(collector, *id)?;
        me.stop(None);
        Ok(())
    }
}

/// Fork-join creation: spawn `FORK` actors that each send one message.
pub fn fork_join() -> Duration {
    tokio_rt().block_on(async {
        let (tx, mut rx) = unbounded_channel();
        let (collector, _) = Actor::spawn(None, Collector, (FORK, tx)).await.unwrap();
        let start = Instant::now();
        for i in 0..FORK {
            Actor::spawn(None, Forked, (collector.clone(), i))
                .await
                .unwrap();
        }
        let got = rx.recv().await.unwrap();
        let t = start.elapsed();
        check("fork-join", PEER, got, FORK_SUM);
        collector.stop(None);
        t
    })
}

/// A big-workload process's messages.
enum BigMsg {
    Peers(Arc<Vec<ActorRef<BigMsg>>>),
    Start,
    Ping(usize),
    Pong,
}

/// Pings random neighbours one at a time, answers their pings, and
/// reports its pong count to the sink after `BIG_PINGS` pongs.
struct BigProc;

struct BigState {
    me: usize,
    peers: Option<Arc<Vec<ActorRef<BigMsg>>>>,
    rng: Neighbours,
    pongs: u64,
    sink: ActorRef<u64>,
}

impl BigState {
    fn ping(&mut self) -> Reply {
        let to = self.rng.pick();
        cast!(
            self.peers.as_ref().expect("peers set first")[to],
            BigMsg::Ping(self.me)
        )?;
        Ok(())
    }
}

impl Actor for BigProc {
    type Msg = BigMsg;
    type State = BigState;
    type Arguments = (usize, ActorRef<u64>);
    async fn pre_start(
        &self,
        _me: ActorRef<BigMsg>,
        (me, sink): Self::Arguments,
    ) -> Result<BigState, ActorProcessingErr> {
        Ok(BigState {
            me,
            peers: None,
            rng: Neighbours::new(me),
            pongs: 0,
            sink,
        })
    }
    async fn handle(&self, _me: ActorRef<BigMsg>, msg: BigMsg, s: &mut BigState) -> Reply {
        match msg {
            BigMsg::Peers(peers) => s.peers = Some(peers),
            BigMsg::Start => s.ping()?,
            BigMsg::Ping(from) => cast!(
                s.peers.as_ref().expect("peers set first")[from],
                BigMsg::Pong
            )?,
            BigMsg::Pong => {
                s.pongs += 1;
                if s.pongs == big_pings() {
                    cast!(s.sink, s.pongs)?;
                } else {
                    s.ping()?;
                }
            }
        }
        Ok(())
    }
}

/// Big: `BIG` actors each ping random neighbours `BIG_PINGS` times.
pub fn big() -> Duration {
    tokio_rt().block_on(async {
        let (tx, mut rx) = unbounded_channel();
        let (sink, _) = Actor::spawn(None, Collector, (BIG as u64, tx))
            .await
            .unwrap();
        let mut procs = Vec::with_capacity(BIG);
        for me in 0..BIG {
            procs.push(
                Actor::spawn(None, BigProc, (me, sink.clone()))
                    .await
                    .unwrap()
                    .0,
            );
        }
        let procs = Arc::new(procs);
        for p in procs.iter() {
            cast!(p, BigMsg::Peers(procs.clone())).unwrap();
        }
        let start = Instant::now();
        for p in procs.iter() {
            cast!(p, BigMsg::Start).unwrap();
        }
        let got = rx.recv().await.unwrap();
        let t = start.elapsed();
        check("big", PEER, got, big_sum());
        for p in procs.iter() {
            p.stop(None);
        }
        sink.stop(None);
        t
    })
}
