//! TCP on the runtime's I/O driver, over loopback.
#![cfg(not(loom))]

mod net_util;

use std::io::Write as _;
use std::net::SocketAddr;
use std::task::Poll;

use futures_util::io::{AsyncReadExt, AsyncWriteExt};
use magpie_runtime::net::{TcpListener, TcpStream, UdpSocket};
use magpie_runtime::spawn;
use net_util::{
    echo_bytes, echo_client_side, echo_server_side, poll_once, rt, wait_until, watchdog,
};

/// Connections in the echo test, all open at once.
const CONNECTIONS: usize = 300;
/// Messages each connection sends and checks.
const MESSAGES: usize = 20;

/// The server echoes every byte back; each client sends its messages one at
/// a time and checks each echo byte for byte. The total checked is computed
/// from the messages themselves, not written down.
#[test]
fn echo_300_connections_checks_every_byte() {
    let (checked, expected) = watchdog("echo", || {
        let rt = rt(2);
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let server = spawn(async move {
                for _ in 0..CONNECTIONS {
                    let (s, _) = listener.accept().await.unwrap();
                    spawn(echo_server_side(s));
                }
            });
            let clients: Vec<_> = (0..CONNECTIONS)
                .map(|c| {
                    spawn(async move {
                        let s = TcpStream::connect(addr).await.unwrap();
                        s.set_nodelay(true).unwrap();
                        echo_client_side(s, c, MESSAGES).await
                    })
                })
                .collect();
            let mut checked = 0;
            for c in clients {
                checked += c.await.unwrap();
            }
            server.await.unwrap();
            (checked, echo_bytes(CONNECTIONS, MESSAGES))
        })
    });
    assert_eq!(checked, expected);
}

/// The peer writes, then closes: the reader gets the bytes, then 0 (end of
/// stream), and 0 again.
#[test]
fn read_after_peer_close_returns_zero() {
    watchdog("read after close", || {
        let rt = rt(2);
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let server = spawn(async move {
                let (mut s, peer) = listener.accept().await.unwrap();
                assert_eq!(s.peer_addr().unwrap(), peer);
                s.write_all(b"bye").await.unwrap();
                // dropped: closed
            });
            let mut s = TcpStream::connect(addr).await.unwrap();
            server.await.unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 16];
            let mut reads = 0;
            loop {
                reads += 1;
                assert!(reads < 100, "no end of stream after 100 reads");
                let n = s.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            assert_eq!(got, b"bye");
            assert_eq!(s.read(&mut buf).await.unwrap(), 0);
        });
    });
}

/// A task owns a listener and waits in `accept`; the task is aborted, which
/// drops the listener with the accept pending. Its registration is freed
/// and the port refuses connections.
#[test]
fn listener_dropped_while_accept_pending() {
    watchdog("listener drop", || {
        let rt = rt(2);
        let handle = rt.handle().clone();
        let (tx, rx) = std::sync::mpsc::channel::<SocketAddr>();
        let task = rt.spawn(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let _ = listener.accept().await;
            unreachable!("nobody connects");
        });
        let addr = rx.recv().unwrap();
        wait_until("the listener is registered", || {
            handle.io_metrics().registrations == 1
        });
        task.abort();
        let err = rt.block_on(task).unwrap_err();
        assert!(err.is_cancelled());
        assert_eq!(handle.io_metrics().registrations, 0);
        let refused = std::net::TcpStream::connect(addr).unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    });
}

/// A socket made readable and dropped; a new socket takes its place in the
/// driver's table. The new one starts with no readiness (its first wait is
/// pending), and is woken by its own datagram, not the old one's.
#[test]
fn readiness_after_deregister_and_reuse() {
    watchdog("reuse", || {
        let rt = rt(1);
        rt.block_on(async {
            let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let old = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            for _ in 0..3 {
                sender.send_to(b"old", old.local_addr().unwrap()).unwrap();
            }
            old.readable().await.unwrap();
            drop(old);
            let new = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            assert!(poll_once(new.readable()).await.is_pending());
            let mut buf = [0u8; 8];
            assert!(matches!(
                poll_once(new.recv_from(&mut buf)).await,
                Poll::Pending
            ));
            sender.send_to(b"new", new.local_addr().unwrap()).unwrap();
            let (n, from) = new.recv_from(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], b"new");
            assert_eq!(from, sender.local_addr().unwrap());
        });
    });
}

/// `split` halves read and write at once in one task; `into_split` halves
/// in two tasks, and `reunite` puts them back.
#[test]
fn split_halves_read_and_write_concurrently() {
    watchdog("split", || {
        let rt = rt(2);
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let server = spawn(async move {
                let (s, _) = listener.accept().await.unwrap();
                let (r, mut w) = s.into_split();
                // The read half goes to a task of its own and comes back.
                let reader = spawn(async move {
                    let mut r = r;
                    let mut got = Vec::new();
                    r.read_to_end(&mut got).await.unwrap();
                    (r, got)
                });
                let (r, got) = reader.await.unwrap();
                w.write_all(&got).await.unwrap();
                let mut s = r.reunite(w).expect("the two halves of one stream");
                s.close().await.unwrap();
                got.len()
            });
            let mut s = TcpStream::connect(addr).await.unwrap();
            let payload: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
            // Called by path: with futures' `AsyncReadExt` in scope, `s.split()`
            // is its by-value `split` (a BiLock), not this one.
            let (mut r, mut w) = TcpStream::split(&mut s);
            let write = async {
                w.write_all(&payload).await.unwrap();
                w.close().await.unwrap();
            };
            let read = async {
                let mut back = Vec::new();
                r.read_to_end(&mut back).await.unwrap();
                back
            };
            let ((), back) = futures_util::future::join(write, read).await;
            assert_eq!(back, payload);
            assert_eq!(server.await.unwrap(), payload.len());
        });
    });
}

/// `from_std` takes a blocking std listener and stream; `try_read` answers
/// `WouldBlock` before data and the data after `readable`.
#[test]
fn from_std_and_try_read() {
    watchdog("from_std", || {
        let rt = rt(1);
        rt.block_on(async {
            let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = std_listener.local_addr().unwrap();
            let listener = TcpListener::from_std(std_listener).unwrap();
            let mut peer = std::net::TcpStream::connect(addr).unwrap();
            let (s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 8];
            assert_eq!(
                s.try_read(&mut buf).unwrap_err().kind(),
                std::io::ErrorKind::WouldBlock
            );
            peer.write_all(b"hi").unwrap();
            let mut got = 0;
            for _ in 0..100 {
                s.readable().await.unwrap();
                match s.try_read(&mut buf[got..]) {
                    Ok(n) => got += n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{e}"),
                }
                if got == 2 {
                    break;
                }
            }
            assert_eq!(&buf[..got], b"hi");
        });
    });
}
