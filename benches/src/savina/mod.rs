//! Savina-style actor workloads on the actor frameworks magpie's processes
//! are compared against (issue 15): ractor, kameo and actix, and on magpie
//! and plain tokio tasks. The example `process_savina` and the criterion
//! bench `process_savina` run them; all of them use the sizes below (at the
//! [`Scale`] set), so every peer does the same work.
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
//! | [`magpie_peer`] | magpie `Process` closures + `out.send` | `ProcessRuntime` with 1 or 2 workers |
//! | [`tokio_peer`] | tokio tasks + `tokio::sync::mpsc` unbounded channels | tokio multi-thread, 2 workers |

pub mod actix_peer;
pub mod kameo_peer;
pub mod magpie_peer;
pub mod ractor_peer;
pub mod tokio_peer;

use magpie_core::sync::atomic::{AtomicU64, Ordering};

/// The two scales of the workloads: the example's (`process_savina`, scaled
/// down so a run of every peer takes about a minute) and the issue's (the
/// criterion bench `benches/process_savina.rs`). Only ping-pong's round
/// trips, the ring's hops and big's pings differ; every peer reads them
/// through [`round_trips`], [`hops`] and [`big_pings`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// [`PING`], [`HOPS`], [`BIG_PINGS`] (the default).
    Example,
    /// [`ISSUE_PING`], [`ISSUE_HOPS`], [`ISSUE_BIG_PINGS`].
    Issue,
}

// Relaxed: set once before any run, read by the runs (joined threads or
// runtimes started after the store).
static PING_N: AtomicU64 = AtomicU64::new(PING);
static HOPS_N: AtomicU64 = AtomicU64::new(HOPS);
static BIG_PINGS_N: AtomicU64 = AtomicU64::new(BIG_PINGS);

/// Sets the scale of the runs that follow.
pub fn set_scale(scale: Scale) {
    let (p, h, b) = match scale {
        Scale::Example => (PING, HOPS, BIG_PINGS),
        Scale::Issue => (ISSUE_PING, ISSUE_HOPS, ISSUE_BIG_PINGS),
    };
    PING_N.store(p, Ordering::Relaxed);
    HOPS_N.store(h, Ordering::Relaxed);
    BIG_PINGS_N.store(b, Ordering::Relaxed);
}

/// Ping-pong round trips at the current scale.
pub fn round_trips() -> u64 {
    PING_N.load(Ordering::Relaxed)
}

/// Thread-ring hops at the current scale.
pub fn hops() -> u64 {
    HOPS_N.load(Ordering::Relaxed)
}

/// Big's pings per process at the current scale.
pub fn big_pings() -> u64 {
    BIG_PINGS_N.load(Ordering::Relaxed)
}

/// Big's pongs all processes receive together at the current scale.
pub fn big_sum() -> u64 {
    BIG as u64 * big_pings()
}

/// Ping-pong round trips at the issue's scale.
pub const ISSUE_PING: u64 = 1_000_000;
/// Thread-ring hops at the issue's scale.
pub const ISSUE_HOPS: u64 = 1_000_000;
/// Big's pings per process at the issue's scale.
pub const ISSUE_BIG_PINGS: u64 = 1_000;

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
