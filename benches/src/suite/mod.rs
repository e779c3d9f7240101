//! The one-command benchmark suite behind `benches/run`: every comparison in
//! one process, peers alternating in the same run, each ratio with its
//! spread, the run marked INVALID when the machine was busy, and tables
//! (markdown and TSV) and SVG plots written to one folder.
//!
//! Steps of a run ([`run`]):
//!
//! 1. Record the machine ([`Machine`]): CPU model, cores, rustc, commit,
//!    load average.
//! 2. Calibrate the sequential loop while nothing of ours runs
//!    ([`crate::work::calibration`]): the idle speed.
//! 3. Run each group ([`groups`]): one untimed warm-up run per peer, then
//!    whole balanced designs of rounds ([`crate::report::round_order`];
//!    at least [`FULL_ROUNDS`], or [`QUICK_ROUNDS`] with `--quick`),
//!    every peer once per round. Every run checks its result (checksum,
//!    sorted permutation, fib value, n-body against the sequential run) and
//!    panics on a wrong one. After every round, one timed pass of the
//!    calibration loop ([`crate::work::spot_ns_per_iter`]) and, after every
//!    group, the load average.
//! 4. Validity ([`Validity`]): the run is INVALID when the median spot speed
//!    fell below [`MIN_SPEED`] of the idle speed, or the 1-minute load
//!    average exceeded the core count at any sample. An invalid run still
//!    writes its times; its ratios and speedups go to the TSV marked
//!    invalid and are not printed as results.
//! 5. Write `results.md`, `results.tsv`, `plots/*.svg` ([`output`]), and
//!    with `--baseline DIR`, `comparison.md` against that run's TSV.

pub mod output;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::async_workloads::{
    time_workload, AsyncRuntime, MagpieRt, TokioRt, SKYNET_LEAVES, WORKLOADS,
};
use crate::forkjoin::fib::{fib_closed, fib_join, FibTree, CUTOFF_COARSE, CUTOFF_FINE, FIB_N};
use crate::forkjoin::nbody::{self, NBODY_N, NBODY_STEPS};
use crate::forkjoin::sort::{
    check_sorted, mergesort, quicksort, random_input, Fingerprint, SORT_LEN,
};
use crate::forkjoin::{
    outside_join_latencies, time_install, ForkJoin, MagpieJoin, RayonJoin, Sequential,
};
use crate::report::{balanced_rounds_at_least, round_order, Spread};
use crate::tally::Tally;
use crate::typed::{
    time_inject_batched, time_inject_single, time_sequential, time_tree, BinaryTree, CbSeed000Pool,
    CbStrongPool, MagpiePool, RayonPeer, Sink, Uts, Workload, INJECT_BATCH, INJECT_TASKS,
    TREE_EMPTY_DEPTH, TREE_WORK_DEPTH,
};
use crate::work::{calibration, spot_ns_per_iter};

/// A run is valid only if the calibration loop kept at least this fraction
/// of its idle speed (median over the spot checks).
pub const MIN_SPEED: f64 = 0.95;

/// Rounds per group in a full run, at least (rounded up to whole balanced
/// designs).
pub const FULL_ROUNDS: usize = 10;

/// Rounds per group in a `--quick` run, at least.
pub const QUICK_ROUNDS: usize = 4;

/// What the command line asked for.
#[derive(Clone, Debug)]
pub struct Options {
    /// Folder the results go to.
    pub out: PathBuf,
    /// Small sizes and at least [`QUICK_ROUNDS`] rounds per group.
    pub quick: bool,
    /// A saved run's folder to compare with.
    pub baseline: Option<PathBuf>,
    /// Only groups whose name contains this.
    pub only: Option<String>,
    /// Worker threads per pool.
    pub workers: usize,
}

/// The machine a run was taken on.
#[derive(Clone, Debug, Default)]
pub struct Machine {
    /// `model name` from `/proc/cpuinfo`.
    pub cpu: String,
    /// Logical CPUs this process may use.
    pub cores: usize,
    /// `rustc -V`.
    pub rustc: String,
    /// `git rev-parse --short HEAD`, with `-dirty` for uncommitted changes.
    pub commit: String,
    /// `/proc/loadavg`'s three loads when the run started.
    pub load_start: String,
}

