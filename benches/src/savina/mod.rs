//! Savina-style actor workloads on the actor frameworks magpie's processes
//! are compared against (issue 15): ractor, kameo and actix. The magpie and
//! plain-tokio versions live in `examples/process_savina.rs`; all of them
//! use the sizes below, so every peer does the same work.
//!
//! Each function builds its own runtime, runs one workload, checks the
//! result (round trips, messages counted, hops, processes joined) and
//! returns the time from the first message (or first spawn) to the
//! collector's answer. A peer that drops or duplicates a message fails the
//! check instead of looking fast.
//!
//! | module | framework | threads |
//! | --- | --- | --- |
//! | [`ractor_peer`] | ractor `Actor` + `cast!` | tokio multi-thread, 2 workers |
//! | [`kameo_peer`] | kameo `Actor`/`Message` + `tell` | tokio multi-thread, 2 workers |
//! | [`actix_peer`] | actix `Actor` + `Handler` + `do_send` | one `System` thread (actix runs each arbiter on one thread), or actors round-robin on 2 arbiters |

pub mod actix_peer;
pub mod kameo_peer;
pub mod ractor_peer;

/// Ping-pong: round trips between two processes.
pub const PING: u64 = 100_000;
/// Counting: messages one process sends to another.
pub const COUNT: u64 = 1_000_000;
/// Thread ring: processes in the ring.
pub const RING: usize = 1_000;
/// Thread ring: hops the token makes.
pub const HOPS: u64 = 100_000;
/// Fork-join creation: processes spawned, each sending one message.
pub const FORK: u64 = 100_000;

/// Big: processes, each pinging random neighbours.
pub const BIG: usize = 1_000;
/// Big: pings each process sends, one at a time (each waits for its pong).
pub const BIG_PINGS: u64 = 100;
/// Big: the pongs all processes receive together.
pub const BIG_SUM: u64 = BIG as u64 * BIG_PINGS;

/// The sum of the ids `0..FORK` the fork-join collector must see.
pub const FORK_SUM: u64 = FORK * (FORK - 1) / 2;

/// The multi-threaded tokio runtime ractor and kameo run on: 2 workers,
/// like magpie's `-2w` peer.
pub fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// The random neighbours one big-workload process pings: a xorshift
/// sequence seeded by the process's index, so every peer sends the same
/// pings, never to the process itself.
#[derive(Debug)]
pub struct Neighbours {
    state: u64,
    me: usize,
}

impl Neighbours {
    /// The sequence of process `me` (an index below `BIG`).
    pub fn new(me: usize) -> Neighbours {
        Neighbours {
            state: (me as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            me,
        }
    }

    /// Picks the next neighbour to ping.
    pub fn pick(&mut self) -> usize {
        loop {
            self.state ^= self.state << 13;
            self.state ^= self.state >> 7;
            self.state ^= self.state << 17;
            let n = (self.state % BIG as u64) as usize;
            if n != self.me {
                return n;
            }
        }
    }
}

/// Panics unless a workload's answer is the expected one.
pub fn check(workload: &str, peer: &str, got: u64, want: u64) {
    assert_eq!(got, want, "{peer} {workload}: wrong result");
}
