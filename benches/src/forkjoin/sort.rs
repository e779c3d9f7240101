//! Quicksort and mergesort of `u32`s over [`ForkJoin`], rayon-demo's shapes.
//!
//! - [`quicksort`]: Hoare partition around the middle element, then
//!   `join` the two sides; slices of at most [`QUICK_CUTOFF`] elements are
//!   sorted by the same function on [`Sequential`].
//! - [`mergesort`]: split in half, `join` the two sorts, then merge with a
//!   parallel merge (split the longer run at its middle, binary-search the
//!   split point in the other, `join` the two halves of the merge). The
//!   halves are sorted into the scratch buffer and merged back, and the
//!   other way round one level down, so nothing is copied back. Below
//!   [`MERGE_CUTOFF`] elements it runs on [`Sequential`]; below
//!   [`INSERTION_CUTOFF`], insertion sort.
//!
//! The input is [`random_input`] (a seeded splitmix stream), and every run
//! is checked by [`check_sorted`]: sorted, and the same [`Fingerprint`] (an
//! order-independent hash of the multiset) as the input.

use super::{ForkJoin, Sequential};
use crate::typed::mix64;

/// The size: 10^7 elements.
pub const SORT_LEN: usize = 10_000_000;
/// Quicksort's sequential cutoff (rayon-demo's: 5 * 1024).
pub const QUICK_CUTOFF: usize = 5 * 1024;
/// Mergesort's (and the parallel merge's) sequential cutoff.
pub const MERGE_CUTOFF: usize = 5 * 1024;
/// Runs this short are insertion-sorted.
pub const INSERTION_CUTOFF: usize = 20;

/// `len` pseudo-random `u32`s from `seed`; the same for every peer.
pub fn random_input(len: usize, seed: u64) -> Vec<u32> {
    (0..len as u64)
        .map(|i| (mix64(seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15)) >> 32) as u32)
        .collect()
}

/// An order-independent summary of a multiset of `u32`s: the count, the
/// wrapping sum, and the wrapping sum of a hash of each value (so that
/// swapping one value for another with the same sum is still caught).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    /// Elements.
    pub len: usize,
    /// Wrapping sum of the values.
    pub sum: u64,
    /// Wrapping sum of `mix64(value)`.
    pub hash_sum: u64,
}

impl Fingerprint {
    /// The fingerprint of `v`.
    pub fn of(v: &[u32]) -> Self {
        let (mut sum, mut hash_sum) = (0u64, 0u64);
        for &x in v {
            sum = sum.wrapping_add(u64::from(x));
            hash_sum = hash_sum.wrapping_add(mix64(u64::from(x)));
        }
        Self {
            len: v.len(),
            sum,
            hash_sum,
        }
    }
}

/// Panics unless `v` is sorted and is a permutation of the input whose
/// fingerprint is `input` (`who` names the run in the message).
pub fn check_sorted(v: &[u32], input: Fingerprint, who: &str) {
    if let Some(i) = v.windows(2).position(|w| w[0] > w[1]) {
        panic!("{who}: not sorted at index {i}: {} > {}", v[i], v[i + 1]);
    }
    assert_eq!(
        Fingerprint::of(v),
        input,
        "{who}: output is not a permutation of the input"
    );
}

/// Sorts `v` by quicksort, forking with `fj.join`.
pub fn quicksort<F: ForkJoin>(fj: &F, v: &mut [u32]) {
    if v.len() <= INSERTION_CUTOFF {
        insertion_sort(v);
        return;
    }
    let mid = partition(v);
    let (lo, hi) = v.split_at_mut(mid);
    if lo.len().max(hi.len()) <= QUICK_CUTOFF {
        quicksort(&Sequential, lo);
        quicksort(&Sequential, hi);
    } else {
        fj.join(|| quicksort(fj, lo), || quicksort(fj, hi));
    }
}

/// Hoare partition around the middle element (`v.len() >= 2`): returns `m`
/// with `0 < m < v.len()`, every element of `v[..m]` `<=` every element of
/// `v[m..]`. Equal keys stop both scans, so runs of duplicates split
/// evenly instead of degrading to quadratic time.
fn partition(v: &mut [u32]) -> usize {
    let pivot = v[(v.len() - 1) / 2];
    let (mut i, mut j) = (0usize, v.len() - 1);
    loop {
        while v[i] < pivot {
            i += 1;
        }
        while v[j] > pivot {
            j -= 1;
        }
        if i >= j {
            return j + 1;
        }
        v.swap(i, j);
        i += 1;
        j -= 1;
    }
}

