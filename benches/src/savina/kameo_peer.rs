//! The Savina workloads on kameo: one `Actor` per process, one `Message`
//! impl per message type, sent by `tell`, on unbounded mailboxes (like the
//! tokio-mpsc peer), on a tokio multi-thread runtime with 2 workers.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use kameo::actor::{ActorRef, Spawn};
use kameo::mailbox;
use kameo::message::{Context, Message};
use kameo::Actor;
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};

use std::sync::Arc;

use super::{
    big_pings, big_sum, check, hops, round_trips, tokio_rt, Neighbours, BIG, COUNT, FORK, FORK_SUM,
    RING,
};

const PEER: &str = "kameo";

fn spawn<A: Actor<Args = A>>(actor: A) -> ActorRef<A> {
    A::spawn_with_mailbox(actor, mailbox::unbounded())
}

/// Echoes every ball back to its sender.
#[derive(Actor)]
struct Pong;

/// A ball for `Pong`: the count so far and who to return it to.
struct Ball(u64, ActorRef<Ping>);

impl Message<Ball> for Pong {
    type Reply = ();
    async fn handle(&mut self, Ball(n, from): Ball, _ctx: &mut Context<Self, ()>) {
        from.tell(Hit(n)).await.unwrap();
    }
}

/// Serves the ball until `PING` round trips are done.
#[derive(Actor)]
struct Ping {
    pong: ActorRef<Pong>,
    done: UnboundedSender<u64>,
}

/// The ball coming back to `Ping`.
struct Hit(u64);

impl Message<Hit> for Ping {
    type Reply = ();
    async fn handle(&mut self, Hit(n): Hit, ctx: &mut Context<Self, ()>) {
        if n == round_trips() {
            self.done.send(n).unwrap();
        } else {
            self.pong
                .tell(Ball(n + 1, ctx.actor_ref().clone()))
                .await
                .unwrap();
        }
    }
}

/// Ping-pong: `PING` round trips.
pub fn ping_pong() -> Duration {
    tokio_rt().block_on(async {
        let (tx, mut rx) = unbounded_channel();
        let pong = spawn(Pong);
        let ping = spawn(Ping {
            pong: pong.clone(),
            done: tx,
        });
        let start = Instant::now();
        ping.tell(Hit(0)).await.unwrap();
        let got = rx.recv().await.unwrap();
        let t = start.elapsed();
        check("ping-pong", PEER, got, round_trips());
        ping.kill();
        pong.kill();
        t
    })
}

/// Counts messages and answers once it has `COUNT`.
#[derive(Actor)]
struct Counter {
    n: u64,
    done: UnboundedSender<u64>,
}

/// One counted message.
struct One;

impl Message<One> for Counter {
    type Reply = ();
    async fn handle(&mut self, _msg: One, _ctx: &mut Context<Self, ()>) {
        self.n += 1;
        if self.n == COUNT {
            self.done.send(self.n).unwrap();
        }
    }
}

/// Sends `COUNT` messages to the counter when told to start.
#[derive(Actor)]
struct Sender {
    counter: ActorRef<Counter>,
}

/// Tells `Sender` to start.
struct Go;

impl Message<Go> for Sender {
    type Reply = ();
    async fn handle(&mut self, _go: Go, _ctx: &mut Context<Self, ()>) {
        for _ in 0..COUNT {
            self.counter.tell(One).await.unwrap();
        }
    }
}

/// Counting: `COUNT` messages one way, one answer.
pub fn counting() -> Duration {
    tokio_rt().block_on(async {
        let (tx, mut rx) = unbounded_channel();
        let counter = spawn(Counter { n: 0, done: tx });
        let sender = spawn(Sender {
            counter: counter.clone(),
        });
        let start = Instant::now();
        sender.tell(Go).await.unwrap();
        let got = rx.recv().await.unwrap();
        let t = start.elapsed();
        check("counting", PEER, got, COUNT);
        sender.kill();
        counter.kill();
        t
    })
}

/// A ring member: learns its successor, then passes the token on.
#[derive(Actor)]
struct Node {
    next: Option<ActorRef<Node>>,
    done: UnboundedSender<u64>,
}

/// Sets a node's successor.
struct Next(ActorRef<Node>);

/// The token and the hops made so far.
struct Token(u64);

impl Message<Next> for Node {
    type Reply = ();
    async fn handle(&mut self, Next(next): Next, _ctx: &mut Context<Self, ()>) {
        self.next = Some(next);
    }
}

impl Message<Token> for Node {
    type Reply = ();
    async fn handle(&mut self, Token(m): Token, _ctx: &mut Context<Self, ()>) {
        if m == hops() {
            self.done.send(m).unwrap();
        } else {
            let next = self.next.as_ref().expect("successor set first");
            next.tell(Token(m + 1)).await.unwrap();
        }
    }
}

