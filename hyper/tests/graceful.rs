//! Graceful shutdown of a hyper HTTP/1.1 connection on magpie: the request
//! in flight is answered, then the connection closes.

mod common;

use std::convert::Infallible;
use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::{Arc, Mutex};

use common::{accept, body_bytes, bounded, get, http1_client, listen, runtime};
use futures_channel::oneshot;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{server, Request, Response};
use magpie_hyper::MagpieTimer;

#[test]
fn graceful_shutdown_answers_the_request_in_flight_then_closes() {
    runtime().block_on(async {
        let (listener, addr) = listen();
        let (started_tx, started_rx) = oneshot::channel::<()>();
        let (release_tx, release_rx) = oneshot::channel::<()>();
        let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
        let (shutdown_seen_tx, shutdown_seen_rx) = oneshot::channel::<()>();
        // The first request's handler announces itself and waits for release.
        let started_tx = Arc::new(Mutex::new(Some(started_tx)));
        let release_rx = Arc::new(Mutex::new(Some(release_rx)));
        let server = magpie_runtime::spawn(async move {
            let io = accept(&listener).await;
            let svc = service_fn(move |_req: Request<Incoming>| {
                let started = started_tx.lock().unwrap().take();
                let release = release_rx.lock().unwrap().take();
                async move {
                    if let Some(started) = started {
                        let _ = started.send(());
                    }
                    if let Some(release) = release {
                        let _ = release.await;
                    }
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"drained"))))
                }
            });
            let conn = server::conn::http1::Builder::new()
                .timer(MagpieTimer::new())
                .serve_connection(io, svc);
            let mut conn = pin!(conn);
            let mut shutdown_rx = Some(shutdown_rx);
            let mut shutdown_seen_tx = Some(shutdown_seen_tx);
            poll_fn(|cx| {
                if let Some(rx) = shutdown_rx.as_mut() {
                    if Pin::new(rx).poll(cx).is_ready() {
                        shutdown_rx = None;
                        conn.as_mut().graceful_shutdown();
                        if let Some(seen) = shutdown_seen_tx.take() {
                            let _ = seen.send(());
                        }
                    }
                }
                conn.as_mut().poll(cx)
            })
            .await
        });

        let (mut sender, client_conn) = http1_client(addr).await;
        bounded("ready", sender.ready())
            .await
            .expect("sender ready");
        let in_flight = magpie_runtime::spawn(sender.send_request(get("/slow")));
        bounded("handler started", started_rx)
            .await
            .expect("handler started");
        // Shut down while the request is in its handler; release the handler
        // only once the server has begun the graceful shutdown.
        shutdown_tx.send(()).unwrap();
        bounded("shutdown begun", shutdown_seen_rx)
            .await
            .expect("shutdown begun");
        assert!(
            !server.is_finished(),
            "the server closed with a request in flight"
        );
        release_tx.send(()).unwrap();

        let resp = bounded("in-flight response", in_flight)
            .await
            .expect("request task")
            .expect("the request in flight is answered despite the shutdown");
        assert_eq!(resp.status(), 200);
        assert_eq!(body_bytes(resp).await, "drained");
        bounded("server connection", server)
            .await
            .expect("server task")
            .expect("server connection ends cleanly after draining");
        bounded("client connection", client_conn)
            .await
            .expect("client task")
            .expect("client connection sees a clean close");
        assert!(
            bounded("ready after close", sender.ready()).await.is_err(),
            "the connection must be closed after the graceful shutdown"
        );
    });
}
