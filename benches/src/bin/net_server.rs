//! The server side of the network benchmarks (`benches/net/README.md`): one
//! process serving one workload on loopback for one peer, until told to stop.
//!
//! ```text
//! net_server --peer {tokio,magpie_asyncio,magpie_native} --workload {echo,hyper} [--workers 2] [--port 0]
//! ```
//!
//! It prints `port N` once it listens, serves until its standard input
//! closes (or reads a `stop` line), then prints its own CPU time
//! (`cpu_sched_s=..` from `/proc/self/task/*/schedstat`, nanosecond
//! resolution; `cpu_stat_s=..` from `/proc/self/stat`, 10 ms ticks; the same
//! numbers `getrusage` gives, read without `unsafe`) and exits.
//!
//! | peer | runtime | sockets | hyper I/O |
//! | --- | --- | --- | --- |
//! | `tokio` | tokio multi-thread, `--workers` workers | `tokio::net` | hyper-util's `TokioIo`, `TokioTimer` |
//! | `magpie_asyncio` | magpie `Runtime`, `--workers` workers | `async_io::Async<std::net::*>` (async-io's reactor thread) | `magpie_hyper::{FuturesIo, MagpieTimer}` |
//! | `magpie_native` | the same | `magpie_runtime::net` (feature `native-net`) | the same |
//!
//! Every peer runs the same workload code: `echo` writes back whatever it
//! reads; `hyper` is hyper 1.x's HTTP/1.1 server with keep-alive answering
//! every request with `Hello, World!`.
#![forbid(unsafe_code)]

use std::convert::Infallible;
use std::io::{self, BufRead, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::ExitCode;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use magpie_benches::proc_stats;

/// The body of every `hyper` response.
const HELLO: &[u8] = b"Hello, World!";
/// The echo server's read buffer.
const ECHO_BUF: usize = 4096;
/// Pause after a failed `accept` (say, out of file descriptors), so the
/// accept loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Peer {
    Tokio,
    MagpieAsyncio,
    MagpieNative,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Workload {
    Echo,
    Hyper,
}

#[derive(Debug)]
struct Args {
    peer: Peer,
    workload: Workload,
    workers: usize,
    port: u16,
}

fn usage() -> String {
    "usage: net_server --peer {tokio,magpie_asyncio,magpie_native} --workload {echo,hyper} \
     [--workers N] [--port P]"
        .to_string()
}

fn parse_args() -> Result<Args, String> {
    let mut peer = None;
    let mut workload = None;
    let mut workers = 2;
    let mut port = 0;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("{flag} needs a value\n{}", usage()))
        };
        match flag.as_str() {
            "--peer" => {
                peer = Some(match value()?.as_str() {
                    "tokio" => Peer::Tokio,
                    "magpie_asyncio" => Peer::MagpieAsyncio,
                    "magpie_native" => Peer::MagpieNative,
                    other => return Err(format!("unknown peer {other:?}\n{}", usage())),
                })
            }
            "--workload" => {
                workload = Some(match value()?.as_str() {
                    "echo" => Workload::Echo,
                    "hyper" => Workload::Hyper,
                    other => return Err(format!("unknown workload {other:?}\n{}", usage())),
                })
            }
            "--workers" => workers = value()?.parse().map_err(|e| format!("--workers: {e}"))?,
            "--port" => port = value()?.parse().map_err(|e| format!("--port: {e}"))?,
            other => return Err(format!("unknown argument {other:?}\n{}", usage())),
        }
    }
    Ok(Args {
        peer: peer.ok_or_else(usage)?,
        workload: workload.ok_or_else(usage)?,
        workers,
        port,
    })
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("net_server: {e}");
            return ExitCode::from(2);
        }
    };
    // Each peer serves until stopped and then exits the process from
    // `stop_and_exit`; only a failure to start comes back here.
    let served = match args.peer {
        Peer::Tokio => tokio_peer::serve(&args),
        Peer::MagpieAsyncio => magpie_asyncio::serve(&args),
        Peer::MagpieNative => magpie_native(&args),
    };
    let Err(e) = served;
    eprintln!("net_server: {e}");
    ExitCode::FAILURE
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Tells the driver where to connect.
fn announce(port: u16) {
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "port {port}");
    let _ = out.flush();
}

