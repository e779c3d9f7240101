//! Peer implementations that magpie's benchmarks compare against.
#![forbid(unsafe_code)]
