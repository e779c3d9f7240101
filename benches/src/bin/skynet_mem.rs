//! Runs skynet (10^6 leaves, 2 workers unless `--workers N`) once on one runtime and prints the
//! process's peak RSS (`VmHWM`). Use one process per runtime:
//!
//! ```text
//! cargo run --release -p magpie-benches --bin skynet_mem -- --runtime tokio
//! ```
#![forbid(unsafe_code)]

use std::process::ExitCode;

use magpie_benches::async_workloads::{
    skynet_once, skynet_tasks, MagpieRt, TokioRt, SKYNET_LEAVES, WORKERS,
};
use magpie_benches::proc_stats::vm_hwm_kib;

fn usage() -> ExitCode {
    eprintln!("usage: skynet_mem --runtime tokio [--workers N]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut runtime = None;
    let mut workers = WORKERS;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--runtime", Some(v)) => runtime = Some(v),
            ("--workers", Some(v)) => match v.parse() {
                Ok(n) if n > 0 => workers = n,
                _ => return usage(),
            },
            _ => return usage(),
        }
    }
    let Some(runtime) = runtime else {
        return usage();
    };
    let runtime = runtime.as_str();
    let before = vm_hwm_kib().unwrap_or(0);
    let (sum, elapsed) = match runtime {
        "tokio" => skynet_once::<TokioRt>(workers),
        "magpie" => skynet_once::<MagpieRt>(workers),
        other => {
            eprintln!("unknown runtime {other:?} (known: tokio, magpie)");
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
        "runtime={runtime} workers={workers} leaves={SKYNET_LEAVES} tasks={} sum={sum} \
         time_ms={:.1} vm_hwm_before_kib={before} vm_hwm_kib={after}",
        skynet_tasks(SKYNET_LEAVES),
        elapsed.as_secs_f64() * 1e3
    );
    ExitCode::SUCCESS
}