fn insertion_sort(v: &mut [u32]) {
    for i in 1..v.len() {
        let x = v[i];
        let mut j = i;
        while j > 0 && v[j - 1] > x {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = x;
    }
}

/// Sorts `v` by mergesort, forking with `fj.join`; allocates one scratch
/// buffer of `v.len()` (inside the timed run, as rayon-demo does).
pub fn mergesort<F: ForkJoin>(fj: &F, v: &mut [u32]) {
    let mut buf = vec![0u32; v.len()];
    sort_in_place(fj, v, &mut buf);
}

/// Sorts `v`, using `buf` (same length) as scratch.
fn sort_in_place<F: ForkJoin>(fj: &F, v: &mut [u32], buf: &mut [u32]) {
    if v.len() <= INSERTION_CUTOFF {
        insertion_sort(v);
        return;
    }
    if v.len() <= MERGE_CUTOFF && fj.name() != "seq" {
        return sort_in_place(&Sequential, v, buf);
    }
    let mid = v.len() / 2;
    {
        let (vl, vh) = v.split_at_mut(mid);
        let (bl, bh) = buf.split_at_mut(mid);
        fj.join(|| sort_into(fj, vl, bl), || sort_into(fj, vh, bh));
    }
    let (bl, bh) = buf.split_at(mid);
    merge(fj, bl, bh, v);
}

/// Sorts `v` into `buf` (same length); `v` is left in any order.
fn sort_into<F: ForkJoin>(fj: &F, v: &mut [u32], buf: &mut [u32]) {
    if v.len() <= INSERTION_CUTOFF {
        insertion_sort(v);
        buf.copy_from_slice(v);
        return;
    }
    if v.len() <= MERGE_CUTOFF && fj.name() != "seq" {
        return sort_into(&Sequential, v, buf);
    }
    let mid = v.len() / 2;
    let (vl, vh) = v.split_at_mut(mid);
    {
        let (bl, bh) = buf.split_at_mut(mid);
        fj.join(|| sort_in_place(fj, vl, bl), || sort_in_place(fj, vh, bh));
    }
    merge(fj, vl, vh, buf);
}

/// Merges the sorted runs `a` and `b` into `out` (`a.len() + b.len()`).
fn merge<F: ForkJoin>(fj: &F, a: &[u32], b: &[u32], out: &mut [u32]) {
    debug_assert_eq!(a.len() + b.len(), out.len());
    if out.len() <= MERGE_CUTOFF || fj.name() == "seq" {
        merge_seq(a, b, out);
        return;
    }
    // Split the longer run at its middle and `b` (or `a`) where that value
    // would go; the two halves merge independently.
    let (a_mid, b_mid) = if a.len() >= b.len() {
        let am = a.len() / 2;
        (am, b.partition_point(|&x| x < a[am]))
    } else {
        let bm = b.len() / 2;
        (a.partition_point(|&x| x <= b[bm]), bm)
    };
    let (a_lo, a_hi) = a.split_at(a_mid);
    let (b_lo, b_hi) = b.split_at(b_mid);
    let (o_lo, o_hi) = out.split_at_mut(a_mid + b_mid);
    fj.join(
        || merge(fj, a_lo, b_lo, o_lo),
        || merge(fj, a_hi, b_hi, o_hi),
    );
}

fn merge_seq(a: &[u32], b: &[u32], out: &mut [u32]) {
    let (mut i, mut j) = (0, 0);
    for slot in out.iter_mut() {
        // Take from `a` on ties: stable, though it does not matter for u32s.
        if j >= b.len() || (i < a.len() && a[i] <= b[j]) {
            *slot = a[i];
            i += 1;
        } else {
            *slot = b[j];
            j += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forkjoin::{MagpieJoin, RayonJoin};

    #[test]
    fn quicksort_sorts_a_permutation_of_the_input_on_every_implementation() {
        let rayon = RayonJoin::new(2);
        let magpie = MagpieJoin::new(2);
        for len in [0, 1, 2, 19, 20, 21, 5_000, 200_000] {
            let input = random_input(len, 42);
            let fp = Fingerprint::of(&input);
            let mut a = input.clone();
            quicksort(&Sequential, &mut a);
            check_sorted(&a, fp, "seq");
            let mut b = input.clone();
            rayon.install(|| quicksort(&rayon, &mut b));
            check_sorted(&b, fp, "rayon");
            let mut c = input.clone();
            magpie.install(|| quicksort(&magpie, &mut c));
            check_sorted(&c, fp, "magpie");
            assert_eq!(b, c);
            let mut want = input;
            want.sort_unstable();
            assert_eq!(a, want);
            assert_eq!(b, want);
        }
    }

    #[test]
    fn mergesort_sorts_a_permutation_of_the_input_on_every_implementation() {
        let rayon = RayonJoin::new(2);
        let magpie = MagpieJoin::new(2);
        for len in [0, 1, 2, 19, 20, 21, 5_121, 200_000] {
            let input = random_input(len, 7);
            let fp = Fingerprint::of(&input);
            let mut a = input.clone();
            mergesort(&Sequential, &mut a);
            check_sorted(&a, fp, "seq");
            let mut b = input.clone();
            rayon.install(|| mergesort(&rayon, &mut b));
            check_sorted(&b, fp, "rayon");
            let mut c = input.clone();
            magpie.install(|| mergesort(&magpie, &mut c));
            check_sorted(&c, fp, "magpie");
            assert_eq!(b, c);
            let mut want = input;
            want.sort_unstable();
            assert_eq!(a, want);
            assert_eq!(b, want);
        }
    }

    #[test]
    fn sorts_handle_many_duplicates() {
        let rayon = RayonJoin::new(2);
        let input: Vec<u32> = random_input(60_000, 3).iter().map(|x| x % 4).collect();
        let fp = Fingerprint::of(&input);
        let mut m = input.clone();
        rayon.install(|| mergesort(&rayon, &mut m));
        check_sorted(&m, fp, "mergesort");
        let mut q = input;
        rayon.install(|| quicksort(&rayon, &mut q));
        check_sorted(&q, fp, "quicksort");
    }

    #[test]
    #[should_panic(expected = "not a permutation")]
    fn check_sorted_catches_a_lost_element() {
        let input = random_input(100, 1);
        let fp = Fingerprint::of(&input);
        let mut v = input;
        v.sort_unstable();
        v[50] = v[49];
        check_sorted(&v, fp, "test");
    }

    #[test]
    #[should_panic(expected = "not sorted")]
    fn check_sorted_catches_disorder() {
        let v = [1, 3, 2];
        check_sorted(&v, Fingerprint::of(&v), "test");
    }
}
