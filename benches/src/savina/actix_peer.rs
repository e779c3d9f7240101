//! The Savina workloads on actix: one `Actor` per process, one `Handler`
//! per message type, sent by `do_send`. An actix arbiter runs its actors on
//! one thread, so each workload runs either on the `System`'s own thread
//! (`arbiters == 0`: one thread, how most actix apps run) or with its
//! actors spread round-robin over `arbiters` new arbiters (one thread each;
//! the system thread then only waits for the answer).

use std::cell::Cell;
use std::future::Future;
use std::time::{Duration, Instant};

use actix::prelude::*;
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};

use std::sync::Arc;

use super::{
    big_pings, big_sum, check, hops, round_trips, Neighbours, BIG, COUNT, FORK, FORK_SUM, RING,
};

const PEER: &str = "actix";

/// Runs `f` on a fresh actix system and returns its result.
fn on_system<F: Future<Output = Duration>>(f: F) -> Duration {
    System::new().block_on(f)
}

/// Where a workload's actors run: on the system's own thread, or
/// round-robin over arbiters of their own.
struct Placement {
    arbiters: Vec<Arbiter>,
    next: Cell<usize>,
}

impl Placement {
    /// `n == 0`: the system thread; otherwise `n` new arbiters. Call it
    /// inside the system.
    fn new(n: usize) -> Placement {
        Placement {
            arbiters: (0..n).map(|_| Arbiter::new()).collect(),
            next: Cell::new(0),
        }
    }

    /// Starts `actor` where this placement puts the next one.
    fn start<A: Actor<Context = Context<A>> + Send>(&self, actor: A) -> Addr<A> {
        if self.arbiters.is_empty() {
            return actor.start();
        }
        let i = self.next.get();
        self.next.set(i + 1);
        let arbiter = &self.arbiters[i % self.arbiters.len()];
        A::start_in_arbiter(&arbiter.handle(), move |_ctx| actor)
    }
}

impl Drop for Placement {
    fn drop(&mut self) {
        for arbiter in &self.arbiters {
            arbiter.stop();
        }
    }
}

/// Echoes every ball back to its sender.
struct Pong;

impl Actor for Pong {
    type Context = Context<Self>;
}

/// A ball for `Pong`: the count so far and who to return it to.
#[derive(Message)]
#[rtype(result = "()")]
struct Ball(u64, Addr<Ping>);

impl Handler<Ball> for Pong {
    type Result = ();
    fn handle(&mut self, Ball(n, from): Ball, _ctx: &mut Context<Self>) {
        from.do_send(Hit(n));
    }
}

/// Serves the ball until `PING` round trips are done.
struct Ping {
    pong: Addr<Pong>,
    done: UnboundedSender<u64>,
}

impl Actor for Ping {
    type Context = Context<Self>;
}

/// The ball coming back to `Ping`.
#[derive(Message)]
#[rtype(result = "()")]
struct Hit(u64);

impl Handler<Hit> for Ping {
    type Result = ();
    fn handle(&mut self, Hit(n): Hit, ctx: &mut Context<Self>) {
        if n == round_trips() {
            self.done.send(n).unwrap();
        } else {
            self.pong.do_send(Ball(n + 1, ctx.address()));
        }
    }
}

/// Ping-pong: `PING` round trips.
pub fn ping_pong(arbiters: usize) -> Duration {
    on_system(async move {
        let place = Placement::new(arbiters);
        let (tx, mut rx) = unbounded_channel();
        let pong = place.start(Pong);
        let ping = place.start(Ping { pong, done: tx });
        let start = Instant::now();
        ping.do_send(Hit(0));
        let got = rx.recv().await.unwrap();
        let t = start.elapsed();
        check("ping-pong", PEER, got, round_trips());
        t
    })
}

/// Counts messages and answers once it has `COUNT`.
struct Counter {
    n: u64,
    done: UnboundedSender<u64>,
}