fn command_line(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

impl Machine {
    /// Reads this machine's description.
    pub fn probe() -> Self {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "?".into());
        let commit = match command_line("git", &["rev-parse", "--short", "HEAD"]) {
            Some(c) => {
                let dirty = command_line("git", &["status", "--porcelain", "--untracked-files=no"])
                    .is_some_and(|s| !s.is_empty());
                if dirty {
                    format!("{c}-dirty")
                } else {
                    c
                }
            }
            None => "?".into(),
        };
        Self {
            cpu,
            cores: std::thread::available_parallelism().map_or(1, usize::from),
            rustc: std::env::var("RUSTC_VERSION")
                .ok()
                .or_else(|| command_line("rustc", &["-V"]))
                .unwrap_or_else(|| "?".into()),
            commit,
            load_start: crate::proc_stats::loadavg(),
        }
    }
}

/// The 1-minute load average, if readable.
pub fn load1() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Whether the machine stayed quiet enough for the ratios to mean anything.
#[derive(Clone, Debug, Default)]
pub struct Validity {
    /// ns per iteration of the calibration loop, idle (best of 7).
    pub idle_ns_per_iter: f64,
    /// Speed of each spot check relative to idle (idle ns / spot ns).
    pub spot_speeds: Vec<f64>,
    /// 1-minute load averages sampled at the start and after each group.
    pub loads: Vec<f64>,
    /// Core count the loads are compared with.
    pub cores: usize,
}

impl Validity {
    /// The spread of the spot speeds.
    pub fn speed(&self) -> Option<Spread> {
        Spread::of(&self.spot_speeds)
    }

    /// The highest sampled load.
    pub fn max_load(&self) -> f64 {
        self.loads.iter().copied().fold(0.0, f64::max)
    }

    /// Why the run is invalid; empty when it is valid.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        match self.speed() {
            Some(s) if s.median < MIN_SPEED => out.push(format!(
                "the calibration loop ran at {:.0} % of its idle speed (median of {} spot checks; at least {:.0} % needed)",
                100.0 * s.median,
                s.n,
                100.0 * MIN_SPEED
            )),
            Some(_) => {}
            None => out.push("no spot check of the calibration loop was taken".into()),
        }
        if self.max_load() > self.cores as f64 {
            out.push(format!(
                "the load average reached {:.2}, above the {} cores",
                self.max_load(),
                self.cores
            ));
        }
        out
    }

    /// Whether [`Self::problems`] is empty.
    pub fn is_valid(&self) -> bool {
        self.problems().is_empty()
    }
}

/// One group's results: each peer's time in every round.
#[derive(Clone, Debug)]
pub struct GroupResult {
    /// Group name (`fib36_c8`).
    pub name: String,
    /// One line on what it runs, with its size.
    pub what: String,
    /// Tasks (or joins) per run, for ns/task; 0 to omit.
    pub tasks: u64,
    /// Peers in the caller's order, each with its per-round times in
    /// seconds (index = round).
    pub peers: Vec<(String, Vec<f64>)>,
    /// Latency samples in ns per peer (only the outside-join group).
    pub latencies: Vec<(String, Vec<f64>)>,
}

impl GroupResult {
    fn times(&self, peer: &str) -> Option<&[f64]> {
        self.peers
            .iter()
            .find(|(p, _)| p == peer)
            .map(|(_, t)| t.as_slice())
    }

    /// Per-round ratios `a / b` (time over time), if both ran.
    pub fn round_ratios(&self, a: &str, b: &str) -> Option<Vec<f64>> {
        let (xa, xb) = (self.times(a)?, self.times(b)?);
        Some(xa.iter().zip(xb).map(|(x, y)| x / y).collect())
    }

    /// The ratios reported for this group, each `(label, a, b)` meaning the
    /// spread of `a / b` per round: magpie's faces against every other
    /// parallel peer, and every parallel peer's speedup `seq / peer`.
    pub fn ratio_pairs(&self) -> Vec<(String, String, String)> {
        let names: Vec<&str> = self.peers.iter().map(|(p, _)| p.as_str()).collect();
        let parallel: Vec<&str> = names.iter().copied().filter(|p| *p != "seq").collect();
        let mut out = Vec::new();
        for subject in ["magpie", "magpie_join"] {
            if !names.contains(&subject) {
                continue;
            }
            for &other in parallel.iter().filter(|p| !p.starts_with("magpie")) {
                out.push((
                    format!("{subject} / {other}"),
                    subject.to_string(),
                    other.to_string(),
                ));
            }
        }
        if names.contains(&"seq") {
            for &p in &parallel {
                out.push((format!("speedup of {p}"), "seq".to_string(), p.to_string()));
            }
        }
        out
    }
}

