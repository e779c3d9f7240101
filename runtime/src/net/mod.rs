//! TCP, UDP and Unix-domain sockets on the runtime's I/O driver
//! (`crate::io`), with tokio's names: `TcpListener`, `TcpStream`,
//! `UdpSocket`, `UnixListener`, `UnixStream`. The streams implement
//! `futures_io::AsyncRead`/`AsyncWrite`, and with the `tokio-io` feature
//! tokio's `AsyncRead`/`AsyncWrite` too (README.md beside this file).
//!
//! Sockets must be created inside the runtime (a task, a worker thread, or
//! `Runtime::block_on`): they register with its driver.

use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::task::{Context, Poll};

use crate::io::registration::PollEvented;
use crate::io::scheduled_io::Direction;

pub mod tcp;
mod udp;
#[cfg(unix)]
pub mod unix;

pub use tcp::{TcpListener, TcpStream};
pub use udp::UdpSocket;
#[cfg(unix)]
pub use unix::{UnixListener, UnixStream};

/// Tries each address `addr` resolves to with `f`; the first success wins,
/// else the last error. Name resolution is the blocking
/// `std::net::ToSocketAddrs` (loopback and literal addresses do not block).
fn each_addr<A: ToSocketAddrs, T>(
    addr: A,
    mut f: impl FnMut(SocketAddr) -> io::Result<T>,
) -> io::Result<T> {
    let mut last = None;
    for a in addr.to_socket_addrs()? {
        match f(a) {
            Ok(t) => return Ok(t),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any address",
        )
    }))
}

/// A mio stream socket: readable and writable through `&S`, and able to
/// shut its write side down.
pub(crate) trait StreamSource: mio::event::Source
where
    for<'a> &'a Self: Read + Write,
{
    fn shutdown_write(&self) -> io::Result<()>;
}

impl StreamSource for mio::net::TcpStream {
    fn shutdown_write(&self) -> io::Result<()> {
        self.shutdown(std::net::Shutdown::Write)
    }
}

#[cfg(unix)]
impl StreamSource for mio::net::UnixStream {
    fn shutdown_write(&self) -> io::Result<()> {
        self.shutdown(std::net::Shutdown::Write)
    }
}

pub(crate) fn poll_read<S: StreamSource>(
    io: &PollEvented<S>,
    cx: &mut Context<'_>,
    buf: &mut [u8],
) -> Poll<io::Result<usize>>
where
    for<'a> &'a S: Read + Write,
{
    io.poll_io(cx, Direction::Read, |mut s| s.read(buf))
}

pub(crate) fn poll_read_vectored<S: StreamSource>(
    io: &PollEvented<S>,
    cx: &mut Context<'_>,
    bufs: &mut [IoSliceMut<'_>],
) -> Poll<io::Result<usize>>
where
    for<'a> &'a S: Read + Write,
{
    io.poll_io(cx, Direction::Read, |mut s| s.read_vectored(bufs))
}

pub(crate) fn poll_write<S: StreamSource>(
    io: &PollEvented<S>,
    cx: &mut Context<'_>,
    buf: &[u8],
) -> Poll<io::Result<usize>>
where
    for<'a> &'a S: Read + Write,
{
    io.poll_io(cx, Direction::Write, |mut s| s.write(buf))
}

pub(crate) fn poll_write_vectored<S: StreamSource>(
    io: &PollEvented<S>,
    cx: &mut Context<'_>,
    bufs: &[IoSlice<'_>],
) -> Poll<io::Result<usize>>
where
    for<'a> &'a S: Read + Write,
{
    io.poll_io(cx, Direction::Write, |mut s| s.write_vectored(bufs))
}

/// Implements futures-io's (and, with `tokio-io`, tokio's) `AsyncRead` for
/// `$ty`, whose `&PollEvented` is `$io` (an expression of `$s: &$ty`).
macro_rules! impl_async_read {
    ($ty:ty, |$s:ident| $io:expr) => {
        impl futures_io::AsyncRead for $ty {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut [u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let $s = &*self;
                crate::net::poll_read($io, cx, buf)
            }

            fn poll_read_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &mut [std::io::IoSliceMut<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let $s = &*self;
                crate::net::poll_read_vectored($io, cx, bufs)
            }
        }

        #[cfg(feature = "tokio-io")]
        impl tokio::io::AsyncRead for $ty {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let $s = &*self;
                // Safe code only: the unfilled part is zeroed first (once
                // per buffer: `initialize_unfilled` remembers it).
                let n =
                    std::task::ready!(crate::net::poll_read($io, cx, buf.initialize_unfilled()))?;
                buf.advance(n);
                std::task::Poll::Ready(Ok(()))
            }
        }
    };
}

/// As [`impl_async_read`], for `AsyncWrite`. `poll_close` (tokio:
/// `poll_shutdown`) shuts the write side down; `poll_flush` has nothing to
/// do (no user-space buffer).
macro_rules! impl_async_write {
    ($ty:ty, |$s:ident| $io:expr) => {
        impl futures_io::AsyncWrite for $ty {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let $s = &*self;
                crate::net::poll_write($io, cx, buf)
            }

            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let $s = &*self;
                crate::net::poll_write_vectored($io, cx, bufs)
            }

            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(Ok(()))
            }

            fn poll_close(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let $s = &*self;
                std::task::Poll::Ready(crate::net::StreamSource::shutdown_write(($io).get_ref()))
            }
        }

        #[cfg(feature = "tokio-io")]
        impl tokio::io::AsyncWrite for $ty {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let $s = &*self;
                crate::net::poll_write($io, cx, buf)
            }

            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let $s = &*self;
                crate::net::poll_write_vectored($io, cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                true
            }

            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(Ok(()))
            }

            fn poll_shutdown(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let $s = &*self;
                std::task::Poll::Ready(crate::net::StreamSource::shutdown_write(($io).get_ref()))
            }
        }
    };
}

pub(crate) use {impl_async_read, impl_async_write};
