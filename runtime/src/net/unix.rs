//! Unix-domain stream sockets: [`UnixListener`] and [`UnixStream`].

use std::fmt;
use std::future::poll_fn;
use std::io::{self, Read, Write};
use std::path::Path;
use std::task::{Context, Poll};

use mio::Interest;

use super::{impl_async_read, impl_async_write};
use crate::io::registration::PollEvented;
use crate::io::scheduled_io::Direction;

/// The address of a Unix-domain socket.
pub use std::os::unix::net::SocketAddr;

/// A Unix-domain socket server.
pub struct UnixListener {
    io: PollEvented<mio::net::UnixListener>,
}

impl UnixListener {
    /// Binds to `path` (which must not exist) and listens. Not `async`, as
    /// in tokio. Must be called inside the runtime.
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<UnixListener> {
        UnixListener::new(mio::net::UnixListener::bind(path)?)
    }

    fn new(listener: mio::net::UnixListener) -> io::Result<UnixListener> {
        Ok(UnixListener {
            io: PollEvented::new_with_interest(listener, Interest::READABLE)?,
        })
    }

    /// Wraps a std listener (switched to non-blocking mode here).
    pub fn from_std(listener: std::os::unix::net::UnixListener) -> io::Result<UnixListener> {
        listener.set_nonblocking(true)?;
        UnixListener::new(mio::net::UnixListener::from_std(listener))
    }

    /// Waits for a connection.
    pub async fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// Polls for a connection.
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(UnixStream, SocketAddr)>> {
        let (stream, addr) =
            std::task::ready!(self.io.poll_io(cx, Direction::Read, |l| l.accept()))?;
        Poll::Ready(UnixStream::new(stream).map(|s| (s, addr)))
    }

    /// The address this listener is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }
}

impl fmt::Debug for UnixListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixListener")
            .field("io", &self.io)
            .finish()
    }
}

/// A Unix-domain stream connection.
pub struct UnixStream {
    io: PollEvented<mio::net::UnixStream>,
}

impl UnixStream {
    /// Connects to the socket at `path`.
    pub async fn connect<P: AsRef<Path>>(path: P) -> io::Result<UnixStream> {
        let stream = UnixStream::new(mio::net::UnixStream::connect(path)?)?;
        stream.io.ready(Direction::Write).await?;
        if let Some(e) = stream.io.get_ref().take_error()? {
            return Err(e);
        }
        Ok(stream)
    }

    /// A connected pair.
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = mio::net::UnixStream::pair()?;
        Ok((UnixStream::new(a)?, UnixStream::new(b)?))
    }

    fn new(stream: mio::net::UnixStream) -> io::Result<UnixStream> {
        Ok(UnixStream {
            io: PollEvented::new(stream)?,
        })
    }

    /// Wraps a connected std stream (switched to non-blocking mode here).
    pub fn from_std(stream: std::os::unix::net::UnixStream) -> io::Result<UnixStream> {
        stream.set_nonblocking(true)?;
        UnixStream::new(mio::net::UnixStream::from_std(stream))
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().peer_addr()
    }

    /// Waits until the stream may be readable.
    pub async fn readable(&self) -> io::Result<()> {
        self.io.ready(Direction::Read).await
    }

    /// Waits until the stream may be writable.
    pub async fn writable(&self) -> io::Result<()> {
        self.io.ready(Direction::Write).await
    }

    /// Reads without waiting (`WouldBlock` if nothing is there).
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io.try_io(Direction::Read, |mut s| s.read(buf))
    }

    /// Writes without waiting (`WouldBlock` if the buffer is full).
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.io.try_io(Direction::Write, |mut s| s.write(buf))
    }
}

impl fmt::Debug for UnixStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixStream").field("io", &self.io).finish()
    }
}

impl_async_read!(UnixStream, |s| &s.io);
impl_async_write!(UnixStream, |s| &s.io);
