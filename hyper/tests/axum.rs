//! An axum `Router` served through hyper on magpie: axum's `serve` is
//! tokio-only, so the router goes in as a tower `Service` through
//! hyper-util's `TowerToHyperService` and hyper's connection builder.

mod common;

use axum::extract::Path;
use axum::routing::{get, post};
use axum::Router;
use common::{accept, body_bytes, both_end_cleanly, bounded, http1_client, listen, runtime};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{server, Method, Request, StatusCode};
use hyper_util::service::TowerToHyperService;
use magpie_hyper::MagpieTimer;

fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "hello from axum" }))
        .route(
            "/add/{a}/{b}",
            get(|Path((a, b)): Path<(u64, u64)>| async move { (a + b).to_string() }),
        )
        .route(
            "/shout",
            post(|body: String| async move { body.to_uppercase() }),
        )
}

fn request(method: Method, path: &str, body: &'static str) -> Request<Full<Bytes>> {
    Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, "localhost")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap()
}

#[test]
fn axum_router_answers_its_routes_through_hyper_on_magpie() {
    runtime().block_on(async {
        let (listener, addr) = listen();
        let server = magpie_runtime::spawn(async move {
            let io = accept(&listener).await;
            server::conn::http1::Builder::new()
                .timer(MagpieTimer::new())
                .serve_connection(io, TowerToHyperService::new(app()))
                .await
        });
        let (mut sender, client_conn) = http1_client(addr).await;
        let cases = [
            (
                Method::GET,
                "/",
                "",
                StatusCode::OK,
                Some("hello from axum"),
            ),
            (Method::GET, "/add/2/40", "", StatusCode::OK, Some("42")),
            (
                Method::POST,
                "/shout",
                "quiet please",
                StatusCode::OK,
                Some("QUIET PLEASE"),
            ),
            (
                Method::GET,
                "/add/two/40",
                "",
                StatusCode::BAD_REQUEST,
                None,
            ),
            (Method::GET, "/missing", "", StatusCode::NOT_FOUND, None),
        ];
        for (method, path, body, status, want) in cases {
            bounded("ready", sender.ready())
                .await
                .expect("sender ready");
            let resp = bounded("response", sender.send_request(request(method, path, body)))
                .await
                .expect("response");
            assert_eq!(resp.status(), status, "{path}");
            let got = body_bytes(resp).await;
            if let Some(want) = want {
                assert_eq!(got, want, "{path}");
            }
        }
        drop(sender);
        both_end_cleanly(client_conn, server).await;
    });
}
