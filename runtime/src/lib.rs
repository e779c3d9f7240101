//! # magpie-runtime
//!
//! magpie's scheduling policy, built on `magpie-core`'s primitives. One worker
//! loop (`sched`) drives every kind of task:
//!
//! - typed tasks: [`Executor<T>`] runs plain values of one type with one
//!   runner function, seed 000's API;
//! - futures: [`Runtime`] (tokio-shaped: `Runtime::builder().worker_threads(n)
//!   .build()`, `block_on`, [`spawn`], [`yield_now`], [`JoinHandle`], [`time`],
//!   cancellation [`shield`]s, and the tokio API people reach for first:
//!   [`spawn_blocking`], [`block_in_place`], [`JoinSet`], [`task::id`],
//!   `time::timeout`, [`Runtime::enter`], [`Handle::block_on`],
//!   [`Handle::metrics`], `#[main]`/`#[test]`, a current-thread flavour
//!   ([`Builder::new_current_thread`]: no worker threads, the tasks, timers
//!   and I/O run on the thread inside `block_on`), and
//!   [`task::LocalSet`]/[`task::spawn_local`] for `!Send` futures);
//! - component graphs: [`lanes`] runs a graph of components in epochs on a
//!   [`lanes::LaneRuntime`] (its own workers on the same loop), each
//!   invocation on an `event_loop`, `fixed_rate` or `thread_pool` lane
//!   (seed 004), with priorities, bounded admission, aging, stop/drain,
//!   metrics and a Chrome [`trace`].
//!
//! - processes: [`process::ProcessRuntime`] runs step-driven state machines
//!   with mailboxes, PIDs, yielded commands, links and graceful shutdown
//!   (seed 002).
//!
//! The loop is shared with a deterministic [`sim`]ulator that runs the same
//! code on virtual workers in a seeded order and records a replayable trace.
//!
//! This crate has no `unsafe` code: everything unsafe lives in `magpie-core`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod config;
mod executor;
pub mod io;
pub mod join;
pub mod lanes;
mod metrics;
pub mod net;
pub mod process;
mod rt;
mod sched;
pub mod sim;
pub mod time;
pub mod trace;
mod worker_id;

pub use config::{ExecutorConfig, DEFAULT_SEED, MAX_PARK_TIMEOUT};
pub use executor::{Executor, ExecutorHandle, WorkerCtx};
pub use metrics::{MetricsSnapshot, WorkerMetrics};
pub use rt::{
    block_in_place, shield, spawn, spawn_blocking, task, yield_now, AbortHandle, Builder,
    EnterGuard, Handle, JoinError, JoinHandle, JoinSet, Runtime, RuntimeMetrics, Shield, TaskId,
    WorkerCounters, YieldNow,
};

/// `#[magpie_runtime::main]` and `#[magpie_runtime::test]` (feature `macros`,
/// on by default): an `async fn` run on a new [`Runtime`] with `block_on`.
/// Arguments: `worker_threads = N`, `start_paused = true`,
/// `flavor = "current_thread"`.
#[cfg(feature = "macros")]
pub use magpie_macros::{main, test};
pub use sched::{LifoMode, LocalMode, SchedEvent, Source};
pub use worker_id::current_worker_id;
