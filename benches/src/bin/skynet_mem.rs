//! Runs skynet (10^6 leaves, 2 workers) once on one runtime and prints the
//! process's peak RSS (`VmHWM`). Use one process per runtime:
//!
//! ```text
//! cargo run --release -p magpie-benches --bin skynet_mem -- --runtime tokio
//! ```
#![forbid(unsafe_code)]

use std::process::ExitCode;

use magpie_benches::async_workloads::{skynet_once, skynet_tasks, TokioRt, SKYNET_LEAVES, WORKERS};
use magpie_benches::proc_stats::vm_hwm_kib;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = match args.as_slice() {
        [flag, name] if flag == "--runtime" => name.as_str(),
        _ => {
            eprintln!("usage: skynet_mem --runtime tokio");
            return ExitCode::from(2);
        }
    };
    let before = vm_hwm_kib().unwrap_or(0);
    let (sum, elapsed) = match runtime {
        "tokio" => skynet_once::<TokioRt>(WORKERS),
        // ==== magpie adapter goes here: "magpie" => skynet_once::<MagpieRt>(WORKERS) ====
        other => {
            eprintln!("unknown runtime {other:?} (known: tokio)");
            return ExitCode::from(2);
        }
    };
    let expected = SKYNET_LEAVES * (SKYNET_LEAVES - 1) / 2;
    if sum != expected {
        eprintln!("skynet sum {sum} != {expected}");
        return ExitCode::FAILURE;
    }
    let after = match vm_hwm_kib() {
        Ok(kib) => kib,
        Err(e) => {
            eprintln!("cannot read VmHWM: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "runtime={runtime} workers={WORKERS} leaves={SKYNET_LEAVES} tasks={} sum={sum} \
         time_ms={:.1} vm_hwm_before_kib={before} vm_hwm_kib={after}",
        skynet_tasks(SKYNET_LEAVES),
        elapsed.as_secs_f64() * 1e3
    );
    ExitCode::SUCCESS
}
