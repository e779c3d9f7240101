//! Typed-executor benchmarks: spawn trees, UTS and external inject, run by
//! every peer in the same group (2 workers each). After criterion's output
//! the bench prints a summary of medians: ns/task, the ratio to the seed-000
//! crossbeam design, and the speedup over the sequential loop.
//!
//! ```text
//! cargo bench -p magpie-benches --bench typed
//! ```

use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode, Throughput};
use magpie_benches::proc_stats::loadavg;
use magpie_benches::report::{summary, GroupSpec, Recorder};
use magpie_benches::tally::Tally;
use magpie_benches::typed::{
    run_sequential, time_inject_batched, time_inject_single, time_sequential, time_tree,
    BinaryTree, CbPool, MagpiePool, MagpieStealableLifoPool, RayonPeer, Sink, TokioTreePeer, Uts,
    INJECT_BATCH, INJECT_TASKS, TREE_EMPTY_DEPTH, TREE_WORK_DEPTH, WORKERS,
};
use magpie_benches::work::calibration;

static REC: Recorder = Recorder::new();

/// Samples per benchmark: every iteration here is 10-500 ms.
const SAMPLES: usize = 10;

fn group<'a>(c: &'a mut Criterion, name: &str, tasks: u64) -> BenchmarkGroup<'a, WallTime> {
    let mut g = c.benchmark_group(name);
    g.sample_size(SAMPLES)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .throughput(Throughput::Elements(tasks));
    g
}

/// Benchmarks one peer: `one` runs one timed iteration and returns its time
/// and checksum, which must equal `expected`.
fn peer(
    g: &mut BenchmarkGroup<'_, WallTime>,
    group: &'static str,
    name: &'static str,
    expected: Tally,
    mut one: impl FnMut() -> (Duration, Tally),
) {
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (t, tally) = one();
                assert_eq!(tally, expected, "{group}/{name}: checksum mismatch");
                total += t;
            }
            REC.record(group, name, iters, total);
            total
        })
    });
}

/// Every tree peer on `w`. `seq` adds the sequential baseline.
fn tree_peers<W: magpie_benches::typed::Workload>(
    c: &mut Criterion,
    name: &'static str,
    w: W,
    root: W::Task,
    expected: Tally,
    seq: bool,
) {
    let mut g = group(c, name, expected.count);
    let roots = [root];
    if seq {
        peer(&mut g, name, "seq", expected, || {
            time_sequential(&w, &roots)
        });
    }
    peer(&mut g, name, "cb", expected, || {
        time_tree::<CbPool<W>, W>(WORKERS, &w, &roots)
    });
    peer(&mut g, name, "magpie", expected, || {
        time_tree::<MagpiePool<W>, W>(WORKERS, &w, &roots)
    });
    peer(&mut g, name, "magpie_stealable_lifo", expected, || {
        time_tree::<MagpieStealableLifoPool<W>, W>(WORKERS, &w, &roots)
    });
    {
        let rayon = RayonPeer::new(WORKERS);
        peer(&mut g, name, "rayon_scope", expected, || {
            rayon.scope_tree(&w, &roots)
        });
        peer(&mut g, name, "rayon_join", expected, || {
            rayon.join_tree(&w, &roots)
        });
    }
    {
        let tokio = TokioTreePeer::new(WORKERS);
        peer(&mut g, name, "tokio", expected, || {
            tokio.spawn_tree(&w, &roots)
        });
    }
    g.finish();
}

fn main() {
    let load_before = loadavg();
    let cal = calibration();
    let mut c = Criterion::default().configure_from_args();

    let empty = BinaryTree {
        depth: TREE_EMPTY_DEPTH,
        work_iters: 0,
    };
    tree_peers(
        &mut c,
        "tree_d20_empty",
        empty,
        BinaryTree::ROOT,
        empty.expected(),
        false,
    );

    let work = BinaryTree {
        depth: TREE_WORK_DEPTH,
        work_iters: cal.iters_per_task,
    };
    tree_peers(
        &mut c,
        "tree_d17_work",
        work,
        BinaryTree::ROOT,
        work.expected(),
        true,
    );

    let uts = Uts::standard(cal.iters_per_task);
    let uts_expected = run_sequential(&uts, &[uts.root()]);
    tree_peers(&mut c, "uts_work", uts, uts.root(), uts_expected, true);

    let inject_expected = Tally::of_range(INJECT_TASKS);
    {
        let name = "inject_1m_single";
        let mut g = group(&mut c, name, INJECT_TASKS);
        peer(&mut g, name, "cb", inject_expected, || {
            time_inject_single::<CbPool<Sink>>(WORKERS, INJECT_TASKS)
        });
        peer(&mut g, name, "magpie", inject_expected, || {
            time_inject_single::<MagpiePool<Sink>>(WORKERS, INJECT_TASKS)
        });
        g.finish();
    }
    {
        let name = "inject_1m_batch1024";
        let mut g = group(&mut c, name, INJECT_TASKS);
        peer(&mut g, name, "cb", inject_expected, || {
            time_inject_batched::<CbPool<Sink>>(WORKERS, INJECT_TASKS, INJECT_BATCH)
        });
        peer(&mut g, name, "magpie", inject_expected, || {
            time_inject_batched::<MagpiePool<Sink>>(WORKERS, INJECT_TASKS, INJECT_BATCH)
        });
        g.finish();
    }

    c.final_summary();
    let spec = |name, tasks, speedup: bool| GroupSpec {
        name,
        tasks,
        samples: SAMPLES,
        ratio_to: Some("cb"),
        speedup_over: speedup.then_some("seq"),
    };
    println!("\n== typed summary: medians of the measured samples, {WORKERS} workers ==");
    println!("{}", cal.describe());
    println!("uts_work tree: {} nodes", uts_expected.count);
    println!("load average before: {load_before}; after: {}", loadavg());
    // The sequential loop's speed against the calibration says how much CPU
    // this process actually got: well below 100 % means a busy machine, and
    // then no speedup over it is meaningful.
    for (name, tasks) in [
        ("tree_d17_work", work.expected().count),
        ("uts_work", uts_expected.count),
    ] {
        if let Some(seq) = REC.median(name, "seq", SAMPLES) {
            let ideal = tasks as f64 * f64::from(cal.iters_per_task) * cal.ns_per_iter;
            println!(
                "{name}: sequential loop ran at {:.0} % of the calibrated speed",
                100.0 * ideal / (seq.as_secs_f64() * 1e9)
            );
        }
    }
    print!(
        "{}",
        summary(
            &REC,
            &[
                spec("tree_d20_empty", empty.expected().count, false),
                spec("tree_d17_work", work.expected().count, true),
                spec("uts_work", uts_expected.count, true),
                spec("inject_1m_single", INJECT_TASKS, false),
                spec("inject_1m_batch1024", INJECT_TASKS, false),
            ],
        )
    );
}
