//! HTTPS on magpie: `tokio-rustls` over `magpie_runtime::net::TcpStream`
//! (its tokio `AsyncRead`/`AsyncWrite`, feature `tokio-io`), hyper on both
//! ends through hyper-util's `TokioIo`, a self-signed certificate made at
//! test time (rcgen) and rustls's `ring` provider. Loopback only; every
//! await bounded.

mod common;

use std::convert::Infallible;
use std::sync::Arc;

use common::{body_bytes, bounded, get, pattern};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use magpie_hyper::MagpieTimer;
use magpie_runtime::net::{TcpListener, TcpStream};
use magpie_runtime::{spawn, Builder, Runtime};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// Requests over the one TLS connection (keep-alive).
const REQUESTS: usize = 10;
/// The large body: many TLS records (16 KiB each at most).
const BIG: usize = 200 * 1024;

/// A server config with a fresh self-signed certificate for `localhost`, and
/// a client config that trusts exactly that certificate.
fn tls_configs() -> (Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])
        .expect("self-signed certificate");
    let cert: CertificateDer<'static> = certified.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certified.key_pair.serialize_der()));
    let server = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)
        .expect("server certificate");
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).expect("root");
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    (Arc::new(server), Arc::new(client))
}

/// Serves HTTPS on one accepted connection: `/big` answers [`BIG`] pattern
/// bytes, any other path a line naming it.
async fn serve_one(listener: TcpListener, acceptor: TlsAcceptor) -> hyper::Result<()> {
    let (tcp, _) = bounded("accept", listener.accept()).await.expect("accept");
    let tls = bounded("TLS accept", acceptor.accept(tcp))
        .await
        .expect("TLS handshake (server)");
    let svc = service_fn(|req: Request<Incoming>| async move {
        let path = req.uri().path().to_owned();
        let body = if path == "/big" {
            Bytes::from(pattern(BIG))
        } else {
            Bytes::from(format!("hello over TLS: {path}"))
        };
        Ok::<_, Infallible>(Response::new(Full::new(body)))
    });
    hyper::server::conn::http1::Builder::new()
        .timer(MagpieTimer::new())
        .serve_connection(TokioIo::new(tls), svc)
        .await
}

fn https_round_trips(rt: &Runtime) {
    rt.block_on(async {
        let (server_cfg, client_cfg) = tls_configs();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = spawn(serve_one(listener, TlsAcceptor::from(server_cfg)));

        let tcp = bounded("connect", TcpStream::connect(addr))
            .await
            .expect("connect");
        let name = ServerName::try_from("localhost").expect("server name");
        let tls = bounded(
            "TLS connect",
            TlsConnector::from(client_cfg).connect(name, tcp),
        )
        .await
        .expect("TLS handshake (client)");
        assert!(
            tls.get_ref().1.protocol_version().is_some(),
            "no TLS version negotiated"
        );
        let (mut sender, conn) = bounded(
            "handshake",
            hyper::client::conn::http1::handshake(TokioIo::new(tls)),
        )
        .await
        .expect("HTTP handshake");
        let conn = spawn(conn);
        for i in 0..REQUESTS {
            let path = if i == REQUESTS / 2 {
                "/big".to_string()
            } else {
                format!("/n/{i}")
            };
            bounded("ready", sender.ready()).await.expect("ready");
            let resp = bounded("response", sender.send_request(get(&path)))
                .await
                .expect("response");
            assert_eq!(resp.status(), 200);
            let body = body_bytes(resp).await;
            if path == "/big" {
                assert_eq!(body.len(), BIG);
                assert!(body[..] == pattern(BIG)[..], "large body corrupted");
            } else {
                assert_eq!(&body[..], format!("hello over TLS: {path}").as_bytes());
            }
        }
        drop(sender);
        bounded("client connection", conn)
            .await
            .expect("client task")
            .expect("client connection ends cleanly");
        bounded("server", server)
            .await
            .expect("server task")
            .expect("server connection ends cleanly");
    });
}

#[test]
fn https_through_tokio_rustls_on_the_multi_thread_runtime() {
    https_round_trips(&common::runtime());
}

#[test]
fn https_through_tokio_rustls_on_the_current_thread_runtime() {
    https_round_trips(&Builder::new_current_thread().build().expect("runtime"));
}