impl Actor for Counter {
    type Context = Context<Self>;
}

/// One counted message.
#[derive(Message)]
#[rtype(result = "()")]
struct One;

impl Handler<One> for Counter {
    type Result = ();
    fn handle(&mut self, _msg: One, _ctx: &mut Context<Self>) {
        self.n += 1;
        if self.n == COUNT {
            self.done.send(self.n).unwrap();
        }
    }
}

/// Sends `COUNT` messages to the counter when told to start.
struct Sender {
    counter: Addr<Counter>,
}

impl Actor for Sender {
    type Context = Context<Self>;
}

/// Tells `Sender` to start.
#[derive(Message)]
#[rtype(result = "()")]
struct Go;

impl Handler<Go> for Sender {
    type Result = ();
    fn handle(&mut self, _go: Go, _ctx: &mut Context<Self>) {
        for _ in 0..COUNT {
            self.counter.do_send(One);
        }
    }
}

/// Counting: `COUNT` messages one way, one answer.
pub fn counting(arbiters: usize) -> Duration {
    on_system(async move {
        let place = Placement::new(arbiters);
        let (tx, mut rx) = unbounded_channel();
        let counter = place.start(Counter { n: 0, done: tx });
        let sender = place.start(Sender { counter });
        let start = Instant::now();
        sender.do_send(Go);
        let got = rx.recv().await.unwrap();
        let t = start.elapsed();
        check("counting", PEER, got, COUNT);
        t
    })
}

/// A ring member: learns its successor, then passes the token on.
struct Node {
    next: Option<Addr<Node>>,
    done: UnboundedSender<u64>,
}

impl Actor for Node {
    type Context = Context<Self>;
}

/// Sets a node's successor.
#[derive(Message)]
#[rtype(result = "()")]
struct Next(Addr<Node>);

/// The token and the hops made so far.
#[derive(Message)]
#[rtype(result = "()")]
struct Token(u64);

impl Handler<Next> for Node {
    type Result = ();
    fn handle(&mut self, Next(next): Next, _ctx: &mut Context<Self>) {
        self.next = Some(next);
    }
}

impl Handler<Token> for Node {
    type Result = ();
    fn handle(&mut self, Token(m): Token, _ctx: &mut Context<Self>) {
        if m == hops() {
            self.done.send(m).unwrap();
        } else {
            let next = self.next.as_ref().expect("successor set first");
            next.do_send(Token(m + 1));
        }
    }
}

/// Thread ring: `RING` actors pass a token `HOPS` times.
pub fn ring(arbiters: usize) -> Duration {
    on_system(async move {
        let place = Placement::new(arbiters);
        let (tx, mut rx) = unbounded_channel();
        let nodes: Vec<_> = (0..RING)
            .map(|_| {
                place.start(Node {
                    next: None,
                    done: tx.clone(),
                })
            })
            .collect();
        for (i, node) in nodes.iter().enumerate() {
            node.do_send(Next(nodes[(i + 1) % RING].clone()));
        }
        let start = Instant::now();
        nodes[0].do_send(Token(0));
        let got = rx.recv().await.unwrap();
        let t = start.elapsed();
        check("thread-ring", PEER, got, hops());
        t
    })
}

/// Collects a number from each of `expect` actors; answers with their sum.
struct Collector {
    expect: u64,
    n: u64,
    sum: u64,
    done: UnboundedSender<u64>,
}

impl Actor for Collector {
    type Context = Context<Self>;
}

/// A number for the collector: a forked actor's id, a pong count.
#[derive(Message)]
#[rtype(result = "()")]
struct Id(u64);

impl Handler<Id> for Collector {
    type Result = ();
    fn handle(&mut self, Id(id): Id, _ctx: &mut Context<Self>) {
        self.n += 1;
        self.sum += id;
        if self.n == self.expect {
            self.done.send(self.sum).unwrap();
        }
    }
}

