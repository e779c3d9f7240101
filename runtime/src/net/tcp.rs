//! TCP: [`TcpListener`] and [`TcpStream`], with the stream's borrowed
//! ([`ReadHalf`], [`WriteHalf`]) and owned ([`OwnedReadHalf`],
//! [`OwnedWriteHalf`]) halves.

use std::fmt;
use std::future::poll_fn;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::task::{Context, Poll};

use mio::Interest;

use super::{each_addr, impl_async_read, impl_async_write};
use crate::io::registration::PollEvented;
use crate::io::scheduled_io::Direction;

/// A TCP socket server, listening for connections.
pub struct TcpListener {
    io: PollEvented<mio::net::TcpListener>,
}

impl TcpListener {
    /// Binds to `addr` (each address it resolves to is tried in turn) and
    /// starts listening. `SO_REUSEADDR` is set, as mio and tokio do.
    pub async fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<TcpListener> {
        let listener = each_addr(addr, mio::net::TcpListener::bind)?;
        TcpListener::new(listener)
    }

    fn new(listener: mio::net::TcpListener) -> io::Result<TcpListener> {
        Ok(TcpListener {
            io: PollEvented::new_with_interest(listener, Interest::READABLE)?,
        })
    }

    /// Wraps a std listener (switched to non-blocking mode here). Must be
    /// called inside the runtime.
    pub fn from_std(listener: std::net::TcpListener) -> io::Result<TcpListener> {
        listener.set_nonblocking(true)?;
        TcpListener::new(mio::net::TcpListener::from_std(listener))
    }

    /// Waits for a connection and returns it with the peer's address.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// Polls for a connection.
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        let (stream, addr) =
            std::task::ready!(self.io.poll_io(cx, Direction::Read, |l| l.accept()))?;
        Poll::Ready(TcpStream::new(stream).map(|s| (s, addr)))
    }

    /// The address this listener is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// The `IP_TTL` option.
    pub fn ttl(&self) -> io::Result<u32> {
        self.io.get_ref().ttl()
    }
}

impl fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpListener").field("io", &self.io).finish()
    }
}

/// A TCP connection. Reads and writes go through futures-io's (and with
/// the `tokio-io` feature tokio's) `AsyncRead`/`AsyncWrite`.
pub struct TcpStream {
    io: PollEvented<mio::net::TcpStream>,
}

impl TcpStream {
    /// Connects to `addr`, trying each address it resolves to in turn.
    pub async fn connect<A: ToSocketAddrs>(addr: A) -> io::Result<TcpStream> {
        let mut last = None;
        for a in addr.to_socket_addrs()? {
            match TcpStream::connect_addr(a).await {
                Ok(s) => return Ok(s),
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

    async fn connect_addr(addr: SocketAddr) -> io::Result<TcpStream> {
        let stream = TcpStream::new(mio::net::TcpStream::connect(addr)?)?;
        // mio's recipe for a non-blocking connect: wait for writable, then
        // SO_ERROR; `peer_addr` failing with NotConnected means "not yet".
        loop {
            let ev = poll_fn(|cx| stream.io.poll_ready(cx, Direction::Write)).await?;
            if let Some(e) = stream.io.get_ref().take_error()? {
                return Err(e);
            }
            match stream.io.get_ref().peer_addr() {
                Ok(_) => return Ok(stream),
                Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                    stream.io.clear_readiness(ev);
                }
                Err(e) => return Err(e),
            }
        }
    }

    pub(crate) fn new(stream: mio::net::TcpStream) -> io::Result<TcpStream> {
        Ok(TcpStream {
            io: PollEvented::new(stream)?,
        })
    }

    /// Wraps a connected std stream (switched to non-blocking mode here).
    /// Must be called inside the runtime.
    pub fn from_std(stream: std::net::TcpStream) -> io::Result<TcpStream> {
        stream.set_nonblocking(true)?;
        TcpStream::new(mio::net::TcpStream::from_std(stream))
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().peer_addr()
    }

    /// Sets `TCP_NODELAY` (no Nagle delay for small writes).
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.io.get_ref().set_nodelay(nodelay)
    }

    /// The `TCP_NODELAY` option.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.io.get_ref().nodelay()
    }

