//! The driver of the network benchmarks (`benches/net/README.md`; run it
//! through `benches/net/run.sh`). For each group (workload × connection
//! count) it runs every peer once per round, in a balanced order
//! (`report::round_order`): start `net_server` for the peer, run `net_load`
//! against it, stop the server and read its CPU time. Then it prints a
//! markdown table: per peer the median and min–max of throughput, p99
//! latency and server CPU per 10^5 round trips, and each magpie peer's
//! per-round ratio to tokio with its spread.
//!
//! ```text
//! net_run [--secs 5] [--warmup 1] [--rounds 5] [--workers 2] [--only G1,G2] [--peers a,b,c]
//! ```
//!
//! A peer written `PEER@TAG` is `PEER` served by the binary `net_server.TAG`
//! beside this one (a copy of `net_server` built from another commit), so
//! two builds of one runtime run in the same alternating rounds.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use magpie_benches::report::{balanced_rounds_at_least, median_of, round_order, Spread};

/// The groups the issue asks for: echo over 1, 8 and 64 connections; hyper
/// over 1 and 64; and hyper over 8.
const GROUPS: [(&str, usize); 6] = [
    ("echo", 1),
    ("echo", 8),
    ("echo", 64),
    ("hyper", 1),
    ("hyper", 8),
    ("hyper", 64),
];
/// The reference peer of every ratio.
const REFERENCE: &str = "tokio";
/// How long a server may take to exit after its stdin closes before it is
/// killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

#[derive(Debug)]
struct Args {
    secs: f64,
    warmup: f64,
    rounds: usize,
    workers: usize,
    /// Comma-separated substrings; a group runs if its name contains one.
    only: Option<String>,
    peers: Vec<String>,
}

fn default_peers() -> Vec<String> {
    let mut peers = vec!["tokio".to_string(), "magpie_asyncio".to_string()];
    if cfg!(feature = "native-net") {
        peers.push("magpie_native".to_string());
    }
    peers
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        secs: 5.0,
        warmup: 1.0,
        rounds: 5,
        workers: 2,
        only: None,
        peers: default_peers(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{flag} {value:?}: {e}");
        match flag.as_str() {
            "--secs" => a.secs = value.parse().map_err(|e| bad(&e))?,
            "--warmup" => a.warmup = value.parse().map_err(|e| bad(&e))?,
            "--rounds" => a.rounds = value.parse().map_err(|e| bad(&e))?,
            "--workers" => a.workers = value.parse().map_err(|e| bad(&e))?,
            "--only" => a.only = Some(value),
            "--peers" => a.peers = value.split(',').map(str::to_string).collect(),
            _ => return Err(format!("unknown argument {flag:?}")),
        }
    }
    if !a.peers.iter().any(|p| p == REFERENCE) {
        return Err(format!(
            "--peers must include {REFERENCE} (every ratio is to it)"
        ));
    }
    Ok(a)
}