/// Blocks until standard input closes or says `stop`, prints the CPU time
/// and exits the process. Called while the runtime is still alive: dropping
/// it first would join its worker threads, and `schedstat` counts only
/// living threads. Exiting without tearing the runtime down also keeps
/// the teardown of open connections out of the measurement.
fn stop_and_exit() -> ! {
    stop_and_exit_with(|| {})
}

/// [`stop_and_exit`], running `extra` after the CPU report (a peer's own
/// counters; `NET_SERVER_METRICS=1` turns magpie's on).
fn stop_and_exit_with(extra: impl FnOnce()) -> ! {
    for line in io::stdin().lock().lines() {
        match line {
            Ok(l) if l.trim() == "stop" => break,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    report_cpu();
    extra();
    #[cfg(feature = "io-probe")]
    if std::env::var_os("NET_SERVER_PROBE").is_some() {
        eprint!("{}", thread_sched_report());
    }
    std::process::exit(0)
}

fn report_cpu() {
    let sched = proc_stats::cpu_time_schedstat().map(|d| d.as_secs_f64());
    let stat = proc_stats::cpu_time_stat().map(|d| d.as_secs_f64());
    let mut out = io::stdout().lock();
    match (sched, stat) {
        (Ok(sched), Ok(stat)) => {
            let _ = writeln!(out, "cpu_sched_s={sched:.6} cpu_stat_s={stat:.2}");
        }
        (sched, stat) => {
            let _ = writeln!(out, "cpu_error sched={sched:?} stat={stat:?}");
        }
    }
    let _ = out.flush();
}

async fn hello(_req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(HELLO))))
}

/// The magpie peers' connection code, for any futures-io stream: the
/// async-io stand-in today, `magpie_runtime::net::TcpStream` with
/// `native-net`.
mod futures_side {
    use super::*;
    use futures_lite::{AsyncReadExt, AsyncWriteExt};
    use magpie_hyper::{FuturesIo, MagpieTimer};

    /// One `accept`'s outcome: a stream is served on a task of its own; an
    /// error is reported and the accept loop backs off.
    pub async fn accepted<S>(accepted: io::Result<S>, workload: Workload)
    where
        S: futures_io::AsyncRead + futures_io::AsyncWrite + Unpin + Send + 'static,
    {
        match accepted {
            Ok(stream) => drop(magpie_runtime::spawn(serve(stream, workload))),
            Err(e) => {
                eprintln!("net_server: accept: {e}");
                magpie_runtime::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }

    async fn serve<S>(stream: S, workload: Workload)
    where
        S: futures_io::AsyncRead + futures_io::AsyncWrite + Unpin + Send + 'static,
    {
        // A connection ends with an error when the load client exits
        // mid-request; that is the end of the run, not a failure.
        let _ = match workload {
            Workload::Echo => echo(stream).await,
            Workload::Hyper => hyper::server::conn::http1::Builder::new()
                .timer(MagpieTimer::new())
                .serve_connection(
                    FuturesIo::new(stream).with_vectored_writes(true),
                    service_fn(hello),
                )
                .await
                .map_err(io::Error::other),
        };
    }

    async fn echo<S>(mut stream: S) -> io::Result<()>
    where
        S: futures_io::AsyncRead + futures_io::AsyncWrite + Unpin,
    {
        let mut buf = vec![0u8; ECHO_BUF];
        loop {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                return Ok(());
            }
            stream.write_all(&buf[..n]).await?;
        }
    }

    pub fn runtime(workers: usize) -> io::Result<magpie_runtime::Runtime> {
        magpie_runtime::Runtime::builder()
            .worker_threads(workers)
            .build()
    }
}

mod magpie_asyncio {
    use super::*;
    use async_io::Async;

