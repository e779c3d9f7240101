//! What the HTTP tests share: a runtime, loopback sockets through async-io,
//! a time bound for every await, and small request/response helpers.
#![allow(dead_code)] // each test file uses a different part

use std::future::Future;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use async_io::Async;
use http_body_util::{BodyExt, Empty};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response};
use magpie_hyper::FuturesIo;
use magpie_runtime::Runtime;

/// How long any single step of a test may take before it fails. Generous:
/// the machine is shared; a healthy step takes milliseconds.
pub const STEP_LIMIT: Duration = Duration::from_secs(30);

pub fn runtime() -> Runtime {
    Runtime::builder()
        .worker_threads(2)
        .build()
        .expect("runtime")
}

/// Awaits `fut`, or panics naming `what` after [`STEP_LIMIT`] on magpie's
/// clock (so no test can hang).
pub async fn bounded<F: Future>(what: &str, fut: F) -> F::Output {
    let out = futures_lite::future::or(async { Some(fut.await) }, async {
        magpie_runtime::time::sleep(STEP_LIMIT).await;
        None
    })
    .await;
    match out {
        Some(v) => v,
        None => panic!("{what}: not done within {STEP_LIMIT:?}"),
    }
}

/// A listener on an ephemeral loopback port.
pub fn listen() -> (Async<TcpListener>, SocketAddr) {
    let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).expect("bind loopback");
    let addr = listener.get_ref().local_addr().expect("local addr");
    (listener, addr)
}

pub type Io = FuturesIo<Async<TcpStream>>;

/// Accepts one connection, wrapped for hyper.
pub async fn accept(listener: &Async<TcpListener>) -> Io {
    let (stream, _) = bounded("accept", listener.accept()).await.expect("accept");
    FuturesIo::new(stream).with_vectored_writes(true)
}

/// Connects to `addr`, wrapped for hyper.
pub async fn connect(addr: SocketAddr) -> Io {
    let stream = bounded("connect", Async::<TcpStream>::connect(addr))
        .await
        .expect("connect");
    FuturesIo::new(stream).with_vectored_writes(true)
}

/// A connection's task: what hyper's connection future returned.
pub type ConnTask = magpie_runtime::JoinHandle<hyper::Result<()>>;

/// An HTTP/1.1 client connection to `addr`: its sender, and its connection
/// future running as a task.
pub async fn http1_client<B>(addr: SocketAddr) -> (SendRequest<B>, ConnTask)
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let io = connect(addr).await;
    let (sender, conn) = bounded("handshake", hyper::client::conn::http1::handshake(io))
        .await
        .expect("handshake");
    (sender, magpie_runtime::spawn(conn))
}

/// Awaits both ends of a connection whose client has let go of its sender:
/// each connection future must end without an error.
pub async fn both_end_cleanly(client: ConnTask, server: ConnTask) {
    bounded("client connection", client)
        .await
        .expect("client task")
        .expect("client connection ends cleanly");
    bounded("server connection", server)
        .await
        .expect("server task")
        .expect("server connection ends cleanly");
}

/// A GET for `path` with a Host header and no body.
pub fn get(path: &str) -> Request<Empty<Bytes>> {
    Request::get(path)
        .header(hyper::header::HOST, "localhost")
        .body(Empty::new())
        .expect("request")
}

/// The whole body of `resp`, bounded in time.
pub async fn body_bytes(resp: Response<Incoming>) -> Bytes {
    bounded("read body", resp.into_body().collect())
        .await
        .expect("body")
        .to_bytes()
}

/// `len` bytes of a pattern that a shifted or truncated copy cannot match.
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}
