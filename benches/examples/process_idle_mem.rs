//! Bytes per idle process (issue 15's target: at most 256 B per idle
//! process for 10^6 of them, measured as peak RSS).
//!
//! ```text
//! cargo run --release -p magpie-benches --example process_idle_mem -- [N] [ROUNDS]
//! ```
//!
//! Each measurement runs in a child process of its own (peak RSS is per
//! process), alternating peers round by round:
//!
//! - `magpie`: N magpie processes spawned on a 2-worker `ProcessRuntime`,
//!   each stepped once into `Idle` (the metrics' step count says when all
//!   have been);
//! - `tokio-mpsc`: N tokio tasks on a 2-worker runtime, each parked on its
//!   own unbounded mpsc receiver (the issue's "plain tokio tasks + mpsc"
//!   peer), all polled once.
//!
//! A child prints the peak RSS (`VmHWM`) before spawning and after, and the
//! difference divided by N. What an idle process keeps alive beyond the
//! runtime's own bookkeeping (the PID table, the process's state word and
//! mailbox, the user's state) is all in that difference.
#![forbid(unsafe_code)]

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use magpie_benches::proc_stats::vm_hwm_kib;

const WORKERS: usize = 2;
/// How long a child waits for its N processes to be stepped at least once.
const SETTLE_LIMIT: Duration = Duration::from_secs(120);

fn magpie_child(n: usize) -> Result<(), String> {
    use magpie_runtime::process::{Events, InitError, Process, ProcessRuntime, StepOutput};

    /// An idle process with no state of its own.
    struct Idle;
    impl Process<u64> for Idle {
        fn init(&mut self, _method: &str, _input: Option<u64>) -> Result<(), InitError> {
            Ok(())
        }
        fn step(&mut self, events: Events<'_, u64>, out: &mut StepOutput<'_, u64>) {
            for _ in events {}
            out.idle();
        }
    }

    let rt = ProcessRuntime::<u64>::builder()
        .workers(WORKERS)
        .build()
        .map_err(|e| e.to_string())?;
    let before = vm_hwm_kib().map_err(|e| e.to_string())?;
    for _ in 0..n {
        rt.spawn(Idle, "idle", None).map_err(|e| format!("{e:?}"))?;
    }
    let start = Instant::now();
    while rt.metrics().steps < n as u64 {
        if start.elapsed() > SETTLE_LIMIT {
            return Err(format!("only {} of {n} stepped", rt.metrics().steps));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let after = vm_hwm_kib().map_err(|e| e.to_string())?;
    report("magpie", n, before, after);
    // Exit without tearing 10^6 processes down: the measurement is taken.
    std::process::exit(0)
}

fn tokio_child(n: usize) -> Result<(), String> {
    use magpie_core::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .build()
        .map_err(|e| e.to_string())?;
    let before = vm_hwm_kib().map_err(|e| e.to_string())?;
    let polled = Arc::new(AtomicUsize::new(0));
    let mut senders = Vec::with_capacity(n);
    for _ in 0..n {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
        let polled = polled.clone();
        rt.spawn(async move {
            polled.fetch_add(1, Ordering::Relaxed);
            while rx.recv().await.is_some() {}
        });
        senders.push(tx);
    }
    let start = Instant::now();
    while polled.load(Ordering::Relaxed) < n {
        if start.elapsed() > SETTLE_LIMIT {
            return Err(format!(
                "only {} of {n} polled",
                polled.load(Ordering::Relaxed)
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let after = vm_hwm_kib().map_err(|e| e.to_string())?;
    report("tokio-mpsc", n, before, after);
    std::process::exit(0)
}

fn report(peer: &str, n: usize, before: u64, after: u64) {
    let bytes = (after.saturating_sub(before) * 1024) as f64 / n as f64;
    println!(
        "{peer} n={n} hwm_before_kib={before} hwm_after_kib={after} bytes_per_idle={bytes:.1}"
    );
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, peer, n] = args.as_slice() {
        if flag == "--child" {
            let n: usize = n.parse().unwrap_or(1_000_000);
            let r = match peer.as_str() {
                "magpie" => magpie_child(n),
                "tokio-mpsc" => tokio_child(n),
                other => Err(format!("unknown peer {other}")),
            };
            if let Err(e) = r {
                eprintln!("process_idle_mem {peer}: {e}");
                return ExitCode::FAILURE;
            }
            return ExitCode::SUCCESS;
        }
    }
    let n: usize = args
        .first()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let exe = std::env::current_exe().expect("own path");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "process_idle_mem: {n} idle processes, {WORKERS} workers, {rounds} rounds, load {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut results: Vec<(String, f64)> = Vec::new();
    for r in 0..rounds {
        let order = if r % 2 == 0 {
            ["magpie", "tokio-mpsc"]
        } else {
            ["tokio-mpsc", "magpie"]
        };
        for peer in order {
            let out = Command::new(&exe)
                .args(["--child", peer, &n.to_string()])
                .output()
                .expect("run child");
            let text = String::from_utf8_lossy(&out.stdout);
            print!("round {r}: {text}");
            if !out.status.success() {
                eprintln!("{}", String::from_utf8_lossy(&out.stderr));
                return ExitCode::FAILURE;
            }
            if let Some(b) = text
                .split_whitespace()
                .find_map(|w| w.strip_prefix("bytes_per_idle="))
                .and_then(|v| v.parse::<f64>().ok())
            {
                results.push((peer.to_string(), b));
            }
        }
    }
    for peer in ["magpie", "tokio-mpsc"] {
        let mut v: Vec<f64> = results
            .iter()
            .filter(|(p, _)| p == peer)
            .map(|(_, b)| *b)
            .collect();
        v.sort_by(f64::total_cmp);
        if let (Some(lo), Some(hi)) = (v.first(), v.last()) {
            println!(
                "{peer}: median {:.1} B per idle process (min {lo:.1}, max {hi:.1})",
                v[v.len() / 2]
            );
        }
    }
    ExitCode::SUCCESS
}