/// Sends its id to the collector as it starts, then stops.
struct Forked {
    collector: Addr<Collector>,
    id: u64,
}

impl Actor for Forked {
    type Context = Context<Self>;
    fn started(&mut self, ctx: &mut Context<Self>) {
        self.collector.do_send(Id(self.id));
        ctx.stop();
    }
}

/// Fork-join creation: spawn `FORK` actors that each send one message.
pub fn fork_join(arbiters: usize) -> Duration {
    on_system(async move {
        let place = Placement::new(arbiters);
        let (tx, mut rx) = unbounded_channel();
        let collector = place.start(Collector {
            expect: FORK,
            n: 0,
            sum: 0,
            done: tx,
        });
        let start = Instant::now();
        for id in 0..FORK {
            place.start(Forked {
                collector: collector.clone(),
                id,
            });
        }
        let got = rx.recv().await.unwrap();
        let t = start.elapsed();
        check("fork-join", PEER, got, FORK_SUM);
        t
    })
}

/// Pings random neighbours one at a time, answers their pings, and
/// reports its pong count to the sink after `BIG_PINGS` pongs.
struct BigProc {
    me: usize,
    peers: Option<Arc<Vec<Addr<BigProc>>>>,
    rng: Neighbours,
    pongs: u64,
    sink: Addr<Collector>,
}

impl Actor for BigProc {
    type Context = Context<Self>;
}

impl BigProc {
    fn peer(&self, i: usize) -> &Addr<BigProc> {
        &self.peers.as_ref().expect("peers set first")[i]
    }

    fn ping(&mut self) {
        let to = self.rng.pick();
        self.peer(to).do_send(BigPing(self.me));
    }
}

/// Gives a big-workload process its peers.
#[derive(Message)]
#[rtype(result = "()")]
struct Peers(Arc<Vec<Addr<BigProc>>>);

/// Starts a big-workload process.
#[derive(Message)]
#[rtype(result = "()")]
struct Start;

/// A ping from the process with this index.
#[derive(Message)]
#[rtype(result = "()")]
struct BigPing(usize);

/// The answer to a ping.
#[derive(Message)]
#[rtype(result = "()")]
struct BigPong;

impl Handler<Peers> for BigProc {
    type Result = ();
    fn handle(&mut self, Peers(peers): Peers, _ctx: &mut Context<Self>) {
        self.peers = Some(peers);
    }
}

impl Handler<Start> for BigProc {
    type Result = ();
    fn handle(&mut self, _start: Start, _ctx: &mut Context<Self>) {
        self.ping();
    }
}

impl Handler<BigPing> for BigProc {
    type Result = ();
    fn handle(&mut self, BigPing(from): BigPing, _ctx: &mut Context<Self>) {
        self.peer(from).do_send(BigPong);
    }
}

impl Handler<BigPong> for BigProc {
    type Result = ();
    fn handle(&mut self, _pong: BigPong, _ctx: &mut Context<Self>) {
        self.pongs += 1;
        if self.pongs == big_pings() {
            self.sink.do_send(Id(self.pongs));
        } else {
            self.ping();
        }
    }
}

/// Big: `BIG` actors each ping random neighbours `BIG_PINGS` times.
pub fn big(arbiters: usize) -> Duration {
    on_system(async move {
        let place = Placement::new(arbiters);
        let (tx, mut rx) = unbounded_channel();
        let sink = place.start(Collector {
            expect: BIG as u64,
            n: 0,
            sum: 0,
            done: tx,
        });
        let procs: Arc<Vec<_>> = Arc::new(
            (0..BIG)
                .map(|me| {
                    place.start(BigProc {
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
            p.do_send(Peers(procs.clone()));
        }
        let start = Instant::now();
        for p in procs.iter() {
            p.do_send(Start);
        }
        let got = rx.recv().await.unwrap();
        let t = start.elapsed();
        check("big", PEER, got, big_sum());
        t
    })
}
