//! UDP: [`UdpSocket`].

use std::fmt;
use std::future::poll_fn;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};

use super::each_addr;
use crate::io::registration::PollEvented;
use crate::io::scheduled_io::Direction;

/// A UDP socket: `send_to`/`recv_from`, or `connect` and then `send`/`recv`.
pub struct UdpSocket {
    io: PollEvented<mio::net::UdpSocket>,
}

impl UdpSocket {
    /// Binds to `addr` (each address it resolves to is tried in turn).
    pub async fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<UdpSocket> {
        let socket = each_addr(addr, mio::net::UdpSocket::bind)?;
        UdpSocket::new(socket)
    }

    fn new(socket: mio::net::UdpSocket) -> io::Result<UdpSocket> {
        Ok(UdpSocket {
            io: PollEvented::new(socket)?,
        })
    }

    /// Wraps a std socket (switched to non-blocking mode here). Must be
    /// called inside the runtime.
    pub fn from_std(socket: std::net::UdpSocket) -> io::Result<UdpSocket> {
        socket.set_nonblocking(true)?;
        UdpSocket::new(mio::net::UdpSocket::from_std(socket))
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// The address given to [`UdpSocket::connect`].
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().peer_addr()
    }

    /// Sets the default destination of `send` and the only source `recv`
    /// accepts. The first address `addr` resolves to that works is used.
    pub async fn connect<A: ToSocketAddrs>(&self, addr: A) -> io::Result<()> {
        each_addr(addr, |a| self.io.get_ref().connect(a))
    }

    /// Sends `buf` to the connected peer.
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        poll_fn(|cx| self.io.poll_io(cx, Direction::Write, |s| s.send(buf))).await
    }

    /// Receives one datagram from the connected peer into `buf`.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        poll_fn(|cx| self.io.poll_io(cx, Direction::Read, |s| s.recv(buf))).await
    }

    /// Sends `buf` to `target` (its first address).
    pub async fn send_to<A: ToSocketAddrs>(&self, buf: &[u8], target: A) -> io::Result<usize> {
        let target = target.to_socket_addrs()?.next().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "no addresses to send data to")
        })?;
        poll_fn(|cx| {
            self.io
                .poll_io(cx, Direction::Write, |s| s.send_to(buf, target))
        })
        .await
    }

    /// Receives one datagram into `buf`, with its sender's address.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        poll_fn(|cx| self.io.poll_io(cx, Direction::Read, |s| s.recv_from(buf))).await
    }

    /// Waits until a datagram may be there to receive.
    pub async fn readable(&self) -> io::Result<()> {
        self.io.ready(Direction::Read).await
    }

    /// Waits until a datagram may be sent.
    pub async fn writable(&self) -> io::Result<()> {
        self.io.ready(Direction::Write).await
    }
}

impl fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UdpSocket").field("io", &self.io).finish()
    }
}
