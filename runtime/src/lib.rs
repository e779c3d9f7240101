//! # magpie-runtime
//!
//! magpie's scheduling policy, built on `magpie-core`'s primitives: one worker
//! loop for typed tasks and futures, metrics and a deterministic simulator.
//! Not yet written: see issue 3.
#![forbid(unsafe_code)]

pub mod time;
