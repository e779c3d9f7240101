//! CPU burnt by an idle pool: starts one, runs a burst of tasks, lets it
//! settle, then measures the process's CPU time over a window (default 1 s)
//! while nothing is submitted.
//!
//! ```text
//! cargo run --release -p magpie-benches --bin idle_cpu -- --executor cb_seed000 [--secs 1]
//! ```
#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::time::Duration;

use magpie_benches::async_workloads::{MagpieRt, TokioRt};
use magpie_benches::idle::{idle_async, idle_cb, idle_cb_strong, idle_magpie};

const WORKERS: usize = 2;

fn main() -> ExitCode {
    let mut executor = None;
    let mut secs = 1.0f64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--executor", Some(v)) => executor = Some(v),
            ("--secs", Some(v)) => match v.parse() {
                Ok(s) if s > 0.0 => secs = s,
                _ => {
                    eprintln!("--secs needs a positive number");
                    return ExitCode::from(2);
                }
            },
            _ => {
                eprintln!("usage: idle_cpu --executor cb_seed000|cb_strong|tokio|magpie|magpie-rt [--secs N]");
                return ExitCode::from(2);
            }
        }
    }
    let window = Duration::from_secs_f64(secs);
    let result = match executor.as_deref() {
        Some("cb_seed000") => idle_cb(WORKERS, window),
        Some("cb_strong") => idle_cb_strong(WORKERS, window),
        Some("tokio") => idle_async::<TokioRt>(WORKERS, window),
        Some("magpie") => idle_magpie(WORKERS, window),
        Some("magpie-rt") => idle_async::<MagpieRt>(WORKERS, window),
        _ => {
            eprintln!(
                "usage: idle_cpu --executor cb_seed000|cb_strong|tokio|magpie|magpie-rt [--secs N]"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(idle) => {
            println!(
                "executor={} workers={WORKERS} window_s={:.3} cpu_ms={:.3} \
                 percent_of_one_core={:.3} stat_cpu_ms={:.0} stat_percent={:.1}",
                executor.unwrap_or_default(),
                idle.wall.as_secs_f64(),
                idle.sched_cpu.as_secs_f64() * 1e3,
                idle.percent_of_core(),
                idle.stat_cpu.as_secs_f64() * 1e3,
                idle.stat_percent_of_core()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cannot read /proc: {e}");
            ExitCode::FAILURE
        }
    }
}
