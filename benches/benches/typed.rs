//! Typed-executor benchmarks: spawn trees, UTS and external inject, run by
//! every peer in the same group (2 workers each). After criterion's output
//! the bench prints a summary of medians: ns/task, the ratio to the seed-000
//! crossbeam design (`cb_seed000`), and the speedup over the sequential loop;
//! then the headline ratios with their spread over the alternating rounds:
//! magpie against the strong crossbeam peer (`cb_strong`), `rayon::join` and
//! the seed-000 design, and each parallel peer's speedup.
//!
//! ```text
//! cargo bench -p magpie-benches --bench typed
//! ```

use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode, Throughput};
use magpie_benches::proc_stats::loadavg;
use magpie_benches::report::{
    alternate, balanced_rounds_at_least, csv, ratio_spreads, save_results, selected, summary,
    GroupSpec, Recorder,
};
use magpie_benches::tally::Tally;
use magpie_benches::typed::{
    run_sequential, time_inject_batched, time_inject_single, time_sequential, time_tree,
    BinaryTree, CbSeed000Pool, CbStrongPool, MagpiePool, MagpieRingPool, MagpieStealableLifoPool,
    RayonPeer, Sink, TokioTreePeer, Uts, INJECT_BATCH, INJECT_TASKS, TREE_EMPTY_DEPTH,
    TREE_WORK_DEPTH, WORKERS,
};
use magpie_benches::work::calibration;

static REC: Recorder = Recorder::new();
/// The strictly alternating runs, the ratios in docs/benchmarks.md.
static ALT: Recorder = Recorder::new();

/// Alternating rounds per group, at least (each round runs every peer once);
/// a group runs the next whole number of balanced designs
/// (`report::balanced_rounds_at_least`): 16 rounds for 8 peers, 14 for 7,
/// 12 for 3.
const ALT_ROUNDS: usize = 11;

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

/// A peer's single timed iteration: its time and its checksum.
type Run<'a> = Box<dyn FnMut() -> (Duration, Tally) + 'a>;
/// A checked run: its time only.
type Timed<'a> = Box<dyn FnMut() -> Duration + 'a>;

/// Runs `peers` under criterion (unless `MAGPIE_ALT_ONLY` is set), then at
/// least `rounds` strictly alternating rounds of them into [`ALT`], in the
/// balanced order of `report::alternate`. Every run's checksum must equal
/// `expected`.
fn run_group(
    c: &mut Criterion,
    name: &'static str,
    expected: Tally,
    rounds: usize,
    mut peers: Vec<(&'static str, Run<'_>)>,
) {
    if criterion_runs() {
        let mut g = group(c, name, expected.count);
        for (peer_name, one) in &mut peers {
            peer(&mut g, name, peer_name, expected, one);
        }
        g.finish();
    }
    let mut checked: Vec<(&str, Timed<'_>)> = peers
        .iter_mut()
        .map(|(peer_name, one)| {
            let peer_name: &'static str = peer_name;
            let f: Timed<'_> = Box::new(move || {
                let (t, tally) = one();
                assert_eq!(tally, expected, "{name}/{peer_name}: checksum mismatch");
                t
            });
            (peer_name, f)
        })
        .collect();
    if !selected(name) {
        return;
    }
    // One untimed warm-up run of each.
    for (_, f) in &mut checked {
        f();
    }
    let mut refs: Vec<(&str, &mut dyn FnMut() -> Duration)> = checked
        .iter_mut()
        .map(|(n, f)| (*n, &mut **f as &mut dyn FnMut() -> Duration))
        .collect();
    let rounds = balanced_rounds_at_least(refs.len(), rounds);
    alternate(&ALT, name, rounds, &mut refs);
}

