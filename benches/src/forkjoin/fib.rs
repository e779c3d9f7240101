//! fib(n) by the naive recursion, with a sequential cutoff: rayon-demo's
//! `fibonacci` shape. `fib(36)` with cutoff 8 is overhead-bound (one `join`
//! per node above the cutoff, 1.6 M of them, each leaf ~100 ns); with
//! cutoff 20 it is work-bearing (a few thousand joins, leaves of ~10 µs).
//!
//! Two faces of the same computation:
//! - [`fib_join`]: `join(fib(n-1), fib(n-2))` over any [`ForkJoin`];
//! - [`FibTree`]: a typed spawn tree (seed 000's `Workload`), so the typed
//!   executors (magpie's, `cb_strong`, `cb_seed000`) run it too: a node above
//!   the cutoff spawns its two children, a leaf records its value, and the
//!   checksum's wrapping sum of leaf values is fib(n).

use std::hint::black_box;

use super::ForkJoin;
use crate::tally::Tally;
use crate::typed::{SpawnCtx, Workload};

/// The n the issue asks for.
pub const FIB_N: u32 = 36;
/// The overhead-bound cutoff.
pub const CUTOFF_FINE: u32 = 8;
/// The work-bearing cutoff.
pub const CUTOFF_COARSE: u32 = 20;

/// fib by the naive recursion on one thread (fib(0) = 0, fib(1) = 1).
#[inline(never)]
pub fn fib_seq(n: u32) -> u64 {
    if n < 2 {
        u64::from(n)
    } else {
        fib_seq(n - 1) + fib_seq(n - 2)
    }
}

/// fib by iteration: the value every run is checked against.
pub fn fib_closed(n: u32) -> u64 {
    let (mut a, mut b) = (0u64, 1u64);
    for _ in 0..n {
        (a, b) = (b, a + b);
    }
    a
}

/// fib(n), forking with `fj.join` above `cutoff` and running [`fib_seq`] at
/// and below it.
pub fn fib_join<F: ForkJoin>(fj: &F, n: u32, cutoff: u32) -> u64 {
    if n <= cutoff.max(1) {
        return fib_seq(black_box(n));
    }
    let (a, b) = fj.join(
        || fib_join(fj, n - 1, cutoff),
        || fib_join(fj, n - 2, cutoff),
    );
    a + b
}

/// Joins [`fib_join`] makes for `(n, cutoff)`: the internal nodes of its
/// call tree.
pub fn joins(n: u32, cutoff: u32) -> u64 {
    if n <= cutoff.max(1) {
        0
    } else {
        1 + joins(n - 1, cutoff) + joins(n - 2, cutoff)
    }
}

/// fib as a typed spawn tree: the task is `n`; see the module docs.
#[derive(Clone, Copy, Debug)]
pub struct FibTree {
    /// Nodes at or below this run [`fib_seq`] and record its value.
    pub cutoff: u32,
}

impl FibTree {
    /// The checksum of a correct run from root `n`: one record per leaf,
    /// their sum fib(n).
    pub fn expected(&self, n: u32) -> Tally {
        let leaves = joins(n, self.cutoff) + 1;
        Tally {
            count: leaves,
            sum: fib_closed(n),
        }
    }
}

impl Workload for FibTree {
    type Task = u32;

    #[inline]
    fn run<C: SpawnCtx<u32>>(&self, n: u32, ctx: &mut C) {
        if n <= self.cutoff.max(1) {
            ctx.record(fib_seq(black_box(n)));
        } else {
            ctx.spawn_local(n - 1);
            ctx.spawn_local(n - 2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forkjoin::{MagpieJoin, RayonJoin, Sequential};
    use crate::typed::{run_sequential, time_tree, CbStrongPool, MagpiePool};

    #[test]
    fn fib_join_equals_the_closed_form_on_every_implementation() {
        let rayon = RayonJoin::new(2);
        let magpie = MagpieJoin::new(2);
        for (n, cutoff) in [(0, 8), (1, 0), (2, 0), (20, 0), (24, 8), (24, 20), (24, 30)] {
            let want = fib_closed(n);
            assert_eq!(fib_join(&Sequential, n, cutoff), want, "seq {n}/{cutoff}");
            assert_eq!(
                rayon.install(|| fib_join(&rayon, n, cutoff)),
                want,
                "rayon {n}/{cutoff}"
            );
            assert_eq!(
                magpie.install(|| fib_join(&magpie, n, cutoff)),
                want,
                "magpie {n}/{cutoff}"
            );
        }
        assert_eq!(fib_closed(FIB_N), 14_930_352);
    }

    #[test]
    fn joins_counts_the_internal_nodes() {
        assert_eq!(joins(1, 0), 0);
        assert_eq!(joins(2, 0), 1);
        // fib(4) tree with cutoff 1: 4 -> (3 -> (2 -> 1, 0), 1), 2 -> (1, 0).
        assert_eq!(joins(4, 1), 4);
        assert_eq!(joins(10, 10), 0);
    }

    #[test]
    fn fib_tree_checksum_is_leaf_count_and_fib_on_typed_pools() {
        let w = FibTree { cutoff: 8 };
        let want = w.expected(22);
        assert_eq!(run_sequential(&w, &[22]), want);
        assert_eq!(time_tree::<CbStrongPool<FibTree>, _>(2, &w, &[22]).1, want);
        assert_eq!(time_tree::<MagpiePool<FibTree>, _>(2, &w, &[22]).1, want);
    }
}
