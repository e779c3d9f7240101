//! HTTP/2 on magpie: hyper's h2 server and client connections, whose stream
//! tasks run on `MagpieExecutor`, over `FuturesIo<Async<TcpStream>>`.

mod common;

use std::convert::Infallible;

use common::{accept, body_bytes, both_end_cleanly, bounded, connect, listen, runtime};
use http_body_util::Empty;
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{client, server, Request, Response, Version};
use magpie_hyper::{MagpieExecutor, MagpieTimer};

/// Requests in flight at once on the one HTTP/2 connection.
const STREAMS: usize = 16;

#[test]
fn http2_multiplexes_concurrent_requests_over_one_connection() {
    runtime().block_on(async {
        let (listener, addr) = listen();
        let server = magpie_runtime::spawn(async move {
            let io = accept(&listener).await;
            let svc = service_fn(|req: Request<Incoming>| async move {
                let body = format!("h2 {} {:?}", req.uri().path(), req.version());
                Ok::<_, Infallible>(Response::new(http_body_util::Full::new(Bytes::from(body))))
            });
            server::conn::http2::Builder::new(MagpieExecutor::new())
                .timer(MagpieTimer::new())
                .serve_connection(io, svc)
                .await
        });
        let io = connect(addr).await;
        let (sender, conn) = bounded(
            "handshake",
            client::conn::http2::Builder::new(MagpieExecutor::new())
                .timer(MagpieTimer::new())
                .handshake::<_, Empty<Bytes>>(io),
        )
        .await
        .expect("h2 handshake");
        let client_conn = magpie_runtime::spawn(conn);
        let mut streams = Vec::with_capacity(STREAMS);
        for i in 0..STREAMS {
            let mut sender = sender.clone();
            streams.push(magpie_runtime::spawn(async move {
                let path = format!("/s/{i}");
                let req = Request::get(format!("http://{addr}{path}"))
                    .body(Empty::<Bytes>::new())
                    .unwrap();
                bounded("ready", sender.ready())
                    .await
                    .expect("sender ready");
                let resp = bounded("response", sender.send_request(req))
                    .await
                    .expect("response");
                assert_eq!(resp.version(), Version::HTTP_2);
                assert_eq!(resp.status(), 200);
                let body = body_bytes(resp).await;
                assert_eq!(body, format!("h2 {path} HTTP/2.0"));
                i
            }));
        }
        let mut done = Vec::with_capacity(STREAMS);
        for s in streams {
            done.push(bounded("stream task", s).await.expect("stream task"));
        }
        assert_eq!(done, (0..STREAMS).collect::<Vec<_>>());
        drop(sender);
        both_end_cleanly(client_conn, server).await;
    });
}