    /// Waits until the stream may be readable (or closed, or errored).
    pub async fn readable(&self) -> io::Result<()> {
        self.io.ready(Direction::Read).await
    }

    /// Waits until the stream may be writable (or closed, or errored).
    pub async fn writable(&self) -> io::Result<()> {
        self.io.ready(Direction::Write).await
    }

    /// Reads without waiting: `WouldBlock` if nothing is there (and the
    /// readiness is cleared, so the next `readable` waits for new data).
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io.try_io(Direction::Read, |mut s| s.read(buf))
    }

    /// Writes without waiting: `WouldBlock` if the send buffer is full.
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.io.try_io(Direction::Write, |mut s| s.write(buf))
    }

    /// Splits into a reading and a writing half that borrow the stream, so
    /// one task can read and write at once (e.g. in a `join`).
    pub fn split(&mut self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        (ReadHalf(self), WriteHalf(self))
    }

    /// Splits into owned halves, which can move to different tasks.
    /// Dropping the write half shuts the write side down, as in tokio.
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        let inner = Arc::new(self);
        (
            OwnedReadHalf {
                inner: Arc::clone(&inner),
            },
            OwnedWriteHalf {
                inner,
                shutdown_on_drop: true,
            },
        )
    }
}

impl fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpStream").field("io", &self.io).finish()
    }
}

/// The reading half of a [`TcpStream`], from [`TcpStream::split`].
#[derive(Debug)]
pub struct ReadHalf<'a>(&'a TcpStream);

/// The writing half of a [`TcpStream`], from [`TcpStream::split`].
#[derive(Debug)]
pub struct WriteHalf<'a>(&'a TcpStream);

/// The reading half of a [`TcpStream`], from [`TcpStream::into_split`].
#[derive(Debug)]
pub struct OwnedReadHalf {
    inner: Arc<TcpStream>,
}

/// The writing half of a [`TcpStream`], from [`TcpStream::into_split`].
/// Dropping it shuts the write side of the connection down.
#[derive(Debug)]
pub struct OwnedWriteHalf {
    inner: Arc<TcpStream>,
    shutdown_on_drop: bool,
}

impl AsRef<TcpStream> for OwnedReadHalf {
    fn as_ref(&self) -> &TcpStream {
        &self.inner
    }
}

impl AsRef<TcpStream> for OwnedWriteHalf {
    fn as_ref(&self) -> &TcpStream {
        &self.inner
    }
}

impl OwnedReadHalf {
    /// Whether `other` is the write half of the same stream.
    pub fn is_pair_of(&self, other: &OwnedWriteHalf) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Puts the stream back together, if `other` is its write half;
    /// otherwise both halves come back.
    pub fn reunite(self, mut other: OwnedWriteHalf) -> Result<TcpStream, (Self, OwnedWriteHalf)> {
        if !self.is_pair_of(&other) {
            return Err((self, other));
        }
        other.shutdown_on_drop = false;
        drop(other);
        Ok(Arc::try_unwrap(self.inner).expect("both halves were here: no other reference"))
    }
}

impl OwnedWriteHalf {
    /// Drops this half without shutting the write side down; the
    /// connection closes when the read half is dropped too.
    pub fn forget(mut self) {
        self.shutdown_on_drop = false;
    }
}

impl Drop for OwnedWriteHalf {
    fn drop(&mut self) {
        if self.shutdown_on_drop {
            let _ = self.inner.io.get_ref().shutdown(Shutdown::Write);
        }
    }
}

impl_async_read!(TcpStream, |s| &s.io);
impl_async_write!(TcpStream, |s| &s.io);
impl_async_read!(ReadHalf<'_>, |s| &s.0.io);
impl_async_write!(WriteHalf<'_>, |s| &s.0.io);
impl_async_read!(OwnedReadHalf, |s| &s.inner.io);
impl_async_write!(OwnedWriteHalf, |s| &s.inner.io);
