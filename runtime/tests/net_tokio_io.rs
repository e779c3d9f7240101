//! With the `tokio-io` feature, magpie's `TcpStream` is a tokio
//! `AsyncRead + AsyncWrite`: tokio's own extension traits drive it.
#![cfg(all(feature = "tokio-io", not(loom)))]

mod net_util;

use magpie_runtime::net::{TcpListener, TcpStream};
use magpie_runtime::spawn;
use net_util::{rt, watchdog};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

const LINES: usize = 100;

/// A line-echo server written against tokio's traits only (`BufReader`,
/// `read_line`, `write_all`, `shutdown`), over magpie's sockets, and a client
/// that checks every line and then reads to the end with `read_to_end`.
#[test]
fn tokio_io_ext_over_magpie_tcp() {
    let echoed = watchdog("tokio-io", || {
        let rt = rt(2);
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let server = spawn(async move {
                let (s, _) = listener.accept().await.unwrap();
                let (r, mut w) = s.into_split();
                let mut r = BufReader::new(r);
                let mut line = String::new();
                let mut n = 0;
                loop {
                    line.clear();
                    if r.read_line(&mut line).await.unwrap() == 0 {
                        break;
                    }
                    w.write_all(line.to_uppercase().as_bytes()).await.unwrap();
                    n += 1;
                }
                w.shutdown().await.unwrap();
                n
            });
            let mut s = TcpStream::connect(addr).await.unwrap();
            let mut expected = String::new();
            for i in 0..LINES {
                let line = format!("line {i} of magpie\n");
                s.write_all(line.as_bytes()).await.unwrap();
                expected.push_str(&line.to_uppercase());
            }
            AsyncWriteExt::shutdown(&mut s).await.unwrap();
            let mut back = Vec::new();
            s.read_to_end(&mut back).await.unwrap();
            assert_eq!(String::from_utf8(back).unwrap(), expected);
            server.await.unwrap()
        })
    });
    assert_eq!(echoed, LINES);
}
