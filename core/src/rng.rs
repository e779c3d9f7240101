//! `XorShift64`: a small, fast generator for victim selection.
//!
//! Marsaglia's xorshift with the shift triple (13, 7, 17). It is not
//! cryptographic and not even statistically strong; it is deterministic for a
//! seed (the simulator replays on that), costs three shifts and three xors,
//! and never gets stuck: from a nonzero state it never reaches zero.

/// Replaces a zero seed, from which xorshift would only ever produce zero.
/// 2^64 divided by the golden ratio: odd, with bits spread across the word.
const ZERO_SEED_REPLACEMENT: u64 = 0x9E37_79B9_7F4A_7C15;

/// A xorshift64 generator. Cloning it forks the sequence.
#[derive(Clone, Debug)]
pub struct XorShift64 {
    state: u64,
}

impl XorShift64 {
    /// A generator seeded with `seed`. Seed 0 is remapped to a fixed nonzero
    /// constant.
    pub fn new(seed: u64) -> Self {
        let state = if seed == 0 {
            ZERO_SEED_REPLACEMENT
        } else {
            seed
        };
        Self { state }
    }

    /// The next 64 random bits (never 0).
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        x
    }

    /// A number in `0..bound`, by multiply-shift: the high half of the 128-bit
    /// product `next_u64() * bound`. No division, and it uses the high bits,
    /// which are the better ones. The bias is at most `bound / 2^64`.
    ///
    /// # Panics
    /// If `bound` is 0.
    #[inline]
    pub fn next_usize(&mut self, bound: usize) -> usize {
        assert!(bound > 0, "XorShift64::next_usize: bound must be > 0");
        ((u128::from(self.next_u64()) * bound as u128) >> 64) as usize
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::XorShift64;

    const SAMPLES: usize = if cfg!(miri) { 4_000 } else { 200_000 };

    #[test]
    fn same_seed_gives_the_same_sequence() {
        let (mut a, mut b) = (XorShift64::new(7), XorShift64::new(7));
        let mut c = XorShift64::new(8);
        let xs: Vec<u64> = (0..64).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..64).map(|_| b.next_u64()).collect();
        let zs: Vec<u64> = (0..64).map(|_| c.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
    }

    #[test]
    fn zero_seed_does_not_stick_at_zero() {
        let mut r = XorShift64::new(0);
        let xs: Vec<u64> = (0..1000).map(|_| r.next_u64()).collect();
        assert!(xs.iter().all(|&x| x != 0));
        let mut sorted = xs.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), xs.len(), "no repeats in a short run");
    }

    #[test]
    fn next_usize_stays_below_the_bound() {
        let mut r = XorShift64::new(42);
        for bound in [1, 2, 3, 7, 64, 65, 1000, usize::MAX / 3, usize::MAX] {
            for _ in 0..SAMPLES / 100 {
                assert!(r.next_usize(bound) < bound);
            }
        }
        assert!((0..100).all(|_| r.next_usize(1) == 0));
    }

    /// Each of `k` buckets gets within five standard deviations of its
    /// expected count (binomial: `sqrt(n p (1 - p))`); a generator that
    /// skewed any bucket by even a few percent would fail at this size.
    #[test]
    fn next_usize_is_roughly_uniform() {
        for (seed, k) in [(1, 2), (2, 7), (3, 10)] {
            let mut r = XorShift64::new(seed);
            let mut counts = vec![0usize; k];
            for _ in 0..SAMPLES {
                counts[r.next_usize(k)] += 1;
            }
            let p = 1.0 / k as f64;
            let expected = SAMPLES as f64 * p;
            let sd = (SAMPLES as f64 * p * (1.0 - p)).sqrt();
            for (bucket, &c) in counts.iter().enumerate() {
                assert!(
                    (c as f64 - expected).abs() <= 5.0 * sd,
                    "bucket {bucket} of {k}: {c} draws, expected {expected:.0} +- {:.0}",
                    5.0 * sd
                );
            }
        }
    }

    #[test]
    #[should_panic(expected = "bound must be > 0")]
    fn zero_bound_is_rejected() {
        XorShift64::new(1).next_usize(0);
    }
}
