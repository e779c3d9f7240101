//! HTTP/1.1 on magpie: hyper's server and client connections, both over
//! `FuturesIo<Async<TcpStream>>`, on loopback.

mod common;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{
    accept, body_bytes, both_end_cleanly, bounded, connect, get, http1_client, listen, pattern,
    runtime, Io,
};
use futures_lite::AsyncReadExt;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{server, Request, Response};
use magpie_hyper::MagpieTimer;

/// Requests sent over the one keep-alive connection.
const REQUESTS: usize = 50;
/// Size of the one large body, several times `magpie_hyper::SCRATCH_BYTES`,
/// so it arrives in many reads through the adaptor's scratch buffer.
const BIG: usize = 256 * 1024;
const HEADER_SERVED: &str = "x-served-on-this-connection";

/// Serves one connection; every response carries how many requests this
/// connection has served, and `/big` answers with [`BIG`] pattern bytes.
async fn serve_counting(io: Io) -> hyper::Result<()> {
    let served = Arc::new(Mutex::new(0usize));
    let svc = service_fn(move |req: Request<Incoming>| {
        let k = {
            let mut n = served.lock().unwrap();
            *n += 1;
            *n
        };
        let path = req.uri().path().to_owned();
        async move {
            let body = if path == "/big" {
                Bytes::from(pattern(BIG))
            } else {
                Bytes::from(format!("reply to {path}"))
            };
            let resp = Response::builder()
                .header(HEADER_SERVED, k)
                .body(Full::new(body))
                .unwrap();
            Ok::<_, Infallible>(resp)
        }
    });
    server::conn::http1::Builder::new()
        .timer(MagpieTimer::new())
        .keep_alive(true)
        .serve_connection(io, svc)
        .await
}

#[test]
fn one_keep_alive_connection_serves_every_request_with_its_own_body() {
    runtime().block_on(async {
        let (listener, addr) = listen();
        let server = magpie_runtime::spawn(async move {
            let io = accept(&listener).await;
            serve_counting(io).await
        });
        let (mut sender, client_conn) = http1_client(addr).await;
        for i in 0..REQUESTS {
            bounded("ready", sender.ready())
                .await
                .expect("sender ready");
            let path = if i == REQUESTS / 2 {
                "/big".to_string()
            } else {
                format!("/n/{i}")
            };
            let resp = bounded("response", sender.send_request(get(&path)))
                .await
                .expect("response");
            assert_eq!(resp.status(), 200);
            let served: usize = resp.headers()[HEADER_SERVED]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(
                served,
                i + 1,
                "request {i} was not served on the same connection"
            );
            let body = body_bytes(resp).await;
            if path == "/big" {
                assert_eq!(body.len(), BIG);
                assert!(
                    body[..] == pattern(BIG)[..],
                    "the large body came back altered"
                );
            } else {
                assert_eq!(body, format!("reply to {path}"));
            }
        }
        drop(sender);
        both_end_cleanly(client_conn, server).await;
    });
}

#[test]
fn header_read_timeout_on_the_magpie_timer_closes_a_silent_connection() {
    runtime().block_on(async {
        let (listener, addr) = listen();
        let server = magpie_runtime::spawn(async move {
            let io = accept(&listener).await;
            let svc = service_fn(|_req: Request<Incoming>| async {
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"never"))))
            });
            server::conn::http1::Builder::new()
                .timer(MagpieTimer::new())
                .header_read_timeout(Duration::from_millis(50))
                .serve_connection(io, svc)
                .await
        });
        // Connects and never sends a byte.
        let silent = connect(addr).await;
        let result = bounded("server connection", server)
            .await
            .expect("server task");
        let err =
            result.expect_err("a silent connection must be closed by the header-read timeout");
        assert!(err.is_timeout(), "expected a timeout, got {err:?}");
        let mut stream = silent.into_inner();
        let mut byte = [0u8; 1];
        let n = bounded("read after close", stream.read(&mut byte))
            .await
            .expect("read");
        assert_eq!(n, 0, "the server should have closed the connection");
    });
}
