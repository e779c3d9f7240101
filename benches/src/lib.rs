//! Peer implementations that magpie's benchmarks compare against, and the
//! workloads every peer runs.
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`cb_executor`] | the seed-000 crossbeam design: seed 000's typed executor on crossbeam-deque, one shared in-flight counter per task (peer `cb_seed000`) |
//! | [`cb_strong`] | the strong crossbeam-deque peer: per-worker counts, sleeper-aware wakes, parking without a timeout (peer `cb_strong`) |
//! | [`forkjoin`] | rayon's demo workloads (quicksort, mergesort, n-body, fib) written once over [`forkjoin::ForkJoin`]: sequential, `rayon::join`, magpie's join |
//! | [`typed`] | typed workloads (spawn trees, UTS, external inject), written once over [`typed::SpawnCtx`], and the pools that run them |
//! | [`async_workloads`] | tokio's `rt_multi_threaded` workloads and skynet, written once over [`async_workloads::AsyncRuntime`] |
//! | [`work`] | calibrated ~0.5 µs CPU work |
//! | [`tally`] | exactly-once checksums |
//! | [`proc_stats`] | CPU time and peak RSS from `/proc` |
//! | [`idle`] | CPU burnt by an idle pool |
//! | [`suite`] | the one-command suite behind `benches/run`: every comparison alternating in one process, validity, tables, plots, baselines |
//! | [`report`] | per-sample recorder and the ratio summary the benches print |
//! | [`savina`] | Savina actor workloads on ractor, kameo and actix (the actor peers of magpie's processes) |
#![forbid(unsafe_code)]

pub mod async_workloads;
pub mod cb_executor;
pub mod cb_strong;
pub mod forkjoin;
pub mod idle;
pub mod proc_stats;
pub mod report;
pub mod savina;
pub mod suite;
pub mod tally;
pub mod typed;
pub mod work;
