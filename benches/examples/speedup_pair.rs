//! The two work-bearing trees of the typed bench with only four peers in
//! the alternation: the sequential loop, magpie, `rayon::join` and the
//! strong crossbeam peer (`cb_strong`). A probe
//! for the speedup target (docs/benchmarks.md): whether the gap between
//! magpie and `rayon::join` seen in the full bench, where five other peers
//! share the rounds, is still there when nothing else runs in between.
//! Each round also measures the machine's ceiling for the same number of
//! tasks (`work::ceiling_pair`: the same work split over two threads with
//! no scheduler), so every speedup can be read against what the two vCPUs
//! allowed in that round: `magpie/ceiling` is magpie's speedup over the
//! ceiling's, round by round.
//!
//! `cargo run --release -p magpie-benches --example speedup_pair`
//! (env `ROUNDS`, default 16, rounded up to whole balanced designs of five:
//! the ceiling, the sequential loop, magpie, `rayon::join` and `cb_strong`
//! run in `report::round_order`'s order).

use std::time::Duration;

use magpie_benches::report::{balanced_rounds_at_least, median_of, round_order};
use magpie_benches::typed::{
    time_sequential, time_tree, BinaryTree, CbStrongPool, MagpiePool, RayonPeer, Uts, Workload,
    TREE_WORK_DEPTH,
};
use magpie_benches::work::{calibration, ceiling_pair};

/// The median of a run's samples (`report::median_of` on an owned copy).
fn median(mut v: Vec<f64>) -> f64 {
    median_of(&mut v).expect("at least one round")
}

fn probe<W: Workload>(name: &str, w: &W, root: W::Task, rounds: usize, rayon: &RayonPeer) {
    let roots = [root];
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (_, expected) = time_sequential(w, &roots);
    let iters = calibration().iters_per_task;
    let (mut seq, mut magpie, mut join, mut ceiling) = (vec![], vec![], vec![], vec![]);
    let mut strong = vec![];
    for round in 0..rounds {
        // The five in `report::round_order`'s balanced order: each runs right
        // after each of the others equally often over a design.
        for k in round_order(5, round) {
            match k {
                0 => {
                    let (one, two) = ceiling_pair(expected.count, iters, |_| {});
                    ceiling.push(one.as_secs_f64() / two.as_secs_f64());
                }
                1 => {
                    let (t, tally) = time_sequential(w, &roots);
                    assert_eq!(tally, expected);
                    seq.push(ms(t));
                }
                2 => {
                    let (t, tally) = time_tree::<MagpiePool<W>, W>(2, w, &roots);
                    assert_eq!(tally, expected);
                    magpie.push(ms(t));
                }
                3 => {
                    let (t, tally) = rayon.join_tree(w, &roots);
                    assert_eq!(tally, expected);
                    join.push(ms(t));
                }
                _ => {
                    let (t, tally) = time_tree::<CbStrongPool<W>, W>(2, w, &roots);
                    assert_eq!(tally, expected);
                    strong.push(ms(t));
                }
            }
        }
    }
    let per_round =
        |peer: &[f64]| -> Vec<f64> { seq.iter().zip(peer).map(|(s, p)| s / p).collect() };
    let (m, j, c) = (per_round(&magpie), per_round(&join), per_round(&strong));
    let over_ceiling =
        |s: &[f64]| -> Vec<f64> { s.iter().zip(&ceiling).map(|(a, c)| a / c).collect() };
    println!(
        "{name}: median ms seq {:.2}, magpie {:.2}, rayon_join {:.2}; speedup (median of rounds) \
         ceiling {:.3}, magpie {:.3}, rayon_join {:.3}; over the ceiling magpie {:.3}, rayon_join {:.3}; \
         magpie/rayon_join time {:.3}; cb_strong: median ms {:.2}, speedup {:.3}, magpie/cb_strong time {:.3}",
        median(seq.clone()),
        median(magpie.clone()),
        median(join.clone()),
        median(ceiling.clone()),
        median(m.clone()),
        median(j.clone()),
        median(over_ceiling(&m)),
        median(over_ceiling(&j)),
        median(magpie.iter().zip(&join).map(|(a, b)| a / b).collect::<Vec<_>>()),
        median(strong.clone()),
        median(c),
        median(magpie.iter().zip(&strong).map(|(a, b)| a / b).collect::<Vec<_>>()),
    );
}

fn main() {
    let rounds = std::env::var("ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16);
    let rounds = balanced_rounds_at_least(5, rounds);
    let cal = calibration();
    let rayon = RayonPeer::new(2);
    let tree = BinaryTree {
        depth: TREE_WORK_DEPTH,
        work_iters: cal.iters_per_task,
    };
    probe("tree_d17_work", &tree, BinaryTree::ROOT, rounds, &rayon);
    let uts = Uts::standard(cal.iters_per_task);
    probe("uts_work", &uts, uts.root(), rounds, &rayon);
}
