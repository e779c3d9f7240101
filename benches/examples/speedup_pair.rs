//! The two work-bearing trees of the typed bench with only three peers in
//! the alternation: the sequential loop, magpie and `rayon::join`. A probe
//! for the speedup target (docs/benchmarks.md): whether the gap between
//! magpie and `rayon::join` seen in the full bench, where five other peers
//! share the rounds, is still there when nothing else runs in between.
//!
//! `cargo run --release -p magpie-benches --example speedup_pair`
//! (env `ROUNDS`, default 15; `RAYON_FIRST=1` runs `rayon::join` before
//! magpie in each round instead of after it).

use std::time::Duration;

use magpie_benches::report::median_of;
use magpie_benches::typed::{
    time_sequential, time_tree, BinaryTree, MagpiePool, RayonPeer, Uts, Workload, TREE_WORK_DEPTH,
};
use magpie_benches::work::calibration;

/// The median of a run's samples (`report::median_of` on an owned copy).
fn median(mut v: Vec<f64>) -> f64 {
    median_of(&mut v).expect("at least one round")
}

fn probe<W: Workload>(name: &str, w: &W, root: W::Task, rounds: usize, rayon: &RayonPeer) {
    let rayon_first = std::env::var_os("RAYON_FIRST").is_some();
    let roots = [root];
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (_, expected) = time_sequential(w, &roots);
    let (mut seq, mut magpie, mut join) = (vec![], vec![], vec![]);
    for _ in 0..rounds {
        let (t, tally) = time_sequential(w, &roots);
        assert_eq!(tally, expected);
        seq.push(ms(t));
        let mut run_magpie = || {
            let (t, tally) = time_tree::<MagpiePool<W>, W>(2, w, &roots);
            assert_eq!(tally, expected);
            magpie.push(ms(t));
        };
        let mut run_join = || {
            let (t, tally) = rayon.join_tree(w, &roots);
            assert_eq!(tally, expected);
            join.push(ms(t));
        };
        if rayon_first {
            run_join();
            run_magpie();
        } else {
            run_magpie();
            run_join();
        }
    }
    let per_round =
        |peer: &[f64]| -> Vec<f64> { seq.iter().zip(peer).map(|(s, p)| s / p).collect() };
    let (m, j) = (per_round(&magpie), per_round(&join));
    println!(
        "{name}: median ms seq {:.2}, magpie {:.2}, rayon_join {:.2}; speedup (median of rounds) magpie {:.3}, rayon_join {:.3}; magpie/rayon_join time {:.3}",
        median(seq.clone()),
        median(magpie.clone()),
        median(join.clone()),
        median(m),
        median(j),
        median(magpie.iter().zip(&join).map(|(a, b)| a / b).collect::<Vec<_>>()),
    );
}

fn main() {
    let rounds = std::env::var("ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(15);
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
