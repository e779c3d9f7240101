//! The load generator of the network benchmarks (`benches/net/README.md`):
//! the same client for every peer. Plain std threads and blocking sockets,
//! one thread per connection, so the client's cost does not depend on which
//! runtime the server uses.
//!
//! ```text
//! net_load --addr 127.0.0.1:PORT --workload {echo,hyper} --conns C [--secs D] [--warmup W]
//! ```
//!
//! - `echo`: each connection writes a 64-byte message and reads it back
//!   whole, one at a time, and checks every byte (a sequence number and a
//!   per-connection pattern).
//! - `hyper`: each connection sends `GET /` on HTTP/1.1 keep-alive, reads the
//!   response head, takes the body's length from `Content-Length`, reads the
//!   body and checks it is `Hello, World!`. No pipelining: the next request
//!   goes out only after the whole response arrived (a byte past it is an
//!   error).
//!
//! All connections connect, then start together. The first `W` seconds are
//! warm-up; round trips that complete in the `D` seconds after it are
//! counted and their latencies (write to last byte read, client side) kept.
//! It prints one line:
//!
//! ```text
//! ops=N ops_total=N secs=D ops_per_s=X p50_us=X p99_us=X conns=C
//! ```
//!
//! `ops_total` includes the warm-up (the server's CPU time covers it too).
//! Any failed connection (refused, reset, short or wrong reply, a reply
//! slower than `IO_TIMEOUT`) makes it exit with status 1.
#![forbid(unsafe_code)]

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::ExitCode;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

/// Size of one echo message, as the issue asks.
const MSG: usize = 64;
/// The body the `hyper` server answers with.
const HELLO: &[u8] = b"Hello, World!";
const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
/// A socket read or write that blocks this long fails the run: no loop can
/// hang on a stuck server.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest response head accepted.
const MAX_HEAD: usize = 16 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Workload {
    Echo,
    Hyper,
}

#[derive(Debug)]
struct Args {
    addr: SocketAddr,
    workload: Workload,
    conns: usize,
    secs: f64,
    warmup: f64,
}

fn usage() -> &'static str {
    "usage: net_load --addr HOST:PORT --workload {echo,hyper} --conns C [--secs D] [--warmup W]"
}

fn parse_args() -> Result<Args, String> {
    let (mut addr, mut workload, mut conns) = (None, None, 1);
    let (mut secs, mut warmup): (f64, f64) = (5.0, 1.0);
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{}", usage()))?;
        let bad = |e: &dyn std::fmt::Display| format!("{flag} {value:?}: {e}");
        match flag.as_str() {
            "--addr" => addr = Some(value.parse().map_err(|e| bad(&e))?),
            "--workload" => {
                workload = Some(match value.as_str() {
                    "echo" => Workload::Echo,
                    "hyper" => Workload::Hyper,
                    _ => return Err(format!("unknown workload {value:?}\n{}", usage())),
                })
            }
            "--conns" => conns = value.parse().map_err(|e| bad(&e))?,
            "--secs" => secs = value.parse().map_err(|e| bad(&e))?,
            "--warmup" => warmup = value.parse().map_err(|e| bad(&e))?,
            _ => return Err(format!("unknown argument {flag:?}\n{}", usage())),
        }
    }
    if conns == 0 || secs.is_nan() || secs <= 0.0 || warmup.is_nan() || warmup < 0.0 {
        return Err(format!(
            "need --conns >= 1, --secs > 0, --warmup >= 0\n{}",
            usage()
        ));
    }
    Ok(Args {
        addr: addr.ok_or(usage())?,
        workload: workload.ok_or(usage())?,
        conns,
        secs,
        warmup,
    })
}

