//! Unix-domain stream sockets on the runtime's I/O driver.
#![cfg(all(unix, not(loom)))]

mod net_util;

use futures_util::io::{AsyncReadExt, AsyncWriteExt};
use magpie_runtime::net::{UnixListener, UnixStream};
use magpie_runtime::spawn;
use net_util::{echo_bytes, echo_client_side, echo_server_side, message, rt, watchdog};

const CONNECTIONS: usize = 20;
const MESSAGES: usize = 50;

/// A socket path of its own in the temp folder, removed first.
fn socket_path(name: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!(
        "magpie-net-{name}-{}-{}.sock",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    let _ = std::fs::remove_file(&path);
    path
}

/// An echo server on a Unix socket; each client checks every echoed byte.
#[test]
fn echo() {
    let path = socket_path("echo");
    let server_path = path.clone();
    let (checked, expected) = watchdog("unix echo", move || {
        let rt = rt(2);
        rt.block_on(async move {
            let listener = UnixListener::bind(&server_path).unwrap();
            let server = spawn(async move {
                for _ in 0..CONNECTIONS {
                    let (s, _) = listener.accept().await.unwrap();
                    spawn(echo_server_side(s));
                }
            });
            let clients: Vec<_> = (0..CONNECTIONS)
                .map(|c| {
                    let path = server_path.clone();
                    spawn(async move {
                        let s = UnixStream::connect(&path).await.unwrap();
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
    let _ = std::fs::remove_file(&path);
    assert_eq!(checked, expected);
}

/// A connected pair: what one writes the other reads; closing the write
/// side ends the other's stream.
#[test]
fn pair_carries_bytes_and_end_of_stream() {
    watchdog("unix pair", || {
        let rt = rt(1);
        rt.block_on(async {
            let (mut a, mut b) = UnixStream::pair().unwrap();
            let writer = spawn(async move {
                for m in 0..MESSAGES {
                    a.write_all(&message(0, m)).await.unwrap();
                }
                a.close().await.unwrap();
            });
            let mut got = Vec::new();
            b.read_to_end(&mut got).await.unwrap();
            writer.await.unwrap();
            let sent: Vec<u8> = (0..MESSAGES).flat_map(|m| message(0, m)).collect();
            assert_eq!(got, sent);
        });
    });
}