/// Whether criterion's own runs happen (`MAGPIE_ALT_ONLY` unset).
fn criterion_runs() -> bool {
    std::env::var_os("MAGPIE_ALT_ONLY").is_none()
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
    let roots = [root];
    let rayon = RayonPeer::new(WORKERS);
    let tokio = TokioTreePeer::new(WORKERS);
    let (w, roots, rayon, tokio) = (&w, &roots, &rayon, &tokio);
    let mut peers: Vec<(&'static str, Run<'_>)> = Vec::new();
    if seq {
        peers.push(("seq", Box::new(move || time_sequential(w, roots))));
    }
    peers.push((
        "cb_seed000",
        Box::new(move || time_tree::<CbSeed000Pool<W>, W>(WORKERS, w, roots)),
    ));
    peers.push((
        "cb_strong",
        Box::new(move || time_tree::<CbStrongPool<W>, W>(WORKERS, w, roots)),
    ));
    peers.push((
        "magpie",
        Box::new(move || time_tree::<MagpiePool<W>, W>(WORKERS, w, roots)),
    ));
    peers.push((
        "magpie_stealable_lifo",
        Box::new(move || time_tree::<MagpieStealableLifoPool<W>, W>(WORKERS, w, roots)),
    ));
    peers.push((
        "magpie_ring",
        Box::new(move || time_tree::<MagpieRingPool<W>, W>(WORKERS, w, roots)),
    ));
    peers.push(("rayon_scope", Box::new(move || rayon.scope_tree(w, roots))));
    peers.push(("rayon_join", Box::new(move || rayon.join_tree(w, roots))));
    peers.push(("tokio", Box::new(move || tokio.spawn_tree(w, roots))));
    run_group(c, name, expected, ALT_ROUNDS, peers);
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
    run_group(
        &mut c,
        "inject_1m_single",
        inject_expected,
        ALT_ROUNDS,
        vec![
            (
                "cb_seed000",
                Box::new(|| time_inject_single::<CbSeed000Pool<Sink>>(WORKERS, INJECT_TASKS)),
            ),
            (
                "cb_strong",
                Box::new(|| time_inject_single::<CbStrongPool<Sink>>(WORKERS, INJECT_TASKS)),
            ),
            (
                "magpie",
                Box::new(|| time_inject_single::<MagpiePool<Sink>>(WORKERS, INJECT_TASKS)),
            ),
            (
                "magpie_ring",
                Box::new(|| time_inject_single::<MagpieRingPool<Sink>>(WORKERS, INJECT_TASKS)),
            ),
        ],
    );
    run_group(
        &mut c,
        "inject_1m_batch1024",
        inject_expected,
        ALT_ROUNDS,
        vec![
            (
                "cb_seed000",
                Box::new(|| {
                    time_inject_batched::<CbSeed000Pool<Sink>>(WORKERS, INJECT_TASKS, INJECT_BATCH)
                }),
            ),
            (
                "cb_strong",
                Box::new(|| {
                    time_inject_batched::<CbStrongPool<Sink>>(WORKERS, INJECT_TASKS, INJECT_BATCH)
                }),
            ),
            (
                "magpie",
                Box::new(|| {
                    time_inject_batched::<MagpiePool<Sink>>(WORKERS, INJECT_TASKS, INJECT_BATCH)
                }),
            ),
            (
                "magpie_ring",
                Box::new(|| {
                    time_inject_batched::<MagpieRingPool<Sink>>(WORKERS, INJECT_TASKS, INJECT_BATCH)
                }),
            ),
        ],
    );

    c.final_summary();
    let spec = |name, tasks, speedup: bool| GroupSpec {
        name,
        tasks,
        samples: SAMPLES,
        ratio_to: Some("cb_seed000"),
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
        if let Some(seq) = ALT.median(name, "seq", usize::MAX) {
            let ideal = tasks as f64 * f64::from(cal.iters_per_task) * cal.ns_per_iter;
            println!(
                "{name}: sequential loop ran at {:.0} % of the calibrated speed",
                100.0 * ideal / (seq.as_secs_f64() * 1e9)
            );
        }
    }
    let specs = [
        spec("tree_d20_empty", empty.expected().count, false),
        spec("tree_d17_work", work.expected().count, true),
        spec("uts_work", uts_expected.count, true),
        spec("inject_1m_single", INJECT_TASKS, false),
        spec("inject_1m_batch1024", INJECT_TASKS, false),
    ];
    if criterion_runs() {
        println!("-- criterion (each peer's samples in one block)");
        print!("{}", summary(&REC, &specs));
    }
    // ALT holds only the alternating rounds: every sample counts.
    let alt_specs = specs.map(|s| GroupSpec {
        samples: usize::MAX,
        ..s
    });
    println!(
        "-- alternating (at least {ALT_ROUNDS} rounds, whole balanced designs; every peer once per round)"
    );
    print!("{}", summary(&ALT, &alt_specs));
    println!(
        "-- headline: per-round ratios of the alternating pass (time / time; speedup = seq / peer)"
    );
    for s in &specs {
        print!(
            "{}",
            ratio_spreads(
                &ALT,
                s.name,
                "magpie",
                &["cb_strong", "rayon_join", "cb_seed000"]
            )
        );
        if s.speedup_over.is_some() {
            for p in ["magpie", "cb_strong", "rayon_join", "cb_seed000"] {
                print!("{}", ratio_spreads(&ALT, s.name, "seq", &[p]));
            }
        }
    }
    if let Some(path) = save_results("typed.csv", &csv(&ALT, "typed", &alt_specs)) {
        println!("wrote {}", path.display());
    }
}