/// One run of one peer.
#[derive(Clone, Debug)]
struct Sample {
    ops_per_s: f64,
    p50_us: f64,
    p99_us: f64,
    /// Server CPU seconds per 10^5 round trips (warm-up included on both
    /// sides of the division).
    cpu_per_1e5: f64,
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("net_run: {e}");
            return ExitCode::from(2);
        }
    };
    let bin_dir = match std::env::current_exe() {
        Ok(exe) => exe.parent().map(Path::to_path_buf).unwrap_or_default(),
        Err(e) => {
            eprintln!("net_run: {e}");
            return ExitCode::FAILURE;
        }
    };
    let cores = thread::available_parallelism().map_or(0, |n| n.get());
    let load_start = loadavg();
    let mut out = String::new();
    out += "# Network benchmarks: TCP echo and hyper HTTP/1.1 keep-alive\n\n";
    out += &format!(
        "cores {cores}; server workers {}; {} s measured after {} s warm-up per run; \
         peers {}; load average at start {load_start}\n\n",
        args.workers,
        args.secs,
        args.warmup,
        args.peers.join(", ")
    );
    let mut raw = String::from("group\tround\tpeer\tops_per_s\tp50_us\tp99_us\tcpu_per_1e5\n");
    let mut failed = false;
    for (workload, conns) in GROUPS {
        let group = format!("{workload}_c{conns}");
        if args
            .only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|part| group.contains(part)))
        {
            continue;
        }
        let n = args.peers.len();
        let rounds = balanced_rounds_at_least(n, args.rounds);
        // samples[peer][round]
        let mut samples: BTreeMap<&str, Vec<Option<Sample>>> = BTreeMap::new();
        for round in 0..rounds {
            for idx in round_order(n, round) {
                let peer = args.peers[idx].as_str();
                let started = Instant::now();
                let s = run_one(&bin_dir, &args, peer, workload, conns);
                match &s {
                    Ok(s) => {
                        eprintln!(
                            "{group} round {round} {peer}: {:.0}/s p99 {:.0} us cpu/1e5 {:.3} s ({:.1} s)",
                            s.ops_per_s,
                            s.p99_us,
                            s.cpu_per_1e5,
                            started.elapsed().as_secs_f64()
                        );
                        raw += &format!(
                            "{group}\t{round}\t{peer}\t{:.1}\t{:.1}\t{:.1}\t{:.4}\n",
                            s.ops_per_s, s.p50_us, s.p99_us, s.cpu_per_1e5
                        );
                    }
                    Err(e) => {
                        eprintln!("{group} round {round} {peer}: FAILED: {e}");
                        failed = true;
                    }
                }
                samples.entry(peer).or_default().push(s.ok());
            }
        }
        out += &group_table(workload, conns, rounds, &args.peers, &samples);
    }
    out += &format!("load average at end {}\n\n", loadavg());
    out += "<details><summary>every run</summary>\n\n```text\n";
    out += &raw;
    out += "```\n\n</details>\n";
    print!("{out}");
    let _ = io::stdout().flush();
    if failed {
        eprintln!("net_run: some runs failed (see above); their rounds are left out");
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn fmt_spread(xs: &[f64], digits: usize) -> String {
    match Spread::of(xs) {
        Some(s) => format!("{:.d$} ({:.d$}–{:.d$})", s.median, s.min, s.max, d = digits),
        None => "–".into(),
    }
}

fn group_table(
    workload: &str,
    conns: usize,
    rounds: usize,
    peers: &[String],
    samples: &BTreeMap<&str, Vec<Option<Sample>>>,
) -> String {
    let unit = if workload == "echo" {
        "round trips/s"
    } else {
        "requests/s"
    };
    let mut t = format!("## {workload}, {conns} connection(s), {rounds} rounds\n\n");
    t += &format!(
        "| peer | {unit}: median (min–max) | p50 µs | p99 µs: median (min–max) | server CPU-s per 10^5: median (min–max) | {unit} / tokio's, per round | p99 / tokio's, per round |\n"
    );
    t += "| --- | --- | --- | --- | --- | --- | --- |\n";
    let reference = &samples[REFERENCE];
    for peer in peers {
        let runs: Vec<&Sample> = samples[peer.as_str()].iter().flatten().collect();
        let col = |f: fn(&Sample) -> f64| runs.iter().map(|s| f(s)).collect::<Vec<_>>();
        let mut p50 = col(|s| s.p50_us);
        let ratio = |f: fn(&Sample) -> f64| -> String {
            if peer == REFERENCE {
                return "1".into();
            }
            let per_round: Vec<f64> = samples[peer.as_str()]
                .iter()
                .zip(reference)
                .filter_map(|(a, b)| Some(f(a.as_ref()?) / f(b.as_ref()?)))
                .collect();
            match Spread::of(&per_round) {
                Some(s) => format!(
                    "{:.2} ({:.2}–{:.2}; {} rounds)",
                    s.median, s.min, s.max, s.n
                ),
                None => "–".into(),
            }
        };
        t += &format!(
            "| {peer} | {} | {} | {} | {} | {} | {} |\n",
            fmt_spread(&col(|s| s.ops_per_s), 0),
            median_of(&mut p50).map_or("–".into(), |m| format!("{m:.0}")),
            fmt_spread(&col(|s| s.p99_us), 0),
            fmt_spread(&col(|s| s.cpu_per_1e5), 3),
            ratio(|s| s.ops_per_s),
            ratio(|s| s.p99_us),
        );
    }
    t += "\n";
    t
}

/// Parses `key=value` pairs out of one line.
fn fields(line: &str) -> BTreeMap<&str, &str> {
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .collect()
}

fn num(map: &BTreeMap<&str, &str>, key: &str, line: &str) -> io::Result<f64> {
    map.get(key)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| io::Error::other(format!("no {key} in {line:?}")))
}

fn run_one(
    bin_dir: &Path,
    args: &Args,
    peer: &str,
    workload: &str,
    conns: usize,
) -> io::Result<Sample> {
    // `PEER@TAG`: the same peer from the binary `net_server.TAG`.
    let (peer, server_bin) = match peer.split_once('@') {
        Some((peer, tag)) => (peer, format!("net_server.{tag}")),
        None => (peer, "net_server".to_string()),
    };
    let mut server = Command::new(bin(bin_dir, &server_bin))
        .args(["--peer", peer, "--workload", workload])
        .args(["--workers", &args.workers.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut server_out = BufReader::new(server.stdout.take().expect("piped stdout"));
    let result = (|| {
        let mut line = String::new();
        server_out.read_line(&mut line)?;
        let port: u16 = line
            .trim()
            .strip_prefix("port ")
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| io::Error::other(format!("server said {line:?}, not its port")))?;
        let load = Command::new(bin(bin_dir, "net_load"))
            .args([
                "--addr",
                &format!("127.0.0.1:{port}"),
                "--workload",
                workload,
            ])
            .args(["--conns", &conns.to_string()])
            .args(["--secs", &args.secs.to_string()])
            .args(["--warmup", &args.warmup.to_string()])
            .stderr(Stdio::inherit())
            .output()?;
        let load_line = String::from_utf8_lossy(&load.stdout).trim().to_string();
        if !load.status.success() {
            return Err(io::Error::other(format!(
                "net_load failed: {}",
                load.status
            )));
        }
        Ok(load_line)
    })();
    // Stop the server: close its stdin, read its CPU line, wait (bounded).
    drop(server.stdin.take());
    let mut cpu_line = String::new();
    let _ = server_out.read_line(&mut cpu_line);
    let deadline = Instant::now() + STOP_GRACE;
    while server.try_wait()?.is_none() {
        if Instant::now() >= deadline {
            let _ = server.kill();
            let _ = server.wait();
            return Err(io::Error::other("server did not exit; killed"));
        }
        thread::sleep(Duration::from_millis(5));
    }
    let load_line = result?;
    let load = fields(&load_line);
    let cpu = fields(&cpu_line);
    let ops_total = num(&load, "ops_total", &load_line)?;
    let cpu_s = num(&cpu, "cpu_sched_s", &cpu_line)?;
    Ok(Sample {
        ops_per_s: num(&load, "ops_per_s", &load_line)?,
        p50_us: num(&load, "p50_us", &load_line)?,
        p99_us: num(&load, "p99_us", &load_line)?,
        cpu_per_1e5: if ops_total > 0.0 {
            cpu_s / ops_total * 1e5
        } else {
            f64::NAN
        },
    })
}

fn bin(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}