/// What one connection did.
#[derive(Debug, Default)]
struct ConnResult {
    /// Round trips completed in the measured window.
    ops: u64,
    /// Round trips completed at all (warm-up included).
    ops_total: u64,
    /// Latency of each measured round trip, in nanoseconds.
    latencies_ns: Vec<u64>,
    /// `NET_LOAD_SCHED`: this thread's `[on CPU ns, waiting for a CPU ns,
    /// involuntary context switches]` at its end.
    sched: Option<[u64; 3]>,
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("net_load: {e}");
            return ExitCode::from(2);
        }
    };
    let start = Arc::new(Barrier::new(args.conns));
    let warmup = Duration::from_secs_f64(args.warmup);
    let window = Duration::from_secs_f64(args.secs);
    let threads: Vec<_> = (0..args.conns)
        .map(|id| {
            let start = Arc::clone(&start);
            let (addr, workload) = (args.addr, args.workload);
            thread::Builder::new()
                .name(format!("net_load-{id}"))
                .stack_size(256 * 1024)
                .spawn(move || run_conn(id, addr, workload, &start, warmup, window))
                .expect("spawn client thread")
        })
        .collect();
    let mut total = ConnResult::default();
    let mut failed = 0;
    let mut sched = [0u64; 3];
    // Per connection: measured round trips, and the slowest one.
    let mut per_conn = Vec::new();
    for (id, t) in threads.into_iter().enumerate() {
        match t.join() {
            Ok(Ok(r)) => {
                if let Some(s) = r.sched {
                    for (t, v) in sched.iter_mut().zip(s) {
                        *t += v;
                    }
                }
                per_conn.push((r.ops, r.latencies_ns.iter().copied().max().unwrap_or(0)));
                total.ops += r.ops;
                total.ops_total += r.ops_total;
                total.latencies_ns.extend(r.latencies_ns);
            }
            Ok(Err(e)) => {
                eprintln!("net_load: connection {id}: {e}");
                failed += 1;
            }
            Err(_) => {
                eprintln!("net_load: connection {id}: thread panicked");
                failed += 1;
            }
        }
    }
    if failed > 0 {
        eprintln!("net_load: {failed} of {} connections failed", args.conns);
        return ExitCode::FAILURE;
    }
    total.latencies_ns.sort_unstable();
    let us = |q: f64| percentile(&total.latencies_ns, q).map_or(f64::NAN, |ns| ns as f64 / 1e3);
    if std::env::var_os("NET_LOAD_SCHED").is_some() {
        let ops: Vec<u64> = per_conn.iter().map(|c| c.0).collect();
        let max_ms: Vec<f64> = per_conn.iter().map(|c| c.1 as f64 / 1e6).collect();
        eprintln!(
            "net_load sched: clients run_ms={:.1} wait_ms={:.1} invol_cs={} p90={:.1}us p999={:.1}us ops_per_conn(min,max)=({},{}) max_latency_ms(min,max)=({:.2},{:.2})",
            sched[0] as f64 / 1e6,
            sched[1] as f64 / 1e6,
            sched[2],
            us(0.90),
            us(0.999),
            ops.iter().min().unwrap_or(&0),
            ops.iter().max().unwrap_or(&0),
            max_ms.iter().copied().fold(f64::INFINITY, f64::min),
            max_ms.iter().copied().fold(0.0, f64::max),
        );
    }
    println!(
        "ops={} ops_total={} secs={} ops_per_s={:.1} p50_us={:.1} p99_us={:.1} conns={}",
        total.ops,
        total.ops_total,
        args.secs,
        total.ops as f64 / args.secs,
        us(0.50),
        us(0.99),
        args.conns
    );
    ExitCode::SUCCESS
}

