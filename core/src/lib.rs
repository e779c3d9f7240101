//! # magpie-core
//!
//! The lock-free primitives magpie's scheduler is built from, and every line of
//! `unsafe` code in the project. Each primitive has a safe API, its protocol
//! written as numbered steps in a README beside the code, and loom, Miri and
//! stress tests that prove it.
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`sync`] | the facade: std or loom atomics, cells, locks, threads |
//! | [`cache_padded`] | [`CachePadded`], one value per cache line |
//! | [`clock`] | raw reads of `CLOCK_MONOTONIC` and its cheap coarse twin, for timeouts |
//! | [`coalesce`] | many requests, one runner at a time, none lost: the paused clock's auto-advance |
//! | [`queue`] | the 256-slot two-head local run queue, the LIFO slot, the global inject queue |
//! | [`park`] | the futex parker (UNPARKED / PARKED / NOTIFIED) |
//! | [`idle`] | searching and parked counts, the multi-word parked bitmap |
//! | [`task`] | the packed 64-bit task state word; the raw task cell for futures, its wakers, `JoinHandle` and the registry of live tasks |
//! | [`process`] | the packed process-state word, the lock-free MPSC event queue and the bounded/closable mailbox around them, with a proof token for the single consumer |
//! | [`join`] | fork-join: the type-erased job reference, the stack job, the scope's heap jobs, the worker's latch (UNSET / SLEEPING / SET) and the blocking latch, and the `join`/`scope`/`install` protocols behind a safe API |
//! | [`gate`] | the executor gate word: accepting bit plus in-flight count |
//! | [`affinity`] | pinning a thread to a core |
//! | [`rng`] | xorshift64 for victim selection |
//!
//! Code above this crate takes its atomics from [`sync`] only; clippy's
//! `disallowed-types` enforces it, so the model checker sees everything.
#![deny(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod affinity;
pub mod cache_padded;
pub mod clock;
pub mod coalesce;
pub mod gate;
pub mod idle;
pub mod join;
pub mod park;
pub mod process;
pub mod queue;
pub mod rng;
pub mod sync;
pub mod task;

pub use cache_padded::CachePadded;
