//! A first look (not the benchmark: that is benches/, written separately)
//! at TCP echo round trips per second, magpie's `net` against tokio's own
//! networking, in one process:
//!
//! - two echo servers, each on its own runtime with 2 workers, both alive
//!   for the whole run;
//! - a client of `CONNECTIONS` blocking std threads, each sending a 64-byte
//!   message and reading the echo back, as fast as it can;
//! - rounds of `ROUND` alternate between the servers, `ROUNDS` each; the
//!   median and the spread (min-max) of the per-round rates are printed,
//!   with the load average before and after.
//!
//!   cargo run --release -p magpie-runtime --example echo_first_look
#![forbid(unsafe_code)]

#[cfg(loom)]
fn main() {}

#[cfg(not(loom))]
fn main() {
    imp::main();
}

#[cfg(not(loom))]
mod imp {

    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpStream};
    use std::sync::{Arc, Barrier};
    use std::thread;
    use std::time::{Duration, Instant};

    use futures_util::io::{AsyncReadExt, AsyncWriteExt};
    use magpie_core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    const MESSAGE: usize = 64;
    const CONNECTIONS: usize = 8;
    const ROUND: Duration = Duration::from_millis(1000);
    const ROUNDS: usize = 7;

    fn magpie_server() -> (magpie_runtime::Runtime, SocketAddr) {
        let rt = magpie_runtime::Runtime::builder()
            .worker_threads(2)
            .build()
            .unwrap();
        let listener = rt
            .block_on(magpie_runtime::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        rt.spawn(async move {
            loop {
                let Ok((mut s, _)) = listener.accept().await else {
                    return;
                };
                s.set_nodelay(true).unwrap();
                magpie_runtime::spawn(async move {
                    let mut buf = [0u8; 4096];
                    loop {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                if s.write_all(&buf[..n]).await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        });
        (rt, addr)
    }

    fn tokio_server() -> (tokio::runtime::Runtime, SocketAddr) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_io()
            .build()
            .unwrap();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        rt.spawn(async move {
            loop {
                let Ok((mut s, _)) = listener.accept().await else {
                    return;
                };
                s.set_nodelay(true).unwrap();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    loop {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                if s.write_all(&buf[..n]).await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        });
        (rt, addr)
    }

    /// Round trips per second over `CONNECTIONS` connections for `ROUND`.
    fn round(conns: &mut [TcpStream]) -> f64 {
        let stop = Arc::new(AtomicBool::new(false));
        let total = Arc::new(AtomicU64::new(0));
        let start = Arc::new(Barrier::new(conns.len() + 1));
        let began = thread::scope(|scope| {
            for c in conns.iter_mut() {
                let (stop, total, start) = (stop.clone(), total.clone(), start.clone());
                scope.spawn(move || {
                    let msg = [7u8; MESSAGE];
                    let mut back = [0u8; MESSAGE];
                    let mut n = 0u64;
                    start.wait();
                    while !stop.load(Ordering::Relaxed) {
                        c.write_all(&msg).unwrap();
                        c.read_exact(&mut back).unwrap();
                        assert_eq!(back, msg);
                        n += 1;
                    }
                    total.fetch_add(n, Ordering::Relaxed);
                });
            }
            start.wait();
            let began = Instant::now();
            thread::sleep(ROUND);
            stop.store(true, Ordering::Relaxed);
            began
        });
        total.load(Ordering::Relaxed) as f64 / began.elapsed().as_secs_f64()
    }

    fn connect(addr: SocketAddr) -> Vec<TcpStream> {
        (0..CONNECTIONS)
            .map(|_| {
                let s = TcpStream::connect(addr).unwrap();
                s.set_nodelay(true).unwrap();
                s
            })
            .collect()
    }

    fn summary(mut v: Vec<f64>) -> (f64, f64, f64) {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[0], v[v.len() - 1])
    }

    fn loadavg() -> String {
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    pub(crate) fn main() {
        let cores = thread::available_parallelism().map_or(0, |n| n.get());
        println!("cores {cores}; load before: {}", loadavg());
        let (_m_rt, m_addr) = magpie_server();
        let (_t_rt, t_addr) = tokio_server();
        let mut m_conns = connect(m_addr);
        let mut t_conns = connect(t_addr);
        // Warm-up, not counted.
        round(&mut m_conns);
        round(&mut t_conns);
        let (mut m, mut t) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            m.push(round(&mut m_conns));
            t.push(round(&mut t_conns));
        }
        let (mm, mlo, mhi) = summary(m);
        let (tm, tlo, thi) = summary(t);
        println!(
            "tcp echo, {MESSAGE} B, {CONNECTIONS} connections, 2 server workers each, \
             {ROUNDS} alternating rounds of {ROUND:?}:"
        );
        println!("  magpie net : median {mm:.0} round trips/s (min {mlo:.0}, max {mhi:.0})");
        println!("  tokio net  : median {tm:.0} round trips/s (min {tlo:.0}, max {thi:.0})");
        println!("  ratio magpie/tokio (medians): {:.2}", mm / tm);
        println!("load after: {}", loadavg());
    }
}
