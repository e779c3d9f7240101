//! Async-runtime benchmarks: tokio's `rt_multi_threaded` workloads and
//! skynet, the same code on every runtime (2 workers each), every runtime of
//! one workload in the same group. After criterion's output the bench prints
//! the medians and each runtime's ratio to tokio.
//!
//! ```text
//! cargo bench -p magpie-benches --bench async_rt
//! ```

use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode, Throughput};
use magpie_benches::async_workloads::{
    chained_spawn, ping_pong, skynet, skynet_tasks, spawn_many_local, spawn_many_remote,
    time_workload, yield_many, AsyncRuntime, Busy1, MagpieRt, TokioRt, NUM_SPAWN, SKYNET_LEAVES,
    WORKERS, WORKLOADS,
};
use magpie_benches::proc_stats::loadavg;
use magpie_benches::report::{
    alternate, csv, save_results, selected, summary, GroupSpec, Recorder,
};

static REC: Recorder = Recorder::new();
/// The strictly alternating runs (`report::alternate`), the ratios in
/// docs/benchmarks.md.
static ALT: Recorder = Recorder::new();

/// Alternating rounds per workload (each round runs tokio and magpie once).
const ALT_ROUNDS: usize = 41;
/// Alternating rounds for skynet.
const ALT_SKYNET_ROUNDS: usize = 11;

/// Samples for the short workloads (0.1-20 ms an iteration).
const SHORT_SAMPLES: usize = 30;
/// Samples for skynet (hundreds of ms an iteration).
const SKYNET_SAMPLES: usize = 10;

/// Times `iters` calls of `one` and records them for the summary.
fn timed(
    group: &'static str,
    runtime: &'static str,
    iters: u64,
    mut one: impl FnMut(),
) -> Duration {
    let t0 = Instant::now();
    for _ in 0..iters {
        one();
    }
    let total = t0.elapsed();
    REC.record(group, runtime, iters, total);
    total
}

/// Benchmarks `workload` on a fresh `R`; the runtime (and any background
/// load) lives only while this runtime is measured.
fn bench_on<R: AsyncRuntime>(g: &mut BenchmarkGroup<'_, WallTime>, workload: &'static str) {
    let name = R::NAME;
    let rt = R::with_workers(WORKERS);
    let mut handles = Vec::with_capacity(NUM_SPAWN);
    let mut bench = |one: &mut dyn FnMut()| {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| timed(workload, name, iters, &mut *one))
        });
    };
    match workload {
        "spawn_many_local" => bench(&mut || spawn_many_local(&rt)),
        "spawn_many_remote_idle" => bench(&mut || spawn_many_remote(&rt, &mut handles)),
        "spawn_many_remote_busy1" => {
            let busy = Busy1::start(&rt, WORKERS);
            bench(&mut || spawn_many_remote(&rt, &mut handles));
            busy.stop(&rt);
        }
        "ping_pong" => bench(&mut || ping_pong(&rt)),
        "yield_many" => bench(&mut || yield_many(&rt)),
        "chained_spawn" => bench(&mut || chained_spawn(&rt)),
        "skynet" => {
            let expected = SKYNET_LEAVES * (SKYNET_LEAVES - 1) / 2;
            bench(&mut || assert_eq!(skynet(&rt, SKYNET_LEAVES), expected, "skynet/{name}"));
        }
        other => unreachable!("unknown workload {other}"),
    }
}

/// Iterations per alternating turn of `spawn_many_remote_busy1`, after one
/// untimed iteration.
fn main() {
    let load_before = loadavg();
    let mut c = Criterion::default().configure_from_args();
    // MAGPIE_ALT_ONLY=1 skips criterion's runs and keeps only the
    // alternating ones.
    let criterion_runs = std::env::var_os("MAGPIE_ALT_ONLY").is_none();

    for workload in WORKLOADS.into_iter().filter(|_| criterion_runs) {
        let mut g = c.benchmark_group(workload);
        if workload == "skynet" {
            g.sample_size(SKYNET_SAMPLES)
                .sampling_mode(SamplingMode::Flat)
                .measurement_time(Duration::from_secs(6))
                .throughput(Throughput::Elements(skynet_tasks(SKYNET_LEAVES)));
        } else {
            g.sample_size(SHORT_SAMPLES)
                .measurement_time(Duration::from_secs(3));
        }
        g.warm_up_time(Duration::from_secs(1));
        bench_on::<TokioRt>(&mut g, workload);
        bench_on::<MagpieRt>(&mut g, workload);
        g.finish();
    }

    c.final_summary();

    // The alternating pass: both runtimes alive, one iteration each in turn.
    let tokio = TokioRt::with_workers(WORKERS);
    let magpie = MagpieRt::with_workers(WORKERS);
    let (mut th, mut mh) = (Vec::new(), Vec::new());
    for workload in WORKLOADS.into_iter().filter(|w| selected(w)) {
        let rounds = if workload == "skynet" {
            ALT_SKYNET_ROUNDS
        } else {
            ALT_ROUNDS
        };
        // One untimed warm-up iteration each.
        time_workload(&tokio, workload, &mut th, SKYNET_LEAVES);
        time_workload(&magpie, workload, &mut mh, SKYNET_LEAVES);
        alternate(
            &ALT,
            workload,
            rounds,
            &mut [
                ("tokio", &mut || {
                    time_workload(&tokio, workload, &mut th, SKYNET_LEAVES)
                }),
                ("magpie", &mut || {
                    time_workload(&magpie, workload, &mut mh, SKYNET_LEAVES)
                }),
            ],
        );
    }
    drop((tokio, magpie));

    let specs: Vec<GroupSpec> = WORKLOADS
        .iter()
        .map(|&name| GroupSpec {
            name,
            tasks: if name == "skynet" {
                skynet_tasks(SKYNET_LEAVES)
            } else {
                0
            },
            samples: if name == "skynet" {
                SKYNET_SAMPLES
            } else {
                SHORT_SAMPLES
            },
            ratio_to: Some("tokio"),
            speedup_over: None,
        })
        .collect();
    println!("\n== async summary: medians of the measured samples, {WORKERS} workers ==");
    println!("load average before: {load_before}; after: {}", loadavg());
    if criterion_runs {
        println!("-- criterion (each runtime's samples in one block)");
        print!("{}", summary(&REC, &specs));
    }
    let alt_specs: Vec<GroupSpec> = specs
        .iter()
        .map(|s| GroupSpec {
            samples: if s.name == "skynet" {
                ALT_SKYNET_ROUNDS
            } else {
                ALT_ROUNDS
            },
            ..*s
        })
        .collect();
    println!("-- alternating ({ALT_ROUNDS} rounds, skynet {ALT_SKYNET_ROUNDS}; tokio and magpie in turn)");
    print!("{}", summary(&ALT, &alt_specs));
    if let Some(path) = save_results("async_rt.csv", &csv(&ALT, "async_rt", &alt_specs)) {
        println!("wrote {}", path.display());
    }
}