/// Thread ring: `RING` actors pass a token `HOPS` times.
pub fn ring() -> Duration {
    tokio_rt().block_on(async {
        let (tx, mut rx) = unbounded_channel();
        let nodes: Vec<_> = (0..RING)
            .map(|_| {
                spawn(Node {
                    next: None,
                    done: tx.clone(),
                })
            })
            .collect();
        for (i, node) in nodes.iter().enumerate() {
            node.tell(Next(nodes[(i + 1) % RING].clone()))
                .await
                .unwrap();
        }
        let start = Instant::now();
        nodes[0].tell(Token(0)).await.unwrap();
        let got = rx.recv().await.unwrap();
        let t = start.elapsed();
        check("thread-ring", PEER, got, hops());
        for node in &nodes {
            node.kill();
        }
        t
    })
}

/// Collects a number from each of `expect` actors; answers with their sum.
#[derive(Actor)]
struct Collector {
    expect: u64,
    n: u64,
    sum: u64,
    done: UnboundedSender<u64>,
}

/// A number for the collector: a forked actor's id, a pong count.
struct Id(u64);

impl Message<Id> for Collector {
    type Reply = ();
    async fn handle(&mut self, Id(id): Id, _ctx: &mut Context<Self, ()>) {
        self.n += 1;
        self.sum += id;
        if self.n == self.expect {
            self.done.send(self.sum).unwrap();
        }
    }
}

/// Sends its id to the collector as it starts, then stops.
struct Forked {
    collector: ActorRef<Collector>,
    id: u64,
}

impl Actor for Forked {
    type Args = Self;
    type Error = Infallible;
    async fn on_start(args: Self, me: ActorRef<Self>) -> Result<Self, Infallible> {
        args.collector.tell(Id(args.id)).await.unwrap();
        me.stop_gracefully().await.unwrap();
        Ok(args)
    }
}

/// Fork-join creation: spawn `FORK` actors that each send one message.
pub fn fork_join() -> Duration {
    tokio_rt().block_on(async {
        let (tx, mut rx) = unbounded_channel();
        let collector = spawn(Collector {
            expect: FORK,
            n: 0,
            sum: 0,
            done: tx,
        });
        let start = Instant::now();
        for id in 0..FORK {
            spawn(Forked {
                collector: collector.clone(),
                id,
            });
        }
        let got = rx.recv().await.unwrap();
        let t = start.elapsed();
        check("fork-join", PEER, got, FORK_SUM);
        collector.kill();
        t
    })
}

/// Pings random neighbours one at a time, answers their pings, and
/// reports its pong count to the sink after `BIG_PINGS` pongs.
#[derive(Actor)]
struct BigProc {
    me: usize,
    peers: Option<Arc<Vec<ActorRef<BigProc>>>>,
    rng: Neighbours,
    pongs: u64,
    sink: ActorRef<Collector>,
}

impl BigProc {
    fn peer(&self, i: usize) -> &ActorRef<BigProc> {
        &self.peers.as_ref().expect("peers set first")[i]
    }

    async fn ping(&mut self) {
        let to = self.rng.pick();
        self.peer(to).tell(BigPing(self.me)).await.unwrap();
    }
}

/// Gives a big-workload process its peers.
struct Peers(Arc<Vec<ActorRef<BigProc>>>);

/// Starts a big-workload process.
struct Start;

/// A ping from the process with this index.
struct BigPing(usize);

/// The answer to a ping.
struct BigPong;

impl Message<Peers> for BigProc {
    type Reply = ();
    async fn handle(&mut self, Peers(peers): Peers, _ctx: &mut Context<Self, ()>) {
        self.peers = Some(peers);
    }
}

impl Message<Start> for BigProc {
    type Reply = ();
    async fn handle(&mut self, _start: Start, _ctx: &mut Context<Self, ()>) {
        self.ping().await;
    }
}

impl Message<BigPing> for BigProc {
    type Reply = ();
    async fn handle(&mut self, BigPing(from): BigPing, _ctx: &mut Context<Self, ()>) {
        self.peer(from).tell(BigPong).await.unwrap();
    }
}

impl Message<BigPong> for BigProc {
    type Reply = ();
    async fn handle(&mut self, _pong: BigPong, _ctx: &mut Context<Self, ()>) {
        self.pongs += 1;
        if self.pongs == big_pings() {
            self.sink.tell(Id(self.pongs)).await.unwrap();
        } else {
            self.ping().await;
        }
    }
}

/// Big: `BIG` actors each ping random neighbours `BIG_PINGS` times.
pub fn big() -> Duration {
    tokio_rt().block_on(async {
        let (tx, mut rx) = unbounded_channel();
        let sink = spawn(Collector {
            expect: BIG as u64,
            n: 0,
            sum: 0,
            done: tx,
        });
        let procs: Arc<Vec<_>> = Arc::new(
            (0..BIG)
                .map(|me| {
                    spawn(BigProc {
                        me,
                        peers: None,
                        rng: Neighbours::new(me),
                        pongs: 0,
                        sink: sink.clone(),
                    })
                })
                .collect(),
        );
        for p in procs.iter() {
            p.tell(Peers(procs.clone())).await.unwrap();
        }
        let start = Instant::now();
        for p in procs.iter() {
            p.tell(Start).await.unwrap();
        }
        let got = rx.recv().await.unwrap();
        let t = start.elapsed();
        check("big", PEER, got, big_sum());
        for p in procs.iter() {
            p.kill();
        }
        sink.kill();
        t
    })
}