    pub fn serve(args: &Args) -> io::Result<Infallible> {
        let rt = futures_side::runtime(args.workers)?;
        let listener = Async::<TcpListener>::bind(loopback(args.port))?;
        announce(listener.get_ref().local_addr()?.port());
        let workload = args.workload;
        rt.spawn(async move {
            loop {
                let accepted = listener.accept().await.map(|(stream, _)| {
                    let _ = stream.get_ref().set_nodelay(true);
                    stream
                });
                futures_side::accepted(accepted, workload).await;
            }
        });
        stop_and_exit()
    }
}

/// The `magpie_native` peer: magpie's own I/O driver. This is the only code
/// that names `magpie_runtime::net`; the connection code is shared with
/// `magpie_asyncio`.
#[cfg(feature = "native-net")]
fn magpie_native(args: &Args) -> io::Result<Infallible> {
    use magpie_runtime::net::TcpListener as NativeListener;

    let rt = futures_side::runtime(args.workers)?;
    let port = if args.port == 0 {
        free_port()?
    } else {
        args.port
    };
    let listener = rt.block_on(NativeListener::bind(loopback(port)))?;
    announce(port);
    let workload = args.workload;
    rt.spawn(async move {
        loop {
            let accepted = listener.accept().await.map(|(stream, _)| {
                #[allow(clippy::let_unit_value)]
                let _ = stream.set_nodelay(true);
                stream
            });
            futures_side::accepted(accepted, workload).await;
        }
    });
    let handle = rt.handle().clone();
    stop_and_exit_with(move || {
        if std::env::var_os("NET_SERVER_METRICS").is_some() {
            let m = handle.metrics();
            let per: Vec<_> = m
                .per_worker
                .iter()
                .map(|w| (w.polls, w.steals, w.parks))
                .collect();
            println!(
                "magpie_metrics polls={} steals={} parks={} io_events={} per_worker(polls,steals,parks)={per:?}",
                m.polls, m.steals, m.parks, m.io_events
            );
        }
        // Feature `io-probe`: the I/O path's latency histograms
        // (runtime/src/io/probe.rs), on stderr so net_run passes them through.
        #[cfg(feature = "io-probe")]
        if std::env::var_os("NET_SERVER_PROBE").is_some() {
            eprint!("{}", magpie_runtime::io::probe::report());
        }
    })
}

/// Feature `io-probe`: per thread of this process, its time on CPU, its
/// time runnable but waiting for a CPU (`schedstat`), and its voluntary and
/// involuntary context switches (`status`): how often the kernel preempted
/// the workers, and how long they waited to run again.
#[cfg(feature = "io-probe")]
fn thread_sched_report() -> String {
    let mut out = String::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for entry in dir.flatten() {
        let path = entry.path();
        let read = |f: &str| std::fs::read_to_string(path.join(f)).unwrap_or_default();
        let comm = read("comm");
        let sched: Vec<u64> = read("schedstat")
            .split_whitespace()
            .filter_map(|f| f.parse().ok())
            .collect();
        let status = read("status");
        let field = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .map_or(0, |v| v.trim().parse::<u64>().unwrap_or(0))
        };
        if sched.len() < 3 || sched[0] < 10_000_000 {
            continue; // threads that barely ran
        }
        out += &format!(
            "thread {:<20} run_ms={:<8.1} wait_ms={:<8.1} slices={:<8} vol_cs={:<8} invol_cs={}\n",
            comm.trim(),
            sched[0] as f64 / 1e6,
            sched[1] as f64 / 1e6,
            sched[2],
            field("voluntary_ctxt_switches:"),
            field("nonvoluntary_ctxt_switches:"),
        );
    }
    out
}

/// An ephemeral loopback port, found by binding a std listener and letting
/// it go (the native listener's API has no `local_addr` to ask).
#[cfg(feature = "native-net")]
fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind(loopback(0))?.local_addr()?.port())
}

#[cfg(not(feature = "native-net"))]
fn magpie_native(_args: &Args) -> io::Result<Infallible> {
    Err(io::Error::other(
        "the magpie_native peer needs magpie_runtime::net: build with --features native-net",
    ))
}

mod tokio_peer {
    use super::*;
    use hyper_util::rt::{TokioIo, TokioTimer};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    pub fn serve(args: &Args) -> io::Result<Infallible> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(args.workers)
            .enable_all()
            .build()?;
        let listener = rt.block_on(TcpListener::bind(loopback(args.port)))?;
        announce(listener.local_addr()?.port());
        let workload = args.workload;
        rt.spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        let _ = stream.set_nodelay(true);
                        tokio::spawn(connection(stream, workload));
                    }
                    Err(e) => {
                        eprintln!("net_server: accept: {e}");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                    }
                }
            }
        });
        stop_and_exit()
    }

    async fn connection(stream: TcpStream, workload: Workload) {
        let _ = match workload {
            Workload::Echo => echo(stream).await,
            Workload::Hyper => hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .serve_connection(TokioIo::new(stream), service_fn(hello))
                .await
                .map_err(io::Error::other),
        };
    }

    async fn echo(mut stream: TcpStream) -> io::Result<()> {
        let mut buf = vec![0u8; ECHO_BUF];
        loop {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                return Ok(());
            }
            stream.write_all(&buf[..n]).await?;
        }
    }
}