/// A peer's one timed, checked run.
pub type PeerRun<'a> = (&'static str, Box<dyn FnMut() -> Duration + 'a>);

/// `k` outside-join round trips on one implementation, in ns.
type LatencyRun<'a> = Box<dyn Fn(usize) -> Vec<f64> + 'a>;

/// What a run collects.
#[derive(Debug)]
pub struct Run {
    /// The machine.
    pub machine: Machine,
    /// The options it ran with.
    pub options: Options,
    /// Idle and in-run calibration, loads.
    pub validity: Validity,
    /// Every group, in the order run.
    pub groups: Vec<GroupResult>,
    /// Wall time of the whole run.
    pub elapsed: Duration,
    /// `/proc/loadavg` at the end.
    pub load_end: String,
}

struct Ctx {
    quick: bool,
    only: Option<String>,
    validity: Validity,
    groups: Vec<GroupResult>,
}

impl Ctx {
    fn wanted(&self, name: &str) -> bool {
        self.only.as_deref().is_none_or(|f| name.contains(f))
    }

    fn rounds(&self, peers: usize) -> usize {
        if self.quick {
            balanced_rounds_at_least(peers, QUICK_ROUNDS)
        } else {
            balanced_rounds_at_least(peers, FULL_ROUNDS)
        }
    }

    /// Runs `peers` in alternating rounds and keeps their times.
    fn group(&mut self, name: &str, what: String, tasks: u64, mut peers: Vec<PeerRun<'_>>) {
        if !self.wanted(name) {
            return;
        }
        eprintln!("== {name}: {what}");
        for (_, run) in &mut peers {
            run();
        }
        let rounds = self.rounds(peers.len());
        let mut times = vec![Vec::with_capacity(rounds); peers.len()];
        for round in 0..rounds {
            for k in round_order(peers.len(), round) {
                times[k].push(peers[k].1().as_secs_f64());
            }
            self.validity
                .spot_speeds
                .push(self.validity.idle_ns_per_iter / spot_ns_per_iter());
        }
        self.validity.loads.extend(load1());
        let result = GroupResult {
            name: name.to_string(),
            what,
            tasks,
            peers: peers
                .iter()
                .map(|(p, _)| p.to_string())
                .zip(times)
                .collect(),
            latencies: Vec::new(),
        };
        for (p, t) in &result.peers {
            if let Some(s) = Spread::of(t) {
                eprintln!("   {p:<12} median {:>10.3} ms", s.median * 1e3);
            }
        }
        self.groups.push(result);
    }
}

/// A typed-pool run of `w` from `roots`, checked against `expected`.
fn typed<'a, P, W>(
    w: &'a W,
    roots: &'a [W::Task],
    expected: Tally,
    workers: usize,
) -> impl FnMut() -> Duration + 'a
where
    P: crate::typed::TypedPool<W>,
    W: Workload,
{
    move || {
        let (t, tally) = time_tree::<P, W>(workers, w, roots);
        assert_eq!(tally, expected, "{}: wrong checksum", P::NAME);
        t
    }
}

/// The typed spawn-tree peers (magpie's executor, both crossbeam designs,
/// `rayon::join`), plus `seq` when `with_seq`.
fn tree_peers<'a, W: Workload>(
    w: &'a W,
    roots: &'a [W::Task],
    expected: Tally,
    workers: usize,
    rayon: &'a RayonPeer,
    with_seq: bool,
) -> Vec<PeerRun<'a>> {
    let mut peers: Vec<PeerRun<'a>> = Vec::new();
    if with_seq {
        peers.push((
            "seq",
            Box::new(move || {
                let (t, tally) = time_sequential(w, roots);
                assert_eq!(tally, expected, "seq: wrong checksum");
                t
            }),
        ));
    }
    peers.push((
        "magpie",
        Box::new(typed::<MagpiePool<W>, W>(w, roots, expected, workers)),
    ));
    peers.push((
        "cb_strong",
        Box::new(typed::<CbStrongPool<W>, W>(w, roots, expected, workers)),
    ));
    peers.push((
        "cb_seed000",
        Box::new(typed::<CbSeed000Pool<W>, W>(w, roots, expected, workers)),
    ));
    peers.push((
        "rayon_join",
        Box::new(move || {
            let (t, tally) = rayon.join_tree(w, roots);
            assert_eq!(tally, expected, "rayon_join: wrong checksum");
            t
        }),
    ));
    peers
}