/// This thread's time on CPU and waiting for one (`schedstat`, ns) and its
/// involuntary context switches (`status`).
fn thread_sched() -> Option<[u64; 3]> {
    let sched = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let mut f = sched.split_whitespace().map(|v| v.parse::<u64>().ok());
    let (run, wait) = (f.next()??, f.next()??);
    let status = std::fs::read_to_string("/proc/thread-self/status").ok()?;
    let invol = status
        .lines()
        .find_map(|l| l.strip_prefix("nonvoluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())?;
    Some([run, wait, invol])
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

fn run_conn(
    id: usize,
    addr: SocketAddr,
    workload: Workload,
    start: &Barrier,
    warmup: Duration,
    window: Duration,
) -> io::Result<ConnResult> {
    let connected = TcpStream::connect(addr).and_then(|s| {
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(IO_TIMEOUT))?;
        s.set_write_timeout(Some(IO_TIMEOUT))?;
        Ok(s)
    });
    // Every thread reaches the barrier, connected or not, so none waits
    // forever for a thread that failed.
    start.wait();
    let stream = connected?;
    let go = Instant::now();
    let (measure_from, measure_to) = (go + warmup, go + warmup + window);
    let mut conn: Box<dyn RoundTrip> = match workload {
        Workload::Echo => Box::new(Echo::new(stream, id)),
        Workload::Hyper => Box::new(Http::new(stream)),
    };
    let mut r = ConnResult::default();
    loop {
        let t0 = Instant::now();
        if t0 >= measure_to {
            if std::env::var_os("NET_LOAD_SCHED").is_some() {
                r.sched = thread_sched();
            }
            return Ok(r);
        }
        conn.round_trip()?;
        let t1 = Instant::now();
        r.ops_total += 1;
        if t1 >= measure_from && t1 < measure_to {
            r.ops += 1;
            r.latencies_ns.push((t1 - t0).as_nanos() as u64);
        }
    }
}

trait RoundTrip {
    /// One request and its whole, checked reply.
    fn round_trip(&mut self) -> io::Result<()>;
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

struct Echo {
    stream: TcpStream,
    out: [u8; MSG],
    back: [u8; MSG],
    seq: u64,
}

impl Echo {
    fn new(stream: TcpStream, id: usize) -> Echo {
        let mut out = [0u8; MSG];
        for (i, b) in out.iter_mut().enumerate() {
            *b = (i + id) as u8;
        }
        Echo {
            stream,
            out,
            back: [0u8; MSG],
            seq: 0,
        }
    }
}

impl RoundTrip for Echo {
    fn round_trip(&mut self) -> io::Result<()> {
        self.seq += 1;
        self.out[..8].copy_from_slice(&self.seq.to_le_bytes());
        self.stream.write_all(&self.out)?;
        self.stream.read_exact(&mut self.back)?;
        if self.back != self.out {
            return Err(invalid(format!("echo {} came back altered", self.seq)));
        }
        Ok(())
    }
}

struct Http {
    stream: TcpStream,
    buf: Vec<u8>,
    filled: usize,
}

impl Http {
    fn new(stream: TcpStream) -> Http {
        Http {
            stream,
            buf: vec![0u8; 4096],
            filled: 0,
        }
    }

    /// Reads more bytes into the buffer; EOF is an error mid-response.
    fn fill(&mut self) -> io::Result<()> {
        if self.filled == self.buf.len() {
            if self.buf.len() >= MAX_HEAD + HELLO.len() {
                return Err(invalid("response too large".into()));
            }
            self.buf.resize(self.buf.len() * 2, 0);
        }
        let n = self.stream.read(&mut self.buf[self.filled..])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "server closed the connection mid-response",
            ));
        }
        self.filled += n;
        Ok(())
    }
}

/// Status code and `Content-Length` of a response head (without its final
/// blank line).
fn parse_head(head: &[u8]) -> io::Result<(u16, usize)> {
    let head = std::str::from_utf8(head).map_err(|_| invalid("head is not UTF-8".into()))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status = status_line
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| invalid(format!("bad status line {status_line:?}")))?;
    let length = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .ok_or_else(|| invalid("no Content-Length".into()))?;
    Ok((status, length))
}

impl RoundTrip for Http {
    fn round_trip(&mut self) -> io::Result<()> {
        self.stream.write_all(REQUEST)?;
        let head_end = loop {
            if let Some(i) = self.buf[..self.filled]
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
            {
                break i;
            }
            if self.filled > MAX_HEAD {
                return Err(invalid("response head too large".into()));
            }
            self.fill()?;
        };
        let (status, length) = parse_head(&self.buf[..head_end])?;
        if status != 200 {
            return Err(invalid(format!("status {status}")));
        }
        let end = head_end + 4 + length;
        while self.filled < end {
            self.fill()?;
        }
        if &self.buf[head_end + 4..end] != HELLO {
            return Err(invalid("wrong body".into()));
        }
        if self.filled > end {
            return Err(invalid(
                "bytes past the response (nothing was pipelined)".into(),
            ));
        }
        self.filled = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_head_reads_status_and_length_in_any_header_case() {
        let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nCONTENT-LENGTH: 13\r\ndate: x";
        assert_eq!(parse_head(head).unwrap(), (200, 13));
        assert!(parse_head(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked").is_err());
        assert!(parse_head(b"HTTP/1.0 200 OK\r\ncontent-length: 1").is_err());
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.5), Some(50));
        assert_eq!(percentile(&v, 0.99), Some(99));
        assert_eq!(percentile(&v[..1], 0.99), Some(1));
        assert_eq!(percentile(&[], 0.5), None);
    }
}
