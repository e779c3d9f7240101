//! UDP on the runtime's I/O driver, over loopback.
#![cfg(not(loom))]

mod net_util;

use magpie_runtime::net::UdpSocket;
use magpie_runtime::spawn;
use net_util::{rt, watchdog};

const ROUNDS: u32 = 200;

/// Two sockets bounce a counter: first with `send_to`/`recv_from`, then
/// connected with `send`/`recv`. Each side checks the sender and the count.
/// Loopback UDP does not drop datagrams under this load; a lost one would
/// show as a hang, which the watchdog reports.
#[test]
fn ping_pong() {
    let last = watchdog("udp ping-pong", || {
        let rt = rt(2);
        rt.block_on(async {
            let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let (a_addr, b_addr) = (a.local_addr().unwrap(), b.local_addr().unwrap());
            let ponger = spawn(async move {
                let mut buf = [0u8; 4];
                for i in 0..ROUNDS {
                    let (n, from) = b.recv_from(&mut buf).await.unwrap();
                    assert_eq!((n, from), (4, a_addr));
                    assert_eq!(u32::from_le_bytes(buf), 2 * i);
                    b.send_to(&(2 * i + 1).to_le_bytes(), from).await.unwrap();
                }
                b.connect(a_addr).await.unwrap();
                assert_eq!(b.peer_addr().unwrap(), a_addr);
                for i in 0..ROUNDS {
                    assert_eq!(b.recv(&mut buf).await.unwrap(), 4);
                    assert_eq!(u32::from_le_bytes(buf), 2 * i);
                    b.send(&(2 * i + 1).to_le_bytes()).await.unwrap();
                }
            });
            let mut buf = [0u8; 4];
            let mut last = 0;
            for i in 0..ROUNDS {
                a.send_to(&(2 * i).to_le_bytes(), b_addr).await.unwrap();
                let (n, from) = a.recv_from(&mut buf).await.unwrap();
                assert_eq!((n, from), (4, b_addr));
                last = u32::from_le_bytes(buf);
                assert_eq!(last, 2 * i + 1);
            }
            a.connect(b_addr).await.unwrap();
            for i in 0..ROUNDS {
                a.send(&(2 * i).to_le_bytes()).await.unwrap();
                assert_eq!(a.recv(&mut buf).await.unwrap(), 4);
                last = u32::from_le_bytes(buf);
                assert_eq!(last, 2 * i + 1);
            }
            ponger.await.unwrap();
            last
        })
    });
    assert_eq!(last, 2 * ROUNDS - 1);
}
