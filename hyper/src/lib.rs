//! # magpie-hyper
//!
//! hyper 1.x is runtime-agnostic: it asks its host for an executor (to spawn
//! HTTP/2 stream and connection tasks), a timer (keep-alive, header-read and
//! ping timeouts) and a byte stream implementing `hyper::rt::{Read, Write}`.
//! This crate gives it all three on magpie:
//!
//! | hyper needs | magpie-hyper gives | backed by |
//! | --- | --- | --- |
//! | `hyper::rt::Executor<F>` | [`MagpieExecutor`] | `magpie_runtime::spawn` or a [`Handle`](magpie_runtime::Handle) |
//! | `hyper::rt::Timer` / `Sleep` | [`MagpieTimer`] / [`MagpieSleep`] | `magpie_runtime::time::{sleep, sleep_until, Sleep::reset}` on a captured [`Driver`](magpie_runtime::time::Driver) |
//! | `hyper::rt::Read + Write` | [`FuturesIo<T>`] | any `futures_io::AsyncRead + AsyncWrite + Unpin` stream |
//!
//! `FuturesIo` is the seam for transports: `async_io::Async<TcpStream>`
//! today, `magpie_runtime::net::TcpStream` once magpie has its own I/O
//! driver. See `README.md` for the mapping in detail and its one cost (a copy
//! through a scratch buffer on reads, because this crate has no `unsafe`).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod executor;
mod io;
mod timer;

pub use executor::MagpieExecutor;
pub use io::{FuturesIo, SCRATCH_BYTES};
pub use timer::{MagpieSleep, MagpieTimer};