/// The fork-join implementations besides `Sequential`.
struct Joins {
    rayon: RayonJoin,
    magpie: MagpieJoin,
}

/// One fork-join peer per implementation, each running `f` (which times
/// and checks one run).
macro_rules! join_peers {
    ($joins:expr, $with_seq:expr, |$fj:ident| $body:expr) => {{
        let mut peers: Vec<PeerRun<'_>> = Vec::new();
        if $with_seq {
            peers.push((
                "seq",
                Box::new(|| {
                    let $fj = &Sequential;
                    $body
                }),
            ));
        }
        peers.push((
            "rayon_join",
            Box::new(|| {
                let $fj = &$joins.rayon;
                $body
            }),
        ));
        peers.push((
            "magpie_join",
            Box::new(|| {
                let $fj = &$joins.magpie;
                $body
            }),
        ));
        peers
    }};
}

fn sort_run<F: ForkJoin>(
    fj: &F,
    input: &[u32],
    fp: Fingerprint,
    sort: fn(&F, &mut [u32]),
    what: &str,
) -> Duration {
    let mut v = input.to_vec();
    let (t, ()) = time_install(fj, || sort(fj, &mut v));
    check_sorted(&v, fp, &format!("{what} on {}", fj.name()));
    t
}

/// Runs every group and returns what was measured.
pub fn run(options: Options) -> Run {
    let started = Instant::now();
    let machine = Machine::probe();
    let workers = options.workers;
    let q = options.quick;
    let cal = calibration();
    let mut ctx = Ctx {
        quick: q,
        only: options.only.clone(),
        validity: Validity {
            idle_ns_per_iter: cal.ns_per_iter,
            spot_speeds: Vec::new(),
            loads: load1().into_iter().collect(),
            cores: machine.cores,
        },
        groups: Vec::new(),
    };
    let rayon_peer = RayonPeer::new(workers);

    // Typed spawn trees and UTS (the typed bench's groups).
    let empty = BinaryTree {
        depth: if q { 14 } else { TREE_EMPTY_DEPTH },
        work_iters: 0,
    };
    let roots = [BinaryTree::ROOT];
    ctx.group(
        &format!("tree_d{}_empty", empty.depth),
        format!("binary spawn tree, {} tasks, no work", empty.tasks()),
        empty.tasks(),
        tree_peers(
            &empty,
            &roots,
            empty.expected(),
            workers,
            &rayon_peer,
            false,
        ),
    );
    let work = BinaryTree {
        depth: if q { 11 } else { TREE_WORK_DEPTH },
        work_iters: cal.iters_per_task,
    };
    ctx.group(
        &format!("tree_d{}_work", work.depth),
        format!("binary spawn tree, {} tasks of ~500 ns", work.tasks()),
        work.tasks(),
        tree_peers(&work, &roots, work.expected(), workers, &rayon_peer, true),
    );
    let mut uts = Uts::standard(cal.iters_per_task);
    if q {
        uts.root_children = 100;
    }
    let uts_roots = [uts.root()];
    let uts_expected = crate::typed::run_sequential(&uts, &uts_roots);
    ctx.group(
        "uts_work",
        format!("binomial UTS, {} nodes of ~500 ns", uts_expected.count),
        uts_expected.count,
        tree_peers(&uts, &uts_roots, uts_expected, workers, &rayon_peer, true),
    );

    // Outside inject.
    let n_inject = if q { INJECT_TASKS / 10 } else { INJECT_TASKS };
    let inject_expected = Tally::of_range(n_inject);
    let check = move |name: &str, (t, tally): (Duration, Tally)| {
        assert_eq!(tally, inject_expected, "{name}: wrong checksum");
        t
    };
    ctx.group(
        "inject_single",
        format!("{n_inject} spawn_external calls from outside"),
        n_inject,
        vec![
            (
                "magpie",
                Box::new(move || {
                    check(
                        "magpie",
                        time_inject_single::<MagpiePool<Sink>>(workers, n_inject),
                    )
                }),
            ),
            (
                "cb_strong",
                Box::new(move || {
                    check(
                        "cb_strong",
                        time_inject_single::<CbStrongPool<Sink>>(workers, n_inject),
                    )
                }),
            ),
            (
                "cb_seed000",
                Box::new(move || {
                    check(
                        "cb_seed000",
                        time_inject_single::<CbSeed000Pool<Sink>>(workers, n_inject),
                    )
                }),
            ),
        ],
    );
    ctx.group(
        "inject_batch1024",
        format!("{n_inject} tasks injected in batches of {INJECT_BATCH}"),
        n_inject,
        vec![
            (
                "magpie",
                Box::new(move || {
                    check(
                        "magpie",
                        time_inject_batched::<MagpiePool<Sink>>(workers, n_inject, INJECT_BATCH),
                    )
                }),
            ),
            (
                "cb_strong",
                Box::new(move || {
                    check(
                        "cb_strong",
                        time_inject_batched::<CbStrongPool<Sink>>(workers, n_inject, INJECT_BATCH),
                    )
                }),
            ),
            (
                "cb_seed000",
                Box::new(move || {
                    check(
                        "cb_seed000",
                        time_inject_batched::<CbSeed000Pool<Sink>>(workers, n_inject, INJECT_BATCH),
                    )
                }),
            ),
        ],
    );

    // rayon's demo workloads.
    let joins = Joins {
        rayon: RayonJoin::new(workers),
        magpie: MagpieJoin::new(workers),
    };
    for (n, cutoff) in [
        (if q { 27 } else { FIB_N }, CUTOFF_FINE),
        (if q { 30 } else { FIB_N }, CUTOFF_COARSE),
    ] {
        let want = fib_closed(n);
        let tree = FibTree { cutoff };
        let fib_roots = [n];
        let expected = tree.expected(n);
        let joins_made = crate::forkjoin::fib::joins(n, cutoff);
        let mut peers = join_peers!(joins, true, |fj| {
            let (t, v) = time_install(fj, || fib_join(fj, n, cutoff));
            assert_eq!(v, want, "fib({n}) on {}", fj.name());
            t
        });
        let mut spawn_tree = tree_peers(&tree, &fib_roots, expected, workers, &rayon_peer, false);
        // `rayon_join` already runs as a fork-join peer; the spawn-tree
        // adapter's version would only add its collection layer.
        spawn_tree.retain(|(p, _)| *p != "rayon_join");
        peers.extend(spawn_tree);
        ctx.group(
            &format!("fib{n}_c{cutoff}"),
            format!("fib({n}), sequential at n <= {cutoff}: {joins_made} joins (the spawn-tree peers: that many nodes spawning two); ns/task is per join"),
            joins_made,
            peers,
        );
    }

    let len = if q { SORT_LEN / 10 } else { SORT_LEN };
    let input = random_input(len, 0x5eed);
    let fp = Fingerprint::of(&input);
    let peers = join_peers!(joins, true, |fj| sort_run(
        fj,
        &input,
        fp,
        quicksort,
        "quicksort"
    ));
    ctx.group(
        &format!("quicksort_{len}"),
        format!("quicksort of {len} random u32 (copy of the input made before the clock starts)"),
        0,
        peers,
    );
    let peers = join_peers!(joins, true, |fj| sort_run(
        fj,
        &input,
        fp,
        mergesort,
        "mergesort"
    ));
    ctx.group(
        &format!("mergesort_{len}"),
        format!("mergesort of {len} random u32 (its scratch buffer allocated inside the clock)"),
        0,
        peers,
    );
    drop(input);

    let (bodies, steps) = if q { (800, 2) } else { (NBODY_N, NBODY_STEPS) };
    let start = nbody::initial(bodies, 0xb0d1);
    let want = nbody::reference(start.clone(), steps);
    let peers = join_peers!(joins, true, |fj| {
        let s = start.clone();
        let (t, got) = time_install(fj, || nbody::simulate(fj, s, steps));
        nbody::check_against(&got, &want, fj.name());
        t
    });
    ctx.group(
        &format!("nbody_{bodies}x{steps}"),
        format!("n-body, {bodies} bodies, {steps} steps, checked against the sequential run"),
        0,
        peers,
    );

    // tokio's rt_multi_threaded workloads and skynet, magpie's async
    // runtime against tokio.
    {
        let tokio = TokioRt::with_workers(workers);
        let magpie = MagpieRt::with_workers(workers);
        let leaves = if q { 10_000 } else { SKYNET_LEAVES };
        let (mut th, mut mh) = (Vec::new(), Vec::new());
        for workload in WORKLOADS {
            let name = if workload == "skynet" {
                format!("async_skynet_{leaves}")
            } else {
                format!("async_{workload}")
            };
            let (tokio, magpie, th, mh) = (&tokio, &magpie, &mut th, &mut mh);
            ctx.group(
                &name,
                if workload == "skynet" {
                    format!("skynet: a 10-ary tree of {leaves} leaves, every parent awaits its children; the sum is checked")
                } else {
                    format!("tokio's rt_multi_threaded `{workload}`, 2 workers each")
                },
                0,
                vec![
                    ("magpie", Box::new(move || time_workload(magpie, workload, mh, leaves))),
                    ("tokio", Box::new(move || time_workload(tokio, workload, th, leaves))),
                ],
            );
        }
    }

    // `join` from outside the pool: install + join round trips.
    if ctx.wanted("join_outside") {
        let per_round = if q { 200 } else { 1_000 };
        let mut lat: Vec<(String, Vec<f64>)> = Vec::new();
        let impls: Vec<(&str, LatencyRun<'_>)> = vec![
            (
                "rayon_join",
                Box::new(|k| outside_join_latencies(&joins.rayon, k)),
            ),
            (
                "magpie_join",
                Box::new(|k| outside_join_latencies(&joins.magpie, k)),
            ),
        ];
        for (_, f) in &impls {
            f(per_round);
        }
        let rounds = ctx.rounds(impls.len());
        let mut per_round_p50 = vec![Vec::new(); impls.len()];
        lat.extend(impls.iter().map(|(p, _)| (p.to_string(), Vec::new())));
        eprintln!("== join_outside: install(|| join(|| 1, || 2)) round trips");
        for round in 0..rounds {
            for k in round_order(impls.len(), round) {
                let xs = (impls[k].1)(per_round);
                per_round_p50[k].push(crate::forkjoin::quantile(&xs, 0.5).unwrap_or(0.0) * 1e-9);
                lat[k].1.extend(xs);
            }
            ctx.validity
                .spot_speeds
                .push(ctx.validity.idle_ns_per_iter / spot_ns_per_iter());
        }
        ctx.groups.push(GroupResult {
            name: "join_outside".into(),
            what: format!(
                "install(|| join(|| 1, || 2)) from a thread outside the pool; per round {per_round} calls, the round's time is their median"
            ),
            tasks: 0,
            peers: impls.iter().map(|(p, _)| p.to_string()).zip(per_round_p50).collect(),
            latencies: lat,
        });
    }
    ctx.validity.loads.extend(load1());

    Run {
        machine,
        options,
        validity: ctx.validity,
        groups: ctx.groups,
        elapsed: started.elapsed(),
        load_end: crate::proc_stats::loadavg(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_calibration_or_a_high_load_makes_the_run_invalid() {
        let v = Validity {
            idle_ns_per_iter: 1.0,
            spot_speeds: vec![1.0, 0.99, 0.97],
            loads: vec![0.5, 1.2],
            cores: 2,
        };
        assert!(v.is_valid(), "{:?}", v.problems());
        let slow = Validity {
            spot_speeds: vec![0.9, 0.8, 0.99],
            ..v.clone()
        };
        assert!(
            slow.problems()[0].contains("idle speed"),
            "{:?}",
            slow.problems()
        );
        let loaded = Validity {
            loads: vec![0.5, 2.5],
            ..v.clone()
        };
        assert!(loaded.problems()[0].contains("load average"));
        let none = Validity {
            spot_speeds: vec![],
            ..v
        };
        assert!(!none.is_valid());
    }

    #[test]
    fn ratio_pairs_put_magpie_against_each_peer_and_every_peer_against_seq() {
        let g = GroupResult {
            name: "g".into(),
            what: String::new(),
            tasks: 0,
            peers: ["seq", "magpie", "cb_strong", "rayon_join"]
                .iter()
                .map(|p| (p.to_string(), vec![2.0, 4.0]))
                .collect(),
            latencies: vec![],
        };
        let labels: Vec<String> = g.ratio_pairs().into_iter().map(|(l, _, _)| l).collect();
        assert_eq!(
            labels,
            [
                "magpie / cb_strong",
                "magpie / rayon_join",
                "speedup of magpie",
                "speedup of cb_strong",
                "speedup of rayon_join"
            ]
        );
        assert_eq!(g.round_ratios("seq", "magpie"), Some(vec![1.0, 1.0]));
        assert_eq!(g.round_ratios("seq", "nobody"), None);
    }
}
